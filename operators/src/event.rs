//! The event contract: one JSON object per line.
//!
//! ```json
//! {"item_id": "video-8841", "ts": 1713462150123, "dims": {"country": "US"}}
//! ```
//!
//! - `item_id`: a non-empty JSON string of valid Unicode, at most 256 bytes of UTF-8, without
//!   U+0000 (a deliberate tightening of the original contract, see docs/architecture.md: PostgreSQL text cannot store it, and one such
//!   id would otherwise make every commit of the epoch fail);
//! - `ts`: an integer of milliseconds since the epoch (may be negative), or an RFC 3339 string
//!   with an offset (fraction digits beyond milliseconds truncated); a digit string, a float,
//!   a boolean or null is bad; so is a time outside years 0000–9999 in UTC
//!   ([`Millis::MIN_EVENT`]`..=`[`Millis::MAX_EVENT`], see [`check_event_time`]);
//! - `dims`: absent, null, or an object of string values;
//! - unknown fields are ignored (but must still be valid JSON).
//!
//! Anything else is a bad record, described by a [`BadRecord`] whose `Display` becomes the
//! dead-letter detail. Parsing never panics and never allocates for ids without escapes.

use crate::time::Millis;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::fmt;

/// Longest allowed `item_id`, in bytes of UTF-8.
pub const MAX_ITEM_ID_BYTES: usize = 256;

/// A valid event, borrowing from the line where it can.
#[derive(Debug, PartialEq, Eq)]
pub struct ParsedEvent<'a> {
    /// The item id.
    pub item_id: Cow<'a, str>,
    /// Event time.
    pub ts: Millis,
    /// The user (for `distinct_users` windows), when the format locates one and the record
    /// holds it.
    pub user: Option<Cow<'a, str>>,
    /// The values of the format's dims, in [`Format::dims`](crate::format::Format) order (`""`
    /// where the record has none).
    pub dims: SmallVec<[Cow<'a, str>; 2]>,
}

/// Why a line is not a valid event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRecord {
    /// Empty or whitespace-only line.
    #[error("empty line")]
    Empty,
    /// The bytes are not UTF-8.
    #[error("not valid UTF-8 (at byte {0})")]
    NotUtf8(usize),
    /// Valid JSON perhaps, but not an object.
    #[error("not a JSON object")]
    NotObject,
    /// `item_id` is `""`.
    #[error("item_id is empty")]
    EmptyItemId,
    /// `item_id` is longer than [`MAX_ITEM_ID_BYTES`].
    #[error("item_id is {0} bytes long (at most 256)")]
    ItemIdTooLong(usize),
    /// `item_id` contains U+0000, which SQL text columns (PostgreSQL) cannot store.
    #[error("item_id contains U+0000 (NUL)")]
    NulInItemId,
    /// `ts` is outside years 0000–9999 (UTC); holds the value as written (digits, or the quoted
    /// string).
    #[error("ts {0} is outside years 0000-9999")]
    TsOutOfRange(String),
    /// A dim value longer than `source.format.max_dim_bytes`.
    #[error("dims.{dim} is {len} bytes long (at most {max}, source.format.max_dim_bytes)")]
    DimTooLong {
        /// The dim.
        dim: String,
        /// Its value's length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A window's group key (percent-encoded) longer than `source.format.max_group_key_bytes`.
    #[error(
        "group key of window {window:?} would be {len} bytes (at most {max}, source.format.max_group_key_bytes); its longest dim is {dim}"
    )]
    GroupKeyTooLong {
        /// The window.
        window: String,
        /// The key's length in bytes.
        len: usize,
        /// The bound.
        max: usize,
        /// The dim whose encoded value is longest.
        dim: String,
    },
    /// Any other violation: malformed JSON, missing or mistyped fields, trailing garbage.
    #[error("{0}")]
    Invalid(String),
}

/// Parses one line (without its line terminator) into an event.
pub fn parse_event(line: &[u8]) -> Result<ParsedEvent<'_>, BadRecord> {
    if let Some(parsed) = parse_plain(line) {
        return parsed;
    }
    parse_json(utf8(line)?)
}

/// `line` as text, or where it stops being UTF-8. An ASCII line (most) is known by one pass
/// of 16-byte loads (`swar::is_ascii`; `simdutf8` was 6 % of a Nexmark Q5 run, this pass
/// about 2 %); any other is checked by `simdutf8`, and only on an error by the standard
/// library, whose offset the dead letter names.
#[inline]
pub(crate) fn utf8(line: &[u8]) -> Result<&str, BadRecord> {
    if crate::swar::is_ascii(line) {
        // SAFETY: ASCII is UTF-8
        return Ok(unsafe { std::str::from_utf8_unchecked(line) });
    }
    match simdutf8::basic::from_utf8(line) {
        Ok(text) => Ok(text),
        Err(_) => Err(BadRecord::NotUtf8(
            std::str::from_utf8(line).err().map_or(0, |e| e.valid_up_to()),
        )),
    }
}

/// The producers' usual line, `{"item_id":"ID","ts":MILLIS}` byte for byte (no spaces; an id
/// without escapes, quotes or control characters; an integer without leading zeros, not `-0`,
/// at most 18 digits), optionally with `dims` and `user` members after `ts` (see
/// [`PlainLine`]), parsed without a JSON parser: its result, or `None` for any other line
/// (then [`parse_json`] decides). The result is [`parse_json`]'s (property-tested).
#[inline]
fn parse_plain(bytes: &[u8]) -> Option<Result<ParsedEvent<'_>, BadRecord>> {
    let line = PlainLine::split(bytes)?;
    // (no byte of the id is below 0x20, so it holds no NUL: only the size rules are left)
    Some(
        check_item_id_size(line.item_id).and_then(|()| match TsField::of(Millis(line.ts), || line.ts.to_string()) {
            TsField::Event(ts) => Ok(ParsedEvent {
                item_id: Cow::Borrowed(line.item_id),
                ts,
                user: None,
                dims: SmallVec::new(),
            }),
            TsField::OutOfRange(written) => Err(BadRecord::TsOutOfRange(written)),
        }),
    )
}

/// A line of the producers' usual shape, split without a JSON parser:
/// `{"item_id":"ID","ts":INT}` byte for byte, optionally followed by `,"dims":{"K":"V",…}`
/// and/or `,"user":"U"` (each at most once, either order) before the closing brace. No spaces;
/// the id without escapes, quotes or control characters; the integer without leading zeros,
/// not `-0`, at most 18 digits; every dims key and value and the user ASCII without escapes or
/// bytes below 0x20. Such a line is valid JSON, and every JSON reader reads these members as written:
/// the contract's parse and the field mapping's use it as their fast path (anything else is
/// left to their general parsers).
///
/// Each byte is looked at once: the id is found sixteen bytes a step, in the same pass that
/// tells whether it is ASCII, and is the only part checked as UTF-8 when it is not (the rest
/// must be the ASCII of the shape; a line whose id is not UTF-8 is left to the general parser,
/// which reports where), the digits are found eight at a time and summed eight at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlainLine<'a> {
    /// The id, UTF-8 (not yet checked for size).
    pub item_id: &'a str,
    /// The integer after `ts`, as written (not yet checked for range or converted).
    pub ts: i64,
    /// The user, when the line has one.
    pub user: Option<&'a str>,
}

impl<'a> PlainLine<'a> {
    /// `bytes` split, or `None` when it is not of the shape.
    #[inline]
    pub(crate) fn split(bytes: &'a [u8]) -> Option<PlainLine<'a>> {
        Self::split_visiting(bytes, |_, _| true)
    }

    /// [`PlainLine::split`], handing each of the dims' members to `member` as (key, value) in
    /// line order as the split finds them; `None` also when `member` refuses one (`false`).
    /// (Kept in an array and read back through an iterator, the members were copied twice
    /// through the stack: store-forwarding stalls on the hottest instructions of a `by`
    /// job's source, `perf`.)
    #[inline(always)]
    pub(crate) fn split_visiting(
        bytes: &'a [u8],
        member: impl FnMut(&'a str, &'a str) -> bool,
    ) -> Option<PlainLine<'a>> {
        const HEAD: &[u8] = b"{\"item_id\":\"";
        const MID: &[u8] = b"\",\"ts\":";
        bytes.strip_prefix(HEAD)?;
        // (the id's run found stopping at a byte that is not ASCII too: most ids are ASCII, and
        // one that ends at its quote then needs no second pass to tell)
        let mut end = crate::swar::ascii_string_stop(bytes, HEAD.len())?;
        let ascii = bytes[end] < 0x80;
        if !ascii {
            end = crate::swar::string_stop(bytes, end)?;
        }
        if bytes[end] != b'"' {
            return None;
        }
        let number = bytes[end..].strip_prefix(MID)?;
        let (negative, number) = match number.strip_prefix(b"-") {
            Some(d) => (true, d),
            None => (false, number),
        };
        let (digits, tail) = number.split_at(crate::swar::digits_end(number, 0));
        let user = if tail == b"}" {
            None
        } else {
            plain_members(tail, member)?
        };
        // (JSON has no leading zeros; `-0` is a float to the JSON parser)
        let leading_zero = digits.first() == Some(&b'0') && (digits.len() > 1 || negative);
        if digits.is_empty() || digits.len() > 18 || leading_zero {
            return None;
        }
        // (at most 18 digits: below 10^18, no overflow of an i64)
        let magnitude = crate::swar::digits_value(digits) as i64;
        let id = &bytes[HEAD.len()..end];
        let item_id = if ascii {
            // SAFETY: ASCII is UTF-8.
            unsafe { std::str::from_utf8_unchecked(id) }
        } else {
            std::str::from_utf8(id).ok()?
        };
        Some(PlainLine {
            item_id,
            ts: if negative { -magnitude } else { magnitude },
            user,
        })
    }
}

/// What follows an event's `ts` number: `,"dims":{"K":"V",…}` and/or `,"user":"U"` (each at
/// most once, either order) and then the object's end, byte for byte (see [`PlainLine`]),
/// each dims member handed to `member`; the user, or `None` (not of the shape, or a member
/// refused).
#[inline]
fn plain_members<'a>(mut tail: &'a [u8], mut member: impl FnMut(&'a str, &'a str) -> bool) -> Option<Option<&'a str>> {
    let (mut dims, mut user) = (false, None);
    loop {
        if tail == b"}" {
            return Some(user);
        }
        if let Some(rest) = tail.strip_prefix(b",\"dims\":{").filter(|_| !dims) {
            dims = true;
            tail = plain_object(rest, &mut member)?;
        } else if let Some(rest) = tail.strip_prefix(b",\"user\":\"").filter(|_| user.is_none()) {
            let after = plain_string(rest)?;
            // SAFETY: `plain_string` checked it as ASCII.
            user = Some(unsafe { std::str::from_utf8_unchecked(&rest[..rest.len() - after.len() - 1]) });
            tail = after;
        } else {
            return None;
        }
    }
}

/// After an object's `{`: `"K":"V"` pairs of [`plain_string`]s, comma-separated, each handed
/// to `member`, and the `}`; what follows it, or `None`.
#[inline]
fn plain_object<'a>(mut rest: &'a [u8], member: &mut impl FnMut(&'a str, &'a str) -> bool) -> Option<&'a [u8]> {
    if let Some(after) = rest.strip_prefix(b"}") {
        return Some(after);
    }
    loop {
        let key = rest.strip_prefix(b"\"")?;
        rest = plain_string(key)?;
        let value = rest.strip_prefix(b":\"")?;
        rest = plain_string(value)?;
        // (each string ends at its closing quote, the byte before `rest`)
        // SAFETY: `plain_string` checked both as ASCII.
        let (k, v) = unsafe {
            (
                std::str::from_utf8_unchecked(&key[..key.len() - value.len() - 3]),
                std::str::from_utf8_unchecked(&value[..value.len() - rest.len() - 1]),
            )
        };
        if !member(k, v) {
            return None;
        }
        match rest.split_first()? {
            (b',', after) => rest = after,
            (b'}', after) => return Some(after),
            _ => return None,
        }
    }
}

/// After a string's opening quote: ASCII up to the closing quote, without escapes or bytes
/// below 0x20 (found sixteen bytes a step, in the same pass); what follows the quote, or
/// `None`.
#[inline]
fn plain_string(rest: &[u8]) -> Option<&[u8]> {
    let end = crate::swar::ascii_string_stop(rest, 0)?;
    (rest[end] == b'"').then(|| &rest[end + 1..])
}

/// Parses a UTF-8 line with the JSON parser.
fn parse_json(text: &str) -> Result<ParsedEvent<'_>, BadRecord> {
    match text.bytes().find(|b| !b.is_ascii_whitespace()) {
        None => return Err(BadRecord::Empty),
        Some(b'{') => {}
        Some(_) => return Err(BadRecord::NotObject),
    }
    let wire: Wire<'_> = serde_json::from_str(text).map_err(|e| BadRecord::Invalid(e.to_string()))?;
    let item_id = wire.item_id.0;
    check_item_id(&item_id)?;
    match wire.ts {
        TsField::Event(ts) => Ok(ParsedEvent {
            item_id,
            ts,
            user: None,
            dims: SmallVec::new(),
        }),
        TsField::OutOfRange(written) => Err(BadRecord::TsOutOfRange(written)),
    }
}

/// The `item_id` rules of the contract (also applied to ids read back from snapshots).
pub fn check_item_id(item_id: &str) -> Result<(), BadRecord> {
    check_item_id_size(item_id)?;
    if item_id.contains('\0') {
        return Err(BadRecord::NulInItemId);
    }
    Ok(())
}

/// The size rules of `check_item_id` (not empty, at most `MAX_ITEM_ID_BYTES`), for an id
/// known to hold no NUL.
#[inline]
pub(crate) fn check_item_id_size(item_id: &str) -> Result<(), BadRecord> {
    if item_id.is_empty() {
        return Err(BadRecord::EmptyItemId);
    }
    if item_id.len() > MAX_ITEM_ID_BYTES {
        return Err(BadRecord::ItemIdTooLong(item_id.len()));
    }
    Ok(())
}

/// The `ts` range rule of the contract, for times that did not come through [`parse_event`]
/// (generated events, events reaching a counter): `ts` itself, or the bad record it is.
#[inline]
pub fn check_event_time(ts: Millis) -> Result<Millis, BadRecord> {
    if ts.is_event_time() {
        Ok(ts)
    } else {
        Err(out_of_range(ts))
    }
}

/// The bad record of a time outside years 0000-9999 (out of line: in line, the check is a
/// compare; out of line with it, a call per counted event, 24 instructions).
#[cold]
#[inline(never)]
fn out_of_range(ts: Millis) -> BadRecord {
    BadRecord::TsOutOfRange(ts.0.to_string())
}

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow)]
    item_id: ItemIdField<'a>,
    ts: TsField,
    #[serde(default)]
    #[allow(dead_code)] // validated, not yet used: per-dimension lists are future work
    dims: Option<DimsField>,
}

struct ItemIdField<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for ItemIdField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ItemIdField<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("item_id as a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(ItemIdField(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ItemIdField(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A well-formed `ts`: an event time, or a time outside the event range (a bad record that
/// is reported after the whole line parsed, with a precise detail).
enum TsField {
    Event(Millis),
    OutOfRange(String),
}

impl TsField {
    #[inline]
    fn of(ts: Millis, written: impl FnOnce() -> String) -> TsField {
        if ts.is_event_time() {
            TsField::Event(ts)
        } else {
            TsField::OutOfRange(written())
        }
    }
}

impl<'de> Deserialize<'de> for TsField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TsField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("ts as integer milliseconds or an RFC 3339 string with an offset")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TsField, E> {
                Ok(TsField::of(Millis(v), || v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TsField, E> {
                Ok(match i64::try_from(v) {
                    Ok(ms) => TsField::of(Millis(ms), || v.to_string()),
                    Err(_) => TsField::OutOfRange(v.to_string()),
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TsField, E> {
                Millis::parse_rfc3339(v)
                    .map(|ts| TsField::of(ts, || format!("{v:?}")))
                    .ok_or_else(|| E::custom(format!("ts: {v:?} is not an RFC 3339 time with an offset")))
            }
        }
        d.deserialize_any(V)
    }
}

struct DimsField;

impl<'de> Deserialize<'de> for DimsField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DimsField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("dims as an object of string values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DimsField, A::Error> {
                while map.next_key::<IgnoredAny>()?.is_some() {
                    map.next_value::<StrOnly>()?;
                }
                Ok(DimsField)
            }
        }
        d.deserialize_map(V)
    }
}

struct StrOnly;

impl<'de> Deserialize<'de> for StrOnly {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StrOnly;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string dims value")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<StrOnly, E> {
                Ok(StrOnly)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) use tests::spoil;

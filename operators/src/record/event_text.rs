//! An event's text fields in one string: its item id and, in jobs with per-group or
//! distinct-user windows, its user and dim values.
//!
//! Events used to carry the user and dims in a box of their own: an allocation per event on
//! the worker that read it, freed on the worker that counted it. Those cross-thread frees
//! were most of what a second worker cost a per-group job (+527 of +664 profile samples,
//! docs/benchmarks.md). Packed behind the item in one [`CompactString`], a typical event's
//! fields (a short id, a user, a country) fit its 24 inline bytes: no allocation, nothing to
//! free elsewhere, and the event is 64 bytes, one cache line.
//!
//! Layout (all of it valid UTF-8, so the string stays a `str`):
//! - an event without a user or dims whose id does not start with NUL: the id itself;
//! - otherwise `NUL`, the length of the fields, the fields, then the id. The fields are a
//!   header (`2 × dims + has_user`), the user if any, then each dim value, each value after
//!   its length. Lengths are ASCII varints: six bits a byte, `0x40` marks a byte that is not
//!   the last.
//!
//! - in a job whose windows all count events per one dim (`by = ["country"]`, say), an event
//!   without a user whose dim value needs no escape: `0x01`, then the very key its windows
//!   count it under, `name=value NUL id` (see `counter::shapes`). The source writes it once;
//!   the counter looks it up as it is, instead of decoding the second form and writing the key
//!   anew per event (by `country`: 0.89× the time, `farm-bench`, docs/benchmarks.md).
//!
//! The id comes last so that reading it skips one varint; ids hold no NUL by the event
//! contract, and one that starts with NUL or `0x01` anyway (a UDF's, say) takes the second
//! form, so the first byte always tells which form a string is.

use compact_str::CompactString;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// An event's item id, user and dim values (see the module docs for the layout).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct EventText(CompactString);

/// A varint's bit that says more bytes follow.
const MORE: u8 = 0x40;

/// The first byte of the second form (fields, then the id).
const FIELDS: u8 = 0;

/// The first byte of the third form (a counter key).
const KEYED: u8 = 1;

/// Whether a string's first byte says it is not the id itself.
#[inline(always)]
fn is_tagged(first: Option<&u8>) -> bool {
    matches!(first, Some(&(FIELDS | KEYED)))
}

impl EventText {
    /// The text of an event with an item id only.
    #[inline(always)]
    pub fn item(item: &str) -> EventText {
        match is_tagged(item.as_bytes().first()) {
            true => EventText::new(item, None, &[] as &[&str]),
            false => EventText(CompactString::from(item)),
        }
    }

    /// The text of an event with an item id, maybe a user, and the values of the job's dims
    /// (`""` where the record has none).
    pub fn new<D: AsRef<str>>(item: &str, user: Option<&str>, dims: &[D]) -> EventText {
        if user.is_none() && dims.is_empty() && !is_tagged(item.as_bytes().first()) {
            return EventText(CompactString::from(item));
        }
        let header = 2 * dims.len() + usize::from(user.is_some());
        let mut fields = varint_len(header);
        if let Some(u) = user {
            fields += varint_len(u.len()) + u.len();
        }
        for d in dims {
            fields += varint_len(d.as_ref().len()) + d.as_ref().len();
        }
        let total = 1 + varint_len(fields) + fields + item.len();
        // SAFETY: `total` counts the writes below one by one: `str`s end to end with ASCII
        // bytes (NUL and varints < 0x80) between them
        unsafe {
            EventText::filled(total, |out| {
                out.byte(FIELDS);
                out.varint(fields);
                out.varint(header);
                if let Some(u) = user {
                    out.varint(u.len());
                    out.bytes(u.as_bytes());
                }
                for d in dims {
                    out.varint(d.as_ref().len());
                    out.bytes(d.as_ref().as_bytes());
                }
                out.bytes(item.as_bytes());
            })
        }
    }

    /// A text of `total` bytes that `write` writes straight into the string's buffer (inline
    /// for a typical event), each value as a few word moves (`short_copy`): building it on the
    /// stack and copying it in was a call to `memcpy` per value and one for the whole (7 % of a
    /// per-group job's time, `perf`). Safety: as [`EventText::fill`].
    #[inline(always)]
    unsafe fn filled(total: usize, write: impl FnOnce(&mut Fill)) -> EventText {
        let mut text = EventText::EMPTY;
        // SAFETY: the caller's
        unsafe { text.fill(total, write) };
        text
    }

    /// Makes `self` a text of `total` bytes that `write` writes, where `self` lies. Safety:
    /// `write` writes exactly `total` bytes, and they are UTF-8 (checked in debug builds: the
    /// count).
    #[inline(always)]
    unsafe fn fill(&mut self, total: usize, write: impl FnOnce(&mut Fill)) {
        self.0 = CompactString::with_capacity(total);
        // SAFETY: `spare_capacity_mut` is at least `total` bytes (the capacity asked for), and
        // `write` writes exactly `total` of them, UTF-8, before `set_len` (the caller's)
        unsafe {
            let spare = self.0.spare_capacity_mut();
            assert!(spare.len() >= total, "a string of the capacity asked for");
            let mut out = Fill {
                at: spare.as_mut_ptr().cast::<u8>(),
                written: 0,
            };
            write(&mut out);
            debug_assert_eq!(out.written, total, "the length as computed");
            self.0.set_len(total);
        }
    }

    /// The empty text (a placeholder: an event's text is never empty).
    pub const EMPTY: EventText = EventText(CompactString::const_new(""));

    /// The text of an event without a user in a job whose windows all count events per one
    /// dim, as the key they count it under (see [`KeyedText`]); `None` when the value needs an
    /// escape in a group key (the second form then).
    #[inline(always)]
    pub fn keyed(prefix: &str, value: &str, item: &str) -> Option<EventText> {
        let keyed = KeyedText::new(prefix, value, item)?;
        let mut text = EventText::EMPTY;
        keyed.write_over(&mut text);
        Some(text)
    }

    /// The key a text of the third form is counted under (`name=value NUL id`; `None`: another
    /// form).
    #[inline(always)]
    pub fn counter_key(&self) -> Option<&str> {
        let s = self.0.as_str();
        // (the tag is one ASCII byte: the rest is a `str`)
        (s.as_bytes().first() == Some(&KEYED)).then(|| &s[1..])
    }

    /// The dim value and the id of a text of the third form.
    #[inline]
    fn keyed_parts(key: &str) -> (&str, &str) {
        // (the value holds neither `=` nor NUL: nothing of it needed an escape)
        let nul = key.find('\0').expect("a counter key has a NUL");
        let group = &key[..nul];
        let eq = group.rfind('=').expect("a group key has a `=`");
        (&group[eq + 1..], &key[nul + 1..])
    }

    /// The item id.
    #[inline(always)]
    pub fn item_id(&self) -> &str {
        // (the id-only form inline: it is read a few times per event, in every job)
        let s = self.0.as_str();
        if is_tagged(s.as_bytes().first()) {
            return self.item_after_fields();
        }
        s
    }

    /// The item id of the second form, past the fields (out of line: the id-only form's
    /// reads stay small enough to inline everywhere, which the plain path measurably needs).
    #[inline(never)]
    fn item_after_fields(&self) -> &str {
        if let Some(key) = self.counter_key() {
            return EventText::keyed_parts(key).1;
        }
        let mut r = Fields {
            b: self.0.as_bytes(),
            at: 1,
        };
        let len = r.varint();
        r.at += len;
        r.rest()
    }

    /// The user, dims and item id read in one pass over the string (what a counter key is
    /// written from: reading each with its own accessor decoded the header once per field).
    #[inline(always)]
    pub fn parts(&self) -> TextParts<'_> {
        let b = self.0.as_bytes();
        if b.first() != Some(&FIELDS) {
            if let Some(key) = self.counter_key() {
                let (value, item) = EventText::keyed_parts(key);
                return TextParts {
                    user: None,
                    dims: Dims::One(value),
                    item,
                };
            }
            return TextParts {
                user: None,
                dims: Dims::Packed {
                    r: Fields { b, at: b.len() },
                    count: 0,
                },
                item: self.0.as_str(),
            };
        }
        let mut r = Fields { b, at: 1 };
        let len = r.varint();
        let item = Fields { b, at: r.at + len }.rest();
        let header = r.varint();
        let user = (header & 1 == 1).then(|| r.value());
        TextParts {
            user,
            dims: Dims::Packed { r, count: header / 2 },
            item,
        }
    }

    /// The user, when the event has one.
    #[inline]
    pub fn user(&self) -> Option<&str> {
        let mut r = self.fields()?;
        let header = r.varint();
        (header & 1 == 1).then(|| r.value())
    }

    /// The value of the job's dim at position `p` (`""` where the event has none). (Not
    /// `parts().dim(p)`: finding the item too cost the announcements, which read one dim, 37
    /// instructions an event.)
    #[inline]
    pub fn dim(&self, p: usize) -> &str {
        let Some(mut r) = self.fields() else {
            return match self.counter_key() {
                Some(key) if p == 0 => EventText::keyed_parts(key).0,
                _ => "",
            };
        };
        let header = r.varint();
        if p >= header / 2 {
            return "";
        }
        if header & 1 == 1 {
            r.skip_value();
        }
        for _ in 0..p {
            r.skip_value();
        }
        r.value()
    }

    /// The event's dim values in the job's dim order (none for an event without dims).
    pub fn dims(&self) -> Vec<&str> {
        let Some(mut r) = self.fields() else {
            return match self.counter_key() {
                Some(key) => vec![EventText::keyed_parts(key).0],
                None => Vec::new(),
            };
        };
        let header = r.varint();
        if header & 1 == 1 {
            r.skip_value();
        }
        (0..header / 2).map(|_| r.value()).collect()
    }

    /// The whole string, as stored and sent.
    pub fn as_packed(&self) -> &str {
        &self.0
    }

    /// A reader at the start of the fields (`None`: the string is the id alone).
    #[inline]
    fn fields(&self) -> Option<Fields<'_>> {
        // (the bytes taken from the `CompactString` once: each access decodes where they are)
        let b = self.0.as_bytes();
        if b.first() != Some(&FIELDS) {
            return None;
        }
        let mut r = Fields { b, at: 1 };
        r.varint(); // the fields' length
        Some(r)
    }

    /// Whether `packed` is a string `new` could have built (what a peer sends is checked
    /// before it is read).
    fn check(packed: &str) -> Result<(), String> {
        let b = packed.as_bytes();
        let bad = |what: &str| Err(format!("an event's text fields: {what}"));
        if b.first() == Some(&KEYED) {
            // `name=value NUL id`: a dim name and a value that need no escape
            let key = &packed[1..];
            let Some((group, _)) = key.split_once('\0') else {
                return bad("a counter key without a NUL");
            };
            return match group.split_once('=') {
                Some((name, value))
                    if crate::group::check_dim_name(name).is_ok() && crate::group::needs_no_escape(value) =>
                {
                    Ok(())
                }
                _ => bad("a counter key whose group is not one dim"),
            };
        }
        if b.first() != Some(&FIELDS) {
            return Ok(());
        }
        // a varint within `b[..end]`, and the position after it
        let varint = |at: usize, end: usize| -> Option<(usize, usize)> {
            let (mut v, mut shift, mut at) = (0usize, 0u32, at);
            loop {
                let byte = *b[..end].get(at)?;
                if byte >= 0x80 || shift > 36 {
                    return None;
                }
                v |= usize::from(byte & 0x3f) << shift;
                at += 1;
                if byte & MORE == 0 {
                    return Some((v, at));
                }
                shift += 6;
            }
        };
        let Some((len, start)) = varint(1, b.len()) else {
            return bad("a bad length");
        };
        let Some(end) = start.checked_add(len).filter(|&e| e <= b.len()) else {
            return bad("fields longer than the string");
        };
        let Some((header, mut at)) = varint(start, end) else {
            return bad("a bad header");
        };
        for _ in 0..(header / 2).saturating_add(header & 1) {
            let Some((n, after)) = varint(at, end) else {
                return bad("a bad value length");
            };
            match after.checked_add(n).filter(|&e| e <= end && packed.is_char_boundary(e)) {
                Some(e) => at = e,
                None => return bad("a value past its fields"),
            }
        }
        if at != end {
            return bad("bytes after the last value");
        }
        Ok(())
    }
}

/// An event's text read once: its user, its item id, and a reader at its first dim value.
pub struct TextParts<'a> {
    /// The user, when the event has one.
    pub user: Option<&'a str>,
    dims: Dims<'a>,
    /// The item id.
    pub item: &'a str,
}

/// The dim values of a text read once.
enum Dims<'a> {
    /// The second form's (or none): a reader at the first of `count`.
    Packed { r: Fields<'a>, count: usize },
    /// The third form's one value.
    One(&'a str),
}

impl<'a> TextParts<'a> {
    /// The value of the job's dim at position `p` (`""` where the event has none), as
    /// [`EventText::dim`].
    #[inline]
    pub fn dim(&self, p: usize) -> &'a str {
        match self.dims {
            Dims::One(value) if p == 0 => value,
            Dims::Packed { r, count } if p < count => {
                let mut r = r;
                for _ in 0..p {
                    r.skip_value();
                }
                r.value()
            }
            _ => "",
        }
    }
}

/// A reader of the fields of a string of the second form (see the module docs), over its
/// bytes. Only used on strings built by `new` or checked by `check`.
#[derive(Clone, Copy)]
struct Fields<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    /// The varint at `at`, moving past it.
    #[inline(always)]
    fn varint(&mut self) -> usize {
        // (one byte for anything shorter than 64 bytes: the usual case, inline)
        let first = self.b[self.at];
        if first & MORE == 0 {
            self.at += 1;
            return usize::from(first);
        }
        // (the reader passed by value, not by reference: a reference out of line kept it in
        // memory, and each read of it after its fields were written one by one stalled)
        let (v, at) = long_varint(self.b, self.at);
        self.at = at;
        v
    }

    /// The length-prefixed value at `at`, moving past it.
    #[inline(always)]
    fn value(&mut self) -> &'a str {
        let len = self.varint();
        let start = self.at;
        self.at += len;
        let bytes = &self.b[start..self.at];
        // SAFETY: a value is one of the `str`s `new` wrote whole, or (`check`) ends at a char
        // boundary; it starts after an ASCII varint byte of a `str`, so at a char boundary
        // too: its bytes are UTF-8. (A checked `str` slice tested both ends at every read.)
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// Moves past the length-prefixed value at `at`.
    #[inline(always)]
    fn skip_value(&mut self) {
        let len = self.varint();
        self.at += len;
    }

    /// The bytes from `at` to the end: the item id, past the fields.
    #[inline(always)]
    fn rest(&self) -> &'a str {
        // SAFETY: the id follows the fields' last value (or their length, when they are
        // empty) — a char boundary, as in `value` — and runs to the end of the `str`.
        unsafe { std::str::from_utf8_unchecked(&self.b[self.at..]) }
    }
}

/// The varint of more than one byte at `at` of `b`, and the position after it.
#[inline(never)]
fn long_varint(b: &[u8], mut at: usize) -> (usize, usize) {
    let mut v = 0;
    let mut shift = 0;
    loop {
        let byte = b[at];
        at += 1;
        v |= usize::from(byte & 0x3f) << shift;
        if byte & MORE == 0 {
            return (v, at);
        }
        shift += 6;
    }
}

/// How many bytes the varint of `v` takes.
#[inline]
fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x40 {
        v >>= 6;
        n += 1;
    }
    n
}

/// The text of the third form, not yet written: `prefix` (a dim's `name=`), `value`, NUL,
/// then the id, the very key a job whose windows all count events per that dim counts the
/// event under. A source writes it where the event lies in its batch
/// ([`KeyedText::write_over`]): built first and moved there, its bytes were read back while
/// their stores were still on their way, a stall at each move (a third of the `by` job's
/// `accept_with` samples, `perf`).
#[derive(Clone, Copy, Debug)]
pub struct KeyedText<'a> {
    prefix: &'a str,
    value: &'a str,
    item: &'a str,
}

impl<'a> KeyedText<'a> {
    /// The text of an event of item `item` whose dim has `value`, counted by windows whose
    /// keys start with `prefix`; `None` when the value needs an escape in a group key.
    #[inline(always)]
    pub fn new(prefix: &'a str, value: &'a str, item: &'a str) -> Option<KeyedText<'a>> {
        debug_assert!(prefix.ends_with('=') && !prefix.contains('\0'), "a dim's `name=`");
        crate::group::needs_no_escape(value).then_some(KeyedText { prefix, value, item })
    }

    /// The item id.
    #[inline(always)]
    pub fn item(&self) -> &'a str {
        self.item
    }

    /// Makes `text` this text, written where it lies.
    #[inline(always)]
    pub fn write_over(&self, text: &mut EventText) {
        let total = 1 + self.prefix.len() + self.value.len() + 1 + self.item.len();
        // SAFETY: `total` bytes are written: `str`s and ASCII bytes
        unsafe {
            text.fill(total, |out| {
                out.byte(KEYED);
                out.bytes(self.prefix.as_bytes());
                out.bytes(self.value.as_bytes());
                out.byte(0);
                out.bytes(self.item.as_bytes());
            })
        }
    }
}

/// A writer of bytes into a buffer known to be large enough (see `EventText::new`).
struct Fill {
    at: *mut u8,
    written: usize,
}

impl Fill {
    /// Writes `b`. Safety: the buffer has room for it.
    #[inline(always)]
    unsafe fn byte(&mut self, b: u8) {
        // SAFETY: the caller's
        unsafe {
            self.at.write(b);
            self.at = self.at.add(1);
        }
        self.written += 1;
    }

    /// Writes the varint of `v`. Safety: the buffer has room for it.
    #[inline(always)]
    unsafe fn varint(&mut self, mut v: usize) {
        loop {
            let low = (v & 0x3f) as u8;
            v >>= 6;
            // SAFETY: the caller's
            unsafe {
                if v == 0 {
                    self.byte(low);
                    return;
                }
                self.byte(low | MORE);
            }
        }
    }

    /// Writes `src` (see `short_copy`). Safety: the buffer has room for it.
    #[inline(always)]
    unsafe fn bytes(&mut self, src: &[u8]) {
        // SAFETY: the caller's
        unsafe {
            crate::short_copy::copy_to(self.at, src);
            self.at = self.at.add(src.len());
        }
        self.written += src.len();
    }
}

impl From<&str> for EventText {
    fn from(item: &str) -> EventText {
        EventText::item(item)
    }
}

impl fmt::Debug for EventText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("EventText");
        d.field("item", &self.item_id());
        if self.fields().is_some() || self.counter_key().is_some() {
            d.field("user", &self.user()).field("dims", &self.dims());
        }
        d.finish()
    }
}

impl Serialize for EventText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for EventText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EventText, D::Error> {
        let packed = CompactString::deserialize(d)?;
        EventText::check(&packed).map_err(serde::de::Error::custom)?;
        Ok(EventText(packed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), "[a-z]{1,8}", "\\PC{0,90}", "\u{0}[a-z\u{0}é]{0,5}",]
    }

    proptest! {
        /// Whatever goes in comes back out, and what is sent is read back the same.
        #[test]
        fn fields_come_back(
            item in text(),
            user in proptest::option::of(text()),
            dims in proptest::collection::vec(text(), 0..4),
        ) {
            let t = EventText::new(&item, user.as_deref(), &dims);
            prop_assert_eq!(t.item_id(), item.as_str());
            prop_assert_eq!(t.user(), user.as_deref());
            let got: Vec<&str> = t.dims();
            let want: Vec<&str> = dims.iter().map(String::as_str).collect();
            prop_assert_eq!(&got, &want);
            for p in 0..6 {
                prop_assert_eq!(t.dim(p), dims.get(p).map_or("", String::as_str));
            }
            prop_assert!(EventText::check(t.as_packed()).is_ok());
            // read in one pass, the same fields
            let parts = t.parts();
            prop_assert_eq!((parts.item, parts.user), (t.item_id(), t.user()));
            for p in 0..6 {
                prop_assert_eq!(parts.dim(p), t.dim(p));
            }
            let sent = serde_json::to_string(&t).unwrap();
            let back: EventText = serde_json::from_str(&sent).unwrap();
            prop_assert_eq!(back, t);
        }

        /// A keyed text reads back as the second form of the same event, is its key, and is
        /// read back the same when sent; a value that needs an escape is not keyed.
        #[test]
        fn a_keyed_text_reads_as_its_event(
            item in text(),
            name in "[a-z]{1,8}",
            value in prop_oneof!["[A-Za-z0-9._~-]{0,12}", text()],
        ) {
            let prefix = format!("{name}=");
            let Some(t) = EventText::keyed(&prefix, &value, &item) else {
                prop_assert!(!crate::group::needs_no_escape(&value), "{value:?} is not keyed");
                return Ok(());
            };
            let packed = EventText::new(&item, None, &[value.as_str()]);
            let key = format!("{prefix}{value}\0{item}");
            prop_assert_eq!(t.counter_key(), Some(key.as_str()));
            prop_assert_eq!(packed.counter_key(), None);
            prop_assert_eq!((t.item_id(), t.user(), t.dims()), (packed.item_id(), None, packed.dims()));
            let parts = t.parts();
            prop_assert_eq!((parts.item, parts.user), (item.as_str(), None));
            for p in 0..3 {
                prop_assert_eq!((t.dim(p), parts.dim(p)), (packed.dim(p), packed.dim(p)));
            }
            prop_assert!(EventText::check(t.as_packed()).is_ok());
            let sent = serde_json::to_string(&t).unwrap();
            let back: EventText = serde_json::from_str(&sent).unwrap();
            prop_assert_eq!(&back, &t);
            // written where a text lies (as a source writes it into its batch), over a text
            // of any form, inline or not: the same text
            let keyed = KeyedText::new(&prefix, &value, &item).expect("keyed above");
            prop_assert_eq!(keyed.item(), item.as_str());
            let long = format!("{item}{value}{}", "x".repeat(24));
            for mut over in [EventText::EMPTY, packed, EventText::item(&long)] {
                keyed.write_over(&mut over);
                prop_assert_eq!(&over, &t);
            }
        }

        /// A string that is not one `new` builds is refused, never read out of bounds.
        #[test]
        fn a_bad_string_is_refused_or_reads_back(packed in "\u{0}[\u{0}-\u{7f}é]{0,12}") {
            if EventText::check(&packed).is_ok() {
                let t = EventText(CompactString::from(packed.as_str()));
                let _ = (t.item_id(), t.user(), t.dims());
            }
        }
    }

    #[test]
    fn an_id_alone_is_stored_as_itself_and_a_short_event_inline() {
        assert_eq!(EventText::item("video-8841").as_packed(), "video-8841");
        let t = EventText::new("item-123456", Some("u12345"), &["US"]);
        assert!(!t.0.is_heap_allocated(), "{t:?} is {} bytes", t.0.len());
        // an id starting with NUL takes the second form, so it is not misread
        let odd = EventText::item("\0x");
        assert_eq!((odd.item_id(), odd.user(), odd.dims().len()), ("\0x", None, 0));
    }

    #[test]
    fn a_keyed_text_is_inline_and_an_id_starting_with_its_tag_is_not_misread() {
        let t = EventText::keyed("country=", "C12", "item-123456").expect("no escape");
        assert!(!t.0.is_heap_allocated(), "{t:?} is {} bytes", t.0.len());
        assert_eq!((t.item_id(), t.dim(0)), ("item-123456", "C12"));
        let odd = EventText::item("\u{1}x");
        assert_eq!(
            (odd.item_id(), odd.counter_key(), odd.dims().len()),
            ("\u{1}x", None, 0)
        );
        assert!(EventText::keyed("country=", "a b", "i").is_none(), "a value to escape");
    }

    /// A keyed string from a peer is refused unless its group is one dim's, with a value
    /// that needs no escape.
    #[test]
    fn a_bad_keyed_string_is_refused() {
        for bad in [
            "\u{1}",
            "\u{1}country=C1",
            "\u{1}C1\0i",
            "\u{1}=C1\0i",
            "\u{1}country=a b\0i",
            "\u{1}a&b=1\0i",
        ] {
            assert!(EventText::check(bad).is_err(), "{bad:?}");
        }
        for good in ["\u{1}country=C1\0i", "\u{1}country=\0i", "\u{1}country=C1\0"] {
            assert!(EventText::check(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn long_values_take_several_length_bytes() {
        let long = "x".repeat(5000);
        let t = EventText::new("i", Some(&long), &[long.as_str(), ""]);
        assert_eq!(
            (t.item_id(), t.user(), t.dim(0).len(), t.dim(1)),
            ("i", Some(long.as_str()), 5000, "")
        );
    }

    /// Every length of value round each of `Fill::bytes`'s word sizes, inline and on the heap.
    #[test]
    fn values_of_every_short_length_come_back() {
        let abc: String = ('a'..='z').cycle().take(70).collect();
        for n in 0..=70 {
            let v = &abc[..n];
            let t = EventText::new(v, Some(v), &[v, &abc[n..]]);
            assert_eq!(
                (t.item_id(), t.user(), t.dims()),
                (v, Some(v), vec![v, &abc[n..]]),
                "length {n}"
            );
        }
    }

    #[test]
    fn a_truncated_string_is_refused() {
        let t = EventText::new("item", Some("user"), &["US"]);
        let p = t.as_packed();
        let fields_end = p.len() - "item".len();
        for cut in 1..fields_end {
            assert!(EventText::check(&p[..cut]).is_err(), "{:?}", &p[..cut]);
        }
    }
}

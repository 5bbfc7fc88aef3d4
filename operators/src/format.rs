//! Field mapping (`[source.format]`): where in a producer's JSON record the item id, the event
//! time, the user and the dims are, as JSON Pointers (RFC 6901).
//!
//! Under the default format (`/item_id`, `/ts` in ms, no user, no dims) a line is parsed by the
//! event contract itself ([`parse_event`], its fast path and its exact rules and details).
//! Any other format is parsed by a streaming walk (`walk.rs`; `scan.rs` is its fast path for
//! the usual records, and a format that reads the contract's members where they are takes the
//! contract's usual line from a byte split first, [`Parser::plain`]) with the mapping rules:
//!
//! - item id and user: a string or an integer (written in decimal: `1000` and `"1000"` are the
//!   same item), with the item-id rules ([`check_item_id`]); a missing user is `None`;
//! - time: an integer in the format's unit (converted to ms, sub-ms truncated toward −∞) or an
//!   RFC 3339 string; outside years 0000–9999 (also after conversion) it is out of range;
//! - a dim: a string or an integer; missing or `null` is `""`; a value longer than
//!   `max_dim_bytes`, or one that makes a window's group key longer than
//!   `max_group_key_bytes`, is bad ([`DimBounds`]);
//! - a pointer finding nothing (item id, time) or a value of another type is a bad record whose
//!   detail names the target and the pointer (`item_id: /Bid/auction finds nothing`).
//!
//! Malformed JSON, trailing garbage, a line that is not one object, and a key that occurs twice
//! on a pointer's path stay bad.

mod number;
mod scan;
mod shape;
#[cfg(test)]
mod tests;
mod walk;

use crate::event::{check_item_id, check_item_id_size, parse_event, BadRecord, ParsedEvent, PlainLine};
use crate::group::DimBounds;
use crate::time::Millis;
use smallvec::SmallVec;
use std::borrow::Cow;
use walk::Caps;
pub use walk::{Cap, MAX_TARGETS};

/// A JSON Pointer (RFC 6901), split into its reference tokens (`~1` and `~0` decoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pointer {
    /// As written (for details and messages).
    pub text: String,
    /// The decoded reference tokens.
    pub tokens: Vec<String>,
}

impl Pointer {
    /// Parses a pointer: `""` (the whole record) or `/a/b`.
    pub fn parse(text: &str) -> Result<Pointer, String> {
        if text.is_empty() {
            return Ok(Pointer {
                text: String::new(),
                tokens: Vec::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!("JSON pointer {text:?} must be empty or start with '/'"));
        };
        let tokens = rest
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        Ok(Pointer {
            text: text.to_string(),
            tokens,
        })
    }
}

/// The unit of integer event times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TsUnit {
    /// Seconds.
    Seconds,
    /// Milliseconds (the contract's unit).
    #[default]
    Millis,
    /// Microseconds.
    Micros,
    /// Nanoseconds.
    Nanos,
}

/// A compiled field mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// Where the item id is (a string or an integer).
    pub item_id: Pointer,
    /// Where the event time is (an integer in `ts_unit`, or an RFC 3339 string).
    pub ts: Pointer,
    /// The unit of integer times.
    pub ts_unit: TsUnit,
    /// Where the user is, if the job needs one.
    pub user: Option<Pointer>,
    /// The user is read where it parses and never makes a record bad: for `hotlist explain`,
    /// which reads the users of a job that counts none (the job's verdicts stay the same).
    pub user_is_extra: bool,
    /// The dims the job needs, by name, and where each one is.
    pub dims: Vec<(String, Pointer)>,
    /// How long their values and the windows' group keys may be.
    pub bounds: DimBounds,
    /// Where the UDFs' arguments are (`[[udf]]`): read as they are, any JSON value.
    pub args: Vec<Pointer>,
    /// What UDFs compute instead of a pointer: such a target is not read, and its rules (an id's,
    /// a dim's bounds) are applied once the UDF gave its value.
    pub computed: Computed,
}

/// The targets of a format that UDFs compute.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Computed {
    /// The item id.
    pub item_id: bool,
    /// The dims, by their index in [`Format::dims`] (bit `i`: dim `i`).
    pub dims: u64,
}

impl Default for Format {
    /// The event contract: `/item_id`, `/ts` in milliseconds, no user, no dims needed.
    fn default() -> Format {
        Format {
            item_id: Pointer::parse("/item_id").expect("valid"),
            ts: Pointer::parse("/ts").expect("valid"),
            ts_unit: TsUnit::Millis,
            user: None,
            user_is_extra: false,
            dims: Vec::new(),
            bounds: DimBounds::default(),
            args: Vec::new(),
            computed: Computed::default(),
        }
    }
}

impl Format {
    /// Whether this is the event contract's format (parsed by [`parse_event`]). Cheap: no
    /// allocation, a few comparisons.
    pub fn is_contract(&self) -> bool {
        let is = |p: &Pointer, name: &str| p.tokens.len() == 1 && p.tokens[0] == name;
        self.ts_unit == TsUnit::Millis
            && self.user.is_none()
            && self.dims.is_empty()
            && self.args.is_empty()
            && !self.computed.item_id
            && is(&self.item_id, "item_id")
            && is(&self.ts, "ts")
    }
}

impl TsUnit {
    /// Parses `s`, `ms`, `us` or `ns`.
    pub fn parse(text: &str) -> Option<TsUnit> {
        match text {
            "s" => Some(TsUnit::Seconds),
            "ms" => Some(TsUnit::Millis),
            "us" => Some(TsUnit::Micros),
            "ns" => Some(TsUnit::Nanos),
            _ => None,
        }
    }

    /// An integer time in this unit as milliseconds (sub-ms truncated toward −∞); `None` on
    /// overflow.
    pub fn to_millis(self, v: i64) -> Option<i64> {
        match self {
            TsUnit::Seconds => v.checked_mul(1000),
            TsUnit::Millis => Some(v),
            TsUnit::Micros => Some(v.div_euclid(1000)),
            TsUnit::Nanos => Some(v.div_euclid(1_000_000)),
        }
    }
}

/// Parses one line under `format` (a source parsing many lines keeps a [`Parser`] instead).
pub fn parse_with<'a>(line: &'a [u8], format: &Format) -> Result<ParsedEvent<'a>, BadRecord> {
    Parser::new(format.clone()).parse(line)
}

/// A field mapping ready to parse records: the format, and its pointers as a tree for the
/// fast scan (built once, not per record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parser {
    format: Format,
    /// `None` for the event contract (parsed by [`parse_event`]).
    plan: Option<scan::Plan>,
    /// Whether the format reads the usual line's members where they are (see [`Parser::plain`]).
    plain: bool,
    /// The keys the scan has seen (taken out for each line: a parser is one reader's).
    keys: KnownKeys,
}

/// The most dims [`Parser::plain_fields`] reads (the usual line has one or two).
pub const PLAIN_DIMS: usize = 2;

/// A usual line's fields, borrowed from it (see [`Parser::plain_fields`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainFields<'a> {
    /// The item id (checked for size).
    pub item_id: &'a str,
    /// The event time (checked for range).
    pub ts: Millis,
    /// The user, when the format reads one and the line has it.
    pub user: Option<&'a str>,
    dims: [&'a str; PLAIN_DIMS],
    n_dims: u8,
}

impl<'a> PlainFields<'a> {
    /// The values of the format's dims, in its order (`""` where the line has none).
    #[inline]
    pub fn dims(&self) -> &[&'a str] {
        &self.dims[..usize::from(self.n_dims)]
    }
}

/// The scan's [`scan::Keys`] in a parser: what it remembers of earlier records, not part of
/// what the parser is (parsers are equal by their format).
#[derive(Default)]
struct KnownKeys(std::cell::Cell<scan::Keys>);

impl Clone for KnownKeys {
    fn clone(&self) -> KnownKeys {
        let keys = self.0.take();
        self.0.set(keys.clone());
        KnownKeys(keys.into())
    }
}

impl std::fmt::Debug for KnownKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KnownKeys")
    }
}

impl PartialEq for KnownKeys {
    fn eq(&self, _: &KnownKeys) -> bool {
        true
    }
}

impl Eq for KnownKeys {}

impl Parser {
    /// The parser of `format`.
    pub fn new(format: Format) -> Parser {
        let plan = (!format.is_contract()).then(|| scan::Plan::new(&format));
        let plain = plan.is_some() && reads_the_usual_line(&format);
        Parser {
            format,
            plan,
            plain,
            keys: KnownKeys::default(),
        }
    }

    /// The same parser without the usual line's fast path (for tests that compare the two).
    #[cfg(test)]
    pub(crate) fn without_plain(mut self) -> Parser {
        self.plain = false;
        self
    }

    /// Its format.
    pub fn format(&self) -> &Format {
        &self.format
    }

    /// Parses one line.
    #[inline]
    pub fn parse<'a>(&self, line: &'a [u8]) -> Result<ParsedEvent<'a>, BadRecord> {
        match &self.plan {
            None => parse_event(line),
            Some(plan) => {
                if self.plain {
                    if let Some(event) = self.plain(line) {
                        return Ok(event);
                    }
                }
                self.mapped(line, plan, None)
            }
        }
    }

    /// A valid line of the producers' usual shape ([`PlainLine`]: the contract's
    /// `{"item_id":…,"ts":…}` with `dims` and `user`) read without the scan, for a format that
    /// reads the item id, the time, the user and the dims where that shape has them
    /// ([`reads_the_usual_line`]); `None` for any other line and for any bad one (the scan or
    /// the walk then decides and words it). The scan's result (property-tested).
    #[inline]
    fn plain<'a>(&self, line: &'a [u8]) -> Option<ParsedEvent<'a>> {
        // (more dims than the usual line's two are rare: their buffer may go to the heap)
        let mut dims: SmallVec<[&'a str; 4]> = std::iter::repeat_n("", self.format.dims.len()).collect();
        let (item_id, ts, user) = self.plain_into(line, &mut dims)?;
        Some(ParsedEvent {
            item_id: Cow::Borrowed(item_id),
            ts,
            user: user.map(Cow::Borrowed),
            dims: dims.iter().map(|d| Cow::Borrowed(*d)).collect(),
        })
    }

    /// [`Parser::plain`]'s fields borrowed from the line, for a format of at most
    /// [`PLAIN_DIMS`] dims (`None` for more, and wherever `plain` is `None`): what a source
    /// packs into an event without a [`ParsedEvent`] in between. (Built and moved, the
    /// event's `Cow` dims were read back wider than they were written, a store-forwarding
    /// stall on the hottest instruction of a `by` job's `accept_with`, 7.5 % of its samples,
    /// `perf`; and dropped value by value.)
    #[inline(always)]
    pub fn plain_fields<'a>(&self, line: &'a [u8]) -> Option<PlainFields<'a>> {
        // (the test in line: the contract's parse, which takes no usual line here, then
        // pays no call for it)
        if !self.plain || self.format.dims.len() > PLAIN_DIMS {
            return None;
        }
        self.usual_fields(line)
    }

    /// [`Parser::plain_fields`] of a format that takes the usual line.
    #[inline]
    fn usual_fields<'a>(&self, line: &'a [u8]) -> Option<PlainFields<'a>> {
        let mut dims = [""; PLAIN_DIMS];
        let n = self.format.dims.len();
        let (item_id, ts, user) = self.plain_into(line, &mut dims[..n])?;
        Some(PlainFields {
            item_id,
            ts,
            user,
            dims,
            n_dims: n as u8,
        })
    }

    /// The usual line's item id, time and user, with its dims' values written to `dims` (one
    /// per format dim, `""` where the line has none).
    #[inline(always)]
    fn plain_into<'a>(&self, line: &'a [u8], dims: &mut [&'a str]) -> Option<(&'a str, Millis, Option<&'a str>)> {
        // each dims member matched as the split finds it (a format without dims reads no member)
        let names = &self.format.dims;
        let mut seen = 0u64;
        let plain = PlainLine::split_visiting(line, |key, value| {
            for (i, (_, p)) in names.iter().enumerate() {
                if crate::short_copy::same(p.tokens[1].as_bytes(), key.as_bytes()) {
                    // a key twice on a pointer's path is bad: the walk words it
                    if seen & (1 << i) != 0 {
                        return false;
                    }
                    seen |= 1 << i;
                    dims[i] = value;
                }
            }
            true
        })?;
        check_item_id_size(plain.item_id).ok()?;
        let ts = Millis(self.format.ts_unit.to_millis(plain.ts)?);
        if !ts.is_event_time() {
            return None;
        }
        let user = match (&self.format.user, plain.user) {
            (None, _) | (Some(_), None) => None,
            (Some(_), Some(user)) => {
                check_item_id_size(user).ok()?;
                Some(user)
            }
        };
        self.format.bounds.check(dims).ok()?;
        Some((plain.item_id, ts, user))
    }

    /// [`Parser::parse`] of a line [`Parser::plain_fields`] did not take, without trying the
    /// usual line's path again.
    #[inline]
    pub fn parse_unusual<'a>(&self, line: &'a [u8]) -> Result<ParsedEvent<'a>, BadRecord> {
        match &self.plan {
            Some(plan) if self.format.dims.len() <= PLAIN_DIMS => self.mapped(line, plan, None),
            _ => self.parse(line),
        }
    }

    /// Parses one line and what its UDFs' arguments point at: appended to `args`, one per
    /// [`Format::args`] entry, in order (none when the line is bad). A computed item id is `""`
    /// and computed dims are `""` until the UDFs give them: the caller applies
    /// [`check_item_id`] and the bounds then.
    pub fn parse_with_args<'a>(&self, line: &'a [u8], args: &mut Vec<Cap<'a>>) -> Result<ParsedEvent<'a>, BadRecord> {
        match &self.plan {
            None => parse_event(line),
            Some(plan) => self.mapped(line, plan, Some(args)),
        }
    }

    /// [`parse_mapped`] with the keys remembered so far.
    #[inline]
    fn mapped<'a>(
        &self,
        line: &'a [u8],
        plan: &scan::Plan,
        args: Option<&mut Vec<Cap<'a>>>,
    ) -> Result<ParsedEvent<'a>, BadRecord> {
        let mut keys = self.keys.0.take();
        let parsed = parse_mapped(line, &self.format, plan, &mut keys, args);
        self.keys.0.set(keys);
        parsed
    }
}

/// Whether `format` reads what a [`PlainLine`] holds where it holds it: the item id at
/// `/item_id`, the time at `/ts`, the user (if any) at `/user`, every dim at `/dims/NAME`, no
/// UDF arguments and nothing computed. Then such a line's members are all the format reads.
fn reads_the_usual_line(format: &Format) -> bool {
    let at =
        |p: &Pointer, path: &[&str]| p.tokens.len() == path.len() && p.tokens.iter().zip(path).all(|(t, w)| t == w);
    at(&format.item_id, &["item_id"])
        && at(&format.ts, &["ts"])
        && format.user.as_ref().is_none_or(|p| at(p, &["user"]))
        && format.dims.len() <= 64
        && format
            .dims
            .iter()
            .all(|(_, p)| p.tokens.len() == 2 && p.tokens[0] == "dims")
        && format.args.is_empty()
        && format.computed == Computed::default()
}

/// The mapping rules (see the module doc); the UDFs' arguments into `args` when asked.
fn parse_mapped<'a>(
    line: &'a [u8],
    format: &Format,
    plan: &scan::Plan,
    keys: &mut scan::Keys,
    args: Option<&mut Vec<Cap<'a>>>,
) -> Result<ParsedEvent<'a>, BadRecord> {
    let text = crate::event::utf8(line)?;
    match text.bytes().find(|b| !b.is_ascii_whitespace()) {
        None => return Err(BadRecord::Empty),
        Some(b'{') => {}
        Some(_) => return Err(BadRecord::NotObject),
    }
    // (built in place, the dims' slots filled after: built whole, the struct was assembled
    // in a temporary and copied with 16-byte loads over its 8-byte stores, a store-forwarding
    // stall that was a third of this function's samples)
    let mut caps = Caps {
        fixed: [Cap::Missing, Cap::Missing, Cap::Missing],
        dims: SmallVec::new(),
        written: [None; 3],
    };
    caps.dims.resize(format.dims.len() + format.args.len(), Cap::Missing);
    if scan::scan(text, plan, keys, &mut caps).is_none() {
        // not the fast path's kind of record: the walk decides (and words any error)
        caps.clear();
        walk::walk(text, format, &mut caps).map_err(|e| BadRecord::Invalid(e.to_string()))?;
    }
    let [item, ts, user] = caps.fixed;
    if let Some(args) = args {
        args.extend(caps.dims.drain(format.dims.len()..));
    }
    let item_id = if format.computed.item_id {
        Cow::Borrowed("")
    } else {
        let Some(item_id) = id("item_id", &format.item_id, item, caps.written[0])? else {
            return Err(nothing("item_id", &format.item_id));
        };
        check_item_id(&item_id)?;
        item_id
    };
    let ts = time(&format.ts, format.ts_unit, ts)?;
    let user = match &format.user {
        Some(p) if format.user_is_extra => id("user", p, user, caps.written[2])
            .ok()
            .flatten()
            .filter(|u| check_item_id(u).is_ok()),
        Some(p) => {
            let user = id("user", p, user, caps.written[2])?;
            if let Some(u) = &user {
                check_item_id(u).map_err(|bad| {
                    let why = bad.to_string();
                    let why = why.strip_prefix("item_id ").unwrap_or(&why);
                    BadRecord::Invalid(format!("user: {} {why}", shown(&p.text)))
                })?;
            }
            user
        }
        None => None,
    };
    let dims: SmallVec<[Cow<'a, str>; 2]> = if format.dims.is_empty() {
        SmallVec::new()
    } else {
        caps.dims
            .into_iter()
            .zip(&format.dims)
            .map(|(cap, (name, p))| dim(name, p, cap))
            .collect::<Result<_, _>>()?
    };
    if format.computed.dims == 0 {
        format.bounds.check(&dims)?;
    }
    Ok(ParsedEvent {
        item_id,
        ts,
        user,
        dims,
    })
}

/// A pointer as shown in details (`""`, the whole record, quoted).
fn shown(text: &str) -> &str {
    if text.is_empty() {
        "\"\""
    } else {
        text
    }
}

fn nothing(what: &str, p: &Pointer) -> BadRecord {
    BadRecord::Invalid(format!("{what}: {} finds nothing", shown(&p.text)))
}

fn wrong(what: &str, p: &Pointer, found: &str, want: &str) -> BadRecord {
    BadRecord::Invalid(format!("{what}: {} is {found}, not {want}", shown(&p.text)))
}

fn found(cap: &Cap<'_>) -> &'static str {
    match cap {
        Cap::Null => "null",
        Cap::Bool(_) => "a boolean",
        Cap::Float(_) => "a float",
        Cap::Other(what) => what,
        _ => "a value",
    }
}

/// An item id or user: a string or an integer in decimal (`written`: its text as the scan found
/// it, borrowed); `None` when missing.
fn id<'a>(what: &str, p: &Pointer, cap: Cap<'a>, written: Option<&'a str>) -> Result<Option<Cow<'a, str>>, BadRecord> {
    match cap {
        Cap::Missing => Ok(None),
        Cap::Str(s) => Ok(Some(s)),
        Cap::Int(v) => Ok(Some(match written {
            Some(text) => {
                debug_assert_eq!(text, v.to_string());
                Cow::Borrowed(text)
            }
            None => Cow::Owned(v.to_string()),
        })),
        Cap::BigInt(v) => Ok(Some(Cow::Owned(v.to_string()))),
        other => Err(wrong(what, p, found(&other), "a string or an integer")),
    }
}

/// The event time: an integer in `unit` or an RFC 3339 string, within years 0000–9999.
fn time(p: &Pointer, unit: TsUnit, cap: Cap<'_>) -> Result<Millis, BadRecord> {
    // `written` (the detail of a bad time) is built only for a bad time: not per event
    let in_range = |ms: Option<i64>, written: &dyn Fn() -> String| match ms.map(Millis) {
        Some(ts) if ts.is_event_time() => Ok(ts),
        _ => Err(BadRecord::TsOutOfRange(written())),
    };
    match cap {
        Cap::Missing => Err(nothing("ts", p)),
        Cap::Int(v) => in_range(unit.to_millis(v), &|| v.to_string()),
        Cap::BigInt(v) => Err(BadRecord::TsOutOfRange(v.to_string())),
        Cap::Str(s) => match Millis::parse_rfc3339(&s) {
            Some(ts) => in_range(Some(ts.0), &|| format!("{s:?}")),
            None => Err(BadRecord::Invalid(format!(
                "ts: {} is {s:?}, not an RFC 3339 time with an offset",
                shown(&p.text)
            ))),
        },
        other => Err(wrong("ts", p, found(&other), "an integer or an RFC 3339 string")),
    }
}

/// A dim's value: a string or an integer; missing or null is `""`.
fn dim<'a>(name: &str, p: &Pointer, cap: Cap<'a>) -> Result<Cow<'a, str>, BadRecord> {
    match cap {
        Cap::Missing | Cap::Null => Ok(Cow::Borrowed("")),
        Cap::Str(s) => Ok(s),
        Cap::Int(v) => Ok(Cow::Owned(v.to_string())),
        Cap::BigInt(v) => Ok(Cow::Owned(v.to_string())),
        other => Err(wrong(
            &format!("dims.{name}"),
            p,
            found(&other),
            "a string or an integer",
        )),
    }
}

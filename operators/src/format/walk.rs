//! The streaming walk of one record: a serde visitor that follows only the keys and indices on
//! the format's pointers, captures the values where pointers end and skips everything else
//! (`IgnoredAny`): no `serde_json::Value` tree, no allocation for a value without escapes.
//!
//! Targets are numbered: 0 the item id, 1 the time, 2 the user, 3.. the dims; a `u64` mask says
//! which targets a position of the record is on the way to.

use super::Format;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// Most targets a format may have (item id, time, user and 61 dims and UDF arguments).
pub const MAX_TARGETS: usize = 64;

/// What a pointer found.
#[derive(Clone, Debug, PartialEq)]
pub enum Cap<'a> {
    /// Nothing (the pointer's path is not in the record).
    Missing,
    /// A string.
    Str(Cow<'a, str>),
    /// An integer, kept as written.
    Int(i64),
    /// A non-negative integer beyond `i64`.
    BigInt(u64),
    /// A number with a fraction or an exponent (read by the walk only: the scan leaves a
    /// captured float to it, so both give serde_json's value).
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// A value of another type (its name: "a boolean", "an object", ...).
    Other(&'static str),
}

/// The values found for each target.
pub struct Caps<'a> {
    /// Item id, time, user.
    pub fixed: [Cap<'a>; 3],
    /// The dims, in format order, then the UDFs' arguments.
    pub dims: smallvec::SmallVec<[Cap<'a>; 2]>,
    /// Item id, time, user: an integer as the scan found it written, so that an integer id
    /// borrows its text instead of formatting a `String` (JSON writes an integer as its
    /// decimal form: no `+`, no leading zeros; the scan leaves `-0` to the walk). The walk
    /// sets none.
    pub written: [Option<&'a str>; 3],
}

impl<'a> Caps<'a> {
    /// Every target back to `Cap::Missing`.
    pub(super) fn clear(&mut self) {
        for cap in self.fixed.iter_mut().chain(&mut self.dims) {
            *cap = Cap::Missing;
        }
        self.written = [None; 3];
    }

    pub(super) fn slot(&mut self, target: usize) -> &mut Cap<'a> {
        match target {
            0..=2 => &mut self.fixed[target],
            _ => &mut self.dims[target - 3],
        }
    }
}

/// The reference tokens of target `i`.
pub(super) fn tokens(format: &Format, i: usize) -> &[String] {
    match i {
        0 => &format.item_id.tokens,
        1 => &format.ts.tokens,
        2 => format.user.as_ref().map_or(&[], |p| &p.tokens),
        _ if i - 3 < format.dims.len() => &format.dims[i - 3].1.tokens,
        _ => &format.args[i - 3 - format.dims.len()].tokens,
    }
}

/// The mask of every target of `format` (a target a UDF computes is not read).
pub fn all_targets(format: &Format) -> u64 {
    let item = if format.computed.item_id { 0 } else { 1 };
    let user = if format.user.is_some() { 0b100 } else { 0 };
    let read = format.dims.len() + format.args.len();
    let dims = ((1u64 << read).wrapping_sub(1) << 3) & !(format.computed.dims << 3);
    item | 0b10 | user | dims
}

/// Iterates over the set bits of a mask.
pub(super) fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            i
        })
    })
}

/// Walks the record into `caps`: the whole line must be one valid JSON value (duplicate keys on
/// a pointer's path are an error).
pub fn walk<'a>(text: &'a str, format: &Format, caps: &mut Caps<'a>) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    Node {
        format,
        mask: all_targets(format),
        depth: 0,
        caps,
    }
    .deserialize(&mut de)?;
    de.end()
}

/// A position of the record on the way to the targets in `mask`, `depth` tokens deep.
struct Node<'f, 'c, 'a> {
    format: &'f Format,
    mask: u64,
    depth: usize,
    caps: &'c mut Caps<'a>,
}

impl<'a> Node<'_, '_, 'a> {
    /// The targets whose pointer ends here.
    fn here(&self) -> u64 {
        bits(self.mask)
            .filter(|&i| tokens(self.format, i).len() == self.depth)
            .fold(0, |m, i| m | 1 << i)
    }

    /// Stores what the targets ending here found.
    fn capture(&mut self, value: &Cap<'a>) {
        for i in bits(self.here()) {
            *self.caps.slot(i) = value.clone();
        }
    }

    /// The targets below here whose next token is `key`.
    fn child_mask(&self, key: &str) -> u64 {
        bits(self.mask)
            .filter(|&i| tokens(self.format, i).get(self.depth).is_some_and(|t| t == key))
            .fold(0, |m, i| m | 1 << i)
    }

    /// The targets below here whose next token is array index `index`.
    fn index_mask(&self, index: usize) -> u64 {
        bits(self.mask)
            .filter(|&i| {
                tokens(self.format, i)
                    .get(self.depth)
                    .is_some_and(|t| is_index(t, index))
            })
            .fold(0, |m, i| m | 1 << i)
    }

    /// The targets that go deeper than here.
    fn below(&self) -> u64 {
        self.mask & !self.here()
    }
}

/// Whether RFC 6901 token `token` is array index `index` (decimal, no leading zeros).
pub(super) fn is_index(token: &str, index: usize) -> bool {
    let canonical = token == "0" || (!token.starts_with('0') && token.bytes().all(|b| b.is_ascii_digit()));
    canonical && token.parse::<usize>() == Ok(index)
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_, '_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<(), E> {
        self.capture(&Cap::Bool(v));
        Ok(())
    }
    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<(), E> {
        self.capture(&Cap::Int(v));
        Ok(())
    }
    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<(), E> {
        let cap = i64::try_from(v).map_or(Cap::BigInt(v), Cap::Int);
        self.capture(&cap);
        Ok(())
    }
    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<(), E> {
        self.capture(&Cap::Float(v));
        Ok(())
    }
    fn visit_borrowed_str<E: de::Error>(mut self, v: &'de str) -> Result<(), E> {
        if self.here() != 0 {
            self.capture(&Cap::Str(Cow::Borrowed(v)));
        }
        Ok(())
    }
    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        if self.here() != 0 {
            self.capture(&Cap::Str(Cow::Owned(v.to_owned())));
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.capture(&Cap::Null);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.capture(&Cap::Other("an array"));
        let below = self.below();
        let mut index = 0;
        loop {
            let child = if below == 0 { 0 } else { self.index_mask(index) };
            let more = if child == 0 {
                seq.next_element::<IgnoredAny>()?.is_some()
            } else {
                seq.next_element_seed(self.child(child))?.is_some()
            };
            if !more {
                return Ok(());
            }
            index += 1;
        }
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.capture(&Cap::Other("an object"));
        let below = self.below();
        let mut seen = 0u64;
        loop {
            let child = if below == 0 {
                map.next_key::<IgnoredAny>()?.map(|_| 0)
            } else {
                map.next_key_seed(KeyMatch(&self))?
            };
            let Some(child) = child else { return Ok(()) };
            if child == 0 {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if seen & child != 0 {
                let first = bits(child).next().unwrap_or(0);
                let key = &tokens(self.format, first)[self.depth];
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            seen |= child;
            map.next_value_seed(self.child(child))?;
        }
    }
}

impl<'a> Node<'_, '_, 'a> {
    fn child(&mut self, mask: u64) -> Node<'_, '_, 'a> {
        Node {
            format: self.format,
            mask,
            depth: self.depth + 1,
            caps: self.caps,
        }
    }
}

/// A key of an object, matched against the next tokens of the targets below (no allocation).
struct KeyMatch<'n, 'f, 'c, 'a>(&'n Node<'f, 'c, 'a>);

impl<'de> DeserializeSeed<'de> for KeyMatch<'_, '_, '_, '_> {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyMatch<'_, '_, '_, '_> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<u64, E> {
        Ok(self.0.child_mask(key))
    }
}

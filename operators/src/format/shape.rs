//! The fastest path of the scan: the shape of the last records. A producer writes its records
//! alike, byte for byte but for the values: a Nexmark bid is always
//! `{"Bid":{"auction":` INT `,"bidder":` INT … `,"extra":"` STR `"}}`. So after a record the
//! scan read, its shape is kept: the text between its values (keys, brackets, whitespace,
//! literals) and, for each value, a slot that says what may fill it and which targets it
//! captures. A record that is that text byte for byte, with values of the slots' kinds, is
//! read by comparing the text sixteen bytes at a time and reading only the values: no key is
//! searched for, no bracket dispatched on (Nexmark bid lines: the whole parse 1.4× as many
//! lines a second, `examples/parse_speed`).
//!
//! The shape answers as the scan does, so a record's verdict and captures do not depend on
//! what is remembered (property-tested in `tests.rs`): a shape is only built from a record the
//! scan accepted, the same text means the same keys in the same places (so the same pointers
//! lead to the same slots, and no key twice on a path), and each slot takes only values the
//! scan reads alike — plain strings, integers of at most 18 digits where a pointer leads (the
//! scan's captured integers), any number where none does. On anything else the shape does not
//! answer and the scan reads the record.
//!
//! Bounded: at most [`MAX_SHAPES`] shapes of at most [`MAX_SHAPE_BYTES`] bytes; a record of
//! another shape builds a new one only on credit ([`BUILD_COST`]), so a stream of ever-new
//! shapes costs at most one build every sixteen records.

use super::number;
use super::scan::{capture, Plan};
use super::walk::{bits, Cap, Caps};
use std::borrow::Cow;

/// Shapes kept (a stream of a few record types, such as Nexmark's persons, auctions and bids,
/// keeps one each).
const MAX_SHAPES: usize = 4;

/// Records longer than this build no shape.
const MAX_SHAPE_BYTES: usize = 1024;

/// Values a shape has at most.
const MAX_SLOTS: usize = 64;

/// Objects nested deeper than this build no shape.
const MAX_SHAPE_DEPTH: usize = 32;

/// A build (after the first [`MAX_SHAPES`]) costs this much credit; every record no shape took
/// earns one (so ever-new shapes, or records no shape can be built of, cost one try every this
/// many records).
const BUILD_COST: u32 = 16;

/// The most credit saved up.
const MAX_CREDIT: u32 = 16 * BUILD_COST;

/// The shapes of the last records (bounded: see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Shapes {
    /// Those used last first (a shape that reads a record moves one place up; a new one
    /// replaces the last).
    shapes: Vec<Shape>,
    credit: u32,
    /// Builds tried (up to 255: the first [`MAX_SHAPES`] are free).
    tried: u8,
    /// Records read through a shape, and builds tried (for the tests).
    #[cfg(test)]
    hits: usize,
    #[cfg(test)]
    builds: usize,
}

impl Shapes {
    /// Reads `text` into `caps` (which must hold `Cap::Missing` everywhere) through a kept
    /// shape: whether one took it (the scan's answer, `Some`); if none did, `caps` is as it
    /// was.
    #[inline]
    pub fn read<'a>(&mut self, text: &'a str, caps: &mut Caps<'a>) -> bool {
        for i in 0..self.shapes.len() {
            if self.shapes[i].read(text, caps).is_some() {
                #[cfg(test)]
                {
                    self.hits += 1;
                }
                // (the shapes in the order of their last use: the last one is replaced)
                if i > 0 {
                    self.shapes.swap(i, i - 1);
                }
                return true;
            }
            caps.clear();
        }
        false
    }

    /// Keeps the shape of `text`, a record the scan accepted by `plan` and no shape took, when
    /// there is credit for it.
    #[cold]
    pub fn learn(&mut self, text: &str, plan: &Plan) {
        // (the first tries are free: a stream of one shape builds it at its first record; a
        // try that builds nothing, a record with an array say, costs as much as one that does)
        self.credit = (self.credit + 1).min(MAX_CREDIT);
        if self.tried >= MAX_SHAPES as u8 && self.credit < BUILD_COST {
            return;
        }
        self.tried = self.tried.saturating_add(1);
        self.credit = self.credit.saturating_sub(BUILD_COST);
        #[cfg(test)]
        {
            self.builds += 1;
        }
        let Some(shape) = Shape::of(text, plan) else { return };
        if self.shapes.len() < MAX_SHAPES {
            self.shapes.push(shape);
        } else {
            self.shapes[MAX_SHAPES - 1] = shape;
        }
    }

    /// Shapes tried to build (for the tests).
    #[cfg(test)]
    pub(super) fn builds(&self) -> usize {
        self.builds
    }

    /// Records read through a shape.
    #[cfg(test)]
    pub(super) fn hits(&self) -> usize {
        self.hits
    }
}

/// One record's shape: its text between values, and a slot after each piece of it.
#[derive(Clone, Debug)]
struct Shape {
    parts: Vec<Part>,
    /// The pieces of text, one after the other.
    text: Vec<u8>,
}

/// A piece of the record's text, then a value (or the record's end).
#[derive(Clone, Copy, Debug)]
struct Part {
    /// The piece's first 16 bytes, little-endian, the bytes past it zero...
    head: u128,
    /// ...and their bits.
    mask: u128,
    /// Its last 16 bytes, where it is longer.
    tail: u128,
    /// Where the piece is in [`Shape::text`], and its length.
    at: u32,
    len: u32,
    slot: Slot,
}

/// What may follow a piece of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// The record's end.
    End,
    /// A string's text, without escapes or control characters (its quotes are in the pieces
    /// around it); captured by the targets in the mask, if any.
    Str(u64),
    /// An integer of at most 18 digits, where a pointer leads; captured by the targets in the
    /// mask, if any.
    Int(u64),
    /// Any number, where no pointer leads.
    Number,
}

impl Shape {
    /// Reads `text` through this shape (see [`Shapes::read`]); `None` leaves `caps` partly
    /// written.
    #[inline]
    fn read<'a>(&self, text: &'a str, caps: &mut Caps<'a>) -> Option<()> {
        let bytes = text.as_bytes();
        let mut pos = 0;
        for part in &self.parts {
            pos = self.piece(bytes, pos, part)?;
            match part.slot {
                Slot::End => return (pos == bytes.len()).then_some(()),
                Slot::Str(here) => {
                    // (a stop that is no quote, an escape or a control character, fails the
                    // next piece, which starts with the closing quote)
                    let end = crate::swar::string_stop(bytes, pos)?;
                    if here != 0 {
                        // (both ends are ASCII quotes: char boundaries)
                        put(caps, here, Cap::Str(Cow::Borrowed(text.get(pos..end)?)));
                    }
                    pos = end;
                }
                Slot::Int(here) => {
                    let start = pos;
                    pos = number::integer_end(bytes, pos)?;
                    // (the scan's captured integers only, captured here or not: any other
                    // integer is the scan's)
                    let value = number::captured_integer(&bytes[start..pos])?;
                    if here != 0 {
                        for i in bits(here & 0b111) {
                            caps.written[i] = text.get(start..pos);
                        }
                        put(caps, here, Cap::Int(value));
                    }
                }
                Slot::Number => pos = number::number_at(bytes, pos)?.end,
            }
        }
        None
    }

    /// Where `part`'s piece of text ends in `bytes` when it is there at `pos`.
    #[inline]
    fn piece(&self, bytes: &[u8], pos: usize, part: &Part) -> Option<usize> {
        let len = part.len as usize;
        let end = pos + len;
        match bytes.get(pos..pos + 16) {
            Some(chunk) => {
                let x = u128::from_le_bytes(chunk.try_into().ok()?);
                if (x ^ part.head) & part.mask != 0 {
                    return None;
                }
                if len > 16 {
                    // (its last 16 bytes: a key of up to 32 with one more compare)
                    let tail = bytes.get(end.checked_sub(16)?..end)?;
                    let y = u128::from_le_bytes(tail.try_into().ok()?);
                    if y != part.tail {
                        return None;
                    }
                    let at = part.at as usize;
                    if len > 32 && bytes[pos + 16..end - 16] != self.text[at + 16..at + len - 16] {
                        return None;
                    }
                }
            }
            // (the record's last bytes; compared in words where they are few, as they are at
            // the end of a record: a call to `memcmp` was 1.6 % of a Nexmark Q5 run, `perf`)
            None => {
                let at = part.at as usize;
                if !crate::short_copy::same(bytes.get(pos..end)?, &self.text[at..at + len]) {
                    return None;
                }
            }
        }
        Some(end)
    }

    /// The shape of `text`, a record the scan accepted by `plan`; `None` for one with an array,
    /// an escape, a captured literal or object, or past the bounds.
    fn of(text: &str, plan: &Plan) -> Option<Shape> {
        if text.len() > MAX_SHAPE_BYTES {
            return None;
        }
        let mut b = Builder {
            bytes: text.as_bytes(),
            pos: 0,
            plan,
            shape: Shape {
                parts: Vec::new(),
                text: Vec::new(),
            },
            piece: 0,
        };
        b.ws();
        b.value(Some(0), 0)?;
        b.ws();
        if b.pos != b.bytes.len() {
            return None;
        }
        b.slot(Slot::End)?;
        Some(b.shape)
    }
}

/// Builds a [`Shape`] from a record, walking it as the scan does.
struct Builder<'a, 'p> {
    bytes: &'a [u8],
    pos: usize,
    plan: &'p Plan,
    shape: Shape,
    /// Where the piece of text being built starts in the shape's text.
    piece: usize,
}

impl Builder<'_, '_> {
    /// Takes the next `n` bytes into the piece of text.
    fn take(&mut self, n: usize) -> Option<()> {
        let taken = self.bytes.get(self.pos..self.pos + n)?;
        self.shape.text.extend_from_slice(taken);
        self.pos += n;
        Some(())
    }

    /// Takes JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.bytes.get(self.pos) {
            self.shape.text.push(self.bytes[self.pos]);
            self.pos += 1;
        }
    }

    /// Ends the piece of text with `slot` after it.
    fn slot(&mut self, slot: Slot) -> Option<()> {
        if self.shape.parts.len() > MAX_SLOTS {
            return None;
        }
        let piece = &self.shape.text[self.piece..];
        let mut head = [0u8; 16];
        let n = piece.len().min(16);
        head[..n].copy_from_slice(&piece[..n]);
        let tail = match piece.len().checked_sub(16) {
            Some(from) if from > 0 => piece[from..].try_into().map_or(0, u128::from_le_bytes),
            _ => 0,
        };
        self.shape.parts.push(Part {
            head: u128::from_le_bytes(head),
            mask: if n == 0 { 0 } else { u128::MAX >> (8 * (16 - n)) },
            tail,
            at: self.piece as u32,
            len: piece.len() as u32,
            slot,
        });
        self.piece = self.shape.text.len();
        Some(())
    }

    /// A string's end (`self.pos` at its first byte), when it has no escape or control
    /// character.
    fn plain_end(&self) -> Option<usize> {
        let end = crate::swar::string_stop(self.bytes, self.pos)?;
        (self.bytes[end] == b'"').then_some(end)
    }

    /// A value at plan node `node` (`None`: where no pointer leads), `depth` objects deep.
    fn value(&mut self, node: Option<usize>, depth: usize) -> Option<()> {
        let (here, on_way) = match node {
            Some(n) => (self.plan.here(n), true),
            None => (0, false),
        };
        match *self.bytes.get(self.pos)? {
            b'{' if here == 0 && depth < MAX_SHAPE_DEPTH => {
                self.take(1)?;
                self.ws();
                if self.bytes.get(self.pos) == Some(&b'}') {
                    return self.take(1);
                }
                loop {
                    self.ws();
                    if self.bytes.get(self.pos) != Some(&b'"') {
                        return None;
                    }
                    let start = self.pos + 1;
                    self.pos = start;
                    let end = self.plain_end()?;
                    let key = &self.bytes[start..end];
                    self.pos -= 1;
                    self.take(end + 1 - self.pos)?;
                    let child = node.and_then(|n| self.plan.child(n, key));
                    self.ws();
                    if self.bytes.get(self.pos) != Some(&b':') {
                        return None;
                    }
                    self.take(1)?;
                    self.ws();
                    self.value(child, depth + 1)?;
                    self.ws();
                    match self.bytes.get(self.pos)? {
                        b',' => self.take(1)?,
                        b'}' => return self.take(1),
                        _ => return None,
                    }
                }
            }
            b'"' => {
                self.take(1)?;
                self.slot(Slot::Str(here))?;
                self.pos = self.plain_end()?;
                self.take(1)
            }
            b'-' | b'0'..=b'9' if on_way => {
                self.slot(Slot::Int(here))?;
                let start = self.pos;
                self.pos = number::integer_end(self.bytes, start)?;
                // (a fraction or exponent: the scan's; it follows no integer's piece)
                let plain = number::captured_integer(&self.bytes[start..self.pos]).is_some()
                    && !matches!(self.bytes.get(self.pos), Some(b'.' | b'e' | b'E'));
                plain.then_some(())
            }
            b'-' | b'0'..=b'9' => {
                self.slot(Slot::Number)?;
                self.pos = number::number_at(self.bytes, self.pos)?.end;
                Some(())
            }
            b't' | b'f' | b'n' if here == 0 => {
                let word: &[u8] = match self.bytes[self.pos] {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if !self.bytes[self.pos..].starts_with(word) {
                    return None;
                }
                self.take(word.len())
            }
            // an array, a captured object or literal: the scan's
            _ => None,
        }
    }
}

/// Stores what the targets in `here` found (most values are one target's: stored in line).
#[inline(always)]
fn put<'a>(caps: &mut Caps<'a>, here: u64, cap: Cap<'a>) {
    if here.is_power_of_two() {
        *caps.slot(here.trailing_zeros() as usize) = cap;
    } else {
        capture(caps, here, cap);
    }
}

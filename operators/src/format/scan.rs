//! The fast path of the walk: a hand-rolled scanner over a record's bytes that validates the
//! JSON, follows the format's pointers and captures what they find, with no serde machinery and
//! eight bytes at a time through strings.
//!
//! It covers what producers write: no `\u` escape anywhere, no escape at all in a key on a
//! pointer's path or in a captured string, captured numbers that are plain integers of at most
//! 18 digits (or decimals, which are "a float"), modest nesting. On anything else, and on any
//! error, it gives up (`None`) and the serde walk (`walk.rs`) decides, with its exact rules and
//! error details. Where it answers, it answers as the walk does (property-tested in
//! `tests.rs`): so a record's verdict does not depend on which path read it.

use super::number;
use super::shape::Shapes;
use super::walk::{all_targets, bits, is_index, tokens, Cap, Caps};
use super::Format;
use std::borrow::Cow;

/// A number on a pointer's way with more characters than this before its fraction is left to
/// the walk (one of over 309 digits overflows a float, an error for serde_json there).
const MAX_WAY_DIGITS: usize = 19;

/// Nesting deeper than this is left to the walk (serde_json's own limit is 128 levels).
const MAX_DEPTH: usize = 100;

/// The format's pointers as a tree, built once per format (not per record): node 0 is the
/// record, each node knows the targets whose pointer ends there and the tokens leading on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    nodes: Vec<PlanNode>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PlanNode {
    /// The targets whose pointer ends here.
    here: u64,
    children: Vec<Child>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Child {
    /// The reference token: an object's key...
    token: Box<[u8]>,
    /// ...or, where it is one (RFC 6901: decimal, no leading zero), an array's index.
    index: Option<usize>,
    node: usize,
    /// Every target below this token (a key seen twice with some: the walk's error).
    targets: u64,
}

impl Plan {
    /// The tree of `format`'s targets (numbered as the walk numbers them).
    pub fn new(format: &Format) -> Plan {
        let mut nodes = vec![PlanNode::default()];
        for target in bits(all_targets(format)) {
            let mut at = 0;
            for token in tokens(format, target) {
                let found = nodes[at].children.iter().position(|c| *c.token == *token.as_bytes());
                let child = match found {
                    Some(c) => c,
                    None => {
                        let node = nodes.len();
                        nodes.push(PlanNode::default());
                        let index = token.parse::<usize>().ok().filter(|&i| is_index(token, i));
                        nodes[at].children.push(Child {
                            token: token.as_bytes().into(),
                            index,
                            node,
                            targets: 0,
                        });
                        nodes[at].children.len() - 1
                    }
                };
                nodes[at].children[child].targets |= 1 << target;
                at = nodes[at].children[child].node;
            }
            nodes[at].here |= 1 << target;
        }
        Plan { nodes }
    }

    /// The targets whose pointer ends at node `node`.
    pub(super) fn here(&self, node: usize) -> u64 {
        self.nodes[node].here
    }

    /// Which of node `node`'s children (its place among them) object key `key` leads to.
    pub(super) fn child_place(&self, node: usize, key: &[u8]) -> Option<usize> {
        self.nodes[node].children.iter().position(|c| *c.token == *key)
    }

    /// The child of node `node` that object key `key` leads to.
    pub(super) fn child(&self, node: usize, key: &[u8]) -> Option<usize> {
        self.child_place(node, key).map(|c| self.nodes[node].children[c].node)
    }
}

/// Members of an object remembered per plan node (a wider object's later members are read
/// as ever).
const KNOWN_MEMBERS: usize = 16;

/// The keys of the last records, as written: a producer writes its records' members in one
/// order, so the scan remembers, for each object on the pointers' way, the `"key":` text of
/// its first members (those of at most 16 bytes) and which child each led to. A member whose
/// bytes are that text byte for byte is read with one 16-byte compare, instead of searching
/// for the key's end and comparing it with the children (on a Nexmark bid, eight keys a
/// line). Remembered text was a valid key followed by its colon, so the same bytes read the
/// same: the verdict and the captures do not depend on what is remembered (property-tested).
/// Bounded: [`KNOWN_MEMBERS`] per plan node.
#[derive(Clone, Debug, Default)]
pub struct Keys {
    /// Per plan node, its first [`KNOWN_MEMBERS`] members (node `n`'s member `m` at
    /// `n * KNOWN_MEMBERS + m`, every node's once one is remembered); none yet where `len`
    /// is 0.
    known: Vec<KnownKey>,
    /// The shapes of the last records, which read a record of one before any key is looked
    /// at.
    shapes: Shapes,
    /// Members read through `known` (for the tests).
    #[cfg(test)]
    hits: usize,
}

#[cfg(test)]
impl Keys {
    /// How many members are remembered.
    pub(super) fn remembered(&self) -> usize {
        self.known.iter().filter(|k| k.len > 0).count()
    }

    /// How many members were read through what is remembered.
    pub(super) fn hits(&self) -> usize {
        self.hits
    }

    /// How many records were read through a remembered shape.
    pub(super) fn shape_hits(&self) -> usize {
        self.shapes.hits()
    }

    /// How many shapes were tried to build.
    pub(super) fn shape_builds(&self) -> usize {
        self.shapes.builds()
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct KnownKey {
    /// `"key":` as written, little-endian, the bytes past it zero.
    text: u128,
    /// The bits of `text`'s bytes (kept, not derived from `len`: the shift on every member
    /// was 1.02× Nexmark Q5's wall time).
    mask: u128,
    /// Its length in bytes (at most 16; 0: nothing known).
    len: u8,
    /// The child it leads to (an index into the node's children), or [`NOT_A_CHILD`].
    child: u8,
}

/// A remembered member that leads to no child.
const NOT_A_CHILD: u8 = u8::MAX;

/// Where node `node`'s member `member` is remembered (`None`: past what is kept).
#[inline]
fn slot(node: usize, member: usize) -> Option<usize> {
    (member < KNOWN_MEMBERS).then_some(node * KNOWN_MEMBERS + member)
}

/// Scans `text` into `caps` (which must hold `Cap::Missing` everywhere) by `plan` (of
/// `format`), reading a record of a kept shape through it, and keys seen before through `keys`
/// (only ever used with `plan`), and remembering new ones: `Some` when the record is valid
/// JSON and every capture is certain; `None` leaves `caps` partly written.
pub fn scan<'a>(text: &'a str, plan: &Plan, keys: &mut Keys, caps: &mut Caps<'a>) -> Option<()> {
    if keys.shapes.read(text, caps) {
        return Some(());
    }
    let mut s = Scanner {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        plan,
        keys,
    };
    s.ws();
    s.value(0, 0, caps)?;
    s.ws();
    if s.pos != s.bytes.len() {
        return None;
    }
    keys.shapes.learn(text, plan);
    Some(())
}

struct Scanner<'a, 'p> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    plan: &'p Plan,
    keys: &'p mut Keys,
}

impl<'a> Scanner<'a, '_> {
    /// The child (or [`NOT_A_CHILD`]) of member `member` of the object at `node` when its key
    /// (`self.pos` at its opening quote) is the one remembered, and then steps past its colon.
    #[inline]
    fn known_key(&mut self, node: usize, member: usize) -> Option<u8> {
        let known = *self.keys.known.get(slot(node, member)?)?;
        let chunk = self.bytes.get(self.pos..self.pos + 16)?;
        let x = u128::from_le_bytes(chunk.try_into().ok()?);
        if known.len == 0 || (x ^ known.text) & known.mask != 0 {
            return None;
        }
        self.pos += usize::from(known.len);
        #[cfg(test)]
        {
            self.keys.hits += 1;
        }
        Some(known.child)
    }

    /// Remembers member `member` of the object at `node`: its key from `start` (its opening
    /// quote) to `self.pos` (past its closing quote), when a colon follows at once, and the
    /// child it leads to.
    #[inline]
    fn remember_key(&mut self, node: usize, member: usize, start: usize, child: Option<usize>) {
        let len = self.pos + 1 - start;
        let (Some(slot), Some(b':'), true) = (slot(node, member), self.peek(), len <= 16) else {
            return;
        };
        // (a plan has at most 64 children a node: each leads to a target)
        let child = match child.map(u8::try_from) {
            None => NOT_A_CHILD,
            Some(Ok(c)) if c != NOT_A_CHILD => c,
            Some(_) => return,
        };
        let mut text = [0u8; 16];
        text[..len].copy_from_slice(&self.bytes[start..start + len]);
        if self.keys.known.len() <= slot {
            self.keys.known = vec![KnownKey::default(); self.plan.nodes.len() * KNOWN_MEMBERS];
        }
        self.keys.known[slot] = KnownKey {
            text: u128::from_le_bytes(text),
            mask: u128::MAX >> (8 * (16 - len)),
            len: len as u8,
            child,
        };
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips JSON whitespace.
    #[inline]
    fn ws(&mut self) {
        // (compact JSON has none: one comparison in the usual case)
        while let Some(&b) = self.bytes.get(self.pos) {
            if b > b' ' || !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                return;
            }
            self.pos += 1;
        }
    }

    /// Consumes `b` (after whitespace) or gives up.
    #[inline]
    fn expect(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek()? == b).then(|| self.pos += 1)
    }

    /// Consumes the literal `lit` (`true`, `false`, `null`).
    #[inline]
    fn literal(&mut self, lit: &[u8]) -> Option<()> {
        self.bytes[self.pos..].starts_with(lit).then(|| self.pos += lit.len())
    }

    /// The position of the next `"`, `\` or control character at or after `self.pos`.
    #[inline]
    fn string_stop(&self) -> Option<usize> {
        crate::swar::string_stop(self.bytes, self.pos)
    }

    /// A string without escapes (`self.pos` at its opening quote), borrowed from the record.
    #[inline]
    fn plain_string(&mut self) -> Option<&'a str> {
        let start = self.pos + 1;
        let end = self.plain_end()?;
        // both ends are ASCII quotes: char boundaries of the UTF-8 text
        self.text.get(start..end)
    }

    /// The bytes of a string without escapes (`self.pos` at its opening quote): an object's
    /// key, compared as bytes (no char boundaries to check).
    #[inline]
    fn plain_bytes(&mut self) -> Option<&'a [u8]> {
        let start = self.pos + 1;
        let end = self.plain_end()?;
        self.bytes.get(start..end)
    }

    /// Steps past a string without escapes (`self.pos` at its opening quote); where it ends.
    #[inline]
    fn plain_end(&mut self) -> Option<usize> {
        self.pos += 1;
        let end = self.string_stop()?;
        if self.bytes[end] != b'"' {
            return None;
        }
        self.pos = end + 1;
        Some(end)
    }

    /// Skips a string (`self.pos` at its opening quote); `\u` escapes are left to the walk.
    #[inline]
    fn skip_string(&mut self) -> Option<()> {
        self.pos += 1;
        loop {
            self.pos = self.string_stop()?;
            match self.bytes[self.pos] {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => match self.bytes.get(self.pos + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.pos += 2,
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    /// Consumes a JSON number; whether it has a fraction, and whether an exponent.
    fn number(&mut self) -> Option<(bool, bool)> {
        let number = number::number_at(self.bytes, self.pos)?;
        self.pos = number.end;
        Some((number.fraction, number.exponent))
    }

    /// A captured number: an integer of at most 18 digits; anything else is the walk's.
    fn captured_number(&mut self) -> Option<Cap<'a>> {
        let start = self.pos;
        let (fraction, exponent) = self.number()?;
        if fraction || exponent {
            // the walk reads its value (serde_json's, whichever path reads the record; long
            // exponent forms may overflow)
            return None;
        }
        number::captured_integer(&self.bytes[start..self.pos]).map(Cap::Int)
    }

    /// Skips any value, `depth` levels deep (a scalar here, a container out of line: most
    /// skipped values are strings and numbers).
    #[inline]
    fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            // (most skipped numbers are plain integers ending a member: read in line)
            b'1'..=b'9' => {
                let end = crate::swar::digits_end(self.bytes, self.pos + 1);
                match self.bytes.get(end) {
                    Some(b',' | b'}') => {
                        self.pos = end;
                        Some(())
                    }
                    _ => self.number().map(|_| ()),
                }
            }
            b'-' | b'0' => self.number().map(|_| ()),
            _ => self.skip_other(depth),
        }
    }

    /// Skips a container or a literal, `depth` levels deep.
    #[inline(never)]
    fn skip_other(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' => {
                self.enter(depth)?;
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Some(());
                }
                loop {
                    self.ws();
                    if self.peek()? != b'"' {
                        return None;
                    }
                    self.skip_string()?;
                    self.expect(b':')?;
                    self.ws();
                    self.skip(depth + 1)?;
                    if self.next_member(b'}')? {
                        return Some(());
                    }
                }
            }
            b'[' => {
                self.enter(depth)?;
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Some(());
                }
                loop {
                    self.ws();
                    self.skip(depth + 1)?;
                    if self.next_member(b']')? {
                        return Some(());
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => None,
        }
    }

    /// Steps into a container (`self.pos` at its opening bracket), then past whitespace.
    #[inline]
    fn enter(&mut self, depth: usize) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.pos += 1;
        self.ws();
        Some(())
    }

    /// After a member: `,` (another follows: false) or `close` (the container ends: true).
    #[inline]
    fn next_member(&mut self, close: u8) -> Option<bool> {
        self.ws();
        let b = self.peek()?;
        self.pos += 1;
        match b {
            b',' => Some(false),
            _ if b == close => Some(true),
            _ => None,
        }
    }

    /// A value at plan node `node` (a value no pointer leads into is `skip`ped instead),
    /// `depth` levels deep.
    fn value(&mut self, node: usize, depth: usize, caps: &mut Caps<'a>) -> Option<()> {
        let plan = self.plan;
        let here = plan.nodes[node].here;
        let cap = match self.peek()? {
            b'{' => {
                capture(caps, here, Cap::Other("an object"));
                return self.object(node, depth, caps);
            }
            b'[' => {
                capture(caps, here, Cap::Other("an array"));
                return self.array(node, depth, caps);
            }
            b'"' => Cap::Str(Cow::Borrowed(self.plain_string()?)),
            b't' => self.literal(b"true").map(|()| Cap::Bool(true))?,
            b'f' => self.literal(b"false").map(|()| Cap::Bool(false))?,
            b'n' => self.literal(b"null").map(|()| Cap::Null)?,
            // a number on a pointer's way (none ends here) is skipped, unless it may overflow a
            // float: the walk reads it, and serde_json rejects the record (a float at a target
            // is the walk's)
            b'-' | b'0'..=b'9' if here == 0 => {
                let start = self.pos;
                let (_, exponent) = self.number()?;
                let integer = self.bytes[start..self.pos].split(|&b| b == b'.').next()?;
                return (!exponent && integer.len() <= MAX_WAY_DIGITS).then_some(());
            }
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                let cap = self.captured_number()?;
                // (only an integer comes back: the scan leaves other numbers to the walk)
                for i in bits(here & 0b111) {
                    caps.written[i] = self.text.get(start..self.pos);
                }
                cap
            }
            _ => return None,
        };
        capture(caps, here, cap);
        Some(())
    }

    /// An object at plan node `node`, whose keys may lead on to its children.
    fn object(&mut self, node: usize, depth: usize, caps: &mut Caps<'a>) -> Option<()> {
        let children = &self.plan.nodes[node].children;
        if children.is_empty() {
            return self.skip(depth);
        }
        self.enter(depth)?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Some(());
        }
        let mut seen = 0u64;
        let mut member = 0;
        loop {
            self.ws();
            let child = match self.known_key(node, member) {
                // (past its colon already)
                Some(known) => children.get(usize::from(known)),
                None => {
                    let start = self.pos;
                    if self.peek()? != b'"' {
                        return None;
                    }
                    let key = self.plain_bytes()?;
                    let found = self.plan.child_place(node, key);
                    self.remember_key(node, member, start, found);
                    self.expect(b':')?;
                    found.map(|c| &children[c])
                }
            };
            if let Some(c) = child {
                if seen & c.targets != 0 {
                    return None; // a duplicate key on a path: the walk's error
                }
                seen |= c.targets;
            }
            member += 1;
            self.ws();
            match child {
                Some(c) => self.value(c.node, depth + 1, caps)?,
                // (most members: skipped in line, without a call of the recursive `value`)
                None => self.skip(depth + 1)?,
            }
            if self.next_member(b'}')? {
                return Some(());
            }
        }
    }

    /// An array at plan node `node`, whose indices may lead on to its children.
    fn array(&mut self, node: usize, depth: usize, caps: &mut Caps<'a>) -> Option<()> {
        let children = &self.plan.nodes[node].children;
        if children.iter().all(|c| c.index.is_none()) {
            return self.skip(depth);
        }
        self.enter(depth)?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Some(());
        }
        let mut index = 0;
        loop {
            self.ws();
            let child = children.iter().find(|c| c.index == Some(index));
            match child {
                Some(c) => self.value(c.node, depth + 1, caps)?,
                None => self.skip(depth + 1)?,
            }
            if self.next_member(b']')? {
                return Some(());
            }
            index += 1;
        }
    }
}

/// Stores what the targets in `here` found (moved into the last, cloned for the others: most
/// values are one target's).
#[inline]
pub(super) fn capture<'a>(caps: &mut Caps<'a>, here: u64, cap: Cap<'a>) {
    if here == 0 {
        return;
    }
    let last = 63 - here.leading_zeros() as usize;
    for i in bits(here & !(1 << last)) {
        *caps.slot(i) = cap.clone();
    }
    *caps.slot(last) = cap;
}

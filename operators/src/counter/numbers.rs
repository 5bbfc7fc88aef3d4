//! Group numbers: a dense `u32` per group key (`country=US`), so that what is kept per group
//! is indexed by a number instead of hashed by its text. A group's text stays its identity:
//! numbers are given in arrival order, which depends on workers, batches and restores, so
//! nothing may be ordered by them (output orders groups by text).
//!
//! Numbers are reference counted like item records (see `interner`): a number is freed when
//! its last reference goes and is reused by the next new group, so the numbers in use stay as
//! few as the groups alive, whatever the input's values.
//!
//! The counter keeps one set for its numbered shapes (per-group windows counting events, when
//! it numbers groups: see `counter::NUMBERED`), and [`GroupTops`](super::group_tops) one for an
//! emission.

use crate::hash::item_hash;
use crate::short_copy::le_word;
use rustc_hash::FxHashMap;

/// A group's number in its [`GroupNumbers`]. Deliberately not `Ord` (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct GroupNo(u32);

impl GroupNo {
    /// The number `n`.
    #[inline(always)]
    pub(super) fn from_raw(n: u32) -> GroupNo {
        GroupNo(n)
    }

    /// Its number.
    #[inline(always)]
    pub(super) fn raw(self) -> u32 {
        self.0
    }

    /// Its place in a `Vec` indexed by number.
    #[inline]
    pub(super) fn index(self) -> usize {
        self.0 as usize
    }
}

/// One numbered group.
struct Numbered {
    text: Box<str>,
    /// The key shape whose group it is (a group key names its dims, so one text is one shape's).
    shape: u8,
    /// `item_hash(text)`: what the admission of groups compares (see `group::admission`).
    hash: u64,
    refs: u32,
}

/// The numbers of one set of groups.
#[derive(Default)]
pub(super) struct GroupNumbers {
    /// By number; `None` for a free one.
    groups: Vec<Option<Numbered>>,
    /// Free numbers, the next one last.
    free: Vec<u32>,
    /// The numbers of groups of at most 16 bytes, by their bytes as a number (a group holds no
    /// NUL, so the number tells them apart: see `le_word`): found without a string compare.
    short: FxHashMap<u128, GroupNo>,
    /// The numbers of longer groups.
    long: FxHashMap<Box<str>, GroupNo>,
}

impl GroupNumbers {
    /// The number of `group`, if it has one.
    #[inline]
    pub(super) fn find(&self, group: &str) -> Option<GroupNo> {
        match group.len() {
            0..=16 => self.short.get(&le_word(group.as_bytes())),
            _ => self.long.get(group),
        }
        .copied()
    }

    /// The number of `group` if it has one that a counter references (so it stays this group's
    /// until a counter is freed, which a run of events does not do).
    #[inline]
    pub(super) fn find_referenced(&self, group: &str) -> Option<GroupNo> {
        self.find(group).filter(|n| self.numbered(*n).refs > 0)
    }

    /// The number of `group`, of key shape `shape`, numbering it if new (with no reference:
    /// retain it, or release it with [`Self::release_unreferenced`]).
    pub(super) fn number(&mut self, group: &str, shape: u8) -> GroupNo {
        if let Some(n) = self.find(group) {
            debug_assert_eq!(self.shape(n), shape, "group {group:?} of two shapes");
            return n;
        }
        let numbered = Numbered {
            text: group.into(),
            shape,
            hash: item_hash(group),
            refs: 0,
        };
        let n = match self.free.pop() {
            Some(n) => {
                self.groups[n as usize] = Some(numbered);
                GroupNo(n)
            }
            None => {
                let n = u32::try_from(self.groups.len()).expect("more than 4 billion live groups on one worker");
                self.groups.push(Some(numbered));
                GroupNo(n)
            }
        };
        match group.len() {
            0..=16 => self.short.insert(le_word(group.as_bytes()), n),
            _ => self.long.insert(group.into(), n),
        };
        n
    }

    fn numbered(&self, n: GroupNo) -> &Numbered {
        self.groups[n.index()].as_ref().expect("a live group number")
    }

    /// The group key of a number.
    pub(super) fn text(&self, n: GroupNo) -> &str {
        &self.numbered(n).text
    }

    /// The key shape of a number's group.
    #[inline]
    pub(super) fn shape(&self, n: GroupNo) -> u8 {
        self.numbered(n).shape
    }

    /// `item_hash` of the group key of a number.
    pub(super) fn hash(&self, n: GroupNo) -> u64 {
        self.numbered(n).hash
    }

    /// Adds a reference to a number.
    pub(super) fn retain(&mut self, n: GroupNo) {
        if let Some(g) = &mut self.groups[n.index()] {
            g.refs += 1;
        }
    }

    /// Drops a reference; frees the number when none are left.
    pub(super) fn release(&mut self, n: GroupNo) {
        let Some(g) = &mut self.groups[n.index()] else {
            debug_assert!(false, "release of a free group number");
            return;
        };
        debug_assert!(g.refs > 0, "release without retain");
        g.refs = g.refs.saturating_sub(1);
        if g.refs == 0 {
            self.free(n);
        }
    }

    /// Frees a number that was given but never retained.
    pub(super) fn release_unreferenced(&mut self, n: GroupNo) {
        if self.groups[n.index()].as_ref().is_some_and(|g| g.refs == 0) {
            self.free(n);
        }
    }

    fn free(&mut self, n: GroupNo) {
        if let Some(g) = self.groups[n.index()].take() {
            match g.text.len() {
                0..=16 => self.short.remove(&le_word(g.text.as_bytes())),
                _ => self.long.remove(&g.text),
            };
            self.free.push(n.0);
        }
    }

    /// Live numbers.
    pub(super) fn len(&self) -> usize {
        self.groups.len() - self.free.len()
    }

    /// Approximate heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        let texts: usize = self.groups.iter().flatten().map(|g| g.text.len()).sum();
        let long: usize = self.long.keys().map(|t| t.len()).sum();
        self.groups.capacity() * std::mem::size_of::<Option<Numbered>>()
            + self.free.capacity() * 4
            + self.short.capacity() * (16 + 4 + 1)
            + self.long.capacity() * (16 + 4 + 1)
            + texts
            + long
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Group keys: short, exactly 16 bytes, past 16, escaped, and ones whose `le_word`s would
    /// meet were a length not part of it.
    fn group(i: u8) -> String {
        match i % 8 {
            0 => format!("country=C{i}"),
            1 => "country=12345678".to_string(),
            2 => format!("country=a-name-longer-than-sixteen-{i}"),
            3 => "country=a%20b".to_string(),
            4 => String::new(),
            5 => "c=1".to_string(),
            6 => "c=1&d=2".to_string(),
            _ => format!("d=é{i}"),
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Number(u8),
        Retain(u8),
        Release(u8),
        Forget(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        (0u8..4, 0u8..24).prop_map(|(k, g)| match k {
            0 => Op::Number(g),
            1 => Op::Retain(g),
            2 => Op::Release(g),
            _ => Op::Forget(g),
        })
    }

    proptest! {
        /// Against a map of group key → references: a group keeps its number while numbered,
        /// its text and hash read back, freed numbers are reused before new ones are made
        /// (numbers stay below the most groups ever live at once), and live numbers are the
        /// model's groups.
        #[test]
        fn numbers_follow_the_model(ops in prop::collection::vec(op(), 0..300)) {
            let mut numbers = GroupNumbers::default();
            let mut model: BTreeMap<String, (GroupNo, u32)> = BTreeMap::new();
            let mut most_live = 0;
            for op in ops {
                match op {
                    Op::Number(g) => {
                        let text = group(g);
                        let n = numbers.number(&text, 1);
                        if let Some(&(had, _)) = model.get(&text) {
                            prop_assert_eq!(n, had);
                        } else {
                            prop_assert!(model.values().all(|&(m, _)| m != n), "a live number given twice");
                            model.insert(text.clone(), (n, 0));
                        }
                        most_live = most_live.max(model.len());
                        prop_assert!(n.index() < most_live, "a new number while one was free");
                        prop_assert_eq!(numbers.text(n), text.as_str());
                        prop_assert_eq!(numbers.hash(n), item_hash(&text));
                    }
                    Op::Retain(g) => {
                        if let Some((n, refs)) = model.get_mut(&group(g)) {
                            numbers.retain(*n);
                            *refs += 1;
                        }
                    }
                    Op::Release(g) => {
                        let text = group(g);
                        if let Some(&(n, refs)) = model.get(&text) {
                            if refs > 0 {
                                numbers.release(n);
                                if refs == 1 {
                                    model.remove(&text);
                                } else {
                                    model.insert(text, (n, refs - 1));
                                }
                            }
                        }
                    }
                    Op::Forget(g) => {
                        let text = group(g);
                        if let Some(&(n, refs)) = model.get(&text) {
                            numbers.release_unreferenced(n);
                            if refs == 0 {
                                model.remove(&text);
                            }
                        }
                    }
                }
                prop_assert_eq!(numbers.len(), model.len());
                prop_assert!(numbers.heap_bytes() >= model.keys().map(|t| t.len()).sum::<usize>());
                for (text, &(n, _)) in &model {
                    prop_assert_eq!(numbers.find(text), Some(n));
                }
                for g in 0..24 {
                    let text = group(g);
                    prop_assert_eq!(numbers.find(&text).is_some(), model.contains_key(&text));
                }
            }
        }
    }
}

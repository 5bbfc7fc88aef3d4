//! Which groups of a per-group window instance keep a list of their own.
//!
//! An instance with more groups than its window's `max_groups` keeps the `max_groups` whose
//! key hashes lowest (`item_hash` of the canonical key) and counts the events of every other
//! group in `(other)`. The choice depends only on the set of groups the instance counted an
//! event of, so a sealed instance makes the same choice for any worker count, batching, crash
//! and replay.
//!
//! Every worker must make that choice alike, but a worker sees only the items routed to it. So
//! each accepted event's group is announced to every worker (a [`GroupNote`], broadcast with the
//! control records of the event's epoch; see `notes`), and every worker's counter keeps the
//! announced hashes per instance here. When it builds an instance's lists it gives each admitted
//! group its own list and sums its keys of all the others into `(other)`: exact, since items
//! are disjoint across workers. Two groups whose hashes are equal are one here (both kept or
//! both folded; with 64-bit hashes, a theoretical case).

use crate::window::InstanceKey;
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};
use std::collections::BinaryHeap;

/// An announcement: instance `instance` counted an event of the group whose key hashes to `hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupNote {
    /// The instance (of a window with `by`).
    pub instance: InstanceKey,
    /// `item_hash` of the group's canonical key.
    pub hash: u64,
}

/// The groups announced for one instance, and which of them are admitted.
#[derive(Clone, Debug, Default)]
pub struct InstanceGroups {
    /// Every announced group hash (for the count of folded groups).
    seen: FxHashSet<u64>,
    /// The lowest `max_groups` of them; its top is the highest admitted hash once full.
    lowest: BinaryHeap<u64>,
    max_groups: usize,
}

/// What one more announcement did to an instance's admitted groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admitted {
    /// Known already, or a new group beyond `max_groups`: nothing changed.
    Unchanged,
    /// A new group with a list of its own; every group kept before keeps its list.
    Added,
    /// A new group took the place of the admitted group with the highest hash, which now
    /// counts in `(other)`: every worker's lists of the instance change.
    Displaced,
}

impl InstanceGroups {
    /// No groups yet, for a window with `max_groups`.
    pub fn new(max_groups: u32) -> InstanceGroups {
        InstanceGroups {
            max_groups: max_groups as usize,
            ..Default::default()
        }
    }

    /// Records a group of the instance.
    pub fn insert(&mut self, hash: u64) -> Admitted {
        if !self.seen.insert(hash) {
            return Admitted::Unchanged;
        }
        if self.lowest.len() < self.max_groups {
            self.lowest.push(hash);
            return Admitted::Added;
        }
        match self.lowest.peek() {
            Some(&top) if hash < top => {
                self.lowest.pop();
                self.lowest.push(hash);
                Admitted::Displaced
            }
            _ => Admitted::Unchanged,
        }
    }

    /// Whether the group with key hash `hash` keeps a list of its own (as of the groups seen).
    pub fn admits(&self, hash: u64) -> bool {
        if self.lowest.len() < self.max_groups {
            return self.max_groups > 0;
        }
        self.lowest.peek().is_some_and(|&top| hash <= top)
    }

    /// How many groups count in `(other)`.
    pub fn folded(&self) -> usize {
        self.seen.len() - self.lowest.len()
    }

    /// Every announced hash, ascending (for snapshots).
    pub fn hashes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.seen.iter().copied().collect();
        v.sort_unstable();
        v
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.seen.capacity() * 9 + self.lowest.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The admitted groups are the `max` lowest hashes of the set, whatever the order and
        /// repetition of the announcements; `Displaced` exactly when an admitted one left.
        #[test]
        fn admits_the_lowest_hashes(hashes in proptest::collection::vec(0u64..40, 0..60), max in 0u32..8) {
            let mut g = InstanceGroups::new(max);
            let mut admitted_before: Vec<u64> = Vec::new();
            for &h in &hashes {
                let what = g.insert(h);
                let mut set: Vec<u64> = g.hashes();
                set.truncate(max as usize);
                let left = admitted_before.iter().any(|a| !set.contains(a));
                prop_assert_eq!(what == Admitted::Displaced, left);
                admitted_before = set;
            }
            let mut all: Vec<u64> = hashes.clone();
            all.sort_unstable();
            all.dedup();
            for &h in &all {
                prop_assert_eq!(g.admits(h), all.iter().position(|x| *x == h).unwrap() < max as usize);
            }
            prop_assert_eq!(g.folded(), all.len().saturating_sub(max as usize));
            prop_assert_eq!(g.hashes(), all);
        }
    }
}

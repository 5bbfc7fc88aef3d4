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
//!
//! **Bounded**: an instance keeps the admitted hashes and, of the folded ones, only the
//! [`FOLDED_KEPT`] lowest: enough to count up to that many folded groups exactly and to
//! estimate more (the gauge `hotlist_overflow_groups`). Keeping every hash ever announced let
//! hostile input (a new dim value per event) grow a sketch window's state without limit, 8
//! bytes a group, however small its `max_groups`. What is kept is still a function of the set
//! of groups alone: the `max_groups` + [`FOLDED_KEPT`] lowest hashes.

use crate::window::{InstanceKey, WindowSpec};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Folded groups an instance keeps the hashes of (the lowest): up to this many folded groups
/// are counted exactly, more are estimated from them (a relative error of about
/// 1/√`FOLDED_KEPT`, 3 %). 16 KB or so per instance with groups beyond its `max_groups`.
pub const FOLDED_KEPT: usize = 1024;

/// An announcement: instance `instance` counted an event of the group whose key hashes to `hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupNote {
    /// The instance (of a window with `by`).
    pub instance: InstanceKey,
    /// `item_hash` of the group's canonical key.
    pub hash: u64,
}

/// The groups announced for one instance, and which of them are admitted.
#[derive(Clone, Debug)]
pub struct InstanceGroups {
    /// The lowest `max_groups` hashes announced: the admitted groups.
    admitted: BTreeSet<u64>,
    /// The lowest [`FOLDED_KEPT`] hashes announced above the admitted: the folded groups kept
    /// (all of them while there are fewer).
    folded: BTreeSet<u64>,
    max_groups: usize,
    /// [`FOLDED_KEPT`] (fewer in tests, to reach the bound).
    folded_kept: usize,
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
        InstanceGroups::keeping(max_groups, FOLDED_KEPT)
    }

    /// [`InstanceGroups::new`] keeping the hashes of `folded_kept` folded groups.
    fn keeping(max_groups: u32, folded_kept: usize) -> InstanceGroups {
        InstanceGroups {
            admitted: BTreeSet::new(),
            folded: BTreeSet::new(),
            max_groups: max_groups as usize,
            folded_kept,
        }
    }

    /// Records a group of the instance.
    pub fn insert(&mut self, hash: u64) -> Admitted {
        if self.admitted.contains(&hash) {
            return Admitted::Unchanged;
        }
        if self.admitted.len() < self.max_groups {
            // (nothing is folded before the admitted are full)
            self.admitted.insert(hash);
            return Admitted::Added;
        }
        match self.admitted.last() {
            Some(&top) if hash < top => {
                self.admitted.pop_last();
                self.admitted.insert(hash);
                self.fold(top);
                Admitted::Displaced
            }
            _ => {
                self.fold(hash);
                Admitted::Unchanged
            }
        }
    }

    /// Keeps `hash`, of a folded group, if it is among the [`FOLDED_KEPT`] lowest.
    fn fold(&mut self, hash: u64) {
        if self.folded.len() < self.folded_kept {
            self.folded.insert(hash);
        } else if self.folded.last().is_some_and(|&last| hash < last) && self.folded.insert(hash) {
            self.folded.pop_last();
        }
    }

    /// Whether the group with key hash `hash` keeps a list of its own (as of the groups seen).
    pub fn admits(&self, hash: u64) -> bool {
        if self.admitted.len() < self.max_groups {
            return self.max_groups > 0;
        }
        self.admitted.last().is_some_and(|&top| hash <= top)
    }

    /// What [`InstanceGroups::admits`] depends on: the number of groups admitted and the
    /// highest admitted hash. While it stays the same, so does every group's answer.
    pub fn state(&self) -> (usize, u64) {
        (self.admitted.len(), self.admitted.last().copied().unwrap_or(0))
    }

    /// How many groups count in `(other)`: exact below [`FOLDED_KEPT`], from there estimated
    /// from the kept hashes (with `j` hashes the lowest of `n` uniform ones, the highest of
    /// them is about `j / n` of the range: `n ≈ (j - 1) / (highest / 2⁶⁴)`).
    pub fn folded(&self) -> usize {
        let kept = self.folded.len();
        match self.folded.last() {
            Some(&highest) if kept >= self.folded_kept => {
                let j = (self.admitted.len() + kept) as f64;
                let share = (highest as f64 + 1.0) / 2f64.powi(64);
                let all = ((j - 1.0) / share).round() as usize;
                all.saturating_sub(self.admitted.len()).max(kept)
            }
            _ => kept,
        }
    }

    /// The hashes kept (every announced one while at most [`FOLDED_KEPT`] are folded),
    /// ascending (for snapshots: inserted again, they make the same groups).
    pub fn hashes(&self) -> Vec<u64> {
        self.admitted.iter().chain(&self.folded).copied().collect()
    }

    /// Approximate heap bytes (a B-tree's node holds up to 11 hashes, ~120 bytes).
    pub fn heap_bytes(&self) -> usize {
        (self.admitted.len() + self.folded.len()) * 12
    }
}

/// Per window with `by` dims, the most groups counted in `(other)` in one live instance of
/// `admission` (windows without such an instance are absent): the gauge
/// `hotlist_overflow_groups`, for the exact and the sketch counters alike.
pub fn most_folded(admission: &BTreeMap<InstanceKey, InstanceGroups>, windows: &[WindowSpec]) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for (key, groups) in admission {
        let n = groups.folded() as u64;
        if n > 0 {
            let e = out.entry(windows[key.window.0 as usize].name.clone()).or_default();
            *e = (*e).max(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The admitted groups are the `max` lowest hashes of the set, whatever the order and
        /// repetition of the announcements; `Displaced` exactly when an admitted one left; the
        /// hashes kept are the `max` + `kept` lowest, and the folded groups are counted
        /// exactly while fewer than `kept` (the model: every hash, in a sorted set).
        #[test]
        fn admits_the_lowest_hashes(
            hashes in proptest::collection::vec(0u64..40, 0..60),
            max in 0u32..8,
            kept in 1usize..12,
        ) {
            let mut g = InstanceGroups::keeping(max, kept);
            let mut all: BTreeSet<u64> = BTreeSet::new();
            let mut admitted_before: Vec<u64> = Vec::new();
            for &h in &hashes {
                let what = g.insert(h);
                all.insert(h);
                let set: Vec<u64> = all.iter().copied().take(max as usize).collect();
                let left = admitted_before.iter().any(|a| !set.contains(a));
                prop_assert_eq!(what == Admitted::Displaced, left);
                prop_assert_eq!(what == Admitted::Added, set.contains(&h) && !left && !admitted_before.contains(&h));
                admitted_before = set;
                let lowest: Vec<u64> = all.iter().copied().take(max as usize + kept).collect();
                prop_assert_eq!(g.hashes(), lowest);
                let folded = all.len().saturating_sub(max as usize);
                if folded < kept {
                    prop_assert_eq!(g.folded(), folded);
                } else {
                    prop_assert!(g.folded() >= kept);
                }
            }
            // a group keeps a list while the admitted are not full, else when its hash is at
            // most the highest admitted
            let top = (max as usize).checked_sub(1).and_then(|m| all.iter().copied().nth(m));
            for h in 0..40 {
                let model = if all.len() < max as usize { max > 0 } else { top.is_some_and(|t| h <= t) };
                prop_assert_eq!(g.admits(h), model);
            }
        }

        /// A snapshot's hashes inserted again (in any order) make the same groups.
        #[test]
        fn the_kept_hashes_restore_the_same_groups(
            hashes in proptest::collection::vec(any::<u64>(), 0..80),
            max in 0u32..8,
            kept in 1usize..12,
            seed in any::<u64>(),
        ) {
            let mut g = InstanceGroups::keeping(max, kept);
            for &h in &hashes {
                g.insert(h);
            }
            let mut again = g.hashes();
            // (a fixed shuffle: the order of the restore must not matter)
            again.sort_by_key(|h| h.wrapping_mul(seed | 1).rotate_left(17));
            let mut r = InstanceGroups::keeping(max, kept);
            for &h in &again {
                r.insert(h);
            }
            prop_assert_eq!(r.hashes(), g.hashes());
            prop_assert_eq!(r.folded(), g.folded());
            for &h in &hashes {
                prop_assert_eq!(r.admits(h), g.admits(h));
            }
        }
    }

    /// However many groups are announced, an instance keeps `max_groups` + [`FOLDED_KEPT`]
    /// hashes, and its count of folded groups is within 10 % of the truth (the estimate's
    /// standard error is ~3 % at the default `FOLDED_KEPT`).
    #[test]
    fn many_groups_keep_a_bounded_set_and_an_estimate() {
        for (max, groups) in [(4u32, 3_000usize), (100, 50_000), (10_000, 200_000)] {
            let mut g = InstanceGroups::new(max);
            for i in 0..groups {
                let h = crate::hash::item_hash(&format!("country=c{i}"));
                g.insert(h);
                g.insert(h); // announced twice: counted once
            }
            assert_eq!(g.hashes().len(), max as usize + FOLDED_KEPT);
            let truth = (groups - max as usize) as f64;
            let error = (g.folded() as f64 - truth).abs() / truth;
            assert!(error < 0.1, "{max} {groups}: {} folded, {error}", g.folded());
        }
    }
}

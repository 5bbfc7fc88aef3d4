//! `(other)`'s user counts of a per-group distinct-user instance, kept as events are counted,
//! so that an instance with groups beyond its `max_groups` emits incrementally too (see `emit`).
//!
//! `(other)`'s count of an item is its number of distinct users over the folded groups. A user
//! seen in two folded groups is one user, so the groups' counts cannot be summed, and without
//! these counts every emission recounted the instance: a paired instance (one pane, see
//! `pairs`) all its pane's (key, user) pairs, 1 s per emission on a 7d window of 4 M events (a
//! folded job ran 30× the time of an unfolded one); a user-keyed one (hopping windows, keys
//! `group NUL item NUL user`) all its panes' keys (15× on a `10m` window sliding `5m`).
//!
//! Which groups are folded is a function of the instance's admission state alone: of how many
//! groups are admitted and of the highest admitted hash (`InstanceGroups::state`). While that
//! state stays the same, a group that is folded stays folded, so the counts are exact when:
//! - built under one state from what the instance counted (a recount, at an emission): a
//!   paired instance's pane pairs, or a user-keyed instance's keys with a positive count;
//! - every (item, user) the instance gains after in a folded group is added: a paired pane's
//!   new pair ([`WindowedCounter::note_other`], when `add_pair` finds it new), or a user-keyed
//!   key counted in the instance for the first time (`note_user`, which keeps the instance's
//!   user counts per (group, item) the same way; a user-keyed instance keeps both or neither).
//!
//! A change of the state (a group displaced, or the admitted groups filling up) makes them
//! stale: the next emission recounts and builds them again. Displacements are rare: the
//! lowest `max_groups` hashes of a growing set change about `max_groups · ln(n / max_groups)`
//! times over `n` groups. Counts are not in snapshots: after a restore the forced recount
//! builds them.
//!
//! Memory: per item of `(other)` a 12-byte entry (a representative key, the count, the hash of
//! the item id); per (item, user) of the folded groups 8 bytes (paired: the representative and
//! the user's index) or 12 (user-keyed: the representative, a key naming the user, a hash);
//! and 8 bytes per item changed since the last emission. As large as the folded part of what
//! the instance counted, freed with the instance.

use super::pairs::{pair, unpair, Pairs};
use super::users::table_hash;
use super::{Pane, WindowedCounter};
use crate::group::split_key;
use crate::hash::item_hash;
use crate::interner::{Interner, ItemIdx};
use crate::window::InstanceKey;
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// An entry's count flag: changed since the last emission.
const CHANGED: u32 = 1 << 31;

/// Per item: a key of it in a folded group (its representative), its count (`CHANGED` or'ed
/// in), and the 32-bit hash of its item id.
type OtherEntry = (ItemIdx, u32, u32);

/// `(other)`'s user count per item, for one instance.
pub(super) struct OtherCounts {
    /// The admission state they were built under (`InstanceGroups::state`).
    pub(super) state: (usize, u64),
    table: HashTable<OtherEntry>,
    /// (representative, user) pairs counted (paired shapes: users are indices).
    pairs: Pairs,
    /// The same for user-keyed shapes (hopping distinct-user windows, whose keys hold their
    /// users' text): (representative, a key of that item and user, hash of the two).
    keyed: HashTable<(ItemIdx, ItemIdx, u32)>,
    /// Representatives of the entries changed since the last emission, with their hashes.
    changed: Vec<(ItemIdx, u32)>,
    /// The representatives `(other)` listed last (best first): with the changed ones, its
    /// next list's candidates. `None`: no list yet (the next one reads every entry).
    listed: Option<Vec<ItemIdx>>,
}

/// The item id of a counter key.
#[inline]
pub(super) fn item_of(key: &str) -> &str {
    split_key(key).1
}

/// The 32 bits an entry keeps of its item's `item_hash` (which every event carries from its
/// source: not computed again per pair).
#[inline]
fn kept_hash(item_hash: u64) -> u32 {
    (item_hash ^ (item_hash >> 32)) as u32
}

impl OtherCounts {
    /// The counts of the pairs of `pane` of shape `shape` whose group `folded` says is folded,
    /// under admission state `state`.
    pub(super) fn build<'a>(
        interner: &'a Interner,
        pane: Option<&Pane>,
        shape: u8,
        state: (usize, u64),
        mut folded: impl FnMut(&'a str) -> bool,
    ) -> OtherCounts {
        let mut other = OtherCounts::new(state);
        for p in pane.into_iter().flat_map(|p| p.pairs.iter()) {
            let (key, user) = unpair(p);
            let (group, item, _) = split_key(interner.id(key));
            if interner.shape(key) == shape && folded(group) {
                other.add(interner, key, user, item_hash(item), false);
            }
        }
        other
    }

    fn new(state: (usize, u64)) -> OtherCounts {
        OtherCounts {
            state,
            table: HashTable::new(),
            pairs: Pairs::default(),
            keyed: HashTable::new(),
            changed: Vec::new(),
            listed: None,
        }
    }

    /// The counts of a user-keyed shape's `keys` (`group NUL item NUL user`, each with a
    /// positive count in the instance) whose group `folded` says is folded, under admission
    /// state `state`.
    pub(super) fn build_keyed<'a>(
        interner: &'a Interner,
        keys: impl Iterator<Item = ItemIdx>,
        state: (usize, u64),
        mut folded: impl FnMut(&'a str) -> bool,
    ) -> OtherCounts {
        let mut other = OtherCounts::new(state);
        for key in keys {
            if folded(split_key(interner.id(key)).0) {
                other.add_keyed(interner, key, false);
            }
        }
        other
    }

    /// The entry of key `key`'s item (`hash`: its `item_hash`), made if new (count 0).
    fn entry<'t>(
        table: &'t mut HashTable<OtherEntry>,
        interner: &Interner,
        key: ItemIdx,
        hash: u64,
    ) -> &'t mut OtherEntry {
        let item = item_of(interner.id(key));
        let h = kept_hash(hash);
        match table.entry(
            table_hash(h),
            |e| e.2 == h && item_of(interner.id(e.0)) == item,
            |e| table_hash(e.2),
        ) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => v.insert((key, 0, h)).into_mut(),
        }
    }

    /// Counts the user of user-keyed key `key` (counted in the instance for the first time)
    /// for its item unless counted; `log`: mark the item changed.
    pub(super) fn add_keyed(&mut self, interner: &Interner, key: ItemIdx, log: bool) {
        let (_, item, user) = split_key(interner.id(key));
        let user = user.unwrap_or("");
        let e = OtherCounts::entry(&mut self.table, interner, key, item_hash(item));
        let rep = e.0;
        let h = {
            let h = rustc_hash::FxBuildHasher.hash_one((rep.0, user));
            (h ^ (h >> 32)) as u32
        };
        let user_of = |k: ItemIdx| split_key(interner.id(k)).2.unwrap_or("");
        match self.keyed.entry(
            table_hash(h),
            |x| x.0 == rep && x.2 == h && user_of(x.1) == user,
            |x| table_hash(x.2),
        ) {
            Entry::Occupied(_) => return, // this user was counted for the item already
            Entry::Vacant(v) => {
                v.insert((rep, key, h));
            }
        }
        OtherCounts::counted(e, &mut self.changed, log);
    }

    /// One more user for entry `e`; `log`: mark it changed.
    fn counted(e: &mut OtherEntry, changed: &mut Vec<(ItemIdx, u32)>, log: bool) {
        if log && e.1 & CHANGED == 0 {
            changed.push((e.0, e.2));
            e.1 |= CHANGED;
        }
        e.1 += 1;
    }

    /// Counts user `user` of key `key`'s item (whose `item_hash` is `hash`) unless counted;
    /// `log`: mark the item changed.
    pub(super) fn add(&mut self, interner: &Interner, key: ItemIdx, user: ItemIdx, hash: u64, log: bool) {
        let e = OtherCounts::entry(&mut self.table, interner, key, hash);
        if !self.pairs.insert(pair(e.0, user)) {
            return; // this user was counted for the item already
        }
        OtherCounts::counted(e, &mut self.changed, log);
    }

    /// The count of the item whose representative is `rep`.
    fn count(&self, interner: &Interner, rep: ItemIdx) -> u64 {
        let item = item_of(interner.id(rep));
        let h = kept_hash(item_hash(item));
        self.table
            .find(table_hash(h), |e| e.2 == h && item_of(interner.id(e.0)) == item)
            .map_or(0, |e| u64::from(e.1 & !CHANGED))
    }

    /// `(other)`'s next list's candidates, as (count, representative): its last list and the
    /// items changed since (each item's count only grows while the state holds, so its top K
    /// is among them), or every item before its first list. Clears the changes.
    pub(super) fn candidates(&mut self, interner: &Interner) -> Vec<(u64, ItemIdx)> {
        let changed = std::mem::take(&mut self.changed);
        for (rep, h) in &changed {
            // (an entry's representative never changes: found by it, no record read)
            if let Some(e) = self.table.find_mut(table_hash(*h), |e| e.0 == *rep) {
                e.1 &= !CHANGED;
            }
        }
        match self.listed.take() {
            Some(listed) => {
                let mut reps: Vec<ItemIdx> = listed.into_iter().chain(changed.into_iter().map(|(r, _)| r)).collect();
                reps.sort_unstable();
                reps.dedup();
                reps.into_iter().map(|r| (self.count(interner, r), r)).collect()
            }
            None => self.table.iter().map(|e| (u64::from(e.1 & !CHANGED), e.0)).collect(),
        }
    }

    /// Remembers the representatives of the list `(other)` just emitted.
    pub(super) fn set_listed(&mut self, reps: Vec<ItemIdx>) {
        self.listed = Some(reps);
    }

    /// Every (item, count), sorted (to compare with a recount when `checked`).
    pub(super) fn sorted(&self, interner: &Interner) -> Vec<(String, u32)> {
        let mut v: Vec<(String, u32)> = self
            .table
            .iter()
            .map(|e| (item_of(interner.id(e.0)).to_string(), e.1 & !CHANGED))
            .collect();
        v.sort();
        v
    }

    /// Approximate heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.table.capacity() * (std::mem::size_of::<OtherEntry>() + 1)
            + self.pairs.capacity() * 9
            + self.keyed.capacity() * 13
            + self.changed.capacity() * 8
            + self.listed.as_ref().map_or(0, |l| l.capacity() * 4)
    }
}

impl WindowedCounter {
    /// After pair (`key`, `user`) of paired shape `shape` was found new in the pane at `slot`
    /// of pane group `g` (`item_hash`: its event's): adds the user to `(other)`'s count of the
    /// key's item in each
    /// covering instance of the shape that keeps `(other)`'s counts, is in the state they were
    /// built under, and folds the key's group. (Every such instance accepted the event: they
    /// all end with the pane, see `pairs`.)
    #[inline(never)]
    pub(super) fn note_other(&mut self, g: usize, slot: usize, key: ItemIdx, user: ItemIdx, shape: u8, item_hash: u64) {
        let group = &self.groups[g];
        let start = group.slots[slot].as_ref().expect("live slot").start;
        let mut hash = None;
        for &window in &group.windows {
            if self.shapes.of_window(window.0 as usize) != shape {
                continue;
            }
            let instance = InstanceKey { window, start };
            let (Some(inst), Some(admission)) = (self.instances.get_mut(&instance), self.admission.get(&instance))
            else {
                continue;
            };
            let Some(other) = inst.other.as_mut().filter(|o| o.state == admission.state()) else {
                continue;
            };
            let h = *hash.get_or_insert_with(|| crate::hash::item_hash(split_key(self.interner.id(key)).0));
            if !admission.admits(h) {
                other.add(&self.interner, key, user, item_hash, true);
            }
        }
    }

    /// Whether instance `key`'s `(other)` counts are up to date (see the module docs).
    pub(super) fn other_counts_valid(&self, key: InstanceKey) -> bool {
        let state = self.admission.get(&key).map(|a| a.state());
        self.instances
            .get(&key)
            .and_then(|i| i.other.as_ref())
            .is_some_and(|o| Some(o.state) == state)
    }
}

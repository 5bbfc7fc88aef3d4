//! Per-instance user counts of distinct-user windows, kept up to date as events are counted so
//! that such windows emit incrementally (see `emit`).
//!
//! A distinct-user window counts keys `group NUL item NUL user`. In an instance `I`, a key's
//! count is `n_I(key) = Σ_p c_p(key) − x_I(key)` (its panes' counts minus `I`'s exclusions)
//! and an item's count is `d_I(group, item)`, the number of its keys with `n_I > 0`. Once an
//! instance's lists were recounted twice, it keeps `d_I` per (group, item) ([`UserCounts`],
//! built from the second recount: an instance that emits once before it seals, as in a
//! replay, never pays for them). From then on every counted event accepted by `I` raises
//! `n_I(key)` by one (an event excluded from `I` raises `c_p` and `x_I` alike), so
//! `d_I(group, item)` rises by one exactly when `n_I(key)` was 0 before the event:
//! [`WindowedCounter::note_user`], called before the event is counted, applies that and logs
//! the (group, item) as changed. The same test tells `(other)` of an instance with folded
//! groups a new (item, user) of a folded group (see `others`).
//!
//! The test is cheap in the common case: `n_I(key) = Σ_p (c_p(key) − e_{p,I}(key))`, where
//! `e_{p,I}` counts the events in pane `p` excluded from `I`, and every term is ≥ 0. So when
//! the event's pane holds the key already (`c_p > 0`) and no event of that pane was ever
//! excluded from an instance (`Pane::excluded` unset), `n_I(key) ≥ c_p > 0` for every `I`
//! covering it: nothing changes, at the cost of one look-up (a returning user). Otherwise each
//! covering instance that keeps counts and accepts the event sums the key over its panes.
//!
//! Memory: per instance that keeps counts, per (group, item) with a user in it, one 12-byte
//! entry (a representative key, the count and the hash of its `group NUL item`) in a hash table
//! (plus its control byte and free slots), and 8 bytes per (group, item) changed since the last
//! emission. Nothing per counter key. Counts are not in snapshots: after a restore the forced
//! recount rebuilds them.
//!
//! The entry keeps its hash so that neither the table's growth nor the changed entries' marks
//! read a representative's record: those reads were cache misses, one per entry moved (the
//! table's growth was 5 % of a distinct-user job, `perf`). Equality is still decided on the
//! keys' text: the hash only rules out a record read where it differs.

use super::{horizon, Counter, WindowedCounter};
use crate::group::split_key;
use crate::interner::{Interner, ItemIdx};
use crate::time::Millis;
use crate::window::InstanceKey;
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// The flag of an entry changed since the last emission (in its count's top bit).
const CHANGED: u32 = 1 << 31;

/// One entry: per (group, item), a key of it (its representative), its count (`CHANGED`
/// or'ed in) and [`part_hash`] of its `group NUL item`.
type UserEntry = (ItemIdx, u32, u32);

/// One instance's user count per (group, item).
pub(super) struct UserCounts {
    table: HashTable<UserEntry>,
    /// The representatives of the entries changed since the last emission (each once), with
    /// their hashes.
    changed: Vec<(ItemIdx, u32)>,
}

/// The `group NUL item` part of a counter key of a distinct-user window (`group NUL item NUL
/// user`: neither item nor user holds a NUL, so the part ends at the last one).
#[inline]
fn item_part(key: &str) -> &str {
    let end = key.bytes().rposition(|b| b == 0).unwrap_or(key.len());
    debug_assert_eq!(end, {
        let (group, item, _) = split_key(key);
        group.len() + 1 + item.len()
    });
    &key[..end]
}

/// The 32-bit hash an entry keeps of its `group NUL item`.
#[inline]
fn part_hash(part: &str) -> u32 {
    let h = rustc_hash::FxBuildHasher.hash_one(part);
    (h ^ (h >> 32)) as u32
}

/// The table hash of an entry's kept hash (its 32 bits in both halves: the table reads its
/// bucket from the low bits and its tag from the top ones).
#[inline]
pub(super) fn table_hash(h: u32) -> u64 {
    u64::from(h) << 32 | u64::from(h)
}

impl UserCounts {
    /// The counts of `keys` (keys with a positive count in the instance, each once).
    pub(super) fn build(interner: &Interner, keys: impl Iterator<Item = ItemIdx>) -> UserCounts {
        let mut users = UserCounts {
            table: HashTable::new(),
            changed: Vec::new(),
        };
        for key in keys {
            users.add(interner, key, false);
        }
        users
    }

    /// Adds a user to the (group, item) of `key`; `log`: mark it changed.
    pub(super) fn add(&mut self, interner: &Interner, key: ItemIdx, log: bool) {
        let part = item_part(interner.id(key));
        let h = part_hash(part);
        let entry = self.table.entry(
            table_hash(h),
            |e| e.2 == h && item_part(interner.id(e.0)) == part,
            |e| table_hash(e.2),
        );
        let flag = if log { CHANGED } else { 0 };
        match entry {
            Entry::Occupied(mut o) => {
                let e = o.get_mut();
                if log && e.1 & CHANGED == 0 {
                    self.changed.push((e.0, h));
                }
                e.1 = (e.1 + 1) | flag;
            }
            Entry::Vacant(v) => {
                v.insert((key, 1 | flag, h));
                if log {
                    self.changed.push((key, h));
                }
            }
        }
    }

    fn find(&self, interner: &Interner, part: &str) -> Option<&UserEntry> {
        let h = part_hash(part);
        self.table
            .find(table_hash(h), |e| e.2 == h && item_part(interner.id(e.0)) == part)
    }

    /// The user count of the (group, item) whose representative is `rep`.
    pub(super) fn count(&self, interner: &Interner, rep: ItemIdx) -> u64 {
        let part = item_part(interner.id(rep));
        self.find(interner, part).map_or(0, |e| u64::from(e.1 & !CHANGED))
    }

    /// The representative of (group, item) given as `group NUL item`.
    pub(super) fn rep(&self, interner: &Interner, part: &str) -> Option<ItemIdx> {
        self.find(interner, part).map(|e| e.0)
    }

    /// The representatives of the (group, item)s changed since the last call; clears the marks.
    pub(super) fn take_changed(&mut self) -> Vec<ItemIdx> {
        let changed = std::mem::take(&mut self.changed);
        changed
            .into_iter()
            .map(|(rep, h)| {
                // (an entry's representative never changes: found by it, no record read)
                if let Some(e) = self.table.find_mut(table_hash(h), |e| e.0 == rep) {
                    e.1 &= !CHANGED;
                }
                rep
            })
            .collect()
    }

    /// Every (group NUL item, count), sorted (to compare with a recount when `checked`).
    pub(super) fn sorted(&self, interner: &Interner) -> Vec<(String, u32)> {
        let mut v: Vec<(String, u32)> = self
            .table
            .iter()
            .map(|e| (item_part(interner.id(e.0)).to_string(), e.1 & !CHANGED))
            .collect();
        v.sort();
        v
    }

    /// Approximate heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.table.capacity() * (std::mem::size_of::<UserEntry>() + 1) + self.changed.capacity() * 8
    }
}

impl WindowedCounter {
    /// Before key `idx` of distinct-user shape `shape` is counted in the pane at `slot` of pane
    /// group `g`: adds a user to its (group, item) in each covering instance of that shape that
    /// keeps counts, accepts the event (ends after `late_h` and after its sealing horizon from
    /// `sealed_h`, as `count_slow` decides) and did not count the key yet.
    pub(super) fn note_user(
        &mut self,
        g: usize,
        slot: usize,
        idx: ItemIdx,
        shape: u8,
        late_h: Millis,
        sealed_h: Millis,
    ) {
        if !self.users_kept {
            return; // (a replay's instances keep none: see `remember_users`)
        }
        self.groups[g].settle(); // (its look-ups below)
        let group = &self.groups[g];
        let pane = group.slots[slot].as_ref().expect("live slot");
        let c = Counter::of(idx);
        if !pane.excluded && self.count_in(g, pane, c) > 0 {
            return; // counted in this pane, never excluded: in every covering instance
        }
        let pane_start = pane.start;
        for &window in &group.windows {
            if self.shapes.of_window(window.0 as usize) != shape {
                continue;
            }
            let spec = &self.windows[window.0 as usize];
            let sealed_w = horizon(sealed_h, &self.sealed_until, window);
            for start in spec.starts_covering(pane_start) {
                let end = spec.end_of(start);
                if end <= late_h || end <= sealed_w {
                    continue; // excluded or sealed: its count does not change
                }
                let key = InstanceKey { window, start };
                let excluded = match self.instances.get(&key) {
                    Some(inst) if inst.users.is_some() => inst.exclusions.get(&c).copied().unwrap_or(0),
                    _ => continue,
                };
                let counted: u64 = self.panes_of(key).1.flatten().map(|p| self.count_in(g, p, c)).sum();
                if counted > excluded {
                    continue; // the instance has counted the key already
                }
                let Some(inst) = self.instances.get_mut(&key) else {
                    continue;
                };
                if let Some(users) = inst.users.as_mut() {
                    users.add(&self.interner, idx, true);
                }
                // (`(other)`'s counts, when kept: a first user of the item in a folded group)
                if let Some(other) = inst.other.as_mut() {
                    let group = crate::group::group_of_key(self.interner.id(idx));
                    let folded = self
                        .admission
                        .get(&key)
                        .filter(|a| a.state() == other.state)
                        .is_some_and(|a| !a.admits(crate::hash::item_hash(group)));
                    if folded {
                        other.add_keyed(&self.interner, idx, true);
                    }
                }
            }
        }
    }

    /// Marks every live pane of instance `key` as having had an event excluded (a restore: its
    /// exclusions are per instance, not per pane).
    pub(super) fn mark_excluded(&mut self, key: InstanceKey) {
        let g = self.group_of(key.window);
        let spec = &self.windows[key.window.0 as usize];
        let group = &mut self.groups[g];
        let width = group.width.as_i64();
        let first = key.start.0.div_euclid(width);
        for n in first..first + spec.size.as_i64() / width {
            if let Some(&slot) = group.index.get(&n) {
                if let Some(p) = group.slots[slot].as_mut() {
                    p.excluded = true;
                }
            }
        }
    }
}

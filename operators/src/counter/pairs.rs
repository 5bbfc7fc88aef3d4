//! Paired distinct-user shapes: distinct users counted as (key, user) index pairs per pane.
//!
//! A distinct-user shape, global or per group, all of whose windows are tumbling and one pane
//! wide (and rank by count), is **paired**: its counter key is `group NUL item NUL` (no user)
//! and each pane keeps the set of (key index, user index) pairs it saw, users interned apart
//! (`pair_users`, shared by the job's paired shapes: an event has one user). An event counts
//! its key in the pane only when its pair is new there, so a key's pane count is its number of
//! distinct users in the pane; and since an instance of such a window is one pane, that is the
//! instance's count. Emission is then the events windows' (incremental, from the panes' change
//! logs): no user counts per instance, no recount, and no record per (item, user) key (figures
//! in `docs/benchmarks.md`). A per-group instance with groups in `(other)` too: `(other)` counts
//! an item's users once over its folded groups, not the sum of their counts, so the instance
//! keeps `(other)`'s user count per item, built from its pane's pairs at a recount and fed
//! each new pair of a folded group as it is counted (see `others`).
//!
//! Why the shape's windows must be one-pane tumbling windows: an instance of several panes
//! would count a user seen in two of them twice, and an event can be excluded from one
//! instance covering its pane only if another one covering it ends later — here every instance
//! of the shape covering a pane ends with it, so none of its events is ever excluded (an event
//! late for one is late for all: `count_slow` then counts it nowhere in the shape).
//!
//! Snapshots keep today's keys: a pane's pairs are written as `group NUL item NUL user` keys of
//! count 1, and a restore reads such keys (of any count: an older snapshot's) back into
//! pairs. A user is referenced once per pair that holds it and forgotten with its last pane.

use super::lookahead::{Lookahead, Looked};
use super::{Pane, WindowedCounter};
use crate::hash::item_hash;
use crate::interner::{Interner, ItemIdx, SlotPrefetch};
use crate::record::TimedEvent;
use crate::window::WindowSpec;
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// A pane's (key, user) pairs: a set of `u64`s whose slots can be prefetched before a run of
/// events is counted (a look-up waited for its cache miss: 16 % of a distinct-user job).
#[derive(Default)]
pub(super) struct Pairs {
    table: HashTable<u64>,
    slots: SlotPrefetch,
}

/// The hash of a pair.
#[inline(always)]
fn pair_hash(p: u64) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(p)
}

impl Pairs {
    /// An empty set with room for `n` pairs.
    pub(super) fn with_capacity(n: usize) -> Pairs {
        Pairs {
            table: HashTable::with_capacity(n),
            slots: SlotPrefetch::default(),
        }
    }

    /// Adds `p`; whether it is new.
    #[inline]
    pub(super) fn insert(&mut self, p: u64) -> bool {
        match self.table.entry(pair_hash(p), |&x| x == p, |&x| pair_hash(x)) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(p);
                true
            }
        }
    }

    /// Brings the slots of pairs `ps` into cache (see `SlotPrefetch`).
    #[inline]
    pub(super) fn prefetch(&mut self, ps: impl Iterator<Item = u64>) {
        self.slots = SlotPrefetch::of(&self.table, self.slots);
        for p in ps {
            self.slots.fetch(pair_hash(p));
        }
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub(super) fn capacity(&self) -> usize {
        self.table.capacity()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.table.iter().copied()
    }

    fn into_iter(self) -> impl Iterator<Item = u64> {
        self.table.into_iter()
    }
}

/// Per shape, whether it is paired: distinct users, and every window of it that
/// `counted` (see `WindowedCounter::counting`) is a tumbling window of its pane group's width
/// ranked by count. `widths[w]`: the pane width of window `w`'s group (`None`: not counted).
pub(super) fn paired_shapes(
    windows: &[WindowSpec],
    shapes: &super::Shapes,
    widths: &[Option<crate::time::Span>],
) -> Vec<bool> {
    (0..shapes.len() as u8)
        .map(|s| {
            s > 0
                && shapes.distinct_users(s)
                && windows.iter().enumerate().all(|(w, spec)| {
                    shapes.of_window(w) != s
                        || widths[w].is_none_or(|width| {
                            spec.size == spec.slide && spec.size == width && spec.rank.trend().is_none()
                        })
                })
        })
        .collect()
}

/// The pair of key `key` and user `user`.
#[inline]
pub(super) fn pair(key: ItemIdx, user: ItemIdx) -> u64 {
    u64::from(key.0) << 32 | u64::from(user.0)
}

/// The key and user of a pair.
#[inline]
pub(super) fn unpair(p: u64) -> (ItemIdx, ItemIdx) {
    (ItemIdx((p >> 32) as u32), ItemIdx(p as u32))
}

/// Releases the users of a dying pane's `pairs` (a user is forgotten with its last pair).
pub(super) fn release(users: &mut Interner, pairs: Pairs) {
    if pairs.is_empty() {
        return;
    }
    // (unsorted: users are few beside pairs, and sorting a pane's pairs' users cost 4 % of a
    // distinct-user job)
    users.release_all(pairs.into_iter().map(|p| unpair(p).1).collect());
}

/// A snapshot's key of a distinct-user shape, `group NUL item NUL user`, as a paired
/// shape's key (`group NUL item NUL`) and its user; `None` for a key without a user.
pub(super) fn split_pair(id: &str) -> Option<(&str, &str)> {
    let (_, _, user) = crate::group::split_key(id);
    let user = user?;
    let cut = id.len() - user.len();
    Some((&id[..cut], user))
}

/// The index of `user`, interned if new (no reference added).
#[inline]
pub(super) fn intern_user(users: &mut Interner, user: &str) -> ItemIdx {
    users.intern(user, item_hash(user))
}

impl Pane {
    /// Adds pair (`key`, `user`) to the pane; whether it is new there (the user then holds a
    /// reference more).
    #[inline]
    pub(super) fn add_pair(&mut self, users: &mut Interner, key: ItemIdx, user: ItemIdx) -> bool {
        let new = self.pairs.insert(pair(key, user));
        if new {
            users.retain(user);
        }
        new
    }
}

impl WindowedCounter {
    /// Whether shape `s` is paired (see the module docs).
    #[inline(always)]
    pub(super) fn is_paired(&self, s: u8) -> bool {
        self.paired.get(s as usize).copied().unwrap_or(false)
    }

    /// Prefetches, in each pane group's current pane, the slots of the pairs of the events of
    /// `run` that fall in it (`looked`: the run's keys and users), while their misses can
    /// overlap: each pair's look-up was a miss waited for alone.
    pub(super) fn prefetch_pairs(&mut self, run: &[TimedEvent], looked: &Lookahead) {
        let (paired, shapes) = (&self.paired, self.shapes.len());
        if !paired.contains(&true) {
            return;
        }
        for group in self.groups.iter_mut() {
            let Some((start, end, slot)) = group.cached else {
                continue;
            };
            let Some(pane) = group.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let group_shapes = &group.shapes;
            let pairs = run
                .iter()
                .enumerate()
                .filter(|(_, ev)| ev.ts >= start && ev.ts < end)
                .flat_map(|(e, _)| {
                    group_shapes.iter().filter_map(move |&s| {
                        if !paired[s as usize] {
                            return None;
                        }
                        let Looked::Key(w) = looked.of(e, shapes)[s as usize] else {
                            return None;
                        };
                        let (_, _, key) = looked.key(w);
                        let (_, user) = looked.user(w)?;
                        Some(pair(key?, user?))
                    })
                });
            pane.pairs.prefetch(pairs);
        }
    }

    /// Forgets user `u` if no pair holds it (it was interned for an event that was not counted
    /// or whose pairs were all known).
    #[inline]
    pub(super) fn release_unpaired(&mut self, u: ItemIdx) {
        self.pair_users.release_unreferenced(u);
    }
}

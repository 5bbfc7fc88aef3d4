//! Item records, interned once per worker.
//!
//! Counters are keyed by a dense `u32` index instead of the id string: 4 bytes per counter
//! instead of 24, and one string hash per event instead of one per window. Each record keeps
//! the id, a reference count (live counters using it) and, for the first of the job's pane
//! groups (1, 2 or [`INLINE_GROUPS`]), an **inline counter** for the item's newest pane: the common
//! event (same item, current pane) then touches one record instead of one hash map per window,
//! which is where the time went (cache misses). When the count drops to zero the record is
//! forgotten and its index reused, so memory follows the live state, not history.

use crate::record::ItemId;
use hashbrown::HashTable;

/// An interned item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemIdx(pub u32);

/// Pane groups with an inline counter in each record (others use pane maps only).
pub const INLINE_GROUPS: usize = 4;

/// An inline counter: the count of one (item, pane), where `pane` is relative to its group's
/// base pane, and the emit generation in which that count last went into its pane's change log
/// (the counter logs an item once per pane and generation: see `counter::emit`). Both share
/// 32 bits (24 for the count) so that a record keeps its size; `Inline::EMPTY` holds nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inline {
    /// Pane number relative to the group's base (`i32::MIN` = empty).
    pub pane: i32,
    /// Count (low 24 bits) and logged generation (high 8).
    bits: u32,
}

impl Inline {
    /// Nothing inline.
    pub const EMPTY: Inline = Inline {
        pane: i32::MIN,
        bits: 0,
    };

    /// The largest count an inline counter holds.
    pub const MAX_COUNT: u32 = (1 << 24) - 1;

    /// A counter of `count` (at most `MAX_COUNT`) for `pane`, logged in generation `logged`.
    #[inline]
    pub fn new(pane: i32, count: u32, logged: u8) -> Inline {
        debug_assert!(count <= Self::MAX_COUNT);
        Inline {
            pane,
            bits: count | (logged as u32) << 24,
        }
    }

    /// The count.
    #[inline]
    pub fn count(self) -> u32 {
        self.bits & Self::MAX_COUNT
    }

    /// The generation in which the count was last logged (0: none).
    #[inline]
    pub fn logged(self) -> u8 {
        (self.bits >> 24) as u8
    }

    /// Adds one to a count below `MAX_COUNT`.
    #[inline]
    pub fn increment(&mut self) {
        debug_assert!(self.count() < Self::MAX_COUNT);
        self.bits += 1;
    }

    /// Records that the count was logged in generation `g`.
    #[inline]
    pub fn set_logged(&mut self, g: u8) {
        self.bits = (self.bits & Self::MAX_COUNT) | (g as u32) << 24;
    }
}

/// An item record with `N` inline counters. No hash: the table's probe hash is recomputed
/// from the id when the table grows (8 bytes per record saved, an xxh3 of a short id per move).
struct Record<const N: usize> {
    id: ItemId,
    refs: u32,
    /// Which key shape the id is (0: a bare item id; else a counter key, see `group`).
    shape: u8,
    inline: [Inline; N],
}

/// The hash the table finds a record by: the hash of its whole id (for a bare id, its pinned
/// item hash; for a counter key, not its item's pinned hash, which every group and user of the
/// item share: finding keys by it alone would probe them all).
#[inline]
fn probe_hash(id: &str) -> u64 {
    crate::hash::item_hash(id)
}

/// The records of one inline width. The width is fixed per job (its pane groups, up to
/// [`INLINE_GROUPS`]): a one-window job's record is 40 bytes, not the 72 of four counters and
/// a stored hash, and the hot path still touches one record per event.
struct Records<const N: usize> {
    table: HashTable<u32>,
    records: Vec<Record<N>>,
    free: Vec<u32>,
    /// Heap bytes of the live ids longer than the inline 24 (kept as they come and go: the
    /// state gauge reads it every epoch, and summing it there walked every record).
    heap_ids: usize,
}

impl<const N: usize> Default for Records<N> {
    fn default() -> Self {
        Records {
            table: HashTable::new(),
            records: Vec::new(),
            free: Vec::new(),
            heap_ids: 0,
        }
    }
}

impl<const N: usize> Records<N> {
    #[inline]
    fn intern(&mut self, id: &str, probe: u64, shape: u8) -> ItemIdx {
        let records = &self.records;
        if let Some(&i) = self.table.find(probe, |&i| records[i as usize].id == id) {
            return ItemIdx(i);
        }
        let id = ItemId::from(id);
        if id.is_heap_allocated() {
            self.heap_ids += id.capacity();
        }
        let record = Record {
            id,
            refs: 0,
            shape,
            inline: [Inline::EMPTY; N],
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.records[i as usize] = record;
                i
            }
            None => {
                let i = u32::try_from(self.records.len()).expect("more than 4 billion live items on one worker");
                self.records.push(record);
                i
            }
        };
        let records = &self.records;
        self.table
            .insert_unique(probe, i, |&j| probe_hash(&records[j as usize].id));
        ItemIdx(i)
    }

    fn release(&mut self, idx: ItemIdx) {
        let r = &mut self.records[idx.0 as usize].refs;
        debug_assert!(*r > 0, "release without retain");
        *r = r.saturating_sub(1);
        if *r == 0 {
            let probe = probe_hash(&self.records[idx.0 as usize].id);
            if let Ok(entry) = self.table.find_entry(probe, |&i| i == idx.0) {
                entry.remove();
            }
            let rec = &mut self.records[idx.0 as usize];
            if rec.id.is_heap_allocated() {
                self.heap_ids -= rec.id.capacity();
            }
            rec.id = ItemId::default();
            rec.inline = [Inline::EMPTY; N];
            self.free.push(idx.0);
        }
    }

    fn heap_bytes(&self) -> usize {
        debug_assert_eq!(
            self.heap_ids,
            self.records
                .iter()
                .filter(|r| r.id.is_heap_allocated())
                .map(|r| r.id.capacity())
                .sum::<usize>()
        );
        self.table.capacity() * (4 + 1)
            + self.records.capacity() * std::mem::size_of::<Record<N>>()
            + self.free.capacity() * 4
            + self.heap_ids
    }
}

/// One record's reference count and inline counters, to change together: the hot path
/// resolves the record (and the table's width) once per count, not at every access.
pub struct RecordMut<'a> {
    refs: &'a mut u32,
    /// The inline counters, one per pane group that has one (see [`Interner::inline`]).
    pub inline: &'a mut [Inline],
}

impl RecordMut<'_> {
    /// Adds a reference (see [`Interner::retain`]).
    #[inline]
    pub fn retain(&mut self) {
        *self.refs += 1;
    }
}

/// The record table, at one of three inline widths.
pub struct Interner(Width);

enum Width {
    One(Records<1>),
    Two(Records<2>),
    Four(Records<INLINE_GROUPS>),
}

/// `$body` with `$r` bound to the records, whatever their width.
macro_rules! each {
    ($self:expr, $r:ident => $body:expr) => {
        match $self {
            Width::One($r) => $body,
            Width::Two($r) => $body,
            Width::Four($r) => $body,
        }
    };
}

impl Default for Interner {
    fn default() -> Self {
        Interner::new()
    }
}

impl Interner {
    /// An empty table with [`INLINE_GROUPS`] inline counters per record.
    pub fn new() -> Interner {
        Interner::with_inline_groups(INLINE_GROUPS)
    }

    /// An empty table for a counter of `groups` pane groups: inline counters for the first
    /// min(`groups`, [`INLINE_GROUPS`]) of them (1, 2 or 4 per record).
    pub fn with_inline_groups(groups: usize) -> Interner {
        Interner(match groups {
            0 | 1 => Width::One(Records::default()),
            2 => Width::Two(Records::default()),
            _ => Width::Four(Records::default()),
        })
    }

    /// How many pane groups have an inline counter in each record (1, 2 or 4).
    #[inline]
    pub fn inline_groups(&self) -> usize {
        match &self.0 {
            Width::One(_) => 1,
            Width::Two(_) => 2,
            Width::Four(_) => INLINE_GROUPS,
        }
    }

    /// The index of bare item id `id` (with its pinned `hash`, `item_hash(id)`), interning it
    /// if new. Does not add a reference.
    #[inline]
    pub fn intern(&mut self, id: &str, hash: u64) -> ItemIdx {
        debug_assert_eq!(hash, probe_hash(id), "the pinned hash of {id:?}");
        each!(&mut self.0, r => r.intern(id, hash, 0))
    }

    /// The index of key `id` of key shape `shape` (0: a bare item id) whose item's pinned hash
    /// is `hash`, interning it if new. Does not add a reference.
    #[inline]
    pub fn intern_shaped(&mut self, id: &str, hash: u64, shape: u8) -> ItemIdx {
        if shape == 0 {
            return self.intern(id, hash);
        }
        let probe = probe_hash(id);
        each!(&mut self.0, r => r.intern(id, probe, shape))
    }

    /// The id of an index.
    #[inline]
    pub fn id(&self, idx: ItemIdx) -> &ItemId {
        each!(&self.0, r => &r.records[idx.0 as usize].id)
    }

    /// The pinned hash of an index (its item's: for a counter key, the hash of its item part).
    pub fn hash(&self, idx: ItemIdx) -> u64 {
        let id = self.id(idx);
        if self.shape(idx) == 0 {
            crate::hash::item_hash(id)
        } else {
            crate::hash::item_hash(crate::group::split_key(id).1)
        }
    }

    /// The key shape of an index (0: a bare item id).
    #[inline]
    pub fn shape(&self, idx: ItemIdx) -> u8 {
        each!(&self.0, r => r.records[idx.0 as usize].shape)
    }

    /// The inline counter of group `g` (< [`Interner::inline_groups`]).
    #[inline]
    pub fn inline(&self, idx: ItemIdx, g: usize) -> Inline {
        each!(&self.0, r => r.records[idx.0 as usize].inline[g])
    }

    /// The inline counter of group `g` (< [`Interner::inline_groups`]), to change.
    #[inline]
    pub fn inline_mut(&mut self, idx: ItemIdx, g: usize) -> &mut Inline {
        each!(&mut self.0, r => &mut r.records[idx.0 as usize].inline[g])
    }

    /// The record of `idx`, to change its inline counters and add references.
    #[inline]
    pub fn record_mut(&mut self, idx: ItemIdx) -> RecordMut<'_> {
        each!(&mut self.0, r => {
            let rec = &mut r.records[idx.0 as usize];
            RecordMut {
                refs: &mut rec.refs,
                inline: &mut rec.inline,
            }
        })
    }

    /// Resets every inline counter's logged generation to 0 (none), when generations wrap.
    pub fn clear_logged(&mut self) {
        each!(&mut self.0, r => {
            for rec in &mut r.records {
                for inl in &mut rec.inline {
                    inl.set_logged(0);
                }
            }
        })
    }

    /// Adds a reference (a new live counter uses this item).
    #[inline]
    pub fn retain(&mut self, idx: ItemIdx) {
        each!(&mut self.0, r => r.records[idx.0 as usize].refs += 1)
    }

    /// Drops a reference; forgets the item when none are left.
    pub fn release(&mut self, idx: ItemIdx) {
        each!(&mut self.0, r => r.release(idx))
    }

    /// Forgets an item that was interned but never counted.
    pub fn release_unreferenced(&mut self, idx: ItemIdx) {
        each!(&mut self.0, r => {
            if r.records[idx.0 as usize].refs == 0 {
                r.records[idx.0 as usize].refs = 1;
                r.release(idx);
            }
        })
    }

    /// Live items.
    pub fn len(&self) -> usize {
        each!(&self.0, r => r.records.len() - r.free.len())
    }

    /// No live items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes held (ids stored once, plus per-item bookkeeping).
    pub fn heap_bytes(&self) -> usize {
        each!(&self.0, r => r.heap_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;

    #[test]
    fn intern_release_reuse() {
        let mut i = Interner::with_inline_groups(3);
        assert_eq!(i.inline_groups(), 4);
        let a = i.intern("a", item_hash("a"));
        let b = i.intern("b", item_hash("b"));
        assert_ne!(a, b);
        assert_eq!(i.intern("a", item_hash("a")), a);
        i.retain(a);
        i.retain(a);
        i.retain(b);
        *i.inline_mut(a, 1) = Inline::new(0, 7, 3);
        assert_eq!((i.inline(a, 1).count(), i.inline(a, 1).logged()), (7, 3));
        i.inline_mut(a, 1).increment();
        i.inline_mut(a, 1).set_logged(9);
        assert_eq!((i.inline(a, 1).count(), i.inline(a, 1).logged()), (8, 9));
        i.clear_logged();
        assert_eq!((i.inline(a, 1).count(), i.inline(a, 1).logged()), (8, 0));
        i.release(a);
        assert_eq!(i.len(), 2);
        i.release(a);
        assert_eq!(i.len(), 1);
        // "a" is forgotten; a new id reuses its slot with clean inline counters
        let c = i.intern("c", item_hash("c"));
        assert_eq!(c, a);
        assert_eq!(i.id(c), "c");
        assert_eq!(i.inline(c, 1), Inline::EMPTY);
        assert_eq!(i.intern("b", item_hash("b")), b);
        let a2 = i.intern("a", item_hash("a"));
        assert_ne!(a2, c);
        assert_eq!(i.id(a2), "a");
    }

    /// The running count of long ids' heap bytes equals a walk over the records (the
    /// `debug_assert` in `heap_bytes`) after every intern and release, slots reused included.
    #[test]
    fn heap_bytes_follow_long_ids() {
        let mut i = Interner::with_inline_groups(1);
        let id = |n: usize| {
            if n.is_multiple_of(3) {
                format!("{n}-{}", "x".repeat(30 + n % 7))
            } else {
                format!("{n}")
            }
        };
        let mut live = Vec::new();
        for n in 0..200 {
            let key = id(n);
            let idx = i.intern(&key, item_hash(&key));
            i.retain(idx);
            live.push(idx);
            if n % 4 == 3 {
                i.release(live.swap_remove(n % live.len()));
            }
            i.heap_bytes();
        }
        let long: usize = live
            .iter()
            .map(|&x| i.id(x))
            .filter(|s| s.len() > 24)
            .map(|s| s.len())
            .sum();
        assert!(long > 0 && i.heap_bytes() >= long);
    }

    #[test]
    fn records_are_as_wide_as_the_job_needs() {
        // an id of up to 24 bytes inline, refs, shape, and 8 bytes per inline counter
        assert_eq!(std::mem::size_of::<Record<1>>(), 40);
        assert_eq!(std::mem::size_of::<Record<2>>(), 48);
        assert_eq!(std::mem::size_of::<Record<INLINE_GROUPS>>(), 64);
        for (groups, width) in [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (9, 4)] {
            let mut i = Interner::with_inline_groups(groups);
            assert_eq!(i.inline_groups(), width);
            let k = i.intern_shaped("country=C1\0item-7", item_hash("item-7"), 1);
            i.retain(k);
            *i.inline_mut(k, width - 1) = Inline::new(0, 5, 1);
            assert_eq!(i.inline(k, width - 1).count(), 5);
            assert_eq!((i.shape(k), i.hash(k)), (1, item_hash("item-7")));
            assert_eq!(i.intern_shaped("country=C1\0item-7", item_hash("item-7"), 1), k);
            i.release(k);
            assert!(i.is_empty());
        }
    }
}

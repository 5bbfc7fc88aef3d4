//! Item records, interned once per worker.
//!
//! Counters are keyed by a dense `u32` index instead of the id string: 4 bytes per counter
//! instead of 24, and one string hash per event instead of one per window. Each record keeps
//! the id, its pinned hash, a reference count (live counters using it) and, for the first
//! [`INLINE_GROUPS`] pane groups, an **inline counter** for the item's newest pane: the common
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

struct Record {
    id: ItemId,
    hash: u64,
    refs: u32,
    /// Which key shape the id is (0: a bare item id; else a counter key, see `group`).
    shape: u8,
    inline: [Inline; INLINE_GROUPS],
}

impl Record {
    /// The hash the table finds the record by: the pinned item hash for a bare id; for a
    /// counter key, the hash of the whole key (the pinned hash is its item's, shared by every
    /// group and user of the item: finding keys by it alone would probe them all).
    #[inline]
    fn probe(&self) -> u64 {
        probe_hash(&self.id, self.hash, self.shape)
    }
}

#[inline]
fn probe_hash(id: &str, hash: u64, shape: u8) -> u64 {
    if shape == 0 {
        hash
    } else {
        crate::hash::item_hash(id)
    }
}

/// The record table.
#[derive(Default)]
pub struct Interner {
    table: HashTable<u32>,
    records: Vec<Record>,
    free: Vec<u32>,
}

impl Interner {
    /// An empty table.
    pub fn new() -> Interner {
        Interner::default()
    }

    /// The index of bare item id `id` (with its pinned `hash`), interning it if new. Does not
    /// add a reference.
    #[inline]
    pub fn intern(&mut self, id: &str, hash: u64) -> ItemIdx {
        self.intern_shaped(id, hash, 0)
    }

    /// The index of key `id` of key shape `shape` (0: a bare item id) whose item's pinned hash
    /// is `hash`, interning it if new. Does not add a reference.
    #[inline]
    pub fn intern_shaped(&mut self, id: &str, hash: u64, shape: u8) -> ItemIdx {
        let records = &self.records;
        let probe = probe_hash(id, hash, shape);
        if let Some(&i) = self.table.find(probe, |&i| records[i as usize].id == id) {
            return ItemIdx(i);
        }
        let record = Record {
            id: id.into(),
            hash,
            refs: 0,
            shape,
            inline: [Inline::EMPTY; INLINE_GROUPS],
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
        self.table.insert_unique(probe, i, |&j| records[j as usize].probe());
        ItemIdx(i)
    }

    /// The id of an index.
    #[inline]
    pub fn id(&self, idx: ItemIdx) -> &ItemId {
        &self.records[idx.0 as usize].id
    }

    /// The pinned hash of an index (its item's).
    #[inline]
    pub fn hash(&self, idx: ItemIdx) -> u64 {
        self.records[idx.0 as usize].hash
    }

    /// The key shape of an index (0: a bare item id).
    #[inline]
    pub fn shape(&self, idx: ItemIdx) -> u8 {
        self.records[idx.0 as usize].shape
    }

    /// The inline counter of group `g` (< `INLINE_GROUPS`).
    #[inline]
    pub fn inline(&self, idx: ItemIdx, g: usize) -> Inline {
        self.records[idx.0 as usize].inline[g]
    }

    /// The inline counter of group `g`, for update.
    #[inline]
    pub fn inline_mut(&mut self, idx: ItemIdx, g: usize) -> &mut Inline {
        &mut self.records[idx.0 as usize].inline[g]
    }

    /// Resets every inline counter's logged generation to 0 (none), when generations wrap.
    pub fn clear_logged(&mut self) {
        for r in &mut self.records {
            for inl in &mut r.inline {
                inl.set_logged(0);
            }
        }
    }

    /// Adds a reference (a new live counter uses this item).
    #[inline]
    pub fn retain(&mut self, idx: ItemIdx) {
        self.records[idx.0 as usize].refs += 1;
    }

    /// Drops a reference; forgets the item when none are left.
    pub fn release(&mut self, idx: ItemIdx) {
        let r = &mut self.records[idx.0 as usize].refs;
        debug_assert!(*r > 0, "release without retain");
        *r = r.saturating_sub(1);
        if *r == 0 {
            let probe = self.records[idx.0 as usize].probe();
            if let Ok(entry) = self.table.find_entry(probe, |&i| i == idx.0) {
                entry.remove();
            }
            let rec = &mut self.records[idx.0 as usize];
            rec.id = ItemId::default();
            rec.inline = [Inline::EMPTY; INLINE_GROUPS];
            self.free.push(idx.0);
        }
    }

    /// Forgets an item that was interned but never counted.
    pub fn release_unreferenced(&mut self, idx: ItemIdx) {
        if self.records[idx.0 as usize].refs == 0 {
            self.records[idx.0 as usize].refs = 1;
            self.release(idx);
        }
    }

    /// Live items.
    pub fn len(&self) -> usize {
        self.records.len() - self.free.len()
    }

    /// No live items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes held (ids stored once, plus per-item bookkeeping).
    pub fn heap_bytes(&self) -> usize {
        let heap_ids: usize = self
            .records
            .iter()
            .filter(|r| r.id.is_heap_allocated())
            .map(|r| r.id.capacity())
            .sum();
        self.table.capacity() * (4 + 1)
            + self.records.capacity() * std::mem::size_of::<Record>()
            + self.free.capacity() * 4
            + heap_ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;

    #[test]
    fn intern_release_reuse() {
        let mut i = Interner::new();
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
}

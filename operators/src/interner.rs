//! Item ids interned once per worker.
//!
//! Counters are keyed by a dense `u32` index instead of the id string: 4 bytes per counter
//! instead of 24, and one string hash per event instead of one per window. Each index carries
//! a reference count (the number of live counters that use it); when it drops to zero the id
//! is forgotten and the index reused, so memory follows the live state, not history.

use crate::record::ItemId;
use hashbrown::HashTable;

/// An interned item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemIdx(pub u32);

/// The interner.
#[derive(Default)]
pub struct Interner {
    table: HashTable<u32>,
    ids: Vec<ItemId>,
    hashes: Vec<u64>,
    refs: Vec<u32>,
    free: Vec<u32>,
}

impl Interner {
    /// An empty interner.
    pub fn new() -> Interner {
        Interner::default()
    }

    /// The index of `id` (with its pinned `hash`), interning it if new. Does not add a reference.
    #[inline]
    pub fn intern(&mut self, id: &str, hash: u64) -> ItemIdx {
        let ids = &self.ids;
        if let Some(&i) = self.table.find(hash, |&i| ids[i as usize] == id) {
            return ItemIdx(i);
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.ids[i as usize] = id.into();
                self.hashes[i as usize] = hash;
                self.refs[i as usize] = 0;
                i
            }
            None => {
                let i = u32::try_from(self.ids.len()).expect("more than 4 billion live items on one worker");
                self.ids.push(id.into());
                self.hashes.push(hash);
                self.refs.push(0);
                i
            }
        };
        let hashes = &self.hashes;
        self.table.insert_unique(hash, i, |&j| hashes[j as usize]);
        ItemIdx(i)
    }

    /// The id of an index.
    #[inline]
    pub fn id(&self, idx: ItemIdx) -> &ItemId {
        &self.ids[idx.0 as usize]
    }

    /// The pinned hash of an index.
    #[inline]
    pub fn hash(&self, idx: ItemIdx) -> u64 {
        self.hashes[idx.0 as usize]
    }

    /// Adds a reference (a new live counter uses this item).
    #[inline]
    pub fn retain(&mut self, idx: ItemIdx) {
        self.refs[idx.0 as usize] += 1;
    }

    /// Drops a reference; forgets the item when none are left.
    pub fn release(&mut self, idx: ItemIdx) {
        let r = &mut self.refs[idx.0 as usize];
        debug_assert!(*r > 0, "release without retain");
        *r = r.saturating_sub(1);
        if *r == 0 {
            let hash = self.hashes[idx.0 as usize];
            if let Ok(entry) = self.table.find_entry(hash, |&i| i == idx.0) {
                entry.remove();
            }
            self.ids[idx.0 as usize] = ItemId::default();
            self.free.push(idx.0);
        }
    }

    /// Releases every item that has no reference (interned but never counted).
    pub fn release_unreferenced(&mut self, idx: ItemIdx) {
        if self.refs[idx.0 as usize] == 0 {
            self.refs[idx.0 as usize] = 1;
            self.release(idx);
        }
    }

    /// Live items.
    pub fn len(&self) -> usize {
        self.ids.len() - self.free.len()
    }

    /// No live items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes held (ids stored once, plus per-item bookkeeping).
    pub fn heap_bytes(&self) -> usize {
        let heap_ids: usize = self
            .ids
            .iter()
            .filter(|s| s.is_heap_allocated())
            .map(|s| s.capacity())
            .sum();
        self.table.capacity() * (4 + 1)
            + self.ids.capacity() * std::mem::size_of::<ItemId>()
            + self.hashes.capacity() * 8
            + self.refs.capacity() * 4
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
        i.release(a);
        assert_eq!(i.len(), 2);
        i.release(a);
        assert_eq!(i.len(), 1);
        // "a" is forgotten; a new id reuses its slot, "a" gets a fresh index later
        let c = i.intern("c", item_hash("c"));
        assert_eq!(c, a);
        assert_eq!(i.id(c), "c");
        assert_eq!(i.intern("b", item_hash("b")), b);
        let a2 = i.intern("a", item_hash("a"));
        assert_ne!(a2, c);
        assert_eq!(i.id(a2), "a");
    }
}

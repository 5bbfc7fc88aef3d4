//! The candidate list beside a sketch: the items that may be in the top K, with their counts.
//!
//! A sketch answers "how many of x?" but cannot list its items; the candidates can. After each
//! add the sketch offers the item with its new estimate: a candidate keeps the larger of its
//! listed count and the offer; another item enters when there is room or when it ranks before
//! the worst candidate (the ranking order of `topk.rs`: count descending, then id ascending),
//! which it then replaces. The worst candidate's count never decreases.
//!
//! What holds, whatever the order of events, when every offer is at least the item's true
//! count so far (count-min): every item that is **not** a candidate has a true count at most
//! the worst candidate's count, so every item whose true count exceeds the K-th listed count is
//! in the top K (see `CountMinTopK`). A count-min candidate's count is the sketch's estimate
//! right after its own last event: at least its true count, and at most the sketch's estimate
//! now.
//!
//! Cost per offer: one comparison with the worst candidate when the list is full and the offer
//! is below it (most events of a long tail), else a hash-table probe (by the pinned item hash,
//! no string hashing) and a sift in a binary heap of the candidates, worst at the root.

use super::SketchError;
use crate::record::{ItemId, RankedItem};
use crate::topk::{rank_cmp, ranked_cmp};
use hashbrown::HashTable;
use std::cmp::Ordering;

/// Most candidates a list may hold.
pub const MAX_CANDIDATES: usize = 1 << 20;

#[derive(Clone)]
struct Slot {
    id: ItemId,
    hash: u64,
    count: u64,
    /// Position in `heap`.
    pos: u32,
}

/// The candidate list (see the module doc).
#[derive(Clone)]
pub struct Candidates {
    capacity: usize,
    slots: Vec<Slot>,
    /// Slot indexes by item hash.
    table: HashTable<u32>,
    /// Slot indexes as a binary heap, the worst-ranked candidate at the root.
    heap: Vec<u32>,
}

impl Candidates {
    /// An empty list of at most `capacity` candidates (1..=[`MAX_CANDIDATES`]).
    pub fn new(capacity: usize) -> Result<Candidates, SketchError> {
        if capacity == 0 || capacity > MAX_CANDIDATES {
            return Err(SketchError::Parameters(format!(
                "sketch candidates {capacity} is not in 1..={MAX_CANDIDATES}"
            )));
        }
        Ok(Candidates {
            capacity,
            slots: Vec::new(),
            table: HashTable::new(),
            heap: Vec::new(),
        })
    }

    /// The most candidates it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Candidates held.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The listed count of `item` (pinned hash `hash`), if it is a candidate.
    #[inline]
    pub fn get(&self, item: &str, hash: u64) -> Option<u64> {
        self.find(item, hash).map(|s| self.slots[s as usize].count)
    }

    /// The worst candidate's count once the list is full (`None` while there is room): an
    /// item not in the list had a true count at most this when it was last offered.
    pub fn threshold(&self) -> Option<u64> {
        self.is_full().then(|| self.slots[self.heap[0] as usize].count)
    }

    /// Offers `item` with count `count` (see the module doc). A count of 0 never enters.
    #[inline]
    pub fn offer(&mut self, item: &str, hash: u64, count: u64) {
        if count == 0 || (self.is_full() && count < self.slots[self.heap[0] as usize].count) {
            return; // below the worst: not a candidate, or one whose count stays
        }
        match self.find(item, hash) {
            Some(s) => {
                let slot = &mut self.slots[s as usize];
                if count > slot.count {
                    slot.count = count;
                    let pos = slot.pos as usize;
                    self.sift_down(pos);
                }
            }
            None if !self.is_full() => self.push(item, hash, count),
            None => {
                let worst = &self.slots[self.heap[0] as usize];
                if rank_cmp(count, item, worst.count, &worst.id) == Ordering::Less {
                    self.replace_worst(item, hash, count);
                }
            }
        }
    }

    /// The best `k` candidates, in ranking order.
    pub fn top(&self, k: usize) -> Vec<RankedItem> {
        let mut all: Vec<RankedItem> = self.iter().map(|(id, _, count)| ranked(id, count)).collect();
        crate::topk::select_top_by(&mut all, k, ranked_cmp);
        all
    }

    /// Every candidate as (id, pinned hash, count), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64, u64)> + '_ {
        self.slots.iter().map(|s| (s.id.as_str(), s.hash, s.count))
    }

    /// Heap bytes: slots, heap, hash table and ids too long to be inline.
    pub fn heap_bytes(&self) -> usize {
        let heap_ids: usize = self
            .slots
            .iter()
            .filter(|s| s.id.is_heap_allocated())
            .map(|s| s.id.capacity())
            .sum();
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.heap.capacity() * 4
            + self.table.capacity() * (4 + 1)
            + heap_ids
    }

    fn is_full(&self) -> bool {
        self.slots.len() >= self.capacity
    }

    #[inline]
    fn find(&self, item: &str, hash: u64) -> Option<u32> {
        let slots = &self.slots;
        self.table
            .find(hash, |&s| {
                let slot = &slots[s as usize];
                slot.hash == hash && slot.id == item
            })
            .copied()
    }

    fn push(&mut self, item: &str, hash: u64, count: u64) {
        let s = self.slots.len() as u32; // ≤ MAX_CANDIDATES
        let pos = self.heap.len();
        self.slots.push(Slot {
            id: item.into(),
            hash,
            count,
            pos: pos as u32,
        });
        self.heap.push(s);
        let slots = &self.slots;
        self.table.insert_unique(hash, s, |&i| slots[i as usize].hash);
        self.sift_up(pos);
    }

    /// Evicts the worst candidate for `item`, which ranks before it.
    fn replace_worst(&mut self, item: &str, hash: u64, count: u64) {
        let s = self.heap[0];
        let old_hash = self.slots[s as usize].hash;
        if let Ok(entry) = self.table.find_entry(old_hash, |&i| i == s) {
            entry.remove();
        }
        let slot = &mut self.slots[s as usize];
        slot.id = item.into();
        slot.hash = hash;
        slot.count = count;
        let slots = &self.slots;
        self.table.insert_unique(hash, s, |&i| slots[i as usize].hash);
        self.sift_down(0);
    }

    /// Whether the candidate in slot `a` ranks after the one in slot `b`.
    #[inline]
    fn worse(&self, a: u32, b: u32) -> bool {
        let (a, b) = (&self.slots[a as usize], &self.slots[b as usize]);
        rank_cmp(a.count, &a.id, b.count, &b.id) == Ordering::Greater
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        self.slots[self.heap[i] as usize].pos = i as u32;
        self.slots[self.heap[j] as usize].pos = j as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if !self.worse(self.heap[pos], self.heap[parent]) {
                break;
            }
            self.swap(pos, parent);
            pos = parent;
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let mut worst = pos;
            if l < self.heap.len() && self.worse(self.heap[l], self.heap[worst]) {
                worst = l;
            }
            if r < self.heap.len() && self.worse(self.heap[r], self.heap[worst]) {
                worst = r;
            }
            if worst == pos {
                return;
            }
            self.swap(pos, worst);
            pos = worst;
        }
    }
}

fn ranked(id: &str, count: u64) -> RankedItem {
    RankedItem {
        item_id: id.into(),
        count,
        trend: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Offers, and tells whether `id` is a candidate after.
    fn offer(c: &mut Candidates, id: &str, count: u64) -> bool {
        c.offer(id, item_hash(id), count);
        c.get(id, item_hash(id)).is_some()
    }

    #[test]
    fn enters_when_it_ranks_before_the_worst() {
        let mut c = Candidates::new(2).expect("valid");
        assert!(Candidates::new(0).is_err());
        assert_eq!(c.threshold(), None);
        assert!(offer(&mut c, "b", 3));
        assert!(offer(&mut c, "c", 3));
        assert_eq!(c.threshold(), Some(3));
        assert!(!offer(&mut c, "d", 3), "ties with the worst and ranks after it");
        assert!(!offer(&mut c, "e", 2));
        assert!(offer(&mut c, "a", 3), "ties with the worst and ranks before it");
        assert_eq!(c.get("c", item_hash("c")), None, "c was the worst");
        assert!(offer(&mut c, "b", 5));
        assert!(offer(&mut c, "b", 4), "a lower offer keeps the count");
        assert!(offer(&mut c, "a", 1), "an offer below the worst keeps a candidate");
        assert_eq!(c.top(5), vec![ranked("b", 5), ranked("a", 3)]);
        assert_eq!(c.top(1), vec![ranked("b", 5)]);
        assert!(!offer(&mut c, "z", 0), "a zero count never enters");
    }

    proptest! {
        /// Against a model that keeps a sorted list: same members, same counts, after any
        /// sequence of offers (including lower offers for candidates).
        #[test]
        fn matches_a_sorted_list_model(offers in proptest::collection::vec((0u8..30, 0u64..50), 0..300), cap in 1usize..8) {
            let mut c = Candidates::new(cap).expect("valid");
            let mut model: BTreeMap<String, u64> = BTreeMap::new();
            for (item, count) in offers {
                let id = format!("i{item}");
                let entered = offer(&mut c, &id, count);
                if let Some(listed) = model.get_mut(&id) {
                    *listed = (*listed).max(count);
                } else if count > 0 {
                    let worst = model.iter().max_by(|a, b| rank_cmp(*a.1, a.0, *b.1, b.0)).map(|(i, c)| (i.clone(), *c));
                    match worst {
                        _ if model.len() < cap => { model.insert(id.clone(), count); }
                        Some((wid, wc)) if rank_cmp(count, &id, wc, &wid) == Ordering::Less => {
                            model.remove(&wid);
                            model.insert(id.clone(), count);
                        }
                        _ => {}
                    }
                }
                prop_assert_eq!(entered, model.contains_key(&id));
                let mut want: Vec<RankedItem> = model.iter().map(|(i, c)| ranked(i, *c)).collect();
                want.sort_by(ranked_cmp);
                prop_assert_eq!(c.top(cap), want);
            }
        }
    }
}

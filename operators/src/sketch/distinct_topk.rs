//! Distinct users per item in fixed memory: a count-min table of each item's **events** and a
//! candidate list with a HyperLogLog of **users** per candidate.
//!
//! An item's events never undercount its distinct users, so the table's estimate is an upper
//! bound of them — what a replay needs to certify a sealed list (`certify.rs`: every item the
//! replay did not count has at most its estimate's users). The candidates are the items that may
//! rank: a candidate's listed count is its HyperLogLog's estimate (relative standard error
//! 1.04/√m, low or high); an item enters while there is room, or when its events' estimate
//! exceeds the worst candidate's users (it could have more users than that), taking the worst
//! one's place with a fresh HyperLogLog — so an item that entered late may list fewer users
//! than it has until the list is made exact at seal. Ranking: count descending, then id.

use super::cms::{CmsShape, CountMinSketch};
use super::hll::Hll;
use crate::record::{ItemId, RankedItem};
use rustc_hash::FxBuildHasher;
use std::cmp::Reverse;
use std::collections::BTreeSet;

type FxMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;

/// Events per item and users per candidate (see the module doc).
#[derive(Clone)]
pub struct DistinctTopK {
    events: CountMinSketch,
    capacity: usize,
    /// Each candidate's users and their current estimate.
    candidates: FxMap<ItemId, (Hll, u64)>,
    /// The candidates worst first: (estimate, id descending).
    order: BTreeSet<(u64, Reverse<ItemId>)>,
}

impl DistinctTopK {
    /// Empty, with a table of `shape` and up to `capacity` (≥ 1) candidates.
    pub fn new(shape: CmsShape, capacity: usize) -> DistinctTopK {
        DistinctTopK::with_table(CountMinSketch::new(shape), capacity)
    }

    /// With the events table `events` and no candidates.
    pub fn with_table(events: CountMinSketch, capacity: usize) -> DistinctTopK {
        DistinctTopK {
            events,
            capacity: capacity.max(1),
            candidates: FxMap::default(),
            order: BTreeSet::new(),
        }
    }

    /// The events table.
    pub fn sketch(&self) -> &CountMinSketch {
        &self.events
    }

    /// How many candidates it keeps at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Counts `n` events of `item` (pinned hash `hash`) by the user with pinned hash `user`.
    pub fn add(&mut self, item: &ItemId, hash: u64, user: u64, n: u64) {
        let mut left = n;
        let mut upper = 0;
        while left > 0 {
            let step = left.min(u64::from(u32::MAX)) as u32;
            upper = self.events.add(hash, step);
            left -= u64::from(step);
        }
        if let Some((hll, est)) = self.candidates.get_mut(item) {
            if hll.insert(user) {
                let new = hll.estimate().max(1);
                if new != *est {
                    self.order.remove(&(*est, Reverse(item.clone())));
                    self.order.insert((new, Reverse(item.clone())));
                    *est = new;
                }
            }
            return;
        }
        let mut hll = Hll::new();
        hll.insert(user);
        self.offer(item, hll, upper);
    }

    /// Counts `events` events of `item` (pinned hash `hash`) by the users in `users` (an exact
    /// place folding in, a place merged into another).
    pub fn add_counted(&mut self, item: &ItemId, hash: u64, events: u64, users: Hll) {
        let mut left = events;
        while left > 0 {
            let step = left.min(u64::from(u32::MAX)) as u32;
            self.events.add(hash, step);
            left -= u64::from(step);
        }
        self.extend([(item.clone(), users)]);
    }

    /// Offers `item` with users `hll`, given an upper bound `upper` of its users: it enters
    /// while there is room, or in place of the worst candidate when `upper` exceeds that one's
    /// count.
    fn offer(&mut self, item: &ItemId, hll: Hll, upper: u64) {
        if self.candidates.len() >= self.capacity {
            match self.order.first() {
                Some((worst, _)) if upper > *worst => {
                    if let Some((_, Reverse(id))) = self.order.pop_first() {
                        self.candidates.remove(&id);
                    }
                }
                _ => return,
            }
        }
        let est = hll.estimate().max(1);
        self.order.insert((est, Reverse(item.clone())));
        self.candidates.insert(item.clone(), (hll, est));
    }

    /// The best `k` candidates with their estimated users.
    pub fn top(&self, k: usize) -> Vec<RankedItem> {
        self.order
            .iter()
            .rev()
            .take(k)
            .map(|(count, Reverse(id))| RankedItem {
                item_id: id.clone(),
                count: *count,
                trend: None,
            })
            .collect()
    }

    /// Every candidate with its users (for snapshots), in id order.
    pub fn candidates(&self) -> Vec<(ItemId, Hll)> {
        let mut v: Vec<(ItemId, Hll)> = self
            .candidates
            .iter()
            .map(|(i, (h, _))| (i.clone(), h.clone()))
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Adds candidates (restores, merges): an item already listed takes the union of both
    /// users; another is offered with its events' estimate as its bound.
    pub fn extend(&mut self, listed: impl IntoIterator<Item = (ItemId, Hll)>) {
        for (item, hll) in listed {
            match self.candidates.get_mut(&item) {
                Some((mine, est)) => {
                    mine.merge(&hll);
                    let new = mine.estimate().max(1);
                    self.order.remove(&(*est, Reverse(item.clone())));
                    self.order.insert((new, Reverse(item.clone())));
                    *est = new;
                }
                None => {
                    let upper = self.events.estimate(crate::hash::item_hash(&item)).max(hll.estimate());
                    self.offer(&item, hll, upper);
                }
            }
        }
    }

    /// Adds `other` into this one: the tables cell by cell (same shape), then its candidates.
    pub fn merge(&mut self, other: &DistinctTopK) -> Result<(), super::SketchError> {
        self.events.merge(&other.events)?;
        self.extend(other.candidates());
        Ok(())
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.events.heap_bytes()
            + self.candidates.capacity() * (std::mem::size_of::<(ItemId, (Hll, u64))>() + 1)
            + self.candidates.len() * (Hll::new().heap_bytes() + 2 * std::mem::size_of::<(u64, ItemId)>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet as Set};

    fn shape() -> CmsShape {
        CmsShape::from_error(0.05, 0.05).expect("shape")
    }

    proptest! {
        /// Whatever the events: the table's estimate of every item is at least its distinct
        /// users; candidates stay within capacity; with room for every item, the listed counts
        /// are each item's HyperLogLog estimate of its users (small sets: within 4 of exact).
        #[test]
        fn upper_bounds_hold_and_candidates_stay_bounded(
            events in proptest::collection::vec((0u8..30, 0u8..20, 1u64..4), 0..300),
            capacity in 1usize..40,
        ) {
            let mut s = DistinctTopK::new(shape(), capacity);
            let mut users: BTreeMap<String, Set<String>> = BTreeMap::new();
            for (item, user, n) in &events {
                let (item, user) = (format!("i{item}"), format!("u{user}"));
                s.add(&ItemId::from(item.as_str()), item_hash(&item), item_hash(&user), *n);
                users.entry(item).or_default().insert(user);
            }
            for (item, us) in &users {
                prop_assert!(s.sketch().estimate(item_hash(item)) >= us.len() as u64);
            }
            prop_assert!(s.candidates.len() <= capacity && s.order.len() == s.candidates.len());
            if capacity >= 30 {
                for r in s.top(usize::MAX) {
                    let truth = users[r.item_id.as_str()].len() as u64;
                    prop_assert!(r.count.abs_diff(truth) <= 4, "{:?} vs {}", r, truth);
                }
            }
            let mut again = DistinctTopK::with_table(s.sketch().clone(), capacity);
            again.extend(s.candidates());
            prop_assert_eq!(again.top(usize::MAX), s.top(usize::MAX), "candidates restore as listed");
        }
    }

    #[test]
    fn a_bot_counts_once() {
        let mut s = DistinctTopK::new(shape(), 4);
        for i in 0..1000u64 {
            s.add(
                &ItemId::from("bot-article"),
                item_hash("bot-article"),
                item_hash("bot"),
                1,
            );
            s.add(
                &ItemId::from("story"),
                item_hash("story"),
                item_hash(&format!("u{}", i % 10)),
                1,
            );
        }
        let top = s.top(2);
        assert_eq!((top[0].item_id.as_str(), top[0].count), ("story", 10));
        assert_eq!((top[1].item_id.as_str(), top[1].count), ("bot-article", 1));
        assert!(
            s.sketch().estimate(item_hash("bot-article")) >= 1000,
            "events bound users"
        );
    }
}

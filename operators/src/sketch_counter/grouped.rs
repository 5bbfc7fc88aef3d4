//! Per-group windows (`by`) in the sketch counter: an instance's counts, one **place** per group.
//!
//! Each group with a list of its own (the `max_groups` lowest key hashes; see
//! `group::admission`) counts in a place of its own; every other group counts in `(other)`'s.
//! A place counts exactly (an item map) while it is small, and folds into a count-min table
//! with candidates once it holds more than [`fold_at`] items (an `auto` window: only after the
//! instance passed its share of `max_items` (group, item) keys). So a country with millions of
//! articles gets a table, and a group of a few items keeps exact counts at a fraction of a
//! table's bytes: an instance holds at most `max_groups + 1` places, each at most one table or
//! `fold_at` exact counts.
//!
//! Why a table per group and not one keyed by (group, item): a group's bound is then ⌈ε·N_g⌉
//! with N_g the group's events, not the instance's — under one shared table a small country's
//! list would be all noise. And places add up: when a new group with a lower hash takes an
//! admitted group's list, that group's place is added into `(other)`'s (tables cell by cell,
//! exact counts item by item, restored bases alike). A group is never admitted again once
//! folded (admission only narrows), so at seal `(other)`'s place holds exactly the events of
//! the groups folded then, whenever they were folded, and a group's table is a count-min table
//! of exactly its events: what the replay needs (`exact_at_seal`).
//!
//! A worker decides admission from the groups it knows: its own events' (at once) and every
//! worker's announcements (after each epoch's events). Knowing fewer groups only admits more,
//! so a group it folds is folded for good; one it keeps too long is folded at the next
//! announcement that displaces it.

use super::{add_ranked, fold, Counts, FxMap, FxSet, Instance};
use crate::counting::{AnySketch, Counting};
use crate::group::InstanceGroups;
use crate::hash::item_hash;
use crate::record::ItemId;
use crate::sketch::{DistinctTopK, Hll};
use std::collections::BTreeMap;

/// The items a place counts exactly before it folds into a table: as many as make the exact
/// map about as large as the table (~40 bytes per exact item), and at least the candidates.
pub(super) fn fold_at(counting: &Counting) -> usize {
    let spec = counting.sketch();
    let cells = spec.and_then(|s| s.cms_shape().ok()).map_or(0, |s| s.cells());
    let candidates = spec.map_or(0, |s| s.candidates);
    (cells / 10).max(candidates).max(1)
}

/// One grouped instance's places (see the module doc).
pub(super) struct Grouped {
    /// The admitted groups' places, by canonical key, each with the key's hash.
    pub(super) places: BTreeMap<String, (u64, Instance)>,
    /// `(other)`'s place, once some group folded into it.
    pub(super) other: Option<Instance>,
    /// Groups that lost their list since the last emission: each is withdrawn with an empty
    /// list (the merger then publishes it empty, as the exact counter's withdrawn groups).
    pub(super) withdrawn: Vec<String>,
    /// Whether places fold into tables (`sketch`: always; `auto`: once the instance passed its
    /// share of `max_items`).
    pub(super) folding: bool,
    /// Items (distinct-user windows: (item, user) pairs) counted exactly over all places (for
    /// `auto`'s share of `max_items`).
    pub(super) exact_items: usize,
    /// Whether it counts distinct users (places hold users per item, then a `DistinctTopK`).
    pub(super) distinct: bool,
}

/// An empty place (of a distinct-user window: `distinct`).
pub(super) fn empty_place(distinct: bool) -> Instance {
    Instance {
        counts: if distinct {
            Counts::Users(FxMap::default())
        } else {
            Counts::Exact(FxMap::default())
        },
        base: None,
        events: 0,
        touched: 0,
        emitted: 0,
        pairs: 0,
    }
}

impl Grouped {
    /// No groups yet; `folding` from the start for `sketch` windows.
    pub(super) fn new(folding: bool, distinct: bool) -> Grouped {
        Grouped {
            places: BTreeMap::new(),
            other: None,
            withdrawn: Vec::new(),
            folding,
            exact_items: 0,
            distinct,
        }
    }

    /// Counts `n` events of `item` (hash `hash`) of the group keyed `group` (hash `ghash`) in
    /// its place, or in `(other)`'s when `admitted` says it has no list of its own; folds what
    /// passed its size. Returns how many places folded.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn count(
        &mut self,
        group: &str,
        ghash: u64,
        admitted: bool,
        item: &ItemId,
        hash: u64,
        user: Option<&str>,
        n: u64,
        seq: u64,
        counting: &Counting,
    ) -> u64 {
        let distinct = self.distinct;
        let place = if admitted {
            match self.places.get_mut(group) {
                Some((_, p)) => p,
                None => {
                    &mut self
                        .places
                        .entry(group.to_string())
                        .or_insert((ghash, empty_place(distinct)))
                        .1
                }
            }
        } else {
            self.other.get_or_insert_with(|| empty_place(distinct))
        };
        place.events = place.events.saturating_add(n);
        place.touched = seq;
        let mut folds = 0;
        match &mut place.counts {
            Counts::Sketch(s) => s.add(item, hash, n),
            Counts::Exact(map) => {
                match map.get_mut(item.as_str()) {
                    Some(c) => *c = c.saturating_add(n),
                    None => {
                        map.insert(item.clone(), n);
                        self.exact_items += 1;
                    }
                }
                if self.folding && map.len() > fold_at(counting) {
                    self.exact_items -= map.len();
                    place.counts = Counts::Sketch(Box::new(fold(map, counting)));
                    folds += 1;
                }
            }
            Counts::UserSketch(s) => {
                let user = user.unwrap_or_default();
                s.add(item, hash, item_hash(user), n);
            }
            Counts::Users(map) => {
                let user = user.unwrap_or_default();
                let (events, users) = map.entry(item.clone()).or_default();
                *events = events.saturating_add(n);
                if !users.contains(user) {
                    users.insert(ItemId::from(user));
                    self.exact_items += 1;
                    place.pairs += 1;
                }
                if self.folding && place.pairs > fold_at(counting) {
                    self.exact_items -= place.pairs;
                    fold_users(place, counting);
                    folds += 1;
                }
            }
            Counts::Grouped(_) => {} // places are never grouped
        }
        folds
    }

    /// Starts folding (an `auto` instance past its share of `max_items`): every place larger
    /// than [`fold_at`] folds now. Returns how many did.
    pub(super) fn start_folding(&mut self, counting: &Counting) -> u64 {
        self.folding = true;
        let limit = fold_at(counting);
        let mut folds = 0;
        for place in self.places.values_mut().map(|p| &mut p.1).chain(self.other.as_mut()) {
            let len = exact_len(place);
            if len > limit {
                self.exact_items -= len;
                fold_place(place, counting);
                folds += 1;
            }
        }
        folds
    }

    /// Moves every place whose group `admission` no longer admits into `(other)`'s (after an
    /// announcement displaced one), remembering it to withdraw its list.
    pub(super) fn refold(&mut self, admission: &InstanceGroups, seq: u64, counting: &Counting) {
        let gone: Vec<String> = self
            .places
            .iter()
            .filter(|(_, (h, _))| !admission.admits(*h))
            .map(|(g, _)| g.clone())
            .collect();
        for g in gone {
            if let Some((_, place)) = self.places.remove(&g) {
                let distinct = self.distinct;
                let other = self.other.get_or_insert_with(|| empty_place(distinct));
                self.exact_items -= exact_len(other) + exact_len(&place);
                absorb(other, place, counting);
                other.touched = seq;
                if self.folding && exact_len(other) > fold_at(counting) {
                    fold_place(other, counting);
                }
                self.exact_items += exact_len(other);
                self.withdrawn.push(g);
            }
        }
    }

    /// Every place with its group key (`None`: `(other)`), in key order, `(other)` last.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (Option<&str>, &mut Instance)> + '_ {
        self.places
            .iter_mut()
            .map(|(g, (_, p))| (Some(g.as_str()), p))
            .chain(self.other.as_mut().map(|p| (None, p)))
    }

    /// Every place with its group key (`None`: `(other)`).
    pub(super) fn iter(&self) -> impl Iterator<Item = (Option<&str>, &Instance)> + '_ {
        self.places
            .iter()
            .map(|(g, (_, p))| (Some(g.as_str()), p))
            .chain(self.other.as_ref().map(|p| (None, p)))
    }
}

/// Items (distinct-user places: (item, user) pairs) a place counts exactly.
pub(super) fn exact_len(place: &Instance) -> usize {
    match &place.counts {
        Counts::Exact(map) => map.len(),
        Counts::Users(_) => place.pairs,
        _ => 0,
    }
}

/// Folds an exact place into its sketch (deterministic: in ranking order).
fn fold_place(place: &mut Instance, counting: &Counting) {
    match &place.counts {
        Counts::Exact(map) => place.counts = Counts::Sketch(Box::new(fold(map, counting))),
        Counts::Users(_) => fold_users(place, counting),
        _ => {}
    }
}

/// Folds a distinct-user place's exact users into a `DistinctTopK`: every item's events into
/// the table and its users into a HyperLogLog, offered in ranking order.
fn fold_users(place: &mut Instance, counting: &Counting) {
    let Counts::Users(map) = std::mem::replace(&mut place.counts, Counts::Exact(FxMap::default())) else {
        return;
    };
    let spec = counting.sketch();
    let shape = spec
        .and_then(|s| s.cms_shape().ok())
        .expect("sketch windows have a valid sketch spec (config validation)");
    let mut sketch = DistinctTopK::new(shape, spec.map_or(1, |s| s.candidates));
    add_users(&mut sketch, map);
    place.counts = Counts::UserSketch(Box::new(sketch));
    place.pairs = 0;
}

/// Adds exact users per item into a sketch, best first (deterministic candidates).
fn add_users(sketch: &mut DistinctTopK, map: FxMap<ItemId, (u64, FxSet<ItemId>)>) {
    let mut items: Vec<(ItemId, u64, FxSet<ItemId>)> = map.into_iter().map(|(i, (e, u))| (i, e, u)).collect();
    items.sort_unstable_by(|a, b| b.2.len().cmp(&a.2.len()).then_with(|| a.0.cmp(&b.0)));
    for (item, events, users) in items {
        let mut hll = Hll::new();
        for u in &users {
            hll.insert(item_hash(u));
        }
        sketch.add_counted(&item, item_hash(&item), events, hll);
    }
}

/// Adds place `from` into place `into`: events, counts (exact into exact item by item; exact
/// into a table in ranking order, deterministic; tables cell by cell with their candidates) and
/// restored bases. The result counts every event of both.
pub(super) fn absorb(into: &mut Instance, from: Instance, counting: &Counting) {
    into.events = into.events.saturating_add(from.events);
    into.base = match (into.base.take(), from.base) {
        (Some(mut a), Some(b)) => {
            // (one shape per window) a mismatch cannot happen; keep the larger base if it did
            if a.merge(&b).is_err() && b.total() > a.total() {
                a = b;
            }
            Some(a)
        }
        (a, b) => a.or(b),
    };
    let into_counts = std::mem::replace(&mut into.counts, Counts::Exact(FxMap::default()));
    into.counts = match (into_counts, from.counts) {
        (Counts::Exact(mut a), Counts::Exact(b)) => {
            for (item, c) in b {
                let slot = a.entry(item).or_insert(0);
                *slot = slot.saturating_add(c);
            }
            Counts::Exact(a)
        }
        (Counts::Sketch(mut s), Counts::Exact(b)) | (Counts::Exact(b), Counts::Sketch(mut s)) => {
            add_ranked(&mut s, &b);
            Counts::Sketch(s)
        }
        (Counts::Sketch(mut a), Counts::Sketch(b)) => {
            if let (AnySketch::Cms(x), AnySketch::Cms(y)) = (a.as_mut(), b.as_ref()) {
                if x.merge(y).is_err() {
                    // (one shape per window) unreachable; never lose counts: keep the larger
                    if y.sketch().total() > x.sketch().total() {
                        *x = y.clone();
                    }
                }
            }
            Counts::Sketch(a)
        }
        (Counts::Users(mut a), Counts::Users(b)) => {
            for (item, (events, users)) in b {
                let (e, u) = a.entry(item).or_default();
                *e = e.saturating_add(events);
                u.extend(users);
            }
            into.pairs = a.values().map(|(_, u)| u.len()).sum();
            Counts::Users(a)
        }
        (Counts::UserSketch(mut s), Counts::Users(b)) | (Counts::Users(b), Counts::UserSketch(mut s)) => {
            add_users(&mut s, b);
            into.pairs = 0;
            Counts::UserSketch(s)
        }
        (Counts::UserSketch(mut a), Counts::UserSketch(b)) => {
            // (one shape per window) a mismatch cannot happen; keep the larger if it did
            if a.merge(&b).is_err() && b.sketch().total() > a.sketch().total() {
                a = b;
            }
            Counts::UserSketch(a)
        }
        (a, _) => {
            let _ = counting;
            a // places are never grouped, and a window's places all count alike
        }
    };
}

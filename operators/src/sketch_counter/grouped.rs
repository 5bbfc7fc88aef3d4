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

use super::{fold, Counts, FxMap, Instance};
use crate::counting::{AnySketch, Counting};
use crate::group::InstanceGroups;
use crate::record::{ItemId, RankedItem};
use crate::topk::ranked_cmp;
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
    /// Items counted exactly over all places (for `auto`'s share of `max_items`).
    pub(super) exact_items: usize,
}

/// An empty place.
pub(super) fn empty_place() -> Instance {
    Instance {
        counts: Counts::Exact(FxMap::default()),
        base: None,
        events: 0,
        touched: 0,
        emitted: 0,
    }
}

impl Grouped {
    /// No groups yet; `folding` from the start for `sketch` windows.
    pub(super) fn new(folding: bool) -> Grouped {
        Grouped {
            places: BTreeMap::new(),
            other: None,
            withdrawn: Vec::new(),
            folding,
            exact_items: 0,
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
        n: u64,
        seq: u64,
        counting: &Counting,
    ) -> u64 {
        let place = if admitted {
            match self.places.get_mut(group) {
                Some((_, p)) => p,
                None => &mut self.places.entry(group.to_string()).or_insert((ghash, empty_place())).1,
            }
        } else {
            self.other.get_or_insert_with(empty_place)
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
            if let Counts::Exact(map) = &place.counts {
                if map.len() > limit {
                    self.exact_items -= map.len();
                    place.counts = Counts::Sketch(Box::new(fold(map, counting)));
                    folds += 1;
                }
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
                let other = self.other.get_or_insert_with(empty_place);
                self.exact_items -= exact_len(other) + exact_len(&place);
                absorb(other, place);
                other.touched = seq;
                if let Counts::Exact(map) = &other.counts {
                    if self.folding && map.len() > fold_at(counting) {
                        other.counts = Counts::Sketch(Box::new(fold(map, counting)));
                    }
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

/// Items a place counts exactly.
fn exact_len(place: &Instance) -> usize {
    match &place.counts {
        Counts::Exact(map) => map.len(),
        _ => 0,
    }
}

/// Adds place `from` into place `into`: events, counts (exact into exact item by item; exact
/// into a table in ranking order, deterministic; tables cell by cell with their candidates) and
/// restored bases. The result counts every event of both.
pub(super) fn absorb(into: &mut Instance, from: Instance) {
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
        (a, _) => a, // places are never grouped
    };
}

/// Adds exact counts into a sketch, best first (deterministic candidates).
fn add_ranked(sketch: &mut AnySketch, map: &FxMap<ItemId, u64>) {
    let mut items: Vec<RankedItem> = map
        .iter()
        .map(|(i, c)| RankedItem {
            item_id: i.clone(),
            count: *c,
        })
        .collect();
    items.sort_unstable_by(ranked_cmp);
    for r in items {
        sketch.add(&r.item_id, crate::hash::item_hash(&r.item_id), r.count);
    }
}

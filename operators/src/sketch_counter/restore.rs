//! Restoring a sketch counter from the snapshots of all the workers that wrote them, onto any
//! worker count (HeavyKeeper: the same count only).
//!
//! - Exact counts (`auto` instances that had not folded) go to their item's owner.
//! - Count-min: each worker's snapshot holds its *share* of the instance's table (what it added
//!   since its own restore; worker 0's also holds the table it was restored with), so the shares
//!   add up to the table of all the instance's events, T. Every worker of the new run restores
//!   T itself (so each of its items has all its earlier counts, and never an under-count; the
//!   over-count stays within ⌈(e/w)·N⌉ with N all the instance's events) and remembers it as its
//!   base, which its next snapshot subtracts. Candidates: the union of every worker's, kept by
//!   their owner, re-estimated from T. Exact parts (an `auto` instance folded on some workers
//!   only) are added into T. The instance's event count goes to worker 0, so that the workers'
//!   counts still add up to N.
//! - HeavyKeeper tables neither add up nor split: each worker takes its own back, and a
//!   checkpoint of another worker count is refused with a clear error.

use super::{
    owns, Counts, FxMap, FxSet, Grouped, Instance, SketchCounter, SketchCounterSnapshot, SketchCountsSnapshot,
};
use crate::counting::{Algorithm, AnySketch, Counting};
use crate::group::{GroupKey, InstanceGroups};
use crate::hash::item_hash;
use crate::record::{ItemId, RankedItem};
use crate::sketch::{CountMinSketch, CountMinTopK, HeavyKeeper, HkShape, TopKSketch};
use crate::sketch::{DistinctTopK, Hll};
use crate::snapshot::SnapshotError;
use crate::time::{Millis, Span};
use crate::topk::ranked_cmp;
use crate::window::{InstanceKey, WindowSpec};
use std::collections::BTreeMap;

type Part<'a> = (u32, u64, &'a SketchCountsSnapshot);

impl SketchCounter {
    /// The sketch counter of `worker` (of `workers`) restored from every worker's snapshot,
    /// with the exact counter's restored watermark and `sealed_until` (one source of truth for
    /// both). Snapshots are validated: the result is an error or a counter that works.
    #[allow(clippy::too_many_arguments)]
    pub fn restore(
        windows: Vec<WindowSpec>,
        counting: Vec<Counting>,
        allowed_lateness: Span,
        worker: u32,
        workers: usize,
        watermark: Millis,
        sealed_until: &[Millis],
        snapshots: &[SketchCounterSnapshot],
    ) -> Result<SketchCounter, SnapshotError> {
        let mut c = SketchCounter::new(windows, counting, allowed_lateness, worker, workers);
        c.global_wm = watermark;
        c.sealed_until = sealed_until.to_vec();
        c.force_emit = true;
        let same_workers = snapshots.len() == c.workers as usize
            && (0..c.workers).all(|w| snapshots.iter().filter(|s| s.worker == w).count() == 1);
        let mut parts: BTreeMap<InstanceKey, Vec<Part<'_>>> = BTreeMap::new();
        for s in snapshots {
            for i in &s.instances {
                c.check_instance(i.instance)?;
                parts
                    .entry(i.instance)
                    .or_default()
                    .push((s.worker, i.events, &i.counts));
            }
        }
        let sealed_h = watermark.minus(allowed_lateness);
        for s in snapshots {
            for (key, hashes) in &s.groups_seen {
                c.check_instance(*key)?;
                let w = key.window.0 as usize;
                if c.windows[w].end_of(key.start) <= super::horizon(sealed_h, sealed_until, key.window) {
                    continue;
                }
                let max_groups = c.windows[w].key.max_groups;
                let groups = c
                    .admission
                    .entry(*key)
                    .or_insert_with(|| InstanceGroups::new(max_groups));
                for h in hashes {
                    groups.insert(*h);
                }
            }
        }
        for (key, parts) in parts {
            let end = c.windows[key.window.0 as usize].end_of(key.start);
            if end <= super::horizon(sealed_h, sealed_until, key.window) {
                continue; // sealed: nothing will read it
            }
            let inst = c.instance(key, &parts, same_workers)?;
            c.instances.insert(key, inst);
        }
        Ok(c)
    }

    /// Checks that `key` is an instance of a window this counter counts.
    fn check_instance(&self, key: InstanceKey) -> Result<(), SnapshotError> {
        let w = key.window.0 as usize;
        if self.counting.get(w).is_none_or(|c| c.sketch().is_none()) {
            return Err(SnapshotError::Incompatible);
        }
        if !self.windows[w].starts_covering(key.start).any(|s| s == key.start) {
            return Err(SnapshotError::Invalid(format!(
                "sketch instance of window {} starts at {}, not at one of its instance starts",
                self.windows[w].name, key.start
            )));
        }
        Ok(())
    }

    /// This worker's instance `key` from every worker's part of it.
    fn instance(&self, key: InstanceKey, parts: &[Part<'_>], same_workers: bool) -> Result<Instance, SnapshotError> {
        let counting = self.counting[key.window.0 as usize];
        let spec = counting.sketch().ok_or(SnapshotError::Incompatible)?;
        let fresh = |counts, events| Instance {
            counts,
            base: None,
            events,
            touched: 1,
            emitted: 0,
            pairs: 0,
        };
        let grouped = self.shapes.of_window(key.window.0 as usize) != 0;
        let foreign = parts.iter().any(|p| match p.2 {
            SketchCountsSnapshot::HeavyKeeper(_) => spec.algorithm != Algorithm::HeavyKeeper || grouped,
            SketchCountsSnapshot::CountMin { .. } => spec.algorithm != Algorithm::Cms || grouped,
            SketchCountsSnapshot::Exact(_) => !matches!(counting, Counting::Auto { .. }) || grouped,
            SketchCountsSnapshot::Grouped(_) => !grouped,
            SketchCountsSnapshot::Users(_) | SketchCountsSnapshot::UserSketch { .. } => true, // only in places
        });
        if foreign {
            return Err(SnapshotError::Incompatible); // counted with another algorithm or mode
        }
        if parts
            .iter()
            .any(|p| matches!(p.2, SketchCountsSnapshot::HeavyKeeper(_)))
        {
            if !same_workers {
                return Err(SnapshotError::Invalid(
                    "HeavyKeeper sketch windows restore only onto the worker count that wrote them \
                     (their tables neither add up nor split)"
                        .to_string(),
                ));
            }
            return match parts.iter().find(|p| p.0 == self.worker) {
                Some((_, events, SketchCountsSnapshot::HeavyKeeper(s))) => {
                    let shape = spec.cms_shape().map_err(|e| SnapshotError::Invalid(e.to_string()))?;
                    let hk = HkShape::new(shape.width(), shape.depth())
                        .map_err(|e| SnapshotError::Invalid(e.to_string()))?;
                    let restored = HeavyKeeper::restore(s, hk, spec.candidates)?;
                    Ok(fresh(Counts::Sketch(Box::new(AnySketch::Hk(restored))), *events))
                }
                _ => Ok(fresh(Counts::Sketch(Box::new(new_hk(&counting)?)), 0)),
            };
        }
        if grouped {
            return self.grouped_instance(key, parts);
        }
        self.place(parts, &counting)
    }

    /// A per-group instance from every worker's places of it (each place restored as a whole
    /// instance is; the admission from the snapshots' groups).
    fn grouped_instance(&self, key: InstanceKey, parts: &[Part<'_>]) -> Result<Instance, SnapshotError> {
        let counting = self.counting[key.window.0 as usize];
        let mut folding = false;
        let distinct = self.windows[key.window.0 as usize].key.distinct_users;
        let mut by_group: BTreeMap<&GroupKey, Vec<Part<'_>>> = BTreeMap::new();
        for (worker, _, counts) in parts {
            let SketchCountsSnapshot::Grouped(g) = counts else {
                return Err(SnapshotError::Incompatible);
            };
            folding |= g.folding;
            for p in &g.places {
                let fits = match p.counts {
                    SketchCountsSnapshot::Exact(_) | SketchCountsSnapshot::CountMin { .. } => !distinct,
                    SketchCountsSnapshot::Users(_) | SketchCountsSnapshot::UserSketch { .. } => distinct,
                    _ => false,
                };
                if !fits {
                    return Err(SnapshotError::Invalid(format!(
                        "a place of group {:?} of a sketch instance does not hold what its window counts",
                        p.group.as_str()
                    )));
                }
                by_group
                    .entry(&p.group)
                    .or_default()
                    .push((*worker, p.events, &p.counts));
            }
        }
        let mut grouped = Grouped::new(folding, distinct);
        let admission = self.admission.get(&key);
        for (group, parts) in by_group {
            let place = if distinct {
                self.distinct_place(&parts, &counting)?
            } else {
                self.place(&parts, &counting)?
            };
            let hash = item_hash(group.as_str());
            let admitted = !group.is_other() && admission.is_none_or(|a| a.admits(hash));
            if admitted {
                grouped.places.insert(group.as_str().to_string(), (hash, place));
            } else {
                match grouped.other.as_mut() {
                    Some(other) => super::grouped::absorb(other, place, &counting),
                    None => grouped.other = Some(place),
                }
            }
        }
        grouped.exact_items = grouped.iter().map(|(_, p)| super::grouped::exact_len(p)).sum();
        let events = grouped.iter().map(|(_, p)| p.events).fold(0, u64::saturating_add);
        Ok(Instance {
            counts: Counts::Grouped(Box::new(grouped)),
            base: None,
            events,
            touched: 1,
            emitted: 0,
            pairs: 0,
        })
    }

    /// A distinct-user place from every worker's part: the users of the items it owns, or the
    /// whole events table (every share and exact part's events added up) with the candidates
    /// it owns and their users (exact parts' users as HyperLogLogs).
    fn distinct_place(&self, parts: &[Part<'_>], counting: &Counting) -> Result<Instance, SnapshotError> {
        let (worker, workers) = (self.worker, self.workers);
        let mut exact: FxMap<ItemId, (u64, FxSet<ItemId>)> = FxMap::default();
        let mut folded = false;
        for (_, _, counts) in parts {
            match counts {
                SketchCountsSnapshot::Users(items) => {
                    for (item, events, users) in items {
                        if *events < users.len() as u64 || users.is_empty() {
                            return Err(SnapshotError::Invalid(format!(
                                "item {item:?} has {events} events of {} users",
                                users.len()
                            )));
                        }
                        let (e, u) = exact.entry(item.clone()).or_default();
                        *e = e.saturating_add(*events);
                        u.extend(users.iter().cloned());
                    }
                }
                SketchCountsSnapshot::UserSketch { share, candidates } => {
                    if !share.is_consistent() || candidates.iter().any(|(_, h)| !h.is_consistent()) {
                        return Err(SnapshotError::Invalid(
                            "a distinct-user sketch does not fit its shape".into(),
                        ));
                    }
                    folded = true;
                }
                _ => return Err(SnapshotError::Incompatible),
            }
        }
        if !folded {
            exact.retain(|item, _| owns(item, worker, workers));
            let events = exact.values().map(|(e, _)| *e).fold(0, u64::saturating_add);
            let pairs = exact.values().map(|(_, u)| u.len()).sum();
            return Ok(Instance {
                counts: Counts::Users(exact),
                base: None,
                events,
                touched: 1,
                emitted: 0,
                pairs,
            });
        }
        let spec = counting.sketch().ok_or(SnapshotError::Incompatible)?;
        let shape = spec.cms_shape().map_err(|e| SnapshotError::Invalid(e.to_string()))?;
        let mut whole = CountMinSketch::new(shape);
        for (_, _, counts) in parts {
            if let SketchCountsSnapshot::UserSketch { share, .. } = counts {
                whole.merge(share).map_err(|e| SnapshotError::Invalid(e.to_string()))?;
            }
        }
        for (item, (events, _)) in &exact {
            super::add_events(&mut whole, item_hash(item), *events);
        }
        let mut sketch = DistinctTopK::with_table(whole.clone(), spec.candidates);
        let mut listed: Vec<(ItemId, Hll)> = Vec::new();
        for (_, _, counts) in parts {
            if let SketchCountsSnapshot::UserSketch { candidates, .. } = counts {
                listed.extend(candidates.iter().filter(|(i, _)| owns(i, worker, workers)).cloned());
            }
        }
        for (item, (_, users)) in exact.iter().filter(|(i, _)| owns(i, worker, workers)) {
            let mut hll = Hll::new();
            for u in users {
                hll.insert(item_hash(u));
            }
            listed.push((item.clone(), hll));
        }
        listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        sketch.extend(listed);
        let all_events: u64 = parts.iter().map(|p| p.1).fold(0, u64::saturating_add);
        Ok(Instance {
            base: Some(Box::new(whole)),
            counts: Counts::UserSketch(Box::new(sketch)),
            events: if worker == 0 { all_events } else { 0 },
            touched: 1,
            emitted: 0,
            pairs: 0,
        })
    }

    /// This worker's counts of an instance (or a group's place) from every worker's part:
    /// exact counts of the items it owns, or the whole count-min table with its candidates.
    fn place(&self, parts: &[Part<'_>], counting: &Counting) -> Result<Instance, SnapshotError> {
        let fresh = |counts, events| Instance {
            counts,
            base: None,
            events,
            touched: 1,
            emitted: 0,
            pairs: 0,
        };
        let (worker, workers) = (self.worker, self.workers);
        if parts.iter().all(|p| matches!(p.2, SketchCountsSnapshot::Exact(_))) {
            let mine: Vec<(ItemId, u64)> = parts
                .iter()
                .filter_map(|p| match p.2 {
                    SketchCountsSnapshot::Exact(items) => Some(items),
                    _ => None,
                })
                .flatten()
                .filter(|(i, _)| owns(i, worker, workers))
                .cloned()
                .collect();
            let map = exact_counts(&mine)?;
            let events = map.values().copied().fold(0, u64::saturating_add);
            return Ok(fresh(Counts::Exact(map), events));
        }
        let whole = whole_table(parts, counting)?;
        let all_events: u64 = parts.iter().map(|p| p.1).fold(0, u64::saturating_add);
        Ok(Instance {
            base: Some(Box::new(whole.sketch().clone())),
            counts: Counts::Sketch(Box::new(AnySketch::Cms(whole_with_mine(
                whole, parts, worker, workers,
            )?))),
            events: if worker == 0 { all_events } else { 0 },
            touched: 1,
            emitted: 0,
            pairs: 0,
        })
    }
}

/// T: every count-min share added up, and every exact part's counts added in.
fn whole_table(parts: &[Part<'_>], counting: &Counting) -> Result<CountMinTopK, SnapshotError> {
    let spec = counting.sketch().ok_or(SnapshotError::Incompatible)?;
    let shape = spec.cms_shape().map_err(|e| SnapshotError::Invalid(e.to_string()))?;
    let mut sum = CountMinSketch::new(shape);
    for (_, _, counts) in parts {
        if let SketchCountsSnapshot::CountMin { share, .. } = counts {
            let table = CountMinTopK::restore(share, shape, spec.candidates)?.into_sketch();
            sum.merge(&table).map_err(|e| SnapshotError::Invalid(e.to_string()))?;
        }
    }
    let mut whole =
        CountMinTopK::with_candidates(sum, spec.candidates, []).map_err(|e| SnapshotError::Invalid(e.to_string()))?;
    for (_, _, counts) in parts {
        if let SketchCountsSnapshot::Exact(items) = counts {
            for (id, n) in items {
                let mut left = *n;
                while left > 0 {
                    let step = left.min(u64::from(u32::MAX));
                    whole.add(id, item_hash(id), step as u32);
                    left -= step;
                }
            }
        }
    }
    Ok(whole)
}

/// T with this worker's candidates: every part's candidates and exact items it owns, with
/// their listed counts (upper bounds of their true counts, at most T's estimates), best first.
fn whole_with_mine(
    whole: CountMinTopK,
    parts: &[Part<'_>],
    worker: u32,
    workers: u32,
) -> Result<CountMinTopK, SnapshotError> {
    let mut listed: Vec<RankedItem> = Vec::new();
    for (_, _, counts) in parts {
        match counts {
            SketchCountsSnapshot::CountMin { candidates, .. } => listed.extend(candidates.iter().cloned()),
            SketchCountsSnapshot::Exact(items) => listed.extend(items.iter().map(|(i, c)| RankedItem {
                item_id: i.clone(),
                count: *c,
                trend: None,
            })),
            SketchCountsSnapshot::HeavyKeeper(_)
            | SketchCountsSnapshot::Grouped(_)
            | SketchCountsSnapshot::Users(_)
            | SketchCountsSnapshot::UserSketch { .. } => {}
        }
    }
    listed.retain(|r| owns(&r.item_id, worker, workers));
    listed.sort_unstable_by(ranked_cmp);
    let capacity = whole.candidates().capacity();
    let offers = listed.iter().map(|r| (r.item_id.as_str(), r.count));
    CountMinTopK::with_candidates(whole.into_sketch(), capacity, offers)
        .map_err(|e| SnapshotError::Invalid(e.to_string()))
}

fn new_hk(counting: &Counting) -> Result<AnySketch, SnapshotError> {
    counting
        .sketch()
        .ok_or(SnapshotError::Incompatible)?
        .new_sketch()
        .map_err(|e| SnapshotError::Invalid(e.to_string()))
}

/// Exact counts of an `auto` instance (or a place) from snapshot lists (counts ≥ 1; an id listed twice adds
/// up). More items than the worker's share allows fold at the instance's next event.
fn exact_counts(
    items: &[(ItemId, u64)],
) -> Result<hashbrown::HashMap<ItemId, u64, rustc_hash::FxBuildHasher>, SnapshotError> {
    let mut map = hashbrown::HashMap::with_capacity_and_hasher(items.len(), rustc_hash::FxBuildHasher);
    for (id, n) in items {
        if *n == 0 {
            return Err(SnapshotError::Invalid(format!("exact count 0 for item {id:?}")));
        }
        let slot = map.entry(id.clone()).or_insert(0u64);
        *slot = slot.saturating_add(*n);
    }
    Ok(map)
}

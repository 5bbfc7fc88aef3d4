//! Restoring a sketch counter from the snapshots of all the workers that wrote them.
//!
//! With the same worker count each worker takes its own snapshot back: it goes on exactly as
//! it would have. With another count, state is redistributed by item (key group), as for the
//! exact counter: exact counts go to their item's new owner; count-min sketches are added up
//! (cell by cell: the sum is the sketch of all the events, so it never under-counts any item and
//! over-counts by at most ⌈(e/w)·N⌉), every new worker gets the sum and keeps the candidates it
//! owns; the instance's event count goes to worker 0, so that the workers' counts still add up
//! to N. HeavyKeeper tables neither add nor split: they restore only onto the same worker count.

use super::{owns, Counts, Instance, SketchCountsSnapshot, SketchCounter, SketchCounterSnapshot};
use crate::counting::{AnySketch, AnySketchSnapshot, Counting};
use crate::hash::item_hash;
use crate::record::ItemId;
use crate::snapshot::SnapshotError;
use crate::time::{Millis, Span};
use crate::window::{InstanceKey, WindowSpec};
use std::collections::BTreeMap;

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
        let same = snapshots.len() == c.workers as usize
            && (0..c.workers).all(|w| snapshots.iter().filter(|s| s.worker == w).count() == 1);
        let mut parts: BTreeMap<InstanceKey, Vec<(u64, &SketchCountsSnapshot)>> = BTreeMap::new();
        for s in snapshots.iter().filter(|s| !same || s.worker == worker) {
            for i in &s.instances {
                c.check_instance(i.instance)?;
                parts.entry(i.instance).or_default().push((i.events, &i.counts));
            }
        }
        let sealed_h = watermark.minus(allowed_lateness);
        for (key, parts) in parts {
            if c.windows[key.window.0 as usize].end_of(key.start) <= super::horizon(sealed_h, sealed_until, key.window) {
                continue; // sealed: nothing will read it
            }
            let inst = if same { c.own(key, &parts)? } else { c.share(key, &parts)? };
            c.instances.insert(key, inst);
        }
        Ok(c)
    }

    /// Checks that `key` is an instance of a window this counter counts.
    fn check_instance(&self, key: InstanceKey) -> Result<(), SnapshotError> {
        let w = key.window.0 as usize;
        let counted = self.counting.get(w).is_some_and(|c| c.sketch().is_some());
        if !counted {
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

    /// An instance restored from this worker's own snapshot of it.
    fn own(&self, key: InstanceKey, parts: &[(u64, &SketchCountsSnapshot)]) -> Result<Instance, SnapshotError> {
        let counting = &self.counting[key.window.0 as usize];
        let [(events, counts)] = parts else {
            return Err(SnapshotError::Invalid(format!("sketch instance {key:?} listed twice")));
        };
        let counts = match counts {
            SketchCountsSnapshot::Exact(items) => Counts::Exact(exact_counts(items, counting)?),
            SketchCountsSnapshot::Sketch(s) => Counts::Sketch(Box::new(restore_sketch(s, counting)?)),
        };
        Ok(Instance {
            counts,
            events: *events,
            touched: 1,
            emitted: 0,
        })
    }

    /// This worker's share of an instance written by another number of workers.
    fn share(&self, key: InstanceKey, parts: &[(u64, &SketchCountsSnapshot)]) -> Result<Instance, SnapshotError> {
        let counting = &self.counting[key.window.0 as usize];
        let (worker, workers) = (self.worker, self.workers);
        let mine = |id: &str| owns(id, worker, workers);
        let mut exact: Vec<(ItemId, u64)> = Vec::new();
        let mut sum: Option<AnySketch> = None;
        for (_, counts) in parts {
            match counts {
                SketchCountsSnapshot::Exact(items) => exact.extend(items.iter().filter(|(i, _)| mine(i)).cloned()),
                SketchCountsSnapshot::Sketch(AnySketchSnapshot::Hk(_)) => {
                    return Err(SnapshotError::Invalid(
                        "HeavyKeeper sketch windows restore only onto the worker count that wrote them \
                         (their tables neither add up nor split)"
                            .to_string(),
                    ))
                }
                SketchCountsSnapshot::Sketch(s) => {
                    let s = restore_sketch(s, counting)?;
                    sum = Some(match sum {
                        None => s,
                        Some(acc) => add_sketches(acc, &s)?,
                    });
                }
            }
        }
        let all_events: u64 = parts.iter().map(|(e, _)| *e).fold(0, u64::saturating_add);
        let inst = match sum {
            None => {
                let map = exact_counts(&exact, counting)?;
                let events = map.values().copied().fold(0, u64::saturating_add);
                Instance {
                    counts: Counts::Exact(map),
                    events,
                    touched: 1,
                    emitted: 0,
                }
            }
            Some(mut sketch) => {
                if let AnySketch::Cms(s) = &mut sketch {
                    s.retain_candidates(|id| mine(id));
                }
                for (id, n) in &exact {
                    sketch.add(id, item_hash(id), *n);
                }
                Instance {
                    counts: Counts::Sketch(Box::new(sketch)),
                    events: if worker == 0 { all_events } else { 0 },
                    touched: 1,
                    emitted: 0,
                }
            }
        };
        Ok(inst)
    }
}

/// Exact counts of an `auto` instance from a snapshot's list (counts ≥ 1; an id listed twice
/// adds up). More items than the worker's share allows fold at the instance's next event.
fn exact_counts(
    items: &[(ItemId, u64)],
    counting: &Counting,
) -> Result<hashbrown::HashMap<ItemId, u64, rustc_hash::FxBuildHasher>, SnapshotError> {
    if !matches!(counting, Counting::Auto { .. }) {
        return Err(SnapshotError::Incompatible);
    }
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

fn restore_sketch(s: &AnySketchSnapshot, counting: &Counting) -> Result<AnySketch, SnapshotError> {
    let spec = counting.sketch().ok_or(SnapshotError::Incompatible)?;
    AnySketch::restore(s, spec)
}

/// `a + b`, cell by cell (count-min only).
fn add_sketches(mut a: AnySketch, b: &AnySketch) -> Result<AnySketch, SnapshotError> {
    match (&mut a, b) {
        (AnySketch::Cms(x), AnySketch::Cms(y)) => x.merge(y).map_err(|e| SnapshotError::Invalid(e.to_string()))?,
        _ => return Err(SnapshotError::Incompatible), // (HeavyKeeper: refused in `share`)
    }
    Ok(a)
}

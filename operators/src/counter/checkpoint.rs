//! Snapshot and restore: the counting state by key group (whole, or with its panes apart for
//! incremental checkpoints), and a counter restored from the snapshots of any number of workers
//! onto any worker count.

use super::pairs::{intern_user, split_pair, unpair};
use super::trend::retention;
use super::{horizon, Counter, WindowedCounter, NUMBERED};
use crate::group::{route_hash, split_key, GroupNote};
use crate::hash::item_hash;
use crate::hash::key_group;
use crate::interner::ItemIdx;
use crate::record::ItemId;
use crate::snapshot::{CounterSnapshot, InstanceCounts, KeyGroupState, PaneKey, PaneSegment, SnapshotError};
use crate::time::{Millis, Span};
use crate::window::WindowSpec;
use hashbrown::hash_map::Entry;
use std::collections::BTreeMap;

impl WindowedCounter {
    /// The counting state as of the last `advance`, by key group (call between epochs).
    pub fn snapshot(&self) -> CounterSnapshot {
        let (base, panes) = self.snapshot_panes(None, |_| false);
        crate::snapshot::assemble(base, panes.into_iter().filter_map(|(_, seg)| seg).collect())
    }

    /// The snapshot's exclusions and metadata, no panes.
    fn snapshot_without_panes(&self) -> CounterSnapshot {
        let mut groups: BTreeMap<u32, KeyGroupState> = BTreeMap::new();
        fn state(groups: &mut BTreeMap<u32, KeyGroupState>, kg: u32) -> &mut KeyGroupState {
            groups.entry(kg).or_insert_with(|| KeyGroupState {
                key_group: kg,
                ..Default::default()
            })
        }
        // (a sealed trend instance's exclusions too: later baselines read them)
        let exclusions = self
            .instances
            .iter()
            .map(|(key, inst)| (key, &inst.exclusions))
            .chain(&self.trend_exclusions);
        for (key, excluded) in exclusions {
            let mut per_kg: BTreeMap<u32, Vec<(ItemId, u64)>> = BTreeMap::new();
            for (c, n) in excluded {
                per_kg
                    .entry(key_group(self.interner.hash(c.item())))
                    .or_default()
                    .push((ItemId::from(self.counter_text(*c).as_ref()), *n));
            }
            for (kg, mut items) in per_kg {
                items.sort();
                state(&mut groups, kg)
                    .exclusions
                    .push(InstanceCounts { instance: *key, items });
            }
        }
        CounterSnapshot {
            windows: self.windows.clone(),
            allowed_lateness: self.allowed_lateness,
            watermark: self.global_wm,
            key_groups: groups.into_values().collect(),
            pane_files: Vec::new(),
            sealed_until: self.sealed_until.clone(),
            // the same on every worker: worker 0 writes them
            groups_seen: if self.worker == 0 {
                self.admission.iter().map(|(k, g)| (*k, g.hashes())).collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Like [`snapshot`](Self::snapshot), for incremental checkpoints: the snapshot without its
    /// panes, and every live pane apart — `None` when it did not change since apply sequence
    /// `since` and `may_reuse` allows its file from then to stand for it, `Some(segment)`
    /// otherwise (all of them when `since` is `None`).
    pub fn snapshot_panes(
        &self,
        since: Option<u64>,
        may_reuse: impl Fn(PaneKey) -> bool,
    ) -> (CounterSnapshot, Vec<(PaneKey, Option<PaneSegment>)>) {
        let mut panes = Vec::new();
        for (g, group) in self.groups.iter().enumerate() {
            for pane in group.slots.iter().flatten() {
                let key = PaneKey {
                    width: group.width,
                    start: pane.start,
                };
                if since.is_some_and(|s| pane.touched < s) && may_reuse(key) {
                    panes.push((key, None));
                    continue;
                }
                // Group by key group with an integer sort (no string comparisons: this runs on
                // the worker thread, which waits for it).
                // (a paired shape's keys are written as its pairs: see `pairs`)
                // (a numbered counter's item record is its item's: routed by its hash too)
                let mut counts: Vec<(u32, Counter, u64, Option<ItemIdx>)> = Vec::new();
                self.pane_counts(g, pane, |c, n| {
                    if n > 0 && !self.is_paired(self.shape_of(c)) {
                        counts.push((key_group(self.interner.hash(c.item())), c, n, None));
                    }
                });
                for p in pane.pairs.iter() {
                    let (i, u) = unpair(p);
                    counts.push((key_group(self.interner.hash(i)), Counter::of(i), 1, Some(u)));
                }
                counts.sort_unstable_by_key(|(kg, _, _, _)| *kg);
                let mut key_groups: Vec<(u32, Vec<(ItemId, u64)>)> = Vec::new();
                for (kg, i, c, u) in counts {
                    if key_groups.last().is_none_or(|(last, _)| *last != kg) {
                        key_groups.push((kg, Vec::new()));
                    }
                    let id = match u {
                        None => ItemId::from(self.counter_text(i).as_ref()),
                        Some(u) => ItemId::from(format!("{}{}", self.interner.id(i.item()), self.pair_users.id(u))),
                    };
                    if let Some((_, items)) = key_groups.last_mut() {
                        items.push((id, c));
                    }
                }
                panes.push((key, Some(PaneSegment { key, key_groups })));
            }
        }
        (self.snapshot_without_panes(), panes)
    }

    /// The counter of `worker` (of `workers`) restored from the snapshots of all the workers
    /// that wrote them (any number): it keeps the key groups it owns under the new count.
    /// The snapshots are validated first (see `snapshot::validate_counters`): whatever they
    /// hold, the result is an error or a counter that works, never a panic later.
    pub fn restore(
        windows: Vec<WindowSpec>,
        allowed_lateness: Span,
        worker: u32,
        workers: usize,
        snapshots: &[CounterSnapshot],
    ) -> Result<WindowedCounter, SnapshotError> {
        WindowedCounter::restore_counting(windows, &[], allowed_lateness, worker, workers, snapshots)
    }

    /// [`restore`](Self::restore) for a counter of [`counting`](Self::counting) `counted`.
    pub fn restore_counting(
        windows: Vec<WindowSpec>,
        counted: &[bool],
        allowed_lateness: Span,
        worker: u32,
        workers: usize,
        snapshots: &[CounterSnapshot],
    ) -> Result<WindowedCounter, SnapshotError> {
        WindowedCounter::restore_numbered(windows, counted, allowed_lateness, worker, workers, snapshots, NUMBERED)
    }

    /// [`Self::restore_counting`] into a counter that numbers groups or not (see
    /// [`super::NUMBERED`]): snapshots hold key texts either way.
    pub(super) fn restore_numbered(
        windows: Vec<WindowSpec>,
        counted: &[bool],
        allowed_lateness: Span,
        worker: u32,
        workers: usize,
        snapshots: &[CounterSnapshot],
        number_groups: bool,
    ) -> Result<WindowedCounter, SnapshotError> {
        let workers = workers.max(1);
        if worker as usize >= workers {
            return Err(SnapshotError::Invalid(format!(
                "cannot restore worker {worker} of {workers}"
            )));
        }
        // (pane files must have been put back with `snapshot::assemble` first)
        if snapshots.iter().any(|s| !s.pane_files.is_empty()) {
            return Err(SnapshotError::Incompatible);
        }
        crate::snapshot::validate_counters(snapshots, &windows, allowed_lateness)?;
        let mut c = WindowedCounter::counting_numbered(windows, counted, allowed_lateness, worker, number_groups);
        c.global_wm = snapshots.iter().map(|s| s.watermark).fold(c.global_wm, Millis::max);
        for s in snapshots {
            c.seal_until(&s.sealed_until);
        }
        for s in snapshots {
            for kg in s
                .key_groups
                .iter()
                .filter(|k| k.key_group as usize % workers == worker as usize)
            {
                c.restore_key_group(kg);
            }
        }
        for s in snapshots {
            for (key, hashes) in &s.groups_seen {
                let notes: Vec<GroupNote> = hashes.iter().map(|&hash| GroupNote { instance: *key, hash }).collect();
                c.note_groups(&notes);
            }
        }
        c.force_emit = true;
        Ok(c)
    }

    /// The counter of snapshot key `id` (validated) of a shape `shape` that is not paired,
    /// interned (and numbered) without a reference: a key record, or for a numbered shape its
    /// item's record and its group's number.
    fn restored_counter(&mut self, id: &str, shape: u8) -> Counter {
        if !self.numbered[shape as usize] {
            return Counter::of(self.interner.intern_shaped(id, route_hash(id), shape));
        }
        let (group, item, _) = split_key(id);
        let item = self.interner.intern(item, item_hash(item));
        Counter::grouped(item, self.numbers.number(group, shape))
    }

    /// Adds one validated key group's panes and exclusions (panes of sealed instances only are
    /// skipped: nothing will read them).
    fn restore_key_group(&mut self, kg: &KeyGroupState) {
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        for pane in &kg.panes {
            // validated: the width is one of the groups'
            let Some(g) = self.groups.iter().position(|g| g.width == pane.width) else {
                continue;
            };
            let Some(slot) = self.pane_slot(g, pane.start, sealed_h) else {
                continue;
            };
            for (id, count) in &pane.items {
                // (a key no window of this job counts was refused by validation)
                let Some(shape) = self.shapes.of_key(id) else { continue };
                let mut count = *count;
                let c = match self.is_paired(shape) {
                    false => self.restored_counter(id, shape),
                    true => {
                        // `group NUL item NUL user`: a pair of its key and its user, whatever
                        // its count (an older snapshot's is its events), counted once
                        let Some((key, user)) = split_pair(id) else { continue };
                        let idx = self.interner.intern_shaped(key, route_hash(key), shape);
                        let u = intern_user(&mut self.pair_users, user);
                        let p = self.groups[g].slots[slot].as_mut().expect("live slot");
                        if !p.add_pair(&mut self.pair_users, idx, u) {
                            continue;
                        }
                        count = 1;
                        Counter::of(idx)
                    }
                };
                let p = self.groups[g].slots[slot].as_mut().expect("live slot");
                match p.map().entry(c) {
                    Entry::Occupied(mut o) => *o.get_mut() = o.get().saturating_add(count),
                    Entry::Vacant(v) => {
                        v.insert(count);
                        self.interner.retain(c.item());
                        if let Some(gid) = c.group() {
                            self.numbers.retain(gid);
                        }
                    }
                }
            }
        }
        for ex in &kg.exclusions {
            if !self.groups.iter().any(|g| g.windows.contains(&ex.instance.window)) {
                continue; // a window this counter does not count (a sketch window)
            }
            let spec = &self.windows[ex.instance.window.0 as usize];
            let end = spec.end_of(ex.instance.start);
            let sealed = end <= horizon(sealed_h, &self.sealed_until, ex.instance.window);
            if sealed && end.plus(retention(spec)) <= sealed_h {
                continue; // sealed: nothing will read it (and it must publish nothing)
            }
            for (id, count) in &ex.items {
                let Some(shape) = self.shapes.of_key(id) else { continue };
                if self.is_paired(shape) {
                    continue; // (none: no event of a paired shape is excluded, see `pairs`)
                }
                // (the key is counted in the instance's pane, restored before: it is live)
                let c = self.restored_counter(id, shape);
                let exclusions = match sealed {
                    // a sealed trend instance: only its later instances' baselines read it
                    true => self.trend_exclusions.entry(ex.instance).or_default(),
                    false => &mut self.instances.entry(ex.instance).or_default().exclusions,
                };
                let excluded = exclusions.entry(c).or_insert(0);
                *excluded = excluded.saturating_add(*count);
            }
            if !sealed {
                self.mark_excluded(ex.instance);
            }
        }
    }
}

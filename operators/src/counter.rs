//! The exact windowed counter of one worker.
//!
//! It owns the items routed to its worker and counts each event once per **pane group** (the
//! windows sharing a pane width), not once per window instance. A window instance's count is
//! the sum of its panes, minus **exclusions**: an event that is late for some of the instances
//! covering it (hopping windows, or windows sharing panes) is still counted in the pane for the
//! others, and subtracted from the late ones.
//!
//! Call protocol, once per epoch: [`WindowedCounter::apply`] every event of the epoch (in any
//! order: counting commutes, and every decision reads only the event's own stamp and the global
//! watermark fixed at the previous epoch), then [`WindowedCounter::advance`] with the new
//! global watermark. `advance` returns the local top-K lists to publish and frees sealed state.
//! A list is built from the instance's previous list and the items changed since (per-pane
//! change logs, see `emit`), or recounted from its panes when that is cheaper or necessary.
//!
//! Promises: the lists of a sealed instance are exact over the events its partitions' lateness
//! rule accepted, independent of epoch boundaries. Open-window lists are provisional.
//!
//! Sealed means: ending at or before the global watermark minus the allowed lateness, or, per
//! window, at or before its [`sealed_until`](WindowedCounter::sealed_until) — what an earlier
//! end of input sealed when the input goes on after it (a Kafka topic after a bounded run).

mod dense;
mod emit;
#[cfg(test)]
mod emit_tests;
#[cfg(test)]
mod shaped_tests;
mod shapes;

pub use shapes::{group_lists, job_dims, needs_user, Shapes};

use crate::event::{check_event_time, BadRecord};
use crate::group::route_hash;
use crate::group::{Admitted, GroupKey, GroupNote, InstanceGroups};
use crate::hash::item_hash;
use crate::hash::key_group;
use crate::interner::{Inline, Interner, ItemIdx, INLINE_GROUPS};
use crate::message::LocalList;
use crate::record::{DeadLetter, DeadReason, ItemId, ListSource, RankedItem, TimedEvent};
use crate::snapshot::{CounterSnapshot, InstanceCounts, KeyGroupState, PaneKey, PaneSegment, SnapshotError};
use crate::time::{Millis, Span};
use crate::topk::{rank_cmp, select_top_by, select_top_counted};
use crate::window::{InstanceKey, WindowId, WindowSpec};
use hashbrown::hash_map::Entry;
use rustc_hash::FxBuildHasher;
use std::collections::BTreeMap;

type FxMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;

/// Largest inline count; beyond it the count moves to the pane map. Tiny in unit tests so
/// that path is exercised.
const INLINE_MAX: u32 = if cfg!(test) { 3 } else { Inline::MAX_COUNT };

/// Counts for one pane of one pane group.
///
/// Each (item, pane) count lives in exactly one place: in the item's inline counter for this
/// group while this pane is the one inline there (`rel` matches), else in `counts`.
struct Pane {
    start: Millis,
    /// Counts not held inline.
    counts: FxMap<ItemIdx, u64>,
    /// This pane's number relative to the group base, when inline counters can hold it.
    rel: Option<i32>,
    /// Items that became inline for this pane (some may have moved their count to `counts`).
    members: Vec<ItemIdx>,
    /// Members whose count is still inline.
    inline_live: usize,
    /// Apply sequence of the last change (for dirty tracking).
    touched: u64,
    /// End of the instance containing this pane that ends last, over the group's windows:
    /// the pane can be freed once that instance is sealed.
    last_end: Millis,
    /// End of the instance containing this pane that ends first (all covering instances of
    /// an event in this pane end at or after it).
    first_end: Millis,
    /// Change log: items whose count here changed, once per emit generation for inline counts
    /// (see `emit`); `log[0]` is entry number `log_start` of the pane's life.
    log: Vec<ItemIdx>,
    /// The number of the first entry still in `log`.
    log_start: u64,
}

/// The panes of windows sharing one pane width.
struct PaneGroup {
    width: Span,
    /// The key shapes its windows count (see `shapes`).
    shapes: Vec<u8>,
    /// Pane number that inline counters are relative to (the first pane seen).
    base: Option<i64>,
    windows: Vec<WindowId>,
    slots: Vec<Option<Pane>>,
    free_slots: Vec<usize>,
    index: FxMap<i64, usize>,
    /// The pane the last event went to: `(start, end, slot)`; most events hit it.
    cached: Option<(Millis, Millis, usize)>,
    /// The latest `sealed_until` of its windows (`Millis::MIN`: none).
    sealed_until: Millis,
}

/// Per-instance bookkeeping: emission state and late-event exclusions.
#[derive(Default)]
struct Instance {
    exclusions: FxMap<ItemIdx, u64>,
    touched: u64,
    emitted: u64,
    /// What it emitted last, for an incremental emission (`None`: recount in full).
    last: Option<emit::Emitted>,
    /// Per-group windows: the groups of its last emission (a group gone to `(other)` since is
    /// withdrawn with an empty list).
    groups: Vec<GroupKey>,
}

/// Counters for the state gauges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterStats {
    /// Live (item, pane) counters.
    pub live_counters: usize,
    /// Live items (interned ids).
    pub live_items: usize,
    /// Live panes.
    pub live_panes: usize,
    /// Live window instances.
    pub live_instances: usize,
    /// Approximate heap bytes of the counting state.
    pub heap_bytes: usize,
    /// Events a distinct-user window could not count because they had no user (so far).
    pub without_user: u64,
    /// Lists emitted from the last list and the changes (see `emit`), and recounted in full.
    pub emits: (u64, u64),
}

/// The exact windowed counter of one worker.
pub struct WindowedCounter {
    windows: Vec<WindowSpec>,
    allowed_lateness: Span,
    worker: u32,
    groups: Vec<PaneGroup>,
    interner: Interner,
    instances: BTreeMap<InstanceKey, Instance>,
    global_wm: Millis,
    seq: u64,
    /// Per-item sums for building lists.
    sums: dense::DenseSums,
    /// Set by `restore`: the next `advance` emits every instance (the merger's per-worker lists
    /// are not in snapshots, so it needs all of them once).
    force_emit: bool,
    /// Per window (by id): instances ending at or before this are sealed whatever the watermark
    /// (`Millis::MIN`: none). Set only by a restore (see [`sealed_after_end`]).
    sealed_until: Vec<Millis>,
    /// The key shapes of the windows.
    shapes: Shapes,
    /// Per shape, the key the event being applied counts under (scratch of `apply`).
    shape_keys: Vec<Option<ItemIdx>>,
    /// Buffers for building counter keys.
    key_buf: (String, String),
    /// Events a distinct-user window could not count because they had no user.
    without_user: u64,
    /// Per shape, whether a window this counter counts has it (derived once, read per event).
    shape_counted: Vec<bool>,
    /// The emit generation (1..=255): goes up after each `advance` that emitted (see `emit`).
    gen: u8,
    /// `stats().emits`.
    emits: (u64, u64),
    /// Per instance of a window with `by`: the groups announced to it (see `group::admission`).
    admission: BTreeMap<InstanceKey, InstanceGroups>,
    /// Tests: emit incrementally whenever possible, and check each such list against the
    /// recount (panics on a difference).
    checked: bool,
}

/// What an end of input sealed, per window, when the input goes on after it: every instance
/// that can hold an event at or before `max_event_time` (the largest event time read before the
/// end), i.e. each window's instances up to the last one covering it. Their lists were published
/// final; later instances never held an event and count as usual. Empty when nothing was read.
pub fn sealed_after_end(windows: &[WindowSpec], max_event_time: Millis) -> Vec<Millis> {
    if max_event_time == Millis::MIN {
        return Vec::new();
    }
    windows.iter().map(|w| w.last_end_covering(max_event_time)).collect()
}

/// The sealing horizon of window `w`: its instances ending at or before it are sealed.
#[inline]
pub(crate) fn horizon(sealed_h: Millis, sealed_until: &[Millis], w: WindowId) -> Millis {
    match sealed_until.get(w.0 as usize) {
        Some(until) => sealed_h.max(*until),
        None => sealed_h,
    }
}

impl WindowedCounter {
    /// A counter for validated windows (see `window::validate_all`).
    pub fn new(windows: Vec<WindowSpec>, allowed_lateness: Span, worker: u32) -> WindowedCounter {
        WindowedCounter::counting(windows, &[], allowed_lateness, worker)
    }

    /// A counter that counts only the windows with `counted[w]` set (all when `counted` is
    /// empty): the others (sketch windows) keep their ids and are never counted here.
    pub fn counting(
        windows: Vec<WindowSpec>,
        counted: &[bool],
        allowed_lateness: Span,
        worker: u32,
    ) -> WindowedCounter {
        let mut groups: Vec<PaneGroup> = Vec::new();
        for (i, w) in windows.iter().enumerate() {
            if counted.get(i) == Some(&false) {
                continue;
            }
            let id = WindowId(i as u16);
            match groups.iter_mut().find(|g| g.width == w.pane_width()) {
                Some(g) => g.windows.push(id),
                None => groups.push(PaneGroup {
                    width: w.pane_width(),
                    shapes: Vec::new(),
                    base: None,
                    windows: vec![id],
                    slots: Vec::new(),
                    free_slots: Vec::new(),
                    index: FxMap::default(),
                    cached: None,
                    sealed_until: Millis::MIN,
                }),
            }
        }
        let shapes = Shapes::new(&windows);
        for g in groups.iter_mut() {
            for w in &g.windows {
                let s = shapes.of_window(w.0 as usize);
                if !g.shapes.contains(&s) {
                    g.shapes.push(s);
                }
            }
        }
        let shape_counted = (0..shapes.len() as u8)
            .map(|s| groups.iter().any(|g| g.shapes.contains(&s)))
            .collect();
        WindowedCounter {
            windows,
            allowed_lateness,
            worker,
            groups,
            interner: Interner::new(),
            instances: BTreeMap::new(),
            global_wm: Millis::MIN,
            seq: 1,
            sums: dense::DenseSums::default(),
            force_emit: false,
            sealed_until: Vec::new(),
            shapes,
            shape_counted,
            shape_keys: Vec::new(),
            key_buf: (String::new(), String::new()),
            without_user: 0,
            gen: 1,
            emits: (0, 0),
            admission: BTreeMap::new(),
            checked: cfg!(test),
        }
    }

    /// Per window (by id), the instances that stay sealed whatever the watermark: those ending
    /// at or before this (`Millis::MIN`: none; empty: none at all).
    pub fn sealed_until(&self) -> &[Millis] {
        &self.sealed_until
    }

    /// Seals, per window, the instances ending at or before `until[w]` (never unseals).
    fn seal_until(&mut self, until: &[Millis]) {
        if until.iter().all(|u| *u == Millis::MIN) {
            return;
        }
        self.sealed_until.resize(self.windows.len(), Millis::MIN);
        for (mine, u) in self.sealed_until.iter_mut().zip(until) {
            *mine = (*mine).max(*u);
        }
        for group in self.groups.iter_mut() {
            group.sealed_until = group
                .windows
                .iter()
                .map(|w| self.sealed_until[w.0 as usize])
                .max()
                .unwrap_or(Millis::MIN);
        }
    }

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
        for (key, inst) in &self.instances {
            let mut per_kg: BTreeMap<u32, Vec<(ItemId, u64)>> = BTreeMap::new();
            for (i, c) in &inst.exclusions {
                per_kg
                    .entry(key_group(self.interner.hash(*i)))
                    .or_default()
                    .push((self.interner.id(*i).clone(), *c));
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

    /// The apply sequence: pass the value read right after a snapshot to the next
    /// [`snapshot_panes`](Self::snapshot_panes) as `since`.
    pub fn sequence(&self) -> u64 {
        self.seq
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
                let mut counts: Vec<(u32, ItemIdx, u64)> = Vec::new();
                self.pane_counts(g, pane, |i, c| {
                    if c > 0 {
                        counts.push((key_group(self.interner.hash(i)), i, c));
                    }
                });
                counts.sort_unstable_by_key(|(kg, _, _)| *kg);
                let mut key_groups: Vec<(u32, Vec<(ItemId, u64)>)> = Vec::new();
                for (kg, i, c) in counts {
                    if key_groups.last().is_none_or(|(last, _)| *last != kg) {
                        key_groups.push((kg, Vec::new()));
                    }
                    if let Some((_, items)) = key_groups.last_mut() {
                        items.push((self.interner.id(i).clone(), c));
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
        let mut c = WindowedCounter::counting(windows, counted, allowed_lateness, worker);
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
                let idx = self.interner.intern_shaped(id, route_hash(id), shape);
                let p = self.groups[g].slots[slot].as_mut().expect("live slot");
                match p.counts.entry(idx) {
                    Entry::Occupied(mut o) => *o.get_mut() = o.get().saturating_add(*count),
                    Entry::Vacant(v) => {
                        v.insert(*count);
                        self.interner.retain(idx);
                    }
                }
            }
        }
        for ex in &kg.exclusions {
            if !self.groups.iter().any(|g| g.windows.contains(&ex.instance.window)) {
                continue; // a window this counter does not count (a sketch window)
            }
            let end = self.windows[ex.instance.window.0 as usize].end_of(ex.instance.start);
            if end <= horizon(sealed_h, &self.sealed_until, ex.instance.window) {
                continue; // sealed: nothing will read it (and it must publish nothing)
            }
            for (id, count) in &ex.items {
                let Some(shape) = self.shapes.of_key(id) else { continue };
                let idx = self.interner.intern_shaped(id, route_hash(id), shape);
                let excluded = self
                    .instances
                    .entry(ex.instance)
                    .or_default()
                    .exclusions
                    .entry(idx)
                    .or_insert(0);
                *excluded = excluded.saturating_add(*count);
            }
        }
    }

    /// Takes the group announcements of an epoch (from every worker; after its events, before
    /// its `advance`). Announcements for sealed instances, or for windows this counter does not
    /// count by groups, are ignored.
    pub fn note_groups(&mut self, notes: &[GroupNote]) {
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        for note in notes {
            let key = note.instance;
            let Some(spec) = self.windows.get(key.window.0 as usize) else {
                continue;
            };
            if spec.key.by.is_empty()
                || !self.groups.iter().any(|g| g.windows.contains(&key.window))
                || spec.end_of(key.start) <= horizon(sealed_h, &self.sealed_until, key.window)
            {
                continue;
            }
            let max_groups = spec.key.max_groups;
            let groups = self
                .admission
                .entry(key)
                .or_insert_with(|| InstanceGroups::new(max_groups));
            if groups.insert(note.hash) == Admitted::Displaced {
                // a group this worker may have listed now counts in (other)
                if let Some(inst) = self.instances.get_mut(&key) {
                    inst.touched = self.seq;
                }
            }
        }
    }

    /// Per window with `by` dims, the most groups counted in `(other)` in one live instance
    /// (windows without such an instance are absent).
    pub fn overflow_groups(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (key, groups) in &self.admission {
            let n = groups.folded() as u64;
            if n > 0 {
                let e = out.entry(self.windows[key.window.0 as usize].name.clone()).or_default();
                *e = (*e).max(n);
            }
        }
        out
    }

    /// The global watermark as of the last `advance`.
    pub fn watermark(&self) -> Millis {
        self.global_wm
    }

    /// Counts one event. An event that reaches only sealed instances is returned as a dead
    /// letter (reason `sealed`); instances it is late for are skipped (its source already
    /// dead-lettered it as `late`). An event time outside years 0000-9999 (which sources
    /// reject) is returned as a `bad` dead letter: every event is counted or dead-lettered.
    pub fn apply(&mut self, ev: &TimedEvent) -> Option<DeadLetter> {
        if let Err(bad) = check_event_time(ev.ts) {
            return Some(out_of_range(ev, bad));
        }
        if !self.shapes.all_plain() {
            return self.apply_shaped(ev);
        }
        let late_h = ev.wm_before.minus(self.allowed_lateness);
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        let idx = self.interner.intern(&ev.item, ev.hash);
        let mut sealed_drop = false;
        let mut counted = false;
        for g in 0..self.groups.len() {
            // Late for every instance of this group: the source dead-lettered it already.
            // (Every covering instance ends after ts, so ts >= late_h means none is late.)
            if ev.ts < late_h && self.group_last_end(g, ev.ts) <= late_h {
                continue;
            }
            let slot = self.pane_slot(g, ev.ts, sealed_h);
            let group = &mut self.groups[g];
            let Some(slot) = slot else {
                // The pane is gone: every instance containing it is sealed, and at least one
                // of them accepted the event by the lateness rule.
                sealed_drop = true;
                continue;
            };
            let pane = group.slots[slot].as_mut().expect("cached slot is live");
            if pane.first_end > late_h && pane.first_end > sealed_h.max(group.sealed_until) {
                // Fast path: on time for every covering instance.
                self.count(g, slot, idx);
                counted = true;
                continue;
            }
            let (accepted, sealed) = self.count_slow(g, slot, ev, late_h, sealed_h, &[Some(idx)]);
            counted |= accepted;
            sealed_drop |= sealed;
        }
        if !counted {
            self.interner.release_unreferenced(idx);
        }
        sealed_drop.then(|| sealed_letter(ev, self.global_wm))
    }

    /// `apply` for a counter with per-group or distinct-user windows: the event is counted
    /// under one key per shape of each pane group.
    fn apply_shaped(&mut self, ev: &TimedEvent) -> Option<DeadLetter> {
        let late_h = ev.wm_before.minus(self.allowed_lateness);
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        let mut keys = std::mem::take(&mut self.shape_keys);
        keys.clear();
        let (mut group_buf, mut key_buf) = std::mem::take(&mut self.key_buf);
        let mut missing_user = false;
        for s in 0..self.shapes.len() as u8 {
            keys.push(if !self.shape_counted[s as usize] {
                None // no counted window has this shape (a window of another counter)
            } else if s == 0 {
                Some(self.interner.intern(&ev.item, ev.hash))
            } else if self.shapes.key(s, ev, &mut group_buf, &mut key_buf) {
                Some(self.interner.intern_shaped(&key_buf, ev.hash, s))
            } else {
                missing_user = true;
                None
            });
        }
        self.key_buf = (group_buf, key_buf);
        self.without_user += u64::from(missing_user);
        let mut sealed_drop = false;
        for g in 0..self.groups.len() {
            if ev.ts < late_h && self.group_last_end(g, ev.ts) <= late_h {
                continue;
            }
            let slot = self.pane_slot(g, ev.ts, sealed_h);
            let Some(slot) = slot else {
                sealed_drop = true;
                continue;
            };
            let group = &self.groups[g];
            let pane = group.slots[slot].as_ref().expect("cached slot is live");
            if pane.first_end > late_h && pane.first_end > sealed_h.max(group.sealed_until) {
                for i in 0..group.shapes.len() {
                    if let Some(idx) = keys[self.groups[g].shapes[i] as usize] {
                        self.count(g, slot, idx);
                    }
                }
                continue;
            }
            let (_, sealed) = self.count_slow(g, slot, ev, late_h, sealed_h, &keys);
            sealed_drop |= sealed;
        }
        for idx in keys.iter().flatten() {
            self.interner.release_unreferenced(*idx);
        }
        self.shape_keys = keys;
        sealed_drop.then(|| sealed_letter(ev, self.global_wm))
    }

    /// The slow path of `apply` in pane group `g`: decides per covering instance (per window
    /// shape, `keys[shape]` is the key counted; `None`: not counted in that shape's windows).
    /// Returns whether the event was counted, and whether some instance was already sealed.
    fn count_slow(
        &mut self,
        g: usize,
        slot: usize,
        ev: &TimedEvent,
        late_h: Millis,
        sealed_h: Millis,
        keys: &[Option<ItemIdx>],
    ) -> (bool, bool) {
        let mut sealed_drop = false;
        let mut accepted: u64 = 0; // bit per shape
        let mut excluded: Vec<(InstanceKey, u8)> = Vec::new();
        let group = &self.groups[g];
        for &wid in &group.windows {
            let shape = self.shapes.of_window(wid.0 as usize);
            if keys.get(shape as usize).copied().flatten().is_none() {
                continue;
            }
            let w = &self.windows[wid.0 as usize];
            let sealed_h = horizon(sealed_h, &self.sealed_until, wid);
            for start in w.starts_covering(ev.ts) {
                let end = w.end_of(start);
                let key = InstanceKey { window: wid, start };
                if end <= late_h {
                    if end > sealed_h {
                        excluded.push((key, shape));
                    }
                } else if end <= sealed_h {
                    sealed_drop = true;
                } else {
                    accepted |= 1 << shape;
                }
            }
        }
        for (shape, key) in keys.iter().enumerate() {
            if let Some(idx) = key.filter(|_| accepted & (1 << shape) != 0) {
                self.count(g, slot, idx);
            }
        }
        for (key, shape) in excluded {
            if accepted & (1 << shape) == 0 {
                continue;
            }
            let Some(idx) = keys[shape as usize] else { continue };
            let inst = self.instances.entry(key).or_default();
            *inst.exclusions.entry(idx).or_insert(0) += 1;
            inst.touched = self.seq;
        }
        (accepted != 0, sealed_drop)
    }

    /// The pane group a window belongs to.
    fn group_of(&self, w: WindowId) -> usize {
        self.groups
            .iter()
            .position(|g| g.windows.contains(&w))
            .expect("window in a group")
    }

    /// Calls `f` with every (item, count) of a pane of group `g`: its map and its inline members.
    fn pane_counts(&self, g: usize, pane: &Pane, mut f: impl FnMut(ItemIdx, u64)) {
        for (i, c) in &pane.counts {
            f(*i, *c);
        }
        if let Some(rel) = pane.rel {
            for &i in &pane.members {
                let inl = self.interner.inline(i, g);
                if inl.pane == rel {
                    f(i, inl.count() as u64);
                }
            }
        }
    }

    /// Counts one event of item `idx` in the pane at `slot` of group `g`.
    #[inline]
    fn count(&mut self, g: usize, slot: usize, idx: ItemIdx) {
        let (seq, gen) = (self.seq, self.gen);
        let group = &mut self.groups[g];
        let pane = group.slots[slot].as_mut().expect("live slot");
        pane.touched = seq;
        let Some(rel) = pane.rel else {
            map_increment(pane, idx, &mut self.interner);
            pane.log.push(idx); // (map counts are logged at every change: they are rare)
            return;
        };
        let inl = self.interner.inline(idx, g);
        if inl.pane == rel {
            if inl.count() < INLINE_MAX {
                let inl = self.interner.inline_mut(idx, g);
                inl.increment();
                if inl.logged() != gen {
                    inl.set_logged(gen);
                    pane.log.push(idx);
                }
            } else {
                // An inline count is 32 bits: move it to the map and count there from now on.
                *self.interner.inline_mut(idx, g) = Inline::EMPTY;
                pane.inline_live -= 1;
                pane.counts.insert(idx, inl.count() as u64 + 1);
                pane.log.push(idx);
            }
            return;
        }
        pane.log.push(idx);
        if inl.pane != Inline::EMPTY.pane && rel < inl.pane {
            // An older pane than the inline one (out of order): its count lives in the map.
            map_increment(pane, idx, &mut self.interner);
            return;
        }
        if let Some(c) = pane.counts.get_mut(&idx) {
            // This pane's count already moved to the map (overflow): keep it there.
            *c += 1;
            return;
        }
        // This pane becomes the item's inline pane; the previous inline count moves to its map.
        pane.members.push(idx);
        pane.inline_live += 1;
        self.interner.retain(idx);
        *self.interner.inline_mut(idx, g) = Inline::new(rel, 1, gen);
        if inl.pane != Inline::EMPTY.pane {
            let base = group.base.expect("inline panes imply a base");
            let old_no = base + inl.pane as i64;
            let old_slot = *group.index.get(&old_no).expect("an inline pane is live");
            let old = group.slots[old_slot].as_mut().expect("an inline pane is live");
            old.counts.insert(idx, inl.count() as u64);
            old.inline_live -= 1;
        }
    }

    /// End of the last-ending instance of group `g` that covers `ts`.
    fn group_last_end(&self, g: usize, ts: Millis) -> Millis {
        let group = &self.groups[g];
        group
            .windows
            .iter()
            .map(|w| self.windows[w.0 as usize].last_end_covering(ts))
            .max()
            .unwrap_or(Millis::MIN)
    }

    /// The slot of the pane of group `g` containing `ts`, creating it (and registering its
    /// instances) if needed; `None` if the pane would only feed sealed instances.
    fn pane_slot(&mut self, g: usize, ts: Millis, sealed_h: Millis) -> Option<usize> {
        let group = &mut self.groups[g];
        if let Some((start, end, slot)) = group.cached {
            if ts >= start && ts < end {
                return Some(slot);
            }
        }
        let w = group.width.as_i64();
        let pane_no = ts.0.div_euclid(w);
        let start = Millis(pane_no.saturating_mul(w));
        let end = start.plus(group.width);
        if let Some(&slot) = group.index.get(&pane_no) {
            group.cached = Some((start, end, slot));
            return Some(slot);
        }
        // New pane: its covering instances are the same for every time inside it.
        let mut first_end = Millis::MAX;
        let mut last_end = Millis::MIN;
        let mut all_sealed = true;
        let mut keys = Vec::new();
        for &wid in &group.windows {
            let spec = &self.windows[wid.0 as usize];
            let sealed_h = horizon(sealed_h, &self.sealed_until, wid);
            first_end = first_end.min(spec.first_end_covering(start));
            last_end = last_end.max(spec.last_end_covering(start));
            all_sealed &= spec.last_end_covering(start) <= sealed_h;
            keys.extend(
                spec.starts_covering(start)
                    .map(|s| (InstanceKey { window: wid, start: s }, spec.end_of(s)))
                    .filter(|(_, end)| *end > sealed_h),
            );
        }
        if all_sealed {
            return None;
        }
        for (key, _) in keys {
            self.instances.entry(key).or_default();
        }
        let rel = if g < INLINE_GROUPS {
            let base = *group.base.get_or_insert(pane_no);
            i32::try_from(pane_no.saturating_sub(base))
                .ok()
                .filter(|r| *r != Inline::EMPTY.pane)
        } else {
            None
        };
        let pane = Pane {
            start,
            counts: FxMap::default(),
            rel,
            members: Vec::new(),
            inline_live: 0,
            touched: 0,
            last_end,
            first_end,
            log: Vec::new(),
            log_start: 0,
        };
        let slot = match group.free_slots.pop() {
            Some(s) => {
                group.slots[s] = Some(pane);
                s
            }
            None => {
                group.slots.push(Some(pane));
                group.slots.len() - 1
            }
        };
        group.index.insert(pane_no, slot);
        group.cached = Some((start, end, slot));
        Some(slot)
    }

    /// Ends the current epoch: adopts the new global watermark, returns the local lists to
    /// publish (dirty instances that are closed, sealed, or open when `tick` is set), and frees
    /// sealed instances and panes.
    pub fn advance(&mut self, global_wm: Millis, tick: bool) -> Vec<LocalList> {
        self.global_wm = self.global_wm.max(global_wm);
        let wm = self.global_wm;
        let sealed_h = wm.minus(self.allowed_lateness);
        let mut out = Vec::new();
        let force = std::mem::take(&mut self.force_emit);
        let mut emitted = false;
        let keys: Vec<InstanceKey> = self.instances.keys().copied().collect();
        for key in keys {
            let end = self.windows[key.window.0 as usize].end_of(key.start);
            let open = end > wm;
            let sealed = end <= horizon(sealed_h, &self.sealed_until, key.window);
            if force || ((tick || !open) && self.is_dirty(key)) {
                emitted = true;
                for (group, items) in self.instance_top_k(key, force) {
                    out.push(LocalList {
                        instance: key,
                        group,
                        worker: self.worker,
                        items,
                        source: ListSource::PaneCounter,
                        share: None,
                    });
                }
                if let Some(inst) = self.instances.get_mut(&key) {
                    inst.emitted = self.seq;
                }
            }
            if sealed {
                self.instances.remove(&key);
            }
        }
        let (windows, sealed_until) = (&self.windows, &self.sealed_until);
        self.admission.retain(|key, _| {
            windows[key.window.0 as usize].end_of(key.start) > horizon(sealed_h, sealed_until, key.window)
        });
        for (groups_index, group) in self.groups.iter_mut().enumerate() {
            let mut freed = false;
            for slot in 0..group.slots.len() {
                let dead = matches!(&group.slots[slot], Some(p) if p.last_end <= sealed_h);
                if dead {
                    let pane = group.slots[slot].take().expect("checked live");
                    for idx in pane.counts.keys() {
                        self.interner.release(*idx);
                    }
                    if let Some(rel) = pane.rel {
                        for &idx in &pane.members {
                            let g = groups_index;
                            if self.interner.inline(idx, g).pane == rel {
                                *self.interner.inline_mut(idx, g) = Inline::EMPTY;
                                self.interner.release(idx);
                            }
                        }
                    }
                    group.index.remove(&pane.start.0.div_euclid(group.width.as_i64()));
                    group.free_slots.push(slot);
                    freed = true;
                }
            }
            if freed {
                group.cached = None;
            }
        }
        self.trim_logs(emitted);
        if emitted {
            self.next_gen();
            // (8 bytes per item index: given back between emissions, a fresh one is cheap)
            self.sums = dense::DenseSums::default();
        }
        self.seq += 1;
        out
    }

    fn panes_of(&self, key: InstanceKey) -> (usize, impl Iterator<Item = Option<&Pane>> + '_) {
        let spec = &self.windows[key.window.0 as usize];
        let g = self
            .groups
            .iter()
            .position(|g| g.windows.contains(&key.window))
            .expect("window in a group");
        let group = &self.groups[g];
        let w = group.width.as_i64();
        let first = key.start.0.div_euclid(w);
        let n = (spec.size.as_i64() / w) as usize;
        (
            n,
            (0..n as i64).map(move |i| group.index.get(&(first + i)).and_then(|&s| group.slots[s].as_ref())),
        )
    }

    fn is_dirty(&self, key: InstanceKey) -> bool {
        let Some(inst) = self.instances.get(&key) else {
            return false;
        };
        if inst.touched > inst.emitted {
            return true;
        }
        let (_, mut panes) = self.panes_of(key);
        panes.any(|p| p.is_some_and(|p| p.touched > inst.emitted))
    }

    /// This worker's exact top-K lists for an instance: one global list, or one per group
    /// (per-group windows).
    /// (`force`: recount in full.)
    fn instance_top_k(&mut self, key: InstanceKey, force: bool) -> Vec<(GroupKey, Vec<RankedItem>)> {
        let k = self.windows[key.window.0 as usize].k;
        let g_of = self.group_of(key.window);
        let shape = self.shapes.of_window(key.window.0 as usize);
        let incremental = (shape == 0 && !force)
            .then(|| self.incremental_candidates(key, g_of))
            .flatten();
        let checking = self.checked && incremental.is_some();
        let mut candidates = match incremental {
            Some(c) => {
                self.emits.0 += 1;
                c
            }
            None => {
                self.emits.1 += 1;
                self.full_candidates(key, g_of)
            }
        };
        let interner = &self.interner;
        if self.groups[g_of].shapes.len() > 1 {
            candidates.retain(|(_, i)| interner.shape(*i) == shape);
        }
        if shape != 0 {
            let keys = candidates.iter().map(|(c, i)| (interner.id(*i).as_str(), *c));
            let admission = self.admission.get(&key);
            let mut lists = group_lists(keys, self.shapes.distinct_users(shape), k, |group| {
                admission.is_none_or(|a| a.admits(item_hash(group)))
            });
            // groups emitted before that now count in (other): withdrawn
            let now: Vec<GroupKey> = lists.iter().map(|(g, _)| g.clone()).collect();
            if let Some(inst) = self.instances.get_mut(&key) {
                let before = std::mem::replace(&mut inst.groups, now);
                let withdrawn: Vec<GroupKey> = before
                    .into_iter()
                    .filter(|g| lists.binary_search_by(|(x, _)| x.cmp(g)).is_err())
                    .collect();
                lists.extend(withdrawn.into_iter().map(|g| (g, Vec::new())));
            }
            return lists;
        }
        select_top_counted(&mut candidates, k, |i| interner.id(i).as_str());
        if checking {
            let mut full = self.full_candidates(key, g_of);
            let interner = &self.interner;
            full.retain(|(_, i)| interner.shape(*i) == 0);
            select_top_by(&mut full, k, |a, b| {
                rank_cmp(a.0, interner.id(a.1), b.0, interner.id(b.1))
            });
            assert_eq!(candidates, full, "incremental list of {key:?} differs from the recount");
        }
        let interner = &self.interner;
        let list = candidates
            .iter()
            .map(|(count, i)| RankedItem {
                item_id: interner.id(*i).clone(),
                count: *count,
            })
            .collect();
        self.remember(key, candidates.into_iter().map(|(_, i)| i).collect());
        vec![(GroupKey::global(), list)]
    }

    /// Every (count, item) of an instance with a positive count, recounted from its panes.
    fn full_candidates(&mut self, key: InstanceKey, g_of: usize) -> Vec<(u64, ItemIdx)> {
        let no_exclusions = self.instances.get(&key).is_none_or(|i| i.exclusions.is_empty());
        let single: Option<Vec<(u64, ItemIdx)>> = {
            let (n, mut panes) = self.panes_of(key);
            (n == 1 && no_exclusions).then(|| {
                let mut v = Vec::new();
                if let Some(p) = panes.next().flatten() {
                    self.pane_counts(g_of, p, |i, c| v.push((c, i)));
                }
                v
            })
        };
        match single {
            Some(c) => c,
            None => {
                let mut sums = std::mem::take(&mut self.sums);
                {
                    let (_, panes) = self.panes_of(key);
                    for p in panes.flatten() {
                        self.pane_counts(g_of, p, |i, c| sums.add(i, c));
                    }
                }
                if let Some(inst) = self.instances.get(&key) {
                    for (i, c) in &inst.exclusions {
                        sums.sub(*i, *c);
                    }
                }
                let mut c = Vec::with_capacity(sums.items().len());
                sums.drain(|count, i| c.push((count, i)));
                self.sums = sums;
                c
            }
        }
    }

    /// State gauges (walks the panes: call it at most once per reporting interval).
    pub fn stats(&self) -> CounterStats {
        let mut s = CounterStats {
            live_items: self.interner.len(),
            live_instances: self.instances.len(),
            without_user: self.without_user,
            emits: self.emits,
            ..Default::default()
        };
        let mut heap = self.interner.heap_bytes() + self.sums.heap_bytes();
        for g in &self.groups {
            heap += g.index.capacity() * (8 + 8 + 1) + g.slots.capacity() * std::mem::size_of::<Option<Pane>>();
            for p in g.slots.iter().flatten() {
                s.live_panes += 1;
                s.live_counters += p.counts.len() + p.inline_live;
                heap += p.counts.capacity() * (std::mem::size_of::<(ItemIdx, u64)>() + 1)
                    + (p.members.capacity() + p.log.capacity()) * 4;
            }
        }
        for inst in self.instances.values() {
            heap += inst.exclusions.capacity() * 13 + inst.last.as_ref().map_or(0, emit::Emitted::heap_bytes);
        }
        heap += self.admission.values().map(InstanceGroups::heap_bytes).sum::<usize>();
        s.heap_bytes = heap;
        s
    }
}

#[inline]
fn map_increment(pane: &mut Pane, idx: ItemIdx, interner: &mut Interner) {
    match pane.counts.entry(idx) {
        Entry::Occupied(mut o) => *o.get_mut() += 1,
        Entry::Vacant(v) => {
            v.insert(1);
            interner.retain(idx);
        }
    }
}

/// The dead letter of an event outside the event time range (cold: sources reject those).
#[cold]
pub(crate) fn out_of_range(ev: &TimedEvent, bad: BadRecord) -> DeadLetter {
    DeadLetter {
        partition: ev.partition,
        position: ev.position,
        raw: render_event(ev),
        reason: DeadReason::Bad,
        detail: bad.to_string(),
    }
}

/// The dead letter of an event that reached sealed instances (at global watermark `wm`).
#[cold]
pub(crate) fn sealed_letter(ev: &TimedEvent, wm: Millis) -> DeadLetter {
    DeadLetter {
        partition: ev.partition,
        position: ev.position,
        raw: render_event(ev),
        reason: DeadReason::Sealed,
        detail: format!("window already sealed at watermark {wm}"),
    }
}

/// The JSON rendering of an event, for dead letters raised after the raw bytes are gone.
pub fn render_event(ev: &TimedEvent) -> Vec<u8> {
    serde_json::json!({"item_id": ev.item.as_str(), "ts": ev.ts.0})
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;
    use crate::record::PartitionId;
    use proptest::{prop_assert, prop_assert_eq};

    fn ev(item: &str, ts: i64, wm_before: i64) -> TimedEvent {
        TimedEvent {
            extra: None,
            item: item.into(),
            ts: Millis(ts),
            wm_before: Millis(wm_before),
            hash: item_hash(item),
            partition: PartitionId(0),
            position: 0,
        }
    }

    fn list(l: &LocalList) -> Vec<(String, u64)> {
        l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect()
    }

    #[test]
    fn tumbling_counts_close_and_seal() {
        let w = WindowSpec::tumbling("t", Span::from_millis(10), 2);
        let mut c = WindowedCounter::new(vec![w], Span::from_millis(5), 0);
        for (item, ts) in [("a", 1), ("b", 2), ("a", 3), ("c", 11)] {
            assert!(c.apply(&ev(item, ts, i64::MIN)).is_none());
        }
        // no tick, nothing closed: nothing emitted
        assert!(c.advance(Millis(5), false).is_empty());
        // tick: both open instances are dirty since they were never emitted
        assert_eq!(c.advance(Millis(5), true).len(), 2);
        // another tick: nothing changed since that emission
        assert!(c.advance(Millis(5), true).is_empty());
        c.apply(&ev("b", 4, 0));
        let out = c.advance(Millis(10), false);
        assert_eq!(out.len(), 1, "[0,10) closed and dirty");
        assert_eq!(list(&out[0]), vec![("a".into(), 2), ("b".into(), 2)]);
        // a late-but-accepted event (wm_before 10 < end 10 + 5) corrects the closed window
        c.apply(&ev("c", 5, 10));
        let out = c.advance(Millis(12), false);
        assert_eq!(
            list(&out[0]),
            vec![("a".into(), 2), ("b".into(), 2)],
            "k=2 cut: c has 1"
        );
        // sealing frees the state; nothing changed so nothing is emitted
        assert!(c.advance(Millis(15), false).is_empty());
        assert_eq!(c.stats().live_instances, 1, "only [10,20) left");
        // an event for the sealed window is dead-lettered as sealed
        let d = c.apply(&ev("a", 1, 0)).expect("sealed drop");
        assert_eq!(d.reason, DeadReason::Sealed);
    }

    /// After an end of input (everything sealed at +∞, the state freed) the counter goes on
    /// with `sealed_after_end`: per window, the instances up to the last one covering the last
    /// event time stay sealed — an event for one is a `sealed` dead letter and still counts in
    /// the others — and later instances of every window count, even those inside a sealed
    /// instance of a larger window. The horizon survives further snapshots and restores.
    #[test]
    fn instances_sealed_by_an_end_of_input_stay_sealed() {
        let s = Span::from_millis;
        let small = WindowSpec::tumbling("10", s(10), 5);
        let large = WindowSpec::tumbling("100", s(100), 5);
        let windows = vec![small, large];
        let mut ended = WindowedCounter::new(windows.clone(), s(5), 0);
        ended.apply(&ev("a", 42, i64::MIN));
        assert_eq!(
            ended.advance(Millis::MAX, false).len(),
            2,
            "both instances sealed at +∞"
        );
        let mut snap = ended.snapshot();
        assert!(snap.key_groups.is_empty(), "freed");
        snap.watermark = Millis::MIN;
        snap.sealed_until = sealed_after_end(&windows, Millis(42));
        assert_eq!(snap.sealed_until, vec![Millis(50), Millis(100)]);
        let mut c = WindowedCounter::restore(windows.clone(), s(5), 0, 1, &[snap]).expect("restores");
        // [40, 50) and [0, 100) are sealed: an event at 45 counts nowhere
        assert_eq!(c.apply(&ev("b", 45, 40)).map(|d| d.reason), Some(DeadReason::Sealed));
        // 55: [50, 60) counts, [0, 100) is sealed
        assert_eq!(c.apply(&ev("c", 55, 40)).map(|d| d.reason), Some(DeadReason::Sealed));
        // 150: counts in both of its instances
        assert!(c.apply(&ev("d", 150, 40)).is_none());
        let out = c.advance(Millis(200), false);
        let got: BTreeMap<(u16, i64), Vec<(String, u64)>> = out
            .iter()
            .map(|l| ((l.instance.window.0, l.instance.start.0), list(l)))
            .collect();
        let want: BTreeMap<(u16, i64), Vec<(String, u64)>> = [
            ((0, 50), vec![("c".to_string(), 1)]),
            ((0, 150), vec![("d".to_string(), 1)]),
            ((1, 100), vec![("d".to_string(), 1)]),
        ]
        .into();
        assert_eq!(got, want, "nothing for the sealed instances");
        let again = c.snapshot();
        assert_eq!(again.sealed_until, vec![Millis(50), Millis(100)]);
        let mut r = WindowedCounter::restore(windows, s(5), 0, 1, &[again]).expect("restores");
        assert_eq!(r.apply(&ev("e", 99, 40)).map(|d| d.reason), Some(DeadReason::Sealed));
        assert_eq!(sealed_after_end(&[], Millis(1)), Vec::<Millis>::new());
        assert_eq!(sealed_after_end(&r.windows, Millis::MIN), Vec::<Millis>::new());
    }

    #[test]
    fn hopping_exclusions_skip_late_instances_only() {
        // size 20, slide 10: t=15 is in [0,20) and [10,30)
        let w = WindowSpec {
            key: Default::default(),
            name: "h".into(),
            size: Span::from_millis(20),
            slide: Span::from_millis(10),
            k: 5,
        };
        let mut c = WindowedCounter::new(vec![w], Span::ZERO, 0);
        c.apply(&ev("a", 15, i64::MIN));
        // wm_before 20: late for [0,20) (end 20 <= 20), on time for [10,30)
        c.apply(&ev("b", 15, 20));
        let out = c.advance(Millis(30), false);
        let by_start: BTreeMap<i64, Vec<(String, u64)>> = out.iter().map(|l| (l.instance.start.0, list(l))).collect();
        assert_eq!(by_start[&0], vec![("a".to_string(), 1)]);
        assert_eq!(by_start[&10], vec![("a".to_string(), 1), ("b".to_string(), 1)]);
        let s = c.stats();
        assert_eq!(
            (s.live_counters, s.live_items, s.live_panes),
            (0, 0, 0),
            "all sealed and freed"
        );
    }

    #[test]
    fn late_for_small_windows_is_not_sealed_for_them() {
        let small = WindowSpec::tumbling("s", Span::from_millis(10), 3);
        let big = WindowSpec::tumbling("b", Span::from_millis(1000), 3);
        let mut c = WindowedCounter::new(vec![small, big], Span::from_millis(5), 0);
        c.apply(&ev("a", 500, i64::MIN));
        c.advance(Millis(490), false);
        // ts 100: late for [100,110) of "s" (wm_before 490 >= 110 + 5), on time for "b"
        assert_eq!(c.apply(&ev("a", 100, 490)), None, "late is not sealed");
        let out = c.advance(Millis::MAX, false);
        let big_list = out
            .iter()
            .find(|l| l.instance.window == WindowId(1))
            .expect("b emitted");
        assert_eq!(big_list.items[0].count, 2);
        assert!(
            out.iter().all(|l| l.instance.start != Millis(100)),
            "no instance for the late pane"
        );
    }

    proptest::proptest! {
        /// Final lists equal naive counting under the per-partition lateness rule, with the
        /// watermark advancing mid-stream (sealing, freeing panes, spilling inline counts).
        #[test]
        fn final_lists_equal_naive_counts(
            events in proptest::collection::vec((0u8..5, 0i64..6, 0i64..25, proptest::bool::weighted(0.05)), 0..300),
            pool in proptest::sample::subsequence(vec![(10u64, 10u64), (20, 5), (7, 7), (30, 10), (1, 1)], 1..=5),
            ooo in 0i64..8,
            lateness in 0u64..15,
            advance_every in 1usize..30,
        ) {
            let windows: Vec<WindowSpec> = pool.iter().enumerate().map(|(i, (size, slide))| WindowSpec { key: Default::default(),
                name: format!("w{i}"), size: Span::from_millis(*size), slide: Span::from_millis(*slide), k: 3,
            }).collect();
            let mut c = WindowedCounter::new(windows.clone(), Span::from_millis(lateness), 0);
            let mut naive: BTreeMap<(u16, i64), BTreeMap<String, u64>> = BTreeMap::new();
            let mut latest: BTreeMap<(u16, i64), Vec<(String, u64)>> = BTreeMap::new();
            let mut t = 0i64;
            let mut max_ts: Option<i64> = None;
            for (n, (item, step, back, late)) in events.iter().enumerate() {
                t += step;
                let ts = t - back - if *late { 60 } else { 0 };
                let wm_before = max_ts.map_or(i64::MIN, |m| m - ooo);
                let item = format!("i{item}");
                prop_assert!(c.apply(&ev(&item, ts, wm_before)).is_none(), "one partition: never sealed-dropped");
                for (wi, w) in windows.iter().enumerate() {
                    for start in w.starts_covering(Millis(ts)) {
                        if wm_before == i64::MIN || wm_before < w.end_of(start).0 + lateness as i64 {
                            *naive.entry((wi as u16, start.0)).or_default().entry(item.clone()).or_insert(0) += 1;
                        }
                    }
                }
                max_ts = Some(max_ts.map_or(ts, |m| m.max(ts)));
                if n % advance_every == 0 {
                    for l in c.advance(Millis(max_ts.unwrap_or(i64::MIN) - ooo), n % 3 == 0) {
                        latest.insert((l.instance.window.0, l.instance.start.0), list(&l));
                    }
                }
            }
            for l in c.advance(Millis::MAX, false) {
                latest.insert((l.instance.window.0, l.instance.start.0), list(&l));
            }
            let want: BTreeMap<(u16, i64), Vec<(String, u64)>> = naive.into_iter().map(|(k, m)| {
                let mut v: Vec<(String, u64)> = m.into_iter().collect();
                v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                v.truncate(3);
                (k, v)
            }).collect();
            latest.retain(|_, v| !v.is_empty());
            prop_assert_eq!(latest, want);
            let s = c.stats();
            prop_assert_eq!((s.live_counters, s.live_items, s.live_panes, s.live_instances), (0, 0, 0, 0));
        }
    }

    #[test]
    fn shared_panes_across_windows() {
        let a = WindowSpec::tumbling("a", Span::from_millis(10), 3);
        let b = WindowSpec {
            key: Default::default(),
            name: "b".into(),
            size: Span::from_millis(30),
            slide: Span::from_millis(10),
            k: 3,
        };
        let mut c = WindowedCounter::new(vec![a, b], Span::ZERO, 0);
        for ts in [1, 2, 12, 25] {
            c.apply(&ev("x", ts, i64::MIN));
        }
        assert_eq!(c.stats().live_panes, 3, "one pane store for both windows");
        let out = c.advance(Millis::MAX, false);
        let counts: BTreeMap<(u16, i64), u64> = out
            .iter()
            .map(|l| ((l.instance.window.0, l.instance.start.0), l.items[0].count))
            .collect();
        assert_eq!(counts[&(0, 0)], 2);
        assert_eq!(counts[&(0, 20)], 1);
        assert_eq!(counts[&(1, -20)], 2);
        assert_eq!(counts[&(1, 0)], 4);
        assert_eq!(counts[&(1, 20)], 1);
    }
}

//! The sketch counter of one worker: the windows that count with a sketch (`sketch`, `auto`,
//! and the sketch side of `both`; see `counting.rs`).
//!
//! Each live window instance has its own state: a sketch of fixed size (the configured
//! algorithm, ε, δ and candidates), or, for an `auto` window, exact counts until the worker's
//! share of `max_items` distinct items is passed — then the counts fold into a sketch (added in
//! ranking order, so the fold is deterministic) and the instance goes on there.
//!
//! It follows the exact counter's protocol and time rules (`counter.rs`): [`SketchCounter::apply`]
//! every event of an epoch, then [`SketchCounter::advance`] with the new global watermark; an
//! instance the event is late for is skipped (the source dead-lettered it), one already sealed
//! makes it a `sealed` dead letter; lists are emitted at ticks (open), on close, on corrections
//! and on seal, when the instance changed; sealed instances are freed.
//!
//! Events are routed to workers by item, so each worker's sketch sees only its own items: an
//! item's count comes from one worker's sketch, which never under-counts (count-min) and
//! over-counts by at most ⌈(e/w)·n⌉ with n that worker's events ≤ N, the instance's events.
//! The worker's list says how many events it counted; the merger adds them up for the bound.
//!
//! A per-group window (`by`) keeps a place per group in each instance, each exact or a sketch,
//! and `(other)`'s (`grouped`); its events are pending under their key `group NUL item`.

use crate::counter::{horizon, out_of_range, sealed_letter, Shapes};
use crate::counting::{AnySketch, Counting};
use crate::event::check_event_time;
use crate::group::{split_key, Admitted, GroupKey, GroupNote, InstanceGroups};
use crate::hash::{item_hash, key_group};
use crate::message::{LocalList, Share};
use crate::record::{DeadLetter, ItemId, ListSource, RankedItem, TimedEvent};
use crate::sketch::{CountMinSketch, DistinctTopK};
use crate::time::{Millis, Span};
use crate::topk::{ranked_cmp, select_top_by};
use crate::window::{InstanceKey, WindowId, WindowSpec};
use rustc_hash::FxBuildHasher;
use std::collections::BTreeMap;

type FxMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;
type FxSet<K> = hashbrown::HashSet<K, FxBuildHasher>;

/// One instance's counts.
enum Counts {
    /// Exact (an `auto` instance that has not folded).
    Exact(FxMap<ItemId, u64>),
    /// A sketch.
    Sketch(Box<AnySketch>),
    /// A per-group window's: a place per group, each exact or a sketch (see `grouped`).
    Grouped(Box<Grouped>),
    /// A distinct-user window's place, exact: per item, its events and its users.
    Users(FxMap<ItemId, (u64, FxSet<ItemId>)>),
    /// A distinct-user window's place, folded: events per item and users per candidate.
    UserSketch(Box<DistinctTopK>),
}

struct Instance {
    counts: Counts,
    /// A count-min instance restored from a checkpoint: the table it was restored with (the
    /// same on every worker), which its snapshots subtract (see `restore.rs`).
    base: Option<Box<CountMinSketch>>,
    /// Events counted here by this worker.
    events: u64,
    touched: u64,
    emitted: u64,
    /// A distinct-user place's exact (item, user) pairs (`Counts::Users`).
    pairs: usize,
}

/// The instances of one window covering the last event's pane: every time in `[lo, hi)` (a
/// pane: gcd(size, slide) wide) is covered by the instances starting at `starts`. Most events
/// fall in the same pane as the one before (no divisions for them).
#[derive(Clone, Copy)]
struct Cover {
    lo: Millis,
    hi: Millis,
    /// The first instance start, how many instances, and the slide between them.
    first: i64,
    count: i64,
    slide: i64,
}

impl Cover {
    const EMPTY: Cover = Cover {
        lo: Millis::MAX,
        hi: Millis::MIN,
        first: 0,
        count: 0,
        slide: 1,
    };

    /// The cover of `ts` for window `w`.
    fn of(w: &WindowSpec, ts: Millis) -> Cover {
        let pane = w.pane_width().as_i64();
        let lo = Millis(ts.0.div_euclid(pane).saturating_mul(pane));
        let mut starts = w.starts_covering(ts);
        let first = starts.next().map_or(0, |m| m.0);
        Cover {
            lo,
            hi: Millis(lo.0.saturating_add(pane)),
            first,
            count: 1 + starts.count() as i64,
            slide: w.slide.as_i64(),
        }
    }

    fn starts(self) -> impl Iterator<Item = Millis> {
        (0..self.count).map(move |i| Millis(self.first + i * self.slide))
    }
}

/// Gauges of the sketch counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SketchStats {
    /// Live instances.
    pub instances: usize,
    /// Live instances counting in a sketch.
    pub sketches: usize,
    /// Items counted exactly (in `auto` instances that have not folded).
    pub exact_items: usize,
    /// Heap bytes of all of it (approximate).
    pub heap_bytes: usize,
    /// `auto` instances folded into a sketch since this counter started.
    pub folds: u64,
}

/// The sketch counter of one worker (see the module doc).
pub struct SketchCounter {
    windows: Vec<WindowSpec>,
    counting: Vec<Counting>,
    /// The windows it counts (those with a sketch), each with its last cover.
    sketched: Vec<(WindowId, Cover)>,
    allowed_lateness: Span,
    worker: u32,
    workers: u32,
    instances: BTreeMap<InstanceKey, Instance>,
    global_wm: Millis,
    seq: u64,
    force_emit: bool,
    sealed_until: Vec<Millis>,
    folds: u64,
    /// An epoch's (instance, item) counts before they go to the sketches (empty between epochs).
    pending: Pending,
    /// The key shapes of the job's windows (per-group windows count `group NUL item` keys).
    shapes: Shapes,
    /// Per live instance of a per-group window: the groups it knows and which keep a list.
    admission: BTreeMap<InstanceKey, InstanceGroups>,
    /// Scratch for composing a per-group key.
    key_buf: String,
}

impl SketchCounter {
    /// The sketch counter of `worker` (of `workers`) for validated windows and their counting.
    pub fn new(
        windows: Vec<WindowSpec>,
        counting: Vec<Counting>,
        allowed_lateness: Span,
        worker: u32,
        workers: usize,
    ) -> SketchCounter {
        let windows_for_shapes = windows.clone();
        let sketched = (0..windows.len())
            .filter(|w| counting.get(*w).is_some_and(|c| c.sketch().is_some()))
            .map(|w| (WindowId(w as u16), Cover::EMPTY))
            .collect();
        SketchCounter {
            windows,
            counting,
            sketched,
            allowed_lateness,
            worker,
            workers: workers.max(1) as u32,
            instances: BTreeMap::new(),
            global_wm: Millis::MIN,
            seq: 1,
            force_emit: false,
            sealed_until: Vec::new(),
            folds: 0,
            pending: Pending::default(),
            shapes: Shapes::new(&windows_for_shapes),
            admission: BTreeMap::new(),
            key_buf: String::new(),
        }
    }

    /// Whether it counts any window at all.
    pub fn is_idle(&self) -> bool {
        self.sketched.is_empty()
    }

    /// Counts one event in every sketch window instance it is on time for; returns a `sealed`
    /// dead letter when some instance was sealed already (see the module doc).
    pub fn apply(&mut self, ev: &TimedEvent) -> Option<DeadLetter> {
        if self.sketched.is_empty() {
            return None;
        }
        if let Err(bad) = check_event_time(ev.ts) {
            return Some(out_of_range(ev, bad));
        }
        let mut pending = std::mem::take(&mut self.pending);
        let sealed_drop = self.route(ev, |me, key| me.pend(&mut pending, key, ev));
        self.count_pending(&mut pending);
        self.pending = pending;
        sealed_drop.then(|| sealed_letter(ev, self.global_wm))
    }

    /// Counts one epoch's events, like [`apply`](Self::apply) on each, pushing the dead letters
    /// to `dead`; but each (instance, item) is added to its sketch once with its number of events
    /// in the epoch, not once per event — a skewed stream repeats its hot items many times per
    /// epoch, and a sketch add (d table cells, the candidates) costs far more than a hash-table
    /// increment. Counts come out the same; which candidates are kept may differ (as with any
    /// other order of the events).
    pub fn apply_epoch(&mut self, batches: &[Vec<TimedEvent>], dead: &mut Vec<DeadLetter>) {
        if self.sketched.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        for ev in batches.iter().flatten() {
            if let Err(bad) = check_event_time(ev.ts) {
                dead.push(out_of_range(ev, bad));
                continue;
            }
            if self.route(ev, |me, key| me.pend(&mut pending, key, ev)) {
                dead.push(sealed_letter(ev, self.global_wm));
            }
        }
        self.count_pending(&mut pending);
        self.pending = pending;
    }

    /// Adds `ev` to the epoch's pending counts of instance `key`: under its item, or for a
    /// per-group window under its key `group NUL item`.
    #[inline]
    fn pend(&mut self, pending: &mut Pending, key: InstanceKey, ev: &TimedEvent) {
        let shape = self.shapes.of_window(key.window.0 as usize);
        if shape == 0 {
            pending.add(key, ev);
        } else if self.shapes.key(shape, ev, &mut self.key_buf) {
            pending.add_keyed(key, &self.key_buf, ev.hash);
        }
    }

    /// Counts the pending counts into their instances (emptying `pending`).
    fn count_pending(&mut self, pending: &mut Pending) {
        for p in pending.drain() {
            if self.shapes.of_window(p.key.window.0 as usize) == 0 {
                self.count(p.key, &p.item, p.hash, p.n);
            } else {
                let (group, item, user) = split_key(&p.item);
                self.count_grouped(p.key, group, &ItemId::from(item), p.hash, user, p.n);
            }
        }
    }

    /// Calls `count` with every instance `ev` is on time for; returns whether some instance
    /// it belongs to was sealed already.
    fn route(&mut self, ev: &TimedEvent, mut count: impl FnMut(&mut Self, InstanceKey)) -> bool {
        let late_h = ev.wm_before.minus(self.allowed_lateness);
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        let mut sealed_drop = false;
        for i in 0..self.sketched.len() {
            let (wid, mut cover) = self.sketched[i];
            let w = &self.windows[wid.0 as usize];
            if ev.ts < cover.lo || ev.ts >= cover.hi {
                cover = Cover::of(w, ev.ts);
                self.sketched[i].1 = cover;
            }
            let size = w.size;
            let sealed_h = horizon(sealed_h, &self.sealed_until, wid);
            for start in cover.starts() {
                let end = start.plus(size);
                if end <= late_h {
                    continue; // late for it: its source dead-lettered the event
                }
                if end <= sealed_h {
                    sealed_drop = true;
                    continue;
                }
                count(self, InstanceKey { window: wid, start });
            }
        }
        sealed_drop
    }

    /// Counts `n` events of `item` (pinned hash `hash`) in instance `key` (creating it),
    /// folding an `auto` instance that passed its share.
    fn count(&mut self, key: InstanceKey, item: &ItemId, hash: u64, n: u64) {
        let counting = self.counting[key.window.0 as usize];
        let inst = self.instances.entry(key).or_insert_with(|| Instance {
            counts: match counting {
                Counting::Auto { .. } => Counts::Exact(FxMap::default()),
                _ => Counts::Sketch(Box::new(new_sketch(&counting))),
            },
            base: None,
            events: 0,
            touched: 0,
            emitted: 0,
            pairs: 0,
        });
        inst.events += n;
        inst.touched = self.seq;
        match &mut inst.counts {
            Counts::Sketch(s) => s.add(item, hash, n),
            Counts::Exact(map) => {
                match map.get_mut(item.as_str()) {
                    Some(c) => *c += n,
                    None => {
                        map.insert(item.clone(), n);
                    }
                }
                if let Counting::Auto { max_items, .. } = counting {
                    if map.len() as u64 > max_items.div_ceil(u64::from(self.workers)) {
                        inst.counts = Counts::Sketch(Box::new(fold(map, &counting)));
                        self.folds += 1;
                    }
                }
            }
            // (per-group and distinct-user windows' events go to `count_grouped`)
            Counts::Grouped(_) | Counts::Users(_) | Counts::UserSketch(_) => {}
        }
    }

    /// Counts `n` events of `item` (pinned hash `hash`) of group `group` in instance `key` of
    /// a per-group window (creating it): in the group's place or `(other)`'s (see `grouped`).
    fn count_grouped(&mut self, key: InstanceKey, group: &str, item: &ItemId, hash: u64, user: Option<&str>, n: u64) {
        let w = key.window.0 as usize;
        let counting = self.counting[w];
        let max_groups = self.windows[w].key.max_groups;
        let ghash = item_hash(group);
        let admission = self
            .admission
            .entry(key)
            .or_insert_with(|| InstanceGroups::new(max_groups));
        let displaced = admission.insert(ghash) == Admitted::Displaced;
        let admitted = admission.admits(ghash);
        let inst = self.instances.entry(key).or_insert_with(|| Instance {
            counts: Counts::Grouped(Box::new(Grouped::new(
                matches!(counting, Counting::Sketch(_)),
                self.windows[w].key.distinct_users,
            ))),
            base: None,
            events: 0,
            touched: 0,
            emitted: 0,
            pairs: 0,
        });
        inst.events = inst.events.saturating_add(n);
        inst.touched = self.seq;
        let Counts::Grouped(g) = &mut inst.counts else {
            return; // (a window's instances are all grouped or none)
        };
        if displaced {
            g.refold(admission, self.seq, &counting);
        }
        self.folds += g.count(group, ghash, admitted, item, hash, user, n, self.seq, &counting);
        if let Counting::Auto { max_items, .. } = counting {
            if !g.folding && g.exact_items as u64 > max_items.div_ceil(u64::from(self.workers)) {
                self.folds += g.start_folding(&counting);
            }
        }
    }

    /// Takes the group announcements of an epoch (from every worker; after its events, before
    /// its `advance`), for the per-group windows it counts; a displaced group's place moves to
    /// `(other)`. Announcements for sealed instances are ignored.
    pub fn note_groups(&mut self, notes: &[GroupNote]) {
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        for note in notes {
            let key = note.instance;
            let w = key.window.0 as usize;
            if self.shapes.of_window(w) == 0
                || !self.sketched.iter().any(|(id, _)| *id == key.window)
                || self.windows[w].end_of(key.start) <= horizon(sealed_h, &self.sealed_until, key.window)
            {
                continue;
            }
            let max_groups = self.windows[w].key.max_groups;
            let admission = self
                .admission
                .entry(key)
                .or_insert_with(|| InstanceGroups::new(max_groups));
            if admission.insert(note.hash) == Admitted::Displaced {
                if let Some(inst) = self.instances.get_mut(&key) {
                    if let Counts::Grouped(g) = &mut inst.counts {
                        g.refold(admission, self.seq, &self.counting[w]);
                        inst.touched = self.seq;
                    }
                }
            }
        }
    }

    /// Per per-group window, the most groups counted in `(other)` in one live instance
    /// (windows without such an instance are absent).
    pub fn overflow_groups(&self) -> BTreeMap<String, u64> {
        crate::group::most_folded(&self.admission, &self.windows)
    }

    /// Ends the current epoch at global watermark `global_wm`: returns the lists to publish and
    /// frees sealed instances (the same rules as `WindowedCounter::advance`).
    pub fn advance(&mut self, global_wm: Millis, tick: bool) -> Vec<LocalList> {
        self.global_wm = self.global_wm.max(global_wm);
        let wm = self.global_wm;
        let sealed_h = wm.minus(self.allowed_lateness);
        let force = std::mem::take(&mut self.force_emit);
        let mut out = Vec::new();
        let seq = self.seq;
        let worker = self.worker;
        self.instances.retain(|key, inst| {
            let spec = &self.windows[key.window.0 as usize];
            let end = spec.end_of(key.start);
            let open = end > wm;
            let live = end > horizon(sealed_h, &self.sealed_until, key.window);
            let counting = &self.counting[key.window.0 as usize];
            // an `exact_at_seal` instance sends its share of the table as it seals
            let sealing = !live && counting.exact_at_seal();
            let list = |group: GroupKey, place: &Instance, share: Option<Box<Share>>| LocalList {
                instance: *key,
                group,
                worker,
                items: top(&place.counts, spec.k),
                source: ListSource::SketchCounter {
                    events: place.events,
                    exact: matches!(place.counts, Counts::Exact(_) | Counts::Users(_)),
                },
                share,
            };
            if let Counts::Grouped(g) = &mut inst.counts {
                for group in g.withdrawn.drain(..) {
                    out.push(list(GroupKey::from_stored(group), &grouped::empty_place(false), None));
                }
                for (group, place) in g.iter_mut() {
                    let dirty = place.touched > place.emitted;
                    if force || ((tick || !open) && dirty) || sealing {
                        let share = sealing.then(|| Box::new(share_of(place, counting, worker)));
                        let group = group.map_or_else(GroupKey::other, |g| GroupKey::from_stored(g.to_string()));
                        out.push(list(group, place, share));
                        place.emitted = seq;
                    }
                }
                inst.emitted = seq;
                return live;
            }
            let dirty = inst.touched > inst.emitted;
            let share = sealing.then(|| Box::new(share_of(inst, counting, worker)));
            if force || ((tick || !open) && dirty) || share.is_some() {
                out.push(list(GroupKey::global(), inst, share));
                inst.emitted = seq;
            }
            live
        });
        let sealed_until = &self.sealed_until;
        let windows = &self.windows;
        self.admission.retain(|key, _| {
            windows[key.window.0 as usize].end_of(key.start) > horizon(sealed_h, sealed_until, key.window)
        });
        self.seq += 1;
        out
    }

    /// Gauges (walks the instances: at most once per reporting interval).
    pub fn stats(&self) -> SketchStats {
        let mut s = SketchStats {
            instances: self.instances.len(),
            folds: self.folds,
            ..Default::default()
        };
        fn add(s: &mut SketchStats, counts: &Counts) {
            match counts {
                Counts::Sketch(sk) => {
                    s.sketches += 1;
                    s.heap_bytes += sk.heap_bytes();
                }
                Counts::Exact(map) => {
                    s.exact_items += map.len();
                    s.heap_bytes += map.capacity() * (std::mem::size_of::<(ItemId, u64)>() + 1);
                }
                Counts::Users(map) => {
                    let pairs: usize = map.values().map(|(_, u)| u.len()).sum();
                    s.exact_items += pairs;
                    s.heap_bytes += map.capacity() * (std::mem::size_of::<(ItemId, (u64, FxSet<ItemId>))>() + 1)
                        + pairs * (std::mem::size_of::<ItemId>() + 1);
                }
                Counts::UserSketch(sk) => {
                    s.sketches += 1;
                    s.heap_bytes += sk.heap_bytes();
                }
                Counts::Grouped(g) => {
                    for (group, place) in g.iter() {
                        s.heap_bytes += group.map_or(0, str::len) + std::mem::size_of::<Instance>();
                        add(s, &place.counts);
                    }
                }
            }
        }
        for inst in self.instances.values() {
            add(&mut s, &inst.counts);
        }
        s.heap_bytes += self.admission.values().map(InstanceGroups::heap_bytes).sum::<usize>();
        s
    }
}

/// A worker's share of a sealing instance's count-min table (see [`SketchCountsSnapshot`]):
/// what it added since its restore (worker 0: and the restored table); exact counts (an `auto`
/// instance or a place that did not fold here) as (item hash, events), which the merger adds
/// into the table when the list needs a replay. Summed over workers, it never under-counts any
/// item of the instance.
fn share_of(inst: &Instance, counting: &Counting, worker: u32) -> Share {
    match &inst.counts {
        Counts::Sketch(s) => Share::Table(match (s.as_ref(), &inst.base) {
            (AnySketch::Cms(cms), Some(base)) if worker != 0 => {
                cms.sketch().minus(base).unwrap_or_else(|_| cms.sketch().clone())
            }
            (AnySketch::Cms(cms), _) => cms.sketch().clone(),
            // (config: exact_at_seal needs count-min) an empty share: the replay's first
            // threshold then counts nothing and lowers it to 1, which counts every item
            (AnySketch::Hk(_), _) => CountMinSketch::new(shape_of(counting)),
        }),
        Counts::Grouped(_) => Share::Items(Vec::new()), // (shares are per place)
        Counts::UserSketch(s) => Share::Table(match &inst.base {
            Some(base) if worker != 0 => s.sketch().minus(base).unwrap_or_else(|_| s.sketch().clone()),
            _ => s.sketch().clone(),
        }),
        Counts::Users(map) => Share::Items(
            map.iter()
                .map(|(item, (events, _))| (item_hash(item), *events))
                .collect(),
        ),
        Counts::Exact(map) => Share::Items(map.iter().map(|(item, c)| (item_hash(item), *c)).collect()),
    }
}

/// Adds `n` events (any `n`) of the item with pinned hash `hash` to `table`.
fn add_events(table: &mut CountMinSketch, hash: u64, mut n: u64) {
    while n > 0 {
        let step = n.min(u64::from(u32::MAX));
        table.add(hash, step as u32);
        n -= step;
    }
}

/// The count-min shape of a window's sketch (validated when the job was planned).
fn shape_of(counting: &Counting) -> crate::sketch::CmsShape {
    counting
        .sketch()
        .and_then(|s| s.cms_shape().ok())
        .expect("sketch windows have a valid sketch spec (config validation)")
}

/// A new sketch for a window with a sketch (validated when the job was planned).
fn new_sketch(counting: &Counting) -> AnySketch {
    counting
        .sketch()
        .and_then(|s| s.new_sketch().ok())
        .expect("sketch windows have a valid sketch spec (config validation)")
}

/// An `auto` instance's exact counts folded into a sketch, best first (deterministic).
fn fold(map: &FxMap<ItemId, u64>, counting: &Counting) -> AnySketch {
    let mut sketch = new_sketch(counting);
    add_ranked(&mut sketch, map);
    sketch
}

/// Adds exact counts into a sketch, best first (deterministic candidates).
fn add_ranked(sketch: &mut AnySketch, map: &FxMap<ItemId, u64>) {
    let mut items: Vec<RankedItem> = map
        .iter()
        .map(|(i, c)| RankedItem {
            item_id: i.clone(),
            count: *c,
            trend: None,
        })
        .collect();
    items.sort_unstable_by(ranked_cmp);
    for r in items {
        sketch.add(&r.item_id, item_hash(&r.item_id), r.count);
    }
}

/// An instance's best `k`.
fn top(counts: &Counts, k: usize) -> Vec<RankedItem> {
    match counts {
        Counts::Grouped(_) => Vec::new(), // (lists are per place)
        Counts::UserSketch(s) => s.top(k),
        Counts::Users(map) => {
            let mut all: Vec<RankedItem> = map
                .iter()
                .map(|(i, (_, users))| RankedItem {
                    item_id: i.clone(),
                    count: users.len() as u64,
                    trend: None,
                })
                .collect();
            select_top_by(&mut all, k, ranked_cmp);
            all
        }
        Counts::Sketch(s) => s.top(k),
        Counts::Exact(map) => {
            let mut all: Vec<RankedItem> = map
                .iter()
                .map(|(i, c)| RankedItem {
                    item_id: i.clone(),
                    count: *c,
                    trend: None,
                })
                .collect();
            select_top_by(&mut all, k, ranked_cmp);
            all
        }
    }
}

mod grouped;
#[cfg(test)]
mod grouped_tests;
mod pending;
mod restore;
mod snapshot;
#[cfg(test)]
mod tests;

use grouped::Grouped;
use pending::Pending;
pub use snapshot::{
    GroupPlaceSnapshot, GroupedSnapshot, SketchCounterSnapshot, SketchCountsSnapshot, SketchInstanceSnapshot,
};

/// Whether `item` belongs to `worker` of `workers` (routing by key group).
fn owns(item: &str, worker: u32, workers: u32) -> bool {
    key_group(item_hash(item)) % workers == worker
}

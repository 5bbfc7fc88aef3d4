//! The exact windowed counter of one worker.
//!
//! It owns the items routed to its worker and counts each event once per **pane group** (the
//! windows sharing a pane width), not once per window instance. A window instance's count is
//! the sum of its panes, minus **exclusions**: an event that is late for some of the instances
//! covering it (hopping windows, or windows sharing panes) is still counted in the pane for the
//! others, and subtracted from the late ones.
//!
//! Call protocol, once per epoch: [`WindowedCounter::apply_all`] (or `apply`, one at a time)
//! every event of the epoch (in any order: counting commutes, and every decision reads only the
//! event's own stamp and the global watermark fixed at the previous epoch), then [`WindowedCounter::advance`] with the new
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
//!
//! Its parts, by lifecycle (each an `impl WindowedCounter` block in a file of its own):
//! - `count`: counting, the hot path (`apply`, panes and their inline counts); `count_grouped`:
//!   numbered counters' counts in group blocks; `moved`: the counts a record's newer pane
//!   pushes out to its older one, kept apart from that pane's map until a look-up needs them;
//! - `advance`: ending an epoch (emitting the dirty lists, freeing what is sealed) and the
//!   horizons an end of input sealed;
//! - `emit`: building an instance's top-K lists, recounted or incremental;
//! - `groups`: the groups of per-group windows' instances, announced or noted by the counter;
//! - `checkpoint`: snapshot and restore;
//! - `trend`: trend windows' lists and the baselines they read;
//! - `shapes`: the key shapes of per-group and distinct-user windows; `users`: the per-instance
//!   user counts that let distinct-user windows emit incrementally; `dense`: per-item sums and sets;
//!   `dead_letters`: the events the counters cannot count.
//!
//! What a count is kept for is a `Counter` (`counter_id`): a record of the interner (a bare item
//! id, or a `group NUL item` key), or, for per-group windows counting events when groups are
//! numbered (`NUMBERED`: in unit tests only so far), an item record and a group number
//! (`numbers`), its counts in the item's group block. Change logs, and their trimming after an
//! emission, are `change_log`'s.

mod advance;
mod change_log;
mod checkpoint;
mod count;
mod count_grouped;
mod counter_id;
mod dead_letters;
mod dense;
mod emit;
#[cfg(test)]
mod emit_tests;
mod group_tops;
mod groups;
mod lookahead;
mod moved;
#[cfg(test)]
mod numbered_tests;
mod numbers;
mod others;
mod pairs;
#[cfg(test)]
mod shaped_fixtures;
#[cfg(test)]
mod shaped_tests;
mod shapes;
#[cfg(test)]
mod tests;
mod trend;
#[cfg(test)]
mod trend_tests;
mod users;

pub use dead_letters::render_event;
pub(crate) use dead_letters::{out_of_range, sealed_letter};
pub use shapes::{group_lists, job_dims, keyed_prefix, needs_user, Shapes};

use crate::group::{GroupKey, InstanceGroups};
use crate::interner::{Inline, Interner, ItemIdx};
use crate::time::{Millis, Span};
use crate::window::{InstanceKey, WindowId, WindowSpec};
use change_log::ChangeLog;
use counter_id::Counter;
use numbers::GroupNo;
use rustc_hash::FxBuildHasher;
use std::collections::BTreeMap;

type FxMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;

/// Whether per-group windows counting events count per (item record, group number) in the
/// item's group block, instead of per `group NUL item` key record (docs/plans/counter-key-model.md,
/// step 4): on in unit tests (a differential test compares both), off in the product until the
/// lists are built from numbered counters without their key texts (step 5).
const NUMBERED: bool = cfg!(test);

/// Largest inline count; beyond it the count moves to the pane map. Tiny in unit tests so
/// that path is exercised.
const INLINE_MAX: u32 = if cfg!(test) { 3 } else { Inline::MAX_COUNT };

/// Counts for one pane of one pane group.
///
/// Each (item, pane) count lives in exactly one place: in the item's inline counter for this
/// group while this pane is the one inline there (`rel` matches), else in `counts`.
struct Pane {
    start: Millis,
    /// Counts not held inline (a look-up or change by counter goes through `Pane::map`).
    counts: FxMap<Counter, u64>,
    /// Counts moved out of their records (inline or group block) when their item was next
    /// counted in a newer pane: kept apart from `counts` (disjoint from it), since most panes
    /// are only iterated after that, at their seal, and a push costs less than a map insert
    /// at every move; a look-up by counter first moves them into `counts` (`Pane::map`).
    moved: Vec<(Counter, u64)>,
    /// This pane's number relative to the group base, when inline counters can hold it.
    rel: Option<i32>,
    /// Items that became inline for this pane (some may have moved their count out since).
    members: Vec<ItemIdx>,
    /// Members whose count is still inline.
    inline_live: usize,
    /// Items whose group block became this pane's (numbered shapes: see `count`; some may
    /// have moved their counts to `counts`).
    grouped_members: Vec<ItemIdx>,
    /// Counts still in those blocks.
    grouped_live: usize,
    /// Apply sequence of the last change (for dirty tracking).
    touched: u64,
    /// End of the instance containing this pane that ends last, over the group's windows:
    /// the pane can be freed once that instance is sealed.
    last_end: Millis,
    /// End of the instance containing this pane that ends first (all covering instances of
    /// an event in this pane end at or after it).
    first_end: Millis,
    /// Change log: counters whose count here changed, once per emit generation for inline
    /// counts (see `emit`).
    log: ChangeLog,
    /// Whether an event counted here was excluded from a covering instance (see `users`).
    excluded: bool,
    /// Paired shapes' (key, user) pairs seen in the pane (see `pairs`).
    pairs: pairs::Pairs,
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
    /// The pairs of its last pane freed (see `pairs`): a new pane's set starts that large,
    /// instead of growing through every size to it.
    last_pairs: usize,
    /// Whether a pane may hold `moved` counts (cleared by `PaneGroup::settle`).
    unsettled: bool,
}

/// Per-instance bookkeeping: emission state and late-event exclusions.
#[derive(Default)]
struct Instance {
    exclusions: FxMap<Counter, u64>,
    touched: u64,
    /// The apply sequence of its last emission (0: never emitted since made or restored).
    emitted: u64,
    /// What it emitted last, for an incremental emission (`None`: recount in full).
    last: Option<emit::Emitted>,
    /// Per-group windows: the groups of its last emission (a group gone to `(other)` since is
    /// withdrawn with an empty list).
    groups: Vec<GroupKey>,
    /// Distinct-user windows: the user count per (group, item), kept up to date from its
    /// second recount while it emits incrementally (see `users`).
    users: Option<users::UserCounts>,
    /// Paired per-group windows with groups in `(other)`: its user counts per item, kept up
    /// to date from its first recount with folds (see `others`).
    other: Option<others::OtherCounts>,
}

/// Counters for the state gauges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterStats {
    /// Live (item, pane) counters.
    pub live_counters: usize,
    /// Live items (interned ids).
    pub live_items: usize,
    /// Live users of paired distinct-user windows (see `pairs`).
    pub live_users: usize,
    /// Live group numbers (numbered per-group windows: see `numbers`).
    pub live_groups: usize,
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
    /// An incremental list's candidates (one bit per item index).
    candidates: dense::ItemSet,
    /// Set by `restore`: the next `advance` emits every instance (the merger's per-worker lists
    /// are not in snapshots, so it needs all of them once).
    force_emit: bool,
    /// Per window (by id): instances ending at or before this are sealed whatever the watermark
    /// (`Millis::MIN`: none). Set only by a restore (see [`sealed_after_end`]).
    sealed_until: Vec<Millis>,
    /// The key shapes of the windows.
    shapes: Shapes,
    /// Per shape, the counter the event being applied counts in (scratch of `apply`).
    shape_keys: Vec<Option<Counter>>,
    /// Per shape, whether its counters are (item record, group number), not key records: a
    /// shape with `by` dims counting events, when the counter numbers groups (see `count`).
    numbered: Vec<bool>,
    /// The groups of numbered shapes, numbered.
    numbers: numbers::GroupNumbers,
    /// `apply_all`'s lookups of a run of events (kept to reuse its allocation).
    found: Vec<Option<ItemIdx>>,
    /// `apply_all`'s keys of a run of events (per-group and distinct-user windows).
    lookahead: lookahead::Lookahead,
    /// Events a distinct-user window could not count because they had no user.
    without_user: u64,
    /// Whether some instance keeps user counts (see `users`; set by `advance`, the only place
    /// they are built or dropped).
    users_kept: bool,
    /// Whether some instance keeps `(other)`'s counts (see `others`; set by `advance`).
    others_kept: bool,
    /// Per shape, whether a window this counter counts has it (derived once, read per event).
    shape_counted: Vec<bool>,
    /// The emit generation (1..=255): goes up after each `advance` that emitted (see `emit`).
    gen: u8,
    /// `stats().emits`.
    emits: (u64, u64),
    /// Per shape, whether it is paired (see `pairs`).
    paired: Vec<bool>,
    /// The users of paired shapes' pairs, interned (see `pairs`).
    pair_users: Interner,
    /// Per shape, the user the event being applied counts under in a paired shape (scratch of
    /// `apply`).
    shape_users: Vec<Option<ItemIdx>>,
    /// Per instance of a window with `by`: the groups announced to it (see `group::admission`).
    admission: BTreeMap<InstanceKey, InstanceGroups>,
    /// When it notes its keys' groups itself instead of being told them (see `groups`): its
    /// recent own notes, direct-mapped by `Noted::slot`; empty when it is told them.
    own_recent: Vec<Option<groups::Noted>>,
    /// The late-event exclusions of sealed trend-window instances, kept while a later
    /// instance's baseline reads them (see `trend`).
    trend_exclusions: BTreeMap<InstanceKey, FxMap<Counter, u64>>,
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

/// The pane groups of `windows` (those with `counted[w]` set; all when `counted` is empty),
/// empty, their shapes not yet filled in.
fn pane_groups(windows: &[WindowSpec], counted: &[bool]) -> Vec<PaneGroup> {
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
                last_pairs: 0,
                unsettled: false,
            }),
        }
    }
    groups
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
        WindowedCounter::counting_numbered(windows, counted, allowed_lateness, worker, NUMBERED)
    }

    /// [`Self::counting`], numbering the groups of per-group windows counting events
    /// (`number_groups`) or counting them under key texts (see [`NUMBERED`]).
    fn counting_numbered(
        windows: Vec<WindowSpec>,
        counted: &[bool],
        allowed_lateness: Span,
        worker: u32,
        number_groups: bool,
    ) -> WindowedCounter {
        let mut groups = pane_groups(&windows, counted);
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
        let widths: Vec<Option<Span>> = (0..windows.len())
            .map(|w| {
                groups
                    .iter()
                    .find(|g| g.windows.contains(&WindowId(w as u16)))
                    .map(|g| g.width)
            })
            .collect();
        let paired = pairs::paired_shapes(&windows, &shapes, &widths);
        let numbered: Vec<bool> = (0..shapes.len() as u8)
            .map(|s| number_groups && shapes.has_by(s) && !shapes.distinct_users(s))
            .collect();
        // (key records only for the shapes that still count under key texts)
        let key_texts = (1..shapes.len() as u8).any(|s| !numbered[s as usize]);
        let interner = match numbered.contains(&true) {
            true => Interner::with_blocks(groups.len(), key_texts),
            false => Interner::with_layout(groups.len(), key_texts),
        };
        WindowedCounter {
            windows,
            allowed_lateness,
            worker,
            groups,
            interner,
            instances: BTreeMap::new(),
            global_wm: Millis::MIN,
            seq: 1,
            sums: dense::DenseSums::default(),
            candidates: dense::ItemSet::default(),
            force_emit: false,
            sealed_until: Vec::new(),
            shapes,
            shape_counted,
            shape_keys: Vec::new(),
            numbered,
            numbers: Default::default(),
            found: Vec::new(),
            lookahead: Default::default(),
            without_user: 0,
            users_kept: false,
            others_kept: false,
            gen: 1,
            emits: (0, 0),
            paired,
            pair_users: Interner::with_layout(0, false),
            shape_users: Vec::new(),
            admission: BTreeMap::new(),
            own_recent: Vec::new(),
            trend_exclusions: BTreeMap::new(),
            checked: cfg!(test),
        }
    }

    /// Per window (by id), the instances that stay sealed whatever the watermark: those ending
    /// at or before this (`Millis::MIN`: none; empty: none at all).
    pub fn sealed_until(&self) -> &[Millis] {
        &self.sealed_until
    }

    /// The global watermark as of the last `advance`.
    pub fn watermark(&self) -> Millis {
        self.global_wm
    }

    /// The apply sequence: pass the value read right after a snapshot to the next
    /// [`snapshot_panes`](Self::snapshot_panes) as `since`.
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    /// The pane group a window belongs to.
    fn group_of(&self, w: WindowId) -> usize {
        self.groups
            .iter()
            .position(|g| g.windows.contains(&w))
            .expect("window in a group")
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

    /// Calls `f` with every (counter, count) of a pane of group `g`: its map, its inline
    /// members and its members' group blocks.
    fn pane_counts(&self, g: usize, pane: &Pane, mut f: impl FnMut(Counter, u64)) {
        for (c, n) in pane.counts.iter().chain(pane.moved.iter().map(|(c, n)| (c, n))) {
            f(*c, *n);
        }
        if let Some(rel) = pane.rel {
            for &i in &pane.members {
                let inl = self.interner.inline(i, g);
                if inl.pane == rel {
                    f(Counter::of(i), inl.count() as u64);
                }
            }
            for &i in &pane.grouped_members {
                if let Some(block) = self.interner.block(i).filter(|b| b.pane() == rel) {
                    block.for_each(|gid, n| f(Counter::grouped(i, GroupNo::from_raw(gid)), u64::from(n.count())));
                }
            }
        }
    }

    /// The key shape of counter `c`.
    #[inline]
    fn shape_of(&self, c: Counter) -> u8 {
        match c.group() {
            Some(gid) => self.numbers.shape(gid),
            None => self.interner.shape(c.item()),
        }
    }

    /// The key text of counter `c`: its record's key, or for a numbered counter `group NUL
    /// item` as a key record would hold it (snapshots, and lists built from key texts).
    fn counter_text(&self, c: Counter) -> std::borrow::Cow<'_, str> {
        match c.group() {
            Some(gid) => {
                let mut key = String::new();
                crate::group::compose_key(self.numbers.text(gid), self.interner.id(c.item()), None, &mut key);
                std::borrow::Cow::Owned(key)
            }
            None => std::borrow::Cow::Borrowed(self.interner.id(c.item())),
        }
    }

    /// State gauges (walks the panes: call it at most once per reporting interval).
    pub fn stats(&self) -> CounterStats {
        let mut s = CounterStats {
            live_items: self.interner.len(),
            live_users: self.pair_users.len(),
            live_groups: self.numbers.len(),
            live_instances: self.instances.len(),
            without_user: self.without_user,
            emits: self.emits,
            ..Default::default()
        };
        let mut heap = self.interner.heap_bytes()
            + self.numbers.heap_bytes()
            + self.pair_users.heap_bytes()
            + self.sums.heap_bytes()
            + self.candidates.heap_bytes();
        for g in &self.groups {
            heap += g.index.capacity() * (8 + 8 + 1) + g.slots.capacity() * std::mem::size_of::<Option<Pane>>();
            for p in g.slots.iter().flatten() {
                s.live_panes += 1;
                s.live_counters += p.counters();
                heap += p.counts.capacity() * (std::mem::size_of::<(Counter, u64)>() + 1)
                    + p.moved.capacity() * std::mem::size_of::<(Counter, u64)>()
                    + p.pairs.capacity() * (8 + 1)
                    + (p.members.capacity() + p.grouped_members.capacity()) * 4
                    + p.log.heap_bytes();
            }
        }
        for inst in self.instances.values() {
            heap += inst.exclusions.capacity() * 17
                + inst.last.as_ref().map_or(0, emit::Emitted::heap_bytes)
                + inst.users.as_ref().map_or(0, users::UserCounts::heap_bytes)
                + inst.other.as_ref().map_or(0, others::OtherCounts::heap_bytes);
        }
        heap += self.admission.values().map(InstanceGroups::heap_bytes).sum::<usize>();
        heap += self.trend_exclusions.values().map(|x| x.capacity() * 17).sum::<usize>();
        s.heap_bytes = heap;
        s
    }
}

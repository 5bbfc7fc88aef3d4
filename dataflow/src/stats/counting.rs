//! The window count's counters, per worker: live counters, items and state bytes, sketch
//! instances and `auto` folds, events without a user, overflow groups, sealed drops, and the
//! exact counter's emits.

use crate::metrics::{self, Metrics};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Emit durations kept for the bench's quantiles (bounded: a long run keeps the first ones).
pub const EMIT_SAMPLES: usize = 100_000;

/// Counters of the window count (per worker where a worker reports its own state).
#[derive(Debug)]
pub struct CountingStats {
    /// Events that reached only sealed windows (reason `sealed`).
    pub sealed_dropped: AtomicU64,
    /// Live (item, pane) counters per worker.
    pub live_counters: Vec<AtomicU64>,
    /// Heap bytes of counting state per worker.
    pub state_bytes: Vec<AtomicU64>,
    /// Live items per worker.
    pub live_items: Vec<AtomicU64>,
    /// Live window instances counting in a sketch, per worker.
    pub sketch_instances: Vec<AtomicU64>,
    /// `auto` instances folded into a sketch, per worker (since the run started).
    pub auto_folds: Vec<AtomicU64>,
    /// Peak of the sum of live counters.
    pub peak_counters: AtomicU64,
    /// Per per-group window, the most groups one of its live instances folded into `(other)`
    /// (`max_groups`), as worker 0 last reported it (windows that never overflowed are absent).
    pub overflow_groups: Mutex<BTreeMap<String, u64>>,
    /// Events a `distinct_users` window could not count because they had no user, per worker.
    pub without_user: Vec<AtomicU64>,
    /// Time a worker's exact counter spent in an `advance` that emitted (an emit tick, or
    /// instances closing or sealing), in seconds.
    pub emit_seconds: prometheus::Histogram,
    /// The same durations, the first [`EMIT_SAMPLES`] of the run (for the bench's quantiles).
    pub emit_samples: Mutex<Vec<f64>>,
    /// Per worker, the exact counter's lists emitted incrementally and recounted in full.
    pub emits: Vec<(AtomicU64, AtomicU64)>,
}

impl CountingStats {
    /// Zeroed counters for `workers` workers.
    pub fn new(workers: usize) -> CountingStats {
        let v = || (0..workers).map(|_| AtomicU64::new(0)).collect();
        CountingStats {
            sealed_dropped: AtomicU64::new(0),
            live_counters: v(),
            state_bytes: v(),
            live_items: v(),
            sketch_instances: v(),
            auto_folds: v(),
            peak_counters: AtomicU64::new(0),
            overflow_groups: Mutex::new(BTreeMap::new()),
            without_user: v(),
            emit_seconds: metrics::histogram(
                "hotlist_emit_seconds",
                "time a worker's exact counter spent in an advance that emitted lists",
                vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                ],
            ),
            emit_samples: Mutex::new(Vec::new()),
            emits: (0..workers).map(|_| (AtomicU64::new(0), AtomicU64::new(0))).collect(),
        }
    }

    /// Registers the live state, sketch, user, drop and emit series, and per window its
    /// overflow groups.
    pub fn register(&self, m: &Metrics) {
        let sum = |v: &[AtomicU64]| v.iter().map(|a| a.load(Relaxed)).sum::<u64>() as i64;
        m.scalars([
            (
                "hotlist_events_without_user_total",
                "events a count = \"distinct_users\" window could not count: they have no user (other windows counted them)",
                sum(&self.without_user),
            ),
            (
                "hotlist_sketch_instances",
                "window instances counting in a sketch (sketch, auto after folding, both)",
                sum(&self.sketch_instances),
            ),
            (
                "hotlist_auto_folds_total",
                "auto window instances folded from exact counts into a sketch (per worker, summed)",
                sum(&self.auto_folds),
            ),
            (
                "hotlist_sealed_dropped_total",
                "events that reached only sealed windows",
                self.sealed_dropped.load(Relaxed) as i64,
            ),
            (
                "hotlist_live_counters",
                "live (item, pane) counters",
                self.total_counters() as i64,
            ),
            ("hotlist_live_items", "live items", self.total_items() as i64),
            (
                "hotlist_state_bytes",
                "approximate heap bytes of the counting state",
                self.total_state_bytes() as i64,
            ),
        ]);
        m.add(self.emit_seconds.clone());
        let overflow = metrics::gauge_vec(
            "hotlist_overflow_groups",
            "groups beyond the window's max_groups folded into (other), in its fullest live instance",
            &["window"],
        );
        if let Ok(o) = self.overflow_groups.lock() {
            for (window, n) in o.iter() {
                overflow.with_label_values(&[window]).set(*n as f64);
            }
        }
        m.add(overflow);
    }

    /// Records the time of an emitting `advance` of the exact counter.
    pub fn note_emit(&self, took: std::time::Duration) {
        self.emit_seconds.observe(took.as_secs_f64());
        if let Ok(mut s) = self.emit_samples.lock() {
            if s.len() < EMIT_SAMPLES {
                s.push(took.as_secs_f64());
            }
        }
    }

    /// Sum of live counters over workers.
    pub fn total_counters(&self) -> u64 {
        self.live_counters.iter().map(|a| a.load(Relaxed)).sum()
    }

    /// Sum of counting-state bytes over workers.
    pub fn total_state_bytes(&self) -> u64 {
        self.state_bytes.iter().map(|a| a.load(Relaxed)).sum()
    }

    /// Sum of live items over workers.
    pub fn total_items(&self) -> u64 {
        self.live_items.iter().map(|a| a.load(Relaxed)).sum()
    }

    /// Records worker `w`'s state gauges (global worker index) and the peak of live counters.
    pub fn set_worker_state(&self, w: usize, counters: usize, bytes: usize, items: usize) {
        if let (Some(c), Some(b), Some(i)) = (
            self.live_counters.get(w),
            self.state_bytes.get(w),
            self.live_items.get(w),
        ) {
            c.store(counters as u64, Relaxed);
            b.store(bytes as u64, Relaxed);
            i.store(items as u64, Relaxed);
        }
        self.peak_counters.fetch_max(self.total_counters(), Relaxed);
    }

    /// Records how many events worker `w`'s `distinct_users` windows could not count (no user).
    pub fn set_worker_without_user(&self, w: usize, n: u64) {
        if let Some(a) = self.without_user.get(w) {
            a.store(n, Relaxed);
        }
    }

    /// Records worker `w`'s emitted lists so far: (incremental, recounted in full).
    pub fn set_worker_emits(&self, w: usize, (incremental, full): (u64, u64)) {
        if let Some((i, f)) = self.emits.get(w) {
            i.store(incremental, Relaxed);
            f.store(full, Relaxed);
        }
    }

    /// Records worker `w`'s sketch gauges: instances in a sketch, `auto` folds so far.
    pub fn set_worker_sketches(&self, w: usize, instances: usize, folds: u64) {
        if let (Some(i), Some(f)) = (self.sketch_instances.get(w), self.auto_folds.get(w)) {
            i.store(instances as u64, Relaxed);
            f.store(folds, Relaxed);
        }
    }
}

//! Shared job counters: written by operators (batched per activation, not per event) and the
//! sink writer, read by the progress display and the run summary.

use hotlist_operators::group::GroupKey;
use hotlist_operators::record::PublishedList;
use hotlist_operators::time::Millis;
use hotlist_sinks::redis::FanoutStats;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

/// Emit durations kept for the bench's quantiles (bounded: a long run keeps the first ones).
pub const EMIT_SAMPLES: usize = 100_000;

/// Counters of a running job.
#[derive(Debug)]
pub struct JobStats {
    /// Records read (events and bad records).
    pub records_in: AtomicU64,
    /// Valid events read.
    pub events_in: AtomicU64,
    /// Bad records (dead-lettered).
    pub bad: AtomicU64,
    /// Events late for at least one window (dead-lettered with reason `late`).
    pub late: AtomicU64,
    /// Events late for every window they belong to (counted nowhere).
    pub late_dropped: AtomicU64,
    /// Events that reached only sealed windows (reason `sealed`).
    pub sealed_dropped: AtomicU64,
    /// Global watermark (ms), as the merger last saw it.
    pub watermark: AtomicI64,
    /// List revisions published.
    pub revisions: AtomicU64,
    /// Window instances closed (watermark passed the end).
    pub windows_closed: AtomicU64,
    /// Window instances sealed (final).
    pub windows_sealed: AtomicU64,
    /// `exact_at_seal`: sealed lists a replay made exact.
    pub replays_exact: AtomicU64,
    /// `exact_at_seal`: sealed lists that stayed approximate (the replay could not read the
    /// input again; the log says why).
    pub replays_failed: AtomicU64,
    /// `exact_at_seal`: replays running or queued.
    pub replays_pending: AtomicU64,
    /// Last epoch committed to the sink.
    pub committed_epoch: AtomicU64,
    /// Sink transactions.
    pub commits: AtomicU64,
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
    /// Latest committed list per window and group (the newest instance).
    pub latest: Mutex<BTreeMap<(String, GroupKey), PublishedList>>,
    /// Per per-group window, the most groups one of its live instances folded into `(other)`
    /// (`max_groups`), as worker 0 last reported it (windows that never overflowed are absent).
    pub overflow_groups: Mutex<BTreeMap<String, u64>>,
    /// Events a `distinct_users` window could not count because they had no user, per worker.
    pub without_user: Vec<AtomicU64>,
    /// Per input partition: records, events, bad, late, watermark (ms), lag, data loss.
    pub partitions: PartitionTable,
    /// Sink commit latency (seconds), and rows written.
    pub commit_seconds: prometheus::Histogram,
    /// Time to snapshot and write one worker's counter state at a checkpoint (seconds).
    pub checkpoint_seconds: prometheus::Histogram,
    /// `s3://` checkpoint dirs: time to upload one checkpoint before its commit (seconds).
    pub checkpoint_upload_seconds: prometheus::Histogram,
    /// Time a worker's exact counter spent in an `advance` that emitted (an emit tick, or
    /// instances closing or sealing), in seconds.
    pub emit_seconds: prometheus::Histogram,
    /// The same durations, the first [`EMIT_SAMPLES`] of the run (for the bench's quantiles).
    pub emit_samples: Mutex<Vec<f64>>,
    /// Per worker, the exact counter's lists emitted incrementally and recounted in full.
    pub emits: Vec<(AtomicU64, AtomicU64)>,
    /// Size of each worker's last counter snapshot (bytes).
    pub checkpoint_bytes: Vec<AtomicU64>,
    /// The largest checkpoint seen: (bytes over all workers, live counters then).
    pub largest_checkpoint: Mutex<(u64, u64)>,
    /// Bytes checkpoints wrote (changed panes and counter files), over all workers and checkpoints.
    pub checkpoint_written_bytes: AtomicU64,
    /// Bytes of those checkpoints' counter parts, linked panes included.
    pub checkpoint_total_bytes: AtomicU64,
    /// The Redis fan-out's counters (all zero without one).
    pub fanout: Arc<FanoutStats>,
    /// The hot-key detector's counters (all zero without `[hot_keys]`).
    pub hot_keys: HotKeyStats,
}

/// Counters of the hot-key detector (`[hot_keys]`).
#[derive(Debug, Default)]
pub struct HotKeyStats {
    /// Whether the job runs the detector (its metrics are exported only then).
    pub enabled: AtomicBool,
    /// Events the detector sampled (over all workers).
    pub sampled: AtomicU64,
    /// Sampled events not counted: late for their partition, or their window already closed.
    pub dropped: AtomicU64,
    /// Hot-key windows closed (reported).
    pub windows: AtomicU64,
    /// Keys `hot` in the last closed window.
    pub hot: AtomicU64,
    /// Keys `cooling` in the last closed window.
    pub cooling: AtomicU64,
    /// Open windows held.
    pub open_windows: AtomicU64,
}

/// Counters of one input partition.
#[derive(Debug, Default)]
pub struct PartitionStats {
    /// Records read.
    pub records: AtomicU64,
    /// Valid events.
    pub events: AtomicU64,
    /// Bad records.
    pub bad: AtomicU64,
    /// Events late for some window.
    pub late: AtomicU64,
    /// Partition watermark (ms; `i64::MIN` before any event), as the merger last saw it.
    pub watermark: AtomicI64,
    /// Idle (1) or not (0), finished (2).
    pub status: AtomicU64,
    /// Kafka consumer lag in messages (-1: unknown or not Kafka).
    pub lag: AtomicI64,
    /// Kafka: gaps accepted with `source.on_data_loss = "continue"` (a re-created topic,
    /// messages deleted by retention before they were read).
    pub data_loss: AtomicU64,
    /// Kafka: messages known to be lost in those gaps (a re-created topic's are unknown).
    pub data_loss_messages: AtomicU64,
}

impl PartitionStats {
    fn new() -> PartitionStats {
        PartitionStats {
            watermark: AtomicI64::new(i64::MIN),
            lag: AtomicI64::new(-1),
            ..Default::default()
        }
    }
}

/// The counters of every input partition, by partition id. It grows when partitions are added
/// to a Kafka topic while the job runs; a partition's counters, once there, stay at their place.
#[derive(Debug, Default)]
pub struct PartitionTable(RwLock<Vec<Arc<PartitionStats>>>);

impl PartitionTable {
    /// Counters for partitions `0..n`.
    pub fn new(n: usize) -> PartitionTable {
        PartitionTable(RwLock::new((0..n).map(|_| Arc::new(PartitionStats::new())).collect()))
    }

    /// Partition `p`'s counters, if it is known.
    pub fn get(&self, p: u32) -> Option<Arc<PartitionStats>> {
        self.0.read().ok()?.get(p as usize).cloned()
    }

    /// Partition `p`'s counters, adding them (and those of any partition below it) if needed.
    pub fn get_or_add(&self, p: u32) -> Option<Arc<PartitionStats>> {
        if let Some(ps) = self.get(p) {
            return Some(ps);
        }
        let mut all = self.0.write().ok()?;
        while all.len() <= p as usize {
            all.push(Arc::new(PartitionStats::new()));
        }
        all.get(p as usize).cloned()
    }

    /// How many partitions have counters.
    pub fn len(&self) -> usize {
        self.0.read().map_or(0, |all| all.len())
    }

    /// Whether no partition has counters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every partition's counters, by partition id.
    pub fn all(&self) -> Vec<Arc<PartitionStats>> {
        self.0.read().map(|all| all.clone()).unwrap_or_default()
    }
}

impl JobStats {
    /// Zeroed counters for `workers` workers and `partitions` input partitions.
    pub fn new(workers: usize, partitions: usize) -> JobStats {
        let v = || (0..workers).map(|_| AtomicU64::new(0)).collect();
        JobStats {
            records_in: AtomicU64::new(0),
            events_in: AtomicU64::new(0),
            bad: AtomicU64::new(0),
            late: AtomicU64::new(0),
            late_dropped: AtomicU64::new(0),
            sealed_dropped: AtomicU64::new(0),
            watermark: AtomicI64::new(i64::MIN),
            revisions: AtomicU64::new(0),
            windows_closed: AtomicU64::new(0),
            windows_sealed: AtomicU64::new(0),
            replays_exact: AtomicU64::new(0),
            replays_failed: AtomicU64::new(0),
            replays_pending: AtomicU64::new(0),
            committed_epoch: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            live_counters: v(),
            state_bytes: v(),
            live_items: v(),
            sketch_instances: v(),
            auto_folds: v(),
            without_user: v(),
            overflow_groups: Mutex::new(BTreeMap::new()),
            peak_counters: AtomicU64::new(0),
            latest: Mutex::new(BTreeMap::new()),
            partitions: PartitionTable::new(partitions),
            commit_seconds: prometheus::Histogram::with_opts(
                prometheus::HistogramOpts::new("hotlist_sink_commit_seconds", "sink commit latency").buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                ]),
            )
            .expect("valid histogram"),
            checkpoint_upload_seconds: prometheus::Histogram::with_opts(
                prometheus::HistogramOpts::new(
                    "hotlist_checkpoint_upload_seconds",
                    "time to upload a checkpoint to object storage before its commit",
                )
                .buckets(vec![
                    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                ]),
            )
            .expect("valid histogram"),
            checkpoint_seconds: prometheus::Histogram::with_opts(
                prometheus::HistogramOpts::new(
                    "hotlist_checkpoint_seconds",
                    "time to snapshot and write a worker's state",
                )
                .buckets(vec![0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]),
            )
            .expect("valid histogram"),
            emit_seconds: prometheus::Histogram::with_opts(
                prometheus::HistogramOpts::new(
                    "hotlist_emit_seconds",
                    "time a worker's exact counter spent in an advance that emitted lists",
                )
                .buckets(vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                ]),
            )
            .expect("valid histogram"),
            emit_samples: Mutex::new(Vec::new()),
            emits: (0..workers).map(|_| (AtomicU64::new(0), AtomicU64::new(0))).collect(),
            checkpoint_bytes: v(),
            largest_checkpoint: Mutex::new((0, 0)),
            checkpoint_written_bytes: AtomicU64::new(0),
            checkpoint_total_bytes: AtomicU64::new(0),
            fanout: Arc::default(),
            hot_keys: HotKeyStats::default(),
        }
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

    /// Records worker `w`'s checkpoint write.
    pub fn note_checkpoint(&self, w: usize, part: crate::checkpoint::PartWritten, took: std::time::Duration) {
        self.checkpoint_seconds.observe(took.as_secs_f64());
        if let Some(b) = self.checkpoint_bytes.get(w) {
            b.store(part.total as u64, Relaxed);
        }
        self.checkpoint_written_bytes.fetch_add(part.written as u64, Relaxed);
        self.checkpoint_total_bytes.fetch_add(part.total as u64, Relaxed);
        let total: u64 = self.checkpoint_bytes.iter().map(|b| b.load(Relaxed)).sum();
        if let Ok(mut l) = self.largest_checkpoint.lock() {
            if total > l.0 {
                *l = (total, self.total_counters());
            }
        }
    }

    /// The global watermark.
    pub fn watermark(&self) -> Millis {
        Millis(self.watermark.load(Relaxed))
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

    /// Records a committed list as the window's latest if it is the newest instance.
    pub fn note_committed(&self, list: &PublishedList) {
        if let Ok(mut latest) = self.latest.lock() {
            let key = (list.window.clone(), list.group.clone());
            let newer = latest
                .get(&key)
                .is_none_or(|l| (l.start, l.revision) <= (list.start, list.revision));
            if newer {
                latest.insert(key, list.clone());
            }
        }
    }
}

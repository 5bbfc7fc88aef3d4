//! Shared job counters: written by operators (batched per activation, not per event) and the
//! sink writer, read by the progress display, the run summary and the metrics endpoint.
//!
//! Each subsystem owns its counters and names its own Prometheus series (in its `register`):
//! `source` (records, events, partitions), `counting` (the window count's state, sketches,
//! emits), `merge` (watermark, revisions, windows, `exact_at_seal` replays), `sink` (commits,
//! the latest lists), `checkpoint` (checkpoint writes and sizes), `hot_keys` (the detector); the
//! Redis fan-out's counters are `hotlist_sinks::redis::FanoutStats`, beside the fan-out.

mod checkpoint;
mod counting;
mod hot_keys;
mod merge;
mod sink;
mod source;
#[cfg(test)]
mod tests;

pub use checkpoint::CheckpointStats;
pub use counting::{CountingStats, EMIT_SAMPLES};
pub use hot_keys::HotKeyStats;
pub use merge::MergeStats;
pub use sink::SinkStats;
pub use source::{PartitionStats, PartitionTable, SourceStats};

use crate::metrics::Metrics;
use hotlist_sinks::redis::FanoutStats;
use std::sync::Arc;

/// Counters of a running job, by subsystem.
#[derive(Debug)]
pub struct JobStats {
    /// The source: records, events, bad and late, per partition.
    pub source: SourceStats,
    /// The window count: live state per worker, sketches, emits.
    pub counting: CountingStats,
    /// The merge: watermark, revisions, windows, replays.
    pub merge: MergeStats,
    /// The sink writer: commits and the latest committed lists.
    pub sink: SinkStats,
    /// Checkpoint writes and sizes.
    pub checkpoints: CheckpointStats,
    /// The Redis fan-out's counters (all zero without one).
    pub fanout: Arc<FanoutStats>,
    /// The hot-key detector's counters (all zero without `[hot_keys]`).
    pub hot_keys: HotKeyStats,
}

impl JobStats {
    /// Zeroed counters for `workers` workers and `partitions` input partitions.
    pub fn new(workers: usize, partitions: usize) -> JobStats {
        JobStats {
            source: SourceStats::new(partitions),
            counting: CountingStats::new(workers),
            merge: MergeStats::default(),
            sink: SinkStats::default(),
            checkpoints: CheckpointStats::new(workers),
            fanout: Arc::default(),
            hot_keys: HotKeyStats::default(),
        }
    }

    /// Records worker `w`'s checkpoint write.
    pub fn note_checkpoint(&self, w: usize, part: crate::checkpoint::PartWritten, took: std::time::Duration) {
        self.checkpoints.note(w, part, took, self.counting.total_counters());
    }

    /// The job's metrics in the Prometheus text format, every series labelled `job`; `names[p]`
    /// names input partition `p`.
    pub fn render_metrics(&self, job: &str, names: &[String]) -> String {
        let Some(m) = Metrics::new(job) else {
            return "# cannot build the registry\n".into();
        };
        self.source.register(&m, names);
        self.counting.register(&m);
        self.merge.register(&m);
        self.sink.register(&m);
        self.checkpoints.register(&m);
        self.hot_keys.register(&m);
        if let Some(series) = self.fanout.series() {
            m.scalars(series);
        }
        m.render()
    }
}

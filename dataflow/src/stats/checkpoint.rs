//! The checkpoints' counters: write and upload durations, the last checkpoint's size, the
//! largest one, and bytes written vs linked.

use crate::checkpoint::PartWritten;
use crate::metrics::{self, Metrics};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Counters of the checkpoints.
#[derive(Debug)]
pub struct CheckpointStats {
    /// Time to snapshot and write one worker's counter state at a checkpoint (seconds).
    pub checkpoint_seconds: prometheus::Histogram,
    /// `s3://` checkpoint dirs: time to upload one checkpoint before its commit (seconds).
    pub checkpoint_upload_seconds: prometheus::Histogram,
    /// Size of each worker's last counter snapshot (bytes).
    pub checkpoint_bytes: Vec<AtomicU64>,
    /// The largest checkpoint seen: (bytes over all workers, live counters then).
    pub largest_checkpoint: Mutex<(u64, u64)>,
    /// Bytes checkpoints wrote (changed panes and counter files), over all workers and checkpoints.
    pub checkpoint_written_bytes: AtomicU64,
    /// Bytes of those checkpoints' counter parts, linked panes included.
    pub checkpoint_total_bytes: AtomicU64,
}

impl CheckpointStats {
    /// Zeroed counters for `workers` workers.
    pub fn new(workers: usize) -> CheckpointStats {
        CheckpointStats {
            checkpoint_seconds: metrics::histogram(
                "hotlist_checkpoint_seconds",
                "time to snapshot and write a worker's state",
                vec![0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0],
            ),
            checkpoint_upload_seconds: metrics::histogram(
                "hotlist_checkpoint_upload_seconds",
                "time to upload a checkpoint to object storage before its commit",
                vec![
                    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                ],
            ),
            checkpoint_bytes: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            largest_checkpoint: Mutex::new((0, 0)),
            checkpoint_written_bytes: AtomicU64::new(0),
            checkpoint_total_bytes: AtomicU64::new(0),
        }
    }

    /// Records worker `w`'s checkpoint write, `live_counters` the job's live counters now.
    pub fn note(&self, w: usize, part: PartWritten, took: std::time::Duration, live_counters: u64) {
        self.checkpoint_seconds.observe(took.as_secs_f64());
        if let Some(b) = self.checkpoint_bytes.get(w) {
            b.store(part.total as u64, Relaxed);
        }
        self.checkpoint_written_bytes.fetch_add(part.written as u64, Relaxed);
        self.checkpoint_total_bytes.fetch_add(part.total as u64, Relaxed);
        let total: u64 = self.checkpoint_bytes.iter().map(|b| b.load(Relaxed)).sum();
        if let Ok(mut l) = self.largest_checkpoint.lock() {
            if total > l.0 {
                *l = (total, live_counters);
            }
        }
    }

    /// Registers write durations, the last checkpoint's size, and bytes written vs. linked.
    pub fn register(&self, m: &Metrics) {
        m.add(self.checkpoint_seconds.clone());
        m.add(self.checkpoint_upload_seconds.clone());
        m.scalars([
            (
                "hotlist_checkpoint_bytes",
                "size of the last checkpoint's counter snapshots over all workers",
                self.checkpoint_bytes.iter().map(|b| b.load(Relaxed)).sum::<u64>() as i64,
            ),
            (
                "hotlist_checkpoint_written_bytes_total",
                "bytes checkpoints wrote (panes unchanged since the previous checkpoint are linked, not written)",
                self.checkpoint_written_bytes.load(Relaxed) as i64,
            ),
            (
                "hotlist_checkpoint_part_bytes_total",
                "bytes of the checkpoints' counter parts, linked panes included",
                self.checkpoint_total_bytes.load(Relaxed) as i64,
            ),
        ]);
    }
}

//! Checkpoints on disk: layout, atomic writes, manifests, restore with fallback, retention, and
//! the directory lock that keeps a second live run of the job out.
//!
//! Protocol (docs/exactly-once.md, "The commit-at-checkpoint protocol"): epoch `t` is a
//! checkpoint epoch when `checkpoint.interval` has passed since the last one on the sources'
//! clocks (the largest clock in its control records: every worker decides alike), when every
//! input has ended, or when a source is stopping. When the frontier passes it, every counter writes its part (`counter-<worker>.snap`
//! and its pane files, off the worker thread, the epoch held until they are durable) and the
//! merger (worker 0) writes `merger.snap` and `sources.snap`. Only after that can the sink's
//! frontier pass the epoch and the sink hand the results of all epochs up to `t` to the writer
//! thread, which writes the checkpoint's `MANIFEST` (every file with its size and checksum, the
//! worker count, the job's windows) and then commits, in one transaction, with the
//! checkpoint's epoch number. **The sink's committed epoch is the truth**: a checkpoint exists
//! iff it was committed, and a committed checkpoint always has its manifest. A restore uses a
//! checkpoint only if it matches its manifest.
//!
//! Layout: `<dir>/<job>/LOCK` (held by the live run) and `<dir>/<job>/<epoch, 20 digits>/`
//! `{counter-NNNN.snap, pane-NNNN-<width>-<start>.snap…, sketch-NNNN.snap (sketch windows only),
//! merger.snap, sources.snap, MANIFEST}`,
//! where `<epoch>` is the sink epoch (a run's timely epoch plus its epoch base).
//!
//! Files: `write` (atomic writes, a worker's incremental part), `manifest` (what a checkpoint
//! holds, written before its commit, checked before a restore), `restore` (load, validate,
//! fall back; which dead letters the store has already), `cleanup` (retention, never-committed
//! checkpoints, moving a job's checkpoints aside), `lock` (the job directory's `LOCK`),
//! `remote` (checkpoints in object storage: uploaded before each commit, downloaded at start).

mod cleanup;
mod lock;
mod manifest;
pub mod remote;
mod restore;
#[cfg(test)]
mod tests;
mod write;

pub use cleanup::{move_aside, remove_never_committed, retain, retain_parts};
pub use lock::lock_job_dir;
pub use manifest::{write as write_manifest, Manifest, ManifestFile, RunFacts, MANIFEST, MANIFEST_FORMAT};
pub use restore::{load, restore, LoadError, PositionKind, Restored, StoredDeadLetters};
pub use write::{write_atomic, write_counter_part, write_snapshot, PartWritten};

use crate::config::{JobPlan, SourcePlan};
use hotlist_operators::counting::Counting;
use hotlist_operators::time::Span;
use hotlist_operators::window::WindowSpec;
use std::path::{Path, PathBuf};

/// The directory of one job's checkpoints.
pub fn job_dir(base: &Path, job: &str) -> PathBuf {
    base.join(job)
}

/// The directory of one checkpoint.
pub fn checkpoint_dir(base: &Path, job: &str, epoch: u64) -> PathBuf {
    job_dir(base, job).join(format!("{epoch:020}"))
}

/// Checkpoint epochs present under `<base>/<job>`, newest first.
pub fn list(base: &Path, job: &str) -> Vec<u64> {
    let mut epochs: Vec<u64> = std::fs::read_dir(job_dir(base, job))
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
                .collect()
        })
        .unwrap_or_default();
    epochs.sort_unstable_by(|a, b| b.cmp(a));
    epochs
}

/// The epoch of a checkpoint directory (its name: 20 digits).
pub fn epoch_of(dir: &Path) -> Option<u64> {
    dir.file_name()?.to_str()?.parse().ok()
}

/// What a checkpoint's state must have been counted with to restore into this job: its windows,
/// how each counts, and allowed lateness (the worker count may differ: state is redistributed
/// by key group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobLayout {
    /// The job's windows, in configured order.
    pub windows: Vec<WindowSpec>,
    /// How each window counts, described (`exact`, or the mode with its sketch settings).
    pub counting: Vec<String>,
    /// The job's allowed lateness.
    pub allowed_lateness: Span,
    /// With `source.split`: each file's path and the size its ranges were cut from (empty
    /// otherwise). A checkpoint's positions count lines from its ranges' starts, so it only
    /// restores onto the same cut.
    pub split: Vec<(String, u64)>,
    /// With `source.split`: per file, how many stripes each range reads in turns (empty when
    /// every file is read in one turn, as contiguous ranges: see `FileRange`).
    pub split_turns: Vec<u64>,
    /// The `[[udf]]` libraries: each UDF's name and its library's SHA-256. A checkpoint
    /// restores only with the same libraries (its state came from their results) unless
    /// `accept_udf_change`.
    pub udfs: Vec<(String, String)>,
    /// `--accept-udf-change`: restore although the libraries differ.
    pub accept_udf_change: bool,
}

impl JobLayout {
    /// The layout of a planned job.
    pub fn of(plan: &JobPlan) -> JobLayout {
        JobLayout {
            windows: plan.window_specs(),
            counting: plan.windows.iter().map(|w| describe_counting(&w.counting)).collect(),
            allowed_lateness: plan.time.allowed_lateness,
            split: match &plan.source {
                SourcePlan::Files(files) => files.split_sizes(),
                _ => Vec::new(),
            },
            split_turns: match &plan.source {
                SourcePlan::Files(files) => files.split_turns(),
                _ => Vec::new(),
            },
            udfs: plan.udfs.iter().map(|u| (u.name.clone(), u.sha256.clone())).collect(),
            accept_udf_change: plan.accept_udf_change,
        }
    }

    /// Whether some window counts with a sketch (its checkpoints have `sketch-NNNN.snap` files).
    pub fn has_sketches(&self) -> bool {
        self.counting.iter().any(|c| c != "exact")
    }

    /// Whether some window has `exact_at_seal` (a checkpoint without `replay.snap` cannot
    /// restore it; every checkpoint of this version has one).
    pub fn has_replays(&self) -> bool {
        self.counting.iter().any(|c| c.contains("exact_at_seal: true"))
    }
}

/// How a window counts, as a checkpoint's manifest records it.
pub fn describe_counting(c: &Counting) -> String {
    match c {
        Counting::Exact => "exact".to_string(),
        other => format!("{other:?}"),
    }
}

/// The name of worker `w`'s sketch counter file.
pub fn sketch_file(w: usize) -> String {
    format!("sketch-{w:04}.snap")
}

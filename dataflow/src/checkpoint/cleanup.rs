//! Removing checkpoints, only ever for a reason the store or the manifest gives: retention
//! after a commit, a run's checkpoints that were never committed, and a new run of the job
//! (`--from-scratch`) moving the old ones aside. Nothing here decides that a store "looks
//! empty": that rule is the start-up's (`run/start.rs`).

use super::manifest::MANIFEST;
use super::{checkpoint_dir, job_dir, list};
use anyhow::{Context, Result};
use hotlist_operators::time::Millis;
use std::path::{Path, PathBuf};

/// After the commit of `committed`: of the checkpoints at or below it, keeps the newest
/// `retain` that have a manifest and removes the others (those without one were coalesced into
/// a later commit and can never be restored). Newer ones are never touched: workers may be
/// writing the next checkpoint right now.
pub fn retain(base: &Path, job: &str, committed: u64, retain: usize) {
    let mut kept = 0;
    for e in list(base, job).into_iter().filter(|e| *e <= committed) {
        let dir = checkpoint_dir(base, job, e);
        if kept < retain && dir.join(MANIFEST).exists() {
            kept += 1;
        } else {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// On a process that does not write the sink (a cluster with checkpoints in object storage and
/// a local directory of its own): after its part of checkpoint `newest` is uploaded, keeps its
/// newest `keep` local parts (the next part links unchanged panes from the newest) and removes
/// the older ones. The bucket holds what a restore needs.
pub fn retain_parts(base: &Path, job: &str, newest: u64, keep: usize) {
    let older: Vec<u64> = list(base, job).into_iter().filter(|e| *e <= newest).collect();
    for e in older.into_iter().skip(keep.max(2)) {
        let _ = std::fs::remove_dir_all(checkpoint_dir(base, job, e));
    }
}

/// Removes checkpoints that were never committed (the start-up knows which), logging each.
pub fn remove_never_committed(base: &Path, job: &str, epochs: &[u64]) {
    for e in epochs {
        let d = checkpoint_dir(base, job, *e);
        tracing::info!("removing checkpoint {} (never committed)", d.display());
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Moves every checkpoint of the job into `<base>/<job>.replaced-<unix ms>/` (a new run of the
/// job starts; the old checkpoints are kept for inspection until someone deletes them). The
/// job directory and its `LOCK` stay. Returns where they went, if there were any.
pub fn move_aside(base: &Path, job: &str) -> Result<Option<PathBuf>> {
    let epochs = list(base, job);
    if epochs.is_empty() {
        return Ok(None);
    }
    let aside = base.join(format!("{job}.replaced-{}", Millis::now().0));
    std::fs::create_dir_all(&aside).with_context(|| format!("cannot create {}", aside.display()))?;
    for e in epochs {
        let from = checkpoint_dir(base, job, e);
        let to = aside.join(from.file_name().unwrap_or_default());
        std::fs::rename(&from, &to).with_context(|| format!("cannot move {} to {}", from.display(), to.display()))?;
    }
    if let Ok(d) = std::fs::File::open(job_dir(base, job)) {
        let _ = d.sync_all();
    }
    Ok(Some(aside))
}

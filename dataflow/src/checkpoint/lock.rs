//! The job directory's `LOCK`: the run that checkpoints a job holds an exclusive lock on
//! `<checkpoint.dir>/<job>/LOCK` for its lifetime, so a second live run of the job (same
//! checkpoint directory) is refused at start instead of deleting the first one's checkpoints.
//! In a cluster only process 0 takes it (all processes share the directory).

use super::job_dir;
use anyhow::{anyhow, Context, Result};
use hotlist_sinks::file_lock::{FileLock, LockError};
use std::path::Path;

/// The lock file's name in the job's checkpoint directory.
pub const LOCK: &str = "LOCK";

/// Takes the lock of job `job`'s checkpoint directory under `base` (created if missing).
pub fn lock_job_dir(base: &Path, job: &str) -> Result<FileLock> {
    let dir = job_dir(base, job);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    FileLock::try_lock(&dir.join(LOCK)).map_err(|e| match e {
        LockError::Held { .. } => anyhow!("job {job:?} is already running: {e}; stop that run first"),
        LockError::Io { .. } => anyhow!("{e}"),
    })
}

//! Writing checkpoint files: every file atomically and durably (temp file, fsync, rename, fsync
//! of the directory), and one worker's incremental part.
//!
//! Incremental: a worker's live panes are files of their own. A pane no event changed since the
//! worker's previous checkpoint is hard-linked from there (copied if the file system cannot
//! link) instead of written again, so each checkpoint directory is complete by itself —
//! retention, restore and verify need not know which files are shared — and a checkpoint
//! writes only the panes that changed. The counter file, naming its panes, is written last.

use anyhow::{anyhow, Context, Result};
use hotlist_operators::snapshot::{self, CounterSnapshot, PaneKey, PaneSegment};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically and durably (temp file, fsync, rename, fsync dir).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_durable(path, bytes)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Encodes and writes a snapshot file; returns its size in bytes.
pub fn write_snapshot<T: Serialize>(dir: &Path, name: &str, value: &T) -> Result<usize> {
    let bytes = snapshot::encode(value);
    write_atomic(&dir.join(name), &bytes)?;
    hotlist_sinks::crash_point::crash_point("checkpoint.file");
    Ok(bytes.len())
}

/// What writing one worker's part of a checkpoint cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartWritten {
    /// Bytes written (the changed panes and the counter file).
    pub written: usize,
    /// Bytes of the whole part, linked panes included.
    pub total: usize,
}

impl PartWritten {
    /// Adds a whole file of `bytes` written.
    pub fn add_file(&mut self, bytes: usize) {
        self.written += bytes;
        self.total += bytes;
    }
}

/// Writes worker `worker`'s counter state into checkpoint directory `dir`: changed panes as
/// new files, unchanged ones (`None`) linked from `prev`, the worker's previous checkpoint
/// directory, then `counter-NNNN.snap` naming them all (last: its presence means they exist).
pub fn write_counter_part(
    dir: &Path,
    worker: usize,
    mut base: CounterSnapshot,
    panes: Vec<(PaneKey, Option<PaneSegment>)>,
    prev: Option<&Path>,
) -> Result<PartWritten> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cost = PartWritten::default();
    for (key, segment) in panes {
        let name = key.file_name(worker);
        let path = dir.join(&name);
        match segment {
            Some(seg) => {
                let bytes = snapshot::encode(&seg);
                write_durable(&path, &bytes)?;
                hotlist_sinks::crash_point::crash_point("checkpoint.file");
                cost.written += bytes.len();
                cost.total += bytes.len();
            }
            None => {
                let from = prev
                    .map(|p| p.join(&name))
                    .ok_or_else(|| anyhow!("pane {name} is unchanged but there is no previous checkpoint"))?;
                if let Err(e) = std::fs::hard_link(&from, &path) {
                    tracing::debug!(
                        "cannot link {} into {} ({e}): copying it",
                        from.display(),
                        dir.display()
                    );
                    let bytes =
                        std::fs::read(&from).with_context(|| format!("cannot read {} to copy it", from.display()))?;
                    write_durable(&path, &bytes)?;
                    cost.written += bytes.len();
                }
                cost.total += std::fs::metadata(&path).map(|m| m.len() as usize).unwrap_or(0);
            }
        }
        base.pane_files.push(name);
    }
    if let Ok(d) = std::fs::File::open(dir) {
        d.sync_all().with_context(|| format!("cannot sync {}", dir.display()))?;
    }
    let bytes = write_snapshot(dir, &format!("counter-{worker:04}.snap"), &base)?;
    cost.written += bytes;
    cost.total += bytes;
    Ok(cost)
}

/// Writes `bytes` to `path` through a temp file, fsynced and renamed (the caller syncs the
/// directory once for many files).
pub(super) fn write_durable(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.sync_all().with_context(|| format!("cannot sync {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot rename {} into place", tmp.display()))
}

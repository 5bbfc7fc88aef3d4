//! Checkpoints on disk: layout, atomic writes, restore with fallback, retention.
//!
//! Protocol (notes/exactly-once.md, "commit at checkpoints"): epoch `t` is a checkpoint epoch
//! when `t % every_epochs == 0` or when every input has ended. When the frontier passes it,
//! every counter writes `counter-<worker>.snap` and the merger (worker 0) writes `merger.snap`
//! and `sources.snap` (partition positions and clocks, from the control records). Only after
//! that can the sink's frontier pass the epoch, so when the sink commits the results of all
//! epochs up to `t` — in one transaction, with the checkpoint's epoch number — every file is
//! durable. **The sink's committed epoch is the truth**: a checkpoint exists iff it was
//! committed. The `MANIFEST` written afterwards is for people and `hotlist checkpoints`.
//!
//! Layout: `<dir>/<job>/<epoch, 20 digits>/{counter-NNNN.snap, merger.snap, sources.snap, MANIFEST}`,
//! where `<epoch>` is the sink epoch (a run's timely epoch plus its epoch base).
//!
//! Restore: the committed epoch's directory, every file verified (checksum, format); if one is
//! corrupt or missing, the previous checkpoint is used, with a clear log line. Replaying from an
//! older checkpoint is safe: results are replaced per window instance and epochs only grow.

use anyhow::{anyhow, bail, Context, Result};
use hotlist_operators::record::PartitionId;
use hotlist_operators::snapshot::{self, CounterSnapshot, MergerSnapshot, SourceSnapshot};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory of one checkpoint.
pub fn checkpoint_dir(base: &Path, job: &str, epoch: u64) -> PathBuf {
    base.join(job).join(format!("{epoch:020}"))
}

/// Writes `bytes` to `path` atomically and durably (temp file, fsync, rename, fsync dir).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.sync_all().with_context(|| format!("cannot sync {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot rename {} into place", tmp.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Encodes and writes a snapshot file; returns its size in bytes.
pub fn write_snapshot<T: Serialize>(dir: &Path, name: &str, value: &T) -> Result<usize> {
    let bytes = snapshot::encode(value);
    write_atomic(&dir.join(name), &bytes)?;
    Ok(bytes.len())
}

/// Everything a restarted job needs.
#[derive(Clone, Debug)]
pub struct Restored {
    /// The checkpoint's (sink) epoch.
    pub epoch: u64,
    /// Counter state of every worker that wrote one.
    pub counters: Vec<CounterSnapshot>,
    /// The merger's state.
    pub merger: MergerSnapshot,
    /// Partition positions and clocks.
    pub sources: SourceSnapshot,
    /// When an older checkpoint was restored because newer committed ones were unusable: per
    /// partition, the position up to which records were already committed (from a newer
    /// checkpoint's intact `sources.snap`). Dead letters up to there were committed already and
    /// are not sent again.
    pub committed_positions: BTreeMap<PartitionId, u64>,
}

/// Loads and verifies one checkpoint directory.
pub fn load(dir: &Path, epoch: u64) -> Result<Restored> {
    let read = |name: &str| -> Result<Vec<u8>> {
        let p = dir.join(name);
        std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))
    };
    let merger = snapshot::decode(&read("merger.snap")?).map_err(|e| anyhow!("merger.snap: {e}"))?;
    let sources = snapshot::decode(&read("sources.snap")?).map_err(|e| anyhow!("sources.snap: {e}"))?;
    let mut counters = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("counter-") && n.ends_with(".snap"))
        .collect();
    names.sort();
    if names.is_empty() {
        bail!("no counter snapshots in {}", dir.display());
    }
    for n in names {
        counters.push(snapshot::decode(&read(&n)?).map_err(|e| anyhow!("{n}: {e}"))?);
    }
    Ok(Restored {
        epoch,
        counters,
        merger,
        sources,
        committed_positions: BTreeMap::new(),
    })
}

/// Checkpoint epochs present under `<base>/<job>`, newest first.
pub fn list(base: &Path, job: &str) -> Vec<u64> {
    let mut epochs: Vec<u64> = std::fs::read_dir(base.join(job))
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
                .collect()
        })
        .unwrap_or_default();
    epochs.sort_unstable_by(|a, b| b.cmp(a));
    epochs
}

/// Restores checkpoint `target` (an on-call replay), or with `None` the newest usable one at
/// or below `committed`; a corrupt or incomplete one is skipped with a clear log line. Newer committed checkpoints that are skipped tell how far each
/// partition's dead letters are already in the store.
pub fn restore(base: &Path, job: &str, committed: u64, target: Option<u64>) -> Result<Option<Restored>> {
    let mut committed_positions: BTreeMap<PartitionId, u64> = BTreeMap::new();
    if let Some(t) = target {
        if t > committed {
            bail!("checkpoint {t} was never committed (the store's committed epoch is {committed})");
        }
        for epoch in list(base, job).into_iter().filter(|e| *e <= committed && *e > t) {
            note_positions(&checkpoint_dir(base, job, epoch), &mut committed_positions);
        }
        let mut r = load(&checkpoint_dir(base, job, t), t).with_context(|| format!("cannot restore checkpoint {t}"))?;
        r.committed_positions = committed_positions;
        return Ok(Some(r));
    }
    for epoch in list(base, job).into_iter().filter(|e| *e <= committed) {
        let dir = checkpoint_dir(base, job, epoch);
        match load(&dir, epoch) {
            Ok(mut r) => {
                if epoch != committed {
                    tracing::warn!("restoring the older checkpoint {epoch} instead of the committed {committed}");
                }
                r.committed_positions = committed_positions;
                return Ok(Some(r));
            }
            Err(e) => {
                tracing::error!(
                    "checkpoint {} is unusable ({e:#}); trying the previous one",
                    dir.display()
                );
                // it was committed: what its sources had read is in the store already
                note_positions(&dir, &mut committed_positions);
            }
        }
    }
    Ok(None)
}

/// Adds what a committed checkpoint's sources had read to `positions` (if its file is intact).
fn note_positions(dir: &Path, positions: &mut BTreeMap<PartitionId, u64>) {
    if let Ok(bytes) = std::fs::read(dir.join("sources.snap")) {
        if let Ok(s) = snapshot::decode::<SourceSnapshot>(&bytes) {
            for p in s.partitions {
                let e = positions.entry(p.partition).or_insert(0);
                *e = (*e).max(p.position);
            }
        }
    }
}

/// Writes the manifest of a committed checkpoint and removes committed checkpoints beyond
/// the newest `retain` (never newer ones: workers may be writing the next one right now).
pub fn after_commit(base: &Path, job: &str, epoch: u64, retain: usize, manifest: &serde_json::Value) -> Result<()> {
    let dir = checkpoint_dir(base, job, epoch);
    if dir.exists() {
        let text = serde_json::to_vec_pretty(manifest).context("manifest")?;
        write_atomic(&dir.join("MANIFEST"), &text)?;
    }
    for e in list(base, job).into_iter().filter(|e| *e <= epoch).skip(retain) {
        let _ = std::fs::remove_dir_all(checkpoint_dir(base, job, e));
    }
    Ok(())
}

/// Removes checkpoint directories above the committed epoch: a crashed run's checkpoints that
/// never committed (a new run reuses those epoch numbers).
pub fn remove_uncommitted(base: &Path, job: &str, committed: Option<u64>) {
    for e in list(base, job).into_iter().filter(|e| committed.is_none_or(|c| *e > c)) {
        let d = checkpoint_dir(base, job, e);
        tracing::info!("removing checkpoint {} (never committed)", d.display());
        let _ = std::fs::remove_dir_all(d);
    }
}

//! Checkpoints on disk: layout, atomic writes, restore with fallback, retention.
//!
//! Protocol (docs/exactly-once.md, "The commit-at-checkpoint protocol"): epoch `t` is a checkpoint epoch
//! when `t % every_epochs == 0` or when every input has ended. When the frontier passes it,
//! every counter writes its part (`counter-<worker>.snap` and its pane files, off the worker
//! thread, the epoch held until they are durable) and the merger (worker 0) writes `merger.snap`
//! and `sources.snap` (partition positions and clocks, from the control records). Only after
//! that can the sink's frontier pass the epoch, so when the sink commits the results of all
//! epochs up to `t` — in one transaction, with the checkpoint's epoch number — every file is
//! durable. **The sink's committed epoch is the truth**: a checkpoint exists iff it was
//! committed. The `MANIFEST` written afterwards is for people and `hotlist checkpoints`.
//!
//! Layout: `<dir>/<job>/<epoch, 20 digits>/{counter-NNNN.snap, pane-NNNN-<width>-<start>.snap…,
//! merger.snap, sources.snap, MANIFEST}`, where `<epoch>` is the sink epoch (a run's timely
//! epoch plus its epoch base).
//!
//! Incremental: a worker's live panes are files of their own. A pane no event changed since the
//! worker's previous checkpoint is hard-linked from there (copied if the file system cannot
//! link) instead of written again, so each checkpoint directory is complete by itself —
//! retention, restore and verify need not know which files are shared — and a checkpoint
//! writes only the panes that changed. The counter file, naming its panes, is written last.
//!
//! Restore: the committed epoch's directory, every file verified (checksum, format); if one is
//! corrupt or missing, the previous checkpoint is used, with a clear log line. Replaying from an
//! older checkpoint is safe: results are replaced per window instance and epochs only grow.

use anyhow::{anyhow, bail, Context, Result};
use hotlist_operators::record::PartitionId;
use hotlist_operators::snapshot::{self, CounterSnapshot, MergerSnapshot, PaneKey, PaneSegment, SourceSnapshot};
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
fn write_durable(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.sync_all().with_context(|| format!("cannot sync {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot rename {} into place", tmp.display()))
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
        let counter: CounterSnapshot = snapshot::decode(&read(&n)?).map_err(|e| anyhow!("{n}: {e}"))?;
        let mut panes = Vec::with_capacity(counter.pane_files.len());
        for p in &counter.pane_files {
            if p.contains(['/', '\\']) || !p.starts_with("pane-") {
                bail!("{n}: bad pane file name {p:?}");
            }
            panes.push(snapshot::decode::<PaneSegment>(&read(p)?).map_err(|e| anyhow!("{p}: {e}"))?);
        }
        counters.push(snapshot::assemble(counter, panes));
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
    hotlist_sinks::crash_point::crash_point("checkpoint.manifest");
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

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::counter::WindowedCounter;
    use hotlist_operators::hash::item_hash;
    use hotlist_operators::record::TimedEvent;
    use hotlist_operators::time::{Millis, Span};
    use hotlist_operators::window::WindowSpec;
    use std::os::unix::fs::MetadataExt;

    fn event(item: &str, ts: i64) -> TimedEvent {
        TimedEvent {
            hash: item_hash(item),
            item: item.into(),
            ts: Millis(ts),
            wm_before: Millis::MIN,
            partition: PartitionId(0),
            position: 0,
        }
    }

    fn write_others(dir: &Path) {
        write_snapshot(dir, "merger.snap", &MergerSnapshot::default()).expect("merger");
        write_snapshot(dir, "sources.snap", &SourceSnapshot::default()).expect("sources");
    }

    /// A second checkpoint writes only the pane that changed and links the others (same inode);
    /// both load to the counter's whole snapshot; a damaged pane file makes the load fail naming it.
    #[test]
    fn incremental_parts_link_unchanged_panes_and_load_whole() {
        let base = tempfile::tempdir().expect("tempdir");
        let windows = vec![WindowSpec::tumbling("10", Span::from_millis(10), 3)];
        let mut c = WindowedCounter::new(windows, Span::from_millis(100), 0);
        for (i, ts) in [1, 11, 21, 31].into_iter().enumerate() {
            let _ = c.apply(&event(&format!("i{i}"), ts));
        }
        let _ = c.advance(Millis(0), false);
        let (d1, d2) = (base.path().join("1"), base.path().join("2"));
        let (b, panes) = c.snapshot_panes(None, |_| true);
        let since = c.sequence();
        let first = write_counter_part(&d1, 0, b, panes, None).expect("first part");
        assert_eq!(first.written, first.total);
        write_others(&d1);
        let _ = c.apply(&event("i9", 22));
        let _ = c.advance(Millis(0), false);
        let (b, panes) = c.snapshot_panes(Some(since), |_| true);
        let second = write_counter_part(&d2, 0, b, panes, Some(&d1)).expect("second part");
        write_others(&d2);
        assert!(second.written < second.total, "{second:?}");
        let inode = |d: &Path, start: i64| {
            let key = PaneKey {
                width: Span::from_millis(10),
                start: Millis(start),
            };
            std::fs::metadata(d.join(key.file_name(0))).expect("pane file").ino()
        };
        assert_eq!(inode(&d1, 0), inode(&d2, 0), "unchanged pane linked");
        assert_ne!(inode(&d1, 20), inode(&d2, 20), "changed pane written");
        let whole = c.snapshot();
        let loaded = load(&d2, 2).expect("loads");
        assert_eq!(loaded.counters.len(), 1);
        let mut got = loaded.counters[0].clone();
        let mut want = whole.clone();
        for s in [&mut got, &mut want] {
            for g in &mut s.key_groups {
                g.panes.sort_by_key(|p| (p.width, p.start));
                for p in &mut g.panes {
                    p.items.sort();
                }
            }
        }
        assert_eq!(got, want);
        // damage a pane file of the second checkpoint: the load fails and names it
        let name = PaneKey {
            width: Span::from_millis(10),
            start: Millis(20),
        }
        .file_name(0);
        let path = d2.join(&name);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).expect("write");
        let err = format!("{:#}", load(&d2, 2).expect_err("a damaged pane fails the load"));
        assert!(err.contains(&name) && err.contains("checksum"), "{err}");
        // the first checkpoint is untouched by it
        assert!(load(&d1, 1).is_ok());
    }
}

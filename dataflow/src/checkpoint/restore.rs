//! Restoring a checkpoint: load one (manifest checked, every file decoded and checksummed, the
//! state validated against the job), or the newest usable one at or below the store's committed
//! epoch, falling back past unusable ones with a clear log line.
//!
//! A fallback passes over committed checkpoints whose dead letters are in the store already:
//! their intact `sources.snap` files tell how far each partition had been read, and the sink
//! does not store replayed dead letters up to there again ([`StoredDeadLetters`]). How a
//! source's position relates to its dead letters' positions depends on the reader
//! ([`PositionKind`]).

use super::manifest::{counter_file, Manifest, MANIFEST};
use super::{checkpoint_dir, list, JobLayout};
use anyhow::{anyhow, bail, Context, Result};
use hotlist_operators::hot_keys::HotKeysSnapshot;
use hotlist_operators::record::PartitionId;
use hotlist_operators::replay::ReplaySnapshot;
use hotlist_operators::sketch_counter::SketchCounterSnapshot;
use hotlist_operators::snapshot::{
    self, validate_counters, CounterSnapshot, MergerSnapshot, PaneSegment, SnapshotError, SourceSnapshot,
};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Everything a restarted job needs.
#[derive(Clone, Debug)]
pub struct Restored {
    /// The checkpoint's (sink) epoch.
    pub epoch: u64,
    /// Counter state of every worker that wrote one (whole: pane files put back).
    pub counters: Vec<CounterSnapshot>,
    /// Sketch counter state of every worker (empty for a job without sketch windows).
    pub sketches: Vec<SketchCounterSnapshot>,
    /// The merger's state.
    pub merger: MergerSnapshot,
    /// Partition positions and clocks.
    pub sources: SourceSnapshot,
    /// The hot-key detector's state (`hotkeys.snap`), if the checkpoint has one.
    pub hot_keys: Option<HotKeysSnapshot>,
    /// Where open instances' events lie and the pending `exact_at_seal` replays (`replay.snap`:
    /// the sources' notes and the pending replays; every checkpoint of this version has it), if
    /// the checkpoint has them.
    pub replay: Option<ReplaySnapshot>,
    /// After a fallback past newer committed checkpoints (or `--from-checkpoint`): the dead
    /// letters the store has already, which the sink does not store again.
    pub stored_dead_letters: StoredDeadLetters,
}

/// What a source's recorded position counts, which says where its dead letters stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PositionKind {
    /// Files, stdin, the generator: records read; a dead letter's position is its record's
    /// number, from 1. Position `p` covers dead letters `1..=p`.
    RecordsRead,
    /// Kafka: the next offset to read; a dead letter's position is its message's offset.
    /// Position `p` covers dead letters at offsets below `p`.
    NextOffset,
}

impl PositionKind {
    /// The first dead-letter position that position `p` does not cover.
    fn first_not_covered(self, p: u64) -> u64 {
        match self {
            PositionKind::RecordsRead => p.saturating_add(1),
            PositionKind::NextOffset => p,
        }
    }
}

/// Per partition, the dead-letter positions below which the store has every dead letter
/// already (from newer committed checkpoints a fallback passed over).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredDeadLetters {
    below: BTreeMap<PartitionId, u64>,
}

impl StoredDeadLetters {
    /// Adds what a committed checkpoint's sources had read.
    pub fn note(&mut self, sources: &SourceSnapshot, kind: PositionKind) {
        for p in &sources.partitions {
            let below = self.below.entry(p.partition).or_insert(0);
            *below = (*below).max(kind.first_not_covered(p.position));
        }
    }

    /// Whether the dead letter of `partition` at `position` is in the store already.
    pub fn contains(&self, partition: PartitionId, position: u64) -> bool {
        self.below.get(&partition).is_some_and(|b| position < *b)
    }

    /// Whether nothing is known to be stored.
    pub fn is_empty(&self) -> bool {
        self.below.is_empty()
    }
}

/// Why a checkpoint cannot be restored.
#[derive(Debug)]
pub enum LoadError {
    /// Its state was counted with other windows or allowed lateness than the job has now: a
    /// configuration change, not damage. No older checkpoint can help.
    Incompatible,
    /// Missing, damaged, not matching its manifest, or invalid for the job: an older one may do.
    Unusable(anyhow::Error),
    /// Its positions are in byte ranges (`source.split`) cut otherwise than the job cuts them
    /// now (another split, or a file of another size): says how. No older checkpoint can help.
    SplitMoved(String),
    /// It was counted with other UDF libraries (`[[udf]]`) than the job has now: says which.
    /// No older checkpoint can help; `--accept-udf-change` restores it anyway.
    UdfChanged(String),
}

/// How the UDF libraries a checkpoint was counted with differ from the job's.
fn udf_change(then: &[(String, String)], now: &[(String, String)]) -> String {
    let short = |h: &str| h.get(..12).unwrap_or(h).to_string();
    let changed: Vec<String> = then
        .iter()
        .filter(|t| !now.contains(t))
        .map(|(name, was)| match now.iter().find(|(n, _)| n == name) {
            Some((_, is)) => format!("{name}'s library was {} and is {} now", short(was), short(is)),
            None => format!("{name} is no longer configured"),
        })
        .chain(
            now.iter()
                .filter(|(n, _)| !then.iter().any(|(m, _)| m == n))
                .map(|(name, _)| format!("{name} was not configured then")),
        )
        .collect();
    format!(
        "its state was counted with other UDF libraries ({}): UDFs are pure functions of a record, and results counted with two versions would mix; restore with the same libraries, accept the change (--accept-udf-change) or start over (--from-scratch)",
        changed.join("; ")
    )
}

/// How the ranges a checkpoint was read in differ from the job's (`source.split`).
fn split_change(then: &[(String, u64)], now: &[(String, u64)]) -> String {
    let moved = then.iter().zip(now).find(|(a, b)| a != b);
    let what = match moved {
        Some(((path, was), (_, is))) if then.len() == now.len() => {
            format!("{path} was {was} bytes when its ranges were cut, now {is}")
        }
        _ => format!(
            "it read {} file(s) in ranges, the job now {} (source.split or source.path changed)",
            then.len(),
            now.len()
        ),
    };
    format!(
        "its positions are lines in byte ranges of the input files (source.split), and the ranges would move: {what}; restore with the same files and split, or start over (--from-scratch)"
    )
}

/// How the stripes a checkpoint's ranges were read in differ from the job's (the same files
/// and sizes, another `source.split_stripe_bytes` or an older hotlist's contiguous ranges).
fn turns_change(then: &[u64], now: &[u64]) -> String {
    let shown = |t: &[u64]| match t.is_empty() {
        true => "one contiguous range per partition".to_string(),
        false => format!("{t:?} stripes per range"),
    };
    format!(
        "its positions are lines in byte ranges of the input files (source.split), and the ranges would move: they were read as {}, the job now reads {} (source.split_stripe_bytes changed, or the checkpoint is an older hotlist's); restore with the same stripe, or start over (--from-scratch)",
        shown(then),
        shown(now)
    )
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Incompatible => write!(f, "{}", SnapshotError::Incompatible),
            LoadError::Unusable(e) => write!(f, "{e:#}"),
            LoadError::SplitMoved(why) | LoadError::UdfChanged(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<anyhow::Error> for LoadError {
    fn from(e: anyhow::Error) -> LoadError {
        LoadError::Unusable(e)
    }
}

/// Reads and decodes one snapshot file of `dir`, naming it in the error.
fn decode_file<T: snapshot::Snapshot>(dir: &Path, name: &str) -> Result<T> {
    let path = dir.join(name);
    let bytes = std::fs::read(&path).with_context(|| format!("{name}: cannot read {}", path.display()))?;
    snapshot::decode(&bytes).map_err(|e| anyhow!("{name}: {e}"))
}

/// Loads and verifies checkpoint `epoch` in `dir` for a job of `layout`: its manifest (every
/// file present with its size and checksum, every counter part), every file decoded and
/// checksummed, every pane file a counter names listed, and the state validated (windows in
/// range, no key group twice, …). Validation errors name the file.
pub fn load(dir: &Path, epoch: u64, layout: &JobLayout) -> Result<Restored, LoadError> {
    let manifest = Manifest::read(dir)?;
    if !manifest.fits(layout) {
        return Err(LoadError::Incompatible);
    }
    if manifest.split != layout.split {
        return Err(LoadError::SplitMoved(split_change(&manifest.split, &layout.split)));
    }
    if manifest.split_turns != layout.split_turns {
        return Err(LoadError::SplitMoved(turns_change(
            &manifest.split_turns,
            &layout.split_turns,
        )));
    }
    if manifest.udfs != layout.udfs && !layout.accept_udf_change {
        return Err(LoadError::UdfChanged(udf_change(&manifest.udfs, &layout.udfs)));
    }
    manifest.check_files(dir, epoch)?;
    let merger: MergerSnapshot = decode_file(dir, "merger.snap")?;
    merger
        .validate(&layout.windows)
        .map_err(|e| anyhow!("merger.snap: {e}"))?;
    let sources: SourceSnapshot = decode_file(dir, "sources.snap")?;
    sources.validate().map_err(|e| anyhow!("sources.snap: {e}"))?;
    let counters = load_counters(dir, &manifest, layout)?;
    let sketches = match layout.has_sketches() {
        true => (0..manifest.workers)
            .map(|w| decode_file(dir, &super::sketch_file(w)))
            .collect::<Result<Vec<SketchCounterSnapshot>>>()?,
        false => Vec::new(),
    };
    // checked against the job's [hot_keys] when the detector restores it
    let hot_keys = match manifest.lists("hotkeys.snap") {
        true => Some(decode_file::<HotKeysSnapshot>(dir, "hotkeys.snap")?),
        false => None,
    };
    let replay = match manifest.lists("replay.snap") {
        true => {
            let r: ReplaySnapshot = decode_file(dir, "replay.snap")?;
            r.validate(&layout.windows).map_err(|e| anyhow!("replay.snap: {e}"))?;
            Some(r)
        }
        // without the sources' notes, a replay would miss what was read before the checkpoint
        false if layout.has_replays() => {
            return Err(anyhow!("replay.snap: missing (the exact_at_seal windows' replay ranges)").into())
        }
        false => None,
    };
    Ok(Restored {
        epoch,
        counters,
        sketches,
        merger,
        sources,
        hot_keys,
        replay,
        stored_dead_letters: StoredDeadLetters::default(),
    })
}

/// Every counter part the manifest lists, with its pane files put back, validated together.
fn load_counters(dir: &Path, manifest: &Manifest, layout: &JobLayout) -> Result<Vec<CounterSnapshot>, LoadError> {
    let mut counters = Vec::with_capacity(manifest.workers);
    for name in (0..manifest.workers).map(counter_file) {
        let counter: CounterSnapshot = decode_file(dir, &name)?;
        let mut panes = Vec::with_capacity(counter.pane_files.len());
        for p in &counter.pane_files {
            if !manifest.lists(p) {
                return Err(anyhow!("{name} names {p}, which its MANIFEST does not list").into());
            }
            panes.push(decode_file::<PaneSegment>(dir, p)?);
        }
        counters.push(snapshot::assemble(counter, panes));
    }
    match validate_counters(&counters, &layout.windows, layout.allowed_lateness) {
        Ok(()) => {}
        Err(SnapshotError::Incompatible) => return Err(LoadError::Incompatible),
        Err(e) => {
            // name the file: the first that is invalid on its own (else a key group is in two)
            let named = counters.iter().enumerate().find_map(|(i, c)| {
                let e = c.validate(&layout.windows, layout.allowed_lateness).err()?;
                Some(anyhow!("{}: {e}", counter_file(i)))
            });
            return Err(named.unwrap_or_else(|| anyhow!("counter files: {e}")).into());
        }
    }
    Ok(counters)
}

/// Restores checkpoint `target` (an on-call replay), or with `None` the newest usable one at or
/// below `committed`; an unusable one is skipped with a clear log line (one without a manifest
/// below `committed`, coalesced into a later commit, with an info line). `None` when no
/// checkpoint is usable. A checkpoint of other windows fails at once (a config change).
pub fn restore(
    base: &Path,
    job: &str,
    committed: u64,
    target: Option<u64>,
    layout: &JobLayout,
    kind: PositionKind,
) -> Result<Option<Restored>> {
    let mut stored = StoredDeadLetters::default();
    if let Some(t) = target {
        if t > committed {
            bail!("checkpoint {t} was never committed (the store's committed epoch is {committed})");
        }
        for epoch in list(base, job).into_iter().filter(|e| *e <= committed && *e > t) {
            note_positions(&checkpoint_dir(base, job, epoch), &mut stored, kind);
        }
        let mut r =
            load(&checkpoint_dir(base, job, t), t, layout).with_context(|| format!("cannot restore checkpoint {t}"))?;
        r.stored_dead_letters = stored;
        return Ok(Some(r));
    }
    for epoch in list(base, job).into_iter().filter(|e| *e <= committed) {
        let dir = checkpoint_dir(base, job, epoch);
        if epoch < committed && !dir.join(MANIFEST).exists() {
            // coalesced into a later commit (a crash came before retention removed it): never
            // restorable, and not damage either, so no "unusable" line for on-call to chase
            tracing::info!("passing over checkpoint {epoch}: it was coalesced into a later commit (no MANIFEST)");
            note_positions(&dir, &mut stored, kind);
            continue;
        }
        match load(&dir, epoch, layout) {
            Ok(mut r) => {
                if epoch != committed {
                    tracing::warn!("restoring the older checkpoint {epoch} instead of the committed {committed}");
                }
                r.stored_dead_letters = stored;
                return Ok(Some(r));
            }
            Err(e @ (LoadError::Incompatible | LoadError::SplitMoved(_) | LoadError::UdfChanged(_))) => {
                bail!("cannot restore checkpoint {epoch}: {e}")
            }
            Err(e) => {
                tracing::error!(
                    "checkpoint {} is unusable ({e}); trying the previous one",
                    dir.display()
                );
                // committed (or coalesced into a commit): what its sources had read is stored
                note_positions(&dir, &mut stored, kind);
            }
        }
    }
    Ok(None)
}

/// Adds what a committed checkpoint's sources had read to `stored` (if its file is intact).
fn note_positions(dir: &Path, stored: &mut StoredDeadLetters, kind: PositionKind) {
    if let Ok(s) = decode_file::<SourceSnapshot>(dir, "sources.snap") {
        if s.validate().is_ok() {
            stored.note(&s, kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::record::PartitionStatus;
    use hotlist_operators::snapshot::PartitionState;
    use hotlist_operators::time::Millis;

    fn at(partition: u32, position: u64) -> SourceSnapshot {
        SourceSnapshot {
            partitions: vec![PartitionState {
                partition: PartitionId(partition),
                position,
                max_ts: Millis::MIN,
                status: PartitionStatus::Active,
            }],
        }
    }

    /// Files count records read (position 5: records 1..=5 are in); Kafka stores the next
    /// offset (position 5: offsets 0..=4 are in, the message at offset 5 was not read).
    #[test]
    fn a_position_covers_what_its_reader_had_read() {
        let mut files = StoredDeadLetters::default();
        files.note(&at(0, 5), PositionKind::RecordsRead);
        assert!(files.contains(PartitionId(0), 5));
        assert!(!files.contains(PartitionId(0), 6));
        assert!(!files.contains(PartitionId(1), 1), "other partitions: nothing known");
        let mut kafka = StoredDeadLetters::default();
        kafka.note(&at(0, 5), PositionKind::NextOffset);
        assert!(kafka.contains(PartitionId(0), 4));
        assert!(!kafka.contains(PartitionId(0), 5), "offset 5 was not read yet");
        // the furthest of several skipped checkpoints counts
        kafka.note(&at(0, 3), PositionKind::NextOffset);
        assert!(kafka.contains(PartitionId(0), 4));
        assert!(StoredDeadLetters::default().is_empty() && !kafka.is_empty());
    }
}

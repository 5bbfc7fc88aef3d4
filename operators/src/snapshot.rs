//! Checkpoint snapshots: versioned, checksummed, keyed by key group.
//!
//! A snapshot is plain data ([`CounterSnapshot`], [`MergerSnapshot`], [`SourceSnapshot`]) that
//! `WindowedCounter::snapshot` / `restore` and friends produce and consume. Counter state is
//! grouped by **key group** (the top 12 bits of the pinned item hash), so state written by `n`
//! workers can be restored onto `m` workers: each new worker keeps the groups it owns
//! (`key_group % m == worker`). Transient fields (caches, dirty flags, inline layout) are not
//! part of it: a restored counter re-derives them and re-emits its lists once.
//!
//! On disk a snapshot is an envelope: magic `HLSNAP`, format version, payload length, XXH3-64 of
//! the payload, then the payload (bincode 1, fixed-width integers). A torn or corrupt file
//! fails [`decode`] with a typed error instead of restoring garbage; decoding reads no more
//! than the payload holds, whatever lengths it claims. A payload that decodes can still make
//! no sense for the job (a window id past its windows): the `validate` methods
//! ([`CounterSnapshot::validate`], [`validate_counters`], [`MergerSnapshot::validate`],
//! [`SourceSnapshot::validate`], in `snapshot/validate.rs`) check that before a restore.

#[cfg(test)]
mod tests;
mod validate;
mod versions;

pub(crate) use validate::check_ranked;
pub use validate::{validate_counters, MAX_TOTAL_COUNT};

use crate::group::GroupKey;
use crate::record::{ItemId, ListState, PartitionId, PartitionStatus, RankedItem};
use crate::time::{Millis, Span};
use crate::window::{InstanceKey, WindowSpec};
use bincode::Options;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::btree_map::{BTreeMap, Entry};

/// The current snapshot format version. 3 added [`CounterSnapshot::sealed_until`]; 4 added
/// the windows' key shapes (`WindowSpec::key`: per-group and distinct-user windows) and
/// [`PublishedState::group`]; 5 added [`CounterSnapshot::groups_seen`]; 6 added the byte
/// offsets of files' replay ranges (`replay::ByteMark`, in `replay.snap`); 7 added the lists of
/// a replay job (per-group windows' groups, `replay::ListReplay`) and the per-group sketch
/// windows' groups (`SketchCounterSnapshot::groups_seen`); 8 added the windows' ranking
/// (`WindowSpec::rank`: trend windows) and trend lists' facts in published lists
/// (`RankedItem::trend`).
pub const FORMAT_VERSION: u16 = 8;
/// The oldest format version this build reads (see [`Snapshot::from_payload`]).
pub const OLDEST_FORMAT_VERSION: u16 = 2;
const MAGIC: &[u8; 6] = b"HLSNAP";
const HEADER: usize = 6 + 2 + 8 + 8;

/// Bytes of an envelope's header: magic, format version, payload length, checksum.
pub const HEADER_LEN: usize = HEADER;

/// An envelope's header: what a checkpoint's manifest records of each file, read without the
/// payload (a manifest over thousands of pane files must not hash them all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The format version (from [`OLDEST_FORMAT_VERSION`] to [`FORMAT_VERSION`]).
    pub version: u16,
    /// Payload bytes after the header.
    pub payload_len: u64,
    /// XXH3-64 of the payload.
    pub checksum: u64,
}

impl Header {
    /// The size of the whole file this header starts.
    pub fn file_len(&self) -> u64 {
        HEADER as u64 + self.payload_len
    }
}

/// Reads the header at the start of `bytes` (at least [`HEADER_LEN`] of them): magic and format
/// version checked, payload not looked at.
pub fn read_header(bytes: &[u8]) -> Result<Header, SnapshotError> {
    if bytes.len() < HEADER {
        return Err(SnapshotError::Truncated(bytes.len()));
    }
    if &bytes[..6] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let version = u16::from_le_bytes([bytes[6], bytes[7]]);
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(SnapshotError::Version(version));
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    Ok(Header {
        version,
        payload_len: word(8),
        checksum: word(16),
    })
}

/// One worker's counter state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterSnapshot {
    /// The windows the state was counted for (a restore checks they are the same).
    pub windows: Vec<WindowSpec>,
    /// The allowed lateness it was counted with.
    pub allowed_lateness: Span,
    /// The global watermark as of the snapshot's epoch.
    pub watermark: Millis,
    /// State per key group, ascending, only non-empty groups.
    pub key_groups: Vec<KeyGroupState>,
    /// Incremental checkpoints: the files (next to this one) holding the live panes, one
    /// [`PaneSegment`] each; the panes are then not in `key_groups`. Empty for a whole snapshot.
    pub pane_files: Vec<String>,
    /// Per window (by id): its instances ending at or before this are sealed whatever the
    /// watermark — the input had ended once (a bounded Kafka run) and they were published final
    /// then (see `WindowedCounter::sealed_until`). Empty: none (format 2 had no such field).
    pub sealed_until: Vec<Millis>,
    /// Per live instance of a window with `by` dims: the hashes of the groups announced to it
    /// (see `group::admission`), ascending; the same on every worker, so only worker 0's
    /// snapshot holds them. Empty before format 5.
    pub groups_seen: Vec<(InstanceKey, Vec<u64>)>,
}

/// A pane of a worker's counter: its pane group's width and its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PaneKey {
    /// The pane group's width.
    pub width: Span,
    /// The pane's start.
    pub start: Millis,
}

impl PaneKey {
    /// The file of this pane in `worker`'s part of an incremental checkpoint.
    pub fn file_name(&self, worker: usize) -> String {
        format!("pane-{worker:04}-{}-{}.snap", self.width.as_millis(), self.start.0)
    }
}

/// One pane's counts by key group: a file of an incremental checkpoint. A pane that has not
/// changed since the previous checkpoint keeps its file (hard-linked into the new checkpoint),
/// so a checkpoint writes only what changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneSegment {
    /// The pane.
    pub key: PaneKey,
    /// (key group, (item, count) in no particular order), ascending key groups, no empty ones.
    pub key_groups: Vec<(u32, Vec<(ItemId, u64)>)>,
}

/// Puts pane segments back into the key groups of their counter snapshot: the whole snapshot
/// that `WindowedCounter::restore` takes. Panes of a key group come out sorted by pane. Nothing
/// is dropped: a key group listed twice comes out once with both lists, so that validating the
/// result sees any duplicate pane or instance.
pub fn assemble(mut base: CounterSnapshot, segments: Vec<PaneSegment>) -> CounterSnapshot {
    let mut groups: BTreeMap<u32, KeyGroupState> = BTreeMap::new();
    for kg in base.key_groups.drain(..) {
        match groups.entry(kg.key_group) {
            Entry::Vacant(v) => {
                v.insert(kg);
            }
            Entry::Occupied(mut o) => {
                o.get_mut().panes.extend(kg.panes);
                o.get_mut().exclusions.extend(kg.exclusions);
            }
        }
    }
    for seg in segments {
        for (kg, items) in seg.key_groups {
            groups
                .entry(kg)
                .or_insert_with(|| KeyGroupState {
                    key_group: kg,
                    ..Default::default()
                })
                .panes
                .push(PaneCounts {
                    width: seg.key.width,
                    start: seg.key.start,
                    items,
                });
        }
    }
    for g in groups.values_mut() {
        g.panes.sort_by_key(|p| (p.width, p.start));
    }
    base.key_groups = groups.into_values().collect();
    base.pane_files.clear();
    base
}

/// The counter state of one key group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct KeyGroupState {
    /// The key group.
    pub key_group: u32,
    /// Live pane counts of its items.
    pub panes: Vec<PaneCounts>,
    /// Late-event exclusions of its items.
    pub exclusions: Vec<InstanceCounts>,
}

/// Counts of one pane (of the pane group of width `width`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneCounts {
    /// The pane group's width.
    pub width: Span,
    /// The pane's start.
    pub start: Millis,
    /// (item, count), in no particular order.
    pub items: Vec<(ItemId, u64)>,
}

/// Counts attached to one window instance (exclusions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceCounts {
    /// The instance.
    pub instance: InstanceKey,
    /// (item, count), sorted by item.
    pub items: Vec<(ItemId, u64)>,
}

/// The merger's state (worker 0): what was published, so revisions continue and unchanged
/// lists are not published again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MergerSnapshot {
    /// Per live instance: last revision, its state and list.
    pub instances: Vec<PublishedState>,
}

/// The last publication of one instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedState {
    /// The instance.
    pub instance: InstanceKey,
    /// Which of its lists (global lists: `""`).
    pub group: GroupKey,
    /// Its last revision.
    pub revision: u32,
    /// The state and list of that revision (`None`: nothing published yet).
    pub published: Option<(ListState, Vec<RankedItem>)>,
}

/// A source's state: where to resume each partition and its clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SourceSnapshot {
    /// Per partition.
    pub partitions: Vec<PartitionState>,
}

/// Resume point of one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// The partition.
    pub partition: PartitionId,
    /// Records consumed (the next position to read; a Kafka offset for Kafka).
    pub position: u64,
    /// Largest event time seen (`Millis::MIN`: none), also when finished. `Millis::MAX` only in
    /// checkpoints of older versions, which stored it for finished partitions: their real
    /// clock is unknown (see `dataflow/src/source/kafka/resume.rs`).
    pub max_ts: Millis,
    /// Status at the snapshot.
    pub status: PartitionStatus,
}

/// Why a snapshot cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    /// Shorter than its header or its declared length: a torn write.
    #[error("snapshot is truncated ({0} bytes)")]
    Truncated(usize),
    /// Not a snapshot at all.
    #[error("not a hotlist snapshot (bad magic)")]
    BadMagic,
    /// Written by a newer format (or not a version at all).
    #[error(
        "snapshot format version {0} is not supported (this build reads {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
    )]
    Version(u16),
    /// The payload does not match its checksum.
    #[error("snapshot checksum mismatch: corrupt")]
    Checksum,
    /// The payload does not decode.
    #[error("snapshot payload does not decode: {0}")]
    Payload(String),
    /// The snapshot was taken with other windows or lateness than the job has now.
    #[error("snapshot is for other windows, window modes or allowed lateness than this job's")]
    Incompatible,
    /// The payload decodes but its contents cannot be this job's state (says what and where).
    #[error("snapshot is invalid: {0}")]
    Invalid(String),
}

/// The payload encoding: bincode 1's classic settings (what `bincode::serialize` writes).
fn payload_format() -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding()
}

/// Encodes a snapshot into its envelope.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let payload = payload_format().serialize(value).expect("snapshot types serialize");
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// A value stored in a snapshot envelope. Every format version from [`OLDEST_FORMAT_VERSION`] to
/// [`FORMAT_VERSION`] reads: a type whose payload changed overrides [`Snapshot::from_payload`]
/// for the older versions; the others read the same payload in all of them.
pub trait Snapshot: Serialize + DeserializeOwned {
    /// Decodes `payload`, written in format `version` (checked to be a readable one).
    fn from_payload(version: u16, payload: &[u8]) -> Result<Self, SnapshotError> {
        let _ = version;
        deserialize(payload)
    }
}

impl Snapshot for SourceSnapshot {}
impl Snapshot for PaneSegment {}

/// Deserializes a whole payload, bounded by its length, nothing left over.
pub(crate) fn deserialize<T: DeserializeOwned>(payload: &[u8]) -> Result<T, SnapshotError> {
    payload_format()
        .with_limit(payload.len() as u64)
        .reject_trailing_bytes()
        .deserialize(payload)
        .map_err(|e| SnapshotError::Payload(e.to_string()))
}

/// Decodes and verifies an envelope. Reads are bounded by the payload: a length prefix claiming
/// more than is there fails (serde also caps what a sequence preallocates at 1 MiB), and bytes
/// left over after the value fail too. The contents still need `validate` against the job.
pub fn decode<T: Snapshot>(bytes: &[u8]) -> Result<T, SnapshotError> {
    let Header {
        version,
        payload_len: len,
        checksum: sum,
    } = read_header(bytes)?;
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(SnapshotError::Truncated(bytes.len()));
    }
    if xxhash_rust::xxh3::xxh3_64(payload) != sum {
        return Err(SnapshotError::Checksum);
    }
    T::from_payload(version, payload)
}

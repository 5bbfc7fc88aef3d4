//! The records that carry the features' payloads between the operators of the job and into
//! the sinks: control records (with group announcements and replay notes), per-worker lists
//! (with sketch shares) and published lists (with certificates).
//!
//! They sit above both the plain records ([`record`](crate::record)) and the feature modules
//! whose payloads they carry, so that `record` stays a leaf.

use crate::certify::Certificate;
use crate::group::{GroupKey, GroupNote};
use crate::record::{ListSource, ListState, PartitionId, PartitionStatus, RankedItem, SketchCheck};
use crate::replay::ReplayNote;
use crate::sketch::CountMinSketch;
use crate::time::Millis;
use crate::window::InstanceKey;
use serde::{Deserialize, Serialize};

/// Control records that sources broadcast to every window counter and to the merger, once per
/// epoch: they make every worker compute the same global watermark for the same epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Control {
    /// A partition's watermark and status as of the end of the epoch it travels in.
    Partition {
        /// Which partition.
        partition: PartitionId,
        /// Its watermark (max event time − max_out_of_orderness; +∞ once finished).
        watermark: Millis,
        /// Its largest event time so far (`Millis::MIN`: none), also once finished: a checkpoint
        /// keeps it, so that a Kafka partition a bounded run finished can go on with its clock.
        max_ts: Millis,
        /// Its status.
        status: PartitionStatus,
        /// Records read so far (the next position to read).
        position: u64,
    },
    /// Emit provisional lists of open windows in this epoch (every `emit_interval`).
    EmitTick,
    /// Make this epoch a checkpoint (a source is stopping: finish, checkpoint, commit).
    Checkpoint,
    /// The source's wall clock when it closed the epoch: checkpoints are due by the largest
    /// (`checkpoint.interval` after the last), decided alike on every worker from the same
    /// records — epochs are not a measure of time (a full epoch closes early).
    Clock(Millis),
    /// The groups this epoch's events count in, per instance of a window with `by` dims (see
    /// `group::admission`).
    Groups(Vec<GroupNote>),
    /// Where this epoch's events of `exact_at_seal` instances begin per partition, and the
    /// records a replay must skip (see `replay`); read by the merger only.
    Replay(Vec<ReplayNote>),
}

/// One worker's top-K list for one window instance (exact over the items it owns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalList {
    /// Which instance.
    pub instance: InstanceKey,
    /// Which group of the instance (global lists: `""`).
    pub group: GroupKey,
    /// Which worker computed it.
    pub worker: u32,
    /// Its top-K, best first.
    pub items: Vec<RankedItem>,
    /// Which counter computed it, and for the sketch counter, over how many events.
    pub source: ListSource,
    /// Sent once when an instance of an `exact_at_seal` window seals: this worker's share of
    /// the instance's count-min table (the shares add up to a table of all its events), which
    /// guides the replay (`replay.rs`).
    pub share: Option<Box<Share>>,
}

/// A worker's share of a sealing list's count-min table (see [`LocalList::share`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Share {
    /// What its sketch added (since its restore; worker 0: and the restored table).
    Table(CountMinSketch),
    /// An exact place's counts, as (item hash, events): far smaller than a table for the many
    /// small groups of a per-group window, and added into the table by the merger only when
    /// the list needs a replay (some other worker's place folded).
    Items(Vec<(u64, u64)>),
}

/// A published revision of a window instance's global top-K list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedList {
    /// Window name.
    pub window: String,
    /// Instance start (inclusive).
    pub start: Millis,
    /// Instance end (exclusive).
    pub end: Millis,
    /// Which group of the window's per-group lists (`""`: the window's global list).
    pub group: GroupKey,
    /// 1, 2, … per instance; a higher revision supersedes a lower one.
    pub revision: u32,
    /// Open, closed or final.
    pub state: ListState,
    /// The global watermark the list was computed at.
    pub watermark: Millis,
    /// Wall-clock time of publication.
    pub as_of: Millis,
    /// The list, best first: count descending, then item id ascending (bytewise).
    pub items: Vec<RankedItem>,
    /// Whether every count is exact; false for a list counted by a sketch, whose counts may be
    /// high by up to `error_bound`.
    pub exact: bool,
    /// The largest possible over-count of any count in the list: 0 when exact.
    pub error_bound: u64,
    /// For a window that runs exact and sketch counting side by side (`mode = "both"`): how the
    /// sketch's list compared with this exact one.
    pub sketch_check: Option<SketchCheck>,
    /// For a sketch window with `exact_at_seal`: the final revision a sketch-guided replay made
    /// exact, and what proves it (`exact` is then true and `error_bound` 0).
    pub certificate: Option<Certificate>,
}

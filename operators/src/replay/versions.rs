//! `replay.snap` as earlier formats wrote it. Before 6: resume points without byte offsets; they
//! read into the current types with `byte: None`, so a replay from an older checkpoint counts
//! lines to its ranges' starts, as those versions did. Before 7: one global list per job (per-
//! group windows had no replays); it reads as a job with that one list.

use super::{ListReplay, PartitionRange, ReplayJob, ReplayRanges, ReplaySnapshot};
use crate::group::GroupKey;
use crate::record::PartitionId;
use crate::sketch::CountMinSketch;
use crate::snapshot::{deserialize, Snapshot, SnapshotError};
use crate::time::Millis;
use crate::window::InstanceKey;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

impl Snapshot for ReplaySnapshot {
    fn from_payload(version: u16, payload: &[u8]) -> Result<Self, SnapshotError> {
        if version < 6 {
            deserialize::<ReplaySnapshotV5>(payload).map(ReplaySnapshot::from)
        } else if version < 7 {
            deserialize::<ReplaySnapshotV6>(payload).map(ReplaySnapshot::from)
        } else {
            deserialize(payload)
        }
    }
}

/// [`ReplaySnapshot`] in format 6.
#[derive(Serialize, Deserialize)]
pub(super) struct ReplaySnapshotV6 {
    pub ranges: ReplayRanges,
    pub pending: Vec<ReplayJobV6>,
}

/// [`ReplayJob`] in format 6: one global list.
#[derive(Serialize, Deserialize)]
pub(super) struct ReplayJobV6 {
    pub instance: InstanceKey,
    pub window: String,
    pub start: Millis,
    pub end: Millis,
    pub k: usize,
    pub revision: u32,
    pub watermark: Millis,
    pub threshold: u64,
    pub sketch: CountMinSketch,
    pub ranges: Vec<PartitionRange>,
}

impl From<ReplaySnapshotV6> for ReplaySnapshot {
    fn from(v6: ReplaySnapshotV6) -> ReplaySnapshot {
        ReplaySnapshot {
            ranges: v6.ranges,
            pending: v6.pending.into_iter().map(ReplayJob::from).collect(),
        }
    }
}

impl From<ReplayJobV6> for ReplayJob {
    fn from(j: ReplayJobV6) -> ReplayJob {
        ReplayJob {
            instance: j.instance,
            window: j.window,
            start: j.start,
            end: j.end,
            k: j.k,
            watermark: j.watermark,
            lists: vec![ListReplay {
                group: GroupKey::global(),
                revision: j.revision,
                threshold: j.threshold,
                sketch: j.sketch,
            }],
            admit_up_to: None,
            ranges: j.ranges,
        }
    }
}

/// [`ReplaySnapshot`] before format 6.
#[derive(Serialize, Deserialize)]
pub(super) struct ReplaySnapshotV5 {
    pub ranges: ReplayRangesV5,
    pub pending: Vec<ReplayJobV5>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct ReplayRangesV5 {
    pub starts: BTreeMap<InstanceKey, BTreeMap<PartitionId, (u64, Millis)>>,
    pub skips: BTreeMap<PartitionId, Vec<(u64, u32, Millis)>>,
    pub dropped: Option<(Millis, Millis)>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct ReplayJobV5 {
    pub instance: InstanceKey,
    pub window: String,
    pub start: Millis,
    pub end: Millis,
    pub k: usize,
    pub revision: u32,
    pub watermark: Millis,
    pub threshold: u64,
    pub sketch: CountMinSketch,
    pub ranges: Vec<PartitionRangeV5>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct PartitionRangeV5 {
    pub partition: PartitionId,
    pub from: u64,
    pub max_ts: Millis,
    pub to: u64,
    pub skips: Vec<(u64, u32)>,
}

impl From<ReplaySnapshotV5> for ReplaySnapshot {
    fn from(v5: ReplaySnapshotV5) -> ReplaySnapshot {
        let r = v5.ranges;
        let starts = r
            .starts
            .into_iter()
            .map(|(k, parts)| {
                let parts = parts.into_iter().map(|(p, (at, ts))| (p, (at, ts, None))).collect();
                (k, parts)
            })
            .collect();
        ReplaySnapshot {
            ranges: ReplayRanges {
                starts,
                skips: r.skips,
                dropped: r.dropped,
            },
            pending: v5.pending.into_iter().map(ReplayJob::from).collect(),
        }
    }
}

impl From<ReplayJobV5> for ReplayJob {
    fn from(j: ReplayJobV5) -> ReplayJob {
        ReplayJob::from(ReplayJobV6 {
            instance: j.instance,
            window: j.window,
            start: j.start,
            end: j.end,
            k: j.k,
            revision: j.revision,
            watermark: j.watermark,
            threshold: j.threshold,
            sketch: j.sketch,
            ranges: j
                .ranges
                .into_iter()
                .map(|r| PartitionRange {
                    partition: r.partition,
                    from: r.from,
                    max_ts: r.max_ts,
                    byte: None,
                    to: r.to,
                    skips: r.skips,
                })
                .collect(),
        })
    }
}

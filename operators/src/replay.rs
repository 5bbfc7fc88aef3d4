//! The sketch-guided replay of a sealed sketch instance (`exact_at_seal`), minus the reading:
//! where each partition's share of an instance begins and ends, and the job a sealed instance
//! hands to the replay thread (`dataflow/src/source/replay.rs` reads; the passes, within a
//! memory budget, are in `replay_budget.rs`; the proof that the result is exact in
//! `certify.rs`).
//!
//! **Ranges.** A source notes, per partition, the first epoch in which it accepted an event of
//! an instance ([`ReplayNote::Start`]: the partition's position and clock at that epoch's
//! start, exactly what a checkpoint would resume it from). The instance's share of the
//! partition ends at the partition's position in the epoch that sealed it: every event the
//! counters took for the instance lies in between, and re-reading from that resume point
//! re-derives the same watermark before every record, hence the same lateness verdicts.
//!
//! **What cannot be re-derived**: the `time.max_future` verdict of a record without a message
//! timestamp, which compares with the wall clock at read time. A source reports every such
//! rejection ([`ReplayNote::Skip`]) and the replay skips those records; if more than
//! [`MAX_SKIPS`] are outstanding, instances they may touch stay approximate (with the reason).
//!
//! **Seeking.** A file's position is a line count; re-reading a range from its first line would
//! read the whole file before it. So a file partition's resume point also carries its
//! [`ByteMark`] (the line's byte offset and a check of the bytes before it), and the replay
//! seeks there; notes without one (older checkpoints, other source kinds) count lines.

mod versions;

use crate::group::GroupKey;
use crate::record::PartitionId;
use crate::sketch::CountMinSketch;
use crate::time::{Millis, Span};
use crate::window::{InstanceKey, WindowSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most `future` rejections the merger keeps for replays (beyond: the instances they may
/// touch are not replayed).
pub const MAX_SKIPS: usize = 100_000;

/// Where a file partition's next line starts: its byte offset, and [`ByteMark::check`] of the
/// bytes before it, so a replay can seek there and tell a changed file from the one read live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteMark {
    /// Bytes before the line (the byte order mark included).
    pub offset: u64,
    /// XXH3-64 of the (up to [`MARK_CHECK_BYTES`]) bytes that end at `offset`.
    pub check: u64,
}

/// How many bytes before a [`ByteMark`]'s offset its check covers.
pub const MARK_CHECK_BYTES: u64 = 4096;

impl ByteMark {
    /// The mark of `offset`, given the bytes ending there (the last [`MARK_CHECK_BYTES`] of
    /// them count).
    pub fn of(offset: u64, before: &[u8]) -> ByteMark {
        let keep = before.len().min(MARK_CHECK_BYTES as usize);
        ByteMark {
            offset,
            check: xxhash_rust::xxh3::xxh3_64(&before[before.len() - keep..]),
        }
    }
}

/// What a source tells the merger about replay ranges, with the control records of an epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplayNote {
    /// The partition accepted its first event of the instance in this epoch, which began at
    /// `position` with the partition clock's largest event time `max_ts`.
    Start {
        /// The instance (of an `exact_at_seal` window).
        instance: InstanceKey,
        /// The partition.
        partition: PartitionId,
        /// The partition's position at the epoch's start (records read; Kafka: next offset).
        position: u64,
        /// Its clock's largest event time then (`Millis::MIN`: none yet).
        max_ts: Millis,
        /// Files: where that position's line starts (`None`: count lines to it).
        byte: Option<ByteMark>,
    },
    /// A record rejected as `future` against the wall clock (the replay cannot re-judge it).
    Skip {
        /// The partition.
        partition: PartitionId,
        /// The record's position (Kafka: its message's offset).
        position: u64,
        /// Its line in the message (Kafka), else 0.
        line: u32,
        /// Its event time.
        ts: Millis,
    },
}

/// One partition's share of an instance: re-read from `from` (clock at `max_ts`) until the
/// position reaches `to`, skipping `skips`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRange {
    /// The partition.
    pub partition: PartitionId,
    /// Where reading starts (a resume position).
    pub from: u64,
    /// The partition clock's largest event time at `from`.
    pub max_ts: Millis,
    /// Files: where the line after `from` starts (`None`: count lines to it).
    pub byte: Option<ByteMark>,
    /// Where reading stops: the partition's position in the epoch that sealed the instance.
    pub to: u64,
    /// Records in the range the source rejected as `future` against the wall clock:
    /// (position, line), sorted.
    pub skips: Vec<(u64, u32)>,
}

/// Where a sealed instance's events lie in the input: every partition's range, recorded for
/// every window when the instance seals and committed with its final lists, so `hotlist explain`
/// and `hotlist verify` can read the instance again (as an `exact_at_seal` replay does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedRanges {
    /// The window's name.
    pub window: String,
    /// Instance start.
    pub start: Millis,
    /// Instance end.
    pub end: Millis,
    /// Every partition's share of the instance, in partition order (`Err`: why the instance
    /// cannot be read again, e.g. too many wall-clock `future` rejections were outstanding).
    pub ranges: Result<Vec<PartitionRange>, String>,
}

impl SealedRanges {
    /// Checks what a store read back: the instance runs forwards, each range too, partitions
    /// ascending and each once.
    pub fn validate(&self) -> Result<(), String> {
        if self.end <= self.start {
            return Err(format!(
                "instance {}..{} ends before it starts",
                self.start.0, self.end.0
            ));
        }
        let Ok(ranges) = &self.ranges else { return Ok(()) };
        if ranges.windows(2).any(|w| w[0].partition >= w[1].partition) {
            return Err("partitions not ascending".into());
        }
        if let Some(r) = ranges.iter().find(|r| r.from > r.to) {
            return Err(format!("partition {}: the range ends before it starts", r.partition.0));
        }
        Ok(())
    }
}

/// Everything the replay of one sealed instance needs; kept in checkpoints until its exact
/// revisions are published.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayJob {
    /// The instance.
    pub instance: InstanceKey,
    /// Its window's name, start and end, and k.
    pub window: String,
    /// Instance start.
    pub start: Millis,
    /// Instance end.
    pub end: Millis,
    /// The list length.
    pub k: usize,
    /// The global watermark the instance sealed at.
    pub watermark: Millis,
    /// Its approximate final lists: a global window's one, or a per-group window's groups'
    /// (`(other)` included), in group order.
    pub lists: Vec<ListReplay>,
    /// Per-group windows: the groups with a list of their own are those whose key hash is at
    /// most this; the others count in `(other)` (`None`: every group has its own list).
    pub admit_up_to: Option<u64>,
    /// Every partition's share of the instance.
    pub ranges: Vec<PartitionRange>,
}

/// One approximate final list of a [`ReplayJob`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListReplay {
    /// Its group (a global list's: `""`).
    pub group: GroupKey,
    /// The revision the exact list is published as (the approximate final one's + 1).
    pub revision: u32,
    /// The first pass's threshold (`certify::first_threshold`).
    pub threshold: u64,
    /// The sum of every worker's share of the group's count-min table: never below any of its
    /// items' true counts.
    pub sketch: CountMinSketch,
}

impl ReplayJob {
    /// The list of `group` to replay, if it is one of the job's.
    pub fn list(&self, group: &GroupKey) -> Option<&ListReplay> {
        self.lists.iter().find(|l| &l.group == group)
    }
}

/// What a checkpoint keeps of the replays (`replay.snap`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplaySnapshot {
    /// The sources' notes of instances not sealed yet.
    pub ranges: ReplayRanges,
    /// Sealed instances whose exact revision is not published yet.
    pub pending: Vec<ReplayJob>,
}

impl ReplaySnapshot {
    /// Checks it against the job's windows: every pending job names one of them (with its k and
    /// instance bounds), its sketch fits its shape, its ranges run forwards.
    pub fn validate(&self, windows: &[WindowSpec]) -> Result<(), String> {
        for j in &self.pending {
            let at = format!("pending replay of {:?}@{}", j.window, j.start.0);
            let w = windows
                .get(j.instance.window.0 as usize)
                .filter(|w| w.name == j.window)
                .ok_or_else(|| format!("{at}: the job has no such window"))?;
            if j.k != w.k || j.start != j.instance.start || w.end_of(j.start) != j.end {
                return Err(format!("{at}: k or bounds differ from the window's"));
            }
            if j.lists.iter().any(|l| !l.sketch.is_consistent()) {
                return Err(format!("{at}: a sketch does not fit its shape"));
            }
            if j.lists.is_empty() {
                return Err(format!("{at}: no list to replay"));
            }
            if j.ranges.iter().any(|r| r.from > r.to) {
                return Err(format!("{at}: a range ends before it starts"));
            }
        }
        Ok(())
    }
}

/// Whether an event at `ts`, read when its partition's watermark was `wm_before`, counts in
/// the instance starting at `start` of window `w` (the counters' rule: in the instance and not
/// late for it).
pub fn counts_in(w: &WindowSpec, start: Millis, lateness: Span, ts: Millis, wm_before: Millis) -> bool {
    let end = w.end_of(start);
    ts >= start && ts < end && end > wm_before.minus(lateness)
}

/// A partition's resume point: position, the clock's largest event time, and (files) where
/// the position's line starts.
type Resume = (u64, Millis, Option<ByteMark>);

/// Where the merger keeps the sources' notes until instances seal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayRanges {
    /// Per instance and partition: the resume point of its first epoch (the earliest noted).
    starts: BTreeMap<InstanceKey, BTreeMap<PartitionId, Resume>>,
    /// Per partition: wall-clock `future` rejections (position, line, ts).
    skips: BTreeMap<PartitionId, Vec<(u64, u32, Millis)>>,
    /// Event times of rejections dropped past [`MAX_SKIPS`] (smallest, largest).
    dropped: Option<(Millis, Millis)>,
}

impl ReplayRanges {
    /// Takes a source's note.
    pub fn note(&mut self, n: ReplayNote) {
        match n {
            ReplayNote::Start {
                instance,
                partition,
                position,
                max_ts,
                byte,
            } => {
                let at = self
                    .starts
                    .entry(instance)
                    .or_default()
                    .entry(partition)
                    .or_insert((position, max_ts, byte));
                if position < at.0 {
                    *at = (position, max_ts, byte);
                }
            }
            ReplayNote::Skip {
                partition,
                position,
                line,
                ts,
            } => {
                if self.skips.values().map(Vec::len).sum::<usize>() >= MAX_SKIPS {
                    let d = self.dropped.get_or_insert((ts, ts));
                    *d = (d.0.min(ts), d.1.max(ts));
                    return;
                }
                self.skips.entry(partition).or_default().push((position, line, ts));
            }
        }
    }

    /// The ranges of a sealed instance, given every partition's position in the sealing epoch;
    /// forgets its starts. `Err` says why it cannot be replayed.
    pub fn ranges(
        &mut self,
        instance: InstanceKey,
        (start, end): (Millis, Millis),
        positions: &BTreeMap<PartitionId, u64>,
    ) -> Result<Vec<PartitionRange>, String> {
        let starts = self.starts.remove(&instance).unwrap_or_default();
        if let Some((lo, hi)) = self.dropped {
            if lo < end && hi >= start {
                return Err(format!(
                    "more than {MAX_SKIPS} records rejected as future against the wall clock are outstanding"
                ));
            }
        }
        let mut out = Vec::with_capacity(starts.len());
        for (partition, (from, max_ts, byte)) in starts {
            let to = positions
                .get(&partition)
                .copied()
                .ok_or_else(|| format!("partition {} reported no position in the sealing epoch", partition.0))?;
            let mut skips: Vec<(u64, u32)> = self
                .skips
                .get(&partition)
                .into_iter()
                .flatten()
                .filter(|(p, _, ts)| *p >= from && *p <= to && *ts >= start && *ts < end)
                .map(|(p, l, _)| (*p, *l))
                .collect();
            skips.sort_unstable();
            out.push(PartitionRange {
                partition,
                from,
                max_ts,
                byte,
                to: to.max(from),
                skips,
            });
        }
        Ok(out)
    }

    /// Forgets what no live instance can use: the wall-clock rejections before `before` (the
    /// earliest event time an instance that is not sealed yet can hold), and the notes of
    /// instances starting before it — sealed, their ranges taken already; a note can still
    /// come for one (a partition excluded as idle while it sealed, whose events for it are then
    /// `sealed` drops), and must not stay for good.
    pub fn forget_before(&mut self, before: Millis) {
        self.starts.retain(|k, _| k.start >= before);
        for v in self.skips.values_mut() {
            v.retain(|(_, _, ts)| *ts >= before);
        }
        self.skips.retain(|_, v| !v.is_empty());
        if self.dropped.is_some_and(|(_, hi)| hi < before) {
            self.dropped = None;
        }
    }

    /// Instances with noted starts.
    pub fn instances(&self) -> usize {
        self.starts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowId;

    fn key(start: i64) -> InstanceKey {
        InstanceKey {
            window: WindowId(0),
            start: Millis(start),
        }
    }

    #[test]
    fn the_earliest_start_wins_and_skips_are_kept_per_range() {
        let mut r = ReplayRanges::default();
        let p = PartitionId(0);
        for (position, max_ts) in [(50, 9), (20, 5), (70, 11)] {
            r.note(ReplayNote::Start {
                instance: key(0),
                partition: p,
                position,
                max_ts: Millis(max_ts),
                byte: Some(ByteMark::of(position * 10, b"x\n")),
            });
        }
        for (position, ts) in [(10, 5), (30, 5), (40, 500), (90, 6)] {
            r.note(ReplayNote::Skip {
                partition: p,
                position,
                line: 0,
                ts: Millis(ts),
            });
        }
        let positions = BTreeMap::from([(p, 80u64)]);
        let ranges = r
            .ranges(key(0), (Millis(0), Millis(100)), &positions)
            .expect("replayable");
        assert_eq!(
            ranges,
            vec![PartitionRange {
                partition: p,
                from: 20,
                max_ts: Millis(5),
                byte: Some(ByteMark::of(200, b"x\n")),
                to: 80,
                skips: vec![(30, 0)],
            }]
        );
        assert_eq!(r.instances(), 0, "a sealed instance's starts are forgotten");
        // a note that comes after its instance sealed (a `sealed` drop's) is forgotten too
        for start in [0, 100] {
            r.note(ReplayNote::Start {
                instance: key(start),
                partition: PartitionId(1),
                position: 3,
                max_ts: Millis(90),
                byte: None,
            });
        }
        r.forget_before(Millis(100));
        assert_eq!(
            r.instances(),
            1,
            "only the instance at 100, which may be live, keeps its note"
        );
        assert_eq!(
            r.skips.values().map(Vec::len).sum::<usize>(),
            1,
            "only the ts 500 rejection stays"
        );
    }

    #[test]
    fn a_partition_without_a_position_is_not_replayed() {
        let mut r = ReplayRanges::default();
        r.note(ReplayNote::Start {
            instance: key(0),
            partition: PartitionId(3),
            position: 0,
            max_ts: Millis::MIN,
            byte: None,
        });
        let err = r
            .ranges(key(0), (Millis(0), Millis(10)), &BTreeMap::new())
            .expect_err("no position");
        assert!(err.contains("partition 3"), "{err}");
    }

    #[test]
    fn dropped_skips_make_the_instances_they_touch_unreplayable() {
        let mut r = ReplayRanges::default();
        for i in 0..=MAX_SKIPS as u64 {
            r.note(ReplayNote::Skip {
                partition: PartitionId(0),
                position: i,
                line: 0,
                ts: Millis(1_000),
            });
        }
        let none = BTreeMap::new();
        assert!(
            r.ranges(key(0), (Millis(0), Millis(100)), &none).is_ok(),
            "ts 1000 is not in [0, 100)"
        );
        assert!(r.ranges(key(1000), (Millis(1000), Millis(1100)), &none).is_err());
    }

    #[test]
    fn counts_in_follows_the_lateness_rule() {
        let w = WindowSpec::tumbling("1m", Span::from_millis(60_000), 3);
        let l = Span::from_millis(1_000);
        assert!(counts_in(&w, Millis(0), l, Millis(59_999), Millis(0)));
        assert!(!counts_in(&w, Millis(0), l, Millis(60_000), Millis(0)), "next instance");
        assert!(
            counts_in(&w, Millis(0), l, Millis(5), Millis(60_999)),
            "within the allowed lateness"
        );
        assert!(!counts_in(&w, Millis(0), l, Millis(5), Millis(61_000)), "late");
    }

    /// A snapshot with pending ranges and noted starts, each with and without a byte mark.
    fn snapshot_with_marks() -> ReplaySnapshot {
        let mut ranges = ReplayRanges::default();
        for (p, byte) in [(0, Some(ByteMark::of(4_242, b"{\"item_id\":\"a\"}\n"))), (1, None)] {
            ranges.note(ReplayNote::Start {
                instance: key(100),
                partition: PartitionId(p),
                position: 17,
                max_ts: Millis(90),
                byte,
            });
        }
        let sketch = CountMinSketch::new(crate::sketch::CmsShape::from_error(0.1, 0.1).expect("shape"));
        let job = ReplayJob {
            instance: key(0),
            window: "w".into(),
            start: Millis(0),
            end: Millis(100),
            k: 3,
            watermark: Millis(150),
            lists: vec![ListReplay {
                group: GroupKey::global(),
                revision: 2,
                threshold: 4,
                sketch,
            }],
            admit_up_to: None,
            ranges: ranges
                .clone()
                .ranges(
                    key(100),
                    (Millis(100), Millis(200)),
                    &BTreeMap::from([(PartitionId(0), 30), (PartitionId(1), 40)]),
                )
                .expect("ranges"),
        };
        ReplaySnapshot {
            ranges,
            pending: vec![job],
        }
    }

    /// Format 6 keeps the byte marks; a check of the bytes before the offset changes with them.
    #[test]
    fn byte_marks_round_trip_in_replay_snap() {
        use crate::snapshot::{decode, encode};
        let snap = snapshot_with_marks();
        let marks: Vec<Option<ByteMark>> = snap.pending[0].ranges.iter().map(|r| r.byte).collect();
        assert_eq!(marks, vec![Some(ByteMark::of(4_242, b"{\"item_id\":\"a\"}\n")), None]);
        assert_eq!(decode::<ReplaySnapshot>(&encode(&snap)), Ok(snap));
        // only the last MARK_CHECK_BYTES count
        let long = [vec![b'y'; 10_000], b"tail\n".to_vec()].concat();
        assert_eq!(ByteMark::of(9, &long), ByteMark::of(9, &long[long.len() - 4096..]));
        assert_ne!(ByteMark::of(9, &long), ByteMark::of(9, &long[1..long.len() - 1]));
    }

    /// `replay.snap` of format 5 (no byte marks) still reads: every resume point without one,
    /// so the replay counts lines as that version did.
    #[test]
    fn format_5_replay_snap_reads_without_byte_marks() {
        use crate::snapshot::{decode, encode};
        use versions::*;
        let snap = snapshot_with_marks();
        let strip = |r: &PartitionRange| PartitionRangeV5 {
            partition: r.partition,
            from: r.from,
            max_ts: r.max_ts,
            to: r.to,
            skips: r.skips.clone(),
        };
        let j = &snap.pending[0];
        let v5 = ReplaySnapshotV5 {
            ranges: ReplayRangesV5 {
                starts: snap
                    .ranges
                    .starts
                    .iter()
                    .map(|(k, ps)| (*k, ps.iter().map(|(p, (at, ts, _))| (*p, (*at, *ts))).collect()))
                    .collect(),
                skips: snap.ranges.skips.clone(),
                dropped: snap.ranges.dropped,
            },
            pending: vec![ReplayJobV5 {
                instance: j.instance,
                window: j.window.clone(),
                start: j.start,
                end: j.end,
                k: j.k,
                revision: j.lists[0].revision,
                watermark: j.watermark,
                threshold: j.lists[0].threshold,
                sketch: j.lists[0].sketch.clone(),
                ranges: j.ranges.iter().map(strip).collect(),
            }],
        };
        let mut bytes = encode(&v5);
        bytes[6..8].copy_from_slice(&5u16.to_le_bytes());
        let read = decode::<ReplaySnapshot>(&bytes).expect("format 5 reads");
        let mut want = snap;
        for r in &mut want.pending[0].ranges {
            r.byte = None;
        }
        for ps in want.ranges.starts.values_mut() {
            for at in ps.values_mut() {
                at.2 = None;
            }
        }
        assert_eq!(read, want);
        // a format 5 payload is not a format 6 one
        assert!(decode::<ReplaySnapshot>(&encode(&v5)).is_err());
    }

    /// A format 6 `replay.snap` (one global list per job) reads as jobs with that one list.
    #[test]
    fn format_6_replay_snap_reads_as_one_list() {
        use crate::snapshot::{decode, encode};
        use versions::*;
        let snap = snapshot_with_marks();
        let j = &snap.pending[0];
        let v6 = ReplaySnapshotV6 {
            ranges: snap.ranges.clone(),
            pending: vec![ReplayJobV6 {
                instance: j.instance,
                window: j.window.clone(),
                start: j.start,
                end: j.end,
                k: j.k,
                revision: j.lists[0].revision,
                watermark: j.watermark,
                threshold: j.lists[0].threshold,
                sketch: j.lists[0].sketch.clone(),
                ranges: j.ranges.clone(),
            }],
        };
        let mut bytes = encode(&v6);
        bytes[6..8].copy_from_slice(&6u16.to_le_bytes());
        assert_eq!(decode::<ReplaySnapshot>(&bytes), Ok(snap));
        assert!(
            decode::<ReplaySnapshot>(&encode(&v6)).is_err(),
            "not a format 7 payload"
        );
    }
}

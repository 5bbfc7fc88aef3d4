//! Test fixtures the stores' tests share (the conformance suite and the backend-specific tests):
//! lists, batches, dead letters, sealed instances' ranges and windows.

use crate::types::{CommitBatch, SourcedDeadLetter};
use hotlist_operators::certify::Certificate;
use hotlist_operators::hot_keys::{HotKey, HotState, HotWindow};
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{DeadLetter, DeadReason, ListState, PartitionId, RankedItem, SketchCheck, TrendFacts};
use hotlist_operators::replay::{ByteMark, PartitionRange, SealedRanges};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;

/// The URL of the test server in the environment variable `var`, or `default` (a local one).
pub(crate) fn server_url(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

/// The job the fixtures commit for.
pub(crate) const JOB: &str = "hotlist";

/// `n` ranked items, the `i`-th (0-based) with id `id(i)` and count `count(i)`.
pub(crate) fn items(n: usize, id: impl Fn(usize) -> String, count: impl Fn(usize) -> u64) -> Vec<RankedItem> {
    (0..n)
        .map(|i| RankedItem {
            item_id: id(i).into(),
            count: count(i),
            trend: None,
        })
        .collect()
}

/// Revision `revision` of the `1m` instance at `start` holding `items`: final from revision 3
/// on, computed at watermark `start + 1`, published at 1_700_000_000_000.
pub(crate) fn list_with(start: i64, revision: u32, items: Vec<RankedItem>) -> PublishedList {
    PublishedList {
        group: Default::default(),
        window: "1m".into(),
        start: Millis(start),
        end: Millis(start + 60_000),
        revision,
        state: if revision >= 3 {
            ListState::Final
        } else {
            ListState::Open
        },
        watermark: Millis(start + 1),
        as_of: Millis(1_700_000_000_000),
        items,
        exact: true,
        error_bound: 0,
        sketch_check: None,
        certificate: None,
    }
}

/// A trend list (baseline 3) of revision `revision` of the instance at `start`: three items in
/// the trend order, one new, one rising, one barely above its usual level.
pub(crate) fn trending(start: i64, revision: u32) -> PublishedList {
    let item = |id: &str, count, history: [u64; 3]| RankedItem {
        item_id: id.into(),
        count,
        trend: Some(TrendFacts {
            history: history.to_vec(),
        }),
    };
    let mut items = vec![
        item("steady", 10, [9, 9, 9]),
        item("new", 9, [0, 0, 0]),
        item("rising", 20, [2, 3, 1]),
    ];
    items.sort_by(hotlist_operators::topk::ranked_cmp);
    list_with(start, revision, items)
}

/// An open, empty revision `revision` of window `window`'s instance at `start` (10 ms long):
/// what the batch checks and the "highest revision wins" rule look at.
pub(crate) fn empty_list(window: &str, start: i64, revision: u32) -> PublishedList {
    PublishedList {
        group: Default::default(),
        window: window.into(),
        start: Millis(start),
        end: Millis(start + 10),
        revision,
        state: ListState::Open,
        watermark: Millis(0),
        as_of: Millis(0),
        items: vec![],
        exact: true,
        error_bound: 0,
        sketch_check: None,
        certificate: None,
    }
}

/// Revision `revision` of the `1m` instance at `start`, with `n` items whose ids and counts
/// name the revision, so a reader can tell rows of different revisions apart: the `i`-th item
/// (0-based) is `r{revision}-item{i}` with count `revision * 1000 + (n - i)` (strictly falling,
/// so the ranking is unambiguous).
pub(crate) fn list(start: i64, revision: u32, n: usize) -> PublishedList {
    let count = |i| u64::from(revision) * 1000 + (n - i) as u64;
    list_with(start, revision, items(n, |i| format!("r{revision}-item{i}"), count))
}

/// `l` counted by a sketch: approximate, with the error bound `error_bound` and `check`.
pub(crate) fn approximate(l: PublishedList, error_bound: u64, check: Option<SketchCheck>) -> PublishedList {
    PublishedList {
        exact: false,
        error_bound,
        sketch_check: check,
        certificate: None,
        ..l
    }
}

/// `l` (final: revision 3 or later) as a replay certified it: exact, with a certificate of a
/// pass from `threshold` that counted 17 items, in `passes` passes.
pub(crate) fn certified(l: PublishedList, threshold: u64, passes: u32) -> PublishedList {
    PublishedList {
        exact: true,
        error_bound: 0,
        certificate: Some(Certificate {
            threshold,
            counted: 17,
            passes,
        }),
        ..l
    }
}

/// A sketch check that found `found` of `of` items, over-counting by at most 5 and by 9 in all.
pub(crate) fn sketch_check(found: u32, of: u32) -> SketchCheck {
    SketchCheck {
        found,
        of,
        max_overcount: 5,
        total_overcount: 9,
    }
}

/// A batch of `lists` for [`JOB`] at `epoch`, with watermark `epoch * 1000` and no dead letters.
pub(crate) fn batch(epoch: u64, lists: Vec<PublishedList>) -> CommitBatch {
    CommitBatch {
        job: JOB.into(),
        epoch,
        watermark: Millis(epoch as i64 * 1000),
        lists,
        dead_letters: vec![],
        hot_keys: vec![],
        ranges: vec![],
    }
}

/// The end of `window`'s instance at `start`: `5m` is 300 s long, every other window 60 s (the
/// fixtures' [`windows`]).
fn instance_end(window: &str, start: i64) -> Millis {
    Millis(start + if window == "5m" { 300_000 } else { 60_000 })
}

/// The ranges of `window`'s instance at `start`, each field at an edge: a file partition
/// (byte mark with a full 64-bit check, two skipped `future` records, a clock with no event
/// yet) and a Kafka-like one (no byte mark, no skips, offsets past 2^60), the start in each
/// partition's positions so instances differ.
pub(crate) fn sealed(window: &str, start: i64) -> SealedRanges {
    let shift = (start / 1000).unsigned_abs();
    SealedRanges {
        window: window.into(),
        start: Millis(start),
        end: instance_end(window, start),
        ranges: Ok(vec![
            PartitionRange {
                partition: PartitionId(0),
                from: 120 + shift,
                max_ts: Millis::MIN,
                byte: Some(ByteMark {
                    offset: 4096,
                    check: 0xdead_beef_cafe_f00f,
                }),
                to: 180 + shift,
                skips: vec![(130 + shift, 0), (131 + shift, 2)],
            },
            PartitionRange {
                partition: PartitionId(3),
                from: (1 << 60) + shift,
                max_ts: Millis(1_700_000_000_000),
                byte: None,
                to: (1 << 60) + 5 + shift,
                skips: Vec::new(),
            },
        ]),
    }
}

/// `window`'s instance at `start`, which cannot be read again for `reason`.
pub(crate) fn unreadable(window: &str, start: i64, reason: &str) -> SealedRanges {
    SealedRanges {
        window: window.into(),
        start: Millis(start),
        end: instance_end(window, start),
        ranges: Err(reason.into()),
    }
}

/// A closed 10 s hot-key window starting at `start` (ms) with `keys` as (id, rate, state).
pub(crate) fn hot_window(start: i64, keys: &[(&str, f64, HotState)]) -> HotWindow {
    HotWindow {
        start: Millis(start),
        end: Millis(start + 10_000),
        watermark: Millis(start + 75_000),
        as_of: Millis(1_700_000_000_000),
        keys: keys
            .iter()
            .map(|(id, rate, state)| HotKey {
                item_id: (*id).into(),
                rate: *rate,
                state: *state,
            })
            .collect(),
    }
}

/// A dead letter from partition 3 of `file:events/a.jsonl` at `pos`, its detail naming `pos`.
pub(crate) fn letter(pos: u64, reason: DeadReason, raw: &[u8]) -> SourcedDeadLetter {
    SourcedDeadLetter {
        source: "file:events/a.jsonl".into(),
        letter: DeadLetter {
            partition: PartitionId(3),
            position: pos,
            raw: raw.to_vec(),
            reason,
            detail: format!("detail {pos}"),
        },
        count: 1,
        last_position: None,
    }
}

/// A summary of `count` dead letters of `reason` from partition 3 of `file:events/a.jsonl`,
/// positions `first..=last`.
pub(crate) fn summary(first: u64, last: u64, count: u64, reason: DeadReason) -> SourcedDeadLetter {
    let mut d = letter(first, reason, b"");
    d.letter.detail = "summary".into();
    SourcedDeadLetter {
        count,
        last_position: Some(last),
        ..d
    }
}

/// A bad ("not json") dead letter from partition 0 of `file:a.jsonl` at `pos`.
pub(crate) fn not_json(pos: u64, raw: &[u8]) -> SourcedDeadLetter {
    SourcedDeadLetter {
        source: "file:a.jsonl".into(),
        letter: DeadLetter {
            partition: PartitionId(0),
            position: pos,
            raw: raw.to_vec(),
            reason: DeadReason::Bad,
            detail: "not json".into(),
        },
        count: 1,
        last_position: None,
    }
}

/// A tumbling `5m` window (K=10) and a `1m` window sliding by 30s (K=3).
pub(crate) fn windows() -> Vec<WindowSpec> {
    let m = Span::from_millis;
    vec![
        WindowSpec::tumbling("5m", m(300_000), 10),
        WindowSpec {
            rank: Default::default(),
            key: Default::default(),
            name: "1m".into(),
            size: m(60_000),
            slide: m(30_000),
            k: 3,
        },
    ]
}

//! Test fixtures the stores' test modules share: lists, batches, dead letters, windows, and the
//! concurrent-reader race and throughput runs every store is put through.

use crate::store::SinkStore;
use crate::types::{CommitBatch, SourcedDeadLetter};
use hotlist_operators::record::{DeadLetter, DeadReason, ListState, PartitionId, PublishedList, RankedItem};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

/// The job the fixtures commit for.
pub(crate) const JOB: &str = "hotlist";

/// `n` ranked items, the `i`-th (0-based) with id `id(i)` and count `count(i)`.
pub(crate) fn items(n: usize, id: impl Fn(usize) -> String, count: impl Fn(usize) -> u64) -> Vec<RankedItem> {
    (0..n)
        .map(|i| RankedItem {
            item_id: id(i).into(),
            count: count(i),
        })
        .collect()
}

/// Revision `revision` of the `1m` instance at `start` holding `items`: final from revision 3
/// on, computed at watermark `start + 1`, published at 1_700_000_000_000.
pub(crate) fn list_with(start: i64, revision: u32, items: Vec<RankedItem>) -> PublishedList {
    PublishedList {
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
    }
}

/// Revision `revision` of the `1m` instance at `start`, with `n` items whose ids name the
/// revision (so a reader can tell rows of different revisions apart).
pub(crate) fn list(start: i64, revision: u32, n: usize) -> PublishedList {
    list_with(
        start,
        revision,
        items(n, |i| format!("r{revision}-item{i}"), |i| (n - i) as u64 * 10),
    )
}

/// A batch of `lists` for [`JOB`] at `epoch`, with watermark `epoch * 1000` and no dead letters.
pub(crate) fn batch(epoch: u64, lists: Vec<PublishedList>) -> CommitBatch {
    CommitBatch {
        job: JOB.into(),
        epoch,
        watermark: Millis(epoch as i64 * 1000),
        lists,
        dead_letters: vec![],
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
    }
}

/// A tumbling `5m` window (K=10) and a `1m` window sliding by 30s (K=3).
pub(crate) fn windows() -> Vec<WindowSpec> {
    let m = Span::from_millis;
    vec![
        WindowSpec::tumbling("5m", m(300_000), 10),
        WindowSpec {
            name: "1m".into(),
            size: m(60_000),
            slide: m(30_000),
            k: 3,
        },
    ]
}

/// How many items revision `revision` has in the concurrent-reader races: 120 and 7 in turn,
/// so a read mixing two revisions shows in its length.
pub(crate) fn rows_for(revision: u32) -> usize {
    match revision % 2 {
        0 => 7,
        _ => 120,
    }
}

/// Races a writer against a reader on the `1m` instance at 0: one thread commits
/// `list(0, r, rows_for(r))` through `writer` as epoch `r`, for revisions `r` from 2 to
/// `revisions` in order, while another calls `read(last)` over and over, until a read that
/// started after the last commit. `read` gets what the previous read returned (0 at first) and
/// returns the revision it saw. Returns how many reads there were and what the last returned.
pub(crate) fn race_commits_and_reads(
    revisions: u32,
    mut writer: impl SinkStore,
    list: impl Fn(i64, u32, usize) -> PublishedList + Send,
    mut read: impl FnMut(u32) -> u32 + Send,
) -> (u32, u32) {
    let done = AtomicBool::new(false);
    let start = Barrier::new(2);
    let (done, start) = (&done, &start);
    std::thread::scope(|s| {
        s.spawn(move || {
            start.wait();
            for revision in 2..=revisions {
                let l = list(0, revision, rows_for(revision));
                assert!(writer.commit(&batch(u64::from(revision), vec![l])).unwrap());
            }
            done.store(true, Ordering::Release);
        });
        let r = s.spawn(move || {
            start.wait();
            let (mut reads, mut last) = (0u32, 0u32);
            loop {
                // Read `done` first: a read that starts after it is set sees the last commit.
                let finished = done.load(Ordering::Acquire);
                (reads, last) = (reads + 1, read(last));
                if finished {
                    return (reads, last);
                }
            }
        });
        r.join().unwrap()
    })
}

/// Commits 20 epochs of 200 lists of K=100, then 20 of 20 lists of K=10,000, and prints the
/// lists and rows per second of each (for the `throughput` benchmarks).
pub(crate) fn measure_throughput(store: &mut dyn SinkStore) {
    for (lists, k) in [(200usize, 100usize), (20, 10_000)] {
        let t = std::time::Instant::now();
        let epochs = 20u64;
        for e in 1..=epochs {
            let b = batch(
                e + store.committed_epoch(JOB).unwrap().unwrap_or(0),
                (0..lists).map(|i| list(i as i64 * 60_000, e as u32, k)).collect(),
            );
            assert!(store.commit(&b).unwrap());
        }
        let secs = t.elapsed().as_secs_f64();
        let rows = epochs as f64 * (lists * k) as f64;
        eprintln!(
            "{lists} lists x K={k}: {:.0} lists/s, {:.0} rows/s",
            epochs as f64 * lists as f64 / secs,
            rows / secs
        );
    }
}

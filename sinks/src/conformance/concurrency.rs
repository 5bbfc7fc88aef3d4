//! A reader racing a writer sees whole revisions only; and the throughput benchmark.

use super::subject::Subject;
use crate::store::SinkStore;
use crate::test_fixtures::{batch, list, JOB};
use crate::types::StoredList;
use hotlist_operators::time::Millis;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

/// How many items revision `revision` has in the concurrent-reader race: 120 and 7 in turn,
/// so a read mixing two revisions shows in its length.
fn rows_for(revision: u32) -> usize {
    match revision % 2 {
        0 => 7,
        _ => 120,
    }
}

/// A reader racing a writer sees whole revisions only: never a mix of two, never going
/// backwards, and in the end the last one.
pub(crate) fn concurrent_reader_never_sees_a_mix_of_revisions(s: Subject) {
    const REVISIONS: u32 = 200;
    let mut w = (s.writer)();
    assert!(w.commit(&batch(1, vec![list(0, 1, rows_for(1))])).unwrap());
    let mut r = (s.reader)();
    let (reads, last) = race_commits_and_reads(REVISIONS, w, move |last| {
        let l = r.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert!(l.revision >= last, "revisions went backwards");
        assert_eq!(l.items.len(), rows_for(l.revision));
        let prefix = format!("r{}-", l.revision);
        for item in &l.items {
            assert!(item.item_id.starts_with(&prefix), "{item:?}");
            assert_eq!(item.count / 1000, u64::from(l.revision), "{item:?}");
        }
        assert_eq!(l, StoredList::from(list(0, l.revision, rows_for(l.revision))));
        let latest = r.latest(JOB, "1m").unwrap().unwrap();
        assert!(latest.revision >= l.revision);
        assert_eq!(latest.items.len(), rows_for(latest.revision));
        latest.revision
    });
    assert_eq!(last, REVISIONS);
    assert!(reads >= 1);
    eprintln!("{reads} consistent reads during {REVISIONS} commits");
    if let Some(rows) = &s.stored_rows {
        assert_eq!(rows(0).len(), rows_for(REVISIONS));
    }
}

/// Races a writer against a reader on the `1m` instance at 0: one thread commits
/// `list(0, r, rows_for(r))` through `writer` as epoch `r`, for revisions `r` from 2 to
/// `revisions` in order, while another calls `read(last)` over and over, until a read that
/// started after the last commit. `read` gets what the previous read returned (0 at first) and
/// returns the revision it saw. Returns how many reads there were and what the last returned.
fn race_commits_and_reads(
    revisions: u32,
    mut writer: Box<dyn SinkStore>,
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
/// lists and rows per second of each (a benchmark, not a check).
pub(crate) fn throughput(s: Subject) {
    let mut store = (s.writer)();
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

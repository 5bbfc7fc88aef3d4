//! Committing: the highest revision wins, epochs at or below the committed one are skipped,
//! dead letters round-trip, `prepare` records the windows, invalid input changes nothing.

use super::subject::Subject;
use crate::error::SinkError;
use crate::test_fixtures::{batch, letter, list, windows, JOB};
use crate::types::{StoredList, StoredWindow};
use hotlist_operators::record::{DeadReason, ListState};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;

/// Within a batch the highest revision of an instance wins, and its rows replace the
/// instance's previous rows entirely (no stale ranks), even when there are fewer or none.
pub(crate) fn highest_revision_replaces_rows(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    // 137 rows: SQLite writes them as two chunks of 64, one of 8 and a single row.
    assert!(w.commit(&batch(1, vec![list(0, 1, 137)])).unwrap());
    let got = r.instance(JOB, "1m", Millis(0)).unwrap();
    assert_eq!(got, Some(StoredList::from(list(0, 1, 137))));
    // Two revisions in one batch: the highest wins, regardless of order.
    assert!(w.commit(&batch(2, vec![list(0, 3, 2), list(0, 2, 7)])).unwrap());
    let got = r.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
    assert_eq!(got, StoredList::from(list(0, 3, 2)));
    assert_eq!(got.state, ListState::Final);
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(got));
    s.assert_stored_rows(0, &[(1, 3), (2, 3)]);
    // An empty list still has a header.
    assert!(w.commit(&batch(3, vec![list(0, 4, 0)])).unwrap());
    let got = r.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
    assert_eq!((got.revision, got.state, got.items.len()), (4, ListState::Final, 0));
    s.assert_stored_rows(0, &[]);
    assert_eq!(r.instance(JOB, "1m", Millis(60_000)).unwrap(), None);
    assert_eq!(r.instance("other", "1m", Millis(0)).unwrap(), None);
}

/// A batch at or below the job's committed epoch changes nothing and reports `false`; epochs
/// are per job, compared as numbers, and survive reopening the store.
pub(crate) fn epochs_at_or_below_the_committed_one_are_skipped(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    assert_eq!(w.committed_epoch(JOB).unwrap(), None);
    assert_eq!(r.last_commit(JOB).unwrap(), None);
    assert!(w.commit(&batch(5, vec![list(0, 1, 3)])).unwrap());
    for epoch in [5, 4, 0] {
        let mut b = batch(epoch, vec![list(0, 9, 1), list(60_000, 9, 1)]);
        b.dead_letters = vec![letter(1, DeadReason::Bad, b"x")];
        assert!(!w.commit(&b).unwrap());
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(5));
    assert_eq!(r.last_commit(JOB).unwrap(), Some((5, Millis(5000))));
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap().map(|l| l.revision), Some(1));
    if let Some(history) = &s.history {
        assert!(history().dead_letters(JOB, 10).unwrap().is_empty());
    }
    // Epochs are per job, and compared as numbers: 10 > 9 although "10" < "9" as strings.
    let mut other = batch(1, vec![]);
    other.job = "other".into();
    assert!(w.commit(&other).unwrap());
    assert_eq!(w.committed_epoch("other").unwrap(), Some(1));
    for (epoch, committed) in [(9, true), (10, true), (9, false)] {
        other.epoch = epoch;
        assert_eq!(w.commit(&other).unwrap(), committed, "epoch {epoch}");
    }
    assert_eq!(w.committed_epoch("other").unwrap(), Some(10));
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(5));
    // Survives reopening (for the SQL stores: and re-running the migrations).
    drop(w);
    let mut w = (s.writer)();
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(5));
    assert!(w.commit(&batch(6, vec![])).unwrap());
    assert_eq!(r.last_commit(JOB).unwrap(), Some((6, Millis(6000))));
    assert_eq!(r.last_commit("nobody").unwrap(), None);
}

/// Dead letters are appended in order and read back newest first, per job, with their raw
/// bytes exact (not UTF-8, empty, long) and positions up to `i64::MAX`, and counted per reason
/// (every reason, `future`, `too_large` and `udf` included). A store that keeps none (Redis)
/// only has to accept them.
pub(crate) fn dead_letters_round_trip_raw_bytes(s: Subject) {
    let letters = [
        letter(1, DeadReason::Bad, &[0xff, 0x00, 0xc3, 0x28, b'{']),
        letter(2, DeadReason::Late, b"{\"item\":\"a\",\"ts\":1}"),
        letter(3, DeadReason::Bad, &[]),
        letter(u64::from(u32::MAX) + 7, DeadReason::Sealed, &[0x80; 300]),
        letter(i64::MAX as u64, DeadReason::Bad, b"\0"),
        letter(9, DeadReason::Future, b"{\"item_id\":\"a\",\"ts\":253402300799999}"),
        letter(10, DeadReason::TooLarge, &[b'x'; 4096]),
        letter(11, DeadReason::Udf, b"{\"item_id\":\"a\",\"ts\":1}"),
    ];
    assert!(
        DeadReason::ALL
            .iter()
            .all(|r| letters.iter().any(|l| l.letter.reason == *r)),
        "every reason is written"
    );
    let mut w = (s.writer)();
    let mut b = batch(1, vec![]);
    b.dead_letters = letters[..2].to_vec();
    assert!(w.commit(&b).unwrap());
    let mut b = batch(2, vec![]);
    b.dead_letters = letters[2..].to_vec();
    assert!(w.commit(&b).unwrap());
    drop(w);
    let Some(history) = &s.history else {
        return;
    };
    let mut h = history();
    let newest_first: Vec<_> = letters.iter().rev().cloned().collect();
    assert_eq!(h.dead_letters(JOB, 100).unwrap(), newest_first);
    assert_eq!(h.dead_letters(JOB, 2).unwrap(), newest_first[..2]);
    assert_eq!(h.dead_letters(JOB, usize::MAX).unwrap().len(), letters.len());
    assert!(h.dead_letters("other", 10).unwrap().is_empty());
    assert_eq!(
        h.dead_letter_counts(JOB).unwrap(),
        vec![
            ("bad".to_string(), 3),
            ("future".to_string(), 1),
            ("late".to_string(), 1),
            ("sealed".to_string(), 1),
            ("too_large".to_string(), 1),
            ("udf".to_string(), 1)
        ]
    );
}

/// `prepare` records the job's windows in order, replaces them on the next call and refuses
/// invalid ones; `latest` is the instance with the greatest start; a reader sees the last
/// commit. A store that keeps history also has the other instances.
pub(crate) fn latest_instances_and_windows(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    let m = Span::from_millis;
    let windows = windows();
    assert!(r.windows(JOB).unwrap().is_empty());
    w.prepare(JOB, &windows).unwrap();
    let stored = r.windows(JOB).unwrap();
    assert_eq!(stored, windows.iter().map(StoredWindow::from).collect::<Vec<_>>());
    // Re-preparing replaces the definition; invalid definitions change nothing.
    w.prepare(JOB, &windows[1..]).unwrap();
    assert_eq!(r.windows(JOB).unwrap(), vec![StoredWindow::from(&windows[1])]);
    assert_eq!(r.windows(JOB).unwrap()[0].slide, m(30_000));
    assert!(w.prepare(JOB, &[WindowSpec::tumbling("x", m(0), 1)]).is_err());
    assert!(w.prepare("", &windows).is_err());
    assert_eq!(r.windows(JOB).unwrap().len(), 1);

    assert_eq!(r.latest(JOB, "1m").unwrap(), None);
    let b = batch(1, vec![list(120_000, 1, 2), list(-60_000, 2, 1), list(60_000, 1, 3)]);
    assert!(w.commit(&b).unwrap());
    assert_eq!(
        r.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(list(120_000, 1, 2)))
    );
    assert_eq!(r.latest(JOB, "5m").unwrap(), None);
    assert_eq!(r.last_commit(JOB).unwrap(), Some((1, Millis(1000))));
    let Some(history) = &s.history else {
        // Only the latest instance is kept.
        assert_eq!(r.instance(JOB, "1m", Millis(60_000)).unwrap(), None);
        return;
    };
    assert_eq!(r.instance(JOB, "1m", Millis(60_000)).unwrap().unwrap().items.len(), 3);
    let earliest = r.instance(JOB, "1m", Millis(-60_000)).unwrap();
    assert_eq!(earliest, Some(StoredList::from(list(-60_000, 2, 1))));
    let mut h = history();
    assert_eq!(
        h.instances(JOB, "1m").unwrap(),
        vec![
            (Millis(-60_000), 2, ListState::Open),
            (Millis(60_000), 1, ListState::Open),
            (Millis(120_000), 1, ListState::Open),
        ]
    );
    assert!(h.instances(JOB, "5m").unwrap().is_empty());
}

/// A batch with invalid contents is refused as a permanent [`SinkError::Invalid`] before
/// anything of it is written.
pub(crate) fn invalid_input_changes_nothing(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    let mut too_large = list(0, 2, 1);
    too_large.items[0].count = u64::MAX;
    let mut backwards = list(0, 2, 1);
    backwards.end = Millis(-1);
    let mut no_job = batch(1, vec![]);
    no_job.job.clear();
    let refused = [batch(1, vec![too_large]), batch(1, vec![backwards]), no_job];
    for b in &refused {
        let err = w.commit(b).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(!err.retryable());
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), None);
    assert_eq!(r.latest(JOB, "1m").unwrap(), None);
    // After a good commit, the refused ones leave it as it is.
    assert!(w.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    for mut b in refused {
        b.epoch = 2;
        assert!(w.commit(&b).is_err());
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(1));
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
}

//! One live run per job: a claim fences the previous owner, the lock keeps a second run out,
//! `reset` forgets the job's results and nothing else.

use super::subject::Subject;
use crate::error::SinkError;
use crate::ownership::{Claim, Owner};
use crate::test_fixtures::{batch, letter, list, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::record::DeadReason;
use hotlist_operators::time::Millis;

/// A claim makes the handle the job's owner: the generation goes up by one per claim and the
/// store returns the previous owner. Once another handle has claimed the job, the first one's
/// commits of it fail with a permanent [`SinkError::TakenOver`] naming both generations — even
/// a batch that would be skipped — and write nothing; its other jobs are not fenced.
pub(crate) fn a_claim_fences_the_previous_owner(s: Subject) {
    let (mut a, mut b, mut r) = ((s.writer)(), (s.writer)(), (s.reader)());
    assert_eq!(
        a.claim(JOB, "run-a").unwrap(),
        Claim {
            generation: 1,
            previous: None
        }
    );
    assert!(a.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    let second = b.claim(JOB, "run-b").unwrap();
    let previous = Some(Owner {
        generation: 1,
        owner: "run-a".into(),
    });
    assert_eq!(
        second,
        Claim {
            generation: 2,
            previous
        }
    );
    let mut stale = batch(2, vec![list(0, 2, 5)]);
    stale.dead_letters = vec![letter(9, DeadReason::Bad, b"x")];
    for b in [&stale, &batch(1, vec![])] {
        let err = a.commit(b).unwrap_err();
        assert!(
            matches!(&err, SinkError::TakenOver { ours: 1, current: 2, job } if job == JOB),
            "{err}"
        );
        assert!(!err.retryable());
    }
    assert_eq!(r.last_commit(JOB).unwrap(), Some((1, Millis(1000))));
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
    if let Some(history) = &s.history {
        assert!(history().dead_letters(JOB, 10).unwrap().is_empty());
    }
    // the new owner commits; the old one's other jobs are not fenced
    assert!(b.commit(&stale).unwrap());
    let mut other = batch(1, vec![]);
    other.job = "other".into();
    assert!(a.commit(&other).unwrap());
    // generations survive reopening
    drop(b);
    assert_eq!((s.writer)().claim(JOB, "run-c").unwrap().generation, 3);
}

/// The liveness lock keeps a second live handle out of the job (a permanent
/// [`SinkError::JobLocked`]) until the first handle is gone; other jobs are not affected. A
/// store without a lock accepts both.
pub(crate) fn the_lock_keeps_a_second_run_out(s: Subject) {
    let (mut a, mut b) = ((s.writer)(), (s.writer)());
    a.lock(JOB).unwrap();
    a.lock(JOB).unwrap(); // taking it again is no error
    let second = b.lock(JOB);
    if !s.locks {
        assert!(second.is_ok());
        return;
    }
    let err = second.unwrap_err();
    assert!(matches!(&err, SinkError::JobLocked { job, .. } if job == JOB), "{err}");
    assert!(!err.retryable());
    assert!(err.to_string().contains("already running"), "{err}");
    b.lock("other").unwrap();
    drop(a);
    // released with the handle (PostgreSQL: once the server has ended its session)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Err(e) = b.lock(JOB) {
        assert!(std::time::Instant::now() < deadline, "still locked: {e}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `reset` forgets the job's results — lists, dead letters, committed epoch — and nothing
/// else: its windows and owner stay, other jobs keep theirs, and the job commits from epoch 0
/// again.
pub(crate) fn reset_forgets_the_job_and_nothing_else(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap();
    w.claim(JOB, "run").unwrap();
    let mut b = batch(3, vec![list(0, 1, 3), list(60_000, 1, 2)]);
    b.dead_letters = vec![letter(1, DeadReason::Bad, b"x")];
    assert!(w.commit(&b).unwrap());
    let mut other = batch(1, vec![list(0, 1, 2)]);
    other.job = "other".into();
    assert!(w.commit(&other).unwrap());
    w.reset(JOB).unwrap();
    assert_eq!(w.committed_epoch(JOB).unwrap(), None);
    assert_eq!(r.last_commit(JOB).unwrap(), None);
    assert_eq!(r.latest(JOB, "1m").unwrap(), None);
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap(), None);
    assert_eq!(r.windows(JOB).unwrap().len(), 2, "the windows stay");
    if let Some(history) = &s.history {
        let mut h = history();
        assert!(h.dead_letters(JOB, 10).unwrap().is_empty());
        assert!(h.dead_letter_counts(JOB).unwrap().is_empty());
        assert!(h.instances(JOB, "1m").unwrap().is_empty());
    }
    assert_eq!(w.committed_epoch("other").unwrap(), Some(1));
    assert_eq!(r.latest("other", "1m").unwrap(), Some(StoredList::from(list(0, 1, 2))));
    // the owner stays: the same handle commits again, from epoch 0
    assert!(w.commit(&batch(0, vec![list(0, 1, 1)])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 1))));
}

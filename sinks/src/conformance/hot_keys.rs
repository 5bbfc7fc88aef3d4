//! Hot-key windows: written, read back whole, reported when damaged.

use super::subject::{Damage, Subject};
use crate::error::SinkError;
use crate::test_fixtures::{batch, hot_window, windows, JOB};
use hotlist_operators::hot_keys::HotState;
use hotlist_operators::time::Millis;

/// Hot-key windows: the latest one is read back whole (keys in report order, rates exact, an
/// empty window too), a replay writes the same window again, an older window never hides a
/// newer one, another job's windows stay apart, and `reset` forgets them.
pub(crate) fn hot_keys_round_trip(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap();
    assert_eq!(r.hot_keys(JOB).unwrap(), None);
    let first = hot_window(0, &[("a", 1250.5, HotState::Hot), ("b", 0.1 + 0.2, HotState::Cooling)]);
    let second = hot_window(10_000, &[("b", 3000.0, HotState::Hot), ("c", 3000.0, HotState::Hot)]);
    let mut b = batch(1, vec![]);
    b.hot_keys = vec![first.clone(), second.clone()];
    assert!(w.commit(&b).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap(), Some(second.clone()));
    // a replay at a later epoch (a restart from a checkpoint) writes the same rows again
    b.epoch = 2;
    assert!(w.commit(&b).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap(), Some(second.clone()));
    // an older window arriving later does not hide the newer one
    let mut old = batch(3, vec![]);
    old.hot_keys = vec![first];
    assert!(w.commit(&old).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap(), Some(second));
    // a window without keys is the latest all the same
    let empty = hot_window(20_000, &[]);
    let mut e = batch(4, vec![]);
    e.hot_keys = vec![empty.clone()];
    assert!(w.commit(&e).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap(), Some(empty));
    let mut other = batch(1, vec![]);
    other.job = "other".into();
    other.hot_keys = vec![hot_window(0, &[("z", 5.0, HotState::Hot)])];
    assert!(w.commit(&other).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap().map(|h| h.start), Some(Millis(20_000)));
    w.claim(JOB, "run").unwrap();
    w.reset(JOB).unwrap();
    assert_eq!(r.hot_keys(JOB).unwrap(), None);
    assert_eq!(r.hot_keys("other").unwrap().map(|h| h.keys.len()), Some(1));
    // a rate that is not a finite number is refused before anything is written
    let mut bad = batch(9, vec![]);
    bad.hot_keys = vec![hot_window(30_000, &[("a", f64::INFINITY, HotState::Hot)])];
    let e = w.commit(&bad).unwrap_err();
    assert!(
        matches!(e, SinkError::Invalid { .. }) && e.to_string().contains("rate inf"),
        "{e}"
    );
    assert_eq!(w.committed_epoch(JOB).unwrap(), None);
}

/// A damaged hot-key header is a clear `Corrupt` naming the window and the field, never a read
/// sized by it.
pub(crate) fn damaged_hot_keys_are_reported(s: Subject) {
    let Some(damage) = &s.damage else { return };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap();
    let mut b = batch(1, vec![]);
    b.hot_keys = vec![hot_window(
        0,
        &[("a", 10.0, HotState::Hot), ("b", 9.0, HotState::Cooling)],
    )];
    assert!(w.commit(&b).unwrap());
    for (count, want) in [
        (-1, "key_count -1 is out of range"),
        (1 << 40, "key_count 1099511627776 is out of range"),
        (5, "2 key rows, the header says 5"),
    ] {
        damage(Damage::HotKeyCount(count));
        let e = r.hot_keys(JOB).unwrap_err();
        assert!(matches!(e, SinkError::Corrupt { .. }), "{e}");
        assert!(
            e.to_string().contains("hot-key window 1970-01-01T00:00:00.000Z") && e.to_string().contains(want),
            "{e}"
        );
    }
}

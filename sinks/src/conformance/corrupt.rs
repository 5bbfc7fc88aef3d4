//! Damaged lists: a list longer than its window's `k`, a damaged header or window, each a
//! permanent `Corrupt`, never trusted.

use super::subject::{Damage, Subject};
use crate::error::SinkError;
use crate::test_fixtures::{batch, list, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::time::Millis;

/// A list longer than its window's `k` (which the job never writes) reads back as a permanent
/// [`SinkError::Corrupt`] naming the instance and the `k`, not as a list; within `k` it reads
/// back, and a window that is not recorded bounds its lists by the largest `k` only.
pub(crate) fn a_list_longer_than_its_windows_k_is_corrupt(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    assert!(w.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
    assert!(w.commit(&batch(2, vec![list(60_000, 1, 4)])).unwrap());
    for err in [
        r.latest(JOB, "1m").unwrap_err(),
        r.instance(JOB, "1m", Millis(60_000)).unwrap_err(),
    ] {
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        let want = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:01:00.000Z";
        assert!(err.to_string().contains(want), "{err}");
        assert!(
            err.to_string()
                .contains("header item_count 4 exceeds the window's k (3)"),
            "{err}"
        );
    }
    let mut other = list(0, 1, 20);
    other.window = "gone".into();
    assert!(w.commit(&batch(3, vec![other.clone()])).unwrap());
    assert_eq!(r.latest(JOB, "gone").unwrap(), Some(StoredList::from(other)));
    // The largest k is the configuration's bound too.
    let mut huge = windows();
    huge[1].k = hotlist_operators::window::MAX_K + 1;
    assert!(matches!(w.prepare(JOB, &huge), Err(SinkError::Invalid { .. })));
}

/// Damaged stored data (a header's item count of 2^40 or 2^62, a window's `k` out of range, a
/// watermark past year 9999) is a permanent [`SinkError::Corrupt`] naming the job, window,
/// instance and field, never an allocation sized by it or a panic; once repaired, the same
/// reader reads the list again.
pub(crate) fn damaged_rows_are_reported_never_trusted(s: Subject) {
    let Some(damage) = &s.damage else {
        return;
    };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    assert!(w.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    let good = r.latest(JOB, "1m").unwrap();
    assert_eq!(good, Some(StoredList::from(list(0, 1, 3))));
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let corrupt = |err: SinkError, want: &str| {
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        assert!(err.to_string().contains(want), "{err} (want {want:?})");
    };
    for n in [1i64 << 40, 1 << 62, i64::MAX, 4] {
        damage(Damage::ItemCount(n));
        let want = format!("{at}: header item_count {n} exceeds the window's k (3)");
        corrupt(r.latest(JOB, "1m").unwrap_err(), &want);
        corrupt(r.instance(JOB, "1m", Millis(0)).unwrap_err(), &want);
    }
    damage(Damage::ItemCount(2));
    corrupt(r.latest(JOB, "1m").unwrap_err(), at);
    damage(Damage::ItemCount(3));
    assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    for k in [0i64, 1 << 40, 1 << 62] {
        damage(Damage::WindowK(k));
        let want = format!("job \"hotlist\" window \"1m\": k {k} is out of range (1 to 1000000)");
        corrupt(r.windows(JOB).unwrap_err(), &want);
        corrupt(r.latest(JOB, "1m").unwrap_err(), &want);
    }
    damage(Damage::WindowK(2));
    corrupt(
        r.latest(JOB, "1m").unwrap_err(),
        "header item_count 3 exceeds the window's k (2)",
    );
    damage(Damage::WindowK(3));
    assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    damage(Damage::CommitWatermark(1_000_000_000_000_000));
    let want = "job \"hotlist\": commit watermark 1000000000000000 ms is past year 9999";
    corrupt(r.last_commit(JOB).unwrap_err(), want);
    damage(Damage::CommitWatermark(1000));
    assert_eq!(r.last_commit(JOB).unwrap(), Some((1, Millis(1000))));
}

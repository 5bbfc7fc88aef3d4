//! What a list says it is: exact or approximate, its sketch check and its certificate, written
//! and read back, refused when impossible, reported when damaged.

use super::subject::{Damage, Subject};
use crate::error::SinkError;
use crate::store::StoreReader;
use crate::test_fixtures::{approximate, batch, certified, list, sketch_check, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::record::ListState;
use hotlist_operators::time::Millis;

/// Every list says what it is, and reads back saying it: an approximate list (`exact` false,
/// `error_bound` 37, a sketch check) and an exact one with a sketch check (`mode = "both"`)
/// read back equal; a new revision replaces the accuracy entirely (an exact revision without a
/// check leaves no check behind). Lists that claim what cannot be are refused as a permanent
/// [`SinkError::Invalid`] before anything of them is written.
pub(crate) fn lists_say_what_they_are(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3, 5m: k = 10
    let sketched = approximate(list(0, 1, 3), 37, Some(sketch_check(2, 3)));
    let mut checked = list(0, 1, 10);
    checked.window = "5m".into();
    checked.end = Millis(300_000);
    checked.sketch_check = Some(sketch_check(9, 10));
    assert!(w.commit(&batch(1, vec![sketched.clone(), checked.clone()])).unwrap());
    let got = r.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!((got.exact, got.error_bound), (false, 37));
    assert_eq!(got, StoredList::from(sketched.clone()));
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap(), Some(got));
    assert_eq!(r.latest(JOB, "5m").unwrap(), Some(StoredList::from(checked)));

    // Each revision says it all again: approximate without a check, then exact.
    let unchecked = approximate(list(0, 2, 3), u64::from(u32::MAX) + 1, None);
    assert!(w.commit(&batch(2, vec![unchecked.clone()])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(unchecked)));
    assert!(w.commit(&batch(3, vec![list(0, 3, 3)])).unwrap());
    let exact = r.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!((exact.exact, exact.error_bound, exact.sketch_check), (true, 0, None));
    assert_eq!(exact, StoredList::from(list(0, 3, 3)));

    let with = |error_bound: u64, found: u32, of: u32, max_overcount: u64| {
        let mut l = approximate(list(0, 4, 3), error_bound, Some(sketch_check(found, of)));
        l.sketch_check = l
            .sketch_check
            .map(|c| hotlist_operators::record::SketchCheck { max_overcount, ..c });
        l
    };
    let mut exact_with_bound = list(0, 4, 3);
    exact_with_bound.error_bound = 5;
    let refused = [
        (exact_with_bound, "an exact list has error_bound 5 (must be 0)"),
        (with(1, 4, 3, 0), "sketch_found 4 exceeds sketch_of 3"),
        (with(u64::MAX, 1, 3, 0), "error_bound 18446744073709551615 is too large"),
        (
            with(1, 1, 3, u64::MAX),
            "sketch_max_overcount 18446744073709551615 is too large",
        ),
        (
            with(1, 1, 2_000_000, 0),
            "sketch_of 2000000 exceeds the largest k (1000000)",
        ),
    ];
    for (l, want) in refused {
        let err = w.commit(&batch(4, vec![l])).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(!err.retryable());
        assert!(err.to_string().contains(want), "{err} (want {want:?})");
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(3));
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(exact));
}

/// Damaged accuracy (an exact list with an error bound, a negative bound, a sketch check that
/// found more than it compared, compared more than `k`, is partial or negative; rows that
/// disagree with their header) is a permanent [`SinkError::Corrupt`] naming the instance and
/// the field; once repaired, the same reader reads the list again.
pub(crate) fn damaged_accuracy_is_reported(s: Subject) {
    let Some(damage) = &s.damage else {
        return;
    };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    let sketched = approximate(list(0, 1, 3), 37, Some(sketch_check(2, 3)));
    assert!(w.commit(&batch(1, vec![sketched.clone()])).unwrap());
    let good = Some(StoredList::from(sketched));
    assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let corrupt = |r: &mut Box<dyn StoreReader>, want: &str| {
        let err = r.latest(JOB, "1m").unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        assert!(
            err.to_string().contains(&format!("{at}: {want}")),
            "{err} (want {want:?})"
        );
    };
    let sketch = |found, of, max, total| Damage::SketchCheck([found, of, max, total]);
    let cases = [
        (
            Damage::Accuracy {
                exact: true,
                error_bound: 37,
            },
            "an exact list has error_bound 37 (must be 0)",
        ),
        (
            Damage::Accuracy {
                exact: false,
                error_bound: -1,
            },
            "error_bound -1 is negative",
        ),
        (
            sketch(Some(4), Some(3), Some(5), Some(9)),
            "sketch_found 4 exceeds sketch_of 3",
        ),
        (
            sketch(Some(2), Some(4), Some(5), Some(9)),
            "sketch_of 4 exceeds the window's k (3)",
        ),
        (
            sketch(Some(2), None, Some(5), Some(9)),
            "the sketch check lacks sketch_of",
        ),
        (
            sketch(Some(2), Some(3), Some(-1), Some(9)),
            "sketch_max_overcount -1 is negative",
        ),
    ];
    for (what, want) in cases {
        damage(what);
        corrupt(&mut r, want);
        damage(Damage::Accuracy {
            exact: false,
            error_bound: 37,
        });
        damage(sketch(Some(2), Some(3), Some(5), Some(9)));
        assert_eq!(r.latest(JOB, "1m").unwrap(), good, "repaired after {what:?}");
    }
    if s.stored_rows.is_some() {
        damage(Damage::RowAccuracy {
            exact: true,
            error_bound: 0,
        });
        corrupt(
            &mut r,
            "row 1 has exact 1 and error_bound 0, header exact 0 and error_bound 37",
        );
        damage(Damage::RowAccuracy {
            exact: false,
            error_bound: 37,
        });
        assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    }
}

/// A sketch window's final list that a replay proved exact reads back with its certificate,
/// on every store; a new revision without one leaves none behind. A certificate on a list that
/// is not exact, not final, or with a threshold or passes of 0 (or numbers the stores cannot
/// hold) is refused as a permanent [`SinkError::Invalid`] before anything of it is written.
pub(crate) fn certified_lists_round_trip(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    let proved = certified(list(0, 3, 3), 40, 2);
    assert!(w.commit(&batch(1, vec![proved.clone()])).unwrap());
    let got = r.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!((got.exact, got.error_bound, got.state), (true, 0, ListState::Final));
    assert_eq!(
        got.certificate.map(|c| (c.threshold, c.counted, c.passes)),
        Some((40, 17, 2))
    );
    assert_eq!(got, StoredList::from(proved.clone()));
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap(), Some(got));
    // The largest numbers the stores hold.
    let mut largest = certified(list(60_000, 3, 3), i64::MAX as u64, u32::MAX);
    largest.certificate = largest.certificate.map(|c| hotlist_operators::certify::Certificate {
        counted: i64::MAX as u64,
        ..c
    });
    assert!(w.commit(&batch(2, vec![largest.clone()])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(largest)));
    // A new revision says it all again: no certificate left behind.
    assert!(w.commit(&batch(3, vec![list(60_000, 4, 2)])).unwrap());
    let plain = r.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!(plain.certificate, None);
    assert_eq!(plain, StoredList::from(list(60_000, 4, 2)));

    let with = |l, threshold, counted, passes| {
        let mut l = certified(l, threshold, passes);
        l.certificate = l
            .certificate
            .map(|c| hotlist_operators::certify::Certificate { counted, ..c });
        l
    };
    let refused = [
        (
            hotlist_operators::message::PublishedList {
                exact: false,
                error_bound: 37,
                ..with(list(0, 5, 3), 40, 17, 1)
            },
            "an approximate list has a certificate (only an exact list can)",
        ),
        (
            with(list(0, 2, 3), 40, 17, 1),
            "a list in state open has a certificate (only a final list can)",
        ),
        (with(list(0, 5, 3), 0, 17, 1), "certificate_threshold 0 is not positive"),
        (
            with(list(0, 5, 3), 40, 17, 0),
            "certificate_passes 0 is out of range (1 to 4294967295)",
        ),
        (
            with(list(0, 5, 3), 40, u64::MAX, 1),
            "certificate_counted 18446744073709551615 is too large",
        ),
    ];
    for (l, want) in refused {
        let err = w.commit(&batch(4, vec![l])).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(!err.retryable());
        assert!(err.to_string().contains(want), "{err} (want {want:?})");
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(3));
    assert_eq!(r.instance(JOB, "1m", Millis(60_000)).unwrap(), Some(plain));
    if s.history.is_some() {
        assert_eq!(
            r.instance(JOB, "1m", Millis(0)).unwrap(),
            Some(StoredList::from(proved))
        );
    }
}

/// A damaged certificate (partial, a threshold or passes of 0, a negative count; on a list
/// that is not exact or not final) is a permanent [`SinkError::Corrupt`] naming the instance
/// and the field; once repaired, the same reader reads the list again.
pub(crate) fn damaged_certificates_are_reported(s: Subject) {
    let Some(damage) = &s.damage else {
        return;
    };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    let proved = certified(list(0, 3, 3), 40, 2);
    assert!(w.commit(&batch(1, vec![proved.clone()])).unwrap());
    let good = Some(StoredList::from(proved));
    assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let corrupt = |r: &mut Box<dyn StoreReader>, want: &str| {
        let err = r.latest(JOB, "1m").unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        assert!(
            err.to_string().contains(&format!("{at}: {want}")),
            "{err} (want {want:?})"
        );
    };
    let certificate = |threshold, counted, passes| Damage::Certificate([threshold, counted, passes]);
    let cases = [
        (
            certificate(Some(40), None, Some(2)),
            "the certificate lacks certificate_counted",
        ),
        (
            certificate(Some(0), Some(17), Some(2)),
            "certificate_threshold 0 is not positive",
        ),
        (
            certificate(Some(40), Some(-1), Some(2)),
            "certificate_counted -1 is negative",
        ),
        (
            certificate(Some(40), Some(17), Some(0)),
            "certificate_passes 0 is out of range (1 to 4294967295)",
        ),
        (
            Damage::Accuracy {
                exact: false,
                error_bound: 37,
            },
            "an approximate list has a certificate (only an exact list can)",
        ),
        (
            Damage::State(ListState::Closed),
            "a list in state closed has a certificate (only a final list can)",
        ),
    ];
    for (what, want) in cases {
        damage(what);
        corrupt(&mut r, want);
        damage(Damage::Accuracy {
            exact: true,
            error_bound: 0,
        });
        damage(Damage::State(ListState::Final));
        damage(certificate(Some(40), Some(17), Some(2)));
        assert_eq!(r.latest(JOB, "1m").unwrap(), good, "repaired after {what:?}");
    }
}

//! Sealed instances' input ranges: committed with a batch, read back whole, replaced by a later
//! commit, listed in order, forgotten by `reset`, reported when damaged.

use super::subject::{Damage, Subject};
use crate::error::SinkError;
use crate::test_fixtures::{batch, list, sealed, unreadable, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::time::Millis;

/// No instances.
const NONE: [Millis; 0] = [];

/// Every instance's ranges as `r` reads them back.
fn read_all(r: &mut dyn crate::store::StoreReader, want: &[&SealedRanges]) {
    for s in want {
        assert_eq!(
            r.sealed_ranges(JOB, &s.window, s.start).unwrap().as_ref(),
            Some(*s),
            "{}@{}",
            s.window,
            s.start.0
        );
    }
}

/// Ranges committed with a batch read back equal — with and without byte marks, with skips, an
/// instance that cannot be read again — atomically with the batch's lists (a skipped epoch
/// writes none); a later batch replaces an instance's ranges (the last in a batch wins);
/// `sealed_instances` lists the starts at or after `since`, ascending, at most `limit`, per job
/// and window; invalid ranges are refused before anything is written; `reset` forgets them and
/// nothing of another job.
pub(crate) fn sealed_ranges_round_trip(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap();
    w.claim(JOB, "run").unwrap();
    assert_eq!(r.sealed_ranges(JOB, "1m", Millis(0)).unwrap(), None);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(), NONE);

    let files = sealed("1m", 0);
    let lost = unreadable(
        "1m",
        60_000,
        "more than 100000 \"future\" rejections outstanding: ünreadable",
    );
    let five = sealed("5m", -300_000);
    let mut b = batch(1, vec![list(0, 3, 2)]);
    b.ranges = vec![files.clone(), lost.clone(), five.clone()];
    assert!(w.commit(&b).unwrap());
    read_all(&mut *r, &[&files, &lost, &five]);
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 3, 2))));
    assert_eq!(
        r.sealed_ranges(JOB, "1m", Millis(30_000)).unwrap(),
        None,
        "no such instance"
    );
    assert_eq!(r.sealed_ranges(JOB, "5m", Millis(0)).unwrap(), None, "another window's");
    assert_eq!(
        r.sealed_ranges("other", "1m", Millis(0)).unwrap(),
        None,
        "another job's"
    );

    // a batch at or below the committed epoch writes no ranges either
    let mut skipped = batch(1, vec![]);
    skipped.ranges = vec![unreadable("1m", 0, "skipped"), sealed("1m", 90_000)];
    assert!(!w.commit(&skipped).unwrap());
    read_all(&mut *r, &[&files]);
    assert_eq!(r.sealed_ranges(JOB, "1m", Millis(90_000)).unwrap(), None);

    // a later batch replaces an instance's ranges, whichever kind each is; in one batch the
    // last ranges of an instance win
    let mut again = batch(2, vec![]);
    let readable_now = sealed("1m", 60_000);
    let gone_now = unreadable("1m", 0, "the file changed");
    again.ranges = vec![sealed("1m", 60_000 + 1000), gone_now.clone(), readable_now.clone()];
    again.ranges[0].start = Millis(60_000);
    assert!(w.commit(&again).unwrap());
    read_all(&mut *r, &[&gone_now, &readable_now, &five]);

    // starts, ascending, at or after `since`, at most `limit`, of the job and window only
    let mut more = batch(3, vec![]);
    more.ranges = [150_000, -60_000, 30_000, 120_000]
        .map(|start| sealed("1m", start))
        .into();
    let mut other = batch(1, vec![]);
    other.job = "other".into();
    other.ranges = vec![sealed("1m", 90_000), sealed("1m", -120_000)];
    assert!(w.commit(&more).unwrap());
    assert!(w.commit(&other).unwrap());
    let all = [-60_000, 0, 30_000, 60_000, 120_000, 150_000].map(Millis);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis::MIN, 100).unwrap(), all);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis(30_000), 100).unwrap(), all[2..]);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis(30_001), 2).unwrap(), all[3..5]);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis::MIN, 1).unwrap(), all[..1]);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis::MIN, 0).unwrap(), NONE);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis(150_001), 10).unwrap(), NONE);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis::MIN, usize::MAX).unwrap(), all);
    assert_eq!(
        r.sealed_instances(JOB, "5m", Millis::MIN, 10).unwrap(),
        [Millis(-300_000)]
    );
    assert_eq!(r.sealed_instances(JOB, "gone", Millis::MIN, 10).unwrap(), NONE);
    assert_eq!(
        r.sealed_instances("other", "1m", Millis::MIN, 10).unwrap(),
        [Millis(-120_000), Millis(90_000)]
    );

    // ranges a reader would refuse are refused before anything of the batch is written
    let mut bad = batch(4, vec![list(60_000, 3, 1)]);
    let mut backwards = sealed("1m", 180_000);
    if let Ok(ranges) = &mut backwards.ranges {
        ranges[0].to = ranges[0].from - 1;
    }
    bad.ranges = vec![sealed("1m", 210_000), backwards];
    let e = w.commit(&bad).unwrap_err();
    assert!(matches!(e, SinkError::Invalid { .. }), "{e}");
    assert!(
        e.to_string().contains("partition 0: the range ends before it starts"),
        "{e}"
    );
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(3));
    assert_eq!(r.sealed_ranges(JOB, "1m", Millis(210_000)).unwrap(), None);
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 3, 2))));

    w.reset(JOB).unwrap();
    assert_eq!(r.sealed_ranges(JOB, "1m", Millis(0)).unwrap(), None);
    assert_eq!(r.sealed_ranges(JOB, "5m", Millis(-300_000)).unwrap(), None);
    assert_eq!(r.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(), NONE);
    assert_eq!(r.sealed_instances(JOB, "5m", Millis::MIN, 10).unwrap(), NONE);
    assert_eq!(
        r.sealed_ranges("other", "1m", Millis(90_000)).unwrap(),
        Some(sealed("1m", 90_000)),
        "another job keeps its ranges"
    );
    // the job records ranges again from epoch 0
    let mut fresh = batch(0, vec![]);
    fresh.ranges = vec![sealed("1m", 0)];
    assert!(w.commit(&fresh).unwrap());
    assert_eq!(r.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(), [Millis(0)]);
}

/// Damaged ranges (JSON that does not parse or is not the stored shape, a range that ends
/// before it starts, partitions out of order, an instance that ends before it starts) are a
/// permanent [`SinkError::Corrupt`] naming the job, window, instance and field, never a panic;
/// the instance is still listed, other instances still read, and committing its ranges again
/// repairs it.
pub(crate) fn damaged_ranges_are_reported(s: Subject) {
    let Some(damage) = &s.damage else { return };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap();
    let mut b = batch(1, vec![]);
    b.ranges = vec![sealed("1m", 0), sealed("1m", 60_000)];
    assert!(w.commit(&b).unwrap());
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let cases = [
        (r#"[{"partition":0,"from":"#, "ranges: not the stored JSON"),
        ("true", "ranges: not the stored JSON"),
        (r#"{"partition":0}"#, "ranges: not the stored JSON"),
        (
            r#"[{"partition":0,"from":-1,"max_ts":0,"byte":null,"to":5,"skips":[]}]"#,
            "ranges: not the stored JSON",
        ),
        (
            r#"[{"partition":0,"from":1,"max_ts":0,"byte":null,"to":5,"skips":[[1]]}]"#,
            "ranges: not the stored JSON",
        ),
        (
            r#"[{"partition":0,"from":1,"max_ts":0,"byte":{"offset":1},"to":5,"skips":[]}]"#,
            "ranges: not the stored JSON",
        ),
        (
            r#"[{"partition":4,"from":9,"max_ts":0,"byte":null,"to":3,"skips":[]}]"#,
            "ranges: partition 4: the range ends before it starts",
        ),
        (
            r#"[{"partition":1,"from":0,"max_ts":0,"byte":null,"to":1,"skips":[]},
                {"partition":0,"from":0,"max_ts":0,"byte":null,"to":1,"skips":[]}]"#,
            "ranges: partitions not ascending",
        ),
    ];
    let corrupt = |r: &mut dyn crate::store::StoreReader, want: &str| {
        let err = r.sealed_ranges(JOB, "1m", Millis(0)).unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        assert!(
            err.to_string().contains(&format!("{at}: {want}")),
            "{err} (want {want:?})"
        );
    };
    for (text, want) in cases {
        damage(Damage::RangesText(text));
        corrupt(&mut *r, want);
        assert_eq!(
            r.sealed_ranges(JOB, "1m", Millis(60_000)).unwrap(),
            Some(sealed("1m", 60_000)),
            "the other instance reads"
        );
        assert_eq!(
            r.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(),
            [Millis(0), Millis(60_000)]
        );
    }
    damage(Damage::RangesText("[]"));
    let mut empty = sealed("1m", 0);
    empty.ranges = Ok(Vec::new());
    assert_eq!(
        r.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
        Some(empty),
        "no partitions is valid"
    );
    for end in [0, -1] {
        damage(Damage::RangesEnd(end));
        corrupt(&mut *r, &format!("window_end {end} ms is not after its start"));
    }
    let mut repair = batch(2, vec![]);
    repair.ranges = vec![sealed("1m", 0)];
    assert!(w.commit(&repair).unwrap());
    assert_eq!(
        r.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
        Some(sealed("1m", 0)),
        "repaired"
    );
}

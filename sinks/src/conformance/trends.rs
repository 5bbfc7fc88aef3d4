//! Trend lists (`rank_by = "trend"`): every item's trend facts (its history of counts, and so
//! its baseline and score) written and read back with the list. The stores that keep them join
//! with [`trend_suite!`](crate::conformance::trend_suite).

use super::subject::Subject;
use crate::error::SinkError;
use crate::test_fixtures::{batch, list, list_with, trending, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{RankedItem, TrendFacts};
use hotlist_operators::time::Millis;

/// Revision `revision` of the `1m` instance at `start` ranking `items` (count, history) by
/// trend.
fn trend_list(start: i64, revision: u32, items: &[(&str, u64, &[u64])]) -> PublishedList {
    let mut items: Vec<RankedItem> = items
        .iter()
        .map(|(id, count, history)| RankedItem {
            item_id: (*id).into(),
            count: *count,
            trend: Some(TrendFacts {
                history: history.to_vec(),
            }),
        })
        .collect();
    items.sort_by(hotlist_operators::topk::ranked_cmp);
    list_with(start, revision, items)
}

/// A trend list and a count-ranked one commit together and read back each as it was written; a
/// new revision replaces the items and their
/// facts; histories of one count and of large counts (a baseline near `i64::MAX`) round-trip
/// exactly; a list whose baseline does not fit an `i64` is refused as a permanent
/// [`SinkError::Invalid`] and changes nothing.
pub(crate) fn trend_lists_round_trip(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    let first = trending(0, 1);
    assert!(w.commit(&batch(1, vec![first.clone(), list(60_000, 1, 2)])).unwrap());
    let got = r.instance(JOB, "1m", Millis(0)).unwrap();
    assert_eq!(got, Some(StoredList::from(first)));
    assert!(got.unwrap().items.iter().all(|i| i.trend.is_some()));
    let counted = r.latest(JOB, "1m").unwrap().expect("the count-ranked list");
    assert_eq!(counted, StoredList::from(list(60_000, 1, 2)));
    assert!(counted.items.iter().all(|i| i.trend.is_none()));

    let big = i64::MAX as u64 / 2;
    let revised = trend_list(
        0,
        3,
        &[
            ("steady", 10, &[9, 9, 9]),
            ("huge", big, &[big - 1, 1, 1]),
            ("zero", 0, &[0, 0, 0]),
        ],
    );
    let short = trend_list(120_000, 1, &[("one", 7, &[2]), ("two", 3, &[1])]);
    assert!(w.commit(&batch(2, vec![revised.clone(), short.clone()])).unwrap());
    s.assert_stored_rows(0, &[(1, 3), (2, 3), (3, 3)]);
    assert_eq!(
        r.instance(JOB, "1m", Millis(0)).unwrap(),
        Some(StoredList::from(revised.clone()))
    );
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(short)));

    let overflowing = trend_list(0, 4, &[("over", 1, &[i64::MAX as u64, 1])]);
    let err = w.commit(&batch(3, vec![overflowing])).unwrap_err();
    assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
    assert!(!err.retryable());
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(2));
    assert_eq!(
        r.instance(JOB, "1m", Millis(0)).unwrap(),
        Some(StoredList::from(revised))
    );
}

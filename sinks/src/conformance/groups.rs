//! Per-group lists: lists of their own, by (window, group, start).

use super::subject::Subject;
use crate::error::SinkError;
use crate::test_fixtures::{batch, list, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::group::GroupKey;
use hotlist_operators::time::Millis;

/// `list` in group `group` (a canonical key).
fn in_group(
    mut l: hotlist_operators::message::PublishedList,
    group: &str,
) -> hotlist_operators::message::PublishedList {
    l.group = GroupKey::from_stored(group.to_string());
    l
}

/// Per-group lists: a window with `by` keeps its dims; the global list and each group of one
/// instance are lists of their own (written, revised and read by (window, group, start)); the
/// groups of the latest instance are listed, `(other)` among them; reset forgets them.
pub(crate) fn groups_are_lists_of_their_own(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    let mut specs = windows();
    specs[1].key.by = vec!["country".into()];
    w.prepare(JOB, &specs).unwrap();
    assert_eq!(r.windows(JOB).unwrap()[1].by, vec!["country".to_string()]);
    assert_eq!(r.windows(JOB).unwrap()[0].by, Vec::<String>::new());
    let (us, de) = (
        GroupKey::from_pairs([("country", "US")]),
        GroupKey::from_pairs([("country", "DE")]),
    );
    assert_eq!(r.groups(JOB, "1m").unwrap(), None);
    let b = batch(
        1,
        vec![
            list(0, 1, 1),
            in_group(list(0, 1, 2), us.as_str()),
            in_group(list(0, 2, 3), us.as_str()),
            in_group(list(0, 1, 3), de.as_str()),
            in_group(list(0, 1, 1), "(other)"),
        ],
    );
    assert!(w.commit(&b).unwrap());
    // each group's highest revision, its own rows; the global list untouched by the groups'
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 1))));
    let got = r.latest_of(JOB, "1m", &us).unwrap();
    assert_eq!(got, Some(StoredList::from(in_group(list(0, 2, 3), us.as_str()))));
    let got = r.instance_of(JOB, "1m", &de, Millis(0)).unwrap();
    assert_eq!(got, Some(StoredList::from(in_group(list(0, 1, 3), de.as_str()))));
    assert_eq!(
        r.latest_of(JOB, "1m", &GroupKey::other()).unwrap().unwrap().items.len(),
        1
    );
    let fr = GroupKey::from_pairs([("country", "FR")]);
    assert_eq!(r.latest_of(JOB, "1m", &fr).unwrap(), None);
    let all = |g: &[&GroupKey]| g.iter().map(|g| (*g).clone()).collect::<Vec<_>>();
    let want = all(&[&GroupKey::global(), &GroupKey::other(), &de, &us]);
    assert_eq!(r.groups(JOB, "1m").unwrap(), Some((Millis(0), want)));
    // a later instance of one group: the groups listed are the latest instance's; a revision of
    // US replaces US's rows only
    let b = batch(
        2,
        vec![
            in_group(list(30_000, 1, 2), us.as_str()),
            in_group(list(0, 3, 1), us.as_str()),
        ],
    );
    assert!(w.commit(&b).unwrap());
    assert_eq!(r.groups(JOB, "1m").unwrap(), Some((Millis(30_000), vec![us.clone()])));
    assert_eq!(r.latest_of(JOB, "1m", &us).unwrap().unwrap().start, Millis(30_000));
    assert_eq!(r.latest_of(JOB, "1m", &de).unwrap().unwrap().items.len(), 3);
    if s.history.is_some() {
        let got = r.instance_of(JOB, "1m", &us, Millis(0)).unwrap();
        assert_eq!(got, Some(StoredList::from(in_group(list(0, 3, 1), us.as_str()))));
    }
    // a group key that is not canonical is invalid input
    let bad = batch(3, vec![in_group(list(0, 1, 1), "country")]);
    let e = w.commit(&bad).map(|_| ()).unwrap_err();
    assert!(matches!(e, SinkError::Invalid { .. }), "{e}");
    w.reset(JOB).unwrap();
    assert_eq!(r.groups(JOB, "1m").unwrap(), None);
    assert_eq!(r.latest_of(JOB, "1m", &de).unwrap(), None);
}

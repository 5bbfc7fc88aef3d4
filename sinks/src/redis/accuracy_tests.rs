//! Redis-only tests of what a list says it is, in its meta hash: the accuracy fields, the
//! certificate's, and the commit script refusing impossible ones.

use super::tests::Fixture;
use super::*;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{approximate, batch, certified, list, sketch_check, JOB};
use crate::types::StoredList;
use std::collections::HashMap;

/// A list's accuracy is in its meta hash: `exact` and `error_bound` always, the sketch check's
/// four fields when it has one (a new revision without one leaves none behind). A meta hash
/// the previous version wrote (none of these fields) reads as an exact list; one with some of
/// them but not `exact`, or `exact` without `error_bound`, is corrupt.
#[test]
fn accuracy_fields_of_the_meta_hash() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    let sketched = approximate(list(0, 1, 3), 37, Some(sketch_check(2, 3)));
    assert!(store.commit(&batch(1, vec![sketched])).unwrap());
    let mkey = fx.key("1m:latest:meta");
    let meta = |fx: &mut Fixture| -> HashMap<String, String> {
        ::redis::cmd("HGETALL").arg(&mkey).query(&mut fx.raw).unwrap()
    };
    let fields = [
        ("exact", "0"),
        ("error_bound", "37"),
        ("sketch_found", "2"),
        ("sketch_of", "3"),
        ("sketch_max_overcount", "5"),
        ("sketch_total_overcount", "9"),
    ];
    let m = meta(&mut fx);
    for (field, value) in fields {
        assert_eq!(m.get(field).map(String::as_str), Some(value), "{field} in {m:?}");
    }
    assert!(store.commit(&batch(2, vec![list(0, 2, 3)])).unwrap());
    let m = meta(&mut fx);
    assert_eq!((m["exact"].as_str(), m["error_bound"].as_str()), ("1", "0"));
    assert!(!m.contains_key("sketch_of"), "no check left behind: {m:?}");

    // As the previous version wrote it: no accuracy fields at all.
    let names: Vec<&str> = fields.iter().map(|f| f.0).collect();
    ::redis::cmd("HDEL").arg(&mkey).arg(&names).exec(&mut fx.raw).unwrap();
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 2, 3))));
    let corrupt = |store: &mut RedisStore, want: &str| {
        let err = store.latest(JOB, "1m").unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains(want), "{err} (want {want:?})");
    };
    let set = |fx: &mut Fixture, field: &str, value: &str| {
        ::redis::cmd("HSET")
            .arg(&mkey)
            .arg(field)
            .arg(value)
            .exec(&mut fx.raw)
            .unwrap();
    };
    set(&mut fx, "sketch_of", "3");
    corrupt(&mut store, "has field sketch_of but no field exact");
    ::redis::cmd("HDEL")
        .arg(&mkey)
        .arg("sketch_of")
        .exec(&mut fx.raw)
        .unwrap();
    set(&mut fx, "exact", "1");
    corrupt(&mut store, "has field exact but no field error_bound");
    set(&mut fx, "error_bound", "zero");
    corrupt(&mut store, "field error_bound is not an integer: \"zero\"");
    set(&mut fx, "error_bound", "0");
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 2, 3))));
}

/// The commit script checks each list's accuracy arguments (the certificate's too) as a reader
/// would, and its `rank_by`, and refuses the whole commit, writing nothing, when one is
/// impossible (a client that does not match it).
#[test]
fn the_commit_script_refuses_impossible_accuracy() {
    let mut fx = Fixture::new();
    let (ckey, okey, zkey, mkey) = (
        fx.key("commit"),
        fx.key("owner"),
        fx.key("1m:latest"),
        fx.key("1m:latest:meta"),
    );
    let no_certificate = ["", "", ""];
    let cases: [(&str, [&str; 6], [&str; 3], &str); 15] = [
        ("open", ["2", "0", "", "", "", ""], no_certificate, ""),
        ("open", ["1", "5", "", "", "", ""], no_certificate, ""),
        ("open", ["0", "-1", "", "", "", ""], no_certificate, ""),
        ("open", ["0", "1", "2", "", "5", "9"], no_certificate, ""),
        ("open", ["0", "1", "4", "3", "5", "9"], no_certificate, ""),
        ("open", ["0", "1", "2", "3", "-5", "9"], no_certificate, ""),
        ("final", ["0", "37", "", "", "", ""], ["40", "17", "2"], ""),
        ("closed", ["1", "0", "", "", "", ""], ["40", "17", "2"], ""),
        ("final", ["1", "0", "", "", "", ""], ["0", "17", "2"], ""),
        ("final", ["1", "0", "", "", "", ""], ["40", "-1", "2"], ""),
        ("final", ["1", "0", "", "", "", ""], ["40", "17", "0"], ""),
        ("final", ["1", "0", "", "", "", ""], ["40", "", "2"], ""),
        ("final", ["1", "0", "", "", "", ""], ["x", "17", "2"], ""),
        ("open", ["1", "0", "", "", "", ""], no_certificate, "count"),
        ("open", ["1", "0", "", "", "", ""], no_certificate, "Trend"),
    ];
    for (state, accuracy, certificate, rank_by) in cases {
        let mut call = super::write::COMMIT_SCRIPT.prepare_invoke();
        call.key(&ckey)
            .key(&okey)
            .key(&zkey)
            .key(&mkey)
            .key(fx.key("1m:groups"))
            .key(fx.key("1m:latest:trend"));
        call.arg(1).arg(0).arg(0).arg(1).arg("");
        call.arg("1m")
            .arg(0)
            .arg(60_000)
            .arg(1)
            .arg(state)
            .arg(i64::from(state == "final"))
            .arg(0)
            .arg(0);
        for a in accuracy {
            call.arg(a);
        }
        call.arg(0).arg("");
        for a in certificate {
            call.arg(a);
        }
        call.arg(rank_by);
        call.key(fx.key("hot")).arg("");
        let err = call.invoke::<i64>(&mut fx.raw).unwrap_err();
        assert_eq!(
            err.code(),
            Some("HOTLIST_INVALID"),
            "{accuracy:?} {certificate:?} {rank_by:?}: {err}"
        );
        assert!(
            fx.keys().is_empty(),
            "{accuracy:?} {certificate:?} {rank_by:?}: nothing written"
        );
    }
}

/// A certified list's certificate is in its meta hash (`certificate_threshold`,
/// `certificate_counted`, `certificate_passes`); a new revision without one leaves none behind.
#[test]
fn certificate_fields_of_the_meta_hash() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    assert!(store.commit(&batch(1, vec![certified(list(0, 3, 3), 40, 2)])).unwrap());
    let mkey = fx.key("1m:latest:meta");
    let meta = |fx: &mut Fixture| -> HashMap<String, String> {
        ::redis::cmd("HGETALL").arg(&mkey).query(&mut fx.raw).unwrap()
    };
    let m = meta(&mut fx);
    for (field, value) in [
        ("exact", "1"),
        ("error_bound", "0"),
        ("state", "final"),
        ("certificate_threshold", "40"),
        ("certificate_counted", "17"),
        ("certificate_passes", "2"),
    ] {
        assert_eq!(m.get(field).map(String::as_str), Some(value), "{field} in {m:?}");
    }
    assert!(store.commit(&batch(2, vec![list(0, 4, 3)])).unwrap());
    let m = meta(&mut fx);
    assert!(
        !m.keys().any(|f| f.starts_with("certificate_")),
        "no certificate left behind: {m:?}"
    );
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 4, 3))));
}

//! Redis-only tests of what is stored: the windows document (written and parsed strictly),
//! what Redis does not keep, invalid input and corrupt data, a bloated list.

use super::encode::parse_windows;
use super::tests::{test_url, Fixture};
use super::*;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, list, not_json, windows, JOB};
use crate::types::StoredWindow;
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use std::collections::HashMap;

/// The windows document is the documented JSON, round-trips any name without ':', and is
/// reported as corrupt, naming its key, when damaged.
#[test]
fn windows_document() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    let m = Span::from_millis;
    let mut windows = windows();
    windows.push(WindowSpec::tumbling("q\"\\/\u{1}\u{8}ü😀", m(86_400_000), 1));
    store.prepare(JOB, &windows).unwrap();
    assert_eq!(
        store.windows(JOB).unwrap(),
        windows.iter().map(StoredWindow::from).collect::<Vec<_>>()
    );
    store.prepare(JOB, &windows[1..2]).unwrap();
    let json: String = ::redis::cmd("GET").arg(fx.key("windows")).query(&mut fx.raw).unwrap();
    assert_eq!(json, r#"[{"name":"1m","size_ms":60000,"slide_ms":30000,"k":3}]"#);
    let err = store
        .prepare(JOB, &[WindowSpec::tumbling("a:b", m(1000), 1)])
        .unwrap_err();
    assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
    assert_eq!(store.windows(JOB).unwrap().len(), 1);
    // A damaged document is reported as corrupt, naming the key.
    ::redis::cmd("SET")
        .arg(fx.key("windows"))
        .arg("[{\"name\":1}]")
        .exec(&mut fx.raw)
        .unwrap();
    let err = store.windows(JOB).unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(&fx.key("windows")), "{err}");
}

/// The reader takes any JSON spelling of the document (white space, escapes, fields in any
/// order, unknown fields), as earlier versions wrote it by hand, and refuses anything else.
#[test]
fn windows_documents_parse_strictly() {
    let ok = parse_windows(
        " [ {\"k\" : 2, \"extra\": \"x\", \"name\":\"a\\u00e9\\ud83d\\ude00\\n\\u0008\", \"size_ms\":10,\"slide_ms\":5} ] ",
    )
    .unwrap();
    assert_eq!(
        ok,
        vec![StoredWindow {
            name: "aé😀\n\u{8}".into(),
            size: Span::from_millis(10),
            slide: Span::from_millis(5),
            k: 2,
            by: Vec::new(),
        }]
    );
    assert!(parse_windows("[]").unwrap().is_empty());
    for bad in [
        "",
        "[",
        "[{}]",
        "[{\"name\":\"a\",\"size_ms\":-1,\"slide_ms\":1,\"k\":1}]",
        "[{\"name\":\"a\",\"size_ms\":1.5,\"slide_ms\":1,\"k\":1}]",
        "[{\"name\":\"a\",\"name\":\"b\",\"size_ms\":1,\"slide_ms\":1,\"k\":1}]",
        "[{\"name\":\"a\",\"size_ms\":9223372036854775808,\"slide_ms\":1,\"k\":1}]",
        "[{\"name\":\"\\ud83d\",\"size_ms\":1,\"slide_ms\":1,\"k\":1}]",
        "[] x",
    ] {
        assert!(parse_windows(bad).is_err(), "{bad}");
    }
}

#[test]
fn last_commit_and_dead_letters_ignored() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    assert_eq!(store.last_commit(JOB).unwrap(), None);
    let mut b = batch(7, vec![]);
    b.watermark = Millis(-5);
    b.dead_letters = vec![not_json(1, &[0xff])];
    let before = Millis::now().0;
    assert!(store.commit(&b).unwrap());
    assert_eq!(store.last_commit(JOB).unwrap(), Some((7, Millis(-5))));
    let commit: HashMap<String, i64> = ::redis::cmd("HGETALL")
        .arg(fx.key("commit"))
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(commit.len(), 3);
    assert_eq!((commit["epoch"], commit["watermark"]), (7, -5));
    assert!(commit["committed_at"] >= before);
    // Only the commit hash: Redis holds no dead letters.
    assert_eq!(fx.keys(), vec![fx.key("commit")]);
    b.epoch = 8;
    b.watermark = Millis::MAX;
    assert!(store.commit(&b).unwrap());
    assert_eq!(store.last_commit(JOB).unwrap(), Some((8, Millis::MAX)));
}

#[test]
fn invalid_input_and_corrupt_data() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    assert!(store.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    let invalid_batches = [
        {
            let mut l = list(0, 2, 1);
            l.items[0].count = MAX_EXACT_COUNT + 1;
            batch(2, vec![l])
        },
        {
            let mut l = list(0, 2, 2);
            l.items[1].item_id = l.items[0].item_id.clone();
            batch(2, vec![l])
        },
        {
            let mut l = list(0, 2, 1);
            l.window = "1:m".into();
            batch(2, vec![l])
        },
        {
            let mut b = batch(2, vec![]);
            b.job = "a:b".into();
            b
        },
    ];
    for b in &invalid_batches {
        let err = store.commit(b).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(!err.retryable());
    }
    assert_eq!(store.committed_epoch(JOB).unwrap(), Some(1));
    assert!(matches!(store.latest("a:b", "1m"), Err(SinkError::Invalid { .. })));
    // item_count disagreeing with the members.
    ::redis::cmd("HSET")
        .arg(fx.key("1m:latest:meta"))
        .arg("item_count")
        .arg(4)
        .exec(&mut fx.raw)
        .unwrap();
    let err = store.latest(JOB, "1m").unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("item_count is 4"), "{err}");
    assert!(!err.retryable());
    // A key of the wrong type: the commit script refuses before writing anything.
    ::redis::cmd("SET")
        .arg(fx.key("5m:latest"))
        .arg("x")
        .exec(&mut fx.raw)
        .unwrap();
    let mut five = list(0, 1, 1);
    five.window = "5m".into();
    let err = store.commit(&batch(2, vec![list(60_000, 1, 1), five])).unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("is a string, not a zset"), "{err}");
    assert_eq!(store.committed_epoch(JOB).unwrap(), Some(1));
    assert_eq!(
        store.latest(JOB, "1m").unwrap_err().to_string(),
        err_string_of_count(&fx)
    );
}

/// A sorted set bloated past the window's `k` is read only up to `k + 1` members and reported
/// with its true size; a negative item count is corrupt too.
#[test]
fn a_bloated_list_is_reported_not_read_whole() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    store.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    assert!(store.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    let mut zadd = ::redis::cmd("ZADD");
    zadd.arg(fx.key("1m:latest"));
    for i in 0..100_000 {
        zadd.arg(1).arg(format!("bloat{i}"));
    }
    zadd.exec(&mut fx.raw).unwrap();
    let err = store.latest(JOB, "1m").unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("has 100003 members but"), "{err}");
    ::redis::cmd("HSET")
        .arg(fx.key("1m:latest:meta"))
        .arg("item_count")
        .arg(-1)
        .exec(&mut fx.raw)
        .unwrap();
    let err = store.latest(JOB, "1m").unwrap_err();
    assert!(err.to_string().ends_with("header item_count -1 is negative"), "{err}");
}

/// The message `latest` gives for the damaged `1m` meta above (unchanged by the refused
/// commit).
fn err_string_of_count(fx: &Fixture) -> String {
    format!(
        "corrupt data in {}: job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z: \
         {} has 3 members but {} item_count is 4",
        test_url(),
        fx.key("1m:latest"),
        fx.key("1m:latest:meta")
    )
}

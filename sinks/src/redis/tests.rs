//! Redis-only tests (the key layout, latest-only semantics, scores, the windows document,
//! corrupt data, credentials in messages, reconnecting, error classes), and the store
//! conformance suite on a key prefix of its own.
//!
//! These tests need a real Redis (default `redis://127.0.0.1:6379/`, or
//! `HOTLIST_TEST_REDIS_URL`); they fail, never skip, when it is unreachable. Each test uses its
//! own random key prefix and deletes its keys when it ends, even on failure.

use super::conn::redact_url;
use super::encode::parse_windows;
use super::error::{redis_err, retry_class};
use super::read::sort_by_rank;
use super::*;
use crate::conformance::{Damage, Subject};
use crate::error::Retry;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{approximate, batch, certified, list, not_json, server_url, sketch_check, windows, JOB};
use crate::types::{StoredList, StoredWindow};
use ::redis::{ErrorKind, RedisError, Value};
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The test server: `HOTLIST_TEST_REDIS_URL`, or the local one.
fn test_url() -> String {
    server_url("HOTLIST_TEST_REDIS_URL", "redis://127.0.0.1:6379/")
}

/// A random key prefix and a raw connection; deletes every key under the prefix on drop.
struct Fixture {
    prefix: String,
    raw: Connection,
}

impl Fixture {
    fn new() -> Fixture {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let prefix = format!(
            "hotlist-test-{}-{nanos:x}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let url = test_url();
        let raw = Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .unwrap_or_else(|e| {
                panic!(
                    "these tests need a Redis server at {url} but it is not reachable ({e}); start one with \
                     `redis-server --daemonize yes` (or `docker run -d -p 6379:6379 redis:7`), or set \
                     HOTLIST_TEST_REDIS_URL to a running server"
                )
            });
        Fixture { prefix, raw }
    }

    fn store(&self) -> RedisStore {
        RedisStore::connect(&test_url(), &self.prefix).unwrap()
    }

    fn keys(&mut self) -> Vec<String> {
        let mut keys = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{}:*", self.prefix))
                .arg("COUNT")
                .arg(1000)
                .query(&mut self.raw)
                .unwrap();
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys
    }

    fn key(&self, rest: &str) -> String {
        format!("{}:{JOB}:{rest}", self.prefix)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let mut cursor = 0u64;
        loop {
            let Ok((next, keys)) = ::redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{}:*", self.prefix))
                .arg("COUNT")
                .arg(1000)
                .query::<(u64, Vec<String>)>(&mut self.raw)
            else {
                return;
            };
            if !keys.is_empty() {
                let _ = ::redis::cmd("DEL").arg(&keys).exec(&mut self.raw);
            }
            if next == 0 {
                return;
            }
            cursor = next;
        }
    }
}

/// A key prefix of its own (its keys deleted with the subject); every handle is a connection
/// of its own. Redis keeps only each window's latest list and no dead letters.
fn subject() -> Subject {
    let fx = Fixture::new();
    let (w, r, d) = (fx.prefix.clone(), fx.prefix.clone(), fx.prefix.clone());
    Subject {
        writer: Box::new(move || Box::new(RedisStore::connect(&test_url(), &w).unwrap())),
        reader: Box::new(move || Box::new(RedisStore::connect(&test_url(), &r).unwrap())),
        history: None,
        stored_rows: None,
        damage: Some(Box::new(move |what| damage(&d, what))),
        locks: false,
        place: Box::new(fx),
    }
}

/// Writes a [`Damage`] with plain Redis commands under `prefix`.
fn damage(prefix: &str, what: Damage) {
    let mut c = Client::open(test_url().as_str())
        .and_then(|c| c.get_connection())
        .unwrap();
    let key = |rest: &str| format!("{prefix}:{JOB}:{rest}");
    match what {
        Damage::ItemCount(n) => ::redis::cmd("HSET").arg(key("1m:latest:meta")).arg("item_count").arg(n).exec(&mut c),
        Damage::WindowK(k) => {
            // The fixtures' windows() with 1m's k replaced.
            let doc = format!(
                r#"[{{"name":"5m","size_ms":300000,"slide_ms":300000,"k":10}},{{"name":"1m","size_ms":60000,"slide_ms":30000,"k":{k}}}]"#
            );
            ::redis::cmd("SET").arg(key("windows")).arg(doc).exec(&mut c)
        }
        Damage::CommitWatermark(ms) => ::redis::cmd("HSET").arg(key("commit")).arg("watermark").arg(ms).exec(&mut c),
        Damage::Accuracy { exact, error_bound } => ::redis::cmd("HSET")
            .arg(key("1m:latest:meta"))
            .arg("exact")
            .arg(i64::from(exact))
            .arg("error_bound")
            .arg(error_bound)
            .exec(&mut c),
        Damage::SketchCheck(values) => {
            let fields = ["sketch_found", "sketch_of", "sketch_max_overcount", "sketch_total_overcount"];
            fields.iter().zip(values).try_for_each(|(field, v)| match v {
                Some(v) => ::redis::cmd("HSET").arg(key("1m:latest:meta")).arg(field).arg(v).exec(&mut c),
                None => ::redis::cmd("HDEL").arg(key("1m:latest:meta")).arg(field).exec(&mut c),
            })
        }
        Damage::Certificate(values) => {
            let fields = crate::read_checks::CERTIFICATE_FIELDS;
            fields.iter().zip(values).try_for_each(|(field, v)| match v {
                Some(v) => ::redis::cmd("HSET").arg(key("1m:latest:meta")).arg(field).arg(v).exec(&mut c),
                None => ::redis::cmd("HDEL").arg(key("1m:latest:meta")).arg(field).exec(&mut c),
            })
        }
        Damage::State(state) => ::redis::cmd("HSET")
            .arg(key("1m:latest:meta"))
            .arg("state")
            .arg(state.as_str())
            .arg("final")
            .arg(i64::from(state == hotlist_operators::record::ListState::Final))
            .exec(&mut c),
        Damage::RowAccuracy { .. } => unreachable!("Redis stores no rows (stored_rows is None)"),
        Damage::HotKeyCount(n) => ::redis::cmd("HSET").arg(key("hot")).arg("key_count").arg(n).exec(&mut c),
    }
    .unwrap();
}

crate::conformance::suite!(subject);

#[test]
fn latest_list_round_trips_with_ties_in_the_ranking() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    let mut l = list(120_000, 2, 0);
    // The ranking: count descending, then item id ascending bytewise ("Z" < "a" < "b" < "ä").
    l.items = [
        ("top", 9),
        ("Zed", 5),
        ("a", 5),
        ("b", 5),
        ("ä", 5),
        ("x", 1),
        ("y", 1),
        ("", 0),
    ]
    .iter()
    .map(|&(id, count)| RankedItem {
        item_id: id.into(),
        count,
    })
    .collect();
    assert_eq!(store.latest(JOB, "1m").unwrap(), None);
    assert!(store.commit(&batch(1, vec![l.clone()])).unwrap());
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(l.clone())));
    // A second reader on its own connection sees the same.
    assert_eq!(fx.store().latest(JOB, "1m").unwrap(), Some(StoredList::from(l.clone())));
    assert_eq!(
        store.instance(JOB, "1m", Millis(120_000)).unwrap(),
        Some(StoredList::from(l))
    );
    assert_eq!(store.instance(JOB, "1m", Millis(60_000)).unwrap(), None);
    assert_eq!(store.latest(JOB, "5m").unwrap(), None);
    assert_eq!(store.latest("other", "1m").unwrap(), None);
    // The key layout the module documents.
    let meta: HashMap<String, String> = ::redis::cmd("HGETALL")
        .arg(fx.key("1m:latest:meta"))
        .query(&mut fx.raw)
        .unwrap();
    let want: HashMap<String, String> = [
        ("window", "1m"),
        ("window_start", "120000"),
        ("window_end", "180000"),
        ("revision", "2"),
        ("state", "open"),
        ("final", "0"),
        ("as_of", "1700000000000"),
        ("watermark", "120001"),
        ("item_count", "8"),
        ("epoch", "1"),
        ("exact", "1"),
        ("error_bound", "0"),
        ("group", ""),
    ]
    .iter()
    .map(|&(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(meta, want);
    let score: f64 = ::redis::cmd("ZSCORE")
        .arg(fx.key("1m:latest"))
        .arg("top")
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(score, 9.0);
    let keys = fx.keys();
    let want = vec![
        fx.key("1m:groups"),
        fx.key("1m:latest"),
        fx.key("1m:latest:meta"),
        fx.key("commit"),
    ];
    assert_eq!(keys, want);
}

#[test]
fn a_newer_instance_replaces_an_older_instances_correction_does_not() {
    let fx = Fixture::new();
    let mut store = fx.store();
    assert!(store.commit(&batch(1, vec![list(0, 1, 4)])).unwrap());
    // A new revision of the same instance replaces it.
    assert!(store.commit(&batch(2, vec![list(0, 2, 3)])).unwrap());
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 2, 3))));
    // A newer instance replaces it.
    assert!(store.commit(&batch(3, vec![list(60_000, 1, 5)])).unwrap());
    assert_eq!(
        store.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(list(60_000, 1, 5)))
    );
    // A correction of the older instance does not clobber the latest list, but the commit
    // itself goes through.
    assert!(store.commit(&batch(4, vec![list(0, 7, 2)])).unwrap());
    assert_eq!(
        store.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(list(60_000, 1, 5)))
    );
    assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap(), None);
    assert_eq!(store.committed_epoch(JOB).unwrap(), Some(4));
    // Within one batch: per window, the greatest start wins, and its highest revision.
    let mut five = list(0, 1, 2);
    five.window = "5m".into();
    let b = batch(
        5,
        vec![
            list(180_000, 3, 2),
            list(120_000, 9, 9),
            five.clone(),
            list(180_000, 2, 6),
        ],
    );
    assert!(store.commit(&b).unwrap());
    assert_eq!(
        store.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(list(180_000, 3, 2)))
    );
    assert_eq!(store.latest(JOB, "5m").unwrap(), Some(StoredList::from(five)));
    // Negative starts compare as numbers, not strings.
    let mut neg = list(-120_000, 1, 1);
    neg.window = "neg".into();
    assert!(store.commit(&batch(6, vec![neg])).unwrap());
    let mut later = list(-60_000, 1, 2);
    later.window = "neg".into();
    assert!(store.commit(&batch(7, vec![later.clone()])).unwrap());
    let mut earlier = list(-180_000, 1, 3);
    earlier.window = "neg".into();
    assert!(store.commit(&batch(8, vec![earlier])).unwrap());
    assert_eq!(store.latest(JOB, "neg").unwrap(), Some(StoredList::from(later)));
}

#[test]
fn replacing_with_fewer_members_leaves_no_stale_ones() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    assert!(store.commit(&batch(1, vec![list(0, 1, 2500)])).unwrap());
    assert_eq!(store.latest(JOB, "1m").unwrap().unwrap().items.len(), 2500);
    assert!(store.commit(&batch(2, vec![list(0, 2, 3)])).unwrap());
    let zcard: u64 = ::redis::cmd("ZCARD")
        .arg(fx.key("1m:latest"))
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(zcard, 3);
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 2, 3))));
    // An empty list: no sorted set at all, the meta says 0 items.
    assert!(store.commit(&batch(3, vec![list(0, 3, 0)])).unwrap());
    let got = store.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!((got.revision, got.state, got.items.len()), (3, ListState::Final, 0));
    let exists: u64 = ::redis::cmd("EXISTS")
        .arg(fx.key("1m:latest"))
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(exists, 0);
}

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
/// would and refuses the whole commit, writing nothing, when one is impossible (a client that
/// does not match it).
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
    let cases: [(&str, [&str; 6], [&str; 3]); 13] = [
        ("open", ["2", "0", "", "", "", ""], no_certificate),
        ("open", ["1", "5", "", "", "", ""], no_certificate),
        ("open", ["0", "-1", "", "", "", ""], no_certificate),
        ("open", ["0", "1", "2", "", "5", "9"], no_certificate),
        ("open", ["0", "1", "4", "3", "5", "9"], no_certificate),
        ("open", ["0", "1", "2", "3", "-5", "9"], no_certificate),
        ("final", ["0", "37", "", "", "", ""], ["40", "17", "2"]),
        ("closed", ["1", "0", "", "", "", ""], ["40", "17", "2"]),
        ("final", ["1", "0", "", "", "", ""], ["0", "17", "2"]),
        ("final", ["1", "0", "", "", "", ""], ["40", "-1", "2"]),
        ("final", ["1", "0", "", "", "", ""], ["40", "17", "0"]),
        ("final", ["1", "0", "", "", "", ""], ["40", "", "2"]),
        ("final", ["1", "0", "", "", "", ""], ["x", "17", "2"]),
    ];
    for (state, accuracy, certificate) in cases {
        let mut call = super::write::COMMIT_SCRIPT.prepare_invoke();
        call.key(&ckey)
            .key(&okey)
            .key(&zkey)
            .key(&mkey)
            .key(fx.key("1m:groups"));
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
        call.key(fx.key("hot")).arg("");
        let err = call.invoke::<i64>(&mut fx.raw).unwrap_err();
        assert_eq!(
            err.code(),
            Some("HOTLIST_INVALID"),
            "{accuracy:?} {certificate:?}: {err}"
        );
        assert!(fx.keys().is_empty(), "{accuracy:?} {certificate:?}: nothing written");
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

#[test]
fn connection_errors_are_retryable_and_hide_the_password() {
    let err = RedisStore::connect("redis://alice:s3cret@127.0.0.1:1/", "p").unwrap_err();
    assert!(err.retryable(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("connecting on redis://alice:***@127.0.0.1:1/ failed: IO "),
        "{msg}"
    );
    assert!(!msg.contains("s3cret"), "{msg}");
    assert!(!format!("{err:?}").contains("s3cret"));
    let err = RedisStore::connect("nonsense://x", "p").unwrap_err();
    assert!(!err.retryable(), "{err}");
    assert!(RedisStore::connect(&test_url(), "").is_err());
    let store = RedisStore::connect(&test_url(), DEFAULT_PREFIX).unwrap();
    assert!(!format!("{store:?}").contains("s3cret"));
    assert_eq!(store.prefix(), "hotlist");
}

#[test]
fn a_lost_connection_is_retryable_and_reestablished() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    assert!(store.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
    let id: u64 = store
        .run(|| "CLIENT ID".into(), |c| ::redis::cmd("CLIENT").arg("ID").query(c))
        .unwrap();
    ::redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .exec(&mut fx.raw)
        .unwrap();
    let err = store.latest(JOB, "1m").unwrap_err();
    assert!(err.retryable(), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "reading the latest list of job \"hotlist\" window \"1m\" on {}",
            test_url()
        )),
        "{err}"
    );
    // Retrying the same call reconnects and succeeds.
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 2))));
}

#[test]
fn ranking_breaks_ties_by_item_id_bytewise() {
    let item = |id: &str, count| RankedItem {
        item_id: id.into(),
        count,
    };
    let mut items = vec![
        item("ä", 5),
        item("b", 5),
        item("x", 1),
        item("a", 5),
        item("Zed", 5),
        item("top", 9),
    ];
    sort_by_rank(&mut items);
    let ids: Vec<&str> = items.iter().map(|i| i.item_id.as_str()).collect();
    assert_eq!(ids, ["top", "Zed", "a", "b", "ä", "x"]);
}

#[test]
fn urls_are_redacted() {
    let cases = [
        ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://user:p@ss/w@host/", "redis://user:***@host/"),
        ("rediss://user@host/", "rediss://user@host/"),
        ("redis+unix:///tmp/r.sock?db=1&pass=pw", "redis+unix:///tmp/r.sock?***"),
    ];
    for (url, want) in cases {
        assert_eq!(redact_url(url), want, "{url}");
    }
}

/// I/O failures and a busy, loading or try-again server are transient; other server errors
/// and client-side failures are permanent. The message starts with the class word.
#[test]
fn redis_errors_are_classified_by_kind() {
    let server = |reply: &str| -> RedisError {
        match ::redis::parse_redis_value(reply.as_bytes()) {
            Ok(Value::ServerError(e)) => e.into(),
            other => panic!("{reply:?} is not an error reply: {other:?}"),
        }
    };
    let io = || RedisError::from(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused"));
    for e in [
        io(),
        server("-BUSY Redis is busy\r\n"),
        server("-TRYAGAIN x\r\n"),
        server("-LOADING y\r\n"),
    ] {
        assert_eq!(retry_class(&e), Retry::Transient, "{e}");
        assert!(redis_err("redis://h/", "commit".into(), &e).retryable(), "{e}");
    }
    for e in [
        server("-ERR wrong number of arguments\r\n"),
        server("-NOPERM no\r\n"),
        server("-IOX\r\n"),
        RedisError::from((ErrorKind::UnexpectedReturnType, "type error")),
    ] {
        assert_eq!(retry_class(&e), Retry::Permanent, "{e}");
        assert!(!redis_err("redis://h/", "commit".into(), &e).retryable(), "{e}");
    }
    let msg = |e: &RedisError| redis_err("redis://h/", "commit".into(), e).to_string();
    assert_eq!(msg(&server("-ERR x\r\n")), "commit on redis://h/ failed: ERR x");
    assert!(
        msg(&io()).starts_with("commit on redis://h/ failed: IO "),
        "{}",
        msg(&io())
    );
    let client = RedisError::from((ErrorKind::UnexpectedReturnType, "type error"));
    assert!(
        msg(&client).starts_with("commit on redis://h/ failed: CLIENT "),
        "{}",
        msg(&client)
    );
    // Damage the commit script reports is corrupt data, not a Redis failure.
    let err = redis_err(
        "redis://h/",
        "commit".into(),
        &server("-HOTLIST_CORRUPT k is a string\r\n"),
    );
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert_eq!(err.to_string(), "corrupt data in redis://h/: k is a string");
}

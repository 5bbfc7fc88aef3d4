//! Redis-only tests of the key layout, latest-only semantics and scores, the fixture the other
//! Redis test files share, and the store conformance suite on a key prefix of its own. The
//! windows document and corrupt data are tested in `corrupt_tests`, a list's accuracy in
//! `accuracy_tests`, connections and errors in `connection_tests`.
//!
//! These tests need a real Redis (default `redis://127.0.0.1:6379/`, or
//! `HOTLIST_TEST_REDIS_URL`); they fail, never skip, when it is unreachable. Each test uses its
//! own random key prefix and deletes its keys when it ends, even on failure.

use super::read::sort_by_rank;
use super::*;
use crate::conformance::{Damage, Subject};
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, list, server_url, JOB};
use crate::types::StoredList;
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::time::Millis;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The test server: `HOTLIST_TEST_REDIS_URL`, or the local one.
pub(super) fn test_url() -> String {
    server_url("HOTLIST_TEST_REDIS_URL", "redis://127.0.0.1:6379/")
}

/// A random key prefix and a raw connection; deletes every key under the prefix on drop.
pub(super) struct Fixture {
    pub(super) prefix: String,
    pub(super) raw: Connection,
}

impl Fixture {
    pub(super) fn new() -> Fixture {
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

    pub(super) fn store(&self) -> RedisStore {
        RedisStore::connect(&test_url(), &self.prefix).unwrap()
    }

    pub(super) fn keys(&mut self) -> Vec<String> {
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

    pub(super) fn key(&self, rest: &str) -> String {
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
        Damage::RangesText(text) => ::redis::cmd("HSET")
            .arg(key("1m:ranges"))
            .arg(0)
            .arg(format!(r#"{{"end":60000,"ranges":{text}}}"#))
            .exec(&mut c),
        Damage::RangesEnd(ms) => {
            let value: String = ::redis::cmd("HGET").arg(key("1m:ranges")).arg(0).query(&mut c).unwrap();
            let mut doc: serde_json::Value = serde_json::from_str(&value).unwrap();
            doc["end"] = ms.into();
            ::redis::cmd("HSET")
                .arg(key("1m:ranges"))
                .arg(0)
                .arg(doc.to_string())
                .exec(&mut c)
        }
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
        trend: None,
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

#[test]
fn ranking_breaks_ties_by_item_id_bytewise() {
    let item = |id: &str, count| RankedItem {
        item_id: id.into(),
        count,
        trend: None,
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

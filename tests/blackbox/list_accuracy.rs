//! The built binary says what a list is: `hotlist query` of lists written straight into each
//! store (SQLite, PostgreSQL, Redis) marks an approximate list (`≈ … counts may be high by ≤
//! N`) and shows a sketch check's recall, in its table and in `--json` (`exact`, `error_bound`,
//! `sketch_check`); a plain exact list gets neither. (The job's sketch windows fill these
//! fields; the stores, the API and `query` only carry them.)

use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, RankedItem, SketchCheck};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{CommitBatch, PostgresStore, RedisStore, SinkStore, SqliteStore};
use hotlist_tests::run_hotlist;
use serde_json::{json, Value};
use std::path::Path;

const JOB: &str = "accuracy";

/// The windows the lists are committed for.
fn windows() -> Vec<WindowSpec> {
    vec![
        WindowSpec::tumbling("1m", Span::from_millis(60_000), 10),
        WindowSpec::tumbling("5m", Span::from_millis(300_000), 10),
        WindowSpec::tumbling("1h", Span::from_millis(3_600_000), 10),
    ]
}

/// The list of `window` at 0: ten items, then what it says it is.
fn list(window: &str, exact: bool, error_bound: u64, sketch_check: Option<SketchCheck>) -> PublishedList {
    let size = windows().iter().find(|w| w.name == window).expect("a window").size;
    PublishedList {
        group: Default::default(),
        window: window.into(),
        start: Millis(0),
        end: Millis(size.as_i64()),
        revision: 1,
        state: ListState::Closed,
        watermark: Millis(size.as_i64()),
        as_of: Millis(1_700_000_000_000),
        items: (0..10)
            .map(|i| RankedItem {
                item_id: format!("item-{i}").into(),
                count: 1000 - i,
                trend: None,
            })
            .collect(),
        exact,
        error_bound,
        sketch_check,
        certificate: None,
    }
}

/// Commits `5m` approximate (≤ 37), `1m` exact with a sketch check (9 of 10 found, over-counts
/// of 5 at most and 12 in all) and `1h` plain exact.
fn fill(store: &mut dyn SinkStore) {
    store.prepare(JOB, &windows()).expect("prepare");
    let check = SketchCheck {
        found: 9,
        of: 10,
        max_overcount: 5,
        total_overcount: 12,
    };
    let batch = CommitBatch {
        job: JOB.into(),
        epoch: 1,
        watermark: Millis(300_000),
        lists: vec![
            list("5m", false, 37, None),
            list("1m", true, 0, Some(check)),
            list("1h", true, 0, None),
        ],
        dead_letters: vec![],
        hot_keys: Vec::new(),
        ranges: Vec::new(),
    };
    assert!(store.commit(&batch).expect("commit"), "epoch 1 committed");
}

/// `hotlist query` of `window` with the config in `dir`: its table, and its `--json`.
fn query(dir: &Path, window: &str) -> (String, Value) {
    let args = ["query", "--config", "hotlist.toml", "--window", window];
    let table = String::from_utf8(run_hotlist(dir, &args, true).stdout).expect("utf-8");
    let out = run_hotlist(dir, &[&args[..], &["--json"]].concat(), true);
    let json = serde_json::from_slice(&out.stdout).expect("query --json prints JSON");
    (table, json)
}

/// What `query` says of each list, on the store `sink` (a `[sink]` table) that `fill` wrote.
fn check_queries(dir: &Path, sink: &str) {
    let config = format!("[job]\nid = \"{JOB}\"\n[source]\nkind = \"generator\"\n{sink}");
    std::fs::write(dir.join("hotlist.toml"), config).expect("write config");

    let (table, v) = query(dir, "5m");
    assert!(
        table.contains("\n≈ approximate: counts may be high by ≤ 37\n"),
        "{table}"
    );
    assert!(!table.contains("sketch check"), "{table}");
    assert_eq!(
        (v["exact"].as_bool(), v["error_bound"].as_u64()),
        (Some(false), Some(37)),
        "{v}"
    );
    assert!(v.get("sketch_check").is_none(), "{v}");
    assert_eq!(v["items"][0], json!({"item_id": "item-0", "count": 1000}));

    let (table, v) = query(dir, "1m");
    assert!(!table.contains('≈'), "{table}");
    assert!(
        table.contains("\nsketch check: recall 0.900 (9/10)  over-count max 5  mean 1.2\n"),
        "{table}"
    );
    assert_eq!(
        (v["exact"].as_bool(), v["error_bound"].as_u64()),
        (Some(true), Some(0)),
        "{v}"
    );
    let want = json!({"recall": 0.9, "found": 9, "of": 10, "max_overcount": 5, "mean_overcount": 1.2});
    assert_eq!(v["sketch_check"], want);

    let (table, v) = query(dir, "1h");
    assert!(!table.contains('≈') && !table.contains("sketch check"), "{table}");
    assert_eq!(
        (v["exact"].as_bool(), v["error_bound"].as_u64()),
        (Some(true), Some(0)),
        "{v}"
    );
    assert!(v.get("sketch_check").is_none(), "{v}");
}

#[test]
fn query_says_what_a_list_is_in_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&mut SqliteStore::open(&dir.path().join("out.db")).expect("open out.db"));
    check_queries(dir.path(), "[sink]\npath = \"out.db\"\n");
}

#[test]
fn query_says_what_a_list_is_in_postgres() {
    // the local PostgreSQL: not while a test restarts it
    let _postgres = hotlist_tests::serial::postgres();
    let url = std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into());
    let schema = format!("hotlist_accuracy_{}_{}", std::process::id(), rand::random::<u32>());
    struct DropSchema(String, String);
    impl Drop for DropSchema {
        fn drop(&mut self) {
            let _ = hotlist_sinks::postgres::drop_schema(&self.0, &self.1);
        }
    }
    let _cleanup = DropSchema(url.clone(), schema.clone());
    fill(&mut PostgresStore::connect_with_schema(&url, &schema).expect("connect postgres"));
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = format!("[sink]\nkind = \"postgres\"\nurl = \"{url}\"\nschema = \"{schema}\"\n");
    check_queries(dir.path(), &sink);
}

#[test]
fn query_says_what_a_list_is_in_redis() {
    let url = std::env::var("HOTLIST_TEST_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let prefix = format!("hotlist-accuracy-{}-{}", std::process::id(), rand::random::<u32>());
    struct DeleteKeys(String, String);
    impl Drop for DeleteKeys {
        fn drop(&mut self) {
            if let Ok(mut c) = redis::Client::open(self.0.as_str()).and_then(|c| c.get_connection()) {
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{}:*", self.1))
                    .query(&mut c)
                    .unwrap_or_default();
                if !keys.is_empty() {
                    let _: redis::RedisResult<()> = redis::cmd("DEL").arg(keys).query(&mut c);
                }
            }
        }
    }
    let _cleanup = DeleteKeys(url.clone(), prefix.clone());
    fill(&mut RedisStore::connect(&url, &prefix).expect("connect redis"));
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = format!("[sink]\nkind = \"redis\"\nurl = \"{url}\"\nprefix = \"{prefix}\"\n");
    check_queries(dir.path(), &sink);
}

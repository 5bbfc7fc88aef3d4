//! Shared harness: a real store, a writer through the sinks crate, the real server on port 0.

#![allow(dead_code)] // no test reads `Harness::kind`

use hotlist_operators::certify::Certificate;
use hotlist_operators::hot_keys::{HotKey, HotState, HotWindow};
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, RankedItem, SketchCheck};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{CommitBatch, SinkError, SinkStore, SqliteStore, StoreReader};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which real store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
    Redis,
}

pub const PG_URL: &str = "postgresql://postgres@127.0.0.1:5432/test";
pub const REDIS_URL: &str = "redis://127.0.0.1:6379/";

fn unique(prefix: &str) -> String {
    use rand::Rng;
    format!("{prefix}_{:08x}", rand::rng().random::<u32>())
}

pub type Opener = Arc<dyn Fn() -> Result<Box<dyn StoreReader>, SinkError> + Send + Sync>;

pub struct Harness {
    pub kind: Kind,
    pub base: String,
    pub client: reqwest::Client,
    pub writer: Option<Box<dyn SinkStore>>,
    pub make_writer: Arc<dyn Fn() -> Box<dyn SinkStore> + Send + Sync>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: tempfile::TempDir,
    cleanup: Cleanup,
}

/// What to remove from a shared server after a test.
enum Cleanup {
    None,
    PgSchema(String),
    RedisPrefix(String),
}

impl Drop for Harness {
    fn drop(&mut self) {
        // drop sync clients off the runtime's threads
        if let Some(w) = self.writer.take() {
            let _ = std::thread::spawn(move || drop(w)).join();
        }
        match std::mem::replace(&mut self.cleanup, Cleanup::None) {
            Cleanup::None => {}
            Cleanup::PgSchema(schema) => {
                // postgres' sync client runs its own runtime: not inside ours
                let _ = std::thread::spawn(move || {
                    if let Ok(mut c) = postgres::Client::connect(PG_URL, postgres::NoTls) {
                        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
                    }
                })
                .join();
            }
            Cleanup::RedisPrefix(prefix) => {
                if let Ok(client) = redis::Client::open(REDIS_URL) {
                    if let Ok(mut c) = client.get_connection() {
                        let keys: Vec<String> = redis::cmd("KEYS")
                            .arg(format!("{prefix}:*"))
                            .query(&mut c)
                            .unwrap_or_default();
                        for k in keys {
                            let _: redis::RedisResult<()> = redis::cmd("DEL").arg(k).query(&mut c);
                        }
                    }
                }
            }
        }
    }
}

pub const JOB: &str = "api";

pub fn windows() -> Vec<WindowSpec> {
    vec![
        WindowSpec::tumbling("1m", Span::from_millis(60_000), 5),
        WindowSpec {
            rank: Default::default(),
            key: Default::default(),
            name: "5m-hop".into(),
            size: Span::from_millis(300_000),
            slide: Span::from_millis(60_000),
            k: 3,
        },
    ]
}

pub fn list(window: &str, start: i64, revision: u32, state: ListState, items: &[(&str, u64)]) -> PublishedList {
    let size = if window == "1m" { 60_000 } else { 300_000 };
    PublishedList {
        group: Default::default(),
        window: window.into(),
        start: Millis(start),
        end: Millis(start + size),
        revision,
        state,
        watermark: Millis(start),
        as_of: Millis(1_700_000_000_000 + revision as i64),
        items: items
            .iter()
            .map(|(i, c)| RankedItem {
                item_id: (*i).into(),
                count: *c,
                trend: None,
            })
            .collect(),
        exact: true,
        error_bound: 0,
        sketch_check: None,
        certificate: None,
    }
}

pub async fn start(kind: Kind) -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cleanup = Cleanup::None;
    let (make_writer, open): (Arc<dyn Fn() -> Box<dyn SinkStore> + Send + Sync>, Opener) = match kind {
        Kind::Sqlite => {
            let path = dir.path().join("api.db");
            let p2 = path.clone();
            (
                Arc::new(move || Box::new(SqliteStore::open(&path).expect("open sqlite")) as Box<dyn SinkStore>),
                Arc::new(move || SqliteStore::open_read_only(&p2).map(|s| Box::new(s) as Box<dyn StoreReader>)),
            )
        }
        Kind::Postgres => {
            let schema = unique("hotlist_api");
            let (s1, s2) = (schema.clone(), schema.clone());
            cleanup = Cleanup::PgSchema(schema);
            (
                Arc::new(move || {
                    Box::new(hotlist_sinks::PostgresStore::connect_with_schema(PG_URL, &s1).expect("connect pg"))
                        as Box<dyn SinkStore>
                }),
                Arc::new(move || {
                    hotlist_sinks::PostgresStore::connect_with_schema(PG_URL, &s2)
                        .map(|s| Box::new(s) as Box<dyn StoreReader>)
                }),
            )
        }
        Kind::Redis => {
            let prefix = unique("hotlist-api");
            let (p1, p2) = (prefix.clone(), prefix.clone());
            cleanup = Cleanup::RedisPrefix(prefix);
            (
                Arc::new(move || {
                    Box::new(hotlist_sinks::RedisStore::connect(REDIS_URL, &p1).expect("connect redis"))
                        as Box<dyn SinkStore>
                }),
                Arc::new(move || {
                    hotlist_sinks::RedisStore::connect(REDIS_URL, &p2).map(|s| Box::new(s) as Box<dyn StoreReader>)
                }),
            )
        }
    };
    // Sync store clients (postgres runs its own runtime) must not run on this runtime's threads.
    let mk = make_writer.clone();
    let writer = std::thread::spawn(move || {
        let mut w = mk();
        w.prepare(JOB, &windows()).expect("prepare");
        w
    })
    .join()
    .expect("writer setup");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let options = hotlist_server::ServeOptions {
        job: JOB.into(),
        open,
        poll: Duration::from_millis(20),
        history_queue: hotlist_server::limits::DEFAULT_HISTORY_QUEUE,
        max_age: Duration::from_secs(1),
        limits: Default::default(),
    };
    let server = tokio::spawn(hotlist_server::run(listener, options, async {
        let _ = rx.await;
    }));
    Harness {
        kind,
        base,
        client: reqwest::Client::new(),
        writer: Some(writer),
        make_writer,
        stop: Some(tx),
        server: Some(server),
        _dir: dir,
        cleanup,
    }
}

impl Harness {
    pub fn commit(&mut self, epoch: u64, lists: Vec<PublishedList>) {
        let batch = CommitBatch {
            job: JOB.into(),
            epoch,
            watermark: Millis(epoch as i64),
            lists,
            dead_letters: vec![],
            hot_keys: Vec::new(),
            ranges: Vec::new(),
        };
        let writer = self.writer.as_mut().expect("writer");
        let ok = std::thread::scope(|s| s.spawn(|| writer.commit(&batch)).join()).expect("commit thread");
        assert!(ok.expect("commit"), "epoch {epoch} committed");
    }

    /// Records `windows` as the job's windows (replacing the harness's).
    pub fn prepare(&mut self, windows: &[WindowSpec]) {
        let writer = self.writer.as_mut().expect("writer");
        let ok = std::thread::scope(|s| s.spawn(|| writer.prepare(JOB, windows)).join()).expect("prepare thread");
        ok.expect("prepare");
    }

    /// Commits hot-key windows (no lists) at `epoch`.
    pub fn commit_hot(&mut self, epoch: u64, hot_keys: Vec<HotWindow>) {
        let batch = CommitBatch {
            job: JOB.into(),
            epoch,
            watermark: Millis(epoch as i64),
            lists: vec![],
            dead_letters: vec![],
            hot_keys,
            ranges: Vec::new(),
        };
        let writer = self.writer.as_mut().expect("writer");
        let ok = std::thread::scope(|s| s.spawn(|| writer.commit(&batch)).join()).expect("commit thread");
        assert!(ok.expect("commit"), "epoch {epoch} committed");
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{}", self.base, path))
            .send()
            .await
            .expect("request")
    }

    pub async fn json(&self, path: &str) -> serde_json::Value {
        let r = self.get(path).await;
        assert_eq!(r.status(), 200, "{path}");
        r.json().await.expect("json")
    }

    /// Waits (bounded) until the server serves a snapshot of at least `epoch`.
    pub async fn wait_epoch(&self, epoch: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let w: serde_json::Value = self.json("/v1/windows").await;
            if w["epoch"].as_u64().is_some_and(|e| e >= epoch) {
                return;
            }
            assert!(Instant::now() < deadline, "server never reached epoch {epoch}: {w}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("join").expect("server ran");
        }
    }
}

fn items_of(v: &serde_json::Value) -> Vec<(String, u64)> {
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["item_id"].as_str().expect("id").to_string(),
                i["count"].as_u64().expect("count"),
            )
        })
        .collect()
}

pub async fn returns_exactly_the_stored_lists(kind: Kind) {
    let mut h = start(kind).await;
    let a = list(
        "1m",
        60_000,
        1,
        ListState::Open,
        &[("x", 9), ("a", 4), ("b", 4), ("é", 2), ("z", 1)],
    );
    let hop = list("5m-hop", 0, 3, ListState::Closed, &[("x", 20), ("y", 3)]);
    h.commit(1, vec![a.clone(), hop.clone()]);
    h.wait_epoch(1).await;
    let v = h.json("/v1/top?window=1m").await;
    assert_eq!(
        items_of(&v),
        vec![
            ("x".into(), 9),
            ("a".into(), 4),
            ("b".into(), 4),
            ("é".into(), 2),
            ("z".into(), 1)
        ]
    );
    assert_eq!(
        (v["window_start"].as_i64(), v["window_end"].as_i64()),
        (Some(60_000), Some(120_000))
    );
    assert_eq!(
        (v["revision"].as_u64(), v["final"].as_bool(), v["exact"].as_bool()),
        (Some(1), Some(false), Some(true))
    );
    assert_eq!(v["as_of"], "2023-11-14T22:13:20.001Z");
    assert_eq!(
        items_of(&h.json("/v1/top?window=1m&k=2").await),
        vec![("x".into(), 9), ("a".into(), 4)]
    );
    let v = h.json("/v1/top?window=5m-hop").await;
    assert_eq!((v["state"].as_str(), v["revision"].as_u64()), (Some("closed"), Some(3)));
    let w = h.json("/v1/windows").await;
    let names: Vec<&str> = w["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .filter_map(|x| x["name"].as_str())
        .collect();
    assert_eq!(names, ["1m", "5m-hop"]);
    assert_eq!(w["windows"][0]["latest"]["revision"], 1);
    // a newer instance becomes "latest"; the older one is still there by time
    h.commit(2, vec![list("1m", 120_000, 1, ListState::Open, &[("new", 1)])]);
    h.wait_epoch(2).await;
    assert_eq!(items_of(&h.json("/v1/top?window=1m").await), vec![("new".into(), 1)]);
    if kind != Kind::Redis {
        let v = h.json("/v1/top?window=1m&at=1970-01-01T00:01:30Z").await;
        assert_eq!(items_of(&v)[0], ("x".into(), 9));
        assert_eq!(
            h.get("/v1/top?window=1m&date=1970-01-01").await.status(),
            404,
            "no list at 00:00"
        );
    }
    h.stop().await;
}

/// Lists say what they are: an approximate list (`exact` false, its `error_bound`, a sketch
/// check) and an exact list with a sketch check (`mode = "both"`) as the API returns them; a
/// list without a check has no `sketch_check`; a new revision that is exact says so (and gets
/// a new ETag).
pub async fn lists_say_what_they_are(kind: Kind) {
    let mut h = start(kind).await;
    let mut sketched = list("1m", 0, 1, ListState::Open, &[("x", 40), ("a", 38)]);
    (sketched.exact, sketched.error_bound) = (false, 37);
    sketched.sketch_check = Some(SketchCheck {
        found: 2,
        of: 3,
        max_overcount: 5,
        total_overcount: 9,
    });
    let mut checked = list("5m-hop", 0, 1, ListState::Final, &[("x", 20), ("y", 3)]);
    checked.sketch_check = Some(SketchCheck {
        found: 2,
        of: 2,
        max_overcount: 0,
        total_overcount: 0,
    });
    h.commit(1, vec![sketched, checked]);
    h.wait_epoch(1).await;
    let r = h.get("/v1/top?window=1m").await;
    let etag = r.headers()["etag"].to_str().expect("ascii").to_string();
    let v: serde_json::Value = r.json().await.expect("json");
    assert_eq!(
        (v["exact"].as_bool(), v["error_bound"].as_u64()),
        (Some(false), Some(37))
    );
    let want = serde_json::json!({"recall": 2.0 / 3.0, "found": 2, "of": 3, "max_overcount": 5, "mean_overcount": 3.0});
    assert_eq!(v["sketch_check"], want);
    assert_eq!(items_of(&v), vec![("x".into(), 40), ("a".into(), 38)]);
    let v = h.json("/v1/top?window=5m-hop").await;
    assert_eq!((v["exact"].as_bool(), v["error_bound"].as_u64()), (Some(true), Some(0)));
    let want = serde_json::json!({"recall": 1.0, "found": 2, "of": 2, "max_overcount": 0, "mean_overcount": 0.0});
    assert_eq!(v["sketch_check"], want);

    h.commit(2, vec![list("1m", 0, 2, ListState::Open, &[("x", 3)])]);
    h.wait_epoch(2).await;
    let r = h.get("/v1/top?window=1m").await;
    assert_ne!(r.headers()["etag"].to_str().expect("ascii"), etag);
    let v: serde_json::Value = r.json().await.expect("json");
    assert_eq!((v["exact"].as_bool(), v["error_bound"].as_u64()), (Some(true), Some(0)));
    assert!(v.get("sketch_check").is_none(), "no check, no field: {v}");
    h.stop().await;
}

/// A sketch window's final list a replay proved exact comes back with its certificate; a list
/// without one has no `certificate` field.
pub async fn certified_lists_carry_their_certificate(kind: Kind) {
    let mut h = start(kind).await;
    let mut proved = list("1m", 0, 3, ListState::Final, &[("x", 40), ("a", 38)]);
    proved.certificate = Some(Certificate {
        threshold: 36,
        counted: 17,
        passes: 2,
    });
    let plain = list("5m-hop", 0, 1, ListState::Final, &[("x", 20), ("y", 3)]);
    h.commit(1, vec![proved, plain]);
    h.wait_epoch(1).await;
    let v = h.json("/v1/top?window=1m").await;
    assert_eq!(
        (v["exact"].as_bool(), v["error_bound"].as_u64(), v["final"].as_bool()),
        (Some(true), Some(0), Some(true))
    );
    assert_eq!(
        v["certificate"],
        serde_json::json!({"threshold": 36, "counted": 17, "passes": 2})
    );
    assert_eq!(items_of(&v), vec![("x".into(), 40), ("a".into(), 38)]);
    let v = h.json("/v1/top?window=5m-hop").await;
    assert_eq!(v["exact"].as_bool(), Some(true));
    assert!(v.get("certificate").is_none(), "no certificate, no field: {v}");
    h.stop().await;
}

/// A trend list stored in the store comes back with each item's `baseline`, `score`, `ratio`
/// and `history`; a count list's items have none of them.
pub async fn trend_lists_carry_their_baselines(kind: Kind) {
    let mut h = start(kind).await;
    let mut trend = list("1m", 0, 3, ListState::Final, &[("rising", 20), ("new", 9)]);
    let histories = [vec![2, 3, 1], vec![0, 0, 0]];
    for (item, history) in trend.items.iter_mut().zip(histories) {
        item.trend = Some(hotlist_operators::record::TrendFacts { history });
    }
    let plain = list("5m-hop", 0, 1, ListState::Final, &[("x", 20)]);
    h.commit(1, vec![trend, plain]);
    h.wait_epoch(1).await;
    let v = h.json("/v1/top?window=1m").await;
    assert_eq!(items_of(&v), vec![("rising".into(), 20), ("new".into(), 9)]);
    let rising = &v["items"][0];
    assert_eq!(
        (rising["baseline"].as_u64(), &rising["history"]),
        (Some(6), &serde_json::json!([2, 3, 1]))
    );
    // z = (3·20 − 6) / √(3·(6 + 3)); × usual = 21 / (6/3 + 1)
    assert!(
        (rising["score"].as_f64().unwrap() - 54.0 / 27f64.sqrt()).abs() < 1e-9,
        "{v}"
    );
    assert!((rising["ratio"].as_f64().unwrap() - 7.0).abs() < 1e-9, "{v}");
    let new = &v["items"][1];
    assert_eq!((new["baseline"].as_u64(), new["score"].as_f64()), (Some(0), Some(9.0)));
    let v = h.json("/v1/top?window=5m-hop").await;
    assert_eq!(v["items"][0], serde_json::json!({"item_id": "x", "count": 20}));
    h.stop().await;
}

pub async fn cache_refreshes_after_commit(kind: Kind) {
    let mut h = start(kind).await;
    h.commit(1, vec![list("1m", 0, 1, ListState::Open, &[("a", 1)])]);
    h.wait_epoch(1).await;
    assert_eq!(h.json("/v1/top?window=1m").await["revision"], 1);
    h.commit(2, vec![list("1m", 0, 2, ListState::Closed, &[("b", 2), ("a", 1)])]);
    h.wait_epoch(2).await;
    let v = h.json("/v1/top?window=1m").await;
    assert_eq!((v["revision"].as_u64(), v["state"].as_str()), (Some(2), Some("closed")));
    assert_eq!(items_of(&v), vec![("b".into(), 2), ("a".into(), 1)]);
    h.stop().await;
}

pub async fn never_mixes_revisions(kind: Kind) {
    let mut h = start(kind).await;
    h.commit(1, vec![list("1m", 0, 1, ListState::Open, &[("i0", 1_000)])]);
    h.wait_epoch(1).await;
    let done = Arc::new(AtomicBool::new(false));
    // the reader sends a token after every read; the writer blocks on it (no spinning, which
    // starved the server's threads on a loaded 2-core machine)
    let (read_tx, read_rx) = std::sync::mpsc::channel::<()>();
    let writer = {
        let make = h.make_writer.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut w = make();
            for rev in 2..=120u32 {
                // advance only after the reader has read again, so reads and commits interleave
                if read_rx.recv().is_err() {
                    return; // the reader is gone (it failed): stop writing
                }
                while read_rx.try_recv().is_ok() {}
                // each revision's counts encode it: count / 1000 == revision; odd revisions have 5 rows
                let n = if rev % 2 == 0 { 2 } else { 5 };
                let names: Vec<String> = (0..n).map(|i| format!("i{i}")).collect();
                let items: Vec<(&str, u64)> = names
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (s.as_str(), rev as u64 * 1000 + 10 - i as u64))
                    .collect();
                let batch = CommitBatch {
                    job: JOB.into(),
                    epoch: rev as u64,
                    watermark: Millis(0),
                    lists: vec![list("1m", 0, rev, ListState::Open, &items)],
                    dead_letters: vec![],
                    hot_keys: Vec::new(),
                    ranges: Vec::new(),
                };
                w.commit(&batch).expect("commit");
            }
            done.store(true, Relaxed);
        })
    };
    let mut seen = std::collections::BTreeSet::new();
    // a hang guard, not a speed check: 119 commits interleaved with reads take seconds, but
    // much longer on a loaded 2-core machine (PostgreSQL fsyncs every commit)
    let deadline = Instant::now() + Duration::from_secs(180);
    while !(done.load(Relaxed) && seen.contains(&120)) {
        assert!(Instant::now() < deadline, "never saw the last revision; saw {seen:?}");
        let v = h.json("/v1/top?window=1m").await;
        let _ = read_tx.send(());
        let rev = v["revision"].as_u64().expect("revision");
        let items = items_of(&v);
        let want_len = if rev == 1 {
            1
        } else if rev % 2 == 0 {
            2
        } else {
            5
        };
        assert_eq!(items.len(), want_len, "revision {rev}: {v}");
        assert!(
            items.iter().all(|(_, c)| c / 1000 == rev),
            "revision {rev} mixes rows: {v}"
        );
        seen.insert(rev);
    }
    writer.join().expect("writer");
    assert!(seen.len() > 2, "the reader saw the list change: {seen:?}");
    h.stop().await;
}

/// A closed 10 s hot-key window at `start` with `keys` as (id, rate, state).
pub fn hot_window(start: i64, keys: &[(&str, f64, HotState)]) -> HotWindow {
    HotWindow {
        start: Millis(start),
        end: Millis(start + 10_000),
        watermark: Millis(start + 70_000),
        as_of: Millis(1_700_000_000_000 + start),
        keys: keys
            .iter()
            .map(|(id, rate, state)| HotKey {
                item_id: (*id).into(),
                rate: *rate,
                state: *state,
            })
            .collect(),
    }
}

/// `/v1/hot`: 404 JSON before any hot-key window; then the latest window with its keys (rate,
/// state) highest rate first, following new commits; an empty window is served as such.
pub async fn hot_keys_are_served(kind: Kind) {
    let mut h = start(kind).await;
    let r = h.get("/v1/hot").await;
    assert_eq!(r.status(), 404);
    let body: serde_json::Value = r.json().await.expect("json");
    assert!(body["error"].as_str().unwrap_or("").contains("[hot_keys]"), "{body}");
    h.commit_hot(
        1,
        vec![
            hot_window(0, &[("a", 120.5, HotState::Hot)]),
            hot_window(10_000, &[("b", 80.0, HotState::Cooling), ("a", 2500.25, HotState::Hot)]),
        ],
    );
    h.wait_epoch(1).await;
    let v = h.json("/v1/hot").await;
    assert_eq!(v["window_start"], 10_000);
    assert_eq!(v["window_end"], 20_000);
    assert_eq!(v["as_of"], "2023-11-14T22:13:30.000Z");
    assert_eq!(
        v["keys"],
        serde_json::json!([
            {"item_id": "a", "rate": 2500.25, "state": "hot"},
            {"item_id": "b", "rate": 80.0, "state": "cooling"},
        ])
    );
    h.commit_hot(2, vec![hot_window(20_000, &[])]);
    h.wait_epoch(2).await;
    let v = h.json("/v1/hot").await;
    assert_eq!(
        (v["window_start"].as_i64(), v["keys"].as_array().map(Vec::len)),
        (Some(20_000), Some(0))
    );
    h.stop().await;
}

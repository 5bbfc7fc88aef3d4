//! End-to-end: the built `hotlist` binary on JSON-lines files with thousands of events,
//! including bad and late records, checked through the SQLite tables against the model.

use hotlist_tests::inputs::{random_partitions, write_partitions, Shape};
use hotlist_tests::model::{self, ModelWindow};
use hotlist_tests::run_hotlist;
use std::collections::BTreeMap;
use std::path::Path;

const CONFIG: &str = r#"
[job]
id = "e2e"

[source]
kind = "file"
path = "in/*.jsonl"

[time]
max_out_of_orderness = "2s"
allowed_lateness = "30s"
emit_interval = "10ms"

[[window]]
name = "10s"
size = "10s"
k = 5

[[window]]
name = "1m"
size = "1m"
k = 3

[[window]]
name = "30s-hop"
size = "30s"
slide = "10s"
k = 4

[sink]
kind = "sqlite"
path = "out.db"

[run]
epoch_interval = "2ms"
batch_size = 64
"#;

fn model_windows() -> Vec<ModelWindow> {
    vec![
        ModelWindow::new("10s", 10_000, 10_000, 5),
        ModelWindow::new("1m", 60_000, 60_000, 3),
        ModelWindow::new("30s-hop", 30_000, 10_000, 4),
    ]
}

fn shape() -> Shape {
    Shape {
        partitions: 3,
        lines: 2500,
        items: 12,
        step: 40,
        disorder: 3_000,
        late_p: 0.02,
        late_by: 45_000,
        bad_p: 0.01,
        start: 1_713_462_150_123,
    }
}

fn sealed_rows(db: &Path) -> model::Lists {
    hotlist_tests::sqlite_sealed_lists(db, "e2e")
}

fn dead_rows(db: &Path) -> (model::Dead, BTreeMap<(u32, u64), Vec<u8>>) {
    hotlist_tests::sqlite_dead_letters(db, "e2e")
}

/// Sealed `topk` rows and `dead_letters` equal an independent computation, with 1 and 3
/// workers, and the bad records' raw bytes are stored exactly as read.
#[test]
fn binary_on_files_matches_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let parts = random_partitions(11, &shape());
    write_partitions(&dir.path().join("in"), &parts).expect("write inputs");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("write config");
    let (want_lists, want_dead) = model::run(&parts, &model_windows(), 2_000, 30_000);
    assert!(
        want_dead.iter().any(|d| d.2 == "late") && want_dead.iter().any(|d| d.2 == "bad"),
        "input exercises both"
    );
    assert!(want_lists.len() > 20, "many window instances");

    let mut first: Option<model::Lists> = None;
    for workers in ["1", "3"] {
        let _ = std::fs::remove_file(dir.path().join("out.db"));
        let out = run_hotlist(
            dir.path(),
            &[
                "run",
                "--config",
                "hotlist.toml",
                "--workers",
                workers,
                "--progress",
                "never",
            ],
            true,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("finished after"), "summary printed: {stdout}");
        let lists = sealed_rows(&dir.path().join("out.db"));
        assert_eq!(lists, want_lists, "topk with {workers} worker(s)");
        let (dead, raw) = dead_rows(&dir.path().join("out.db"));
        assert_eq!(dead, want_dead, "dead_letters with {workers} worker(s)");
        for ((p, pos), bytes) in raw {
            assert_eq!(
                bytes,
                parts[p as usize][pos as usize - 1],
                "raw bytes of bad record {p}:{pos}"
            );
        }
        if let Some(f) = &first {
            assert_eq!(f, &lists);
        }
        first = Some(lists);
    }

    // the query command reads the same list back, as JSON
    let (key, items) = want_lists
        .iter()
        .find(|(k, _)| k.0 == "30s-hop")
        .expect("a hopping list");
    let at = (key.2 - 1).to_string(); // the instance ending soonest after end-1 is this one
    let out = run_hotlist(
        dir.path(),
        &[
            "query",
            "--config",
            "hotlist.toml",
            "--window",
            "30s-hop",
            "--at",
            &at,
            "--json",
        ],
        true,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["window_start"], key.1);
    assert_eq!(v["final"], true);
    let got: Vec<(String, u64)> = v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["item_id"].as_str().unwrap_or_default().to_string(),
                i["count"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(&got, items);
}

/// Standard input is one partition: the same events piped in give the same sealed lists.
#[test]
fn stdin_source_matches_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = shape();
    s.partitions = 1;
    s.lines = 1500;
    let parts = random_partitions(5, &s);
    let mut input = Vec::new();
    for l in &parts[0] {
        input.extend_from_slice(l);
        input.push(b'\n');
    }
    std::fs::write(
        dir.path().join("hotlist.toml"),
        CONFIG.replace("path = \"in/*.jsonl\"", "path = \"-\""),
    )
    .expect("config");
    let mut child =
        hotlist_tests::spawn_on_stdin(dir.path(), &["run", "--config", "hotlist.toml", "--progress", "never"]);
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(&input).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (want_lists, _) = model::run(&parts, &model_windows(), 2_000, 30_000);
    assert_eq!(sealed_rows(&dir.path().join("out.db")), want_lists);
}

/// Bad configuration fails at start with one clear line and exit code 1, and writes nothing.
#[test]
fn bad_config_is_one_clear_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    std::fs::write(dir.path().join("in/a.jsonl"), "{\"item_id\":\"a\",\"ts\":1}\n").expect("input");
    std::fs::write(dir.path().join("bad.toml"), CONFIG.replace("k = 5", "k = 0")).expect("config");
    let out = run_hotlist(
        dir.path(),
        &["run", "--config", "bad.toml", "--progress", "never"],
        false,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("k must be at least 1"), "{err}");
    assert!(!dir.path().join("out.db").exists());
}

/// A PostgreSQL schema and a Redis key prefix of a test's own (`pg_url`, `schema`, `redis_url`,
/// `prefix`), dropped when the test ends, whatever its outcome.
struct Cleanup(String, String, String, String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = hotlist_sinks::postgres::drop_schema(&self.0, &self.1);
        if let Ok(mut c) = redis::Client::open(self.2.as_str()).and_then(|c| c.get_connection()) {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{}:*", self.3))
                .query(&mut c)
                .unwrap_or_default();
            for k in keys {
                let _: redis::RedisResult<()> = redis::cmd("DEL").arg(k).query(&mut c);
            }
        }
    }
}

/// The binary writes into real PostgreSQL (timestamptz, same sealed rows as the model) and
/// fans the latest lists out to real Redis, where each window's list equals PostgreSQL's latest.
#[test]
fn binary_into_postgres_with_redis_fanout() {
    use rand::Rng;
    // the local PostgreSQL: not while a test restarts it
    let _postgres = hotlist_tests::serial::postgres();
    let pg_url =
        std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into());
    let redis_url = std::env::var("HOTLIST_TEST_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let tag = format!("{:08x}", rand::rng().random::<u32>());
    let schema = format!("hotlist_e2e_{tag}");
    let prefix = format!("hotlist-e2e-{tag}");
    let _cleanup = Cleanup(pg_url.clone(), schema.clone(), redis_url.clone(), prefix.clone());

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let mut s = shape();
    s.lines = 1200;
    let parts = random_partitions(3, &s);
    write_partitions(&dir.path().join("in"), &parts).expect("inputs");
    let config = CONFIG.replace(
        "[sink]\nkind = \"sqlite\"\npath = \"out.db\"",
        &format!(
            "[sink]\nkind = \"postgres\"\nurl = \"{pg_url}\"\nschema = \"{schema}\"\nredis_url = \"{redis_url}\"\nredis_prefix = \"{prefix}\""
        ),
    );
    assert!(config.contains("postgres"), "config rewritten");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    run_hotlist(
        dir.path(),
        &[
            "run",
            "--config",
            "hotlist.toml",
            "--workers",
            "2",
            "--progress",
            "never",
        ],
        true,
    );

    let (want, want_dead) = model::run(&parts, &model_windows(), 2_000, 30_000);
    let mut pg = postgres::Client::connect(&pg_url, postgres::NoTls).expect("connect postgres");
    let rows = pg
        .query(
            &format!(
                "SELECT window_name, (extract(epoch from window_start) * 1000)::bigint, \
                 (extract(epoch from window_end) * 1000)::bigint, rank, item_id, count, final \
                 FROM \"{schema}\".topk WHERE job = 'e2e' ORDER BY window_name, window_start, rank"
            ),
            &[],
        )
        .expect("query topk");
    let mut got = model::Lists::new();
    for r in rows {
        assert!(r.get::<_, bool>(6), "sealed");
        got.entry((r.get(0), r.get(1), r.get(2)))
            .or_default()
            .push((r.get(4), r.get::<_, i64>(5) as u64));
    }
    assert_eq!(got, want, "PostgreSQL topk equals the model");
    let dead: i64 = pg
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".dead_letters WHERE job = 'e2e'"),
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(dead as usize, want_dead.len(), "every dead letter stored");

    // Redis holds each window's newest instance, equal to PostgreSQL's
    let mut r = redis::Client::open(redis_url.as_str())
        .and_then(|c| c.get_connection())
        .expect("connect redis");
    for w in model_windows() {
        let newest = want
            .keys()
            .filter(|k| k.0 == w.name)
            .max_by_key(|k| k.1)
            .expect("instances")
            .clone();
        let meta: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
            .arg(format!("{prefix}:e2e:{}:latest:meta", w.name))
            .query(&mut r)
            .expect("meta");
        assert_eq!(
            meta.get("window_start").map(String::as_str),
            Some(newest.1.to_string().as_str()),
            "{meta:?}"
        );
        assert_eq!(meta.get("final").map(String::as_str), Some("1"));
        let members: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(format!("{prefix}:e2e:{}:latest", w.name))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut r)
            .expect("zrange");
        let mut members: Vec<(String, u64)> = members.into_iter().map(|(m, s)| (m, s as u64)).collect();
        members.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        assert_eq!(&members, &want[&newest], "Redis list of {}", w.name);
    }

    // `hotlist query` reads PostgreSQL through the same config
    let newest_1m = want
        .keys()
        .filter(|k| k.0 == "1m")
        .max_by_key(|k| k.1)
        .expect("1m")
        .clone();
    let out = run_hotlist(
        dir.path(),
        &["query", "--config", "hotlist.toml", "--window", "1m", "--json"],
        true,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["window_start"], newest_1m.1);
    let got: Vec<(String, u64)> = v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["item_id"].as_str().unwrap_or_default().to_string(),
                i["count"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(got, want[&newest_1m]);
}

/// Running the job again on the same store writes its results (its epochs continue after the
/// store's committed epoch instead of being skipped as already committed).
#[test]
fn rerun_on_the_same_store_is_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let one = vec![vec![br#"{"item_id":"first","ts":1000}"#.to_vec()]];
    write_partitions(&dir.path().join("in"), &one).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("config");
    run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let two = vec![vec![
        br#"{"item_id":"second","ts":1000}"#.to_vec(),
        br#"{"item_id":"second","ts":1001}"#.to_vec(),
    ]];
    write_partitions(&dir.path().join("in"), &two).expect("inputs");
    run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let lists = sealed_rows(&dir.path().join("out.db"));
    assert_eq!(
        lists[&("10s".to_string(), 0, 10_000)],
        vec![("second".to_string(), 2)],
        "{lists:?}"
    );
}

/// Trend windows into real PostgreSQL with the Redis fan-out (docs/trends.md): the sealed trend
/// lists in PostgreSQL, each item with its baseline, score and history, equal the model's on
/// input with disorder, late and bad records (2 workers); Redis's latest trend list reads back
/// (through the store's reader, with its checks) equal to PostgreSQL's newest instance; and
/// `hotlist query --json` gives each item's baseline, score, ratio and history.
#[test]
fn trend_windows_into_postgres_with_redis_fanout() {
    use hotlist_sinks::StoreReader;
    use rand::Rng;
    let _postgres = hotlist_tests::serial::postgres();
    let pg_url =
        std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into());
    let redis_url = std::env::var("HOTLIST_TEST_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let tag = format!("{:08x}", rand::rng().random::<u32>());
    let (schema, prefix) = (format!("hotlist_trend_{tag}"), format!("hotlist-trend-{tag}"));
    let _cleanup = Cleanup(pg_url.clone(), schema.clone(), redis_url.clone(), prefix.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let parts = random_partitions(5, &shape());
    write_partitions(&dir.path().join("in"), &parts).expect("inputs");
    let config = CONFIG
        .replace("k = 5\n", "k = 5\nrank_by = \"trend\"\nbaseline = 3\nmin_count = 2\n")
        .replace(
            "[sink]\nkind = \"sqlite\"\npath = \"out.db\"",
            &format!(
                "[sink]\nkind = \"postgres\"\nurl = \"{pg_url}\"\nschema = \"{schema}\"\nredis_url = \"{redis_url}\"\nredis_prefix = \"{prefix}\""
            ),
        );
    assert!(
        config.contains("rank_by") && config.contains("postgres"),
        "config rewritten"
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let run = [
        "run",
        "--config",
        "hotlist.toml",
        "--workers",
        "2",
        "--progress",
        "never",
    ];
    run_hotlist(dir.path(), &run, true);

    let want = model::run_trend(&parts, &model_windows(), 2_000, 30_000, (0, 3, 2));
    assert!(want.len() > 3, "the input has trends: {want:?}");
    let mut pg = postgres::Client::connect(&pg_url, postgres::NoTls).expect("connect postgres");
    let rows = pg
        .query(
            &format!(
                "SELECT (extract(epoch from window_start) * 1000)::bigint, \
                 (extract(epoch from window_end) * 1000)::bigint, rank, item_id, count, final, baseline, history \
                 FROM \"{schema}\".topk WHERE job = 'e2e' AND window_name = '10s' ORDER BY window_start, rank"
            ),
            &[],
        )
        .expect("query topk");
    let mut got = model::TrendLists::new();
    for r in rows {
        assert!(r.get::<_, bool>(5), "sealed");
        let history: Vec<u64> = r
            .get::<_, String>(7)
            .split(',')
            .map(|c| c.parse().expect("a count"))
            .collect();
        assert_eq!(
            r.get::<_, i64>(6) as u64,
            history.iter().sum::<u64>(),
            "baseline = sum of history"
        );
        got.entry(("10s".to_string(), r.get(0), r.get(1), String::new()))
            .or_default()
            .push((r.get(3), r.get::<_, i64>(4) as u64, history));
    }
    assert_eq!(got, want, "PostgreSQL's trend lists equal the model's");

    // the newest instance may have nothing that rises (the model leaves such lists out)
    let mut redis_store = hotlist_sinks::RedisStore::connect(&redis_url, &prefix).expect("connect redis");
    let latest = redis_store
        .latest("e2e", "10s")
        .expect("read redis")
        .expect("a latest list");
    assert!(
        want.keys().all(|k| k.1 <= latest.start.0),
        "Redis holds the newest instance"
    );
    let newest = ("10s".to_string(), latest.start.0, latest.end.0, String::new());
    let want_newest = want.get(&newest).cloned().unwrap_or_default();
    let from_redis: Vec<(String, u64, Vec<u64>)> = latest
        .items
        .iter()
        .map(|r| {
            let history = r.trend.as_ref().map(|t| t.history.clone()).expect("trend facts");
            (r.item_id.to_string(), r.count, history)
        })
        .collect();
    assert_eq!(from_redis, want_newest, "Redis's latest trend list");
    let (newest, with_items) = want.iter().max_by_key(|(k, _)| k.1).expect("a trend list");

    let out = run_hotlist(
        dir.path(),
        &["query", "--config", "hotlist.toml", "--window", "10s", "--json"],
        true,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["window_start"], latest.start.0);
    let at = format!("{}", newest.1);
    let out = run_hotlist(
        dir.path(),
        &[
            "query",
            "--config",
            "hotlist.toml",
            "--window",
            "10s",
            "--at",
            &at,
            "--json",
        ],
        true,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["window_start"], newest.1);
    assert_eq!(v["items"].as_array().map(Vec::len), Some(with_items.len()));
    for (item, (id, count, history)) in v["items"].as_array().expect("items").iter().zip(with_items) {
        assert_eq!(
            (item["item_id"].as_str(), item["count"].as_u64()),
            (Some(id.as_str()), Some(*count))
        );
        assert_eq!(item["history"], serde_json::json!(history));
        assert_eq!(item["baseline"], history.iter().sum::<u64>());
        assert!(
            item["score"].as_f64().is_some() && item["ratio"].as_f64().is_some(),
            "{item}"
        );
    }
}

/// A per-group distinct-user window with groups in `(other)` (tumbling, so paired: see
/// `operators/src/counter/pairs.rs`), on standard input in two parts: after the first, the job
/// emits a provisional list of `(other)` (its user counts per item are built then); the second
/// brings new users of the same items in the same folded groups, counted into those kept counts
/// (`operators/src/counter/others.rs`), and the end of input seals the window. Its lists equal
/// the model's, `(other)` counting a user once over its groups.
#[test]
fn a_folded_paired_window_counts_users_after_its_first_list() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = "[job]\nid = \"folded\"\n[source]\nkind = \"file\"\npath = \"-\"\n\
                  [source.format]\nuser = \"/user\"\n\
                  [time]\nmax_out_of_orderness = \"0s\"\nallowed_lateness = \"0s\"\nemit_interval = \"5ms\"\n\
                  [[window]]\nname = \"w\"\nsize = \"1m\"\nk = 5\nby = [\"page\"]\ncount = \"distinct_users\"\nmax_groups = 1\n\
                  [sink]\nkind = \"sqlite\"\npath = \"out.db\"\n";
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let start = 1_713_462_000_000i64; // a minute boundary
    let line = |n: i64, item: &str, page: &str, user: &str| {
        format!(
            "{{\"item_id\":\"{item}\",\"ts\":{},\"dims\":{{\"page\":\"{page}\"}},\"user\":\"{user}\"}}",
            start + n
        )
    };
    let first: Vec<String> = [("x", "p1", "a"), ("x", "p2", "b"), ("x", "p3", "c"), ("y", "p2", "a")]
        .iter()
        .enumerate()
        .map(|(n, (i, p, u))| line(n as i64, i, p, u))
        .collect();
    let then: Vec<String> = [
        ("x", "p2", "d"),
        ("x", "p3", "e"),
        ("x", "p3", "b"),
        ("y", "p3", "b"),
        ("y", "p1", "c"),
        ("y", "p2", "e"),
    ]
    .iter()
    .enumerate()
    .map(|(n, (i, p, u))| line(100 + n as i64, i, p, u))
    .collect();
    let mut child =
        hotlist_tests::spawn_on_stdin(dir.path(), &["run", "--config", "hotlist.toml", "--progress", "never"]);
    let mut stdin = child.stdin.take().expect("stdin");
    for l in &first {
        writeln!(stdin, "{l}").expect("write stdin");
    }
    stdin.flush().expect("flush stdin");
    // the job's first list of (other), provisional: its counts are kept from here on
    let db = dir.path().join("out.db");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let other_listed = || {
        rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.query_row("SELECT count(*) FROM topk WHERE group_key = '(other)'", [], |r| {
                    r.get(0)
                })
            })
            .is_ok_and(|n: i64| n > 0)
    };
    while !other_listed() {
        assert!(std::time::Instant::now() < deadline, "no provisional list of (other)");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for l in &then {
        writeln!(stdin, "{l}").expect("write stdin");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Vec<u8>> = first.iter().chain(&then).map(|l| l.clone().into_bytes()).collect();
    let mut w = ModelWindow::new("w", 60_000, 60_000, 5);
    w.by = vec!["page".into()];
    w.distinct_users = true;
    w.max_groups = 1;
    let (want, _) = model::run_grouped(&[lines], &[w], 0, 0);
    assert!(want.keys().any(|k| k.3 == "(other)"), "two pages fold");
    assert_eq!(hotlist_tests::sqlite_sealed_group_lists(&db, "folded"), want);
}

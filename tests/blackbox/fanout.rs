//! The Redis fan-out (`sink.redis_url`) on the built binary, with real Redis servers of the
//! test's own: an unreachable fan-out never stops the job nor changes what it commits to its
//! store, memory stays bounded however long Redis is down, and when Redis is back it catches up
//! to the store's latest lists.

use hotlist_operators::group::GroupKey;
use hotlist_sinks::{RedisStore, SqliteStore, StoreReader, StoredList};
use hotlist_tests::inputs::{random_partitions, write_partitions, Shape};
use hotlist_tests::model::{self, ModelWindow};
use hotlist_tests::{free_loopback_ports, reap, run_hotlist};
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `redis-server` of the test's own on a loopback port, without persistence; stopped (by
/// its process id) when dropped.
pub(crate) struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    pub(crate) fn start(port: u16) -> RedisServer {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server (install Redis: scripts/test does)");
        let server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while server.connection().is_none() {
            assert!(Instant::now() < deadline, "redis-server on port {port} did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub(crate) fn connection(&self) -> Option<redis::Connection> {
        let mut c = redis::Client::open(self.url()).ok()?.get_connection().ok()?;
        redis::cmd("PING").query::<String>(&mut c).ok()?;
        Some(c)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `hotlist run` in the background with `--metrics-addr`; its stderr is collected; killed (by
/// its process id) if still running when dropped.
struct Job {
    child: Child,
    metrics: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Job {
    fn start(dir: &Path) -> Job {
        let mut child = Command::new(hotlist_tests::hotlist_bin())
            .args(["run", "--config", "hotlist.toml", "--progress", "never"])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hotlist run");
        let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
        let metrics = loop {
            let line = lines.next().expect("a metrics line before EOF").expect("read stderr");
            if let Some(rest) = line.strip_prefix("metrics on http://") {
                break rest.trim_end_matches("/metrics").to_string();
            }
        };
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().expect("stderr lines").push(line);
            }
        });
        Job { child, metrics, stderr }
    }

    /// The job's metrics without labels, by name.
    fn scrape(&self) -> BTreeMap<String, f64> {
        let mut s = std::net::TcpStream::connect(&self.metrics).expect("connect to the metrics endpoint");
        s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {}\r\n\r\n", self.metrics).as_bytes())
            .expect("request metrics");
        let mut body = String::new();
        s.read_to_string(&mut body).expect("read metrics");
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (name, value) = l.rsplit_once(' ')?;
                let name = name.split('{').next()?;
                Some((name.to_string(), value.parse().ok()?))
            })
            .collect()
    }

    /// One metric; 0 while it is not exported yet (the fan-out's appear once its thread runs).
    fn metric(&self, name: &str) -> f64 {
        self.scrape().get(name).copied().unwrap_or(0.0)
    }

    /// The resident set size of the job, in kB.
    fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("proc status");
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
        line.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("VmRSS kB")
    }

    /// SIGTERM (a graceful stop), then the exit status and the collected stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success());
        assert!(
            reap(&mut self.child, Duration::from_secs(60)),
            "the job did not stop on SIGTERM"
        );
        let status = self.child.wait().expect("wait");
        // The reader thread ends at EOF; give it a moment to take the last lines.
        std::thread::sleep(Duration::from_millis(100));
        let stderr = self.stderr.lock().expect("stderr lines").join("\n");
        (status, stderr)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 50 ms until it is true; panics with `what` after `within`.
fn wait_for(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The latest list of every window, read through a store's reader.
fn latest_lists(store: &mut dyn StoreReader, job: &str, windows: &[&str]) -> Vec<Option<StoredList>> {
    windows
        .iter()
        .map(|w| store.latest(job, w).expect("read the latest list"))
        .collect()
}

/// A fan-out to a port nothing listens on: the job starts anyway, commits exactly what it
/// would commit without a fan-out (the model's lists), exits 0, and says in a warning that the
/// fan-out failed. (Before: the run failed at start with "cannot connect to the Redis sink".)
#[test]
fn an_unreachable_fanout_never_stops_the_job() {
    let port = free_loopback_ports(1)[0];
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let shape = Shape {
        partitions: 2,
        lines: 1500,
        items: 12,
        step: 40,
        disorder: 3_000,
        late_p: 0.02,
        late_by: 45_000,
        bad_p: 0.01,
        start: 1_713_462_150_123,
    };
    let parts = random_partitions(9, &shape);
    write_partitions(&dir.path().join("in"), &parts).expect("inputs");
    let config = format!(
        "[job]\nid = \"fan\"\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n\
         [time]\nmax_out_of_orderness = \"2s\"\nallowed_lateness = \"30s\"\nemit_interval = \"10ms\"\n\
         [[window]]\nname = \"10s\"\nsize = \"10s\"\nk = 5\n\
         [sink]\nkind = \"sqlite\"\npath = \"out.db\"\nredis_url = \"redis://127.0.0.1:{port}/\"\n\
         [run]\nepoch_interval = \"2ms\"\n"
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let out = run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().any(|l| l.contains("WARN")
            && l.contains("Redis fan-out")
            && l.contains(&format!("redis://127.0.0.1:{port}/"))),
        "a warning names the fan-out:\n{stderr}"
    );
    let (want, _) = model::run(&parts, &[ModelWindow::new("10s", 10_000, 10_000, 5)], 2_000, 30_000);
    assert_eq!(
        hotlist_tests::sqlite_sealed_lists(&dir.path().join("out.db"), "fan"),
        want,
        "the store holds exactly the model's lists"
    );
}

/// Redis goes down while a paced generator runs: the job keeps committing to SQLite, at most
/// one list per window is pending (`hotlist_fanout_pending_lists`), failed attempts are counted
/// and its memory does not grow with the outage; when Redis is back (empty, as after a restart
/// without persistence) it catches up, and after a graceful stop Redis holds exactly SQLite's
/// latest list of every window. (Before: the pending batch grew by every list of every epoch.)
#[test]
fn a_redis_outage_keeps_memory_bounded_and_redis_catches_up() {
    const WINDOWS: [&str; 10] = ["10s", "20s", "30s", "1m", "2m", "3m", "5m", "10m", "15m", "30m"];
    let port = free_loopback_ports(1)[0];
    let redis = RedisServer::start(port);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = String::from(
        "[job]\nid = \"fan\"\n[source]\nkind = \"generator\"\nitems = 3000\nzipf = 0.6\npartitions = 1\n\
         rate = 5000\npace = true\n[time]\nemit_interval = \"100ms\"\n",
    );
    // Every item in every list (K = items), so every emit tick publishes 10 lists of 3000
    // items: before the fix, the pending batch grew by about 8 MB/s here.
    for w in WINDOWS {
        config.push_str(&format!("[[window]]\nname = \"{w}\"\nsize = \"{w}\"\nk = 3000\n"));
    }
    config.push_str(&format!("[sink]\npath = \"out.db\"\nredis_url = \"{}\"\n", redis.url()));
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let job = Job::start(dir.path());
    wait_for(Duration::from_secs(60), "the fan-out's first write", || {
        let mut c = redis.connection().expect("redis answers");
        redis::cmd("EXISTS")
            .arg("hotlist:fan:10s:latest:meta")
            .query::<u64>(&mut c)
            == Ok(1)
    });
    drop(redis); // the outage
    let commits_before = job.metric("hotlist_commits_total");
    std::thread::sleep(Duration::from_secs(3)); // into the outage
    let rss_early = job.rss_kb();
    let outage = Instant::now();
    let (mut rss_peak, mut pending_peak) = (rss_early, None::<f64>);
    while outage.elapsed() < Duration::from_secs(20) {
        if let Some(pending) = job.scrape().get("hotlist_fanout_pending_lists").copied() {
            pending_peak = Some(pending_peak.map_or(pending, |p| p.max(pending)));
        }
        rss_peak = rss_peak.max(job.rss_kb());
        std::thread::sleep(Duration::from_millis(250));
    }
    let grown_mb = rss_peak.saturating_sub(rss_early) / 1024;
    eprintln!("RSS during the outage: {rss_early} kB, peak {rss_peak} kB");
    // The job's own state grows a little (open 30m instances gain panes); the pending batch
    // before the fix grew by 200 MB here.
    assert!(
        grown_mb < 60,
        "RSS grew by {grown_mb} MB during a 20 s outage ({rss_early} kB → {rss_peak} kB)"
    );
    assert!(
        job.metric("hotlist_commits_total") > commits_before + 10.0,
        "the job kept committing to its store while Redis was down"
    );
    let pending_peak = pending_peak.expect("hotlist_fanout_pending_lists is exported");
    assert!(
        pending_peak <= WINDOWS.len() as f64,
        "{pending_peak} lists pending for {} windows",
        WINDOWS.len()
    );
    let failures = job.metric("hotlist_fanout_failures_total");

    let redis = RedisServer::start(port); // back, empty
    let committed = job.metric("hotlist_committed_epoch");
    wait_for(Duration::from_secs(60), "the fan-out to catch up", || {
        job.metric("hotlist_fanout_committed_epoch") >= committed
    });
    let (status, stderr) = job.stop();
    assert!(status.success(), "graceful stop exits 0: {status:?}\n{stderr}");
    assert!(failures >= 2.0);
    assert!(stderr.contains("Redis fan-out failed"), "{stderr}");
    assert!(
        stderr.contains("Redis fan-out to") && stderr.contains("recovered after"),
        "{stderr}"
    );
    let mut sqlite = SqliteStore::open_read_only(&dir.path().join("out.db")).expect("open out.db");
    let mut fanout = RedisStore::connect(&redis.url(), "hotlist").expect("connect redis");
    let want = latest_lists(&mut sqlite, "fan", &WINDOWS);
    assert!(want.iter().all(Option::is_some), "every window has a list");
    assert_eq!(
        latest_lists(&mut fanout, "fan", &WINDOWS),
        want,
        "Redis holds SQLite's latest lists"
    );
    assert_eq!(
        fanout.windows("fan").expect("windows").len(),
        WINDOWS.len(),
        "windows prepared again"
    );
}

/// Redis as the only sink is the primary store, not a fan-out: unreachable at start, the run
/// fails with one line (exit 1).
#[test]
fn an_unreachable_redis_sink_fails_the_start() {
    let port = free_loopback_ports(1)[0];
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "[source]\nkind = \"generator\"\nevents = 100\n[sink]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:{port}/\"\n"
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let out = run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        false,
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.trim_end();
    let want = format!("error: cannot connect to the Redis sink: connecting on redis://127.0.0.1:{port}/ failed: IO ");
    assert!(line.starts_with(&want) && line.lines().count() == 1, "{stderr}");
}

/// Every group a SQLite store holds a list of in `window`.
pub(crate) fn sqlite_groups(db: &Path, job: &str, window: &str) -> Vec<GroupKey> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare("SELECT DISTINCT group_key FROM topk_instances WHERE job = ?1 AND window_name = ?2 ORDER BY 1")
        .expect("prepare");
    let rows = stmt.query_map([job, window], |r| r.get::<_, String>(0)).expect("query");
    rows.map(|g| GroupKey::from_stored(g.expect("group_key"))).collect()
}

/// A `by` window with 300 groups and the fan-out on: after the run, Redis holds SQLite's
/// latest list of every group, and the same groups of the latest instance. (Before: the
/// fan-out kept one pending list per window, so each flush wrote one group's list to Redis
/// and the others never reached it.)
#[test]
fn every_groups_latest_list_reaches_redis() {
    let redis = RedisServer::start(free_loopback_ports(1)[0]);
    let dir = tempfile::tempdir().expect("tempdir");
    let base = 1_713_462_000_000i64; // a minute boundary
    let mut lines = String::new();
    for i in 0..9_000i64 {
        lines.push_str(&format!(
            "{{\"item_id\":\"item{}\",\"ts\":{},\"dims\":{{\"g\":\"grp{}\"}}}}\n",
            (i * 7) % 23,
            base + i * 10,
            i % 300
        ));
    }
    std::fs::write(dir.path().join("events.jsonl"), lines).expect("input");
    let config = format!(
        "[job]\nid = \"fan\"\n[source]\nkind = \"file\"\npath = \"events.jsonl\"\n\
         [time]\nmax_out_of_orderness = \"0s\"\nemit_interval = \"10ms\"\n\
         [[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 3\nby = [\"g\"]\n\
         [sink]\npath = \"out.db\"\nredis_url = \"{}\"\n[run]\nepoch_interval = \"2ms\"\nbatch_size = 64\n",
        redis.url()
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let db = dir.path().join("out.db");
    let sqlite = SqliteStore::open_read_only(&db).expect("open out.db");
    let mut fanout = RedisStore::connect(&redis.url(), "hotlist").expect("connect redis");
    let groups = sqlite_groups(&db, "fan", "1m");
    assert_eq!(groups.len(), 300, "every group has lists in SQLite");
    let latest = sqlite.groups("fan", "1m").expect("sqlite groups");
    assert_eq!(
        fanout.groups("fan", "1m").expect("redis groups"),
        latest,
        "the latest instance's groups"
    );
    let mut missing = Vec::new();
    for g in &groups {
        let want = sqlite.latest_of("fan", "1m", g).expect("sqlite read");
        assert!(want.is_some(), "{g}");
        if fanout.latest_of("fan", "1m", g).expect("redis read") != want {
            missing.push(g.as_str().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} groups' latest lists differ in Redis, e.g. {:?}",
        missing.len(),
        groups.len(),
        &missing[..missing.len().min(5)]
    );
}

//! `hotlist serve` under hostile clients and damaged data, on the built binary (issue 9, items 5
//! and 6): slow and idle connections are closed on time, a server holding more idle connections
//! than it may open files still answers `/healthz`, responses carry `nosniff` (and the page a
//! Content-Security-Policy), and a corrupt row in the store costs refreshes, not the server.
//!
//! Each test writes an SQLite store through the sinks crate, starts `hotlist serve` on a free
//! loopback port and talks raw HTTP/1.1 to it (no client library that would hide what the
//! server does with the socket). On failure it panics with the server's stderr.
//!
//! `healthz_latency_under_idle_and_slowloris` is the measurement in docs/api.md, ignored by default:
//! `scripts/loadtest idle` runs it on a release build.

// issue 21: the job's metrics endpoint, a hanging or gone store, what caches may keep, and the
// small limits (`--poll`, `/v1/groups`), a store that stops answering
mod frozen_store;
mod job_metrics;
mod list_caching;
mod small_ones;
mod store_trouble;

use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{CommitBatch, SinkStore, SqliteStore};
use hotlist_tests::{free_loopback_ports, hotlist_bin};
use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const JOB: &str = "serve";

const CONFIG: &str = r#"
[job]
id = "serve"

[source]
kind = "generator"
seed = 1
events = 1000

[[window]]
name = "1m"
size = "1m"
k = 10

[[window]]
name = "5m"
size = "5m"
k = 10

[sink]
kind = "sqlite"
path = "hotlist.db"
"#;

/// How long any awaited condition may take before the test fails.
const WAIT: Duration = Duration::from_secs(20);

/// The job's store, written through the sinks crate.
struct Store {
    dir: tempfile::TempDir,
    writer: SqliteStore,
}

impl Store {
    /// A store holding epoch 1: a list for each window.
    fn new() -> Store {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("write config");
        let mut writer = SqliteStore::open(&dir.path().join("hotlist.db")).expect("create the store");
        let windows = [
            WindowSpec::tumbling("1m", Span::from_millis(60_000), 10),
            WindowSpec::tumbling("5m", Span::from_millis(300_000), 10),
        ];
        writer.prepare(JOB, &windows).expect("prepare");
        let mut store = Store { dir, writer };
        store.commit(1, vec![list("1m", 1, &[("a", 3)]), list("5m", 1, &[("a", 3)])]);
        store
    }

    fn commit(&mut self, epoch: u64, lists: Vec<PublishedList>) {
        let batch = CommitBatch {
            job: JOB.into(),
            epoch,
            watermark: Millis(0),
            lists,
            dead_letters: vec![],
            hot_keys: Vec::new(),
            ranges: Vec::new(),
        };
        assert!(self.writer.commit(&batch).expect("commit"), "epoch {epoch} committed");
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The instance of `window` starting at 0, at `revision`.
fn list(window: &str, revision: u32, items: &[(&str, u64)]) -> PublishedList {
    let size = if window == "1m" { 60_000 } else { 300_000 };
    PublishedList {
        group: Default::default(),
        window: window.into(),
        start: Millis(0),
        end: Millis(size),
        revision,
        state: ListState::Open,
        watermark: Millis(0),
        as_of: Millis(1_700_000_000_000),
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

/// A running `hotlist serve`, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Server {
    /// Starts `hotlist serve` in `dir` with `flags`; with `open_files`, under `ulimit -n` of
    /// that. Waits (bounded) until `/healthz` answers.
    fn start(dir: &Path, flags: &[&str], open_files: Option<u32>) -> Server {
        let port = free_loopback_ports(1)[0];
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec![
            "serve",
            "--config",
            "hotlist.toml",
            "--listen",
            &listen,
            "--poll",
            "20ms",
        ];
        args.extend_from_slice(flags);
        let bin = hotlist_bin();
        let mut command = match open_files {
            None => Command::new(bin),
            Some(n) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(bin);
                sh
            }
        };
        let log = |name: &str| std::fs::File::create(dir.join(name)).expect("server log file");
        let child = command
            .args(&args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log("serve.out"))
            .stderr(log("serve.err"))
            .spawn()
            .expect("spawn hotlist serve");
        let mut server = Server {
            child,
            port,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + WAIT;
        // healthy, not merely listening: the first refresh may not have read the store yet
        while get(port, "/healthz").map_or(true, |r| r.status != 200) {
            server.assert_running();
            assert!(Instant::now() < deadline, "not healthy on port {port}{}", server.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.err")).unwrap_or_default()
    }

    fn logs(&self) -> String {
        let out = std::fs::read_to_string(self.dir.join("serve.out")).unwrap_or_default();
        format!("\n--- stdout\n{out}\n--- stderr\n{}", self.stderr())
    }

    fn assert_running(&mut self) {
        let exited = self.child.try_wait().expect("poll hotlist serve");
        assert!(exited.is_none(), "hotlist serve exited: {exited:?}{}", self.logs());
    }

    fn connect(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.port)).expect("connect")
    }

    /// GET `path` on a new connection: (status, headers in lower case, body).
    fn get(&self, path: &str) -> Response {
        get(self.port, path).unwrap_or_else(|e| panic!("GET {path}: {e}{}", self.logs()))
    }

    fn json(&self, path: &str) -> Value {
        let r = self.get(path);
        serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("GET {path}: {e}: {}", r.body))
    }

    /// Polls `path` until `done` holds for its JSON (bounded by [`WAIT`]); returns that JSON.
    fn wait_json(&mut self, path: &str, what: &str, done: impl Fn(u16, &Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            self.assert_running();
            let r = self.get(path);
            let v: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
            if done(r.status, &v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: last {path} {} {v}{}",
                r.status,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Server {
    /// SIGTERM (a graceful stop): whether it exited within `within`.
    fn terminate(&mut self, within: Duration) -> bool {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success());
        hotlist_tests::reap(&mut self.child, within)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// GET on a new connection (`Connection: close`), bounded by a 5 s read timeout.
fn get(port: u16, path: &str) -> std::io::Result<Response> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    parse_response(&raw)
}

fn parse_response(raw: &str) -> std::io::Result<Response> {
    let bad = || std::io::Error::new(ErrorKind::InvalidData, format!("bad HTTP response: {raw:?}"));
    let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(bad)?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Response {
        status,
        headers,
        body: body.to_string(),
    })
}

/// Reads one response with a `Content-Length` from a kept-alive connection.
fn read_response(s: &mut TcpStream) -> std::io::Result<Response> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let r = parse_response(&format!("{head}\r\n\r\n"))?;
            let len: usize = r.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            if body.len() >= len {
                return parse_response(&text);
            }
        }
    }
}

/// Whether the server has closed `s`: waits up to `within` for end-of-file (or a reset).
/// Data the server sends meanwhile is read and dropped.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left.min(Duration::from_millis(100))))
            .expect("read timeout");
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
}

/// A slowloris client (a request head trickled one header line at a time, never finished) is
/// closed once the header timeout has passed since it connected, however steadily it trickles.
#[test]
fn slowloris_is_closed_after_the_header_timeout() {
    let store = Store::new();
    let server = Server::start(store.path(), &["--header-timeout", "1s"], None);
    let mut s = server.connect();
    let connected = Instant::now();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .expect("write");
    let mut closed = false;
    while !closed && connected.elapsed() < Duration::from_secs(10) {
        // the next header line every 200 ms (the read timeout paces it) until the server closes
        closed = closed_within(&mut s, Duration::from_millis(200)) || s.write_all(b"X-Slow: 1\r\n").is_err();
    }
    let took = connected.elapsed();
    assert!(
        closed,
        "a trickling client was still connected after {took:?}{}",
        server.logs()
    );
    assert!(
        took >= Duration::from_millis(900),
        "closed before its header timeout: {took:?}"
    );
    assert!(took < Duration::from_secs(4), "closed late: {took:?}");
    assert_eq!(server.get("/healthz").status, 200, "the server still serves others");
}

/// A keep-alive connection is reused while requests keep coming, and closed once it has been
/// idle for the idle timeout.
#[test]
fn idle_keep_alive_is_closed_after_the_idle_timeout() {
    let store = Store::new();
    let server = Server::start(store.path(), &["--idle-timeout", "1s", "--header-timeout", "10s"], None);
    let mut s = server.connect();
    let request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    s.write_all(request).expect("write");
    assert_eq!(read_response(&mut s).expect("first response").status, 200);
    assert!(
        !closed_within(&mut s, Duration::from_millis(300)),
        "kept alive after a response"
    );
    s.write_all(request).expect("write");
    assert_eq!(read_response(&mut s).expect("second response").status, 200);
    let idle_since = Instant::now();
    assert!(
        closed_within(&mut s, Duration::from_secs(10)),
        "an idle connection is closed{}",
        server.logs()
    );
    let idle = idle_since.elapsed();
    assert!(
        idle >= Duration::from_millis(900),
        "closed before its idle timeout: {idle:?}"
    );
    assert!(idle < Duration::from_secs(4), "closed late: {idle:?}");
}

/// With more idle connections held than the process may open files (300 against
/// `ulimit -n 256`), `/healthz` on a new connection still answers promptly: the longest-idle
/// connections were closed to make room, the newest are still open.
#[test]
fn healthz_answers_with_more_idle_connections_than_open_files() {
    let store = Store::new();
    // long timeouts: nothing but the connection limit may close the idle connections
    let flags = ["--header-timeout", "60s", "--idle-timeout", "60s"];
    let server = Server::start(store.path(), &flags, Some(256));
    let mut idle: Vec<TcpStream> = (0..300).map(|_| server.connect()).collect();
    let asked = Instant::now();
    let r = server.get("/healthz");
    let took = asked.elapsed();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(took < Duration::from_secs(2), "/healthz took {took:?}{}", server.logs());
    assert!(
        closed_within(&mut idle[0], Duration::from_secs(5)),
        "the longest-idle connection was closed"
    );
    assert!(
        !closed_within(&mut idle[299], Duration::from_millis(200)),
        "the newest idle connection is still open"
    );
    assert!(
        server
            .stderr()
            .contains("note: at most 224 connections (the open-file limit is 256"),
        "the lowered limit is reported{}",
        server.logs()
    );
}

/// Every response says `X-Content-Type-Options: nosniff`; the page also carries a
/// Content-Security-Policy that allows only its own inline script and style and same-origin
/// fetches.
#[test]
fn security_headers() {
    let store = Store::new();
    let server = Server::start(store.path(), &[], None);
    for path in [
        "/",
        "/healthz",
        "/v1/windows",
        "/v1/top?window=1m",
        "/v1/top?window=nope",
        "/metrics",
    ] {
        let r = server.get(path);
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{path}");
    }
    let page = server.get("/");
    let csp = page.header("content-security-policy").expect("the page has a CSP");
    assert!(csp.starts_with("default-src 'none'; script-src 'sha256-"), "{csp}");
    for directive in ["style-src 'sha256-", "connect-src 'self'", "frame-ancestors 'none'"] {
        assert!(csp.contains(directive), "{directive}: {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
}

/// A corrupt list header (`item_count` = `count`) makes refreshes fail, but the server keeps
/// running, keeps serving the last good snapshot, reports the failure on `/healthz`, and
/// recovers once the instance is written again.
fn survives_a_corrupt_item_count(count: i64) {
    let mut store = Store::new();
    let mut server = Server::start(store.path(), &[], None);
    server.wait_json("/v1/windows", "epoch 1 served", |_, v| v["epoch"] == 1);
    let db = rusqlite::Connection::open(store.path().join("hotlist.db")).expect("open the store");
    let changed = db
        .execute(
            "UPDATE topk_instances SET item_count = ?1 WHERE job = ?2 AND window_name = '1m'",
            rusqlite::params![count, JOB],
        )
        .expect("corrupt the header");
    assert_eq!(changed, 1);
    store.commit(2, vec![list("5m", 2, &[("b", 4)])]); // a new epoch: the server reloads
    let health = server.wait_json("/healthz", "the failure is reported", |_, v| {
        v["last_error"].is_string()
    });
    assert_eq!(health["epoch"], 1, "the last good snapshot is served: {health}");
    let top = server.json("/v1/top?window=1m");
    assert_eq!(top["items"][0]["item_id"], "a", "{top}");
    store.commit(3, vec![list("1m", 2, &[("c", 5)])]); // rewrites the instance and its header
    server.wait_json("/healthz", "recovery", |status, v| {
        status == 200 && v["epoch"] == 3 && v["last_error"].is_null()
    });
    assert_eq!(server.json("/v1/top?window=1m")["items"][0]["item_id"], "c");
    server.assert_running();
    assert!(
        !server.stderr().contains("RUST_BACKTRACE"),
        "a failure is one log line, not a panic report{}",
        server.logs()
    );
}

/// An `item_count` of 2^62 (the reader's allocation overflows and panics) costs refreshes,
/// not the refresher.
#[test]
fn survives_a_corrupt_item_count_of_2_pow_62() {
    survives_a_corrupt_item_count(1 << 62);
}

/// An `item_count` of 2^40: a reader that trusts it asks for a 52 TB allocation, which aborts
/// the process (no panic to contain).
#[test]
#[ignore = "needs the sinks readers to validate item_count before allocating (issue 9 item 5, sinks part)"]
fn survives_a_corrupt_item_count_of_2_pow_40() {
    survives_a_corrupt_item_count(1 << 40);
}

/// The measurement in docs/api.md: `/healthz` latency over new connections while 1,000 idle
/// keep-alive connections and 100 slowloris connections are held (slowloris ones are closed
/// after the header timeout and reconnect at once, as an attacker would). Seconds from
/// `HOTLIST_LOAD_SECONDS` (default 20).
#[test]
#[ignore = "a measurement: scripts/loadtest idle runs it on a release build"]
fn healthz_latency_under_idle_and_slowloris() {
    let seconds: u64 = std::env::var("HOTLIST_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let store = Store::new();
    let server = Server::start(store.path(), &["--max-connections", "2000"], None);
    let mut idle = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let mut s = server.connect();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .expect("write");
        read_response(&mut s).expect("answered");
        idle.push(s);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slowloris = {
        let (stop, port) = (stop.clone(), server.port);
        std::thread::spawn(move || hold_slowloris(port, 100, &stop))
    };
    let mut latencies = Vec::new();
    let mut errors = 0;
    let end = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < end {
        let started = Instant::now();
        match get(server.port, "/healthz") {
            Ok(r) if r.status == 200 => latencies.push(started.elapsed()),
            _ => errors += 1,
        }
        std::thread::sleep(Duration::from_millis(10)); // pacing: about 100 probes a second
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reconnects = slowloris.join().expect("slowloris thread");
    let still_idle = idle
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(1)))
        .filter(|closed| !closed)
        .count();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
    assert!(!latencies.is_empty(), "no /healthz answered{}", server.logs());
    println!(
        "/healthz over new connections for {seconds} s while holding {still_idle} idle + 100 slowloris \
         connections ({reconnects} slowloris reconnects): {} probes, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, \
         errors {errors}",
        latencies.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

/// Holds `n` slowloris connections until `stop`: each sends a request head one header line a
/// second; a closed one is replaced at once. Returns how many were replaced.
fn hold_slowloris(port: u16, n: usize, stop: &std::sync::atomic::AtomicBool) -> usize {
    let open = || -> Option<TcpStream> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n").ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
    let mut reconnects = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        for slot in conns.iter_mut() {
            let alive = slot.as_mut().is_some_and(|s| {
                let mut buf = [0u8; 256];
                let eof = matches!(s.read(&mut buf), Ok(0));
                !eof && s.write_all(b"X-Slow: 1\r\n").is_ok()
            });
            if !alive {
                *slot = open();
                reconnects += 1;
            }
        }
        std::thread::sleep(Duration::from_secs(1)); // the trickle's pace
    }
    reconnects
}

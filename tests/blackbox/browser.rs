//! The live page in a real headless browser: `hotlist run` fills an SQLite store, `hotlist serve`
//! serves it, and tests/browser/live_page.mjs (Playwright driving the system Chromium) checks
//! that the page at `/` shows each window's list exactly as `/v1/top` returns it, and that it
//! follows the store when a second run commits new lists. It also checks that the page says
//! what each list is: nothing for the job's exact lists, the ≈ mark and "counts may be high by
//! ≤ N" for an approximate one, the recall of a sketch check (those lists are committed
//! straight into the store after the second run). Screenshots go to
//! target/test-artifacts/live-page.png and live-page-updated.png.
//!
//! Needs Node.js and Chromium ($CHROMIUM or /usr/bin/chromium); runs `npm ci` in tests/browser
//! when its node_modules is missing. Fails (never skips) when either is missing.

use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, SketchCheck};
use hotlist_operators::time::Millis;
use hotlist_sinks::{CommitBatch, SinkStore, SqliteStore};
use hotlist_tests::hotlist_bin;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// Window name -> [(item, count)] in rank order.
type Lists = BTreeMap<String, Vec<(String, u64)>>;

/// Rows the page asks for (`ROWS` in server/static/index.html).
const PAGE_ROWS: u64 = 20;
const WAIT: Duration = Duration::from_secs(20);

// The first run commits everything in epoch 0 (`epoch_interval` far above its runtime).
const CONFIG: &str = r#"
[job]
id = "browser"

[source]
kind = "generator"
seed = 1
events = 20000
start = 0
partitions = 2
items = 50
rate = 100          # events/s of event time per partition: 100 s of data, two 1m windows

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

[run]
epoch_interval = "1h"
"#;

/// Kills (and reaps) a child process when dropped, whatever the test's outcome.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A minimal HTTP/1.0 GET against 127.0.0.1:`port`: (status, body).
fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad HTTP response: {raw:?}"));
    let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(bad)?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)?;
    Ok((code, body.to_string()))
}

fn get_json(port: u16, path: &str) -> Value {
    let (code, body) = http_get(port, path).unwrap_or_else(|e| panic!("GET {path}: {e}"));
    assert_eq!(code, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The lists the page should show: each window's latest list, as many rows as the page asks for.
fn api_lists(port: u16) -> (Lists, Value) {
    let windows = get_json(port, "/v1/windows");
    let mut lists = Lists::new();
    for w in windows["windows"].as_array().expect("windows array") {
        let name = w["name"].as_str().expect("window name");
        if w["latest"].is_null() {
            continue;
        }
        let k = w["k"].as_u64().expect("window k").min(PAGE_ROWS);
        let top = get_json(port, &format!("/v1/top?window={}&k={k}", encode(name)));
        let items = top["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|it| {
                (
                    it["item_id"].as_str().expect("item_id").to_string(),
                    it["count"].as_u64().expect("count"),
                )
            })
            .collect();
        lists.insert(name.to_string(), items);
    }
    (lists, windows)
}

/// `{"window": [["item", count], …]}` from the page script.
fn page_lists(v: &Value) -> Lists {
    v.as_object()
        .expect("lists object")
        .iter()
        .map(|(w, rows)| {
            let rows = rows
                .as_array()
                .expect("rows")
                .iter()
                .map(|r| (r[0].as_str().expect("item").to_string(), r[1].as_u64().expect("count")))
                .collect();
            (w.clone(), rows)
        })
        .collect()
}

fn chromium_path() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "Chromium not found at {} (set $CHROMIUM to another binary): the browser test needs it; \
         scripts/test installs it (apt-get install chromium)",
        path.display()
    );
    path
}

/// Makes sure tests/browser/node_modules exists (`npm ci` from the lock file otherwise).
fn ensure_node_modules(dir: &Path) {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "node not found: the browser test needs Node.js 18+ and npm; scripts/test installs them"
    );
    if dir.join("node_modules/playwright-core/package.json").exists() {
        return;
    }
    eprintln!("browser test: running `npm ci` in {}", dir.display());
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .expect("spawn npm (the browser test needs Node.js and npm)");
    assert!(status.success(), "`npm ci` in {} failed ({status})", dir.display());
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

fn run_job(dir: &Path, extra: &[&str]) {
    let mut args = vec!["run", "--config", "hotlist.toml", "--progress", "never"];
    args.extend_from_slice(extra);
    hotlist_tests::run_hotlist(dir, &args, true);
}

/// Starts `hotlist serve` and waits (bounded) until /healthz answers 200.
fn start_server(dir: &Path, port: u16) -> KillOnDrop {
    let log = |name: &str| std::fs::File::create(dir.join(name)).expect("server log file");
    let child = Command::new(hotlist_bin())
        .args([
            "serve",
            "--config",
            "hotlist.toml",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log("serve.out"))
        .stderr(log("serve.err"))
        .spawn()
        .expect("spawn hotlist serve");
    let mut server = KillOnDrop(child);
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok((200, _)) = http_get(port, "/healthz") {
            return server;
        }
        let exited = server.0.try_wait().expect("poll hotlist serve");
        if exited.is_some() || Instant::now() > deadline {
            let out = std::fs::read_to_string(dir.join("serve.out")).unwrap_or_default();
            let err = std::fs::read_to_string(dir.join("serve.err")).unwrap_or_default();
            panic!(
                "hotlist serve on port {port} did not become healthy within {WAIT:?} (exit: {exited:?})\n\
                 --- stdout\n{out}\n--- stderr\n{err}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The job's committed epoch in the SQLite store.
fn committed_epoch(dir: &Path) -> u64 {
    let db = rusqlite::Connection::open(dir.join("hotlist.db")).expect("open hotlist.db");
    let epoch: i64 = db
        .query_row("SELECT epoch FROM hotlist_commits WHERE job = 'browser'", [], |r| {
            r.get(0)
        })
        .expect("read the committed epoch");
    epoch as u64
}

/// Commits, straight into the SQLite store as the job's next epoch, a new revision of each
/// window's latest list that says what it is: `5m` approximate (counts may be high by ≤ 37),
/// `1m` exact with a sketch check (one item of the list missed, over-counts of 5 at most and
/// 9 in all). Returns the epoch.
fn commit_lists_that_say_what_they_are(dir: &Path) -> u64 {
    let mut store = SqliteStore::open(&dir.join("hotlist.db")).expect("open hotlist.db");
    let (epoch, watermark) = store.last_commit("browser").expect("last commit").expect("a commit");
    let mut lists = Vec::new();
    for window in ["5m", "1m"] {
        let l = store.latest("browser", window).expect("read").expect("a list");
        let of = u32::try_from(l.items.len()).expect("k is small");
        let (exact, error_bound, sketch_check) = match window {
            "5m" => (false, 37, None),
            _ => (
                true,
                0,
                Some(SketchCheck {
                    found: of - 1,
                    of,
                    max_overcount: 5,
                    total_overcount: 9,
                }),
            ),
        };
        lists.push(PublishedList {
            group: Default::default(),
            window: l.window,
            start: l.start,
            end: l.end,
            revision: l.revision + 1,
            state: l.state,
            watermark: l.watermark,
            as_of: Millis::now(),
            items: l.items,
            exact,
            error_bound,
            sketch_check,
            certificate: None,
        });
    }
    let batch = CommitBatch {
        job: "browser".into(),
        epoch: epoch + 1,
        watermark,
        lists,
        dead_letters: vec![],
        hot_keys: Vec::new(),
        ranges: Vec::new(),
    };
    assert!(store.commit(&batch).expect("commit"), "epoch {} committed", epoch + 1);
    epoch + 1
}

/// Commits `window`'s latest list again as a sealed list a replay proved exact (the next
/// revision, final, with a certificate); returns the epoch.
fn commit_certified_list(dir: &Path, window: &str) -> u64 {
    let mut store = SqliteStore::open(&dir.join("hotlist.db")).expect("open hotlist.db");
    let (epoch, watermark) = store.last_commit("browser").expect("last commit").expect("a commit");
    let l = store.latest("browser", window).expect("read").expect("a list");
    let list = PublishedList {
        group: Default::default(),
        window: l.window,
        start: l.start,
        end: l.end,
        revision: l.revision + 1,
        state: ListState::Final,
        watermark: l.watermark,
        as_of: Millis::now(),
        items: l.items,
        exact: true,
        error_bound: 0,
        sketch_check: None,
        certificate: Some(hotlist_operators::certify::Certificate {
            threshold: 12,
            counted: 1_340,
            passes: 1,
        }),
    };
    let batch = CommitBatch {
        job: "browser".into(),
        epoch: epoch + 1,
        watermark,
        lists: vec![list],
        dead_letters: vec![],
        hot_keys: Vec::new(),
        ranges: Vec::new(),
    };
    assert!(store.commit(&batch).expect("commit"), "epoch {} committed", epoch + 1);
    epoch + 1
}

/// What the page says each window's list is, from the script's `accuracy` object: (data-exact,
/// the ≈ mark shown, the accuracy line).
fn page_accuracy(v: &Value, window: &str) -> (String, bool, String) {
    let a = &v[window];
    (
        a["exact"].as_str().expect("exact").to_string(),
        a["mark"].as_bool().expect("mark"),
        a["text"].as_str().expect("text").to_string(),
    )
}

/// Polls the API (bounded) until it serves the commit of `epoch`; returns its lists then.
fn wait_for_epoch(port: u16, epoch: u64) -> (Lists, Value) {
    let deadline = Instant::now() + WAIT;
    loop {
        let windows = get_json(port, "/v1/windows");
        if windows["epoch"].as_u64() == Some(epoch) {
            return api_lists(port);
        }
        assert!(
            Instant::now() < deadline,
            "the API does not serve epoch {epoch} {WAIT:?} after the run committed it: {windows}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The page script: its stdin, and its stdout lines (read on a thread, so reads are bounded).
struct Page {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Page {
    fn start(script_dir: &Path, chromium: &Path, url: &str, shot: &Path) -> Page {
        let mut child = Command::new("node")
            .arg(script_dir.join("live_page.mjs"))
            .arg(url)
            .arg(shot)
            .current_dir(script_dir)
            .env("CHROMIUM", chromium)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn node");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("node stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Page {
            child: KillOnDrop(child),
            stdin,
            lines,
        }
    }

    /// The next JSON line; panics on the script's `{"error":…}`, EOF or a timeout.
    fn next(&mut self, expect: &str) -> Value {
        // The script bounds each of its waits by 20 s; leave room for the browser's start.
        let line = self.lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| {
            panic!(
                "no {expect:?} line from live_page.mjs ({e}); exit: {:?}",
                self.child.0.try_wait()
            )
        });
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("live_page.mjs printed {line:?}: {e}"));
        assert!(v.get("error").is_none(), "live_page.mjs failed: {}", v["error"]);
        assert_eq!(
            v[expect],
            Value::Bool(true),
            "expected {expect:?} from live_page.mjs, got {v}"
        );
        v
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("node stdin");
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .expect("write to live_page.mjs");
    }

    fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(s) = self.child.0.try_wait().expect("poll node") {
                break s;
            }
            assert!(Instant::now() < deadline, "live_page.mjs did not exit within {WAIT:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "live_page.mjs exited with {status}");
    }
}

/// The browser tests' tools: Chromium, the scripts' directory (its node_modules installed) and
/// target/test-artifacts (created) for screenshots.
fn browser_tools() -> (PathBuf, PathBuf, PathBuf) {
    let chromium = chromium_path();
    let script_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    ensure_node_modules(&script_dir);
    let artifacts = hotlist_bin()
        .parent()
        .and_then(|profile| profile.parent())
        .expect("target dir")
        .join("test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("create target/test-artifacts");
    (chromium, script_dir, artifacts)
}

fn assert_screenshot(path: &Path) {
    let len = std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("screenshot {}: {e}", path.display()))
        .len();
    assert!(len > 10 * 1024, "screenshot {} is only {len} bytes", path.display());
}

#[test]
fn live_page_shows_and_follows_the_lists() {
    let started = Instant::now();
    let (chromium, script_dir, artifacts) = browser_tools();
    let shot = artifacts.join("live-page.png");
    let shot_updated = artifacts.join("live-page-updated.png");
    for p in [&shot, &shot_updated] {
        let _ = std::fs::remove_file(p);
    }

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("write config");
    run_job(dir.path(), &[]);

    let port = free_port();
    let _server = start_server(dir.path(), port);
    let (before, windows) = wait_for_epoch(port, committed_epoch(dir.path()));
    assert_eq!(before.len(), 2, "both windows have a list: {windows}");
    assert!(before.values().all(|l| !l.is_empty()), "{before:?}");

    let mut page = Page::start(&script_dir, &chromium, &format!("http://127.0.0.1:{port}/"), &shot);
    let ready = page.next("ready");
    let shown = page_lists(&ready["lists"]);
    assert_eq!(shown, before, "the page shows the API's lists");
    for window in ["1m", "5m"] {
        let plain = ("true".to_string(), false, String::new());
        assert_eq!(
            page_accuracy(&ready["accuracy"], window),
            plain,
            "an exact list is not marked"
        );
    }

    // New data in the same store. The store skips commits at or below its committed epoch (the
    // first run committed epoch 0), so this run closes an epoch every millisecond, in small
    // batches, one epoch in flight: its later epochs commit the new lists.
    run_job(
        dir.path(),
        &[
            "--set",
            "source.seed=7",
            "--set",
            "source.events=40000",
            "--set",
            "run.epoch_interval=1ms",
            "--set",
            "run.batch_size=16",
            "--set",
            "run.max_epochs_in_flight=1",
        ],
    );
    assert!(
        committed_epoch(dir.path()) > 0,
        "the second run committed no epoch after the first run's epoch 0"
    );
    let epoch = commit_lists_that_say_what_they_are(dir.path());
    let (after, windows) = wait_for_epoch(port, epoch);
    assert_ne!(after, before, "the second run changed the API's lists: {windows}");
    let five = get_json(port, "/v1/top?window=5m&k=1");
    assert_eq!(
        (five["exact"].as_bool(), five["error_bound"].as_u64()),
        (Some(false), Some(37))
    );

    page.send("changed");
    let updated = page.next("updated");
    let shown_updated = page_lists(&updated["lists"]);
    assert_ne!(shown_updated, shown, "the page's lists changed");
    assert_eq!(shown_updated, after, "the page shows the API's new lists");
    let approximate = ("false".to_string(), true, "≈ counts may be high by ≤ 37".to_string());
    assert_eq!(
        page_accuracy(&updated["accuracy"], "5m"),
        approximate,
        "an approximate list is marked"
    );
    let of = after["1m"].len();
    let checked = (
        "true".to_string(),
        false,
        format!(
            "sketch recall {:.1}% ({}/{of}) · over-count max 5, mean {:.1}",
            100.0 * (of - 1) as f64 / of as f64,
            of - 1,
            9.0 / of as f64
        ),
    );
    assert_eq!(
        page_accuracy(&updated["accuracy"], "1m"),
        checked,
        "a sketch check is shown, unmarked"
    );
    // the 5m list sealed and a replay proved it exact (`exact_at_seal`): "≈" gives way to
    // "exact · certified"
    let epoch = commit_certified_list(dir.path(), "5m");
    wait_for_epoch(port, epoch);
    page.send("accuracy-changed");
    let certified = page.next("certified");
    assert_eq!(
        page_accuracy(&certified["accuracy"], "5m"),
        (
            "true".to_string(),
            false,
            "exact · certified (replay counted 1,340 items from threshold 12, 1 pass)".to_string()
        ),
        "a certified list is exact, with its certificate"
    );
    page.finish();

    assert_screenshot(&shot);
    assert_screenshot(&shot_updated);
    eprintln!(
        "browser test: ok in {:.1?}; screenshots {} and {}",
        started.elapsed(),
        shot.display(),
        shot_updated.display()
    );
}

const GROUPS_CONFIG: &str = r#"
[job]
id = "browser-groups"

[source]
kind = "file"
path = "events.jsonl"

[[window]]
name = "by-country"
size = "1m"
k = 5
by = ["country"]

[sink]
kind = "sqlite"
path = "hotlist.db"
"#;

/// `[[item, count], …]` from the group picker script.
fn rows(v: &Value) -> Vec<(String, u64)> {
    v.as_array()
        .expect("rows")
        .iter()
        .map(|r| (r[0].as_str().expect("item").to_string(), r[1].as_u64().expect("count")))
        .collect()
}

/// A per-group window on the live page: a picker lists the latest instance's groups (as
/// `/v1/groups` does), the page shows the first group's list, and picking another group in the
/// browser shows that group's list — each exactly as `/v1/top?window=W&country=…` returns it.
#[test]
fn live_page_group_picker_switches_lists() {
    let (chromium, script_dir, artifacts) = browser_tools();
    let shot = artifacts.join("live-page-groups.png");
    let _ = std::fs::remove_file(&shot);

    let dir = tempfile::tempdir().expect("tempdir");
    let mut events = String::new();
    for (country, item, n) in [
        ("DE", "bratwurst", 3),
        ("DE", "pretzel", 1),
        ("US", "burger", 4),
        ("US", "pie", 2),
    ] {
        for i in 0..n {
            events.push_str(&format!(
                "{{\"item_id\":\"{item}\",\"ts\":{},\"dims\":{{\"country\":\"{country}\"}}}}\n",
                1000 + i
            ));
        }
    }
    std::fs::write(dir.path().join("events.jsonl"), events).expect("write events");
    std::fs::write(dir.path().join("hotlist.toml"), GROUPS_CONFIG).expect("write config");
    run_job(dir.path(), &[]);

    let port = free_port();
    let _server = start_server(dir.path(), port);
    let groups = get_json(port, "/v1/groups?window=by-country");
    let keys: Vec<&str> = groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g["key"].as_str().expect("key"))
        .collect();
    assert_eq!(keys, ["country=DE", "country=US"], "{groups}");
    let api = |country: &str| {
        let top = get_json(port, &format!("/v1/top?window=by-country&country={country}"));
        rows(&Value::Array(
            top["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|it| serde_json::json!([it["item_id"], it["count"]]))
                .collect(),
        ))
    };
    assert_eq!(api("US"), [("burger".to_string(), 4), ("pie".to_string(), 2)]);

    let out = Command::new("node")
        .arg(script_dir.join("group_picker.mjs"))
        .args([
            &format!("http://127.0.0.1:{port}/"),
            "by-country",
            &shot.display().to_string(),
        ])
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run group_picker.mjs");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("group_picker.mjs printed {l:?}: {e}")))
        .collect();
    assert!(
        out.status.success() && lines.len() == 2,
        "group_picker.mjs failed ({}): {lines:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines[0]["options"],
        serde_json::json!(keys),
        "the picker offers /v1/groups's groups"
    );
    assert_eq!(lines[0]["group"], "country=DE");
    assert_eq!(rows(&lines[0]["list"]), api("DE"), "the first group's list");
    assert_eq!(lines[1]["group"], "country=US");
    assert_eq!(rows(&lines[1]["list"]), api("US"), "the picked group's list");
    assert_screenshot(&shot);
}

/// With a slow server (every `/v1/windows` held 2.5 s by the browser), the live page polls one
/// at a time: never two `/v1/windows` requests in flight, where a page that polls every second
/// regardless would pile up three. Its polls keep going (more than one in 7 s).
#[test]
fn live_page_never_stacks_polls() {
    let chromium = chromium_path();
    let script_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    ensure_node_modules(&script_dir);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("write config");
    run_job(dir.path(), &[]);
    let port = free_port();
    let _server = start_server(dir.path(), port);
    let out = Command::new("node")
        .arg(script_dir.join("poll_overlap.mjs"))
        .args([&format!("http://127.0.0.1:{port}/"), "2500", "7000"])
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run poll_overlap.mjs");
    let line = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| {
        panic!(
            "poll_overlap.mjs printed {line:?}: {e}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success() && v.get("error").is_none(),
        "poll_overlap.mjs failed: {v}"
    );
    assert_eq!(v["max_in_flight"], 1, "one poll at a time: {v}");
    assert!(
        v["requests"].as_u64().is_some_and(|n| n >= 2),
        "the page keeps polling: {v}"
    );
}

const TREND_CONFIG: &str = r#"
[job]
id = "browser"

[source]
kind = "generator"
seed = 1
events = 20000
start = 0
partitions = 2
items = 50
rate = 100          # 100 s of event time: ten 10 s instances

[[window]]
name = "1m"
size = "1m"
k = 10

[[window]]
name = "10s-trend"
size = "10s"
k = 10
rank_by = "trend"
baseline = 3
min_count = 5

[[window]]
name = "5m"
size = "5m"
k = 10

[sink]
kind = "sqlite"
path = "hotlist.db"

[run]
epoch_interval = "1h"
"#;

/// The (item, count, ratio, history) rows of a `/v1/top` answer.
fn trend_rows(v: &Value) -> Vec<(String, u64, f64, Vec<u64>)> {
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|it| {
            let history = it["history"].as_array().expect("a trend item's history");
            (
                it["item_id"].as_str().expect("item_id").to_string(),
                it["count"].as_u64().expect("count"),
                it["ratio"].as_f64().expect("ratio"),
                history.iter().map(|c| c.as_u64().expect("a count")).collect(),
            )
        })
        .collect()
}

/// What a user sees on the live page of a job with a trend window, at a phone and a desktop
/// width: the windows in their configured order (not by name, not by which answer came first);
/// every row's bar as long as its count against the list's largest; each trend row's "× usual"
/// and a sparkline with one point per instance before, higher where the count was higher, as
/// `/v1/top` gives them; nothing wider than the screen; and "lists as of" showing the chosen
/// past instance's list. Screenshots: target/test-artifacts/trend-page-{390,1280}[-history].png.
#[test]
fn live_page_shows_trends_bars_and_history() {
    let (chromium, script_dir, artifacts) = browser_tools();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("hotlist.toml"), TREND_CONFIG).expect("write config");
    run_job(dir.path(), &[]);
    let port = free_port();
    let _server = start_server(dir.path(), port);
    let latest = get_json(port, "/v1/top?window=10s-trend&k=10");
    let past = get_json(port, "/v1/top?window=10s-trend&k=10&at=25000");
    assert_eq!(past["window_start"], 20_000, "{past}");
    assert!(
        !trend_rows(&latest).is_empty() && !trend_rows(&past).is_empty(),
        "{latest} {past}"
    );

    let out = Command::new("node")
        .arg(script_dir.join("trend_page.mjs"))
        .args([
            &format!("http://127.0.0.1:{port}/"),
            "10s-trend",
            "1970-01-01T00:00:25",
            &artifacts.display().to_string(),
        ])
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run trend_page.mjs");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("trend_page.mjs printed {l:?}: {e}")))
        .collect();
    assert!(
        out.status.success() && lines.len() == 2,
        "trend_page.mjs failed ({}): {lines:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for line in &lines {
        let width = line["width"].as_u64().expect("width");
        for (shown, api) in [(&line["live"], &latest), (&line["history"], &past)] {
            assert_eq!(
                shown["order"],
                serde_json::json!(["1m", "10s-trend", "5m"]),
                "{width}: configured order"
            );
            assert_eq!(shown["overflow"], false, "{width}: nothing wider than the screen");
            assert_eq!(
                shown["start"],
                api["window_start"].to_string(),
                "{width}: the instance shown"
            );
            let rows = shown["lists"]["10s-trend"].as_array().expect("the trend window's rows");
            let want = trend_rows(api);
            assert_eq!(rows.len(), want.len(), "{width}: {rows:?}");
            for (row, (item, count, ratio, history)) in rows.iter().zip(&want) {
                assert_eq!(
                    (row["item"].as_str(), row["count"].as_u64()),
                    (Some(item.as_str()), Some(*count))
                );
                assert_eq!(row["ratio"], format!("×{ratio:.1} usual"), "{width}: {item}");
                let joined: Vec<String> = history.iter().map(u64::to_string).collect();
                assert_eq!(row["history"], joined.join(","), "{width}: {item}'s sparkline");
                // one point per instance before, higher (a smaller y) where the count was higher
                let ys: Vec<f64> = row["points"]
                    .as_str()
                    .expect("points")
                    .split(' ')
                    .map(|p| p.split(',').nth(1).expect("x,y").parse().expect("a number"))
                    .collect();
                assert_eq!(ys.len(), history.len(), "{width}: {item}");
                for (i, j) in [(0, 1), (1, 2), (0, 2)] {
                    let (a, b) = (history[i].cmp(&history[j]), ys[j].partial_cmp(&ys[i]).expect("finite"));
                    assert_eq!(a, b, "{width}: {item}: history {history:?}, y {ys:?}");
                }
            }
            // bars: proportional to the counts against the list's largest
            for list in shown["lists"].as_object().expect("lists").values() {
                let rows = list.as_array().expect("rows");
                let most = rows.iter().filter_map(|r| r["count"].as_f64()).fold(1.0, f64::max);
                let widest = rows.iter().filter_map(|r| r["row"].as_f64()).fold(0.0, f64::max);
                for r in rows {
                    let want = r["count"].as_f64().expect("count") / most * widest;
                    let got = r["bar"].as_f64().expect("bar");
                    assert!((got - want).abs() <= 1.5, "{width}: bar {got} px for {r}, want {want}");
                }
            }
        }
        for name in [
            format!("trend-page-{width}.png"),
            format!("trend-page-{width}-history.png"),
        ] {
            assert_screenshot(&artifacts.join(name));
        }
    }
}

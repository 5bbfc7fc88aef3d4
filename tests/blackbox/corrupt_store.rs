//! The built binary over a damaged store (a list header whose `item_count` is 2^40 or 2^62):
//! `hotlist query` prints one clear line naming the window and instance and exits 1 (it used to
//! abort on a 52 TB allocation, or panic), on SQLite and on PostgreSQL; `hotlist serve` keeps
//! serving its last good snapshot, reports the damage in `/healthz`, and recovers once the row
//! is repaired. A list that claims an impossible accuracy (an exact list with an error bound, a
//! sketch check that found more than it compared) is reported the same way.

use hotlist_tests::{free_loopback_ports, run_hotlist};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A bounded generator run of job "hotlist" with one window, `1m` (K = 5), into `sink`.
fn config(sink: &str) -> String {
    format!(
        "[source]\nkind = \"generator\"\nitems = 100\npartitions = 1\nevents = 3000\n\
         [[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 5\n{sink}"
    )
}

/// Runs the job of `hotlist.toml` in `dir` to its end.
fn run_job(dir: &Path) {
    run_hotlist(dir, &["run", "--config", "hotlist.toml", "--progress", "never"], true);
}

/// `hotlist query` of window `1m` must fail with exactly one line, exit 1, naming the damaged
/// header's item count; returns that line.
fn query_fails_with_one_line(dir: &Path, item_count: i64) -> String {
    query_fails_with(
        dir,
        &format!(": header item_count {item_count} exceeds the window's k (5)"),
    )
}

/// `hotlist query` of window `1m` must fail with exactly one line, exit 1, naming the list and
/// ending with `want`; returns that line.
fn query_fails_with(dir: &Path, want: &str) -> String {
    for extra in [&[][..], &["--json"][..]] {
        let mut args = vec!["query", "--config", "hotlist.toml", "--window", "1m"];
        args.extend_from_slice(extra);
        let out = run_hotlist(dir, &args, false);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "exit 1, not an abort or a panic: {stderr}");
        assert!(out.stdout.is_empty(), "nothing printed but the error");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        let line = lines[0];
        assert!(line.starts_with("error: corrupt data in "), "{line}");
        assert!(line.contains(": job \"hotlist\" window \"1m\" instance "), "{line}");
        assert!(line.ends_with(want), "{line} (want {want:?})");
        if extra.is_empty() {
            return line.to_string();
        }
    }
    unreachable!("the loop returns")
}

#[test]
fn query_of_a_damaged_sqlite_header_is_one_line_and_exit_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("hotlist.toml"), config("[sink]\npath = \"out.db\"\n")).expect("config");
    run_job(dir.path());
    let db = rusqlite::Connection::open(dir.path().join("out.db")).expect("open out.db");
    for n in [1i64 << 40, 1 << 62] {
        db.execute("UPDATE topk_instances SET item_count = ?1", [n])
            .expect("damage");
        let line = query_fails_with_one_line(dir.path(), n);
        assert!(line.starts_with("error: corrupt data in out.db: job"), "{line}");
    }
}

/// An exact list with an error bound, a sketch check that found more than it compared or a
/// row that disagrees with its header (written around the table's `CHECK` constraints):
/// `hotlist query` prints one line naming the list and the field, and exits 1.
#[test]
fn query_of_a_damaged_sqlite_accuracy_is_one_line_and_exit_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("hotlist.toml"), config("[sink]\npath = \"out.db\"\n")).expect("config");
    run_job(dir.path());
    let db = rusqlite::Connection::open(dir.path().join("out.db")).expect("open out.db");
    db.pragma_update(None, "ignore_check_constraints", true)
        .expect("pragma");
    let cases = [
        (
            "UPDATE topk_instances SET error_bound = 5",
            ": an exact list has error_bound 5 (must be 0)",
        ),
        (
            "UPDATE topk_instances SET exact = 0, error_bound = 5, sketch_found = 4, sketch_of = 3, \
             sketch_max_overcount = 0, sketch_total_overcount = 0",
            ": sketch_found 4 exceeds sketch_of 3",
        ),
        (
            "UPDATE topk_instances SET sketch_found = NULL, sketch_of = NULL, sketch_max_overcount = NULL, \
             sketch_total_overcount = NULL",
            ": row 1 has exact 1 and error_bound 0, header exact 0 and error_bound 5",
        ),
    ];
    for (damage, want) in cases {
        db.execute_batch(damage).expect("damage");
        let line = query_fails_with(dir.path(), want);
        assert!(line.starts_with("error: corrupt data in out.db: job"), "{line}");
    }
    db.execute_batch("UPDATE topk SET exact = 0, error_bound = 5")
        .expect("repair");
    let out = run_hotlist(
        dir.path(),
        &["query", "--config", "hotlist.toml", "--window", "1m"],
        true,
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("≈ approximate: counts may be high by ≤ 5"), "{table}");
}

#[test]
fn query_of_a_damaged_postgres_header_is_one_line_and_exit_1() {
    // the local PostgreSQL: not while a test restarts it
    let _postgres = hotlist_tests::serial::postgres();
    let url = std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into());
    let schema = format!("hotlist_corrupt_{}_{}", std::process::id(), rand::random::<u32>());
    struct DropSchema(String, String);
    impl Drop for DropSchema {
        fn drop(&mut self) {
            let _ = hotlist_sinks::postgres::drop_schema(&self.0, &self.1);
        }
    }
    let _cleanup = DropSchema(url.clone(), schema.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = format!("[sink]\nkind = \"postgres\"\nurl = \"{url}\"\nschema = \"{schema}\"\n");
    std::fs::write(dir.path().join("hotlist.toml"), config(&sink)).expect("config");
    run_job(dir.path());
    let mut pg = postgres::Client::connect(&url, postgres::NoTls).expect("connect postgres");
    for n in [1i64 << 40, 1 << 62] {
        pg.execute(
            &format!("UPDATE \"{schema}\".topk_instances SET item_count = $1"),
            &[&n],
        )
        .expect("damage");
        let line = query_fails_with_one_line(dir.path(), n);
        assert!(line.contains(&schema), "the line names the store: {line}");
    }
}

/// `hotlist serve` on a loopback port; killed (by its process id) when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(dir: &Path) -> Server {
        let port = free_loopback_ports(1)[0];
        let child = Command::new(hotlist_tests::hotlist_bin())
            .args(["serve", "--config", "hotlist.toml", "--poll", "50ms"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn hotlist serve");
        Server { child, port }
    }

    /// GET `path`: the status code and the JSON body.
    fn get(&self, path: &str) -> (u16, serde_json::Value) {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect to serve");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
            .expect("request");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("response");
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status line");
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        (status, serde_json::from_str(body).unwrap_or(serde_json::Value::Null))
    }

    /// Polls `path` (bounded) until `ok` holds for its answer; the server must stay up.
    fn wait_for(&mut self, path: &str, what: &str, ok: impl Fn(u16, &serde_json::Value) -> bool) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(
                self.child.try_wait().expect("poll serve").is_none(),
                "hotlist serve exited while waiting for {what}"
            );
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                let (status, body) = self.get(path);
                if ok(status, &body) {
                    return body;
                }
                assert!(
                    Instant::now() < deadline,
                    "timed out waiting for {what}: {status} {body}"
                );
            } else {
                assert!(Instant::now() < deadline, "timed out waiting for {what}: not listening");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The store goes bad after `serve` loaded a good snapshot: the list stays served, `/healthz`
/// turns degraded naming the damage (2^40, then 2^62, which used to abort the server and to
/// kill its refresher), and once the row is repaired it is healthy again on the new epoch.
#[test]
fn serve_keeps_the_last_good_snapshot_while_the_store_is_damaged() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("hotlist.toml"), config("[sink]\npath = \"out.db\"\n")).expect("config");
    run_job(dir.path());
    let db = rusqlite::Connection::open(dir.path().join("out.db")).expect("open out.db");
    let good_count: i64 = db
        .query_row("SELECT item_count FROM topk_instances", [], |r| r.get(0))
        .expect("item_count");
    let mut server = Server::start(dir.path());
    server.wait_for("/healthz", "a healthy server", |s, _| s == 200);
    let top = |b: &serde_json::Value| b["items"].clone();
    let good = server.wait_for("/v1/top?window=1m", "the list", |s, b| s == 200 && top(b).is_array());
    assert_eq!(top(&good).as_array().map(Vec::len), Some(5));

    // Damage the header and commit a new epoch, so the refresher reloads.
    let bump = "UPDATE hotlist_commits SET epoch = epoch + 1";
    for n in [1i64 << 40, 1 << 62] {
        db.execute("UPDATE topk_instances SET item_count = ?1", [n])
            .expect("damage");
        db.execute(bump, []).expect("new epoch");
        let want = format!("header item_count {n} exceeds the window's k (5)");
        let health = server.wait_for("/healthz", "a degraded /healthz naming the damage", |s, b| {
            s == 503 && b["status"] == "degraded" && b["last_error"].as_str().is_some_and(|e| e.contains(&want))
        });
        assert!(
            health["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("window \"1m\"")),
            "{health}"
        );
        let (status, body) = server.get("/v1/top?window=1m");
        assert_eq!(
            (status, top(&body)),
            (200, top(&good)),
            "the last good snapshot is served"
        );
    }

    // Repaired: healthy again, on the new epoch.
    db.execute("UPDATE topk_instances SET item_count = ?1", [good_count])
        .expect("repair");
    db.execute(bump, []).expect("new epoch");
    let epoch: i64 = db
        .query_row("SELECT epoch FROM hotlist_commits", [], |r| r.get(0))
        .expect("epoch");
    let health = server.wait_for("/healthz", "a healthy /healthz after the repair", |s, b| {
        s == 200 && b["epoch"] == epoch && b["last_error"].is_null()
    });
    assert_eq!(health["status"], "ok");
    let (status, body) = server.get("/v1/top?window=1m");
    assert_eq!((status, top(&body)), (200, top(&good)));
}

//! The job's metrics endpoint (`hotlist run --metrics-addr`) under idle and silent clients
//! (issue 21 item 5): it has `serve`'s connection guard, so clients holding more sockets than
//! the job may open files neither stop `/metrics` from answering nor take the descriptors the
//! job needs for its checkpoints and its store.

use super::{closed_within, get, WAIT};
use hotlist_tests::{free_loopback_ports, hotlist_bin, sqlite_committed_epoch};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
[job]
id = "metrics"

[source]
kind = "generator"
seed = 1
items = 1000
partitions = 2
rate = 200
pace = true

[[window]]
name = "1m"
size = "1m"
k = 10

[sink]
kind = "sqlite"
path = "hotlist.db"

[checkpoint]
dir = "checkpoints"
interval = "500ms"
"#;

/// `hotlist run` under `ulimit -n 256`, killed when dropped.
struct Job {
    child: Child,
    port: u16,
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Job {
    fn logs(&self, dir: &Path) -> String {
        let err = std::fs::read_to_string(dir.join("run.err")).unwrap_or_default();
        format!("\n--- stderr of hotlist run\n{err}")
    }
}

/// With 300 silent connections held against the metrics port of a job that may open 256
/// files, `/metrics` on a new connection still answers promptly, the longest-waiting
/// connections are closed to make room, the silent ones are all closed after the header
/// timeout (5 s), and the job keeps committing through it all.
#[test]
fn metrics_endpoint_answers_under_more_idle_connections_than_open_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("config");
    let port = free_loopback_ports(1)[0];
    let log = |name: &str| std::fs::File::create(dir.path().join(name)).expect("log file");
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 256 && exec \"$0\" \"$@\"")
        .arg(hotlist_bin())
        .args(["run", "--config", "hotlist.toml", "--progress", "never"])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(log("run.out"))
        .stderr(log("run.err"))
        .spawn()
        .expect("spawn hotlist run");
    let mut job = Job { child, port };
    let db = dir.path().join("hotlist.db");
    let deadline = Instant::now() + WAIT;
    while sqlite_committed_epoch(&db, "metrics").is_none()
        || get(job.port, "/metrics").map_or(true, |r| r.status != 200)
    {
        assert!(
            job.child.try_wait().expect("poll").is_none(),
            "the job exited{}",
            job.logs(dir.path())
        );
        assert!(
            Instant::now() < deadline,
            "the job never committed and served /metrics{}",
            job.logs(dir.path())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = sqlite_committed_epoch(&db, "metrics").expect("committed");

    let addr = SocketAddr::from(([127, 0, 0, 1], job.port));
    // a connect the server never accepts may wait in the backlog: bounded, and not an error here
    let mut idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok())
        .collect();
    assert!(idle.len() > 256, "held {} connections", idle.len());

    let asked = Instant::now();
    let r = get(job.port, "/metrics").unwrap_or_else(|e| panic!("GET /metrics: {e}{}", job.logs(dir.path())));
    let took = asked.elapsed();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(took < Duration::from_secs(3), "/metrics took {took:?}");
    assert!(
        r.body
            .contains("hotlist_metrics_endpoint_connections_closed_total{reason=\"evicted\"}"),
        "the guard counts what it closed:\n{}",
        r.body
    );
    assert!(
        closed_within(&mut idle[0], Duration::from_secs(5)),
        "the longest-waiting connection was closed to make room"
    );
    let last = idle.len() - 1;
    assert!(
        closed_within(&mut idle[last], Duration::from_secs(10)),
        "a silent connection is closed after the header timeout"
    );

    let deadline = Instant::now() + WAIT;
    while sqlite_committed_epoch(&db, "metrics").is_none_or(|e| e <= before) {
        assert!(
            job.child.try_wait().expect("poll").is_none(),
            "the job exited{}",
            job.logs(dir.path())
        );
        assert!(
            Instant::now() < deadline,
            "the job stopped committing{}",
            job.logs(dir.path())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let logs = job.logs(dir.path());
    assert!(!logs.contains("Too many open files"), "{logs}");
}

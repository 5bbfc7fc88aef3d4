//! The on-call dashboard and alert rules name only metrics that exist (issue 25, part 4): every
//! metric their PromQL selects (parsed by `tests/repo/dashboard.rs`, included here) is exported
//! by the built binary in a test run.
//!
//! The run: a live job on the paced generator with everything the dashboard shows switched on
//! (checkpoints, dead letters, a `sketch` window with `exact_at_seal`, a `mode = "both"`
//! window, hot keys, a Redis fan-out to a port nothing listens on, a held connection the metrics
//! endpoint evicts), scraped while it runs until it has done each of those; a second job on
//! standard input whose `by` window overflows `max_groups`; then `hotlist serve` on the first
//! job's store, scraped after one API request and one connection it closed. A metric counts as
//! exported if a scrape has a sample of it or a `# TYPE` line for it (a histogram's by its
//! `_bucket`, `_sum` and `_count` series, the names PromQL selects). The Kafka consumer lag
//! needs a broker: the Kafka tests assert it (see [`KAFKA_ONLY`]).

#[path = "../repo/dashboard.rs"]
mod rules;

use hotlist_tests::{free_loopback_ports, hotlist_bin};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How long each awaited condition may take (a loaded 2-core machine builds beside the tests).
const WAIT: Duration = Duration::from_secs(90);

/// Metrics only a Kafka source exports, each with the Kafka test that asserts it is scraped.
const KAFKA_ONLY: [(&str, &str); 1] = [("hotlist_partition_consumer_lag", "kafka/outages.rs")];

/// The job: two generated partitions at 300 events/s each, in real time, with bad and late
/// records; small windows and lateness so instances close, seal and replay within seconds.
const JOB: &str = r#"
[job]
id = "dash"

[source]
kind = "generator"
seed = 25
items = 300
partitions = 2
rate = 300
pace = true
jitter = "100ms"
late_fraction = 0.02
late_by = "20s"
bad_fraction = 0.02

[time]
max_out_of_orderness = "200ms"
allowed_lateness = "500ms"
emit_interval = "100ms"

[[window]]
name = "2s"
size = "2s"
k = 5

[[window]]
name = "2s-sketch"
size = "2s"
k = 5
mode = "sketch"
exact_at_seal = true
[window.sketch]
epsilon = 0.05
delta = 0.1

[[window]]
name = "2s-both"
size = "2s"
k = 5
mode = "both"
[window.sketch]
epsilon = 0.05
delta = 0.1

[hot_keys]
threshold = 1
window = "1s"

[sink]
kind = "sqlite"
path = "hotlist.db"
redis_url = "REDIS_URL"

[checkpoint]
dir = "checkpoints"
interval = "200ms"

[run]
max_dead_letters_per_block = 3
"#;

/// The second job: lines on standard input, one list per country, at most one country's own.
const GROUPS_JOB: &str = r#"
[job]
id = "groups"

[source]
kind = "file"
path = "-"

[time]
max_out_of_orderness = "0s"
emit_interval = "50ms"

[[window]]
name = "1m"
size = "1m"
k = 3
by = ["country"]
max_groups = 1

[sink]
kind = "sqlite"
path = "groups.db"
"#;

/// A child process killed when dropped (a failed assertion leaves nothing running), with the
/// file its stderr goes to.
struct Proc {
    child: Child,
    stderr: std::path::PathBuf,
}

impl Proc {
    fn spawn(dir: &Path, name: &str, args: &[&str], stdin: Stdio) -> Proc {
        let stderr = dir.join(format!("{name}.err"));
        let child = Command::new(hotlist_bin())
            .args(args)
            .current_dir(dir)
            .env("HOTLIST_LOG", "hotlist=info,warn")
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("a log file"))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn hotlist {args:?}: {e}"));
        Proc { child, stderr }
    }

    fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        format!("\n--- {}\n{text}", self.stderr.display())
    }

    fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("poll the child");
        assert!(status.is_none(), "exited early: {status:?}{}", self.log());
    }

    /// Waits (bounded by [`WAIT`]) for a graceful exit after SIGTERM or the end of the input.
    fn await_exit(&mut self) {
        assert!(
            hotlist_tests::reap(&mut self.child, WAIT),
            "did not exit within {WAIT:?}{}",
            self.log()
        );
        let status = self.child.wait().expect("exit status");
        assert!(status.success(), "exited with {status}{}", self.log());
    }

    fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        self.await_exit();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET `path` on a new connection: (status, body); `Err` while nothing answers yet.
fn get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok((status, body.to_string()))
}

/// Whether the server closed `s` (end of file or a reset) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 256];
    while Instant::now() < deadline {
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("read timeout");
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// One scrape: the names of the series it exports, and its samples' values by series (labels
/// included, as written).
#[derive(Default)]
struct Scrape {
    names: BTreeSet<String>,
    samples: BTreeMap<String, f64>,
}

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let mut s = Scrape::default();
        for line in text.lines() {
            if let Some(ty) = line.strip_prefix("# TYPE ") {
                let mut words = ty.split_whitespace();
                let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                    continue;
                };
                // PromQL selects a histogram by its series, never by its family's name
                match kind {
                    "histogram" => s
                        .names
                        .extend(["_bucket", "_sum", "_count"].map(|x| format!("{name}{x}"))),
                    "summary" => s.names.extend(["", "_sum", "_count"].map(|x| format!("{name}{x}"))),
                    _ => {
                        s.names.insert(name.to_string());
                    }
                }
            } else if !line.starts_with('#') && !line.trim().is_empty() {
                let Some((series, value)) = line.rsplit_once(' ') else {
                    continue;
                };
                let name = series.split('{').next().unwrap_or(series);
                s.names.insert(name.to_string());
                s.samples.insert(series.to_string(), value.parse().unwrap_or(f64::NAN));
            }
        }
        s
    }

    /// The sum of the samples of metric `name` (every label set), 0 if it has none.
    fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|(series, _)| series.split('{').next() == Some(name))
            .map(|(_, v)| v)
            .sum()
    }

    fn has_series(&self, prefix: &str) -> bool {
        self.samples.keys().any(|s| s.starts_with(prefix))
    }
}

/// Scrapes `port`'s `/metrics` until `done` holds (bounded by [`WAIT`]); every scrape's names
/// go into `seen`. Returns the last scrape.
fn scrape_until(
    proc: &mut Proc,
    port: u16,
    seen: &mut BTreeSet<String>,
    what: &str,
    done: impl Fn(&Scrape) -> Vec<&'static str>,
) -> Scrape {
    let deadline = Instant::now() + WAIT;
    loop {
        proc.assert_running();
        if let Ok((200, body)) = get(port, "/metrics") {
            let scrape = Scrape::parse(&body);
            seen.extend(scrape.names.iter().cloned());
            let missing = done(&scrape);
            if missing.is_empty() {
                return scrape;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: still not seen after {WAIT:?}: {missing:?}\n--- last scrape\n{body}{}",
                proc.log()
            );
        } else {
            assert!(
                Instant::now() < deadline,
                "{what}: /metrics never answered{}",
                proc.log()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first job, live: what the dashboard shows happens, and the metrics say so.
fn scrape_the_job(dir: &Path, seen: &mut BTreeSet<String>) {
    let ports = free_loopback_ports(2);
    let (metrics_port, redis_port) = (ports[0], ports[1]);
    // nothing listens on the fan-out's port: every fan-out write fails and the job goes on
    let config = JOB.replace("REDIS_URL", &format!("redis://127.0.0.1:{redis_port}/"));
    std::fs::write(dir.join("hotlist.toml"), config).expect("write the config");
    let addr = format!("127.0.0.1:{metrics_port}");
    let args = [
        "run",
        "--config",
        "hotlist.toml",
        "--progress",
        "never",
        "--metrics-addr",
        &addr,
        "--metrics-max-connections",
        "1",
    ];
    let mut job = Proc::spawn(dir, "run", &args, Stdio::null());
    scrape_until(&mut job, metrics_port, seen, "the job's first scrape", |_| Vec::new());

    // one connection is all the endpoint keeps: a silent one is evicted by the next scrape
    let mut silent = TcpStream::connect(("127.0.0.1", metrics_port)).expect("connect to /metrics");
    let last = scrape_until(&mut job, metrics_port, seen, "the job", |s| {
        let mut missing = Vec::new();
        let mut want = |ok: bool, what: &'static str| {
            if !ok {
                missing.push(what)
            }
        };
        want(s.sum("hotlist_events_total") > 0.0, "events counted");
        want(s.sum("hotlist_bad_records_total") > 0.0, "a bad record");
        want(s.sum("hotlist_late_events_total") > 0.0, "a late event");
        want(
            s.sum("hotlist_dead_letters_summarised_total") > 0.0,
            "a dead letter summarised",
        );
        want(s.sum("hotlist_checkpoint_seconds_count") > 0.0, "a checkpoint");
        want(s.sum("hotlist_commits_total") > 0.0, "a commit");
        want(s.sum("hotlist_windows_sealed_total") > 0.0, "a sealed instance");
        want(
            s.sum("hotlist_exact_at_seal_lists_total") > 0.0,
            "a sketch list made exact",
        );
        want(s.has_series("hotlist_sketch_recall{"), "a sketch check (mode = both)");
        want(
            s.sum("hotlist_hot_key_windows_total") > 0.0,
            "a hot-key window reported",
        );
        want(s.sum("hotlist_fanout_failures_total") > 0.0, "a failed fan-out write");
        want(
            s.has_series("hotlist_partition_watermark_lag_seconds{"),
            "a watermark lag",
        );
        want(
            s.has_series("hotlist_metrics_endpoint_connections_closed_total{reason=\"evicted\"}"),
            "the silent connection evicted",
        );
        missing
    });
    assert!(
        closed_within(&mut silent, Duration::from_secs(5)),
        "the metrics endpoint counted an eviction but kept the silent connection"
    );
    assert_eq!(
        last.sum("hotlist_exact_at_seal_failures_total"),
        0.0,
        "generated input can always be read again{}",
        job.log()
    );
    // a graceful stop commits what was counted: the store `serve` reads below
    job.terminate();
}

/// The second job, on standard input: three countries in a window that keeps one.
fn scrape_the_groups_job(dir: &Path, seen: &mut BTreeSet<String>) {
    std::fs::write(dir.join("hotlist.toml"), GROUPS_JOB).expect("write the config");
    let port = free_loopback_ports(1)[0];
    let addr = format!("127.0.0.1:{port}");
    let args = [
        "run",
        "--config",
        "hotlist.toml",
        "--progress",
        "never",
        "--metrics-addr",
        &addr,
    ];
    let mut job = Proc::spawn(dir, "groups", &args, Stdio::piped());
    let mut stdin: ChildStdin = job.child.stdin.take().expect("piped stdin");
    let start = 1_713_462_000_000i64; // a minute boundary
    for (i, country) in ["de", "fr", "fr", "it", "it", "it"].iter().enumerate() {
        writeln!(
            stdin,
            r#"{{"item_id":"item-{i}","ts":{},"dims":{{"country":"{country}"}}}}"#,
            start + i as i64
        )
        .expect("write to the job's stdin");
    }
    stdin.flush().expect("flush the job's stdin");
    // the input stays open: the job runs (and reports its live instance) until it is closed
    scrape_until(&mut job, port, seen, "the groups job", |s| {
        if s.sum("hotlist_overflow_groups") >= 2.0 {
            Vec::new()
        } else {
            vec!["2 groups folded into (other)"]
        }
    });
    drop(stdin);
    job.await_exit();
}

/// `hotlist serve` on the first job's store, after one API request and one connection it
/// closed (a client that never sent its request head).
fn scrape_serve(dir: &Path, seen: &mut BTreeSet<String>) {
    let port = free_loopback_ports(1)[0];
    let listen = format!("127.0.0.1:{port}");
    let args = [
        "serve",
        "--config",
        "hotlist.toml",
        "--listen",
        &listen,
        "--poll",
        "20ms",
        "--header-timeout",
        "200ms",
    ];
    let mut serve = Proc::spawn(dir, "serve", &args, Stdio::null());
    let deadline = Instant::now() + WAIT;
    while get(port, "/readyz").map_or(true, |(status, _)| status != 200) {
        serve.assert_running();
        assert!(Instant::now() < deadline, "serve never ready{}", serve.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = get(port, "/v1/top?window=2s&k=5").expect("GET /v1/top");
    assert_eq!(status, 200, "{body}{}", serve.log());
    assert!(body.contains("item-"), "the job's list is served: {body}");
    let mut silent = TcpStream::connect(("127.0.0.1", port)).expect("connect to serve");
    assert!(
        closed_within(&mut silent, Duration::from_secs(5)),
        "a client that sends nothing is closed after --header-timeout"
    );
    let scrape = scrape_until(&mut serve, port, seen, "serve", |s| {
        let mut missing = Vec::new();
        if !s.has_series("hotlist_api_request_seconds_count{route=\"/v1/top\",status=\"200\"}") {
            missing.push("the /v1/top request");
        }
        if !s.has_series("hotlist_api_connections_closed_total{reason=\"header_timeout\"}") {
            missing.push("the silent connection closed");
        }
        missing
    });
    assert!(
        scrape.sum("hotlist_api_snapshot_epoch") > 0.0,
        "serve read the committed epoch"
    );
    serve.terminate();
}

/// Every metric the dashboard and the alert rules select is exported by the job or by
/// `hotlist serve` in a run that does what they watch.
#[test]
fn every_metric_the_dashboard_and_alerts_name_is_exported() {
    let wanted = rules::metrics_and_users();
    let job_dir = tempfile::tempdir().expect("temp dir");
    let groups_dir = tempfile::tempdir().expect("temp dir");
    let mut seen = BTreeSet::new();
    scrape_the_job(job_dir.path(), &mut seen);
    scrape_the_groups_job(groups_dir.path(), &mut seen);
    scrape_serve(job_dir.path(), &mut seen);

    let mut problems = Vec::new();
    for (metric, users) in &wanted {
        if let Some((_, test)) = KAFKA_ONLY.iter().find(|(m, _)| m == metric) {
            // kept honest both ways: not exported without Kafka, and a Kafka test scrapes it
            if seen.contains(metric) {
                problems.push(format!("{metric} is exported without Kafka: drop it from KAFKA_ONLY"));
            }
            let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("blackbox").join(test))
                .unwrap_or_default();
            if !source.contains(&format!("\"{metric}{{\"")) {
                problems.push(format!(
                    "{metric}: blackbox/{test} no longer checks that a Kafka run exports it"
                ));
            }
        } else if !seen.contains(metric) {
            problems.push(format!("{metric} is not exported (used by {})", users.join(", ")));
        }
    }
    assert!(problems.is_empty(), "{}\n--- exported: {seen:?}", problems.join("\n"));
}

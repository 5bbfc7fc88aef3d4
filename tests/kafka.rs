//! Kafka end to end, against a real Kafka-protocol broker (tansu, SQLite storage, on loopback;
//! `scripts/test` installs it): events produced by `hotlist produce` (3 events per message),
//! the same records written as files by `hotlist generate` for the model. A bounded run equals
//! the model; killed with SIGKILL again and again it still does; and it rides out the broker
//! being stopped for 10 s.

use hotlist_tests::model::{self, ModelWindow};
use hotlist_tests::run_hotlist;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GENERATOR: &str = r#"
[job]
id = "kafka"
[source]
kind = "generator"
items = 20
partitions = 3
events = 6000
rate = 200
start = 0
jitter = "2s"
late_fraction = 0.02
late_by = "45s"
bad_fraction = 0.01
[time]
max_out_of_orderness = "2s"
allowed_lateness = "30s"
emit_interval = "5ms"
[[window]]
name = "10s"
size = "10s"
k = 5
[[window]]
name = "30s-hop"
size = "30s"
slide = "10s"
k = 4
[sink]
path = "out.db"
"#;

fn windows() -> Vec<ModelWindow> {
    vec![
        ModelWindow {
            name: "10s".into(),
            size: 10_000,
            slide: 10_000,
            k: 5,
        },
        ModelWindow {
            name: "30s-hop".into(),
            size: 30_000,
            slide: 10_000,
            k: 4,
        },
    ]
}

/// The tansu binary: $HOTLIST_TANSU, the project's tool cache, or PATH.
fn tansu_bin() -> PathBuf {
    let candidates = [
        std::env::var("HOTLIST_TANSU").ok().map(PathBuf::from),
        std::env::var("HOME")
            .ok()
            .map(|h| PathBuf::from(h).join(".cache/hotlist-tools/bin/tansu")),
        Some(PathBuf::from("/root/.cache/hotlist-tools/bin/tansu")),
    ];
    for c in candidates.into_iter().flatten() {
        if c.exists() {
            return c;
        }
    }
    if Command::new("tansu").arg("--help").output().is_ok() {
        return PathBuf::from("tansu");
    }
    panic!("tansu (the Kafka-protocol broker) is not installed: scripts/test installs it into ~/.cache/hotlist-tools");
}

/// A broker on a loopback port with SQLite storage in `dir` (restartable on the same data).
struct Broker {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Broker {
    fn start(dir: &Path) -> Broker {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let mut b = Broker {
            dir: dir.to_path_buf(),
            port,
            child: None,
        };
        b.restart();
        b
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn restart(&mut self) {
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let child = Command::new(tansu_bin())
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "sqlite://broker.db"]) // relative: sqlite:///abs is mis-parsed
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tansu");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(self.addr()).is_err() {
            assert!(
                Instant::now() < deadline,
                "tansu did not start listening on {}",
                self.addr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A broker with the topic produced, the job's config, and the model's expectation.
struct Setup {
    dir: tempfile::TempDir,
    broker: Broker,
    want: (model::Lists, BTreeMap<(u32, String), usize>),
}

fn dead_by_partition(dead: &model::Dead) -> BTreeMap<(u32, String), usize> {
    let mut m = BTreeMap::new();
    for (p, _, reason) in dead {
        *m.entry((*p, reason.clone())).or_insert(0) += 1;
    }
    m
}

fn setup(topic: &str, checkpoint: bool) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    std::fs::write(dir.path().join("gen.toml"), GENERATOR).expect("config");
    let produce = [
        "produce",
        "--config",
        "gen.toml",
        "--brokers",
        &broker.addr(),
        "--topic",
        topic,
        "--create",
    ];
    run_hotlist(dir.path(), &[&produce[..], &["--batch", "3"]].concat(), true);
    run_hotlist(
        dir.path(),
        &["generate", "--config", "gen.toml", "--out", "files"],
        true,
    );
    let mut parts = Vec::new();
    for p in 0..3 {
        let text = std::fs::read(dir.path().join(format!("files/part-{p:04}.jsonl"))).expect("file");
        let mut lines: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
        lines.pop(); // the final newline
        parts.push(lines);
    }
    let (lists, dead) = model::run(&parts, &windows(), 2_000, 30_000);
    assert!(dead.iter().any(|d| d.2 == "late") && dead.iter().any(|d| d.2 == "bad"));
    let mut config = GENERATOR
        .replace(
            "kind = \"generator\"",
            &format!(
                "kind = \"kafka\"\nbrokers = \"{}\"\ntopic = \"{topic}\"\nbounded = true",
                broker.addr()
            ),
        )
        .lines()
        .filter(|l| {
            ![
                "items",
                "partitions =",
                "events",
                "rate",
                "start",
                "jitter",
                "late_",
                "bad_",
            ]
            .iter()
            .any(|k| l.starts_with(k))
        })
        .collect::<Vec<_>>()
        .join("\n");
    if checkpoint {
        config.push_str("\n[checkpoint]\ndir = \"ckpt\"\ninterval = \"10ms\"\n[run]\nepoch_interval = \"2ms\"\nbatch_size = 12\nmax_epochs_in_flight = 2\n");
    }
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    Setup {
        dir,
        broker,
        want: (lists, dead_by_partition(&dead)),
    }
}

fn results(dir: &Path) -> (model::Lists, BTreeMap<(u32, String), usize>) {
    let db = dir.join("out.db");
    (
        hotlist_tests::sqlite_sealed_lists(&db, "kafka"),
        dead_by_partition(&hotlist_tests::sqlite_dead_letters(&db, "kafka").0),
    )
}

fn spawn(dir: &Path, workers: usize) -> Child {
    spawn_with(dir, workers, &[])
}

fn spawn_with(dir: &Path, workers: usize, extra: &[&str]) -> Child {
    Command::new(hotlist_tests::hotlist_bin())
        .args([
            "run",
            "--config",
            "hotlist.toml",
            "--progress",
            "never",
            "--workers",
            &workers.to_string(),
        ])
        .args(extra)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist")
}

/// A bounded run from the topic (each partition one input partition, 3 events per message)
/// gives exactly the model's sealed lists and dead letters.
#[test]
fn bounded_kafka_run_equals_the_model() {
    let s = setup("events", false);
    run_hotlist(
        s.dir.path(),
        &[
            "run",
            "--config",
            "hotlist.toml",
            "--progress",
            "never",
            "--workers",
            "2",
        ],
        true,
    );
    assert_eq!(results(s.dir.path()), s.want);
}

/// Killed with SIGKILL at least 5 times (after each run committed a checkpoint of its own) and
/// restarted on 1, 2, 3 workers, a checkpointed Kafka run ends exactly like the model.
#[test]
fn kafka_sigkill_restarts_are_exactly_once() {
    let s = setup("events", true);
    let (mut kills, mut logs) = (0, String::new());
    for attempt in 0..12 {
        let before = hotlist_tests::newest_committed_checkpoint(&s.dir.path().join("ckpt/kafka"));
        let mut child = spawn(s.dir.path(), 1 + attempt % 3);
        // wait until this run committed a checkpoint of its own, then kill it moments later
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut finished = false;
        while hotlist_tests::newest_committed_checkpoint(&s.dir.path().join("ckpt/kafka")) <= before {
            if child.try_wait().expect("try_wait").is_some() {
                finished = true;
                break;
            }
            assert!(Instant::now() < deadline, "no progress:\n{logs}");
            std::thread::sleep(Duration::from_millis(1));
        }
        if finished {
            let out = child.wait_with_output().expect("wait");
            assert!(out.status.success(), "{logs}{}", String::from_utf8_lossy(&out.stderr));
            break;
        }
        std::thread::sleep(Duration::from_millis(attempt as u64 * 3 % 11)); // fault injection timing
        let _ = child.kill();
        kills += 1;
        logs.push_str(&String::from_utf8_lossy(
            &child.wait_with_output().expect("wait").stderr,
        ));
        if kills == 5 {
            let out = spawn(s.dir.path(), 2).wait_with_output().expect("final run");
            logs.push_str(&String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "{logs}");
            break;
        }
    }
    assert!(kills >= 5, "killed {kills} times:\n{logs}");
    assert_eq!(results(s.dir.path()), s.want, "{logs}");
}

/// The broker stopped for 10 s mid-run: the job logs, waits, resumes by itself when the broker
/// is back, and the results are exact.
#[test]
fn broker_outage_of_ten_seconds_is_survived() {
    let mut s = setup("events", true);
    let metrics = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    };
    let mut child = spawn_with(s.dir.path(), 2, &["--metrics-addr", &metrics]);
    let scrape = || -> String {
        use std::io::{Read, Write};
        let Ok(mut c) = std::net::TcpStream::connect(&metrics) else {
            return String::new();
        };
        let _ = c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
        let mut b = String::new();
        let _ = c.read_to_string(&mut b);
        b
    };
    let records = |body: &str| -> u64 {
        body.lines()
            .filter(|l| l.starts_with("hotlist_records_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    // mid-run: the job has read some records, and not yet all
    let deadline = Instant::now() + Duration::from_secs(60);
    while records(&scrape()) == 0 {
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "finished before the outage"
        );
        assert!(Instant::now() < deadline, "the job never read anything");
        std::thread::sleep(Duration::from_millis(2));
    }
    s.broker.stop();
    std::thread::sleep(Duration::from_secs(10)); // the outage itself
                                                 // the job's metrics show each partition's consumer lag (from librdkafka's cached offsets)
    let body = scrape();
    assert!(
        body.lines().any(|l| l.starts_with("hotlist_partition_consumer_lag{")),
        "{body}"
    );
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the job kept running without the broker"
    );
    s.broker.restart();
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(results(s.dir.path()), s.want);
}

/// Kafka → PostgreSQL, checkpointed: killed with SIGKILL 3 times, then PostgreSQL itself is
/// restarted while the final run commits. The job retries and reconnects by itself, and the
/// sealed `topk` rows and dead letters in PostgreSQL equal the model.
#[test]
fn kafka_into_postgres_survives_sigkill_and_a_postgres_restart() {
    use rand::Rng;
    let pg_url =
        std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into());
    let version = std::fs::read_dir("/etc/postgresql")
        .ok()
        .and_then(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).max())
        .expect("a local PostgreSQL cluster managed by pg_ctlcluster (scripts/test sets it up)");
    let schema = format!("hotlist_kafka_{:08x}", rand::rng().random::<u32>());
    struct DropSchema(String, String);
    impl Drop for DropSchema {
        fn drop(&mut self) {
            if let Ok(mut c) = postgres::Client::connect(&self.0, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.1));
            }
        }
    }
    let _cleanup = DropSchema(pg_url.clone(), schema.clone());
    let s = setup("events", true);
    let config = std::fs::read_to_string(s.dir.path().join("hotlist.toml"))
        .expect("config")
        .replace(
            "[sink]\npath = \"out.db\"",
            &format!("[sink]\nkind = \"postgres\"\nurl = \"{pg_url}\"\nschema = \"{schema}\""),
        );
    assert!(config.contains("postgres"), "config rewritten");
    std::fs::write(s.dir.path().join("hotlist.toml"), config).expect("config");

    let (mut kills, mut logs) = (0, String::new());
    let committed = |schema: &str| -> i64 {
        postgres::Client::connect(&pg_url, postgres::NoTls)
            .ok()
            .and_then(|mut c| {
                c.query_opt(
                    &format!("SELECT epoch FROM \"{schema}\".hotlist_commits WHERE job = 'kafka'"),
                    &[],
                )
                .ok()?
            })
            .map(|r| r.get::<_, i64>(0))
            .unwrap_or(-1)
    };
    while kills < 3 {
        let before = committed(&schema);
        let mut child = spawn(s.dir.path(), 1 + kills % 2);
        let deadline = Instant::now() + Duration::from_secs(60);
        while committed(&schema) <= before {
            assert!(
                child.try_wait().expect("try_wait").is_none(),
                "the run ended before it was killed:\n{logs}"
            );
            assert!(Instant::now() < deadline, "no progress:\n{logs}");
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = child.kill();
        kills += 1;
        logs.push_str(&String::from_utf8_lossy(
            &child.wait_with_output().expect("wait").stderr,
        ));
    }
    // the final run: restart PostgreSQL under it once it has committed again
    let before = committed(&schema);
    let child = spawn(s.dir.path(), 2);
    let deadline = Instant::now() + Duration::from_secs(60);
    while committed(&schema) <= before {
        assert!(Instant::now() < deadline, "no progress:\n{logs}");
        std::thread::sleep(Duration::from_millis(2));
    }
    let restart = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status();
    assert!(
        restart.is_ok_and(|s| s.success()),
        "cannot restart PostgreSQL {version}"
    );
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{logs}{err}");
    assert!(
        err.contains("sink commit failed") && err.contains("retrying"),
        "the restart hit a commit:\n{err}"
    );

    let mut pg = postgres::Client::connect(&pg_url, postgres::NoTls).expect("connect postgres");
    let rows = pg
        .query(
            &format!(
                "SELECT window_name, (extract(epoch from window_start) * 1000)::bigint, \
                 (extract(epoch from window_end) * 1000)::bigint, item_id, count, final \
                 FROM \"{schema}\".topk WHERE job = 'kafka' ORDER BY window_name, window_start, rank"
            ),
            &[],
        )
        .expect("topk");
    let mut lists = model::Lists::new();
    for r in rows {
        assert!(r.get::<_, bool>(5), "sealed");
        lists
            .entry((r.get(0), r.get(1), r.get(2)))
            .or_default()
            .push((r.get(3), r.get::<_, i64>(4) as u64));
    }
    let mut dead: BTreeMap<(u32, String), usize> = BTreeMap::new();
    for r in pg
        .query(
            &format!("SELECT partition, reason FROM \"{schema}\".dead_letters WHERE job = 'kafka'"),
            &[],
        )
        .expect("dead letters")
    {
        *dead.entry((r.get::<_, i64>(0) as u32, r.get(1))).or_insert(0) += 1;
    }
    assert_eq!((lists, dead), s.want, "{logs}{err}");
}

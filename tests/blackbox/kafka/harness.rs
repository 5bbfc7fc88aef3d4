//! What the Kafka tests share: the data set and the job's config, a run of the job, the
//! PostgreSQL schema, the metrics endpoint, and data sets produced after the first.

use super::broker::Broker;
use hotlist_tests::model;
use hotlist_tests::run_hotlist;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(super) const GENERATOR: &str = r#"
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

/// A broker with the topic (produced, or to be produced by the test), the job's config, and
/// the model's expectation.
pub(super) struct Setup {
    pub(super) dir: tempfile::TempDir,
    pub(super) broker: Broker,
    pub(super) want: (model::Lists, BTreeMap<(u32, String), usize>),
    /// Every dead letter the model expects: (partition, Kafka offset, reason, raw bytes).
    pub(super) want_dead: Vec<DeadAt>,
    /// Every dead letter's (partition, Kafka offset, line in the message, reason), sorted.
    pub(super) want_dead_lines: Vec<(u32, u64, u64, String)>,
    /// `hotlist produce` arguments that write the data set (3 events per message).
    pub(super) produce: Vec<String>,
}

pub(super) fn dead_by_partition(dead: &model::Dead) -> BTreeMap<(u32, String), usize> {
    let mut m = BTreeMap::new();
    for (p, _, reason) in dead {
        *m.entry((*p, reason.clone())).or_insert(0) += 1;
    }
    m
}

/// A stored dead letter: (partition, Kafka offset, reason, raw bytes).
pub(super) type DeadAt = (u32, u64, String, Vec<u8>);

/// Events per message the tests produce.
pub(super) const BATCH: u64 = 3;

pub(super) fn setup(topic: &str, checkpoint: bool) -> Setup {
    setup_with(topic, checkpoint, true, 6000)
}

/// Starts a broker; writes the data set (`events` records) as files for the model; produces it
/// into `topic` now when `produce_now`; writes the job's config (Kafka source, SQLite sink;
/// checkpoints every 10 ms when `checkpoint`).
pub(super) fn setup_with(topic: &str, checkpoint: bool, produce_now: bool, events: u64) -> Setup {
    setup_generated(topic, checkpoint, produce_now, events, &[])
}

/// [`setup_with`] with the generator's settings changed by `sets` (`--set key=value`).
pub(super) fn setup_generated(topic: &str, checkpoint: bool, produce_now: bool, events: u64, sets: &[&str]) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut generator = GENERATOR.to_string();
    for set in sets {
        let (key, value) = set.split_once('=').expect("key=value");
        let key = key.strip_prefix("source.").expect("a source setting");
        generator = generator
            .lines()
            .map(|l| {
                if l.starts_with(&format!("{key} =")) {
                    format!("{key} = {value}")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    std::fs::write(dir.path().join("gen.toml"), generator).expect("config");
    let events_set = format!("source.events={events}");
    let produce: Vec<String> = [
        "produce",
        "--config",
        "gen.toml",
        "--set",
        &events_set,
        "--brokers",
        &broker.addr(),
        "--topic",
        topic,
        "--create",
        "--batch",
        &BATCH.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if produce_now {
        run_hotlist(
            dir.path(),
            &produce.iter().map(String::as_str).collect::<Vec<_>>(),
            true,
        );
    }
    run_hotlist(
        dir.path(),
        &[
            "generate",
            "--config",
            "gen.toml",
            "--set",
            &events_set,
            "--out",
            "files",
        ],
        true,
    );
    let parts = read_parts(&dir.path().join("files"));
    let (lists, dead) = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    assert!(dead.iter().any(|d| d.2 == "late") && dead.iter().any(|d| d.2 == "bad"));
    let mut want_dead: Vec<_> = dead
        .iter()
        .map(|(p, pos, reason)| {
            // positions are 1-based lines; a message holds BATCH lines
            let raw = parts[*p as usize][*pos as usize - 1].clone();
            (*p, (*pos - 1) / BATCH, reason.clone(), raw)
        })
        .collect();
    want_dead.sort();
    let mut want_dead_lines: Vec<_> = dead
        .iter()
        .map(|(p, pos, reason)| (*p, (*pos - 1) / BATCH, (*pos - 1) % BATCH + 1, reason.clone()))
        .collect();
    want_dead_lines.sort();
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
    // every dead letter stored whole: these tests compare them one by one with the model (the
    // cap's summaries have their own test, `dead_letter_cap.rs`)
    config.push_str("\n[run]\nmax_dead_letters_per_block = 1000000\n");
    if checkpoint {
        config.push_str("epoch_interval = \"2ms\"\nbatch_size = 12\nmax_epochs_in_flight = 2\n[checkpoint]\ndir = \"ckpt\"\ninterval = \"10ms\"\n");
    }
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    Setup {
        dir,
        broker,
        want: (lists, dead_by_partition(&dead)),
        want_dead,
        want_dead_lines,
        produce,
    }
}

pub(super) fn results(dir: &Path) -> (model::Lists, BTreeMap<(u32, String), usize>) {
    let db = dir.join("out.db");
    (
        hotlist_tests::sqlite_sealed_lists(&db, "kafka"),
        dead_by_partition(&hotlist_tests::sqlite_dead_letters(&db, "kafka").0),
    )
}

/// A run of the job's config (bounded: to the end offsets it finds), which must succeed.
pub(super) fn run_to_the_end(dir: &Path, workers: usize) {
    let out = spawn(dir, workers).wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

pub(super) fn spawn(dir: &Path, workers: usize) -> Child {
    spawn_with(dir, workers, &[])
}

pub(super) fn spawn_with(dir: &Path, workers: usize, extra: &[&str]) -> Child {
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

/// A fresh PostgreSQL schema for one test (dropped at the end).
pub(super) struct PgSchema {
    url: String,
    name: String,
}

impl PgSchema {
    pub(super) fn new() -> PgSchema {
        use rand::Rng;
        PgSchema {
            url: std::env::var("HOTLIST_TEST_POSTGRES_URL")
                .unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into()),
            name: format!("hotlist_kafka_{:08x}", rand::rng().random::<u32>()),
        }
    }

    /// Points the setup's job config at this schema.
    pub(super) fn use_for(&self, s: &Setup) {
        let path = s.dir.path().join("hotlist.toml");
        let config = std::fs::read_to_string(&path).expect("config").replace(
            "[sink]\npath = \"out.db\"",
            &format!(
                "[sink]\nkind = \"postgres\"\nurl = \"{}\"\nschema = \"{}\"",
                self.url, self.name
            ),
        );
        assert!(config.contains("postgres"), "config rewritten");
        std::fs::write(path, config).expect("config");
    }

    pub(super) fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("connect to PostgreSQL")
    }

    /// The job's committed epoch, -1 before the first commit (or while PostgreSQL is down).
    pub(super) fn committed(&self, job: &str) -> i64 {
        postgres::Client::connect(&self.url, postgres::NoTls)
            .ok()
            .and_then(|mut c| {
                c.query_opt(
                    &format!("SELECT epoch FROM \"{}\".hotlist_commits WHERE job = $1", self.name),
                    &[&job],
                )
                .ok()?
            })
            .map(|r| r.get::<_, i64>(0))
            .unwrap_or(-1)
    }

    /// Waits (up to 60 s) until the job has committed an epoch after `after`; `child`, the run
    /// that should commit it, must not end meanwhile (`what` goes into the failure message).
    pub(super) fn await_commit_after(&self, job: &str, after: i64, child: &mut Child, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.committed(job) <= after {
            assert!(child.try_wait().expect("try_wait").is_none(), "the run ended ({what})");
            assert!(Instant::now() < deadline, "no commit ({what})");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The job's sealed lists (checked: every row final, one revision per list, the
    /// instance header agrees) and its dead letters (partition, offset, reason, raw), sorted.
    pub(super) fn results(&self, job: &str) -> (model::Lists, Vec<DeadAt>) {
        let mut pg = self.client();
        let rows = pg
            .query(
                &format!(
                    "SELECT t.window_name, (extract(epoch from t.window_start) * 1000)::bigint, \
                     (extract(epoch from t.window_end) * 1000)::bigint, t.item_id, t.count, t.final, \
                     t.revision, i.revision \
                     FROM \"{0}\".topk t JOIN \"{0}\".topk_instances i USING (job, window_name, window_start) \
                     WHERE job = $1 ORDER BY t.window_name, t.window_start, t.rank",
                    self.name
                ),
                &[&job],
            )
            .expect("topk");
        let mut lists = model::Lists::new();
        let mut revisions: BTreeMap<(String, i64, i64), i64> = BTreeMap::new();
        for r in rows {
            let key: (String, i64, i64) = (r.get(0), r.get(1), r.get(2));
            assert!(r.get::<_, bool>(5), "every list is sealed: {key:?}");
            let (row_rev, header_rev) = (r.get::<_, i64>(6), r.get::<_, i64>(7));
            assert_eq!(row_rev, header_rev, "rows and header of {key:?} are one revision");
            assert_eq!(
                *revisions.entry(key.clone()).or_insert(row_rev),
                row_rev,
                "one revision per list: {key:?}"
            );
            lists
                .entry(key)
                .or_default()
                .push((r.get(3), r.get::<_, i64>(4) as u64));
        }
        let mut dead: Vec<DeadAt> = pg
            .query(
                &format!(
                    "SELECT partition, position, reason, raw FROM \"{}\".dead_letters WHERE job = $1",
                    self.name
                ),
                &[&job],
            )
            .expect("dead letters")
            .into_iter()
            .map(|r| (r.get::<_, i64>(0) as u32, r.get::<_, i64>(1) as u64, r.get(2), r.get(3)))
            .collect();
        dead.sort();
        (lists, dead)
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let _ = hotlist_sinks::postgres::drop_schema(&self.url, &self.name);
    }
}

/// The job's `/metrics` endpoint, on a free loopback port.
pub(super) struct Metrics {
    pub(super) addr: String,
}

impl Metrics {
    pub(super) fn new() -> Metrics {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        Metrics {
            addr: l.local_addr().expect("addr").to_string(),
        }
    }

    /// The metrics now (empty while the job is not serving them).
    pub(super) fn scrape(&self) -> String {
        use std::io::{Read, Write};
        let Ok(mut c) = std::net::TcpStream::connect(&self.addr) else {
            return String::new();
        };
        let _ = c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
        let mut b = String::new();
        let _ = c.read_to_string(&mut b);
        b
    }

    /// The sum of `name`'s series whose labels contain `labels` (all of them for "").
    pub(super) fn sum(body: &str, name: &str, labels: &str) -> u64 {
        body.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(labels))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits (up to 60 s) until the live run `child` has read exactly `n` records.
    pub(super) fn wait_for_records(&self, n: u64, child: &mut Child, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let read = Metrics::sum(&self.scrape(), "hotlist_records_total", "");
            if read == n {
                return;
            }
            assert!(read < n, "{read} records read, more than the {n} produced ({what})");
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!("a live run ended ({what}): {status}");
            }
            assert!(Instant::now() < deadline, "{what}: {read} of {n} records read");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Stops a live run with SIGTERM; it must commit and exit 0. Returns its stderr.
pub(super) fn stop_gracefully(child: Child) -> String {
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "graceful stop: {err}");
    err
}

/// Records (raw lines) per partition.
pub(super) type Parts = Vec<Vec<Vec<u8>>>;

/// Reads the JSON-lines files `hotlist generate` wrote into `dir`, one per partition.
pub(super) fn read_parts(dir: &Path) -> Parts {
    (0..)
        .map(|p| dir.join(format!("part-{p:04}.jsonl")))
        .take_while(|path| path.exists())
        .map(|path| {
            let text = std::fs::read(path).expect("generated file");
            let mut lines: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
            lines.pop(); // the final newline
            lines
        })
        .collect()
}

/// Data set B: 3,000 more records (another seed, event time from 60 s) produced into the
/// setup's topic after A, and written as files (`files-b`) for the model. Returns A's and B's
/// records per partition.
pub(super) fn produce_data_set_b(s: &Setup) -> (Parts, Parts) {
    produce_more(s, &[], "files-b")
}

/// Data set B with `extra` `--set` overrides (e.g. more partitions), produced into the setup's
/// topic and written as files into `out` for the model; returns A's and its records.
pub(super) fn produce_more(s: &Setup, extra: &[&str], out: &str) -> (Parts, Parts) {
    let mut b_sets = vec![
        "--set",
        "source.seed=11",
        "--set",
        "source.start=60000",
        "--set",
        "source.events=3000",
    ];
    for e in extra {
        b_sets.extend(["--set", e]);
    }
    let mut produce_b: Vec<&str> = s
        .produce
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--create")
        .collect();
    produce_b.extend_from_slice(&b_sets);
    run_hotlist(s.dir.path(), &produce_b, true);
    let generate_b = [&["generate", "--config", "gen.toml", "--out", out][..], &b_sets[..]].concat();
    run_hotlist(s.dir.path(), &generate_b, true);
    (
        read_parts(&s.dir.path().join("files")),
        read_parts(&s.dir.path().join(out)),
    )
}

/// Each partition's records of A followed by those of B.
pub(super) fn a_then_b(a: &[Vec<Vec<u8>>], b: &[Vec<Vec<u8>>]) -> Parts {
    a.iter().zip(b).map(|(x, y)| [x.clone(), y.clone()].concat()).collect()
}

/// Sends `signal` (`"STOP"`, `"CONT"`, …) to a process.
pub(super) fn signal(child: &Child, signal: &str) {
    assert!(Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill")
        .success());
}

/// Messages per partition of a data set (3 events per message).
pub(super) fn messages(parts: &[Vec<Vec<u8>>]) -> Vec<u64> {
    parts.iter().map(|p| (p.len() as u64).div_ceil(BATCH)).collect()
}

/// Pauses a run (SIGSTOP) and restarts the broker, so that the run has no fetch left that
/// could bring it messages produced from now on (a long-polling fetch answered while the run
/// is paused waits in its socket): it will ask for them after it resumes.
pub(super) fn pause_cut_off(child: &Child, broker: &mut Broker) {
    signal(child, "STOP");
    broker.stop();
    broker.restart();
}

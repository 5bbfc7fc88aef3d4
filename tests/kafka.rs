//! Kafka end to end, against a real Kafka-protocol broker (tansu, SQLite storage, on loopback;
//! `scripts/test` installs it): events produced by `hotlist produce` (3 events per message),
//! the same records written as files by `hotlist generate` for the model. A bounded run equals
//! the model; killed with SIGKILL again and again while the producer writes (one process, and
//! a 2-process cluster) it still does, into PostgreSQL; it rides out the broker being stopped
//! for 10 s and PostgreSQL being restarted; reprocessing from a point in time sees exactly the
//! newer messages.

use hotlist_tests::model;
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

impl Broker {
    /// Stops the broker, runs `sql` on its SQLite storage and starts it again: how these tests
    /// do what tansu does not offer through the Kafka protocol (`CreatePartitions` is
    /// unsupported, `DeleteRecords` unimplemented): adding partitions to a topic, and deleting
    /// messages as retention would.
    fn edit_storage(&mut self, sql: &str) {
        self.stop();
        let conn = rusqlite::Connection::open(self.dir.join("broker.db")).expect("open the broker's storage");
        conn.execute_batch(sql).expect("edit the broker's storage");
        drop(conn);
        self.restart();
    }

    /// Deletes `topic` (tansu's own admin command).
    fn delete_topic(&self, topic: &str) {
        let out = Command::new(tansu_bin())
            .args(["topic", "delete", "--broker", &format!("tcp://{}", self.addr()), topic])
            .output()
            .expect("run tansu topic delete");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// SQL on tansu's storage: the row id of `topic`'s partition `p`.
fn topition(topic: &str, p: u32) -> String {
    format!("(SELECT tp.id FROM topition tp JOIN topic t ON tp.topic = t.id WHERE t.name = '{topic}' AND tp.partition = {p})")
}

/// SQL on tansu's storage: retention deleted `topic`'s partition `p` below offset `low`.
fn retention_deletes_below(topic: &str, p: u32, low: u64) -> String {
    let tp = topition(topic, p);
    format!("UPDATE watermark SET low = {low} WHERE topition = {tp}; DELETE FROM record WHERE topition = {tp} AND offset_id < {low};")
}

/// SQL on tansu's storage: `topic` grows from `from` to `to` partitions.
fn add_partitions(topic: &str, from: u32, to: u32) -> String {
    let mut sql = format!("UPDATE topic SET partitions = {to} WHERE name = '{topic}';");
    for p in from..to {
        sql.push_str(&format!(
            "INSERT INTO topition (topic, partition) SELECT id, {p} FROM topic WHERE name = '{topic}';\
             INSERT INTO watermark (topition) SELECT {};",
            topition(topic, p)
        ));
    }
    sql
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A broker with the topic (produced, or to be produced by the test), the job's config, and
/// the model's expectation.
struct Setup {
    dir: tempfile::TempDir,
    broker: Broker,
    want: (model::Lists, BTreeMap<(u32, String), usize>),
    /// Every dead letter the model expects: (partition, Kafka offset, reason, raw bytes).
    want_dead: Vec<DeadAt>,
    /// Every dead letter's (partition, Kafka offset, line in the message, reason), sorted.
    want_dead_lines: Vec<(u32, u64, u64, String)>,
    /// `hotlist produce` arguments that write the data set (3 events per message).
    produce: Vec<String>,
}

fn dead_by_partition(dead: &model::Dead) -> BTreeMap<(u32, String), usize> {
    let mut m = BTreeMap::new();
    for (p, _, reason) in dead {
        *m.entry((*p, reason.clone())).or_insert(0) += 1;
    }
    m
}

/// A stored dead letter: (partition, Kafka offset, reason, raw bytes).
type DeadAt = (u32, u64, String, Vec<u8>);

/// Events per message the tests produce.
const BATCH: u64 = 3;

fn setup(topic: &str, checkpoint: bool) -> Setup {
    setup_with(topic, checkpoint, true, 6000)
}

/// Starts a broker; writes the data set (`events` records) as files for the model; produces it
/// into `topic` now when `produce_now`; writes the job's config (Kafka source, SQLite sink;
/// checkpoints every 10 ms when `checkpoint`).
fn setup_with(topic: &str, checkpoint: bool, produce_now: bool, events: u64) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    std::fs::write(dir.path().join("gen.toml"), GENERATOR).expect("config");
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
    if checkpoint {
        config.push_str("\n[checkpoint]\ndir = \"ckpt\"\ninterval = \"10ms\"\n[run]\nepoch_interval = \"2ms\"\nbatch_size = 12\nmax_epochs_in_flight = 2\n");
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

fn results(dir: &Path) -> (model::Lists, BTreeMap<(u32, String), usize>) {
    let db = dir.join("out.db");
    (
        hotlist_tests::sqlite_sealed_lists(&db, "kafka"),
        dead_by_partition(&hotlist_tests::sqlite_dead_letters(&db, "kafka").0),
    )
}

/// A run of the job's config (bounded: to the end offsets it finds), which must succeed.
fn run_to_the_end(dir: &Path, workers: usize) {
    let out = spawn(dir, workers).wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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
/// gives exactly the model's sealed lists and dead letters; each dead letter is at its
/// message's offset, its detail naming its line in the message.
#[test]
fn bounded_kafka_run_equals_the_model() {
    let s = setup("events", false);
    run_to_the_end(s.dir.path(), 2);
    assert_eq!(results(s.dir.path()), s.want);
    let conn = rusqlite::Connection::open(s.dir.path().join("out.db")).expect("open db");
    let mut stmt = conn
        .prepare("SELECT partition, position, detail, reason FROM dead_letters WHERE job = 'kafka'")
        .expect("prepare");
    let mut lines: Vec<(u32, u64, u64, String)> = stmt
        .query_map([], |r| {
            let detail: String = r.get(2)?;
            let line = detail
                .rsplit_once("(line ")
                .and_then(|(_, n)| n.strip_suffix(" of the message)")?.parse().ok())
                .unwrap_or_else(|| panic!("no line number in {detail:?}"));
            Ok((r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u64, line, r.get(3)?))
        })
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    lines.sort();
    assert_eq!(lines, s.want_dead_lines, "dead letters: offset and line in the message");
}

/// A fresh PostgreSQL schema for one test (dropped at the end).
struct PgSchema {
    url: String,
    name: String,
}

impl PgSchema {
    fn new() -> PgSchema {
        use rand::Rng;
        PgSchema {
            url: std::env::var("HOTLIST_TEST_POSTGRES_URL")
                .unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into()),
            name: format!("hotlist_kafka_{:08x}", rand::rng().random::<u32>()),
        }
    }

    /// Points the setup's job config at this schema.
    fn use_for(&self, s: &Setup) {
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

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("connect to PostgreSQL")
    }

    /// The job's committed epoch, -1 before the first commit (or while PostgreSQL is down).
    fn committed(&self, job: &str) -> i64 {
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
    fn await_commit_after(&self, job: &str, after: i64, child: &mut Child, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.committed(job) <= after {
            assert!(child.try_wait().expect("try_wait").is_none(), "the run ended ({what})");
            assert!(Instant::now() < deadline, "no commit ({what})");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The job's sealed lists (checked: every row final, one revision per list, the
    /// instance header agrees) and its dead letters (partition, offset, reason, raw), sorted.
    fn results(&self, job: &str) -> (model::Lists, Vec<DeadAt>) {
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

/// Starts one run of the job: one process (`workers` threads) or a cluster of 2 processes × 1
/// worker on fresh loopback ports. `crash` arms a crash point (`point:n`) in process `.1`.
fn spawn_job(dir: &Path, cluster: bool, workers: usize, crash: Option<(&str, usize)>, extra: &[&str]) -> Vec<Child> {
    let processes = if cluster { 2 } else { 1 };
    if cluster {
        let hosts: String = hotlist_tests::free_loopback_ports(2)
            .iter()
            .map(|p| format!("127.0.0.1:{p}\n"))
            .collect();
        std::fs::write(dir.join("hosts.txt"), hosts).expect("hostfile");
    }
    (0..processes)
        .map(|i| {
            let mut cmd = Command::new(hotlist_tests::hotlist_bin());
            cmd.args(["run", "--config", "hotlist.toml", "--progress", "never"])
                .args(["--workers", &workers.to_string()])
                .args(extra)
                .current_dir(dir)
                .env("HOTLIST_LOG", "hotlist=info,warn")
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            if cluster {
                cmd.args([
                    "--processes",
                    "2",
                    "--process",
                    &i.to_string(),
                    "--hostfile",
                    "hosts.txt",
                ]);
            }
            if let Some((point, victim)) = crash {
                if victim == i {
                    cmd.env("HOTLIST_CRASH_AT", point);
                }
            }
            cmd.spawn().expect("spawn hotlist")
        })
        .collect()
}

/// The stderr of a run's processes (each reaped: waited for briefly, else killed).
fn outputs(mut procs: Vec<Child>) -> String {
    for p in procs.iter_mut() {
        hotlist_tests::reap(p, Duration::from_secs(10));
    }
    procs
        .into_iter()
        .map(|p| String::from_utf8_lossy(&p.wait_with_output().expect("output").stderr).into_owned())
        .collect::<Vec<_>>()
        .join("\n--- the next process:\n")
}

/// The acceptance crash test. While `hotlist produce --rate` writes the data set into the
/// 3-partition topic, the job (Kafka → PostgreSQL, a checkpoint and commit every 10 ms) is
/// killed with SIGKILL 6 times and restarted: first by armed crash points (mid-checkpoint:
/// one snapshot file written, the others not; mid-commit: rows written, transaction open;
/// between the checkpoint's manifest and its commit), then at random moments after each run
/// committed a checkpoint of its own. Single process: restarts on 1, 2, 3 workers (restore onto
/// other worker counts). Cluster: 2 processes × 1 worker, one process killed, the survivor
/// reaped, both restarted. Once the producer is done, a bounded run finishes the topic. The
/// sealed lists equal an uninterrupted bounded run's (fresh job id, same topic) and the model's;
/// every dead letter is stored once, at its message's offset, with its raw bytes.
fn crash_while_producing(cluster: bool, seed: u64) {
    use rand::{Rng, SeedableRng};
    use std::os::unix::process::ExitStatusExt;
    let s = setup_with("events", true, false, 12_000);
    let pg = PgSchema::new();
    pg.use_for(&s);
    let producer = Command::new(hotlist_tests::hotlist_bin())
        .args(&s.produce)
        .args(["--rate", "1500"])
        .current_dir(s.dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the producer");
    let mut producer = Some(producer);
    // (crash point, the process it is armed in): the sink and manifest are process 0's work
    let armed = [
        ("checkpoint.file:3", 1),
        ("sink.commit:2", 0),
        ("checkpoint.manifest:2", 0),
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (mut kills, mut while_producing, mut logs) = (0, 0, String::new());
    let live = ["--set", "source.bounded=false"];
    while kills < 6 {
        if let Some(mut p) = producer.take() {
            match p.try_wait().expect("try_wait") {
                Some(_) => {
                    let out = p.wait_with_output().expect("producer");
                    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                }
                None => producer = Some(p),
            }
        }
        while_producing += producer.is_some() as usize;
        let workers = if cluster { 1 } else { 1 + kills % 3 };
        let crash = armed
            .get(kills)
            .map(|(point, victim)| (*point, if cluster { *victim } else { 0 }));
        let before = pg.committed("kafka");
        let mut procs = spawn_job(s.dir.path(), cluster, workers, crash, &live);
        let victim = crash.map_or_else(|| rng.random_range(0..procs.len()), |c| c.1);
        let deadline = Instant::now() + Duration::from_secs(60);
        if crash.is_some() {
            // the armed process kills itself when it reaches the point; its peer then stops too
            // (fate-sharing) and may be seen ending first: what counts is how the victim ended
            while procs[victim].try_wait().expect("try_wait").is_none() {
                let others_ended = procs
                    .iter_mut()
                    .enumerate()
                    .any(|(i, p)| i != victim && p.try_wait().expect("try_wait").is_some());
                let victim_ended = others_ended
                    && hotlist_tests::reap(&mut procs[victim], Duration::from_secs(10))
                    && procs[victim].try_wait().expect("try_wait").and_then(|s| s.signal()) == Some(9);
                if victim_ended {
                    break;
                }
                if Instant::now() > deadline || others_ended {
                    panic!(
                        "crash point {crash:?} not reached:\n{logs}\n--- this run:\n{}",
                        outputs(procs)
                    );
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        } else {
            while pg.committed("kafka") <= before {
                if procs.iter_mut().any(|p| p.try_wait().expect("try_wait").is_some()) {
                    panic!("a live run ended:\n{logs}\n--- the run that ended:\n{}", outputs(procs));
                }
                assert!(Instant::now() < deadline, "no progress:\n{logs}");
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(rng.random_range(0..15))); // fault injection timing
            let _ = procs[victim].kill();
        }
        let status = procs[victim].wait().expect("wait");
        assert_eq!(status.signal(), Some(9), "process {victim} died by SIGKILL:\n{logs}");
        kills += 1;
        for (i, p) in procs.iter_mut().enumerate() {
            if i != victim {
                hotlist_tests::reap(p, Duration::from_secs(10)); // fate-sharing: the survivor goes too
            }
        }
        for (i, p) in procs.into_iter().enumerate() {
            let out = p.wait_with_output().expect("output");
            logs.push_str(&format!(
                "--- kill {kills} ({crash:?}, process {i} of the run):\n{}\n",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        while_producing >= 3,
        "most kills hit while producing: {while_producing}\n{logs}"
    );
    if let Some(p) = producer {
        let out = p.wait_with_output().expect("producer");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // the topic is complete: a bounded run reads it to the end and seals every window
    let mut procs = spawn_job(s.dir.path(), cluster, if cluster { 1 } else { 2 }, None, &["--bounded"]);
    for p in procs.iter_mut() {
        assert!(
            hotlist_tests::reap(p, Duration::from_secs(120)),
            "the final run hung:\n{logs}"
        );
    }
    for p in procs {
        let out = p.wait_with_output().expect("final run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{logs}--- final run:\n{err}");
        assert!(err.contains("restoring checkpoint"), "the final run restored: {err}");
    }
    // the uninterrupted run: the same topic under a fresh job id, no kills
    run_hotlist(
        s.dir.path(),
        &[
            "run",
            "--config",
            "hotlist.toml",
            "--progress",
            "never",
            "--bounded",
            "--set",
            "job.id=\"clean\"",
        ],
        true,
    );
    let (got, clean) = (pg.results("kafka"), pg.results("clean"));
    assert_eq!(got.0, clean.0, "sealed lists = the uninterrupted run's\n{logs}");
    assert_eq!(got.0, s.want.0, "sealed lists = the model's\n{logs}");
    assert_eq!(got.1, s.want_dead, "every dead letter once\n{logs}");
    assert_eq!(clean.1, s.want_dead, "the uninterrupted run's dead letters");
}

/// Acceptance: one process, killed 6 times while the producer writes, restarted on 1–3 workers.
#[test]
fn sigkill_while_producing_into_postgres_is_exactly_once() {
    crash_while_producing(false, 5);
}

/// Acceptance: 2 processes × 1 worker, one of them killed 6 times while the producer writes.
#[test]
fn two_processes_sigkill_while_producing_is_exactly_once() {
    crash_while_producing(true, 9);
}

/// The broker stopped for 10 s in the middle of a live run: the job keeps running (reporting
/// each partition's consumer lag), resumes by itself when the broker is back and reads what is
/// produced after the outage; after a graceful stop, a bounded run finishes the topic, and the
/// results are exact (= the model of data set A, then B).
///
/// The run is live, so it cannot end before the outage: "mid-run" is a state the test waits for
/// (every record of A read), never a race against a bounded run that librdkafka's prefetch lets
/// finish while the broker is down.
#[test]
fn broker_outage_of_ten_seconds_is_survived() {
    let mut s = setup("events", true);
    let metrics = Metrics::new();
    let mut child = spawn_with(
        s.dir.path(),
        2,
        &["--metrics-addr", &metrics.addr, "--set", "source.bounded=false"],
    );
    let wait_for_records = |n: u64, child: &mut Child, what: &str| metrics.wait_for_records(n, child, what);
    wait_for_records(6000, &mut child, "before the outage");
    s.broker.stop();
    std::thread::sleep(Duration::from_secs(10)); // the outage itself
    let body = metrics.scrape();
    // the job's metrics show each partition's consumer lag (from librdkafka's cached offsets)
    assert!(
        body.lines().any(|l| l.starts_with("hotlist_partition_consumer_lag{")),
        "{body}"
    );
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the job kept running without the broker"
    );
    s.broker.restart();
    let (a, b) = produce_data_set_b(&s);
    let want_ab = model::run(&a_then_b(&a, &b), &model::crash_windows(), 2_000, 30_000);
    wait_for_records(9000, &mut child, "after the outage");
    stop_gracefully(child);
    // the graceful stop committed what was read; a bounded run restores it and seals the rest
    run_to_the_end(s.dir.path(), 1);
    assert_eq!(results(s.dir.path()).0, want_ab.0, "sealed lists = model of A then B");
    assert_eq!(results(s.dir.path()).1, dead_by_partition(&want_ab.1), "dead letters");
}

/// The job's `/metrics` endpoint, on a free loopback port.
struct Metrics {
    addr: String,
}

impl Metrics {
    fn new() -> Metrics {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        Metrics {
            addr: l.local_addr().expect("addr").to_string(),
        }
    }

    /// The metrics now (empty while the job is not serving them).
    fn scrape(&self) -> String {
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
    fn sum(body: &str, name: &str, labels: &str) -> u64 {
        body.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(labels))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits (up to 60 s) until the live run `child` has read exactly `n` records.
    fn wait_for_records(&self, n: u64, child: &mut Child, what: &str) {
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
fn stop_gracefully(child: Child) -> String {
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

/// Kafka → PostgreSQL, checkpointed: killed with SIGKILL twice, then PostgreSQL itself is
/// restarted under a live run that keeps committing. The job retries and reconnects by itself
/// (it commits again after the restart); after a graceful stop a bounded run seals the rest,
/// and the sealed `topk` rows and dead letters in PostgreSQL equal the model.
#[test]
fn kafka_into_postgres_survives_sigkill_and_a_postgres_restart() {
    let version = std::fs::read_dir("/etc/postgresql")
        .ok()
        .and_then(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).max())
        .expect("a local PostgreSQL cluster managed by pg_ctlcluster (scripts/test sets it up)");
    let s = setup("events", true);
    let pg = PgSchema::new();
    pg.use_for(&s);
    let mut logs = String::new();
    for kill in 0..2 {
        let before = pg.committed("kafka");
        let mut child = spawn(s.dir.path(), 1 + kill % 2);
        pg.await_commit_after("kafka", before, &mut child, &format!("before kill {kill}:\n{logs}"));
        let _ = child.kill();
        logs.push_str(&String::from_utf8_lossy(
            &child.wait_with_output().expect("wait").stderr,
        ));
    }
    // a live run (it cannot end before the restart; it commits a checkpoint every 10 ms, idle
    // or not): restart PostgreSQL under it once it has committed again, and wait until it
    // commits after the restart
    let before = pg.committed("kafka");
    let mut child = spawn_with(s.dir.path(), 2, &["--set", "source.bounded=false"]);
    pg.await_commit_after("kafka", before, &mut child, "before the restart");
    let restart = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status();
    assert!(
        restart.is_ok_and(|s| s.success()),
        "cannot restart PostgreSQL {version}"
    );
    let at_restart = pg.committed("kafka");
    pg.await_commit_after("kafka", at_restart, &mut child, "after the restart");
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "graceful stop: {logs}{err}");
    assert!(
        err.contains("sink commit failed") && err.contains("retrying"),
        "the restart hit a commit:\n{err}"
    );
    // the topic is read: a bounded run restores the last checkpoint and seals every window
    run_to_the_end(s.dir.path(), 1);
    let (lists, dead) = pg.results("kafka");
    assert_eq!(lists, s.want.0, "{logs}{err}");
    assert_eq!(dead, s.want_dead, "{logs}{err}");
}

/// Records (raw lines) per partition.
type Parts = Vec<Vec<Vec<u8>>>;

/// Reads the JSON-lines files `hotlist generate` wrote into `dir`, one per partition.
fn read_parts(dir: &Path) -> Parts {
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
fn produce_data_set_b(s: &Setup) -> (Parts, Parts) {
    produce_more(s, &[], "files-b")
}

/// Data set B with `extra` `--set` overrides (e.g. more partitions), produced into the setup's
/// topic and written as files into `out` for the model; returns A's and its records.
fn produce_more(s: &Setup, extra: &[&str], out: &str) -> (Parts, Parts) {
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
fn a_then_b(a: &[Vec<Vec<u8>>], b: &[Vec<Vec<u8>>]) -> Parts {
    a.iter().zip(b).map(|(x, y)| [x.clone(), y.clone()].concat()).collect()
}

/// Reprocessing from a point in time: after data set A, then (later) data set B were produced,
/// a bounded run under a fresh job id with `source.start_time` = the moment between them sees
/// exactly B (= the model of B alone, dead letters at their offsets), and the live job's
/// results (= the model of A then B) are untouched by it.
#[test]
fn reprocessing_from_a_point_in_time_sees_only_newer_messages() {
    let s = setup("events", false);
    // a moment strictly after every message of A (message timestamps are milliseconds)
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis() as i64
    };
    let between = now_ms() + 1;
    while now_ms() <= between {
        std::thread::yield_now();
    }
    let (a, b) = produce_data_set_b(&s);
    let a_messages: Vec<u64> = a.iter().map(|l| (l.len() as u64).div_ceil(BATCH)).collect();
    let dead_at = |dead: model::Dead, parts: &[Vec<Vec<u8>>], skip: &dyn Fn(u32, u64) -> u64| {
        let mut v: Vec<_> = dead
            .into_iter()
            .map(|(p, pos, reason)| (p, skip(p, pos), reason, parts[p as usize][pos as usize - 1].clone()))
            .collect();
        v.sort();
        v
    };
    // B alone, at offsets after A's messages
    let (want_b, dead_b) = model::run(&b, &model::crash_windows(), 2_000, 30_000);
    let want_b_dead = dead_at(dead_b, &b, &|p, pos| a_messages[p as usize] + (pos - 1) / BATCH);
    // A then B in each partition
    let ab = a_then_b(&a, &b);
    let (want_ab, dead_ab) = model::run(&ab, &model::crash_windows(), 2_000, 30_000);
    let want_ab_dead = dead_at(dead_ab, &ab, &|p, pos| {
        let len_a = a[p as usize].len() as u64;
        if pos <= len_a {
            (pos - 1) / BATCH
        } else {
            a_messages[p as usize] + (pos - len_a - 1) / BATCH
        }
    });
    assert_ne!(want_b, want_ab, "the data sets differ where it shows");

    let run = |extra: &[&str]| {
        let args = [
            &["run", "--config", "hotlist.toml", "--progress", "never", "--bounded"][..],
            extra,
        ]
        .concat();
        run_hotlist(s.dir.path(), &args, true)
    };
    let full = |job: &str| {
        let db = s.dir.path().join("out.db");
        let conn = rusqlite::Connection::open(&db).expect("open db");
        let mut stmt = conn
            .prepare("SELECT partition, position, reason, raw FROM dead_letters WHERE job = ?1")
            .expect("prepare");
        let mut dead: Vec<(u32, u64, String, Option<Vec<u8>>)> = stmt
            .query_map([job], |r| {
                let reason: String = r.get(2)?;
                // (the raw bytes of `bad` ones; a late event's are its line too, checked elsewhere)
                let raw = if reason == "bad" { Some(r.get(3)?) } else { None };
                Ok((r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u64, reason, raw))
            })
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        dead.sort();
        (hotlist_tests::sqlite_sealed_lists(&db, job), dead)
    };
    let with_raw = |v: Vec<DeadAt>| -> Vec<(u32, u64, String, Option<Vec<u8>>)> {
        v.into_iter()
            .map(|(p, o, r, raw)| {
                let raw = (r == "bad").then_some(raw);
                (p, o, r, raw)
            })
            .collect()
    };
    run(&[]);
    let live = full("kafka");
    assert_eq!(live.0, want_ab, "the live job read A then B");
    // unquoted: TOML reads it as a datetime, which is a time like the string
    let start = format!(
        "source.start_time={}",
        hotlist_operators::time::Millis(between).to_rfc3339()
    );
    let out = run(&["--set", "job.id=\"replay\"", "--set", &start]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("older messages skipped"), "the start is logged: {log}");
    let replay = full("replay");
    assert_eq!(replay.0, want_b, "the replay read exactly B");
    assert_eq!(replay.1, with_raw(want_b_dead), "B's dead letters at their offsets");
    assert_eq!(full("kafka"), live, "the live job's results are untouched");
    assert_eq!(live.1, with_raw(want_ab_dead), "the live job's dead letters");
}

/// Hostile messages, produced with explicit timestamps (2001-01-01 and 2100-01-01): a 2 MiB
/// message (above librdkafka's `fetch.message.max.bytes` and `source.max_record_bytes`, both
/// 1 MiB) is one `too_large` dead letter with its first 4 KiB and its true length; in a
/// batched message, an event 2 h ahead of its message's timestamp is `future`, whatever the
/// wall clock says; an event 74 years ahead of the wall clock but 30 min ahead of its
/// message's timestamp is counted. Everything else is counted; nothing is late.
#[test]
fn oversized_and_future_messages_are_dead_letters() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    std::fs::write(dir.path().join("gen.toml"), GENERATOR).expect("config");
    // create the topic (one partition) with one generated event at offset 0 (ts 0)
    run_hotlist(
        dir.path(),
        &[
            "produce",
            "--config",
            "gen.toml",
            "--brokers",
            &broker.addr(),
            "--topic",
            "hostile",
            "--create",
            "--set",
            "source.events=1",
            "--set",
            "source.partitions=1",
            "--set",
            "source.bad_fraction=0",
            "--set",
            "source.late_fraction=0",
        ],
        true,
    );
    let (t2001, t2100, hour) = (978_307_200_000i64, 4_102_444_800_000i64, 3_600_000i64);
    let event = |item: &str, ts: i64| format!("{{\"item_id\":\"{item}\",\"ts\":{ts}}}");
    let mut big = vec![b'x'; 2 << 20];
    big[..15].copy_from_slice(b"{\"item_id\":\"big");
    let batched = format!(
        "{}\n{}\n{}\n",
        event("a", t2001 + 1_000),
        event("a", t2001 + 2 * hour),
        event("a", t2001 + 2_000)
    );
    let messages: [(Vec<u8>, i64); 4] = [
        (event("a", t2001).into_bytes(), t2001),
        (big.clone(), t2001),
        (batched.into_bytes(), t2001),
        (event("z", t2100 + hour / 2).into_bytes(), t2100),
    ];
    let producer: BaseProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", broker.addr())
        .set("message.max.bytes", "10000000")
        .create()
        .expect("producer");
    for (payload, ts) in &messages {
        let rec = BaseRecord::<(), [u8]>::to("hostile")
            .partition(0)
            .payload(payload)
            .timestamp(*ts);
        producer.send(rec).map_err(|(e, _)| e).expect("send");
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    let config = format!(
        "[job]\nid = \"kafka\"\n[source]\nkind = \"kafka\"\nbrokers = \"{}\"\ntopic = \"hostile\"\nbounded = true\n\
         [[window]]\nname = \"1d\"\nsize = \"1d\"\nk = 10\n[sink]\npath = \"out.db\"\n",
        broker.addr()
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let out = run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("7 records, 5 events") && stdout.contains(" 2 bad, 0 late "),
        "{stdout}"
    );

    let conn = rusqlite::Connection::open(dir.path().join("out.db")).expect("open db");
    let mut stmt = conn
        .prepare("SELECT position, reason, detail, raw FROM dead_letters WHERE job = 'kafka' ORDER BY position")
        .expect("prepare");
    let dead: Vec<(i64, String, String, Vec<u8>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert_eq!((dead[0].0, dead[0].1.as_str()), (2, "too_large"));
    assert_eq!(
        dead[0].2,
        "message is 2097152 bytes, more than source.max_record_bytes (1048576); raw keeps its first 4096"
    );
    assert_eq!(dead[0].3, &big[..4096]);
    assert_eq!((dead[1].0, dead[1].1.as_str()), (3, "future"));
    assert_eq!(
        dead[1].2,
        "ts 2001-01-01T02:00:00.000Z is more than time.max_future (1h) ahead of the message timestamp \
         (2001-01-01T00:00:00.000Z) (line 2 of the message)"
    );
    let counts: Vec<(i64, String, i64)> = conn
        .prepare("SELECT window_start, item_id, count FROM topk WHERE job = 'kafka' ORDER BY window_start, rank")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    let in_2001: Vec<_> = counts
        .iter()
        .filter(|c| c.0 == t2001)
        .map(|c| (c.1.as_str(), c.2))
        .collect();
    let in_2100: Vec<_> = counts
        .iter()
        .filter(|c| c.0 == t2100)
        .map(|c| (c.1.as_str(), c.2))
        .collect();
    assert_eq!((in_2001, in_2100), (vec![("a", 3)], vec![("z", 1)]), "{counts:?}");
}

/// The model's dead letters of data set A followed by B in each partition, at their Kafka
/// offsets: (partition, offset, reason), sorted.
fn dead_at_offsets(dead: &model::Dead, a: &[Vec<Vec<u8>>]) -> Vec<(u32, u64, String)> {
    let mut v: Vec<_> = dead
        .iter()
        .map(|(p, pos, reason)| {
            let len_a = a[*p as usize].len() as u64;
            let offset = if *pos <= len_a {
                (pos - 1) / BATCH
            } else {
                len_a.div_ceil(BATCH) + (pos - len_a - 1) / BATCH
            };
            (*p, offset, reason.clone())
        })
        .collect();
    v.sort();
    v
}

/// A fallback past the committed checkpoint keeps every Kafka dead letter: that checkpoint's
/// positions are each partition's NEXT offset, so a bad message at exactly that offset was not
/// read by it and the replay must store it. The job reads data set A live and stops gracefully
/// (its final checkpoint is at A's end offsets); B is produced with mostly bad lines, so B's
/// first message of a partition — at A's end offset — is dead-lettered; the final checkpoint
/// loses a worker's counter file; a bounded run falls back to the previous checkpoint and reads
/// B. The results equal the model of A then B, every dead letter once at its offset.
#[test]
fn a_fallback_keeps_the_dead_letter_at_the_skipped_checkpoints_next_offset() {
    let s = setup("events", true);
    let metrics = Metrics::new();
    let mut child = spawn_with(
        s.dir.path(),
        2,
        &[
            "--metrics-addr",
            &metrics.addr,
            "--set",
            "source.bounded=false",
            "--set",
            "checkpoint.retain=1000",
        ],
    );
    metrics.wait_for_records(6000, &mut child, "data set A");
    stop_gracefully(child);
    let (a, b) = produce_more(&s, &["source.bad_fraction=0.9"], "files-b");
    let (want_lists, want_dead) = model::run(&a_then_b(&a, &b), &model::crash_windows(), 2_000, 30_000);
    let want_dead = dead_at_offsets(&want_dead, &a);
    let at_a_end: Vec<_> = (0..3u32)
        .filter(|p| {
            let end = (a[*p as usize].len() as u64).div_ceil(BATCH);
            want_dead.iter().any(|(q, o, _)| q == p && *o == end)
        })
        .collect();
    assert!(
        !at_a_end.is_empty(),
        "some partition has a dead letter at A's end offset"
    );
    // the store's committed checkpoint loses worker 1's counter file
    let db = s.dir.path().join("out.db");
    let committed = hotlist_tests::sqlite_committed_epoch(&db, "kafka").expect("a commit");
    let counter = s
        .dir
        .path()
        .join(format!("ckpt/kafka/{committed:020}/counter-0001.snap"));
    std::fs::remove_file(&counter).expect("delete counter-0001.snap");
    let out = spawn(s.dir.path(), 1).wait_with_output().expect("bounded run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("is unusable")
            && err.contains("counter-0001.snap")
            && err.contains("restoring the older checkpoint"),
        "{err}"
    );
    let (lists, dead) = hotlist_tests::sqlite_dead_letters(&db, "kafka").0.into_iter().fold(
        (hotlist_tests::sqlite_sealed_lists(&db, "kafka"), Vec::new()),
        |(l, mut d), x| {
            d.push(x);
            (l, d)
        },
    );
    assert_eq!(lists, want_lists, "sealed lists = the model of A then B");
    // (a short message on failure: the differences, not thousands of letters)
    let missing: Vec<_> = want_dead.iter().filter(|d| !dead.contains(d)).collect();
    let extra: Vec<_> = dead.iter().filter(|d| !want_dead.contains(d)).collect();
    assert!(
        missing.is_empty() && extra.is_empty() && dead.len() == want_dead.len(),
        "every dead letter once at its offset (partitions {at_a_end:?} have one at A's end offset): \
         missing {missing:?}, not expected {extra:?}, {} stored, {} expected",
        dead.len(),
        want_dead.len()
    );
}

/// Sends `signal` (`"STOP"`, `"CONT"`, …) to a process.
fn signal(child: &Child, signal: &str) {
    assert!(Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill")
        .success());
}

/// Messages per partition of a data set (3 events per message).
fn messages(parts: &[Vec<Vec<u8>>]) -> Vec<u64> {
    parts.iter().map(|p| (p.len() as u64).div_ceil(BATCH)).collect()
}

/// A run after a `--bounded` run of the same job id reads on from the bounded run's offsets
/// (it used to restore the partitions as finished and read nothing). Data set A (0-10 s) and a
/// bounded run of it; then data set B (from 12 s) produced; then a live run, stopped once it
/// has read B, and a bounded run that seals (`live`), or a bounded run at once. Either way the
/// results are the model of A, its end, then B: per window, B counts in the instances after
/// those the end sealed, and its events for those are `sealed` dead letters.
fn read_on_after_a_bounded_run(live: bool) {
    let s = setup("events", true);
    run_to_the_end(s.dir.path(), 2);
    assert_eq!(results(s.dir.path()), s.want, "the bounded run of A");
    // B from 12 s on: inside the `30s-hop` instances A's end sealed, after the `10s` ones
    let (a, b) = produce_more(&s, &["source.start=12000"], "files-b");
    let want = model::run_after_end(&a, &b, &model::crash_windows(), 2_000, 30_000);
    assert!(
        want.1.iter().any(|d| d.2 == "sealed"),
        "some events of B are for instances the end of A sealed"
    );
    assert!(
        want.0
            .keys()
            .any(|(w, start, _)| w == "10s" && (10_000..30_000).contains(start)),
        "B counts in `10s` instances inside a sealed `30s-hop` one"
    );
    if live {
        let metrics = Metrics::new();
        let mut child = spawn_with(
            s.dir.path(),
            2,
            &["--metrics-addr", &metrics.addr, "--set", "source.bounded=false"],
        );
        metrics.wait_for_records(3000, &mut child, "B, after the bounded run of A");
        let err = stop_gracefully(child);
        assert!(
            err.contains("finished by a bounded run; reading on from offset"),
            "{err}"
        );
    }
    run_to_the_end(s.dir.path(), 1);
    assert_eq!(
        results(s.dir.path()).0,
        want.0,
        "sealed lists = the model of A, its end, then B"
    );
    assert_eq!(results(s.dir.path()).1, dead_by_partition(&want.1), "dead letters");
}

#[test]
fn a_live_run_reads_on_after_a_bounded_run() {
    read_on_after_a_bounded_run(true);
}

#[test]
fn a_bounded_run_after_a_bounded_run_reads_only_what_is_new() {
    read_on_after_a_bounded_run(false);
}

/// The topic deleted and re-created behind the job's back, with fewer messages than the
/// checkpoint's offsets (it used to wait at the old offsets, skipping the new messages
/// silently): the next run stops (exit 1) with a line naming the partition and the gap; with
/// `source.on_data_loss = "continue"` it logs the gap, counts it per partition and reads the
/// new topic from its start.
#[test]
fn a_re_created_topic_fails_the_restore_unless_the_loss_is_accepted() {
    let s = setup("events", true);
    run_to_the_end(s.dir.path(), 2);
    let a = messages(&read_parts(&s.dir.path().join("files")));
    s.broker.delete_topic("events");
    let mut recreate: Vec<&str> = s.produce.iter().map(String::as_str).collect();
    recreate.extend([
        "--set",
        "source.events=300",
        "--set",
        "source.seed=11",
        "--set",
        "source.start=60000",
    ]);
    run_hotlist(s.dir.path(), &recreate, true); // --create: 34 messages per partition
    let out = spawn(s.dir.path(), 1).wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = format!(
        "kafka:events/0: the checkpoint's offset {} is beyond the partition's end 34 (the topic was deleted and re-created?)",
        a[0]
    );
    assert!(err.contains(&line), "{err}");
    let metrics = Metrics::new();
    let continue_ = [
        "--metrics-addr",
        &metrics.addr,
        "--set",
        "source.bounded=false",
        "--set",
        "source.on_data_loss=\"continue\"",
    ];
    let mut child = spawn_with(s.dir.path(), 2, &continue_);
    metrics.wait_for_records(300, &mut child, "the re-created topic");
    let body = metrics.scrape();
    for p in 0..3 {
        let labels = format!("partition=\"{p}\"");
        assert_eq!(Metrics::sum(&body, "hotlist_data_loss_total", &labels), 1, "{body}");
    }
    assert_eq!(
        Metrics::sum(&body, "hotlist_data_loss_messages_total", ""),
        0,
        "unknown"
    );
    let err = stop_gracefully(child);
    assert!(err.contains(&line) && err.contains("reading on from offset 0"), "{err}");
}

/// Retention deleted messages behind the checkpoint before they were read (made real in the
/// broker's storage): the next run stops (exit 1) with a line naming the partition and the
/// offsets; accepted, it reads on from the partition's new start and counts the 100 messages.
#[test]
fn messages_deleted_before_they_were_read_fail_the_restore_unless_accepted() {
    let mut s = setup("events", true);
    run_to_the_end(s.dir.path(), 2);
    let (a, b) = produce_data_set_b(&s);
    let from = messages(&a)[0];
    s.broker.edit_storage(&retention_deletes_below("events", 0, from + 100));
    let out = spawn(s.dir.path(), 1).wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = format!(
        "kafka:events/0: messages {from}..{} were deleted by retention before they were read (the partition now starts at {})",
        from + 99,
        from + 100
    );
    assert!(err.contains(&line), "{err}");
    let metrics = Metrics::new();
    let continue_ = [
        "--metrics-addr",
        &metrics.addr,
        "--set",
        "source.bounded=false",
        "--set",
        "source.on_data_loss=\"continue\"",
    ];
    let mut child = spawn_with(s.dir.path(), 2, &continue_);
    let b_records: usize = b.iter().map(Vec::len).sum();
    metrics.wait_for_records(
        b_records as u64 - 100 * BATCH,
        &mut child,
        "B without the deleted messages",
    );
    let body = metrics.scrape();
    assert_eq!(
        Metrics::sum(&body, "hotlist_data_loss_total", "partition=\"0\""),
        1,
        "{body}"
    );
    assert_eq!(Metrics::sum(&body, "hotlist_data_loss_total", ""), 1, "{body}");
    assert_eq!(
        Metrics::sum(&body, "hotlist_data_loss_messages_total", "partition=\"0\""),
        100
    );
    stop_gracefully(child);
}

/// While a live run reads, retention deletes messages it has not read yet (the run paused
/// with SIGSTOP meanwhile, so that it cannot read them first; the broker then answers its fetch
/// with the messages after the gap): it stops with exit 1 and the line. The next run, accepting the
/// loss (`on_data_loss = "continue"`), counts that gap at its restore, reads on, and counts the
/// next one found while reading.
///
/// (A topic deleted under a running job is not tested: with tansu, librdkafka 2.12 then
/// crashes in its metadata cache — SIGSEGV in `rd_kafka_metadata_cache_find` — with or without
/// hotlist's partition discovery. The restore after a re-creation is tested above.)
#[test]
fn data_loss_while_reading_is_found() {
    let mut s = setup("events", true);
    let a = messages(&read_parts(&s.dir.path().join("files")));
    let metrics = Metrics::new();
    let live = ["--metrics-addr", &metrics.addr, "--set", "source.bounded=false"];
    let mut child = spawn_with(s.dir.path(), 1, &live);
    metrics.wait_for_records(6000, &mut child, "A");
    pause_cut_off(&child, &mut s.broker);
    let (_, b) = produce_data_set_b(&s);
    s.broker.edit_storage(&retention_deletes_below("events", 1, a[1] + 10));
    signal(&child, "CONT");
    assert!(
        hotlist_tests::reap(&mut child, Duration::from_secs(60)),
        "the run stopped"
    );
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = format!(
        "kafka:events/1: messages {}..{} were deleted by retention before they were read",
        a[1],
        a[1] + 9
    );
    assert!(err.contains(&line), "{err}");

    // accepted: the restore counts partition 1's gap; then one found while reading partition 2
    let continue_ = [&live[..], &["--set", "source.on_data_loss=\"continue\""]].concat();
    let mut child = spawn_with(s.dir.path(), 1, &continue_);
    let read = Metrics::sum(&metrics_when_read(&metrics, &mut child), "hotlist_records_total", "");
    pause_cut_off(&child, &mut s.broker);
    let (_, c) = produce_more(
        &s,
        &["source.seed=12", "source.start=90000", "source.events=300"],
        "files-c",
    );
    let end_of_b = a[2] + messages(&b)[2];
    s.broker
        .edit_storage(&retention_deletes_below("events", 2, end_of_b + 5));
    signal(&child, "CONT");
    let c_records: usize = c.iter().map(Vec::len).sum();
    metrics.wait_for_records(read + c_records as u64 - 5 * BATCH, &mut child, "C without 5 messages");
    let body = metrics.scrape();
    for (p, gaps, lost) in [(0, 0, 0), (1, 1, 10), (2, 1, 5)] {
        let labels = format!("partition=\"{p}\"");
        assert_eq!(Metrics::sum(&body, "hotlist_data_loss_total", &labels), gaps, "{body}");
        assert_eq!(
            Metrics::sum(&body, "hotlist_data_loss_messages_total", &labels),
            lost,
            "{body}"
        );
    }
    let err = stop_gracefully(child);
    let line = format!(
        "kafka:events/2: messages {end_of_b}..{} were deleted by retention before they were read (the partition now starts at {}); reading on from offset {}",
        end_of_b + 4,
        end_of_b + 5,
        end_of_b + 5
    );
    assert!(err.contains(&line), "{err}");
}

/// Pauses a run (SIGSTOP) and restarts the broker, so that the run has no fetch left that
/// could bring it messages produced from now on (a long-polling fetch answered while the run
/// is paused waits in its socket): it will ask for them after it resumes.
fn pause_cut_off(child: &Child, broker: &mut Broker) {
    signal(child, "STOP");
    broker.stop();
    broker.restart();
}

/// The metrics of a live run once it has read everything there is (its consumer lag is 0 on
/// every partition and the records read stop changing for a moment).
fn metrics_when_read(metrics: &Metrics, child: &mut Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = (String::new(), u64::MAX);
    loop {
        assert!(child.try_wait().expect("try_wait").is_none(), "the live run ended");
        assert!(Instant::now() < deadline, "the live run never caught up");
        let body = metrics.scrape();
        let read = Metrics::sum(&body, "hotlist_records_total", "");
        let lag = Metrics::sum(&body, "hotlist_partition_consumer_lag", "");
        let lags = body
            .lines()
            .filter(|l| l.starts_with("hotlist_partition_consumer_lag{"))
            .count();
        if lags == 3 && lag == 0 && read == last.1 {
            return body;
        }
        last = (body, read);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Partitions added to the topic while a live run reads it (tansu cannot add partitions through
/// the Kafka protocol; the test adds them in its storage, with the broker briefly stopped): the
/// run finds them within `source.partition_discovery` and reads them without a restart, from
/// their first message; its checkpoints carry them (a bounded run restores and seals), and the
/// results are the model of A then B over all five partitions.
#[test]
fn partitions_added_while_the_job_runs_are_read_without_a_restart() {
    let mut s = setup("events", true);
    let metrics = Metrics::new();
    let live = [
        "--metrics-addr",
        &metrics.addr,
        "--set",
        "source.bounded=false",
        "--set",
        "source.partition_discovery=\"100ms\"",
        // nothing goes idle: the global watermark waits for every partition, new ones included
        "--set",
        "time.idle_timeout=\"10m\"",
    ];
    let mut child = spawn_with(s.dir.path(), 2, &live);
    metrics.wait_for_records(6000, &mut child, "A");
    s.broker.edit_storage(&add_partitions("events", 3, 5));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !metrics
        .scrape()
        .lines()
        .any(|l| l.starts_with("hotlist_records_total{") && l.contains("partition=\"4\""))
    {
        assert!(child.try_wait().expect("try_wait").is_none(), "the live run ended");
        assert!(Instant::now() < deadline, "the new partitions were not found");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (a, b) = produce_more(&s, &["source.partitions=5"], "files-b");
    assert_eq!(b.len(), 5);
    metrics.wait_for_records(9000, &mut child, "B, in five partitions");
    let err = stop_gracefully(child);
    assert!(err.contains("the topic has 5 partitions now (was 3)"), "{err}");
    run_to_the_end(s.dir.path(), 1);
    let parts: Parts = (0..5)
        .map(|p| [a.get(p).cloned().unwrap_or_default(), b[p].clone()].concat())
        .collect();
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    assert_eq!(results(s.dir.path()).0, want.0, "sealed lists = the model of A then B");
    assert_eq!(results(s.dir.path()).1, dead_by_partition(&want.1), "dead letters");
    assert!(
        want.1.iter().any(|d| d.0 == 4),
        "dead letters of a new partition are stored"
    );
    let conn = rusqlite::Connection::open(s.dir.path().join("out.db")).expect("open db");
    let source: String = conn
        .query_row(
            "SELECT group_concat(DISTINCT source) FROM dead_letters WHERE job = 'kafka' AND partition = 4",
            [],
            |r| r.get(0),
        )
        .expect("the new partition's dead letters");
    assert_eq!(source, "kafka:events/4", "named like the others");
}

/// `exact_at_seal` over Kafka (docs/exact-at-seal.md): a bounded run's sealed lists, counted by
/// tiny sketches, are replayed by offset with a second consumer and published exact, with a
/// certificate, equal to the model's. In a live run, retention deletes the start of partition
/// 0's range after the run read it and before the instances seal: their replays cannot read
/// it again, so those lists stay approximate, the reason is logged and
/// `hotlist_exact_at_seal_failures_total` counts them.
#[test]
fn exact_at_seal_replays_by_offset_and_a_range_retention_removed_stays_approximate() {
    let mut s = setup("events", false);
    let sketch = "mode = \"sketch\"\nexact_at_seal = true\n[window.sketch]\nepsilon = 0.2\ndelta = 0.3";
    let path = s.dir.path().join("hotlist.toml");
    let config = std::fs::read_to_string(&path).expect("config");
    let config = config.replacen("k = 5\n", &format!("k = 5\n{sketch}\n"), 1).replacen(
        "k = 4\n",
        &format!("k = 4\n{sketch}\n"),
        1,
    );
    std::fs::write(&path, config).expect("config");
    run_to_the_end(s.dir.path(), 2);
    assert_eq!(results(s.dir.path()), s.want, "exact lists, the model's");
    let conn = rusqlite::Connection::open(s.dir.path().join("out.db")).expect("open db");
    let uncertified: i64 = conn
        .query_row(
            "SELECT count(*) FROM topk_instances WHERE job = 'kafka' AND (exact = 0 OR certificate_passes IS NULL)",
            [],
            |r| r.get(0),
        )
        .expect("query");
    assert_eq!(uncertified, 0, "every sealed list was replayed and certified");

    // live, under another job id: A read, then retention removes half of partition 0's A
    let a = messages(&read_parts(&s.dir.path().join("files")));
    let metrics = Metrics::new();
    let live = [
        "--metrics-addr",
        &metrics.addr,
        "--set",
        "source.bounded=false",
        "--set",
        "job.id=\"live\"",
    ];
    let mut child = spawn_with(s.dir.path(), 1, &live);
    metrics.wait_for_records(6000, &mut child, "A");
    pause_cut_off(&child, &mut s.broker);
    s.broker.edit_storage(&retention_deletes_below("events", 0, a[0] / 2));
    produce_data_set_b(&s); // event time from 60 s: A's instances seal
    signal(&child, "CONT");
    let deadline = Instant::now() + Duration::from_secs(60);
    while Metrics::sum(&metrics.scrape(), "hotlist_exact_at_seal_failures_total", "") == 0 {
        assert!(Instant::now() < deadline, "no replay failed: {}", metrics.scrape());
        assert!(child.try_wait().expect("try_wait").is_none(), "the live run ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = stop_gracefully(child);
    assert!(
        err.lines()
            .any(|l| l.contains("the sealed list stays approximate") && l.contains("partition 0")),
        "{err}"
    );
    let approximate: i64 = conn
        .query_row(
            "SELECT count(*) FROM topk_instances WHERE job = 'live' AND final = 1 AND exact = 0 AND certificate_passes IS NULL",
            [],
            |r| r.get(0),
        )
        .expect("query");
    assert!(approximate >= 1, "A's sealed lists stay approximate");
}

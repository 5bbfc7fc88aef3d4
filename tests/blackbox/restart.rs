//! Starting a checkpointed job the wrong way, on the real binary: pointed at the wrong store,
//! with its checkpoints lost, twice at once, or while a stale run comes back to life. The
//! binary refuses (or stops) with one clear line instead of deleting checkpoints, replaying
//! silently, or dropping another run's output; `--from-scratch` starts the job over on purpose.
//! In the end the results are exact: the model's sealed lists, every dead letter once.

use hotlist_tests::inputs::{checkpointed_job_shape, random_partitions, write_partitions, Shape};
use hotlist_tests::model;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const JOB: &str = "restart";

/// `lines` per partition (20,000 make a run last a second or two here: long enough for two
/// runs started together to overlap, and to freeze a run before it ends).
fn job_config() -> String {
    hotlist_tests::checkpointed_job_config(JOB)
}

fn shape(lines: usize) -> Shape {
    checkpointed_job_shape(lines)
}

/// A directory with the input, the config and the model's results.
struct Job {
    dir: tempfile::TempDir,
    want: (model::Lists, model::Dead),
}

impl Job {
    fn new(seed: u64, lines: usize) -> Job {
        let parts = random_partitions(seed, &shape(lines));
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("in")).expect("mkdir");
        write_partitions(&dir.path().join("in"), &parts).expect("inputs");
        std::fs::write(dir.path().join("hotlist.toml"), job_config()).expect("config");
        let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
        assert!(!want.1.is_empty(), "the input has dead letters");
        Job { dir, want }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn db(&self) -> PathBuf {
        self.path().join("out.db")
    }

    /// Starts `hotlist run` with `extra` arguments.
    fn spawn(&self, extra: &[&str]) -> Child {
        Command::new(hotlist_tests::hotlist_bin())
            .args([
                "run",
                "--config",
                "hotlist.toml",
                "--progress",
                "never",
                "--workers",
                "2",
            ])
            .args(extra)
            .current_dir(self.path())
            .env("HOTLIST_LOG", "hotlist=info,warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hotlist")
    }

    /// Runs `hotlist run` with `extra` arguments to its end.
    fn run(&self, extra: &[&str]) -> Output {
        self.spawn(extra).wait_with_output().expect("run")
    }

    /// The job's sealed lists and dead letters in the SQLite store.
    fn results(&self) -> (model::Lists, model::Dead) {
        (
            hotlist_tests::sqlite_sealed_lists(&self.db(), JOB),
            hotlist_tests::sqlite_dead_letters(&self.db(), JOB).0,
        )
    }

    /// The checkpoint directory's entries (name → size of each file), to show it untouched.
    fn checkpoint_files(&self) -> Vec<(String, u64)> {
        let mut files = Vec::new();
        let job_dir = self.path().join("ckpt").join(JOB);
        for e in std::fs::read_dir(&job_dir).expect("checkpoints").filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            match std::fs::read_dir(e.path()) {
                Ok(rd) => {
                    for f in rd.filter_map(|f| f.ok()) {
                        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                        files.push((format!("{name}/{}", f.file_name().to_string_lossy()), size));
                    }
                }
                Err(_) => files.push((name, 0)),
            }
        }
        files.sort();
        files
    }

    /// Waits (bounded) until the store has a commit of the job; `child` must not end meanwhile.
    fn await_first_commit(&self, child: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while hotlist_tests::sqlite_committed_epoch(&self.db(), JOB).is_none() {
            assert!(
                child.try_wait().expect("try_wait").is_none(),
                "the run ended before a commit"
            );
            assert!(Instant::now() < deadline, "no commit");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The `error: …` lines of a run's stderr.
fn error_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("error: "))
        .map(str::to_string)
        .collect()
}

/// Asserts the run failed with exit code 1 and exactly one `error:` line containing every
/// one of `texts`; returns the line.
fn refused(out: &Output, texts: &[&str]) -> String {
    let errors = error_lines(out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(errors.len(), 1, "one error line:\n{stderr}");
    for t in texts {
        assert!(errors[0].contains(t), "{t:?} in the error line:\n{stderr}");
    }
    errors[0].clone()
}

fn succeeded(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// Sends `signal` (`STOP`, `CONT`, `TERM`) to a child.
fn signal(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill -{signal}");
}

/// A run pointed at a store without the job's commits (a typo in `sink.path`) refuses to start
/// and deletes no checkpoint; pointed at the right store again, the job restores its checkpoint
/// and the dead letters are stored exactly once (not replayed from the beginning).
#[test]
fn a_wrong_store_path_refuses_and_the_right_one_resumes_exactly() {
    let job = Job::new(31, 1500);
    succeeded(&job.run(&[]));
    assert_eq!(job.results(), job.want, "the first run");
    let before = job.checkpoint_files();
    let out = job.run(&["--set", "sink.path=\"typo.db\""]);
    refused(
        &out,
        &[
            "has no commit for job \"restart\"",
            "committed elsewhere",
            "--from-scratch",
        ],
    );
    assert_eq!(job.checkpoint_files(), before, "the checkpoints are untouched");
    let log = succeeded(&job.run(&[]));
    assert!(log.contains("restoring checkpoint"), "{log}");
    assert_eq!(job.results(), job.want, "dead letters exactly once");
}

/// With its commits in the store but its checkpoints gone, the job refuses to start instead of
/// replaying its input (and storing every dead letter again); `--from-scratch` starts it over
/// on purpose — deleting its stored results, moving checkpoints aside — and says so; the results
/// are exact either way. `--from-scratch` with `--from-checkpoint` is a usage error.
#[test]
fn lost_checkpoints_refuse_until_from_scratch() {
    let job = Job::new(32, 1500);
    succeeded(&job.run(&[]));
    // a new run of the job over checkpoints that exist: they are moved aside
    let log = succeeded(&job.run(&["--from-scratch"]));
    assert!(log.contains("from scratch") && log.contains("replaced-"), "{log}");
    let aside = std::fs::read_dir(job.path().join("ckpt"))
        .expect("ckpt")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("restart.replaced-"))
        .count();
    assert_eq!(aside, 1, "the old checkpoints were moved aside");
    assert_eq!(job.results(), job.want, "a new run from scratch: dead letters once");
    // the checkpoints are lost
    let job_dir = job.path().join("ckpt").join(JOB);
    for e in std::fs::read_dir(&job_dir).expect("checkpoints").filter_map(|e| e.ok()) {
        if e.path().is_dir() {
            std::fs::remove_dir_all(e.path()).expect("rm");
        }
    }
    let out = job.run(&[]);
    refused(&out, &["has committed epoch", "no usable checkpoint", "--from-scratch"]);
    assert_eq!(job.results(), job.want, "the refusal changed nothing");
    let both = job.run(&["--from-scratch", "--from-checkpoint", "1"]);
    assert_eq!(both.status.code(), Some(2), "{}", String::from_utf8_lossy(&both.stderr));
    succeeded(&job.run(&["--from-scratch"]));
    assert_eq!(
        job.results(),
        job.want,
        "after --from-scratch: exact, dead letters once"
    );
}

/// A fresh job killed after its first checkpoint's manifest, before its first commit, is not
/// refused on restart: the store's last owner wrote that checkpoint and never committed it.
#[test]
fn a_fresh_run_killed_before_its_first_commit_restarts() {
    use std::os::unix::process::ExitStatusExt;
    let job = Job::new(33, 600);
    let killed = Command::new(hotlist_tests::hotlist_bin())
        .args(["run", "--config", "hotlist.toml", "--progress", "never"])
        .current_dir(job.path())
        .env("HOTLIST_CRASH_AT", "checkpoint.manifest:1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    assert_eq!(
        killed.status.signal(),
        Some(9),
        "{}",
        String::from_utf8_lossy(&killed.stderr)
    );
    assert_eq!(hotlist_tests::sqlite_committed_epoch(&job.db(), JOB), None);
    let log = succeeded(&job.run(&[]));
    assert!(log.contains("(never committed)"), "{log}");
    assert_eq!(job.results(), job.want);
}

/// Two runs of one job on one store started together: one refuses with one clear line (the
/// checkpoint directory's lock, or — with checkpoint directories of their own — the store's),
/// the other finishes with exact results.
#[test]
fn two_live_runs_of_one_job_on_sqlite_one_refuses() {
    for (case, second, lock) in [
        ("same checkpoint directory", vec![], "LOCK is locked by another process"),
        (
            "checkpoint directories of their own",
            vec!["--set", "checkpoint.dir=\"ckpt-b\""],
            "is already running on out.db",
        ),
    ] {
        let job = Job::new(34, 20_000);
        let (a, b) = (job.spawn(&[]), job.spawn(&second));
        let outs = [a.wait_with_output().expect("a"), b.wait_with_output().expect("b")];
        let ok: Vec<&Output> = outs.iter().filter(|o| o.status.success()).collect();
        let failed: Vec<&Output> = outs.iter().filter(|o| !o.status.success()).collect();
        assert_eq!(ok.len(), 1, "{case}: exactly one run finishes");
        let line = refused(failed[0], &["job \"restart\" is already running", lock]);
        eprintln!("{case}: {line}");
        assert_eq!(job.results(), job.want, "{case}: the live run's results are exact");
    }
}

/// A stale writer is real when its lock no longer protects it. Here: the first run is frozen
/// (SIGSTOP) right after its first commit, its store lock file is deleted (as a lock on a file
/// system without working `flock` would be worth nothing), and a second run of the job starts
/// over (`--from-scratch`, its own checkpoint directory) and finishes. Thawed (SIGCONT), the
/// first run's next commit is refused by the generation check: it exits 1 with one line, and
/// the store holds exactly the second run's results.
#[test]
fn a_stale_writer_on_sqlite_is_fenced() {
    let job = Job::new(35, 20_000);
    // commits every 2 s: stopped right after its first one, it is not inside a transaction
    let mut first = job.spawn(&["--set", "checkpoint.interval=\"2s\""]);
    job.await_first_commit(&mut first);
    signal(&first, "STOP");
    let lock = hotlist_sinks::sqlite::lock_file(&job.db(), JOB);
    std::fs::remove_file(&lock).expect("delete the store's lock file");
    let log = succeeded(&job.run(&["--from-scratch", "--set", "checkpoint.dir=\"ckpt-b\""]));
    assert!(log.contains("from scratch"), "{log}");
    assert_eq!(job.results(), job.want, "the second run");
    signal(&first, "CONT");
    let out = first.wait_with_output().expect("the stale run");
    let line = refused(
        &out,
        &["job \"restart\" was taken over by another run (generation 2; this run's is 1)"],
    );
    assert!(line.ends_with("this run stops"), "{line}");
    assert_eq!(job.results(), job.want, "nothing of the stale run was stored");
}

/// A fresh PostgreSQL schema (dropped at the end) and the job's config pointed at it.
struct Pg {
    url: String,
    schema: String,
}

impl Pg {
    fn for_job(job: &Job) -> Pg {
        use rand::Rng;
        let pg = Pg {
            url: std::env::var("HOTLIST_TEST_POSTGRES_URL")
                .unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into()),
            schema: format!("hotlist_restart_{:08x}", rand::rng().random::<u32>()),
        };
        let config = job_config().replace(
            "[sink]\nkind = \"sqlite\"\npath = \"out.db\"",
            &format!(
                "[sink]\nkind = \"postgres\"\nurl = \"{}\"\nschema = \"{}\"",
                pg.url, pg.schema
            ),
        );
        assert!(config.contains("postgres"), "config rewritten");
        std::fs::write(job.path().join("hotlist.toml"), config).expect("config");
        pg
    }

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("connect to PostgreSQL")
    }

    fn committed(&self) -> Option<i64> {
        let sql = format!("SELECT epoch FROM \"{}\".hotlist_commits WHERE job = $1", self.schema);
        self.client().query_opt(&sql, &[&JOB]).ok().flatten().map(|r| r.get(0))
    }

    /// The sealed lists and dead letters of the job.
    fn results(&self) -> (model::Lists, model::Dead) {
        let mut c = self.client();
        let rows = c
            .query(
                &format!(
                    "SELECT window_name, (extract(epoch from window_start) * 1000)::bigint, \
                     (extract(epoch from window_end) * 1000)::bigint, item_id, count, final FROM \"{}\".topk \
                     WHERE job = $1 ORDER BY window_name, window_start, rank",
                    self.schema
                ),
                &[&JOB],
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
        let sql = format!(
            "SELECT partition, position, reason FROM \"{}\".dead_letters WHERE job = $1",
            self.schema
        );
        let mut dead: model::Dead = c
            .query(&sql, &[&JOB])
            .expect("dead letters")
            .into_iter()
            .map(|r| (r.get::<_, i64>(0) as u32, r.get::<_, i64>(1) as u64, r.get(2)))
            .collect();
        dead.sort();
        (lists, dead)
    }

    /// Ends the sessions holding the job's liveness lock (a network partition between the run
    /// and PostgreSQL, as far as the server can tell); returns how many.
    fn end_lock_holders(&self) -> usize {
        let key = hotlist_sinks::postgres::job_lock_key(&self.schema, JOB);
        let rows = self
            .client()
            .query(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 \
                 AND classid::bigint = ((hashtextextended($1, 0) >> 32) & 4294967295) \
                 AND objid::bigint = (hashtextextended($1, 0) & 4294967295)",
                &[&key],
            )
            .expect("terminate");
        rows.len()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = hotlist_sinks::postgres::drop_schema(&self.url, &self.schema);
    }
}

/// On PostgreSQL: two runs of one job (checkpoint directories of their own) started together —
/// one refuses (the store's advisory lock), the other is exact; then a stale writer — frozen,
/// its session ended by the server (its lock gone with it), the job taken over by a run from
/// scratch — stops with exit 1 and one line when it thaws, storing nothing.
#[test]
fn two_live_runs_and_a_stale_writer_on_postgres() {
    // the local PostgreSQL: not while a test restarts it
    let _postgres = hotlist_tests::serial::postgres();
    let job = Job::new(36, 20_000);
    let pg = Pg::for_job(&job);
    let (a, b) = (job.spawn(&[]), job.spawn(&["--set", "checkpoint.dir=\"ckpt-b\""]));
    let outs = [a.wait_with_output().expect("a"), b.wait_with_output().expect("b")];
    let failed: Vec<&Output> = outs.iter().filter(|o| !o.status.success()).collect();
    assert_eq!(failed.len(), 1, "exactly one run finishes");
    refused(failed[0], &["job \"restart\" is already running on", "advisory lock"]);
    assert_eq!(pg.results(), job.want, "the live run's results are exact");

    // the stale writer: a run from scratch, frozen right after its first commit
    let mut first = job.spawn(&["--from-scratch", "--set", "checkpoint.interval=\"2s\""]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let before = pg.committed();
    while pg.committed() == before || pg.committed().is_none() {
        assert!(first.try_wait().expect("try_wait").is_none(), "the run ended");
        assert!(Instant::now() < deadline, "no commit");
        std::thread::sleep(Duration::from_millis(1));
    }
    signal(&first, "STOP");
    assert_eq!(pg.end_lock_holders(), 1, "one session held the job's lock");
    let log = succeeded(&job.run(&["--from-scratch", "--set", "checkpoint.dir=\"ckpt-c\""]));
    assert!(log.contains("from scratch"), "{log}");
    assert_eq!(pg.results(), job.want, "the run that took over");
    signal(&first, "CONT");
    let out = first.wait_with_output().expect("the stale run");
    refused(
        &out,
        &["job \"restart\" was taken over by another run", "this run stops"],
    );
    assert_eq!(pg.results(), job.want, "nothing of the stale run was stored");
}

/// A run whose job is taken over while its input is quiet stops at once: the writer's refused
/// commit fails the run right away (exit 1, one line) instead of waiting for the next hand-off,
/// which with a quiet stdin may never come. The take-over here is a claim of the job in the
/// store by another handle, between two events written to the run's stdin.
#[test]
fn a_taken_over_run_with_quiet_input_stops_at_once() {
    use hotlist_sinks::SinkStore;
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = "[job]\nid = \"quiet\"\n[source]\nkind = \"file\"\npath = \"-\"\n\
                  [time]\nidle_timeout = \"10m\"\n[[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 3\n\
                  [sink]\nkind = \"sqlite\"\npath = \"out.db\"\n";
    std::fs::write(dir.path().join("quiet.toml"), config).expect("config");
    let mut child = Command::new(hotlist_tests::hotlist_bin())
        .args(["run", "--config", "quiet.toml", "--progress", "never"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist");
    let mut stdin = child.stdin.take().expect("stdin");
    let db = dir.path().join("out.db");
    let mut write = |line: &str| {
        stdin.write_all(line.as_bytes()).expect("write stdin");
        stdin.flush().expect("flush stdin");
    };
    write("{\"item_id\":\"a\",\"ts\":1000}\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    while hotlist_tests::sqlite_committed_epoch(&db, "quiet").is_none() {
        assert!(child.try_wait().expect("try_wait").is_none(), "the run ended early");
        assert!(Instant::now() < deadline, "no commit");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut intruder = hotlist_sinks::SqliteStore::open(&db).expect("open the store");
    intruder.claim("quiet", "intruder").expect("claim the job");
    write("{\"item_id\":\"b\",\"ts\":2000}\n");
    // stdin stays open and quiet from here on
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the taken-over run is still running 15 s after its refused commit");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().expect("output");
    refused(&out, &["was taken over by another run"]);
}

/// Every file and folder below `dir`, as sorted relative paths.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()) {
            out.push(e.strip_prefix(dir).unwrap().display().to_string());
            if e.is_dir() {
                todo.push(e);
            }
        }
    }
    out.sort();
    out
}

/// A `job.id` that is a path (`..`, `../x`, an absolute path, `a/b`) would put the job's
/// checkpoints outside `checkpoint.dir`: it is refused at validation with one line naming the
/// key, before anything is written — no store, no checkpoint directory, here or outside.
#[test]
fn a_job_id_that_is_a_path_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("in")).unwrap();
    std::fs::write(work.join("in/p0.jsonl"), "{\"item_id\":\"a\",\"ts\":1}\n").unwrap();
    std::fs::write(work.join("job.toml"), job_config()).unwrap();
    let outside = dir.path().join("outside");
    let absolute = outside.display().to_string();
    for bad in ["../escaped", "..", "a/b", absolute.as_str()] {
        let set = format!("job.id={bad:?}");
        let out = hotlist_tests::run_hotlist(
            &work,
            &["run", "--config", "job.toml", "--progress", "never", "--set", &set],
            false,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{bad:?}: one line, got {stderr}");
        assert!(
            lines[0].starts_with("error: config job.toml: job.id: "),
            "{bad:?}: {stderr}"
        );
    }
    assert_eq!(
        tree(dir.path()),
        ["work", "work/in", "work/in/p0.jsonl", "work/job.toml"]
    );
}

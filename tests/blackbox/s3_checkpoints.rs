//! Checkpoints in object storage (`checkpoint.dir = "s3://…"`, docs/operations.md) against a
//! real S3-compatible server (`s3s-fs`, installed by scripts/test into ~/.cache/hotlist-tools):
//! the crash tests' exactness holds when every restart begins on an empty local directory (a
//! fresh machine: the checkpoint comes from the bucket), and an outage of the server during the
//! run delays commits without losing or duplicating anything.

use hotlist_tests::inputs::{checkpointed_job_shape, random_partitions, write_partitions};
use hotlist_tests::kills::{kill_and_restart, KillPlan, KillReport};
use hotlist_tests::model;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const JOB: &str = "s3";
const KEY: &str = "hotlist-test";
const SECRET: &str = "hotlist-test-secret";

fn s3s_fs_bin() -> PathBuf {
    let candidates = [
        std::env::var("HOTLIST_S3S_FS").ok().map(PathBuf::from),
        std::env::var("HOME")
            .ok()
            .map(|h| PathBuf::from(h).join(".cache/hotlist-tools/bin/s3s-fs")),
        Some(PathBuf::from("/root/.cache/hotlist-tools/bin/s3s-fs")),
    ];
    candidates.into_iter().flatten().find(|c| c.exists()).expect(
        "s3s-fs (the S3-compatible test server) is not installed: scripts/test installs it into ~/.cache/hotlist-tools",
    )
}

/// An S3 server on a loopback port over `root` (bucket `ckpt`), killed on drop.
struct S3Server {
    child: Option<Child>,
    root: PathBuf,
    port: u16,
}

impl S3Server {
    fn start(root: &Path) -> S3Server {
        std::fs::create_dir_all(root.join("ckpt")).expect("bucket dir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut s = S3Server {
            child: None,
            root: root.to_path_buf(),
            port,
        };
        s.restart();
        s
    }

    /// (Re)starts the server on its port and data.
    fn restart(&mut self) {
        let child = Command::new(s3s_fs_bin())
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", KEY, "--secret-key", SECRET])
            .arg(&self.root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn s3s-fs");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "s3s-fs did not listen on {}", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (connections are refused until [`restart`](Self::restart)).
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The crash tests' checkpointed job with its checkpoints in the server's bucket.
fn config(port: u16) -> String {
    let text = hotlist_tests::checkpointed_job_config(JOB).replace(
        "dir = \"ckpt\"\n",
        "dir = \"s3://ckpt/hotlist\"\nlocal_dir = \"local-ckpt\"\n",
    );
    assert!(text.contains("s3://"), "{text}");
    format!(
        "{text}\n[checkpoint.s3]\nendpoint = \"http://127.0.0.1:{port}\"\nregion = \"us-east-1\"\nallow_http = true\n"
    )
}

fn spawn(dir: &Path, workers: usize, extra: &[&str]) -> Child {
    Command::new(hotlist_tests::hotlist_bin())
        .args(["run", "--config", "hotlist.toml", "--progress", "never", "--workers"])
        .arg(workers.to_string())
        .args(extra)
        .current_dir(dir)
        .env("HOTLIST_LOG", "hotlist=info,warn")
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist")
}

fn setup(parts: &[Vec<Vec<u8>>], port: u16) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), config(port)).expect("config");
    dir
}

/// SIGKILLed at random moments, each restart on an empty local checkpoint directory and onto
/// 1, 2 or 3 workers: every restore comes from the bucket, and the sealed lists and dead
/// letters equal the model's.
#[test]
fn sigkill_with_checkpoints_in_s3_restores_from_the_bucket_exactly_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = S3Server::start(root.path());
    let parts = random_partitions(21, &checkpointed_job_shape(9000));
    let (want, want_dead) = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts, server.port);
    let plan = KillPlan {
        attempts: 12,
        kills: 4,
        commits_before_kill: (2, 2),
        jitter_ms: 15,
        seed: 5,
    };
    let KillReport { kills, restored, logs } = kill_and_restart(
        &plan,
        |attempt| {
            // a fresh machine: nothing local
            let _ = std::fs::remove_dir_all(dir.path().join("local-ckpt"));
            let workers = if attempt == usize::MAX { 2 } else { 1 + attempt % 3 };
            spawn(dir.path(), workers, &[])
        },
        || hotlist_tests::sqlite_committed_epoch(&dir.path().join("out.db"), JOB),
    );
    assert!(
        kills >= 3 && restored >= 2,
        "kills {kills}, restores {restored}:\n{logs}"
    );
    assert!(
        logs.contains("from s3://ckpt/hotlist"),
        "restores downloaded from the bucket:\n{logs}"
    );
    let db = dir.path().join("out.db");
    assert_eq!(hotlist_tests::sqlite_sealed_lists(&db, JOB), want, "sealed lists");
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, JOB).0,
        want_dead,
        "dead letters exactly once"
    );
    // `hotlist checkpoints` reads the bucket: a local copy missing a file is fetched again
    let job_dir = dir.path().join("local-ckpt").join(JOB);
    let newest = std::fs::read_dir(&job_dir)
        .expect("local checkpoints")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .expect("a local checkpoint");
    let part = job_dir.join(format!("{newest:020}")).join("counter-0000.snap");
    std::fs::remove_file(&part).expect("remove a part of the newest local checkpoint");
    let out = Command::new(hotlist_tests::hotlist_bin())
        .args(["checkpoints", "--config", "hotlist.toml", "verify"])
        .current_dir(dir.path())
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .output()
        .expect("checkpoints verify");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.starts_with("checkpoints in s3://ckpt/hotlist (downloaded 1 into"),
        "{text}"
    );
    assert!(part.exists(), "the missing part was fetched from the bucket");
    assert!(text.lines().filter(|l| l.ends_with(": ok")).count() >= 1, "{text}");
}

/// The server is down for 8 s in the middle of the run (killed, then restarted on the same
/// data): every request (the workers' uploads, the writer's listing of a checkpoint's parts) is
/// retried, so commits wait (the committed epoch does not move), the run goes on once it
/// answers again, and the sealed lists and dead letters equal the model's. 8 s is longer than
/// `object_store`'s own retries last against a refused connection (about 1.5 s), and than three
/// of them with our backoff, which is all a run once waited before it failed.
#[test]
fn an_s3_outage_delays_commits_and_loses_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut server = S3Server::start(root.path());
    let parts = random_partitions(22, &checkpointed_job_shape(6000));
    let (want, want_dead) = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts, server.port);
    let db = dir.path().join("out.db");
    let committed = || hotlist_tests::sqlite_committed_epoch(&db, JOB);
    let mut child = spawn(dir.path(), 2, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while committed().is_none_or(|e| e < 20) {
        assert!(Instant::now() < deadline, "no commits");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the run ended before the outage"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server.stop();
    std::thread::sleep(Duration::from_millis(300)); // a commit in flight finishes
    let during = committed();
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(committed(), during, "no commit while the bucket does not answer");
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the run waits, it does not fail"
    );
    server.restart();
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(hotlist_tests::sqlite_sealed_lists(&db, JOB), want, "sealed lists");
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, JOB).0,
        want_dead,
        "dead letters"
    );
}

/// Three consecutive free loopback ports (the cluster script gives process i port BASE + i).
fn free_ports(n: u16) -> u16 {
    for _ in 0..200 {
        let base = hotlist_tests::free_loopback_ports(1)[0];
        if base < u16::MAX - n && (1..n).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
    panic!("no {n} consecutive free loopback ports");
}

/// Rescaling with checkpoints in the bucket: 3 processes × 1 worker under `scripts/cluster`,
/// each with a local checkpoint directory of its own (as on separate machines: each uploads its
/// part, process 0 fetches the others' before the MANIFEST); process 1 SIGKILLed twice after
/// commits (the script restarts the group each time), then the cluster stopped with SIGTERM,
/// the local directories deleted (new machines), and the job finished as 2 processes from the
/// bucket: sealed lists and dead letters = the model's.
#[test]
fn a_three_process_cluster_killed_twice_finishes_as_two_from_the_bucket() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = S3Server::start(root.path());
    let parts = random_partitions(23, &checkpointed_job_shape(12000));
    let (want, want_dead) = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts, server.port);
    // one local directory per process, as on separate machines: each uploads its own part
    let toml = dir.path().join("hotlist.toml");
    let text = std::fs::read_to_string(&toml).expect("config");
    std::fs::write(
        &toml,
        text.replace("local_dir = \"local-ckpt\"", "local_dir = \"local-ckpt-{process}\""),
    )
    .expect("config");
    let db = dir.path().join("out.db");
    let committed = || hotlist_tests::sqlite_committed_epoch(&db, JOB);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster");
    let base = free_ports(3);
    let cluster = |n: usize| {
        Command::new("bash")
            .arg(&script)
            .args([&n.to_string(), "hotlist.toml", "--set", "run.connect_timeout=\"30s\""])
            .env("HOTLIST_BIN", hotlist_tests::hotlist_bin())
            .env("HOTLIST_CLUSTER_PORT", base.to_string())
            .env("HOTLIST_CLUSTER_DIR", format!("cluster-{n}"))
            .env("AWS_ACCESS_KEY_ID", KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run scripts/cluster")
    };
    let mut three = cluster(3);
    let wait_for_commit_after = |child: &mut Child, after: Option<u64>| {
        let deadline = Instant::now() + Duration::from_secs(90);
        while committed() <= after {
            assert!(child.try_wait().expect("try_wait").is_none(), "the cluster ended early");
            assert!(Instant::now() < deadline, "no commit after {after:?} within 90 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let pid_file = dir.path().join("cluster-3/pid-1");
    for _ in 0..2 {
        let before = committed();
        wait_for_commit_after(&mut three, before);
        let pid = std::fs::read_to_string(&pid_file).expect("pid of process 1");
        let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        // the group restarts (a new process 1) and commits again
        let deadline = Instant::now() + Duration::from_secs(90);
        while std::fs::read_to_string(&pid_file).is_ok_and(|p| p == pid) {
            assert!(Instant::now() < deadline, "process 1 was not restarted");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let before = committed();
    wait_for_commit_after(&mut three, before);
    assert!(Command::new("kill")
        .args(["-TERM", &three.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let out = three.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_eq!(err.matches("restarting the group").count(), 2, "{err}");
    let stopped_at = committed().expect("a commit");
    for p in 0..3 {
        std::fs::remove_dir_all(dir.path().join(format!("local-ckpt-{p}"))).expect("empty the local checkpoints");
    }
    let two = cluster(2).wait_with_output().expect("run as 2");
    let log = std::fs::read_to_string(dir.path().join("cluster-2/process-0.log")).unwrap_or_default();
    assert!(two.status.success(), "{}\n{log}", String::from_utf8_lossy(&two.stderr));
    assert!(
        log.contains(&format!("restoring checkpoint {stopped_at}")) && log.contains("from s3://ckpt/hotlist"),
        "the 2-process run restored the 3-process run's last checkpoint from the bucket: {log}"
    );
    assert_eq!(
        hotlist_tests::sqlite_sealed_lists(&db, JOB),
        want,
        "sealed lists after 3 → 2"
    );
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, JOB).0,
        want_dead,
        "dead letters exactly once after 3 → 2"
    );
}

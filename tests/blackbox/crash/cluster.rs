//! Clusters of processes: fate-sharing, a peer that never starts, a killed process, and
//! `scripts/cluster` restarting and rescaling the group.

use super::harness::{committed, job_config, results, setup, shape};
use hotlist_tests::inputs::{random_partitions, Shape};
use hotlist_tests::model;
use rand::{Rng, SeedableRng};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts both processes of a 2-process × 1-worker cluster on fresh loopback ports.
fn spawn_cluster(dir: &Path) -> Vec<std::process::Child> {
    let ports = hotlist_tests::free_loopback_ports(2);
    let hosts = format!("127.0.0.1:{}\n127.0.0.1:{}\n", ports[0], ports[1]);
    std::fs::write(dir.join("hosts.txt"), hosts).expect("hostfile");
    (0..2)
        .map(|i| {
            Command::new(hotlist_tests::hotlist_bin())
                .args([
                    "run",
                    "--config",
                    "hotlist.toml",
                    "--progress",
                    "never",
                    "--workers",
                    "1",
                ])
                .args([
                    "--processes",
                    "2",
                    "--process",
                    &i.to_string(),
                    "--hostfile",
                    "hosts.txt",
                ])
                .current_dir(dir)
                .env("HOTLIST_LOG", "hotlist=info,warn")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn hotlist")
        })
        .collect()
}

/// Waits (bounded) for `child` to end by itself with exit code 1; its stderr.
fn fails_by_itself(mut child: std::process::Child, within: Duration) -> String {
    assert!(hotlist_tests::reap(&mut child, within), "it did not stop by itself");
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    err
}

/// A cluster process whose peer never starts does not wait for ever in timely's connection
/// set-up: after `run.connect_timeout` it exits with an error naming the missing peer, both as
/// the process that accepts (0) and as the one that connects (1).
#[test]
fn a_process_whose_peer_never_starts_gives_up_after_the_connect_timeout() {
    let dir = setup(&random_partitions(3, &Shape { lines: 100, ..shape() }));
    let ports = hotlist_tests::free_loopback_ports(2);
    let hosts = format!("127.0.0.1:{}\n127.0.0.1:{}\n", ports[0], ports[1]);
    std::fs::write(dir.path().join("hosts.txt"), hosts).expect("hostfile");
    for process in 0..2 {
        let child = Command::new(hotlist_tests::hotlist_bin())
            .args(["run", "--config", "hotlist.toml", "--progress", "never"])
            .args([
                "--processes",
                "2",
                "--process",
                &process.to_string(),
                "--hostfile",
                "hosts.txt",
            ])
            .args(["--set", "run.connect_timeout=\"1s\""])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hotlist");
        let err = fails_by_itself(child, Duration::from_secs(60));
        let peer = 1 - process;
        let want = format!("peers: {peer} at 127.0.0.1:{}", ports[peer]);
        assert!(
            err.contains("did not connect within 1s") && err.contains(&want),
            "process {process}: {err}"
        );
    }
}

/// Fate-sharing, cleanly: when one process of a running cluster is killed, the other stops by
/// itself at once with one clear line and exit code 1 (not a cascade of timely panics).
#[test]
fn a_cluster_process_stops_with_one_clear_line_when_its_peer_dies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = job_config().replace(
        "kind = \"file\"\npath = \"in/*.jsonl\"",
        "kind = \"generator\"\nitems = 100\npartitions = 2\nrate = 2000\npace = true",
    );
    assert!(config.contains("generator"), "config rewritten");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let mut procs = spawn_cluster(dir.path());
    // running: a checkpoint of both processes committed
    let deadline = Instant::now() + Duration::from_secs(60);
    while committed(dir.path()).is_none() {
        assert!(Instant::now() < deadline, "the cluster never committed");
        for p in procs.iter_mut() {
            assert!(
                p.try_wait().expect("try_wait").is_none(),
                "a live cluster process ended"
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = procs[1].kill();
    let _ = procs[1].wait();
    let err = fails_by_itself(procs.swap_remove(0), Duration::from_secs(30));
    assert!(err.contains("error: lost the connection to a cluster peer"), "{err}");
    assert!(!err.contains("panicked"), "no panic cascade: {err}");
}

/// Two processes × one worker on loopback: killing one process (SIGKILL) takes the cluster
/// down (fate-sharing: the survivor is reaped), both restart from the committed checkpoint,
/// and the final results equal the model, every dead letter once.
#[test]
fn two_processes_killing_one_loses_and_duplicates_nothing() {
    let mut sh = shape();
    sh.lines = 8000;
    let parts = random_partitions(33, &sh);
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let (mut kills, mut logs) = (0, String::new());
    let mut completed = false;
    for attempt in 0..10 {
        let before = committed(dir.path());
        let mut procs = spawn_cluster(dir.path());
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut ended = false;
        while committed(dir.path()) <= before {
            if procs.iter_mut().any(|p| p.try_wait().expect("try_wait").is_some()) {
                ended = true;
                break;
            }
            assert!(Instant::now() < deadline, "no progress:\n{logs}");
            std::thread::sleep(Duration::from_millis(1));
        }
        if !ended && kills < 3 {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..15))); // fault injection timing
            let victim = attempt % 2;
            let _ = procs[victim].kill();
            kills += 1;
            let survivor = 1 - victim;
            let exited = hotlist_tests::reap(&mut procs[survivor], Duration::from_secs(5));
            let _ = procs[victim].wait();
            logs.push_str(&format!(
                "--- attempt {attempt}: killed process {victim}; survivor exited by itself: {exited}\n"
            ));
            for p in procs {
                let out = p.wait_with_output().expect("output");
                logs.push_str(&String::from_utf8_lossy(&out.stderr));
            }
            continue;
        }
        // let both run to the end
        let finished = procs
            .iter_mut()
            .all(|p| hotlist_tests::reap(p, Duration::from_secs(60)));
        let outs: Vec<_> = procs
            .into_iter()
            .map(|p| p.wait_with_output().expect("output"))
            .collect();
        let errs: String = outs
            .iter()
            .enumerate()
            .map(|(i, o)| {
                format!(
                    "--- process {i} ({}):\n{}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .collect();
        assert!(
            finished && outs.iter().all(|o| o.status.success()),
            "the cluster did not finish cleanly:\n{logs}\n{errs}"
        );
        completed = true;
        break;
    }
    assert!(completed && kills >= 3, "kills {kills}, completed {completed}:\n{logs}");
    let got = results(&dir.path().join("out.db"));
    assert_eq!(got.0, want.0, "sealed lists after {kills} kills\n{logs}");
    assert_eq!(got.1, want.1, "dead letters exactly once after {kills} kills\n{logs}");
}

/// Two consecutive free loopback ports (the cluster script gives process i port BASE + i).
fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let base = hotlist_tests::free_loopback_ports(1)[0];
        if base < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", base + 1)).is_ok() {
            return base;
        }
    }
    panic!("no two consecutive free loopback ports");
}

/// `scripts/cluster` supervises a 2-process cluster as a group: one process SIGKILLed after a
/// commit brings the other down (fate-sharing), the script starts both again, they restore the
/// committed checkpoint together, and the bounded run ends (exit 0) with the model's sealed
/// lists and every dead letter once.
#[test]
fn the_cluster_script_restarts_the_group_after_a_kill() {
    let parts = random_partitions(35, &shape());
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster");
    let mut child = Command::new("bash")
        .arg(&script)
        .args(["2", "hotlist.toml", "--set", "run.connect_timeout=\"30s\""])
        .env("HOTLIST_BIN", hotlist_tests::hotlist_bin())
        .env("HOTLIST_CLUSTER_PORT", free_port_pair().to_string())
        .env("HOTLIST_CLUSTER_DIR", "cluster")
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run scripts/cluster");
    let deadline = Instant::now() + Duration::from_secs(60);
    while committed(dir.path()).is_none() {
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the cluster ended before its first commit"
        );
        assert!(Instant::now() < deadline, "no commit within 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = std::fs::read_to_string(dir.path().join("cluster/pid-1")).expect("pid of process 1");
    assert!(
        Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .expect("kill")
            .success(),
        "process 1 was still running"
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "the cluster did not finish within 180 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read stderr");
    let logs =
        |i: usize| std::fs::read_to_string(dir.path().join(format!("cluster/process-{i}.log"))).unwrap_or_default();
    assert!(
        status.success(),
        "scripts/cluster: {status}\n{err}\n{}\n{}",
        logs(0),
        logs(1)
    );
    assert!(err.contains("restarting the group"), "{err}");
    assert!(
        logs(0).contains("restoring checkpoint"),
        "the group restored: {}",
        logs(0)
    );
    let got = results(&dir.path().join("out.db"));
    assert_eq!(got.0, want.0, "sealed lists after a group restart");
    assert_eq!(got.1, want.1, "dead letters exactly once after a group restart");
}

/// Rescaling: a 3-process cluster (under `scripts/cluster`) stopped with SIGTERM after a
/// commit, then started again as 2 processes from the same checkpoints, ends with the model's
/// sealed lists and every dead letter once.
#[test]
fn a_cluster_stopped_as_three_processes_finishes_as_two() {
    let parts = random_partitions(36, &shape());
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster");
    let cluster = |n: usize, port: u16| {
        Command::new("bash")
            .arg(&script)
            .args([&n.to_string(), "hotlist.toml", "--set", "run.connect_timeout=\"30s\""])
            .env("HOTLIST_BIN", hotlist_tests::hotlist_bin())
            .env("HOTLIST_CLUSTER_PORT", port.to_string())
            .env("HOTLIST_CLUSTER_DIR", format!("cluster-{n}"))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run scripts/cluster")
    };
    let base = loop {
        let b = free_port_pair();
        if b < u16::MAX - 1 && std::net::TcpListener::bind(("127.0.0.1", b + 2)).is_ok() {
            break b;
        }
    };
    let mut three = cluster(3, base);
    let deadline = Instant::now() + Duration::from_secs(60);
    while committed(dir.path()).is_none() {
        assert!(three.try_wait().expect("try_wait").is_none(), "ended before a commit");
        assert!(Instant::now() < deadline, "no commit within 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(Command::new("kill")
        .args(["-TERM", &three.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let out = three.wait_with_output().expect("wait");
    let stopped_at = committed(dir.path());
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let two = cluster(2, base).wait_with_output().expect("run as 2");
    let log = std::fs::read_to_string(dir.path().join("cluster-2/process-0.log")).unwrap_or_default();
    assert!(two.status.success(), "{}\n{log}", String::from_utf8_lossy(&two.stderr));
    assert!(
        log.contains(&format!("restoring checkpoint {}", stopped_at.expect("a commit"))),
        "the 2-process run restored the 3-process run's last checkpoint: {log}"
    );
    let got = results(&dir.path().join("out.db"));
    assert_eq!(got.0, want.0, "sealed lists after rescaling 3 → 2");
    assert_eq!(got.1, want.1, "dead letters exactly once after rescaling 3 → 2");
}

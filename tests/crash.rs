//! Crash tests: the real binary killed with SIGKILL at random moments and restarted (it
//! restores the latest committed checkpoint by itself) ends with exactly the sealed lists and
//! dead letters of an uninterrupted run and of the model: nothing lost, nothing twice.

use hotlist_tests::inputs::{checkpointed_job_shape, random_partitions, write_partitions, Shape};
use hotlist_tests::kills::{kill_and_restart, KillPlan, KillReport};
use hotlist_tests::model;
use rand::{Rng, SeedableRng};
use rusqlite::Connection;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn job_config() -> String {
    hotlist_tests::checkpointed_job_config("crash")
}

fn shape() -> Shape {
    checkpointed_job_shape(12000)
}

fn spawn(dir: &Path, workers: usize) -> std::process::Child {
    hotlist_tests::spawn_run(dir, workers)
}

/// The store's committed epoch of the test's job in `dir`.
fn committed(dir: &Path) -> Option<u64> {
    hotlist_tests::sqlite_committed_epoch(&dir.join("out.db"), "crash")
}

/// The job's committed checkpoint directories in `dir`, oldest first.
fn committed_checkpoints(dir: &Path) -> Vec<std::path::PathBuf> {
    hotlist_tests::committed_checkpoints(&dir.join("ckpt/crash"), committed(dir))
}

fn results(db: &Path) -> (model::Lists, model::Dead) {
    (
        hotlist_tests::sqlite_sealed_lists(db, "crash"),
        hotlist_tests::sqlite_dead_letters(db, "crash").0,
    )
}

fn setup(parts: &[Vec<Vec<u8>>]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), job_config()).expect("config");
    dir
}

/// Killed with SIGKILL at least 5 times (restarting on 1, 2 and 3 workers in turn) at random moments (mid-epoch, during checkpoint writes
/// and sink commits alike, since they happen every few milliseconds), the job ends with the
/// uninterrupted run's results, which equal the model; every dead letter exactly once.
#[test]
fn sigkill_at_random_moments_loses_and_duplicates_nothing() {
    let parts = random_partitions(21, &shape());
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);

    // the uninterrupted run, timed
    let clean = setup(&parts);
    let t0 = Instant::now();
    let out = spawn(clean.path(), 2).wait_with_output().expect("run");
    let full = t0.elapsed();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        results(&clean.path().join("out.db")),
        want,
        "uninterrupted run equals the model"
    );

    // the same input, killed again and again, restored onto 1, 2 and 3 workers in turn
    let dir = setup(&parts);
    let plan = KillPlan {
        attempts: 12,
        kills: 6,
        commits_before_kill: (1, 1),
        jitter_ms: 15,
        seed: 5,
    };
    let workers = |attempt: usize| if attempt == usize::MAX { 2 } else { 1 + attempt % 3 };
    let KillReport { kills, restored, logs } = kill_and_restart(
        &plan,
        |attempt| spawn(dir.path(), workers(attempt)),
        || committed(dir.path()),
    );
    eprintln!("uninterrupted run: {full:?}; kills: {kills}; restores: {restored}");
    assert!(kills >= 5, "killed only {kills} times:\n{logs}");
    assert!(restored >= 1, "no restart restored a checkpoint:\n{logs}");
    let got = results(&dir.path().join("out.db"));
    assert_eq!(got.0, want.0, "sealed lists after {kills} kills\n{logs}");
    assert_eq!(got.1, want.1, "dead letters exactly once after {kills} kills\n{logs}");
}

/// Per-group windows with a small `max_groups` (so which groups keep a list — a choice every
/// worker must make alike, from announcements the checkpoints carry, among groups mostly seen
/// once — and the exact `(other)` matter), killed at random moments and restored onto 1, 2 and 3 workers in turn: per group,
/// the sealed lists equal the model, and so do the dead letters.
#[test]
fn sigkill_with_per_group_windows_keeps_every_group_exact() {
    let parts = hotlist_tests::inputs::random_grouped_partitions(33, &checkpointed_job_shape(6000));
    let config = job_config()
        .replace(
            "[[window]]\nname = \"10s\"",
            "[source.format]\nuser = \"/user\"\n[[window]]\nname = \"10s\"",
        )
        .replace("k = 5\n", "k = 5\nby = [\"page\"]\nmax_groups = 3\n")
        .replace(
            "k = 4\n",
            "k = 4\nby = [\"device\"]\ncount = \"distinct_users\"\nmax_groups = 2\n",
        );
    assert!(
        config.contains("max_groups = 2") && config.contains("user = "),
        "{config}"
    );
    let mut windows = model::crash_windows();
    windows[0].by = vec!["page".into()];
    windows[0].max_groups = 3;
    windows[1].by = vec!["device".into()];
    windows[1].distinct_users = true;
    windows[1].max_groups = 2;
    let (want, want_dead) = model::run_grouped(&parts, &windows, 2_000, 30_000);
    assert!(want.keys().any(|k| k.3 == "(other)"), "the input overflows max_groups");
    let dir = setup(&parts);
    std::fs::write(dir.path().join("hotlist.toml"), &config).expect("config");
    let plan = KillPlan {
        attempts: 10,
        kills: 4,
        // spread over the run, so that restores land inside instances holding many groups
        commits_before_kill: (6, 6),
        jitter_ms: 15,
        seed: 7,
    };
    let workers = |attempt: usize| if attempt == usize::MAX { 2 } else { 1 + attempt % 3 };
    let KillReport { kills, restored, logs } = kill_and_restart(
        &plan,
        |attempt| spawn(dir.path(), workers(attempt)),
        || committed(dir.path()),
    );
    assert!(kills >= 3, "killed only {kills} times:\n{logs}");
    assert!(restored >= 1, "no restart restored a checkpoint:\n{logs}");
    let db = dir.path().join("out.db");
    assert_eq!(
        hotlist_tests::sqlite_sealed_group_lists(&db, "crash"),
        want,
        "sealed lists per group after {kills} kills\n{logs}"
    );
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, "crash").0,
        want_dead,
        "dead letters exactly once after {kills} kills\n{logs}"
    );
}

/// Runs the job on 2 workers until at least two checkpoints are committed, kills it, damages
/// the newest committed checkpoint with `damage` (which returns the text the problem must be
/// named by), and checks: `hotlist checkpoints verify` fails naming it; the restart (on 1
/// worker) logs the checkpoint unusable in one clear line, restores the previous one, and
/// ends with the model's sealed lists and every dead letter exactly once.
fn a_damaged_latest_checkpoint_falls_back(seed: u64, damage: &dyn Fn(&Path) -> String) {
    let mut sh = shape();
    sh.lines = 6000;
    let parts = random_partitions(seed, &sh);
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts);
    let mut child = spawn(dir.path(), 2);
    let deadline = Instant::now() + Duration::from_secs(30);
    while committed_checkpoints(dir.path()).len() < 2 {
        assert!(Instant::now() < deadline, "no two checkpoints committed");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the run ended before two checkpoints"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let latest = committed_checkpoints(dir.path()).pop().expect("a committed checkpoint");
    let named = damage(&latest);
    let verify = hotlist_tests::run_hotlist(
        dir.path(),
        &["checkpoints", "verify", "--config", "hotlist.toml"],
        false,
    );
    let report = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(
        verify.status.code(),
        Some(1),
        "verify fails on the damaged checkpoint:\n{report}"
    );
    let epoch: u64 = latest
        .file_name()
        .and_then(|n| n.to_str()?.parse().ok())
        .expect("epoch");
    assert!(
        report.contains(&format!("{epoch}: BAD: ")) && report.contains(&named),
        "verify names {named:?}:\n{report}"
    );
    let out = spawn(dir.path(), 1).wait_with_output().expect("restart");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let unusable: Vec<&str> = err.lines().filter(|l| l.contains("is unusable")).collect();
    assert!(
        unusable.len() == 1 && unusable[0].contains(&named),
        "one clear line names {named:?}:\n{err}"
    );
    assert!(err.contains("restoring the older checkpoint"), "{err}");
    let got = results(&dir.path().join("out.db"));
    assert_eq!(got.0, want.0, "sealed lists exact after the fallback");
    // the replayed epochs' dead letters were committed already: not stored twice
    assert_eq!(got.1, want.1, "dead letters exactly once after the fallback");
}

/// A corrupt counter file (a flipped byte: its checksum no longer matches) is detected.
#[test]
fn corrupt_latest_checkpoint_falls_back_to_the_previous_one() {
    a_damaged_latest_checkpoint_falls_back(8, &|latest| {
        let file = latest.join("counter-0000.snap");
        let mut bytes = std::fs::read(&file).expect("read snapshot");
        let at = bytes.len() - 1;
        bytes[at] ^= 0xff;
        std::fs::write(&file, bytes).expect("corrupt it");
        "counter-0000.snap: snapshot checksum mismatch".into()
    });
}

/// A checkpoint missing one worker's counter file is not restored without it (which would
/// lose that worker's counts): its manifest lists every counter part.
#[test]
fn a_missing_counter_file_makes_the_checkpoint_unusable() {
    a_damaged_latest_checkpoint_falls_back(12, &|latest| {
        std::fs::remove_file(latest.join("counter-0001.snap")).expect("delete counter-0001.snap");
        "counter-0001.snap: missing".into()
    });
}

/// A truncated pane file (a new, shorter file: the old one may be linked into another
/// checkpoint) is detected by its size against the manifest.
#[test]
fn a_truncated_pane_file_makes_the_checkpoint_unusable() {
    a_damaged_latest_checkpoint_falls_back(13, &|latest| {
        let pane = std::fs::read_dir(latest)
            .expect("read checkpoint")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("pane-"))
            .expect("a pane file");
        let path = latest.join(&pane);
        let bytes = std::fs::read(&path).expect("read pane");
        std::fs::remove_file(&path).expect("unlink");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write it truncated");
        format!("{pane}: {} bytes", bytes.len() / 2)
    });
}

/// A crafted counter file — decoded, given exclusions of a window the job does not have,
/// encoded again (a valid checksum) and entered in the manifest with its new size and
/// checksum — is refused by validation, naming the file and the window, and never panics.
#[test]
fn a_crafted_snapshot_with_a_valid_checksum_is_refused() {
    use hotlist_operators::snapshot::{self, CounterSnapshot, InstanceCounts, KeyGroupState};
    use hotlist_operators::time::Millis;
    use hotlist_operators::window::{InstanceKey, WindowId};
    a_damaged_latest_checkpoint_falls_back(14, &|latest| {
        let path = latest.join("counter-0001.snap");
        let mut counter: CounterSnapshot = snapshot::decode(&std::fs::read(&path).expect("read")).expect("decodes");
        let bogus = InstanceCounts {
            instance: InstanceKey {
                window: WindowId(99),
                start: Millis(0),
            },
            items: vec![],
        };
        match counter.key_groups.first_mut() {
            Some(kg) => kg.exclusions.push(bogus),
            // worker 1 of 2 owns the odd key groups: 1 is in no other counter file
            None => counter.key_groups.push(KeyGroupState {
                key_group: 1,
                panes: vec![],
                exclusions: vec![bogus],
            }),
        }
        let bytes = snapshot::encode(&counter);
        std::fs::write(&path, &bytes).expect("write the crafted file");
        let header = snapshot::read_header(&bytes).expect("header");
        let manifest_path = latest.join("MANIFEST");
        let mut manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&manifest_path).expect("manifest")).expect("json");
        for f in manifest["files"].as_array_mut().expect("files") {
            if f["name"] == "counter-0001.snap" {
                f["size"] = bytes.len().into();
                f["xxh3"] = format!("{:016x}", header.checksum).into();
            }
        }
        std::fs::write(&manifest_path, manifest.to_string()).expect("write the manifest");
        "counter-0001.snap: snapshot is invalid".into()
    });
}

/// A partition that cannot resume where the committed checkpoint left it (its file has shrunk
/// since) fails the restart like a counter that cannot be restored: exit code 1 and one error
/// line naming the partition and the position, instead of reading on from the wrong place.
#[test]
fn a_partition_that_cannot_resume_fails_the_restart() {
    let mut sh = shape();
    sh.lines = 600;
    let parts = random_partitions(9, &sh);
    let dir = setup(&parts);
    let first = spawn(dir.path(), 1).wait_with_output().expect("first run");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    // the finished run's checkpoint has partition 1 at its last line: cut the file in half
    let lines = parts[1].len();
    let kept: Vec<Vec<u8>> = parts[1][..lines / 2].to_vec();
    write_partitions(&dir.path().join("in"), &[parts[0].clone(), kept]).expect("shrink partition 1");
    let out = spawn(dir.path(), 2).wait_with_output().expect("restart");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    let want = format!("partition 1 cannot resume at position {lines}: ");
    assert!(
        errors[0].contains("cannot restore checkpoint") && errors[0].contains(&want),
        "{err}"
    );
}

/// Incremental checkpoints link unchanged pane files instead of writing them again, so one
/// file on disk can belong to several checkpoints. When the most widely shared pane file of the
/// latest checkpoint is damaged (in place, as bit rot would), the fallback still finds an older
/// checkpoint without it: a file is shared by at most `retain - 1` consecutive checkpoints. The
/// sealed lists and dead letters are exact.
#[test]
fn a_damaged_shared_pane_file_falls_back_to_a_checkpoint_without_it() {
    use std::os::unix::fs::MetadataExt;
    let mut sh = shape();
    sh.late_p = 0.0; // late events would touch old panes: fewer files to share
    let parts = random_partitions(9, &sh);
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts);
    // a checkpoint every epoch: little event time passes between two, so panes stay unchanged
    // over many checkpoints (and old ones would be shared by all the retained checkpoints)
    let config = job_config().replace("interval = \"10ms\"", "interval = \"2ms\"");
    assert_ne!(config, job_config());
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    // run until well past the first 3 checkpoints (the retained number), then kill it at a
    // moment its latest committed checkpoint shares a pane file: frozen (SIGSTOP) while we
    // look, so that no newer checkpoint commits meanwhile; thawed to go on when none does (a
    // loaded machine can make consecutive checkpoints touch every pane)
    let mut child = spawn(dir.path(), 1);
    let pid = child.id().to_string();
    let signal = |sig: &str| {
        Command::new("kill")
            .args([sig, pid.as_str()])
            .status()
            .expect("kill")
            .success()
    };
    let most_shared_pane = |checkpoint: &Path| {
        std::fs::read_dir(checkpoint)
            .expect("read checkpoint")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("pane-"))
            .filter_map(|e| Some((e.metadata().ok()?.nlink(), e.path())))
            .max()
            .filter(|(links, _)| *links >= 2)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (links, file) = loop {
        assert!(
            Instant::now() < deadline,
            "no committed checkpoint after 40 shared a pane file"
        );
        assert!(child.try_wait().expect("try_wait").is_none(), "the run ended too soon");
        if committed(dir.path()) >= Some(40) {
            assert!(signal("-STOP"), "freeze the run");
            let latest = committed_checkpoints(dir.path()).pop().expect("a committed checkpoint");
            if let Some(found) = most_shared_pane(&latest) {
                break found;
            }
            assert!(signal("-CONT"), "thaw the run");
        }
        std::thread::sleep(Duration::from_millis(2)); // polling the commits
    };
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert_eq!(
        links,
        2,
        "{}: a file is shared by at most retain - 1 = 2 checkpoints",
        file.display()
    );
    let mut bytes = std::fs::read(&file).expect("read pane file");
    let at = bytes.len() - 1;
    bytes[at] ^= 0xff;
    std::fs::write(&file, bytes).expect("damage it in place"); // every link sees it
    let out = spawn(dir.path(), 2).wait_with_output().expect("restart");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("is unusable"), "{links} links: {err}");
    assert!(
        err.contains("restoring the older checkpoint") && !err.contains("no usable checkpoint"),
        "an older checkpoint without the damaged file was restored ({links} links):\n{err}"
    );
    let got = results(&dir.path().join("out.db"));
    assert_eq!(got.0, want.0, "sealed lists exact after the fallback");
    assert_eq!(got.1, want.1, "dead letters exactly once after the fallback");
}

/// SIGTERM stops gracefully: the current epoch becomes a checkpoint, it is committed, exit 0;
/// the next start restores exactly that checkpoint. `checkpoints list/show/verify` see it.
#[test]
fn sigterm_commits_a_final_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = job_config()
        .replace(
            "kind = \"file\"\npath = \"in/*.jsonl\"",
            "kind = \"generator\"\nitems = 500\npartitions = 2\nrate = 5000\npace = true",
        )
        .replace("interval = \"10ms\"", "interval = \"10s\"");
    assert!(
        config.contains("generator") && config.contains("10s\"\nretain"),
        "config rewritten"
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let child = spawn(dir.path(), 2);
    // the first periodic checkpoint is epoch 0; wait for its commit, then stop long before
    // the next
    let deadline = Instant::now() + Duration::from_secs(30);
    while committed(dir.path()).is_none() {
        assert!(Instant::now() < deadline, "no checkpoint");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300)); // let it read some more (not synchronisation)
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "graceful stop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed: i64 = Connection::open(dir.path().join("out.db"))
        .expect("db")
        .query_row("SELECT epoch FROM hotlist_commits WHERE job = 'crash'", [], |r| {
            r.get(0)
        })
        .expect("a commit");
    assert!(
        committed > 0,
        "the stop committed a checkpoint beyond the first periodic one"
    );
    let list = hotlist_tests::run_hotlist(dir.path(), &["checkpoints", "list", "--config", "hotlist.toml"], true);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.trim_start().starts_with(&committed.to_string())),
        "{text}"
    );
    let show = hotlist_tests::run_hotlist(
        dir.path(),
        &[
            "checkpoints",
            "show",
            &committed.to_string(),
            "--config",
            "hotlist.toml",
        ],
        true,
    );
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("partition 1: position"),
        "{}",
        String::from_utf8_lossy(&show.stdout)
    );
    hotlist_tests::run_hotlist(dir.path(), &["checkpoints", "verify", "--config", "hotlist.toml"], true);
    // the next start restores exactly the committed checkpoint
    let mut child = spawn(dir.path(), 1);
    let stderr = child.stderr.take().expect("stderr");
    let first = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .find(|l| l.contains("restoring checkpoint"))
        .expect("a restore line");
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.contains(&format!("restoring checkpoint {committed} ")), "{first}");
}

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

/// `--from-checkpoint` replays from an older checkpoint: the input is re-read from its
/// positions, results re-committed; lists and dead letters still equal the model.
#[test]
fn replay_from_an_older_checkpoint_is_exact() {
    let mut sh = shape();
    sh.lines = 3000;
    let parts = random_partitions(4, &sh);
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts);
    let keep = ["--set", "checkpoint.retain=100000"];
    let run = |extra: &[&str]| {
        let args = [
            &["run", "--config", "hotlist.toml", "--progress", "never"][..],
            &keep[..],
            extra,
        ]
        .concat();
        hotlist_tests::run_hotlist(dir.path(), &args, true)
    };
    run(&[]);
    assert_eq!(results(&dir.path().join("out.db")), want, "first run");
    let mut epochs: Vec<u64> = std::fs::read_dir(dir.path().join("ckpt/crash"))
        .expect("checkpoints")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    epochs.sort();
    assert!(epochs.len() > 4, "several checkpoints: {epochs:?}");
    let middle = epochs[epochs.len() / 2].to_string();
    let out = run(&["--from-checkpoint", &middle]);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("restoring checkpoint {middle} ")));
    assert_eq!(results(&dir.path().join("out.db")), want, "after the replay");
    // a checkpoint that does not exist is a clear error
    let args = [
        &[
            "run",
            "--config",
            "hotlist.toml",
            "--progress",
            "never",
            "--from-checkpoint",
            "999999999",
        ][..],
        &keep[..],
    ]
    .concat();
    let bad = hotlist_tests::run_hotlist(dir.path(), &args, false);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("never committed"));
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

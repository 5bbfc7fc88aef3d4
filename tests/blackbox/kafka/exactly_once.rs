//! Exactly once: a bounded run equals the model; killed with SIGKILL again and again while the
//! producer writes (one process, and a 2-process cluster) it still does, into PostgreSQL; a
//! fallback past the committed checkpoint keeps every dead letter.

use super::harness::{
    a_then_b, produce_more, results, run_to_the_end, setup, setup_with, spawn, spawn_with, stop_gracefully, Metrics,
    PgSchema, BATCH,
};
use hotlist_tests::model;
use hotlist_tests::run_hotlist;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    // the local PostgreSQL: not while a test restarts it
    let _postgres = hotlist_tests::serial::postgres();
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

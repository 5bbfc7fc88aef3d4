//! `exact_at_seal` on the real binary (docs/exact-at-seal.md): a `sketch` window and an `auto`
//! window with tiny sketches, SIGKILLed at random moments — replays included — and restored onto
//! 1, 2 and 3 workers, end with every sealed list exact, equal to the model's, with a
//! certificate; dead letters are the model's, exactly once.

use hotlist_tests::inputs::{checkpointed_job_shape, random_partitions, write_partitions};
use hotlist_tests::kills::{kill_and_restart, KillPlan, KillReport};
use hotlist_tests::model::{self, ModelWindow};
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::Path;

const JOB: &str = "certified";

const SKETCH_10S: &str = "mode = \"sketch\"\nexact_at_seal = true\n[window.sketch]\nepsilon = 0.2\ndelta = 0.3";
const AUTO_HOP: &str =
    "mode = \"auto\"\nexact_at_seal = true\nmax_items = 4\n[window.sketch]\nepsilon = 0.3\ndelta = 0.3\ncandidates = 4";

fn config() -> String {
    hotlist_tests::checkpointed_job_config(JOB)
        .replacen("k = 5\n", &format!("k = 5\n{SKETCH_10S}\n"), 1)
        .replacen("k = 4\n", &format!("k = 4\n{AUTO_HOP}\n"), 1)
}

/// Each stored list's header: (exact, error_bound, certificate passes).
type Headers = BTreeMap<(String, i64, i64), (bool, i64, Option<i64>)>;

fn headers(db: &Path) -> Headers {
    let conn = Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare(
            "SELECT window_name, window_start, window_end, exact, error_bound, certificate_passes \
             FROM topk_instances WHERE job = ?1",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([JOB], |r| {
            Ok((
                (r.get(0)?, r.get(1)?, r.get(2)?),
                (r.get::<_, i64>(3)? == 1, r.get(4)?, r.get(5)?),
            ))
        })
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// SIGKILLed at least 5 times, restored onto 1, 2 and 3 workers in turn: every sealed list is
/// the model's exact list, `exact` with bound 0, and a list a sketch counted has a certificate.
#[test]
fn sigkill_during_replays_ends_with_exact_certified_lists() {
    let parts = random_partitions(41, &checkpointed_job_shape(9000));
    let windows: Vec<ModelWindow> = model::crash_windows()
        .into_iter()
        .map(|w| ModelWindow::new(&w.name, w.size, w.slide, w.k))
        .collect();
    let (top, want_dead) = model::run(&parts, &windows, 2_000, 30_000);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), &parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), config()).expect("config");
    let plan = KillPlan {
        attempts: 12,
        kills: 6,
        commits_before_kill: (1, 2),
        jitter_ms: 15,
        seed: 12,
    };
    let workers = |attempt: usize| if attempt == usize::MAX { 2 } else { 1 + attempt % 3 };
    let KillReport { kills, restored, logs } = kill_and_restart(
        &plan,
        |attempt| hotlist_tests::spawn_run(dir.path(), workers(attempt)),
        || hotlist_tests::sqlite_committed_epoch(&dir.path().join("out.db"), JOB),
    );
    assert!(
        kills >= 5 && restored >= 1,
        "kills {kills}, restores {restored}:\n{logs}"
    );
    let db = dir.path().join("out.db");
    let lists = hotlist_tests::sqlite_sealed_lists(&db, JOB);
    assert_eq!(lists, top, "sealed lists are the model's exact lists");
    let heads = headers(&db);
    for (key, (exact, bound, passes)) in &heads {
        assert!(*exact && *bound == 0, "{key:?}: exact with bound 0");
        if key.0 == "10s" {
            assert!(
                passes.is_some_and(|p| p >= 1),
                "{key:?}: a sketch list has a certificate"
            );
        }
    }
    assert!(
        heads.iter().any(|(k, h)| k.0 == "30s-hop" && h.2.is_some()),
        "some auto instance folded and was replayed"
    );
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, JOB).0,
        want_dead,
        "dead letters exactly once"
    );
    // every range was noted with its byte offset (also by sources resumed from a checkpoint):
    // no replay read a line only to reach its range
    let scanned = scanned(&logs);
    assert!(!scanned.is_empty(), "replays logged what they read:\n{logs}");
    assert!(scanned.iter().all(|(_, skipped)| *skipped == 0), "{scanned:?}");
}

/// What every exact replay's file readers went through, from the log: (bytes read, lines read
/// only to reach the ranges).
fn scanned(log: &str) -> Vec<(u64, u64)> {
    log.lines()
        .filter_map(|l| l.split_once("(files: ").map(|(_, rest)| rest))
        .filter_map(|rest| {
            let mut words = rest.split(' ');
            let bytes = words.next()?.parse().ok()?;
            let skipped = words.nth(2)?.parse().ok()?;
            Some((bytes, skipped))
        })
        .collect()
}

/// The generator is replayed by seeking: a generated job's `exact_at_seal` lists equal the
/// same job's exact lists, each with a certificate.
#[test]
fn generated_input_is_replayed_by_seeking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = |id: &str, mode: &str| {
        format!(
            "[job]\nid = \"{id}\"\n[source]\nkind = \"generator\"\nseed = 5\nitems = 3000\nzipf = 0.9\npartitions = 3\n\
             events = 30000\nrate = 200\nstart = 0\njitter = \"3s\"\nlate_fraction = 0.02\nlate_by = \"40s\"\nbad_fraction = 0.01\n\
             [time]\nmax_out_of_orderness = \"2s\"\nallowed_lateness = \"5s\"\n\
             [[window]]\nname = \"10s\"\nsize = \"10s\"\nk = 8\n{mode}\n[sink]\nkind = \"sqlite\"\npath = \"out.db\"\n"
        )
    };
    let run = |id: &str, mode: &str| {
        std::fs::write(dir.path().join("hotlist.toml"), job(id, mode)).expect("config");
        hotlist_tests::run_hotlist(
            dir.path(),
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
        hotlist_tests::sqlite_sealed_lists(&dir.path().join("out.db"), id)
    };
    let exact = run("exact", "");
    let replayed = run(
        "replayed",
        "mode = \"sketch\"\nexact_at_seal = true\n[window.sketch]\nepsilon = 0.1\ndelta = 0.2",
    );
    assert!(exact.len() >= 5, "instances: {}", exact.len());
    assert_eq!(replayed, exact, "the replayed lists are the exact ones");
    let conn = Connection::open(dir.path().join("out.db")).expect("open db");
    let uncertified: i64 = conn
        .query_row(
            "SELECT count(*) FROM topk_instances WHERE job = 'replayed' AND (exact = 0 OR certificate_passes IS NULL)",
            [],
            |r| r.get(0),
        )
        .expect("query");
    assert_eq!(uncertified, 0);
}

/// Two processes (under `scripts/cluster`): the workers' shares of each sealed instance's
/// table cross processes to the merger, and process 0 replays every partition: the lists are
/// the model's, exact and certified.
#[test]
fn a_two_process_cluster_publishes_the_same_certified_lists() {
    let parts = random_partitions(43, &checkpointed_job_shape(4000));
    let windows: Vec<ModelWindow> = model::crash_windows()
        .into_iter()
        .map(|w| ModelWindow::new(&w.name, w.size, w.slide, w.k))
        .collect();
    let (top, want_dead) = model::run(&parts, &windows, 2_000, 30_000);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), &parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), config()).expect("config");
    let log = run_cluster(dir.path());
    let db = dir.path().join("out.db");
    assert_eq!(hotlist_tests::sqlite_sealed_lists(&db, JOB), top, "sealed lists: {log}");
    let heads = headers(&db);
    assert!(
        heads.values().all(|(exact, bound, _)| *exact && *bound == 0),
        "{heads:?}"
    );
    assert!(heads.iter().any(|(k, h)| k.0 == "10s" && h.2.is_some()), "{heads:?}");
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, JOB).0,
        want_dead,
        "dead letters"
    );
}

/// Runs `hotlist.toml` in `dir` as a two-process cluster (`scripts/cluster`, one worker each)
/// to the end of its input; returns process 0's log.
fn run_cluster(dir: &Path) -> String {
    let base = (0..100)
        .map(|_| hotlist_tests::free_loopback_ports(1)[0])
        .find(|b| *b < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", b + 1)).is_ok())
        .expect("two consecutive free ports");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(["2", "hotlist.toml", "--set", "run.connect_timeout=\"30s\""])
        .env("HOTLIST_BIN", hotlist_tests::hotlist_bin())
        .env("HOTLIST_CLUSTER_PORT", base.to_string())
        .env("HOTLIST_CLUSTER_DIR", "cluster")
        .current_dir(dir)
        .output()
        .expect("run scripts/cluster");
    let log = std::fs::read_to_string(dir.join("cluster/process-0.log")).unwrap_or_default();
    assert!(out.status.success(), "{}\n{log}", String::from_utf8_lossy(&out.stderr));
    log
}

/// Stopped with SIGTERM twice mid-run (replays may be pending: they are in the stop's
/// checkpoint) and started again each time: every run exits by itself, and the finished job's
/// lists are the model's, exact and certified.
#[test]
fn sigterm_mid_run_then_a_restart_finishes_exact() {
    let parts = random_partitions(44, &checkpointed_job_shape(6000));
    let windows: Vec<ModelWindow> = model::crash_windows()
        .into_iter()
        .map(|w| ModelWindow::new(&w.name, w.size, w.slide, w.k))
        .collect();
    let (top, want_dead) = model::run(&parts, &windows, 2_000, 30_000);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), &parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), config()).expect("config");
    let db = dir.path().join("out.db");
    let committed = || hotlist_tests::sqlite_committed_epoch(&db, JOB);
    for _ in 0..2 {
        let mut child = hotlist_tests::spawn_run(dir.path(), 2);
        let start = committed();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while committed() <= start.map(|c| c + 20) {
            assert!(std::time::Instant::now() < deadline, "no progress");
            if child.try_wait().expect("try_wait").is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        assert!(
            hotlist_tests::reap(&mut child, std::time::Duration::from_secs(60)),
            "a stopped run exits by itself"
        );
    }
    let out = hotlist_tests::spawn_run(dir.path(), 1)
        .wait_with_output()
        .expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("restoring checkpoint"),
        "the last run went on from a stop: {err}"
    );
    assert_eq!(hotlist_tests::sqlite_sealed_lists(&db, JOB), top, "sealed lists");
    assert!(headers(&db).values().all(|(exact, bound, _)| *exact && *bound == 0));
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, JOB).0,
        want_dead,
        "dead letters"
    );
}

/// A flat input (`exact_at_seal.max_replay_keys`, docs/exact-at-seal.md#memory): three 10 s
/// instances of 300 distinct items each, every item once or twice, so a pass that proves a
/// list counts every item; two files, in order.
fn flat_input() -> Vec<Vec<Vec<u8>>> {
    let mut parts = vec![Vec::new(), Vec::new()];
    for instance in 0..3i64 {
        for i in 0..300i64 {
            for repeat in 0..(1 + i64::from(i % 3 == 0)) {
                let ts = instance * 10_000 + (i * 30 + repeat * 7) % 10_000;
                let line = format!(r#"{{"item_id":"x{instance}-{i}","ts":{ts}}}"#);
                parts[(i % 2) as usize].push(line.into_bytes());
            }
        }
    }
    for p in &mut parts {
        p.sort_by_key(|l| serde_json::from_slice::<serde_json::Value>(l).expect("json")["ts"].as_i64());
    }
    parts
}

/// Runs `flat_input` through the binary on 2 workers with a replay budget of 64 keys in at
/// most `ranges` ranges; returns the directory, the stored headers and the run's log.
fn run_flat(ranges: u32) -> (tempfile::TempDir, Headers, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), &flat_input()).expect("inputs");
    let config = format!(
        "[job]\nid = \"{JOB}\"\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n\
         [time]\nmax_out_of_orderness = \"1s\"\nallowed_lateness = \"0s\"\n\
         [[window]]\nname = \"10s\"\nsize = \"10s\"\nk = 5\nmode = \"sketch\"\nexact_at_seal = true\n\
         [window.sketch]\nepsilon = 0.05\ndelta = 0.1\n\
         [sink]\nkind = \"sqlite\"\npath = \"out.db\"\n\
         [exact_at_seal]\nmax_replay_keys = 64\nmax_key_ranges = {ranges}\n"
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let out = hotlist_tests::spawn_run(dir.path(), 2)
        .wait_with_output()
        .expect("wait");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    let heads = headers(&dir.path().join("out.db"));
    (dir, heads, log)
}

/// The peak keys of every replay the log reports (`peak N keys of 64`).
fn peaks(log: &str) -> Vec<usize> {
    log.lines()
        .filter_map(|l| l.split_once("peak ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .collect()
}

/// 64 keys at once in up to 16 ranges: each pass is split by item hash, no replay map holds
/// more than 64 items, and every sealed list is the model's, exact and certified.
#[test]
fn a_flat_instance_is_replayed_in_hash_ranges_within_the_key_budget() {
    let (dir, heads, log) = run_flat(16);
    let windows = [ModelWindow::new("10s", 10_000, 10_000, 5)];
    let (top, _) = model::run(&flat_input(), &windows, 1_000, 0);
    let db = dir.path().join("out.db");
    assert_eq!(
        hotlist_tests::sqlite_sealed_lists(&db, JOB),
        top,
        "the model's lists: {log}"
    );
    assert_eq!(heads.len(), 3, "{heads:?}");
    for (key, (exact, bound, passes)) in &heads {
        assert!(
            *exact && *bound == 0 && passes.is_some(),
            "{key:?}: exact, certified: {log}"
        );
    }
    let peaks = peaks(&log);
    assert_eq!(peaks.len(), 3, "one replay line per instance: {log}");
    assert!(peaks.iter().all(|p| *p <= 64), "peak keys {peaks:?} within 64: {log}");
    assert!(
        log.lines()
            .any(|l| l.contains("sealed list exact") && !l.contains(" 1 item-hash range(s)")),
        "a pass was split: {log}"
    );
}

/// 64 keys at once in at most 2 ranges cannot hold 300 items: every list stays as sealed
/// (approximate, with its bound), the log gives the reason, and no map held more than 64.
#[test]
fn a_flat_instance_over_the_key_budget_stays_approximate_with_the_reason() {
    let (_dir, heads, log) = run_flat(2);
    assert_eq!(heads.len(), 3, "{heads:?}");
    for (key, (exact, bound, passes)) in &heads {
        assert!(!*exact && *bound > 0 && passes.is_none(), "{key:?}: approximate: {log}");
    }
    let over: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("stays approximate: over the replay budget"))
        .collect();
    assert_eq!(over.len(), 3, "one reason per instance: {log}");
    assert!(
        over.iter().all(|l| l.contains("exact_at_seal.max_replay_keys")),
        "{over:?}"
    );
    let peaks = peaks(&log);
    assert!(
        peaks.len() == 3 && peaks.iter().all(|p| *p <= 64),
        "peak keys {peaks:?}: {log}"
    );
}

/// Per-group windows (`by = ["country"]`, 2 lists per instance for up to 4 groups, so `(other)`
/// too) with `exact_at_seal`, tiny tables and few candidates so that groups fold: a `sketch`
/// window counting events and an `auto` one counting distinct users. SIGKILLed at least 5
/// times, restored onto 1, 2 and 3 workers in turn, every sealed group list is the model's
/// exact list, `exact` with bound 0, and some carry a certificate; dead letters are the
/// model's, exactly once.
#[test]
fn sigkill_with_per_group_windows_ends_with_exact_group_lists() {
    let parts = hotlist_tests::inputs::random_grouped_partitions(43, &checkpointed_job_shape(9000));
    let (top, want_dead) = model::run_grouped(&parts, &grouped_windows(), 2_000, 30_000);
    let config = grouped_config();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), &parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let plan = KillPlan {
        attempts: 12,
        kills: 6,
        commits_before_kill: (1, 2),
        jitter_ms: 15,
        seed: 13,
    };
    let workers = |attempt: usize| if attempt == usize::MAX { 2 } else { 1 + attempt % 3 };
    let KillReport { kills, restored, logs } = kill_and_restart(
        &plan,
        |attempt| hotlist_tests::spawn_run(dir.path(), workers(attempt)),
        || hotlist_tests::sqlite_committed_epoch(&dir.path().join("out.db"), "grouped"),
    );
    assert!(
        kills >= 5 && restored >= 1,
        "kills {kills}, restores {restored}:\n{logs}"
    );
    let db = dir.path().join("out.db");
    let (got, certified) = sealed_group_lists(&db);
    assert_eq!(got, top, "sealed group lists are the model's exact lists");
    assert!(certified > 0, "some group list was replayed");
    assert!(got.keys().any(|k| k.3 == "(other)"), "(other) is among the lists");
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, "grouped").0,
        want_dead,
        "dead letters exactly once"
    );
}

/// The model of [`grouped_config`]'s windows.
fn grouped_windows() -> Vec<ModelWindow> {
    model::crash_windows()
        .into_iter()
        .map(|w| {
            let mut m = ModelWindow::new(&w.name, w.size, w.slide, w.k);
            m.by = vec!["country".into()];
            m.max_groups = 2;
            m.distinct_users = w.name == "30s-hop";
            m
        })
        .collect()
}

/// Job `grouped`: per-group windows (`by = ["country"]`, 2 lists per instance for up to 4
/// groups, so `(other)` too) with `exact_at_seal`, tiny tables and few candidates so that
/// groups fold: a `sketch` window counting events and an `auto` one counting distinct users.
fn grouped_config() -> String {
    let grouped = |counting: &str| format!("by = [\"country\"]\nmax_groups = 2\n{counting}\ncandidates = 5");
    hotlist_tests::checkpointed_job_config("grouped")
        .replacen("k = 5\n", &format!("k = 5\n{}\n", grouped(SKETCH_10S)), 1)
        .replacen(
            "k = 4\n",
            &format!(
                "k = 4\ncount = \"distinct_users\"\n{}\n",
                grouped(&AUTO_HOP.replace("candidates = 4", ""))
            ),
            1,
        )
        .replacen("[time]", "[source.format]\nuser = \"/user\"\n[time]", 1)
}

/// Job `grouped`'s sealed group lists, each checked final, exact and with bound 0; and how many
/// carry a certificate.
fn sealed_group_lists(db: &Path) -> (model::GroupLists, usize) {
    let conn = Connection::open(db).expect("open db");
    let mut got = model::GroupLists::new();
    let mut certified = 0;
    {
        let mut stmt = conn
            .prepare(
                "SELECT t.window_name, t.window_start, t.window_end, t.group_key, t.item_id, t.count, \
                 i.exact, i.error_bound, i.certificate_passes, t.final \
                 FROM topk t JOIN topk_instances i USING (job, window_name, group_key, window_start) \
                 WHERE t.job = 'grouped' ORDER BY t.window_name, t.window_start, t.group_key, t.rank",
            )
            .expect("prepare");
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, String>(3)?,
                    ),
                    (r.get::<_, String>(4)?, r.get::<_, i64>(5)? as u64),
                    (
                        r.get::<_, i64>(6)?,
                        r.get::<_, i64>(7)?,
                        r.get::<_, Option<i64>>(8)?,
                        r.get::<_, i64>(9)?,
                    ),
                ))
            })
            .expect("query");
        for row in rows {
            let (key, item, (exact, bound, passes, fin)) = row.expect("row");
            assert_eq!((exact, bound, fin), (1, 0, 1), "{key:?}: sealed exact with bound 0");
            certified += usize::from(passes.is_some());
            got.entry(key).or_default().push(item);
        }
    }
    (got, certified)
}

/// The per-group job as a two-process cluster: each pass of a replay is counted by both
/// processes over the partitions they own, and the sealed group lists are the model's, exact,
/// some certified; dead letters exactly once.
#[test]
fn a_two_process_cluster_replays_group_lists_on_both_processes() {
    let parts = hotlist_tests::inputs::random_grouped_partitions(47, &checkpointed_job_shape(6000));
    let (top, want_dead) = model::run_grouped(&parts, &grouped_windows(), 2_000, 30_000);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), &parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), grouped_config()).expect("config");
    let log = run_cluster(dir.path());
    let db = dir.path().join("out.db");
    let (got, certified) = sealed_group_lists(&db);
    assert_eq!(got, top, "sealed group lists are the model's exact lists: {log}");
    assert!(certified > 0, "some group list was replayed: {log}");
    assert!(
        log.contains("read by 2 process(es)"),
        "the replays were counted on both processes: {log}"
    );
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, "grouped").0,
        want_dead,
        "dead letters exactly once"
    );
}

//! Sketch windows on the real binary: killed with SIGKILL at random moments and restored onto
//! 1, 2 and 3 workers, a job with a `sketch` window and an `auto` window ends with lists that
//! hold their stated bounds against the model's true counts, and the model's dead letters
//! exactly once; a `both` window publishes the exact list with a sketch check that `query`
//! shows; a changed mode refuses the old checkpoints; HeavyKeeper state restores only onto its
//! own worker count.

use hotlist_tests::inputs::{checkpointed_job_shape, random_partitions, write_partitions};
use hotlist_tests::kills::{kill_after_commits, kill_and_restart, KillPlan, KillReport};
use hotlist_tests::model::{self, ModelWindow};
use rusqlite::Connection;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

const JOB: &str = "sketchy";

/// The crash tests' checkpointed job with its `10s` window counted by `ten` and its `30s-hop`
/// window by `hop` (TOML lines inserted after each window's `k`).
fn config(ten: &str, hop: &str) -> String {
    hotlist_tests::checkpointed_job_config(JOB)
        .replacen("k = 5\n", &format!("k = 5\n{ten}\n"), 1)
        .replacen("k = 4\n", &format!("k = 4\n{hop}\n"), 1)
}

const SKETCH_10S: &str = "mode = \"sketch\"\n[window.sketch]\nepsilon = 0.02\ndelta = 0.01";
const AUTO_HOP: &str = "mode = \"auto\"\nmax_items = 4\n[window.sketch]\nepsilon = 0.05\ncandidates = 6";

fn setup(parts: &[Vec<Vec<u8>>], config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    dir
}

fn spawn(dir: &Path, workers: usize) -> std::process::Child {
    hotlist_tests::spawn_run(dir, workers)
}

fn committed(dir: &Path) -> Option<u64> {
    hotlist_tests::sqlite_committed_epoch(&dir.join("out.db"), JOB)
}

/// Each stored list's header: (exact, error_bound, sketch check found/of).
type Headers = BTreeMap<(String, i64, i64), (bool, u64, Option<(i64, i64)>)>;

fn headers(db: &Path) -> Headers {
    let conn = Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare(
            "SELECT window_name, window_start, window_end, exact, error_bound, sketch_found, sketch_of \
             FROM topk_instances WHERE job = ?1",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([JOB], |r| {
            let found: Option<i64> = r.get(5)?;
            let of: Option<i64> = r.get(6)?;
            Ok((
                (r.get(0)?, r.get(1)?, r.get(2)?),
                (r.get::<_, i64>(3)? == 1, r.get::<_, i64>(4)? as u64, found.zip(of)),
            ))
        })
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// Every sealed list of `db` against the model's true counts: counts within [true, true +
/// bound], the bound at most ⌈ε·N⌉, exact lists equal to the model's, and every instance the
/// model has.
fn check_bounds(db: &Path, truth: &model::Lists, top: &model::Lists, epsilon: &HashMap<&str, f64>) {
    let lists = hotlist_tests::sqlite_sealed_lists(db, JOB);
    let heads = headers(db);
    assert_eq!(
        lists.keys().collect::<Vec<_>>(),
        top.keys().collect::<Vec<_>>(),
        "the model's instances"
    );
    for (key, items) in &lists {
        let (exact, bound, _) = heads[key];
        let all = &truth[key];
        let n: u64 = all.iter().map(|(_, c)| c).sum();
        assert!(
            bound <= (epsilon[key.0.as_str()] * n as f64).ceil() as u64,
            "{key:?}: bound {bound}, N {n}"
        );
        if exact {
            assert_eq!((bound, items), (0, &top[key]), "{key:?}: an exact list is the model's");
        }
        let true_of: HashMap<&str, u64> = all.iter().map(|(i, c)| (i.as_str(), *c)).collect();
        for (item, count) in items {
            let t = true_of.get(item.as_str()).copied().unwrap_or(0);
            assert!(
                t <= *count && *count <= t + bound,
                "{key:?}: {item} counted {count} of {t} (bound {bound})"
            );
        }
    }
}

fn model_windows(k: usize) -> Vec<ModelWindow> {
    model::crash_windows()
        .into_iter()
        .map(|w| ModelWindow::new(&w.name, w.size, w.slide, if k == 0 { w.k } else { k }))
        .collect()
}

/// SIGKILLed at least 5 times at random moments, restoring onto 1, 2 and 3 workers in turn
/// (count-min state is added up and split by item; `auto` exact counts move to their item's
/// owner), the job's sealed lists hold their bounds and its dead letters equal the model's.
#[test]
fn sigkill_and_rescaling_keep_sketch_lists_within_their_bounds() {
    let parts = random_partitions(33, &checkpointed_job_shape(9000));
    let (top, want_dead) = model::run(&parts, &model_windows(0), 2_000, 30_000);
    let (truth, _) = model::run(&parts, &model_windows(usize::MAX), 2_000, 30_000);
    let epsilon = HashMap::from([("10s", 0.02), ("30s-hop", 0.05)]);
    let dir = setup(&parts, &config(SKETCH_10S, AUTO_HOP));
    let plan = KillPlan {
        attempts: 12,
        kills: 6,
        commits_before_kill: (1, 1),
        jitter_ms: 15,
        seed: 9,
    };
    let workers = |attempt: usize| if attempt == usize::MAX { 2 } else { 1 + attempt % 3 };
    let KillReport { kills, restored, logs } = kill_and_restart(
        &plan,
        |attempt| spawn(dir.path(), workers(attempt)),
        || committed(dir.path()),
    );
    assert!(
        kills >= 5 && restored >= 1,
        "kills {kills}, restores {restored}:\n{logs}"
    );
    let db = dir.path().join("out.db");
    check_bounds(&db, &truth, &top, &epsilon);
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, JOB).0,
        want_dead,
        "dead letters exactly once"
    );
    let heads = headers(&db);
    assert!(
        heads.iter().any(|(k, h)| k.0 == "10s" && !h.0),
        "sketch lists are approximate"
    );
    assert!(
        heads.iter().any(|(k, h)| k.0 == "30s-hop" && !h.0),
        "some auto instance folded"
    );
}

/// A `both` window publishes the model's exact lists with a sketch check; `query` says what
/// the lists are (text and JSON); the checkpoints record the mode, so a run with another mode
/// refuses them with one line naming the change.
#[test]
fn both_windows_publish_exact_lists_with_a_check_and_a_mode_change_is_refused() {
    let parts = random_partitions(7, &checkpointed_job_shape(3000));
    let (top, _) = model::run(&parts, &model_windows(0), 2_000, 30_000);
    let both = "mode = \"both\"\n[window.sketch]\nepsilon = 0.2\ndelta = 0.2\ncandidates = 5";
    let dir = setup(&parts, &config(both, SKETCH_10S.replace("0.02", "0.05").as_str()));
    hotlist_tests::run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let db = dir.path().join("out.db");
    let lists = hotlist_tests::sqlite_sealed_lists(&db, JOB);
    let heads = headers(&db);
    for (key, items) in lists.iter().filter(|(k, _)| k.0 == "10s") {
        assert_eq!(items, &top[key], "{key:?}: the exact list");
        let (exact, bound, check) = heads[key];
        let (found, of) = check.expect("a sketch check");
        assert!(
            exact && bound == 0 && found <= of && of as usize == items.len(),
            "{key:?}: {:?}",
            heads[key]
        );
    }
    let q = |args: &[&str]| {
        let out = hotlist_tests::run_hotlist(
            dir.path(),
            &[&["query", "--config", "hotlist.toml"][..], args].concat(),
            true,
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let json: serde_json::Value = serde_json::from_str(&q(&["--window", "10s", "--json"])).expect("json");
    assert_eq!(json["exact"], true, "{json}");
    assert!(json["sketch_check"]["recall"].is_number(), "{json}");
    let text = q(&["--window", "30s-hop"]);
    assert!(text.contains("≈ approximate: counts may be high by ≤"), "{text}");
    // another mode for the 10s window: the checkpoints were counted otherwise
    std::fs::write(dir.path().join("hotlist.toml"), config("", SKETCH_10S)).expect("config");
    let out = hotlist_tests::run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        false,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("error:") && l.contains("window modes")),
        "{err}"
    );
}

/// HeavyKeeper tables neither add up nor split: a checkpoint restores onto the worker count
/// that wrote it, and onto another one the run stops with one line saying why.
#[test]
fn heavykeeper_state_restores_only_onto_its_own_worker_count() {
    let parts = random_partitions(3, &checkpointed_job_shape(2000));
    let hk = "mode = \"sketch\"\n[window.sketch]\nalgorithm = \"heavykeeper\"\nepsilon = 0.05";
    // a live-looking run: stopped with SIGKILL after a commit, so state is left to restore
    let dir = setup(&parts, &config(hk, ""));
    let killed = kill_after_commits(spawn(dir.path(), 2), 1, || committed(dir.path()));
    assert!(killed, "the run ended before it could be killed");
    let run = |workers: &str, ok: bool| {
        let args = [
            "run",
            "--config",
            "hotlist.toml",
            "--progress",
            "never",
            "--workers",
            workers,
        ];
        hotlist_tests::run_hotlist(dir.path(), &args, ok)
    };
    let out = run("1", false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("HeavyKeeper") && err.contains("worker count"), "{err}");
    run("2", true);
    let lists = hotlist_tests::sqlite_sealed_lists(&dir.path().join("out.db"), JOB);
    assert!(!lists.is_empty());
}

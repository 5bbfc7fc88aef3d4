//! Killed with SIGKILL at random moments, stopped with SIGTERM, or replayed from an older
//! checkpoint, the job restores and ends with the model's results.

use super::harness::{committed, job_config, results, setup, shape, spawn};
use hotlist_tests::inputs::{checkpointed_job_shape, random_partitions};
use hotlist_tests::kills::{kill_and_restart, KillPlan, KillReport};
use hotlist_tests::model;
use rusqlite::Connection;
use std::process::Command;
use std::time::{Duration, Instant};

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
    let config = job_config_with_users()
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
    kill_restore_and_compare(&parts, &config, (want, want_dead), 7);
}

/// Runs the job of `config` over `parts`, killed at 4 random moments (spread over the run, so
/// that restores land inside instances holding many groups) and restored onto 1, 2 and 3
/// workers in turn, then compares its sealed lists per group and its dead letters with `want`.
fn kill_restore_and_compare(
    parts: &[Vec<Vec<u8>>],
    config: &str,
    (want, want_dead): (model::GroupLists, model::Dead),
    seed: u64,
) {
    let dir = setup(parts);
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let plan = KillPlan {
        attempts: 10,
        kills: 4,
        commits_before_kill: (6, 6),
        jitter_ms: 15,
        seed,
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

/// A paired distinct-user window (global, tumbling, one pane per instance: its users are
/// (item, user) index pairs per pane, written to checkpoints as user keys) beside a hopping
/// window sharing its panes, killed at random moments and restored onto 1, 2 and 3 workers in
/// turn: the sealed lists equal the model, and so do the dead letters.
#[test]
fn sigkill_with_a_paired_distinct_user_window_keeps_it_exact() {
    kill_a_paired_window("", 41, 11);
}

/// The same with the paired window per group (by page, of thousands; `max_groups = 3`): its
/// `(other)` counts an item's users once over the folded groups (the input has 4 users: a
/// sum of the groups' counts would be far off), recounted from the pairs, whatever the restore.
/// Beside it, a global paired window: two paired shapes sharing the user table and the panes.
#[test]
fn sigkill_with_a_per_group_paired_window_keeps_every_group_exact() {
    kill_a_paired_window("by = [\"page\"]\nmax_groups = 3\n", 43, 13);
}

/// A hopping per-group distinct-user window (`30s-hop` by page, `max_groups = 3`; its keys
/// hold their users' text) beside a tumbling events window, killed at random moments and
/// restored onto 1, 2 and 3 workers in turn: its `(other)`, whose user counts per item are kept
/// as events are counted between recounts (see `operators/src/counter/others.rs`) and rebuilt
/// after each restore, equals the model's, and so does every group's list.
#[test]
fn sigkill_with_a_hopping_per_group_distinct_user_window_keeps_every_group_exact() {
    let parts = hotlist_tests::inputs::random_grouped_partitions(47, &checkpointed_job_shape(3000));
    let config = job_config_with_users().replace(
        "k = 4\n",
        "k = 4\ncount = \"distinct_users\"\nby = [\"page\"]\nmax_groups = 3\n",
    );
    assert!(
        config.contains("max_groups = 3") && config.contains("user = "),
        "{config}"
    );
    let mut windows = model::crash_windows();
    windows[1].distinct_users = true;
    windows[1].by = vec!["page".into()];
    windows[1].max_groups = 3;
    let want = model::run_grouped(&parts, &windows, 2_000, 30_000);
    assert!(
        want.0.keys().any(|k| k.0 == "30s-hop" && k.3 == "(other)"),
        "the input overflows max_groups"
    );
    kill_restore_and_compare(&parts, &config, want, 17);
}

/// The crash job's config, its users read from `/user` (for windows counting distinct users).
fn job_config_with_users() -> String {
    job_config().replace(
        "[[window]]\nname = \"10s\"",
        "[source.format]\nuser = \"/user\"\n[[window]]\nname = \"10s\"",
    )
}

/// Kills and restores the job whose 10 s window (tumbling, one pane) counts distinct users,
/// with `by` (its `by` and `max_groups` lines, or none), against the model.
fn kill_a_paired_window(by: &str, input_seed: u64, seed: u64) {
    let parts = hotlist_tests::inputs::random_grouped_partitions(input_seed, &checkpointed_job_shape(6000));
    let config = job_config_with_users().replace("k = 5\n", &format!("k = 5\ncount = \"distinct_users\"\n{by}"));
    assert!(
        config.contains("distinct_users") && config.contains("user = ") && config.contains(by),
        "{config}"
    );
    let mut windows = model::crash_windows();
    windows[0].distinct_users = true;
    let config = match by.is_empty() {
        true => config,
        false => {
            windows[0].by = vec!["page".into()];
            windows[0].max_groups = 3;
            let mut users = model::ModelWindow::new("10s-users", 10_000, 10_000, 5);
            users.distinct_users = true;
            windows.push(users);
            config.replace(
                "[sink]",
                "[[window]]\nname = \"10s-users\"\nsize = \"10s\"\nk = 5\ncount = \"distinct_users\"\n[sink]",
            )
        }
    };
    let want = model::run_grouped(&parts, &windows, 2_000, 30_000);
    assert!(
        by.is_empty() || want.0.keys().any(|k| k.3 == "(other)"),
        "the input overflows max_groups"
    );
    kill_restore_and_compare(&parts, &config, want, seed);
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

/// Trend windows (docs/trends.md), global and per group with a small `max_groups`, sharing
/// their panes with a hopping window (so events late for a trend instance but counted for the
/// hopping one are excluded from its baseline), on input with disorder, late events and bad
/// records, killed at random moments and restored onto 1, 2 and 4 workers in turn: every sealed
/// trend list, with each item's history, equals the model's, and so do the hopping window's
/// lists and the dead letters.
#[test]
fn sigkill_with_trend_windows_keeps_every_baseline_exact() {
    let parts = hotlist_tests::inputs::random_grouped_partitions(41, &checkpointed_job_shape(8000));
    let config = job_config()
        .replace("k = 5\n", "k = 5\nrank_by = \"trend\"\nbaseline = 3\nmin_count = 2\n")
        .replace(
            "[sink]",
            "[[window]]\nname = \"10s-page\"\nsize = \"10s\"\nk = 5\nby = [\"page\"]\nmax_groups = 3\n\
             rank_by = \"trend\"\nbaseline = 2\nmin_count = 2\n[sink]",
        );
    let mut windows = model::crash_windows();
    let mut by_page = model::ModelWindow::new("10s-page", 10_000, 10_000, 5).by(&["page"]);
    by_page.max_groups = 3;
    windows.push(by_page);
    let want_global = model::run_trend(&parts, &windows, 2_000, 30_000, (0, 3, 2));
    let want_pages = model::run_trend(&parts, &windows, 2_000, 30_000, (2, 2, 2));
    let (want_counts, want_dead) = model::run(&parts, &windows, 2_000, 30_000);
    let want_hop: model::Lists = want_counts.into_iter().filter(|(k, _)| k.0 == "30s-hop").collect();
    assert!(want_global.len() > 3, "the input has trends: {want_global:?}");
    assert!(
        want_pages.keys().any(|k| k.3 == "(other)"),
        "the input overflows max_groups"
    );
    let dir = setup(&parts);
    std::fs::write(dir.path().join("hotlist.toml"), &config).expect("config");
    let plan = KillPlan {
        attempts: 10,
        kills: 4,
        commits_before_kill: (6, 6),
        jitter_ms: 15,
        seed: 11,
    };
    let workers = |attempt: usize| {
        if attempt == usize::MAX {
            2
        } else {
            [1, 2, 4][attempt % 3]
        }
    };
    let KillReport { kills, restored, logs } = kill_and_restart(
        &plan,
        |attempt| spawn(dir.path(), workers(attempt)),
        || committed(dir.path()),
    );
    assert!(kills >= 3, "killed only {kills} times:\n{logs}");
    assert!(restored >= 1, "no restart restored a checkpoint:\n{logs}");
    let db = dir.path().join("out.db");
    let nonempty =
        |lists: model::TrendLists| -> model::TrendLists { lists.into_iter().filter(|(_, l)| !l.is_empty()).collect() };
    assert_eq!(
        nonempty(hotlist_tests::sqlite_sealed_trend_lists(&db, "crash", "10s")),
        want_global,
        "sealed global trend lists after {kills} kills\n{logs}"
    );
    assert_eq!(
        nonempty(hotlist_tests::sqlite_sealed_trend_lists(&db, "crash", "10s-page")),
        want_pages,
        "sealed per-page trend lists after {kills} kills\n{logs}"
    );
    let hop: model::Lists = hotlist_tests::sqlite_sealed_group_lists(&db, "crash")
        .into_iter()
        .filter(|(k, _)| k.0 == "30s-hop")
        .map(|((w, start, end, _), list)| ((w, start, end), list))
        .collect();
    assert_eq!(hop, want_hop, "the hopping window's lists after {kills} kills\n{logs}");
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, "crash").0,
        want_dead,
        "dead letters exactly once"
    );
}

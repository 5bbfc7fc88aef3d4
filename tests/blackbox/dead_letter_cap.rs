//! Floods of bad lines on the built binary: beyond `run.max_dead_letters_per_block` dead
//! letters per source and block of 1,000,000 positions, the rest are counted in one summary
//! row per (source, reason, block), so the store and the job's memory stay bounded while every
//! bad line is counted. The rows depend on the input alone: the same on 1 and 2 workers, and
//! after SIGKILLs and restores from checkpoints.

use hotlist_tests::kills::{kill_and_restart, KillPlan};
use std::path::Path;
use std::process::{Command, Stdio};

/// Whole dead letters per block in these tests.
const CAP: u64 = 40;

/// Lines of the input: a little over one block, so that two blocks fill up.
const LINES: u64 = 1_000_300;

const CONFIG: &str = "[job]\nid = \"t\"\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n\
    [[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 10\n[sink]\npath = \"out.db\"\n\
    [run]\nmax_dead_letters_per_block = 40\nepoch_interval = \"5ms\"\nbatch_size = 4096\n";

/// Checkpoints every few epochs, so a kill lands between commits of one block.
const CHECKPOINTS: &str = "[checkpoint]\ndir = \"ckpt\"\ninterval = \"20ms\"\nretain = 3\n";

/// Line `n` (from 1): every 100th an event, the others bad in two ways (not JSON, no `ts`).
fn line(n: u64) -> &'static [u8] {
    match n % 100 {
        0 => b"{\"item_id\":\"a\",\"ts\":1000}\n",
        n if n % 2 == 0 => b"x\n",
        _ => b"{\"item_id\":\"b\"}\n",
    }
}

/// A stored dead-letter row: position, reason, detail, raw, count, last position.
type Row = (i64, String, String, Vec<u8>, i64, Option<i64>);

/// The rule by brute force over the input: per block, the first `CAP` bad lines whole, the
/// rest one summary (count, first, last).
fn model() -> (Vec<i64>, Vec<(i64, i64, i64)>) {
    let (mut whole, mut summaries) = (Vec::new(), Vec::<(i64, i64, i64)>::new());
    let mut per_block = std::collections::BTreeMap::<u64, u64>::new();
    for n in (1..=LINES).filter(|n| n % 100 != 0) {
        let seen = per_block.entry(n / 1_000_000).or_default();
        if *seen < CAP {
            whole.push(n as i64);
        } else if *seen == CAP {
            summaries.push((1, n as i64, n as i64));
        } else if let Some(s) = summaries.last_mut() {
            s.0 += 1;
            s.2 = n as i64;
        }
        *seen += 1;
    }
    (whole, summaries)
}

fn setup(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let mut input = Vec::with_capacity(18 * LINES as usize);
    for n in 1..=LINES {
        input.extend_from_slice(line(n));
    }
    std::fs::write(dir.path().join("in/a.jsonl"), input).expect("input");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    dir
}

fn spawn(dir: &Path, workers: usize) -> std::process::Child {
    Command::new(hotlist_tests::hotlist_bin())
        .args(["run", "--config", "hotlist.toml", "--progress", "never", "--workers"])
        .arg(workers.to_string())
        .current_dir(dir)
        .env("HOTLIST_LOG", "hotlist=info,warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist")
}

/// Every dead-letter row of job `t`, in (position, reason) order, without ids and times.
fn rows(db: &Path) -> Vec<Row> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare(
            "SELECT position, reason, detail, raw, count, last_position FROM dead_letters WHERE job = 't'
             ORDER BY position, reason, detail",
        )
        .expect("prepare");
    stmt.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

/// The rows hold the rule: at most `CAP` whole letters per block, the first ones, and one
/// summary per block counting the rest; every bad line is counted once.
fn check_rule(rows: &[Row]) {
    let (want_whole, want_summaries) = model();
    let whole: Vec<i64> = rows.iter().filter(|r| r.5.is_none()).map(|r| r.0).collect();
    let summaries: Vec<(i64, i64, i64)> = rows.iter().filter_map(|r| r.5.map(|last| (r.4, r.0, last))).collect();
    assert_eq!(
        whole, want_whole,
        "the first {CAP} bad lines of each block are whole rows"
    );
    assert_eq!(summaries, want_summaries, "one summary per block counts the rest");
    let total: i64 = rows.iter().map(|r| r.4).sum();
    assert_eq!(total as u64, LINES - LINES / 100, "every bad line counted once");
    assert!(rows.iter().all(|r| r.1 == "bad"), "{:?}", &rows[..3]);
}

/// Nearly a million bad lines with a cap of 40 per block: 80 whole rows and two summaries
/// (before: a row per bad line), with the same rows on 1 and 2 workers; the log says once per
/// block that it overflowed.
#[test]
fn a_flood_of_bad_lines_is_summarised_per_block() {
    let mut seen = Vec::new();
    for workers in [1, 2] {
        let dir = setup(CONFIG);
        let out = spawn(dir.path(), workers).wait_with_output().expect("run");
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        let got = rows(&dir.path().join("out.db"));
        check_rule(&got);
        assert_eq!(
            log.matches("(run.max_dead_letters_per_block)").count(),
            2,
            "one line per block that overflowed:\n{log}"
        );
        seen.push(got);
    }
    assert_eq!(seen[0], seen[1], "the same rows on 1 and 2 workers");
}

/// Killed with SIGKILL between checkpoints and restored (onto 1 and 2 workers in turn), the
/// job stores the rows of an uninterrupted run: the cap resumes from the store's counts.
#[test]
fn a_summarised_flood_survives_sigkill_and_restore() {
    let dir = setup(&format!("{CONFIG}{CHECKPOINTS}"));
    let db = dir.path().join("out.db");
    let plan = KillPlan {
        attempts: 8,
        kills: 3,
        commits_before_kill: (3, 3),
        jitter_ms: 10,
        seed: 11,
    };
    let report = kill_and_restart(
        &plan,
        |attempt| spawn(dir.path(), if attempt == usize::MAX { 2 } else { 1 + attempt % 2 }),
        || hotlist_tests::sqlite_committed_epoch(&db, "t"),
    );
    assert!(report.kills >= 1, "never killed:\n{}", report.logs);
    assert!(
        report.restored >= 1,
        "no restart restored a checkpoint:\n{}",
        report.logs
    );
    check_rule(&rows(&db));
}

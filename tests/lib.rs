//! Shared pieces of hotlist's end-to-end and oracle tests.
//!
//! - [`model`]: a brute-force, obviously-correct model of docs/time.md's rules (event contract,
//!   per-partition lateness, windows, ranking) that the job's sealed output must equal;
//! - [`inputs`]: random and fixed input files (events, disorder, late events, bad lines);
//! - [`kills`]: the crash tests' loop of SIGKILLs and restarts;
//! - [`serial`]: locks for a service the tests of one binary share (the local PostgreSQL);
//! - [`pg_schema`]: a fresh PostgreSQL schema per test, dropped at its end;
//! - [`proxy`]: a TCP proxy that can be frozen, for a server that stops answering;
//! - [`markdown`]: the anchors of a page's headings, for the docs' link checks;
//! - [`udfs`]: the example UDFs of `examples/udfs`, built once per process (`scripts/build-udfs`).
//!
//! The tests themselves are three binaries, each a folder whose `main.rs` lists its modules:
//! `blackbox/` (the built binary against real services, under faults and hostile input),
//! `oracle/` (results equal the model or an independent computation) and `repo/` (the
//! deployment files, module maps and the paths the docs name).

pub mod inputs;
pub mod kills;
pub mod markdown;
pub mod model;
pub mod pg_schema;
pub mod proxy;
pub mod serial;
pub mod udfs;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

/// The `hotlist` binary the tests run: `$HOTLIST_BIN` when set (a path to any hotlist binary,
/// e.g. a release build or an installed one, so the same tests check it), else the built
/// target/<profile>/hotlist next to this test's deps directory.
/// `cargo test --workspace` builds the latter (the dataflow crate's own CLI tests need it).
pub fn hotlist_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("HOTLIST_BIN").filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "HOTLIST_BIN={} is not a file", bin.display());
        return bin;
    }
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let bin = profile_dir.join("hotlist");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p hotlist` (or `cargo test --workspace`, which builds it), or set HOTLIST_BIN",
        bin.display()
    );
    bin
}

/// Runs `hotlist` with `args` in `dir`; panics with stdout/stderr and a listing if it fails
/// and `expect_ok` is set.
pub fn run_hotlist(dir: &std::path::Path, args: &[&str], expect_ok: bool) -> Output {
    let out = Command::new(hotlist_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("spawn hotlist");
    if expect_ok && !out.status.success() {
        let listing: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        panic!(
            "hotlist {args:?} failed ({}) in {}\n--- stdout\n{}\n--- stderr\n{}\n--- files: {listing:?}",
            out.status,
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Asserts that `job`'s SQLite store `db` holds the model's sealed lists and dead letters.
pub fn assert_sqlite_as_model(db: &std::path::Path, job: &str, lists: &model::Lists, dead: &model::Dead) {
    assert_eq!(&sqlite_sealed_lists(db, job), lists, "{job}: lists");
    assert_eq!(&sqlite_dead_letters(db, job).0, dead, "{job}: dead letters");
}

/// The sealed lists a job stored in a SQLite `topk` table: checks every row is final and ranks
/// are dense from 1.
pub fn sqlite_sealed_lists(db: &std::path::Path, job: &str) -> model::Lists {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare(
            "SELECT window_name, window_start, window_end, rank, item_id, count, final, state FROM topk \
             WHERE job = ?1 ORDER BY window_name, window_start, rank",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([job], |r| {
            Ok((
                (r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?),
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, i64>(5)?,
                (r.get::<_, i64>(6)?, r.get::<_, String>(7)?),
            ))
        })
        .expect("query");
    let mut lists = model::Lists::new();
    for row in rows {
        let (key, rank, item, count, (fin, state)) = row.expect("row");
        assert_eq!(
            (fin, state.as_str()),
            (1, "final"),
            "every window of a bounded run is sealed: {key:?}"
        );
        let list = lists.entry(key).or_default();
        assert_eq!(rank as usize, list.len() + 1, "ranks are dense from 1");
        list.push((item, count as u64));
    }
    lists
}

/// The sealed lists per group a job stored in SQLite (every list of a bounded run is final; a
/// group withdrawn to `(other)` has no rows).
pub fn sqlite_sealed_group_lists(db: &std::path::Path, job: &str) -> model::GroupLists {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare(
            "SELECT window_name, window_start, window_end, group_key, rank, item_id, count, state FROM topk \
             WHERE job = ?1 ORDER BY window_name, window_start, group_key, rank",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([job], |r| {
            Ok((
                (
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                ),
                r.get::<_, i64>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, String>(7)?,
            ))
        })
        .expect("query");
    let mut lists = model::GroupLists::new();
    for row in rows {
        let (key, rank, item, count, state) = row.expect("row");
        assert_eq!(state, "final", "every list of a bounded run is sealed: {key:?}");
        let list = lists.entry(key).or_default();
        assert_eq!(rank as usize, list.len() + 1, "ranks are dense from 1");
        list.push((item, count as u64));
    }
    lists
}

/// The sealed lists of trend window `window` a job stored in SQLite, per group, with each
/// item's history (every list of a bounded run is final; the rows' baseline is checked to be
/// the history's sum).
pub fn sqlite_sealed_trend_lists(db: &std::path::Path, job: &str, window: &str) -> model::TrendLists {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare(
            "SELECT window_name, window_start, window_end, group_key, rank, item_id, count, state, baseline, history \
             FROM topk WHERE job = ?1 AND window_name = ?2 ORDER BY window_start, group_key, rank",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([job, window], |r| {
            Ok((
                (
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                ),
                (r.get::<_, i64>(4)?, r.get::<_, String>(5)?, r.get::<_, i64>(6)?),
                r.get::<_, String>(7)?,
                (r.get::<_, i64>(8)?, r.get::<_, String>(9)?),
            ))
        })
        .expect("query");
    let mut lists = model::TrendLists::new();
    for row in rows {
        let (key, (rank, item, count), state, (baseline, history)) = row.expect("a trend row");
        assert_eq!(state, "final", "every list of a bounded run is sealed: {key:?}");
        let history: Vec<u64> = history.split(',').map(|c| c.parse().expect("a count")).collect();
        assert_eq!(baseline as u64, history.iter().sum::<u64>(), "{key:?} {item}");
        let list = lists.entry(key).or_default();
        assert_eq!(rank as usize, list.len() + 1, "ranks are dense from 1");
        list.push((item, count as u64, history));
    }
    lists
}

/// The dead letters a job stored in SQLite, sorted, and the raw bytes of the `bad` ones by
/// (partition, position).
pub fn sqlite_dead_letters(
    db: &std::path::Path,
    job: &str,
) -> (model::Dead, std::collections::BTreeMap<(u32, u64), Vec<u8>>) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare("SELECT partition, position, reason, raw FROM dead_letters WHERE job = ?1")
        .expect("prepare");
    let rows = stmt
        .query_map([job], |r| {
            Ok((
                r.get::<_, i64>(0)? as u32,
                r.get::<_, i64>(1)? as u64,
                r.get::<_, String>(2)?,
                r.get::<_, Vec<u8>>(3)?,
            ))
        })
        .expect("query");
    let mut dead = Vec::new();
    let mut raw = std::collections::BTreeMap::new();
    for row in rows {
        let (p, pos, reason, bytes) = row.expect("row");
        if reason == "bad" {
            raw.insert((p, pos), bytes);
        }
        dead.push((p, pos, reason));
    }
    dead.sort();
    (dead, raw)
}

/// The job's committed epoch in a SQLite store (`None` before its first commit, or while the
/// file does not exist yet); read-only, beside a running job.
pub fn sqlite_committed_epoch(db: &std::path::Path, job: &str) -> Option<u64> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    conn.busy_timeout(std::time::Duration::from_secs(5)).ok()?;
    conn.query_row("SELECT epoch FROM hotlist_commits WHERE job = ?1", [job], |r| {
        r.get::<_, i64>(0)
    })
    .ok()
    .map(|e| e as u64)
}

/// The checkpoint directories in a job's checkpoint directory (`<dir>/<job>`) at or below the
/// store's committed epoch `committed`, oldest first: the committed checkpoints.
pub fn committed_checkpoints(job_dir: &std::path::Path, committed: Option<u64>) -> Vec<PathBuf> {
    let Some(c) = committed else { return Vec::new() };
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(job_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| Some((e.file_name().to_str()?.parse::<u64>().ok()?, e.path())))
                .filter(|(e, p)| *e <= c && p.join("MANIFEST").exists())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// `n` distinct free loopback ports (all listeners are held until all are known, so the OS
/// cannot hand out the same port twice).
pub fn free_loopback_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect()
}

/// Waits (bounded) for a process to exit, else kills it; returns whether it exited by itself.
pub fn reap(child: &mut std::process::Child, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if child.try_wait().expect("try_wait").is_some() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// The config of the crash and restart tests' checkpointed job `job`: 3 files `in/*.jsonl`, a
/// tumbling and a hopping window, SQLite `out.db`, a checkpoint every 10 ms of 2 ms epochs in
/// `ckpt/`, small batches (so runs have many epochs and checkpoints to be killed in).
pub fn checkpointed_job_config(job: &str) -> String {
    CHECKPOINTED_JOB.replace("id = \"JOB\"", &format!("id = {job:?}"))
}

const CHECKPOINTED_JOB: &str = r#"
[job]
id = "JOB"
[source]
kind = "file"
path = "in/*.jsonl"
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
kind = "sqlite"
path = "out.db"
[checkpoint]
dir = "ckpt"
interval = "10ms"
retain = 3
[run]
epoch_interval = "2ms"
batch_size = 24
max_epochs_in_flight = 2
"#;

/// `hotlist` with `args` in `dir`, in the background, reading the stdin the test writes; its
/// stdout and stderr are piped (for `wait_with_output`).
pub fn spawn_on_stdin(dir: &std::path::Path, args: &[&str]) -> Child {
    Command::new(hotlist_bin())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist")
}

/// `hotlist run --config hotlist.toml --progress never --workers <workers>` in `dir`, in the
/// background, logging at info; its stderr is piped (for `wait_with_output`).
pub fn spawn_run(dir: &std::path::Path, workers: usize) -> Child {
    Command::new(hotlist_bin())
        .args(["run", "--config", "hotlist.toml", "--progress", "never", "--workers"])
        .arg(workers.to_string())
        .current_dir(dir)
        .env("HOTLIST_LOG", "hotlist=info,warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist")
}

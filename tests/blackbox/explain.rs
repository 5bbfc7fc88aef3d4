//! `hotlist explain` on the binary: after a run over files with disorder, late events and bad
//! lines, an item's count in a sealed instance taken apart — per partition, late but accepted,
//! late and dropped, distinct and top users — equals an independent model of the input, for a
//! global window, a per-group window (an admitted group and `(other)`) and a distinct-user
//! window, with 1 and 2 workers; and a file changed before an instance's range is one line
//! and exit code 2.

use hotlist_tests::inputs::{random_grouped_partitions, write_partitions, Shape};
use hotlist_tests::model;
use hotlist_tests::run_hotlist;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

const OOO: i64 = 2_000;
const LATENESS: i64 = 20_000;

const CONFIG: &str = r#"
[job]
id = "explain"

[source]
kind = "file"
path = "in/*.jsonl"

[source.format]
user = "/user"

[time]
max_out_of_orderness = "2s"
allowed_lateness = "20s"
emit_interval = "10ms"

[[window]]
name = "10s"
size = "10s"
k = 4

[[window]]
name = "30s"
size = "30s"
k = 3
by = ["country"]
max_groups = 2

[[window]]
name = "20s-users"
size = "20s"
k = 3
count = "distinct_users"

[sink]
kind = "sqlite"
path = "out.db"

[run]
epoch_interval = "2ms"
batch_size = 64
"#;

fn shape() -> Shape {
    Shape {
        partitions: 2,
        lines: 1500,
        items: 6,
        step: 40,
        disorder: 3_000,
        late_p: 0.03,
        late_by: 40_000,
        bad_p: 0.01,
        start: 1_713_462_150_123,
    }
}

/// A valid event of the input: (partition, item, ts, country or none, user or none).
pub(crate) struct Ev {
    pub(crate) partition: u32,
    pub(crate) item: String,
    pub(crate) ts: i64,
    pub(crate) country: Option<String>,
    pub(crate) user: Option<String>,
    /// The partition's watermark before it (max event time so far − out-of-orderness).
    pub(crate) wm_before: i64,
}

/// The valid events of `parts`, each with its partition's watermark before it (`ooo`: the
/// job's `max_out_of_orderness`, ms).
pub(crate) fn events(parts: &[Vec<Vec<u8>>], ooo: i64) -> Vec<Ev> {
    let mut out = Vec::new();
    for (p, lines) in parts.iter().enumerate() {
        let mut max_ts: Option<i64> = None;
        for line in lines {
            let Some((item, ts)) = model::parse(line) else { continue };
            let v: Value = serde_json::from_slice(line).expect("a valid event is JSON");
            let country = v["dims"]["country"].as_str().map(str::to_string);
            let user = v["user"].as_str().map(str::to_string);
            out.push(Ev {
                partition: p as u32,
                item,
                ts,
                country,
                user,
                wm_before: max_ts.map_or(i64::MIN, |m| m - ooo),
            });
            max_ts = Some(max_ts.map_or(ts, |m| m.max(ts)));
        }
    }
    out
}

/// What explain must say, by the model: count, by_partition, late_accepted, late_dropped,
/// distinct_users, the top user's events.
#[derive(Debug, PartialEq)]
pub(crate) struct Want {
    count: u64,
    by_partition: BTreeMap<String, u64>,
    pub(crate) late_accepted: u64,
    pub(crate) late_dropped: u64,
    pub(crate) distinct_users: u64,
    top_events: u64,
}

/// Which list of which instance: `[start, start + size)`, `group` `None` for a global window,
/// `Some(country)` for its group's list, `Some("(other)")`; a distinct-user window or not;
/// its `max_groups`; the job's `allowed_lateness` (ms).
pub(crate) struct Of<'a> {
    pub(crate) size: i64,
    pub(crate) start: i64,
    pub(crate) group: Option<&'a str>,
    pub(crate) distinct: bool,
    pub(crate) max_groups: usize,
    pub(crate) lateness: i64,
}

/// The model's explanation of `item` in the list `of`.
pub(crate) fn want(evs: &[Ev], of: &Of<'_>, item: &str) -> Want {
    let Of {
        size,
        start,
        group,
        distinct,
        max_groups,
        lateness,
    } = *of;
    let end = start + size;
    let in_instance = |e: &Ev| e.ts >= start && e.ts < end;
    let counts = |e: &Ev| in_instance(e) && end + lateness > e.wm_before && (!distinct || e.user.is_some());
    let key = |e: &Ev| {
        let dims: BTreeMap<String, String> = e.country.iter().map(|c| ("country".to_string(), c.clone())).collect();
        model::group_key(&["country".to_string()], &dims)
    };
    // the instance's groups with a list: the max_groups lowest key hashes
    let mut hashes: Vec<u64> = evs
        .iter()
        .filter(|e| counts(e))
        .map(|e| hotlist_operators::hash::item_hash(&key(e)))
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes.truncate(max_groups);
    let in_list = |e: &Ev| match group {
        None => true,
        Some("(other)") => !hashes.contains(&hotlist_operators::hash::item_hash(&key(e))),
        Some(c) => key(e) == format!("country={c}") && hashes.contains(&hotlist_operators::hash::item_hash(&key(e))),
    };
    let mine: Vec<&Ev> = evs
        .iter()
        .filter(|e| e.item == item && in_instance(e) && in_list(e))
        .collect();
    let counted: Vec<&&Ev> = mine.iter().filter(|e| counts(e)).collect();
    let mut users: HashMap<&str, u64> = HashMap::new();
    let mut by_partition: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    let mut events_by_partition: BTreeMap<String, u64> = BTreeMap::new();
    for e in &counted {
        *events_by_partition.entry(e.partition.to_string()).or_default() += 1;
        if let Some(u) = e.user.as_deref() {
            *users.entry(u).or_default() += 1;
            by_partition.entry(e.partition.to_string()).or_default().insert(u);
        }
    }
    let dropped = mine
        .iter()
        .filter(|e| !counts(e) && (!distinct || e.user.is_some()))
        .count() as u64;
    Want {
        count: if distinct {
            users.len() as u64
        } else {
            counted.len() as u64
        },
        by_partition: if distinct {
            by_partition.into_iter().map(|(p, u)| (p, u.len() as u64)).collect()
        } else {
            events_by_partition
        },
        late_accepted: counted.iter().filter(|e| e.wm_before >= end).count() as u64,
        late_dropped: dropped,
        distinct_users: users.len() as u64,
        top_events: users.values().copied().max().unwrap_or(0),
    }
}

/// What explain --json said, as a [`Want`] (`distinct_users`: 0 when the job reads no users).
pub(crate) fn got(v: &Value) -> Want {
    Want {
        count: v["count"].as_u64().expect("count"),
        by_partition: v["by_partition"]
            .as_object()
            .expect("by_partition")
            .iter()
            .map(|(p, n)| (p.clone(), n.as_u64().expect("a count")))
            .collect(),
        late_accepted: v["late_accepted"].as_u64().expect("late_accepted"),
        late_dropped: v["late_dropped"].as_u64().expect("late_dropped"),
        distinct_users: v["distinct_users"].as_u64().unwrap_or(0),
        top_events: v["top_users"][0]["events"].as_u64().unwrap_or(0),
    }
}

/// `hotlist explain --json` of `item` in the instance of `window` at `at`.
pub(crate) fn explain(dir: &Path, window: &str, item: &str, at: i64, group: Option<&str>) -> Value {
    let at = at.to_string();
    let mut args = vec![
        "explain",
        "--config",
        "hotlist.toml",
        "--window",
        window,
        "--item",
        item,
        "--at",
        &at,
        "--json",
    ];
    if let Some(g) = group {
        args.extend(["--group", g]);
    }
    let out = run_hotlist(dir, &args, true);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "explain --json printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Instances of a window with enough going on: the model's sealed instances holding both a
/// late-accepted and a late-dropped event of some item (falling back to any).
pub(crate) fn busy_instances(evs: &[Ev], size: i64, lateness: i64) -> Vec<i64> {
    let starts: BTreeSet<i64> = evs.iter().map(|e| e.ts.div_euclid(size) * size).collect();
    let last = evs.iter().map(|e| e.ts).max().unwrap_or(0);
    starts
        .into_iter()
        .filter(|s| s + size + lateness < last)
        .filter(|s| {
            let end = s + size;
            let late = |e: &&Ev| e.ts >= *s && e.ts < end && e.wm_before >= end;
            evs.iter().filter(late).any(|e| end + lateness > e.wm_before)
                && evs.iter().filter(late).any(|e| end + lateness <= e.wm_before)
        })
        .collect()
}

/// A list of this file's job (`max_groups` 2).
fn of(size: i64, start: i64, group: Option<&str>, distinct: bool) -> Of<'_> {
    Of {
        size,
        start,
        group,
        distinct,
        max_groups: 2,
        lateness: LATENESS,
    }
}

#[test]
fn explain_takes_counts_apart_as_the_model_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let parts = random_grouped_partitions(25, &shape());
    write_partitions(&dir.path().join("in"), &parts).expect("write inputs");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("write config");
    let evs = events(&parts, OOO);
    let instances = busy_instances(&evs, 10_000, LATENESS);
    assert!(
        instances.len() >= 2,
        "the input has instances with late events of both kinds"
    );
    let mut checked = 0;
    for workers in ["1", "2"] {
        let _ = std::fs::remove_file(dir.path().join("out.db"));
        run_hotlist(
            dir.path(),
            &[
                "run",
                "--config",
                "hotlist.toml",
                "--workers",
                workers,
                "--progress",
                "never",
            ],
            true,
        );
        for &start in instances.iter().take(3) {
            for item in ["i0", "i1", "i3"] {
                let w = want(&evs, &of(10_000, start, None, false), item);
                let v = explain(dir.path(), "10s", item, start + 1, None);
                assert_eq!(got(&v), w, "10s [{start}] {item} with {workers} worker(s): {v}");
                assert_eq!(v["agrees"], Value::Bool(true), "the store agrees: {v}");
                checked += 1;
            }
        }
        // a per-group window: an admitted group and (other); a distinct-user window
        let start30 = instances[0].div_euclid(30_000) * 30_000;
        for group in ["US", "(other)"] {
            let w = want(&evs, &of(30_000, start30, Some(group), false), "i1");
            let flag = if group == "(other)" {
                group.to_string()
            } else {
                format!("country={group}")
            };
            let v = explain(dir.path(), "30s", "i1", start30, Some(&flag));
            assert_eq!(got(&v), w, "30s {group} with {workers} worker(s): {v}");
            assert_ne!(v["agrees"], Value::Bool(false), "{v}");
        }
        let start20 = instances[0].div_euclid(20_000) * 20_000;
        let w = want(&evs, &of(20_000, start20, None, true), "i2");
        let v = explain(dir.path(), "20s-users", "i2", start20, None);
        assert_eq!(got(&v), w, "20s-users with {workers} worker(s): {v}");
        assert!(w.distinct_users < w.by_partition.values().sum::<u64>() + 1);
    }
    assert!(checked >= 12);
}

/// A file that shrank since the run: one line naming the partition, exit code 2.
#[test]
fn an_input_changed_since_is_exit_code_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let parts = random_grouped_partitions(26, &shape());
    let paths = write_partitions(&dir.path().join("in"), &parts).expect("write inputs");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("write config");
    run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let evs = events(&parts, OOO);
    let start = *busy_instances(&evs, 10_000, LATENESS)
        .last()
        .expect("an instance late in the input");
    let ok = explain(dir.path(), "10s", "i0", start, None);
    assert_eq!(ok["agrees"], Value::Bool(true), "{ok}");
    // partition 0 shrinks to its first tenth: its range of the instance is gone
    let text = std::fs::read(&paths[0]).expect("read input");
    std::fs::write(&paths[0], &text[..text.len() / 10]).expect("rewrite input");
    let at = start.to_string();
    let out = run_hotlist(
        dir.path(),
        &[
            "explain",
            "--config",
            "hotlist.toml",
            "--window",
            "10s",
            "--item",
            "i0",
            "--at",
            &at,
        ],
        false,
    );
    assert_eq!(out.status.code(), Some(2), "exit code 2: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("partition 0") && stderr.contains("changed"), "{stderr}");
}

/// `hotlist verify`: every sealed list of every window (global, per group with `(other)`,
/// distinct users) counted again equals the stored one (exit 0); after one stored count is
/// changed, verify exits 1 naming the window, instance and rank; with nothing in range, 2.
#[test]
fn verify_finds_the_one_changed_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let parts = random_grouped_partitions(27, &shape());
    write_partitions(&dir.path().join("in"), &parts).expect("write inputs");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("write config");
    run_hotlist(
        dir.path(),
        &[
            "run",
            "--config",
            "hotlist.toml",
            "--workers",
            "2",
            "--progress",
            "never",
        ],
        true,
    );
    let verify = |extra: &[&str]| {
        let args = [&["verify", "--config", "hotlist.toml"][..], extra].concat();
        let out = std::process::Command::new(hotlist_tests::hotlist_bin())
            .args(&args)
            .current_dir(dir.path())
            .output()
            .expect("run verify");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, out) = verify(&["--json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(code, Some(0), "{out}");
    let lists = v["checked_lists"].as_u64().expect("checked_lists");
    assert!(lists >= 15, "every window's lists checked: {out}");
    assert!(v["mismatches"].as_array().is_some_and(|m| m.is_empty()), "{out}");
    assert!(v["unreadable"].as_array().is_some_and(|m| m.is_empty()), "{out}");

    // one stored count of one list, one higher (its rank stays)
    let db = rusqlite::Connection::open(dir.path().join("out.db")).expect("open store");
    let (start, group): (i64, String) = db
        .query_row(
            "SELECT window_start, group_key FROM topk WHERE job = 'explain' AND window_name = '30s' AND rank = 1
             ORDER BY window_start LIMIT 1 OFFSET 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("a 30s list");
    let changed = db
        .execute(
            "UPDATE topk SET count = count + 1 WHERE job = 'explain' AND window_name = '30s'
             AND window_start = ?1 AND group_key = ?2 AND rank = 1",
            rusqlite::params![start, group],
        )
        .expect("update");
    assert_eq!(changed, 1);
    drop(db);
    let (code, out) = verify(&[]);
    assert_eq!(code, Some(1), "{out}");
    let mismatches: Vec<&str> = out.lines().filter(|l| l.starts_with("MISMATCH")).collect();
    let instance = hotlist_operators::time::Millis(start).to_string();
    assert_eq!(mismatches.len(), 1, "{out}");
    assert!(
        mismatches[0].contains("window 30s") && mismatches[0].contains(&instance) && mismatches[0].contains("rank 1"),
        "{out}"
    );
    // only one window, or nothing in range
    assert_eq!(verify(&["--window", "10s"]).0, Some(0));
    let (code, out) = verify(&["--since", "2100-01-01T00:00:00Z"]);
    assert_eq!(code, Some(2), "{out}");
}

/// `hotlist verify --restore`, the restore drill: after a run with checkpoints that was killed
/// with SIGKILL and went on to the end, the oldest retained checkpoint restores into a scratch
/// store and the lists the run from it seals equal the store's (exit 0); with a file of that
/// checkpoint damaged, the drill fails (exit 1) saying so.
#[test]
fn the_restore_drill_passes_and_finds_a_damaged_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let mut big = shape();
    big.lines = 12_000;
    let parts = random_grouped_partitions(28, &big);
    write_partitions(&dir.path().join("in"), &parts).expect("write inputs");
    let config = format!(
        "{CONFIG}batch_size = 16\nmax_epochs_in_flight = 2\n[checkpoint]\ndir = \"ckpt\"\ninterval = \"20ms\"\nretain = 4\n"
    )
    .replace("batch_size = 64\n", "");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("write config");
    let db = dir.path().join("out.db");
    // killed once a checkpoint is committed, then run to the end
    let mut child = hotlist_tests::spawn_run(dir.path(), 2);
    let began = std::time::Instant::now();
    while hotlist_tests::sqlite_committed_epoch(&db, "explain").is_none() {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(60),
            "no commit within 60 s"
        );
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the run ended before a commit"
        );
        std::thread::yield_now();
    }
    let killed = child.try_wait().expect("try_wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(killed, "the run was still going when killed");
    run_hotlist(
        dir.path(),
        &[
            "run",
            "--config",
            "hotlist.toml",
            "--workers",
            "1",
            "--progress",
            "never",
        ],
        true,
    );
    let drill = |extra: &[&str]| {
        let args = [
            &["verify", "--config", "hotlist.toml", "--restore", "--json"][..],
            extra,
        ]
        .concat();
        let out = std::process::Command::new(hotlist_tests::hotlist_bin())
            .args(&args)
            .current_dir(dir.path())
            .output()
            .expect("run verify");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let v: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    };
    let (code, v) = drill(&[]);
    assert_eq!(code, Some(0), "{v}");
    assert!(v["checked_lists"].as_u64().is_some_and(|n| n > 0), "{v}");
    let epoch = v["restored_checkpoint"].as_u64().expect("restored_checkpoint");
    // the checkpoint it restores, damaged in place
    let counter = dir.path().join(format!("ckpt/explain/{epoch:020}/counter-0000.snap"));
    let mut bytes = std::fs::read(&counter).expect("read counter file");
    let (mid, len) = (bytes.len() / 2, bytes.len());
    for b in &mut bytes[mid..(mid + 8).min(len)] {
        *b ^= 0xff;
    }
    std::fs::write(&counter, bytes).expect("damage it");
    let (code, v) = drill(&["--checkpoint", &epoch.to_string()]);
    assert_eq!(code, Some(1), "{v}");
    let why = v["restore_failed"].as_str().expect("restore_failed");
    assert!(
        why.contains(&epoch.to_string()) || why.contains("counter-0000"),
        "{why}"
    );
}

/// With a user field mapped but no window counting distinct users (the job reads no users),
/// explain still names the distinct and top users of an item — read as an extra that never
/// changes a record's verdict, so the counts stay the job's.
#[test]
fn explain_reads_users_no_window_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let parts = random_grouped_partitions(29, &shape());
    write_partitions(&dir.path().join("in"), &parts).expect("write inputs");
    let start_of = CONFIG
        .find("[[window]]\nname = \"20s-users\"")
        .expect("the users window");
    let end_of = CONFIG[start_of..].find("[sink]").expect("the sink") + start_of;
    let config = format!("{}{}", &CONFIG[..start_of], &CONFIG[end_of..]);
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("write config");
    run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let evs = events(&parts, OOO);
    let start = busy_instances(&evs, 10_000, LATENESS)[0];
    let w = want(&evs, &of(10_000, start, None, false), "i1");
    let v = explain(dir.path(), "10s", "i1", start, None);
    assert_eq!(got(&v), w, "{v}");
    assert!(w.distinct_users > 1, "users to tell apart: {v}");
    assert_eq!(v["agrees"], Value::Bool(true), "{v}");
}

/// A generator whose `source.start` is `"now"` starts at the wall clock of each run, so its
/// events cannot be generated again: explain and verify say so in one line and exit 2 (before,
/// they read other events and reported nothing or a wrong count); with a fixed start both read
/// the generator's instances again and agree with the store.
#[test]
fn a_generator_started_now_cannot_be_read_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |start: &str| {
        format!(
            "[job]\nid = \"gen\"\n[source]\nkind = \"generator\"\nitems = 50\npartitions = 2\nevents = 4000\nrate = 100\n{start}\
             [[window]]\nname = \"10s\"\nsize = \"10s\"\nk = 5\n[sink]\nkind = \"sqlite\"\npath = \"out.db\"\n"
        )
    };
    let status = |args: &[&str]| {
        let out = std::process::Command::new(hotlist_tests::hotlist_bin())
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run hotlist");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let explain_args = [
        "explain",
        "--config",
        "hotlist.toml",
        "--window",
        "10s",
        "--item",
        "item-0",
        "--at",
        "1",
    ];
    std::fs::write(dir.path().join("hotlist.toml"), config("")).expect("config");
    run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let (code, stderr) = status(&explain_args);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("source.start"), "{stderr}");
    assert_eq!(status(&["verify", "--config", "hotlist.toml"]).0, Some(2));

    std::fs::remove_file(dir.path().join("out.db")).expect("remove store");
    std::fs::write(dir.path().join("hotlist.toml"), config("start = 0\n")).expect("config");
    run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let v = explain(dir.path(), "10s", "item-0", 1, None);
    assert_eq!(v["agrees"], Value::Bool(true), "{v}");
    assert!(v["count"].as_u64().is_some_and(|c| c > 0), "{v}");
    assert_eq!(status(&["verify", "--config", "hotlist.toml"]).0, Some(0));
}

//! The hot-key detector on the built binary: a stream where two keys surge past the threshold
//! and fall back, one key stays just under it all along, and a hundred background keys trickle.
//! At sample 1 the detector reports exactly the surging keys with their exact rates; at 1 in 10
//! and 1 in 100 the same keys in the same states, with rates within the sampling error. Entering
//! is `hot`, leaving goes through `cooling` (hysteresis) and then out. A run killed with SIGKILL
//! and restarted from its checkpoints stores the same `hot_keys` rows as an uninterrupted one;
//! a checkpoint without the detector's state, or of another `sample`, starts it afresh.

use hotlist_tests::kills::{kill_and_restart, KillPlan, KillReport};
use std::collections::BTreeMap;
use std::path::Path;

/// 2026-01-01T00:00:00Z: windows of 10 s start on it.
const T0: i64 = 1_767_225_600_000;
const WINDOW_MS: i64 = 10_000;
const WINDOWS: i64 = 10;
const THRESHOLD: f64 = 1000.0;
const HYSTERESIS: f64 = 0.5;

/// Events per second of `key` in window `w`.
fn rate(key: &str, w: i64) -> u32 {
    match (key, w) {
        // surges in windows 1-3, cools in 4 (750 ≥ 1000 × 0.5), gone in 5 (200 < 500)
        ("surge-a", 1..=3) => 4000,
        ("surge-a", 4) => 750,
        ("surge-a", 5) => 200,
        // surges in 5-6, cools in 7 and 8, gone in 9
        ("surge-b", 5..=6) => 4000,
        ("surge-b", 7..=8) => 750,
        ("surge-b", 9) => 200,
        // as fast as a cooling key, but never hot: hysteresis keeps keys, it never admits one
        ("steady", _) => 750,
        (bg, _) if bg.starts_with("bg-") => 2,
        _ => 0,
    }
}

fn keys() -> Vec<String> {
    let mut k: Vec<String> = ["surge-a", "surge-b", "steady"].map(String::from).to_vec();
    k.extend((0..100).map(|i| format!("bg-{i}")));
    k
}

/// Two partitions (files) of JSON lines in event-time order, events spread evenly over each
/// window and dealt to the partitions in turn.
fn write_input(dir: &Path) {
    let mut events: Vec<(i64, usize)> = Vec::new();
    let keys = keys();
    for w in 0..WINDOWS {
        for (k, key) in keys.iter().enumerate() {
            let n = i64::from(rate(key, w)) * WINDOW_MS / 1000;
            events.extend((0..n).map(|i| (T0 + w * WINDOW_MS + i * WINDOW_MS / n, k)));
        }
    }
    events.sort_unstable();
    let mut parts = [String::new(), String::new()];
    for (i, (ts, k)) in events.iter().enumerate() {
        parts[i % 2].push_str(&format!("{{\"item_id\":\"{}\",\"ts\":{ts}}}\n", keys[*k]));
    }
    std::fs::create_dir_all(dir.join("in")).expect("mkdir");
    for (p, text) in parts.iter().enumerate() {
        std::fs::write(dir.join(format!("in/part-{p}.jsonl")), text).expect("input");
    }
}

fn config(sample: u32, checkpoint: bool) -> String {
    let mut c = format!(
        r#"[job]
id = "hot"
[source]
kind = "file"
path = "in/*.jsonl"
[[window]]
name = "1m"
size = "1m"
k = 5
[sink]
kind = "sqlite"
path = "out.db"
[hot_keys]
sample = {sample}
window = "10s"
threshold = {THRESHOLD}
hysteresis = {HYSTERESIS}
"#
    );
    if checkpoint {
        c.push_str(
            "[checkpoint]\ndir = \"ckpt\"\ninterval = \"20ms\"\n[run]\nepoch_interval = \"5ms\"\nbatch_size = 2048\n",
        );
    }
    c
}

fn setup(sample: u32, checkpoint: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    std::fs::write(dir.path().join("hotlist.toml"), config(sample, checkpoint)).expect("config");
    dir
}

/// Per window start (relative to T0, in windows): the reported (key, state, rate), by key.
type Reports = BTreeMap<i64, Vec<(String, String, f64)>>;

/// What the store holds: every closed window (also those without keys) and its keys.
fn stored(db: &Path) -> Reports {
    let conn = rusqlite::Connection::open(db).expect("open");
    let mut out = Reports::new();
    let mut w = conn
        .prepare("SELECT window_start, window_end, key_count FROM hot_key_windows WHERE job = 'hot'")
        .expect("prepare");
    let rows = w
        .query_map([], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        })
        .expect("query");
    for row in rows {
        let (start, end, _) = row.expect("row");
        assert_eq!(end - start, WINDOW_MS);
        out.insert((start - T0) / WINDOW_MS, Vec::new());
    }
    let mut k = conn
        .prepare(
            "SELECT window_start, item_id, state, rate FROM hot_keys WHERE job = 'hot' ORDER BY window_start, item_id",
        )
        .expect("prepare");
    let rows = k
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("query");
    for row in rows {
        let (start, key, state, rate) = row.expect("row");
        out.entry((start - T0) / WINDOW_MS)
            .or_default()
            .push((key, state, rate));
    }
    out
}

/// The reports the detector must give: per window, the keys and states.
fn expected() -> BTreeMap<i64, Vec<(&'static str, &'static str)>> {
    let mut want: BTreeMap<i64, Vec<(&str, &str)>> = (0..WINDOWS).map(|w| (w, Vec::new())).collect();
    for w in 1..=3 {
        want.insert(w, vec![("surge-a", "hot")]);
    }
    want.insert(4, vec![("surge-a", "cooling")]);
    want.insert(5, vec![("surge-b", "hot")]);
    want.insert(6, vec![("surge-b", "hot")]);
    want.insert(7, vec![("surge-b", "cooling")]);
    want.insert(8, vec![("surge-b", "cooling")]);
    want
}

fn run_to_end(dir: &Path) {
    hotlist_tests::run_hotlist(dir, &["run", "--config", "hotlist.toml", "--progress", "never"], true);
}

/// Checks the reported keys and states exactly, and each rate against the true rate: exactly
/// at sample 1, else within 4 standard deviations of the sampled count (a binomial draw).
fn check(sample: u32, got: &Reports) {
    let shape: BTreeMap<i64, Vec<(&str, &str)>> = got
        .iter()
        .map(|(w, keys)| (*w, keys.iter().map(|(k, s, _)| (k.as_str(), s.as_str())).collect()))
        .collect();
    assert_eq!(shape, expected(), "sample {sample}: {got:?}");
    for (w, keys) in got {
        for (key, _, r) in keys {
            let truth = f64::from(rate(key, *w));
            if sample == 1 {
                assert_eq!(*r, truth, "window {w} {key}");
            } else {
                let n = f64::from(sample);
                let sampled = truth * (WINDOW_MS as f64 / 1000.0) / n;
                let tolerance = 4.0 * sampled.sqrt() * n / (WINDOW_MS as f64 / 1000.0);
                assert!(
                    (r - truth).abs() <= tolerance,
                    "sample {sample} window {w} {key}: rate {r}, true {truth} ± {tolerance}"
                );
            }
        }
    }
}

#[test]
fn surging_keys_are_reported_exactly_at_sample_1_10_and_100() {
    for sample in [1, 10, 100] {
        let dir = setup(sample, false);
        run_to_end(dir.path());
        check(sample, &stored(&dir.path().join("out.db")));
    }
}

fn committed(dir: &Path) -> Option<u64> {
    hotlist_tests::sqlite_committed_epoch(&dir.join("out.db"), "hot")
}

fn spawn(dir: &Path) -> std::process::Child {
    hotlist_tests::spawn_run(dir, 2)
}

/// Killed with SIGKILL after its first checkpoints and restarted until it ends, the job stores
/// the same hot-key rows (keys, states, rates) as an uninterrupted run.
#[test]
fn a_restart_from_a_checkpoint_gives_identical_hot_keys() {
    let clean = setup(10, true);
    run_to_end(clean.path());
    let want = stored(&clean.path().join("out.db"));
    check(10, &want);

    let dir = setup(10, true);
    // killed once this run has committed checkpoints of its own (twice, the first time)
    let plan = KillPlan {
        attempts: 4,
        kills: 3,
        commits_before_kill: (2, 1),
        jitter_ms: 0,
        seed: 0,
    };
    let KillReport { kills, restored, logs } = kill_and_restart(&plan, |_| spawn(dir.path()), || committed(dir.path()));
    assert!(kills >= 1, "never killed:\n{logs}");
    assert!(restored >= 1, "no restart restored a checkpoint:\n{logs}");
    let got = stored(&dir.path().join("out.db"));
    assert_eq!(got, want, "hot_keys rows after {kills} kills\n{logs}");
}

/// A checkpoint without the detector's state (the job had no `[hot_keys]`), or of another
/// `sample`, restores all the same: the detector starts afresh and says so.
#[test]
fn a_checkpoint_of_other_settings_starts_the_detector_afresh() {
    let dir = setup(10, true);
    // the same job without its [hot_keys] section (which comes just before [checkpoint])
    let with = config(10, true);
    let (head, rest) = with.split_once("[hot_keys]\n").expect("a [hot_keys] section");
    let (_, tail) = rest.split_once("[checkpoint]").expect("a [checkpoint] section");
    let without = format!("{head}[checkpoint]{tail}");
    std::fs::write(dir.path().join("hotlist.toml"), &without).expect("config");
    run_to_end(dir.path());
    let stderr = |dir: &Path| {
        let out = spawn(dir).wait_with_output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    std::fs::write(dir.path().join("hotlist.toml"), config(10, true)).expect("config");
    let err = stderr(dir.path());
    assert!(
        err.contains("has no hotkeys.snap: the hot-key detector starts afresh"),
        "{err}"
    );
    std::fs::write(dir.path().join("hotlist.toml"), config(100, true)).expect("config");
    let err = stderr(dir.path());
    assert!(
        err.contains("was taken with another hot_keys sample, window or sketch size"),
        "{err}"
    );
}

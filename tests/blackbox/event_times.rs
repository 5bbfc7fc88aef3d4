//! Event times on the built binary: events outside years 0000–9999 and events further ahead than
//! `time.max_future` are bad records that move no watermark (files, the generator), the
//! extremes of the range reach real PostgreSQL without ever failing a commit, and start times
//! may be written as TOML datetimes.

use hotlist_tests::pg_schema::PgSchema;
use hotlist_tests::run_hotlist;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
[job]
id = "t"
[source]
kind = "file"
path = "in/*.jsonl"
[time]
max_out_of_orderness = "1s"
allowed_lateness = "10s"
emit_interval = "10ms"
[[window]]
name = "1m"
size = "1m"
k = 10
[[window]]
name = "1d"
size = "1d"
k = 10
[sink]
path = "out.db"
[run]
epoch_interval = "5ms"
"#;

/// The earliest and latest event times (0000-01-01T00:00:00.000Z, 9999-12-31T23:59:59.999Z).
const MIN_EVENT: i64 = -62_167_219_200_000;
const MAX_EVENT: i64 = 253_402_300_799_999;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// A directory with `in/a.jsonl` holding `lines` and `hotlist.toml` holding `config`.
fn input(lines: &[String], config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    std::fs::write(dir.path().join("in/a.jsonl"), lines.join("\n") + "\n").expect("input");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    dir
}

fn run(dir: &Path) -> String {
    let out = run_hotlist(dir, &["run", "--config", "hotlist.toml", "--progress", "never"], true);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every dead letter of job `t`: (position, reason, detail, raw), in position order.
fn dead_letters(db: &Path) -> Vec<(u64, String, String, Vec<u8>)> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare("SELECT position, reason, detail, raw FROM dead_letters WHERE job = 't' ORDER BY partition, position")
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .expect("query");
    rows.collect::<Result<_, _>>().expect("rows")
}

/// Sum of the counts in window `w`'s lists, and its newest instance start.
fn counted(db: &Path, w: &str) -> (i64, i64) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    conn.query_row(
        "SELECT (SELECT sum(count) FROM topk WHERE job = 't' AND window_name = ?1),
                (SELECT max(window_start) FROM topk_instances WHERE job = 't' AND window_name = ?1)",
        [w],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .expect("query")
}

fn event(item: &str, ts: impl std::fmt::Display) -> String {
    format!(r#"{{"item_id":"{item}","ts":{ts}}}"#)
}

/// One event at year 285,000 and three ahead of the wall clock by more than `max_future` (1 h)
/// among on-time events of one file: the first is `bad`, the others `future`; none moves the
/// watermark, so the on-time events after them are counted (not late), and each window's
/// latest list is a real instance of now, not of the far future.
#[test]
fn far_and_near_future_events_move_no_watermark() {
    let now = now_ms();
    let base = now - 10 * 60_000;
    let lines = [
        event("a", base),
        event("b", base + 1_000),
        event("x", 9_000_000_000_000_000i64),
        event("y", now + 2 * 3_600_000),
        event("y", "\"9999-12-31T23:59:59.999Z\""),
        event("y", MAX_EVENT),
        event("c", base + 2_000),
        event("d", base + 30_000),
    ];
    let dir = input(&lines, CONFIG);
    let stdout = run(dir.path());
    assert!(stdout.contains("8 records, 4 events"), "{stdout}");
    assert!(stdout.contains(" 4 bad, 0 late "), "{stdout}");
    let dead = dead_letters(&dir.path().join("out.db"));
    let reasons: Vec<(u64, &str)> = dead.iter().map(|d| (d.0, d.1.as_str())).collect();
    assert_eq!(reasons, [(3, "bad"), (4, "future"), (5, "future"), (6, "future")]);
    assert_eq!(dead[0].2, "ts 9000000000000000 is outside years 0000-9999");
    assert!(
        dead[1]
            .2
            .contains("is more than time.max_future (1h) ahead of the wall clock at read time"),
        "{}",
        dead[1].2
    );
    assert_eq!(dead[1].3, lines[3].as_bytes(), "raw bytes as read");
    for w in ["1m", "1d"] {
        let (sum, newest) = counted(&dir.path().join("out.db"), w);
        assert_eq!(sum, 4, "every on-time event counted in {w}");
        assert!(
            newest <= now,
            "{w}'s latest instance starts at {newest}, after now ({now})"
        );
    }
}

/// Times outside the range — `i64::MIN`, `i64::MAX`, beyond `u64`, one millisecond past either
/// end, an RFC 3339 time before year 0 by its offset — are `bad` dead letters, never silently
/// dropped; the first instant of year 0 is an event, counted in a list like every accepted one.
#[test]
fn events_outside_the_range_are_dead_lettered_never_dropped() {
    let now = now_ms();
    let lines = [
        event("x", i64::MIN),
        event("x", i64::MAX),
        event("x", u64::MAX),
        event("x", MIN_EVENT - 1),
        event("x", MAX_EVENT + 1),
        event("x", "\"0000-01-01T00:00:00+01:00\""),
        event("x", "\"0000-01-01T00:59:59.999+01:00\""),
        event("zero", "\"0000-01-01T00:00:00Z\""),
        event("now", now),
    ];
    let dir = input(&lines, CONFIG);
    let stdout = run(dir.path());
    assert!(stdout.contains("9 records, 2 events"), "{stdout}");
    let dead = dead_letters(&dir.path().join("out.db"));
    let got: Vec<(u64, &str)> = dead.iter().map(|d| (d.0, d.1.as_str())).collect();
    assert_eq!(got, (1..=7).map(|p| (p, "bad")).collect::<Vec<_>>());
    assert_eq!(dead[0].2, "ts -9223372036854775808 is outside years 0000-9999");
    assert_eq!(
        dead[5].2,
        r#"ts "0000-01-01T00:00:00+01:00" is outside years 0000-9999"#
    );
    for w in ["1m", "1d"] {
        assert_eq!(
            counted(&dir.path().join("out.db"), w).0,
            2,
            "both events are in {w}'s lists"
        );
    }
    let conn = rusqlite::Connection::open(dir.path().join("out.db")).expect("open db");
    let zero: String = conn
        .query_row(
            "SELECT item_id FROM topk WHERE job = 't' AND window_name = '1d' AND window_start = ?1",
            [MIN_EVENT],
            |r| r.get(0),
        )
        .expect("the year-0 instance");
    assert_eq!(zero, "zero");
}

/// Generated events skip the parser but not the range rule: a generator running past the end
/// of year 9999 produces `bad` dead letters at the source (counted as bad records, raw = the
/// event as JSON), and the events before the end are counted.
#[test]
fn generated_events_outside_the_range_are_bad_records() {
    let config = format!(
        "[job]\nid = \"t\"\n[source]\nkind = \"generator\"\nitems = 3\npartitions = 1\nevents = 6\nrate = 1\n\
         start = {}\n[time]\nmax_future = \"10000y\"\n[[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 10\n\
         [sink]\npath = \"out.db\"\n",
        MAX_EVENT - 2_500
    );
    let dir = input(&[], &config);
    let stdout = run(dir.path());
    assert!(
        stdout.contains("6 records, 3 events")
            && stdout.contains(" 3 bad, 0 late (0 counted nowhere), 0 sealed-dropped"),
        "{stdout}"
    );
    let dead = dead_letters(&dir.path().join("out.db"));
    assert_eq!(dead.iter().map(|d| d.0).collect::<Vec<_>>(), [4, 5, 6]);
    for (d, ts) in dead.iter().zip([MAX_EVENT + 500, MAX_EVENT + 1_500, MAX_EVENT + 2_500]) {
        assert_eq!(
            (d.1.as_str(), d.2.clone()),
            ("bad", format!("ts {ts} is outside years 0000-9999"))
        );
        let raw: serde_json::Value = serde_json::from_slice(&d.3).expect("the event as JSON");
        assert_eq!(raw["ts"], ts);
    }
    assert_eq!(counted(&dir.path().join("out.db"), "1m").0, 3);
}

/// `source.start` written as an unquoted TOML datetime (in `--set`, where TOML reads
/// `2026-11-29T10:00:00Z` as a datetime, not a string) is a time. (`source.start_time` likewise:
/// `tests/blackbox/kafka/` reprocesses from one.)
#[test]
fn start_times_may_be_toml_datetimes() {
    let config = "[job]\nid = \"t\"\n[source]\nkind = \"generator\"\nitems = 3\npartitions = 1\nevents = 5\n\
                  [[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 10\n[sink]\npath = \"out.db\"\n";
    let dir = input(&[], config);
    let out = run_hotlist(
        dir.path(),
        &[
            "run",
            "--config",
            "hotlist.toml",
            "--progress",
            "never",
            "--set",
            "source.start=2026-11-29T10:00:00Z",
        ],
        true,
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("5 events"));
    // 2026-11-29T10:00:00Z: the events' minute
    assert_eq!(counted(&dir.path().join("out.db"), "1m"), (5, 1_795_946_400_000));
}

/// The windows and times of the PostgreSQL tests: `1d` tumbling and `1d` every hour (whose
/// instances of an event at year 0 start in 1 BC), with allowed lateness.
const PG_TIMES: &str = "[job]\nid = \"t\"\n[time]\nmax_out_of_orderness = \"5s\"\nallowed_lateness = \"1h\"\n\
    emit_interval = \"10ms\"\nmax_future = \"10000y\"\n[[window]]\nname = \"1d\"\nsize = \"1d\"\nk = 5\n\
    [[window]]\nname = \"1d-hop\"\nsize = \"1d\"\nslide = \"1h\"\nk = 5\n[run]\nepoch_interval = \"5ms\"\n";

/// Events at both ends of the range and just beyond, and beyond PostgreSQL's `timestamptz`
/// range, into real PostgreSQL: the ones outside are `bad`, the instances of the ends (from
/// 1 BC to 10000-01-01) are stored, commits never fail, a later event is counted, and a
/// second run over the same input (a restart re-reads it) exits 0 too.
#[test]
fn extreme_event_times_into_postgres() {
    // the local PostgreSQL: not while a test restarts it
    let _postgres = hotlist_tests::serial::postgres();
    let pg = PgSchema::new("hotlist_times");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let files = [
        (
            "a",
            vec![
                event("zero", MIN_EVENT),
                event("x", MIN_EVENT - 1),
                event("x", -210_866_803_200_001i64),
            ],
        ),
        (
            "b",
            vec![
                event("nine", MAX_EVENT),
                event("x", 9_000_000_000_000_000i64),
                event("x", MAX_EVENT + 1),
                event("x", 9_224_318_016_000_000i64),
                event("x", i64::MAX),
            ],
        ),
        ("c", vec![event("later", 1_700_000_000_000i64)]),
    ];
    for (name, lines) in &files {
        std::fs::write(dir.path().join(format!("in/{name}.jsonl")), lines.join("\n") + "\n").expect("input");
    }
    let config = format!(
        "{PG_TIMES}[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n{}",
        pg.sink()
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    for run in 1..=2 {
        let stdout = self::run(dir.path());
        assert!(
            stdout.contains("9 records, 3 events") && stdout.contains(" 6 bad,"),
            "run {run}: {stdout}"
        );
        assert_eq!(pg_dead_letters(&pg), 6 * run, "run {run}");
    }
    let rows = pg_rows(&pg);
    let day = 86_400_000;
    for want in [
        ("1d".to_string(), MIN_EVENT, "zero".to_string(), 1),
        ("1d".to_string(), MAX_EVENT + 1 - day, "nine".to_string(), 1),
        ("1d-hop".to_string(), MIN_EVENT - 23 * 3_600_000, "zero".to_string(), 1),
        (
            "1d".to_string(),
            1_700_000_000_000 - 1_700_000_000_000 % day,
            "later".to_string(),
            1,
        ),
    ] {
        assert!(rows.contains(&want), "{want:?} in {rows:?}");
    }
}

/// A watermark before PostgreSQL's range (an event at year 0 with `max_out_of_orderness` of
/// 4,800 years puts its partition's watermark in 4801 BC) is stored as `-infinity`: commits go
/// on, and a later event is counted.
#[test]
fn a_watermark_before_postgres_range_is_stored_as_minus_infinity() {
    // the local PostgreSQL: not while a test restarts it
    let _postgres = hotlist_tests::serial::postgres();
    let pg = PgSchema::new("hotlist_times");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "{}[source]\nkind = \"file\"\npath = \"-\"\n{}",
        PG_TIMES.replace("\"5s\"", "\"4800y\""),
        pg.sink()
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let mut child = Command::new(hotlist_tests::hotlist_bin())
        .args(["run", "--config", "hotlist.toml", "--progress", "never"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", event("zero", MIN_EVENT)).expect("write");
    stdin.flush().expect("flush");
    // wait for the year-0 instance's provisional list, computed at that watermark
    let deadline = Instant::now() + Duration::from_secs(60);
    let watermark = loop {
        let found = pg.client().query_opt(
            "SELECT watermark::text FROM topk_instances WHERE job = 't' AND window_name = '1d'",
            &[],
        );
        if let Ok(Some(row)) = found {
            break row.get::<_, String>(0);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let err = child.stderr.take().map(std::io::read_to_string);
            panic!("the job exited ({status}) before committing: {err:?}");
        }
        assert!(Instant::now() < deadline, "no list of the year-0 instance within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(watermark, "-infinity");
    writeln!(stdin, "{}", event("later", 1_700_000_000_000i64)).expect("write");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(pg_rows(&pg).iter().any(|r| r.2 == "later"));
}

/// A window so long that its instances of an event at year 0 would start before PostgreSQL's
/// range is refused when the job starts (one clear line), not when such an event arrives.
#[test]
fn a_window_postgres_cannot_hold_is_refused_at_start() {
    // the local PostgreSQL: not while a test restarts it
    let _postgres = hotlist_tests::serial::postgres();
    let pg = PgSchema::new("hotlist_times");
    let dir = input(&[event("zero", MIN_EVENT)], "");
    let config = format!(
        "{PG_TIMES}[[window]]\nname = \"huge\"\nsize = \"5000y\"\nk = 5\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n{}",
        pg.sink()
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let out = run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        false,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot prepare the sink")
            && err.contains("window \"huge\"")
            && err.contains("PostgreSQL's timestamptz range"),
        "{err}"
    );
}

/// (window, start ms, item, count) of every stored row of job `t`.
fn pg_rows(pg: &PgSchema) -> Vec<(String, i64, String, i64)> {
    let rows = pg
        .client()
        .query(
            "SELECT window_name, (extract(epoch from window_start) * 1000)::bigint, item_id, count FROM topk \
             WHERE job = 't' ORDER BY window_name, window_start, rank",
            &[],
        )
        .expect("query topk");
    rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect()
}

/// The dead letters of job `t` in the schema (whole letters and summaries' counts).
fn pg_dead_letters(pg: &PgSchema) -> i64 {
    pg.client()
        .query_one(
            "SELECT coalesce(sum(count), 0)::bigint FROM dead_letters WHERE job = 't'",
            &[],
        )
        .expect("count")
        .get(0)
}

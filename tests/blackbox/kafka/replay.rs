//! Reading again: reprocessing from a point in time, and `exact_at_seal`'s replays by offset.

use super::broker::retention_deletes_below;
use super::harness::{
    a_then_b, messages, pause_cut_off, produce_data_set_b, read_parts, results, run_to_the_end, setup, signal,
    spawn_with, stop_gracefully, DeadAt, Metrics, BATCH,
};
use hotlist_tests::model;
use hotlist_tests::run_hotlist;
use std::time::{Duration, Instant};

/// Reprocessing from a point in time: after data set A, then (later) data set B were produced,
/// a bounded run under a fresh job id with `source.start_time` = the moment between them sees
/// exactly B (= the model of B alone, dead letters at their offsets), and the live job's
/// results (= the model of A then B) are untouched by it.
#[test]
fn reprocessing_from_a_point_in_time_sees_only_newer_messages() {
    let s = setup("events", false);
    // a moment strictly after every message of A (message timestamps are milliseconds)
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis() as i64
    };
    let between = now_ms() + 1;
    while now_ms() <= between {
        std::thread::yield_now();
    }
    let (a, b) = produce_data_set_b(&s);
    let a_messages: Vec<u64> = a.iter().map(|l| (l.len() as u64).div_ceil(BATCH)).collect();
    let dead_at = |dead: model::Dead, parts: &[Vec<Vec<u8>>], skip: &dyn Fn(u32, u64) -> u64| {
        let mut v: Vec<_> = dead
            .into_iter()
            .map(|(p, pos, reason)| (p, skip(p, pos), reason, parts[p as usize][pos as usize - 1].clone()))
            .collect();
        v.sort();
        v
    };
    // B alone, at offsets after A's messages
    let (want_b, dead_b) = model::run(&b, &model::crash_windows(), 2_000, 30_000);
    let want_b_dead = dead_at(dead_b, &b, &|p, pos| a_messages[p as usize] + (pos - 1) / BATCH);
    // A then B in each partition
    let ab = a_then_b(&a, &b);
    let (want_ab, dead_ab) = model::run(&ab, &model::crash_windows(), 2_000, 30_000);
    let want_ab_dead = dead_at(dead_ab, &ab, &|p, pos| {
        let len_a = a[p as usize].len() as u64;
        if pos <= len_a {
            (pos - 1) / BATCH
        } else {
            a_messages[p as usize] + (pos - len_a - 1) / BATCH
        }
    });
    assert_ne!(want_b, want_ab, "the data sets differ where it shows");

    let run = |extra: &[&str]| {
        let args = [
            &["run", "--config", "hotlist.toml", "--progress", "never", "--bounded"][..],
            extra,
        ]
        .concat();
        run_hotlist(s.dir.path(), &args, true)
    };
    let full = |job: &str| {
        let db = s.dir.path().join("out.db");
        let conn = rusqlite::Connection::open(&db).expect("open db");
        let mut stmt = conn
            .prepare("SELECT partition, position, reason, raw FROM dead_letters WHERE job = ?1")
            .expect("prepare");
        let mut dead: Vec<(u32, u64, String, Option<Vec<u8>>)> = stmt
            .query_map([job], |r| {
                let reason: String = r.get(2)?;
                // (the raw bytes of `bad` ones; a late event's are its line too, checked elsewhere)
                let raw = if reason == "bad" { Some(r.get(3)?) } else { None };
                Ok((r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u64, reason, raw))
            })
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        dead.sort();
        (hotlist_tests::sqlite_sealed_lists(&db, job), dead)
    };
    let with_raw = |v: Vec<DeadAt>| -> Vec<(u32, u64, String, Option<Vec<u8>>)> {
        v.into_iter()
            .map(|(p, o, r, raw)| {
                let raw = (r == "bad").then_some(raw);
                (p, o, r, raw)
            })
            .collect()
    };
    run(&[]);
    let live = full("kafka");
    assert_eq!(live.0, want_ab, "the live job read A then B");
    // unquoted: TOML reads it as a datetime, which is a time like the string
    let start = format!(
        "source.start_time={}",
        hotlist_operators::time::Millis(between).to_rfc3339()
    );
    let out = run(&["--set", "job.id=\"replay\"", "--set", &start]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("older messages skipped"), "the start is logged: {log}");
    let replay = full("replay");
    assert_eq!(replay.0, want_b, "the replay read exactly B");
    assert_eq!(replay.1, with_raw(want_b_dead), "B's dead letters at their offsets");
    assert_eq!(full("kafka"), live, "the live job's results are untouched");
    assert_eq!(live.1, with_raw(want_ab_dead), "the live job's dead letters");
}

/// `exact_at_seal` over Kafka (docs/exact-at-seal.md): a bounded run's sealed lists, counted by
/// tiny sketches, are replayed by offset with a second consumer and published exact, with a
/// certificate, equal to the model's. In a live run, retention deletes the start of partition
/// 0's range after the run read it and before the instances seal: their replays cannot read
/// it again, so those lists stay approximate, the reason is logged and
/// `hotlist_exact_at_seal_failures_total` counts them.
#[test]
fn exact_at_seal_replays_by_offset_and_a_range_retention_removed_stays_approximate() {
    let mut s = setup("events", false);
    let sketch = "mode = \"sketch\"\nexact_at_seal = true\n[window.sketch]\nepsilon = 0.2\ndelta = 0.3";
    let path = s.dir.path().join("hotlist.toml");
    let config = std::fs::read_to_string(&path).expect("config");
    let config = config.replacen("k = 5\n", &format!("k = 5\n{sketch}\n"), 1).replacen(
        "k = 4\n",
        &format!("k = 4\n{sketch}\n"),
        1,
    );
    std::fs::write(&path, config).expect("config");
    run_to_the_end(s.dir.path(), 2);
    assert_eq!(results(s.dir.path()), s.want, "exact lists, the model's");
    let conn = rusqlite::Connection::open(s.dir.path().join("out.db")).expect("open db");
    let uncertified: i64 = conn
        .query_row(
            "SELECT count(*) FROM topk_instances WHERE job = 'kafka' AND (exact = 0 OR certificate_passes IS NULL)",
            [],
            |r| r.get(0),
        )
        .expect("query");
    assert_eq!(uncertified, 0, "every sealed list was replayed and certified");

    // live, under another job id: A read, then retention removes half of partition 0's A
    let a = messages(&read_parts(&s.dir.path().join("files")));
    let metrics = Metrics::new();
    let live = [
        "--metrics-addr",
        &metrics.addr,
        "--set",
        "source.bounded=false",
        "--set",
        "job.id=\"live\"",
    ];
    let mut child = spawn_with(s.dir.path(), 1, &live);
    metrics.wait_for_records(6000, &mut child, "A");
    pause_cut_off(&child, &mut s.broker);
    s.broker.edit_storage(&retention_deletes_below("events", 0, a[0] / 2));
    produce_data_set_b(&s); // event time from 60 s: A's instances seal
    signal(&child, "CONT");
    let deadline = Instant::now() + Duration::from_secs(60);
    while Metrics::sum(&metrics.scrape(), "hotlist_exact_at_seal_failures_total", "") == 0 {
        assert!(Instant::now() < deadline, "no replay failed: {}", metrics.scrape());
        assert!(child.try_wait().expect("try_wait").is_none(), "the live run ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = stop_gracefully(child);
    assert!(
        err.lines()
            .any(|l| l.contains("the sealed list stays approximate") && l.contains("partition 0")),
        "{err}"
    );
    let approximate: i64 = conn
        .query_row(
            "SELECT count(*) FROM topk_instances WHERE job = 'live' AND final = 1 AND exact = 0 AND certificate_passes IS NULL",
            [],
            |r| r.get(0),
        )
        .expect("query");
    assert!(approximate >= 1, "A's sealed lists stay approximate");
}

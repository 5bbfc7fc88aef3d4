//! Partition discovery: partitions added while the job runs.

use super::broker::add_partitions;
use super::harness::{
    dead_by_partition, produce_more, results, run_to_the_end, setup, spawn_with, stop_gracefully, Metrics, Parts,
};
use hotlist_tests::model;
use std::time::{Duration, Instant};

/// Partitions added to the topic while a live run reads it (tansu cannot add partitions through
/// the Kafka protocol; the test adds them in its storage, with the broker briefly stopped): the
/// run finds them within `source.partition_discovery` and reads them without a restart, from
/// their first message; its checkpoints carry them (a bounded run restores and seals), and the
/// results are the model of A then B over all five partitions.
#[test]
fn partitions_added_while_the_job_runs_are_read_without_a_restart() {
    let mut s = setup("events", true);
    let metrics = Metrics::new();
    let live = [
        "--metrics-addr",
        &metrics.addr,
        "--set",
        "source.bounded=false",
        "--set",
        "source.partition_discovery=\"100ms\"",
        // nothing goes idle: the global watermark waits for every partition, new ones included
        "--set",
        "time.idle_timeout=\"10m\"",
    ];
    let mut child = spawn_with(s.dir.path(), 2, &live);
    metrics.wait_for_records(6000, &mut child, "A");
    s.broker.edit_storage(&add_partitions("events", 3, 5));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !metrics
        .scrape()
        .lines()
        .any(|l| l.starts_with("hotlist_records_total{") && l.contains("partition=\"4\""))
    {
        assert!(child.try_wait().expect("try_wait").is_none(), "the live run ended");
        assert!(Instant::now() < deadline, "the new partitions were not found");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (a, b) = produce_more(&s, &["source.partitions=5"], "files-b");
    assert_eq!(b.len(), 5);
    metrics.wait_for_records(9000, &mut child, "B, in five partitions");
    let err = stop_gracefully(child);
    assert!(err.contains("the topic has 5 partitions now (was 3)"), "{err}");
    run_to_the_end(s.dir.path(), 1);
    let parts: Parts = (0..5)
        .map(|p| [a.get(p).cloned().unwrap_or_default(), b[p].clone()].concat())
        .collect();
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    assert_eq!(results(s.dir.path()).0, want.0, "sealed lists = the model of A then B");
    assert_eq!(results(s.dir.path()).1, dead_by_partition(&want.1), "dead letters");
    assert!(
        want.1.iter().any(|d| d.0 == 4),
        "dead letters of a new partition are stored"
    );
    let conn = rusqlite::Connection::open(s.dir.path().join("out.db")).expect("open db");
    let source: String = conn
        .query_row(
            "SELECT group_concat(DISTINCT source) FROM dead_letters WHERE job = 'kafka' AND partition = 4",
            [],
            |r| r.get(0),
        )
        .expect("the new partition's dead letters");
    assert_eq!(source, "kafka:events/4", "named like the others");
}

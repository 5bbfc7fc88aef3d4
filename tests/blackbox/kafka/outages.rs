//! Outages: the broker stopped for 10 s, and PostgreSQL restarted, under a live run.

use super::harness::{
    a_then_b, dead_by_partition, produce_data_set_b, results, run_to_the_end, setup, spawn, spawn_with,
    stop_gracefully, Metrics, PgSchema,
};
use hotlist_tests::model;
use std::process::{Child, Command};
use std::time::Duration;

/// The broker stopped for 10 s in the middle of a live run: the job keeps running (reporting
/// each partition's consumer lag), resumes by itself when the broker is back and reads what is
/// produced after the outage; after a graceful stop, a bounded run finishes the topic, and the
/// results are exact (= the model of data set A, then B).
///
/// The run is live, so it cannot end before the outage: "mid-run" is a state the test waits for
/// (every record of A read), never a race against a bounded run that librdkafka's prefetch lets
/// finish while the broker is down.
#[test]
fn broker_outage_of_ten_seconds_is_survived() {
    let mut s = setup("events", true);
    let metrics = Metrics::new();
    let mut child = spawn_with(
        s.dir.path(),
        2,
        &["--metrics-addr", &metrics.addr, "--set", "source.bounded=false"],
    );
    let wait_for_records = |n: u64, child: &mut Child, what: &str| metrics.wait_for_records(n, child, what);
    wait_for_records(6000, &mut child, "before the outage");
    s.broker.stop();
    std::thread::sleep(Duration::from_secs(10)); // the outage itself
    let body = metrics.scrape();
    // the job's metrics show each partition's consumer lag (from librdkafka's cached offsets)
    assert!(
        body.lines().any(|l| l.starts_with("hotlist_partition_consumer_lag{")),
        "{body}"
    );
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the job kept running without the broker"
    );
    s.broker.restart();
    let (a, b) = produce_data_set_b(&s);
    let want_ab = model::run(&a_then_b(&a, &b), &model::crash_windows(), 2_000, 30_000);
    wait_for_records(9000, &mut child, "after the outage");
    stop_gracefully(child);
    // the graceful stop committed what was read; a bounded run restores it and seals the rest
    run_to_the_end(s.dir.path(), 1);
    assert_eq!(results(s.dir.path()).0, want_ab.0, "sealed lists = model of A then B");
    assert_eq!(results(s.dir.path()).1, dead_by_partition(&want_ab.1), "dead letters");
}

/// Kafka → PostgreSQL, checkpointed: killed with SIGKILL twice, then PostgreSQL itself is
/// restarted under a live run that keeps committing. The job retries and reconnects by itself
/// (it commits again after the restart); after a graceful stop a bounded run seals the rest,
/// and the sealed `topk` rows and dead letters in PostgreSQL equal the model.
#[test]
fn kafka_into_postgres_survives_sigkill_and_a_postgres_restart() {
    // restarts the local PostgreSQL: while no other test uses it
    let _postgres = hotlist_tests::serial::postgres_alone();
    let version = std::fs::read_dir("/etc/postgresql")
        .ok()
        .and_then(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).max())
        .expect("a local PostgreSQL cluster managed by pg_ctlcluster (scripts/test sets it up)");
    let s = setup("events", true);
    let pg = PgSchema::new();
    pg.use_for(&s);
    let mut logs = String::new();
    for kill in 0..2 {
        let before = pg.committed("kafka");
        let mut child = spawn(s.dir.path(), 1 + kill % 2);
        pg.await_commit_after("kafka", before, &mut child, &format!("before kill {kill}:\n{logs}"));
        let _ = child.kill();
        logs.push_str(&String::from_utf8_lossy(
            &child.wait_with_output().expect("wait").stderr,
        ));
    }
    // a live run (it cannot end before the restart; it commits a checkpoint every 10 ms, idle
    // or not): restart PostgreSQL under it once it has committed again, and wait until it
    // commits after the restart
    let before = pg.committed("kafka");
    let mut child = spawn_with(s.dir.path(), 2, &["--set", "source.bounded=false"]);
    pg.await_commit_after("kafka", before, &mut child, "before the restart");
    let restart = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status();
    assert!(
        restart.is_ok_and(|s| s.success()),
        "cannot restart PostgreSQL {version}"
    );
    let at_restart = pg.committed("kafka");
    pg.await_commit_after("kafka", at_restart, &mut child, "after the restart");
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "graceful stop: {logs}{err}");
    assert!(
        err.contains("sink commit failed") && err.contains("retrying"),
        "the restart hit a commit:\n{err}"
    );
    // the topic is read: a bounded run restores the last checkpoint and seals every window
    run_to_the_end(s.dir.path(), 1);
    let (lists, dead) = pg.results("kafka");
    assert_eq!(lists, s.want.0, "{logs}{err}");
    assert_eq!(dead, s.want_dead, "{logs}{err}");
}

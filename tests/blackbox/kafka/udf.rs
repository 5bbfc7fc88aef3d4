//! The UDF job of `../udf.rs` (ids by `normalize_url`, groups by `country_of` next to a pointer
//! dim, the `is_human` filter) over Kafka: its records produced one per message into a topic of
//! 2 partitions, a bounded run on 1 and 2 workers equals the same model as over files: the
//! sealed lists, the dead letters at their offsets with their details, the filtered count.

use super::broker::Broker;
use super::harness::GENERATOR;
use crate::udf::{
    assert_details, expect, filtered_in_summary, format_table, records, sqlite_details, udf_tables, IdUdf, WINDOWS,
};
use hotlist_tests::run_hotlist;
use std::time::Duration;

#[test]
fn udfs_over_kafka_match_the_model() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    // the topic with 2 partitions, by `hotlist produce --create` of an empty generator
    std::fs::write(dir.path().join("gen.toml"), GENERATOR).expect("config");
    run_hotlist(
        dir.path(),
        &[
            "produce",
            "--config",
            "gen.toml",
            "--brokers",
            &broker.addr(),
            "--topic",
            "pages",
            "--create",
            "--set",
            "source.events=0",
            "--set",
            "source.partitions=2",
        ],
        true,
    );
    let parts = records(61, 2, 1500, 0.0);
    let want = expect(&parts, IdUdf::Normalize);
    assert!(
        want.filtered > 20 && want.dead.len() > 20,
        "the input filters and dead-letters"
    );
    // one record per message, the partitions in turn (their event times advance together)
    let producer: BaseProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", broker.addr())
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    let longest = parts.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        for (p, lines) in parts.iter().enumerate() {
            let Some(line) = lines.get(i) else { continue };
            let rec = BaseRecord::<(), [u8]>::to("pages").partition(p as i32).payload(line);
            producer.send(rec).map_err(|(e, _)| e).expect("send");
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");

    for workers in ["1", "2"] {
        let job = format!("udf-kafka-{workers}w");
        let config = format!(
            "[job]\nid = {job:?}\n[source]\nkind = \"kafka\"\nbrokers = {:?}\ntopic = \"pages\"\nbounded = true\n\
             {}{WINDOWS}[sink]\npath = \"{job}.db\"\n[run]\nmax_dead_letters_per_block = 1000000\n{}",
            broker.addr(),
            format_table(IdUdf::Normalize),
            udf_tables(&["normalize_url", "country_of", "is_human"])
        );
        let toml = format!("{job}.toml");
        std::fs::write(dir.path().join(&toml), config).expect("config");
        let out = run_hotlist(
            dir.path(),
            &["run", "--config", &toml, "--progress", "never", "--workers", workers],
            true,
        );
        let summary = String::from_utf8_lossy(&out.stdout);
        assert!(
            summary.contains(&format!(": {} records,", want.records)),
            "{job}: {summary}"
        );
        assert_eq!(filtered_in_summary(&summary), want.filtered, "{job}: {summary}");
        let db = dir.path().join(format!("{job}.db"));
        assert_eq!(
            hotlist_tests::sqlite_sealed_group_lists(&db, &job),
            want.lists,
            "{job}: sealed lists"
        );
        // a dead letter's position is its message's offset: the record's line number - 1
        let at = |p: u32, pos: u64| (p, pos - 1);
        let want_dead: Vec<_> = want
            .dead
            .iter()
            .map(|(p, pos, reason)| (*p, pos - 1, reason.clone()))
            .collect();
        assert_eq!(
            hotlist_tests::sqlite_dead_letters(&db, &job).0,
            want_dead,
            "{job}: dead letters"
        );
        // a record of a message is its line 1 (of 1): the detail says so
        let want_details = want
            .details
            .iter()
            .map(|(k, (detail, exact))| match exact {
                true => (*k, (format!("{detail} (line 1 of the message)"), true)),
                false => (*k, (detail.clone(), false)),
            })
            .collect();
        assert_details(&sqlite_details(&db, &job), &want_details, at, &job);
    }
}

//! `--kafka-brokers`: a bare rdkafka consumer against the bounded job on the same topic.

use super::measure::measure;
use super::{plan, BenchArgs};
use anyhow::{Context, Result};
use hotlist_dataflow::config::{SinkPlan, SourcePlan};
use std::time::Duration;

/// A bare consumer reading every partition of the topic to its end, with one consumer per
/// partition polled round-robin on one thread (as the job's readers are): (messages, events,
/// seconds). It parses nothing: the ceiling of what the broker delivers.
fn bare_consumer(spec: &hotlist_dataflow::config::KafkaSpec) -> Result<(u64, u64, f64)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    // timed from before connecting, as the job's run is
    let started = std::time::Instant::now();
    let n = hotlist_dataflow::source::kafka::partition_count(spec, Duration::from_secs(30))?;
    let mut readers = Vec::new();
    for p in 0..n as i32 {
        let consumer: BaseConsumer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", &spec.brokers)
            .set("group.id", "hotlist-bench-bare")
            .set("enable.auto.commit", "false")
            .create()
            .context("cannot create a Kafka consumer")?;
        let (low, high) = consumer.fetch_watermarks(&spec.topic, p, Duration::from_secs(10))?;
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(&spec.topic, p, rdkafka::Offset::Offset(low))?;
        consumer.assign(&tpl)?;
        readers.push((consumer, low, high));
    }
    let (mut messages, mut events) = (0u64, 0u64);
    while readers.iter().any(|(_, next, end)| next < end) {
        let mut got = false;
        for (c, next, end) in readers.iter_mut().filter(|(_, n, e)| n < e) {
            for _ in 0..1024 {
                match c.poll(Duration::ZERO) {
                    Some(Ok(m)) => {
                        let payload = m.payload().unwrap_or_default();
                        messages += 1;
                        let lines = payload.iter().filter(|b| **b == b'\n').count() as u64;
                        events += if payload.last() == Some(&b'\n') {
                            lines
                        } else {
                            lines + 1
                        };
                        *next = m.offset() + 1;
                        got = true;
                        if *next >= *end {
                            break;
                        }
                    }
                    _ => break,
                }
            }
        }
        if !got {
            std::thread::sleep(Duration::from_micros(200));
        }
        if started.elapsed() > Duration::from_secs(600) {
            anyhow::bail!("the bare consumer did not reach the end offsets in 10 minutes");
        }
    }
    Ok((messages, events, started.elapsed().as_secs_f64()))
}

/// Drops a benchmark's throwaway PostgreSQL schema (a failure is only worth a warning).
pub(super) fn drop_bench_schema(url: &str, schema: &str) {
    if let Err(e) = hotlist_sinks::postgres::drop_schema(url, schema) {
        eprintln!("warning: could not drop the bench schema: {e}");
    }
}

/// The Kafka comparison: bare consumer vs the bounded job (SQLite or PostgreSQL sink), same topic.
pub(super) fn bench_kafka(args: &BenchArgs, brokers: &str, topic: &str) -> Result<()> {
    let spec = hotlist_dataflow::config::KafkaSpec {
        brokers: brokers.into(),
        topic: topic.into(),
        group_id: "hotlist-bench".into(),
        bounded: true,
        start_time: None,
        options: Default::default(),
        on_data_loss: hotlist_dataflow::config::OnDataLoss::Fail,
        partition_discovery: None,
    };
    let (messages, events, secs) = bare_consumer(&spec)?;
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let mut job = plan(args, SourcePlan::Kafka { spec, partitions: 0 });
    let schema = format!("hotlist_bench_{}", std::process::id());
    let (sink_name, r) = match &args.postgres {
        None => {
            job.sink = SinkPlan::Sqlite(dir.path().join("bench.db"));
            (
                "SQLite",
                measure("kafka", &hotlist_dataflow::run::resolve_source(&job)?, 0)?,
            )
        }
        Some(url) => {
            job.sink = SinkPlan::Postgres {
                url: url.clone(),
                schema: schema.clone(),
                timeouts: Default::default(),
            };
            let r = measure("kafka", &hotlist_dataflow::run::resolve_source(&job)?, 0);
            drop_bench_schema(url, &schema);
            ("PostgreSQL", r?)
        }
    };
    println!("| reader | messages | events | seconds | messages/s | events/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| bare rdkafka consumer | {messages} | {events} | {secs:.2} | {:.0} | {:.2} M |",
        messages as f64 / secs,
        events as f64 / secs / 1e6
    );
    println!(
        "| hotlist job, {} worker(s), into {sink_name} | {messages} | {} | {:.2} | {:.0} | {:.2} M |",
        job.workers,
        r.events,
        r.seconds,
        messages as f64 / r.seconds,
        r.events as f64 / r.seconds / 1e6
    );
    println!("job / bare consumer: {:.0}%", 100.0 * secs / r.seconds);
    Ok(())
}

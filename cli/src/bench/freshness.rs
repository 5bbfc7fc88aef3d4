//! `--kafka-brokers --freshness`: produced → visible in `topk`, on a live run.

use super::kafka::drop_bench_schema;
use super::BenchArgs;
use anyhow::{Context, Result};
use hotlist_dataflow::run::{run_with_stats, Progress};
use hotlist_dataflow::stats::JobStats;
use hotlist_operators::time::Millis;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Freshness: the job runs live from `topic` (emit every 1 s; with `--checkpoint` a checkpoint,
/// hence a commit, every 1 s) into SQLite or `--postgres`, with background traffic; 100 probes,
/// each a burst of events for a new item in one message, are timed from produce to the item's
/// first appearance in `topk`, at random phases of the emit cycle.
pub(super) fn bench_freshness(args: &BenchArgs, brokers: &str, topic: &str) -> Result<()> {
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let schema = format!("hotlist_fresh_{}", std::process::id());
    let sink = match &args.postgres {
        None => format!("path = \"{}\"", dir.path().join("fresh.db").display()),
        Some(url) => format!("kind = \"postgres\"\nurl = \"{url}\"\nschema = \"{schema}\""),
    };
    let checkpoint = if args.checkpoint {
        format!(
            "[checkpoint]\ndir = \"{}\"\ninterval = \"1s\"\n",
            dir.path().join("ckpt").display()
        )
    } else {
        String::new()
    };
    let config = format!(
        "[job]\nid = \"fresh\"\n[source]\nkind = \"kafka\"\nbrokers = \"{brokers}\"\ntopic = \"{topic}\"\n\
         [time]\nidle_timeout = \"2s\"\n[[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 100\n[sink]\n{sink}\n{checkpoint}"
    );
    let result = freshness_probes(&config, brokers, topic);
    if let Some(url) = &args.postgres {
        drop_bench_schema(url, &schema);
    }
    let latencies = result?;
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "freshness (produced -> visible in topk, into {}, emit_interval 1s, {}): {} of {PROBES} probes seen; p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        if args.postgres.is_some() { "PostgreSQL" } else { "SQLite" },
        if args.checkpoint { "a checkpoint every 1s" } else { "no checkpoints" },
        latencies.len(),
        pct(0.5),
        pct(0.99),
        latencies.last().copied().unwrap_or(f64::NAN)
    );
    Ok(())
}

/// Freshness probes per run.
const PROBES: usize = 100;

/// Runs the job of `config` live and sends the probes; their latencies in ms, sorted.
fn freshness_probes(config: &str, brokers: &str, topic: &str) -> Result<Vec<f64>> {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "0")
        .create()
        .context("cannot create a Kafka producer")?;
    let send = |payload: &[u8]| -> Result<()> {
        producer
            .send(BaseRecord::<(), [u8]>::to(topic).partition(0).payload(payload))
            .map_err(|(e, _)| anyhow::anyhow!("{e}"))?;
        producer.poll(Duration::ZERO);
        Ok(())
    };
    // make sure the topic exists with data before the job asks for its partitions
    send(format!(r#"{{"item_id":"warmup","ts":{}}}"#, Millis::now().0).as_bytes())?;
    producer.flush(Duration::from_secs(10)).context("flush")?;
    let plan = hotlist_dataflow::run::resolve_source(&hotlist_dataflow::config::parse(config, &Default::default())?)?;
    let open = crate::serve::opener(&plan.sink)?;
    let shutdown = Arc::new(AtomicBool::new(false));
    let job = {
        let (plan, shutdown) = (plan.clone(), shutdown.clone());
        std::thread::spawn(move || {
            run_with_stats(
                &plan,
                Progress::Never,
                shutdown,
                Arc::new(JobStats::new(plan.total_workers(), plan.source.partitions() as usize)),
            )
        })
    };
    let mut reader = None;
    let mut wait_for = |item: &str, ts: i64, deadline: std::time::Instant| -> bool {
        let start = Millis(ts - ts.rem_euclid(60_000)); // the 1m instance the probe belongs to
        while std::time::Instant::now() < deadline {
            // (the store may not exist yet, or be restarting: open again until it answers)
            if reader.is_none() {
                reader = open().ok();
            }
            if let Some(r) = reader.as_mut() {
                match r.instance("fresh", "1m", start) {
                    Ok(Some(l)) if l.items.iter().any(|r| r.item_id == item) => return true,
                    Ok(_) => {}
                    Err(_) => reader = None,
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    };
    let mut latencies = Vec::new();
    for i in 0..PROBES {
        if job.is_finished() {
            return match job.join() {
                Ok(Err(e)) => Err(e.context("the job failed")),
                Ok(Ok(_)) => Err(anyhow::anyhow!("the job stopped before the probes were done")),
                Err(_) => Err(anyhow::anyhow!("the job panicked")),
            };
        }
        // background: 200 events of 50 ordinary items
        let now = Millis::now().0;
        let bg: Vec<String> = (0..200)
            .map(|j| format!(r#"{{"item_id":"bg-{}","ts":{now}}}"#, j % 50))
            .collect();
        send(bg.join("\n").as_bytes())?;
        // the probe: 1,000 events of a new item in one message: in the top 100 at once
        let item = format!("probe-{i}");
        let ts = Millis::now().0;
        let probe: Vec<String> = (0..1000)
            .map(|_| format!(r#"{{"item_id":"{item}","ts":{ts}}}"#))
            .collect();
        let t0 = std::time::Instant::now();
        send(probe.join("\n").as_bytes())?;
        producer.flush(Duration::from_secs(10)).context("flush")?;
        if wait_for(&item, ts, t0 + Duration::from_secs(30)) {
            latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        // a random pause: the next probe lands at a random phase of the 1 s emit (and commit)
        // cycle, not locked to just after the emit that showed this one
        std::thread::sleep(Duration::from_millis(100 + rand::random_range(0..1000)));
    }
    shutdown.store(true, Relaxed);
    let _ = job.join();
    latencies.sort_by(|a, b| a.total_cmp(b));
    Ok(latencies)
}

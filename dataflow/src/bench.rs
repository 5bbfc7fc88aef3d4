//! `hotlist bench`: the throughput benchmark (README "Benchmarks" has the figures).
//!
//! 1. **memory**: the generator in memory → exact counts for the four default windows
//!    (1m, 5m, 1h, 1d tumbling, K = 100), Zipf(1.1) over 1M items, into an in-memory store;
//! 2. **json**: the same events written to JSON-lines files first (not timed), then read,
//!    parsed and counted by the file source.
//!
//! 3. **hot keys** (`--hot-keys`, instead): the memory run without the hot-key detector and
//!    with it at sample 1 and 1 in 100, the median of 3 runs each.
//!
//! Reported: events/s overall and per worker, peak RSS of the process, and bytes per live
//! (item, pane) counter (the counter's own accounting of its heap, and the RSS growth divided
//! by the counters, which also charges allocator slack and the id strings).

use crate::config::{JobPlan, SinkPlan, SourcePlan, TimePlan, WindowPlan};
use crate::generator::GeneratorSpec;
use crate::run::{run_with_stats, Progress};
use crate::stats::JobStats;
use anyhow::{Context, Result};
use hotlist_operators::counting::{Algorithm, Counting, SketchSpec};
use hotlist_operators::hot_keys::HotKeySpec;
use hotlist_operators::sketch::CmsShape;
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `hotlist bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Events for the in-memory run.
    #[arg(long, default_value_t = 20_000_000)]
    pub events: u64,
    /// Events for the JSON-lines run (0 skips it).
    #[arg(long, default_value_t = 5_000_000)]
    pub json_events: u64,
    /// Timely worker threads.
    #[arg(long, short, default_value_t = 1)]
    pub workers: usize,
    /// Distinct items.
    #[arg(long, default_value_t = 1_000_000)]
    pub items: u32,
    /// Zipf exponent.
    #[arg(long, default_value_t = 1.1)]
    pub zipf: f64,
    /// Generator partitions.
    #[arg(long, default_value_t = 4)]
    pub partitions: u32,
    /// Event-time rate per partition (events per second of event time).
    #[arg(long, default_value_t = 20_000)]
    pub rate: u64,
    /// K of every window.
    #[arg(long, default_value_t = 100)]
    pub k: usize,
    /// Wall-clock time between emit ticks (the job's `emit_interval`), e.g. 1s or 50ms. The
    /// in-memory run goes through event time ~25-60× faster than real time, so a tick sees
    /// that much more change than a live job's.
    #[arg(long, default_value = "1s", value_parser = Span::parse)]
    pub emit_interval: Span,
    /// The windows: SIZE or SIZE/SLIDE, comma-separated (e.g. 1m,1h/1m for a 1h window every
    /// minute); each is named by its text.
    #[arg(long, default_value = "1m,5m,1h,1d", value_parser = parse_windows)]
    pub windows: Windows,
    /// How every window counts: exact, sketch (count-min with 4·K candidates), auto or both.
    #[arg(long, default_value = "exact", value_parser = ["exact", "sketch", "auto", "both"])]
    pub mode: String,
    /// The sketch's ε (over-count bound as a fraction of the instance's events).
    #[arg(long, default_value_t = crate::config::DEFAULT_EPSILON)]
    pub epsilon: f64,
    /// `--mode auto`: distinct items per instance before it folds into a sketch.
    #[arg(long, default_value_t = crate::config::DEFAULT_MAX_ITEMS)]
    pub max_items: u64,
    /// Directory for the JSON files (default: a temporary directory).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Also checkpoint the in-memory run (every second) and report checkpoint write time and
    /// size, and the time to load and restore the largest checkpoint. With --freshness: the
    /// live job checkpoints every second (results are committed at checkpoints).
    #[arg(long)]
    pub checkpoint: bool,
    /// Instead: the in-memory run without the hot-key detector, then with it at sample 1 and
    /// 1 in 100 (10 s windows, threshold 1000/s); each the median of 3 runs.
    #[arg(long)]
    pub hot_keys: bool,
    /// Instead: compare a bare rdkafka consumer with the bounded job, both reading this topic
    /// from the beginning (see scripts/kafka-bench).
    #[arg(long, requires = "kafka_topic")]
    pub kafka_brokers: Option<String>,
    /// The topic for --kafka-brokers.
    #[arg(long)]
    pub kafka_topic: Option<String>,
    /// With --kafka-brokers (throughput or freshness): the job writes into this PostgreSQL (a
    /// fresh schema, dropped afterwards) instead of SQLite, e.g.
    /// postgresql://postgres@127.0.0.1:5432/test.
    #[arg(long, value_name = "URL")]
    pub postgres: Option<String>,
    /// With --kafka-brokers: measure freshness (event produced → visible in the topk table) on
    /// a live run instead of throughput. Creates the topic if needed.
    #[arg(long, requires = "kafka_brokers")]
    pub freshness: bool,
}

/// One measured run.
#[derive(Clone, Debug)]
pub struct BenchResult {
    /// "memory" or "json".
    pub name: &'static str,
    /// Events counted.
    pub events: u64,
    /// Wall seconds.
    pub seconds: f64,
    /// Workers.
    pub workers: usize,
    /// Peak live counters.
    pub peak_counters: u64,
    /// Counter heap bytes per live counter at that peak.
    pub bytes_per_counter: f64,
    /// Peak RSS of the process so far (bytes).
    pub peak_rss: u64,
    /// RSS growth during the run per peak counter.
    pub rss_per_counter: f64,
    /// Input bytes (json run).
    pub input_bytes: u64,
    /// The largest counting state seen (bytes, exact and sketch state of all workers).
    pub peak_state_bytes: u64,
}

impl BenchResult {
    /// Events per second per worker.
    pub fn per_worker(&self) -> f64 {
        self.events as f64 / self.seconds / self.workers as f64
    }
}

fn spec(args: &BenchArgs, events: u64) -> GeneratorSpec {
    GeneratorSpec {
        seed: 7,
        items: args.items,
        zipf: args.zipf,
        partitions: args.partitions,
        events: Some(events),
        rate: args.rate,
        start: Millis(1_767_225_600_000), // 2026-01-01T00:00:00Z
        jitter: Span::from_millis(1000),
        late_fraction: 0.0,
        late_by: Span::from_millis(600_000),
        bad_fraction: 0.0,
    }
}

/// The windows of `--windows`.
#[derive(Clone, Debug)]
pub struct Windows(Vec<WindowSpec>);

fn parse_windows(text: &str) -> Result<Windows, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (size, slide) = match part.split_once('/') {
            Some((a, b)) => (Span::parse(a)?, Span::parse(b)?),
            None => (Span::parse(part)?, Span::parse(part)?),
        };
        let w = WindowSpec {
            key: Default::default(),
            name: part.to_string(),
            size,
            slide,
            k: 1,
        };
        w.validate().map_err(|e| format!("window {part:?}: {e}"))?;
        out.push(w);
    }
    hotlist_operators::window::validate_all(&out).map_err(|e| e.to_string())?;
    Ok(Windows(out))
}

fn plan(args: &BenchArgs, source: SourcePlan) -> JobPlan {
    let mut windows = args.windows.0.clone();
    for w in &mut windows {
        w.k = args.k;
    }
    JobPlan {
        job_id: "bench".into(),
        source,
        max_record_bytes: crate::config::DEFAULT_MAX_RECORD_BYTES,
        input: crate::config::InputFormat::default(),
        windows: WindowPlan::zip(windows, vec![counting(args); args.windows.0.len()]),
        time: TimePlan {
            max_out_of_orderness: Span::from_millis(5_000),
            allowed_lateness: Span::from_millis(60_000),
            idle_timeout: Span::from_millis(30_000),
            emit_interval: args.emit_interval,
            max_future: Span::from_millis(3_600_000),
        },
        sink: SinkPlan::Memory(hotlist_sinks::MemoryStore::new()),
        fanout: None,
        checkpoint: None,
        from_checkpoint: None,
        from_scratch: false,
        workers: args.workers,
        epoch_interval: Span::from_millis(100),
        max_epochs_in_flight: 4,
        batch_size: 8192,
        cluster: None,
        hot_keys: None,
    }
}

/// Every window's counting from `--mode`, `--epsilon` and `--max-items`.
fn counting(args: &BenchArgs) -> Counting {
    let sketch = SketchSpec {
        algorithm: Algorithm::Cms,
        epsilon: args.epsilon,
        delta: crate::config::DEFAULT_DELTA,
        candidates: args.k.saturating_mul(4),
        conservative: false,
        exact_at_seal: false,
    };
    match args.mode.as_str() {
        "sketch" => Counting::Sketch(sketch),
        "auto" => Counting::Auto {
            sketch,
            max_items: args.max_items,
        },
        "both" => Counting::Both(sketch),
        _ => Counting::Exact,
    }
}

/// Checkpoint figures of a checkpointed run: write time and size, and the time to load and
/// restore the largest checkpoint (what a restart costs before it reads again).
fn report_checkpoints(plan: &JobPlan, dir: &std::path::Path, stats: &JobStats) -> Result<()> {
    let h = &stats.checkpoint_seconds;
    let (count, sum) = (h.get_sample_count(), h.get_sample_sum());
    let (bytes, counters) = stats.largest_checkpoint.lock().map(|l| *l).unwrap_or((0, 0));
    let job_dir = dir.join(&plan.job_id);
    let largest = crate::checkpoint::list(dir, &plan.job_id)
        .into_iter()
        .max_by_key(|e| {
            std::fs::read_dir(job_dir.join(format!("{e:020}")))
                .map(|rd| rd.filter_map(|f| f.ok()?.metadata().ok()).map(|m| m.len()).sum::<u64>())
                .unwrap_or(0)
        })
        .context("no checkpoint was written")?;
    let started = std::time::Instant::now();
    let layout = crate::checkpoint::JobLayout::of(plan);
    let restored = crate::checkpoint::load(
        &crate::checkpoint::checkpoint_dir(dir, &plan.job_id, largest),
        largest,
        &layout,
    )?;
    let loaded = started.elapsed();
    let counter = hotlist_operators::counter::WindowedCounter::restore(
        plan.window_specs(),
        plan.time.allowed_lateness,
        0,
        1,
        &restored.counters,
    )
    .map_err(|e| anyhow::anyhow!("restore: {e}"))?;
    let restore = started.elapsed();
    let written = stats
        .checkpoint_written_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    let total = stats.checkpoint_total_bytes.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "checkpoints: {count} counter snapshots written, mean {:.0} ms each (off the worker thread), {:.0}% of \
         their bytes written (the rest: unchanged panes linked); largest {:.1} MB for {} live counters \
         ({:.1} bytes/counter); loading it took {:.0} ms, restoring {} counters onto 1 worker {:.0} ms in all",
        sum / count.max(1) as f64 * 1000.0,
        written as f64 * 100.0 / total.max(1) as f64,
        bytes as f64 / 1e6,
        counters,
        bytes as f64 / counters.max(1) as f64,
        loaded.as_secs_f64() * 1000.0,
        counter.stats().live_counters,
        restore.as_secs_f64() * 1000.0,
    );
    Ok(())
}

/// Runs one measured job while sampling the state gauges.
fn measure(name: &'static str, plan: &JobPlan, input_bytes: u64) -> Result<BenchResult> {
    measure_with_stats(name, plan, input_bytes).map(|r| r.0)
}

/// `measure`, returning the run's stats too.
fn measure_with_stats(name: &'static str, plan: &JobPlan, input_bytes: u64) -> Result<(BenchResult, Arc<JobStats>)> {
    let rss_before = rss_bytes().0;
    let stats = Arc::new(JobStats::new(plan.total_workers(), plan.source.partitions() as usize));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stats = stats.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut best, mut peak_bytes) = ((0u64, 0u64), 0u64);
            while !done.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let c = stats.total_counters();
                peak_bytes = peak_bytes.max(stats.total_state_bytes());
                if c > best.0 {
                    best = (c, stats.total_state_bytes());
                }
            }
            (best, peak_bytes)
        })
    };
    let summary = run_with_stats(plan, Progress::Never, Arc::new(AtomicBool::new(false)), stats.clone())?;
    done.store(true, Relaxed);
    let ((peak_counters, bytes_at_peak), peak_state_bytes) = sampler.join().unwrap_or(((0, 0), 0));
    let peak_rss = rss_bytes().1;
    Ok((
        BenchResult {
            name,
            events: summary.events_in,
            seconds: summary.elapsed.as_secs_f64(),
            workers: plan.workers,
            peak_counters,
            bytes_per_counter: bytes_at_peak as f64 / peak_counters.max(1) as f64,
            peak_rss,
            rss_per_counter: peak_rss.saturating_sub(rss_before) as f64 / peak_counters.max(1) as f64,
            input_bytes,
            peak_state_bytes,
        },
        stats,
    ))
}

/// CPU seconds (user + system) the process used so far, from /proc/self/stat (0 where
/// unavailable; ticks of 1/100 s, the kernel's USER_HZ on Linux).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // the fields after the command name, which is in parentheses and may hold spaces
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |n: usize| {
        rest.split_whitespace()
            .nth(n)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field(11) + field(12)) as f64 / 100.0
}

/// (current RSS, peak RSS) in bytes, from /proc/self/status (0 where unavailable).
pub fn rss_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A bare consumer reading every partition of the topic to its end, with one consumer per
/// partition polled round-robin on one thread (as the job's readers are): (messages, events,
/// seconds). It parses nothing: the ceiling of what the broker delivers.
fn bare_consumer(spec: &crate::config::KafkaSpec) -> Result<(u64, u64, f64)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    // timed from before connecting, as the job's run is
    let started = std::time::Instant::now();
    let n = crate::source::kafka::partition_count(spec, Duration::from_secs(30))?;
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
fn drop_bench_schema(url: &str, schema: &str) {
    if let Err(e) = hotlist_sinks::postgres::drop_schema(url, schema) {
        eprintln!("warning: could not drop the bench schema: {e}");
    }
}

/// The Kafka comparison: bare consumer vs the bounded job (SQLite or PostgreSQL sink), same topic.
fn bench_kafka(args: &BenchArgs, brokers: &str, topic: &str) -> Result<()> {
    let spec = crate::config::KafkaSpec {
        brokers: brokers.into(),
        topic: topic.into(),
        group_id: "hotlist-bench".into(),
        bounded: true,
        start_time: None,
        options: Default::default(),
        on_data_loss: crate::config::OnDataLoss::Fail,
        partition_discovery: None,
    };
    let (messages, events, secs) = bare_consumer(&spec)?;
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let mut job = plan(args, SourcePlan::Kafka { spec, partitions: 0 });
    let schema = format!("hotlist_bench_{}", std::process::id());
    let (sink_name, r) = match &args.postgres {
        None => {
            job.sink = SinkPlan::Sqlite(dir.path().join("bench.db"));
            ("SQLite", measure("kafka", &crate::run::resolve_source(&job)?, 0)?)
        }
        Some(url) => {
            job.sink = SinkPlan::Postgres {
                url: url.clone(),
                schema: schema.clone(),
            };
            let r = measure("kafka", &crate::run::resolve_source(&job)?, 0);
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

/// Freshness: the job runs live from `topic` (emit every 1 s; with `--checkpoint` a checkpoint,
/// hence a commit, every 1 s) into SQLite or `--postgres`, with background traffic; 100 probes,
/// each a burst of events for a new item in one message, are timed from produce to the item's
/// first appearance in `topk`, at random phases of the emit cycle.
fn bench_freshness(args: &BenchArgs, brokers: &str, topic: &str) -> Result<()> {
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
    let plan = crate::run::resolve_source(&crate::config::parse(config, &Default::default())?)?;
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

/// Runs the benchmark and prints a table.
pub fn bench(args: &BenchArgs) -> Result<()> {
    if let (Some(b), Some(t)) = (&args.kafka_brokers, &args.kafka_topic) {
        return if args.freshness {
            bench_freshness(args, b, t)
        } else {
            bench_kafka(args, b, t)
        };
    }
    if let Some(s) = counting(args).sketch() {
        s.new_sketch().map_err(|e| anyhow::anyhow!("--epsilon: {e}"))?;
    }
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!(
        "hotlist bench: {} workers on {} cores; windows {} ({} mode), K={}; Zipf({}) over {} items; {} partitions at {} events/s of event time each",
        args.workers,
        cores,
        args.windows.0.iter().map(|w| w.name.as_str()).collect::<Vec<_>>().join(","),
        args.mode,
        args.k, args.zipf, args.items, args.partitions, args.rate
    );
    if args.hot_keys {
        return bench_hot_keys(args);
    }
    let mut results = vec![bench_memory(args)?];
    if args.json_events > 0 {
        results.push(bench_json(args)?);
    }
    print_results(&results);
    Ok(())
}

/// The hot-key detector's cost: the in-memory run without it, and with it at sample 1 and 1
/// in 100; events/s are the median of 3 runs each (in 3 rounds over the three), the cost
/// relative to the run without.
fn bench_hot_keys(args: &BenchArgs) -> Result<()> {
    let mem_spec = spec(args, args.events);
    let _tables = crate::source::generator::shared_tables(&mem_spec)?; // held: the runs reuse them
    let source = SourcePlan::Generator {
        spec: mem_spec,
        pace: false,
    };
    let shape = CmsShape::from_error(0.001, 0.001).map_err(|e| anyhow::anyhow!("{e}"))?;
    let detector = |sample| HotKeySpec {
        sample,
        window: Span::from_millis(10_000),
        threshold: 1000.0,
        hysteresis: 0.2,
        shape,
        candidates: 64,
    };
    println!(
        "| hot-key detector | events/s (median of 3) | per worker | cost | CPU ns/event (median) | CPU cost | hot keys in the last window |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let configs = [
        ("off", None),
        ("sample = 1", Some(detector(1))),
        ("sample = 100", Some(detector(100))),
    ];
    // rounds interleave the configurations, so a load that comes and goes on a shared machine
    // hits them alike
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    // CPU time per event: what the detector costs, unlike wall time, hardly depends on what else
    // runs on the machine
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut hot_now = vec![0u64; configs.len()];
    for _ in 0..3 {
        for (i, (_, hot)) in configs.iter().enumerate() {
            let mut p = plan(args, source.clone());
            p.hot_keys = *hot;
            let before = cpu_seconds();
            let (r, stats) = measure_with_stats("memory", &p, 0)?;
            rates[i].push(r.events as f64 / r.seconds);
            cpu[i].push((cpu_seconds() - before) * 1e9 / r.events.max(1) as f64);
            hot_now[i] = stats.hot_keys.hot.load(Relaxed);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = median(&mut rates[0]);
    let base_cpu = median(&mut cpu[0]);
    for (i, (name, hot)) in configs.iter().enumerate() {
        let m = median(&mut rates[i]);
        let c = median(&mut cpu[i]);
        println!(
            "| {name} | {:.2} M | {:.2} M | {:+.1}% | {c:.0} | {:+.1}% | {} |",
            m / 1e6,
            m / 1e6 / args.workers as f64,
            (m / base - 1.0) * 100.0,
            (c / base_cpu - 1.0) * 100.0,
            if hot.is_some() {
                hot_now[i].to_string()
            } else {
                "–".into()
            }
        );
    }
    Ok(())
}

/// The in-memory run (generator → counts → memory store), checkpointed with `--checkpoint`.
fn bench_memory(args: &BenchArgs) -> Result<BenchResult> {
    let mem_spec = spec(args, args.events);
    // Build the generator tables before timing: they are set-up, not per-event work.
    let _tables = crate::source::generator::shared_tables(&mem_spec)?; // held: the run's readers reuse them
    let mut mem_plan = plan(
        args,
        SourcePlan::Generator {
            spec: mem_spec,
            pace: false,
        },
    );
    let ckpt_dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    if args.checkpoint {
        mem_plan.checkpoint = Some(crate::config::CheckpointPlan {
            dir: ckpt_dir.path().to_path_buf(),
            every_epochs: 10,
            retain: 1_000,
            remote: None,
        });
    }
    let (mem, stats) = measure_with_stats("memory", &mem_plan, 0)?;
    report_emits(&stats, &mem);
    if args.checkpoint {
        report_checkpoints(&mem_plan, ckpt_dir.path(), &stats)?;
    }
    if args.mode != "exact" {
        report_sketches(&mem_plan, &mem);
    }
    Ok(mem)
}

/// The exact counter's emitting `advance`s (`hotlist_emit_seconds`): how many, mean, p50 and
/// max per emit, and their share of the run's wall time.
fn report_emits(stats: &JobStats, run: &BenchResult) {
    let mut samples = stats.emit_samples.lock().map(|s| s.clone()).unwrap_or_default();
    if samples.is_empty() {
        return;
    }
    samples.sort_by(f64::total_cmp);
    let total: f64 = samples.iter().sum();
    let ms = |s: f64| s * 1000.0;
    let sum =
        |f: fn(&(AtomicU64, AtomicU64)) -> &AtomicU64| stats.emits.iter().map(|e| f(e).load(Relaxed)).sum::<u64>();
    println!(
        "emits (exact counter, per worker and emitting advance): {} of them, mean {:.2} ms, p50 {:.2} ms, \
         max {:.2} ms; {:.2} s in all, {:.0}% of the run's wall time; lists {} incremental, {} recounted",
        samples.len(),
        ms(total / samples.len() as f64),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1]),
        total,
        total * 100.0 / run.seconds / run.workers as f64,
        sum(|e| &e.0),
        sum(|e| &e.1),
    );
}

/// What the sketch windows' final lists say (`--mode sketch`, `auto`, `both`): the counting
/// state at its peak, each list's exactness and error bound, and for `both` the sketch's
/// recall@K and over-counts against the exact list.
fn report_sketches(plan: &JobPlan, run: &BenchResult) {
    let SinkPlan::Memory(store) = &plan.sink else { return };
    println!(
        "counting state: peak {:.1} MB over all workers (counter heap accounting; peak RSS {:.0} MB)",
        run.peak_state_bytes as f64 / 1e6,
        run.peak_rss as f64 / 1e6
    );
    for l in store
        .lists()
        .iter()
        .filter(|l| l.state == hotlist_operators::record::ListState::Final)
    {
        let check = l.sketch_check.map_or(String::new(), |c| {
            format!(
                "; sketch recall@{} {:.3} ({} of {}), max over-count {}, mean {:.1}",
                c.of,
                c.recall(),
                c.found,
                c.of,
                c.max_overcount,
                c.mean_overcount()
            )
        });
        println!(
            "  {} [{} .. {}): {} items, exact {}, error bound {}{check}",
            l.window,
            l.start,
            l.end,
            l.items.len(),
            l.exact,
            l.error_bound
        );
    }
}

/// The JSON-lines run: the same kind of events written to files first (not timed), then read,
/// parsed and counted by the file source.
fn bench_json(args: &BenchArgs) -> Result<BenchResult> {
    let tmp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    let written = crate::generate::write_partitions(&spec(args, args.json_events), &dir, "bench")?;
    let (paths, bytes) = (written.paths, written.bytes);
    let json_plan = plan(args, SourcePlan::Files(paths));
    measure("json", &json_plan, bytes)
}

/// The results as a Markdown table.
fn print_results(results: &[BenchResult]) {
    println!();
    println!("| run | events | seconds | events/s | events/s per worker | peak live counters | bytes/counter (state) | bytes/counter (RSS growth) | peak RSS |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        // (a sketch-only run has no live counters: nothing to divide by)
        let per_counter = |v: f64| match r.peak_counters {
            0 => "—".to_string(),
            _ => format!("{v:.1}"),
        };
        println!(
            "| {} | {} | {:.2} | {:.2} M | {:.2} M | {} | {} | {} | {:.0} MB |",
            r.name,
            r.events,
            r.seconds,
            r.events as f64 / r.seconds / 1e6,
            r.per_worker() / 1e6,
            r.peak_counters,
            per_counter(r.bytes_per_counter),
            per_counter(r.rss_per_counter),
            r.peak_rss as f64 / 1e6
        );
        if r.input_bytes > 0 {
            println!(
                "|   ({:.0} MB of JSON, {:.0} MB/s) | | | | | | | | |",
                r.input_bytes as f64 / 1e6,
                r.input_bytes as f64 / 1e6 / r.seconds
            );
        }
    }
}

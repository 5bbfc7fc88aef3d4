//! `hotlist bench`: the throughput benchmark (docs/benchmarks.md has the figures).
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
//!
//! 4. **kafka** (`--kafka-brokers`, instead): a bare consumer against the bounded job on the
//!    same topic; with `--freshness`, produced → visible in the store on a live run.
//!
//! Files: this one the flags, the job plan they make and the dispatch; `measure` one measured
//! run and the results table; `memory` the in-memory and JSON runs and their reports (emits,
//! checkpoints, sketches); `hot_keys`, `kafka`, `freshness` the other benchmarks.

mod freshness;
mod hot_keys;
mod kafka;
mod measure;
mod memory;

pub use measure::{rss_bytes, BenchResult};

use anyhow::Result;
use hotlist_dataflow::config::{JobPlan, SinkPlan, SourcePlan, TimePlan, WindowPlan};
use hotlist_dataflow::generator::GeneratorSpec;
use hotlist_operators::counting::{Algorithm, Counting, SketchSpec};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;

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
    #[arg(long, default_value_t = hotlist_dataflow::config::DEFAULT_EPSILON)]
    pub epsilon: f64,
    /// `--mode auto`: distinct items per instance before it folds into a sketch.
    #[arg(long, default_value_t = hotlist_dataflow::config::DEFAULT_MAX_ITEMS)]
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
            rank: Default::default(),
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
        max_record_bytes: hotlist_dataflow::config::DEFAULT_MAX_RECORD_BYTES,
        input: hotlist_dataflow::config::InputFormat::default(),
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
        max_epoch_records: hotlist_dataflow::config::DEFAULT_MAX_EPOCH_RECORDS,
        batch_size: 8192,
        max_dead_letters_per_block: hotlist_dataflow::config::DEFAULT_MAX_DEAD_LETTERS_PER_BLOCK,
        cluster: None,
        hot_keys: None,
        exact_at_seal: Default::default(),
        udfs: Vec::new(),
        udf_runner: Default::default(),
        accept_udf_change: false,
    }
}

/// Every window's counting from `--mode`, `--epsilon` and `--max-items`.
fn counting(args: &BenchArgs) -> Counting {
    let sketch = SketchSpec {
        algorithm: Algorithm::Cms,
        epsilon: args.epsilon,
        delta: hotlist_dataflow::config::DEFAULT_DELTA,
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

/// Runs the benchmark and prints a table.
pub fn bench(args: &BenchArgs) -> Result<()> {
    if let (Some(b), Some(t)) = (&args.kafka_brokers, &args.kafka_topic) {
        return if args.freshness {
            freshness::bench_freshness(args, b, t)
        } else {
            kafka::bench_kafka(args, b, t)
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
        return hot_keys::bench_hot_keys(args);
    }
    let mut results = vec![memory::bench_memory(args)?];
    if args.json_events > 0 {
        results.push(memory::bench_json(args)?);
    }
    measure::print_results(&results);
    Ok(())
}

//! `hotlist`: exact, exactly-windowed top-K of an event stream.
//!
//! Exit codes: 0 success (also after a clean Ctrl-C stop), 1 an error (printed as one line),
//! 2 bad usage (from the argument parser).

// No function over 80 lines (the threshold is in clippy.toml).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use clap::{Parser, Subcommand};
use hotlist_dataflow::{bench, config, generate, query, run, serve};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "hotlist",
    version,
    about = "What is hot right now: exact per-window top-K lists from a stream of access events",
    long_about = "hotlist reads access events ({\"item_id\": \"…\", \"ts\": …} JSON lines), counts them \
exactly per event-time window (tumbling or hopping, UTC-aligned), and keeps each window's top-K \
list in a sink store (SQLite by default). Start with:\n\n  hotlist run --config configs/local.toml\n  \
hotlist query --config configs/local.toml --window 5m"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the job: read events, publish per-window top-K lists into the sink.
    Run {
        /// The job's TOML config (see configs/local.toml).
        #[arg(long, short, default_value = "configs/local.toml")]
        config: PathBuf,
        /// Timely worker threads (overrides run.workers).
        #[arg(long, short)]
        workers: Option<usize>,
        /// Override a config key, e.g. --set source.events=100000 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Progress display while running.
        #[arg(long, value_enum, default_value_t = run::Progress::Auto)]
        progress: run::Progress,
        /// Processes in a cluster (each runs --workers threads); needs --process and --hostfile.
        #[arg(long)]
        processes: Option<usize>,
        /// This process's index in the cluster (0-based).
        #[arg(long)]
        process: Option<usize>,
        /// File of `host:port` lines, one per process, in process order.
        #[arg(long)]
        hostfile: Option<PathBuf>,
        /// Restore this checkpoint (see `hotlist checkpoints list`) instead of the latest: the
        /// input is re-read from there and the results re-committed.
        #[arg(long, value_name = "EPOCH", conflicts_with = "from_scratch")]
        from_checkpoint: Option<u64>,
        /// Start a new run of the job: delete its stored lists, dead letters and commit (in one
        /// transaction, before anything is read), move its checkpoints aside into
        /// <checkpoint.dir>/<job>.replaced-<unix ms>/, and read the input from its beginning.
        /// For when a start is refused because the store and the checkpoints disagree.
        #[arg(long)]
        from_scratch: bool,
        /// Serve the job's Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9187).
        #[arg(long, value_name = "ADDR")]
        metrics_addr: Option<std::net::SocketAddr>,
        /// Read the input as it is now, seal every window and exit (Kafka: up to the end
        /// offsets at start; the same as source.bounded = true). For backfills and reprocessing.
        #[arg(long)]
        bounded: bool,
    },
    /// Print a window's list from the sink store.
    Query(query::QueryArgs),
    /// Serve the lists over HTTP: JSON API, live page, metrics.
    Serve(serve::ServeArgs),
    /// Inspect checkpoints: list, show EPOCH, verify [EPOCH].
    Checkpoints(hotlist_dataflow::checkpoints_cli::CheckpointsArgs),
    /// Measure throughput: generator in memory, and JSON lines from a file.
    Bench(bench::BenchArgs),
    /// Write the configured generator's records to a Kafka topic (partition p → partition p).
    Produce(hotlist_dataflow::produce::ProduceArgs),
    /// Write the configured generator's records as JSON-lines files (one per partition).
    Generate(generate::GenerateArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HOTLIST_LOG").unwrap_or_else(|_| "hotlist=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run {
            config: path,
            workers,
            set,
            progress,
            processes,
            process,
            hostfile,
            from_checkpoint,
            from_scratch,
            metrics_addr,
            bounded,
        } => {
            let mut set = set;
            if bounded {
                set.push("source.bounded=true".into());
            }
            let plan = config::load(
                &path,
                &config::Overrides {
                    set,
                    workers,
                    processes,
                    process,
                    hostfile,
                    from_checkpoint,
                    from_scratch,
                },
            )?;
            let plan = run::resolve_source(&plan)?;
            let shutdown = Arc::new(AtomicBool::new(false));
            let flag = shutdown.clone();
            ctrlc::set_handler(move || {
                if flag.swap(true, Relaxed) {
                    eprintln!("\nsecond interrupt: exiting without waiting for the commit");
                    std::process::exit(130);
                }
                eprintln!("\nstopping: finishing the current epoch and committing (Ctrl-C again to abort)");
            })?;
            let stats = Arc::new(hotlist_dataflow::stats::JobStats::new(
                plan.total_workers(),
                plan.source.partitions() as usize,
            ));
            if let Some(addr) = metrics_addr {
                let (s, job, source) = (stats.clone(), plan.job_id.clone(), plan.source.clone());
                // named at each scrape: a Kafka topic may gain partitions while the job runs
                let render = move || {
                    let names: Vec<String> = (0..s.partitions.len() as u32)
                        .map(|p| source.partition_name(p))
                        .collect();
                    hotlist_dataflow::metrics::render(&s, &job, &names)
                };
                let bound = hotlist_server::metrics::serve_text(addr, Arc::new(render))
                    .map_err(|e| anyhow::anyhow!("cannot serve metrics on {addr}: {e}"))?;
                eprintln!("metrics on http://{bound}/metrics");
            }
            let summary = run::run_with_stats(&plan, progress, shutdown, stats.clone())?;
            let names: Vec<String> = plan.windows.iter().map(|w| w.spec.name.clone()).collect();
            print!("{}", run::render_lists(&stats, &names, 10));
            print!("\n{}", run::summary_text(&plan, &summary));
            Ok(())
        }
        Command::Query(args) => query::query(&args),
        Command::Serve(args) => serve::serve(&args),
        Command::Checkpoints(args) => hotlist_dataflow::checkpoints_cli::checkpoints(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Produce(args) => hotlist_dataflow::produce::produce(&args),
        Command::Generate(args) => generate::generate(&args),
    }
}

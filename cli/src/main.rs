//! `hotlist`: exact, exactly-windowed top-K of an event stream.
//!
//! Exit codes: 0 success (also after a clean Ctrl-C stop), 1 an error (printed as one line),
//! 2 bad usage (from the argument parser).

use clap::{Parser, Subcommand};
use hotlist::{bench, checkpoints, generate, produce, query, run, serve};
use std::process::ExitCode;

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
    Run(run::RunArgs),
    /// Print a window's list from the sink store.
    Query(query::QueryArgs),
    /// Serve the lists over HTTP: JSON API, live page, metrics.
    Serve(serve::ServeArgs),
    /// Inspect checkpoints: list, show EPOCH, verify [EPOCH].
    Checkpoints(checkpoints::CheckpointsArgs),
    /// Measure throughput: generator in memory, and JSON lines from a file.
    Bench(bench::BenchArgs),
    /// Write the configured generator's records to a Kafka topic (partition p → partition p).
    Produce(produce::ProduceArgs),
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
        Command::Run(args) => run::run(args),
        Command::Query(args) => query::query(&args),
        Command::Serve(args) => serve::serve(&args),
        Command::Checkpoints(args) => checkpoints::checkpoints(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Produce(args) => produce::produce(&args),
        Command::Generate(args) => generate::generate(&args),
    }
}

//! `hotlist`: exact, exactly-windowed top-K of an event stream.
//!
//! Exit codes: 0 success (also after a clean Ctrl-C stop), 1 an error (printed as one line),
//! 2 bad usage (from the argument parser), or input that cannot be read again (`explain`).

use clap::{Parser, Subcommand};
use hotlist::{bench, checkpoints, explain, generate, produce, query, run, serve, verify};
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
    /// Why an item has its count in a sealed instance: its input read again, per partition,
    /// late events, users, beside the stored count.
    Explain(explain::ExplainArgs),
    /// Is the store right? Count every sealed instance again from its input and compare its
    /// lists with the store's: exit 0 all match, 1 a mismatch, 2 nothing could be checked.
    Verify(verify::VerifyArgs),
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
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            match e.downcast_ref::<explain::Unreadable>() {
                Some(_) => ExitCode::from(2),
                None => ExitCode::from(1),
            }
        }
    }
}

/// Runs the command; `Ok` is its exit code (0, or `verify`'s verdict).
fn dispatch(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Verify(args) => verify::verify(&args),
        Command::Run(args) => run::run(args).map(|()| 0),
        Command::Query(args) => query::query(&args).map(|()| 0),
        Command::Explain(args) => explain::explain(&args).map(|()| 0),
        Command::Serve(args) => serve::serve(&args).map(|()| 0),
        Command::Checkpoints(args) => checkpoints::checkpoints(&args).map(|()| 0),
        Command::Bench(args) => bench::bench(&args).map(|()| 0),
        Command::Produce(args) => produce::produce(&args).map(|()| 0),
        Command::Generate(args) => generate::generate(&args).map(|()| 0),
    }
}

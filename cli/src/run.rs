//! `hotlist run`: the job from its config, until its input ends or Ctrl-C / SIGTERM stops it
//! (the current epoch is then committed; a second Ctrl-C exits at once).

use anyhow::Result;
use hotlist_dataflow::stats::JobStats;
use hotlist_dataflow::{config, run as engine};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// Arguments of `hotlist run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The job's TOML config (see configs/local.toml).
    #[arg(long, short, default_value = "configs/local.toml")]
    pub config: PathBuf,
    /// Timely worker threads (overrides run.workers).
    #[arg(long, short)]
    pub workers: Option<usize>,
    /// Override a config key, e.g. --set source.events=100000 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Progress display while running.
    #[arg(long, value_enum, default_value_t = engine::Progress::Auto)]
    pub progress: engine::Progress,
    /// Processes in a cluster (each runs --workers threads); needs --process and --hostfile.
    #[arg(long)]
    pub processes: Option<usize>,
    /// This process's index in the cluster (0-based).
    #[arg(long)]
    pub process: Option<usize>,
    /// File of `host:port` lines, one per process, in process order.
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// Restore this checkpoint (see `hotlist checkpoints list`) instead of the latest: the
    /// input is re-read from there and the results re-committed.
    #[arg(long, value_name = "EPOCH", conflicts_with = "from_scratch")]
    pub from_checkpoint: Option<u64>,
    /// Start a new run of the job: delete its stored lists, dead letters and commit (in one
    /// transaction, before anything is read), move its checkpoints aside into
    /// <checkpoint.dir>/<job>.replaced-<unix ms>/, and read the input from its beginning.
    /// For when a start is refused because the store and the checkpoints disagree.
    #[arg(long)]
    pub from_scratch: bool,
    /// Restore a checkpoint although a [[udf]] library changed since it was written (its
    /// SHA-256 differs): the state counted with the old library's results goes on with the
    /// new one's. Without it such a restore is refused.
    #[arg(long)]
    pub accept_udf_change: bool,
    /// Serve the job's Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9187).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Open connections to the metrics endpoint at most; past it, a new one closes the
    /// longest-idle one first (idle ones are closed after 75 s, silent ones after 5 s).
    #[arg(long, value_name = "N", default_value_t = hotlist_server::metrics_endpoint::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub metrics_max_connections: u32,
    /// Read the input as it is now, seal every window and exit (Kafka: up to the end
    /// offsets at start; the same as source.bounded = true). For backfills and reprocessing.
    #[arg(long)]
    pub bounded: bool,
}

/// Runs the job, then prints every window's newest list and the run's summary.
pub fn run(args: RunArgs) -> Result<()> {
    let mut set = args.set;
    if args.bounded {
        set.push("source.bounded=true".into());
    }
    let plan = config::load(
        &args.config,
        &config::Overrides {
            set,
            workers: args.workers,
            processes: args.processes,
            process: args.process,
            hostfile: args.hostfile,
            from_checkpoint: args.from_checkpoint,
            from_scratch: args.from_scratch,
            accept_udf_change: args.accept_udf_change,
        },
    )?;
    let plan = engine::resolve_source(&plan)?;
    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || {
        if flag.swap(true, Relaxed) {
            eprintln!("\nsecond interrupt: exiting without waiting for the commit");
            std::process::exit(130);
        }
        eprintln!("\nstopping: finishing the current epoch and committing (Ctrl-C again to abort)");
    })?;
    let stats = Arc::new(JobStats::new(plan.total_workers(), plan.source.partitions() as usize));
    if let Some(addr) = args.metrics_addr {
        serve_metrics(addr, args.metrics_max_connections, &plan, &stats)?;
    }
    let summary = engine::run_with_stats(&plan, args.progress, shutdown, stats.clone())?;
    let names: Vec<String> = plan.windows.iter().map(|w| w.spec.name.clone()).collect();
    print!("{}", engine::render_lists(&stats, &names, 10));
    print!("\n{}", engine::summary_text(&plan, &summary));
    Ok(())
}

/// Serves the job's metrics at `http://addr/metrics` while it runs, behind `serve`'s connection
/// guard (at most `max_connections`): idle clients cannot take the job's file descriptors.
fn serve_metrics(
    addr: std::net::SocketAddr,
    max_connections: u32,
    plan: &config::JobPlan,
    stats: &Arc<JobStats>,
) -> Result<()> {
    let (s, job, source) = (stats.clone(), plan.job_id.clone(), plan.source.clone());
    // named at each scrape: a Kafka topic may gain partitions while the job runs
    let render = move || {
        let names: Vec<String> = (0..s.source.partitions.len() as u32)
            .map(|p| source.partition_name(p))
            .collect();
        s.render_metrics(&job, &names)
    };
    let limits = hotlist_server::limits::ConnectionLimits {
        max_connections: max_connections as usize,
        ..hotlist_server::metrics_endpoint::default_limits()
    };
    let bound = hotlist_server::metrics_endpoint::serve(addr, Arc::new(render), limits)
        .map_err(|e| anyhow::anyhow!("cannot serve metrics on {addr}: {e}"))?;
    eprintln!("metrics on http://{bound}/metrics");
    Ok(())
}

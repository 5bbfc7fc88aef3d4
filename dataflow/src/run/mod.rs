//! Running a job: timely workers, the sink writer thread, and the live progress display.
//!
//! Threads: `workers` timely worker threads run the graph; worker 0 hands each completed
//! epoch to the **writer** thread (`writer`), which coalesces whatever is queued into one
//! transaction (so commits keep up however small epochs are) and retries transient store errors
//! with a bounded backoff. The calling thread shows progress (`display`) until the workers
//! finish.
//!
//! Stopping: setting `shutdown` (Ctrl-C) makes every source close its current epoch with an
//! emit tick and end; everything already read is counted, published and committed before
//! `run` returns. Open windows stay open in the store (nothing is sealed by a stop).
//!
//! Files: this one the run's steps (start, start the writer, start the workers, join);
//! `start` who owns the job, where the run resumes and when it refuses to start; `writer` the
//! sink writer, which starts the Redis fan-out beside it (`hotlist_sinks::redis::fanout`: its own
//! thread, connecting lazily: an unreachable fan-out never stops the job); `display` the
//! progress display; `summary` what a run returns and prints.

mod display;
mod start;
mod summary;
#[cfg(test)]
mod trend_tests;
mod writer;

pub use display::{render_lists, status_line, Progress};
pub use summary::{summary_text, RunSummary};

use crate::config::{JobPlan, RedisTarget, SinkPlan, SourcePlan};
use crate::connect_watchdog;
use crate::graph::{self, sink::SinkHandoff};
use crate::peer_loss;
use crate::run_ctx::RunCtx;
use crate::source::kafka;
use crate::source::kafka::discovery::PartitionWatch;
use crate::source::kafka::resume;
use crate::source::open_partitions;
use crate::stats::JobStats;
use anyhow::{anyhow, Context, Result};
use hotlist_operators::dead_letter_cap::BlockCounts;
use hotlist_sinks::PostgresStore;
use hotlist_sinks::RedisStore;
use hotlist_sinks::{SinkStore, SqliteStore};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timely::communication::WorkerGuards;

/// Opens the store a plan names.
pub fn open_store(sink: &SinkPlan) -> Result<Box<dyn SinkStore>> {
    Ok(match sink {
        SinkPlan::Sqlite(path) => {
            Box::new(SqliteStore::open(path).with_context(|| format!("cannot open sink {}", path.display()))?)
        }
        SinkPlan::Postgres { url, schema, timeouts } => Box::new(
            PostgresStore::connect_with(url, schema, *timeouts).context("cannot connect to the PostgreSQL sink")?,
        ),
        SinkPlan::Redis(t) => Box::new(open_redis(t)?),
        SinkPlan::Memory(store) => Box::new(store.clone()),
    })
}

fn open_redis(t: &RedisTarget) -> Result<RedisStore> {
    RedisStore::connect(&t.url, &t.prefix).context("cannot connect to the Redis sink")
}

/// Completes and checks what a plan can only know at run time: a Kafka topic's partition count;
/// whether a generator's events stay within `time.max_future` of the wall clock.
pub fn resolve_source(plan: &JobPlan) -> Result<JobPlan> {
    crate::config::check_against_clock(plan, hotlist_operators::time::Millis::now())?;
    let mut p = plan.clone();
    if let SourcePlan::Kafka { spec, partitions: 0 } = &plan.source {
        let n = kafka::partition_count(spec, Duration::from_secs(30))?;
        p.source = SourcePlan::Kafka {
            spec: spec.clone(),
            partitions: n,
        };
    }
    Ok(p)
}

/// Runs `plan` to the end of its input or until `shutdown` is set.
pub fn run(plan: &JobPlan, progress: Progress, shutdown: Arc<AtomicBool>) -> Result<RunSummary> {
    run_with_stats(
        plan,
        progress,
        shutdown,
        Arc::new(JobStats::new(plan.total_workers(), plan.source.partitions() as usize)),
    )
}

/// `run`, with caller-owned stats (benchmarks sample them while the job runs).
pub fn run_with_stats(
    plan: &JobPlan,
    progress: Progress,
    shutdown: Arc<AtomicBool>,
    stats: Arc<JobStats>,
) -> Result<RunSummary> {
    let started = Instant::now();
    let resolved = resolve_source(plan)?;
    let plan = &resolved;
    let start::Start {
        store,
        epoch_base,
        restore,
        facts,
        dir_lock,
        dead_letter_blocks,
    } = start::start(plan)?;
    // Epochs continue the store's numbering, so a new run's commits are never skipped.
    let watch = partition_watch(plan);
    let ctx = RunCtx {
        epoch_base,
        restore: restore.map(|r| resume::continue_finished(r, plan)).map(Arc::new),
        checkpoint: plan.checkpoint.clone(),
        job: plan.job_id.clone(),
        fatal: Arc::new(Mutex::new(None)),
        partition_count: watch.as_ref().map(PartitionWatch::count),
        writes_sink: plan.writes_the_sink(),
    };
    let failed = Arc::new(AtomicBool::new(false));
    let (tx, writer) = writer::start(plan, store, stats.clone(), facts, failed.clone())?;
    let handoff = SinkHandoff {
        tx,
        job: plan.job_id.clone(),
        source: plan.source.clone(),
        failed: failed.clone(),
        epoch_base,
        dead_letters: BlockCounts::new(plan.max_dead_letters_per_block, dead_letter_blocks),
        stats: stats.clone(),
    };
    let guards = start_workers(plan, handoff, &ctx, &stats, &shutdown, &failed)?;
    let display = display::spawn_display(plan, progress, stats.clone());
    let worker_error = join_workers(guards);
    display.stop();
    drop(watch);
    let writer_result = writer.join().map_err(|_| anyhow!("sink writer panicked"))?;
    writer_result?;
    drop(dir_lock); // the run is over: another may start
    if let Some(e) = ctx.fatal.lock().ok().and_then(|f| f.clone()) {
        return Err(anyhow!("{e}"));
    }
    if let Some(e) = worker_error {
        return Err(e);
    }
    Ok(RunSummary::from_stats(
        &stats,
        started.elapsed(),
        shutdown.load(Relaxed),
    ))
}

/// A live Kafka run with `source.partition_discovery`: the thread watching the topic for new
/// partitions (it stops when this is dropped).
fn partition_watch(plan: &JobPlan) -> Option<PartitionWatch> {
    match &plan.source {
        SourcePlan::Kafka { spec, partitions } if !spec.bounded => spec
            .partition_discovery
            .map(|every| PartitionWatch::start(spec, *partitions, every.as_std())),
        _ => None,
    }
}

/// The timely configuration: threads in this process, or this process of a cluster.
fn timely_config(plan: &JobPlan) -> timely::Config {
    match &plan.cluster {
        None => timely::Config::process(plan.workers),
        Some(c) => timely::Config {
            communication: timely::CommunicationConfig::Cluster {
                threads: plan.workers,
                process: c.process,
                addresses: c.addresses.clone(),
                report: false,
                zerocopy: false,
            },
            worker: timely::WorkerConfig::default(),
        },
    }
}

/// Starts the timely workers (connecting the cluster first, bounded by the connect watchdog).
/// Each builds the graph over its partitions and steps it until the probe is done; any failure
/// (an operator's `ctx.fail`, the writer gone) turns into a graceful stop of every source.
fn start_workers(
    plan: &JobPlan,
    handoff: SinkHandoff,
    ctx: &RunCtx,
    stats: &Arc<JobStats>,
    shutdown: &Arc<AtomicBool>,
    failed: &Arc<AtomicBool>,
) -> Result<WorkerGuards<Result<(), String>>> {
    // worker 0 takes the hand-off to the writer
    let handoff = Arc::new(Mutex::new(Some(handoff)));
    let worker_plan = Arc::new(plan.clone());
    let (stats, shutdown, failed, ctx) = (stats.clone(), shutdown.clone(), failed.clone(), ctx.clone());
    crate::source::read_ahead::use_spare_cores(plan.workers);
    // timely connects the cluster inside `execute`, without a time limit
    let watchdog = plan.cluster.as_ref().map(connect_watchdog::start);
    if plan.cluster.is_some() {
        peer_loss::exit_on_peer_loss();
    }
    let guards = timely::execute(timely_config(plan), move |worker| -> Result<(), String> {
        let readers = open_partitions(&worker_plan, worker.index(), worker.peers()).map_err(|e| format!("{e:#}"))?;
        let handoff = if worker.index() == 0 {
            handoff.lock().ok().and_then(|mut h| h.take())
        } else {
            None
        };
        let plan = worker_plan.clone();
        let (stats, stop, graph_ctx) = (stats.clone(), shutdown.clone(), ctx.clone());
        let probe = worker
            .dataflow::<u64, _, _>(move |scope| graph::build(scope, &plan, readers, handoff, stats, stop, graph_ctx));
        while !probe.done() {
            if failed.load(Relaxed) || ctx.failed() {
                shutdown.store(true, Relaxed);
            }
            worker.step_or_park(Some(Duration::from_millis(20)));
        }
        Ok(())
    })
    .map_err(|e| anyhow!("cannot start timely workers: {e}"))?;
    drop(watchdog); // connected
    Ok(guards)
}

/// Waits for the workers; returns the last failure, if any.
fn join_workers(guards: WorkerGuards<Result<(), String>>) -> Option<anyhow::Error> {
    let mut worker_error = None;
    for r in guards.join() {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => worker_error = Some(anyhow!("worker failed: {e}")),
            Err(e) => worker_error = Some(anyhow!("worker panicked: {e}")),
        }
    }
    worker_error
}

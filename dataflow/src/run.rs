//! Running a job: timely workers, the sink writer thread, and the live progress display.
//!
//! Threads: `workers` timely worker threads run the graph; worker 0 hands each completed
//! epoch to the **writer** thread, which coalesces whatever is queued into one transaction
//! (so commits keep up however small epochs are) and retries transient store errors with a
//! bounded backoff. The calling thread shows progress until the workers finish.
//!
//! Stopping: setting `shutdown` (Ctrl-C) makes every source close its current epoch with an
//! emit tick and end; everything already read is counted, published and committed before
//! `run` returns. Open windows stay open in the store (nothing is sealed by a stop).

use crate::checkpoint;
use crate::config::{CheckpointPlan, JobPlan, RedisTarget, SinkPlan, SourcePlan};
use crate::connect_watchdog;
use crate::graph::RunCtx;
use crate::graph::{self, sink::SinkHandoff};
use crate::peer_loss;
use crate::source::kafka;
use crate::source::open_partitions;
use crate::stats::JobStats;
use anyhow::{anyhow, Context, Result};
use hotlist_sinks::{CommitBatch, PostgresStore, RedisStore, SinkStore, SqliteStore};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to show progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Progress {
    /// A live dashboard on a terminal, a status line every 5 s otherwise.
    Auto,
    /// Always the live dashboard.
    Always,
    /// Nothing while running (the summary is still printed by the CLI).
    Never,
}

/// What a finished run did.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// Records read.
    pub records_in: u64,
    /// Valid events.
    pub events_in: u64,
    /// Bad records.
    pub bad: u64,
    /// Events late for some window.
    pub late: u64,
    /// Events late for all their windows.
    pub late_dropped: u64,
    /// Events dropped for sealed windows.
    pub sealed_dropped: u64,
    /// Revisions published.
    pub revisions: u64,
    /// Instances sealed.
    pub windows_sealed: u64,
    /// Sink transactions.
    pub commits: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Peak live (item, pane) counters.
    pub peak_counters: u64,
    /// Final global watermark.
    pub watermark: hotlist_operators::time::Millis,
    /// Whether the run was stopped (Ctrl-C) rather than reaching the end of its input.
    pub stopped: bool,
}

/// Opens the store a plan names.
pub fn open_store(sink: &SinkPlan) -> Result<Box<dyn SinkStore>> {
    Ok(match sink {
        SinkPlan::Sqlite(path) => {
            Box::new(SqliteStore::open(path).with_context(|| format!("cannot open sink {}", path.display()))?)
        }
        SinkPlan::Postgres { url, schema } => {
            Box::new(PostgresStore::connect_with_schema(url, schema).context("cannot connect to the PostgreSQL sink")?)
        }
        SinkPlan::Redis(t) => Box::new(open_redis(t)?),
        SinkPlan::Memory(store) => Box::new(store.clone()),
    })
}

fn open_redis(t: &RedisTarget) -> Result<RedisStore> {
    RedisStore::connect(&t.url, &t.prefix).context("cannot connect to the Redis sink")
}

/// Completes what a plan can only know at run time: a Kafka topic's partition count.
pub fn resolve_source(plan: &JobPlan) -> Result<JobPlan> {
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
    let mut store = open_store(&plan.sink)?;
    store
        .prepare(&plan.job_id, &plan.windows)
        .context("cannot prepare the sink")?;
    // Epochs continue the store's numbering, so a new run's commits are never skipped.
    let committed = store
        .committed_epoch(&plan.job_id)
        .context("cannot read the sink's committed epoch")?;
    let epoch_base = committed.map_or(0, |e| e + 1);
    let restore = match &plan.checkpoint {
        None => None,
        Some(cp) => {
            checkpoint::remove_uncommitted(&cp.dir, &plan.job_id, committed);
            match committed {
                None if plan.from_checkpoint.is_some() => {
                    anyhow::bail!("--from-checkpoint: job {:?} has no committed checkpoint", plan.job_id)
                }
                None => None,
                Some(c) => match checkpoint::restore(&cp.dir, &plan.job_id, c, plan.from_checkpoint)? {
                    Some(r) => {
                        tracing::info!(
                            "restoring checkpoint {} ({} counter file(s)) for job {:?}",
                            r.epoch,
                            r.counters.len(),
                            plan.job_id
                        );
                        Some(Arc::new(r))
                    }
                    None => {
                        tracing::warn!(
                            "no usable checkpoint for job {:?} in {}: starting from the beginning of the input",
                            plan.job_id,
                            cp.dir.display()
                        );
                        None
                    }
                },
            }
        }
    };
    let ctx = RunCtx {
        epoch_base,
        restore,
        checkpoint: plan.checkpoint.clone(),
        job: plan.job_id.clone(),
        fatal: Arc::new(Mutex::new(None)),
    };
    let fanout = match &plan.fanout {
        None => None,
        Some(t) => {
            let mut r = open_redis(t)?;
            r.prepare(&plan.job_id, &plan.windows)
                .context("cannot prepare the Redis fan-out")?;
            Some(Fanout {
                store: r,
                pending: None,
            })
        }
    };

    let (tx, rx) = crossbeam_channel::bounded::<CommitBatch>(64);
    let writer_stats = stats.clone();
    let writer = std::thread::Builder::new()
        .name("hotlist-writer".into())
        .spawn({
            let checkpoint = plan.checkpoint.clone();
            let (job, workers) = (plan.job_id.clone(), plan.workers);
            move || write_loop(store, fanout, rx, &writer_stats, checkpoint.map(|c| (c, job, workers)))
        })
        .context("cannot start the sink writer thread")?;

    let failed = Arc::new(AtomicBool::new(false));
    let handoff = Arc::new(Mutex::new(Some(SinkHandoff {
        tx,
        job: plan.job_id.clone(),
        partition_names: (0..plan.source.partitions())
            .map(|p| plan.source.partition_name(p))
            .collect(),
        failed: failed.clone(),
        epoch_base,
    })));
    let worker_plan = Arc::new(plan.clone());
    let worker_stats = stats.clone();
    let worker_shutdown = shutdown.clone();
    let worker_failed = failed.clone();
    let worker_ctx = ctx.clone();
    let config = match &plan.cluster {
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
    };
    // timely connects the cluster inside `execute`, without a time limit
    let watchdog = plan.cluster.as_ref().map(connect_watchdog::start);
    if plan.cluster.is_some() {
        peer_loss::exit_on_peer_loss();
    }
    let guards = timely::execute(config, move |worker| -> Result<(), String> {
        let readers = open_partitions(&worker_plan, worker.index(), worker.peers()).map_err(|e| format!("{e:#}"))?;
        let handoff = if worker.index() == 0 {
            handoff.lock().ok().and_then(|mut h| h.take())
        } else {
            None
        };
        let plan = worker_plan.clone();
        let stats = worker_stats.clone();
        let stop = worker_shutdown.clone();
        let ctx = worker_ctx.clone();
        let probe =
            worker.dataflow::<u64, _, _>(move |scope| graph::build(scope, &plan, readers, handoff, stats, stop, ctx));
        while !probe.done() {
            if worker_failed.load(Relaxed) || worker_ctx.failed() {
                worker_shutdown.store(true, Relaxed);
            }
            worker.step_or_park(Some(Duration::from_millis(20)));
        }
        Ok(())
    })
    .map_err(|e| anyhow!("cannot start timely workers: {e}"))?;
    drop(watchdog); // connected

    let display = spawn_display(plan, progress, stats.clone());
    let results = guards.join();
    display.stop();
    let mut worker_error = None;
    for r in results {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => worker_error = Some(anyhow!("worker failed: {e}")),
            Err(e) => worker_error = Some(anyhow!("worker panicked: {e}")),
        }
    }
    let writer_result = writer.join().map_err(|_| anyhow!("sink writer panicked"))?;
    writer_result?;
    if let Some(e) = ctx.fatal.lock().ok().and_then(|f| f.clone()) {
        return Err(anyhow!("{e}"));
    }
    if let Some(e) = worker_error {
        return Err(e);
    }
    Ok(RunSummary {
        records_in: stats.records_in.load(Relaxed),
        events_in: stats.events_in.load(Relaxed),
        bad: stats.bad.load(Relaxed),
        late: stats.late.load(Relaxed),
        late_dropped: stats.late_dropped.load(Relaxed),
        sealed_dropped: stats.sealed_dropped.load(Relaxed),
        revisions: stats.revisions.load(Relaxed),
        windows_sealed: stats.windows_sealed.load(Relaxed),
        commits: stats.commits.load(Relaxed),
        elapsed: started.elapsed(),
        peak_counters: stats.peak_counters.load(Relaxed),
        watermark: stats.watermark(),
        stopped: shutdown.load(Relaxed),
    })
}

/// The Redis fan-out: a serving copy of the latest lists. Its failures never stop the job:
/// a batch that could not be written is kept and merged into the next attempt, so Redis
/// catches up (it keeps only the newest instance per window anyway).
struct Fanout {
    store: RedisStore,
    pending: Option<CommitBatch>,
}

impl Fanout {
    fn commit(&mut self, batch: &CommitBatch) {
        let merged = match self.pending.take() {
            None => batch.clone(),
            Some(mut p) => {
                p.epoch = batch.epoch;
                p.watermark = p.watermark.max(batch.watermark);
                p.lists.extend(batch.lists.iter().cloned());
                p
            }
        };
        let merged = CommitBatch {
            dead_letters: Vec::new(),
            ..merged
        };
        if let Err(e) = self.store.commit(&merged) {
            tracing::warn!(
                "Redis fan-out commit of epoch {} failed (will retry with the next batch): {e}",
                batch.epoch
            );
            self.pending = Some(merged);
        }
    }
}

/// Drains batches into the store, coalescing what is queued into one transaction. With
/// checkpoints, every batch is a checkpoint's: after its commit the manifest is written and old
/// checkpoints are removed.
fn write_loop(
    mut store: Box<dyn SinkStore>,
    mut fanout: Option<Fanout>,
    rx: crossbeam_channel::Receiver<CommitBatch>,
    stats: &JobStats,
    checkpoint: Option<(CheckpointPlan, String, usize)>,
) -> Result<()> {
    const MAX_COALESCE: usize = 256;
    while let Ok(mut batch) = rx.recv() {
        let mut merged = 1;
        while merged < MAX_COALESCE {
            match rx.try_recv() {
                Ok(more) => {
                    batch.epoch = more.epoch;
                    batch.watermark = batch.watermark.max(more.watermark);
                    batch.lists.extend(more.lists);
                    batch.dead_letters.extend(more.dead_letters);
                    merged += 1;
                }
                Err(_) => break,
            }
        }
        let started = Instant::now();
        commit_with_retry(store.as_mut(), &batch)?;
        stats.commit_seconds.observe(started.elapsed().as_secs_f64());
        if let Some(f) = fanout.as_mut() {
            f.commit(&batch);
        }
        if let Some((cp, job, workers)) = &checkpoint {
            let manifest = serde_json::json!({
                "job": job, "epoch": batch.epoch, "workers": workers,
                "watermark": batch.watermark.0, "committed_at": hotlist_operators::time::Millis::now().0,
            });
            if let Err(e) = checkpoint::after_commit(&cp.dir, job, batch.epoch, cp.retain, &manifest) {
                tracing::warn!(
                    "checkpoint {} committed, but its manifest or cleanup failed: {e:#}",
                    batch.epoch
                );
            }
        }
        stats.committed_epoch.store(batch.epoch, Relaxed);
        stats.commits.fetch_add(1, Relaxed);
        for l in &batch.lists {
            stats.note_committed(l);
        }
    }
    Ok(())
}

fn commit_with_retry(store: &mut dyn SinkStore, batch: &CommitBatch) -> Result<()> {
    let mut delay = Duration::from_millis(50);
    let mut attempt = 1;
    loop {
        match store.commit(batch) {
            Ok(_) => return Ok(()),
            Err(e) if e.retryable() && attempt < 20 => {
                tracing::warn!("sink commit failed (attempt {attempt}, retrying in {delay:?}): {e}");
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_secs(5));
                attempt += 1;
            }
            Err(e) => return Err(anyhow!("sink commit of epoch {} failed: {e}", batch.epoch)),
        }
    }
}

/// The progress display thread.
struct Display {
    stop: Option<crossbeam_channel::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Display {
    fn stop(mut self) {
        self.stop.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn spawn_display(plan: &JobPlan, progress: Progress, stats: Arc<JobStats>) -> Display {
    let tty = std::io::stdout().is_terminal();
    let (dashboard, every) = match progress {
        Progress::Never => {
            return Display {
                stop: None,
                handle: None,
            }
        }
        Progress::Always => (true, Duration::from_secs(1)),
        Progress::Auto if tty => (true, Duration::from_secs(1)),
        Progress::Auto => (false, Duration::from_secs(5)),
    };
    let (tx, rx) = crossbeam_channel::bounded::<()>(0);
    let title = format!("hotlist · job {} · {} worker(s)", plan.job_id, plan.workers);
    let windows: Vec<String> = plan.windows.iter().map(|w| w.name.clone()).collect();
    let handle = std::thread::spawn(move || {
        let mut last = (Instant::now(), 0u64);
        loop {
            match rx.recv_timeout(every) {
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let events = stats.events_in.load(Relaxed);
            let rate = (events - last.1) as f64 / last.0.elapsed().as_secs_f64().max(1e-3);
            last = (Instant::now(), events);
            let line = status_line(&stats, rate);
            if dashboard {
                let mut out = String::new();
                out.push_str("\x1b[H\x1b[2J");
                out.push_str(&format!("{title}   (Ctrl-C stops after committing)\n{line}\n"));
                out.push_str(&render_lists(&stats, &windows, 5));
                let mut so = std::io::stdout().lock();
                let _ = so.write_all(out.as_bytes());
                let _ = so.flush();
            } else {
                eprintln!("{line}");
            }
        }
    });
    Display {
        stop: Some(tx),
        handle: Some(handle),
    }
}

/// One line of counters.
pub fn status_line(stats: &JobStats, rate: f64) -> String {
    format!(
        "events {} ({:.0}/s) · bad {} · late {} (dropped {}) · sealed {} · watermark {} · closed {} · sealed windows {} · revisions {} · commits {} · {} counters, {:.1} MB",
        stats.events_in.load(Relaxed),
        rate,
        stats.bad.load(Relaxed),
        stats.late.load(Relaxed),
        stats.late_dropped.load(Relaxed),
        stats.sealed_dropped.load(Relaxed),
        stats.watermark(),
        stats.windows_closed.load(Relaxed),
        stats.windows_sealed.load(Relaxed),
        stats.revisions.load(Relaxed),
        stats.commits.load(Relaxed),
        stats.total_counters(),
        stats.total_state_bytes() as f64 / 1e6,
    )
}

/// The latest committed list of each window, top `n` rows.
pub fn render_lists(stats: &JobStats, windows: &[String], n: usize) -> String {
    let latest = match stats.latest.lock() {
        Ok(l) => l.clone(),
        Err(_) => return String::new(),
    };
    let mut out = String::new();
    for w in windows {
        match latest.get(w) {
            None => out.push_str(&format!("\n{w}: no list yet\n")),
            Some(l) => {
                out.push_str(&format!(
                    "\n{w} [{} .. {}) revision {} {}\n",
                    l.start,
                    l.end,
                    l.revision,
                    l.state.as_str()
                ));
                for (i, r) in l.items.iter().take(n).enumerate() {
                    out.push_str(&format!("  {:>3}  {:<32} {:>12}\n", i + 1, r.item_id, r.count));
                }
            }
        }
    }
    out
}

/// The end-of-run summary printed by `hotlist run`.
pub fn summary_text(plan: &JobPlan, s: &RunSummary) -> String {
    let secs = s.elapsed.as_secs_f64().max(1e-9);
    let mut out = format!(
        "{} after {:.1}s: {} records, {} events ({:.0}/s), {} bad, {} late ({} counted nowhere), {} sealed-dropped; \
         {} revisions, {} windows sealed, {} commits; watermark {}\n",
        if s.stopped { "stopped" } else { "finished" },
        secs,
        s.records_in,
        s.events_in,
        s.events_in as f64 / secs,
        s.bad,
        s.late,
        s.late_dropped,
        s.sealed_dropped,
        s.revisions,
        s.windows_sealed,
        s.commits,
        s.watermark,
    );
    out.push_str(&format!(
        "results are in {} (job {:?}); try: hotlist query --config <config> --window {}\n",
        match &plan.sink {
            SinkPlan::Sqlite(p) => p.display().to_string(),
            SinkPlan::Postgres { schema, .. } => format!("PostgreSQL (schema {schema})"),
            SinkPlan::Redis(t) => format!("Redis (prefix {})", t.prefix),
            SinkPlan::Memory(_) => "memory".into(),
        },
        plan.job_id,
        plan.windows.first().map(|w| w.name.as_str()).unwrap_or("1m"),
    ));
    out
}

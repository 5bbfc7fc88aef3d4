//! The sink writer thread: drains the epochs worker 0 hands off into the store, coalescing
//! whatever is queued into one transaction (so commits keep up however small epochs are),
//! retrying transient store errors with a bounded backoff, and copying each batch to the Redis
//! fan-out. With checkpoints every batch is a checkpoint's: the writer writes its `MANIFEST`
//! before the commit (its files are all durable by then) and applies retention after it.
//!
//! A commit that still fails after the retries, or fails for good at once (a stale writer
//! whose job another run took over, too), and a manifest that cannot be written end the thread
//! with the error; worker 0 sees the channel closed and the job stops.

use super::open_redis;
use crate::checkpoint::{self, RunFacts};
use crate::config::{CheckpointPlan, JobPlan};
use crate::stats::JobStats;
use anyhow::{anyhow, Context, Result};
use hotlist_sinks::RedisStore;
use hotlist_sinks::{CommitBatch, SinkError, SinkStore};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Batches at most coalesced into one transaction.
const MAX_COALESCE: usize = 256;

/// Starts the writer thread over `store` (prepared already) and the plan's fan-out; `facts`
/// (with checkpoints, on the process that writes the sink) go into each checkpoint's manifest.
/// Returns its inbox (bounded: a slow store backs up into worker 0) and its handle.
pub fn start(
    plan: &JobPlan,
    store: Box<dyn SinkStore>,
    stats: Arc<JobStats>,
    facts: Option<RunFacts>,
) -> Result<(crossbeam_channel::Sender<CommitBatch>, JoinHandle<Result<()>>)> {
    let fanout = open_fanout(plan, plan.from_scratch)?;
    let (tx, rx) = crossbeam_channel::bounded::<CommitBatch>(64);
    let checkpoint = plan.checkpoint.clone().zip(facts);
    let writer = std::thread::Builder::new()
        .name("hotlist-writer".into())
        .spawn(move || write_loop(store, fanout, rx, &stats, checkpoint))
        .context("cannot start the sink writer thread")?;
    Ok((tx, writer))
}

/// The plan's Redis fan-out, connected and prepared (and emptied of the job's lists when the
/// run starts the job over: its commits start again from epoch 0).
fn open_fanout(plan: &JobPlan, start_over: bool) -> Result<Option<Fanout>> {
    let Some(t) = &plan.fanout else { return Ok(None) };
    let mut r = open_redis(t)?;
    if start_over && plan.writes_the_sink() {
        r.reset(&plan.job_id)
            .context("cannot delete the job's lists from the Redis fan-out")?;
    }
    r.prepare(&plan.job_id, &plan.windows)
        .context("cannot prepare the Redis fan-out")?;
    Ok(Some(Fanout {
        store: r,
        pending: None,
    }))
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
/// checkpoints, every batch is a checkpoint's: its manifest is written before the commit, and
/// old checkpoints are removed after it.
fn write_loop(
    mut store: Box<dyn SinkStore>,
    mut fanout: Option<Fanout>,
    rx: crossbeam_channel::Receiver<CommitBatch>,
    stats: &JobStats,
    checkpoint: Option<(CheckpointPlan, RunFacts)>,
) -> Result<()> {
    while let Ok(mut batch) = rx.recv() {
        coalesce(&mut batch, &rx);
        if let Some((cp, facts)) = &checkpoint {
            let dir = checkpoint::checkpoint_dir(&cp.dir, &facts.job, batch.epoch);
            checkpoint::write_manifest(&dir, facts, batch.epoch, batch.watermark)
                .with_context(|| format!("checkpoint write failed: the manifest of checkpoint {}", batch.epoch))?;
            hotlist_sinks::crash_point::crash_point("checkpoint.manifest");
        }
        let started = Instant::now();
        commit_with_retry(store.as_mut(), &batch)?;
        stats.commit_seconds.observe(started.elapsed().as_secs_f64());
        if let Some(f) = fanout.as_mut() {
            f.commit(&batch);
        }
        if let Some((cp, facts)) = &checkpoint {
            checkpoint::retain(&cp.dir, &facts.job, batch.epoch, cp.retain);
        }
        stats.committed_epoch.store(batch.epoch, Relaxed);
        stats.commits.fetch_add(1, Relaxed);
        for l in &batch.lists {
            stats.note_committed(l);
        }
    }
    Ok(())
}

/// Merges whatever else is queued (up to [`MAX_COALESCE`] batches) into `batch`.
fn coalesce(batch: &mut CommitBatch, rx: &crossbeam_channel::Receiver<CommitBatch>) {
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
}

/// Commits one batch, retrying retryable errors (up to 20 attempts, backoff 50 ms doubling
/// to 5 s). A stale writer's refusal is the run's last word as it is.
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
            Err(e @ SinkError::TakenOver { .. }) => return Err(anyhow!("{e}")),
            Err(e) => return Err(anyhow!("sink commit of epoch {} failed: {e}", batch.epoch)),
        }
    }
}

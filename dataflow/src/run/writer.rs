//! The sink writer thread: drains the epochs worker 0 hands off into the store, coalescing
//! whatever is queued into one transaction (so commits keep up however small epochs are),
//! retrying transient store errors with a bounded backoff, handing each committed batch to the
//! Redis fan-out (`fanout`, which writes it on a thread of its own), and finishing each
//! checkpoint (manifest, retention) after its commit.
//!
//! A commit that still fails after the retries, or fails for good at once, ends the thread
//! with the error; worker 0 sees the channel closed and the job stops.

use super::fanout::Fanout;
use crate::checkpoint;
use crate::config::{CheckpointPlan, JobPlan};
use crate::stats::JobStats;
use anyhow::{anyhow, Context, Result};
use hotlist_sinks::{CommitBatch, SinkStore};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Batches at most coalesced into one transaction.
const MAX_COALESCE: usize = 256;

/// Starts the writer thread over `store` (prepared already) and the plan's fan-out; returns
/// its inbox (bounded: a slow store backs up into worker 0) and its handle.
pub fn start(
    plan: &JobPlan,
    store: Box<dyn SinkStore>,
    stats: Arc<JobStats>,
) -> Result<(crossbeam_channel::Sender<CommitBatch>, JoinHandle<Result<()>>)> {
    let fanout = match &plan.fanout {
        Some(t) => Some(Fanout::start(t, &plan.job_id, &plan.windows, stats.clone())?),
        None => None,
    };
    let (tx, rx) = crossbeam_channel::bounded::<CommitBatch>(64);
    let checkpoint = plan.checkpoint.clone().map(|c| (c, plan.job_id.clone(), plan.workers));
    let writer = std::thread::Builder::new()
        .name("hotlist-writer".into())
        .spawn(move || write_loop(store, fanout, rx, &stats, checkpoint))
        .context("cannot start the sink writer thread")?;
    Ok((tx, writer))
}

/// Drains batches into the store, coalescing what is queued into one transaction. With
/// checkpoints, every batch is a checkpoint's: after its commit the manifest is written and old
/// checkpoints are removed.
fn write_loop(
    mut store: Box<dyn SinkStore>,
    fanout: Option<Fanout>,
    rx: crossbeam_channel::Receiver<CommitBatch>,
    stats: &JobStats,
    checkpoint: Option<(CheckpointPlan, String, usize)>,
) -> Result<()> {
    while let Ok(mut batch) = rx.recv() {
        coalesce(&mut batch, &rx);
        let started = Instant::now();
        commit_with_retry(store.as_mut(), &batch)?;
        stats.commit_seconds.observe(started.elapsed().as_secs_f64());
        if let Some(f) = &fanout {
            f.offer(&batch);
        }
        if let Some((cp, job, workers)) = &checkpoint {
            finish_checkpoint(cp, job, *workers, &batch);
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

/// After a checkpoint's commit: its manifest, and retention. Failures only warn: the commit
/// (the truth) is done.
fn finish_checkpoint(cp: &CheckpointPlan, job: &str, workers: usize, batch: &CommitBatch) {
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

/// Commits one batch, retrying retryable errors (up to 20 attempts, backoff 50 ms doubling
/// to 5 s).
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

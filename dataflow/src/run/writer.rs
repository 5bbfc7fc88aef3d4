//! The sink writer thread: drains the epochs worker 0 hands off into the store, coalescing
//! whatever is queued into one transaction (so commits keep up however small epochs are),
//! retrying transient store errors with a bounded backoff, and handing each committed batch to
//! the Redis fan-out (`hotlist_sinks::redis::Fanout`, which writes it on a thread of its own). With checkpoints every
//! batch is a checkpoint's: the writer writes its `MANIFEST` before the commit (its files are all
//! durable by then) and applies retention after it.
//!
//! A commit that still fails after the retries, or fails for good at once (a stale writer
//! whose job another run took over, too), and a manifest that cannot be written end the thread
//! with the error; worker 0 sees the channel closed and the job stops.

use crate::checkpoint::{self, RunFacts};
use crate::config::{CheckpointPlan, JobPlan};
use crate::stats::JobStats;
use anyhow::{anyhow, Context, Result};
use hotlist_sinks::redis::{Fanout, FanoutTarget};
use hotlist_sinks::{CommitBatch, SinkError, SinkStore};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
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
    failed: Arc<AtomicBool>,
) -> Result<(crossbeam_channel::Sender<CommitBatch>, JoinHandle<Result<()>>)> {
    let fanout = match &plan.fanout {
        // a run that starts the job over empties the job's lists in Redis first (its commits
        // start again from epoch 0)
        Some(t) => {
            let target = FanoutTarget {
                url: t.url.clone(),
                prefix: t.prefix.clone(),
                job: plan.job_id.clone(),
                windows: plan.window_specs(),
                start_over: plan.from_scratch && plan.writes_the_sink(),
            };
            let fanout =
                Fanout::start(target, stats.fanout.clone()).context("cannot start the Redis fan-out thread")?;
            Some(fanout)
        }
        None => None,
    };
    let (tx, rx) = crossbeam_channel::bounded::<CommitBatch>(64);
    let checkpoint = plan.checkpoint.clone().zip(facts);
    let writer = std::thread::Builder::new()
        .name("hotlist-writer".into())
        .spawn(move || {
            let result = write_loop(store, fanout, rx, &stats, checkpoint);
            // tell the workers at once: with quiet input the next hand-off, which would find
            // the channel closed, may be a long way off
            if result.is_err() {
                failed.store(true, Relaxed);
            }
            result
        })
        .context("cannot start the sink writer thread")?;
    Ok((tx, writer))
}

/// Drains batches into the store, coalescing what is queued into one transaction. With
/// checkpoints, every batch is a checkpoint's: its manifest is written before the commit, and
/// old checkpoints are removed after it.
fn write_loop(
    mut store: Box<dyn SinkStore>,
    fanout: Option<Fanout>,
    rx: crossbeam_channel::Receiver<CommitBatch>,
    stats: &JobStats,
    checkpoint: Option<(CheckpointPlan, RunFacts)>,
) -> Result<()> {
    let remote = match checkpoint.as_ref().and_then(|(cp, _)| cp.remote.as_ref()) {
        Some(t) => Some(checkpoint::remote::Remote::connect(t)?),
        None => None,
    };
    let mut uploaded: Option<u64> = None;
    while let Ok(mut batch) = rx.recv() {
        coalesce(&mut batch, &rx);
        if let Some((cp, facts)) = &checkpoint {
            let dir = checkpoint::checkpoint_dir(&cp.dir, &facts.job, batch.epoch);
            if let Some(r) = &remote {
                // the other processes' parts (each uploaded its own before the epoch went)
                r.fetch_parts(&cp.dir, &facts.job, batch.epoch)
                    .with_context(|| format!("checkpoint write failed: the parts of checkpoint {}", batch.epoch))?;
            }
            checkpoint::write_manifest(&dir, facts, batch.epoch, batch.watermark)
                .with_context(|| format!("checkpoint write failed: the manifest of checkpoint {}", batch.epoch))?;
            hotlist_sinks::crash_point::crash_point("checkpoint.manifest");
            if let Some(r) = &remote {
                // in the bucket before the commit: a committed checkpoint is always there
                let took = r
                    .upload(&cp.dir, &facts.job, batch.epoch, uploaded)
                    .with_context(|| format!("checkpoint upload failed: checkpoint {}", batch.epoch))?;
                stats.checkpoints.checkpoint_upload_seconds.observe(took.as_secs_f64());
                uploaded = Some(batch.epoch);
            }
        }
        let started = Instant::now();
        commit_with_retry(store.as_mut(), &batch)?;
        stats.sink.commit_seconds.observe(started.elapsed().as_secs_f64());
        if let Some(f) = &fanout {
            f.offer(&batch);
        }
        if let Some((cp, facts)) = &checkpoint {
            checkpoint::retain(&cp.dir, &facts.job, batch.epoch, cp.retain);
            if let Some(Err(e)) = remote.as_ref().map(|r| r.retain(&facts.job, batch.epoch, cp.retain)) {
                tracing::warn!("checkpoint retention in the bucket failed (retried at the next commit): {e:#}");
            }
        }
        stats.sink.committed_epoch.store(batch.epoch, Relaxed);
        stats.sink.commits.fetch_add(1, Relaxed);
        for l in &batch.lists {
            stats.sink.note_committed(l);
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
                // every field named: a new one must say how it coalesces
                let CommitBatch {
                    job: _,
                    epoch,
                    watermark,
                    lists,
                    dead_letters,
                    hot_keys,
                    ranges,
                } = more;
                batch.epoch = epoch;
                batch.watermark = batch.watermark.max(watermark);
                batch.lists.extend(lists);
                batch.dead_letters.extend(dead_letters);
                batch.hot_keys.extend(hot_keys);
                batch.ranges.extend(ranges);
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

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::hot_keys::HotWindow;
    use hotlist_operators::time::Millis;

    /// Batches queued behind a slow commit go in one transaction with everything they carry:
    /// the epoch of the last, every batch's hot-key windows and sealed instances' ranges in
    /// order.
    #[test]
    fn coalescing_keeps_every_batchs_hot_key_windows() {
        let window = |start: i64| HotWindow {
            start: Millis(start),
            end: Millis(start + 10),
            watermark: Millis(start),
            as_of: Millis(0),
            keys: vec![],
        };
        let batch = |epoch: u64| CommitBatch {
            job: "j".into(),
            epoch,
            hot_keys: vec![window(epoch as i64 * 10)],
            ranges: vec![hotlist_operators::replay::SealedRanges {
                window: "w".into(),
                start: Millis(epoch as i64 * 10),
                end: Millis(epoch as i64 * 10 + 10),
                ranges: Ok(Vec::new()),
            }],
            ..CommitBatch::default()
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        for e in 2..=4 {
            tx.send(batch(e)).expect("send");
        }
        let mut first = batch(1);
        coalesce(&mut first, &rx);
        assert_eq!(first.epoch, 4);
        let starts: Vec<i64> = first.hot_keys.iter().map(|w| w.start.0).collect();
        assert_eq!(starts, [10, 20, 30, 40]);
        let starts: Vec<i64> = first.ranges.iter().map(|r| r.start.0).collect();
        assert_eq!(starts, [10, 20, 30, 40]);
    }
}

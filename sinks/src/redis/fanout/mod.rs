//! The Redis fan-out (`sink.redis_url`): a serving copy of each window's latest list, written
//! by a thread of its own after the primary store committed.
//!
//! Its failures never stop or slow the job: the writer thread only merges each committed batch
//! into the fan-out's pending lists (`pending`) and goes on; the `hotlist-fanout` thread writes them.
//! It connects lazily (an unreachable Redis at start-up is just a first failed attempt), and
//! after a failure it reconnects, prepares the job's windows again (a restarted Redis may have
//! lost them) and retries with a backoff of 100 ms doubling to 5 s.
//!
//! Memory stays bounded for any outage length: Redis keeps only the newest instance of each
//! window and group, and only the groups of a window's live instances (`crate::retention`), so
//! what is pending is, per window and group of a live instance, the newest revision of its
//! newest instance (at most windows × live instances × (`max_groups` + 1) lists of K items),
//! plus the last epoch and watermark. Merging keeps the commit script's rule: an older
//! instance never replaces a newer one, whatever order they come in; every group's list is
//! written (a batch of a `by` window holds one list per group).
//!
//! It also keeps what it wrote (the live lists, bounded the same way): a Redis that comes back
//! without them (restarted without persistence: its commit is older than the last one
//! written) gets them again, so every group's latest list is in Redis after any outage, not
//! only the lists that change after it.
//!
//! When the job ends, the thread makes one last attempt (without waiting for the backoff) and
//! exits; what it could not write is logged.
//!
//! Files: `pending` (what is pending and how batches merge into it), `outage` (the retry
//! backoff and its log lines), `tests`.

mod outage;
mod pending;
#[cfg(test)]
mod tests;

use self::outage::Outage;
use self::pending::Pending;
use super::RedisStore;
use crate::error::SinkError;
use crate::store::SinkStore;
use crate::types::CommitBatch;
use hotlist_operators::window::WindowSpec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

/// Where and for what the fan-out writes (the job fills it from `sink.redis_url`,
/// `sink.redis_prefix`, its id and windows).
#[derive(Clone, Debug)]
pub struct FanoutTarget {
    /// The Redis server's URL.
    pub url: String,
    /// The key prefix.
    pub prefix: String,
    /// The job whose lists are copied.
    pub job: String,
    /// The job's windows (prepared in Redis at every connect).
    pub windows: Vec<WindowSpec>,
    /// Empty the job's lists in Redis before the first write (a run that starts the job over).
    pub start_over: bool,
}

/// Counters of the Redis fan-out (`sink.redis_url`).
#[derive(Debug, Default)]
pub struct FanoutStats {
    /// Whether the job has a fan-out (its metrics are exported only then).
    pub enabled: AtomicBool,
    /// Lists waiting to be written (at most one per window and group of a live instance).
    pub pending_lists: AtomicU64,
    /// Failed write attempts.
    pub failures: AtomicU64,
    /// The last epoch written to Redis.
    pub committed_epoch: AtomicU64,
}

impl FanoutStats {
    /// Its Prometheus series, if the job has a fan-out: (name, help, value), a counter for a
    /// name ending in `_total`, else a gauge (the job's metrics endpoint renders them).
    pub fn series(&self) -> Option<[(&'static str, &'static str, i64); 3]> {
        if !self.enabled.load(Relaxed) {
            return None;
        }
        let load = |a: &AtomicU64| a.load(Relaxed) as i64;
        Some([
            (
                "hotlist_fanout_pending_lists",
                "lists waiting to be written to the Redis fan-out (at most one per window and group of a live instance)",
                load(&self.pending_lists),
            ),
            (
                "hotlist_fanout_failures_total",
                "failed write attempts to the Redis fan-out",
                load(&self.failures),
            ),
            (
                "hotlist_fanout_committed_epoch",
                "last epoch written to the Redis fan-out",
                load(&self.committed_epoch),
            ),
        ])
    }
}

/// What the writer thread and the fan-out thread share.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    pending: Option<Pending>,
    stopping: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update of the state is a plain assignment: it is consistent behind a poisoned lock.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The running fan-out: [`offer`](Fanout::offer) committed batches; dropping it makes the
/// thread write what is pending once more and waits for it.
pub struct Fanout {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Fanout {
    /// Starts the fan-out thread (it connects when there is something to write). With
    /// `target.start_over`, the job's lists in Redis are deleted before the first write.
    pub fn start(target: FanoutTarget, stats: Arc<FanoutStats>) -> std::io::Result<Fanout> {
        let shared = Arc::new(Shared::default());
        stats.enabled.store(true, Relaxed);
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("hotlist-fanout".into())
            .spawn(move || write_loop(&thread_shared, &target, &stats))?;
        Ok(Fanout {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands over a batch the primary store committed; never blocks on Redis.
    pub fn offer(&self, batch: &CommitBatch) {
        let mut st = self.shared.lock();
        match &mut st.pending {
            Some(p) => p.merge(batch),
            None => st.pending = Some(Pending::of(batch)),
        }
        self.shared.wake.notify_one();
    }
}

impl Drop for Fanout {
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The fan-out thread: takes what is pending (after the backoff, if the last attempt failed),
/// writes it, puts it back on failure; ends after the last attempt once stopping.
fn write_loop(shared: &Shared, target: &FanoutTarget, stats: &FanoutStats) {
    let mut store: Option<RedisStore> = None;
    let mut outage = Outage::default();
    let mut reset_due = target.start_over;
    // What Redis holds, as far as this thread wrote it: the live lists (bounded as pending
    // is), written again if Redis comes back without them (restarted without persistence).
    let mut written: Option<Pending> = None;
    while let Some((mut pending, stopping)) = next_pending(shared, &outage) {
        let result = write(&mut store, target, &mut reset_due, &mut pending, written.as_ref());
        let mut st = shared.lock();
        match result {
            Ok(url) => {
                outage.recovered(&url, pending.epoch);
                stats.committed_epoch.store(pending.epoch, Relaxed);
                written = Some(match written.take() {
                    Some(w) => merge_under(pending, w),
                    None => pending,
                });
            }
            Err(e) => {
                store = None; // reconnect and prepare again next time
                stats.failures.fetch_add(1, Relaxed);
                let back = match st.pending.take() {
                    Some(newer) => merge_under(newer, pending),
                    None => pending,
                };
                outage.failed(&e, back.len(), stopping);
                st.pending = Some(back);
            }
        }
        let pending_lists = st.pending.as_ref().map_or(0, Pending::len);
        stats.pending_lists.store(pending_lists as u64, Relaxed);
        if stopping && outage.failures > 0 {
            return; // the last attempt failed
        }
    }
}

/// Waits until something is pending and the backoff has passed (or the job is stopping, which
/// skips the backoff) and takes it, with whether the job is stopping; `None` once stopping with
/// nothing pending.
fn next_pending(shared: &Shared, outage: &Outage) -> Option<(Pending, bool)> {
    let mut st = shared.lock();
    loop {
        let due = outage.retry_at.is_none_or(|t| Instant::now() >= t);
        if due || st.stopping {
            if let Some(p) = st.pending.take() {
                return Some((p, st.stopping));
            }
        }
        if st.stopping {
            return None;
        }
        st = match outage.retry_at {
            Some(t) => {
                let wait = t.saturating_duration_since(Instant::now());
                let (st, _) = shared
                    .wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(PoisonError::into_inner);
                st
            }
            None => shared.wake.wait(st).unwrap_or_else(PoisonError::into_inner),
        };
    }
}

/// `older` put back under `newer`.
fn merge_under(mut newer: Pending, older: Pending) -> Pending {
    newer.merge_older(older);
    newer
}

/// Writes the pending lists (connecting and preparing first if not connected, and emptying the
/// job's lists first while `reset_due`); returns the server's URL without its password. On a
/// new connection to a Redis whose commit is older than what this thread `written` (it lost
/// its data), the written lists go out again under the pending ones.
fn write(
    store: &mut Option<RedisStore>,
    target: &FanoutTarget,
    reset_due: &mut bool,
    pending: &mut Pending,
    written: Option<&Pending>,
) -> Result<String, SinkError> {
    let redis = match store {
        Some(r) => r,
        None => {
            let mut r = RedisStore::connect(&target.url, &target.prefix)?;
            if *reset_due {
                r.reset(&target.job)?;
                *reset_due = false;
            }
            r.prepare(&target.job, &target.windows)?;
            if let Some(w) = written {
                if r.committed_epoch(&target.job)?.is_none_or(|e| e < w.epoch) {
                    tracing::info!(
                        "Redis fan-out: {} lacks what was written up to epoch {} (restarted empty?): writing \
                         the {} live list(s) again",
                        r.url(),
                        w.epoch,
                        w.len()
                    );
                    pending.merge_older(w.clone());
                }
            }
            store.insert(r)
        }
    };
    redis.commit(&pending.to_batch(&target.job))?;
    Ok(redis.url().to_string())
}

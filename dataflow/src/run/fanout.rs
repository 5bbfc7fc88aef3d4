//! The Redis fan-out (`sink.redis_url`): a serving copy of each window's latest list, written
//! by a thread of its own after the primary store committed.
//!
//! Its failures never stop or slow the job: the writer thread only merges each committed batch
//! into the fan-out's [`Pending`] lists and goes on; the `hotlist-fanout` thread writes them.
//! It connects lazily (an unreachable Redis at start-up is just a first failed attempt), and
//! after a failure it reconnects, prepares the job's windows again (a restarted Redis may have
//! lost them) and retries with a backoff of 100 ms doubling to 5 s.
//!
//! Memory stays bounded for any outage length: Redis keeps only the newest instance of each
//! window, so what is pending is only, per window, the newest revision of the newest instance
//! (at most windows × K items), plus the last epoch and watermark. Merging keeps the commit
//! script's rule: an older instance never replaces a newer one, whatever order they come in.
//!
//! When the job ends, the thread makes one last attempt (without waiting for the backoff) and
//! exits; what it could not write is logged.

use crate::config::RedisTarget;
use crate::stats::JobStats;
use anyhow::{Context, Result};
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::message::PublishedList;
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{CommitBatch, RedisStore, SinkError, SinkStore};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The first retry delay after a failure; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest retry delay.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often a continuing outage is logged again.
const REPEAT_WARNING: Duration = Duration::from_secs(60);

/// What the fan-out has yet to write: per window, the newest revision of the newest instance,
/// and the epoch and watermark of the last batch merged in.
#[derive(Debug, PartialEq)]
pub(crate) struct Pending {
    epoch: u64,
    watermark: Millis,
    lists: BTreeMap<String, PublishedList>,
    /// The newest closed hot-key window.
    hot: Option<HotWindow>,
}

impl Pending {
    /// An empty set at the batch's epoch and watermark, then the batch merged in.
    pub(crate) fn of(batch: &CommitBatch) -> Pending {
        let mut p = Pending {
            epoch: batch.epoch,
            watermark: batch.watermark,
            lists: BTreeMap::new(),
            hot: None,
        };
        p.merge(batch);
        p
    }

    /// Merges a batch committed after everything already here: per window, its newest list
    /// (greatest start, then highest revision; on a tie the later one) replaces the pending one
    /// unless that is of a newer instance.
    pub(crate) fn merge(&mut self, batch: &CommitBatch) {
        self.epoch = self.epoch.max(batch.epoch);
        self.watermark = self.watermark.max(batch.watermark);
        let mut newest: BTreeMap<&str, &PublishedList> = BTreeMap::new();
        for l in &batch.lists {
            let slot = newest.entry(l.window.as_str()).or_insert(l);
            if (l.start, l.revision) >= (slot.start, slot.revision) {
                *slot = l;
            }
        }
        for (window, l) in newest {
            self.put(window, l.clone(), true);
        }
        if let Some(w) = batch.hot_keys.iter().max_by_key(|w| w.start) {
            self.put_hot(w.clone());
        }
    }

    /// Keeps the newer of the pending hot-key window and `w` (on a tie, `w`).
    fn put_hot(&mut self, w: HotWindow) {
        if self.hot.as_ref().is_none_or(|h| w.start >= h.start) {
            self.hot = Some(w);
        }
    }

    /// Puts back a set that failed to be written, under what was merged since (`self`): per
    /// window the newer instance wins; for the same instance, what was merged since.
    pub(crate) fn merge_older(&mut self, older: Pending) {
        self.epoch = self.epoch.max(older.epoch);
        self.watermark = self.watermark.max(older.watermark);
        for (window, l) in older.lists {
            self.put(&window, l, false);
        }
        if let Some(w) = older
            .hot
            .filter(|w| self.hot.as_ref().is_none_or(|h| w.start > h.start))
        {
            self.hot = Some(w);
        }
    }

    /// Sets `window`'s list to `l` if there is none, if `l` is of a newer instance, or if it is
    /// of the same instance and `l` is the later one (`later`).
    fn put(&mut self, window: &str, l: PublishedList, later: bool) {
        match self.lists.get_mut(window) {
            Some(p) if l.start > p.start || (l.start == p.start && later) => *p = l,
            Some(_) => {}
            None => {
                self.lists.insert(window.to_string(), l);
            }
        }
    }

    /// How many lists are pending (at most one per window).
    pub(crate) fn len(&self) -> usize {
        self.lists.len()
    }

    /// The batch that writes everything pending (no dead letters: Redis keeps none).
    fn to_batch(&self, job: &str) -> CommitBatch {
        CommitBatch {
            job: job.to_string(),
            epoch: self.epoch,
            watermark: self.watermark,
            lists: self.lists.values().cloned().collect(),
            dead_letters: Vec::new(),
            hot_keys: self.hot.iter().cloned().collect(),
        }
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

/// What the fan-out thread writes to: where, for which job and windows.
struct Target {
    redis: RedisTarget,
    job: String,
    windows: Vec<WindowSpec>,
    /// Empty the job's lists in Redis before the first write (a run that starts the job over).
    start_over: bool,
}

impl Fanout {
    /// Starts the fan-out thread (it connects when there is something to write). With
    /// `start_over`, the job's lists in Redis are deleted before the first write.
    pub fn start(
        redis: &RedisTarget,
        job: &str,
        windows: &[WindowSpec],
        start_over: bool,
        stats: Arc<JobStats>,
    ) -> Result<Fanout> {
        let shared = Arc::new(Shared::default());
        let target = Target {
            redis: redis.clone(),
            job: job.to_string(),
            windows: windows.to_vec(),
            start_over,
        };
        stats.fanout.enabled.store(true, Relaxed);
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("hotlist-fanout".into())
            .spawn(move || write_loop(&thread_shared, &target, &stats))
            .context("cannot start the Redis fan-out thread")?;
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
fn write_loop(shared: &Shared, target: &Target, stats: &JobStats) {
    let mut store: Option<RedisStore> = None;
    let mut outage = Outage::default();
    let mut reset_due = target.start_over;
    while let Some((pending, stopping)) = next_pending(shared, &outage) {
        let result = write(&mut store, target, &mut reset_due, &pending);
        let mut st = shared.lock();
        match result {
            Ok(url) => {
                outage.recovered(&url, pending.epoch);
                stats.fanout.committed_epoch.store(pending.epoch, Relaxed);
            }
            Err(e) => {
                store = None; // reconnect and prepare again next time
                stats.fanout.failures.fetch_add(1, Relaxed);
                let back = match st.pending.take() {
                    Some(newer) => merge_under(newer, pending),
                    None => pending,
                };
                outage.failed(&e, back.len(), stopping);
                st.pending = Some(back);
            }
        }
        let pending_lists = st.pending.as_ref().map_or(0, Pending::len);
        stats.fanout.pending_lists.store(pending_lists as u64, Relaxed);
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
/// job's lists first while `reset_due`); returns the server's URL without its password.
fn write(
    store: &mut Option<RedisStore>,
    target: &Target,
    reset_due: &mut bool,
    pending: &Pending,
) -> Result<String, SinkError> {
    let redis = match store {
        Some(r) => r,
        None => {
            let mut r = RedisStore::connect(&target.redis.url, &target.redis.prefix)?;
            if *reset_due {
                r.reset(&target.job)?;
                *reset_due = false;
            }
            r.prepare(&target.job, &target.windows)?;
            store.insert(r)
        }
    };
    redis.commit(&pending.to_batch(&target.job))?;
    Ok(redis.url().to_string())
}

/// The state of an outage: how many attempts failed in a row, when to retry, when it was last
/// logged.
#[derive(Default)]
struct Outage {
    failures: u64,
    retry_at: Option<Instant>,
    logged_at: Option<Instant>,
}

impl Outage {
    /// Notes a failed attempt: schedules the retry; logs the first failure of an outage, then
    /// once every [`REPEAT_WARNING`], and always the last attempt when the job ends.
    fn failed(&mut self, e: &SinkError, pending: usize, stopping: bool) {
        self.failures += 1;
        let shift = (self.failures - 1).min(6) as u32;
        let backoff = (FIRST_BACKOFF * 2u32.pow(shift)).min(MAX_BACKOFF);
        self.retry_at = Some(Instant::now() + backoff);
        if stopping {
            tracing::warn!(
                "Redis fan-out: the job ends with {pending} window list(s) not written to Redis (it keeps older \
                 lists until the next run writes them): {e}"
            );
        } else if self.logged_at.is_none() {
            tracing::warn!(
                "Redis fan-out failed (the job goes on; the newest list of each window is kept and written when \
                 Redis answers, retrying every {MAX_BACKOFF:?} at most): {e}"
            );
            self.logged_at = Some(Instant::now());
        } else if self.logged_at.is_some_and(|t| t.elapsed() >= REPEAT_WARNING) {
            tracing::warn!(
                "Redis fan-out still failing after {} attempts ({pending} window list(s) pending): {e}",
                self.failures
            );
            self.logged_at = Some(Instant::now());
        }
    }

    /// Notes a successful write to `url`: ends an outage (and says so).
    fn recovered(&mut self, url: &str, epoch: u64) {
        if self.failures > 0 {
            tracing::info!(
                "Redis fan-out to {url} recovered after {} failed attempts: written up to epoch {epoch}",
                self.failures
            );
        }
        *self = Outage::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::record::{ListState, RankedItem};

    fn list(window: &str, start: i64, revision: u32, k: usize) -> PublishedList {
        PublishedList {
            group: Default::default(),
            window: window.into(),
            start: Millis(start),
            end: Millis(start + 60_000),
            revision,
            state: ListState::Open,
            watermark: Millis(start),
            as_of: Millis(0),
            items: (0..k)
                .map(|i| RankedItem {
                    item_id: format!("r{revision}-{i}").into(),
                    count: (k - i) as u64,
                })
                .collect(),
            exact: true,
            error_bound: 0,
            sketch_check: None,
            certificate: None,
        }
    }

    fn batch(epoch: u64, lists: Vec<PublishedList>) -> CommitBatch {
        CommitBatch {
            job: "j".into(),
            epoch,
            watermark: Millis(epoch as i64),
            lists,
            dead_letters: Vec::new(),
            hot_keys: Vec::new(),
        }
    }

    /// What is pending: (window, start, revision) per window.
    fn shape(p: &Pending) -> Vec<(&str, i64, u32)> {
        p.lists
            .values()
            .map(|l| (l.window.as_str(), l.start.0, l.revision))
            .collect()
    }

    /// However many batches pile up while Redis is down, one list per window is pending: the
    /// newest revision of the newest instance.
    #[test]
    fn pending_stays_one_list_per_window_for_any_outage() {
        let mut p = Pending::of(&batch(1, vec![list("1m", 0, 1, 100), list("5m", 0, 1, 100)]));
        for epoch in 2..=10_000u64 {
            let start = (epoch as i64 / 100) * 60_000;
            let lists = vec![list("1m", start, epoch as u32, 100), list("5m", 0, epoch as u32, 100)];
            let failed = std::mem::replace(&mut p, Pending::of(&batch(epoch, lists)));
            p.merge_older(failed);
            assert!(p.len() <= 2);
        }
        assert_eq!(shape(&p), vec![("1m", 6_000_000, 10_000), ("5m", 0, 10_000)]);
        assert_eq!((p.epoch, p.watermark), (10_000, Millis(10_000)));
        let items: usize = p.lists.values().map(|l| l.items.len()).sum();
        assert_eq!(items, 200, "windows x K items");
    }

    /// The newest hot-key window stays pending, however batches arrive or fail.
    #[test]
    fn the_newest_hot_key_window_stays_pending() {
        let hot = |start: i64| hotlist_operators::hot_keys::HotWindow {
            start: Millis(start),
            end: Millis(start + 10_000),
            watermark: Millis(start),
            as_of: Millis(0),
            keys: vec![],
        };
        let mut b = batch(1, vec![]);
        b.hot_keys = vec![hot(10_000), hot(0)];
        let mut p = Pending::of(&b);
        assert_eq!(p.hot.as_ref().map(|w| w.start), Some(Millis(10_000)));
        let mut later = batch(2, vec![]);
        later.hot_keys = vec![hot(20_000)];
        let failed = std::mem::replace(&mut p, Pending::of(&later));
        p.merge_older(failed);
        assert_eq!(p.to_batch("j").hot_keys, vec![hot(20_000)]);
        p.merge(&batch(3, vec![]));
        assert_eq!(
            p.hot.as_ref().map(|w| w.start),
            Some(Millis(20_000)),
            "a batch without windows keeps it"
        );
    }

    /// An older instance's correction never replaces a newer instance, in a batch, in a later
    /// batch, or when a failed attempt is put back; for one instance the later list wins.
    #[test]
    fn an_older_instance_never_replaces_a_newer_one() {
        // Within a batch: the greatest start, then the highest revision.
        let b = batch(
            1,
            vec![list("1m", 60_000, 2, 1), list("1m", 0, 9, 1), list("1m", 60_000, 1, 1)],
        );
        let mut p = Pending::of(&b);
        assert_eq!(shape(&p), vec![("1m", 60_000, 2)]);
        // A later batch: a correction of the older instance does not replace it ...
        p.merge(&batch(2, vec![list("1m", 0, 10, 1)]));
        assert_eq!(shape(&p), vec![("1m", 60_000, 2)]);
        // ... a later list of the same instance does.
        p.merge(&batch(3, vec![list("1m", 60_000, 3, 1)]));
        assert_eq!(shape(&p), vec![("1m", 60_000, 3)]);
        // Put back under newer lists: the newer instance wins either way round.
        let mut newer = Pending::of(&batch(4, vec![list("1m", 0, 11, 1), list("5m", 0, 1, 1)]));
        newer.merge_older(p);
        assert_eq!(shape(&newer), vec![("1m", 60_000, 3), ("5m", 0, 1)]);
        let mut newer_instance = Pending::of(&batch(5, vec![list("1m", 120_000, 1, 1)]));
        newer_instance.merge_older(newer);
        assert_eq!(shape(&newer_instance), vec![("1m", 120_000, 1), ("5m", 0, 1)]);
        assert_eq!(newer_instance.epoch, 5);
        // For the same instance, what was merged since the failed attempt wins.
        let mut since = Pending::of(&batch(6, vec![list("5m", 0, 1, 3)]));
        since.merge_older(Pending::of(&batch(5, vec![list("5m", 0, 2, 1)])));
        assert_eq!(since.lists["5m"].items.len(), 3);
        let b = since.to_batch("j");
        assert_eq!((b.epoch, b.lists.len(), b.dead_letters.len()), (6, 1, 0));
    }

    /// A fan-out to a closed port: offering never blocks, failures are counted, what is
    /// pending stays one list per window, and dropping the fan-out ends its thread.
    #[test]
    fn an_unreachable_redis_keeps_one_list_per_window_pending() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let target = RedisTarget {
            url: format!("redis://127.0.0.1:{port}/"),
            prefix: "hotlist".into(),
        };
        let windows = [WindowSpec::tumbling(
            "1m",
            hotlist_operators::time::Span::from_millis(60_000),
            100,
        )];
        let stats = Arc::new(JobStats::new(1, 1));
        let fanout = Fanout::start(&target, "j", &windows, false, stats.clone()).unwrap();
        let started = Instant::now();
        for epoch in 1..=2_000u64 {
            fanout.offer(&batch(epoch, vec![list("1m", epoch as i64 * 60_000, 1, 100)]));
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "offering does not wait for Redis"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while stats.fanout.failures.load(Relaxed) < 2 {
            assert!(Instant::now() < deadline, "no failed attempt counted");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(fanout.shared.lock().pending.as_ref().map(Pending::len), Some(1));
        drop(fanout);
        assert_eq!(stats.fanout.pending_lists.load(Relaxed), 1);
    }
}

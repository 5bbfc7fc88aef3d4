//! The snapshot cache: the latest list of every window and the latest hot-key window, replaced
//! whole when a new epoch commits.
//!
//! A refresher polls the store's `last_commit` (one cheap read) every `poll` interval; when the
//! committed epoch changed it reloads the windows and each window's latest list and swaps in a
//! new [`Snapshot`]. Requests for "latest" read the current snapshot (an `Arc` clone under a
//! read lock): no per-request database round trip, and a list in a snapshot is one consistent
//! read of one revision. If the store is unreachable, or a read fails or panics on bad data, the
//! last good snapshot keeps being served and `/healthz` reports how stale it is and why; the
//! refresher itself never stops before shutdown.

use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::time::Millis;
use hotlist_sinks::{SinkError, StoreReader, StoredList, StoredWindow};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// What the API serves for "latest".
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The committed epoch this snapshot reflects (None: nothing committed yet).
    pub epoch: Option<u64>,
    /// The global watermark at that commit.
    pub watermark: Option<Millis>,
    /// The job's windows, in configured order.
    pub windows: Vec<StoredWindow>,
    /// The latest list of each window that has one.
    pub latest: HashMap<String, Arc<StoredList>>,
    /// The latest closed hot-key window (`[hot_keys]`), if any.
    pub hot: Option<Arc<HotWindow>>,
}

/// The shared state between the refresher and the handlers.
pub struct Cache {
    snapshot: RwLock<Arc<Snapshot>>,
    /// The refresher thread is running (see [`Cache::refresher_running`]).
    refresher: AtomicBool,
    last_ok: Mutex<Option<Instant>>,
    last_error: Mutex<Option<String>>,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            refresher: AtomicBool::new(false),
            last_ok: Mutex::new(None),
            last_error: Mutex::new(None),
        }
    }
}

impl Cache {
    /// The current snapshot.
    pub fn get(&self) -> Arc<Snapshot> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set(&self, s: Snapshot) {
        match self.snapshot.write() {
            Ok(mut g) => *g = Arc::new(s),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(s),
        }
    }

    /// Whether the refresher thread is running: set by [`refresh_loop`] while it runs, cleared
    /// when it ends, by a panic too (what `/livez` reports).
    pub fn refresher_running(&self) -> bool {
        self.refresher.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Time since the store last answered, and its last error.
    pub fn health(&self) -> (Option<Duration>, Option<String>) {
        let ok = self.last_ok.lock().ok().and_then(|g| g.map(|t| t.elapsed()));
        let err = self.last_error.lock().ok().and_then(|g| g.clone());
        (ok, err)
    }

    /// One refresh step: reloads the snapshot if the committed epoch changed. Returns whether
    /// it reloaded.
    pub fn refresh(&self, reader: &mut dyn StoreReader, job: &str) -> Result<bool, SinkError> {
        let result = self.try_refresh(reader, job);
        match &result {
            Ok(_) => {
                if let Ok(mut g) = self.last_ok.lock() {
                    *g = Some(Instant::now());
                }
                if let Ok(mut g) = self.last_error.lock() {
                    *g = None;
                }
            }
            Err(e) => self.record_error(e.to_string()),
        }
        result
    }

    fn record_error(&self, error: String) {
        if let Ok(mut g) = self.last_error.lock() {
            *g = Some(error);
        }
    }

    fn try_refresh(&self, reader: &mut dyn StoreReader, job: &str) -> Result<bool, SinkError> {
        let commit = reader.last_commit(job)?;
        let current = self.get();
        let windows_missing = current.windows.is_empty();
        if commit.map(|c| c.0) == current.epoch && !windows_missing {
            return Ok(false);
        }
        let windows = reader.windows(job)?;
        let mut latest = HashMap::new();
        for w in &windows {
            if let Some(l) = reader.latest(job, &w.name)? {
                latest.insert(w.name.clone(), Arc::new(l));
            }
        }
        let hot = reader.hot_keys(job)?.map(Arc::new);
        self.set(Snapshot {
            epoch: commit.map(|c| c.0),
            watermark: commit.map(|c| c.1),
            windows,
            latest,
            hot,
        });
        Ok(true)
    }
}

/// Opens a reader (the store may not exist yet when the server starts before the job).
pub type ReaderFactory = Box<dyn Fn() -> Result<Box<dyn StoreReader>, SinkError> + Send + Sync>;

/// Longest pause between attempts while the store fails.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Runs the refresher on the current thread until `stop` is set: polls every `poll`; after a
/// failure retries with a backoff doubling up to 5 s. No error or panic of the store ends it:
/// see [`refresh_once`].
pub fn refresh_loop(
    cache: Arc<Cache>,
    open: ReaderFactory,
    job: String,
    poll: Duration,
    stop: Arc<std::sync::atomic::AtomicBool>,
    on_refresh: impl Fn(bool, Duration),
) {
    use std::sync::atomic::Ordering::Relaxed;
    /// Clears the running flag however the loop ends.
    struct Running<'a>(&'a Cache);
    impl Drop for Running<'_> {
        fn drop(&mut self) {
            self.0.refresher.store(false, Relaxed);
        }
    }
    cache.refresher.store(true, Relaxed);
    let _running = Running(&cache);
    let mut reader: Option<Box<dyn StoreReader>> = None;
    let mut backoff = poll;
    while !stop.load(Relaxed) {
        backoff = if refresh_once(&cache, &open, &mut reader, &job, &on_refresh) {
            poll
        } else {
            (backoff * 2).min(MAX_BACKOFF)
        };
        std::thread::sleep(backoff);
    }
}

/// One attempt: opens the reader if there is none, then refreshes. Returns whether it
/// succeeded. On an error the cache records it (for `/healthz`) and keeps its snapshot; a
/// retryable error drops the reader so the next attempt reconnects. A panic in the reader
/// (bad data it did not validate) is contained: one log line, the reader is dropped and
/// reopened next time, exactly as after a lost connection.
pub fn refresh_once(
    cache: &Cache,
    open: &ReaderFactory,
    reader: &mut Option<Box<dyn StoreReader>>,
    job: &str,
    on_refresh: &impl Fn(bool, Duration),
) -> bool {
    let attempt = crate::panics::contain(|| {
        let r = match reader {
            Some(r) => r,
            None => reader.insert(open()?),
        };
        let started = Instant::now();
        cache
            .refresh(r.as_mut(), job)
            .map(|reloaded| (reloaded, started.elapsed()))
    });
    match attempt {
        Ok(Ok((reloaded, took))) => {
            on_refresh(reloaded, took);
            true
        }
        Ok(Err(e)) => {
            if reader.is_some() {
                tracing::warn!("store refresh failed (serving the last snapshot): {e}");
            }
            cache.record_error(e.to_string());
            if e.retryable() {
                discard(reader.take());
            }
            false
        }
        Err(panic) => {
            tracing::error!("the store reader panicked (serving the last snapshot; reopening the store): {panic}");
            cache.record_error(format!("the store reader panicked: {panic}"));
            discard(reader.take());
            false
        }
    }
}

/// Drops a reader that may be broken; a panic in its destructor is contained too.
pub fn discard(reader: Option<Box<dyn StoreReader>>) {
    if let Err(panic) = crate::panics::contain(move || drop(reader)) {
        tracing::error!("dropping the store reader panicked: {panic}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_store::{Behaviour, FakeStore};
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    /// Polls `condition` until it holds; panics naming `what` after 10 s.
    fn wait_until(what: &str, condition: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The refresher outlives every kind of reader failure (a panic on bad data, a corrupt-row
    /// error, a lost connection): it keeps serving the last good snapshot, reports the failure
    /// for `/healthz`, reopens the reader after a panic or a lost connection, and recovers as
    /// soon as the store is good again.
    #[test]
    fn refresher_survives_any_reader_failure() {
        let store = FakeStore::new();
        let cache = Arc::new(Cache::default());
        let stop = Arc::new(AtomicBool::new(false));
        let refresher = {
            let (cache, stop, open) = (cache.clone(), stop.clone(), store.opener());
            std::thread::spawn(move || {
                refresh_loop(cache, open, "job".into(), Duration::from_millis(1), stop, |_, _| {})
            })
        };
        wait_until("the first snapshot", || cache.get().epoch == Some(1));
        let cases = [
            (
                Behaviour::Panic,
                "the store reader panicked: capacity overflow at ",
                true,
            ),
            (Behaviour::Corrupt, "item_count 1099511627776", false),
            (Behaviour::Unreachable, "connection lost", true),
        ];
        for (epoch, (behaviour, error, reopens)) in (2..).zip(cases) {
            let opened = store.opened.load(Relaxed);
            store.set(epoch, behaviour);
            wait_until(error, || cache.health().1.is_some_and(|e| e.contains(error)));
            let snapshot = cache.get();
            assert_eq!(
                snapshot.epoch,
                Some(epoch - 1),
                "{behaviour:?}: the last good snapshot stays"
            );
            assert_eq!(snapshot.latest["1m"].items[0].count, epoch - 1);
            if reopens {
                wait_until("a new reader", || store.opened.load(Relaxed) > opened);
            } else {
                assert_eq!(store.opened.load(Relaxed), opened, "{behaviour:?}: the reader is kept");
            }
            store.set(epoch, Behaviour::Good);
            wait_until("recovery", || {
                cache.get().epoch == Some(epoch) && cache.health().1.is_none()
            });
            assert!(cache.health().0.is_some_and(|age| age < Duration::from_secs(10)));
        }
        stop.store(true, Relaxed);
        assert!(refresher.join().is_ok(), "the refresher ran to the end");
    }
}

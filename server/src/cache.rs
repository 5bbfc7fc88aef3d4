//! The snapshot cache: the latest list of every window, replaced whole when a new epoch commits.
//!
//! A refresher polls the store's `last_commit` (one cheap read) every `poll` interval; when the
//! committed epoch changed it reloads the windows and each window's latest list and swaps in a
//! new [`Snapshot`]. Requests for "latest" read the current snapshot (an `Arc` clone under a
//! read lock): no per-request database round trip, and a list in a snapshot is one consistent
//! read of one revision. If the store is unreachable, the last snapshot keeps being served and
//! `/healthz` reports how stale it is.

use hotlist_operators::time::Millis;
use hotlist_sinks::{SinkError, StoreReader, StoredList, StoredWindow};
use std::collections::HashMap;
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
}

/// The shared state between the refresher and the handlers.
pub struct Cache {
    snapshot: RwLock<Arc<Snapshot>>,
    last_ok: Mutex<Option<Instant>>,
    last_error: Mutex<Option<String>>,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
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
            Err(e) => {
                if let Ok(mut g) = self.last_error.lock() {
                    *g = Some(e.to_string());
                }
            }
        }
        result
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
        self.set(Snapshot {
            epoch: commit.map(|c| c.0),
            watermark: commit.map(|c| c.1),
            windows,
            latest,
        });
        Ok(true)
    }
}

/// Opens a reader (the store may not exist yet when the server starts before the job).
pub type ReaderFactory = Box<dyn Fn() -> Result<Box<dyn StoreReader>, SinkError> + Send + Sync>;

/// Runs the refresher on the current thread until `stop` is set: polls every `poll`, reopens
/// the store after errors with a backoff capped at 5 s.
pub fn refresh_loop(
    cache: Arc<Cache>,
    open: ReaderFactory,
    job: String,
    poll: Duration,
    stop: Arc<std::sync::atomic::AtomicBool>,
    on_refresh: impl Fn(bool, Duration),
) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut reader: Option<Box<dyn StoreReader>> = None;
    let mut backoff = poll;
    while !stop.load(Relaxed) {
        if reader.is_none() {
            match open() {
                Ok(r) => reader = Some(r),
                Err(e) => {
                    if let Ok(mut g) = cache.last_error.lock() {
                        *g = Some(e.to_string());
                    }
                }
            }
        }
        if let Some(r) = reader.as_mut() {
            let started = Instant::now();
            match cache.refresh(r.as_mut(), &job) {
                Ok(reloaded) => {
                    on_refresh(reloaded, started.elapsed());
                    backoff = poll;
                }
                Err(e) => {
                    tracing::warn!("store refresh failed (serving the last snapshot): {e}");
                    if e.retryable() {
                        reader = None;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        } else {
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        std::thread::sleep(if reader.is_some() && backoff == poll {
            poll
        } else {
            backoff
        });
    }
}

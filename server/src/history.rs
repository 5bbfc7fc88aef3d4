//! History lookups (`/v1/top?…&date=` or `&at=`), per-group lists and `/v1/groups`: one thread owns a store reader and answers
//! requests in turn, so blocking store clients (SQLite, the sync PostgreSQL client) never run
//! on, or get dropped on, the async runtime's threads.
//!
//! Like the refresher, the worker outlives any failure of its reader: an error or a panic
//! answers that one lookup with an error (the API's 503) and the reader is reopened for the
//! next.
//!
//! Under load: the queue holds at most `capacity` lookups (`--history-queue`); a lookup that
//! finds it full is refused at once ([`LookupError::Busy`], the API's 503 with `Retry-After`,
//! counted in `hotlist_api_history_rejected_total`) instead of waiting behind minutes of
//! others. A queued lookup whose request is gone (timed out, client disconnected: its reply
//! receiver was dropped) is skipped unread (`hotlist_api_history_abandoned_total`), so a
//! burst of abandoned requests does not keep the store busy after the clients left.

use crate::cache::{discard, ReaderFactory};
use crate::metrics::ApiMetrics;
use hotlist_operators::group::GroupKey;
use hotlist_operators::time::Millis;
use hotlist_sinks::{StoreReader, StoredList};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

/// One lookup for the worker.
struct Lookup {
    job: String,
    window: String,
    what: What,
    reply: tokio::sync::oneshot::Sender<Result<Found, String>>,
}

/// What a lookup reads.
enum What {
    /// The group's list of the instance starting there.
    Instance(GroupKey, Millis),
    /// The group's latest list.
    Latest(GroupKey),
    /// The groups of the latest instance.
    Groups,
}

/// What a lookup found.
enum Found {
    List(Option<StoredList>),
    Groups(Option<(Millis, Vec<GroupKey>)>),
}

/// Why a lookup has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// The queue was full: the lookup was not queued (try again shortly).
    Busy {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The store failed (or the worker is gone); the message says how.
    Failed(String),
}

impl std::fmt::Display for LookupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LookupError::Busy { capacity } => write!(
                f,
                "too many store lookups waiting (the history queue holds {capacity}); try again shortly"
            ),
            LookupError::Failed(e) => f.write_str(e),
        }
    }
}

/// The history thread's mailbox. The thread ends when this is dropped.
pub struct HistoryWorker {
    tx: SyncSender<Lookup>,
    capacity: usize,
    metrics: Arc<ApiMetrics>,
}

impl HistoryWorker {
    /// Starts the thread with a queue of `capacity` lookups (at least 1); `open` (re)opens the
    /// reader when needed.
    pub fn start(open: ReaderFactory, capacity: usize, metrics: Arc<ApiMetrics>) -> std::io::Result<HistoryWorker> {
        let capacity = capacity.max(1);
        let (tx, rx) = sync_channel::<Lookup>(capacity);
        let m = metrics.clone();
        std::thread::Builder::new()
            .name("hotlist-history".into())
            .spawn(move || {
                let mut reader: Option<Box<dyn StoreReader>> = None;
                while let Ok(lookup) = rx.recv() {
                    m.history_queued.dec();
                    if lookup.reply.is_closed() {
                        m.history_abandoned.inc(); // nobody waits for it any more
                        continue;
                    }
                    let answer = answer(&open, &mut reader, &lookup);
                    let _ = lookup.reply.send(answer);
                }
                discard(reader);
            })?;
        Ok(HistoryWorker { tx, capacity, metrics })
    }

    /// The instance of `window` starting at `start`, if stored.
    pub async fn instance(&self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, LookupError> {
        self.instance_of(job, window, &GroupKey::global(), start).await
    }

    /// The list of `group` in the instance of `window` starting at `start`, if stored.
    pub async fn instance_of(
        &self,
        job: &str,
        window: &str,
        group: &GroupKey,
        start: Millis,
    ) -> Result<Option<StoredList>, LookupError> {
        match self.ask(job, window, What::Instance(group.clone(), start)).await? {
            Found::List(l) => Ok(l),
            Found::Groups(_) => Err(wrong_answer()),
        }
    }

    /// The latest list of `group` of `window`, if stored.
    pub async fn latest_of(
        &self,
        job: &str,
        window: &str,
        group: &GroupKey,
    ) -> Result<Option<StoredList>, LookupError> {
        match self.ask(job, window, What::Latest(group.clone())).await? {
            Found::List(l) => Ok(l),
            Found::Groups(_) => Err(wrong_answer()),
        }
    }

    /// The groups of the latest instance of `window`, with its start.
    pub async fn groups(&self, job: &str, window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, LookupError> {
        match self.ask(job, window, What::Groups).await? {
            Found::Groups(g) => Ok(g),
            Found::List(_) => Err(wrong_answer()),
        }
    }

    async fn ask(&self, job: &str, window: &str, what: What) -> Result<Found, LookupError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let lookup = Lookup {
            job: job.to_string(),
            window: window.to_string(),
            what,
            reply,
        };
        // counted before sending: the worker may take it (and count down) at once
        self.metrics.history_queued.inc();
        match self.tx.try_send(lookup) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.metrics.history_queued.dec();
                self.metrics.history_rejected.inc();
                return Err(LookupError::Busy {
                    capacity: self.capacity,
                });
            }
            Err(TrySendError::Disconnected(_)) => {
                self.metrics.history_queued.dec();
                return Err(LookupError::Failed("history worker stopped".into()));
            }
        }
        answer
            .await
            .map_err(|_| LookupError::Failed("history lookup failed".into()))?
            .map_err(LookupError::Failed)
    }
}

fn wrong_answer() -> LookupError {
    LookupError::Failed("history lookup answered the wrong question".into())
}

/// Answers one lookup, (re)opening the reader if needed.
fn answer(open: &ReaderFactory, reader: &mut Option<Box<dyn StoreReader>>, lookup: &Lookup) -> Result<Found, String> {
    let attempt = crate::panics::contain(|| {
        let r = match reader {
            Some(r) => r,
            None => reader.insert(open().map_err(|e| format!("store unavailable: {e}"))?),
        };
        let (job, window) = (&lookup.job, &lookup.window);
        match &lookup.what {
            What::Instance(g, start) => r.instance_of(job, window, g, *start).map(Found::List),
            What::Latest(g) => r.latest_of(job, window, g).map(Found::List),
            What::Groups => r.groups(job, window).map(Found::Groups),
        }
        .map_err(|e| format!("store unavailable: {e}"))
    });
    match attempt {
        Ok(Ok(list)) => Ok(list),
        Ok(Err(e)) => {
            discard(reader.take()); // reopen next time
            Err(e)
        }
        Err(panic) => {
            tracing::error!("the history reader panicked (reopening the store): {panic}");
            discard(reader.take());
            Err(format!("the store reader panicked: {panic}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_store::{Behaviour, FakeStore};
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::{Duration, Instant};

    fn worker(store: &Arc<FakeStore>, capacity: usize) -> (HistoryWorker, Arc<ApiMetrics>) {
        let metrics = Arc::new(ApiMetrics::new());
        let w = HistoryWorker::start(store.opener(), capacity, metrics.clone()).expect("start");
        (w, metrics)
    }

    /// A lookup whose reader panics or fails is answered with an error naming why; the worker
    /// reopens the reader and answers the next lookup.
    #[tokio::test]
    async fn worker_survives_reader_panics_and_errors() {
        let store = FakeStore::new();
        let (worker, _) = worker(&store, 4);
        let lookup = || worker.instance("job", "1m", Millis(0));
        assert_eq!(lookup().await.expect("good").map(|l| l.revision), Some(1));
        for (behaviour, error) in [
            (Behaviour::Panic, "the store reader panicked: capacity overflow at "),
            (Behaviour::Corrupt, "item_count 1099511627776"),
            (Behaviour::Unreachable, "connection lost"),
        ] {
            let opened = store.opened.load(Relaxed);
            store.set(2, behaviour);
            let e = lookup().await.expect_err("fails").to_string();
            assert!(e.contains(error), "{behaviour:?}: {e}");
            store.set(3, Behaviour::Good);
            assert_eq!(lookup().await.expect("recovered").map(|l| l.revision), Some(3));
            assert_eq!(store.opened.load(Relaxed), opened + 1, "{behaviour:?}: reopened once");
        }
    }

    /// Polls `condition` until it holds (bounded).
    async fn wait_until(what: &str, condition: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// With the thread busy on a slow store and the queue full, the next lookup is refused at
    /// once (Busy, counted); lookups whose requests were dropped while queued are never read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_refuses_and_abandoned_lookups_are_skipped() {
        let store = FakeStore::new();
        store.set(1, Behaviour::Slow);
        let (worker, metrics) = worker(&store, 2);
        let worker = Arc::new(worker);
        let ask = |w: &Arc<HistoryWorker>| {
            let w = w.clone();
            tokio::spawn(async move { w.instance("job", "1m", Millis(0)).await })
        };
        let first = ask(&worker); // taken by the thread: reads for 2 s
        wait_until("the first read", || store.reads.load(Relaxed) == 1).await;
        let queued: Vec<_> = (0..2).map(|_| ask(&worker)).collect();
        wait_until("two queued", || metrics.history_queued.get() == 2).await;
        let asked = Instant::now();
        let refused = worker.instance("job", "1m", Millis(0)).await;
        assert!(
            matches!(refused, Err(LookupError::Busy { capacity: 2 })),
            "{:?}",
            refused.map(|_| ())
        );
        assert!(asked.elapsed() < Duration::from_millis(500), "refused at once");
        assert_eq!(metrics.history_rejected.get(), 1);
        for q in &queued {
            q.abort(); // their clients went away
        }
        store.set(1, Behaviour::Good);
        assert!(first.await.expect("join").is_ok(), "the first is answered");
        wait_until("the queue drained", || metrics.history_abandoned.get() == 2).await;
        assert_eq!(store.reads.load(Relaxed), 1, "abandoned lookups were not read");
        assert_eq!(metrics.history_queued.get(), 0);
        assert!(worker.instance("job", "1m", Millis(0)).await.is_ok());
    }
}

//! History lookups (`/v1/top?…&date=` or `&at=`), per-group lists and `/v1/groups`: one thread owns a store reader and answers
//! requests in turn, so blocking store clients (SQLite, the sync PostgreSQL client) never run
//! on, or get dropped on, the async runtime's threads.
//!
//! Like the refresher, the worker outlives any failure of its reader: an error or a panic
//! answers that one lookup with an error (the API's 503) and the reader is reopened for the
//! next.

use crate::cache::{discard, ReaderFactory};
use hotlist_operators::group::GroupKey;
use hotlist_operators::time::Millis;
use hotlist_sinks::{StoreReader, StoredList};
use std::sync::Mutex;

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

/// The history thread's mailbox. The thread ends when this is dropped.
pub struct HistoryWorker {
    tx: Mutex<std::sync::mpsc::Sender<Lookup>>,
}

impl HistoryWorker {
    /// Starts the thread; `open` (re)opens the reader when needed.
    pub fn start(open: ReaderFactory) -> std::io::Result<HistoryWorker> {
        let (tx, rx) = std::sync::mpsc::channel::<Lookup>();
        std::thread::Builder::new()
            .name("hotlist-history".into())
            .spawn(move || {
                let mut reader: Option<Box<dyn StoreReader>> = None;
                while let Ok(lookup) = rx.recv() {
                    let answer = answer(&open, &mut reader, &lookup);
                    let _ = lookup.reply.send(answer);
                }
                discard(reader);
            })?;
        Ok(HistoryWorker { tx: Mutex::new(tx) })
    }

    /// The instance of `window` starting at `start`, if stored; `Err` names what failed.
    pub async fn instance(&self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, String> {
        self.instance_of(job, window, &GroupKey::global(), start).await
    }

    /// The list of `group` in the instance of `window` starting at `start`, if stored.
    pub async fn instance_of(
        &self,
        job: &str,
        window: &str,
        group: &GroupKey,
        start: Millis,
    ) -> Result<Option<StoredList>, String> {
        match self.ask(job, window, What::Instance(group.clone(), start)).await? {
            Found::List(l) => Ok(l),
            Found::Groups(_) => Err("history lookup answered the wrong question".into()),
        }
    }

    /// The latest list of `group` of `window`, if stored.
    pub async fn latest_of(&self, job: &str, window: &str, group: &GroupKey) -> Result<Option<StoredList>, String> {
        match self.ask(job, window, What::Latest(group.clone())).await? {
            Found::List(l) => Ok(l),
            Found::Groups(_) => Err("history lookup answered the wrong question".into()),
        }
    }

    /// The groups of the latest instance of `window`, with its start.
    pub async fn groups(&self, job: &str, window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, String> {
        match self.ask(job, window, What::Groups).await? {
            Found::Groups(g) => Ok(g),
            Found::List(_) => Err("history lookup answered the wrong question".into()),
        }
    }

    async fn ask(&self, job: &str, window: &str, what: What) -> Result<Found, String> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let lookup = Lookup {
            job: job.to_string(),
            window: window.to_string(),
            what,
            reply,
        };
        self.tx
            .lock()
            .map_err(|_| "history worker poisoned".to_string())?
            .send(lookup)
            .map_err(|_| "history worker stopped".to_string())?;
        answer.await.map_err(|_| "history lookup failed".to_string())?
    }
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

    /// A lookup whose reader panics or fails is answered with an error naming why; the worker
    /// reopens the reader and answers the next lookup.
    #[tokio::test]
    async fn worker_survives_reader_panics_and_errors() {
        let store = FakeStore::new();
        let worker = HistoryWorker::start(store.opener()).expect("start");
        let lookup = || worker.instance("job", "1m", Millis(0));
        assert_eq!(lookup().await.expect("good").map(|l| l.revision), Some(1));
        for (behaviour, error) in [
            (Behaviour::Panic, "the store reader panicked: capacity overflow at "),
            (Behaviour::Corrupt, "item_count 1099511627776"),
            (Behaviour::Unreachable, "connection lost"),
        ] {
            let opened = store.opened.load(Relaxed);
            store.set(2, behaviour);
            let e = lookup().await.expect_err("fails");
            assert!(e.contains(error), "{behaviour:?}: {e}");
            store.set(3, Behaviour::Good);
            assert_eq!(lookup().await.expect("recovered").map(|l| l.revision), Some(3));
            assert_eq!(store.opened.load(Relaxed), opened + 1, "{behaviour:?}: reopened once");
        }
    }
}

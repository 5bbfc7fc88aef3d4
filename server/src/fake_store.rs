//! A scripted in-memory `StoreReader` for the refresher's and the history worker's unit tests:
//! it serves one window whose list is the committed epoch, and it can be told to fail or to
//! panic the way a reader meeting corrupt data does.

use hotlist_operators::group::GroupKey;
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::time::{Millis, Span};
use hotlist_sinks::{SinkError, StoreReader, StoredList, StoredWindow};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// How the reader behaves on its next reads of lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers.
    Good,
    /// Returns a non-retryable error naming the row (a reader that validates).
    Corrupt,
    /// Returns a retryable error (a lost connection).
    Unreachable,
    /// Panics (a reader that trusts a corrupt count).
    Panic,
    /// Answers after 2 s (a store that hangs).
    Slow,
}

/// The store the fake readers read: shared, changeable by the test.
#[derive(Debug)]
pub struct FakeStore {
    pub epoch: Mutex<u64>,
    pub behaviour: Mutex<Behaviour>,
    /// Readers opened so far.
    pub opened: AtomicU32,
    /// Lists read so far (every call of `list`, whatever its behaviour).
    pub reads: AtomicU32,
}

impl FakeStore {
    pub fn new() -> Arc<FakeStore> {
        Arc::new(FakeStore {
            epoch: Mutex::new(1),
            behaviour: Mutex::new(Behaviour::Good),
            opened: AtomicU32::new(0),
            reads: AtomicU32::new(0),
        })
    }

    pub fn set(&self, epoch: u64, behaviour: Behaviour) {
        *self.epoch.lock().expect("epoch") = epoch;
        *self.behaviour.lock().expect("behaviour") = behaviour;
    }

    /// A factory of readers of this store.
    pub fn opener(self: &Arc<Self>) -> crate::cache::ReaderFactory {
        let store = self.clone();
        Box::new(move || {
            store.opened.fetch_add(1, Relaxed);
            Ok(Box::new(FakeReader(store.clone())) as Box<dyn StoreReader>)
        })
    }
}

struct FakeReader(Arc<FakeStore>);

impl FakeReader {
    fn list(&self, window: &str) -> Result<Option<StoredList>, SinkError> {
        self.0.reads.fetch_add(1, Relaxed);
        let epoch = *self.0.epoch.lock().expect("epoch");
        let behaviour = *self.0.behaviour.lock().expect("behaviour"); // not held while panicking
        if behaviour == Behaviour::Slow {
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        match behaviour {
            Behaviour::Good | Behaviour::Slow => Ok(Some(StoredList {
                window: window.into(),
                group: Default::default(),
                start: Millis(0),
                end: Millis(60_000),
                revision: epoch as u32,
                state: ListState::Open,
                watermark: Millis(0),
                as_of: Millis(0),
                items: vec![RankedItem {
                    item_id: "a".into(),
                    count: epoch,
                    trend: None,
                }],
                exact: true,
                error_bound: 0,
                sketch_check: None,
                certificate: None,
            })),
            Behaviour::Corrupt => Err(SinkError::Corrupt {
                path: "fake.db".into(),
                detail: format!("window {window:?} instance 0: item_count 1099511627776 is not the 1 rows stored"),
            }),
            Behaviour::Unreachable => Err(SinkError::Io {
                path: "fake.db".into(),
                op: "reading".into(),
                source: std::io::Error::other("connection lost"),
            }),
            Behaviour::Panic => panic!("capacity overflow"),
        }
    }
}

impl StoreReader for FakeReader {
    fn windows(&mut self, _job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        Ok(vec![StoredWindow {
            name: "1m".into(),
            size: Span::from_millis(60_000),
            slide: Span::from_millis(60_000),
            k: 10,
            by: Vec::new(),
        }])
    }

    fn latest_of(&mut self, _job: &str, window: &str, _group: &GroupKey) -> Result<Option<StoredList>, SinkError> {
        self.list(window)
    }

    fn instance_of(
        &mut self,
        _job: &str,
        window: &str,
        _group: &GroupKey,
        _start: Millis,
    ) -> Result<Option<StoredList>, SinkError> {
        self.list(window)
    }

    fn groups(&mut self, _job: &str, _window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, SinkError> {
        Ok(Some((Millis(0), vec![GroupKey::global()])))
    }

    fn last_commit(&mut self, _job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        Ok(Some((*self.0.epoch.lock().expect("epoch"), Millis(0))))
    }

    fn hot_keys(&mut self, _job: &str) -> Result<Option<hotlist_operators::hot_keys::HotWindow>, SinkError> {
        Ok(None)
    }

    /// The server never reads instance ranges: none are recorded.
    fn sealed_ranges(
        &mut self,
        _job: &str,
        _window: &str,
        _start: Millis,
    ) -> Result<Option<hotlist_operators::replay::SealedRanges>, SinkError> {
        Ok(None)
    }

    fn sealed_instances(
        &mut self,
        _job: &str,
        _window: &str,
        _since: Millis,
        _limit: usize,
    ) -> Result<Vec<Millis>, SinkError> {
        Ok(Vec::new())
    }
}

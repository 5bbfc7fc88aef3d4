//! `MemoryStore`: a complete in-memory sink store with the same semantics as the SQLite one,
//! for tests and benchmarks. Clones share one store, so a test keeps a handle and reads what
//! the job wrote through another.

use crate::error::SinkError;
use crate::store::SinkStore;
use crate::types::{check_batch, check_prepare, latest_revisions, CommitBatch, SourcedDeadLetter, StoredWindow};
use hotlist_operators::record::PublishedList;
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// An in-memory sink store; cloning yields another handle on the same data.
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    jobs: BTreeMap<String, JobState>,
    /// Every job's dead letters, in commit order.
    dead_letters: Vec<SourcedDeadLetter>,
}

#[derive(Debug, Default)]
struct JobState {
    windows: Vec<StoredWindow>,
    epoch: Option<u64>,
    watermark: Option<Millis>,
    /// The latest revision of each instance, keyed by (window name, start).
    lists: BTreeMap<(String, Millis), PublishedList>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every mutation is applied only after all checks passed and cannot panic half way, so
        // the data behind a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The latest stored revision of every window instance of every job, ordered by job, window
    /// name and start.
    pub fn lists(&self) -> Vec<PublishedList> {
        let inner = self.lock();
        inner.jobs.values().flat_map(|j| j.lists.values().cloned()).collect()
    }

    /// Every dead letter committed so far (all jobs), in commit order.
    pub fn dead_letters(&self) -> Vec<SourcedDeadLetter> {
        self.lock().dead_letters.clone()
    }

    /// The windows `prepare` recorded for `job`, in configured order.
    pub fn windows(&self, job: &str) -> Vec<StoredWindow> {
        self.lock().jobs.get(job).map(|j| j.windows.clone()).unwrap_or_default()
    }

    /// The global watermark of the job's last committed batch.
    pub fn watermark(&self, job: &str) -> Option<Millis> {
        self.lock().jobs.get(job).and_then(|j| j.watermark)
    }
}

impl SinkStore for MemoryStore {
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
        check_prepare(job, windows)?;
        let mut inner = self.lock();
        inner.jobs.entry(job.to_string()).or_default().windows = windows.iter().map(StoredWindow::from).collect();
        Ok(())
    }

    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError> {
        check_batch(batch)?;
        let mut inner = self.lock();
        let inner = &mut *inner;
        let state = inner.jobs.entry(batch.job.clone()).or_default();
        if state.epoch.is_some_and(|e| batch.epoch <= e) {
            return Ok(false);
        }
        for l in latest_revisions(&batch.lists) {
            state.lists.insert((l.window.clone(), l.start), l.clone());
        }
        inner.dead_letters.extend(batch.dead_letters.iter().cloned());
        state.epoch = Some(batch.epoch);
        state.watermark = Some(batch.watermark);
        Ok(true)
    }

    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError> {
        Ok(self.lock().jobs.get(job).and_then(|j| j.epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{self, items, list_with, not_json};
    use hotlist_operators::record::ListState;
    use hotlist_operators::time::Span;

    /// Revision `revision` of the `1m` instance at `start` with `n` items: always open, computed
    /// at watermark `start`, published at 1.
    fn list(start: i64, revision: u32, n: usize) -> PublishedList {
        PublishedList {
            state: ListState::Open,
            watermark: Millis(start),
            as_of: Millis(1),
            ..list_with(
                start,
                revision,
                items(n, |i| format!("r{revision}-{i}"), |i| (n - i) as u64),
            )
        }
    }

    /// The shared batch of `lists` at `epoch`, but with watermark `epoch`.
    fn batch(epoch: u64, lists: Vec<PublishedList>) -> CommitBatch {
        CommitBatch {
            watermark: Millis(epoch as i64),
            ..test_fixtures::batch(epoch, lists)
        }
    }

    #[test]
    fn highest_revision_replaces_and_epochs_skip() {
        let reader = MemoryStore::new();
        let mut store = reader.clone();
        store
            .prepare("hotlist", &[WindowSpec::tumbling("1m", Span::from_millis(60_000), 3)])
            .unwrap();
        assert_eq!(reader.windows("hotlist")[0].k, 3);
        assert_eq!(store.committed_epoch("hotlist").unwrap(), None);
        assert!(store.commit(&batch(1, vec![list(0, 1, 5)])).unwrap());
        assert!(store
            .commit(&batch(2, vec![list(0, 3, 2), list(0, 2, 4), list(60_000, 1, 1)]))
            .unwrap());
        let lists = reader.lists();
        assert_eq!(lists.len(), 2);
        assert_eq!(lists[0], list(0, 3, 2));
        assert_eq!(lists[1], list(60_000, 1, 1));
        // At or below the committed epoch: skipped, nothing changes.
        assert!(!store.commit(&batch(2, vec![list(0, 9, 9)])).unwrap());
        assert!(!store.commit(&batch(1, vec![list(0, 9, 9)])).unwrap());
        assert_eq!(reader.lists()[0], list(0, 3, 2));
        assert_eq!(store.committed_epoch("hotlist").unwrap(), Some(2));
        assert_eq!(reader.watermark("hotlist"), Some(Millis(2)));
        assert_eq!(store.committed_epoch("other").unwrap(), None);
    }

    #[test]
    fn dead_letters_append() {
        let reader = MemoryStore::new();
        let mut store = reader.clone();
        let letter = |pos: u64| not_json(pos, &[0xff, 0xfe, b'{']);
        let mut b = batch(1, vec![]);
        b.dead_letters = vec![letter(1), letter(2)];
        assert!(store.commit(&b).unwrap());
        b.epoch = 2;
        b.dead_letters = vec![letter(3)];
        assert!(store.commit(&b).unwrap());
        assert_eq!(reader.dead_letters(), vec![letter(1), letter(2), letter(3)]);
    }

    #[test]
    fn invalid_input_changes_nothing() {
        let mut store = MemoryStore::new();
        let mut bad = list(0, 1, 1);
        bad.items[0].count = u64::MAX;
        let err = store.commit(&batch(1, vec![bad])).unwrap_err();
        assert!(!err.retryable());
        assert_eq!(store.committed_epoch("hotlist").unwrap(), None);
        assert!(store.lists().is_empty());
    }
}

//! `MemoryStore`: a complete in-memory sink store with the same semantics as the SQLite one,
//! for tests and benchmarks. Clones share one store, so a test keeps a handle and reads what
//! the job wrote through another (directly, or through [`StoreReader`]). Its reads apply the
//! same checks as the other stores' (`read_checks`): a list longer than its window's
//! `k` is corrupt here too.

use crate::error::SinkError;
use crate::ownership::{Claim, Claims, Owner};
use crate::read_checks;
use crate::store::{DeadLetterBlocks, SinkStore, StoreReader, MAX_GROUPS_READ};
use crate::types::{latest_revisions, CommitBatch, SourcedDeadLetter, StoredList, StoredWindow};
use crate::write_checks::{check_batch, check_job, check_prepare};
use hotlist_operators::dead_letter_cap::block_of;
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::message::PublishedList;
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// An in-memory sink store; cloning yields another handle on the same data (and the claims
/// this handle made so far).
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
    claims: Claims,
}

#[derive(Debug, Default)]
struct Inner {
    jobs: BTreeMap<String, JobState>,
    /// Every job's dead letters with their job, in commit order.
    dead_letters: Vec<(String, SourcedDeadLetter)>,
}

#[derive(Debug, Default)]
struct JobState {
    windows: Vec<StoredWindow>,
    epoch: Option<u64>,
    watermark: Option<Millis>,
    /// The latest revision of each list, keyed by (window name, group, start).
    lists: BTreeMap<(String, GroupKey, Millis), PublishedList>,
    /// The job's owner (see `crate::ownership`).
    owner: Option<Owner>,
    /// Closed hot-key windows by start.
    hot_keys: BTreeMap<Millis, HotWindow>,
    /// Sealed instances' ranges by (window name, start).
    ranges: BTreeMap<(String, Millis), SealedRanges>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn data(&self) -> MutexGuard<'_, Inner> {
        // Every mutation is applied only after all checks passed and cannot panic half way, so
        // the data behind a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The latest stored revision of every list of every job, ordered by job, window name,
    /// group and start.
    pub fn lists(&self) -> Vec<PublishedList> {
        let inner = self.data();
        inner.jobs.values().flat_map(|j| j.lists.values().cloned()).collect()
    }

    /// Every dead letter committed so far (all jobs), in commit order.
    pub fn dead_letters(&self) -> Vec<SourcedDeadLetter> {
        self.data().dead_letters.iter().map(|(_, d)| d.clone()).collect()
    }

    /// The windows `prepare` recorded for `job`, in configured order.
    pub fn windows(&self, job: &str) -> Vec<StoredWindow> {
        self.data().jobs.get(job).map(|j| j.windows.clone()).unwrap_or_default()
    }

    /// The global watermark of the job's last committed batch.
    pub fn watermark(&self, job: &str) -> Option<Millis> {
        self.data().jobs.get(job).and_then(|j| j.watermark)
    }
}

impl SinkStore for MemoryStore {
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
        check_prepare(job, windows)?;
        let mut inner = self.data();
        inner.jobs.entry(job.to_string()).or_default().windows = windows.iter().map(StoredWindow::from).collect();
        Ok(())
    }

    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError> {
        check_batch(batch)?;
        let mut inner = self.data();
        let inner = &mut *inner;
        let state = inner.jobs.entry(batch.job.clone()).or_default();
        self.claims
            .check(&batch.job, state.owner.as_ref().map(|o| o.generation))?;
        if state.epoch.is_some_and(|e| batch.epoch <= e) {
            return Ok(false);
        }
        for l in latest_revisions(&batch.lists) {
            state
                .lists
                .insert((l.window.clone(), l.group.clone(), l.start), l.clone());
        }
        for w in &batch.hot_keys {
            state.hot_keys.insert(w.start, w.clone());
        }
        for r in &batch.ranges {
            state.ranges.insert((r.window.clone(), r.start), r.clone());
        }
        for d in &batch.dead_letters {
            add_letter(&mut inner.dead_letters, &batch.job, d);
        }
        state.epoch = Some(batch.epoch);
        state.watermark = Some(batch.watermark);
        Ok(true)
    }

    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError> {
        Ok(self.data().jobs.get(job).and_then(|j| j.epoch))
    }

    /// In-memory stores live in one process: there is no other run to keep out.
    fn lock(&mut self, _job: &str) -> Result<(), SinkError> {
        Ok(())
    }

    fn claim(&mut self, job: &str, owner: &str) -> Result<Claim, SinkError> {
        check_job(job)?;
        let mut inner = self.data();
        let state = inner.jobs.entry(job.to_string()).or_default();
        let previous = state.owner.take();
        let generation = previous.as_ref().map_or(1, |o| o.generation + 1);
        state.owner = Some(Owner {
            generation,
            owner: owner.to_string(),
        });
        drop(inner);
        self.claims.insert(job, generation);
        Ok(Claim { generation, previous })
    }

    fn reset(&mut self, job: &str) -> Result<(), SinkError> {
        let mut inner = self.data();
        if let Some(state) = inner.jobs.get_mut(job) {
            state.lists.clear();
            state.hot_keys.clear();
            state.ranges.clear();
            state.epoch = None;
            state.watermark = None;
        }
        inner.dead_letters.retain(|(j, _)| j != job);
        Ok(())
    }

    fn dead_letter_blocks(&mut self, job: &str) -> Result<DeadLetterBlocks, SinkError> {
        let mut blocks = BTreeMap::<(String, u64), u64>::new();
        for (j, d) in &self.data().dead_letters {
            if j == job {
                *blocks
                    .entry((d.source.clone(), block_of(d.letter.position)))
                    .or_default() += d.count;
            }
        }
        Ok(blocks.into_iter().collect())
    }
}

/// Appends a whole letter, or adds a summary to its block's summary row (as the SQL stores do).
fn add_letter(letters: &mut Vec<(String, SourcedDeadLetter)>, job: &str, d: &SourcedDeadLetter) {
    if let Some(last) = d.last_position {
        let block = block_of(d.letter.position);
        let same = letters.iter_mut().find(|(j, o)| {
            j == job
                && o.is_summary()
                && o.source == d.source
                && o.letter.reason == d.letter.reason
                && block_of(o.letter.position) == block
        });
        if let Some((_, o)) = same {
            o.count += d.count;
            o.letter.position = o.letter.position.min(d.letter.position);
            o.last_position = o.last_position.map(|l| l.max(last));
            return;
        }
    }
    letters.push((job.to_string(), d.clone()));
}

impl StoreReader for MemoryStore {
    fn dead_letters_containing(
        &mut self,
        job: &str,
        reasons: &[hotlist_operators::record::DeadReason],
        needle: &[u8],
        limit: usize,
    ) -> Result<Option<Vec<SourcedDeadLetter>>, SinkError> {
        let holds = |raw: &[u8]| needle.is_empty() || raw.windows(needle.len()).any(|w| w == needle);
        let found = (self.data().dead_letters.iter())
            .filter(|(j, d)| j == job && !d.is_summary() && reasons.contains(&d.letter.reason))
            .filter(|(_, d)| holds(&d.letter.raw))
            .take(limit)
            .map(|(_, d)| d.clone())
            .collect();
        Ok(Some(found))
    }

    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        Ok(MemoryStore::windows(self, job))
    }

    fn latest_of(&mut self, job: &str, window: &str, group: &GroupKey) -> Result<Option<StoredList>, SinkError> {
        let inner = self.data();
        let Some(state) = inner.jobs.get(job) else {
            return Ok(None);
        };
        let key = |at| (window.to_string(), group.clone(), at);
        let list = state.lists.range(key(Millis::MIN)..=key(Millis::MAX)).next_back();
        list.map(|(_, l)| checked(job, state, l)).transpose()
    }

    fn instance_of(
        &mut self,
        job: &str,
        window: &str,
        group: &GroupKey,
        start: Millis,
    ) -> Result<Option<StoredList>, SinkError> {
        let inner = self.data();
        let Some(state) = inner.jobs.get(job) else {
            return Ok(None);
        };
        let list = state.lists.get(&(window.to_string(), group.clone(), start));
        list.map(|l| checked(job, state, l)).transpose()
    }

    fn groups(&mut self, job: &str, window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, SinkError> {
        let inner = self.data();
        let Some(state) = inner.jobs.get(job) else {
            return Ok(None);
        };
        let of_window: Vec<&(String, GroupKey, Millis)> = state.lists.keys().filter(|(w, _, _)| w == window).collect();
        let Some(latest) = of_window.iter().map(|(_, _, start)| *start).max() else {
            return Ok(None);
        };
        let groups = of_window
            .iter()
            .filter(|(_, _, s)| *s == latest)
            .map(|(_, g, _)| g.clone());
        Ok(Some((latest, groups.take(MAX_GROUPS_READ).collect())))
    }

    fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        Ok(self.data().jobs.get(job).and_then(|j| j.epoch.zip(j.watermark)))
    }

    /// The latest hot-key window, checked like the other stores' reads.
    fn hot_keys(&mut self, job: &str) -> Result<Option<HotWindow>, SinkError> {
        let inner = self.data();
        let Some(w) = inner.jobs.get(job).and_then(|j| j.hot_keys.values().next_back()) else {
            return Ok(None);
        };
        read_checks::hot_window_to_write(job, w).map_err(|d| SinkError::corrupt("memory", d))?;
        Ok(Some(w.clone()))
    }

    /// The instance's ranges, checked like the other stores' reads.
    fn sealed_ranges(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<SealedRanges>, SinkError> {
        let inner = self.data();
        let Some(r) = inner
            .jobs
            .get(job)
            .and_then(|j| j.ranges.get(&(window.to_string(), start)))
        else {
            return Ok(None);
        };
        r.validate().map_err(|d| {
            let at = read_checks::ListAt { job, window, start };
            SinkError::corrupt("memory", format!("{at}: ranges: {d}"))
        })?;
        Ok(Some(r.clone()))
    }

    fn sealed_instances(
        &mut self,
        job: &str,
        window: &str,
        since: Millis,
        limit: usize,
    ) -> Result<Vec<Millis>, SinkError> {
        let inner = self.data();
        let Some(state) = inner.jobs.get(job) else {
            return Ok(Vec::new());
        };
        let from = (window.to_string(), since);
        let of_window = state.ranges.range(from..).take_while(|((w, _), _)| w == window);
        Ok(of_window.take(limit).map(|((_, start), _)| *start).collect())
    }
}

/// A stored list as read: checked against its window's `k` like the other stores' reads (its
/// length, and how many items its sketch check compared).
fn checked(job: &str, state: &JobState, l: &PublishedList) -> Result<StoredList, SinkError> {
    let k = state.windows.iter().find(|w| w.name == l.window).map(|w| w.k);
    let header = read_checks::Header {
        start: l.start,
        end: l.end,
        revision: i64::from(l.revision),
        state: l.state.as_str(),
        watermark: l.watermark,
        as_of: l.as_of,
        item_count: i64::try_from(l.items.len()).unwrap_or(i64::MAX),
    };
    let at = read_checks::ListAt {
        job,
        window: &l.window,
        start: l.start,
    };
    read_checks::header(&at, &header, k).map_err(|d| SinkError::corrupt("memory", d))?;
    let accuracy = read_checks::RawAccuracy::of(l.exact, l.error_bound, l.sketch_check, l.certificate)
        .map_err(|(what, v)| SinkError::corrupt("memory", format!("{at}: {what} {v} is too large")))?;
    read_checks::accuracy(&at, &accuracy, k, l.state).map_err(|d| SinkError::corrupt("memory", d))?;
    Ok(l.clone().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::{History, Subject};
    use crate::test_fixtures::{batch, list, not_json, JOB};
    use hotlist_operators::record::ListState;
    use hotlist_operators::time::Span;

    /// A new store; every handle is a clone of it.
    fn subject() -> Subject {
        let store = MemoryStore::new();
        let (w, r, h) = (store.clone(), store.clone(), store);
        Subject {
            writer: Box::new(move || Box::new(w.clone())),
            reader: Box::new(move || Box::new(r.clone())),
            history: Some(Box::new(move || Box::new(h.clone()))),
            stored_rows: None,
            damage: None,
            locks: false,
            place: Box::new(()),
        }
    }

    crate::conformance::suite!(subject);

    impl History for MemoryStore {
        fn instances(&mut self, job: &str, window: &str) -> Result<Vec<(Millis, u32, ListState)>, SinkError> {
            let inner = self.data();
            let lists = inner.jobs.get(job).map(|j| j.lists.values()).into_iter().flatten();
            let of_window = lists.filter(|l| l.window == window);
            Ok(of_window.map(|l| (l.start, l.revision, l.state)).collect())
        }

        fn dead_letters(&mut self, job: &str, limit: usize) -> Result<Vec<SourcedDeadLetter>, SinkError> {
            let inner = self.data();
            let of_job = inner.dead_letters.iter().rev().filter(|(j, _)| j == job);
            Ok(of_job.take(limit).map(|(_, d)| d.clone()).collect())
        }

        fn dead_letter_counts(&mut self, job: &str) -> Result<Vec<(String, u64)>, SinkError> {
            let mut counts = BTreeMap::<String, u64>::new();
            for (j, d) in &self.data().dead_letters {
                if j == job {
                    *counts.entry(d.letter.reason.as_str().to_string()).or_default() += d.count;
                }
            }
            Ok(counts.into_iter().collect())
        }
    }

    /// The inspection methods tests read the job's output with: the latest list of every
    /// instance in order, every dead letter in commit order, the windows and the watermark.
    #[test]
    fn inspection() {
        let reader = MemoryStore::new();
        let mut store = reader.clone();
        store
            .prepare(JOB, &[WindowSpec::tumbling("1m", Span::from_millis(60_000), 3)])
            .unwrap();
        assert_eq!(reader.windows(JOB)[0].k, 3);
        assert!(reader.lists().is_empty());
        assert_eq!(reader.watermark(JOB), None);
        let letter = |pos: u64| not_json(pos, &[0xff, 0xfe, b'{']);
        let mut b = batch(1, vec![list(0, 1, 5)]);
        b.dead_letters = vec![letter(1), letter(2)];
        assert!(store.commit(&b).unwrap());
        let mut b = batch(2, vec![list(0, 3, 2), list(0, 2, 4), list(60_000, 1, 1)]);
        b.dead_letters = vec![letter(3)];
        assert!(store.commit(&b).unwrap());
        assert_eq!(reader.lists(), vec![list(0, 3, 2), list(60_000, 1, 1)]);
        assert_eq!(reader.dead_letters(), vec![letter(1), letter(2), letter(3)]);
        assert_eq!(reader.watermark(JOB), Some(Millis(2000)));
        assert_eq!(reader.watermark("other"), None);
    }
}

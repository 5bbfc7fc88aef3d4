//! What the fan-out has yet to write, and how batches merge into it: per window and group the
//! newest revision of the newest instance (an older instance never replaces a newer one), and
//! nothing of an instance the window's newest one supersedes (`crate::retention`), so what is
//! pending stays bounded by the groups of a window's live instances however long Redis is down.

use crate::retention::superseded;
use crate::types::{latest_revisions, CommitBatch};
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::message::PublishedList;
use hotlist_operators::time::Millis;
use std::collections::BTreeMap;

/// What the fan-out has yet to write: per window and group, the newest revision of the newest
/// instance, and the epoch and watermark of the last batch merged in.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Pending {
    pub(super) epoch: u64,
    pub(super) watermark: Millis,
    pub(super) lists: BTreeMap<(String, GroupKey), PublishedList>,
    /// The newest closed hot-key window.
    pub(super) hot: Option<HotWindow>,
}

impl Pending {
    /// An empty set at the batch's epoch and watermark, then the batch merged in.
    pub(super) fn of(batch: &CommitBatch) -> Pending {
        let mut p = Pending {
            epoch: batch.epoch,
            watermark: batch.watermark,
            lists: BTreeMap::new(),
            hot: None,
        };
        p.merge(batch);
        p
    }

    /// Merges a batch committed after everything already here: per window and group, its
    /// newest list (greatest start, then highest revision; on a tie the later one) replaces the
    /// pending one unless that is of a newer instance.
    pub(super) fn merge(&mut self, batch: &CommitBatch) {
        self.epoch = self.epoch.max(batch.epoch);
        self.watermark = self.watermark.max(batch.watermark);
        for l in latest_revisions(&batch.lists) {
            self.put(l.clone(), true);
        }
        self.prune();
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
    /// window and group the newer instance wins; for the same instance, what was merged since.
    pub(super) fn merge_older(&mut self, older: Pending) {
        self.epoch = self.epoch.max(older.epoch);
        self.watermark = self.watermark.max(older.watermark);
        for l in older.lists.into_values() {
            self.put(l, false);
        }
        self.prune();
        if let Some(w) = older
            .hot
            .filter(|w| self.hot.as_ref().is_none_or(|h| w.start > h.start))
        {
            self.hot = Some(w);
        }
    }

    /// Sets the list of `l`'s window and group to `l` if there is none, if `l` is of a newer
    /// instance, or if it is of the same instance and `l` is the later one (`later`).
    fn put(&mut self, l: PublishedList, later: bool) {
        match self.lists.get_mut(&(l.window.clone(), l.group.clone())) {
            Some(p) if l.start > p.start || (l.start == p.start && later) => *p = l,
            Some(_) => {}
            None => {
                self.lists.insert((l.window.clone(), l.group.clone()), l);
            }
        }
    }

    /// Drops the lists of instances their window's newest pending instance supersedes: Redis
    /// would not keep them (see `crate::retention`).
    fn prune(&mut self) {
        let mut newest: BTreeMap<&str, Millis> = BTreeMap::new();
        for ((window, _), l) in &self.lists {
            let n = newest.entry(window.as_str()).or_insert(l.start);
            *n = (*n).max(l.start);
        }
        let newest: BTreeMap<String, Millis> = newest.into_iter().map(|(w, s)| (w.to_string(), s)).collect();
        self.lists
            .retain(|(window, _), l| !newest.get(window).is_some_and(|&s| superseded(l.end, s)));
    }

    /// How many lists are pending (at most one per window and group of a live instance).
    pub(super) fn len(&self) -> usize {
        self.lists.len()
    }

    /// The batch that writes everything pending (no dead letters and no instance ranges: the
    /// primary store keeps those; the fan-out copies only what a page reads).
    pub(super) fn to_batch(&self, job: &str) -> CommitBatch {
        CommitBatch {
            job: job.to_string(),
            epoch: self.epoch,
            watermark: self.watermark,
            lists: self.lists.values().cloned().collect(),
            dead_letters: Vec::new(),
            hot_keys: self.hot.iter().cloned().collect(),
            ranges: Vec::new(),
        }
    }
}

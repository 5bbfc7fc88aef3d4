//! `hotlist verify`: a sealed instance's lists counted again from its events (the reading is in
//! `dataflow/src/source/replay.rs`; this is the arithmetic, with no I/O), and the first place
//! where a stored list differs from its recount.
//!
//! The rules are the counters' (see `explain`): an event counts when its time is in the
//! instance and its partition's watermark before it had not passed the instance's end +
//! allowed lateness; per-group windows keep the `max_groups` lowest group hashes' lists and
//! fold the rest into `(other)`; distinct-user windows count (item, user) pairs; lists are
//! the top K by count, then item id (bytewise).

use crate::group::{GroupKey, InstanceGroups, OTHER_GROUP};
use crate::hash::item_hash;
use crate::record::{RankedItem, TimedEvent};
use crate::replay::counts_in;
use crate::time::{Millis, Span};
use crate::topk::top_k;
use crate::window::WindowSpec;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The recount needs more than its budget of keys (the instance is not checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("more than {0} distinct keys in the instance (verify's --max-keys)")]
pub struct OverBudget(pub usize);

/// Counts one instance's events again, every list of it.
pub struct Recount {
    window: WindowSpec,
    start: Millis,
    lateness: Span,
    groups: InstanceGroups,
    /// Events per (group key, item).
    counts: HashMap<(String, String), u64>,
    /// Distinct-user windows: the (group key, item, user) triples seen.
    pairs: HashSet<(String, String, String)>,
    max_keys: usize,
}

/// Where a stored list and its recount first differ: the rank (from 1), and each side's entry
/// there (`None`: that list ends before it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// The first rank that differs.
    pub rank: usize,
    /// The stored list's (item, count) there.
    pub stored: Option<(String, u64)>,
    /// The recount's.
    pub recounted: Option<(String, u64)>,
}

impl Recount {
    /// A recount of `window`'s instance starting at `start`, holding at most `max_keys` keys.
    pub fn new(window: WindowSpec, start: Millis, lateness: Span, max_keys: usize) -> Recount {
        Recount {
            groups: InstanceGroups::new(window.key.max_groups),
            window,
            start,
            lateness,
            counts: HashMap::new(),
            pairs: HashSet::new(),
            max_keys,
        }
    }

    /// Takes one event as a replay read it; `group` as in [`crate::explain::Explainer::event`]
    /// (`None`: it counts in no list).
    pub fn event(&mut self, e: &TimedEvent, group: Option<&str>) -> Result<(), OverBudget> {
        let Some(group) = group else { return Ok(()) };
        if !counts_in(&self.window, self.start, self.lateness, e.ts, e.wm_before) {
            return Ok(());
        }
        if !self.window.key.by.is_empty() {
            self.groups.insert(item_hash(group));
        }
        let (group, item) = (group.to_string(), e.item().to_string());
        if self.window.key.distinct_users {
            let Some(user) = e.text.user() else {
                return Ok(());
            };
            self.pairs.insert((group, item, user.to_string()));
        } else {
            *self.counts.entry((group, item)).or_default() += 1;
        }
        match self.counts.len() + self.pairs.len() > self.max_keys {
            true => Err(OverBudget(self.max_keys)),
            false => Ok(()),
        }
    }

    /// Every list of the instance as the job seals it, by group (a global window's under
    /// [`GroupKey::global`]; `(other)` when some group was folded into it), each best first.
    pub fn lists(self) -> BTreeMap<GroupKey, Vec<(String, u64)>> {
        let per_group = !self.window.key.by.is_empty();
        let groups = &self.groups;
        let list_of = |group: String| {
            if !per_group {
                String::new()
            } else if groups.admits(item_hash(&group)) {
                group
            } else {
                OTHER_GROUP.to_string()
            }
        };
        let mut merged: BTreeMap<String, HashMap<String, u64>> = BTreeMap::new();
        for ((group, item), n) in self.counts {
            *merged.entry(list_of(group)).or_default().entry(item).or_default() += n;
        }
        // an item's users in `(other)` are its distinct users over the folded groups
        let pairs: HashSet<(String, String, String)> = (self.pairs.into_iter())
            .map(|(group, item, user)| (list_of(group), item, user))
            .collect();
        for (list, item, _) in pairs {
            *merged.entry(list).or_default().entry(item).or_default() += 1;
        }
        let k = self.window.k;
        merged
            .into_iter()
            .map(|(group, items)| {
                let ranked = items
                    .into_iter()
                    .map(|(item_id, count)| RankedItem {
                        item_id: item_id.as_str().into(),
                        count,
                        trend: None,
                    })
                    .collect();
                let list = top_k(ranked, k)
                    .into_iter()
                    .map(|r| (r.item_id.as_str().to_string(), r.count))
                    .collect();
                (GroupKey::from_stored(group), list)
            })
            .collect()
    }
}

/// The first rank where `stored` and `recounted` differ (item or count), if any.
pub fn first_difference(stored: &[(String, u64)], recounted: &[(String, u64)]) -> Option<Difference> {
    let n = stored.len().max(recounted.len());
    (0..n).find(|&i| stored.get(i) != recounted.get(i)).map(|i| Difference {
        rank: i + 1,
        stored: stored.get(i).cloned(),
        recounted: recounted.get(i).cloned(),
    })
}

#[cfg(test)]
mod tests;

//! The replay of every approximate list of one sealed instance at once: a global window's one
//! list, or a per-group window's groups (`(other)` included).
//!
//! Reading an instance's input is the cost of a replay, and a per-group instance may have
//! hundreds of approximate lists. So the first pass is **shared**: one read counts, for every
//! list, the items of its group whose estimate (from the group's own table) reaches the
//! group's first threshold, all in one map within the budget (`max_replay_keys` keys in all;
//! the read in parallel as every pass: `replay_count`). A distinct-user list counts (item, user)
//! pairs, an item's count being its number of pairs (`replay_budget::CountedKey`).
//! Each list is then certified on its own (`certify.rs`). A list that pass proves is done. When
//! the shared map would outgrow the budget, the lists are halved and each half shares a pass of
//! its own (and so on): a few reads, not one per group. The lists no shared pass proves go on
//! alone through [`replay_within`] (its passes, hash-range splits and budget search), counting
//! their group's keys only.
//!
//! The outcome per list is the one [`replay_within`] alone would give: a list the shared pass
//! proves had a proving pass that fits the budget (its keys are a part of the shared map's),
//! so the search alone ends exact too, with the same (unique) exact list; any other list goes
//! through the search alone. So which lists end exact depends only on the input, the tables and
//! the budget, as for a global window (see `replay_budget`).

use crate::certify::{certify, Certificate};
use crate::record::ItemId;
use crate::replay_budget::{per_item, replay_within, CountedKey, KeyRange, ReplayBudget, ReplayStats, Replayed};
use crate::replay_count::{Counted, FxMap};
use crate::replay_pass::{CountPass, PassRule};
use serde::{Deserialize, Serialize};

/// What a replay of several lists counts: an item of list `list` (an index into the lists
/// being replayed), or for a distinct-user window one (item, user) pair of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListKey {
    /// Which list.
    pub list: u32,
    /// The item.
    pub item: ItemId,
    /// Distinct-user windows: the user.
    pub user: Option<ItemId>,
}

impl CountedKey for ListKey {
    fn item(&self) -> &ItemId {
        &self.item
    }

    fn is_pair(&self) -> bool {
        self.user.is_some()
    }

    fn list(&self) -> u32 {
        self.list
    }
}

/// One list to make exact: its length, the first pass's threshold, and a bound above its
/// group's estimates (the estimates themselves are the counting's: `replay_pass`).
#[derive(Clone, Copy, Debug)]
pub struct ListToReplay {
    /// The list length.
    pub k: usize,
    /// The first pass's threshold (`certify::first_threshold`).
    pub first: u64,
    /// Above every estimate of the list's group.
    pub upper: u64,
}

/// The exact list of every list of `lists` (or that it does not fit `budget`), each pass over
/// the instance's input counted by `count` (list `i`'s keys with its group's estimates), as
/// the module doc says.
pub fn replay_lists<E: Send>(
    lists: &[ListToReplay],
    budget: ReplayBudget,
    count: &CountPass<'_, ListKey, E>,
) -> Result<Vec<Replayed>, E> {
    let mut out: Vec<Option<Replayed>> = vec![None; lists.len()];
    // per list: what its shared passes cost (added to its own search's stats)
    let mut shared = vec![ReplayStats::default(); lists.len()];
    let mut next: Vec<u64> = lists.iter().map(|l| l.first.max(1)).collect();
    // shared first passes: all lists at once; a set whose map would outgrow the budget is
    // halved and each half tried again (a single list goes straight to its own search)
    let mut todo: Vec<Vec<usize>> = if lists.len() > 1 {
        vec![(0..lists.len()).collect()]
    } else {
        Vec::new()
    };
    while let Some(set) = todo.pop() {
        if set.len() < 2 {
            continue;
        }
        let mut rule = PassRule {
            thresholds: vec![None; lists.len()],
            range: KeyRange::ALL,
        };
        for &i in &set {
            rule.thresholds[i] = Some(next[i]);
            shared[i].passes += 1;
            shared[i].reads += 1;
            shared[i].ranges = shared[i].ranges.max(1);
        }
        let Counted::Fits(counts) = count(&rule, budget.max_keys())? else {
            for &i in &set {
                shared[i].peak_keys = budget.max_keys();
            }
            let (low, high) = set.split_at(set.len() / 2);
            todo.push(high.to_vec());
            todo.push(low.to_vec());
            continue;
        };
        let peak = counts.len();
        let mut per_list: Vec<FxMap<ListKey, u64>> = vec![FxMap::default(); lists.len()];
        for (key, c) in counts {
            if let Some(m) = per_list.get_mut(key.list as usize) {
                m.insert(key, c);
            }
        }
        for &i in &set {
            shared[i].peak_keys = shared[i].peak_keys.max(peak);
            let items = per_item(std::mem::take(&mut per_list[i]));
            let counted = items.len() as u64;
            match certify(items, lists[i].k, next[i]) {
                Ok(items) => {
                    let certificate = Certificate {
                        threshold: next[i],
                        counted,
                        passes: shared[i].passes,
                    };
                    out[i] = Some(Replayed::Exact(items, certificate, shared[i]));
                }
                // the search alone starts where this pass says the proof lies
                Err(t) => next[i] = t,
            }
        }
    }
    for (i, l) in lists.iter().enumerate() {
        if out[i].is_none() {
            out[i] = Some(replay_alone(i, l, next[i], shared[i], budget, count)?);
        }
    }
    Ok(out.into_iter().map(|r| r.expect("every list replayed")).collect())
}

/// List `i` alone from threshold `first`: its search (`replay_within`, its passes counting
/// its keys only), with the cost of its shared passes added.
fn replay_alone<E: Send>(
    i: usize,
    l: &ListToReplay,
    first: u64,
    shared: ReplayStats,
    budget: ReplayBudget,
    count: &CountPass<'_, ListKey, E>,
) -> Result<Replayed, E> {
    let mut r = replay_within(i as u32, l.upper, l.k, first, budget, count)?;
    let stats = match &mut r {
        Replayed::Exact(_, c, s) => {
            c.passes += shared.passes;
            s
        }
        Replayed::OverBudget(s) => s,
    };
    stats.passes += shared.passes;
    stats.reads += shared.reads;
    stats.peak_keys = stats.peak_keys.max(shared.peak_keys);
    Ok(r)
}

#[cfg(test)]
mod tests;

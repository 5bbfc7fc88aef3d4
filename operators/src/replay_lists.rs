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
//! alone through [`replay_within`] (its passes, hash-range splits and budget search), reading
//! the input filtered to their group.
//!
//! The outcome per list is the one [`replay_within`] alone would give: a list the shared pass
//! proves had a proving pass that fits the budget (its keys are a part of the shared map's),
//! so the search alone ends exact too, with the same (unique) exact list; any other list goes
//! through the search alone. So which lists end exact depends only on the input, the tables and
//! the budget, as for a global window (see `replay_budget`).

use crate::certify::{certify, Certificate};
use crate::record::ItemId;
use crate::replay_budget::{per_item, replay_within, CountedKey, ReplayBudget, ReplayStats, Replayed};
use crate::replay_count::{count_parts, Counted, FxMap, ReadPart, ReplayInput};
use std::sync::atomic::AtomicBool;

/// What a replay of several lists counts: an item of list `list` (an index into the lists
/// being replayed), or for a distinct-user window one (item, user) pair of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
}

/// One list to make exact: its length, the first pass's threshold and its group's table.
pub struct ListToReplay<'a> {
    /// The list length.
    pub k: usize,
    /// The first pass's threshold (`certify::first_threshold`).
    pub first: u64,
    /// The group's estimate of an item's count (never below it; below `upper`).
    pub estimate: &'a (dyn Fn(u64) -> u64 + Sync),
    /// Above every estimate.
    pub upper: u64,
}

/// The exact list of every list of `lists` (or that it does not fit `budget`), reading the
/// instance's input (`input`: its events' keys, each with its item's pinned hash) as the
/// module doc says.
pub fn replay_lists<E: Send>(
    lists: &[ListToReplay<'_>],
    budget: ReplayBudget,
    input: &ReplayInput<'_, ListKey, E>,
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
        let mut member = vec![false; lists.len()];
        for &i in &set {
            member[i] = true;
            shared[i].passes += 1;
            shared[i].reads += 1;
            shared[i].ranges = shared[i].ranges.max(1);
        }
        let admit = |key: &ListKey, hash: u64| {
            let i = key.list as usize;
            member.get(i).is_some_and(|m| *m) && (lists[i].estimate)(hash) >= next[i]
        };
        let Counted::Fits(counts) = count_parts(input, budget.max_keys(), &admit)? else {
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
            out[i] = Some(replay_alone(i, l, next[i], shared[i], budget, input)?);
        }
    }
    Ok(out.into_iter().map(|r| r.expect("every list replayed")).collect())
}

/// List `i` alone from threshold `first`: its search (`replay_within`) over the input filtered
/// to its keys, with the cost of its shared passes added.
fn replay_alone<E: Send>(
    i: usize,
    l: &ListToReplay<'_>,
    first: u64,
    shared: ReplayStats,
    budget: ReplayBudget,
    input: &ReplayInput<'_, ListKey, E>,
) -> Result<Replayed, E> {
    let only = i as u32;
    let read = |part: usize, halt: &AtomicBool, visit: &mut dyn FnMut(&ListKey, u64) -> bool| {
        (input.read)(part, halt, &mut |key, hash| key.list != only || visit(key, hash))
    };
    let alone: ReplayInput<'_, ListKey, E> = ReplayInput {
        parts: input.parts,
        threads: input.threads,
        read: &read as &ReadPart<'_, ListKey, E>,
    };
    let mut r = replay_within(l.estimate, l.upper, l.k, first, budget, &alone)?;
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

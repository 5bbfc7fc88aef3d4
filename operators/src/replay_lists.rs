//! The replay of every approximate list of one sealed instance at once: a global window's one
//! list, or a per-group window's groups (`(other)` included).
//!
//! Reading an instance's input is the cost of a replay, and a per-group instance may have
//! hundreds of approximate lists. So the first pass is **shared**: one read counts, for every
//! list, the items of its group whose estimate (from the group's own table) reaches the
//! group's first threshold, all in one map within the budget (`max_replay_keys` keys in all).
//! Each list is then certified on its own (`certify.rs`). A list that pass proves is done; the
//! others — or all of them, when the shared pass would outgrow the budget — go on alone through
//! [`replay_within`] (its passes, hash-range splits and budget search), reading the input
//! filtered to their group.
//!
//! The outcome per list is the one [`replay_within`] alone would give: a list the shared pass
//! proves had a proving pass that fits the budget (its keys are a part of the shared map's),
//! so the search alone ends exact too, with the same (unique) exact list; any other list goes
//! through the search alone. So which lists end exact depends only on the input, the tables and
//! the budget, as for a global window (see `replay_budget`).

use crate::certify::{certify, Certificate};
use crate::record::ItemId;
use crate::replay_budget::{replay_within, ReplayBudget, ReplayStats, Replayed};
use rustc_hash::FxBuildHasher;

type FxMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;

/// Reads the instance's events once, calling the visitor with each event's list (an index into
/// the lists being replayed; events of no such list are not visited), item and pinned hash until
/// it returns `false`.
pub type ReadLists<'a, E> = dyn FnMut(&mut dyn FnMut(usize, &ItemId, u64) -> bool) -> Result<(), E> + 'a;

/// One list to make exact: its length, the first pass's threshold and its group's table.
pub struct ListToReplay<'a> {
    /// The list length.
    pub k: usize,
    /// The first pass's threshold (`certify::first_threshold`).
    pub first: u64,
    /// The group's estimate of an item's count (never below it; below `upper`).
    pub estimate: &'a dyn Fn(u64) -> u64,
    /// Above every estimate.
    pub upper: u64,
}

/// The exact list of every list of `lists` (or that it does not fit `budget`), reading the input
/// with `read` (see the module doc).
pub fn replay_lists<E>(
    lists: &[ListToReplay<'_>],
    budget: ReplayBudget,
    read: &mut ReadLists<'_, E>,
) -> Result<Vec<Replayed>, E> {
    let mut out: Vec<Option<Replayed>> = vec![None; lists.len()];
    let mut shared = ReplayStats::default();
    // the shared first pass (a single list goes straight to its own search)
    let mut next: Vec<u64> = lists.iter().map(|l| l.first.max(1)).collect();
    if lists.len() > 1 {
        shared.passes = 1;
        shared.reads = 1;
        shared.ranges = 1;
        let mut counts: Vec<FxMap<ItemId, u64>> = vec![FxMap::default(); lists.len()];
        let (mut keys, mut over) = (0usize, false);
        read(&mut |list, item, hash| {
            let Some(map) = counts.get_mut(list) else {
                return true;
            };
            if let Some(c) = map.get_mut(item) {
                *c += 1;
            } else if (lists[list].estimate)(hash) >= next[list] {
                if keys >= budget.max_keys() {
                    over = true;
                    return false;
                }
                keys += 1;
                map.insert(item.clone(), 1);
            }
            true
        })?;
        shared.peak_keys = keys;
        if !over {
            for (i, map) in counts.into_iter().enumerate() {
                let counted = map.len() as u64;
                match certify(map.into_iter().collect(), lists[i].k, next[i]) {
                    Ok(items) => {
                        let certificate = Certificate {
                            threshold: next[i],
                            counted,
                            passes: 1,
                        };
                        out[i] = Some(Replayed::Exact(items, certificate, shared));
                    }
                    // the search alone starts where this pass says the proof lies
                    Err(t) => next[i] = t,
                }
            }
        }
    }
    for (i, l) in lists.iter().enumerate() {
        if out[i].is_some() {
            continue;
        }
        let mut alone = |visit: &mut dyn FnMut(&ItemId, u64) -> bool| -> Result<(), E> {
            read(&mut |list, item, hash| list != i || visit(item, hash))
        };
        let mut r = replay_within(l.estimate, l.upper, l.k, next[i], budget, &mut alone)?;
        // the shared pass is part of this list's replay
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
        out[i] = Some(r);
    }
    Ok(out.into_iter().map(|r| r.expect("every list replayed")).collect())
}

#[cfg(test)]
mod tests;

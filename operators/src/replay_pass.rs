//! One pass of a replay as data, so that another process can count it: which lists it counts,
//! from which threshold, in which item-hash range ([`PassRule`]). The searches
//! (`replay_budget`, `replay_lists`) decide the rules; a [`CountPass`] counts one over the
//! whole input and returns the merged map. In one process that is [`count_local`] (the parts on
//! the process's threads, `replay_count`); in a cluster each process counts the parts it owns
//! and the shares are summed with [`sum_shares`], under the same merged-map budget, so the
//! outcome does not depend on how the input is spread.

use crate::replay_budget::{CountedKey, KeyRange};
use crate::replay_count::{count_parts, merge, Counted, ReplayInput, Share};
use serde::{Deserialize, Serialize};

/// What one pass counts: a new key of list `l` is admitted iff `thresholds[l]` is set, its
/// item's hash lies in `range`, and the list's estimate of that hash reaches the threshold.
/// Keys already counted are always counted again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassRule {
    /// Per list (by index): the threshold, or `None` when the pass does not count the list.
    pub thresholds: Vec<Option<u64>>,
    /// The item hashes counted.
    pub range: KeyRange,
}

impl PassRule {
    /// List `list` alone from threshold `t`, in `range`.
    pub fn only(list: u32, t: u64, range: KeyRange) -> PassRule {
        let mut thresholds = vec![None; list as usize + 1];
        thresholds[list as usize] = Some(t);
        PassRule { thresholds, range }
    }

    /// Whether a new key of list `list`, whose item hashes to `hash`, is counted, given each
    /// list's estimate.
    #[inline]
    pub fn admits(&self, list: u32, hash: u64, estimates: &[&(dyn Fn(u64) -> u64 + Sync)]) -> bool {
        let l = list as usize;
        match (self.thresholds.get(l).copied().flatten(), estimates.get(l)) {
            (Some(t), Some(estimate)) => self.range.contains(hash) && estimate(hash) >= t,
            _ => false,
        }
    }
}

/// Counts one pass over the whole input: every key the rule admits, within `max_keys` keys of
/// the merged map.
pub type CountPass<'a, K, E> = dyn Fn(&PassRule, usize) -> Result<Counted<K>, E> + Sync + 'a;

/// A pass over `input`'s parts in this process, with each list's estimate.
pub fn count_local<K: CountedKey, E: Send>(
    input: &ReplayInput<'_, K, E>,
    estimates: &[&(dyn Fn(u64) -> u64 + Sync)],
    rule: &PassRule,
    max_keys: usize,
) -> Result<Counted<K>, E> {
    count_parts(input, max_keys, &|key: &K, hash| {
        rule.admits(key.list(), hash, estimates)
    })
}

/// One process's share of a pass: what it counted over its parts, or the first of its parts
/// that failed (its index in the job's parts) with why.
pub type ProcessShare<K, E> = Result<Counted<K>, (usize, E)>;

/// The shares of every process summed per key, as one process reading every part would count
/// them: the lowest failed part's error first, then over budget when a share is over or the
/// merged map passes `max_keys`.
pub fn sum_shares<K: CountedKey, E>(shares: Vec<ProcessShare<K, E>>, max_keys: usize) -> Result<Counted<K>, E> {
    let shares = shares
        .into_iter()
        .map(|s| match s {
            Ok(Counted::Fits(counts)) => Share {
                counts,
                over: false,
                failed: None,
            },
            Ok(Counted::Over) => Share {
                counts: Default::default(),
                over: true,
                failed: None,
            },
            Err(failed) => Share {
                counts: Default::default(),
                over: false,
                failed: Some(failed),
            },
        })
        .collect();
    merge(shares, max_keys)
}

#[cfg(test)]
mod tests;

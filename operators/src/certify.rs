//! Exact sealed lists of sketch windows: the threshold a sketch-guided replay counts from, and
//! the check that makes its list provably exact (`exact_at_seal`; the ranges and passes are in
//! `replay.rs`, the reading in `dataflow/src/replay.rs`).
//!
//! Why a list so built is exact, not merely likely:
//! - A count-min sketch never under-counts: `est(x) ≥ c(x)` for every item `x`.
//! - At seal, pick a threshold `T` ([`first_threshold`]: the K-th largest estimate among the
//!   candidates minus the sketch's error bound). Replay the instance's events and count
//!   exactly every item with `est(x) ≥ T`; let `c'_K` be the K-th largest exact count found.
//! - If `c'_K ≥ T`, no item left out can reach the top K: it has
//!   `c(y) ≤ est(y) < T ≤ c'_K`, strictly below every listed count, so not even a tie can let it
//!   in. This holds with certainty. Otherwise ([`certify`] says so) replay again from a lower
//!   `T`: from `c'_K` the next pass counts a superset, whose K-th count can only be higher, so
//!   it passes; with fewer than K items counted the next `T` is 1 (every item the sketch saw),
//!   and a pass from 1 always passes. So at most three passes, and usually one.

use crate::record::{ItemId, RankedItem};
use crate::topk::top_k;

/// What proves a sealed list exact: the threshold of the pass that passed, how many items that
/// pass counted exactly, and how many passes it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Certificate {
    /// Every item with an estimate of at least this was counted exactly.
    pub threshold: u64,
    /// Items counted exactly in the passing pass.
    pub counted: u64,
    /// Replay passes (1 when the first threshold held).
    pub passes: u32,
}

/// The first pass's threshold: the K-th largest of the candidates' estimates minus the error
/// bound (at least 1; 1 when there are fewer than `k` candidates: count every item seen).
///
/// # Examples
///
/// ```
/// use hotlist_operators::certify::first_threshold;
///
/// // K = 2: the 2nd largest estimate, 9, minus the error bound 3
/// assert_eq!(first_threshold(&[4, 10, 9], 2, 3), 6);
/// // never below 1
/// assert_eq!(first_threshold(&[4, 10, 9], 2, 50), 1);
/// // fewer candidates than K: count every item seen
/// assert_eq!(first_threshold(&[10], 2, 3), 1);
/// ```
pub fn first_threshold(estimates: &[u64], k: usize, error_bound: u64) -> u64 {
    if k == 0 || estimates.len() < k {
        return 1;
    }
    let mut e = estimates.to_vec();
    let (_, kth, _) = e.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
    kth.saturating_sub(error_bound).max(1)
}

/// Checks one pass: `counted` holds the exact counts of every item whose estimate is at least
/// `threshold`. `Ok` with the exact top-`k` when they prove it (the K-th count is at least the
/// threshold, or the threshold is 1, which counted every item seen); `Err` with the next
/// pass's threshold otherwise.
///
/// # Examples
///
/// ```
/// use hotlist_operators::certify::certify;
/// use hotlist_operators::record::{ItemId, RankedItem};
///
/// let counted = || -> Vec<(ItemId, u64)> { vec![("a".into(), 10), ("b".into(), 7), ("c".into(), 3)] };
/// let ri = |id: &str, count| RankedItem { item_id: id.into(), count, trend: None };
///
/// // K = 2: the K-th exact count, 7, is at least the threshold 5: every item left out has
/// // an estimate below 5, so a count below 5 — the list is exact
/// assert_eq!(certify(counted(), 2, 5), Ok(vec![ri("a", 10), ri("b", 7)]));
/// // the K-th count equal to the threshold still proves it (an item left out is below it)
/// assert_eq!(certify(counted(), 2, 7), Ok(vec![ri("a", 10), ri("b", 7)]));
/// // the K-th count below the threshold proves nothing: replay again from it
/// assert_eq!(certify(counted(), 2, 8), Err(7));
/// // fewer than K items counted: replay again from 1 (every item seen)
/// assert_eq!(certify(counted(), 4, 8), Err(1));
/// // a pass from threshold 1 counted every item seen: always exact
/// assert_eq!(certify(counted(), 4, 1).map(|l| l.len()), Ok(3));
/// ```
pub fn certify(counted: Vec<(ItemId, u64)>, k: usize, threshold: u64) -> Result<Vec<RankedItem>, u64> {
    let items: Vec<RankedItem> = counted
        .into_iter()
        .filter(|(_, c)| *c > 0)
        .map(|(item_id, count)| RankedItem {
            item_id,
            count,
            trend: None,
        })
        .collect();
    let list = top_k(items, k);
    let kth = if list.len() >= k {
        list.last().map(|r| r.count)
    } else {
        None
    };
    match kth {
        _ if threshold <= 1 => Ok(list),
        Some(kth) if kth >= threshold => Ok(list),
        Some(kth) => Err(kth.max(1)),
        None => Err(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the over-estimates (never under), the passes end with exactly the
        /// brute-force top-K, in at most three passes.
        #[test]
        fn replay_passes_end_exact(
            items in proptest::collection::vec((0u64..30, 0u64..40), 0..60),
            k in 1usize..8,
            bound in 0u64..50,
            candidates in 0usize..20,
        ) {
            let truth: Vec<(ItemId, u64, u64)> = items
                .iter()
                .enumerate()
                .map(|(i, (c, over))| (ItemId::from(format!("i{i}").as_str()), *c, c + over))
                .collect();
            // the candidates: some of the items with the highest estimates
            let mut ests: Vec<u64> = truth.iter().map(|t| t.2).collect();
            ests.sort_unstable_by(|a, b| b.cmp(a));
            ests.truncate(candidates);
            let mut t = first_threshold(&ests, k, bound);
            let mut passes = 0;
            let list = loop {
                passes += 1;
                prop_assert!(passes <= 3, "more than three passes");
                let counted: Vec<(ItemId, u64)> = truth
                    .iter()
                    .filter(|x| x.2 >= t)
                    .map(|x| (x.0.clone(), x.1))
                    .collect();
                match certify(counted, k, t) {
                    Ok(list) => break list,
                    Err(next) => {
                        prop_assert!(next < t, "the threshold goes down ({next} after {t})");
                        t = next;
                    }
                }
            };
            let want = top_k(
                truth
                    .iter()
                    .filter(|x| x.1 > 0)
                    .map(|x| RankedItem { item_id: x.0.clone(), count: x.1 , trend: None})
                    .collect(),
                k,
            );
            prop_assert_eq!(list, want);
        }
    }

    #[test]
    fn thresholds() {
        assert_eq!(first_threshold(&[10, 8, 7, 3], 3, 2), 5);
        assert_eq!(first_threshold(&[10, 8], 3, 2), 1, "fewer candidates than K");
        assert_eq!(first_threshold(&[10, 8, 7], 3, 100), 1);
        let c = |v: &[(&str, u64)]| v.iter().map(|(i, n)| (ItemId::from(*i), *n)).collect::<Vec<_>>();
        assert!(certify(c(&[("a", 9), ("b", 6)]), 2, 6).is_ok());
        assert_eq!(certify(c(&[("a", 9), ("b", 5)]), 2, 6), Err(5));
        assert_eq!(certify(c(&[("a", 9)]), 2, 6), Err(1));
        assert!(certify(c(&[("a", 9)]), 2, 1).is_ok());
    }
}

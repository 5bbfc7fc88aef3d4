//! The `(other)` list of a per-group window instance with more groups than `max_groups`.
//!
//! The merger keeps the `max_groups` groups whose key hashes lowest (a choice that depends on
//! the set of groups only, so a sealed instance makes the same choice for any worker count,
//! batching or replay) and folds the rest into `(other)`. It knows each overflow group's exact
//! top-K only, not every count, so `(other)` is an upper estimate, like a sketch's list: an
//! item's estimate adds its count in each overflow group whose list holds it, and that list's
//! K-th count (a bound on the item's count there) where the list does not. Each estimate is at
//! least the true sum and at most `error_bound` = Σ K-th counts above it; an item missing from
//! the fold has a true sum of at most `error_bound`.

use crate::group::GroupKey;
use crate::hash::item_hash;
use crate::record::{ItemId, RankedItem};
use crate::topk::top_k;
use std::collections::BTreeMap;

/// Which of an instance's groups overflow: all but the `max_groups` with the lowest hash of
/// their key (ties by key). `groups` in any order; the result in key order.
pub fn overflowing(groups: &[&GroupKey], max_groups: usize) -> Vec<GroupKey> {
    if groups.len() <= max_groups {
        return Vec::new();
    }
    let mut ranked: Vec<(u64, &GroupKey)> = groups.iter().map(|g| (item_hash(g.as_str()), *g)).collect();
    ranked.sort_unstable();
    let mut out: Vec<GroupKey> = ranked[max_groups..].iter().map(|(_, g)| (*g).clone()).collect();
    out.sort_unstable();
    out
}

/// The `(other)` list of the overflow groups' exact top-`k` lists: (list, error bound).
pub fn fold(lists: &[Vec<RankedItem>], k: usize) -> (Vec<RankedItem>, u64) {
    let kth = |l: &[RankedItem]| {
        if l.len() >= k {
            l.last().map_or(0, |r| r.count)
        } else {
            0
        }
    };
    let bound: u64 = lists.iter().map(|l| kth(l)).fold(0, u64::saturating_add);
    let mut est: BTreeMap<&ItemId, u64> = BTreeMap::new();
    for l in lists {
        let t = kth(l);
        for r in l {
            // replaces this list's K-th count (assumed for every item) by the real count
            *est.entry(&r.item_id).or_insert(bound) += r.count - t;
        }
    }
    let items = est
        .into_iter()
        .map(|(item_id, count)| RankedItem {
            item_id: item_id.clone(),
            count,
        })
        .collect();
    (top_k(items, k), bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every estimate lies in [true, true + bound]; any item left out has a true sum ≤ bound
        /// or ranks below the K-th estimate.
        #[test]
        fn fold_bounds_hold(groups in proptest::collection::vec(proptest::collection::btree_map(0u8..12, 1u64..20, 0..10), 1..5), k in 1usize..5) {
            let lists: Vec<Vec<RankedItem>> = groups.iter().map(|g| {
                top_k(g.iter().map(|(i, c)| RankedItem { item_id: format!("i{i}").into(), count: *c }).collect(), k)
            }).collect();
            let mut truth: BTreeMap<String, u64> = BTreeMap::new();
            for g in &groups {
                for (i, c) in g {
                    *truth.entry(format!("i{i}")).or_default() += c;
                }
            }
            let (list, bound) = fold(&lists, k);
            prop_assert!(list.len() <= k);
            for r in &list {
                let t = truth[r.item_id.as_str()];
                prop_assert!(r.count >= t && r.count <= t + bound, "{} est {} true {t} bound {bound}", r.item_id, r.count);
            }
            let floor = if list.len() == k { list.last().unwrap().count } else { 0 };
            for (item, t) in &truth {
                if !list.iter().any(|r| r.item_id.as_str() == item) {
                    prop_assert!(*t <= bound.max(floor), "{item} true {t} left out (bound {bound}, floor {floor})");
                }
            }
        }
    }

    #[test]
    fn overflow_keeps_the_lowest_hashes() {
        let keys: Vec<GroupKey> = (0..10)
            .map(|i| GroupKey::from_pairs([("c", format!("v{i}").as_str())]))
            .collect();
        let refs: Vec<&GroupKey> = keys.iter().collect();
        assert!(overflowing(&refs, 10).is_empty());
        let over = overflowing(&refs, 7);
        assert_eq!(over.len(), 3);
        let mut reversed = refs.clone();
        reversed.reverse();
        assert_eq!(overflowing(&reversed, 7), over, "depends on the set only");
        let kept_max = keys
            .iter()
            .filter(|k| !over.contains(k))
            .map(|k| item_hash(k.as_str()))
            .max()
            .unwrap();
        assert!(over.iter().all(|k| item_hash(k.as_str()) > kept_max));
    }
}

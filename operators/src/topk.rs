//! The ranking order and top-K selection.
//!
//! Ranking: count descending, then item id ascending (bytewise). A top-K list holds at most K
//! entries; ties at rank K are cut by that same order, so the list is a pure function of the
//! counts. Merging per-worker lists is exact because each item is counted by exactly one worker:
//! the global top-K is contained in the union of the per-worker top-Ks.

use crate::record::RankedItem;
use std::cmp::Ordering;

/// The ranking order: `Less` means "ranks higher".
///
/// # Examples
///
/// A higher count ranks higher; equal counts rank by id, bytewise (UTF-8 bytes: `Z` before
/// `a`, and `é` after every ASCII letter):
///
/// ```
/// use hotlist_operators::topk::rank_cmp;
/// use std::cmp::Ordering;
///
/// assert_eq!(rank_cmp(5, "z", 3, "a"), Ordering::Less);
/// assert_eq!(rank_cmp(3, "Z", 3, "a"), Ordering::Less);
/// assert_eq!(rank_cmp(3, "é", 3, "z"), Ordering::Greater);
/// assert_eq!(rank_cmp(3, "a", 3, "a"), Ordering::Equal);
/// ```
#[inline]
pub fn rank_cmp(a_count: u64, a_id: &str, b_count: u64, b_id: &str) -> Ordering {
    b_count.cmp(&a_count).then_with(|| a_id.as_bytes().cmp(b_id.as_bytes()))
}

/// Ranking order on [`RankedItem`]s: the count order, or between two items of a trend list
/// (see `trend`) the trend order, so that merging, validating and re-ranking lists need not
/// know which kind they hold.
#[inline]
pub fn ranked_cmp(a: &RankedItem, b: &RankedItem) -> Ordering {
    match (&a.trend, &b.trend) {
        (Some(x), Some(y)) => {
            let w = u32::try_from(x.history.len().max(y.history.len())).unwrap_or(u32::MAX);
            crate::trend::trend_rank_cmp(
                (a.count, x.baseline(), &a.item_id),
                (b.count, y.baseline(), &b.item_id),
                w,
            )
        }
        _ => rank_cmp(a.count, &a.item_id, b.count, &b.item_id),
    }
}

/// Keeps the best `k` of `items` and sorts them best first (O(n + k log k)).
///
/// # Examples
///
/// Ties at rank K are cut by the ranking order too, so the list is a pure function of the
/// counts (the example of `docs/time.md`):
///
/// ```
/// use hotlist_operators::record::RankedItem;
/// use hotlist_operators::topk::top_k;
///
/// let ri = |id: &str, count| RankedItem { item_id: id.into(), count, trend: None };
/// let items = vec![ri("b", 3), ri("é", 3), ri("a", 5), ri("c", 3), ri("Z", 3)];
/// assert_eq!(top_k(items, 3), vec![ri("a", 5), ri("Z", 3), ri("b", 3)]);
/// ```
pub fn top_k(mut items: Vec<RankedItem>, k: usize) -> Vec<RankedItem> {
    select_top_by(&mut items, k, ranked_cmp);
    items
}

/// Keeps the best `k` of `items` under `cmp` (`Less` = better) and sorts them.
pub fn select_top_by<T>(items: &mut Vec<T>, k: usize, mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if k == 0 {
        items.clear();
        return;
    }
    if items.len() > k {
        items.select_nth_unstable_by(k - 1, &mut cmp);
        items.truncate(k);
    }
    items.sort_unstable_by(cmp);
}

/// [`select_top_by`] for (count, key) pairs in the ranking order, the id of a key read by `id`:
/// it compares ids only among the pairs tied at the K-th count. (Reading an id is a cache miss
/// per pair, and a long tail is mostly ties: comparing counts first, and selecting the K-th
/// count on counts alone, is what makes a list over many items cheap.)
pub fn select_top_counted<'a, T: Copy>(items: &mut Vec<(u64, T)>, k: usize, id: impl Fn(T) -> &'a str) {
    let cmp = |a: &(u64, T), b: &(u64, T)| b.0.cmp(&a.0).then_with(|| id(a.1).as_bytes().cmp(id(b.1).as_bytes()));
    if k == 0 {
        items.clear();
        return;
    }
    if items.len() > k {
        items.select_nth_unstable_by(k - 1, |a, b| b.0.cmp(&a.0));
        let kth = items[k - 1].0;
        items.retain(|x| x.0 >= kth);
        if items.len() > k {
            items.select_nth_unstable_by(k - 1, cmp);
            items.truncate(k);
        }
    }
    items.sort_unstable_by(cmp);
}

/// Merges per-worker top-K lists of disjoint item sets into the global top-K.
///
/// # Examples
///
/// ```
/// use hotlist_operators::record::RankedItem;
/// use hotlist_operators::topk::merge_top_k;
///
/// let ri = |id: &str, count| RankedItem { item_id: id.into(), count, trend: None };
/// let worker0 = vec![ri("a", 9), ri("c", 4)];
/// let worker1 = vec![ri("b", 4), ri("d", 1)];
/// let global = merge_top_k([worker0.as_slice(), worker1.as_slice()], 3);
/// assert_eq!(global, vec![ri("a", 9), ri("b", 4), ri("c", 4)]);
/// ```
pub fn merge_top_k<'a>(lists: impl IntoIterator<Item = &'a [RankedItem]>, k: usize) -> Vec<RankedItem> {
    let all: Vec<RankedItem> = lists.into_iter().flat_map(|l| l.iter().cloned()).collect();
    top_k(all, k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ri(id: &str, count: u64) -> RankedItem {
        RankedItem {
            item_id: id.into(),
            count,
            trend: None,
        }
    }

    #[test]
    fn ties_are_cut_by_id_bytewise() {
        let got = top_k(vec![ri("b", 2), ri("a", 2), ri("Z", 2), ri("c", 3), ri("é", 2)], 3);
        assert_eq!(got, vec![ri("c", 3), ri("Z", 2), ri("a", 2)]);
    }

    proptest! {
        /// top_k equals a full sort then truncate.
        #[test]
        fn top_k_equals_full_sort(counts in proptest::collection::vec((0u8..20, 0u64..5), 0..60), k in 0usize..10) {
            let mut seen = std::collections::BTreeMap::new();
            for (id, c) in counts { seen.insert(format!("i{id}"), c); }
            let items: Vec<RankedItem> = seen.iter().map(|(i, c)| ri(i, *c)).collect();
            let mut full = items.clone();
            full.sort_by(ranked_cmp);
            full.truncate(k);
            prop_assert_eq!(top_k(items, k), full);
        }

        /// select_top_counted equals select_top_by in the ranking order.
        #[test]
        fn select_top_counted_equals_select_top_by(counts in proptest::collection::vec((0u8..40, 0u64..4), 0..80), k in 0usize..12) {
            let mut seen = std::collections::BTreeMap::new();
            for (id, c) in counts { seen.insert(format!("i{id}"), c); }
            let ids: Vec<String> = seen.keys().cloned().collect();
            let pairs: Vec<(u64, usize)> = seen.values().enumerate().map(|(n, c)| (*c, n)).collect();
            let mut by = pairs.clone();
            select_top_by(&mut by, k, |a, b| rank_cmp(a.0, &ids[a.1], b.0, &ids[b.1]));
            let mut counted = pairs;
            select_top_counted(&mut counted, k, |n| ids[n].as_str());
            prop_assert_eq!(counted, by);
        }

        /// Merging the per-part top-Ks of a partition of the items equals the top-K of all items.
        #[test]
        fn merge_of_parts_is_exact(counts in proptest::collection::vec(0u64..6, 1..80), parts in 1usize..5, k in 1usize..8) {
            let items: Vec<RankedItem> = counts.iter().enumerate().map(|(i, c)| ri(&format!("i{i}"), *c)).collect();
            let mut split = vec![Vec::new(); parts];
            for (i, it) in items.iter().enumerate() { split[i % parts].push(it.clone()); }
            let locals: Vec<Vec<RankedItem>> = split.into_iter().map(|p| top_k(p, k)).collect();
            let merged = merge_top_k(locals.iter().map(|l| l.as_slice()), k);
            prop_assert_eq!(merged, top_k(items, k));
        }
    }
}

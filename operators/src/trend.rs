//! Trend ranking: what rises against its own usual level, not what is merely large.
//!
//! A tumbling window with `rank_by = "trend"` ranks instance *i*'s items by their surge over
//! their own baseline. With *c* an item's count in *i*, *S* the sum of its counts in the `W`
//! instances before (*i−W … i−1*, an instance without its events counting 0) and `W` the
//! baseline, the score is
//!
//! ```text
//! z = (W·c − S) / √(W·(S + W))
//! ```
//!
//! a Poisson test of *c* against the rate *S/W* the item usually has, with one pseudo-event
//! per baseline instance (the `+ W`) so that an item never seen before does not divide by zero.
//! Only items with `c ≥ min_count` and `W·c > S` (above their usual rate) rank; the order is
//! `z` descending, then the item id ascending (bytewise). Scores are compared exactly, on the
//! squared form in integers ([`trend_cmp`]): no two machines can order a list differently, so a
//! sealed trend list is a pure function of the input like every other list.

use crate::group::{split_key, GroupKey, OTHER_GROUP};
use crate::record::{RankedItem, TrendFacts};
use crate::topk::select_top_by;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// The default baseline: the 12 instances before.
pub const DEFAULT_BASELINE: u32 = 12;
/// The largest baseline (it costs a retained pane per instance: see docs/trends.md).
pub const MAX_BASELINE: u32 = 1000;
/// The default least count in the instance for an item to rank.
pub const DEFAULT_MIN_COUNT: u64 = 5;

/// How a window orders its lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Rank {
    /// By count (the default).
    #[default]
    Count,
    /// By surge over the item's own baseline.
    Trend(TrendRule),
}

impl Rank {
    /// The trend rule, for a trend window.
    pub fn trend(self) -> Option<TrendRule> {
        match self {
            Rank::Count => None,
            Rank::Trend(rule) => Some(rule),
        }
    }
}

/// A trend window's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrendRule {
    /// `W`: how many previous instances make the baseline (1 to [`MAX_BASELINE`]).
    pub baseline: u32,
    /// Least count in the instance for an item to rank.
    pub min_count: u64,
}

impl Default for TrendRule {
    fn default() -> TrendRule {
        TrendRule {
            baseline: DEFAULT_BASELINE,
            min_count: DEFAULT_MIN_COUNT,
        }
    }
}

impl TrendRule {
    /// Whether an item with count `count` and baseline sum `baseline` ranks at all.
    pub fn ranks(&self, count: u64, baseline: u64) -> bool {
        count >= self.min_count && u128::from(self.baseline) * u128::from(count) > u128::from(baseline)
    }
}

/// `z = (W·c − S) / √(W·(S + W))` as a double (display only).
pub fn score(count: u64, baseline: u64, w: u32) -> f64 {
    let w = f64::from(w.max(1));
    (w * count as f64 - baseline as f64) / (w * (baseline as f64 + w)).sqrt()
}

/// "× usual": `(c + 1) / (S/W + 1)`.
pub fn ratio(count: u64, baseline: u64, w: u32) -> f64 {
    let w = f64::from(w.max(1));
    (count as f64 + 1.0) / (baseline as f64 / w + 1.0)
}

/// Trend order of two ranked items' (count, baseline sum) under baseline `w`: `Less` when
/// `a`'s score is higher. Exact: with `n = W·c − S > 0`, `z² = n² / (W·(S + W))`, so
/// `z_a > z_b` iff `n_a² · (S_b + W) > n_b² · (S_a + W)`, compared in 256-bit integers. An
/// item that does not rise (`W·c ≤ S`) ranks below every one that does, and among those by
/// `W·c − S` (they are never listed; the order only has to be total).
pub fn trend_cmp(a: (u64, u64), b: (u64, u64), w: u32) -> Ordering {
    let w = u128::from(w);
    let rise = |(c, s): (u64, u64)| (w * u128::from(c)).checked_sub(u128::from(s)).filter(|n| *n > 0);
    match (rise(a), rise(b)) {
        (Some(na), Some(nb)) => {
            let lhs = wide_mul(&wide_mul(&limbs(na), &limbs(na)), &limbs(u128::from(b.1) + w));
            let rhs = wide_mul(&wide_mul(&limbs(nb), &limbs(nb)), &limbs(u128::from(a.1) + w));
            wide_cmp(&rhs, &lhs)
        }
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => {
            let fall = |(c, s): (u64, u64)| u128::from(s) - (w * u128::from(c)).min(u128::from(s));
            fall(a).cmp(&fall(b))
        }
    }
}

/// The trend ranking order on two items: score descending, then id ascending (bytewise).
pub fn trend_rank_cmp(a: (u64, u64, &str), b: (u64, u64, &str), w: u32) -> Ordering {
    trend_cmp((a.0, a.1), (b.0, b.1), w).then_with(|| a.2.as_bytes().cmp(b.2.as_bytes()))
}

/// A number as little-endian 64-bit limbs.
fn limbs(x: u128) -> Vec<u64> {
    vec![x as u64, (x >> 64) as u64]
}

/// The product of two little-endian limb numbers (schoolbook: the numbers here have at most
/// four limbs, and this runs only when two listed items compare).
fn wide_mul(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut out = vec![0u64; a.len() + b.len()];
    for (i, &x) in a.iter().enumerate() {
        let mut carry: u128 = 0;
        for (j, &y) in b.iter().enumerate() {
            let t = u128::from(x) * u128::from(y) + u128::from(out[i + j]) + carry;
            out[i + j] = t as u64;
            carry = t >> 64;
        }
        out[i + b.len()] = carry as u64;
    }
    out
}

/// Compares two little-endian limb numbers of any lengths.
fn wide_cmp(a: &[u64], b: &[u64]) -> Ordering {
    let n = a.len().max(b.len());
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    (0..n)
        .rev()
        .map(|i| at(a, i).cmp(&at(b, i)))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// One counter key of an instance for [`trend_lists`]: the key (`group NUL item`, or a bare
/// item id), its count in the instance and its history (its counts in the `W` instances
/// before, oldest first).
pub type TrendKey<'a> = (&'a str, u64, Vec<u64>);

/// The per-group trend lists of an instance from its keys: per (group, item), the count and
/// history summed over its keys (a group `admits` refuses is summed into `(other)`), the items
/// that rank under `rule`, best `k` first. Groups come out in key order; a group with nothing
/// that ranks has no list, but a `global` window always has its one list, possibly empty.
pub fn trend_lists<'a>(
    keys: impl Iterator<Item = TrendKey<'a>>,
    global: bool,
    rule: TrendRule,
    k: usize,
    mut admits: impl FnMut(&str) -> bool,
) -> Vec<(GroupKey, Vec<RankedItem>)> {
    let w = rule.baseline;
    let mut admitted: FxHashMap<&'a str, bool> = FxHashMap::default();
    let mut per: FxHashMap<(&'a str, &'a str), (u64, Vec<u64>)> = FxHashMap::default();
    for (key, count, history) in keys {
        let (group, item, _) = split_key(key);
        let kept = *admitted
            .entry(group)
            .or_insert_with(|| group.is_empty() || admits(group));
        let group = if kept { group } else { OTHER_GROUP };
        match per.entry((group, item)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((count, history));
            }
            std::collections::hash_map::Entry::Occupied(mut o) => {
                let (c, h) = o.get_mut();
                *c = c.saturating_add(count);
                for (x, y) in h.iter_mut().zip(history) {
                    *x = x.saturating_add(y);
                }
            }
        }
    }
    // per group: (count, baseline sum, item, history) of the items that rank
    type Ranked<'a> = Vec<(u64, u64, &'a str, Vec<u64>)>;
    let mut groups: FxHashMap<&'a str, Ranked<'a>> = FxHashMap::default();
    for ((group, item), (count, history)) in per {
        let s = history.iter().fold(0u64, |s, c| s.saturating_add(*c));
        if rule.ranks(count, s) {
            groups.entry(group).or_default().push((count, s, item, history));
        }
    }
    if global && groups.is_empty() {
        groups.insert("", Vec::new());
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_unstable_by(|a, b| a.0.cmp(b.0));
    groups
        .into_iter()
        .map(|(group, mut items)| {
            select_top_by(&mut items, k, |a, b| {
                trend_rank_cmp((a.0, a.1, a.2), (b.0, b.1, b.2), w)
            });
            let list = items
                .into_iter()
                .map(|(count, _, item, history)| RankedItem {
                    item_id: item.into(),
                    count,
                    trend: Some(TrendFacts { history }),
                })
                .collect();
            (GroupKey::from_stored(group.to_string()), list)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_new_item_outranks_a_steady_one_of_the_same_count() {
        // W = 4: "new" had nothing before, "steady" had 10 in each instance.
        assert_eq!(trend_cmp((10, 0), (10, 40), 4), Ordering::Less);
        // z of (10, 0) = 40 / √(4·4) = 10
        assert!((score(10, 0, 4) - 10.0).abs() < 1e-12);
        // a steady item does not rise at all
        assert!(!TrendRule {
            baseline: 4,
            min_count: 1
        }
        .ranks(10, 40));
        assert!(TrendRule {
            baseline: 4,
            min_count: 1
        }
        .ranks(11, 40));
    }

    #[test]
    fn min_count_keeps_a_one_off_out() {
        let rule = TrendRule {
            baseline: 12,
            min_count: 5,
        };
        assert!(!rule.ranks(4, 0));
        assert!(rule.ranks(5, 0));
    }

    #[test]
    fn huge_counts_compare_without_overflow() {
        let big = u64::MAX / 2;
        assert_eq!(trend_cmp((big, 0), (big - 1, 0), MAX_BASELINE), Ordering::Less);
        assert_eq!(trend_cmp((big, 1), (big, 0), MAX_BASELINE), Ordering::Greater);
        assert_eq!(
            trend_cmp((u64::MAX, u64::MAX), (u64::MAX, u64::MAX), MAX_BASELINE),
            Ordering::Equal
        );
    }

    #[test]
    fn folded_groups_sum_counts_and_histories_into_other() {
        let keys = vec![
            ("country=DE\0a", 3, vec![0, 1]),
            ("country=FR\0a", 4, vec![1, 0]),
            ("country=US\0a", 9, vec![0, 0]),
        ];
        let rule = TrendRule {
            baseline: 2,
            min_count: 5,
        };
        let lists = trend_lists(keys.into_iter(), false, rule, 10, |g| g == "country=US");
        type Listed = Vec<(String, u64, Vec<u64>)>;
        let got: Vec<(String, Listed)> = lists
            .into_iter()
            .map(|(g, l)| {
                let l = l
                    .into_iter()
                    .map(|r| {
                        (
                            r.item_id.to_string(),
                            r.count,
                            r.trend.map(|t| t.history).unwrap_or_default(),
                        )
                    })
                    .collect();
                (g.as_str().to_string(), l)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("(other)".to_string(), vec![("a".to_string(), 7, vec![1, 1])]),
                ("country=US".to_string(), vec![("a".to_string(), 9, vec![0, 0])]),
            ]
        );
    }

    #[test]
    fn a_global_window_always_has_its_list() {
        let rule = TrendRule::default();
        let lists = trend_lists(vec![("a", 1, vec![0; 12])].into_iter(), true, rule, 10, |_| true);
        assert_eq!(lists, vec![(GroupKey::global(), Vec::new())]);
    }

    /// The exact order as a model: z² as a fraction of u128s (small inputs only).
    fn model_cmp(a: (u64, u64), b: (u64, u64), w: u32) -> Ordering {
        let w = w as i128;
        let n = |(c, s): (u64, u64)| w * c as i128 - s as i128;
        let (na, nb) = (n(a), n(b));
        match (na > 0, nb > 0) {
            (true, true) => (nb * nb * (a.1 as i128 + w)).cmp(&(na * na * (b.1 as i128 + w))),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => nb.cmp(&na),
        }
    }

    proptest! {
        /// The 256-bit comparison agrees with a plain integer model where that one fits.
        #[test]
        fn trend_cmp_is_the_exact_order(
            a in (0u64..100_000, 0u64..1_000_000),
            b in (0u64..100_000, 0u64..1_000_000),
            w in 1u32..=MAX_BASELINE,
        ) {
            prop_assert_eq!(trend_cmp(a, b, w), model_cmp(a, b, w));
            prop_assert_eq!(trend_cmp(a, b, w), trend_cmp(b, a, w).reverse());
            // and the displayed scores never contradict it beyond rounding
            if w as u128 * a.0 as u128 > a.1 as u128 && w as u128 * b.0 as u128 > b.1 as u128 {
                let (za, zb) = (score(a.0, a.1, w), score(b.0, b.1, w));
                match trend_cmp(a, b, w) {
                    Ordering::Less => prop_assert!(za >= zb * (1.0 - 1e-12)),
                    Ordering::Greater => prop_assert!(zb >= za * (1.0 - 1e-12)),
                    Ordering::Equal => prop_assert!((za - zb).abs() <= za.abs() * 1e-12),
                }
            }
        }

        /// Limb products equal u128 products where those fit.
        #[test]
        fn wide_mul_is_multiplication(a in any::<u64>(), b in any::<u64>()) {
            let got = wide_mul(&limbs(a as u128), &limbs(b as u128));
            let want = a as u128 * b as u128;
            prop_assert_eq!(&got[..2], &[want as u64, (want >> 64) as u64][..]);
            prop_assert!(got[2..].iter().all(|x| *x == 0));
        }
    }
}

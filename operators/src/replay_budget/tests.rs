//! The budgeted replay against brute force: whatever the estimates (never below a count), the
//! first threshold and the budget, it ends with the brute-force top-K exactly when the pass
//! from the exact K-th count fits the finest ranges, and never holds more than the budget;
//! and the events split into parts read by 1, 2 or 3 threads give the same result.

use super::*;
use crate::replay_count::ReplayInput;
use crate::replay_pass::count_local;
use proptest::prelude::*;
use std::convert::Infallible;
use std::sync::atomic::AtomicBool;

/// Items as (count, over-estimate, hash).
type Items = Vec<(u64, u64, u64)>;

fn id(i: usize) -> ItemId {
    ItemId::from(format!("i{i}").as_str())
}

/// An estimate of every hash: the largest of its items' (count + over), so never below any.
fn estimates(items: &Items) -> impl Fn(u64) -> u64 + '_ {
    move |h| items.iter().filter(|x| x.2 == h).map(|x| x.0 + x.1).max().unwrap_or(0)
}

fn run(items: &Items, k: usize, first: u64, budget: ReplayBudget) -> Replayed {
    run_parted(items, k, first, budget, 1, 0, 1)
}

/// [`run`] with the events spread over `parts` parts (event `i` in part
/// `(i × 7 + shift) mod parts`: an item's events in several parts), read by `threads` threads.
fn run_parted(
    items: &Items,
    k: usize,
    first: u64,
    budget: ReplayBudget,
    parts: usize,
    shift: usize,
    threads: usize,
) -> Replayed {
    let est = estimates(items);
    let upper = items.iter().map(|x| x.0 + x.1).max().unwrap_or(0) + 1;
    // the events, interleaved: round r has one event of every item with a count above r
    let rounds = items.iter().map(|x| x.0).max().unwrap_or(0);
    let events: Vec<(ItemId, u64)> = (0..rounds)
        .flat_map(|r| {
            items
                .iter()
                .enumerate()
                .filter(move |(_, x)| x.0 > r)
                .map(|(i, x)| (id(i), x.2))
        })
        .collect();
    let mut parted = vec![Vec::new(); parts];
    for (i, e) in events.into_iter().enumerate() {
        parted[(i * 7 + shift) % parts].push(e);
    }
    let read = |part: usize, _: &AtomicBool, visit: &mut dyn FnMut(&ItemId, u64) -> bool| -> Result<(), Infallible> {
        for (item, hash) in &parted[part] {
            if !visit(item, *hash) {
                break;
            }
        }
        Ok(())
    };
    let input = ReplayInput {
        parts,
        threads,
        read: &read,
    };
    let estimates: [&(dyn Fn(u64) -> u64 + Sync); 1] = [&est];
    let count = |rule: &PassRule, max_keys: usize| count_local(&input, &estimates, rule, max_keys);
    match replay_within(0, upper, k, first, budget, &count) {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// The brute-force top-K, and whether the pass from the exact K-th count overflows a finest
/// range.
fn model(items: &Items, k: usize, budget: ReplayBudget) -> (Vec<RankedItem>, bool) {
    let seen: Vec<RankedItem> = items
        .iter()
        .enumerate()
        .filter(|(_, x)| x.0 > 0)
        .map(|(i, x)| RankedItem {
            item_id: id(i),
            count: x.0,
            trend: None,
        })
        .collect();
    let top = top_k(seen, k);
    let c_k = if top.len() >= k { top[k - 1].count } else { 1 };
    let est = estimates(items);
    let bits = budget.max_ranges().trailing_zeros();
    let mut per_range = std::collections::BTreeMap::<u64, usize>::new();
    for x in items.iter().filter(|x| x.0 > 0 && est(x.2) >= c_k) {
        let range = if bits == 0 { 0 } else { x.2 >> (64 - bits) };
        *per_range.entry(range).or_default() += 1;
    }
    (top, per_range.values().any(|n| *n > budget.max_keys()))
}

proptest! {
    #[test]
    fn ends_exact_iff_the_proving_pass_fits(
        items in proptest::collection::vec((0u64..6, 0u64..5, any::<u64>()), 0..80),
        k in 1usize..6,
        first in 0u64..15,
        max_keys in 1usize..20,
        range_bits in 0u32..4,
    ) {
        let budget = ReplayBudget::new(max_keys, 1 << range_bits).expect("budget");
        let (want, over) = model(&items, k, budget);
        match run(&items, k, first, budget) {
            Replayed::Exact(list, cert, stats) => {
                prop_assert!(!over, "exact although the proving pass overflows");
                prop_assert_eq!(list, want);
                prop_assert!(stats.peak_keys <= max_keys);
                prop_assert!(stats.ranges <= budget.max_ranges());
                prop_assert_eq!(cert.passes, stats.passes);
            }
            Replayed::OverBudget(stats) => {
                prop_assert!(over, "gave up although the proving pass fits");
                prop_assert!(stats.peak_keys <= max_keys);
            }
        }
    }

    /// The budget counts the merged map's keys, so neither the thread count nor how events
    /// spread over parts changes anything: the list, the certificate and the stats (exact or
    /// over budget) are the single-thread, single-part result.
    #[test]
    fn threads_and_parts_do_not_change_the_outcome(
        items in proptest::collection::vec((0u64..6, 0u64..5, any::<u64>()), 0..60),
        k in 1usize..5,
        first in 0u64..12,
        max_keys in 1usize..16,
        range_bits in 0u32..3,
        parts in 1usize..6,
        shift in 0usize..6,
    ) {
        let budget = ReplayBudget::new(max_keys, 1 << range_bits).expect("budget");
        let single = run(&items, k, first, budget);
        for threads in 1..=3 {
            let got = run_parted(&items, k, first, budget, parts, shift, threads);
            prop_assert_eq!(&got, &single, "{} threads over {} parts", threads, parts);
        }
    }
}

/// 100 items seen once each (a flat distribution: every pass counts them all): 30 keys at
/// once fit in 8 ranges, not in 2; a budget of 100 needs no split.
#[test]
fn a_flat_instance_is_split_or_over_budget() {
    // hashes spread evenly over the hash space
    let items: Items = (0..100u64)
        .map(|i| (1, 3, i.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        .collect();
    let split = run(&items, 3, 4, ReplayBudget::new(30, 8).expect("budget"));
    let Replayed::Exact(list, cert, stats) = split else {
        panic!("8 ranges of 30 fit: {split:?}")
    };
    assert_eq!(list, model(&items, 3, ReplayBudget::default()).0);
    assert_eq!(cert.counted, 100, "every item counted once, over the ranges");
    assert!(stats.peak_keys <= 30 && stats.ranges >= 4, "{stats:?}");
    let over = run(&items, 3, 4, ReplayBudget::new(30, 2).expect("budget"));
    assert!(matches!(over, Replayed::OverBudget(s) if s.peak_keys <= 30), "{over:?}");
    let whole = run(&items, 3, 4, ReplayBudget::new(100, 1).expect("budget"));
    assert!(
        matches!(whole, Replayed::Exact(_, _, s) if s.reads == 2 && s.ranges == 1),
        "{whole:?}"
    );
}

#[test]
fn budgets_are_checked() {
    assert!(ReplayBudget::new(0, 4).is_err());
    assert!(ReplayBudget::new(10, 3).is_err());
    assert!(ReplayBudget::new(10, 2048).is_err());
    assert!(ReplayBudget::new(10, 0).is_err());
    assert_eq!(ReplayBudget::new(10, 1).map(|b| b.max_ranges()), Ok(1));
}

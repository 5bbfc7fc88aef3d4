//! Several lists replayed together against each replayed alone and brute force: the same
//! outcome per list (exact with the brute-force top-K, or over budget), whatever the estimates,
//! first thresholds, budget and thread count; distinct-user lists count (item, user) pairs.

use super::*;
use crate::record::RankedItem;
use crate::replay_count::ReplayInput;
use crate::replay_pass::{count_local, sum_shares};
use crate::topk::top_k;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::atomic::AtomicBool;

/// Per list, items as (count, over-estimate, hash).
type Lists = Vec<Vec<(u64, u64, u64)>>;

fn id(i: usize) -> ItemId {
    ItemId::from(format!("i{i}").as_str())
}

/// The events of every list, interleaved (round r has one event of every item with a count
/// above r), cut into `parts` parts round-robin; with `users`, event r of an item is by user
/// r mod `users`.
fn events(lists: &Lists, parts: usize, users: Option<u64>) -> Vec<Vec<(ListKey, u64)>> {
    let rounds = lists.iter().flatten().map(|x| x.0).max().unwrap_or(0);
    let mut out = vec![Vec::new(); parts];
    let mut n = 0;
    for r in 0..rounds {
        for (l, items) in lists.iter().enumerate() {
            for (i, x) in items.iter().enumerate().filter(|(_, x)| x.0 > r) {
                let key = ListKey {
                    list: l as u32,
                    item: id(i),
                    user: users.map(|u| ItemId::from(format!("u{}", r % u).as_str())),
                };
                out[n % parts].push((key, x.2));
                n += 1;
            }
        }
    }
    out
}

fn estimate_of(items: &[(u64, u64, u64)], h: u64) -> u64 {
    items.iter().filter(|x| x.2 == h).map(|x| x.0 + x.1).max().unwrap_or(0)
}

fn upper(items: &[(u64, u64, u64)]) -> u64 {
    items.iter().map(|x| x.0 + x.1).max().unwrap_or(0) + 1
}

fn outcome(r: &Replayed) -> Option<&[RankedItem]> {
    match r {
        Replayed::Exact(items, _, _) => Some(items),
        Replayed::OverBudget(_) => None,
    }
}

/// Each list's estimate of a hash.
type Estimates = Vec<Box<dyn Fn(u64) -> u64 + Sync>>;

fn estimates_of(lists: &Lists) -> Estimates {
    lists
        .iter()
        .map(|items| {
            let items = items.clone();
            Box::new(move |h| estimate_of(&items, h)) as Box<dyn Fn(u64) -> u64 + Sync>
        })
        .collect()
}

/// Runs the lists together on `threads` threads of each of `processes` processes (part `p`
/// read by process `p mod processes`, the processes' shares summed as a cluster sums them).
fn together(
    specs: &[ListToReplay],
    estimates: &Estimates,
    evs: &[Vec<(ListKey, u64)>],
    (processes, threads): (usize, usize),
    budget: ReplayBudget,
) -> (Vec<Replayed>, usize) {
    let estimates: Vec<&(dyn Fn(u64) -> u64 + Sync)> = estimates.iter().map(|e| e.as_ref()).collect();
    let reads = std::sync::atomic::AtomicUsize::new(0);
    let owned: Vec<Vec<usize>> = (0..processes)
        .map(|proc| (0..evs.len()).filter(|p| p % processes == proc).collect())
        .collect();
    let count = |rule: &PassRule, max_keys: usize| -> Result<Counted<ListKey>, Infallible> {
        let shares = owned
            .iter()
            .map(|parts| {
                let read = |i: usize, _: &AtomicBool, visit: &mut dyn FnMut(&ListKey, u64) -> bool| {
                    reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    for (key, hash) in &evs[parts[i]] {
                        if !visit(key, *hash) {
                            break;
                        }
                    }
                    Ok(())
                };
                let input = ReplayInput {
                    parts: parts.len(),
                    threads,
                    read: &read,
                };
                count_local(&input, &estimates, rule, max_keys).map_err(|e| (0, e))
            })
            .collect();
        sum_shares(shares, max_keys)
    };
    let out = match replay_lists(specs, budget, &count) {
        Ok(r) => r,
        Err(never) => match never {},
    };
    // a read per part of every pass: count one per pass whatever the split
    (out, reads.into_inner() / evs.len().max(1))
}

proptest! {
    #[test]
    fn lists_together_end_as_each_alone(
        lists in proptest::collection::vec(proptest::collection::vec((0u64..6, 0u64..5, any::<u64>()), 0..30), 1..5),
        k in 1usize..5,
        firsts in proptest::collection::vec(0u64..12, 5),
        max_keys in 1usize..40,
        range_bits in 0u32..3,
        parts in 1usize..5,
        processes in 1usize..4,
        threads in 1usize..4,
    ) {
        let budget = ReplayBudget::new(max_keys, 1 << range_bits).expect("a budget");
        let evs = events(&lists, parts, None);
        let estimates = estimates_of(&lists);
        let specs: Vec<ListToReplay> = lists
            .iter()
            .enumerate()
            .map(|(i, items)| ListToReplay { k, first: firsts[i], upper: upper(items) })
            .collect();
        let (all, _) = together(&specs, &estimates, &evs, (processes, threads), budget);
        prop_assert_eq!(all.len(), lists.len());
        // the same outcome, certificates and stats in one process on one thread
        let (one, _) = together(&specs, &estimates, &evs, (1, 1), budget);
        prop_assert_eq!(&all, &one, "{} processes × {} threads", processes, threads);
        let mut peak = 0usize;
        for (i, items) in lists.iter().enumerate() {
            let single = vec![items.clone()];
            let alone = together(std::slice::from_ref(&specs[i]), &estimates_of(&single), &events(&single, parts, None), (1, 1), budget).0;
            prop_assert_eq!(outcome(&all[i]), outcome(&alone[0]), "list {}", i);
            if let Replayed::Exact(got, cert, stats) = &all[i] {
                let seen: Vec<RankedItem> = items
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| x.0 > 0)
                    .map(|(j, x)| RankedItem { item_id: id(j), count: x.0 , trend: None})
                    .collect();
                prop_assert_eq!(got, &top_k(seen, k));
                prop_assert!(cert.passes >= 1 && cert.passes == stats.passes);
                peak = peak.max(stats.peak_keys);
            }
        }
        prop_assert!(peak <= max_keys, "peak {} of {}", peak, max_keys);
    }

    /// Distinct-user lists: an item's count is its distinct users, and the budget counts pairs.
    #[test]
    fn distinct_lists_count_users(
        lists in proptest::collection::vec(proptest::collection::vec((0u64..8, 0u64..5, any::<u64>()), 0..20), 1..4),
        users in 1u64..4,
        k in 1usize..4,
        processes in 1usize..3,
        threads in 1usize..3,
    ) {
        let evs = events(&lists, 2, Some(users));
        let mut pairs: BTreeMap<(u32, ItemId), BTreeSet<ItemId>> = BTreeMap::new();
        for (key, _) in evs.iter().flatten() {
            pairs.entry((key.list, key.item.clone())).or_default().insert(key.user.clone().expect("a user"));
        }
        let specs: Vec<ListToReplay> = lists
            .iter()
            .map(|items| ListToReplay { k, first: 1, upper: upper(items) })
            .collect();
        let (all, _) = together(&specs, &estimates_of(&lists), &evs, (processes, threads), ReplayBudget::default());
        for (i, r) in all.iter().enumerate() {
            let seen: Vec<RankedItem> = pairs
                .iter()
                .filter(|((l, _), _)| *l == i as u32)
                .map(|((_, item), us)| RankedItem { item_id: item.clone(), count: us.len() as u64 , trend: None})
                .collect();
            prop_assert_eq!(outcome(r), Some(&top_k(seen, k)[..]), "list {}", i);
        }
    }
}

/// Two lists a shared first pass proves: one read for both.
#[test]
fn one_shared_read_proves_lists_whose_thresholds_hold() {
    let key = |l: u32, i: &str| ListKey {
        list: l,
        item: ItemId::from(i),
        user: None,
    };
    let evs = vec![vec![
        (key(0, "a"), 1),
        (key(0, "a"), 1),
        (key(0, "b"), 2),
        (key(1, "c"), 3),
        (key(1, "c"), 3),
        (key(1, "d"), 4),
    ]];
    let exact = |h: u64| match h {
        1 | 3 => 2,
        _ => 1,
    };
    let spec = ListToReplay {
        k: 1,
        first: 2,
        upper: 3,
    };
    let estimates: Estimates = vec![Box::new(exact), Box::new(exact)];
    let (out, reads) = together(&[spec, spec], &estimates, &evs, (1, 1), ReplayBudget::default());
    assert_eq!(reads, 1);
    let firsts: Vec<(String, u64, u32)> = out
        .iter()
        .map(|r| match r {
            Replayed::Exact(items, c, _) => (items[0].item_id.to_string(), items[0].count, c.passes),
            Replayed::OverBudget(_) => panic!("over budget"),
        })
        .collect();
    assert_eq!(firsts, vec![("a".into(), 2, 1), ("c".into(), 2, 1)]);
}

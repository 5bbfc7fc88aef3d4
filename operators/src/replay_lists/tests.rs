//! Several lists replayed together against each replayed alone and brute force: the same
//! outcome per list (exact with the brute-force top-K, or over budget), whatever the estimates,
//! first thresholds and budget, and never more keys than the budget at once.

use super::*;
use crate::record::RankedItem;
use crate::topk::top_k;
use proptest::prelude::*;
use std::convert::Infallible;

/// Per list, items as (count, over-estimate, hash).
type Lists = Vec<Vec<(u64, u64, u64)>>;

fn id(i: usize) -> ItemId {
    ItemId::from(format!("i{i}").as_str())
}

/// The events of every list, interleaved: round r has one event of every item with a count
/// above r, lists in turn.
fn events(lists: &Lists) -> Vec<(usize, ItemId, u64)> {
    let rounds = lists.iter().flatten().map(|x| x.0).max().unwrap_or(0);
    (0..rounds)
        .flat_map(|r| {
            lists.iter().enumerate().flat_map(move |(l, items)| {
                items
                    .iter()
                    .enumerate()
                    .filter(move |(_, x)| x.0 > r)
                    .map(move |(i, x)| (l, id(i), x.2))
            })
        })
        .collect()
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

proptest! {
    #[test]
    fn lists_together_end_as_each_alone(
        lists in proptest::collection::vec(proptest::collection::vec((0u64..6, 0u64..5, any::<u64>()), 0..30), 1..5),
        k in 1usize..5,
        firsts in proptest::collection::vec(0u64..12, 5),
        max_keys in 1usize..40,
        range_bits in 0u32..3,
    ) {
        let budget = ReplayBudget::new(max_keys, 1 << range_bits).expect("a budget");
        let evs = events(&lists);
        let estimates: Vec<Box<dyn Fn(u64) -> u64>> = lists
            .iter()
            .map(|items| {
                let items = items.clone();
                Box::new(move |h| estimate_of(&items, h)) as Box<dyn Fn(u64) -> u64>
            })
            .collect();
        let specs: Vec<ListToReplay<'_>> = lists
            .iter()
            .enumerate()
            .map(|(i, items)| ListToReplay { k, first: firsts[i], estimate: estimates[i].as_ref(), upper: upper(items) })
            .collect();
        let mut peak = 0usize;
        let mut read = |visit: &mut dyn FnMut(usize, &ItemId, u64) -> bool| -> Result<(), Infallible> {
            for (l, item, hash) in &evs {
                if !visit(*l, item, *hash) {
                    break;
                }
            }
            Ok(())
        };
        let together = match replay_lists(&specs, budget, &mut read) {
            Ok(r) => r,
            Err(never) => match never {},
        };
        prop_assert_eq!(together.len(), lists.len());
        for (i, items) in lists.iter().enumerate() {
            let mut alone_read = |visit: &mut dyn FnMut(&ItemId, u64) -> bool| -> Result<(), Infallible> {
                for (l, item, hash) in &evs {
                    if *l == i && !visit(item, *hash) {
                        break;
                    }
                }
                Ok(())
            };
            let alone = match replay_within(specs[i].estimate, specs[i].upper, k, firsts[i], budget, &mut alone_read) {
                Ok(r) => r,
                Err(never) => match never {},
            };
            prop_assert_eq!(outcome(&together[i]), outcome(&alone), "list {}", i);
            if let Replayed::Exact(got, cert, stats) = &together[i] {
                let seen: Vec<RankedItem> = items
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| x.0 > 0)
                    .map(|(j, x)| RankedItem { item_id: id(j), count: x.0 })
                    .collect();
                prop_assert_eq!(got, &top_k(seen, k));
                prop_assert!(cert.passes >= 1 && cert.passes == stats.passes);
                peak = peak.max(stats.peak_keys);
            }
        }
        prop_assert!(peak <= max_keys, "peak {} of {}", peak, max_keys);
    }
}

/// Two lists a shared first pass proves: one read for both.
#[test]
fn one_shared_read_proves_lists_whose_thresholds_hold() {
    let evs: Vec<(usize, ItemId, u64)> = [
        (0, "a", 1),
        (0, "a", 1),
        (0, "b", 2),
        (1, "c", 3),
        (1, "c", 3),
        (1, "d", 4),
    ]
    .into_iter()
    .map(|(l, i, h)| (l, ItemId::from(i), h))
    .collect();
    let exact = |h: u64| match h {
        1 | 3 => 2,
        _ => 1,
    };
    let specs = [
        ListToReplay {
            k: 1,
            first: 2,
            estimate: &exact,
            upper: 3,
        },
        ListToReplay {
            k: 1,
            first: 2,
            estimate: &exact,
            upper: 3,
        },
    ];
    let mut reads = 0;
    let mut read = |visit: &mut dyn FnMut(usize, &ItemId, u64) -> bool| -> Result<(), Infallible> {
        reads += 1;
        for (l, item, hash) in &evs {
            if !visit(*l, item, *hash) {
                break;
            }
        }
        Ok(())
    };
    let out = replay_lists(&specs, ReplayBudget::default(), &mut read).expect("infallible");
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

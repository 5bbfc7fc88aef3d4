//! The recount against brute force: random events of a few items, groups and users with
//! disorder and watermarks that pass the instance's end.

use super::*;
use crate::record::{EventText, PartitionId};
use proptest::prelude::*;
use std::collections::BTreeSet;

const START: i64 = 100;
const SIZE: i64 = 100;
const LATENESS: i64 = 30;

/// (item, group, user, ts, watermark step)
type Ev = (u8, u8, Option<u8>, i64, i64);

fn event(item: u8, user: Option<u8>, ts: i64, wm_before: i64) -> TimedEvent {
    let item = format!("i{item}");
    TimedEvent {
        hash: item_hash(&item),
        text: EventText::new(&item, user.map(|u| format!("u{u}")).as_deref(), &[] as &[&str]),
        ts: Millis(ts),
        wm_before: Millis(wm_before),
        partition: PartitionId(0),
        position: 0,
    }
}

/// The lists by brute force: count, fold, sort everything, cut at k.
fn brute(evs: &[Ev], by: bool, distinct: bool, max_groups: usize, k: usize) -> BTreeMap<GroupKey, Vec<(String, u64)>> {
    let end = START + SIZE;
    let mut wm = 0;
    let mut counted: Vec<(String, String, Option<u8>)> = Vec::new();
    for &(item, g, user, ts, step) in evs {
        let wm_before = wm;
        wm += step;
        if ts < START || ts >= end || end + LATENESS <= wm_before || (distinct && user.is_none()) {
            continue;
        }
        let group = if by { format!("c={g}") } else { String::new() };
        counted.push((group, format!("i{item}"), user));
    }
    let mut hashes: Vec<u64> = counted.iter().map(|(g, _, _)| item_hash(g)).collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes.truncate(max_groups);
    let mut per: BTreeMap<String, BTreeMap<String, BTreeSet<Option<u8>>>> = BTreeMap::new();
    let mut events: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (g, item, user) in counted {
        let list = if !by || hashes.contains(&item_hash(&g)) {
            g
        } else {
            OTHER_GROUP.to_string()
        };
        per.entry(list.clone())
            .or_default()
            .entry(item.clone())
            .or_default()
            .insert(user);
        *events.entry((list, item)).or_default() += 1;
    }
    per.into_iter()
        .map(|(list, items)| {
            let mut v: Vec<(String, u64)> = items
                .into_iter()
                .map(|(item, users)| {
                    let n = if distinct {
                        users.len() as u64
                    } else {
                        events[&(list.clone(), item.clone())]
                    };
                    (item, n)
                })
                .collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
            v.truncate(k);
            (GroupKey::from_stored(list), v)
        })
        .collect()
}

proptest! {
    #[test]
    fn recount_equals_brute_force(
        evs in prop::collection::vec((0u8..6, 0u8..4, prop::option::weighted(0.8, 0u8..4), 50i64..260, 0i64..20), 0..150),
        by in any::<bool>(),
        distinct in any::<bool>(),
        max_groups in 1u32..4,
        k in 1usize..4,
    ) {
        let mut w = WindowSpec::tumbling("w", Span::from_millis(SIZE as u64), k);
        if by {
            w.key.by = vec!["c".into()];
        }
        w.key.distinct_users = distinct;
        w.key.max_groups = max_groups;
        let mut r = Recount::new(w, Millis(START), Span::from_millis(LATENESS as u64), usize::MAX);
        let mut wm = 0;
        for &(item, g, user, ts, step) in &evs {
            let e = event(item, user, ts, wm);
            wm += step;
            let group = if by { format!("c={g}") } else { String::new() };
            let counts = !distinct || user.is_some();
            r.event(&e, counts.then_some(group.as_str())).expect("within budget");
        }
        prop_assert_eq!(r.lists(), brute(&evs, by, distinct, max_groups as usize, k));
    }
}

#[test]
fn the_first_difference_names_its_rank_and_both_sides() {
    let l = |v: &[(&str, u64)]| v.iter().map(|(i, c)| (i.to_string(), *c)).collect::<Vec<_>>();
    assert_eq!(
        first_difference(&l(&[("a", 3), ("b", 2)]), &l(&[("a", 3), ("b", 2)])),
        None
    );
    let d = first_difference(&l(&[("a", 3), ("b", 2)]), &l(&[("a", 3), ("b", 1)])).expect("differs");
    assert_eq!(
        (d.rank, d.stored, d.recounted),
        (2, Some(("b".into(), 2)), Some(("b".into(), 1)))
    );
    let d = first_difference(&l(&[("a", 3)]), &l(&[("a", 3), ("c", 1)])).expect("differs");
    assert_eq!((d.rank, d.stored), (2, None));
}

#[test]
fn a_recount_over_its_budget_says_so() {
    let w = WindowSpec::tumbling("w", Span::from_millis(SIZE as u64), 3);
    let mut r = Recount::new(w, Millis(START), Span::from_millis(LATENESS as u64), 2);
    assert!(r.event(&event(1, None, 150, 0), Some("")).is_ok());
    assert!(r.event(&event(2, None, 150, 0), Some("")).is_ok());
    assert!(r.event(&event(2, None, 150, 0), Some("")).is_ok(), "a key seen before");
    assert_eq!(r.event(&event(3, None, 150, 0), Some("")), Err(OverBudget(2)));
}

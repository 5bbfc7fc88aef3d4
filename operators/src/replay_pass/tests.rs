//! The pass rule and the sum of processes' shares (their agreement with one process reading
//! everything is property-tested with the searches in `replay_lists/tests.rs`).

use super::*;
use crate::record::ItemId;
use crate::replay_count::FxMap;

#[test]
fn a_rule_admits_its_lists_from_their_thresholds_in_its_range() {
    let est = |h: u64| h % 10;
    let estimates: [&(dyn Fn(u64) -> u64 + Sync); 2] = [&est, &|_| 100];
    let rule = PassRule {
        thresholds: vec![Some(5), None],
        range: KeyRange::ALL,
    };
    assert!(rule.admits(0, 5, &estimates));
    assert!(!rule.admits(0, 4, &estimates), "below the threshold");
    assert!(!rule.admits(1, 5, &estimates), "a list the pass does not count");
    assert!(!rule.admits(2, 5, &estimates), "a list the rule does not know");
    let only = PassRule::only(1, 7, KeyRange::ALL);
    assert_eq!(only.thresholds, vec![None, Some(7)]);
    assert!(only.admits(1, 3, &estimates) && !only.admits(0, 9, &estimates));
}

fn fits(pairs: &[(&str, u64)]) -> ProcessShare<ItemId, String> {
    let map: FxMap<ItemId, u64> = pairs.iter().map(|(k, c)| (ItemId::from(*k), *c)).collect();
    Ok(Counted::Fits(map))
}

#[test]
fn shares_sum_per_key_within_the_merged_budget() {
    let sum = |shares: Vec<ProcessShare<ItemId, String>>, max| match sum_shares(shares, max) {
        Ok(Counted::Fits(m)) => {
            let mut v: Vec<(String, u64)> = m.into_iter().map(|(k, c)| (k.to_string(), c)).collect();
            v.sort();
            Ok(Some(v))
        }
        Ok(Counted::Over) => Ok(None),
        Err(e) => Err(e),
    };
    let a = || fits(&[("x", 2), ("y", 1)]);
    let b = || fits(&[("y", 3), ("z", 1)]);
    assert_eq!(
        sum(vec![a(), b()], 3),
        Ok(Some(vec![("x".into(), 2), ("y".into(), 4), ("z".into(), 1)]))
    );
    // each share fits 2 keys, the union of 3 does not
    assert_eq!(sum(vec![a(), b()], 2), Ok(None));
    assert_eq!(sum(vec![a(), Ok(Counted::Over)], 10), Ok(None));
    // a failed part wins over budget, and the lowest part's error over the others
    let failed = |part: usize| -> ProcessShare<ItemId, String> { Err((part, format!("part {part}"))) };
    assert_eq!(
        sum(vec![Ok(Counted::Over), failed(3), failed(1)], 10),
        Err("part 1".into())
    );
}

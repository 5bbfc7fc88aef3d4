//! Parallel counting against brute force: per-key sums over every part for any thread count,
//! over budget exactly when the merged map would pass `max_keys`, the lowest failed part's
//! error, and no part read once the read failed.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Events as (key, hash) per part.
type Parts = Vec<Vec<(u32, u64)>>;

fn count(
    parts: &Parts,
    threads: usize,
    max_keys: usize,
    admit: &(dyn Fn(&u32, u64) -> bool + Sync),
) -> Option<BTreeMap<u32, u64>> {
    let read = |p: usize, _: &AtomicBool, visit: &mut dyn FnMut(&u32, u64) -> bool| -> Result<(), String> {
        for (key, hash) in &parts[p] {
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
    match count_parts(&input, max_keys, admit).expect("no error") {
        Counted::Fits(m) => Some(m.into_iter().collect()),
        Counted::Over => None,
    }
}

proptest! {
    #[test]
    fn sums_every_part_within_the_merged_budget(
        keys in proptest::collection::vec(proptest::collection::vec(0u32..30, 0..40), 0..6),
        threads in 1usize..5,
        max_keys in 1usize..25,
        min_hash in 0u64..3,
    ) {
        // a key's hash is pinned (here: the key mod 4), as an item's is
        let parts: Parts = keys
            .iter()
            .map(|p| p.iter().map(|k| (*k, u64::from(*k) % 4)).collect())
            .collect();
        let admit = |_: &u32, hash: u64| hash >= min_hash;
        let mut want = BTreeMap::<u32, u64>::new();
        for (key, hash) in parts.iter().flatten() {
            if admit(key, *hash) {
                *want.entry(*key).or_default() += 1;
            }
        }
        let got = count(&parts, threads, max_keys, &admit);
        if want.len() > max_keys {
            prop_assert_eq!(got, None);
        } else {
            prop_assert_eq!(got, Some(want));
        }
    }
}

#[test]
fn the_lowest_failed_part_names_the_error_and_no_part_is_read_after_a_failure() {
    for threads in 1..=3 {
        let read_parts = Mutex::new(Vec::new());
        let read = |p: usize, _: &AtomicBool, _: &mut dyn FnMut(&u32, u64) -> bool| -> Result<(), String> {
            read_parts.lock().expect("lock").push(p);
            if p == 1 || p == 2 {
                Err(format!("part {p} failed"))
            } else {
                Ok(())
            }
        };
        let input = ReplayInput {
            parts: 7,
            threads,
            read: &read,
        };
        let err = count_parts(&input, 10, &|_, _| true).expect_err("parts 1 and 2 fail");
        let read = read_parts.into_inner().expect("lock");
        // the lowest failed part of those read (a thread may see the other's failure first and
        // not read its part at all); one thread reads part 1 first
        let lowest = read
            .iter()
            .filter(|p| **p == 1 || **p == 2)
            .min()
            .expect("a part failed");
        assert_eq!(err, format!("part {lowest} failed"), "{threads} threads read {read:?}");
        if threads == 1 {
            assert_eq!(read, vec![0, 1], "no part read after the failure");
        }
        // a thread stops at its first failure: part 1's thread does not go on to 1 + threads
        assert!(!read.contains(&(1 + threads)), "{threads} threads read {read:?}");
    }
}

#[test]
fn one_thread_over_its_budget_stops_reading() {
    // 10 distinct keys in part 0: over a budget of 4 at the 5th, and part 1 is never read
    let parts: Parts = vec![(0..10).map(|k| (k, 0)).collect(), vec![(99, 0)]];
    let seen = Mutex::new(0usize);
    let read = |p: usize, _: &AtomicBool, visit: &mut dyn FnMut(&u32, u64) -> bool| -> Result<(), String> {
        for (key, hash) in &parts[p] {
            *seen.lock().expect("lock") += 1;
            if !visit(key, *hash) {
                break;
            }
        }
        Ok(())
    };
    let input = ReplayInput {
        parts: 2,
        threads: 1,
        read: &read,
    };
    assert!(matches!(count_parts(&input, 4, &|_, _| true), Ok(Counted::Over)));
    assert_eq!(seen.into_inner().expect("lock"), 5);
}

#[test]
fn keys_split_over_threads_overflow_only_in_the_merge() {
    // each part alone fits 4 keys; their union is 6 keys
    let parts: Parts = vec![vec![(1, 0), (2, 0), (3, 0)], vec![(3, 0), (4, 0), (5, 0), (6, 0)]];
    for threads in 1..=2 {
        assert_eq!(count(&parts, threads, 5, &|_, _| true), None, "{threads} threads");
        let six = count(&parts, threads, 6, &|_, _| true).expect("fits");
        assert_eq!(six.get(&3), Some(&2), "3 is in both parts");
        assert_eq!(six.len(), 6);
    }
}

//! Redis-only tests of sealed instances' ranges (`redis/ranges.rs`): the key layout, what
//! `reset` deletes, damage only Redis can hold (a non-UTF-8 value, a key of another type, a
//! start that is not an integer), starts a score cannot hold. Like the other Redis tests they
//! need a real Redis (see `tests`).

use super::ranges::RANGES_KEPT;
use super::tests::Fixture;
use super::*;
use crate::ranges::instance_json;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, list, sealed, unreadable, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::time::Millis;
use std::collections::HashMap;

/// The ranges are stored as the module documents: a hash per window (start → the instance's
/// JSON), a sorted set of its starts, the job's set of windows with ranges; `reset` deletes
/// all three, and a skipped epoch writes none of them.
#[test]
fn ranges_are_stored_as_documented_and_reset_deletes_them() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    store.prepare(JOB, &windows()).unwrap();
    let ranges = [
        sealed("1m", 0),
        unreadable("1m", -60_000, "gone"),
        sealed("5m", 300_000),
    ];
    let mut b = batch(1, vec![list(0, 3, 1)]);
    b.ranges = ranges.to_vec();
    assert!(store.commit(&b).unwrap());
    let hash: HashMap<String, String> = ::redis::cmd("HGETALL")
        .arg(fx.key("1m:ranges"))
        .query(&mut fx.raw)
        .unwrap();
    let want: HashMap<String, String> = [("0", &ranges[0]), ("-60000", &ranges[1])]
        .iter()
        .map(|(k, r)| (k.to_string(), instance_json(r)))
        .collect();
    assert_eq!(hash, want);
    assert!(hash["-60000"] == r#"{"end":0,"unreadable":"gone"}"#, "{hash:?}");
    assert!(
        hash["0"].starts_with(r#"{"end":60000,"ranges":[{"partition":0,"from":120,"#),
        "{hash:?}"
    );
    let starts: Vec<(String, f64)> = ::redis::cmd("ZRANGE")
        .arg(fx.key("1m:ranges:starts"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(starts, [("-60000".to_string(), -60_000.0), ("0".to_string(), 0.0)]);
    let mut windows_with_ranges: Vec<String> = ::redis::cmd("SMEMBERS")
        .arg(fx.key("ranges"))
        .query(&mut fx.raw)
        .unwrap();
    windows_with_ranges.sort();
    assert_eq!(windows_with_ranges, ["1m", "5m"]);

    // a skipped epoch writes no ranges
    let mut skipped = batch(1, vec![]);
    skipped.ranges = vec![sealed("1m", 120_000)];
    assert!(!store.commit(&skipped).unwrap());
    assert_eq!(store.sealed_ranges(JOB, "1m", Millis(120_000)).unwrap(), None);

    store.claim(JOB, "run").unwrap();
    store.reset(JOB).unwrap();
    let left: Vec<String> = fx.keys().into_iter().filter(|k| k.contains("ranges")).collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(store.latest(JOB, "1m").unwrap(), None);
    assert_eq!(
        store.sealed_instances(JOB, "5m", Millis::MIN, 10).unwrap(),
        Vec::<Millis>::new()
    );
}

/// Damage only Redis can hold is a clear error: a value that is not UTF-8 and a start that is
/// not an integer are `Corrupt` naming the key; a ranges key of another type makes the commit
/// fail as corrupt before it writes anything. A start a score cannot hold exactly is refused
/// before anything is written.
#[test]
fn damaged_redis_ranges_are_reported() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    let mut b = batch(1, vec![]);
    b.ranges = vec![sealed("1m", 0), sealed("1m", 60_000)];
    assert!(store.commit(&b).unwrap());

    ::redis::cmd("HSET")
        .arg(fx.key("1m:ranges"))
        .arg(0)
        .arg(&b"{\"end\":60000,\"unreadable\":\"\xff\"}"[..])
        .exec(&mut fx.raw)
        .unwrap();
    let err = store.sealed_ranges(JOB, "1m", Millis(0)).unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("{} field 0: job", fx.key("1m:ranges"))),
        "{err}"
    );
    assert!(err.to_string().contains("ranges: not UTF-8"), "{err}");
    assert_eq!(
        store.sealed_ranges(JOB, "1m", Millis(60_000)).unwrap(),
        Some(sealed("1m", 60_000))
    );

    // starts are read in order and checked whatever the sorted set holds
    ::redis::cmd("ZADD")
        .arg(fx.key("1m:ranges:starts"))
        .arg(30_000)
        .arg("90000")
        .exec(&mut fx.raw)
        .unwrap();
    assert_eq!(
        store.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(),
        [Millis(0), Millis(60_000), Millis(90_000)]
    );
    ::redis::cmd("ZADD")
        .arg(fx.key("1m:ranges:starts"))
        .arg(45_000)
        .arg("soon")
        .exec(&mut fx.raw)
        .unwrap();
    let err = store.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(
        err.to_string().contains("has member \"soon\", not an instance start"),
        "{err}"
    );

    // a key of another type: the commit fails before it writes anything
    ::redis::cmd("SET")
        .arg(fx.key("5m:ranges"))
        .arg("x")
        .exec(&mut fx.raw)
        .unwrap();
    let mut next = batch(2, vec![list(0, 1, 1)]);
    next.ranges = vec![sealed("5m", 0)];
    let err = store.commit(&next).unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("5m:ranges is a string, not a hash"), "{err}");
    assert_eq!(store.committed_epoch(JOB).unwrap(), Some(1));
    assert_eq!(store.latest(JOB, "1m").unwrap(), None, "nothing of the batch written");

    // starts beyond 2^53 are refused before anything is written
    let mut far = batch(3, vec![list(0, 1, 1)]);
    far.ranges = vec![sealed("1m", 1 << 54)];
    let err = store.commit(&far).unwrap_err();
    assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("beyond ±2^53"), "{err}");
    far.ranges = vec![sealed("1m", (1 << 53) - 60_000)];
    assert!(store.commit(&far).unwrap());
    assert_eq!(
        store.sealed_ranges(JOB, "1m", Millis((1 << 53) - 60_000)).unwrap(),
        Some(sealed("1m", (1 << 53) - 60_000))
    );
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 1))));
}

/// A window keeps the ranges of its newest [`RANGES_KEPT`] instances: older ones leave the
/// hash and the sorted set in the commit that goes past the bound (memory stays bounded).
#[test]
fn a_window_keeps_its_newest_instances_ranges() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    store.prepare(JOB, &windows()).unwrap();
    let mut b = batch(1, vec![]);
    b.ranges = (0..RANGES_KEPT as i64 - 5).map(|i| sealed("1m", i * 60_000)).collect();
    assert!(store.commit(&b).unwrap());
    let mut b = batch(2, vec![]);
    b.ranges = (RANGES_KEPT as i64 - 5..RANGES_KEPT as i64 + 7)
        .map(|i| sealed("1m", i * 60_000))
        .collect();
    assert!(store.commit(&b).unwrap());
    let starts = store.sealed_instances(JOB, "1m", Millis::MIN, 2 * RANGES_KEPT).unwrap();
    assert_eq!(starts.len(), RANGES_KEPT);
    assert_eq!(starts.first(), Some(&Millis(7 * 60_000)), "the 7 oldest left");
    assert_eq!(store.sealed_ranges(JOB, "1m", Millis(6 * 60_000)).unwrap(), None);
    assert!(store.sealed_ranges(JOB, "1m", Millis(7 * 60_000)).unwrap().is_some());
    let fields: usize = ::redis::cmd("HLEN")
        .arg(fx.key("1m:ranges"))
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(fields, RANGES_KEPT);
}

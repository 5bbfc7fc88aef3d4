//! Redis-only tests of trend lists (`redis/trend.rs`): the key layout, the round trip, damaged
//! trend data read as corrupt, invalid lists refused, no trend hash outliving its list, and
//! the fan-out. Like the other Redis tests they need a real Redis (see `tests`).

use super::tests::{test_url, Fixture};
use super::*;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, list, trending, windows, JOB};
use crate::types::{CommitBatch, StoredList};
use hotlist_operators::group::GroupKey;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::TrendFacts;
use hotlist_operators::time::Millis;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// `trending(start, revision)` of group `g={group}`.
fn trending_of(group: &str, start: i64, revision: u32) -> PublishedList {
    PublishedList {
        group: GroupKey::from_pairs([("g", group)]),
        ..trending(start, revision)
    }
}

/// A trend list reads back equal (its order the trend order, not the counts'), stored as the
/// module documents: the counts in the sorted set, `rank_by` in the meta hash, one JSON record
/// per rank in the trend hash.
#[test]
fn trend_lists_round_trip_in_trend_order() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    let l = trending(120_000, 3);
    let ids: Vec<&str> = l.items.iter().map(|i| i.item_id.as_str()).collect();
    assert_eq!(ids, ["rising", "new", "steady"], "the fixture is not in count order");
    assert!(store.commit(&batch(1, vec![l.clone()])).unwrap());
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(l.clone())));
    assert_eq!(fx.store().latest(JOB, "1m").unwrap(), Some(StoredList::from(l.clone())));
    assert_eq!(
        store.instance(JOB, "1m", Millis(120_000)).unwrap(),
        Some(StoredList::from(l.clone()))
    );
    // The key layout.
    let meta: HashMap<String, String> = ::redis::cmd("HGETALL")
        .arg(fx.key("1m:latest:meta"))
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(meta.get("rank_by").map(String::as_str), Some("trend"));
    assert_eq!(meta.get("item_count").map(String::as_str), Some("3"));
    let members: Vec<(String, f64)> = ::redis::cmd("ZRANGE")
        .arg(fx.key("1m:latest"))
        .arg(0)
        .arg(-1)
        .arg("REV")
        .arg("WITHSCORES")
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(
        members,
        vec![("rising".into(), 20.0), ("steady".into(), 10.0), ("new".into(), 9.0)]
    );
    let records: HashMap<String, String> = ::redis::cmd("HGETALL")
        .arg(fx.key("1m:latest:trend"))
        .query(&mut fx.raw)
        .unwrap();
    let want: HashMap<String, String> = [
        (
            "1",
            r#"{"item_id":"rising","baseline":6,"score":10.392304845413264,"history":[2,3,1]}"#,
        ),
        ("2", r#"{"item_id":"new","baseline":0,"score":9.0,"history":[0,0,0]}"#),
        (
            "3",
            r#"{"item_id":"steady","baseline":27,"score":0.31622776601683794,"history":[9,9,9]}"#,
        ),
    ]
    .iter()
    .map(|&(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(records, want);
    assert_eq!(
        fx.keys(),
        vec![
            fx.key("1m:groups"),
            fx.key("1m:latest"),
            fx.key("1m:latest:meta"),
            fx.key("1m:latest:trend"),
            fx.key("commit"),
        ]
    );
    // A group's trend list has its own trend hash.
    let g = trending_of("x", 120_000, 1);
    assert!(store.commit(&batch(2, vec![g.clone()])).unwrap());
    assert_eq!(store.latest_of(JOB, "1m", &g.group).unwrap(), Some(StoredList::from(g)));
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(l)));
    assert!(fx.keys().contains(&fx.key("1m:group:g=x:latest:trend")));
}

/// Trend data that does not agree with itself, the members or the order reads as corrupt,
/// naming the rank (mirrors the SQLite store's
/// `trend_lists_round_trip_and_damaged_trend_columns_are_corrupt`).
#[test]
fn damaged_trend_fields_are_corrupt() {
    type Damage = fn(&mut Fixture);
    let damages: [(&str, Damage, &str); 14] = [
        (
            "a baseline that is not the history's sum",
            |fx| edit_record(fx, 2, |r| r["baseline"] = (r["baseline"].as_u64().unwrap() + 1).into()),
            "rank 2 (\"new\") has baseline 1, but its history sums to 0",
        ),
        (
            "a score the counts do not give",
            |fx| edit_record(fx, 1, |r| r["score"] = (r["score"].as_f64().unwrap() * 2.0).into()),
            "rank 1 (\"rising\") has score",
        ),
        (
            "a history that is not counts",
            |fx| edit_record(fx, 3, |r| r["history"] = serde_json::json!([1, "x", 2])),
            "rank 3 (\"steady\") has history",
        ),
        (
            "a record without its score",
            |fx| edit_record(fx, 3, |r| r["score"] = Value::Null),
            "rank 3 (\"steady\") lacks some of baseline, score and history",
        ),
        (
            "a rank without its record",
            |fx| hdel(fx, "1m:latest:trend", "2"),
            "has no field 2: rank 2 is not the same kind",
        ),
        (
            "a count that is not the one the score was computed from",
            |fx| zadd(fx, 1000, "steady"),
            "rank 3 (\"steady\") has score",
        ),
        (
            "two ranks swapped",
            |fx| {
                let (one, two) = (record(fx, 1), record(fx, 2));
                hset(fx, "1m:latest:trend", "1", &two);
                hset(fx, "1m:latest:trend", "2", &one);
            },
            "rank 1 (\"new\", count 9) and rank 2 (\"rising\", count 20) are not in ranking order",
        ),
        (
            "a record naming no member",
            |fx| edit_record(fx, 2, |r| r["item_id"] = "gone".into()),
            "rank 2 names \"gone\", which is not a member",
        ),
        (
            "an item at two ranks",
            |fx| edit_record(fx, 2, |r| r["item_id"] = "rising".into()),
            "rank 2 names \"rising\", which is not a member",
        ),
        (
            "a field past the members",
            |fx| hset(fx, "1m:latest:trend", "4", "{}"),
            "has 4 fields but",
        ),
        (
            "a record that is not JSON",
            |fx| hset(fx, "1m:latest:trend", "1", "rising,6,10.4,2 3 1"),
            "field 1 is not a trend record",
        ),
        (
            "a trend list without its trend hash",
            |fx| del(fx, "1m:latest:trend"),
            "has no field 1: rank 1 is not the same kind",
        ),
        (
            "trend records of a count-ranked list",
            |fx| hdel(fx, "1m:latest:meta", "rank_by"),
            "has 3 fields but",
        ),
        (
            "an unknown rank_by",
            |fx| hset(fx, "1m:latest:meta", "rank_by", "count"),
            "field rank_by is \"count\", not \"trend\"",
        ),
    ];
    for (what, damage, want) in damages {
        let mut fx = Fixture::new();
        let mut store = fx.store();
        store.prepare(JOB, &windows()).unwrap();
        assert!(store.commit(&batch(1, vec![trending(0, 3)])).unwrap());
        damage(&mut fx);
        let err = store.latest(JOB, "1m").unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{what}: {err}");
        assert!(err.to_string().contains(want), "{what}: {err}");
        assert!(!err.retryable(), "{what}: {err}");
    }
}

/// A list of items of both kinds, or with a history no reader takes, is refused before
/// anything is written.
#[test]
fn invalid_trend_lists_are_refused() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    let mut mixed = trending(0, 1);
    mixed.items[1].trend = None;
    let mut empty_history = trending(0, 1);
    empty_history.items[2].trend = Some(TrendFacts { history: vec![] });
    let mut long_history = trending(0, 1);
    long_history.items[0].trend = Some(TrendFacts {
        history: vec![0; hotlist_operators::trend::MAX_BASELINE as usize + 1],
    });
    for (l, want) in [
        (mixed, "is not the same kind"),
        (empty_history, "a history of 0 counts"),
        (long_history, "a history of 1001 counts"),
    ] {
        let err = store.commit(&batch(1, vec![l])).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(err.to_string().contains(want), "{err}");
    }
    assert_eq!(fx.keys(), Vec::<String>::new());
}

/// Whatever replaces a trend list leaves no trend record behind, a group's trend hash goes
/// with its list when the group falls out of the live instances, and `reset` deletes them.
#[test]
fn no_trend_hash_outlives_its_list() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    store.prepare(JOB, &windows()).unwrap();
    assert!(store.commit(&batch(1, vec![trending(0, 1)])).unwrap());
    // A count-ranked list replaces it: as before trend lists, no rank_by, no trend hash.
    assert!(store.commit(&batch(2, vec![list(0, 2, 3)])).unwrap());
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 2, 3))));
    assert!(!fx.keys().contains(&fx.key("1m:latest:trend")));
    let rank_by: Option<String> = ::redis::cmd("HGET")
        .arg(fx.key("1m:latest:meta"))
        .arg("rank_by")
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(rank_by, None);
    // A trend list with fewer items replaces a longer one: no record of a rank it lacks.
    assert!(store.commit(&batch(3, vec![trending(60_000, 1)])).unwrap());
    let mut shorter = trending(60_000, 2);
    shorter.items.truncate(2);
    assert!(store.commit(&batch(4, vec![shorter.clone()])).unwrap());
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(shorter)));
    let fields: u64 = ::redis::cmd("HLEN")
        .arg(fx.key("1m:latest:trend"))
        .query(&mut fx.raw)
        .unwrap();
    assert_eq!(fields, 2);
    // Retention: group a's list (instance 0) ends before group b's (120 000) starts.
    assert!(store.commit(&batch(5, vec![trending_of("a", 0, 1)])).unwrap());
    assert!(fx.keys().contains(&fx.key("1m:group:g=a:latest:trend")));
    assert!(store.commit(&batch(6, vec![trending_of("b", 120_000, 1)])).unwrap());
    let keys = fx.keys();
    assert!(!keys.iter().any(|k| k.contains("g=a")), "{keys:?}");
    assert!(keys.contains(&fx.key("1m:group:g=b:latest:trend")), "{keys:?}");
    // reset
    store.reset(JOB).unwrap();
    let keys = fx.keys();
    assert!(!keys.iter().any(|k| k.contains("latest")), "{keys:?}");
}

/// The fan-out copies a trend list whole (it hands the store the lists it was offered).
#[test]
fn the_fanout_writes_trend_lists() {
    let fx = Fixture::new();
    let target = FanoutTarget {
        url: test_url(),
        prefix: fx.prefix.clone(),
        job: JOB.into(),
        windows: windows(),
        start_over: true,
    };
    let fanout = Fanout::start(target, Arc::new(FanoutStats::default())).unwrap();
    let lists = vec![trending(0, 1), trending(60_000, 2), trending_of("x", 60_000, 3)];
    fanout.offer(&CommitBatch {
        lists: lists.clone(),
        ..batch(1, vec![])
    });
    drop(fanout);
    let mut store = fx.store();
    assert_eq!(
        store.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(lists[1].clone()))
    );
    assert_eq!(
        store.latest_of(JOB, "1m", &lists[2].group).unwrap(),
        Some(StoredList::from(lists[2].clone()))
    );
}

/// The trend record at `rank` of the `1m` list.
fn record(fx: &mut Fixture, rank: u32) -> String {
    ::redis::cmd("HGET")
        .arg(fx.key("1m:latest:trend"))
        .arg(rank)
        .query(&mut fx.raw)
        .unwrap()
}

/// Rewrites the trend record at `rank` of the `1m` list with `edit`.
fn edit_record(fx: &mut Fixture, rank: u32, edit: impl FnOnce(&mut Value)) {
    let mut r: Value = serde_json::from_str(&record(fx, rank)).unwrap();
    edit(&mut r);
    hset(fx, "1m:latest:trend", &rank.to_string(), &r.to_string());
}

fn hset(fx: &mut Fixture, key: &str, field: &str, value: &str) {
    let key = fx.key(key);
    ::redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .exec(&mut fx.raw)
        .unwrap();
}

fn hdel(fx: &mut Fixture, key: &str, field: &str) {
    let key = fx.key(key);
    ::redis::cmd("HDEL").arg(key).arg(field).exec(&mut fx.raw).unwrap();
}

fn del(fx: &mut Fixture, key: &str) {
    let key = fx.key(key);
    ::redis::cmd("DEL").arg(key).exec(&mut fx.raw).unwrap();
}

fn zadd(fx: &mut Fixture, score: u64, member: &str) {
    let key = fx.key("1m:latest");
    ::redis::cmd("ZADD")
        .arg(key)
        .arg(score)
        .arg(member)
        .exec(&mut fx.raw)
        .unwrap();
}

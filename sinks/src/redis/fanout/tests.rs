//! The fan-out's pending lists and its thread against an unreachable Redis.

use super::pending::Pending;
use super::*;
use crate::types::CommitBatch;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::time::Millis;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

fn list(window: &str, start: i64, revision: u32, k: usize) -> PublishedList {
    PublishedList {
        group: Default::default(),
        window: window.into(),
        start: Millis(start),
        end: Millis(start + 60_000),
        revision,
        state: ListState::Open,
        watermark: Millis(start),
        as_of: Millis(0),
        items: (0..k)
            .map(|i| RankedItem {
                item_id: format!("r{revision}-{i}").into(),
                count: (k - i) as u64,
                trend: None,
            })
            .collect(),
        exact: true,
        error_bound: 0,
        sketch_check: None,
        certificate: None,
    }
}

fn batch(epoch: u64, lists: Vec<PublishedList>) -> CommitBatch {
    CommitBatch {
        job: "j".into(),
        epoch,
        watermark: Millis(epoch as i64),
        lists,
        dead_letters: Vec::new(),
        hot_keys: Vec::new(),
        ranges: Vec::new(),
    }
}

/// What is pending: (window, start, revision) per window and group.
fn shape(p: &Pending) -> Vec<(&str, i64, u32)> {
    p.lists
        .values()
        .map(|l| (l.window.as_str(), l.start.0, l.revision))
        .collect()
}

/// However many batches pile up while Redis is down, one list per window is pending: the
/// newest revision of the newest instance.
#[test]
fn pending_stays_one_list_per_window_for_any_outage() {
    let mut p = Pending::of(&batch(1, vec![list("1m", 0, 1, 100), list("5m", 0, 1, 100)]));
    for epoch in 2..=10_000u64 {
        let start = (epoch as i64 / 100) * 60_000;
        let lists = vec![list("1m", start, epoch as u32, 100), list("5m", 0, epoch as u32, 100)];
        let failed = std::mem::replace(&mut p, Pending::of(&batch(epoch, lists)));
        p.merge_older(failed);
        assert!(p.len() <= 2);
    }
    assert_eq!(shape(&p), vec![("1m", 6_000_000, 10_000), ("5m", 0, 10_000)]);
    assert_eq!((p.epoch, p.watermark), (10_000, Millis(10_000)));
    let items: usize = p.lists.values().map(|l| l.items.len()).sum();
    assert_eq!(items, 200, "windows x K items");
}

/// The newest hot-key window stays pending, however batches arrive or fail.
#[test]
fn the_newest_hot_key_window_stays_pending() {
    let hot = |start: i64| hotlist_operators::hot_keys::HotWindow {
        start: Millis(start),
        end: Millis(start + 10_000),
        watermark: Millis(start),
        as_of: Millis(0),
        keys: vec![],
    };
    let mut b = batch(1, vec![]);
    b.hot_keys = vec![hot(10_000), hot(0)];
    let mut p = Pending::of(&b);
    assert_eq!(p.hot.as_ref().map(|w| w.start), Some(Millis(10_000)));
    let mut later = batch(2, vec![]);
    later.hot_keys = vec![hot(20_000)];
    let failed = std::mem::replace(&mut p, Pending::of(&later));
    p.merge_older(failed);
    assert_eq!(p.to_batch("j").hot_keys, vec![hot(20_000)]);
    p.merge(&batch(3, vec![]));
    assert_eq!(
        p.hot.as_ref().map(|w| w.start),
        Some(Millis(20_000)),
        "a batch without windows keeps it"
    );
}

/// An older instance's correction never replaces a newer instance, in a batch, in a later
/// batch, or when a failed attempt is put back; for one instance the later list wins.
#[test]
fn an_older_instance_never_replaces_a_newer_one() {
    // Within a batch: the greatest start, then the highest revision.
    let b = batch(
        1,
        vec![list("1m", 60_000, 2, 1), list("1m", 0, 9, 1), list("1m", 60_000, 1, 1)],
    );
    let mut p = Pending::of(&b);
    assert_eq!(shape(&p), vec![("1m", 60_000, 2)]);
    // A later batch: a correction of the older instance does not replace it ...
    p.merge(&batch(2, vec![list("1m", 0, 10, 1)]));
    assert_eq!(shape(&p), vec![("1m", 60_000, 2)]);
    // ... a later list of the same instance does.
    p.merge(&batch(3, vec![list("1m", 60_000, 3, 1)]));
    assert_eq!(shape(&p), vec![("1m", 60_000, 3)]);
    // Put back under newer lists: the newer instance wins either way round.
    let mut newer = Pending::of(&batch(4, vec![list("1m", 0, 11, 1), list("5m", 0, 1, 1)]));
    newer.merge_older(p);
    assert_eq!(shape(&newer), vec![("1m", 60_000, 3), ("5m", 0, 1)]);
    let mut newer_instance = Pending::of(&batch(5, vec![list("1m", 120_000, 1, 1)]));
    newer_instance.merge_older(newer);
    assert_eq!(shape(&newer_instance), vec![("1m", 120_000, 1), ("5m", 0, 1)]);
    assert_eq!(newer_instance.epoch, 5);
    // For the same instance, what was merged since the failed attempt wins.
    let mut since = Pending::of(&batch(6, vec![list("5m", 0, 1, 3)]));
    since.merge_older(Pending::of(&batch(5, vec![list("5m", 0, 2, 1)])));
    assert_eq!(since.lists.values().next().map(|l| l.items.len()), Some(3));
    let b = since.to_batch("j");
    assert_eq!((b.epoch, b.lists.len(), b.dead_letters.len()), (6, 1, 0));
}

/// A fan-out to a closed port: offering never blocks, failures are counted, what is
/// pending stays one list per window, and dropping the fan-out ends its thread.
#[test]
fn an_unreachable_redis_keeps_one_list_per_window_pending() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(1);
    let windows = vec![WindowSpec::tumbling(
        "1m",
        hotlist_operators::time::Span::from_millis(60_000),
        100,
    )];
    let target = FanoutTarget {
        url: format!("redis://127.0.0.1:{port}/"),
        prefix: "hotlist".into(),
        job: "j".into(),
        windows,
        start_over: false,
    };
    let stats = Arc::new(FanoutStats::default());
    let fanout = Fanout::start(target, stats.clone()).unwrap();
    let started = Instant::now();
    for epoch in 1..=2_000u64 {
        fanout.offer(&batch(epoch, vec![list("1m", epoch as i64 * 60_000, 1, 100)]));
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "offering does not wait for Redis"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while stats.failures.load(Relaxed) < 2 {
        assert!(Instant::now() < deadline, "no failed attempt counted");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(fanout.shared.lock().pending.as_ref().map(Pending::len), Some(1));
    drop(fanout);
    assert_eq!(stats.pending_lists.load(Relaxed), 1);
}

/// A list of `group` (`g=<group>`) of the `1m` window.
fn group_list(group: &str, start: i64, revision: u32) -> PublishedList {
    PublishedList {
        group: hotlist_operators::group::GroupKey::from_stored(format!("g={group}")),
        ..list("1m", start, revision, 2)
    }
}

/// A batch of a `by` window holds one list per group: every group's list is pending (before,
/// only one list per window was, so all other groups of the flush never reached Redis).
#[test]
fn every_groups_list_is_pending() {
    let lists: Vec<PublishedList> = (0..500).map(|g| group_list(&g.to_string(), 0, 1)).collect();
    let mut p = Pending::of(&batch(1, lists));
    assert_eq!(p.len(), 500);
    // a later revision of some groups replaces theirs only
    p.merge(&batch(2, (0..10).map(|g| group_list(&g.to_string(), 0, 2)).collect()));
    assert_eq!(p.len(), 500);
    let revisions: Vec<u32> = p.lists.values().map(|l| l.revision).collect();
    assert_eq!(revisions.iter().filter(|&&r| r == 2).count(), 10);
    assert_eq!(p.to_batch("j").lists.len(), 500);
}

/// Groups rotating with every instance during an outage: what is pending stays the groups of
/// the newest instance and the one before it (a tumbling window), never every group seen.
#[test]
fn rotating_groups_stay_bounded_during_an_outage() {
    let mut p = Pending::of(&batch(1, vec![group_list("0-0", 0, 1)]));
    for instance in 0..200i64 {
        for epoch in 0..3u64 {
            let lists = (0..20).map(|g| group_list(&format!("{instance}-{g}"), instance * 60_000, epoch as u32 + 1));
            let failed = std::mem::replace(
                &mut p,
                Pending::of(&batch(instance as u64 * 3 + epoch + 2, lists.collect())),
            );
            p.merge_older(failed);
            assert!(p.len() <= 40, "{} lists pending", p.len());
        }
    }
    let starts: std::collections::BTreeSet<i64> = p.lists.values().map(|l| l.start.0).collect();
    assert_eq!(starts.into_iter().collect::<Vec<_>>(), vec![198 * 60_000, 199 * 60_000]);
}

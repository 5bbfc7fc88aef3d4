//! The counter's unit tests: counting, closing and sealing, late events and exclusions,
//! sealed-after-end horizons, shared panes, and final lists against naive counting.

use super::*;
use crate::hash::item_hash;
use crate::message::LocalList;
use crate::record::{DeadLetter, DeadReason, EventText, PartitionId, TimedEvent};
use proptest::{prop_assert, prop_assert_eq};

fn ev(item: &str, ts: i64, wm_before: i64) -> TimedEvent {
    TimedEvent {
        text: EventText::item(item),
        ts: Millis(ts),
        wm_before: Millis(wm_before),
        hash: item_hash(item),
        partition: PartitionId(0),
        position: 0,
    }
}

fn list(l: &LocalList) -> Vec<(String, u64)> {
    l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect()
}

#[test]
fn tumbling_counts_close_and_seal() {
    let w = WindowSpec::tumbling("t", Span::from_millis(10), 2);
    let mut c = WindowedCounter::new(vec![w], Span::from_millis(5), 0);
    for (item, ts) in [("a", 1), ("b", 2), ("a", 3), ("c", 11)] {
        assert!(c.apply(&ev(item, ts, i64::MIN)).is_none());
    }
    // no tick, nothing closed: nothing emitted
    assert!(c.advance(Millis(5), false).is_empty());
    // tick: both open instances are dirty since they were never emitted
    assert_eq!(c.advance(Millis(5), true).len(), 2);
    // another tick: nothing changed since that emission
    assert!(c.advance(Millis(5), true).is_empty());
    c.apply(&ev("b", 4, 0));
    let out = c.advance(Millis(10), false);
    assert_eq!(out.len(), 1, "[0,10) closed and dirty");
    assert_eq!(list(&out[0]), vec![("a".into(), 2), ("b".into(), 2)]);
    // a late-but-accepted event (wm_before 10 < end 10 + 5) corrects the closed window
    c.apply(&ev("c", 5, 10));
    let out = c.advance(Millis(12), false);
    assert_eq!(
        list(&out[0]),
        vec![("a".into(), 2), ("b".into(), 2)],
        "k=2 cut: c has 1"
    );
    // sealing frees the state; nothing changed so nothing is emitted
    assert!(c.advance(Millis(15), false).is_empty());
    assert_eq!(c.stats().live_instances, 1, "only [10,20) left");
    // an event for the sealed window is dead-lettered as sealed
    let d = c.apply(&ev("a", 1, 0)).expect("sealed drop");
    assert_eq!(d.reason, DeadReason::Sealed);
}

/// After an end of input (everything sealed at +∞, the state freed) the counter goes on
/// with `sealed_after_end`: per window, the instances up to the last one covering the last
/// event time stay sealed — an event for one is a `sealed` dead letter and still counts in
/// the others — and later instances of every window count, even those inside a sealed
/// instance of a larger window. The horizon survives further snapshots and restores.
#[test]
fn instances_sealed_by_an_end_of_input_stay_sealed() {
    let s = Span::from_millis;
    let small = WindowSpec::tumbling("10", s(10), 5);
    let large = WindowSpec::tumbling("100", s(100), 5);
    let windows = vec![small, large];
    let mut ended = WindowedCounter::new(windows.clone(), s(5), 0);
    ended.apply(&ev("a", 42, i64::MIN));
    assert_eq!(
        ended.advance(Millis::MAX, false).len(),
        2,
        "both instances sealed at +∞"
    );
    let mut snap = ended.snapshot();
    assert!(snap.key_groups.is_empty(), "freed");
    snap.watermark = Millis::MIN;
    snap.sealed_until = sealed_after_end(&windows, Millis(42));
    assert_eq!(snap.sealed_until, vec![Millis(50), Millis(100)]);
    let mut c = WindowedCounter::restore(windows.clone(), s(5), 0, 1, &[snap]).expect("restores");
    // [40, 50) and [0, 100) are sealed: an event at 45 counts nowhere
    assert_eq!(c.apply(&ev("b", 45, 40)).map(|d| d.reason), Some(DeadReason::Sealed));
    // 55: [50, 60) counts, [0, 100) is sealed
    assert_eq!(c.apply(&ev("c", 55, 40)).map(|d| d.reason), Some(DeadReason::Sealed));
    // 150: counts in both of its instances
    assert!(c.apply(&ev("d", 150, 40)).is_none());
    let out = c.advance(Millis(200), false);
    let got: BTreeMap<(u16, i64), Vec<(String, u64)>> = out
        .iter()
        .map(|l| ((l.instance.window.0, l.instance.start.0), list(l)))
        .collect();
    let want: BTreeMap<(u16, i64), Vec<(String, u64)>> = [
        ((0, 50), vec![("c".to_string(), 1)]),
        ((0, 150), vec![("d".to_string(), 1)]),
        ((1, 100), vec![("d".to_string(), 1)]),
    ]
    .into();
    assert_eq!(got, want, "nothing for the sealed instances");
    let again = c.snapshot();
    assert_eq!(again.sealed_until, vec![Millis(50), Millis(100)]);
    let mut r = WindowedCounter::restore(windows, s(5), 0, 1, &[again]).expect("restores");
    assert_eq!(r.apply(&ev("e", 99, 40)).map(|d| d.reason), Some(DeadReason::Sealed));
    assert_eq!(sealed_after_end(&[], Millis(1)), Vec::<Millis>::new());
    assert_eq!(sealed_after_end(&r.windows, Millis::MIN), Vec::<Millis>::new());
}

#[test]
fn hopping_exclusions_skip_late_instances_only() {
    // size 20, slide 10: t=15 is in [0,20) and [10,30)
    let w = WindowSpec {
        rank: Default::default(),
        key: Default::default(),
        name: "h".into(),
        size: Span::from_millis(20),
        slide: Span::from_millis(10),
        k: 5,
    };
    let mut c = WindowedCounter::new(vec![w], Span::ZERO, 0);
    c.apply(&ev("a", 15, i64::MIN));
    // wm_before 20: late for [0,20) (end 20 <= 20), on time for [10,30)
    c.apply(&ev("b", 15, 20));
    let out = c.advance(Millis(30), false);
    let by_start: BTreeMap<i64, Vec<(String, u64)>> = out.iter().map(|l| (l.instance.start.0, list(l))).collect();
    assert_eq!(by_start[&0], vec![("a".to_string(), 1)]);
    assert_eq!(by_start[&10], vec![("a".to_string(), 1), ("b".to_string(), 1)]);
    let s = c.stats();
    assert_eq!(
        (s.live_counters, s.live_items, s.live_panes),
        (0, 0, 0),
        "all sealed and freed"
    );
}

#[test]
fn late_for_small_windows_is_not_sealed_for_them() {
    let small = WindowSpec::tumbling("s", Span::from_millis(10), 3);
    let big = WindowSpec::tumbling("b", Span::from_millis(1000), 3);
    let mut c = WindowedCounter::new(vec![small, big], Span::from_millis(5), 0);
    c.apply(&ev("a", 500, i64::MIN));
    c.advance(Millis(490), false);
    // ts 100: late for [100,110) of "s" (wm_before 490 >= 110 + 5), on time for "b"
    assert_eq!(c.apply(&ev("a", 100, 490)), None, "late is not sealed");
    let out = c.advance(Millis::MAX, false);
    let big_list = out
        .iter()
        .find(|l| l.instance.window == WindowId(1))
        .expect("b emitted");
    assert_eq!(big_list.items[0].count, 2);
    assert!(
        out.iter().all(|l| l.instance.start != Millis(100)),
        "no instance for the late pane"
    );
}

proptest::proptest! {
    /// Final lists equal naive counting under the per-partition lateness rule, with the
    /// watermark advancing mid-stream (sealing, freeing panes, spilling inline counts).
    #[test]
    fn final_lists_equal_naive_counts(
        events in proptest::collection::vec((0u8..5, 0i64..6, 0i64..25, proptest::bool::weighted(0.05)), 0..300),
        pool in proptest::sample::subsequence(vec![(10u64, 10u64), (20, 5), (7, 7), (30, 10), (1, 1)], 1..=5),
        ooo in 0i64..8,
        lateness in 0u64..15,
        advance_every in 1usize..30,
    ) {
        let windows: Vec<WindowSpec> = pool.iter().enumerate().map(|(i, (size, slide))| WindowSpec { rank: Default::default(), key: Default::default(),
            name: format!("w{i}"), size: Span::from_millis(*size), slide: Span::from_millis(*slide), k: 3,
        }).collect();
        let mut c = WindowedCounter::new(windows.clone(), Span::from_millis(lateness), 0);
        let mut naive: BTreeMap<(u16, i64), BTreeMap<String, u64>> = BTreeMap::new();
        let mut latest: BTreeMap<(u16, i64), Vec<(String, u64)>> = BTreeMap::new();
        let mut t = 0i64;
        let mut max_ts: Option<i64> = None;
        for (n, (item, step, back, late)) in events.iter().enumerate() {
            t += step;
            let ts = t - back - if *late { 60 } else { 0 };
            let wm_before = max_ts.map_or(i64::MIN, |m| m - ooo);
            // every fourth item's id is too long for a record: it lives in the interner's arena
            let item = if item.is_multiple_of(4) { format!("i{item}-long-enough-for-the-arena") } else { format!("i{item}") };
            prop_assert!(c.apply(&ev(&item, ts, wm_before)).is_none(), "one partition: never sealed-dropped");
            for (wi, w) in windows.iter().enumerate() {
                for start in w.starts_covering(Millis(ts)) {
                    if wm_before == i64::MIN || wm_before < w.end_of(start).0 + lateness as i64 {
                        *naive.entry((wi as u16, start.0)).or_default().entry(item.clone()).or_insert(0) += 1;
                    }
                }
            }
            max_ts = Some(max_ts.map_or(ts, |m| m.max(ts)));
            if n % advance_every == 0 {
                for l in c.advance(Millis(max_ts.unwrap_or(i64::MIN) - ooo), n % 3 == 0) {
                    latest.insert((l.instance.window.0, l.instance.start.0), list(&l));
                }
            }
        }
        for l in c.advance(Millis::MAX, false) {
            latest.insert((l.instance.window.0, l.instance.start.0), list(&l));
        }
        let want: BTreeMap<(u16, i64), Vec<(String, u64)>> = naive.into_iter().map(|(k, m)| {
            let mut v: Vec<(String, u64)> = m.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            v.truncate(3);
            (k, v)
        }).collect();
        latest.retain(|_, v| !v.is_empty());
        prop_assert_eq!(latest, want);
        let s = c.stats();
        prop_assert_eq!((s.live_counters, s.live_items, s.live_panes, s.live_instances), (0, 0, 0, 0));
    }
}

#[test]
fn shared_panes_across_windows() {
    let a = WindowSpec::tumbling("a", Span::from_millis(10), 3);
    let b = WindowSpec {
        rank: Default::default(),
        key: Default::default(),
        name: "b".into(),
        size: Span::from_millis(30),
        slide: Span::from_millis(10),
        k: 3,
    };
    let mut c = WindowedCounter::new(vec![a, b], Span::ZERO, 0);
    for ts in [1, 2, 12, 25] {
        c.apply(&ev("x", ts, i64::MIN));
    }
    assert_eq!(c.stats().live_panes, 3, "one pane store for both windows");
    let out = c.advance(Millis::MAX, false);
    let counts: BTreeMap<(u16, i64), u64> = out
        .iter()
        .map(|l| ((l.instance.window.0, l.instance.start.0), l.items[0].count))
        .collect();
    assert_eq!(counts[&(0, 0)], 2);
    assert_eq!(counts[&(0, 20)], 1);
    assert_eq!(counts[&(1, -20)], 2);
    assert_eq!(counts[&(1, 0)], 4);
    assert_eq!(counts[&(1, 20)], 1);
}

proptest::proptest! {
    /// Counting a batch at once (`apply_all`, which looks up runs of items before counting
    /// them) equals counting its events one by one: the same lists at every advance, the same
    /// dead letters, the same state. Items repeat and are new within a run, some events reach
    /// only sealed instances (their new item is interned, then forgotten, and its record
    /// reused by the next new item of the same run), some have an impossible time.
    #[test]
    fn a_batch_counts_as_its_events_one_by_one(
        batches in proptest::collection::vec(
            proptest::collection::vec((0u8..12, 0i64..40, 0u8..10), 0..60), 1..12),
        lateness in 0u64..10,
    ) {
        let windows = vec![
            WindowSpec::tumbling("t", Span::from_millis(10), 3),
            WindowSpec { rank: Default::default(), key: Default::default(), name: "h".into(),
                size: Span::from_millis(20), slide: Span::from_millis(10), k: 2 },
        ];
        let mut one = WindowedCounter::new(windows.clone(), Span::from_millis(lateness), 0);
        let mut all = WindowedCounter::new(windows, Span::from_millis(lateness), 0);
        let (mut t, mut position) = (100i64, 0u64);
        for batch in &batches {
            let events: Vec<TimedEvent> = batch.iter().map(|&(item, back, kind)| {
                position += 1;
                let ts = match kind {
                    0 => i64::MAX, // not an event time: a `bad` dead letter
                    1 | 2 => t - 60 - back, // sealed by now, mostly
                    _ => t - back,
                };
                let item = if item % 5 == 0 { format!("i{item}-long-enough-for-the-arena") } else { format!("i{item}") };
                TimedEvent { position, ..ev(&item, ts, t - 50) }
            }).collect();
            t += 10;
            let want: Vec<DeadLetter> = events.iter().filter_map(|e| one.apply(e)).collect();
            let mut got = Vec::new();
            all.apply_all(&events, &mut got);
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(one.stats(), all.stats());
            prop_assert_eq!(one.advance(Millis(t - 20), true), all.advance(Millis(t - 20), true));
        }
        prop_assert_eq!(one.advance(Millis::MAX, false), all.advance(Millis::MAX, false));
        prop_assert_eq!(one.stats(), all.stats());
    }
}

/// A count moved out of its record into its closed pane (see `moved`) is found there by a late
/// event, also after its record emptied (an overflow to the map in the newer pane): the late
/// events add to it, and do not start a second count of it in the record, which a look-up
/// would read instead of the first.
#[test]
fn a_moved_count_takes_late_events() {
    let w = WindowSpec::tumbling("t", Span::from_millis(10), 2);
    let mut c = WindowedCounter::new(vec![w], Span::from_millis(10), 0);
    let at = |out: &[LocalList], start: i64| -> Vec<(String, u64)> {
        list(
            out.iter()
                .find(|l| l.instance.start == Millis(start))
                .expect("a list of the instance"),
        )
    };
    for (item, ts) in [("a", 1), ("a", 2), ("b", 3)] {
        assert!(c.apply(&ev(item, ts, i64::MIN)).is_none());
    }
    assert_eq!(
        at(&c.advance(Millis(10), false), 0),
        vec![("a".into(), 2), ("b".into(), 1)]
    );
    // "a" moves out of [0,10) and, past INLINE_MAX (3 under test), its count in [10,20) goes
    // to that pane's map, emptying its record; "b" moves out too
    for ts in 11..=(11 + i64::from(INLINE_MAX)) {
        assert!(c.apply(&ev("a", ts, 10)).is_none());
    }
    assert!(c.apply(&ev("b", 15, 10)).is_none());
    // late events for [0,10) (its end + lateness is past the watermark): "a" twice, then "b",
    // whose record is [10,20)'s, so its count there is looked up in [0,10)'s map
    for (item, ts) in [("a", 4), ("a", 5), ("b", 6)] {
        assert!(c.apply(&ev(item, ts, 10)).is_none());
    }
    // the correction is built from the closed list and the changes since (look-ups)
    assert_eq!(
        at(&c.advance(Millis(12), false), 0),
        vec![("a".into(), 4), ("b".into(), 2)]
    );
    let sealed = c.advance(Millis(40), false);
    assert_eq!(
        at(&sealed, 10),
        vec![("a".into(), u64::from(INLINE_MAX) + 1), ("b".into(), 1)]
    );
    assert_eq!(c.stats().live_counters, 0);
}

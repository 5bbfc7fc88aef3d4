//! Events at the ends of the event time range (years 0000 and 9999) are counted in every window
//! instance covering them or dead-lettered as late, for every window list that validates and
//! lateness up to days: no window arithmetic overflows or saturates there. Times outside the
//! range are dead-lettered as bad (issue 9, item 3: an event at `i64::MIN` used to be counted
//! into a pane that no instance covered — in no list and in no dead letter).
//!
//! The unit of "counted or dead-lettered" is the (event, covering window instance) pair: each
//! pair is in that instance's count, or the event has a dead letter (`late` from the lateness
//! judge, `sealed` or `bad` from the counter) covering that instance.

use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::hash::item_hash;
use hotlist_operators::lateness::LatenessJudge;
use hotlist_operators::record::{DeadReason, EventText, PartitionId, TimedEvent};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::watermark::PartitionClock;
use hotlist_operators::window::{default_windows, validate_all, WindowSpec, MAX_WINDOW_SIZE};
use proptest::prelude::*;
use std::collections::BTreeMap;

const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;
const K: usize = 8; // more than the items: lists are whole counts

fn event(item: &str, ts: i64, wm_before: Millis) -> TimedEvent {
    TimedEvent {
        text: EventText::item(item),
        ts: Millis(ts),
        wm_before,
        hash: item_hash(item),
        partition: PartitionId(0),
        position: 0,
    }
}

/// (size, slide) in ms: calendar windows, the longest window, and random hopping ones
/// (`g·a` every `g·b`: at most 64 panes per instance, since emitting an instance visits each).
fn window_shape() -> impl Strategy<Value = (u64, u64)> {
    let longest = MAX_WINDOW_SIZE.as_millis();
    prop_oneof![
        Just((DAY, DAY)),
        Just((HOUR, HOUR)),
        Just((DAY, HOUR)),
        Just((7 * DAY, DAY)),
        Just((1, 1)),
        Just((longest, longest)),
        Just((longest, longest / 64)),
        (1u64..=DAY, 1u64..=64, 1u64..=64).prop_map(|(g, a, b)| (g * a, g * b.min(a))),
    ]
}

fn window_list() -> impl Strategy<Value = Vec<WindowSpec>> {
    proptest::collection::vec(window_shape(), 1..=4).prop_map(|shapes| {
        shapes
            .into_iter()
            .enumerate()
            .map(|(i, (size, slide))| WindowSpec {
                rank: Default::default(),
                key: Default::default(),
                name: format!("w{i}"),
                size: Span::from_millis(size),
                slide: Span::from_millis(slide),
                k: K,
            })
            .collect()
    })
}

/// An offset into the range from one of its ends: often exactly the end or next to it.
fn offset() -> impl Strategy<Value = i64> {
    prop_oneof![Just(0i64), Just(1), 0i64..(10 * DAY) as i64]
}

/// Starts of every instance of `w` covering `ts`, by scanning in i128 (no overflow possible).
fn covering(w: &WindowSpec, ts: i64) -> Vec<i64> {
    let (t, size, slide) = (ts as i128, w.size.as_millis() as i128, w.slide.as_millis() as i128);
    let lo = (t - size).div_euclid(slide) - 1;
    let hi = t.div_euclid(slide) + 1;
    (lo..=hi)
        .map(|n| n * slide)
        .filter(|s| *s <= t && t < s + size)
        .map(|s| i64::try_from(s).expect("instance starts of event times fit"))
        .collect()
}

type Counts = BTreeMap<(u16, i64), BTreeMap<String, u64>>;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn events_at_the_ends_of_time_are_counted_or_dead_lettered(
        windows in window_list(),
        at_end in any::<bool>(),
        events in proptest::collection::vec((0u8..3, offset()), 1..40),
        ooo in 0u64..=DAY,
        lateness in 0u64..=7 * DAY,
        advance_every in 1usize..8,
    ) {
        prop_assume!(validate_all(&windows).is_ok());
        let lateness = Span::from_millis(lateness);
        let judge = LatenessJudge::new(windows.clone(), lateness);
        let mut clock = PartitionClock::new(Span::from_millis(ooo));
        let mut counter = WindowedCounter::new(windows.clone(), lateness, 0);
        let mut naive = Counts::new();
        let mut lists: BTreeMap<(u16, i64), Vec<(String, u64)>> = BTreeMap::new();
        for (n, (item, off)) in events.iter().enumerate() {
            let ts = if at_end { Millis::MAX_EVENT.0 - off } else { Millis::MIN_EVENT.0 + off };
            let item = format!("i{item}");
            let wm_before = clock.observe(Millis(ts));
            let verdict = judge.judge(Millis(ts), wm_before);
            let (mut late_windows, mut all_late) = (0u64, true);
            for (wi, w) in windows.iter().enumerate() {
                let starts = covering(w, ts);
                prop_assert!(!starts.is_empty(), "{} covers every time", w.name);
                let got: Vec<i64> = w.starts_covering(Millis(ts)).map(|m| m.0).collect();
                prop_assert_eq!(&got, &starts, "window {}", w.name);
                for start in starts {
                    let end = start as i128 + w.size.as_millis() as i128;
                    let late = wm_before != Millis::MIN && wm_before.0 as i128 >= end + lateness.as_millis() as i128;
                    if late {
                        late_windows |= 1 << wi;
                    } else {
                        all_late = false;
                        *naive.entry((wi as u16, start)).or_default().entry(item.clone()).or_insert(0) += 1;
                    }
                }
            }
            // the pairs not counted are exactly the ones the source's late dead letter covers
            prop_assert_eq!(verdict.late_windows, late_windows, "ts {} wm_before {}", ts, wm_before.0);
            prop_assert_eq!(verdict.fully_late, all_late);
            if !verdict.fully_late {
                prop_assert!(counter.apply(&event(&item, ts, wm_before)).is_none(), "one partition: never sealed");
            }
            if n % advance_every == 0 {
                for l in counter.advance(clock.watermark(), n % 3 == 0) {
                    lists.insert((l.instance.window.0, l.instance.start.0), to_pairs(&l.items));
                }
            }
        }
        for l in counter.advance(Millis::MAX, false) {
            lists.insert((l.instance.window.0, l.instance.start.0), to_pairs(&l.items));
        }
        let want: BTreeMap<(u16, i64), Vec<(String, u64)>> = naive
            .into_iter()
            .map(|(key, items)| {
                let mut v: Vec<(String, u64)> = items.into_iter().collect();
                v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                (key, v)
            })
            .collect();
        lists.retain(|_, v| !v.is_empty());
        prop_assert_eq!(lists, want);
        let s = counter.stats();
        prop_assert_eq!((s.live_counters, s.live_items, s.live_panes, s.live_instances), (0, 0, 0, 0));
    }
}

fn to_pairs(items: &[hotlist_operators::record::RankedItem]) -> Vec<(String, u64)> {
    items.iter().map(|r| (r.item_id.to_string(), r.count)).collect()
}

/// Outside the range (the issue's `i64::MIN`, and one past each end) a counter refuses the
/// event as a `bad` dead letter and counts nothing; exactly at the ends it counts it.
#[test]
fn a_counter_dead_letters_times_outside_the_range() {
    let mut windows = default_windows();
    windows.push(WindowSpec::tumbling("all", MAX_WINDOW_SIZE, 3));
    let mut c = WindowedCounter::new(windows, Span::ZERO, 0);
    for ts in [
        i64::MIN,
        Millis::MIN_EVENT.0 - 1,
        Millis::MAX_EVENT.0 + 1,
        9_000_000_000_000_000,
        i64::MAX,
    ] {
        let d = c.apply(&event("a", ts, Millis::MIN)).expect("dead-lettered");
        assert_eq!(d.reason, DeadReason::Bad);
        assert_eq!(d.detail, format!("ts {ts} is outside years 0000-9999"));
        assert_eq!(d.raw, format!(r#"{{"item_id":"a","ts":{ts}}}"#).into_bytes());
    }
    assert_eq!(c.stats().live_counters, 0, "nothing counted");
    for ts in [Millis::MIN_EVENT.0, Millis::MAX_EVENT.0] {
        assert!(c.apply(&event("a", ts, Millis::MIN)).is_none());
    }
    let lists = c.advance(Millis::MAX, false);
    let mut got: Vec<(u16, i64, u64)> = lists
        .iter()
        .map(|l| (l.instance.window.0, l.instance.start.0, l.items[0].count))
        .collect();
    got.sort();
    let day = DAY as i64;
    assert_eq!(
        got,
        vec![
            (0, Millis::MIN_EVENT.0, 1),
            (0, Millis::MAX_EVENT.0 + 1 - 60_000, 1),
            (1, Millis::MIN_EVENT.0, 1),
            (1, Millis::MAX_EVENT.0 + 1 - 300_000, 1),
            (2, Millis::MIN_EVENT.0, 1),
            (2, Millis::MAX_EVENT.0 + 1 - HOUR as i64, 1),
            (3, Millis::MIN_EVENT.0, 1),
            (3, Millis::MAX_EVENT.0 + 1 - day, 1),
            // epoch-aligned: year 0000 is in the instance before 1970, year 9999 in the one after
            (4, -(MAX_WINDOW_SIZE.as_i64()), 1),
            (4, 0, 1),
        ]
    );
}

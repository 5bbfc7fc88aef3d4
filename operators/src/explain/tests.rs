//! The explainer against brute force: random events of a few items, groups, users and
//! partitions, with disorder and watermarks that pass the instance's end.

use super::*;
use crate::group::GroupKey;
use crate::record::EventText;
use proptest::prelude::*;

const START: i64 = 100;
const SIZE: i64 = 100;
const LATENESS: i64 = 30;

/// (item, group value, user, partition, ts, watermark step)
type Ev = (u8, u8, Option<u8>, u8, i64, i64);

fn events_strategy() -> impl Strategy<Value = Vec<Ev>> {
    prop::collection::vec(
        (
            0u8..3,
            0u8..4,
            prop::option::weighted(0.8, 0u8..5),
            0u8..3,
            50i64..260,
            0i64..20,
        ),
        0..120,
    )
}

/// The events as a source would have read them: each partition's watermark before an event
/// grows by the event's step.
fn timed(evs: &[Ev]) -> Vec<(TimedEvent, String)> {
    let mut wm = [0i64; 3];
    evs.iter()
        .map(|&(item, g, user, p, ts, step)| {
            let wm_before = wm[p as usize];
            wm[p as usize] += step;
            let item = format!("i{item}");
            let group = GroupKey::from_pairs([("country", format!("c{g}").as_str())]);
            let e = TimedEvent {
                hash: item_hash(&item),
                text: EventText::new(&item, user.map(|u| format!("u{u}")).as_deref(), &[] as &[&str]),
                ts: Millis(ts),
                wm_before: Millis(wm_before),
                partition: PartitionId(p as u32),
                position: 0,
            };
            (e, group.as_str().to_string())
        })
        .collect()
}

/// What the counters would count for `item` in `group`'s list, by brute force.
fn brute(evs: &[(TimedEvent, String)], w: &WindowSpec, item: &str, group: &GroupKey) -> (u64, BTreeMap<u32, u64>, u64) {
    let end = START + SIZE;
    let counts = |e: &TimedEvent| e.ts.0 >= START && e.ts.0 < end && end + LATENESS > e.wm_before.0;
    let has_user = |e: &TimedEvent| !w.key.distinct_users || e.text.user().is_some();
    let grouped = !w.key.by.is_empty();
    // the instance's groups, their hashes ascending: the first max_groups have lists
    let mut hashes: Vec<u64> = evs
        .iter()
        .filter(|(e, _)| counts(e) && has_user(e))
        .map(|(_, g)| item_hash(g))
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes.truncate(w.key.max_groups as usize);
    let in_list = |g: &str| {
        !grouped
            || if group.is_other() {
                !hashes.contains(&item_hash(g))
            } else {
                g == group.as_str() && hashes.contains(&item_hash(g))
            }
    };
    let mine: Vec<&TimedEvent> = evs
        .iter()
        .filter(|(e, g)| e.item() == item && counts(e) && has_user(e) && in_list(g))
        .map(|(e, _)| e)
        .collect();
    let user = |e: &TimedEvent| e.text.user().map(str::to_string);
    let (count, by_partition) = if w.key.distinct_users {
        let all: BTreeSet<String> = mine.iter().filter_map(|e| user(e)).collect();
        let mut by: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
        for e in &mine {
            by.entry(e.partition.0).or_default().extend(user(e));
        }
        (
            all.len() as u64,
            by.into_iter().map(|(p, u)| (p, u.len() as u64)).collect(),
        )
    } else {
        let mut by: BTreeMap<u32, u64> = BTreeMap::new();
        for e in &mine {
            *by.entry(e.partition.0).or_default() += 1;
        }
        (mine.len() as u64, by)
    };
    let late_accepted = mine.iter().filter(|e| e.wm_before.0 >= end).count() as u64;
    (count, by_partition, late_accepted)
}

fn window(by: bool, distinct: bool, max_groups: u32) -> WindowSpec {
    let mut w = WindowSpec::tumbling("w", Span::from_millis(SIZE as u64), 3);
    if by {
        w.key.by = vec!["country".into()];
    }
    w.key.distinct_users = distinct;
    w.key.max_groups = max_groups;
    w
}

proptest! {
    #[test]
    fn explain_equals_brute_force(
        evs in events_strategy(),
        by in any::<bool>(),
        distinct in any::<bool>(),
        max_groups in 1u32..4,
        item in 0u8..3,
        pick in 0u8..5,
    ) {
        let w = window(by, distinct, max_groups);
        let evs = timed(&evs);
        let item = format!("i{item}");
        let group = match (by, pick) {
            (false, _) => GroupKey::global(),
            (true, 4) => GroupKey::other(),
            (true, g) => GroupKey::from_pairs([("country", format!("c{g}").as_str())]),
        };
        let mut x = Explainer::new(w.clone(), Millis(START), Span::from_millis(LATENESS as u64), &item);
        for (e, g) in &evs {
            let has_user = e.text.user().is_some();
            let g = if by { g.as_str() } else { "" };
            x.event(e, (!distinct || has_user).then_some(g));
        }
        let got = x.finish(&group, true);
        let (count, by_partition, late_accepted) = brute(&evs, &w, &item, &group);
        prop_assert_eq!(got.count, count);
        prop_assert_eq!(got.by_partition, by_partition);
        prop_assert_eq!(got.late_accepted, late_accepted);
        prop_assert!(got.top_users.len() <= TOP_USERS);
        prop_assert!(got.top_users.windows(2).all(|p| p[0].1 >= p[1].1));
        if distinct {
            prop_assert_eq!(got.distinct_users, Some(count));
        }
    }
}

/// A bot shows up as the top user; late-but-accepted and late-dropped events are told apart.
#[test]
fn a_bot_and_late_events_are_named() {
    let w = window(false, false, 10);
    let mut x = Explainer::new(w, Millis(START), Span::from_millis(LATENESS as u64), "a");
    let ev = |user: &str, ts: i64, wm: i64| TimedEvent {
        hash: item_hash("a"),
        text: EventText::new("a", Some(user), &[] as &[&str]),
        ts: Millis(ts),
        wm_before: Millis(wm),
        partition: PartitionId(0),
        position: 0,
    };
    for _ in 0..7 {
        x.event(&ev("bot", 150, 0), Some(""));
    }
    x.event(&ev("ann", 150, 0), Some(""));
    x.event(&ev("bob", 199, 210), Some("")); // after the end, within the lateness
    x.event(&ev("cy", 199, 230), Some("")); // end + lateness: too late
    let got = x.finish(&GroupKey::global(), true);
    assert_eq!(got.count, 9);
    assert_eq!(got.late_accepted, 1);
    assert_eq!(got.distinct_users, Some(3));
    assert_eq!(got.top_users[0], ("bot".to_string(), 7));
}

/// The dead letters' details as the source and the counters word them.
#[test]
fn dropped_from_reads_the_details() {
    let end = Millis(60_000);
    let l = Span::from_millis(1_000);
    let wm = |ms: i64| Millis(ms).to_string();
    let late = |names: &str, at: i64| {
        format!(
            "late for window(s) {names}: partition watermark was {} (allowed lateness 1s)",
            wm(at)
        )
    };
    assert!(dropped_from(DeadReason::Late, &late("1m,5m", 61_000), "1m", end, l));
    assert!(dropped_from(
        DeadReason::Late,
        &(late("1m", 70_000) + " (line 3 of the message)"),
        "1m",
        end,
        l
    ));
    assert!(
        !dropped_from(DeadReason::Late, &late("1m", 60_999), "1m", end, l),
        "within the lateness"
    );
    assert!(
        !dropped_from(DeadReason::Late, &late("10m,5m", 99_000), "1m", end, l),
        "another window"
    );
    let sealed = |at: i64| format!("window already sealed at watermark {}", wm(at));
    assert!(dropped_from(DeadReason::Sealed, &sealed(61_000), "1m", end, l));
    assert!(
        !dropped_from(DeadReason::Sealed, &sealed(60_500), "1m", end, l),
        "a later instance sealed"
    );
    assert!(!dropped_from(DeadReason::Bad, &late("1m", 99_000), "1m", end, l));
}

//! Per-group and distinct-user windows against a brute-force model: random windows of every
//! key shape sharing panes, random users and dims (some missing), disorder and lateness, a
//! snapshot restored onto 1–3 workers mid-stream. The model and the fixtures are in
//! `shaped_fixtures`.

use super::shaped_fixtures::*;
use super::*;
use crate::message::LocalList;
use crate::record::TimedEvent;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    /// Sealed per-group and distinct-user lists equal the model, whatever the restore.
    #[test]
    fn shaped_lists_equal_the_model(
        raw in raw_events(0.9, 3, 5, 250),
        kinds in proptest::collection::vec((0u8..5, 0usize..3, 1u32..5), 1..5),
        run in runs(250),
    ) {
        lists_equal_the_model(raw, windows_of(&kinds), run)?;
    }

    /// The same with many groups: up to 40 countries (some past 16 bytes, some that need an
    /// escape in a group key), `max_groups` up to 63, so an item counts in more groups than a
    /// few; and up to six windows over six pane widths, so some pane groups are past the
    /// [`INLINE_GROUPS`](crate::interner::INLINE_GROUPS) that keep counts in records.
    #[test]
    fn many_groups_and_pane_widths_equal_the_model(
        raw in raw_events(0.5, 40, 4, 300),
        kinds in proptest::collection::vec((0u8..5, 0usize..6, 1u32..64), 1..7),
        run in runs(300),
    ) {
        let sizes = [(10, 10), (20, 5), (7, 7), (9, 3), (4, 4), (6, 2)];
        lists_equal_the_model(raw, windows_sized(&kinds, sizes, 3), run)?;
    }
}

/// How [`lists_equal_the_model`] runs a stream: the disorder, the lateness, where the one counter
/// is snapshotted and restored onto `workers`, the events of an epoch after it, and whether the
/// counters note their own groups.
#[derive(Clone, Debug)]
struct Run {
    ooo: i64,
    lateness: i64,
    cut: usize,
    workers: usize,
    every: usize,
    own: bool,
}

/// Streams of up to `events` events: six items, a user with probability `users` (of four), a
/// country of `countries` (one in twenty missing when many, else one in five), steps below
/// `step`.
fn raw_events(users: f64, countries: u8, step: i64, events: usize) -> impl Strategy<Value = Vec<RawEv>> {
    let with_country = if countries > 3 { 0.95 } else { 0.8 };
    let event = (
        0u8..6,
        proptest::option::weighted(users, 0u8..4),
        proptest::option::weighted(with_country, 0u8..countries),
        0u8..2,
        0i64..step,
        0i64..20,
        proptest::bool::weighted(0.05),
    );
    proptest::collection::vec(event, 0..events)
}

/// Runs drawn for streams of up to `events` events.
fn runs(events: usize) -> impl Strategy<Value = Run> {
    (0i64..6, 0i64..12, 0usize..events, 1usize..4, 1usize..40, any::<bool>()).prop_map(
        |(ooo, lateness, cut, workers, every, own)| Run {
            ooo,
            lateness,
            cut,
            workers,
            every,
            own,
        },
    )
}

/// The stream `raw` counted by `windows` as `run` says gives the model's sealed lists, and the
/// counters end with nothing live.
fn lists_equal_the_model(raw: Vec<RawEv>, windows: Vec<WindowSpec>, run: Run) -> Result<(), TestCaseError> {
    let Run {
        ooo,
        lateness,
        cut,
        workers,
        every,
        own,
    } = run;
    let dims = job_dims(&windows);
    let evs = events_of(raw, ooo);
    let span = Span::from_millis(lateness as u64);
    let mut c = WindowedCounter::new(windows.clone(), span, 0);
    // (`own`: the one counter before the cut, and the one after it when one worker
    // restores, note their own groups: the dataflow's single worker)
    if own {
        c.note_own_groups();
    }
    // group announcements, made before routing (as the dataflow does), given to every worker
    let mut noter = crate::group::GroupNoter::new(&windows, span);
    let mut note = |ev: &TimedEvent, announced: bool| {
        let mut notes = Vec::new();
        if let Some(n) = noter.as_mut().filter(|_| announced) {
            n.note(ev, &mut notes);
        }
        notes
    };
    let mut got = BTreeMap::new();
    let cut = cut.min(evs.len());
    let mut max_seen = i64::MIN;
    let mut notes = Vec::new();
    for e in &evs[..cut] {
        let t = timed(e, &dims);
        prop_assert!(c.apply(&t).is_none());
        notes.extend(note(&t, !own));
        max_seen = max_seen.max(e.ts);
    }
    c.note_groups(&notes);
    let wm = if max_seen == i64::MIN {
        Millis::MIN
    } else {
        Millis(max_seen - ooo)
    };
    collect(c.advance(wm, true), &mut got);
    // restore onto `workers` workers, route the rest by item, finish
    let snap = c.snapshot();
    let mut cs: Vec<WindowedCounter> = (0..workers)
        .map(|w| {
            WindowedCounter::restore(windows.clone(), span, w as u32, workers, std::slice::from_ref(&snap)).unwrap()
        })
        .collect();
    let own = own && workers == 1;
    if own {
        cs[0].note_own_groups();
    }
    // the merger starts afresh from a restore: lists of instances sealed before it stay
    let mut before = std::mem::take(&mut got);
    before.retain(|(w, start, _), _| windows[*w as usize].end_of(Millis(*start)) <= wm.minus(span));
    // epochs of `every` events, each ending with its announcements and a tick
    let mut notes = Vec::new();
    for (n, e) in evs[cut..].iter().enumerate() {
        let t = timed(e, &dims);
        let w = crate::hash::key_group(t.hash) as usize % workers;
        prop_assert!(cs[w].apply(&t).is_none());
        notes.extend(note(&t, !own));
        max_seen = max_seen.max(e.ts);
        if n % every == every - 1 {
            for c in cs.iter_mut() {
                c.note_groups(&notes);
                collect(c.advance(Millis(max_seen - ooo), true), &mut got);
            }
            notes.clear();
        }
    }
    for c in cs.iter_mut() {
        c.note_groups(&notes);
        collect(c.advance(Millis::MAX, false), &mut got);
    }
    for (key, lists) in before {
        got.entry(key).or_insert(lists);
    }
    let mut merged: Lists = BTreeMap::new();
    for (key, per_worker) in got {
        let k = windows[key.0 as usize].k;
        let mut all: Vec<(String, u64)> = per_worker.into_values().flatten().collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(k);
        merged.insert(key, all);
    }
    merged.retain(|_, v| !v.is_empty());
    prop_assert_eq!(merged, model(&windows, &evs, lateness, &dims));
    for c in &cs {
        let s = c.stats();
        prop_assert_eq!(
            (s.live_counters, s.live_items, s.live_panes, s.live_users, s.live_groups),
            (0, 0, 0, 0, 0)
        );
    }
    Ok(())
}

/// The groups in `(other)` are reported per window while the instance lives: three groups with
/// `max_groups = 2` make one, and `(other)` holds its event.
#[test]
fn folded_groups_are_reported() {
    let windows = vec![WindowSpec {
        rank: Default::default(),
        name: "by".into(),
        size: Span::from_millis(10),
        slide: Span::from_millis(10),
        k: 3,
        key: shape(1, 2),
    }];
    let dims = job_dims(&windows);
    let mut c = WindowedCounter::new(windows.clone(), Span::ZERO, 0);
    let mut noter = crate::group::GroupNoter::new(&windows, Span::ZERO).expect("a by window");
    let mut notes = Vec::new();
    for country in 0..3 {
        let e = Ev {
            item: country,
            user: None,
            country: Some(country),
            device: 0,
            ts: 1,
            wm_before: i64::MIN,
        };
        let t = timed(&e, &dims);
        assert!(c.apply(&t).is_none());
        noter.note(&t, &mut notes);
    }
    assert_eq!(notes.len(), 3, "one announcement per group");
    c.note_groups(&notes);
    assert_eq!(c.overflow_groups(), BTreeMap::from([("by".to_string(), 1)]));
    let lists = c.advance(Millis::MAX, false);
    let groups: Vec<(String, usize)> = lists.iter().map(|l| (l.group.to_string(), l.items.len())).collect();
    assert_eq!(groups.len(), 3, "two groups and (other): {groups:?}");
    assert!(groups.contains(&("(other)".to_string(), 1)), "{groups:?}");
    assert!(c.overflow_groups().is_empty(), "a sealed instance is forgotten");
}

/// Forty events in time order, one per millisecond, over 5 items and 3 countries, event
/// `n`'s user `user(n)`: the tick tests' input.
fn forty_in_order(user: impl Fn(i64) -> Option<u8>) -> Vec<Ev> {
    (0..40)
        .map(|n| Ev {
            item: (n * 7 % 5) as u8,
            user: user(n),
            country: Some((n % 3) as u8),
            device: 0,
            ts: n,
            wm_before: if n == 0 { i64::MIN } else { n - 1 },
        })
        .collect()
}

/// Runs `evs` through one counter, announcing groups and ending an epoch (with a tick) after
/// each event whose `ticks` flag is set; returns the latest list per (window, start, group)
/// (empty ones dropped) and the counter's (incremental, recounted) emissions.
fn run_with_ticks(windows: &[WindowSpec], evs: &[Ev], ticks: &[bool], ooo: i64, lateness: i64) -> (Lists, (u64, u64)) {
    let dims = job_dims(windows);
    let span = Span::from_millis(lateness as u64);
    let mut c = WindowedCounter::new(windows.to_vec(), span, 0);
    let mut noter = crate::group::GroupNoter::new(windows, span);
    let (mut got, mut notes, mut max_seen) = (PerWorker::new(), Vec::new(), i64::MIN);
    for (e, tick) in evs.iter().zip(ticks.iter().chain(std::iter::repeat(&false))) {
        let t = timed(e, &dims);
        assert!(c.apply(&t).is_none());
        if let Some(n) = noter.as_mut() {
            n.note(&t, &mut notes);
        }
        max_seen = max_seen.max(e.ts);
        if *tick {
            c.note_groups(&notes);
            notes.clear();
            collect(c.advance(Millis(max_seen - ooo), true), &mut got);
        }
    }
    c.note_groups(&notes);
    collect(c.advance(Millis::MAX, false), &mut got);
    (one_worker(got), c.stats().emits)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    /// Per-group lists emitted incrementally at random ticks equal the recount at every emit
    /// (checked inside the counter: it panics on a difference) and the model at the end, with
    /// distinct-user and global windows sharing the panes, folds into `(other)` and lateness.
    #[test]
    fn incremental_group_lists_equal_recounts(
        raw in proptest::collection::vec((0u8..8, proptest::option::weighted(0.9, 0u8..4), proptest::option::weighted(0.9, 0u8..3), 0u8..2, 0i64..4, 0i64..15, proptest::bool::weighted(0.05), proptest::bool::weighted(0.2)), 0..300),
        kinds in proptest::collection::vec((0u8..5, 0usize..3, 1u32..7), 1..5),
        ooo in 0i64..6,
        lateness in 0i64..12,
    ) {
        let windows = ticked_windows(&kinds);
        let (mut evs, mut ticks) = (Vec::new(), Vec::new());
        let (mut t, mut max_ts) = (0i64, i64::MIN);
        for (item, user, country, device, step, back, late, tick) in raw {
            t += step;
            let ts = t - back - if late { 40 } else { 0 };
            let wm_before = if max_ts == i64::MIN { i64::MIN } else { max_ts - ooo };
            evs.push(Ev { item, user, country, device, ts, wm_before });
            ticks.push(tick);
            max_ts = max_ts.max(ts);
        }
        let (lists, _) = run_with_ticks(&windows, &evs, &ticks, ooo, lateness);
        prop_assert_eq!(lists, model(&windows, &evs, lateness, &job_dims(&windows)));
    }
}

/// A list as (window, start, group, items).
type Emitted = (u16, i64, String, Vec<(String, u64)>);

/// Every list a counter emits, in order.
fn emitted(lists: Vec<LocalList>) -> Vec<Emitted> {
    let mut out: Vec<_> = lists
        .into_iter()
        .map(|l| {
            let items = l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
            (l.instance.window.0, l.instance.start.0, l.group.to_string(), items)
        })
        .collect();
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    /// A counter that notes its own groups (the job's one worker, whose sources announce
    /// none) knows the groups the announcements tell: at random ticks it emits the same lists
    /// (provisional ones too) and reports the same folds, and its snapshots hold the same
    /// groups, with windows of every shape sharing panes, few `max_groups`, disorder, late
    /// events and exclusions, from two partitions (an event late for an instance may be
    /// followed in its pane by one of the other partition on time for it).
    #[test]
    fn own_group_notes_equal_the_announcements(
        raw in proptest::collection::vec((0u8..8, proptest::option::weighted(0.9, 0u8..4), proptest::option::weighted(0.9, 0u8..5), 0u8..2, 0i64..4, 0i64..15, proptest::bool::weighted(0.1), proptest::bool::weighted(0.2)), 0..300),
        lags in proptest::collection::vec(proptest::bool::weighted(0.3), 300),
        kinds in proptest::collection::vec((0u8..5, 0usize..3, 1u32..4), 1..5),
        ooo in 0i64..6,
        lateness in 0i64..12,
    ) {
        let windows = ticked_windows(&kinds);
        let dims = job_dims(&windows);
        let span = Span::from_millis(lateness as u64);
        let mut told = WindowedCounter::new(windows.clone(), span, 0);
        let mut own = WindowedCounter::new(windows.clone(), span, 0);
        own.note_own_groups();
        let mut noter = crate::group::GroupNoter::new(&windows, span);
        // per partition, its largest event time; the second one's events lag by 30
        let (mut notes, mut t, mut max_ts) = (Vec::new(), 0i64, [i64::MIN; 2]);
        let watermark = |m: i64| if m == i64::MIN { i64::MIN } else { m - ooo };
        for ((item, user, country, device, step, back, late, tick), lag) in raw.into_iter().zip(lags) {
            t += step;
            let p = usize::from(lag);
            let ts = t - back - if late { 40 } else { 0 } - if lag { 30 } else { 0 };
            let wm_before = watermark(max_ts[p]);
            let ev = timed(&Ev { item, user, country, device, ts, wm_before }, &dims);
            max_ts[p] = max_ts[p].max(ts);
            prop_assert_eq!(told.apply(&ev), own.apply(&ev));
            if let Some(n) = noter.as_mut() {
                n.note(&ev, &mut notes);
            }
            if tick {
                told.note_groups(&notes);
                notes.clear();
                prop_assert_eq!(told.overflow_groups(), own.overflow_groups());
                prop_assert_eq!(told.snapshot().groups_seen, own.snapshot().groups_seen);
                let wm = Millis(watermark(max_ts[0].min(max_ts[1])));
                prop_assert_eq!(emitted(told.advance(wm, true)), emitted(own.advance(wm, true)));
            }
        }
        told.note_groups(&notes);
        prop_assert_eq!(told.overflow_groups(), own.overflow_groups());
        prop_assert_eq!(emitted(told.advance(Millis::MAX, false)), emitted(own.advance(Millis::MAX, false)));
    }
}

/// A per-group window's lists at ticks are built from its last lists and the keys changed
/// since, not recounted (all but the first emission of each instance).
#[test]
fn group_ticks_emit_incrementally() {
    let windows = vec![WindowSpec {
        rank: Default::default(),
        name: "by".into(),
        size: Span::from_millis(100),
        slide: Span::from_millis(100),
        k: 2,
        key: shape(1, 10),
    }];
    let evs = forty_in_order(|_| None);
    let ticks: Vec<bool> = (0..40).map(|n| n % 4 == 3).collect();
    let (lists, (incremental, recounted)) = run_with_ticks(&windows, &evs, &ticks, 0, 0);
    assert_eq!(lists, model(&windows, &evs, 0, &job_dims(&windows)));
    assert_eq!(
        (incremental, recounted),
        (9, 1),
        "ten ticks: one recount (the first emission), then incremental"
    );
}

/// A snapshot holds each key shape's counts under the text of its counter key (`group NUL
/// item`, `group NUL item NUL user`; a group value escaped), whatever the counter keeps in
/// memory: checkpoints written by one build are read by the next, so this text is a format.
#[test]
fn snapshots_hold_each_shape_under_its_key_text() {
    let windows = windows_sized(&[(1, 0, 10), (2, 0, 10), (3, 0, 10), (4, 0, 10)], [(10, 10)], 3);
    let dims = job_dims(&windows);
    let mut c = WindowedCounter::new(windows, Span::ZERO, 0);
    // (item, user, country: "US" or "a b", device, ts)
    for (item, user, country, device, ts) in [(1, 1, 0, 0, 1), (1, 2, 0, 0, 2), (2, 1, 1, 1, 3), (1, 1, 0, 0, 4)] {
        let e = Ev {
            item,
            user: Some(user),
            country: Some(country),
            device,
            ts,
            wm_before: i64::MIN,
        };
        assert!(c.apply(&timed(&e, &dims)).is_none());
    }
    let snap = c.snapshot();
    let got: BTreeSet<(String, u64)> = snap
        .key_groups
        .iter()
        .flat_map(|kg| kg.panes.iter())
        .flat_map(|p| p.items.iter().map(|(id, n)| (id.to_string(), *n)))
        .collect();
    let want: BTreeSet<(String, u64)> = [
        ("country=US\0i1", 3),
        ("country=a%20b\0i2", 1),
        ("country=US&device=d0\0i1", 3),
        ("country=a%20b&device=d1\0i2", 1),
        ("\0i1\0u1", 1),
        ("\0i1\0u2", 1),
        ("\0i2\0u1", 1),
        ("country=US\0i1\0u1", 1),
        ("country=US\0i1\0u2", 1),
        ("country=a%20b\0i2\0u1", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(got, want);
}

/// Emit generations are 8 bits for per-group windows too: when they wrap, no change goes
/// unlogged (a key outside the lists, last logged in generation 1, changes again once the
/// generation is 1 again; the counter checks each incremental list against the recount).
#[test]
fn group_generations_wrap_without_losing_changes() {
    let windows = windows_sized(&[(1, 0, 10), (1, 1, 10)], [(20, 10), (7, 7)], 1);
    let dims = job_dims(&windows);
    let at = |item: u8, ts: i64, wm_before: i64| {
        let e = Ev {
            item,
            user: None,
            country: Some(0),
            device: 0,
            ts,
            wm_before,
        };
        timed(&e, &dims)
    };
    let mut c = WindowedCounter::new(windows, Span::ZERO, 0);
    c.note_own_groups();
    c.apply(&at(1, 1, i64::MIN));
    c.apply(&at(2, 1, i64::MIN));
    c.advance(Millis(1), true);
    assert_eq!(c.gen, 2);
    // emissions elsewhere (instances after 20) move the generation on
    while c.gen != 1 {
        c.apply(&at(3, 25, 1));
        c.advance(Millis(1), true);
    }
    // (two events: the count stays inline, where only the generation decides the logging)
    c.apply(&at(2, 3, 1));
    c.apply(&at(2, 3, 1));
    let out = c.advance(Millis(1), true);
    let first = out
        .iter()
        .find(|l| l.instance.start == Millis(0) && l.instance.window.0 == 0)
        .expect("[0, 20) emitted");
    assert_eq!(first.group.to_string(), "country=US");
    assert_eq!(first.items[0].item_id, "i2", "i2's change was logged");
    assert!(c.stats().emits.0 > 255);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    /// Distinct-user windows only (global and per group, tumbling and hopping), many users, at
    /// random ticks: every incremental list and every instance's user counts equal the recount
    /// (checked inside the counter: it panics on a difference), the final lists equal the
    /// model, with disorder, late events and exclusions, and events of lagging partitions (a
    /// lower watermark: on time for an instance that excluded the same key in the same pane
    /// before); a global one emits incrementally.
    #[test]
    fn incremental_distinct_user_lists_equal_recounts(
        raw in proptest::collection::vec((0u8..6, proptest::option::weighted(0.95, 0u8..12), proptest::option::weighted(0.9, 0u8..3), 0i64..4, 0i64..15, proptest::bool::weighted(0.05), proptest::bool::weighted(0.25), proptest::option::weighted(0.3, 1i64..20)), 0..300),
        kinds in proptest::collection::vec((3u8..5, 0usize..3, 1u32..5), 1..4),
        ooo in 0i64..6,
        lateness in 0i64..12,
    ) {
        let windows = ticked_windows(&kinds);
        let (mut evs, mut ticks) = (Vec::new(), Vec::new());
        // (a lagging partition's watermark is still at or past the last global one)
        let (mut t, mut max_ts, mut global_wm) = (0i64, i64::MIN, i64::MIN);
        for (item, user, country, step, back, late, tick, lag) in raw {
            t += step;
            let ts = t - back - if late { 40 } else { 0 };
            let wm_before = if max_ts == i64::MIN { i64::MIN } else { (max_ts - ooo - lag.unwrap_or(0)).max(global_wm) };
            evs.push(Ev { item, user, country, device: 0, ts, wm_before });
            ticks.push(tick);
            max_ts = max_ts.max(ts);
            if tick {
                global_wm = max_ts - ooo;
            }
        }
        let (lists, (incremental, _)) = run_with_ticks(&windows, &evs, &ticks, ooo, lateness);
        prop_assert_eq!(lists, model(&windows, &evs, lateness, &job_dims(&windows)));
        let global = kinds.iter().any(|(kind, _, _)| *kind == 3);
        prop_assert!(!global || evs.len() < 150 || incremental > 0, "a global distinct-user window emits incrementally");
    }
}

/// Distinct-user windows' lists at ticks, global and per group, are built from their last
/// lists and what changed since, not recounted, and equal the model. Tumbling, one pane each,
/// both are paired (their keys count users, see `pairs`) and recount only their first
/// emission; a hopping per-group window keeps user counts instead and recounts the first two
/// emissions of each of its instances (its user counts are built at the second). With groups
/// in `(other)` (`max_groups` 1 of 3 countries) they recount as often: `(other)`'s counts are
/// built with the rest and kept as events are counted (see `others`); before, every emission of
/// a folded instance recounted.
#[test]
fn distinct_user_ticks_emit_incrementally() {
    // (per window: kind, max_groups, slide; then the (incremental, recounted) emissions
    // expected over ten ticks: a tumbling window has one instance here, a hopping one two)
    type Case = (&'static [(u8, u32, u64)], (u64, u64));
    let cases: [Case; 4] = [
        (&[(3, 0, 100), (4, 10, 100)], (9 + 9, 1 + 1)),
        (&[(4, 10, 50)], (2 * 8, 2 * 2)),
        (&[(4, 1, 100)], (9, 1)),
        (&[(4, 1, 50)], (2 * 8, 2 * 2)),
    ];
    for (spec, expected) in cases {
        let windows: Vec<WindowSpec> = spec
            .iter()
            .map(|&(kind, max_groups, slide)| WindowSpec {
                rank: Default::default(),
                name: format!("w{kind}"),
                size: Span::from_millis(100),
                slide: Span::from_millis(slide),
                k: 2,
                key: shape(kind, max_groups),
            })
            .collect();
        let evs = forty_in_order(|n| Some((n * 3 % 7) as u8));
        let ticks: Vec<bool> = (0..40).map(|n| n % 4 == 3).collect();
        let (lists, emits) = run_with_ticks(&windows, &evs, &ticks, 0, 0);
        assert_eq!(lists, model(&windows, &evs, 0, &job_dims(&windows)));
        assert_eq!(emits, expected, "ten ticks per instance of {spec:?}");
    }
}

/// A key counted in a pane but excluded from one of its instances (late there) is not yet a
/// user of that instance: when a lagging partition's event of the same key in the same pane is
/// on time for it, its item gains the user there (the pane's count was already positive).
#[test]
fn a_lagging_partition_adds_a_user_where_the_key_was_excluded() {
    let windows = vec![WindowSpec {
        rank: Default::default(),
        name: "d".into(),
        size: Span::from_millis(20),
        slide: Span::from_millis(10),
        k: 2,
        key: shape(3, 0),
    }];
    let ev = |item, ts, wm_before| Ev {
        item,
        user: Some(1),
        country: None,
        device: 0,
        ts,
        wm_before,
    };
    // [0, 20) and [10, 30) emit at 11, twice (keeping user counts from the second recount on);
    // i1 at 12 is late for [0, 20) only; i1 at 13 from a partition at 11 is on time for both
    let evs = vec![ev(0, 11, i64::MIN), ev(0, 11, 11), ev(1, 12, 20), ev(1, 13, 11)];
    let (lists, (incremental, _)) = run_with_ticks(&windows, &evs, &[true, true, false, true], 2, 0);
    assert_eq!(lists, model(&windows, &evs, 0, &job_dims(&windows)));
    assert_eq!(
        lists[&(0, 0, String::new())],
        vec![("i0-long-enough-for-the-arena".to_string(), 1), ("i1".to_string(), 1)]
    );
    assert_eq!(incremental, 2, "both instances' third lists are incremental");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    /// With per-group and distinct-user windows too, counting a batch at once (`apply_all`,
    /// which builds and looks up a run's keys before counting it) equals counting its events
    /// one by one: the same lists at every advance, dead letters and gauges. Keys repeat and
    /// are new within a run, some events lack a user or a country, some reach only sealed
    /// instances (their new keys interned, then forgotten and reused), some have an impossible
    /// time.
    #[test]
    fn a_shaped_batch_counts_as_its_events_one_by_one(
        batches in proptest::collection::vec(proptest::collection::vec(
            (0u8..6, proptest::option::weighted(0.9, 0u8..4), proptest::option::weighted(0.8, 0u8..3), 0u8..2, 0i64..40, 0u8..10), 0..50), 1..10),
        kinds in proptest::collection::vec((0u8..5, 0usize..3, 1u32..5), 1..5),
        lateness in 0u64..10,
    ) {
        let windows = windows_of(&kinds);
        let dims = job_dims(&windows);
        let span = Span::from_millis(lateness);
        let mut one = WindowedCounter::new(windows.clone(), span, 0);
        let mut all = WindowedCounter::new(windows.clone(), span, 0);
        let mut noter = crate::group::GroupNoter::new(&windows, span);
        let (mut t, mut position) = (100i64, 0u64);
        for batch in &batches {
            let events: Vec<TimedEvent> = batch.iter().map(|&(item, user, country, device, back, kind)| {
                position += 1;
                let ts = match kind {
                    0 => i64::MAX, // not an event time: a `bad` dead letter
                    1 | 2 => t - 60 - back, // sealed by now, mostly
                    _ => t - back,
                };
                let e = Ev { item, user, country, device, ts, wm_before: t - 50 };
                TimedEvent { position, ..timed(&e, &dims) }
            }).collect();
            t += 10;
            let mut notes = Vec::new();
            if let Some(n) = noter.as_mut() {
                for ev in events.iter().filter(|ev| ev.ts.is_event_time()) {
                    n.note(ev, &mut notes);
                }
            }
            let want: Vec<_> = events.iter().filter_map(|e| one.apply(e)).collect();
            let mut got = Vec::new();
            all.apply_all(&events, &mut got);
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(one.stats(), all.stats());
            one.note_groups(&notes);
            all.note_groups(&notes);
            prop_assert_eq!(one.advance(Millis(t - 20), true), all.advance(Millis(t - 20), true));
        }
        prop_assert_eq!(one.advance(Millis::MAX, false), all.advance(Millis::MAX, false));
        prop_assert_eq!(one.stats(), all.stats());
    }
}

/// A paired window (global distinct users, tumbling: see `pairs`) writes each (item, user) of a
/// pane once, as a key of count 1, and restores keys of any count as one user each: an older
/// snapshot's, whose keys counted events, restores to the same lists.
#[test]
fn a_paired_window_restores_user_keys_of_any_count() {
    let windows = vec![WindowSpec {
        rank: Default::default(),
        name: "w".into(),
        size: Span::from_millis(100),
        slide: Span::from_millis(100),
        k: 3,
        key: shape(3, 0),
    }];
    let dims = job_dims(&windows);
    let evs: Vec<Ev> = (0..60)
        .map(|n| Ev {
            item: (n % 4) as u8,
            user: Some((n % 3) as u8),
            country: None,
            device: 0,
            ts: n * 3,
            wm_before: if n == 0 { i64::MIN } else { n * 3 - 3 },
        })
        .collect();
    let mut c = WindowedCounter::new(windows.clone(), Span::ZERO, 0);
    for e in &evs[..30] {
        assert!(c.apply(&timed(e, &dims)).is_none());
    }
    let mut got = PerWorker::new();
    collect(c.advance(Millis(87), true), &mut got);
    let mut snap = c.snapshot();
    let mut keys = 0;
    for kg in &mut snap.key_groups {
        for pane in &mut kg.panes {
            for (id, count) in &mut pane.items {
                assert!(
                    crate::group::split_key(id.as_str()).2.is_some(),
                    "{id:?} is a user's key"
                );
                assert_eq!(*count, 1, "a pair is written once");
                *count = 3;
                keys += 1;
            }
        }
    }
    assert_eq!(keys, 12, "4 items x 3 users in the first pane");
    let mut r = WindowedCounter::restore(windows.clone(), Span::ZERO, 0, 1, std::slice::from_ref(&snap)).unwrap();
    let mut after = PerWorker::new();
    for e in &evs[30..] {
        assert!(r.apply(&timed(e, &dims)).is_none());
    }
    collect(r.advance(Millis::MAX, false), &mut after);
    assert_eq!(one_worker(after), model(&windows, &evs, 0, &dims));
    let s = r.stats();
    assert_eq!((s.live_items, s.live_users, s.live_groups), (0, 0, 0));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    /// A job whose windows all count events per one dim reads most events as their keys
    /// (`EventText::keyed`: one without a user whose value needs no escape) and counts runs
    /// of them without writing their keys anew; its sealed lists equal the model, counted in
    /// batches of any size, with the other events' texts in between.
    #[test]
    fn keyed_batches_equal_the_model(
        raw in proptest::collection::vec((
            0u8..6,
            prop_oneof![8 => Just(Some(0u8)), 1 => (1u8..3).prop_map(Some), 2 => Just(None)],
            0i64..5,
            0i64..20,
            proptest::bool::weighted(0.05),
        ), 0..250),
        sizes in proptest::collection::vec((0usize..3, 1u32..5), 1..4),
        ooo in 0i64..6,
        lateness in 0i64..12,
        batch in 1usize..40,
    ) {
        let kinds: Vec<(u8, usize, u32)> = sizes.iter().map(|&(size, groups)| (1, size, groups)).collect();
        let windows = windows_of(&kinds);
        let dims = job_dims(&windows);
        prop_assert_eq!(Shapes::new(&windows).keyed(), Some(1));
        let mut evs = Vec::new();
        let (mut t, mut max_ts) = (0i64, i64::MIN);
        for (item, country, step, back, late) in raw {
            t += step;
            let ts = t - back - if late { 40 } else { 0 };
            let wm_before = if max_ts == i64::MIN { i64::MIN } else { max_ts - ooo };
            evs.push(Ev { item, user: None, country, device: 0, ts, wm_before });
            max_ts = max_ts.max(ts);
        }
        let mut c = WindowedCounter::new(windows.clone(), Span::from_millis(lateness as u64), 0);
        c.note_own_groups();
        let (mut got, mut max_seen) = (PerWorker::new(), i64::MIN);
        for chunk in evs.chunks(batch) {
            let events: Vec<TimedEvent> = chunk.iter().map(|e| timed(e, &dims)).collect();
            let mut dead = Vec::new();
            c.apply_all(&events, &mut dead);
            prop_assert!(dead.is_empty(), "{:?}", dead);
            max_seen = chunk.iter().map(|e| e.ts).fold(max_seen, i64::max);
            collect(c.advance(Millis(max_seen - ooo), true), &mut got);
        }
        collect(c.advance(Millis::MAX, false), &mut got);
        prop_assert_eq!(one_worker(got), model(&windows, &evs, lateness, &dims));
        let s = c.stats();
        prop_assert_eq!((s.live_counters, s.live_items, s.live_panes, s.live_groups), (0, 0, 0, 0));
    }
}

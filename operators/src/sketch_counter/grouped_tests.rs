//! Per-group sketch windows against a brute-force model: random groups (more than
//! `max_groups`, so some fold into `(other)`), tiny tables, 1–3 workers, announcements after
//! each epoch's events as the dataflow makes them, and a restore onto another worker count.

use super::snapshot::SketchCounterSnapshotV6;
use super::*;
use crate::counting::SketchSpec;
use crate::group::{GroupNoter, KeyShape};
use crate::merge::ListMerger;
use crate::message::PublishedList;
use crate::record::{EventText, ListState, PartitionId};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const LATENESS: Span = Span::from_millis(3);

fn spec(candidates: usize, epsilon: f64) -> SketchSpec {
    SketchSpec {
        algorithm: crate::counting::Algorithm::Cms,
        epsilon,
        delta: 0.001,
        candidates,
        conservative: false,
        exact_at_seal: false,
    }
}

fn by_country(name: &str, size: u64, slide: u64, k: usize, max_groups: u32) -> WindowSpec {
    WindowSpec {
        rank: Default::default(),
        name: name.into(),
        size: Span::from_millis(size),
        slide: Span::from_millis(slide),
        k,
        key: KeyShape {
            by: vec!["country".into()],
            distinct_users: false,
            max_groups,
        },
    }
}

fn ev(item: &str, country: &str, ts: i64, wm_before: i64, position: u64) -> TimedEvent {
    ev_by(item, country, None, ts, wm_before, position)
}

fn ev_by(item: &str, country: &str, user: Option<&str>, ts: i64, wm_before: i64, position: u64) -> TimedEvent {
    TimedEvent {
        hash: item_hash(item),
        text: EventText::new(item, user, &[country]),
        ts: Millis(ts),
        wm_before: Millis(wm_before),
        partition: PartitionId(0),
        position,
    }
}

fn group_of(country: &str) -> String {
    GroupKey::from_pairs([("country", country)]).as_str().to_string()
}

/// `workers` sketch counters and a merger, fed as the dataflow feeds them: events to the
/// worker owning their item, the epoch's announcements to every worker, then one advance.
struct Job {
    windows: Vec<WindowSpec>,
    counting: Vec<Counting>,
    counters: Vec<SketchCounter>,
    merger: ListMerger,
    noter: GroupNoter,
}

impl Job {
    fn new(windows: &[WindowSpec], counting: &[Counting], workers: usize) -> Job {
        Job {
            windows: windows.to_vec(),
            counting: counting.to_vec(),
            counters: (0..workers)
                .map(|w| SketchCounter::new(windows.to_vec(), counting.to_vec(), LATENESS, w as u32, workers))
                .collect(),
            merger: ListMerger::new(windows.to_vec(), LATENESS).with_counting(counting),
            noter: GroupNoter::new(windows, LATENESS).expect("per-group windows"),
        }
    }

    fn epoch(&mut self, events: &[TimedEvent], wm: Millis, tick: bool) -> Vec<PublishedList> {
        let n = self.counters.len() as u32;
        let mut batches: Vec<Vec<TimedEvent>> = vec![Vec::new(); n as usize];
        let mut notes = Vec::new();
        for e in events {
            batches[(key_group(e.hash) % n) as usize].push(e.clone());
            self.noter.note(e, &mut notes);
        }
        let mut dead = Vec::new();
        for (c, batch) in self.counters.iter_mut().zip(batches) {
            c.apply_epoch(&[batch], &mut dead);
        }
        for c in &mut self.counters {
            c.note_groups(&notes);
            for l in c.advance(wm, tick) {
                self.merger.receive(l);
            }
        }
        self.merger.advance(wm, Millis(0))
    }

    /// Every counter checkpointed and restored onto `workers` workers.
    fn restore_onto(&mut self, workers: usize, wm: Millis) {
        let snaps: Vec<SketchCounterSnapshot> = self.counters.iter().map(|c| c.snapshot()).collect();
        for s in &snaps {
            let bytes = crate::snapshot::encode(s);
            assert_eq!(&crate::snapshot::decode::<SketchCounterSnapshot>(&bytes).unwrap(), s);
        }
        self.counters = (0..workers)
            .map(|w| {
                SketchCounter::restore(
                    self.windows.clone(),
                    self.counting.clone(),
                    LATENESS,
                    w as u32,
                    workers,
                    wm,
                    &[],
                    &snaps,
                )
                .expect("restores")
            })
            .collect();
        // as in a restore, the merger starts from what it published, with no worker's lists
        self.merger =
            ListMerger::restore(self.windows.clone(), LATENESS, &self.merger.snapshot()).with_counting(&self.counting);
    }
}

/// (window, start, group) → item → true count, groups beyond `max_groups` (the highest key
/// hashes among the instance's groups) in `(other)`.
type Truth = BTreeMap<(String, i64, String), BTreeMap<String, u64>>;

fn model(windows: &[WindowSpec], events: &[TimedEvent]) -> Truth {
    let mut raw: BTreeMap<(usize, i64), BTreeMap<String, BTreeMap<String, u64>>> = BTreeMap::new();
    for e in events {
        let country = e.text.dim(0).to_string();
        for (wi, w) in windows.iter().enumerate() {
            for start in w.starts_covering(e.ts) {
                if e.wm_before != Millis::MIN && w.end_of(start) <= e.wm_before.minus(LATENESS) {
                    continue;
                }
                *raw.entry((wi, start.0))
                    .or_default()
                    .entry(group_of(&country))
                    .or_default()
                    .entry(e.item().to_string())
                    .or_default() += 1;
            }
        }
    }
    let mut out = Truth::new();
    for ((wi, start), groups) in raw {
        let w = &windows[wi];
        let mut keys: Vec<&String> = groups.keys().collect();
        keys.sort_by_key(|g| item_hash(g));
        let kept: BTreeSet<&String> = keys.into_iter().take(w.key.max_groups as usize).collect();
        for (group, items) in &groups {
            let name = if kept.contains(group) {
                group.clone()
            } else {
                "(other)".into()
            };
            let into = out.entry((w.name.clone(), start, name)).or_default();
            for (item, c) in items {
                *into.entry(item.clone()).or_default() += c;
            }
        }
    }
    out
}

fn ranked(items: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = items.iter().map(|(i, c)| (i.clone(), *c)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every sealed per-group list of a sketch or auto window holds its bounds against the
    /// model: counts at least true and at most true + the group's bound, exact lists equal to
    /// the model's, the true top-K set when the K-th and (K+1)-th counts are far enough apart,
    /// and exactly the model's groups (folded ones in `(other)`), for any worker count and a
    /// restore onto another.
    #[test]
    fn sealed_group_lists_hold_their_bounds(
        stream in proptest::collection::vec((0u16..30, 0u8..6, 0i64..30, 0u8..4), 1..400),
        workers in 1usize..4,
        after in 1usize..4,
        k in 1usize..4,
        max_groups in 1u32..5,
        auto in any::<bool>(),
        tiny in any::<bool>(),
    ) {
        let windows = [by_country("10", 10, 10, k, max_groups), by_country("20/10", 20, 10, k, max_groups)];
        let sketch = spec(2 * k, if tiny { 0.2 } else { 0.05 });
        let counting: Vec<Counting> = windows.iter().map(|_| if auto { Counting::Auto { sketch, max_items: 10 } } else { Counting::Sketch(sketch) }).collect();
        let mut job = Job::new(&windows, &counting, workers);
        let (mut max_ts, mut events) = (i64::MIN, Vec::new());
        for (i, (id, country, ts, skew)) in stream.iter().enumerate() {
            // skewed items: low ids repeat
            let item = if *skew == 0 { format!("c{id}") } else { format!("h{}", id % 4) };
            let wm_before = if max_ts == i64::MIN { i64::MIN } else { max_ts - 2 };
            events.push(ev(&item, &format!("k{country}"), *ts, wm_before, i as u64));
            max_ts = max_ts.max(*ts);
        }
        let (first, rest) = events.split_at(events.len() / 2);
        let mut published = job.epoch(first, Millis::MIN, true);
        job.restore_onto(after, Millis::MIN);
        published.extend(job.epoch(rest, Millis::MAX, false));
        let truth = model(&windows, &events);
        let mut sealed: BTreeMap<(String, i64, String), &PublishedList> = BTreeMap::new();
        for p in published.iter().filter(|p| p.state == ListState::Final) {
            sealed.insert((p.window.clone(), p.start.0, p.group.as_str().to_string()), p);
        }
        sealed.retain(|_, p| !p.items.is_empty());
        let got: BTreeSet<&(String, i64, String)> = sealed.keys().collect();
        let want: BTreeSet<&(String, i64, String)> = truth.keys().collect();
        prop_assert_eq!(got, want);
        for (key, fin) in &sealed {
            let counts = &truth[key];
            for r in &fin.items {
                let t = counts.get(r.item_id.as_str()).copied().unwrap_or(0);
                prop_assert!(t > 0 && r.count >= t && r.count <= t + fin.error_bound, "{:?}: {:?} vs {} (bound {})", key, r, t, fin.error_bound);
            }
            let all = ranked(counts);
            if fin.exact {
                prop_assert_eq!(fin.error_bound, 0);
                let want: Vec<(String, u64)> = all.iter().take(k).cloned().collect();
                let got: Vec<(String, u64)> = fin.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
                prop_assert_eq!(got, want);
            } else if key.2 != "(other)" && all.len() > k && all[k - 1].1 > all[k].1 + 2 * fin.error_bound {
                let mut want: Vec<&str> = all[..k].iter().map(|r| r.0.as_str()).collect();
                let mut got: Vec<&str> = fin.items.iter().map(|r| r.item_id.as_str()).collect();
                want.sort();
                got.sort();
                prop_assert_eq!(got, want);
            }
        }
        prop_assert_eq!(job.counters.iter().map(|c| c.stats().instances).sum::<usize>(), 0);
    }
}

/// A group with many items folds into a table of its own and publishes an approximate list
/// with a bound from its own events; a small group beside it stays exact.
#[test]
fn a_large_group_folds_and_a_small_one_stays_exact() {
    let w = by_country("10", 10, 10, 2, 10);
    let sketch = spec(4, 0.05);
    let counting = [Counting::Sketch(sketch)];
    let mut job = Job::new(std::slice::from_ref(&w), &counting, 1);
    let limit = grouped::fold_at(&counting[0]);
    let mut events: Vec<TimedEvent> = (0..(limit as u64 + 20))
        .map(|i| ev(&format!("x{i}"), "US", 1, i64::MIN, i))
        .collect();
    events.extend((0..30u64).map(|i| ev(&format!("y{}", i % 3), "FR", 1, i64::MIN, 10_000 + i)));
    let out = job.epoch(&events, Millis::MAX, false);
    let us = out.iter().find(|p| p.group.as_str() == "country=US").expect("US");
    let fr = out.iter().find(|p| p.group.as_str() == "country=FR").expect("FR");
    assert!(!us.exact, "{} items > {limit}: a table", limit + 20);
    assert_eq!(
        us.error_bound,
        sketch.error_bound(limit as u64 + 20),
        "the group's own N"
    );
    assert!(fr.exact && fr.error_bound == 0);
    assert_eq!(fr.items[0].count, 10);
    assert_eq!(job.counters[0].stats().folds, 1);
}

/// A group displaced by one with a lower hash moves its counts into `(other)` and is
/// withdrawn: `(other)` then holds every event of it, from before and after the displacement.
#[test]
fn a_displaced_group_moves_its_counts_into_other() {
    let mut countries: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    countries.sort_by_key(|c| item_hash(&group_of(c)));
    let (low, high) = (countries[0].clone(), countries[1].clone());
    let w = by_country("10", 10, 10, 3, 1);
    let counting = [Counting::Sketch(spec(4, 0.05))];
    let mut job = Job::new(std::slice::from_ref(&w), &counting, 2);
    let first: Vec<TimedEvent> = (0..6u64).map(|i| ev("a", &high, 1, i64::MIN, i)).collect();
    let out = job.epoch(&first, Millis::MIN, true);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].group.as_str(), group_of(&high));
    let second: Vec<TimedEvent> = (0..3u64)
        .map(|i| ev("a", &high, 2, i64::MIN, 10 + i))
        .chain([ev("b", &low, 2, i64::MIN, 20)])
        .collect();
    let out = job.epoch(&second, Millis::MAX, false);
    let of = |g: &str| {
        out.iter()
            .find(|p| p.group.as_str() == g)
            .unwrap_or_else(|| panic!("{g}: {out:?}"))
    };
    assert!(of(&group_of(&high)).items.is_empty(), "withdrawn");
    assert_eq!(of("(other)").items[0].count, 9, "before and after the displacement");
    assert_eq!(of(&group_of(&low)).items[0].count, 1);
    assert_eq!(
        job.counters.iter().map(|c| c.overflow_groups().len()).sum::<usize>(),
        0,
        "sealed"
    );
}

/// A sketch counter checkpoint of format 6 (before per-group sketch windows) still restores:
/// it reads with no known groups; the same bytes as format 7 do not read.
#[test]
fn format_6_sketch_snapshots_read_without_groups() {
    use crate::snapshot::{decode, encode};
    let w = WindowSpec::tumbling("10", Span::from_millis(10), 2);
    let counting = [Counting::Sketch(spec(4, 0.05))];
    let mut c = SketchCounter::new(vec![w], counting.to_vec(), LATENESS, 0, 1);
    c.apply(&TimedEvent {
        text: EventText::item("a"),
        ..ev("a", "US", 1, i64::MIN, 0)
    });
    c.advance(Millis::MIN, true);
    let snap = c.snapshot();
    let v6 = SketchCounterSnapshotV6 {
        worker: snap.worker,
        instances: snap.instances.clone(),
    };
    let mut bytes = encode(&v6);
    bytes[6..8].copy_from_slice(&6u16.to_le_bytes());
    assert_eq!(decode::<SketchCounterSnapshot>(&bytes), Ok(snap));
    assert!(decode::<SketchCounterSnapshot>(&encode(&v6)).is_err());
}

/// Item → its distinct users.
type Users = BTreeMap<String, BTreeSet<String>>;

/// (window, start, group) → item → its distinct users, groups beyond `max_groups` in `(other)`.
fn users_model(windows: &[WindowSpec], events: &[TimedEvent]) -> BTreeMap<(String, i64, String), Users> {
    let mut raw: BTreeMap<(usize, i64), BTreeMap<String, Users>> = BTreeMap::new();
    for e in events {
        let Some(user) = e.text.user() else { continue };
        for (wi, w) in windows.iter().enumerate() {
            let group = if w.key.by.is_empty() {
                String::new()
            } else {
                group_of(e.text.dim(0))
            };
            for start in w.starts_covering(e.ts) {
                if e.wm_before != Millis::MIN && w.end_of(start) <= e.wm_before.minus(LATENESS) {
                    continue;
                }
                raw.entry((wi, start.0))
                    .or_default()
                    .entry(group.clone())
                    .or_default()
                    .entry(e.item().to_string())
                    .or_default()
                    .insert(user.to_string());
            }
        }
    }
    let mut out: BTreeMap<(String, i64, String), Users> = BTreeMap::new();
    for ((wi, start), groups) in raw {
        let w = &windows[wi];
        let mut keys: Vec<&String> = groups.keys().collect();
        keys.sort_by_key(|g| item_hash(g));
        let kept: BTreeSet<&String> = keys.into_iter().take(w.key.max_groups as usize).collect();
        for (group, items) in &groups {
            let name = if kept.contains(group) {
                group.clone()
            } else {
                "(other)".into()
            };
            let into = out.entry((w.name.clone(), start, name)).or_default();
            for (item, users) in items {
                into.entry(item.clone()).or_default().extend(users.iter().cloned());
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Distinct-user windows (global and per country) counted by a sketch, for any worker
    /// count and a restore onto another: the model's groups; exact lists equal to the model's
    /// distinct counts; every listed item of an approximate list is one of its group's, listed
    /// with at most 2 users more than it has (small sets: the HyperLogLog counts nearly
    /// exactly; an item that entered the candidates late may list fewer); and the events table
    /// never below an item's users (checked through the shares at seal).
    #[test]
    fn sealed_distinct_lists_hold_their_bounds(
        stream in proptest::collection::vec((0u16..20, 0u8..5, 0i64..30, 0u8..12, proptest::bool::weighted(0.9)), 1..400),
        workers in 1usize..4,
        after in 1usize..4,
        k in 1usize..4,
        max_groups in 1u32..5,
        auto in any::<bool>(),
    ) {
        let mut windows = vec![by_country("10", 10, 10, k, max_groups), by_country("20/10", 20, 10, k, max_groups)];
        windows[0].key.distinct_users = true;
        windows[1].key.distinct_users = true;
        windows[1].key.by.clear();
        windows[1].key.max_groups = crate::group::DEFAULT_MAX_GROUPS;
        let sketch = spec(k + 1, 0.2);
        let counting: Vec<Counting> = windows.iter().map(|_| if auto { Counting::Auto { sketch, max_items: 10 } } else { Counting::Sketch(sketch) }).collect();
        let mut job = Job::new(&windows, &counting, workers);
        let (mut max_ts, mut events) = (i64::MIN, Vec::new());
        for (i, (id, country, ts, user, has_user)) in stream.iter().enumerate() {
            let item = format!("i{}", id % 9);
            let user = format!("u{user}");
            let wm_before = if max_ts == i64::MIN { i64::MIN } else { max_ts - 2 };
            events.push(ev_by(&item, &format!("k{country}"), has_user.then_some(user.as_str()), *ts, wm_before, i as u64));
            max_ts = max_ts.max(*ts);
        }
        let (first, rest) = events.split_at(events.len() / 2);
        let mut published = job.epoch(first, Millis::MIN, true);
        job.restore_onto(after, Millis::MIN);
        published.extend(job.epoch(rest, Millis::MAX, false));
        let truth = users_model(&windows, &events);
        let mut sealed: BTreeMap<(String, i64, String), &PublishedList> = BTreeMap::new();
        for p in published.iter().filter(|p| p.state == ListState::Final) {
            sealed.insert((p.window.clone(), p.start.0, p.group.as_str().to_string()), p);
        }
        sealed.retain(|_, p| !p.items.is_empty());
        let got: BTreeSet<&(String, i64, String)> = sealed.keys().collect();
        let want: BTreeSet<&(String, i64, String)> = truth.keys().collect();
        prop_assert_eq!(got, want);
        for (key, fin) in &sealed {
            let counts: BTreeMap<String, u64> = truth[key].iter().map(|(i, u)| (i.clone(), u.len() as u64)).collect();
            if fin.exact {
                prop_assert_eq!(fin.error_bound, 0);
                let want: Vec<(String, u64)> = ranked(&counts).into_iter().take(k).collect();
                let got: Vec<(String, u64)> = fin.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
                prop_assert_eq!(got, want);
            } else {
                for r in &fin.items {
                    let t = counts.get(r.item_id.as_str()).copied().unwrap_or(0);
                    prop_assert!(t > 0 && r.count >= 1 && r.count <= t + 2, "{:?}: {:?} vs {}", key, r, t);
                }
            }
        }
        prop_assert_eq!(job.counters.iter().map(|c| c.stats().instances).sum::<usize>(), 0);
    }
}

/// A distinct-user place that never folded counts exactly, and its list says so.
#[test]
fn a_small_distinct_place_publishes_an_exact_list() {
    let mut w = by_country("10", 10, 10, 2, 10);
    w.key.distinct_users = true;
    let counting = [Counting::Sketch(spec(4, 0.05))];
    let mut job = Job::new(std::slice::from_ref(&w), &counting, 2);
    let events: Vec<TimedEvent> = (0..12u64)
        .map(|i| {
            ev_by(
                &format!("x{}", i % 2),
                "US",
                Some(&format!("u{}", i % 3)),
                1,
                i64::MIN,
                i,
            )
        })
        .collect();
    let out = job.epoch(&events, Millis::MAX, false);
    let us = out.iter().find(|p| p.group.as_str() == "country=US").expect("US");
    assert!(us.exact && us.error_bound == 0, "{us:?}");
    let got: Vec<(&str, u64)> = us.items.iter().map(|r| (r.item_id.as_str(), r.count)).collect();
    assert_eq!(got, vec![("x0", 3), ("x1", 3)]);
}

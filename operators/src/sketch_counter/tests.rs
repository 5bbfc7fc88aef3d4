use super::*;
use crate::counting::{Algorithm, SketchSpec};
use crate::merge::ListMerger;
use crate::message::PublishedList;
use crate::record::{DeadReason, EventText, ListState, PartitionId};
use crate::snapshot::SnapshotError;
use proptest::prelude::*;
use std::collections::HashMap;

const LATENESS: Span = Span::from_millis(5);

fn spec(algorithm: Algorithm, candidates: usize) -> SketchSpec {
    SketchSpec {
        algorithm,
        epsilon: 0.05,
        delta: 0.05,
        candidates,
        conservative: false,
        exact_at_seal: false,
    }
}

fn ev(item: &str, ts: i64, wm_before: i64, position: u64) -> TimedEvent {
    TimedEvent {
        text: EventText::item(item),
        ts: Millis(ts),
        wm_before: Millis(wm_before),
        hash: item_hash(item),
        partition: PartitionId(0),
        position,
    }
}

/// `workers` counters and a merger over `windows`, fed like the job feeds them: each event to
/// the worker owning its item, then one advance per epoch.
struct Job {
    counters: Vec<SketchCounter>,
    merger: ListMerger,
    /// Feed each worker's events as epoch batches (`apply_epoch`) rather than one by one.
    batched: bool,
}

impl Job {
    fn new(windows: &[WindowSpec], counting: &[Counting], workers: usize) -> Job {
        Job {
            counters: (0..workers)
                .map(|w| SketchCounter::new(windows.to_vec(), counting.to_vec(), LATENESS, w as u32, workers))
                .collect(),
            merger: ListMerger::new(windows.to_vec(), LATENESS).with_counting(counting),
            batched: false,
        }
    }

    fn epoch(&mut self, events: &[TimedEvent], wm: i64, tick: bool) -> (Vec<PublishedList>, Vec<DeadLetter>) {
        let n = self.counters.len() as u32;
        let mut dead = Vec::new();
        let mut batches: Vec<Vec<TimedEvent>> = vec![Vec::new(); n as usize];
        for e in events {
            let w = (key_group(e.hash) % n) as usize;
            match self.batched {
                true => batches[w].push(e.clone()),
                false => dead.extend(self.counters[w].apply(e)),
            }
        }
        for (c, batch) in self.counters.iter_mut().zip(batches) {
            // two batches per epoch, as an exchange may deliver them
            let (a, b) = batch.split_at(batch.len() / 2);
            c.apply_epoch(&[a.to_vec(), b.to_vec()], &mut dead);
        }
        for c in &mut self.counters {
            for l in c.advance(Millis(wm), tick) {
                self.merger.receive(l);
            }
        }
        (self.merger.advance(Millis(wm), Millis(0)), dead)
    }
}

fn true_counts(events: &[TimedEvent], w: &WindowSpec, start: Millis) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for e in events.iter().filter(|e| w.starts_covering(e.ts).any(|s| s == start)) {
        *m.entry(e.item().to_string()).or_insert(0) += 1;
    }
    m
}

#[test]
fn sketch_lists_bound_the_true_counts_and_seal() {
    bound_and_seal(false);
    bound_and_seal(true);
}

fn bound_and_seal(batched: bool) {
    let w = WindowSpec::tumbling("10", Span::from_millis(10), 3);
    let counting = [Counting::Sketch(spec(Algorithm::Cms, 6))];
    let mut job = Job::new(std::slice::from_ref(&w), &counting, 2);
    job.batched = batched;
    let events: Vec<TimedEvent> = (0..300u64)
        .map(|i| ev(&format!("i{}", (i * i) % 17), (i % 10) as i64, i64::MIN, i))
        .collect();
    let (open, _) = job.epoch(&events, 0, true);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].state, ListState::Open);
    assert!(!open[0].exact);
    assert_eq!(open[0].error_bound, spec(Algorithm::Cms, 6).error_bound(300));
    let truth = true_counts(&events, &w, Millis(0));
    for r in &open[0].items {
        let t = truth[r.item_id.as_str()];
        assert!(r.count >= t && r.count <= t + open[0].error_bound, "{r:?} vs {t}");
    }
    let (closed, _) = job.epoch(&[], 10, false);
    assert_eq!(closed[0].state, ListState::Closed);
    // an on-time straggler is counted; one past the lateness is sealed
    let (corrected, dead) = job.epoch(&[ev("late", 3, 0, 900)], 15, false);
    assert!(dead.is_empty());
    assert_eq!(corrected[0].state, ListState::Final);
    assert_eq!(
        job.counters.iter().map(|c| c.stats().instances).sum::<usize>(),
        0,
        "sealed state is freed"
    );
    let (_, dead) = job.epoch(&[ev("gone", 4, 0, 901)], 16, false);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, DeadReason::Sealed);
}

#[test]
fn an_event_late_for_its_instance_is_skipped() {
    let w = WindowSpec::tumbling("10", Span::from_millis(10), 3);
    let mut job = Job::new(&[w], &[Counting::Sketch(spec(Algorithm::Cms, 6))], 1);
    job.epoch(&[ev("a", 12, i64::MIN, 1)], 12, false);
    // wm_before 20: late for [0, 10) (10 ≤ 20 − 5), not dead-lettered here (the source did)
    let (out, dead) = job.epoch(&[ev("b", 1, 20, 2)], 12, true);
    assert!(dead.is_empty());
    assert!(out.iter().all(|l| l.start != Millis(0)), "{out:?}");
}

#[test]
fn auto_counts_exactly_until_its_share_then_folds() {
    let w = WindowSpec::tumbling("10", Span::from_millis(10), 2);
    let counting = [Counting::Auto {
        sketch: spec(Algorithm::Cms, 4),
        max_items: 8,
    }];
    let mut job = Job::new(std::slice::from_ref(&w), &counting, 2);
    let few: Vec<TimedEvent> = (0..6u64).map(|i| ev(&format!("x{}", i % 3), 1, i64::MIN, i)).collect();
    let (out, _) = job.epoch(&few, 0, true);
    assert!(out[0].exact, "3 distinct items: exact");
    assert_eq!(out[0].error_bound, 0);
    assert_eq!(out[0].items[0].count, 2);
    assert_eq!(job.counters.iter().map(|c| c.stats().folds).sum::<u64>(), 0);
    let many: Vec<TimedEvent> = (0..40u64).map(|i| ev(&format!("y{i}"), 2, i64::MIN, 100 + i)).collect();
    let (out, _) = job.epoch(&many, 0, true);
    assert!(!out[0].exact, "40 distinct items > 8: folded");
    assert!(out[0].error_bound > 0);
    assert!(job.counters.iter().map(|c| c.stats().folds).sum::<u64>() >= 1);
    assert!(
        out[0].items.iter().all(|r| r.count >= 2),
        "the x items stay at least their true count"
    );
}

#[test]
fn both_windows_publish_the_exact_list_with_a_check() {
    let w = WindowSpec::tumbling("10", Span::from_millis(10), 2);
    let counting = [Counting::Both(spec(Algorithm::Cms, 4))];
    let mut counter = SketchCounter::new(vec![w.clone()], counting.to_vec(), LATENESS, 0, 1);
    let mut merger = ListMerger::new(vec![w], LATENESS).with_counting(&counting);
    for (i, item) in ["a", "a", "a", "b", "b", "c"].iter().enumerate() {
        counter.apply(&ev(item, 1, i64::MIN, i as u64));
    }
    for l in counter.advance(Millis(0), true) {
        merger.receive(l);
    }
    let exact = vec![
        RankedItem {
            item_id: "a".into(),
            count: 3,
            trend: None,
        },
        RankedItem {
            item_id: "b".into(),
            count: 2,
            trend: None,
        },
    ];
    merger.receive(LocalList {
        group: Default::default(),
        instance: InstanceKey {
            window: WindowId(0),
            start: Millis(0),
        },
        worker: 0,
        items: exact.clone(),
        source: ListSource::PaneCounter,
        share: None,
    });
    let out = merger.advance(Millis(0), Millis(0));
    assert_eq!(out[0].items, exact);
    assert!(out[0].exact);
    let check = out[0].sketch_check.expect("a check");
    assert_eq!((check.found, check.of), (2, 2));
}

/// Runs a window through restores onto each worker count of `chain` in turn (events between
/// them), checking the bounds of the final list against the true counts; with one worker
/// throughout, the restored counter goes on exactly as the uninterrupted one.
fn snapshot_chain(counting: Counting, chain: &[usize]) -> Result<(), SnapshotError> {
    let w = WindowSpec::tumbling("10", Span::from_millis(10), 3);
    let batch = |round: u64| -> Vec<TimedEvent> {
        (0..200u64)
            .map(|i| {
                ev(
                    &format!("i{}", (i * 7 + round) % 23),
                    (i % 10) as i64,
                    i64::MIN,
                    round * 1000 + i,
                )
            })
            .collect()
    };
    let mut all = Vec::new();
    let mut job = Job::new(std::slice::from_ref(&w), &[counting], chain[0]);
    let mut uninterrupted = Job::new(std::slice::from_ref(&w), &[counting], 1);
    for (round, workers) in chain.iter().enumerate().skip(1) {
        let events = batch(round as u64);
        job.epoch(&events, 0, true);
        uninterrupted.epoch(&events, 0, true);
        all.extend(events);
        let snaps: Vec<SketchCounterSnapshot> = job.counters.iter().map(|c| c.snapshot()).collect();
        let bytes = crate::snapshot::encode(&snaps[0]);
        assert_eq!(
            crate::snapshot::decode::<SketchCounterSnapshot>(&bytes).unwrap(),
            snaps[0]
        );
        job = Job::new(std::slice::from_ref(&w), &[counting], *workers);
        for (i, c) in job.counters.iter_mut().enumerate() {
            *c = SketchCounter::restore(
                vec![w.clone()],
                vec![counting],
                LATENESS,
                i as u32,
                *workers,
                Millis(0),
                &[],
                &snaps,
            )?;
        }
    }
    let more: Vec<TimedEvent> = (0..300u64).map(|i| ev("hot", 5, i64::MIN, 100_000 + i)).collect();
    all.extend(more.iter().cloned());
    let (out, _) = job.epoch(&more, i64::MAX, false);
    let (expect, _) = uninterrupted.epoch(&more, i64::MAX, false);
    let (fin, expect) = (out.last().expect("final list"), expect.last().expect("final list"));
    let truth = true_counts(&all, &w, Millis(0));
    assert_eq!(fin.error_bound, expect.error_bound, "N survives the restores");
    for r in &fin.items {
        let t = truth[r.item_id.as_str()];
        assert!(
            r.count >= t && r.count <= t + fin.error_bound,
            "{chain:?}: {r:?} vs {t} (bound {})",
            fin.error_bound
        );
    }
    if chain.iter().all(|w| *w == 1) {
        assert_eq!(fin.items, expect.items, "one worker throughout: goes on exactly");
    }
    assert_eq!(fin.items[0].item_id, "hot");
    Ok(())
}

#[test]
fn snapshots_restore_onto_the_same_and_other_worker_counts() {
    let cms = Counting::Sketch(spec(Algorithm::Cms, 6));
    let auto = Counting::Auto {
        sketch: spec(Algorithm::Cms, 6),
        max_items: 10,
    };
    let auto_big = Counting::Auto {
        sketch: spec(Algorithm::Cms, 6),
        max_items: 1000,
    };
    let hk = Counting::Sketch(spec(Algorithm::HeavyKeeper, 6));
    for counting in [cms, auto, auto_big] {
        for chain in [&[1, 1, 1][..], &[2, 2, 2], &[2, 1], &[1, 3, 1, 2, 2, 3]] {
            snapshot_chain(counting, chain).unwrap_or_else(|e| panic!("{counting:?} {chain:?}: {e}"));
        }
    }
    // HeavyKeeper never under... over-counts, so its bound is 0; it restores onto its own count only
    let w = WindowSpec::tumbling("10", Span::from_millis(10), 3);
    let mut one = Job::new(std::slice::from_ref(&w), &[hk], 2);
    one.epoch(&[ev("a", 1, i64::MIN, 1)], 0, true);
    let snaps: Vec<_> = one.counters.iter().map(|c| c.snapshot()).collect();
    assert!(SketchCounter::restore(vec![w.clone()], vec![hk], LATENESS, 0, 2, Millis(0), &[], &snaps).is_ok());
    let err = SketchCounter::restore(vec![w.clone()], vec![hk], LATENESS, 0, 1, Millis(0), &[], &snaps)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("HeavyKeeper"), "{err}");
    // a snapshot of another mode is incompatible
    assert!(matches!(
        SketchCounter::restore(vec![w], vec![cms], LATENESS, 0, 2, Millis(0), &[], &snaps),
        Err(SnapshotError::Incompatible)
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Against brute force, for any worker count: every count of a sealed sketch list is at
    /// least the true count and at most true + error_bound, and the true top-K set is the
    /// list's whenever the K-th and (K+1)-th true counts differ by more than 2·error_bound.
    #[test]
    fn sealed_sketch_lists_hold_their_bounds(
        stream in proptest::collection::vec((0u16..40, 0u8..2, 0i64..30), 1..400),
        workers in 1usize..4,
        k in 1usize..5,
        auto in any::<bool>(),
        batched in any::<bool>(),
    ) {
        let windows = [WindowSpec::tumbling("10", Span::from_millis(10), k), WindowSpec { rank: Default::default(), key: Default::default(),  name: "20/10".into(), size: Span::from_millis(20), slide: Span::from_millis(10), k }];
        let sketch = spec(Algorithm::Cms, 4 * k);
        let counting: Vec<Counting> = windows.iter().map(|_| if auto { Counting::Auto { sketch, max_items: 12 } } else { Counting::Sketch(sketch) }).collect();
        let mut job = Job::new(&windows, &counting, workers);
        job.batched = batched;
        // zipf-ish: low ids repeat; two epochs of events, then the end of input
        let events: Vec<TimedEvent> = stream.iter().enumerate().map(|(i, (id, hot, ts))| {
            let item = if *hot == 0 { format!("h{}", id % 5) } else { format!("c{id}") };
            ev(&item, *ts, i64::MIN, i as u64)
        }).collect();
        let (half, rest) = events.split_at(events.len() / 2);
        let mut published = job.epoch(half, 0, true).0;
        published.extend(job.epoch(rest, i64::MAX, false).0);
        for fin in published.iter().filter(|p| p.state == ListState::Final) {
            let w = windows.iter().find(|w| w.name == fin.window).unwrap();
            let truth = true_counts(&events, w, fin.start);
            for r in &fin.items {
                let t = truth[r.item_id.as_str()];
                prop_assert!(r.count >= t && r.count <= t + fin.error_bound, "{:?} vs {}", r, t);
            }
            let mut ranked: Vec<(u64, &String)> = truth.iter().map(|(i, c)| (*c, i)).collect();
            ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
            if ranked.len() > k && ranked[k - 1].0 > ranked[k].0 + 2 * fin.error_bound {
                let mut want: Vec<&str> = ranked[..k].iter().map(|r| r.1.as_str()).collect();
                let mut got: Vec<&str> = fin.items.iter().map(|r| r.item_id.as_str()).collect();
                want.sort();
                got.sort();
                prop_assert_eq!(got, want);
            }
            if fin.exact {
                prop_assert_eq!(fin.error_bound, 0);
                for r in &fin.items {
                    prop_assert_eq!(r.count, truth[r.item_id.as_str()]);
                }
            }
        }
        prop_assert_eq!(job.counters.iter().map(|c| c.stats().instances).sum::<usize>(), 0);
    }
}

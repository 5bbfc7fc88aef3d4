//! Checkpoint snapshots restore to the same results: a run interrupted at a random epoch,
//! snapshotted through the on-disk envelope and restored onto a different number of workers,
//! publishes exactly the final lists of an uninterrupted run, and its revisions continue.

use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::hash::{item_hash, owner};
use hotlist_operators::merge::ListMerger;
use hotlist_operators::message::PublishedList;
use hotlist_operators::pane_sharing::PaneSharing;
use hotlist_operators::record::{EventText, ListState, PartitionId, TimedEvent};
use hotlist_operators::snapshot::{assemble, decode, encode, CounterSnapshot, MergerSnapshot, PaneKey, PaneSegment};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::watermark::PartitionClock;
use hotlist_operators::window::WindowSpec;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Counters of `workers` workers and the merger: the job without timely.
struct Job {
    counters: Vec<WindowedCounter>,
    merger: ListMerger,
    published: BTreeMap<(String, i64), PublishedList>,
    revisions: Vec<PublishedList>,
}

impl Job {
    fn epoch(&mut self, events: &[TimedEvent], wm: Millis, tick: bool) {
        let n = self.counters.len();
        for ev in events {
            let d = self.counters[owner(ev.hash, n)].apply(ev);
            assert!(d.is_none(), "no idle partitions: nothing is sealed-dropped");
        }
        for c in &mut self.counters {
            for l in c.advance(wm, tick) {
                self.merger.receive(l);
            }
        }
        for p in self.merger.advance(wm, Millis(0)) {
            self.published.insert((p.window.clone(), p.start.0), p.clone());
            self.revisions.push(p);
        }
    }
}

fn windows(k: usize) -> Vec<WindowSpec> {
    vec![
        WindowSpec::tumbling("t10", Span::from_millis(10), k),
        WindowSpec {
            rank: Default::default(),
            key: Default::default(),
            name: "h20".into(),
            size: Span::from_millis(20),
            slide: Span::from_millis(5),
            k,
        },
        WindowSpec::tumbling("t30", Span::from_millis(30), k),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn restore_onto_other_worker_counts_gives_identical_results(
        events in proptest::collection::vec((0u8..6, 0i64..4, 0i64..12, proptest::bool::weighted(0.08)), 1..250),
        epoch_len in 1usize..20,
        cut_at in 0usize..20,
        before in 1usize..4,
        after in 1usize..4,
        k in 1usize..4,
        lateness in 0u64..10,
    ) {
        let lateness = Span::from_millis(lateness);
        // two partitions at different paces (partition 1 lags, holding the global watermark
        // back so late-event exclusions outlive their epoch); each event is stamped with its
        // partition's watermark before it, as the source does
        let ooo = Span::from_millis(3);
        let mut clocks = [PartitionClock::new(ooo), PartitionClock::new(ooo)];
        let mut t = [0i64, 0i64];
        let mut marks: Vec<Millis> = Vec::new(); // global watermark after each event
        let stamped: Vec<TimedEvent> = events
            .iter()
            .enumerate()
            .map(|(i, (item, step, back, late))| {
                let p = (*item as usize + i) % 2;
                t[p] += if p == 0 { *step } else { step / 2 };
                let ts = Millis(t[p] - back - if *late { 40 } else { 0 });
                let wm_before = clocks[p].observe(ts);
                marks.push(clocks[0].watermark().min(clocks[1].watermark()));
                let item = format!("i{item}");
                TimedEvent { hash: item_hash(&item), text: EventText::item(&item), ts, wm_before, partition: PartitionId(p as u32), position: i as u64 }
            })
            .collect();
        let epochs: Vec<(&[TimedEvent], Millis)> = stamped
            .chunks(epoch_len)
            .map(|chunk| (chunk, marks[chunk[chunk.len() - 1].position as usize]))
            .collect();
        let cut = cut_at.min(epochs.len());
        let new_job = |n: usize| Job {
            counters: (0..n).map(|w| WindowedCounter::new(windows(k), lateness, w as u32)).collect(),
            merger: ListMerger::new(windows(k), lateness),
            published: BTreeMap::new(),
            revisions: Vec::new(),
        };

        // uninterrupted
        let mut whole = new_job(before);
        for (i, (evs, wm)) in epochs.iter().enumerate() {
            whole.epoch(evs, *wm, i % 2 == 0);
        }
        whole.epoch(&[], Millis::MAX, true);

        // interrupted at `cut`, snapshotted through the envelope, restored onto `after` workers
        let mut first = new_job(before);
        for (i, (evs, wm)) in epochs[..cut].iter().enumerate() {
            first.epoch(evs, *wm, i % 2 == 0);
        }
        let files: Vec<Vec<u8>> = first.counters.iter().map(|c| encode(&c.snapshot())).collect();
        let merger_file = encode(&first.merger.snapshot());
        let snaps: Vec<CounterSnapshot> = files.iter().map(|f| decode(f).expect("decodes")).collect();
        let merger_snap: MergerSnapshot = decode(&merger_file).expect("decodes");
        let mut second = Job {
            counters: (0..after)
                .map(|w| WindowedCounter::restore(windows(k), lateness, w as u32, after, &snaps).expect("compatible"))
                .collect(),
            merger: ListMerger::restore(windows(k), lateness, &merger_snap),
            published: first.published.clone(),
            revisions: Vec::new(),
        };
        for (i, (evs, wm)) in epochs[cut..].iter().enumerate() {
            second.epoch(evs, *wm, (cut + i) % 2 == 0);
        }
        second.epoch(&[], Millis::MAX, true);

        let finals = |j: &Job| -> BTreeMap<(String, i64), Vec<(String, u64)>> {
            j.published
                .iter()
                .map(|(key, p)| {
                    assert_eq!(p.state, ListState::Final, "{p:?}");
                    (key.clone(), p.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect())
                })
                .collect()
        };
        prop_assert_eq!(finals(&second), finals(&whole));
        // revisions continue after the restore: strictly above what was published before it
        for p in &second.revisions {
            if let Some(before) = first.published.get(&(p.window.clone(), p.start.0)) {
                prop_assert!(p.revision > before.revision, "{:?} after {:?}", p, before);
            }
        }
        // restored counters free everything at the end, like uninterrupted ones
        for c in &second.counters {
            let s = c.stats();
            prop_assert_eq!((s.live_counters, s.live_items, s.live_instances), (0, 0, 0));
        }
    }
}

/// A snapshot taken with other windows is refused rather than misread.
#[test]
fn incompatible_windows_are_refused() {
    let c = WindowedCounter::new(windows(3), Span::ZERO, 0);
    let snap = c.snapshot();
    let err = WindowedCounter::restore(windows(4), Span::ZERO, 0, 1, &[snap]).err();
    assert_eq!(err, Some(hotlist_operators::snapshot::SnapshotError::Incompatible));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Incremental snapshots: at random epochs each pane is written only when it changed since
    /// the previous snapshot, else the previous file is kept (as the job hard-links it). The
    /// files present then always assemble into exactly the whole snapshot, so a restore from
    /// an incremental checkpoint is a restore from a whole one.
    #[test]
    fn incremental_snapshots_assemble_to_the_whole_snapshot(
        events in proptest::collection::vec((0u8..6, 0i64..4, 0i64..12, proptest::bool::weighted(0.1)), 1..250),
        epoch_len in 1usize..12,
        snapshot_every in 1usize..4,
        k in 1usize..4,
        lateness in 0u64..15,
        retain in 1usize..5,
    ) {
        let lateness = Span::from_millis(lateness);
        let mut clock = PartitionClock::new(Span::from_millis(3));
        let mut t = 0i64;
        let stamped: Vec<TimedEvent> = events
            .iter()
            .enumerate()
            .map(|(i, (item, step, back, late))| {
                t += step;
                let ts = Millis(t - back - if *late { 30 } else { 0 });
                let wm_before = clock.observe(ts);
                let item = format!("i{item}");
                TimedEvent { hash: item_hash(&item), text: EventText::item(&item), ts, wm_before, partition: PartitionId(0), position: i as u64 }
            })
            .collect();
        let mut counter = WindowedCounter::new(windows(k), lateness, 0);
        // the "files" of the latest checkpoint: pane -> (encoded segment, checkpoint that wrote it)
        let mut files: BTreeMap<PaneKey, (Vec<u8>, usize)> = BTreeMap::new();
        let mut since: Option<u64> = None;
        let mut sharing = PaneSharing::new(retain);
        // every checkpoint's files, as (pane, checkpoint that wrote it)
        let mut taken: Vec<BTreeSet<(PaneKey, usize)>> = Vec::new();
        for (i, chunk) in stamped.chunks(epoch_len).enumerate() {
            for ev in chunk {
                let _ = counter.apply(ev);
            }
            let wm = chunk.iter().map(|e| e.wm_before).max().unwrap_or(Millis::MIN);
            let _ = counter.advance(wm, true);
            if i % snapshot_every != 0 {
                continue;
            }
            let (base, panes) = counter.snapshot_panes(since, |key| sharing.may_reuse(key));
            since = Some(counter.sequence());
            sharing.taken(&panes);
            let mut next = BTreeMap::new();
            for (key, seg) in panes {
                let file = match seg {
                    Some(seg) => (encode(&seg), taken.len()),
                    None => files.get(&key).cloned().expect("an unchanged pane has its previous file"),
                };
                next.insert(key, file);
            }
            files = next;
            let segments: Vec<PaneSegment> = files.values().map(|f| decode(&f.0).expect("decodes")).collect();
            let whole = normalized(counter.snapshot());
            prop_assert_eq!(normalized(assemble(base, segments)), whole);
            // the oldest of `retain` checkpoints shares no file with the newest
            taken.push(files.iter().map(|(key, f)| (*key, f.1)).collect());
            if retain >= 2 && taken.len() >= retain {
                let (newest, oldest) = (&taken[taken.len() - 1], &taken[taken.len() - retain]);
                prop_assert!(newest.is_disjoint(oldest), "retain {}: shared {:?}", retain, newest.intersection(oldest).collect::<Vec<_>>());
            }
        }
    }
}

/// A snapshot with each key group's panes and their items sorted (the order carries no meaning).
fn normalized(mut s: CounterSnapshot) -> CounterSnapshot {
    for g in &mut s.key_groups {
        g.panes.sort_by_key(|p| (p.width, p.start));
        for p in &mut g.panes {
            p.items.sort();
        }
    }
    s
}

/// Panes that nothing changed are not written again: after a quiet epoch, nothing is.
#[test]
fn unchanged_panes_are_not_written_again() {
    let mut c = WindowedCounter::new(windows(2), Span::from_millis(100), 0);
    let ev = |item: &str, ts: i64| TimedEvent {
        hash: item_hash(item),
        text: EventText::item(item),
        ts: Millis(ts),
        wm_before: Millis(0),
        partition: PartitionId(0),
        position: 0,
    };
    for (i, ts) in [1, 2, 12, 25].iter().enumerate() {
        let _ = c.apply(&ev(&format!("i{i}"), *ts));
    }
    let _ = c.advance(Millis(0), false);
    let (_, first) = c.snapshot_panes(None, |_| true);
    assert!(
        first.iter().all(|(_, seg)| seg.is_some()),
        "a first snapshot writes every pane"
    );
    let since = c.sequence();
    let _ = c.advance(Millis(0), false);
    let (_, quiet) = c.snapshot_panes(Some(since), |_| true);
    assert_eq!(quiet.len(), first.len());
    assert!(
        quiet.iter().all(|(_, seg)| seg.is_none()),
        "nothing changed, nothing written"
    );
    let since = c.sequence();
    let _ = c.apply(&ev("i9", 13));
    let _ = c.advance(Millis(0), false);
    let (_, one) = c.snapshot_panes(Some(since), |_| true);
    let changed: Vec<_> = one.iter().filter(|(_, seg)| seg.is_some()).map(|(k, _)| *k).collect();
    assert!(
        !changed.is_empty()
            && changed
                .iter()
                .all(|k| k.start.0 <= 13 && 13 < k.start.0 + k.width.as_i64())
    );
    assert!(
        changed.len() < one.len(),
        "only the panes holding ts 13 are written: {changed:?}"
    );
}

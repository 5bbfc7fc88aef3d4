//! Checkpoint snapshots restore to the same results: a run interrupted at a random epoch,
//! snapshotted through the on-disk envelope and restored onto a different number of workers,
//! publishes exactly the final lists of an uninterrupted run, and its revisions continue.

use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::hash::{item_hash, owner};
use hotlist_operators::merge::ListMerger;
use hotlist_operators::record::{ListState, PartitionId, PublishedList, TimedEvent};
use hotlist_operators::snapshot::{decode, encode, CounterSnapshot, MergerSnapshot};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::watermark::PartitionClock;
use hotlist_operators::window::WindowSpec;
use proptest::prelude::*;
use std::collections::BTreeMap;

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
                TimedEvent { hash: item_hash(&item), item: item.into(), ts, wm_before, partition: PartitionId(p as u32), position: i as u64 }
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

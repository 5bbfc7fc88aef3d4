//! Snapshot bytes from outside never panic the job: valid snapshots (a counter, pane segments,
//! the merger and the sources after random events) have their payload mutated — bytes flipped,
//! cut, added, integers overwritten with extreme values — and their checksum sealed again, as a
//! crafted file would be. Decoding, validating, restoring and then running the restored
//! counter and merger must each return an error or work; `catch_unwind` is only the assertion
//! that nothing panics (test builds also check arithmetic overflow).

use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::hash::item_hash;
use hotlist_operators::merge::ListMerger;
use hotlist_operators::record::{EventText, PartitionId, PartitionStatus, TimedEvent};
use hotlist_operators::snapshot::{
    assemble, decode, encode, CounterSnapshot, MergerSnapshot, PaneSegment, PartitionState, SourceSnapshot,
};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::watermark::PartitionClock;
use hotlist_operators::window::WindowSpec;
use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The envelope header: magic, version, payload length, checksum.
const HEADER: usize = 6 + 2 + 8 + 8;

fn windows() -> Vec<WindowSpec> {
    vec![
        WindowSpec::tumbling("t10", Span::from_millis(10), 2),
        WindowSpec {
            rank: Default::default(),
            key: Default::default(),
            name: "h20".into(),
            size: Span::from_millis(20),
            slide: Span::from_millis(5),
            k: 2,
        },
        WindowSpec::tumbling("t30", Span::from_millis(30), 3),
    ]
}

const LATENESS: Span = Span::from_millis(6);

/// One change to a payload; positions are taken modulo the payload's length.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR one byte.
    Flip(usize, u8),
    /// Overwrite 1, 2, 4 or 8 bytes with a little-endian integer (often an extreme one).
    Overwrite(usize, usize, u64),
    /// Keep only a prefix.
    Truncate(usize),
    /// Insert bytes.
    Insert(usize, Vec<u8>),
    /// Remove up to `n` bytes.
    Remove(usize, usize),
}

/// Values that break assumptions: ends of the integer types, far-future times, key groups
/// and window counts just past their limits.
const EXTREMES: &[u64] = &[
    u64::MAX,
    i64::MIN as u64,
    i64::MAX as u64,
    9_000_000_000_000_000,
    1 << 62,
    1 << 32,
    u32::MAX as u64,
    0xFFFF,
    4096,
    3,
    0,
];

fn mutation() -> impl Strategy<Value = Mutation> {
    let value = prop_oneof![proptest::sample::select(EXTREMES), any::<u64>()];
    let width = proptest::sample::select(&[1usize, 2, 4, 8][..]);
    prop_oneof![
        4 => (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip(at, mask)),
        4 => (any::<usize>(), width, value).prop_map(|(at, width, v)| Mutation::Overwrite(at, width, v)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, b)| Mutation::Insert(at, b)),
        1 => (any::<usize>(), 1usize..16).prop_map(|(at, n)| Mutation::Remove(at, n)),
    ]
}

fn mutate(payload: &mut Vec<u8>, m: &Mutation) {
    let len = payload.len();
    match m {
        Mutation::Flip(at, mask) if len > 0 => payload[at % len] ^= mask,
        Mutation::Overwrite(at, width, v) if len > 0 => {
            let i = at % len;
            let n = (*width).min(len - i);
            payload[i..i + n].copy_from_slice(&v.to_le_bytes()[..n]);
        }
        Mutation::Truncate(at) => payload.truncate(at % (len + 1)),
        Mutation::Insert(at, bytes) => {
            let i = at % (len + 1);
            payload.splice(i..i, bytes.iter().copied());
        }
        Mutation::Remove(at, n) => {
            let i = at % (len + 1);
            payload.drain(i..(i + n).min(len));
        }
        Mutation::Flip(..) | Mutation::Overwrite(..) => {}
    }
}

/// The envelope of `file` with its payload mutated and its length and checksum sealed again.
fn tampered(file: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut payload = file[HEADER..].to_vec();
    for m in mutations {
        mutate(&mut payload, m);
    }
    let mut out = file[..8].to_vec();
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// The files of one checkpoint of a job that counted `events` on `workers` workers.
struct Files {
    counters: Vec<Vec<u8>>,
    base: Vec<u8>,
    segments: Vec<Vec<u8>>,
    merger: Vec<u8>,
    sources: Vec<u8>,
}

/// Two partitions, the second at half pace: it holds the global watermark back, so late-event
/// exclusions outlive their epoch and reach the snapshot.
fn checkpoint(events: &[(u8, i64, i64)], workers: usize) -> Files {
    let ooo = Span::from_millis(3);
    let mut clocks = [PartitionClock::new(ooo), PartitionClock::new(ooo)];
    let mut t = [0i64, 0];
    let mut counters: Vec<WindowedCounter> = (0..workers)
        .map(|w| WindowedCounter::new(windows(), LATENESS, w as u32))
        .collect();
    let mut merger = ListMerger::new(windows(), LATENESS);
    for (i, chunk) in events.chunks(7).enumerate() {
        for (j, (item, step, back)) in chunk.iter().enumerate() {
            let p = (*item as usize + j) % 2;
            t[p] += if p == 0 { *step } else { step / 2 };
            let ts = Millis(t[p] - back);
            let wm_before = clocks[p].observe(ts);
            let item = format!("i{item}");
            let hash = item_hash(&item);
            let ev = TimedEvent {
                text: EventText::item(&item),
                ts,
                wm_before,
                hash,
                partition: PartitionId(p as u32),
                position: i as u64,
            };
            let _ = counters[hotlist_operators::hash::owner(hash, workers)].apply(&ev);
        }
        let wm = clocks[0].watermark().min(clocks[1].watermark());
        for c in &mut counters {
            for l in c.advance(wm, i % 2 == 0) {
                merger.receive(l);
            }
        }
        let _ = merger.advance(wm, Millis(0));
    }
    let (base, panes) = counters[0].snapshot_panes(None, |_| false);
    let sources = SourceSnapshot {
        partitions: (0..2)
            .map(|p| PartitionState {
                partition: PartitionId(p as u32),
                position: events.len() as u64,
                max_ts: clocks[p].max_ts(),
                status: PartitionStatus::Active,
            })
            .collect(),
    };
    Files {
        counters: counters.iter().map(|c| encode(&c.snapshot())).collect(),
        base: encode(&base),
        segments: panes.into_iter().filter_map(|(_, s)| s).map(|s| encode(&s)).collect(),
        merger: encode(&merger.snapshot()),
        sources: encode(&sources),
    }
}

/// Restores counters for `workers` workers from `snaps` and runs them: an error or a working
/// counter, whatever the snapshots hold.
fn restore_and_run(snaps: &[CounterSnapshot]) {
    for workers in 1..=3usize {
        for w in 0..workers {
            let Ok(mut c) = WindowedCounter::restore(windows(), LATENESS, w as u32, workers, snaps) else {
                continue;
            };
            let _ = c.advance(c.watermark(), true);
            for (i, ts) in [0i64, 17, 1000, -5].into_iter().enumerate() {
                let item = format!("i{i}");
                let ev = TimedEvent {
                    hash: item_hash(&item),
                    text: EventText::item(&item),
                    ts: Millis(ts),
                    wm_before: c.watermark(),
                    partition: PartitionId(0),
                    position: 0,
                };
                let _ = c.apply(&ev);
            }
            let _ = c.advance(Millis::MAX, false);
            let _ = c.snapshot();
        }
    }
}

/// Decodes, validates and restores one tampered file of each kind; returns how many decoded.
fn use_tampered(files: &Files, target: usize, which: usize, mutations: &[Mutation]) -> usize {
    let mut decoded = 0;
    match target {
        0 => {
            let i = which % files.counters.len();
            let file = tampered(&files.counters[i], mutations);
            let mut snaps: Vec<CounterSnapshot> = files.counters.iter().map(|f| decode(f).expect("valid")).collect();
            if let Ok(s) = decode::<CounterSnapshot>(&file) {
                decoded += 1;
                let _ = s.validate(&windows(), LATENESS);
                snaps[i] = s;
                restore_and_run(&snaps);
            }
        }
        1 if !files.segments.is_empty() => {
            let i = which % files.segments.len();
            let file = tampered(&files.segments[i], mutations);
            let base: CounterSnapshot = decode(&files.base).expect("valid");
            let mut segments: Vec<PaneSegment> = files.segments.iter().map(|f| decode(f).expect("valid")).collect();
            if let Ok(seg) = decode::<PaneSegment>(&file) {
                decoded += 1;
                segments[i] = seg;
                let whole = assemble(base, segments);
                let _ = whole.validate(&windows(), LATENESS);
                restore_and_run(&[whole]);
            }
        }
        1 => {
            if let Ok(base) = decode::<CounterSnapshot>(&tampered(&files.base, mutations)) {
                decoded += 1;
                let _ = base.validate(&windows(), LATENESS);
                restore_and_run(&[assemble(base, Vec::new())]);
            }
        }
        2 => {
            if let Ok(s) = decode::<MergerSnapshot>(&tampered(&files.merger, mutations)) {
                decoded += 1;
                let checked = ListMerger::try_restore(windows(), LATENESS, &s);
                // the unchecked restore must not panic later either
                for mut m in checked
                    .into_iter()
                    .chain([ListMerger::restore(windows(), LATENESS, &s)])
                {
                    let _ = m.advance(Millis(5), Millis(0));
                    let _ = m.advance(Millis::MAX, Millis(0));
                }
            }
        }
        _ => {
            if let Ok(s) = decode::<SourceSnapshot>(&tampered(&files.sources, mutations)) {
                decoded += 1;
                let _ = s.validate();
                for p in &s.partitions {
                    let mut clock = PartitionClock::with_max(Span::from_millis(3), p.max_ts);
                    let _ = clock.watermark();
                    let _ = clock.observe(Millis(0));
                }
            }
        }
    }
    decoded
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn tampered_snapshots_are_refused_or_restored_never_a_panic(
        events in proptest::collection::vec((0u8..6, 0i64..4, 0i64..12), 1..80),
        workers in 1usize..3,
        target in 0usize..4,
        which in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let files = checkpoint(&events, workers);
        let outcome = catch_unwind(AssertUnwindSafe(|| use_tampered(&files, target, which, &mutations)));
        prop_assert!(outcome.is_ok(), "panicked on target {} with {:?}", target, mutations);
    }
}

/// Every integer-sized window of every file, overwritten with every extreme value: the
/// exhaustive version of the proptest's `Overwrite` (which a random position rarely aims).
#[test]
fn every_position_overwritten_with_extremes() {
    // the first of some small pseudo-random inputs whose counter file has exclusions
    let files = (0u64..1000)
        .map(|seed| checkpoint(&small_events(seed), 1))
        .find(|f| {
            let counter: CounterSnapshot = decode(&f.counters[0]).expect("valid");
            let has = |p: fn(&hotlist_operators::snapshot::KeyGroupState) -> bool| counter.key_groups.iter().any(p);
            has(|k| !k.exclusions.is_empty()) && has(|k| !k.panes.is_empty()) && !f.segments.is_empty()
        })
        .expect("a small input reaches panes and exclusions");
    let len = |target: usize| match target {
        0 => files.counters[0].len(),
        1 => files.segments[0].len(),
        2 => files.merger.len(),
        _ => files.sources.len(),
    } - HEADER;
    for target in 0..4 {
        for at in 0..len(target) {
            for width in [2, 4, 8] {
                for v in EXTREMES {
                    let m = [Mutation::Overwrite(at, width, *v)];
                    let outcome = catch_unwind(AssertUnwindSafe(|| use_tampered(&files, target, 0, &m)));
                    assert!(outcome.is_ok(), "panicked on target {target} with {m:?}");
                }
            }
        }
    }
}

/// 24 events from a tiny linear congruential generator.
fn small_events(seed: u64) -> Vec<(u8, i64, i64)> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..24)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = x >> 33;
            ((r % 6) as u8, ((r >> 8) % 4) as i64, ((r >> 16) % 12) as i64)
        })
        .collect()
}

/// The untampered files decode, validate and restore: the fuzzing starts from sense.
#[test]
fn untampered_files_restore() {
    let events: Vec<(u8, i64, i64)> = (0..60)
        .map(|i| ((i % 5) as u8, (i % 3) as i64, (i % 11) as i64))
        .collect();
    let files = checkpoint(&events, 2);
    let snaps: Vec<CounterSnapshot> = files.counters.iter().map(|f| decode(f).expect("valid")).collect();
    assert!(WindowedCounter::restore(windows(), LATENESS, 0, 1, &snaps).is_ok());
    let merger: MergerSnapshot = decode(&files.merger).expect("valid");
    assert_eq!(merger.validate(&windows()), Ok(()));
    let sources: SourceSnapshot = decode(&files.sources).expect("valid");
    assert_eq!(sources.validate(), Ok(()));
    assert!(!files.segments.is_empty());
    for target in 0..4 {
        assert_eq!(use_tampered(&files, target, 0, &[]), 1, "target {target}");
    }
}

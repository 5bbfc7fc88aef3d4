//! The exact counter's hot path in isolation (no source, no timely, no sink): events of a
//! Zipf(1.1) stream over 1 M items applied to a `WindowedCounter`, epoch by epoch, as the
//! dataflow's `window_count` operator does. Shapes: the DuckDB comparison's four tumbling
//! windows (1m, 5m, 1h, 1d), one global 1m window, `by = ["country"]` and distinct users.
//!
//! `cargo bench -p hotlist-operators --bench counter` (criterion; compare two builds with
//! `--save-baseline` / `--baseline`). The whole job is measured by `scripts/bench`.
//!
//! `COUNTER_BENCH_ONCE=<case>` runs one case once, without criterion: a fixed amount of work to
//! count instructions and cache misses on (`valgrind --tool=cachegrind --cache-sim=yes`), where
//! wall time on a shared machine is too noisy to compare. A name that is no case (say
//! `four_setup` or `setup`) only builds the events (`four…`: the plain ones, else those with a
//! country and a user): subtract its count to get the counter's own.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::group::KeyShape;
use hotlist_operators::hash::item_hash;
use hotlist_operators::record::{EventText, PartitionId, TimedEvent};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;

#[path = "common/stream.rs"]
mod stream;
use stream::{Rng, Zipf};

const ITEMS: usize = 1_000_000;
const EVENTS: usize = 2_000_000;
/// Events per epoch (the dataflow's epochs hold tens of thousands of events).
const EPOCH: usize = 50_000;
/// Epochs per emission tick (open lists are published about once a second: at a few million
/// events a second, every 20th epoch of 50 k events).
const TICK: usize = 20;
/// Event time step: 2 M events over 500 s, so 1m windows close and seal during the run.
const STEP_MS: i64 = 1;
const EVERY: usize = 4;

/// The events: item ranks drawn from Zipf(1.1) by inverse CDF, in time order.
fn events(with_extra: bool) -> Vec<TimedEvent> {
    let zipf = Zipf::new(ITEMS, 1.1);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..EVENTS)
        .map(|i| {
            let rank = zipf.rank(&mut rng);
            let item = format!("item-{rank}");
            let text = match with_extra {
                true => {
                    let user = format!("u{}", rng.next() % 200_000);
                    EventText::new(&item, Some(&user), &[format!("C{}", rng.next() % 50)])
                }
                false => EventText::item(&item),
            };
            let ts = Millis((i / EVERY) as i64 * STEP_MS);
            TimedEvent {
                hash: item_hash(&item),
                text,
                ts,
                wm_before: Millis(ts.0 - 1),
                partition: PartitionId(0),
                position: i as u64,
            }
        })
        .collect()
}

/// Applies every event, advancing the watermark after each epoch; returns the lists emitted.
fn run(mut counter: WindowedCounter, events: &[TimedEvent]) -> usize {
    let mut lists = 0;
    for (n, epoch) in events.chunks(EPOCH).enumerate() {
        let mut dead = Vec::new();
        counter.apply_all(epoch, &mut dead);
        assert!(dead.is_empty());
        let wm = epoch.last().map_or(Millis(0), |e| e.ts);
        lists += counter.advance(wm, (n + 1) % TICK == 0).len();
    }
    lists + counter.advance(Millis(i64::MAX / 2), true).len()
}

fn window(name: &str, secs: u64, key: KeyShape) -> WindowSpec {
    WindowSpec {
        rank: Default::default(),
        key,
        ..WindowSpec::tumbling(name, Span::from_millis(secs * 1000), 100)
    }
}

fn bench(c: &mut Criterion) {
    let once = std::env::var("COUNTER_BENCH_ONCE").ok();
    // the events of each kind, built only if a case that runs needs them
    let wanted = |rich: bool| match &once {
        Some(case) => case.starts_with("four") != rich,
        None => true,
    };
    let plain = if wanted(false) { events(false) } else { Vec::new() };
    let rich = if wanted(true) { events(true) } else { Vec::new() };
    let by = KeyShape {
        by: vec!["country".into()],
        ..KeyShape::default()
    };
    let distinct = KeyShape {
        distinct_users: true,
        ..KeyShape::default()
    };
    let cases: Vec<(&str, Vec<WindowSpec>, &[TimedEvent])> = vec![
        (
            "four_windows",
            ["1m", "5m", "1h", "1d"]
                .iter()
                .zip([60, 300, 3600, 86_400])
                .map(|(n, s)| window(n, s, KeyShape::default()))
                .collect(),
            &plain,
        ),
        ("global_1m", vec![window("1m", 60, KeyShape::default())], &rich),
        ("by_country_1m", vec![window("1m", 60, by)], &rich),
        ("distinct_users_1m", vec![window("1m", 60, distinct)], &rich),
    ];
    if let Some(once) = once {
        for (name, windows, events) in cases.iter().filter(|c| c.0 == once) {
            let lists = run(WindowedCounter::new(windows.clone(), Span::from_millis(0), 0), events);
            println!("{name}: {lists} lists");
        }
        return;
    }
    let mut g = c.benchmark_group("counter");
    g.sample_size(10).throughput(Throughput::Elements(EVENTS as u64));
    for (name, windows, events) in cases {
        g.bench_function(name, |b| {
            b.iter_batched(
                || WindowedCounter::new(windows.clone(), Span::from_millis(0), 0),
                |counter| run(counter, events),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

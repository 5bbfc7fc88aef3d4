//! Compares the two sketches (count-min + candidates, plain and conservative; HeavyKeeper in the
//! same table bytes) with exact counting on the same Zipf streams, and prints a Markdown table:
//! recall of the true top K, the error of the listed counts (+ over, − under) and of every
//! item's estimate, the stated bound, events/s and heap bytes. Events/s is one thread adding
//! batches of events that carry their id and hash inline (as the job's do; building a batch is
//! not timed), the best of three runs. The exact baseline is a bare hash table owning its ids:
//! no windows or panes, so it is faster than the job's exact counter.
//!
//! `cargo run -p hotlist-operators --release --example sketch_compare` (a few minutes; about
//! 1.5 GB at its peak). Pass `quick` for the two small settings only.

#[path = "../tests/support/zipf.rs"]
mod zipf;

use hashbrown::HashTable;
use hotlist_operators::hash::item_hash;
use hotlist_operators::record::{ItemId, RankedItem};
use hotlist_operators::sketch::{CmsShape, CountMinSketch, CountMinTopK, ErrorBound, HeavyKeeper, HkShape, TopKSketch};
use hotlist_operators::topk::top_k;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// One row of the comparison.
struct Setting {
    items: usize,
    s: f64,
    events: usize,
    k: usize,
    /// The count-min shape: from (ε, δ), or the seed test's 2048 × 4.
    shape: CmsShape,
    label: &'static str,
}

/// The stream and its exact answers.
struct Data {
    ids: Vec<String>,
    hashes: Vec<u64>,
    stream: Vec<u32>,
    truth: Vec<u64>,
    top: HashSet<String>,
}

/// Exact counting, as a baseline: one hash-table entry (id, hash, count) per distinct item.
struct Exact {
    table: HashTable<(String, u64, u64)>,
}

impl Exact {
    fn add(&mut self, id: &str, hash: u64) {
        match self.table.find_mut(hash, |(i, h, _)| *h == hash && *i == id) {
            Some((_, _, c)) => *c += 1,
            None => {
                self.table
                    .insert_unique(hash, (id.to_string(), hash, 1), |(_, h, _)| *h);
            }
        }
    }
}

fn settings(quick: bool) -> Vec<Setting> {
    let eps = |e: f64| CmsShape::from_error(e, 0.001).expect("valid");
    let mut all = vec![
        Setting {
            items: 50_000,
            s: 1.0,
            events: 200_000,
            k: 10,
            shape: CmsShape::new(2048, 4).expect("valid"),
            label: "2048 × 4",
        },
        Setting {
            items: 1_000_000,
            s: 1.1,
            events: 2_000_000,
            k: 100,
            shape: eps(0.001),
            label: "ε 1e-3, δ 1e-3",
        },
    ];
    if !quick {
        all.extend([
            Setting {
                items: 1_000_000,
                s: 1.1,
                events: 20_000_000,
                k: 100,
                shape: eps(0.0001),
                label: "ε 1e-4, δ 1e-3",
            },
            Setting {
                items: 1_000_000,
                s: 0.8,
                events: 20_000_000,
                k: 100,
                shape: eps(0.0001),
                label: "ε 1e-4, δ 1e-3",
            },
            Setting {
                items: 1_000_000,
                s: 0.8,
                events: 20_000_000,
                k: 100,
                shape: eps(0.001),
                label: "ε 1e-3, δ 1e-3",
            },
            Setting {
                items: 5_000_000,
                s: 1.1,
                events: 20_000_000,
                k: 100,
                shape: eps(0.0001),
                label: "ε 1e-4, δ 1e-3",
            },
        ]);
    }
    all
}

fn data(s: &Setting) -> Data {
    let ids: Vec<String> = (0..s.items as u32).map(zipf::item_id).collect();
    let hashes = ids.iter().map(|id| item_hash(id)).collect();
    let stream = zipf::Zipf::new(s.items, s.s).stream(s.events, 7);
    let truth = zipf::counts(&stream, s.items);
    let ranked = ids
        .iter()
        .zip(&truth)
        .filter(|(_, c)| **c > 0)
        .map(|(id, c)| RankedItem {
            item_id: id.into(),
            count: *c,
            trend: None,
        });
    let top = top_k(ranked.collect(), s.k)
        .into_iter()
        .map(|r| r.item_id.to_string())
        .collect();
    Data {
        ids,
        hashes,
        stream,
        truth,
        top,
    }
}

/// Repetitions of each timed run; the table shows the fastest (the machine is shared).
const RUNS: usize = 3;

/// Events per batch: the stream is handed over in batches of events that carry their id and
/// hash inline, as the job's events do; building a batch is not timed.
const BATCH: usize = 65_536;

/// Runs `make()`'s sketch over the stream [`RUNS`] times; returns the last sketch and the best
/// events/s.
fn timed<S>(d: &Data, make: impl Fn() -> S, add: impl Fn(&mut S, &str, u64)) -> (S, f64) {
    let mut best = f64::MAX;
    let mut last = None;
    let mut batch: Vec<(ItemId, u64)> = Vec::with_capacity(BATCH);
    for _ in 0..RUNS {
        let mut sketch = make();
        let mut elapsed = Duration::ZERO;
        for chunk in d.stream.chunks(BATCH) {
            batch.clear();
            batch.extend(
                chunk
                    .iter()
                    .map(|&r| (ItemId::from(d.ids[r as usize].as_str()), d.hashes[r as usize])),
            );
            let t = Instant::now();
            for (id, hash) in &batch {
                add(&mut sketch, id, *hash);
            }
            elapsed += t.elapsed();
        }
        best = best.min(elapsed.as_secs_f64());
        last = Some(sketch);
    }
    (last.expect("RUNS > 0"), d.stream.len() as f64 / best / 1e6)
}

/// Runs one sketch over the stream and prints its row.
fn row<S: TopKSketch>(name: &str, shape: &str, d: &Data, k: usize, make: impl Fn() -> S) {
    let (sketch, rate) = timed(d, make, |s, id, h| s.add(id, h, 1));
    let list = sketch.top(k);
    let index = |id: &str| id[4..].parse::<usize>().expect("a code");
    let errs: Vec<i64> = list
        .iter()
        .map(|r| r.count as i64 - d.truth[index(&r.item_id)] as i64)
        .collect();
    let recall = list.iter().filter(|r| d.top.contains(r.item_id.as_str())).count();
    let all_max = (0..d.ids.len())
        .filter(|&i| d.truth[i] > 0)
        .map(|i| sketch.estimate(&d.ids[i], d.hashes[i]) as i64 - d.truth[i] as i64)
        .max_by_key(|e| e.abs())
        .unwrap_or(0);
    let bound = match sketch.error_bound() {
        ErrorBound::Overcount { at_most } => format!("≤ +{at_most}"),
        ErrorBound::Undercount => "≤ 0".into(),
    };
    println!(
        "| {name} | {shape} | {:.2} | {:+.1} | {:+} | {all_max:+} | {bound} | {rate:.2} M | {} |",
        recall as f64 / k as f64,
        errs.iter().sum::<i64>() as f64 / errs.len().max(1) as f64,
        errs.iter().copied().max_by_key(|e| e.abs()).unwrap_or(0),
        bytes(sketch.heap_bytes()),
    );
}

/// The count-min table alone, without candidates: what the list costs per event.
fn cells_only_row(shape: CmsShape, d: &Data) {
    let (sketch, rate) = timed(
        d,
        || CountMinSketch::new(shape),
        |s, _, h| {
            s.add(h, 1);
        },
    );
    println!(
        "| count-min cells only (no list) | {} × {} | — | — | — | — | ≤ +{} | {rate:.2} M | {} |",
        shape.width(),
        shape.depth(),
        sketch.error_bound(),
        bytes(sketch.heap_bytes())
    );
}

fn exact_row(d: &Data) {
    let make = || Exact {
        table: HashTable::new(),
    };
    let (exact, rate) = timed(d, make, |e, id, h| e.add(id, h));
    let heap = exact.table.capacity() * (std::mem::size_of::<(String, u64, u64)>() + 1)
        + exact.table.iter().map(|(id, _, _)| id.capacity()).sum::<usize>();
    println!(
        "| exact (hash table) | {} items | 1.00 | 0 | 0 | 0 | 0 | {rate:.2} M | {} |",
        exact.table.len(),
        bytes(heap),
    );
}

fn bytes(b: usize) -> String {
    match b {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b => format!("{:.1} KiB", b as f64 / 1024.0),
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    for s in settings(quick) {
        let d = data(&s);
        let distinct = d.truth.iter().filter(|c| **c > 0).count();
        println!(
            "\n**{} events, Zipf s = {} over {} items ({distinct} seen), top {} (candidates {}), count-min {}**\n",
            s.events,
            s.s,
            s.items,
            s.k,
            4 * s.k,
            s.label
        );
        println!("| sketch | table | recall@K | listed err, mean | listed err, max | all items, max err | stated bound | events/s | heap bytes |");
        println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        exact_row(&d);
        let cap = 4 * s.k;
        for cons in [false, true] {
            let shape = s.shape.conservative(cons);
            let name = if cons { "count-min, conservative" } else { "count-min" };
            let table = format!("{} × {}", shape.width(), shape.depth());
            row(name, &table, &d, s.k, || CountMinTopK::new(shape, cap).expect("valid"));
        }
        cells_only_row(s.shape, &d);
        // HeavyKeeper in the same table bytes: 8-byte buckets, half as many per row.
        let hk = HkShape::new((s.shape.width() / 2).max(1), s.shape.depth()).expect("valid");
        let table = format!("{} × {}", hk.width(), hk.depth());
        row("HeavyKeeper", &table, &d, s.k, || {
            HeavyKeeper::new(hk, cap).expect("valid")
        });
    }
}

//! why-timely: count (window, item) pairs of a skewed event stream two ways, on the same input,
//! and time them.
//!
//! * `dd-count`, `dd-count-total`, `dd-topk`: Differential Dataflow. The events are a collection
//!   of `(window, item)` with diff +1; `count()` (general, a `reduce` with an output arrangement)
//!   or `count_total()` (its specialisation for totally ordered times) per key; `dd-topk` is
//!   `count_total()` followed by a per-window top-K, a `reduce` over `(window, (count, item))`.
//! * `timely-count`, `timely-topk`: plain Timely Dataflow, the shape of hotlist's counter. Events
//!   are exchanged by item hash to a hand-written operator that stashes each epoch, and when the
//!   frontier has passed it applies the epoch to a `HashMap<(window, item), count>` and emits the
//!   counts changed in it (`timely-count`) or the top-K of each window changed in it, rebuilt from
//!   the window's previous top-K and the items changed since (`timely-topk`).
//! * `gen`: the input generator alone, the floor under every other mode.
//!
//! Timely time is an epoch (a `u64`, `--epoch` events each), as in hotlist; windows are tumbling
//! over event time. By default a window is retired once the watermark (largest event time seen
//! minus the generator's jitter bound, so no event is ever late) passes its end: the timely
//! operator drops its keys; differential can only shrink an arrangement by retracting what went
//! in, so the driver keeps each open window's items and feeds them back with negative diffs.
//! `--keep` retires nothing (both then hold every window to the end).
//!
//! Each run prints one line `mode=... secs=... events_per_s=... check=...` (`secs`: from the first
//! event generated to the last epoch through the probe, generator included); `check` must agree
//! between the modes of one family under `--keep` (count modes: the sum of all counts, which is
//! the number of events; top-K modes: a hash of the final top-K lists).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::time::Instant;

use differential_dataflow::input::Input as _;
use differential_dataflow::operators::CountTotal;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::{Capability, Inspect, Operator, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};

// ---------------------------------------------------------------------------------------------
// Parameters

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Gen,
    DdCount,
    DdCountTotal,
    DdTopk,
    TimelyCount,
    TimelyTopk,
}

#[derive(Clone, Debug)]
struct Params {
    mode: Mode,
    /// Events in the whole run.
    events: u64,
    /// Distinct items; popularity is Zipf-like (s = 1).
    items: u64,
    /// Events per epoch (per timely timestamp).
    epoch: u64,
    /// Tumbling window width, event-time milliseconds.
    window_ms: u64,
    /// Events per event-time second.
    rate: u64,
    /// Event times are up to this many milliseconds behind the stream position (out of order).
    jitter_ms: u64,
    /// List length of the top-K modes.
    k: usize,
    /// Retire nothing: keep every window's state to the end.
    keep: bool,
    workers: usize,
    seed: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: why-timely MODE [--events N] [--items N] [--epoch N] [--window-ms N] [--rate N]\n\
         \x20                      [--jitter-ms N] [--k N] [--keep] [--workers N] [--seed N]\n\
         MODE: gen | dd-count | dd-count-total | dd-topk | timely-count | timely-topk"
    );
    std::process::exit(2)
}

fn parse_args() -> Params {
    let mut args = std::env::args().skip(1);
    let mode = match args.next().as_deref() {
        Some("gen") => Mode::Gen,
        Some("dd-count") => Mode::DdCount,
        Some("dd-count-total") => Mode::DdCountTotal,
        Some("dd-topk") => Mode::DdTopk,
        Some("timely-count") => Mode::TimelyCount,
        Some("timely-topk") => Mode::TimelyTopk,
        _ => usage(),
    };
    let mut p = Params {
        mode,
        events: 4_000_000,
        items: 1_000_000,
        epoch: 10_000,
        window_ms: 60_000,
        rate: 5_000,
        jitter_ms: 1_000,
        k: 10,
        keep: false,
        workers: 1,
        seed: 42,
    };
    while let Some(flag) = args.next() {
        if flag == "--keep" {
            p.keep = true;
            continue;
        }
        let value: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage());
        match flag.as_str() {
            "--events" => p.events = value,
            "--items" => p.items = value,
            "--epoch" => p.epoch = value.max(1),
            "--window-ms" => p.window_ms = value.max(1),
            "--rate" => p.rate = value.max(1),
            "--jitter-ms" => p.jitter_ms = value.max(1),
            "--k" => p.k = value.max(1) as usize,
            "--workers" => p.workers = value.max(1) as usize,
            "--seed" => p.seed = value,
            _ => usage(),
        }
    }
    p
}

// ---------------------------------------------------------------------------------------------
// Input: deterministic, generated on the fly (no input file, no input held in memory)

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Event `i` of the stream: `(event time in ms, item)`, the same in every mode and worker.
///
/// Item rank r in [0, items) has probability ~ 1/(r+1) (continuous Zipf, s = 1, by inverting
/// its CDF ln(r+1)/ln(items+1)); ranks are then scattered over the id space by multiplying with
/// an odd constant not divisible by 5 (a bijection modulo 10^k), so hot items are not adjacent.
/// Event time advances `1000/rate` ms per event, minus up to `jitter_ms` of disorder.
struct Generator {
    rng: u64,
    items: u64,
    ln_items: f64,
    rate: u64,
    jitter_ms: u64,
}

impl Generator {
    fn new(p: &Params) -> Self {
        Generator {
            rng: p.seed,
            items: p.items,
            ln_items: ((p.items + 1) as f64).ln(),
            rate: p.rate,
            jitter_ms: p.jitter_ms,
        }
    }

    #[inline]
    fn event(&mut self, i: u64) -> (u64, u32) {
        let r = splitmix64(&mut self.rng);
        let u = (r >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let rank = ((u * self.ln_items).exp() as u64).saturating_sub(1).min(self.items - 1);
        let item = (rank.wrapping_mul(2_654_435_761) % self.items) as u32;
        let jitter = (r & 0xFFFF_FFFF) % self.jitter_ms;
        let time = self.jitter_ms + i * 1000 / self.rate - jitter;
        (time, item)
    }
}

/// Which worker feeds event `i` (events are spread round-robin; the counting is then exchanged).
#[inline]
fn mine(i: u64, index: usize, peers: usize) -> bool {
    (i % peers as u64) as usize == index
}

/// A window is sealed once the watermark (largest event time seen minus the jitter bound: no
/// later event can be older) has passed its end.
#[inline]
fn sealed(window: u64, window_ms: u64, max_time: u64, jitter_ms: u64) -> bool {
    (window + 1) * window_ms <= max_time.saturating_sub(jitter_ms)
}

// ---------------------------------------------------------------------------------------------
// Small helpers

/// FxHash-style hasher (as hotlist's maps use): one multiply per word, no SipHash.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64)
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// The exchange function of both engines' counting: by item.
#[inline]
fn item_route(item: u32) -> u64 {
    (item as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32
}

/// Hash of one top-K entry, summed over the final lists for `check`.
#[inline]
fn entry_hash(window: u64, item: u32, count: u64) -> u64 {
    let mut x = window ^ ((item as u64) << 20) ^ (count << 44);
    splitmix64(&mut x)
}

/// What a run reports besides its time: records that left the counting, and `check`.
#[derive(Default)]
struct Tally {
    out_records: u64,
    check: u64,
    /// Top-K modes of timely: the last list of each window (rank-ordered), for `check`.
    lists: BTreeMap<u64, Vec<(u32, u64)>>,
}

// ---------------------------------------------------------------------------------------------
// Main

fn main() {
    let p = parse_args();
    let workers = p.workers;
    timely::execute(timely::Config::process(workers), move |worker| {
        let p = p.clone();
        let started = Instant::now();
        let tally = match p.mode {
            Mode::Gen => run_gen(&p, worker.index(), worker.peers()),
            Mode::DdCount | Mode::DdCountTotal | Mode::DdTopk => run_differential(&p, worker),
            Mode::TimelyCount | Mode::TimelyTopk => run_timely(&p, worker),
        };
        let secs = started.elapsed().as_secs_f64();
        if worker.index() == 0 {
            println!(
                "mode={:?} keep={} workers={} events={} items={} epoch={} windows={} secs={:.3} \
                 events_per_s={:.0} out_records={} check={}",
                p.mode,
                p.keep,
                worker.peers(),
                p.events,
                p.items,
                p.epoch,
                (p.jitter_ms + p.events * 1000 / p.rate) / p.window_ms + 1,
                secs,
                p.events as f64 / secs,
                tally.out_records,
                tally.check,
            );
        }
    })
    .unwrap();
}

/// Only the generator, so its cost can be subtracted from the others.
fn run_gen(p: &Params, index: usize, peers: usize) -> Tally {
    let mut gen = Generator::new(p);
    let mut t = Tally::default();
    for i in 0..p.events {
        let (time, item) = gen.event(i);
        if mine(i, index, peers) {
            t.check = t.check.wrapping_add(time ^ item as u64);
        }
    }
    t
}

// ---------------------------------------------------------------------------------------------
// (a) Differential Dataflow

fn run_differential(p: &Params, worker: &mut timely::worker::Worker) -> Tally {
    let (index, peers) = (worker.index(), worker.peers());
    let tally = Rc::new(RefCell::new(Tally::default()));
    let (mode, k) = (p.mode, p.k);

    let (mut input, probe) = worker.dataflow::<u64, _, _>(|scope| {
        let (input, events) = scope.new_collection::<(u64, u32), isize>();
        let sink = tally.clone();
        let probe = match mode {
            Mode::DdCount | Mode::DdCountTotal => {
                let counts = if mode == Mode::DdCount { events.count() } else { events.count_total() };
                counts
                    .inspect(move |(((_w, _item), count), _time, diff)| {
                        let mut t = sink.borrow_mut();
                        t.out_records += 1;
                        t.check = t.check.wrapping_add((*count as i64 * *diff as i64) as u64);
                    })
                    .probe()
                    .0
            }
            Mode::DdTopk => events
                .count_total()
                .map(|((w, item), count)| (w, (count as u64, item)))
                // values arrive sorted ascending by (count, item): the top K are the last K
                .reduce(move |_w, input, output| {
                    for (value, _) in input.iter().rev().take(k) {
                        output.push((**value, 1isize));
                    }
                })
                .inspect(move |((w, (count, item)), _time, diff)| {
                    let mut t = sink.borrow_mut();
                    t.out_records += 1;
                    t.check = t.check.wrapping_add(entry_hash(*w, *item, *count).wrapping_mul(*diff as u64));
                })
                .probe()
                .0,
            _ => unreachable!(),
        };
        (input, probe)
    });

    // Retiring: the items fed for each open window, to retract once it is sealed.
    let mut open: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut max_time = 0u64;
    let mut gen = Generator::new(p);
    let mut i = 0u64;
    let mut epoch = 0u64;
    while i < p.events {
        let end = (i + p.epoch).min(p.events);
        while i < end {
            let (time, item) = gen.event(i);
            if mine(i, index, peers) {
                let window = time / p.window_ms;
                input.update((window, item), 1);
                max_time = max_time.max(time);
                if !p.keep {
                    open.entry(window).or_default().push(item);
                }
            }
            i += 1;
        }
        if !p.keep {
            // retract every sealed window: consolidate its items, one update per (window, item)
            while let Some(entry) = open.first_entry() {
                if !sealed(*entry.key(), p.window_ms, max_time, p.jitter_ms) {
                    break;
                }
                let (window, mut items) = entry.remove_entry();
                items.sort_unstable();
                for run in items.chunk_by(|a, b| a == b) {
                    input.update((window, run[0]), -(run.len() as isize));
                }
            }
        }
        epoch += 1;
        input.advance_to(epoch);
        input.flush();
        worker.step_while(|| probe.less_than(input.time()));
    }
    input.close();
    worker.step_while(|| !probe.done());
    Rc::try_unwrap(tally).ok().map(RefCell::into_inner).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// (b) Plain Timely Dataflow: the hand-written counter

/// Count and the last epoch that changed it (so each key is reported once per epoch).
#[derive(Clone, Copy)]
struct Slot {
    count: u32,
    touched: u32,
}

fn run_timely(p: &Params, worker: &mut timely::worker::Worker) -> Tally {
    let (index, peers) = (worker.index(), worker.peers());
    let tally = Rc::new(RefCell::new(Tally::default()));
    let (topk, k, keep, window_ms, jitter_ms) = (p.mode == Mode::TimelyTopk, p.k, p.keep, p.window_ms, p.jitter_ms);
    let mut input: InputHandle<u64, CapacityContainerBuilder<Vec<(u64, u32)>>> = InputHandle::new();
    let probe = ProbeHandle::new();

    worker.dataflow::<u64, _, _>(|scope| {
        let sink = tally.clone();
        input
            .to_stream(scope)
            .unary_frontier::<CapacityContainerBuilder<Vec<(u64, u32, u32, u32)>>, _, _, _>(
                Exchange::new(|&(_time, item): &(u64, u32)| item_route(item)),
                "WindowedCounter",
                move |_cap, _info| {
                    // events stashed by epoch until the frontier passes it (as hotlist does)
                    let mut stash: BTreeMap<u64, (Capability<u64>, Vec<Vec<(u64, u32)>>)> = BTreeMap::new();
                    let mut counts: FxMap<(u64, u32), Slot> = FxMap::default();
                    // top-K: each window's current list, as (count, item), best first
                    let mut lists: BTreeMap<u64, Vec<(u32, u32)>> = BTreeMap::new();
                    let mut changed: Vec<(u64, u32, u32)> = Vec::new(); // (window, item, old count)
                    let mut max_time = 0u64;
                    // windows holding keys (to find the sealed ones without scanning the map)
                    let mut windows: BTreeSet<u64> = BTreeSet::new();
                    let mut last_window = u64::MAX;

                    move |(input, frontier), output| {
                        input.for_each_stamp(|cap, data| {
                            if let Some(cap) = cap.retain_least(output.output_index()) {
                                let time = *cap.time();
                                let entry = stash.entry(time).or_insert_with(|| (cap, Vec::new()));
                                entry.1.extend(data.map(std::mem::take));
                            }
                        });
                        while let Some(entry) = stash.first_entry() {
                            if frontier.less_equal(entry.key()) {
                                break;
                            }
                            let (epoch, (cap, batches)) = entry.remove_entry();
                            let tag = epoch as u32 + 1;
                            // apply the epoch
                            for batch in &batches {
                                for &(time, item) in batch {
                                    let window = time / window_ms;
                                    max_time = max_time.max(time);
                                    let slot = counts.entry((window, item)).or_insert(Slot { count: 0, touched: 0 });
                                    if slot.touched != tag {
                                        slot.touched = tag;
                                        changed.push((window, item, slot.count));
                                        if window != last_window {
                                            windows.insert(window);
                                            last_window = window;
                                        }
                                    }
                                    slot.count += 1;
                                }
                            }
                            let mut session = output.session(&cap);
                            if !topk {
                                // emit (window, item, new count, old count) per changed key
                                for &(window, item, old) in &changed {
                                    session.give((window, item, counts[&(window, item)].count, old));
                                }
                            } else {
                                // new top-K of a window ⊆ its previous top-K ∪ the items changed
                                // now, since counts only grow: rank those, not the whole window
                                changed.sort_unstable_by_key(|&(w, item, _)| (w, item));
                                for group in changed.chunk_by(|a, b| a.0 == b.0) {
                                    let window = group[0].0;
                                    let list = lists.entry(window).or_default();
                                    let mut cand: Vec<(u32, u32)> = list
                                        .iter()
                                        .map(|&(_, item)| item)
                                        .chain(group.iter().map(|&(_, item, _)| item))
                                        .map(|item| (counts[&(window, item)].count, item))
                                        .collect();
                                    cand.sort_unstable_by(|a, b| b.cmp(a));
                                    cand.dedup();
                                    cand.truncate(k);
                                    if cand != *list {
                                        for (rank, &(count, item)) in cand.iter().enumerate() {
                                            session.give((window, item, count, rank as u32));
                                        }
                                        *list = cand;
                                    }
                                }
                            }
                            changed.clear();
                            // retire sealed windows: drop their keys and lists
                            if !keep {
                                let mut any = false;
                                while let Some(&w) = windows.first() {
                                    if !sealed(w, window_ms, max_time, jitter_ms) {
                                        break;
                                    }
                                    windows.pop_first();
                                    lists.remove(&w);
                                    any = true;
                                }
                                if any {
                                    counts.retain(|&(w, _), _| !sealed(w, window_ms, max_time, jitter_ms));
                                }
                            }
                        }
                    }
                },
            )
            .inspect(move |&(window, item, count, x): &(u64, u32, u32, u32)| {
                let mut t = sink.borrow_mut();
                t.out_records += 1;
                if topk {
                    // x is the rank: rank 0 starts the window's new list
                    let list = t.lists.entry(window).or_default();
                    if x == 0 {
                        list.clear();
                    }
                    list.push((item, count as u64));
                } else {
                    // x is the old count
                    t.check = t.check.wrapping_add((count - x) as u64);
                }
            })
            .probe_with(&probe);
    });

    let mut gen = Generator::new(p);
    let mut i = 0u64;
    let mut epoch = 0u64;
    while i < p.events {
        let end = (i + p.epoch).min(p.events);
        while i < end {
            let ev = gen.event(i);
            if mine(i, index, peers) {
                input.send(ev);
            }
            i += 1;
        }
        epoch += 1;
        input.advance_to(epoch);
        worker.step_while(|| probe.less_than(input.time()));
    }
    input.close();
    worker.step_while(|| !probe.done());

    let mut t = Rc::try_unwrap(tally).ok().map(RefCell::into_inner).unwrap_or_default();
    if topk {
        t.check = 0;
        for (&w, list) in &t.lists {
            for &(item, count) in list {
                t.check = t.check.wrapping_add(entry_hash(w, item, count));
            }
        }
    }
    t
}

//! `WindowCount`: the exact windowed counter of each worker, as a timely operator.
//!
//! Events arrive exchanged by the pinned item hash (each worker owns a fixed set of key
//! groups); control records arrive broadcast. Both are stashed by epoch and applied once the
//! frontier has passed the epoch: first the events, then the control records, which gives every
//! worker the same global watermark for the same epoch. The algorithm itself lives in
//! `hotlist_operators::counter`; this file only wires it to timely.

use crate::stats::JobStats;
use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::hash::key_group;
use hotlist_operators::record::{Control, DeadLetter, LocalList, TimedEvent};
use hotlist_operators::time::Span;
use hotlist_operators::watermark::GlobalWatermark;
use hotlist_operators::window::WindowSpec;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::Capability;
use timely::dataflow::Stream;

struct EpochStash {
    caps: (Capability<u64>, Capability<u64>),
    events: Vec<Vec<TimedEvent>>,
    controls: Vec<Control>,
}

/// Counts events per window on each worker; returns the local lists and `sealed` dead letters.
pub fn window_count<'scope>(
    events: Stream<'scope, u64, Vec<TimedEvent>>,
    control: Stream<'scope, u64, Vec<Control>>,
    windows: Vec<WindowSpec>,
    allowed_lateness: Span,
    stats: Arc<JobStats>,
) -> (
    Stream<'scope, u64, Vec<LocalList>>,
    Stream<'scope, u64, Vec<DeadLetter>>,
) {
    let scope = events.scope();
    let worker = scope.index();
    let mut builder = OperatorBuilder::new("WindowCount".to_string(), scope);
    let mut in_events = builder.new_input(events, Exchange::new(|e: &TimedEvent| key_group(e.hash) as u64));
    let mut in_control = builder.new_input(control, Pipeline);
    let (out_lists, lists) = builder.new_output::<Vec<LocalList>>();
    let (out_dead, dead) = builder.new_output::<Vec<DeadLetter>>();
    let mut out_lists: OutputBuilder<u64, CapacityContainerBuilder<Vec<LocalList>>> = OutputBuilder::from(out_lists);
    let mut out_dead: OutputBuilder<u64, CapacityContainerBuilder<Vec<DeadLetter>>> = OutputBuilder::from(out_dead);

    builder.build(move |_initial_caps| {
        let mut counter = WindowedCounter::new(windows, allowed_lateness, worker as u32);
        let mut global = GlobalWatermark::new();
        let mut stash: BTreeMap<u64, EpochStash> = BTreeMap::new();
        let mut last_stats = Instant::now() - Duration::from_secs(10);
        move |frontiers| {
            // stash input under the capabilities of its epoch
            in_events.for_each_stamp(|cap, data| {
                let Some(&t) = cap.least() else { return };
                let entry = stash.entry(t).or_insert_with(|| new_stash(&cap));
                entry.events.extend(data.map(std::mem::take));
            });
            in_control.for_each_stamp(|cap, data| {
                let Some(&t) = cap.least() else { return };
                let entry = stash.entry(t).or_insert_with(|| new_stash(&cap));
                for d in data {
                    entry.controls.append(d);
                }
            });
            // apply every epoch the frontier has passed, in order
            while let Some((&t, _)) = stash.first_key_value() {
                if frontiers.iter().any(|f| f.less_equal(&t)) {
                    break;
                }
                let Some((_, s)) = stash.pop_first() else { break };
                let mut dead = Vec::new();
                for batch in &s.events {
                    for ev in batch {
                        if let Some(d) = counter.apply(ev) {
                            dead.push(d);
                        }
                    }
                }
                let mut tick = false;
                for c in s.controls {
                    match c {
                        Control::Partition {
                            partition,
                            watermark,
                            status,
                            ..
                        } => global.update(partition, watermark, status),
                        Control::EmitTick => tick = true,
                    }
                }
                let mut lists = counter.advance(global.advance(), tick);
                if !lists.is_empty() {
                    out_lists.activate().session(&s.caps.0).give_container(&mut lists);
                }
                if !dead.is_empty() {
                    stats.sealed_dropped.fetch_add(dead.len() as u64, Relaxed);
                    out_dead.activate().session(&s.caps.1).give_container(&mut dead);
                }
                if tick || last_stats.elapsed() >= Duration::from_secs(1) {
                    last_stats = Instant::now();
                    let st = counter.stats();
                    stats.live_counters[worker].store(st.live_counters as u64, Relaxed);
                    stats.state_bytes[worker].store(st.heap_bytes as u64, Relaxed);
                    stats.live_items[worker].store(st.live_items as u64, Relaxed);
                    stats.peak_counters.fetch_max(stats.total_counters(), Relaxed);
                }
            }
        }
    });
    (lists, dead)
}

fn new_stash(cap: &timely::dataflow::operators::InputCapability<u64>) -> EpochStash {
    // One capability per output port: a capability is bound to the port it was minted for.
    let c0 = cap.retain_least(0).expect("u64 time has a least element");
    let c1 = cap.retain_least(1).expect("u64 time has a least element");
    EpochStash {
        caps: (c0, c1),
        events: Vec::new(),
        controls: Vec::new(),
    }
}

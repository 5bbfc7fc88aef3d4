//! `WindowCount`: the exact windowed counter of each worker, as a timely operator.
//!
//! Events arrive exchanged by the pinned item hash (each worker owns a fixed set of key
//! groups); control records arrive broadcast. Both are stashed by epoch and applied once the
//! frontier has passed the epoch: first the events, then the control records, which gives every
//! worker the same global watermark for the same epoch. The algorithm itself lives in
//! `hotlist_operators::counter`; this file only wires it to timely.
//!
//! At a checkpoint epoch the worker takes its counter snapshot (in memory; only the panes that
//! changed since its previous checkpoint) and hands encoding and the durable write to a thread,
//! holding the epoch's capability until the files are on disk: counting goes on meanwhile, and
//! the sink still commits the epoch only after it.

use super::epoch_stash::{Epoch, EpochStash};
use crate::stats::JobStats;
use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::hash::key_group;
use hotlist_operators::pane_sharing::PaneSharing;
use hotlist_operators::record::{Control, DeadLetter, LocalList, TimedEvent};
use hotlist_operators::time::Span;
use hotlist_operators::watermark::GlobalWatermark;
use hotlist_operators::window::WindowSpec;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::Stream;

/// Counts events per window on each worker; returns the local lists and `sealed` dead letters.
pub fn window_count<'scope>(
    events: Stream<'scope, u64, Vec<TimedEvent>>,
    control: Stream<'scope, u64, Vec<Control>>,
    windows: Vec<WindowSpec>,
    allowed_lateness: Span,
    stats: Arc<JobStats>,
    ctx: super::RunCtx,
) -> (
    Stream<'scope, u64, Vec<LocalList>>,
    Stream<'scope, u64, Vec<DeadLetter>>,
) {
    let scope = events.scope();
    let worker = scope.index();
    let peers = scope.peers();
    let mut builder = OperatorBuilder::new("WindowCount".to_string(), scope);
    let activator = scope.activator_for(builder.operator_info().address);
    let mut in_events = builder.new_input(events, Exchange::new(|e: &TimedEvent| key_group(e.hash) as u64));
    let mut in_control = builder.new_input(control, Pipeline);
    let (out_lists, lists) = builder.new_output::<Vec<LocalList>>();
    let (out_dead, dead) = builder.new_output::<Vec<DeadLetter>>();
    let mut out_lists: OutputBuilder<u64, CapacityContainerBuilder<Vec<LocalList>>> = OutputBuilder::from(out_lists);
    let mut out_dead: OutputBuilder<u64, CapacityContainerBuilder<Vec<DeadLetter>>> = OutputBuilder::from(out_dead);

    builder.build(move |_initial_caps| {
        let mut counter = match &ctx.restore {
            None => WindowedCounter::new(windows.clone(), allowed_lateness, worker as u32),
            Some(r) => WindowedCounter::restore(windows.clone(), allowed_lateness, worker as u32, peers, &r.counters)
                .unwrap_or_else(|e| {
                    ctx.fail(format!("cannot restore checkpoint {}: {e}", r.epoch));
                    WindowedCounter::new(windows.clone(), allowed_lateness, worker as u32)
                }),
        };
        let mut global = GlobalWatermark::new();
        global.restore(counter.watermark());
        let mut stash: EpochStash<Vec<TimedEvent>, Control> = EpochStash::new(&[0, 1]);
        let mut last_stats = Instant::now() - Duration::from_secs(10);
        // The checkpoint being written off this thread; its epoch's capability is held until
        // the file is durable, so the sink cannot commit that epoch before it.
        let mut writing: Option<SnapshotWrite> = None;
        // This worker's previous checkpoint directory and the apply sequence of its snapshot:
        // panes unchanged since are linked from there (none after a restore: all written).
        let mut previous: Option<(std::path::PathBuf, u64)> = None;
        // how long each linked pane file has been shared: bounded, so that a damaged file
        // cannot spoil every retained checkpoint (see `pane_sharing`)
        let mut sharing = PaneSharing::new(ctx.checkpoint.as_ref().map_or(1, |c| c.retain));
        move |frontiers| {
            if writing.as_ref().is_some_and(|w| w.done()) {
                finish(writing.take(), &stats, &ctx, worker);
            }
            // stash input under the capabilities of its epoch (events stay in their batches)
            in_events.for_each_stamp(|cap, data| {
                if let Some(batches) = stash.first_mut(&cap) {
                    batches.extend(data.map(std::mem::take));
                }
            });
            in_control.for_each_stamp(|cap, data| stash.second(&cap, data));
            // apply every epoch the frontier has passed, in order
            while let Some((
                t,
                Epoch {
                    caps,
                    first: events,
                    second: controls,
                },
            )) = stash.pop_complete(|t| frontiers.iter().any(|f| f.less_equal(t)))
            {
                let mut dead = Vec::new();
                for batch in &events {
                    for ev in batch {
                        if let Some(d) = counter.apply(ev) {
                            dead.push(d);
                        }
                    }
                }
                let mut tick = false;
                let requested = controls.contains(&Control::Checkpoint);
                for c in controls {
                    match c {
                        Control::Partition {
                            partition,
                            watermark,
                            status,
                            ..
                        } => global.update(partition, watermark, status),
                        Control::EmitTick => tick = true,
                        Control::Checkpoint => {}
                    }
                }
                let wm = global.advance();
                let mut lists = counter.advance(wm, tick);
                if ctx.is_checkpoint(t, wm, requested) {
                    if let Some(dir) = ctx.checkpoint_dir(t) {
                        // one write at a time: wait for the previous one (bounds memory)
                        finish(writing.take(), &stats, &ctx, worker);
                        let started = Instant::now();
                        let (base, panes) =
                            counter.snapshot_panes(previous.as_ref().map(|p| p.1), |key| sharing.may_reuse(key));
                        sharing.taken(&panes);
                        let prev_dir = previous.replace((dir.clone(), counter.sequence())).map(|p| p.0);
                        writing = Some(SnapshotWrite {
                            _holds: caps[0].clone(),
                            started,
                            thread: std::thread::spawn(move || {
                                crate::checkpoint::write_counter_part(&dir, worker, base, panes, prev_dir.as_deref())
                            }),
                        });
                    }
                }
                if !lists.is_empty() {
                    out_lists.activate().session(&caps[0]).give_container(&mut lists);
                }
                if !dead.is_empty() {
                    stats.sealed_dropped.fetch_add(dead.len() as u64, Relaxed);
                    out_dead.activate().session(&caps[1]).give_container(&mut dead);
                }
                if tick || last_stats.elapsed() >= Duration::from_secs(1) {
                    last_stats = Instant::now();
                    let st = counter.stats();
                    stats.set_worker_state(worker, st.live_counters, st.heap_bytes, st.live_items);
                }
            }
            if writing.is_some() {
                activator.activate_after(Duration::from_millis(1)); // look again soon
            }
        }
    });
    (lists, dead)
}

/// A counter snapshot being encoded and written on its own thread.
struct SnapshotWrite {
    /// The capability of the checkpoint's epoch (released when the write is done).
    _holds: timely::dataflow::operators::Capability<u64>,
    started: Instant,
    thread: std::thread::JoinHandle<anyhow::Result<crate::checkpoint::PartWritten>>,
}

impl SnapshotWrite {
    fn done(&self) -> bool {
        self.thread.is_finished()
    }
}

/// Waits for a snapshot write (if any), records it, and releases its epoch.
fn finish(write: Option<SnapshotWrite>, stats: &JobStats, ctx: &super::RunCtx, worker: usize) {
    let Some(w) = write else { return };
    match w.thread.join() {
        Ok(Ok(part)) => stats.note_checkpoint(worker, part, w.started.elapsed()),
        Ok(Err(e)) => ctx.fail(format!("checkpoint write failed: {e:#}")),
        Err(_) => ctx.fail("checkpoint write failed: the writer thread panicked".to_string()),
    }
}

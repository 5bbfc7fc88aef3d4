//! `WindowCount`: the windowed counters of each worker, as a timely operator: the exact pane
//! counter for `exact` and `both` windows, the sketch counter for `sketch`, `auto` and `both`.
//!
//! Events arrive exchanged by the pinned item hash (each worker owns a fixed set of key
//! groups); control records arrive broadcast. Both are stashed by epoch and applied once the
//! frontier has passed the epoch: first the events, then the control records, which gives every
//! worker the same global watermark for the same epoch. The algorithms live in
//! `hotlist_operators::counter` and `hotlist_operators::sketch_counter`; this file only wires
//! them to timely.
//!
//! At a checkpoint epoch the worker takes its counter snapshot (in memory; only the panes that
//! changed since its previous checkpoint) and hands encoding and the durable write to a thread,
//! holding the epoch's capability until the files are on disk: counting goes on meanwhile, and
//! the sink still commits the epoch only after it.

use super::lifecycle::{Applied, ControlFrame, EpochDriver, EpochOperator};
use crate::checkpoint::remote::Remote;
use crate::checkpoint::PartWritten;
use crate::config::JobPlan;
use crate::run_ctx::RunCtx;
use crate::stats::{JobStats, PartitionStats};
use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::message::{Control, LocalList};
use hotlist_operators::pane_sharing::PaneSharing;
use hotlist_operators::record::{DeadLetter, DeadReason, PartitionId, TimedEvent};
use hotlist_operators::sketch_counter::SketchCounter;
use hotlist_operators::time::Millis;
use hotlist_operators::watermark::GlobalWatermark;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::Capability;
use timely::dataflow::Stream;

/// Counts events per window on each worker; returns the local lists and `sealed` dead letters.
pub fn window_count<'scope>(
    events: Stream<'scope, u64, Vec<TimedEvent>>,
    control: Stream<'scope, u64, Vec<Control>>,
    plan: &JobPlan,
    stats: Arc<JobStats>,
    ctx: RunCtx,
) -> (
    Stream<'scope, u64, Vec<LocalList>>,
    Stream<'scope, u64, Vec<DeadLetter>>,
) {
    let scope = events.scope();
    let mut builder = OperatorBuilder::new("WindowCount".to_string(), scope);
    let activator = scope.activator_for(builder.operator_info().address);
    let mut in_events = builder.new_input(events, super::route_events::by_owner());
    let mut in_control = builder.new_input(control, Pipeline);
    let (out_lists, lists) = builder.new_output::<Vec<LocalList>>();
    let (out_dead, dead) = builder.new_output::<Vec<DeadLetter>>();
    let mut out_lists: OutputBuilder<u64, CapacityContainerBuilder<Vec<LocalList>>> = OutputBuilder::from(out_lists);
    let mut out_dead: OutputBuilder<u64, CapacityContainerBuilder<Vec<DeadLetter>>> = OutputBuilder::from(out_dead);
    let setup = WindowCountSetup {
        plan: plan.clone(),
        worker: scope.index(),
        peers: scope.peers(),
        stats,
    };

    builder.build(move |_initial_caps| {
        let mut driver = EpochDriver::<WindowCountState>::new(setup, &[LISTS, SEALED], ctx);
        move |frontiers| {
            if let Some(state) = driver.operator() {
                state.poll_write();
            }
            // stash input under the capabilities of its epoch (events stay in their batches)
            in_events.for_each_stamp(|cap, data| {
                if let Some(batches) = driver.records_mut(&cap) {
                    batches.extend(data.map(std::mem::take));
                }
            });
            in_control.for_each_stamp(|cap, data| driver.controls(&cap, data));
            // apply every epoch the frontier has passed, in order
            while let Some(Applied { caps, output }) = driver.step(|t| frontiers.iter().any(|f| f.less_equal(t))) {
                let Some((mut lists, mut dead)) = output else { continue };
                if !lists.is_empty() {
                    out_lists.activate().session(&caps[LISTS]).give_container(&mut lists);
                }
                if !dead.is_empty() {
                    out_dead.activate().session(&caps[SEALED]).give_container(&mut dead);
                }
            }
            if driver.operator().is_some_and(|s| s.is_writing()) {
                activator.activate_after(Duration::from_millis(1)); // look again soon
            }
        }
    });
    (lists, dead)
}

/// The output port of the local lists (an epoch holds a capability for each port).
const LISTS: usize = 0;
/// The output port of the dead letters of events that reached only sealed windows.
const SEALED: usize = 1;

/// One worker's counting state, and the checkpoint it may be writing.
struct WindowCountState {
    /// Global worker index (names the checkpoint part).
    worker: usize,
    counter: WindowedCounter,
    /// Whether the pane counter counts any window (else it is skipped: no interning per event).
    any_exact: bool,
    sketches: SketchCounter,
    stats: Arc<JobStats>,
    ctx: RunCtx,
    /// When the state gauges were last reported.
    last_stats: Instant,
    /// The checkpoint being written off this thread; its epoch's capability is held until
    /// the file is durable, so the sink cannot commit that epoch before it.
    writing: Option<SnapshotWrite>,
    /// This worker's previous checkpoint directory and the apply sequence of its snapshot:
    /// panes unchanged since are linked from there (none after a restore: all written).
    previous: Option<(PathBuf, u64)>,
    /// How long each linked pane file has been shared: bounded, so that a damaged file
    /// cannot spoil every retained checkpoint (see `pane_sharing`).
    sharing: PaneSharing,
    /// `checkpoint.dir = "s3://…"`: this worker uploads its own part of each checkpoint.
    remote: Option<Arc<Remote>>,
}

/// What a worker's counters are built from.
struct WindowCountSetup {
    plan: JobPlan,
    /// Global worker index.
    worker: usize,
    peers: usize,
    stats: Arc<JobStats>,
}

impl WindowCountState {
    /// Counts the epoch's events; returns those that reached only sealed windows.
    fn count(&mut self, events: &[Vec<TimedEvent>]) -> Vec<DeadLetter> {
        let mut dead = Vec::new();
        if self.any_exact {
            let counter = &mut self.counter;
            for batch in events {
                counter.apply_all(batch, &mut dead);
            }
        }
        let mut from_sketches = Vec::new();
        self.sketches.apply_epoch(events, &mut from_sketches);
        // one dead letter per event, whichever counter (or both) raised it (dead letters are rare)
        let seen: std::collections::HashSet<(PartitionId, u64)> =
            dead.iter().map(|d| (d.partition, d.position)).collect();
        dead.extend(
            from_sketches
                .into_iter()
                .filter(|d| !seen.contains(&(d.partition, d.position))),
        );
        dead
    }

    /// Counts the counter's dead letters by reason: `sealed` (an event for sealed instances
    /// only); anything else is a record the source should have refused (the counter returns
    /// `bad` for an event time outside years 0000-9999) and counts as bad.
    fn tally(&self, dead: &[DeadLetter]) {
        for d in dead {
            let (total, of_partition): (&AtomicU64, fn(&PartitionStats) -> &AtomicU64) = match d.reason {
                DeadReason::Sealed => {
                    self.stats.counting.sealed_dropped.fetch_add(1, Relaxed);
                    continue;
                }
                DeadReason::Late => (&self.stats.source.late, |p| &p.late),
                _ => (&self.stats.source.bad, |p| &p.bad),
            };
            total.fetch_add(1, Relaxed);
            if let Some(p) = self.stats.source.partitions.get(d.partition.0) {
                of_partition(&p).fetch_add(1, Relaxed);
            }
        }
    }

    /// Takes this worker's checkpoint into `dir` (in memory: only the panes changed since the
    /// previous one) and starts writing it on its own thread, holding `hold` until it is durable.
    fn write_snapshot(&mut self, dir: PathBuf, hold: &Capability<u64>) {
        // one write at a time: wait for the previous one (bounds memory)
        self.finish_write();
        let started = Instant::now();
        let sharing = &self.sharing;
        let (base, panes) = self
            .counter
            .snapshot_panes(self.previous.as_ref().map(|p| p.1), |key| sharing.may_reuse(key));
        self.sharing.taken(&panes);
        let prev_dir = self
            .previous
            .replace((dir.clone(), self.counter.sequence()))
            .map(|p| p.0);
        let worker = self.worker;
        let sketches = (!self.sketches.is_idle()).then(|| self.sketches.snapshot());
        let remote = self.remote.clone();
        // a process that writes no manifests keeps only its newest local parts
        let keep_parts = (!self.ctx.writes_sink)
            .then(|| {
                self.ctx
                    .checkpoint
                    .as_ref()
                    .map(|c| (c.dir.clone(), self.ctx.job.clone(), c.retain))
            })
            .flatten();
        self.writing = Some(SnapshotWrite {
            _holds: hold.clone(),
            started,
            thread: std::thread::spawn(move || {
                let mut part = crate::checkpoint::write_counter_part(&dir, worker, base, panes, prev_dir.as_deref())?;
                if let Some(s) = sketches {
                    part.add_file(crate::checkpoint::write_snapshot(
                        &dir,
                        &crate::checkpoint::sketch_file(worker),
                        &s,
                    )?);
                }
                // in the bucket before the epoch goes: whichever process writes the MANIFEST
                if let Some(r) = remote {
                    r.upload_part(&dir, worker, prev_dir.as_deref())?;
                    if let (Some((base, job, keep)), Some(epoch)) = (keep_parts, crate::checkpoint::epoch_of(&dir)) {
                        crate::checkpoint::retain_parts(&base, &job, epoch, keep);
                    }
                }
                Ok(part)
            }),
        });
    }

    /// Whether a checkpoint write is still in progress.
    fn is_writing(&self) -> bool {
        self.writing.is_some()
    }

    /// Finishes the checkpoint write if its thread is done (without waiting).
    fn poll_write(&mut self) {
        if self.writing.as_ref().is_some_and(|w| w.thread.is_finished()) {
            self.finish_write();
        }
    }

    /// Waits for the checkpoint write (if any), records it, and releases its epoch.
    fn finish_write(&mut self) {
        let Some(w) = self.writing.take() else { return };
        match w.thread.join() {
            Ok(Ok(part)) => self.stats.note_checkpoint(self.worker, part, w.started.elapsed()),
            Ok(Err(e)) => self.ctx.fail(format!("checkpoint write failed: {e:#}")),
            Err(_) => self
                .ctx
                .fail("checkpoint write failed: the writer thread panicked".to_string()),
        }
    }

    /// Reports the counter's size to the shared stats (at emit ticks, at most every second otherwise).
    fn report_state(&mut self, tick: bool) {
        if tick || self.last_stats.elapsed() >= Duration::from_secs(1) {
            self.last_stats = Instant::now();
            let st = self.counter.stats();
            let sk = self.sketches.stats();
            let (bytes, items) = (st.heap_bytes + sk.heap_bytes, st.live_items + sk.exact_items);
            self.stats
                .counting
                .set_worker_state(self.worker, st.live_counters, bytes, items);
            self.stats
                .counting
                .set_worker_sketches(self.worker, sk.sketches, sk.folds);
            self.stats
                .counting
                .set_worker_without_user(self.worker, st.without_user);
            self.stats.counting.set_worker_emits(self.worker, st.emits);
            if self.worker == 0 {
                // every worker knows every instance's groups alike
                if let Ok(mut o) = self.stats.counting.overflow_groups.lock() {
                    o.extend(self.counter.overflow_groups());
                    o.extend(self.sketches.overflow_groups());
                }
            }
        }
    }
}

impl EpochOperator for WindowCountState {
    /// Events, in the batches they arrived in.
    type Record = Vec<TimedEvent>;
    /// The lists to publish and the events that reached only sealed windows.
    type Output = (Vec<LocalList>, Vec<DeadLetter>);
    type Setup = WindowCountSetup;

    /// Every worker's: fresh counters, or those restored from `ctx.restore` (a counter that
    /// cannot be restored fails the run, and counting starts empty until it stops).
    fn restore(setup: WindowCountSetup, ctx: &RunCtx) -> Option<WindowCountState> {
        let WindowCountSetup {
            plan,
            worker,
            peers,
            stats,
        } = setup;
        let (windows, counting) = (plan.window_specs(), plan.countings());
        let allowed_lateness = plan.time.allowed_lateness;
        let exact: Vec<bool> = plan.windows.iter().map(|w| w.counting.counts_exactly()).collect();
        let w = worker as u32;
        let fresh = || WindowedCounter::counting(windows.clone(), &exact, allowed_lateness, w);
        let fresh_sketches = || SketchCounter::new(windows.clone(), counting.clone(), allowed_lateness, w, peers);
        let (counter, sketches) =
            match &ctx.restore {
                None => (fresh(), fresh_sketches()),
                Some(r) => {
                    let restored = WindowedCounter::restore_counting(
                        windows.clone(),
                        &exact,
                        allowed_lateness,
                        w,
                        peers,
                        &r.counters,
                    )
                    .and_then(|c| {
                        let (wm, sealed) = (c.watermark(), c.sealed_until().to_vec());
                        let layout = (windows.clone(), counting.clone());
                        SketchCounter::restore(layout.0, layout.1, allowed_lateness, w, peers, wm, &sealed, &r.sketches)
                            .map(|s| (c, s))
                    });
                    restored.unwrap_or_else(|e| {
                        ctx.fail(format!("cannot restore checkpoint {}: {e}", r.epoch));
                        (fresh(), fresh_sketches())
                    })
                }
            };
        let mut counter = counter;
        if !plan.announces_groups() {
            // the one counter of the job: the sources announce no groups (`group::admission`)
            counter.note_own_groups();
        }
        let sharing = PaneSharing::new(ctx.checkpoint.as_ref().map_or(1, |c| c.retain));
        let remote = match ctx.checkpoint.as_ref().and_then(|c| c.remote.as_ref()) {
            Some(t) => Remote::connect(t)
                .map_err(|e| ctx.fail(format!("{e:#}")))
                .ok()
                .map(Arc::new),
            None => None,
        };
        Some(WindowCountState {
            worker,
            counter,
            any_exact: exact.contains(&true),
            sketches,
            stats,
            ctx: ctx.clone(),
            last_stats: Instant::now() - Duration::from_secs(10),
            writing: None,
            previous: None,
            sharing,
            remote,
        })
    }

    /// The restored counter's (the largest of the checkpoint's counters').
    fn restored_watermark(&self, _: &RunCtx) -> Millis {
        self.counter.watermark()
    }

    /// Counts the epoch's events, notes its groups and advances both counters to its global
    /// watermark (emitting provisional lists at a tick).
    fn apply(&mut self, _: u64, events: Vec<Vec<TimedEvent>>, frame: &ControlFrame) -> Self::Output {
        let dead = self.count(&events);
        self.counter.note_groups(&frame.groups);
        self.sketches.note_groups(&frame.groups);
        let started = Instant::now();
        let mut lists = self.counter.advance(frame.watermark, frame.tick);
        if self.any_exact && (frame.tick || !lists.is_empty()) {
            self.stats.counting.note_emit(started.elapsed());
        }
        lists.extend(self.sketches.advance(frame.watermark, frame.tick));
        (lists, dead)
    }

    fn snapshot(&mut self, _: u64, dir: PathBuf, _: &ControlFrame, hold: &Capability<u64>) {
        self.write_snapshot(dir, hold);
    }

    fn report(&mut self, (_, dead): &Self::Output, frame: &ControlFrame, _: &GlobalWatermark) {
        self.tally(dead);
        self.report_state(frame.tick);
    }
}

/// A counter snapshot being encoded and written on its own thread.
struct SnapshotWrite {
    /// The capability of the checkpoint's epoch (released when the write is done).
    _holds: Capability<u64>,
    started: Instant,
    thread: std::thread::JoinHandle<anyhow::Result<PartWritten>>,
}

//! `MergeLists`: per-worker lists in (all routed to worker 0), published revisions out.
//!
//! Stashes lists and the broadcast control records by epoch; once the frontier passes an epoch
//! it computes the same global watermark the counters computed for that epoch and lets
//! `hotlist_operators::merge::ListMerger` decide what to publish.

use super::lifecycle::{Applied, ControlFrame, EpochDriver, EpochOperator};
use super::replay_peers::PeerLink;
use super::replays::Replays;
use super::sealed_ranges::{RangeBook, RangesByEpoch};
use super::sink::MergerNotes;
use crate::checkpoint;
use crate::config::JobPlan;
use crate::run_ctx::RunCtx;
use crate::stats::JobStats;
use hotlist_operators::merge::ListMerger;
use hotlist_operators::message::{Control, LocalList, PublishedList};
use hotlist_operators::record::ListState;
use hotlist_operators::record::PartitionId;
use hotlist_operators::replay::ReplaySnapshot;
use hotlist_operators::snapshot::{PartitionState, SourceSnapshot};
use hotlist_operators::time::Millis;
use hotlist_operators::watermark::GlobalWatermark;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::Stream;

/// Merges local lists into published revisions on worker 0. `notes` receives the checkpoint
/// epochs whose merger and source files are written and the sealed instances' input ranges
/// (for the sink).
pub fn merge_lists<'scope>(
    lists: Stream<'scope, u64, Vec<LocalList>>,
    control: Stream<'scope, u64, Vec<Control>>,
    plan: &JobPlan,
    stats: Arc<JobStats>,
    ctx: RunCtx,
    notes: MergerNotes,
    peers: Option<PeerLink>,
) -> Stream<'scope, u64, Vec<PublishedList>> {
    let MergerNotes { checkpoints, ranges } = notes;
    let setup = MergeSetup {
        plan: plan.clone(),
        leader: lists.scope().index() == 0,
        stats,
        checkpoints,
        ranges,
        peers,
    };
    let scope = lists.scope();
    lists.binary_frontier(
        control,
        Exchange::new(|_: &LocalList| 0u64),
        Pipeline,
        "MergeLists",
        move |cap, info| {
            let activator = scope.activator_for(info.address);
            let mut driver = EpochDriver::<MergeState>::new(setup, &[0], ctx);
            // held while replays are pending, at the earliest epoch still to come: their exact
            // revisions go out at it; after the last epoch, at that epoch (its commit, the
            // last, waits for them)
            let mut held = driver.operator().is_some_and(|s| s.is_replaying()).then_some(cap);
            move |(in_lists, f1), (in_control, f2), output| {
                in_lists.for_each_stamp(|cap, data| driver.records(&cap, data));
                in_control.for_each_stamp(|cap, data| driver.controls(&cap, data));
                // apply every epoch the frontiers have passed, in order
                while let Some(Applied {
                    caps,
                    output: published,
                }) = driver.step(|t| f1.less_equal(t) || f2.less_equal(t))
                {
                    if let Some(mut published) = published.filter(|p| !p.is_empty()) {
                        output.session(&caps[0]).give_container(&mut published);
                    }
                    if let Some(s) = driver.operator().filter(|s| s.is_replaying()) {
                        if held.is_none() || s.ended_at.is_some() {
                            held = Some(caps[0].clone());
                        }
                    }
                }
                let Some(state) = driver.operator() else { return };
                let Some(h) = held.as_mut() else { return };
                let frontier = f1.frontier().iter().chain(f2.frontier().iter()).min().copied();
                if let Some(f) = frontier.filter(|f| h.time() < f && state.ended_at.is_none()) {
                    h.downgrade(&f);
                }
                let mut exact = state.finished_replays();
                if !exact.is_empty() {
                    output.session(h).give_container(&mut exact);
                }
                if state.is_replaying() {
                    activator.activate_after(Duration::from_millis(5));
                } else {
                    state.replays_done();
                    held = None;
                }
            }
        },
    )
}

/// The merger of one worker (only worker 0's receives lists), and what the sources reported.
struct MergeState {
    /// Worker 0: the one that merges, checkpoints and reports.
    leader: bool,
    merger: ListMerger,
    /// Each partition's last control record: the sources' state for checkpoints.
    partitions: BTreeMap<PartitionId, PartitionState>,
    stats: Arc<JobStats>,
    ctx: RunCtx,
    /// Checkpoint epochs whose files are written, for the sink.
    checkpoints: Rc<RefCell<BTreeSet<u64>>>,
    /// Worker 0: where every instance's events lie (for the store and the replays).
    book: Option<RangeBook>,
    /// Worker 0 of a job with `exact_at_seal` windows: the replays of their sealed instances.
    replays: Option<Replays>,
    /// The epoch at which the input ended (its watermark the greatest).
    ended_at: Option<u64>,
    /// The latest checkpoint written, with its directory.
    last_checkpoint: Option<(u64, PathBuf)>,
}

/// What the merger is built from.
struct MergeSetup {
    plan: JobPlan,
    /// Worker 0: the one that merges, checkpoints and reports.
    leader: bool,
    stats: Arc<JobStats>,
    checkpoints: Rc<RefCell<BTreeSet<u64>>>,
    /// Sealed instances' ranges, for the sink.
    ranges: RangesByEpoch,
    /// Worker 0 of a cluster with `exact_at_seal` windows: the other processes' replay shares.
    peers: Option<PeerLink>,
}

impl MergeState {
    /// Whether replays are pending (worker 0 of a job with `exact_at_seal` windows).
    fn is_replaying(&self) -> bool {
        self.replays.as_ref().is_some_and(Replays::busy)
    }

    /// The exact revisions of the replays finished since the last call, counted in the stats.
    fn finished_replays(&mut self) -> Vec<PublishedList> {
        let Some(r) = self.replays.as_mut() else {
            return Vec::new();
        };
        let exact = r.finished(Millis::now());
        let stats = &self.stats;
        stats.merge.replays_exact.fetch_add(exact.len() as u64, Relaxed);
        r.report(&stats.merge);
        exact
    }

    /// No replay is pending any more. After the end of the input, the last checkpoint (if it
    /// is the last epoch's, not committed before these replays' revisions) is rewritten
    /// without them: a rerun from it does not replay them again.
    fn replays_done(&mut self) {
        let (Some(end), Some((t, dir)), Some(_)) = (self.ended_at, self.last_checkpoint.take(), &self.replays) else {
            return;
        };
        if t == end {
            if let Err(e) = checkpoint::write_snapshot(&dir, "replay.snap", &self.replay_snapshot()) {
                self.ctx.fail(format!("checkpoint write failed: {e:#}"));
            }
        }
    }

    /// What `replay.snap` keeps: the open instances' notes and the pending replays.
    fn replay_snapshot(&self) -> ReplaySnapshot {
        ReplaySnapshot {
            ranges: self.book.as_ref().map(|b| b.notes().clone()).unwrap_or_default(),
            pending: self.replays.as_ref().map(Replays::pending_jobs).unwrap_or_default(),
        }
    }

    /// Reports watermarks, partition statuses and what was published to the shared stats.
    fn report_published(&self, wm: Millis, global: &GlobalWatermark, published: &[PublishedList]) {
        let stats = &self.stats;
        stats.merge.watermark.store(wm.0, Relaxed);
        for (p, pwm, status) in global.partitions() {
            if let Some(ps) = stats.source.partitions.get_or_add(p.0) {
                ps.watermark.store(pwm.0, Relaxed);
                ps.status.store(status as u64, Relaxed);
            }
        }
        stats.merge.revisions.fetch_add(published.len() as u64, Relaxed);
        if let Some(r) = &self.replays {
            r.report(&stats.merge);
        }
        // (a replay's exact revision is counted in `finished_replays`, not as a seal)
        for p in published.iter().filter(|p| p.certificate.is_none()) {
            match p.state {
                ListState::Closed => stats.merge.windows_closed.fetch_add(1, Relaxed),
                ListState::Final => stats.merge.windows_sealed.fetch_add(1, Relaxed),
                ListState::Open => 0,
            };
        }
    }
}

impl EpochOperator for MergeState {
    type Record = LocalList;
    /// The revisions to publish.
    type Output = Vec<PublishedList>;
    type Setup = MergeSetup;

    /// A fresh merger, or worker 0's restored from `ctx.restore` (a merger that cannot be
    /// restored fails the run, and merging starts empty until it stops); with `exact_at_seal`
    /// windows worker 0 starts the replays of their sealed instances (the checkpoint's pending
    /// ones first). Every worker has one.
    fn restore(setup: MergeSetup, ctx: &RunCtx) -> Option<MergeState> {
        let MergeSetup {
            plan,
            leader,
            stats,
            checkpoints,
            ranges,
            peers,
        } = setup;
        let (windows, time) = (plan.window_specs(), plan.time);
        let merger = match &ctx.restore {
            Some(r) if leader => ListMerger::try_restore(windows.clone(), time.allowed_lateness, &r.merger)
                .unwrap_or_else(|e| {
                    ctx.fail(format!("cannot restore checkpoint {}: merger.snap: {e}", r.epoch));
                    ListMerger::new(windows, time.allowed_lateness)
                }),
            _ => ListMerger::new(windows, time.allowed_lateness),
        }
        .with_counting(&plan.countings());
        // worker 0 records where every instance lies, and replays `exact_at_seal` windows' sealed instances
        let book = leader.then(|| {
            let restored = ctx
                .restore
                .as_ref()
                .map(|r| (r.replay.as_ref().map(|s| s.ranges.clone()), &r.sources));
            RangeBook::new(plan.window_specs(), restored, ranges)
        });
        let replays = (leader && plan.any_exact_at_seal()).then(|| {
            let restored = ctx
                .restore
                .as_ref()
                .and_then(|r| r.replay.as_ref())
                .map(|s| s.pending.clone());
            Replays::start(Arc::new(plan), restored.unwrap_or_default(), peers)
        });
        Some(MergeState {
            leader,
            merger,
            partitions: BTreeMap::new(),
            stats,
            ctx: ctx.clone(),
            checkpoints,
            book,
            replays,
            ended_at: None,
            last_checkpoint: None,
        })
    }

    /// Receives the epoch's lists, keeps each partition's state for the next checkpoint, and
    /// returns what the merger publishes at the new global watermark (with the replays of the
    /// instances it sealed started: their exact revisions follow as they finish).
    fn apply(&mut self, t: u64, lists: Vec<LocalList>, frame: &ControlFrame) -> Vec<PublishedList> {
        for l in lists {
            self.merger.receive(l);
        }
        if let Some(b) = self.book.as_mut() {
            b.note(frame.replays.clone());
        }
        // the real clock, also when finished: a Kafka partition may go on in a later run
        for p in &frame.partitions {
            self.partitions.insert(p.partition, p.clone());
        }
        let wm = frame.watermark;
        let published = self.merger.advance(wm, Millis::now());
        if let Some(b) = self.book.as_mut() {
            let positions = self.partitions.iter().map(|(p, s)| (*p, s.position)).collect();
            let sealed = b.sealed(t, &published, &positions);
            if let Some(r) = self.replays.as_mut() {
                r.sealed(self.merger.take_sealed(), &sealed);
            }
            b.forget_before(self.merger.all_sealed_before(wm));
        }
        if wm == Millis::MAX {
            self.ended_at = Some(t);
        }
        published
    }

    /// Worker 0 writes `merger.snap`, `sources.snap` (and `replay.snap`) of checkpoint `t` and
    /// tells the sink it may commit it; a failed write fails the run.
    fn snapshot(&mut self, t: u64, dir: PathBuf, frame: &ControlFrame, _: &Capability<u64>) {
        if !self.leader {
            return;
        }
        let sources = SourceSnapshot {
            partitions: self.partitions.values().cloned().collect(),
        };
        let written = checkpoint::write_snapshot(&dir, "merger.snap", &self.merger.snapshot())
            .and_then(|_| checkpoint::write_snapshot(&dir, "sources.snap", &sources))
            .and_then(|_| checkpoint::write_snapshot(&dir, "replay.snap", &self.replay_snapshot()))
            .map(|_| ());
        match written {
            Ok(()) => {
                self.checkpoints.borrow_mut().insert(t);
                self.last_checkpoint = Some((t, dir));
            }
            Err(e) => self.ctx.fail(format!("checkpoint write failed: {e:#}")),
        }
        if frame.stopping {
            // stopping: what is pending is in this checkpoint; the next run replays it
            if let Some(r) = self.replays.as_mut() {
                r.stop();
            }
        }
    }

    fn report(&mut self, published: &Vec<PublishedList>, frame: &ControlFrame, global: &GlobalWatermark) {
        if self.leader {
            self.report_published(frame.watermark, global, published);
        }
    }
}

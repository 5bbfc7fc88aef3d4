//! `HotKeys`: the sampled hot-key detector as an operator (algorithm in
//! `operators/src/hot_keys.rs`).
//!
//! Every worker's source copies 1 in `hot_keys.sample` of its accepted events — chosen by a
//! pinned hash of the event's (partition, position), so a replay keeps the same ones — to its
//! `sampled` output (`dataflow/src/source/operator.rs`), and they go to worker 0, which counts them in one detector. It stashes them and the broadcast control records by
//! epoch like the merger; once the frontier passes an epoch it counts that epoch's sampled
//! events in (partition, position) order, computes the same global watermark as the counters and
//! closes the hot-key windows it passed. At a checkpoint epoch it writes `hotkeys.snap`
//! before it lets the epoch go, so the sink commits a checkpoint only with its detector state
//! on disk. The closed windows go to the sink with the dead letters (`SinkInput::Hot`).

use super::lifecycle::{Applied, ControlFrame, EpochDriver, EpochOperator};
use crate::checkpoint;
use crate::run_ctx::RunCtx;
use crate::stats::JobStats;
use hotlist_operators::hot_keys::{Added, HotKeyDetector, HotKeySpec, HotState, HotWindow};
use hotlist_operators::message::Control;
use hotlist_operators::record::TimedEvent;
use hotlist_operators::snapshot::SnapshotError;
use hotlist_operators::time::{Millis, Span};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::Stream;

/// The checkpoint file of the detector.
pub const HOT_KEYS_FILE: &str = "hotkeys.snap";

/// Detects hot keys in the sampled events (the source's `sampled` output, copied there so the
/// other 1 − 1/N events are never copied) on worker 0; returns the closed windows' reports.
pub fn hot_keys<'scope>(
    sampled: Stream<'scope, u64, Vec<TimedEvent>>,
    control: Stream<'scope, u64, Vec<Control>>,
    spec: HotKeySpec,
    allowed_lateness: Span,
    stats: Arc<JobStats>,
    ctx: RunCtx,
) -> Stream<'scope, u64, Vec<HotWindow>> {
    let leader = sampled.scope().index() == 0;
    stats.hot_keys.enabled.store(true, Relaxed);
    sampled.binary_frontier(
        control,
        Exchange::new(|_: &TimedEvent| 0u64),
        Pipeline,
        "HotKeys",
        move |_cap, _info| {
            let setup = HotKeysSetup {
                leader,
                spec,
                allowed_lateness,
                stats,
            };
            let mut driver = EpochDriver::<HotKeysState>::new(setup, &[0], ctx);
            move |(in_events, f1), (in_control, f2), output| {
                in_events.for_each_stamp(|cap, data| driver.records(&cap, data));
                in_control.for_each_stamp(|cap, data| driver.controls(&cap, data));
                while let Some(Applied { caps, output: reports }) =
                    driver.step(|t| f1.less_equal(t) || f2.less_equal(t))
                {
                    if let Some(mut reports) = reports.filter(|r| !r.is_empty()) {
                        output.session(&caps[0]).give_container(&mut reports);
                    }
                }
            }
        },
    )
}

/// Worker 0's detector and the global watermark it closes windows by.
struct HotKeysState {
    detector: HotKeyDetector,
    stats: Arc<JobStats>,
    ctx: RunCtx,
}

/// What the detector is built from.
struct HotKeysSetup {
    /// Worker 0: the only one that runs a detector.
    leader: bool,
    spec: HotKeySpec,
    allowed_lateness: Span,
    stats: Arc<JobStats>,
}

impl HotKeysState {
    fn report_windows(&self, sampled: u64, dropped: u64, reports: &[HotWindow]) {
        let h = &self.stats.hot_keys;
        h.sampled.fetch_add(sampled, Relaxed);
        h.dropped.fetch_add(dropped, Relaxed);
        h.windows.fetch_add(reports.len() as u64, Relaxed);
        h.open_windows.store(self.detector.open_windows() as u64, Relaxed);
        if let Some(last) = reports.last() {
            let hot = last.keys.iter().filter(|k| k.state == HotState::Hot).count() as u64;
            h.hot.store(hot, Relaxed);
            h.cooling.store(last.keys.len() as u64 - hot, Relaxed);
        }
    }
}

impl EpochOperator for HotKeysState {
    type Record = TimedEvent;
    /// The reports of the hot-key windows the epoch closed.
    type Output = Vec<HotWindow>;
    type Setup = HotKeysSetup;

    /// Worker 0's detector (none on the others): fresh, or the checkpoint's (`hotkeys.snap`).
    /// A checkpoint without one, or taken with another sample, window or sketch size, starts
    /// the detector afresh (logged); a damaged one fails the run (and the detector is off
    /// until it stops).
    fn restore(setup: HotKeysSetup, ctx: &RunCtx) -> Option<HotKeysState> {
        let HotKeysSetup {
            leader,
            spec,
            allowed_lateness,
            stats,
        } = setup;
        if !leader {
            return None;
        }
        let fresh = || HotKeyDetector::new(spec, allowed_lateness);
        let detector = match ctx.restore.as_ref().map(|r| (r.epoch, r.hot_keys.as_ref())) {
            None => fresh(),
            Some((epoch, None)) => {
                tracing::warn!("checkpoint {epoch} has no {HOT_KEYS_FILE}: the hot-key detector starts afresh");
                fresh()
            }
            Some((epoch, Some(snap))) => match HotKeyDetector::restore(spec, allowed_lateness, snap) {
                Ok(d) => Ok(d),
                Err(SnapshotError::Incompatible) => {
                    tracing::warn!(
                        "checkpoint {epoch}: {HOT_KEYS_FILE} was taken with another hot_keys sample, window or \
                         sketch size: the hot-key detector starts afresh"
                    );
                    fresh()
                }
                Err(e) => {
                    ctx.fail(format!("cannot restore checkpoint {epoch}: {HOT_KEYS_FILE}: {e}"));
                    return None;
                }
            },
        };
        // the plan was validated, so a fresh detector builds
        let detector = match detector {
            Ok(d) => d,
            Err(e) => {
                ctx.fail(format!("hot_keys: {e}"));
                return None;
            }
        };
        Some(HotKeysState {
            detector,
            stats,
            ctx: ctx.clone(),
        })
    }

    /// Counts the epoch's sampled events (in partition, position order: the candidates depend
    /// on order) and closes the windows its global watermark passed.
    fn apply(&mut self, _: u64, mut events: Vec<TimedEvent>, frame: &ControlFrame) -> Vec<HotWindow> {
        events.sort_unstable_by_key(|e| (e.partition, e.position));
        let mut dropped = 0u64;
        for e in &events {
            if self.detector.add(e.item(), e.hash, e.ts, e.wm_before) != Added::Counted {
                dropped += 1;
            }
        }
        let reports = self.detector.advance(frame.watermark, Millis::now());
        self.report_windows(events.len() as u64, dropped, &reports);
        reports
    }

    /// Writes `hotkeys.snap` of the checkpoint; a failed write fails the run.
    fn snapshot(&mut self, _: u64, dir: PathBuf, _: &ControlFrame, _: &Capability<u64>) {
        if let Err(e) = checkpoint::write_snapshot(&dir, HOT_KEYS_FILE, &self.detector.snapshot()) {
            self.ctx.fail(format!("checkpoint write failed: {e:#}"));
        }
    }
}

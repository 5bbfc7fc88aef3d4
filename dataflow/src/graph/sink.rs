//! `Sink`: gathers each completed epoch's published lists and dead letters on worker 0 and
//! hands them, as one [`CommitBatch`], to the sink writer thread.
//!
//! The hand-off channel is bounded: when the store falls behind, worker 0 blocks here and the
//! sources' in-flight bound turns that into backpressure on reading. The operator's output
//! carries nothing; its frontier (seen by the probe) says which epochs have been handed off.

use super::epoch_stash::{Epoch, EpochStash};
use crate::config::SourcePlan;
use crate::run_ctx::RunCtx;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::DeadLetter;
use hotlist_operators::time::Millis;
use hotlist_sinks::{CommitBatch, SourcedDeadLetter};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::{Operator, OutputBuilderSession};
use timely::dataflow::Stream;

/// What reaches the sink besides the lists: dead letters, and closed hot-key windows.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum SinkInput {
    /// A dead letter.
    Dead(DeadLetter),
    /// A closed hot-key window.
    Hot(HotWindow),
}

/// Where completed epochs go (worker 0 only).
pub struct SinkHandoff {
    /// The writer thread's inbox.
    pub tx: crossbeam_channel::Sender<CommitBatch>,
    /// Job id stamped on every batch.
    pub job: String,
    /// The source, which names partitions for dead letters (also those added while the job runs).
    pub source: SourcePlan,
    /// Set when the writer is gone: the job must stop.
    pub failed: Arc<AtomicBool>,
    /// Added to timely epochs: the first epoch after what the store already committed for
    /// this job, so a rerun's commits are not skipped as already done.
    pub epoch_base: u64,
}

/// Hands completed epochs to the writer.
pub fn sink<'scope>(
    lists: Stream<'scope, u64, Vec<PublishedList>>,
    dead: Stream<'scope, u64, Vec<SinkInput>>,
    handoff: Option<SinkHandoff>,
    ctx: RunCtx,
    checkpoints: Rc<RefCell<BTreeSet<u64>>>,
) -> Stream<'scope, u64, Vec<()>> {
    lists.binary_frontier(
        dead,
        Pipeline,
        Exchange::new(|_: &SinkInput| 0u64),
        "Sink",
        move |_cap, _info| {
            let mut state = SinkState {
                handoff,
                ctx,
                checkpoints,
                watermark: Millis::MIN,
            };
            // Without checkpoints, hold each epoch's output capability until it is handed off
            // (so the probe, and the sources' in-flight bound, reflect the sink). With them,
            // results wait for the next checkpoint, many epochs away: hold data, not epochs.
            let ports: &[usize] = if state.checkpointing() { &[] } else { &[0] };
            let mut stash: EpochStash<PublishedList, SinkInput> = EpochStash::new(ports);
            move |(in_lists, f1),
                  (in_dead, f2),
                  _output: &mut OutputBuilderSession<'_, u64, CapacityContainerBuilder<Vec<()>>>| {
                in_lists.for_each_stamp(|cap, data| stash.first(&cap, data));
                in_dead.for_each_stamp(|cap, data| stash.second(&cap, data));
                let pending_at = |t: &u64| f1.less_equal(t) || f2.less_equal(t);
                if state.checkpointing() {
                    state.commit_checkpoints(&mut stash, pending_at);
                } else {
                    state.hand_off_epochs(&mut stash, pending_at);
                }
                if f1.is_empty() && f2.is_empty() {
                    state.finish();
                }
            }
        },
    )
}

/// What worker 0's sink holds between activations.
struct SinkState {
    /// None on other workers, and once the writer is gone or the run failed.
    handoff: Option<SinkHandoff>,
    ctx: RunCtx,
    /// Checkpoint epochs whose merger files are written (from `MergeLists`).
    checkpoints: Rc<RefCell<BTreeSet<u64>>>,
    /// The greatest watermark of any list handed off so far.
    watermark: Millis,
}

impl SinkState {
    /// Whether results are committed at checkpoints (else at every epoch).
    fn checkpointing(&self) -> bool {
        self.ctx.checkpoint.is_some()
    }

    /// Without checkpoints: hands off every complete epoch, one batch each.
    fn hand_off_epochs(&mut self, stash: &mut EpochStash<PublishedList, SinkInput>, pending_at: impl Fn(&u64) -> bool) {
        while let Some((t, Epoch { first, second, .. })) = stash.pop_complete(&pending_at) {
            self.hand_off(t, first, second);
        }
    }

    /// With checkpoints: at each checkpoint epoch the frontiers have passed, hands off
    /// everything up to it as one batch.
    fn commit_checkpoints(
        &mut self,
        stash: &mut EpochStash<PublishedList, SinkInput>,
        pending_at: impl Fn(&u64) -> bool,
    ) {
        loop {
            let Some(c) = self.checkpoints.borrow().first().copied() else {
                break;
            };
            if pending_at(&c) {
                break;
            }
            self.checkpoints.borrow_mut().pop_first();
            let (mut lists, mut dead) = (Vec::new(), Vec::new());
            while let Some((_, e)) = stash.pop_complete(|t| *t > c || pending_at(t)) {
                lists.extend(e.first);
                dead.extend(e.second);
            }
            if self.ctx.failed() {
                self.handoff = None; // a checkpoint file is missing: commit nothing more
                break;
            }
            self.hand_off(c, lists, dead);
        }
    }

    /// After a fallback to an older checkpoint: drops the dead letters the store has already.
    fn not_yet_committed(&self, dead: Vec<DeadLetter>) -> Vec<DeadLetter> {
        match self.ctx.restore.as_deref() {
            Some(r) if !r.stored_dead_letters.is_empty() => dead
                .into_iter()
                .filter(|d| !r.stored_dead_letters.contains(d.partition, d.position))
                .collect(),
            _ => dead,
        }
    }

    /// Sends epoch `t`'s results (timely epoch; the batch carries the sink epoch) to the writer.
    /// Hot-key windows go in the batch in window order.
    fn hand_off(&mut self, t: u64, lists: Vec<PublishedList>, dead: Vec<SinkInput>) {
        if self.handoff.is_none() {
            return;
        }
        let (mut letters, mut hot_keys) = (Vec::with_capacity(dead.len()), Vec::new());
        for d in dead {
            match d {
                SinkInput::Dead(letter) => letters.push(letter),
                SinkInput::Hot(w) => hot_keys.push(w),
            }
        }
        let dead = self.not_yet_committed(letters);
        hot_keys.sort_by_key(|w| w.start);
        let Some(h) = self.handoff.as_mut() else { return };
        self.watermark = lists.iter().map(|l| l.watermark).fold(self.watermark, Millis::max);
        let dead_letters = dead
            .into_iter()
            .map(|letter| SourcedDeadLetter {
                source: h.source.partition_name(letter.partition.0),
                letter,
            })
            .collect();
        let batch = CommitBatch {
            job: h.job.clone(),
            epoch: h.epoch_base + t,
            watermark: self.watermark,
            lists,
            dead_letters,
            hot_keys,
        };
        if h.tx.send(batch).is_err() {
            h.failed.store(true, Relaxed);
            self.handoff = None;
        }
    }

    /// Inputs are done: dropping the sender lets the writer drain and finish.
    fn finish(&mut self) {
        self.handoff = None;
    }
}

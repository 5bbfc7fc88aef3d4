//! `Sink`: gathers each completed epoch's published lists, dead letters and sealed instances'
//! input ranges on worker 0 and hands them, as one [`CommitBatch`], to the sink writer thread.
//!
//! Dead letters are bounded here (`hotlist_operators::dead_letter_cap`): an open epoch holds
//! at most `run.max_dead_letters_per_block` whole letters per source and block, and each epoch,
//! once complete, is folded in epoch order into whole letters and block summaries, so what is
//! stored depends on the input alone and memory stays bounded between checkpoints.
//!
//! The hand-off channel is bounded: when the store falls behind, worker 0 blocks here and the
//! sources' in-flight bound turns that into backpressure on reading. The operator's output
//! carries nothing; its frontier (seen by the probe) says which epochs have been handed off.

use super::epoch_stash::{Epoch, EpochStash};
use super::sealed_ranges::RangesByEpoch;
use crate::config::SourcePlan;
use crate::run_ctx::RunCtx;
use crate::stats::JobStats;
use hotlist_operators::dead_letter_cap::{block_range, BlockCounts, EpochLetters, Folded};
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::DeadLetter;
use hotlist_operators::time::Millis;
use hotlist_sinks::{CommitBatch, SourcedDeadLetter};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
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

/// What the merger tells the sink beside the lists, both on worker 0's thread: the checkpoint
/// epochs whose files are written, and the sealed instances' input ranges by epoch.
#[derive(Clone, Default)]
pub struct MergerNotes {
    /// Checkpoint epochs whose merger and source files are written.
    pub checkpoints: Rc<RefCell<BTreeSet<u64>>>,
    /// Sealed instances' input ranges by the epoch that sealed them.
    pub ranges: RangesByEpoch,
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
    /// The cap on whole dead letters per block, with the store's count per (source, block).
    pub dead_letters: BlockCounts<String>,
    /// Where summarised dead letters are counted.
    pub stats: Arc<JobStats>,
}

/// Hands completed epochs to the writer.
pub fn sink<'scope>(
    lists: Stream<'scope, u64, Vec<PublishedList>>,
    dead: Stream<'scope, u64, Vec<SinkInput>>,
    handoff: Option<SinkHandoff>,
    ctx: RunCtx,
    notes: MergerNotes,
) -> Stream<'scope, u64, Vec<()>> {
    let MergerNotes { checkpoints, ranges } = notes;
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
                ranges,
                watermark: Millis::MIN,
                open: BTreeMap::new(),
                folded: BTreeMap::new(),
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
                in_dead.for_each_stamp(|cap, data| {
                    let t = cap.least().copied();
                    let mut hot = Vec::new();
                    for batch in data {
                        for d in batch.drain(..) {
                            match d {
                                SinkInput::Dead(l) => {
                                    if let Some(t) = t {
                                        state.add_letter(t, l);
                                    }
                                }
                                SinkInput::Hot(w) => hot.push(SinkInput::Hot(w)),
                            }
                        }
                    }
                    // (also for letters alone: the epoch is stashed, its capability held)
                    stash.second(&cap, std::iter::once(&mut hot));
                });
                let pending_at = |t: &u64| f1.less_equal(t) || f2.less_equal(t);
                state.fold_complete(pending_at);
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
    /// Sealed instances' input ranges by epoch (from `MergeLists`).
    ranges: RangesByEpoch,
    /// The greatest watermark of any list handed off so far.
    watermark: Millis,
    /// Dead letters of epochs not yet complete, bounded per block.
    open: BTreeMap<u64, EpochLetters<String>>,
    /// Dead letters of complete epochs not yet handed off, the cap applied.
    folded: BTreeMap<u64, Folded<String>>,
}

impl SinkState {
    /// Whether results are committed at checkpoints (else at every epoch).
    fn checkpointing(&self) -> bool {
        self.ctx.checkpoint.is_some()
    }

    /// Keeps a dead letter of epoch `t` (a letter the store has already is dropped).
    fn add_letter(&mut self, t: u64, letter: DeadLetter) {
        let Some(h) = self.handoff.as_ref() else { return };
        if self.stored_already(&letter) {
            return;
        }
        let cap = h.dead_letters.cap();
        let source = h.source.partition_name(letter.partition.0);
        self.open
            .entry(t)
            .or_insert_with(|| EpochLetters::new(cap))
            .add(source, letter);
    }

    /// Applies the cap to every complete epoch's dead letters, in epoch order.
    fn fold_complete(&mut self, pending_at: impl Fn(&u64) -> bool) {
        let Some(h) = self.handoff.as_mut() else {
            self.open.clear();
            return;
        };
        while let Some(entry) = self.open.first_entry() {
            if pending_at(entry.key()) {
                break;
            }
            let (t, letters) = entry.remove_entry();
            let folded = h.dead_letters.fold(letters);
            for (source, block) in &folded.overflowed {
                let (lo, hi) = block_range(*block);
                // once per block: a block of a source is a million positions
                tracing::warn!(
                    "{source}: more than {} dead letters in positions {lo}..={hi} \
                     (run.max_dead_letters_per_block): the rest of the block's are counted in a \
                     summary row per reason (hotlist_dead_letters_summarised_total)",
                    h.dead_letters.cap()
                );
            }
            self.folded.insert(t, folded);
        }
    }

    /// The folded dead letters of epochs up to `t`, merged in epoch order.
    fn take_folded(&mut self, t: u64) -> Folded<String> {
        let later = self.folded.split_off(&(t + 1));
        let mut out = Folded::default();
        for (_, f) in std::mem::replace(&mut self.folded, later) {
            out.extend(f);
        }
        out
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
            self.fold_complete(&pending_at);
            if self.ctx.failed() {
                self.handoff = None; // a checkpoint file is missing: commit nothing more
                break;
            }
            self.hand_off(c, lists, dead);
        }
    }

    /// After a fallback to an older checkpoint: whether the store has this dead letter already.
    fn stored_already(&self, d: &DeadLetter) -> bool {
        self.ctx
            .restore
            .as_deref()
            .is_some_and(|r| r.stored_dead_letters.contains(d.partition, d.position))
    }

    /// Sends epoch `t`'s results (timely epoch; the batch carries the sink epoch) to the writer.
    /// Hot-key windows go in the batch in window order.
    fn hand_off(&mut self, t: u64, lists: Vec<PublishedList>, dead: Vec<SinkInput>) {
        if self.handoff.is_none() {
            return;
        }
        let mut hot_keys: Vec<_> = dead
            .into_iter()
            .filter_map(|d| match d {
                SinkInput::Hot(w) => Some(w),
                SinkInput::Dead(_) => None, // taken out on arrival
            })
            .collect();
        hot_keys.sort_by_key(|w| w.start);
        let folded = self.take_folded(t);
        let ranges = {
            let mut by_epoch = self.ranges.borrow_mut();
            let later = by_epoch.split_off(&(t + 1));
            std::mem::replace(&mut *by_epoch, later)
                .into_values()
                .flatten()
                .collect()
        };
        let Some(h) = self.handoff.as_mut() else { return };
        self.watermark = lists.iter().map(|l| l.watermark).fold(self.watermark, Millis::max);
        let dead_letters = sourced(folded, &h.stats);
        let batch = CommitBatch {
            job: h.job.clone(),
            epoch: h.epoch_base + t,
            watermark: self.watermark,
            lists,
            dead_letters,
            hot_keys,
            ranges,
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

/// The batch's dead letters: the whole ones, then one row per summary (counted in the metric).
fn sourced(folded: Folded<String>, stats: &JobStats) -> Vec<SourcedDeadLetter> {
    let mut out: Vec<SourcedDeadLetter> = folded
        .whole
        .into_iter()
        .map(|(source, letter)| SourcedDeadLetter::whole(source, letter))
        .collect();
    for ((source, block, reason), s) in folded.summaries {
        stats.sink.note_summarised(reason, s.count);
        let (lo, hi) = block_range(block);
        out.push(SourcedDeadLetter {
            source,
            letter: DeadLetter {
                partition: s.partition,
                position: s.first,
                raw: Vec::new(),
                reason,
                detail: format!(
                    "summary: the {reason} dead letters of positions {lo}..={hi} beyond \
                     run.max_dead_letters_per_block, counted only",
                    reason = reason.as_str()
                ),
            },
            count: s.count,
            last_position: Some(s.last),
        });
    }
    out
}

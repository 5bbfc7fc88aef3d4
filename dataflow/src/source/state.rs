//! The source operator's state: the partitions this worker reads (reader, clock, position,
//! status) and the epoch clock. Built once per run by [`SourceState::new`], which also resumes
//! every partition where the restored checkpoint left it; partitions added to a Kafka topic
//! later join through [`SourceState::discover_partitions`]. The operator's closure
//! (`source::operator`) only moves what the methods produce to the outputs.

use super::accept::{accept_with, Batch, Place, Rules, Tally};
use super::held::{read_held, Held};
use super::kafka::discovery::Growth;
use super::replay_notes::{PartitionMarks, ReplayNoter};
use super::{PartitionReader, ReadStatus, Reader, Record};
use crate::config::{JobPlan, SourcePlan};
use crate::run_ctx::RunCtx;
use crate::stats::{JobStats, PartitionStats};
use crate::udf::Outcome;
use hotlist_operators::format::Parser;
use hotlist_operators::lateness::LatenessJudge;
use hotlist_operators::message::Control;
use hotlist_operators::record::{PartitionId, PartitionStatus};
use hotlist_operators::snapshot::PartitionState;
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::watermark::PartitionClock;
use hotlist_operators::window::{WindowId, WindowSpec};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timely::dataflow::operators::probe::Handle as ProbeHandle;

/// One partition this worker reads.
pub(super) struct Partition {
    id: PartitionId,
    reader: Reader,
    clock: PartitionClock,
    /// Records consumed (Kafka: the next offset to read).
    position: u64,
    status: PartitionStatus,
    /// When the reader last produced data (for the idle timeout).
    last_data: Instant,
    /// Tallies of this activation, flushed to the shared per-partition stats.
    tally: Tally,
    /// The shared per-partition stats.
    stats: Arc<PartitionStats>,
    /// Its reader failed (the run is failing): it is not read again, and it never ends.
    failed: bool,
    /// Instance-range bookkeeping (see `replay_notes`).
    marks: PartitionMarks,
}

impl Partition {
    /// Partition `id` read by `reader`, resumed at `state` (a restored checkpoint's) if any. A
    /// reader that cannot get back to the checkpoint's position is an error naming both: reading
    /// on from anywhere else would lose or double-count records (a Kafka partition whose
    /// messages there are gone reads on from its first offset only if `source.on_data_loss`
    /// says so).
    pub(super) fn resume(
        id: PartitionId,
        mut reader: Reader,
        out_of_orderness: Span,
        state: Option<&PartitionState>,
        stats: Arc<PartitionStats>,
    ) -> Result<Partition, String> {
        let mut clock = PartitionClock::new(out_of_orderness);
        let (mut position, mut status) = (0, PartitionStatus::Active);
        if let Some(state) = state {
            position = reader
                .resume_at(state.position)
                .map_err(|e| format!("partition {} cannot resume at position {}: {e:#}", id.0, state.position))?;
            clock = PartitionClock::with_max(out_of_orderness, state.max_ts);
            if state.status == PartitionStatus::Finished {
                clock.finish();
                status = PartitionStatus::Finished;
            }
        }
        let marks = PartitionMarks::starting_at(position, clock.max_ts(), reader.byte_mark());
        Ok(Partition {
            id,
            reader,
            clock,
            position,
            status,
            last_data: Instant::now(),
            tally: Tally::default(),
            stats,
            failed: false,
            marks,
        })
    }

    fn live(&self) -> bool {
        self.status != PartitionStatus::Finished
    }

    /// Whether to read it: live and not failed.
    fn readable(&self) -> bool {
        self.live() && !self.failed
    }
}

/// The windows whose instances' input ranges the source notes: every one.
fn replay_windows(plan: &JobPlan) -> Vec<(WindowId, WindowSpec)> {
    (plan.windows.iter().enumerate())
        .map(|(i, w)| (WindowId(i as u16), w.spec.clone()))
        .collect()
}

/// Why an epoch closes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EpochEnd {
    /// Its wall-clock time is up: the next epoch follows.
    Timer,
    /// It holds `run.max_epoch_records` records: the next epoch follows.
    Full,
    /// Every partition ended, or the job is stopping: this was the source's last epoch.
    Last,
}

/// The source of one worker.
pub(super) struct SourceState {
    partitions: Vec<Partition>,
    /// What a record must pass (lateness, `max_future`, `max_record_bytes`).
    rules: Rules,
    /// `time.max_out_of_orderness`, for the clocks of partitions added later.
    out_of_orderness: Span,
    stats: Arc<JobStats>,
    /// Records per activation over all partitions.
    batch: usize,
    /// The job's workers (all processes'): a batch keeps a list of events for each.
    workers: usize,
    epoch_interval: Duration,
    emit_interval: Duration,
    idle_timeout: Duration,
    max_epochs_in_flight: u64,
    max_epoch_records: u64,
    /// The current (timely) epoch, when it started and the records read in it.
    epoch: u64,
    epoch_started: Instant,
    epoch_records: u64,
    /// When the last emit tick was sent.
    last_tick: Instant,
    /// The run's context: its restored checkpoint, and failing it.
    ctx: RunCtx,
    /// A live Kafka run: partitions added to the topic while it runs.
    growth: Option<Growth>,
    /// Where each window instance's events lie (`replay_notes`): what the merger records so an
    /// instance can be read again (`exact_at_seal`, `explain`, `verify`).
    replay: Option<ReplayNoter>,
    /// With UDFs: the records of a read, held for one UDF batch (see `held`).
    held: Held,
}

impl SourceState {
    /// The source of worker `worker` of `workers` (global indexes), reading the partitions in
    /// `readers` (see [`SourceState::add_partitions`]) and, in a live Kafka run, those added to
    /// the topic later that it owns.
    pub(super) fn new(
        plan: &JobPlan,
        readers: Vec<(PartitionId, Reader)>,
        (worker, workers): (usize, usize),
        stats: Arc<JobStats>,
        ctx: &RunCtx,
    ) -> SourceState {
        let growth = match (&plan.source, &ctx.partition_count) {
            (SourcePlan::Kafka { spec, partitions }, Some(count)) if !spec.bounded => Some(Growth::new(
                count.clone(),
                *partitions,
                (worker, workers),
                spec.clone(),
                plan.max_record_bytes,
            )),
            _ => None,
        };
        let now = Instant::now();
        let mut state = SourceState {
            partitions: Vec::new(),
            rules: Rules {
                judge: LatenessJudge::new(plan.window_specs(), plan.time.allowed_lateness),
                max_future: plan.time.max_future,
                max_record_bytes: plan.max_record_bytes,
                wall: Millis::now(),
                format: Parser::new(plan.input.format.clone()),
                user_required: plan.input.user_required,
                udfs: plan.udf_runner.clone(),
                keyed: super::accept::keyed_rule(&plan.window_specs(), &plan.input.format.dims),
            },
            out_of_orderness: plan.time.max_out_of_orderness,
            stats,
            batch: plan.batch_size,
            workers,
            epoch_interval: plan.epoch_interval.as_std(),
            emit_interval: plan.time.emit_interval.as_std(),
            idle_timeout: plan.time.idle_timeout.as_std(),
            max_epochs_in_flight: plan.max_epochs_in_flight,
            max_epoch_records: plan.max_epoch_records,
            epoch: 0,
            epoch_started: now,
            epoch_records: 0,
            last_tick: now,
            ctx: ctx.clone(),
            growth,
            replay: ReplayNoter::new(replay_windows(plan), plan.time.allowed_lateness),
            held: Held::default(),
        };
        state.add_partitions(readers);
        state
    }

    /// Resumes the partitions in `readers` (where the run's checkpoint left them, if it has
    /// them) and reads them from now on. One that cannot resume fails the run (`ctx.fail`, like
    /// a counter that cannot be restored); this source then reads nothing at all.
    fn add_partitions(&mut self, readers: Vec<(PartitionId, Reader)>) {
        let restore = self.ctx.restore.clone();
        let resumed: Result<Vec<Partition>, String> = readers
            .into_iter()
            .map(|(id, reader)| {
                let state = restore
                    .as_deref()
                    .and_then(|r| r.sources.partitions.iter().find(|p| p.partition == id));
                let stats = self.stats.source.partitions.get_or_add(id.0).unwrap_or_default();
                Partition::resume(id, reader, self.out_of_orderness, state, stats)
            })
            .collect();
        match resumed {
            Ok(added) => self.partitions.extend(added),
            Err(e) => {
                let epoch = restore.as_deref().map_or(0, |r| r.epoch);
                self.ctx.fail(format!("cannot restore checkpoint {epoch}: {e}"));
                self.partitions.clear();
            }
        }
    }

    /// Opens the partitions added to the topic since the last look that this worker owns
    /// (a live Kafka run; nothing to do otherwise). Returns whether there were any.
    pub(super) fn discover_partitions(&mut self) -> bool {
        let Some(growth) = self.growth.as_mut() else {
            return false;
        };
        let readers = growth.new_readers();
        if readers.is_empty() {
            return false;
        }
        self.add_partitions(readers);
        true
    }

    /// Whether there is anything to read at all: partitions, or partitions that may still be
    /// added to the topic (a source without either ends at once).
    pub(super) fn has_partitions(&self) -> bool {
        !self.partitions.is_empty() || (self.growth.is_some() && !self.ctx.failed())
    }

    /// An empty batch sized for one activation.
    pub(super) fn new_batch(&self) -> Batch {
        Batch::new(self.workers, self.batch)
    }

    /// Records per activation.
    pub(super) fn batch_size(&self) -> usize {
        self.batch
    }

    /// Backpressure: the current epoch may not start while the end of the graph (`probe`) is
    /// still more than `max_epochs_in_flight` epochs behind.
    pub(super) fn held_back(&self, probe: &ProbeHandle<u64>) -> bool {
        let in_flight = self.max_epochs_in_flight;
        self.epoch >= in_flight && probe.less_than(&(self.epoch - in_flight))
    }

    /// Reads one batch into `out`, round-robin over the live partitions, and updates their
    /// status (active, idle, finished; a reader that failed fails the run). Returns whether
    /// anything was produced (or ended). The wall clock, the reference time of records
    /// without a message timestamp, is read once per batch.
    pub(super) fn read_batch(&mut self, out: &mut Batch) -> bool {
        let SourceState {
            partitions,
            rules,
            batch,
            idle_timeout,
            ctx,
            replay,
            epoch_records,
            held,
            ..
        } = self;
        rules.wall = Millis::now();
        let live = partitions.iter().filter(|p| p.readable()).count().max(1);
        let share = (*batch / live).max(1);
        let now = Instant::now();
        let mut produced = false;
        for part in partitions.iter_mut().filter(|p| p.readable()) {
            let Partition {
                id,
                reader,
                clock,
                position,
                tally,
                marks,
                ..
            } = part;
            // (where each worker's list stood: the partition's events of this read follow)
            let first_new: Vec<usize> = match replay {
                Some(_) => out.lists().iter().map(Vec::len).collect(),
                None => Vec::new(),
            };
            let mut take = |rec: &Record<'_>, at: u64, resolved: Option<&Outcome<'_>>| {
                tally.records += 1;
                *epoch_records += 1;
                let line = rec.message().map_or(0, |m| m.line);
                let place = Place {
                    partition: *id,
                    position: at,
                    out: &mut *out,
                    tally: &mut *tally,
                };
                if let (Some(ts), Some(n)) = (accept_with(rec, resolved, place, clock, rules), replay.as_mut()) {
                    n.skip(*id, at, line, ts);
                }
            };
            // files and generators count records; Kafka records carry their offset
            let mut admit = |rec: &Record<'_>| {
                Some(match rec.message() {
                    Some(m) => m.offset,
                    None => {
                        *position += 1;
                        *position
                    }
                })
            };
            let status = read_held(reader, share, rules, held, &mut admit, &mut take);
            if let Some(n) = replay.as_mut() {
                for (events, &from) in out.lists().iter().zip(&first_new) {
                    n.events(*id, marks, &events[from..]);
                }
            }
            part.after_kafka_read(ctx);
            produced |= part.note_read(status, now, *idle_timeout, ctx);
        }
        produced
    }

    /// Adds this activation's tallies to the shared stats (once per activation, not per record).
    pub(super) fn flush_tallies(&mut self) {
        let stats = &self.stats;
        for part in self.partitions.iter_mut() {
            let t = std::mem::take(&mut part.tally);
            if t.records == 0 {
                continue;
            }
            stats.source.records_in.fetch_add(t.records, Relaxed);
            stats.source.events_in.fetch_add(t.events, Relaxed);
            stats.source.bad.fetch_add(t.bad, Relaxed);
            stats.source.blank.fetch_add(t.blank, Relaxed);
            stats.source.late.fetch_add(t.late, Relaxed);
            stats.source.late_dropped.fetch_add(t.late_dropped, Relaxed);
            stats.source.filtered.fetch_add(t.filtered, Relaxed);
            let ps = &part.stats;
            ps.records.fetch_add(t.records, Relaxed);
            ps.events.fetch_add(t.events, Relaxed);
            ps.bad.fetch_add(t.bad, Relaxed);
            ps.blank.fetch_add(t.blank, Relaxed);
            ps.late.fetch_add(t.late, Relaxed);
            ps.filtered.fetch_add(t.filtered, Relaxed);
        }
    }

    /// Whether the epoch closes now: at the end of input, when stopping, on the timer, or once
    /// it holds `run.max_epoch_records` records (so what an epoch buffers downstream is bounded
    /// by records, whatever the input rate).
    pub(super) fn epoch_end(&self, stopping: bool) -> Option<EpochEnd> {
        // a live run that discovers partitions never ends by itself, even without partitions yet
        let ended = self.growth.is_none() && self.partitions.iter().all(|p| !p.live());
        if ended || stopping {
            Some(EpochEnd::Last)
        } else if self.epoch_started.elapsed() >= self.epoch_interval {
            Some(EpochEnd::Timer)
        } else if self.epoch_records >= self.max_epoch_records {
            Some(EpochEnd::Full)
        } else {
            None
        }
    }

    /// The control records that close the epoch: each partition's watermark, status and
    /// position, an emit tick when one is due (always at the last epoch), a checkpoint request
    /// when stopping, and the source's wall clock (checkpoints are due by it).
    pub(super) fn close_epoch(&mut self, end: EpochEnd, stopping: bool) -> Vec<Control> {
        let mut controls: Vec<Control> = self
            .partitions
            .iter()
            .map(|p| Control::Partition {
                partition: p.id,
                watermark: p.clock.watermark(),
                status: p.status,
                position: p.position,
                max_ts: p.clock.max_ts(),
            })
            .collect();
        if let Some(n) = self.replay.as_mut() {
            for p in self.partitions.iter_mut() {
                let at = (p.position, p.reader.byte_mark());
                n.epoch_closed(&mut p.marks, at, p.clock.max_ts(), p.clock.watermark());
            }
            let notes = n.take();
            if !notes.is_empty() {
                controls.push(Control::Replay(notes));
            }
        }
        if end == EpochEnd::Last || self.last_tick.elapsed() >= self.emit_interval {
            controls.push(Control::EmitTick);
            self.last_tick = Instant::now();
        }
        if stopping {
            controls.push(Control::Checkpoint);
        }
        controls.push(Control::Clock(Millis::now()));
        controls
    }

    /// Starts the next epoch; returns it (the time to downgrade the capabilities to).
    pub(super) fn next_epoch(&mut self) -> u64 {
        self.epoch += 1;
        self.epoch_started = Instant::now();
        self.epoch_records = 0;
        self.epoch
    }

    /// How long to sleep when nothing was read: until the epoch's end, at most 1 ms.
    pub(super) fn idle_wait(&self) -> Duration {
        let left = self.epoch_interval.saturating_sub(self.epoch_started.elapsed());
        left.min(Duration::from_millis(1))
    }
}

impl Partition {
    /// After a Kafka partition's read: its position is the next offset to read; its consumer
    /// lag and any data loss it accepted go to its stats; a data loss it did not accept fails
    /// the run.
    fn after_kafka_read(&mut self, ctx: &RunCtx) {
        let Some(after) = self.reader.after_read() else { return };
        self.position = after.position;
        if let Some(lag) = after.lag {
            self.stats.lag.store(lag as i64, Relaxed);
        }
        self.stats.data_loss.fetch_add(after.lost.gaps, Relaxed);
        self.stats.data_loss_messages.fetch_add(after.lost.messages, Relaxed);
        if let Some(line) = after.failure {
            ctx.fail(line);
        }
    }

    /// Updates the status after a read; returns whether it produced data (or ended). A failed
    /// read fails the run (`ctx.fail`) and leaves the partition unended: nothing it held back
    /// seals.
    fn note_read(&mut self, status: ReadStatus, now: Instant, idle_timeout: Duration, ctx: &RunCtx) -> bool {
        match status {
            ReadStatus::Failed(e) => {
                ctx.fail(format!("partition {}: {e}", self.id.0));
                self.failed = true;
                true
            }
            ReadStatus::Read(n) if n > 0 => {
                self.last_data = now;
                self.status = PartitionStatus::Active;
                true
            }
            ReadStatus::Ended => {
                self.clock.finish();
                self.status = PartitionStatus::Finished;
                true
            }
            _ => {
                if self.reader.can_idle() && now.duration_since(self.last_data) >= idle_timeout {
                    self.status = PartitionStatus::Idle;
                }
                false
            }
        }
    }
}

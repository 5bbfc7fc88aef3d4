//! The source operator: reads the partitions this worker owns and emits, per epoch,
//! the accepted events, one control record per partition (watermark, status, position) plus
//! emit ticks, and dead letters.
//!
//! Epochs are the timely time: a source closes its epoch every `epoch_interval` of wall clock
//! (or when its input ends) by downgrading its capabilities. Event time travels as data. The
//! source stamps each event with its partition's watermark *before* the event and applies the
//! lateness rule right here, where the raw bytes are at hand for the dead letter.
//!
//! Backpressure: a source does not start epoch `e` while the probe at the end of the graph is
//! still before `e - max_epochs_in_flight`.

pub mod file;
pub mod generator;
pub mod kafka;

use crate::config::{JobPlan, SourcePlan};
use crate::stats::JobStats;
use hotlist_operators::event::parse_event;
use hotlist_operators::hash::item_hash;
use hotlist_operators::lateness::LatenessJudge;
use hotlist_operators::record::{Control, DeadLetter, DeadReason, ItemId, PartitionId, PartitionStatus, TimedEvent};
use hotlist_operators::time::Millis;
use hotlist_operators::watermark::PartitionClock;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::{Scope, Stream};

/// One record as a reader produces it.
pub enum Record<'a> {
    /// A raw line (file, stdin, generator bad records): parsed by the source.
    Line(&'a [u8]),
    /// An already-structured event (generator).
    Event(&'a ItemId, Millis),
    /// A raw line at an explicit position (Kafka: the message's offset) and its line number
    /// within that message (1-based; a message may hold several events).
    LineAt(&'a [u8], u64, u32),
}

/// What a read call found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadStatus {
    /// Produced this many records (maybe 0 when the budget was 0).
    Read(usize),
    /// Nothing available right now (stdin waiting, paced generator ahead of the clock).
    Waiting,
    /// The partition ended.
    Ended,
}

/// A partition reader.
pub enum Reader {
    /// A JSON-lines file.
    File(file::FileReader),
    /// Standard input (read on a helper thread).
    Stdin(file::StdinReader),
    /// The generator (boxed: it is much larger than the other readers).
    Generator(Box<generator::GeneratorReader>),
    /// A Kafka partition.
    Kafka(Box<kafka::KafkaReader>),
}

impl Reader {
    #[inline]
    fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        match self {
            Reader::File(r) => r.read(budget, f),
            Reader::Stdin(r) => r.read(budget, f),
            Reader::Generator(r) => r.read(budget, f),
            Reader::Kafka(r) => r.read(budget, f),
        }
    }

    /// Skips to `position` records from the start (a restore).
    fn skip_to(&mut self, position: u64) -> anyhow::Result<()> {
        match self {
            Reader::File(r) => r.skip_to(position),
            Reader::Stdin(_) => anyhow::bail!("standard input cannot be replayed"),
            Reader::Generator(r) => {
                r.skip_to(position);
                Ok(())
            }
            Reader::Kafka(r) => r.seek(position),
        }
    }

    /// Whether "no data right now" can last (so the partition may go idle).
    fn can_idle(&self) -> bool {
        matches!(self, Reader::Stdin(_) | Reader::Kafka(_))
    }
}

struct Partition {
    id: PartitionId,
    reader: Reader,
    clock: PartitionClock,
    position: u64,
    status: PartitionStatus,
    last_data: Instant,
    /// Tallies of this activation, flushed to the shared per-partition stats.
    tally: Tally,
}

/// Per-activation tallies, flushed to the shared stats once per activation.
#[derive(Default)]
struct Tally {
    records: u64,
    events: u64,
    bad: u64,
    late: u64,
    late_dropped: u64,
}

/// The output streams of a source.
pub struct SourceStreams<'scope> {
    /// Accepted events.
    pub events: Stream<'scope, u64, Vec<TimedEvent>>,
    /// Control records (to be broadcast).
    pub control: Stream<'scope, u64, Vec<Control>>,
    /// Bad and late records.
    pub dead: Stream<'scope, u64, Vec<DeadLetter>>,
}

/// Opens the readers of the partitions worker `index` of `peers` owns (partition `p` belongs to
/// worker `p % peers`).
pub fn open_partitions(plan: &JobPlan, index: usize, peers: usize) -> anyhow::Result<Vec<(PartitionId, Reader)>> {
    let mut out = Vec::new();
    for p in (0..plan.source.partitions()).filter(|p| *p as usize % peers == index) {
        let reader = match &plan.source {
            SourcePlan::Files(paths) => Reader::File(file::FileReader::open(&paths[p as usize])?),
            SourcePlan::Stdin => Reader::Stdin(file::StdinReader::spawn()),
            SourcePlan::Generator { spec, pace } => {
                Reader::Generator(Box::new(generator::GeneratorReader::new(spec, p, *pace)?))
            }
            SourcePlan::Kafka { spec, .. } => Reader::Kafka(Box::new(kafka::KafkaReader::open(spec, p, None)?)),
        };
        out.push((PartitionId(p), reader));
    }
    Ok(out)
}

/// Builds the source operator.
#[allow(clippy::too_many_arguments)]
pub fn source<'scope>(
    scope: Scope<'scope, u64>,
    plan: &JobPlan,
    readers: Vec<(PartitionId, Reader)>,
    probe: ProbeHandle<u64>,
    stats: Arc<JobStats>,
    shutdown: Arc<AtomicBool>,
    restore: Option<&crate::checkpoint::Restored>,
) -> SourceStreams<'scope> {
    let mut builder = OperatorBuilder::new("Source".to_string(), scope);
    let info = builder.operator_info();
    let activator = scope.activator_for(info.address);
    let (out_events, events) = builder.new_output::<Vec<TimedEvent>>();
    let (out_control, control) = builder.new_output::<Vec<Control>>();
    let (out_dead, dead) = builder.new_output::<Vec<DeadLetter>>();
    let mut out_events: OutputBuilder<u64, timely::container::CapacityContainerBuilder<Vec<TimedEvent>>> =
        OutputBuilder::from(out_events);
    let mut out_control: OutputBuilder<u64, timely::container::CapacityContainerBuilder<Vec<Control>>> =
        OutputBuilder::from(out_control);
    let mut out_dead: OutputBuilder<u64, timely::container::CapacityContainerBuilder<Vec<DeadLetter>>> =
        OutputBuilder::from(out_dead);

    let ooo = plan.time.max_out_of_orderness;
    let judge = LatenessJudge::new(plan.windows.clone(), plan.time.allowed_lateness);
    let epoch_interval = plan.epoch_interval.as_std();
    let emit_interval = plan.time.emit_interval.as_std();
    let idle_timeout = plan.time.idle_timeout.as_std();
    let in_flight = plan.max_epochs_in_flight;
    let batch = plan.batch_size;
    let now = Instant::now();
    let mut partitions: Vec<Partition> = Vec::new();
    for (id, mut reader) in readers {
        let mut clock = PartitionClock::new(ooo);
        let mut position = 0;
        let mut status = PartitionStatus::Active;
        if let Some(state) = restore.and_then(|r| r.sources.partitions.iter().find(|p| p.partition == id)) {
            // Resume where the checkpoint left this partition.
            if let Err(e) = reader.skip_to(state.position) {
                tracing::error!("partition {}: cannot resume at {}: {e:#}", id.0, state.position);
            }
            position = state.position;
            clock = PartitionClock::with_max(ooo, state.max_ts);
            if state.status == PartitionStatus::Finished {
                clock.finish();
                status = PartitionStatus::Finished;
            }
        }
        partitions.push(Partition {
            id,
            reader,
            clock,
            position,
            status,
            last_data: now,
            tally: Tally::default(),
        });
    }

    builder.build(move |caps| {
        let mut caps = if partitions.is_empty() { None } else { Some(caps) };
        let mut epoch: u64 = 0;
        let mut epoch_started = Instant::now();
        let mut last_tick = Instant::now();
        let mut events_buf: Vec<TimedEvent> = Vec::with_capacity(batch);
        let mut dead_buf: Vec<DeadLetter> = Vec::new();
        move |_frontiers| {
            let Some(c) = caps.as_mut() else { return };
            let stopping = shutdown.load(Relaxed);
            if !stopping && epoch >= in_flight && probe.less_than(&(epoch - in_flight)) {
                activator.activate_after(Duration::from_millis(1));
                return;
            }

            // read a batch, round-robin over live partitions
            let mut produced = false;
            if !stopping {
                let live = partitions
                    .iter()
                    .filter(|p| p.status != PartitionStatus::Finished)
                    .count()
                    .max(1);
                let share = (batch / live).max(1);
                let now = Instant::now();
                for part in partitions.iter_mut().filter(|p| p.status != PartitionStatus::Finished) {
                    let Partition {
                        id,
                        reader,
                        clock,
                        position,
                        tally,
                        ..
                    } = part;
                    let status = reader.read(share, &mut |rec| {
                        // files and generators count records; Kafka records carry their offset
                        let at = match rec {
                            Record::LineAt(_, offset, _) => offset,
                            _ => {
                                *position += 1;
                                *position
                            }
                        };
                        tally.records += 1;
                        accept(rec, *id, at, clock, &judge, &mut events_buf, &mut dead_buf, tally);
                    });
                    if let Reader::Kafka(k) = &mut part.reader {
                        part.position = k.position(); // the next offset to read
                        if let (Some(lag), Some(ps)) = (k.lag(), stats.partitions.get(part.id.0 as usize)) {
                            ps.lag.store(lag as i64, Relaxed);
                        }
                    }
                    match status {
                        ReadStatus::Read(n) if n > 0 => {
                            produced = true;
                            part.last_data = now;
                            part.status = PartitionStatus::Active;
                        }
                        ReadStatus::Ended => {
                            part.clock.finish();
                            part.status = PartitionStatus::Finished;
                            produced = true;
                        }
                        _ => {
                            if part.reader.can_idle() && now.duration_since(part.last_data) >= idle_timeout {
                                part.status = PartitionStatus::Idle;
                            }
                        }
                    }
                }
            }
            if !events_buf.is_empty() {
                out_events.activate().session(&c[0]).give_container(&mut events_buf);
                events_buf.reserve(batch);
            }
            if !dead_buf.is_empty() {
                out_dead.activate().session(&c[2]).give_container(&mut dead_buf);
            }
            for part in partitions.iter_mut() {
                let t = std::mem::take(&mut part.tally);
                if t.records == 0 {
                    continue;
                }
                stats.records_in.fetch_add(t.records, Relaxed);
                stats.events_in.fetch_add(t.events, Relaxed);
                stats.bad.fetch_add(t.bad, Relaxed);
                stats.late.fetch_add(t.late, Relaxed);
                stats.late_dropped.fetch_add(t.late_dropped, Relaxed);
                if let Some(ps) = stats.partitions.get(part.id.0 as usize) {
                    ps.records.fetch_add(t.records, Relaxed);
                    ps.events.fetch_add(t.events, Relaxed);
                    ps.bad.fetch_add(t.bad, Relaxed);
                    ps.late.fetch_add(t.late, Relaxed);
                }
            }

            // close the epoch on the timer, at the end of input, or when stopping
            let ended = partitions.iter().all(|p| p.status == PartitionStatus::Finished);
            if ended || stopping || epoch_started.elapsed() >= epoch_interval {
                let mut controls: Vec<Control> = partitions
                    .iter()
                    .map(|p| Control::Partition {
                        partition: p.id,
                        watermark: p.clock.watermark(),
                        status: p.status,
                        position: p.position,
                    })
                    .collect();
                if ended || stopping || last_tick.elapsed() >= emit_interval {
                    controls.push(Control::EmitTick);
                    last_tick = Instant::now();
                }
                if stopping {
                    controls.push(Control::Checkpoint);
                }
                out_control.activate().session(&c[1]).give_container(&mut controls);
                if ended || stopping {
                    caps = None;
                    return;
                }
                epoch += 1;
                for cap in c.iter_mut() {
                    cap.downgrade(&epoch);
                }
                epoch_started = Instant::now();
            }
            if produced {
                activator.activate();
            } else {
                let left = epoch_interval.saturating_sub(epoch_started.elapsed());
                activator.activate_after(left.min(Duration::from_millis(1)));
            }
        }
    });
    SourceStreams { events, control, dead }
}

/// Parses (if needed), stamps, judges and routes one record.
#[allow(clippy::too_many_arguments)]
#[inline]
fn accept(
    rec: Record<'_>,
    partition: PartitionId,
    position: u64,
    clock: &mut PartitionClock,
    judge: &LatenessJudge,
    events: &mut Vec<TimedEvent>,
    dead: &mut Vec<DeadLetter>,
    tally: &mut Tally,
) {
    // the position of a Kafka record is its message's offset; the detail names the line in it
    let in_message = |detail: String| match rec {
        Record::LineAt(_, _, n) => format!("{detail} (line {n} of the message)"),
        _ => detail,
    };
    let (item, ts, raw): (ItemId, Millis, Option<&[u8]>) = match rec {
        Record::Line(line) | Record::LineAt(line, _, _) => match parse_event(line) {
            Ok(ev) => (ItemId::from(ev.item_id.as_ref()), ev.ts, Some(line)),
            Err(bad) => {
                tally.bad += 1;
                dead.push(DeadLetter {
                    partition,
                    position,
                    raw: line.to_vec(),
                    reason: DeadReason::Bad,
                    detail: in_message(bad.to_string()),
                });
                return;
            }
        },
        Record::Event(item, ts) => (item.clone(), ts, None),
    };
    tally.events += 1;
    let wm_before = clock.observe(ts);
    let verdict = judge.judge(ts, wm_before);
    if verdict.late_windows != 0 {
        tally.late += 1;
        tally.late_dropped += verdict.fully_late as u64;
        let raw = match raw {
            Some(r) => r.to_vec(),
            None => {
                let mut v = Vec::new();
                crate::generator::render_json(&item, ts, &mut v);
                v
            }
        };
        dead.push(DeadLetter {
            partition,
            position,
            raw,
            reason: DeadReason::Late,
            detail: in_message(format!(
                "late for window(s) {}: partition watermark was {} (allowed lateness {})",
                judge.names(verdict.late_windows),
                wm_before,
                judge.allowed_lateness()
            )),
        });
        if verdict.fully_late {
            return;
        }
    }
    let hash = item_hash(&item);
    events.push(TimedEvent {
        item,
        ts,
        wm_before,
        hash,
        partition,
        position,
    });
}

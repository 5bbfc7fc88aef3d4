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
//!
//! Files: `operator` the timely operator; `state` its partitions and epoch clock (restore
//! included); `resume` how a checkpoint's partitions go on in a new run (a Kafka partition a
//! bounded run finished reads on); `accept` the per-record path; `file`, `generator`, `kafka`
//! the readers (`kafka/data_loss.rs`: messages lost before they were read); `discovery`
//! partitions added to a Kafka topic while the job runs.

mod accept;
pub mod discovery;
pub mod file;
pub mod generator;
pub mod kafka;
mod operator;
pub mod resume;
mod state;
#[cfg(test)]
mod tests;

pub use operator::source;

use crate::config::{JobPlan, SourcePlan};
use hotlist_operators::record::{Control, DeadLetter, ItemId, PartitionId, TimedEvent};
use hotlist_operators::time::Millis;
use timely::dataflow::Stream;

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

    /// Skips to `position` records from the start (a restore); returns the position it reads
    /// on from: `position`, except for a Kafka partition that lost messages there and may read
    /// on from its first offset (`source.on_data_loss = "continue"`).
    fn resume_at(&mut self, position: u64) -> anyhow::Result<u64> {
        match self {
            Reader::File(r) => r.skip_to(position).map(|()| position),
            Reader::Stdin(_) => anyhow::bail!("standard input cannot be replayed"),
            Reader::Generator(r) => {
                r.skip_to(position);
                Ok(position)
            }
            Reader::Kafka(r) => r.seek(position),
        }
    }

    /// Whether "no data right now" can last (so the partition may go idle).
    fn can_idle(&self) -> bool {
        matches!(self, Reader::Stdin(_) | Reader::Kafka(_))
    }
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

/// Whether worker `index` of `peers` reads partition `p`: `p % peers == index`, at start and for
/// partitions added later alike.
pub fn owns(p: u32, index: usize, peers: usize) -> bool {
    p as usize % peers == index
}

/// Opens the readers of the partitions worker `index` of `peers` owns (see [`owns`]).
pub fn open_partitions(plan: &JobPlan, index: usize, peers: usize) -> anyhow::Result<Vec<(PartitionId, Reader)>> {
    let mut out = Vec::new();
    for p in (0..plan.source.partitions()).filter(|p| owns(*p, index, peers)) {
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

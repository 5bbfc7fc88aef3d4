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
//! bounded run finished reads on); `accept` the per-record path (parsing, the event time rules,
//! lateness); `replay_notes` what `exact_at_seal` replays need to know of the partitions;
//! `file`, `generator`, `kafka` the readers (`kafka/data_loss.rs`: messages lost
//! before they were read); `lines` splitting files and stdin into lines of bounded size;
//! `discovery` partitions added to a Kafka topic while the job runs.

mod accept;
pub mod discovery;
pub mod file;
pub mod generator;
pub mod kafka;
pub mod lines;
mod operator;
pub mod replay;
mod replay_notes;
pub mod resume;
mod state;
#[cfg(test)]
mod tests;

pub use operator::source;

use crate::config::{JobPlan, SourcePlan};
use hotlist_operators::message::Control;
use hotlist_operators::record::{DeadLetter, ItemId, PartitionId, TimedEvent};
use hotlist_operators::time::Millis;
use timely::dataflow::Stream;

/// Where a Kafka record sits: its message's offset and timestamp, and its line in the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InMessage {
    /// The message's offset: the record's position.
    pub offset: u64,
    /// The message's timestamp (Kafka's `CreateTime` or `LogAppendTime`), if it has one: the
    /// reference time of the `time.max_future` rule.
    pub timestamp: Option<Millis>,
    /// The line in the message, 1-based (a message may hold several events); 0 for a whole
    /// message that is too large.
    pub line: u32,
}

/// One record as a reader produces it.
pub enum Record<'a> {
    /// A raw line (file, stdin, generator bad records): parsed by the source.
    Line(&'a [u8]),
    /// An already-structured event (generator).
    Event(&'a ItemId, Millis),
    /// A raw line of a Kafka message.
    LineAt(&'a [u8], InMessage),
    /// A record longer than `source.max_record_bytes` (a line of a file or stdin, or a Kafka
    /// message, then `at` says which): its first bytes and its true length.
    TooLarge {
        /// Its first bytes (at most [`lines::RAW_HEAD_BYTES`]).
        head: &'a [u8],
        /// Its length in bytes.
        len: u64,
        /// The Kafka message it is.
        at: Option<InMessage>,
    },
}

impl Record<'_> {
    /// The Kafka message the record comes from.
    pub fn message(&self) -> Option<InMessage> {
        match self {
            Record::LineAt(_, m) => Some(*m),
            Record::TooLarge { at, .. } => *at,
            Record::Line(_) | Record::Event(..) => None,
        }
    }
}

/// What a read call found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadStatus {
    /// Produced this many records (maybe 0 when the budget was 0).
    Read(usize),
    /// Nothing available right now (stdin waiting, paced generator ahead of the clock).
    Waiting,
    /// The partition ended.
    Ended,
    /// The input cannot be read on (an I/O error; the records before it were produced): the
    /// run fails with this message. Never taken for an end: sealing lists of a partially read
    /// input would lose data silently.
    Failed(String),
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
    /// Bad records (`bad`, `future`, `too_large`) and late events.
    pub dead: Stream<'scope, u64, Vec<DeadLetter>>,
    /// With `[hot_keys]`: copies of the accepted events the hot-key detector samples (1 in
    /// `hot_keys.sample`, by a pinned hash of partition and position); empty otherwise.
    pub sampled: Stream<'scope, u64, Vec<TimedEvent>>,
}

/// Whether worker `index` of `peers` reads partition `p`: `p % peers == index`, at start and for
/// partitions added later alike.
pub fn owns(p: u32, index: usize, peers: usize) -> bool {
    p as usize % peers == index
}

/// Opens the readers of the partitions worker `index` of `peers` owns (see [`owns`]).
pub fn open_partitions(plan: &JobPlan, index: usize, peers: usize) -> anyhow::Result<Vec<(PartitionId, Reader)>> {
    let (mut out, limit) = (Vec::new(), plan.max_record_bytes);
    for p in (0..plan.source.partitions()).filter(|p| owns(*p, index, peers)) {
        let reader = match &plan.source {
            SourcePlan::Files(paths) => Reader::File(file::FileReader::open(&paths[p as usize], limit)?),
            SourcePlan::Stdin => Reader::Stdin(file::StdinReader::spawn(limit)),
            SourcePlan::Generator { spec, pace } => {
                Reader::Generator(Box::new(generator::GeneratorReader::new(spec, p, *pace)?))
            }
            SourcePlan::Kafka { spec, .. } => Reader::Kafka(Box::new(kafka::KafkaReader::open(spec, p, None, limit)?)),
        };
        out.push((PartitionId(p), reader));
    }
    Ok(out)
}

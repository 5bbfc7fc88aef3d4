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
//! included); `accept` the per-record path (parsing, the event time rules,
//! lateness); `replay_notes` what `exact_at_seal` replays need to know of the partitions;
//! `held` a read's records held for one batch through the UDFs;
//! `reader` the [`PartitionReader`] trait every reader implements and the [`Reader`] that
//! dispatches to them; `file`, `generator` the readers of files, stdin and the generator;
//! `kafka/` everything Kafka (the reader, data loss, partitions added while the job runs, how
//! a partition a bounded run finished goes on, reading a range again by offset); `lines`
//! splitting files and stdin into lines of bounded size; `read_ahead` a file read ahead on a
//! helper thread.

mod accept;
pub mod file;
pub mod generator;
mod held;
pub mod kafka;
pub mod lines;
mod operator;
pub(crate) mod read_ahead;
mod reader;
pub mod replay;
mod replay_notes;
mod state;
#[cfg(test)]
mod tests;

pub use operator::source;
pub use reader::{AfterRead, PartitionReader, Reader};

use crate::config::JobPlan;
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
#[derive(Clone, Copy)]
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
    (0..plan.source.partitions())
        .filter(|p| owns(*p, index, peers))
        .map(|p| {
            Ok((
                PartitionId(p),
                Reader::open(&plan.source, p, plan.max_record_bytes, true)?,
            ))
        })
        .collect()
}

//! The partition readers behind one trait: [`PartitionReader`] says what the source and the
//! `exact_at_seal` replays need of a reader (read a batch, resume at a position, whether it may
//! idle, what a read left to report); [`Reader`] is the reader of one partition of the job's
//! source kind, opened from its plan in one place.
//!
//! `read` hands each record to a generic callback (the per-record path is inlined), so the
//! trait is not object-safe: [`Reader`] dispatches to the kinds statically, each of its methods
//! one `match` that forwards to the kind's implementation.

use super::file::{FileReader, StdinReader};
use super::generator::GeneratorReader;
use super::kafka::{KafkaReader, Lost};
use super::{ReadStatus, Record};
use crate::config::SourcePlan;
use anyhow::{anyhow, bail, Result};
use hotlist_operators::replay::ByteMark;

/// A reader of one input partition.
pub trait PartitionReader {
    /// Reads up to `budget` records, handing each to `f`.
    fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus;

    /// Skips to `position` records from the start (a restore); returns the position it reads
    /// on from: `position`, unless the records there are gone and the source is told to read
    /// on (a Kafka partition with `source.on_data_loss = "continue"`).
    fn resume_at(&mut self, position: u64) -> Result<u64>;

    /// Whether "no data right now" can last (so the partition may go idle).
    fn can_idle(&self) -> bool {
        false
    }

    /// Whether positions are offsets of the next record to read (a replayed range is then
    /// `[from, to)`), rather than counts of the records read (`(from, to]`).
    fn positions_are_offsets(&self) -> bool {
        false
    }

    /// What the last read left to report; `None` for a reader whose position is the count of
    /// the records it handed out.
    fn after_read(&mut self) -> Option<AfterRead> {
        None
    }
}

/// What a read left to report, for a reader that knows its own position (Kafka).
#[derive(Debug, Default)]
pub struct AfterRead {
    /// The next position to read.
    pub position: u64,
    /// How far the reader is behind its partition's end, if known.
    pub lag: Option<u64>,
    /// Records lost before they were read, and accepted (`source.on_data_loss = "continue"`).
    pub lost: Lost,
    /// A loss not accepted: the run fails with this line.
    pub failure: Option<String>,
}

/// The reader of one partition, of the job's source kind.
pub enum Reader {
    /// A JSON-lines file (boxed: it holds a line reader's state).
    File(Box<FileReader>),
    /// Standard input (read on a helper thread).
    Stdin(StdinReader),
    /// The generator (boxed: it is much larger than the other readers).
    Generator(Box<GeneratorReader>),
    /// A Kafka partition.
    Kafka(Box<KafkaReader>),
}

impl Reader {
    /// Opens partition `p` of `source`, reading records of at most `max_record_bytes`. `live`:
    /// the job's own reader (a paced generator keeps its pace); else a replay's reader of its
    /// own (the generator unpaced; standard input cannot be read again).
    pub fn open(source: &SourcePlan, p: u32, max_record_bytes: usize, live: bool) -> Result<Reader> {
        Ok(match source {
            SourcePlan::Files(files) => {
                let (path, range) = files
                    .part(p)
                    .ok_or_else(|| anyhow!("the job has no file for partition {p}"))?;
                Reader::File(Box::new(FileReader::open_range(path, range, max_record_bytes)?))
            }
            SourcePlan::Stdin if live => Reader::Stdin(StdinReader::spawn(max_record_bytes)),
            SourcePlan::Stdin => bail!("standard input cannot be replayed"),
            SourcePlan::Generator { spec, pace } => {
                Reader::Generator(Box::new(GeneratorReader::new(spec, p, *pace && live)?))
            }
            SourcePlan::Kafka { spec, .. } => {
                Reader::Kafka(Box::new(KafkaReader::open(spec, p, None, max_record_bytes)?))
            }
        })
    }

    /// A file: where its next line starts, for an `exact_at_seal` replay to seek to (`None`:
    /// other kinds, or the bytes could not be read — the replay then counts lines to it).
    pub fn byte_mark(&self) -> Option<ByteMark> {
        match self {
            Reader::File(r) => r
                .byte_mark()
                .map_err(|e| tracing::debug!("no byte mark, a replay will count lines: {e:#}"))
                .ok(),
            _ => None,
        }
    }
}

impl PartitionReader for Reader {
    #[inline]
    fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        match self {
            Reader::File(r) => r.read(budget, f),
            Reader::Stdin(r) => r.read(budget, f),
            Reader::Generator(r) => r.read(budget, f),
            Reader::Kafka(r) => r.read(budget, f),
        }
    }

    fn resume_at(&mut self, position: u64) -> Result<u64> {
        match self {
            Reader::File(r) => r.resume_at(position),
            Reader::Stdin(r) => r.resume_at(position),
            Reader::Generator(r) => r.resume_at(position),
            Reader::Kafka(r) => r.resume_at(position),
        }
    }

    fn can_idle(&self) -> bool {
        match self {
            Reader::File(r) => r.can_idle(),
            Reader::Stdin(r) => r.can_idle(),
            Reader::Generator(r) => r.can_idle(),
            Reader::Kafka(r) => r.can_idle(),
        }
    }

    fn positions_are_offsets(&self) -> bool {
        match self {
            Reader::File(r) => r.positions_are_offsets(),
            Reader::Stdin(r) => r.positions_are_offsets(),
            Reader::Generator(r) => r.positions_are_offsets(),
            Reader::Kafka(r) => r.positions_are_offsets(),
        }
    }

    fn after_read(&mut self) -> Option<AfterRead> {
        match self {
            Reader::File(r) => r.after_read(),
            Reader::Stdin(r) => r.after_read(),
            Reader::Generator(r) => r.after_read(),
            Reader::Kafka(r) => r.after_read(),
        }
    }
}

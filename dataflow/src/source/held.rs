//! With UDFs, the records of one read are held (copied: a reader lends each record only for
//! its callback) until the read ends or [`MAX_HELD_BYTES`] are held; then their lines are
//! parsed and run through the UDFs as one batch, and every record goes on to `accept`, in
//! order, with its line's outcome. Without UDFs nothing is held: each record is accepted as it
//! is read.

use super::accept::Rules;
use super::{InMessage, PartitionReader, ReadStatus, Record};
use crate::udf::Outcome;
use hotlist_operators::format::Parser;
use hotlist_operators::record::ItemId;
use hotlist_operators::time::Millis;
use std::ops::Range;

/// The bytes of records held before a batch is run through the UDFs even if the read goes on:
/// a read of `run.batch_size` large records stays within this (plus one record).
pub const MAX_HELD_BYTES: usize = 8 << 20;

/// The records of a read, held for one UDF batch.
#[derive(Default)]
pub struct Held {
    arena: Vec<u8>,
    records: Vec<HeldRecord>,
}

struct HeldRecord {
    kind: Kind,
    position: u64,
    message: Option<InMessage>,
}

enum Kind {
    Line(Range<usize>),
    TooLarge { head: Range<usize>, len: u64 },
    Event(ItemId, Millis),
}

impl Held {
    /// Holds `rec` (at `position`); `true` when the held bytes reached [`MAX_HELD_BYTES`] (run
    /// the batch now).
    pub fn hold(&mut self, rec: &Record<'_>, position: u64) -> bool {
        let mut copy = |bytes: &[u8]| {
            let start = self.arena.len();
            self.arena.extend_from_slice(bytes);
            start..self.arena.len()
        };
        let kind = match *rec {
            Record::Line(line) | Record::LineAt(line, _) => Kind::Line(copy(line)),
            Record::TooLarge { head, len, .. } => Kind::TooLarge { head: copy(head), len },
            Record::Event(item, ts) => Kind::Event(item.clone(), ts),
        };
        self.records.push(HeldRecord {
            kind,
            position,
            message: rec.message(),
        });
        self.arena.len() >= MAX_HELD_BYTES
    }

    /// Runs the held lines through the UDFs and hands every held record, in order, to `take`
    /// with its position and (for a line) its outcome; holds nothing after. `Err`: a UDF broke
    /// its declared result type (the run fails with this line); nothing is handed on then.
    pub fn release(
        &mut self,
        parser: &Parser,
        udfs: &crate::udf::UdfRunner,
        mut take: impl FnMut(&Record<'_>, u64, Option<&Outcome<'_>>),
    ) -> Result<(), String> {
        if self.records.is_empty() {
            return Ok(());
        }
        let arena = &self.arena;
        let lines: Vec<&[u8]> = self
            .records
            .iter()
            .filter_map(|r| match &r.kind {
                Kind::Line(range) => Some(&arena[range.clone()]),
                _ => None,
            })
            .collect();
        let outcomes = udfs.run(parser, &lines).map_err(|e| format!("{e:#}"));
        let result = outcomes.map(|outcomes| {
            let mut outcomes = outcomes.iter();
            for r in &self.records {
                let (rec, outcome) = match &r.kind {
                    Kind::Line(range) => {
                        let line = &arena[range.clone()];
                        let rec = match r.message {
                            Some(m) => Record::LineAt(line, m),
                            None => Record::Line(line),
                        };
                        (rec, outcomes.next())
                    }
                    Kind::TooLarge { head, len } => (
                        Record::TooLarge {
                            head: &arena[head.clone()],
                            len: *len,
                            at: r.message,
                        },
                        None,
                    ),
                    Kind::Event(item, ts) => (Record::Event(item, *ts), None),
                };
                take(&rec, r.position, outcome);
            }
        });
        self.arena.clear();
        self.records.clear();
        result
    }
}

/// One read of up to `budget` records: each one `admit` gives a position (`None`: skipped) goes
/// to `take`, at once without UDFs, else held and handed on batch by batch with its line's
/// outcome. A UDF that broke its declared result type makes the read `Failed`.
pub fn read_held<R: PartitionReader>(
    reader: &mut R,
    budget: usize,
    rules: &Rules,
    held: &mut Held,
    admit: &mut impl FnMut(&Record<'_>) -> Option<u64>,
    take: &mut impl FnMut(&Record<'_>, u64, Option<&Outcome<'_>>),
) -> ReadStatus {
    let udfs = !rules.udfs.is_empty();
    let mut failure = None;
    let status = reader.read(budget, &mut |rec| {
        let Some(at) = admit(&rec) else { return };
        if !udfs {
            take(&rec, at, None);
        } else if held.hold(&rec, at) {
            if let Err(e) = held.release(&rules.format, &rules.udfs, &mut *take) {
                failure.get_or_insert(e);
            }
        }
    });
    if let Err(e) = held.release(&rules.format, &rules.udfs, &mut *take) {
        failure.get_or_insert(e);
    }
    failure.map_or(status, ReadStatus::Failed)
}

//! One record's way into the job: parsed (if it is a raw line), stamped with its partition's
//! watermark *before* it, judged late or not, and routed to the events or the dead letters.
//!
//! This is the per-record hot path: no allocation for an accepted event (its id is inline up to
//! 24 bytes), counters bumped in a plain struct and flushed to the shared stats once per
//! activation.

use super::Record;
use hotlist_operators::event::parse_event;
use hotlist_operators::hash::item_hash;
use hotlist_operators::lateness::LatenessJudge;
use hotlist_operators::record::{DeadLetter, DeadReason, ItemId, PartitionId, TimedEvent};
use hotlist_operators::time::Millis;
use hotlist_operators::watermark::PartitionClock;

/// What one activation read, waiting to be handed to the outputs.
pub struct Batch {
    /// Accepted events.
    pub events: Vec<TimedEvent>,
    /// Bad and late records.
    pub dead: Vec<DeadLetter>,
}

/// A partition's counts of one activation, flushed to the shared stats once per activation.
#[derive(Default)]
pub struct Tally {
    /// Records read.
    pub records: u64,
    /// Valid events.
    pub events: u64,
    /// Bad records.
    pub bad: u64,
    /// Events late for some window.
    pub late: u64,
    /// Events late for every window (counted nowhere).
    pub late_dropped: u64,
}

/// Parses (if needed), stamps, judges and routes one record read at `position` of `partition`.
#[inline]
pub fn accept(
    rec: Record<'_>,
    partition: PartitionId,
    position: u64,
    clock: &mut PartitionClock,
    judge: &LatenessJudge,
    out: &mut Batch,
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
                out.dead.push(DeadLetter {
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
        out.dead.push(DeadLetter {
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
    out.events.push(TimedEvent {
        item,
        ts,
        wm_before,
        hash,
        partition,
        position,
    });
}

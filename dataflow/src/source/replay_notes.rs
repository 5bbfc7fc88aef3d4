//! What a source tells the merger for `exact_at_seal` windows (`hotlist_operators::replay`):
//! per partition, the epoch in which it accepted its first event of each instance (noted with
//! the partition's resume point at that epoch's start), and every record it rejected as
//! `future` against the wall clock (a replay cannot re-judge those).

use hotlist_operators::record::{PartitionId, TimedEvent};
use hotlist_operators::replay::{counts_in, ByteMark, ReplayNote};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::{InstanceKey, WindowId, WindowSpec};
use std::collections::HashSet;

/// A partition's replay bookkeeping.
#[derive(Default)]
pub(super) struct PartitionMarks {
    /// The resume point of the current epoch: position, the clock's largest event time, and
    /// (files) where the position's line starts.
    epoch_start: (u64, Millis, Option<ByteMark>),
    /// Instances whose start was noted (until the partition's watermark passes their end +
    /// allowed lateness: it accepts no more of their events).
    noted: HashSet<InstanceKey>,
}

impl PartitionMarks {
    /// Marks for a partition that (re)starts at `position` (in a file: at `byte`) with its
    /// clock at `max_ts`.
    pub(super) fn starting_at(position: u64, max_ts: Millis, byte: Option<ByteMark>) -> PartitionMarks {
        PartitionMarks {
            epoch_start: (position, max_ts, byte),
            noted: HashSet::new(),
        }
    }
}

/// The source's notes for the job's `exact_at_seal` windows.
pub(super) struct ReplayNoter {
    windows: Vec<(WindowId, WindowSpec)>,
    lateness: Span,
    notes: Vec<ReplayNote>,
}

impl ReplayNoter {
    /// A noter for the windows with `exact_at_seal` (`None` when there are none).
    pub(super) fn new(windows: Vec<(WindowId, WindowSpec)>, lateness: Span) -> Option<ReplayNoter> {
        (!windows.is_empty()).then_some(ReplayNoter {
            windows,
            lateness,
            notes: Vec::new(),
        })
    }

    /// Notes the instances `events` (accepted from `partition` this epoch) are the first of.
    pub(super) fn events(&mut self, partition: PartitionId, marks: &mut PartitionMarks, events: &[TimedEvent]) {
        for e in events {
            for (id, w) in &self.windows {
                for start in w.starts_covering(e.ts) {
                    let instance = InstanceKey { window: *id, start };
                    if counts_in(w, start, self.lateness, e.ts, e.wm_before) && marks.noted.insert(instance) {
                        let (position, max_ts, byte) = marks.epoch_start;
                        self.notes.push(ReplayNote::Start {
                            instance,
                            partition,
                            position,
                            max_ts,
                            byte,
                        });
                    }
                }
            }
        }
    }

    /// A record rejected as `future` against the wall clock.
    pub(super) fn skip(&mut self, partition: PartitionId, position: u64, line: u32, ts: Millis) {
        self.notes.push(ReplayNote::Skip {
            partition,
            position,
            line,
            ts,
        });
    }

    /// The epoch closes with the partition at `position` (in a file: at `byte`), its clock at
    /// `max_ts` and `watermark`: the next epoch's resume point; instances the partition can no
    /// longer count are dropped.
    pub(super) fn epoch_closed(
        &self,
        marks: &mut PartitionMarks,
        (position, byte): (u64, Option<ByteMark>),
        max_ts: Millis,
        watermark: Millis,
    ) {
        marks.epoch_start = (position, max_ts, byte);
        let horizon = watermark.minus(self.lateness);
        let windows = &self.windows;
        marks.noted.retain(|k| {
            windows
                .iter()
                .find(|(id, _)| *id == k.window)
                .is_some_and(|(_, w)| w.end_of(k.start) > horizon)
        });
    }

    /// The notes since the last call.
    pub(super) fn take(&mut self) -> Vec<ReplayNote> {
        std::mem::take(&mut self.notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::hash::item_hash;
    use hotlist_operators::record::ItemId;

    fn event(ts: i64) -> TimedEvent {
        TimedEvent {
            item: ItemId::from("a"),
            ts: Millis(ts),
            wm_before: Millis::MIN,
            hash: item_hash("a"),
            partition: PartitionId(0),
            position: 0,
            extra: None,
        }
    }

    /// Each instance's start note carries the byte mark of its epoch's resume point: the one
    /// the partition started at, then the one each closed epoch left it at.
    #[test]
    fn start_notes_carry_the_epochs_byte_marks() {
        let w = WindowSpec::tumbling("w", Span::from_millis(100), 3);
        let mut n = ReplayNoter::new(vec![(WindowId(0), w)], Span::from_millis(0)).expect("noter");
        let (m0, m5) = (
            ByteMark::of(0, b""),
            ByteMark::of(120, b"{\"item_id\":\"a\",\"ts\":99}\n"),
        );
        let p = PartitionId(0);
        let mut marks = PartitionMarks::starting_at(0, Millis::MIN, Some(m0));
        n.events(p, &mut marks, &[event(5), event(7)]);
        n.epoch_closed(&mut marks, (5, Some(m5)), Millis(99), Millis(0));
        n.events(p, &mut marks, &[event(8), event(150)]);
        let starts: Vec<(i64, u64, Option<ByteMark>)> = n
            .take()
            .into_iter()
            .map(|note| match note {
                ReplayNote::Start {
                    instance,
                    position,
                    byte,
                    ..
                } => (instance.start.0, position, byte),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(starts, vec![(0, 0, Some(m0)), (100, 5, Some(m5))]);
    }
}

//! What a source tells the merger about where each window instance's events lie
//! (`hotlist_operators::replay`): per partition, the epoch in which it accepted its first event
//! of each instance (noted with the partition's resume point at that epoch's start), and every
//! record it rejected as `future` against the wall clock (a replay cannot re-judge those). Kept
//! for every window: `exact_at_seal` replays, `hotlist explain` and `hotlist verify` read the
//! instances again from these notes.
//!
//! Per event the cost is two comparisons: consecutive events of a partition mostly fall in the
//! instances the previous one did, whose notes are taken already, and an event inside every
//! window's last slide at once is passed over without looking at the windows one by one (that
//! was 4 % of a four-window job's instructions, 77 per event).

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
    /// Per window (the noter's order): the slide `[s, s + slide)` of the last event whose
    /// instances were all looked at (`s` the latest instance start covering it). Another event
    /// in it is covered by the same instances, each noted already or late for good (a
    /// partition's watermark only grows).
    seen: Vec<Option<(Millis, Millis)>>,
    /// The slides of `seen`, intersected (`None` until every window has one): an event in it
    /// is in every window's, so it is passed over with two comparisons whatever the number of
    /// windows.
    all_seen: Option<(Millis, Millis)>,
}

impl PartitionMarks {
    /// Marks for a partition that (re)starts at `position` (in a file: at `byte`) with its
    /// clock at `max_ts`.
    pub(super) fn starting_at(position: u64, max_ts: Millis, byte: Option<ByteMark>) -> PartitionMarks {
        PartitionMarks {
            epoch_start: (position, max_ts, byte),
            noted: HashSet::new(),
            seen: Vec::new(),
            all_seen: None,
        }
    }
}

/// The source's notes for the job's windows.
pub(super) struct ReplayNoter {
    windows: Vec<(WindowId, WindowSpec)>,
    lateness: Span,
    notes: Vec<ReplayNote>,
}

impl ReplayNoter {
    /// A noter for `windows` (`None` when there are none).
    pub(super) fn new(windows: Vec<(WindowId, WindowSpec)>, lateness: Span) -> Option<ReplayNoter> {
        (!windows.is_empty()).then_some(ReplayNoter {
            windows,
            lateness,
            notes: Vec::new(),
        })
    }

    /// Notes the instances `events` (accepted from `partition` this epoch) are the first of.
    pub(super) fn events(&mut self, partition: PartitionId, marks: &mut PartitionMarks, events: &[TimedEvent]) {
        if marks.seen.len() != self.windows.len() {
            marks.seen = vec![None; self.windows.len()];
            marks.all_seen = None;
        }
        for e in events {
            if marks.all_seen.is_some_and(|(lo, hi)| e.ts >= lo && e.ts < hi) {
                continue;
            }
            for ((id, w), seen) in self.windows.iter().zip(marks.seen.iter_mut()) {
                // two comparisons, no division, for an event in the last one's slide
                if seen.is_some_and(|(lo, hi)| e.ts >= lo && e.ts < hi) {
                    continue;
                }
                let latest = w.last_start_covering(e.ts);
                *seen = Some((latest, latest.plus(w.slide)));
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
            // (every window's slide now holds `e.ts`, so the intersection is not empty)
            marks.all_seen = marks.seen.iter().try_fold((Millis::MIN, Millis::MAX), |(lo, hi), s| {
                s.map(|(l, h)| (lo.max(l), hi.min(h)))
            });
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
    use hotlist_operators::record::EventText;

    fn event(ts: i64) -> TimedEvent {
        TimedEvent {
            text: EventText::item("a"),
            ts: Millis(ts),
            wm_before: Millis::MIN,
            hash: item_hash("a"),
            partition: PartitionId(0),
            position: 0,
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

    /// Every instance an event counts in is noted once, whatever the order of events across
    /// slides (disorder back into an earlier slide included), for tumbling and hopping windows
    /// alike; an instance the partition's watermark had passed is not.
    #[test]
    fn each_counted_instance_is_noted_once() {
        let tumbling = WindowSpec::tumbling("t", Span::from_millis(100), 3);
        let hopping = WindowSpec {
            slide: Span::from_millis(50),
            ..WindowSpec::tumbling("h", Span::from_millis(150), 3)
        };
        let windows = vec![(WindowId(0), tumbling.clone()), (WindowId(1), hopping.clone())];
        let mut n = ReplayNoter::new(windows, Span::from_millis(0)).expect("noter");
        let mut marks = PartitionMarks::starting_at(0, Millis::MIN, None);
        let at = |ts: i64, wm: i64| TimedEvent {
            wm_before: Millis(wm),
            ..event(ts)
        };
        // 120 and 130 share slides; 60 goes back into earlier ones; 310 comes after the
        // watermark passed [100, 200) and [50, 200)
        let evs = [
            at(120, 0),
            at(130, 0),
            at(60, 0),
            at(135, 0),
            at(310, 250),
            at(199, 250),
        ];
        let noted = noted_once(
            &mut n,
            &mut marks,
            &[(WindowId(0), tumbling), (WindowId(1), hopping)],
            &evs,
        );
        assert!(noted.contains(&(1, 300)) && noted.contains(&(0, 0)), "{noted:?}");
    }

    proptest::proptest! {
        /// As above for any events of a partition (its watermark only grows) in batches, over
        /// three windows: each instance an event counts in is noted once.
        #[test]
        fn any_events_note_their_instances_once(
            steps in proptest::collection::vec((0i64..400, 0i64..30), 1..60),
            batch in 1usize..8,
        ) {
            let windows = vec![
                (WindowId(0), WindowSpec::tumbling("t", Span::from_millis(100), 3)),
                (WindowId(1), WindowSpec { slide: Span::from_millis(50), ..WindowSpec::tumbling("h", Span::from_millis(150), 3) }),
                (WindowId(2), WindowSpec::tumbling("l", Span::from_millis(250), 3)),
            ];
            let mut n = ReplayNoter::new(windows.clone(), Span::from_millis(20)).expect("noter");
            let mut marks = PartitionMarks::starting_at(0, Millis::MIN, None);
            let mut wm = 0;
            let evs: Vec<TimedEvent> = steps
                .iter()
                .map(|&(ts, grow)| {
                    wm += grow;
                    TimedEvent { wm_before: Millis(wm), ..event(ts) }
                })
                .collect();
            let mut noted = Vec::new();
            for part in evs.chunks(batch) {
                n.events(PartitionId(0), &mut marks, part);
                noted.extend(n.take());
            }
            let got = started(noted);
            let want = counted(&windows, &evs, Span::from_millis(20));
            proptest::prop_assert_eq!(got, want);
        }
    }

    /// The instances noted for `evs` (sorted), checked to be each instance an event counts in, once.
    fn noted_once(
        n: &mut ReplayNoter,
        marks: &mut PartitionMarks,
        windows: &[(WindowId, WindowSpec)],
        evs: &[TimedEvent],
    ) -> Vec<(u16, i64)> {
        n.events(PartitionId(0), marks, evs);
        let noted = started(n.take());
        assert_eq!(noted, counted(windows, evs, Span::from_millis(0)));
        noted
    }

    /// The (window, start) of the instances `notes` start, sorted.
    fn started(notes: Vec<ReplayNote>) -> Vec<(u16, i64)> {
        let mut started: Vec<(u16, i64)> = notes
            .into_iter()
            .map(|note| match note {
                ReplayNote::Start { instance, .. } => (instance.window.0, instance.start.0),
                other => panic!("{other:?}"),
            })
            .collect();
        started.sort_unstable();
        started
    }

    /// The brute-force model: every (window, start) some event of `evs` counts in, once, sorted.
    fn counted(windows: &[(WindowId, WindowSpec)], evs: &[TimedEvent], lateness: Span) -> Vec<(u16, i64)> {
        let mut want: Vec<(u16, i64)> = Vec::new();
        for (id, w) in windows {
            for e in evs {
                for start in w.starts_covering(e.ts) {
                    if counts_in(w, start, lateness, e.ts, e.wm_before) && !want.contains(&(id.0, start.0)) {
                        want.push((id.0, start.0));
                    }
                }
            }
        }
        want.sort_unstable();
        want
    }
}

//! Where every window instance's events lie in the input, on worker 0: the sources' notes
//! (`ReplayRanges`) kept while an instance is open, then, in the epoch that seals it, its
//! ranges (`SealedRanges`), which go to the store with that epoch's final lists (so `hotlist
//! explain` and `hotlist verify` can read the instance again) and to the `exact_at_seal`
//! replays. The notes of open instances are in every checkpoint (`replay.snap`).

use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, PartitionId};
use hotlist_operators::replay::{ReplayNote, ReplayRanges, SealedRanges};
use hotlist_operators::snapshot::SourceSnapshot;
use hotlist_operators::time::Millis;
use hotlist_operators::window::{InstanceKey, WindowId, WindowSpec};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// Sealed instances' ranges by the (timely) epoch that sealed them, until the sink takes them
/// with that epoch's batch.
pub type RangesByEpoch = Rc<RefCell<BTreeMap<u64, Vec<SealedRanges>>>>;

/// The instances' ranges of one run.
pub struct RangeBook {
    windows: Vec<WindowSpec>,
    notes: ReplayRanges,
    /// Restored from a checkpoint that kept no notes (an earlier version's, of a job without
    /// `exact_at_seal`): instances starting at or before this event time may have events before
    /// it that nobody noted.
    blind_up_to: Option<Millis>,
    out: RangesByEpoch,
}

impl RangeBook {
    /// The book of a run, continuing a checkpoint's notes (`restored`: `None` when it kept none;
    /// then `sources` says how far its partitions had read).
    pub fn new(
        windows: Vec<WindowSpec>,
        restored: Option<(Option<ReplayRanges>, &SourceSnapshot)>,
        out: RangesByEpoch,
    ) -> RangeBook {
        let (notes, blind_up_to) = match restored {
            None => (ReplayRanges::default(), None),
            Some((Some(notes), _)) => (notes, None),
            Some((None, sources)) => {
                let seen = sources.partitions.iter().map(|p| p.max_ts).max();
                (ReplayRanges::default(), seen.filter(|ts| *ts > Millis::MIN))
            }
        };
        RangeBook {
            windows,
            notes,
            blind_up_to,
            out,
        }
    }

    /// The sources' notes of an epoch.
    pub fn note(&mut self, notes: Vec<ReplayNote>) {
        for n in notes {
            self.notes.note(n);
        }
    }

    /// The ranges of the instances `published` seals in epoch `t` (their first final
    /// revisions), given every partition's position then; they go to the sink with epoch `t`
    /// and are returned (for the replays).
    pub fn sealed(
        &mut self,
        t: u64,
        published: &[PublishedList],
        positions: &BTreeMap<PartitionId, u64>,
    ) -> Vec<SealedRanges> {
        let instances: BTreeSet<(usize, Millis, Millis)> = published
            .iter()
            .filter(|l| l.state == ListState::Final && l.certificate.is_none())
            .filter_map(|l| {
                let w = self.windows.iter().position(|w| w.name == l.window)?;
                Some((w, l.start, l.end))
            })
            .collect();
        let mut sealed = Vec::with_capacity(instances.len());
        for (w, start, end) in instances {
            let key = InstanceKey {
                window: WindowId(w as u16),
                start,
            };
            let mut ranges = self.notes.ranges(key, (start, end), positions);
            if self.blind_up_to.is_some_and(|seen| start <= seen) {
                ranges = Err(
                    "some of its events were read before a restore from a checkpoint that kept no \
                              notes of where they lie (written by an earlier version)"
                        .into(),
                );
            }
            sealed.push(SealedRanges {
                window: self.windows[w].name.clone(),
                start,
                end,
                ranges,
            });
        }
        if !sealed.is_empty() {
            self.out
                .borrow_mut()
                .entry(t)
                .or_default()
                .extend(sealed.iter().cloned());
        }
        sealed
    }

    /// Forgets the notes no live instance can use: `future` rejections before `ts`, notes of
    /// instances starting before it (every instance that could hold them sealed).
    pub fn forget_before(&mut self, ts: Millis) {
        self.notes.forget_before(ts);
    }

    /// The notes of the instances not sealed yet, for a checkpoint.
    pub fn notes(&self) -> &ReplayRanges {
        &self.notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::record::PartitionStatus;
    use hotlist_operators::snapshot::PartitionState;
    use hotlist_operators::time::Span;

    fn final_list(window: &str, start: i64, end: i64) -> PublishedList {
        PublishedList {
            window: window.into(),
            start: Millis(start),
            end: Millis(end),
            group: Default::default(),
            revision: 1,
            state: ListState::Final,
            watermark: Millis(end),
            as_of: Millis(0),
            items: Vec::new(),
            exact: true,
            error_bound: 0,
            sketch_check: None,
            certificate: None,
        }
    }

    fn start_note(window: u16, start: i64, position: u64) -> ReplayNote {
        ReplayNote::Start {
            instance: InstanceKey {
                window: WindowId(window),
                start: Millis(start),
            },
            partition: PartitionId(0),
            position,
            max_ts: Millis(start - 1),
            byte: None,
        }
    }

    /// Each sealed instance gets its ranges once, in the epoch that sealed it, for every window
    /// (per-group lists of one instance give one entry); an instance restored without notes is
    /// unreadable, later ones are not.
    #[test]
    fn sealed_instances_get_their_ranges_in_their_epoch() {
        let windows = vec![
            WindowSpec::tumbling("a", Span::from_millis(100), 3),
            WindowSpec::tumbling("b", Span::from_millis(200), 3),
        ];
        let out: RangesByEpoch = Default::default();
        let sources = SourceSnapshot {
            partitions: vec![PartitionState {
                partition: PartitionId(0),
                position: 10,
                max_ts: Millis(150),
                status: PartitionStatus::Active,
            }],
        };
        let mut book = RangeBook::new(windows, Some((None, &sources)), out.clone());
        book.note(vec![
            start_note(0, 100, 12),
            start_note(0, 200, 20),
            start_note(1, 200, 20),
        ]);
        let positions = BTreeMap::from([(PartitionId(0), 30u64)]);
        let mut group_b = final_list("a", 200, 300);
        group_b.group = hotlist_operators::group::GroupKey::from_pairs([("country", "x")]);
        let published = vec![final_list("a", 100, 200), final_list("a", 200, 300), group_b];
        let sealed = book.sealed(7, &published, &positions);
        assert_eq!(sealed.len(), 2, "one entry per instance: {sealed:?}");
        assert!(sealed[0].ranges.as_ref().is_err_and(|e| e.contains("earlier version")));
        let later = sealed[1].ranges.as_ref().expect("after the restore's events");
        assert_eq!((later[0].from, later[0].to), (20, 30));
        assert_eq!(out.borrow().get(&7), Some(&sealed));
        // the other window's instance is still open; a closed revision seals nothing
        let mut closed = final_list("b", 200, 400);
        closed.state = ListState::Closed;
        assert!(book.sealed(8, &[closed], &positions).is_empty());
        assert_eq!(book.notes().instances(), 1);
    }
}

//! The announcements of the groups events count in (see `admission`): made where events are
//! read, before they are routed by item, and sent to every worker.
//!
//! An event announces its group to each instance of a per-group window that accepts it by the
//! lateness rule (the rule the counter applies: instance end > the event's partition watermark
//! before it − allowed lateness) — and, for a distinct-user window, only when it has a user.
//! Announcements are idempotent, so a small cache of recent ones only saves traffic: it is
//! direct-mapped (a note takes the slot its hashes pick, and a collision only means the next
//! note of the displaced group is sent again), and a replay or a restore announcing again
//! changes nothing.

use super::admission::GroupNote;
use crate::counter::Shapes;
use crate::hash::item_hash;
use crate::record::TimedEvent;
use crate::time::Span;
use crate::window::{InstanceKey, WindowId, WindowSpec};

/// Slots of the cache of recent announcements (a power of two; 32 bytes each).
const RECENT: usize = 1 << 12;

/// Makes the [`GroupNote`]s of events, per worker.
pub struct GroupNoter {
    shapes: Shapes,
    /// The windows with `by` dims: (id, spec, shape).
    windows: Vec<(WindowId, WindowSpec, u8)>,
    allowed_lateness: Span,
    /// Recent announcements, direct-mapped by [`slot`].
    recent: Vec<Option<GroupNote>>,
    group: String,
}

impl GroupNoter {
    /// A noter for the job's windows; `None` when no window has `by` dims.
    pub fn new(windows: &[WindowSpec], allowed_lateness: Span) -> Option<GroupNoter> {
        let shapes = Shapes::new(windows);
        let grouped: Vec<(WindowId, WindowSpec, u8)> = windows
            .iter()
            .enumerate()
            .filter(|(_, w)| !w.key.by.is_empty())
            .map(|(i, w)| (WindowId(i as u16), w.clone(), shapes.of_window(i)))
            .collect();
        (!grouped.is_empty()).then(|| GroupNoter {
            shapes,
            windows: grouped,
            allowed_lateness,
            recent: vec![None; RECENT],
            group: String::new(),
        })
    }

    /// Appends the announcements of `ev` not made recently to `out`.
    pub fn note(&mut self, ev: &TimedEvent, out: &mut Vec<GroupNote>) {
        let late_h = ev.wm_before.minus(self.allowed_lateness);
        let mut last: Option<(u8, u64)> = None;
        for (id, spec, shape) in &self.windows {
            let hash = match last {
                Some((s, h)) if s == *shape => h,
                _ => {
                    if !self.shapes.group(*shape, ev, &mut self.group) {
                        continue; // a distinct-user window, an event without a user
                    }
                    let h = item_hash(&self.group);
                    last = Some((*shape, h));
                    h
                }
            };
            for start in spec.starts_covering(ev.ts) {
                if spec.end_of(start) <= late_h {
                    continue; // late for this instance: not counted in it
                }
                let note = GroupNote {
                    instance: InstanceKey { window: *id, start },
                    hash,
                };
                let seen = &mut self.recent[slot(&note)];
                if *seen != Some(note) {
                    *seen = Some(note);
                    out.push(note);
                }
            }
        }
    }
}

/// The cache slot of a note: its group hash (already well mixed) with its instance mixed in.
#[inline]
fn slot(note: &GroupNote) -> usize {
    let instance = (note.instance.start.0 as u64) ^ u64::from(note.instance.window.0).rotate_left(48);
    let mixed = note.hash ^ instance.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 20) as usize & (RECENT - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{GroupKey, KeyShape};
    use crate::record::{EventText, PartitionId};
    use crate::time::Millis;
    use std::collections::BTreeSet;

    fn event(country: &str, ts: i64) -> TimedEvent {
        TimedEvent {
            text: EventText::new("i", None, &[country]),
            ts: Millis(ts),
            wm_before: Millis::MIN,
            hash: item_hash("i"),
            partition: PartitionId(0),
            position: 0,
        }
    }

    /// Every (instance, group) an event counts in is announced at least once, also with more
    /// groups than cache slots (so that notes displace each other), and a repeat right after
    /// its first announcement is not sent again.
    #[test]
    fn every_group_of_every_instance_is_announced() {
        let mut w = WindowSpec::tumbling("1m", Span::from_millis(60_000), 5);
        w.key = KeyShape {
            by: vec!["country".into()],
            ..KeyShape::default()
        };
        let mut noter = GroupNoter::new(&[w], Span::ZERO).expect("a per-group window");
        let mut out = Vec::new();
        let mut want = BTreeSet::new();
        for n in 0..3 * RECENT as i64 {
            // 2 instances, 2 * RECENT groups, each group seen several times
            let (country, ts) = (format!("C{}", (n * 7919) % (2 * RECENT as i64)), (n % 2) * 60_000);
            let group = GroupKey::from_pairs([("country", country.as_str())]);
            want.insert((ts, item_hash(group.as_str())));
            let e = event(&country, ts);
            noter.note(&e, &mut out);
            let sent = out.len();
            noter.note(&e, &mut out);
            assert_eq!(out.len(), sent, "a repeat is not announced again");
        }
        let got: BTreeSet<(i64, u64)> = out.iter().map(|n| (n.instance.start.0, n.hash)).collect();
        assert_eq!(got, want);
    }
}

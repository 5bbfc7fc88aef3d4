//! The announcements of the groups events count in (see `admission`): made where events are
//! read, before they are routed by item, and sent to every worker.
//!
//! An event announces its group to each instance of a per-group window that accepts it by the
//! lateness rule (the rule the counter applies: instance end > the event's partition watermark
//! before it − allowed lateness) — and, for a distinct-user window, only when it has a user.
//! Announcements are idempotent, so a small cache of recent ones only saves traffic: it is
//! cleared when full, and a replay or a restore announcing again changes nothing.

use super::admission::GroupNote;
use crate::counter::Shapes;
use crate::hash::item_hash;
use crate::record::TimedEvent;
use crate::time::Span;
use crate::window::{InstanceKey, WindowId, WindowSpec};
use rustc_hash::FxHashSet;

/// Announcements kept for de-duplication before the cache starts over.
const RECENT: usize = 1 << 16;

/// Makes the [`GroupNote`]s of events, per worker.
pub struct GroupNoter {
    shapes: Shapes,
    /// The windows with `by` dims: (id, spec, shape).
    windows: Vec<(WindowId, WindowSpec, u8)>,
    allowed_lateness: Span,
    recent: FxHashSet<GroupNote>,
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
            recent: FxHashSet::default(),
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
                if self.recent.len() >= RECENT {
                    self.recent.clear();
                }
                if self.recent.insert(note) {
                    out.push(note);
                }
            }
        }
    }
}

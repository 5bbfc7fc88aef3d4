//! Groups: the groups an epoch's events count in, per instance of a window with `by` dims (see
//! `group::admission`), and how many fold into `(other)`.
//!
//! A counter learns them from the sources' announcements (`note_groups`), or, when it counts
//! every event of the job (one worker in all), notes them itself as it counts
//! (`note_own_groups`): the groups announced to an instance are those of the events it
//! accepted, which are the groups of its keys with a count, so the counter notes a key's group
//! when the key is first counted in a pane (in every instance covering the pane: an event
//! counted on the fast path is on time for all of them), and on every count in a pane where an
//! event was late for one of them (`Pane::excluded`) or on the slow path (in the instances
//! that accepted the event). That is a note per key and pane instead of a look-up per event at
//! the source (the announcements were 7.7 % of a per-group job's instructions, `cachegrind`).

use super::{horizon, Counter, WindowedCounter};
use crate::group::{group_of_key, Admitted, GroupNote, InstanceGroups, Value};
use crate::hash::item_hash;
use crate::time::Millis;
use crate::window::InstanceKey;
use smallvec::SmallVec;
use std::collections::BTreeMap;

impl WindowedCounter {
    /// Takes the group announcements of an epoch (from every worker; after its events, before
    /// its `advance`). Announcements for sealed instances, or for windows this counter does not
    /// count by groups, are ignored.
    pub fn note_groups(&mut self, notes: &[GroupNote]) {
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        for note in notes {
            let key = note.instance;
            let Some(spec) = self.windows.get(key.window.0 as usize) else {
                continue;
            };
            if spec.key.by.is_empty() || !self.groups.iter().any(|g| g.windows.contains(&key.window)) {
                continue;
            }
            self.admit(key, note.hash, sealed_h);
        }
    }

    /// Makes this counter note the groups of the events it counts itself, instead of being
    /// told them by announcements: for a counter that counts every event of the job (one
    /// worker in all; its sources then announce nothing). See the module docs.
    pub fn note_own_groups(&mut self) {
        // (nothing to note without a window with `by` dims)
        if (0..self.shapes.len() as u8).any(|s| self.shapes.has_by(s)) {
            self.own_recent = vec![None; RECENT];
        }
    }

    /// Whether this counter notes its own groups (see `note_own_groups`).
    #[inline(always)]
    pub(super) fn notes_own_groups(&self) -> bool {
        !self.own_recent.is_empty()
    }

    /// Records group `hash` in instance `key` of a counted window with `by` dims, unless the
    /// instance is sealed (an announcement, or the counter's own note).
    fn admit(&mut self, key: InstanceKey, hash: u64, sealed_h: Millis) {
        let spec = &self.windows[key.window.0 as usize];
        if spec.end_of(key.start) <= horizon(sealed_h, &self.sealed_until, key.window) {
            return;
        }
        let max_groups = spec.key.max_groups;
        let groups = self
            .admission
            .entry(key)
            .or_insert_with(|| InstanceGroups::new(max_groups));
        if groups.insert(hash) == Admitted::Displaced {
            // a group this worker may have listed now counts in (other)
            if let Some(inst) = self.instances.get_mut(&key) {
                inst.touched = self.seq;
            }
        }
    }

    /// The counter's own note (see `note_own_groups`) of counter `c`'s group, of shape `s`, in
    /// every instance covering the pane at `slot` of group `g` of the windows of that shape
    /// with `by` dims. (Out of line: once per key and pane. Most keys' groups were noted in
    /// their pane already, which a small cache tells.)
    #[inline(never)]
    pub(super) fn note_own(
        &mut self,
        g: usize,
        slot: usize,
        c: Counter,
        text_key: Option<&str>,
        s: u8,
        sealed_h: Millis,
    ) {
        let start = self.groups[g].slots[slot].as_ref().expect("live slot").start;
        // (the key as the event's text holds it when it does, in cache: the record's copy of a
        // key past its inline bytes is in the arena, and reading it was half of this
        // function's samples, `perf`)
        debug_assert!(text_key.is_none_or(|k| k == self.counter_text(c)), "the key counted");
        let group = match (text_key, c.group()) {
            (Some(key), _) => group_of_key(key),
            (None, Some(gid)) => self.numbers.text(gid),
            (None, None) => group_of_key(self.interner.id(c.item())),
        };
        let noted = Noted::of(g, s, start, group);
        let at = noted.slot();
        if self.own_recent[at] == Some(noted) {
            return;
        }
        let hash = item_hash(group);
        let mut covering: SmallVec<[InstanceKey; 4]> = SmallVec::new();
        for &wid in &self.groups[g].windows {
            let spec = &self.windows[wid.0 as usize];
            if self.shapes.of_window(wid.0 as usize) == s && !spec.key.by.is_empty() {
                // (every time of a pane is covered by the same instances)
                covering.extend(
                    spec.starts_covering(start)
                        .map(|start| InstanceKey { window: wid, start }),
                );
            }
        }
        for key in covering {
            self.admit(key, hash, sealed_h);
        }
        self.own_recent[at] = Some(noted);
    }

    /// The counter's own note of counter `c`'s group in instance `key`, which accepted an
    /// event on the slow path.
    pub(super) fn note_own_in(&mut self, key: InstanceKey, c: Counter, sealed_h: Millis) {
        if self.windows[key.window.0 as usize].key.by.is_empty() {
            return;
        }
        let hash = match c.group() {
            Some(gid) => self.numbers.hash(gid),
            None => item_hash(group_of_key(self.interner.id(c.item()))),
        };
        self.admit(key, hash, sealed_h);
    }

    /// Per window with `by` dims, the most groups counted in `(other)` in one live instance
    /// (windows without such an instance are absent).
    pub fn overflow_groups(&self) -> BTreeMap<String, u64> {
        crate::group::most_folded(&self.admission, &self.windows)
    }
}

/// Slots of the cache of a counter's recent own notes (a power of two; 48 bytes each).
const RECENT: usize = 1 << 10;

/// A group noted in every instance covering a pane, as the cache of recent own notes keeps
/// it: the pane (its pane group and start), the key shape, and the group's key as a
/// [`Value`] (its bytes when at most 16 long, else its hash: two groups of one hash are one to
/// the admission too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Noted {
    start: Millis,
    /// The pane group and the shape, `g << 8 | s`.
    at: u64,
    group: Value,
}

impl Noted {
    #[inline]
    fn of(g: usize, s: u8, start: Millis, group: &str) -> Noted {
        Noted {
            start,
            at: (g as u64) << 8 | u64::from(s),
            group: Value::short(group.as_bytes()).unwrap_or_else(|| Value::hashed(item_hash(group))),
        }
    }

    /// Its cache slot.
    #[inline]
    fn slot(&self) -> usize {
        self.group.slot(self.start, self.at, RECENT.trailing_zeros())
    }
}

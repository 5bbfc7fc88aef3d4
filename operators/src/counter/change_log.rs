//! A pane's change log: the counters whose count there changed, in order (see `emit`).
//!
//! Entries are numbered over the pane's life, so an instance's cursor into the log stays valid
//! while older entries are trimmed. A counter of a record alone is one 32-bit word (its
//! index: an interner index is below 2^31, see `interner::MAX_ITEMS`); one with a group number
//! is two, the first marked by its top bit. A plain window's log costs 4 bytes per change,
//! as it did when counters were record indices only.

use super::counter_id::Counter;
use super::numbers::GroupNo;
use super::{Pane, WindowedCounter};
use crate::interner::ItemIdx;
use crate::window::InstanceKey;

/// Log entries a pane may hold beyond twice its counters before its log is cut.
/// Tiny in unit tests so that cut logs are exercised.
const LOG_MARGIN: usize = if cfg!(test) { 2 } else { 4096 };

/// The top bit of a word that starts a two-word entry.
const GROUPED: u32 = 1 << 31;

/// The change log of one pane.
#[derive(Default)]
pub(super) struct ChangeLog {
    words: Vec<u32>,
    /// The number of the first word still held.
    start: u64,
}

impl ChangeLog {
    /// Appends `c`.
    #[inline(always)]
    pub(super) fn push(&mut self, c: Counter) {
        let item = c.item().0;
        debug_assert!(item < GROUPED, "an item index past 2^31");
        match c.group() {
            None => self.words.push(item),
            Some(g) => self.words.extend([item | GROUPED, g.raw()]),
        }
    }

    /// The number of the first word held (a cursor before it was cut away).
    pub(super) fn start(&self) -> u64 {
        self.start
    }

    /// The number after the last word: a cursor that has read everything.
    pub(super) fn end(&self) -> u64 {
        self.start + self.words.len() as u64
    }

    /// Words held.
    pub(super) fn len(&self) -> usize {
        self.words.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The counters logged from cursor `from` (an entry's first word, at or after
    /// [`Self::start`]) on.
    pub(super) fn since(&self, from: u64) -> impl Iterator<Item = Counter> + '_ {
        debug_assert!(from >= self.start && from <= self.end());
        let mut words = self.words[(from - self.start) as usize..].iter();
        std::iter::from_fn(move || {
            let &w = words.next()?;
            Some(match w & GROUPED {
                0 => Counter::of(ItemIdx(w)),
                _ => {
                    let g = *words.next().expect("a grouped entry's second word");
                    Counter::grouped(ItemIdx(w & !GROUPED), GroupNo::from_raw(g))
                }
            })
        })
    }

    /// Drops the words before cursor `keep_from` (clamped to the log; an entry's first word).
    pub(super) fn trim_to(&mut self, keep_from: u64) {
        let keep_from = keep_from.clamp(self.start, self.end());
        self.words.drain(..(keep_from - self.start) as usize);
        self.start = keep_from;
    }

    /// Drops every word: cursors before the end now read a cut log.
    pub(super) fn cut(&mut self) {
        self.start = self.end();
        self.words.clear();
    }

    /// Gives back memory when at most a quarter of it is used (beyond `margin` words).
    pub(super) fn shrink(&mut self, margin: usize) {
        if self.words.capacity() > 4 * self.words.len() + margin {
            self.words.shrink_to(2 * self.words.len());
        }
    }

    /// Heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.words.capacity() * 4
    }
}

impl WindowedCounter {
    /// Trims the panes' change logs: after an emitting `advance` (`emitted`), to the oldest
    /// cursor of the instances covering each pane; always, a log past its cap is cut.
    pub(super) fn trim_logs(&mut self, emitted: bool) {
        for g in 0..self.groups.len() {
            for slot in 0..self.groups[g].slots.len() {
                let keep_from = match &self.groups[g].slots[slot] {
                    Some(p) if !p.log.is_empty() => match emitted {
                        true => self.oldest_cursor(g, p),
                        false => p.log.start(),
                    },
                    _ => continue,
                };
                let Some(p) = self.groups[g].slots[slot].as_mut() else {
                    continue;
                };
                p.log.trim_to(keep_from);
                // (in words: a numbered counter's entry is two)
                if p.log.len() > 2 * (p.counters() + p.grouped_live) + LOG_MARGIN {
                    p.log.cut();
                }
                p.log.shrink(LOG_MARGIN);
            }
        }
    }

    /// The oldest cursor into pane `p` (of group `g`) of the instances covering it that emitted
    /// incrementally (its log end when there is none: nothing needs the log).
    fn oldest_cursor(&self, g: usize, p: &Pane) -> u64 {
        let group = &self.groups[g];
        let width = group.width.as_i64();
        let pane_no = p.start.0.div_euclid(width);
        let mut oldest = p.log.end();
        for &window in &group.windows {
            for start in self.windows[window.0 as usize].starts_covering(p.start) {
                let last = self
                    .instances
                    .get(&InstanceKey { window, start })
                    .and_then(|i| i.last.as_ref());
                let nth = (pane_no - start.0.div_euclid(width)) as usize;
                if let Some(c) = last.and_then(|l| l.cursors.get(nth)) {
                    oldest = oldest.min(*c);
                }
            }
        }
        oldest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn counter() -> impl Strategy<Value = Counter> {
        (0u32..GROUPED, proptest::option::of(0u32..u32::MAX)).prop_map(|(i, g)| match g {
            Some(g) => Counter::grouped(ItemIdx(i), GroupNo::from_raw(g)),
            None => Counter::of(ItemIdx(i)),
        })
    }

    proptest! {
        /// Against a list of (cursor, counter): what a cursor reads is what was pushed after
        /// it, whatever was trimmed before it or cut.
        #[test]
        fn cursors_read_what_was_pushed_after_them(
            steps in prop::collection::vec((prop::collection::vec(counter(), 0..6), 0u8..4), 0..40),
        ) {
            let mut log = ChangeLog::default();
            let mut model: Vec<(u64, Counter)> = Vec::new();
            let mut cursors: Vec<u64> = vec![log.end()];
            for (pushed, action) in steps {
                for c in pushed {
                    model.push((log.end(), c));
                    log.push(c);
                }
                cursors.push(log.end());
                match action {
                    0 => {
                        // trim to the oldest cursor still kept (drop the oldest one)
                        cursors.remove(0);
                        log.trim_to(cursors[0]);
                    }
                    1 => log.cut(),
                    _ => {}
                }
                log.shrink(2);
                for &from in &cursors {
                    if from < log.start() {
                        continue; // cut past it
                    }
                    let want: Vec<Counter> = model.iter().filter(|(at, _)| *at >= from).map(|(_, c)| *c).collect();
                    prop_assert_eq!(log.since(from).collect::<Vec<_>>(), want);
                }
                prop_assert_eq!(log.end() - log.start(), log.len() as u64);
                prop_assert!(log.heap_bytes() >= 4 * log.len());
            }
        }
    }
}

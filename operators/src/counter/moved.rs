//! A pane's moved counts: a count leaves its record (its inline word or its item's group
//! block) for the pane's own storage when its item is next counted in a newer pane. A closed
//! pane takes one such move per counter that goes on counting in the next pane, while it is
//! only read again when it is emitted (an iteration, at its close and its seal) or takes a
//! late event (a look-up). So the move is a push onto `Pane::moved`, and a look-up by counter
//! first moves the pane's pushes into its map (`settle`): a map insert per move costs a probe
//! of a table that outgrows the cache, in the middle of the counting. (Measured in
//! docs/benchmarks.md: it pays most for numbered counters, whose item's block moves every
//! group's count at once.)

use super::{Counter, FxMap, Pane, PaneGroup};

impl Pane {
    /// Counts moved `c`'s `n` out of its record: kept apart until a look-up needs it.
    #[inline]
    pub(super) fn push_moved(&mut self, c: Counter, n: u64) {
        debug_assert!(!self.counts.contains_key(&c), "{c:?} moving into the map it is in");
        self.moved.push((c, n));
    }

    /// The pane's map, for a look-up or a change by counter: its moved counts first join it.
    /// Every such access goes through here (counting in a pane's map, an overflow, a restore),
    /// so the two never hold one counter: a count moves into `moved` from its record only, and
    /// a moved counter found in the map is counted there, not made its record's again.
    #[inline]
    pub(super) fn map(&mut self) -> &mut FxMap<Counter, u64> {
        self.settle();
        &mut self.counts
    }

    /// Moves the pane's `moved` counts into its map (see `map`).
    #[inline]
    pub(super) fn settle(&mut self) {
        if !self.moved.is_empty() {
            self.settle_moved();
        }
    }

    #[cold]
    #[inline(never)]
    fn settle_moved(&mut self) {
        self.counts.reserve(self.moved.len());
        for (c, n) in self.moved.drain(..) {
            let before = self.counts.insert(c, n);
            debug_assert!(before.is_none(), "{c:?} moved and in the map");
        }
    }

    /// The counters live in the pane: in its map, moved, inline and in group blocks.
    pub(super) fn counters(&self) -> usize {
        self.counts.len() + self.moved.len() + self.inline_live + self.grouped_live
    }
}

impl PaneGroup {
    /// `settle` on every pane of the group that may hold moved counts.
    pub(super) fn settle(&mut self) {
        if std::mem::take(&mut self.unsettled) {
            self.slots.iter_mut().flatten().for_each(Pane::settle);
        }
    }
}

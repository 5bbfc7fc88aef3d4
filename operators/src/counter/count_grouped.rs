//! Counting numbered counters: a per-group window's (item record, group number) counters, whose
//! counts live in the item's group block while its pane is the block's (pane group 0), else in
//! the pane's map (see `interner::GroupBlock`; `count` counts a record's own counters).

use super::count::map_increment;
use super::numbers::{GroupNo, GroupNumbers};
use super::{Counter, Pane, WindowedCounter, INLINE_MAX};
use crate::interner::{GroupBlock, GroupCount, ItemIdx, RecordMut};
use smallvec::SmallVec;

impl WindowedCounter {
    /// `count` of the counter of item `item` in group `gid` (a numbered shape): in the
    /// item's group block while the pane is the block's (pane group 0 only), else in the pane's
    /// map.
    #[inline(always)]
    pub(super) fn count_grouped(&mut self, g: usize, slot: usize, item: ItemIdx, gid: GroupNo) -> bool {
        let (seq, gen) = (self.seq, self.gen);
        let pane = self.groups[g].slots[slot].as_mut().expect("live slot");
        if let (Some(rel), 0) = (pane.rel, g) {
            if let Some(n) = self
                .interner
                .block_mut(item)
                .filter(|b| b.pane() == rel)
                .and_then(|b| b.get_mut(gid.raw()))
                .filter(|n| n.count() < INLINE_MAX)
            {
                pane.touched = seq;
                n.increment();
                if n.logged() != gen {
                    n.set_logged(gen);
                    pane.log.push(Counter::grouped(item, gid));
                }
                return false;
            }
        }
        self.count_grouped_other(g, slot, item, gid)
    }

    /// `count_grouped` past its common case (as `count_other` for a record's counter): a new
    /// pane for the item's block, a group new to it, an overflow, an older pane, a pane
    /// without blocks.
    #[inline(never)]
    fn count_grouped_other(&mut self, g: usize, slot: usize, item: ItemIdx, gid: GroupNo) -> bool {
        let (seq, gen) = (self.seq, self.gen);
        let c = Counter::grouped(item, gid);
        let group = &mut self.groups[g];
        let pane = group.slots[slot].as_mut().expect("live slot");
        pane.touched = seq;
        // (every change here is logged: the common case logs once per generation)
        pane.log.push(c);
        let numbers = &mut self.numbers;
        let mut rec = self.interner.record_mut(item);
        let (Some(rel), Some(block), 0) = (pane.rel, rec.block.take(), g) else {
            return map_increment_grouped(pane, c, &mut rec, numbers);
        };
        if block.pane() == rel {
            if let Some(n) = block.remove(gid.raw()) {
                // (`count_grouped` took the room-left case) an overflow: to the map from now on
                debug_assert!(n.count() >= INLINE_MAX);
                pane.grouped_live -= 1;
                pane.map().insert(c, u64::from(n.count()) + 1);
                return false;
            }
            if let Some(n) = pane.map().get_mut(&c) {
                // overflowed before (or restored): its count stays in the map
                *n += 1;
                return false;
            }
            if block.insert(gid.raw(), GroupCount::new(1, gen)) {
                pane.grouped_live += 1;
                rec.retain();
                numbers.retain(gid);
                return true;
            }
            // (no room in the block for this group's number)
            return map_increment_grouped(pane, c, &mut rec, numbers);
        }
        if block.pane() != GroupBlock::EMPTY.pane() && rel < block.pane() {
            // an older pane than the block's (out of order): its count lives in the map
            return map_increment_grouped(pane, c, &mut rec, numbers);
        }
        if let Some(n) = pane.map().get_mut(&c) {
            // this pane's count is in its map already (restored, or moved here and since
            // out of its block): keep it there
            *n += 1;
            return false;
        }
        // This pane becomes the block's; the counts of its previous pane move out to that pane
        // (see `moved`).
        let old = block.pane();
        let mut moved: SmallVec<[(u32, GroupCount); 8]> = SmallVec::new();
        block.move_to(rel, |gid, n| moved.push((gid, n)));
        // (a block keeps its box: an array of numbers has no room for a large one)
        if block.insert(gid.raw(), GroupCount::new(1, gen)) {
            pane.grouped_live += 1;
        } else {
            pane.map().insert(c, 1);
        }
        rec.retain();
        numbers.retain(gid);
        pane.grouped_members.push(item);
        if !moved.is_empty() {
            let base = group.base.expect("block panes imply a base");
            let old_slot = *group
                .index
                .get(&(base + i64::from(old)))
                .expect("a block's pane is live");
            let old = group.slots[old_slot].as_mut().expect("a block's pane is live");
            if old.moved.is_empty() {
                // (the first of its blocks to move: the rest will follow, as many as it holds)
                old.moved.reserve(old.grouped_live);
            }
            for (gid, n) in &moved {
                old.push_moved(Counter::grouped(item, GroupNo::from_raw(*gid)), u64::from(n.count()));
            }
            old.grouped_live -= moved.len();
            group.unsettled = true;
        }
        true
    }
}

/// Counts one event of numbered counter `c` (of record `rec`) in `pane`'s map; whether it is
/// its first count there (it then holds a reference to its record and its group's number).
#[inline]
fn map_increment_grouped(pane: &mut Pane, c: Counter, rec: &mut RecordMut<'_>, numbers: &mut GroupNumbers) -> bool {
    let first = map_increment(pane, c, rec);
    if let (true, Some(gid)) = (first, c.group()) {
        numbers.retain(gid);
    }
    first
}

//! What a count is kept for: a [`Counter`].
//!
//! A counter is one interner record: a bare item id (plain windows) or a counter key (`group NUL
//! item`, `group NUL item NUL user`) of a per-group or distinct-user window; or, when the counter
//! numbers groups (`counter::NUMBERED`), a per-group window's item record and group number, its
//! counts in the item's group block (docs/plans/counter-key-model.md). Everything keyed by
//! counter (pane maps, change logs, exclusions, listed items) is keyed by this, not by the
//! record alone.

use super::numbers::GroupNo;
use crate::interner::ItemIdx;

/// A counter: its interner record, and the number of its group when the group is not part of
/// the record's key. Packed in 8 bytes (the record's index low, the group's number + 1 high,
/// 0 for none). Deliberately not `Ord`: indices and numbers follow arrival order, which
/// depends on workers, batches and restores (lists are ordered by text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Counter(u64);

impl Counter {
    /// The counter of record `item` (its key is all there is).
    #[inline(always)]
    pub(super) fn of(item: ItemIdx) -> Counter {
        Counter(u64::from(item.0))
    }

    /// The counter of item record `item` in group `group`.
    #[inline(always)]
    pub(super) fn grouped(item: ItemIdx, group: GroupNo) -> Counter {
        Counter(u64::from(item.0) | (u64::from(group.raw()) + 1) << 32)
    }

    /// Its record.
    #[inline(always)]
    pub(super) fn item(self) -> ItemIdx {
        ItemIdx(self.0 as u32)
    }

    /// Its group's number, when the group is not part of its record's key.
    #[inline(always)]
    pub(super) fn group(self) -> Option<GroupNo> {
        match (self.0 >> 32) as u32 {
            0 => None,
            n => Some(GroupNo::from_raw(n - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn counters_round_trip(item in 0u32..(1 << 31), group in proptest::option::of(0u32..u32::MAX)) {
            let c = match group {
                Some(g) => Counter::grouped(ItemIdx(item), GroupNo::from_raw(g)),
                None => Counter::of(ItemIdx(item)),
            };
            prop_assert_eq!(c.item(), ItemIdx(item));
            prop_assert_eq!(c.group(), group.map(GroupNo::from_raw));
        }
    }
}

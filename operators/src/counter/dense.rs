//! Per-item scratch for building lists, indexed by the interned item index: summing an item's
//! panes is an array add instead of a hash-map probe (that probe was most of an emission), and
//! an incremental list's candidates are told apart by one bit per item. For counters of a
//! record alone (`Counter::of`): a counter with a group number is not dense by its record.

use super::Counter;
use crate::interner::ItemIdx;

/// The record of counter `c`, which has no group number.
#[inline(always)]
fn record(c: Counter) -> ItemIdx {
    debug_assert!(c.group().is_none(), "a grouped counter in a dense set");
    c.item()
}

/// Sums per item, zero outside a use; `touched` lists the items with a non-zero sum.
#[derive(Default)]
pub(super) struct DenseSums {
    sums: Vec<u64>,
    touched: Vec<ItemIdx>,
}

impl DenseSums {
    /// Adds `c` to counter `counter`'s sum.
    #[inline]
    pub(super) fn add(&mut self, counter: Counter, c: u64) {
        let i = record(counter);
        let n = i.0 as usize;
        if n >= self.sums.len() {
            self.sums.resize((n + 1).next_power_of_two(), 0);
        }
        if c > 0 && self.sums[n] == 0 {
            self.touched.push(i);
        }
        self.sums[n] += c;
    }

    /// Subtracts `c` from counter `counter`'s sum (not below zero; one without a sum is left
    /// alone).
    #[inline]
    pub(super) fn sub(&mut self, counter: Counter, c: u64) {
        if let Some(s) = self.sums.get_mut(record(counter).0 as usize) {
            *s = s.saturating_sub(c);
        }
    }

    /// The counters added to since the last drain (each once, in the order first added).
    pub(super) fn items(&self) -> impl ExactSizeIterator<Item = Counter> + '_ {
        self.touched.iter().map(|&i| Counter::of(i))
    }

    /// Calls `f` with every (positive sum, counter), and resets the sums.
    pub(super) fn drain(&mut self, mut f: impl FnMut(u64, Counter)) {
        for &i in &self.touched {
            let s = std::mem::take(&mut self.sums[i.0 as usize]);
            if s > 0 {
                f(s, Counter::of(i));
            }
        }
        self.touched.clear();
    }

    /// Resets the sums.
    pub(super) fn clear(&mut self) {
        self.drain(|_, _| {});
    }

    /// Approximate heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.sums.capacity() * 8 + self.touched.capacity() * 4
    }
}

/// A set of items, one bit per item index, empty outside a use; `items` lists its members in
/// the order first inserted. An incremental list's candidates (the last list and the changed
/// items) are deduplicated here: as `DenseSums` it cost 8 bytes per item index at every
/// emission (most of a page per 512 items, so all of them once the changes spread), here 1 bit.
#[derive(Default)]
pub(super) struct ItemSet {
    bits: Vec<u64>,
    items: Vec<ItemIdx>,
}

impl ItemSet {
    /// Adds counter `c`.
    #[inline]
    pub(super) fn insert(&mut self, c: Counter) {
        let i = record(c);
        let (word, bit) = (i.0 as usize / 64, 1u64 << (i.0 % 64));
        if word >= self.bits.len() {
            self.bits.resize((word + 1).next_power_of_two(), 0);
        }
        if self.bits[word] & bit == 0 {
            self.bits[word] |= bit;
            self.items.push(i);
        }
    }

    /// The members, each once, in the order first inserted.
    pub(super) fn items(&self) -> impl ExactSizeIterator<Item = Counter> + '_ {
        self.items.iter().map(|&i| Counter::of(i))
    }

    /// Empties the set (its bits are cleared member by member, not word by word).
    pub(super) fn clear(&mut self) {
        for i in &self.items {
            self.bits[i.0 as usize / 64] = 0;
        }
        self.items.clear();
    }

    /// Approximate heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.bits.capacity() * 8 + self.items.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The set holds exactly what was inserted since the last clear, each once, in the
        /// order first inserted (a `Vec` with `contains` as the model).
        #[test]
        fn item_set_is_a_set(rounds in proptest::collection::vec(proptest::collection::vec(0u32..5_000, 0..60), 1..6)) {
            let mut set = ItemSet::default();
            for round in rounds {
                let mut model: Vec<Counter> = Vec::new();
                for i in round {
                    let c = Counter::of(ItemIdx(i));
                    set.insert(c);
                    if !model.contains(&c) {
                        model.push(c);
                    }
                }
                prop_assert_eq!(set.items().collect::<Vec<_>>(), model);
                set.clear();
                prop_assert_eq!(set.items().len(), 0);
                prop_assert!(set.bits.iter().all(|w| *w == 0));
            }
        }
    }
}

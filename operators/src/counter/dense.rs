//! Per-item sums for building lists, indexed by the interned item index: summing an item's
//! panes is an array add instead of a hash-map probe (that probe was most of an emission).

use crate::interner::ItemIdx;

/// Sums per item, zero outside a use; `touched` lists the items with a non-zero sum.
#[derive(Default)]
pub(super) struct DenseSums {
    sums: Vec<u64>,
    touched: Vec<ItemIdx>,
}

impl DenseSums {
    /// Adds `c` to item `i`'s sum.
    #[inline]
    pub(super) fn add(&mut self, i: ItemIdx, c: u64) {
        let n = i.0 as usize;
        if n >= self.sums.len() {
            self.sums.resize((n + 1).next_power_of_two(), 0);
        }
        if c > 0 && self.sums[n] == 0 {
            self.touched.push(i);
        }
        self.sums[n] += c;
    }

    /// Subtracts `c` from item `i`'s sum (not below zero; an item without a sum is left alone).
    #[inline]
    pub(super) fn sub(&mut self, i: ItemIdx, c: u64) {
        if let Some(s) = self.sums.get_mut(i.0 as usize) {
            *s = s.saturating_sub(c);
        }
    }

    /// The items added to since the last drain (an item once, in the order first added).
    pub(super) fn items(&self) -> &[ItemIdx] {
        &self.touched
    }

    /// Calls `f` with every (positive sum, item), and resets the sums.
    pub(super) fn drain(&mut self, mut f: impl FnMut(u64, ItemIdx)) {
        for &i in &self.touched {
            let s = std::mem::take(&mut self.sums[i.0 as usize]);
            if s > 0 {
                f(s, i);
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

//! Record indices in memory order: a bitset of indices, walked front to back. A pass that
//! visits many records (a dying pane's items, a growing table, a recount) reads them in
//! order instead of one cache miss each.

use super::ItemIdx;

/// A set of record indices below a bound, one bit each.
pub(super) struct IndexBits(Vec<u64>);

impl IndexBits {
    /// An empty set of indices below `n`.
    pub(super) fn new(n: usize) -> IndexBits {
        IndexBits(vec![0; n.div_ceil(64)])
    }

    /// Adds `i`; whether it was there already.
    #[inline]
    pub(super) fn insert(&mut self, i: u32) -> bool {
        let (word, bit) = (&mut self.0[i as usize / 64], 1u64 << (i % 64));
        let was = *word & bit != 0;
        *word |= bit;
        was
    }

    /// Whether `i` is in the set.
    #[inline]
    pub(super) fn contains(&self, i: u32) -> bool {
        self.0[i as usize / 64] & (1 << (i % 64)) != 0
    }

    /// Calls `f` with every index in the set, in increasing order.
    #[inline]
    pub(super) fn for_each(self, mut f: impl FnMut(u32)) {
        for (w, mut word) in self.0.into_iter().enumerate() {
            while word != 0 {
                f((w * 64) as u32 + word.trailing_zeros());
                word &= word - 1;
            }
        }
    }
}

/// Puts `idxs` in index order, which is their records' order in memory, so that visiting
/// them reads the records front to back. By a bitset when they are dense (a dying pane's
/// items: a pass over them and over the bitset, where a sort's comparisons cost more than the
/// cache misses it saves), else by a sort.
pub fn in_record_order(idxs: &mut Vec<ItemIdx>) {
    let Some(max) = idxs.iter().max() else { return };
    let n = max.0 as usize + 1;
    if idxs.len() * 8 < n.div_ceil(64) {
        idxs.sort_unstable();
        return;
    }
    let mut bits = IndexBits::new(n);
    let mut repeated = Vec::new();
    for &idx in idxs.iter() {
        if bits.insert(idx.0) {
            repeated.push(idx);
        }
    }
    idxs.clear();
    bits.for_each(|i| idxs.push(ItemIdx(i)));
    if !repeated.is_empty() {
        // (an index once per reference: rare, so merged by a sort)
        idxs.extend(repeated);
        idxs.sort_unstable();
    }
}

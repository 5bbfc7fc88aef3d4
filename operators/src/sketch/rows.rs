//! The pinned row hashes of the sketches: which cell of each row an item falls in.
//!
//! A sketch never hashes the item id again: it indexes its rows from the item's pinned hash
//! (`hash::item_hash`, XXH3-64 seed 0, computed once at the source). Row `r` of a sketch with
//! seed `s` and width `w` puts an item with hash `h` in column
//! `⌊XXH3-64(h as 8 little-endian bytes, seed s + r) · w / 2^64⌋` (a multiply-shift, not a
//! modulo: no division per row). XXH3 with different seeds behaves as independent hash
//! functions, which the count-min bound assumes of its rows. HeavyKeeper's fingerprint is the
//! low 32 bits of the item hash (the row hashes do not use them directly).
//!
//! Checkpoints hold cells addressed this way, so like the item hash this must never change:
//! the golden values in the tests pin it.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The seed of row 0 (row `r` uses `DEFAULT_SEED + r`): ASCII "hotlist!".
pub const DEFAULT_SEED: u64 = 0x686f_746c_6973_7421;

/// Most rows a sketch may have (count-min: δ down to e^−16 ≈ 1.1·10^−7).
pub const MAX_DEPTH: usize = 16;

/// Widest row (count-min: ε down to e/2^26 ≈ 4·10^−8).
pub const MAX_WIDTH: u32 = 1 << 26;

/// Most cells (width × depth) in one sketch: 1 GiB of 4-byte cells.
pub const MAX_CELLS: u64 = 1 << 28;

/// The column of row `row` that an item with pinned hash `hash` falls in, of `width` columns.
#[inline]
pub fn cell(hash: u64, seed: u64, row: u32, width: u32) -> usize {
    let h = xxh3_64_with_seed(&hash.to_le_bytes(), seed.wrapping_add(u64::from(row)));
    ((u128::from(h) * u128::from(width)) >> 64) as usize
}

/// HeavyKeeper's fingerprint of an item: the low 32 bits of its pinned hash.
#[inline]
pub fn fingerprint(hash: u64) -> u32 {
    hash as u32
}

/// The `depth` cell indexes (row-major, `row · width + column`) of one item.
#[derive(Clone, Copy)]
pub(crate) struct RowCells {
    idx: [usize; MAX_DEPTH],
    len: usize,
}

impl RowCells {
    /// The cells of `hash` in a `width` × `depth` table (`depth` ≤ [`MAX_DEPTH`]).
    #[inline]
    pub(crate) fn new(hash: u64, seed: u64, width: u32, depth: u32) -> RowCells {
        let mut idx = [0usize; MAX_DEPTH];
        let len = (depth as usize).min(MAX_DEPTH);
        for (r, slot) in idx[..len].iter_mut().enumerate() {
            *slot = r * width as usize + cell(hash, seed, r as u32, width);
        }
        RowCells { idx, len }
    }

    /// The indexes, row 0 first.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[usize] {
        &self.idx[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;

    /// Golden values: if these change, every sketch in a checkpoint is garbage.
    #[test]
    fn row_hashes_are_pinned() {
        let h = item_hash("video-8841");
        let got: Vec<usize> = (0..4).map(|r| cell(h, DEFAULT_SEED, r, 2048)).collect();
        assert_eq!(got, GOLDEN_VIDEO_8841);
        assert_eq!(cell(0, 0, 0, 1 << 26), GOLDEN_ZERO);
        assert_eq!(fingerprint(0x1234_5678_9abc_def0), 0x9abc_def0);
        let rc = RowCells::new(h, DEFAULT_SEED, 2048, 4);
        let want: Vec<usize> = GOLDEN_VIDEO_8841
            .iter()
            .enumerate()
            .map(|(r, c)| r * 2048 + c)
            .collect();
        assert_eq!(rc.as_slice(), want);
    }

    const GOLDEN_VIDEO_8841: [usize; 4] = [1241, 1775, 726, 273];
    const GOLDEN_ZERO: usize = 52_292_842;

    /// Columns spread evenly: 64k hashes over 64 columns, every column within ±20% of the mean.
    #[test]
    fn columns_are_uniform() {
        for row in 0..3 {
            let mut hits = [0u32; 64];
            for i in 0..65_536u64 {
                hits[cell(item_hash(&format!("i{i}")), DEFAULT_SEED, row, 64)] += 1;
            }
            assert!(hits.iter().all(|&h| (819..=1229).contains(&h)), "row {row}: {hits:?}");
        }
    }
}

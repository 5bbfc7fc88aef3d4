//! HyperLogLog: the number of distinct values in a few hundred bytes, with a stated error.
//!
//! `m = 2^p` registers; each value's pinned 64-bit hash picks a register with its top `p` bits
//! and offers the position of the first 1 bit in the rest; a register keeps the largest offer.
//! The estimate is the harmonic mean of `2^register` scaled by `α_m · m²`, with linear counting
//! while registers are empty (small sets are then counted almost exactly). Its relative
//! standard error is 1.04/√m (6.5 % at m = 256; [`Hll::relative_error`]).
//!
//! Hand-rolled (about 60 lines) rather than a crate because hotlist needs what the crates do not
//! promise together: the job's own pinned hash (the same registers on every worker, run and
//! restore), plain registers for checkpoints, and a union that is a register-wise max (merging
//! groups into `(other)`, and per-worker state after a restore).

use serde::{Deserialize, Serialize};

/// Register-index bits: 256 registers (6.5 % standard error, 256 bytes).
pub const HLL_BITS: u32 = 8;

/// A HyperLogLog of `2^HLL_BITS` registers (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hll {
    registers: Vec<u8>,
}

impl Default for Hll {
    fn default() -> Hll {
        Hll::new()
    }
}

impl Hll {
    /// An empty sketch.
    pub fn new() -> Hll {
        Hll {
            registers: vec![0; 1 << HLL_BITS],
        }
    }

    /// Adds a value by its pinned hash; returns whether a register changed (the estimate may
    /// have moved).
    #[inline]
    pub fn insert(&mut self, hash: u64) -> bool {
        let index = (hash >> (64 - HLL_BITS)) as usize;
        // the rank of the first 1 bit of the remaining 56 bits (57 when they are all 0)
        let rest = hash << HLL_BITS;
        let rank = (rest.leading_zeros().min(64 - HLL_BITS) + 1) as u8;
        let r = &mut self.registers[index];
        if rank > *r {
            *r = rank;
            true
        } else {
            false
        }
    }

    /// The estimated number of distinct values (rounded).
    pub fn estimate(&self) -> u64 {
        let m = self.registers.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self.registers.iter().map(|&r| 2f64.powi(-i32::from(r))).sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let e = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln() // linear counting
        } else {
            raw
        };
        e.round() as u64
    }

    /// The union: every register the larger of both.
    pub fn merge(&mut self, other: &Hll) {
        for (a, b) in self.registers.iter_mut().zip(&other.registers) {
            *a = (*a).max(*b);
        }
    }

    /// The estimate's relative standard error, 1.04/√m.
    pub fn relative_error() -> f64 {
        1.04 / f64::from(1u32 << HLL_BITS).sqrt()
    }

    /// Whether it has the registers of this build (a snapshot's check).
    pub fn is_consistent(&self) -> bool {
        self.registers.len() == 1 << HLL_BITS && self.registers.iter().all(|&r| u32::from(r) <= 65 - HLL_BITS)
    }

    /// Heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.registers.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;
    use proptest::prelude::*;

    fn of(values: impl IntoIterator<Item = String>) -> Hll {
        let mut h = Hll::new();
        for v in values {
            h.insert(item_hash(&v));
        }
        h
    }

    /// Over fixed seeds and sizes (a statistical check must not be drawn at random: it would
    /// fail now and then): every estimate within 5 standard errors (at least 2) of the truth,
    /// and their mean absolute error within 1.2 standard errors.
    #[test]
    fn estimates_within_the_stated_error() {
        let sigma = Hll::relative_error();
        for n in [0usize, 1, 7, 100, 1_000, 9_203, 40_000] {
            let mut total = 0.0;
            for seed in 0..24 {
                let est = of((0..n).map(|i| format!("u{seed}-{i}"))).estimate() as f64;
                let err = (est - n as f64).abs();
                assert!(err <= (5.0 * sigma * n as f64).max(2.0), "{est} for {n} (seed {seed})");
                total += err;
            }
            assert!(
                total / 24.0 <= (1.2 * sigma * n as f64).max(1.0),
                "mean error {} for {n}",
                total / 24.0
            );
        }
    }

    proptest! {
        /// The union of two is the sketch of the union, whatever the sets.
        #[test]
        fn the_union_is_the_sketch_of_the_union(n in 0usize..3_000, m in 0usize..3_000, seed in any::<u32>()) {
            let a = of((0..n).map(|i| format!("u{seed}-{i}")));
            let b = of((n / 2..n / 2 + m).map(|i| format!("u{seed}-{i}")));
            let mut union = a.clone();
            union.merge(&b);
            prop_assert_eq!(union, of((0..(n / 2 + m).max(n)).map(|i| format!("u{seed}-{i}"))));
        }
    }

    #[test]
    fn repeats_do_not_count_and_small_sets_are_near_exact() {
        let h = of((0..50).flat_map(|i| [format!("x{i}"), format!("x{i}")]));
        assert!((45..=55).contains(&h.estimate()), "{}", h.estimate());
        assert_eq!(Hll::new().estimate(), 0);
        assert!(h.is_consistent());
    }
}

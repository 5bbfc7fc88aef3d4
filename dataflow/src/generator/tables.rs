//! [`GeneratorTables`]: the Zipf alias table (O(1) sampling of an item rank from one random
//! word) and the item ids rendered once, shared by all partitions of a generator.
//!
//! Built in a fixed order from deterministic weights (`det_math`), so the table is
//! bit-identical on every platform.

use super::det_math::zipf_weight;
use super::spec::GeneratorSpec;
use compact_str::format_compact;
use hotlist_operators::record::ItemId;
use std::sync::Arc;

/// 2^32 as a float, to turn an alias probability into a 32-bit threshold.
const TWO_POW_32: f64 = 4_294_967_296.0;

/// One slot of the alias table: accept the drawn rank if the 32-bit fraction is below
/// `threshold`, else take `alias`. Full slots have `alias` = their own rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AliasSlot {
    threshold: u32,
    alias: u32,
}

/// The per-generator precomputation shared by all partitions: a Zipf alias table (O(1) sampling
/// from one 64-bit word) and the item ids rendered once.
#[derive(Debug)]
pub struct GeneratorTables {
    slots: Box<[AliasSlot]>,
    pub(super) ids: Arc<[ItemId]>,
    pub(super) zipf: f64,
    weight_sum: f64,
}

impl GeneratorTables {
    /// Builds the tables of `spec` (validating it first). O(items) time and ~32 bytes per item.
    pub fn new(spec: &GeneratorSpec) -> Result<Self, String> {
        spec.validate()?;
        let n = spec.items as usize;
        let weights: Vec<f64> = (0..spec.items).map(|r| zipf_weight(r, spec.zipf)).collect();
        // Smallest first: a fixed order (determinism) that also loses the least precision.
        let weight_sum: f64 = weights.iter().rev().sum();
        let scale = n as f64 / weight_sum;

        // Vose's alias method, with a fixed processing order.
        let mut prob: Vec<f64> = weights.iter().map(|w| w * scale).collect();
        drop(weights);
        let mut slots: Vec<AliasSlot> = (0..spec.items)
            .map(|r| AliasSlot {
                threshold: u32::MAX,
                alias: r,
            })
            .collect();
        let mut small: Vec<u32> = Vec::new();
        let mut large: Vec<u32> = Vec::new();
        for (r, &p) in (0..spec.items).zip(prob.iter()) {
            if p < 1.0 {
                small.push(r);
            } else {
                large.push(r);
            }
        }
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            large.pop();
            let ps = prob[s as usize];
            slots[s as usize] = AliasSlot {
                threshold: to_threshold32(ps),
                alias: l,
            };
            let pl = (prob[l as usize] + ps) - 1.0;
            prob[l as usize] = pl;
            if pl < 1.0 {
                small.push(l);
            } else {
                large.push(l);
            }
        }
        // Whatever is left has probability 1 up to rounding: keep the default full slot.

        let ids: Arc<[ItemId]> = (0..spec.items).map(|r| format_compact!("item-{r}")).collect();
        Ok(GeneratorTables {
            slots: slots.into_boxed_slice(),
            ids,
            zipf: spec.zipf,
            weight_sum,
        })
    }

    /// Number of distinct items.
    pub fn items(&self) -> u32 {
        self.ids.len() as u32
    }

    /// The item ids by rank (`ids()[n] == "item-{n}"`).
    pub fn ids(&self) -> &Arc<[ItemId]> {
        &self.ids
    }

    /// The exact probability of the item of rank `rank` (0 for ranks out of range).
    pub fn probability(&self, rank: u32) -> f64 {
        if rank >= self.items() {
            return 0.0;
        }
        zipf_weight(rank, self.zipf) / self.weight_sum
    }

    /// Samples a rank from one uniform 64-bit word: the high half of `word * items` picks a slot
    /// (bias at most items / 2^64), the top 32 bits of the low half decide slot or alias.
    #[inline]
    pub(super) fn sample(&self, word: u64) -> u32 {
        let m = u128::from(word) * self.slots.len() as u128;
        let slot = (m >> 64) as usize;
        let frac = ((m as u64) >> 32) as u32;
        match self.slots.get(slot) {
            Some(s) if frac < s.threshold => slot as u32,
            Some(s) => s.alias,
            None => 0, // unreachable: slot < len because word < 2^64
        }
    }
}

/// Probability `p` in [0, 1] as a 32-bit acceptance threshold (`frac < threshold`).
fn to_threshold32(p: f64) -> u32 {
    let t = p * TWO_POW_32;
    if t >= u32::MAX as f64 {
        u32::MAX
    } else if t > 0.0 {
        t as u32
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{spec, stream};
    use super::*;
    use crate::generator::{Generated, PartitionStream};

    #[test]
    fn zipf_skew_matches_exact_probability() {
        let s = GeneratorSpec {
            zipf: 1.1,
            ..spec(1000)
        };
        let tables = Arc::new(GeneratorTables::new(&s).expect("valid"));
        let h: f64 = (0..1000).map(|n| 1.0 / ((n + 1) as f64).powf(1.1)).sum();
        assert!((tables.probability(0) - 1.0 / h).abs() < 1e-12);
        let mut st = PartitionStream::try_new(&s, tables.clone(), 0).expect("valid");
        let mut counts = vec![0u64; 1000];
        let n = 200_000;
        for _ in 0..n {
            match st.next() {
                Some(Generated::Event { item, .. }) => {
                    let rank: usize = item["item-".len()..].parse().expect("rank");
                    counts[rank] += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        let f0 = counts[0] as f64 / n as f64;
        assert!((f0 * h - 1.0).abs() < 0.05, "f0 = {f0}, want {}", 1.0 / h);
        for r in [1usize, 2, 9] {
            let want = tables.probability(r as u32) * n as f64;
            assert!((counts[r] as f64 - want).abs() < 6.0 * want.sqrt() + 5.0, "rank {r}");
        }
        assert!(counts.windows(2).take(5).all(|w| w[0] > w[1]));

        // s = 0 is uniform.
        let s = GeneratorSpec { zipf: 0.0, ..spec(10) };
        let mut st = stream(&s, 0);
        let mut counts = [0u64; 10];
        for _ in 0..100_000 {
            if let Some(Generated::Event { item, .. }) = st.next() {
                counts[item["item-".len()..].parse::<usize>().expect("rank")] += 1;
            }
        }
        assert!(counts.iter().all(|&c| (9_000..=11_000).contains(&c)), "{counts:?}");
    }

    #[test]
    fn ids_are_inline_and_named_by_rank() {
        let t = GeneratorTables::new(&spec(12_345)).expect("valid");
        assert_eq!(t.ids()[0], "item-0");
        assert_eq!(t.ids()[12_344], "item-12344");
        assert!(t.ids().iter().all(|id| !id.is_heap_allocated()));
        let total: f64 = (0..t.items()).map(|r| t.probability(r)).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }
}

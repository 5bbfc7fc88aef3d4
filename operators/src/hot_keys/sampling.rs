//! Which events the detector counts: 1 in N, decided by a pinned hash of where the event was
//! read, so the same input always gives the same sample (replays, restarts, any worker count).

use crate::record::PartitionId;

/// The seed of the sampling hash. Pinned: changing it changes which events are sampled.
pub const SAMPLE_SEED: u64 = 0x686f_745f_6b65_7973; // "hot_keys"

/// The 1-in-N choice, with its bound computed once (no division per event): an event is taken
/// when [`sample_hash`] of its partition and position is at most `u64::MAX / N`, a share of 1/N
/// of all hashes (to within 2^−64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampler {
    bound: u64,
}

impl Sampler {
    /// 1 in `sample` events (0 or 1: every event).
    pub fn new(sample: u32) -> Sampler {
        Sampler {
            bound: u64::MAX / u64::from(sample.max(1)),
        }
    }

    /// Whether the event at `position` of `partition` is taken.
    #[inline]
    pub fn picks(&self, partition: PartitionId, position: u64) -> bool {
        if self.bound == u64::MAX {
            return true;
        }
        sample_hash(partition, position) <= self.bound
    }
}

/// The pinned hash of an event's place: SplitMix64's finalizer (Steele, Lea & Flood, 2014) of
/// the position plus the partition times the golden-ratio constant, xored with
/// [`SAMPLE_SEED`]. A few multiplications per event (the source runs it on every event); its
/// outputs for consecutive positions are as good as independent uniform draws.
#[inline]
pub fn sample_hash(partition: PartitionId, position: u64) -> u64 {
    let mut z = position.wrapping_add(u64::from(partition.0).wrapping_mul(0x9e37_79b9_7f4a_7c15)) ^ SAMPLE_SEED;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether the event at `position` of `partition` is one of the 1 in `sample` counted
/// (`Sampler::new(sample).picks(…)`; a loop should build its `Sampler` once).
#[inline]
pub fn is_sampled(partition: PartitionId, position: u64, sample: u32) -> bool {
    Sampler::new(sample).picks(partition, position)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_one_takes_everything() {
        assert!((0..1000).all(|p| is_sampled(PartitionId(3), p, 1)));
        assert!((0..1000).all(|p| is_sampled(PartitionId(3), p, 0)));
    }

    #[test]
    fn the_choice_is_pinned() {
        // golden values: if these change, a replay samples other events than the first run
        let picked: Vec<u64> = (0..200).filter(|p| is_sampled(PartitionId(0), *p, 10)).collect();
        assert_eq!(
            picked,
            [14, 42, 43, 66, 71, 89, 99, 108, 114, 136, 154, 158, 162, 175, 183]
        );
        assert_ne!(
            (0..200)
                .filter(|p| is_sampled(PartitionId(1), *p, 10))
                .collect::<Vec<_>>(),
            picked,
            "partitions sample different positions"
        );
    }

    #[test]
    fn about_one_in_n() {
        for n in [2u32, 10, 100] {
            let got = (0..200_000u64).filter(|p| is_sampled(PartitionId(2), *p, n)).count() as f64;
            let want = 200_000.0 / f64::from(n);
            assert!((got - want).abs() < want * 0.1, "1 in {n}: {got} of 200000");
        }
    }
}

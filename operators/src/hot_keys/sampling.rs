//! Which events the detector counts: 1 in N, decided by a pinned hash of where the event was
//! read, so the same input always gives the same sample (replays, restarts, any worker count).

use crate::record::PartitionId;

/// The seed of the sampling hash. Pinned: changing it changes which events are sampled.
pub const SAMPLE_SEED: u64 = 0x686f_745f_6b65_7973; // "hot_keys"

/// The 1-in-N choice, with its bound computed once (no division per event): an event is taken
/// when the XXH3-64 (seed [`SAMPLE_SEED`]) of its partition (4 bytes LE) and position (8 bytes
/// LE) is at most `u64::MAX / N`, a share of 1/N of all hashes (to within 2^−64).
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
        let mut key = [0u8; 12];
        key[..4].copy_from_slice(&partition.0.to_le_bytes());
        key[4..].copy_from_slice(&position.to_le_bytes());
        xxhash_rust::xxh3::xxh3_64_with_seed(&key, SAMPLE_SEED) <= self.bound
    }
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
            [13, 29, 44, 48, 55, 72, 75, 83, 95, 97, 101, 106, 110, 115, 117, 124, 128, 134, 138, 140, 157, 179, 191]
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

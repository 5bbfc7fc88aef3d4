//! Which events the detector counts: 1 in N, decided by a pinned hash of where the event was
//! read, so the same input always gives the same sample (replays, restarts, any worker count).

use crate::record::PartitionId;

/// The seed of the sampling hash. Pinned: changing it changes which events are sampled.
pub const SAMPLE_SEED: u64 = 0x686f_745f_6b65_7973; // "hot_keys"

/// Whether the event at `position` of `partition` is one of the 1 in `sample` counted:
/// XXH3-64 (seed [`SAMPLE_SEED`]) of the partition (4 bytes LE) and position (8 bytes LE),
/// modulo `sample`, is 0. `sample` 0 or 1 counts every event.
#[inline]
pub fn is_sampled(partition: PartitionId, position: u64, sample: u32) -> bool {
    if sample <= 1 {
        return true;
    }
    let mut key = [0u8; 12];
    key[..4].copy_from_slice(&partition.0.to_le_bytes());
    key[4..].copy_from_slice(&position.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64_with_seed(&key, SAMPLE_SEED).is_multiple_of(u64::from(sample))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_one_takes_everything() {
        assert!((0..1000).all(|p| is_sampled(PartitionId(3), p, 1)));
    }

    #[test]
    fn the_choice_is_pinned() {
        // golden values: if these change, a replay samples other events than the first run
        let picked: Vec<u64> = (0..200).filter(|p| is_sampled(PartitionId(0), *p, 10)).collect();
        assert_eq!(
            picked,
            [3, 15, 47, 49, 53, 61, 66, 77, 79, 82, 92, 96, 100, 101, 104, 108, 112, 115, 132, 133, 146, 153, 165]
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
        for n in [10u32, 100] {
            let got = (0..200_000u64).filter(|p| is_sampled(PartitionId(2), *p, n)).count() as f64;
            let want = 200_000.0 / f64::from(n);
            assert!((got - want).abs() < want * 0.1, "1 in {n}: {got} of 200000");
        }
    }
}

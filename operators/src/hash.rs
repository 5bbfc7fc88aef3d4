//! The pinned item hash and key groups.
//!
//! Routing (which worker owns an item) and checkpoint shards (key groups) both derive from this
//! hash, so it must never change between versions: it is XXH3-64 with seed 0 over the UTF-8
//! bytes of the item id, a published, stable algorithm.

/// Number of key groups. A key group is the unit of state ownership: worker `w` of `n` owns the
/// key groups `g` with `g % n == w`, so state can be restored onto any worker count that is at
/// most this number.
pub const KEY_GROUPS: u32 = 4096;

/// The pinned 64-bit hash of an item id.
///
/// # Examples
///
/// The hash is XXH3-64 (seed 0) of the id's UTF-8 bytes: the same on every worker, run and
/// version, so an item is routed to and checkpointed under the same key group everywhere.
///
/// ```
/// use hotlist_operators::hash::item_hash;
///
/// // a golden value: if it changed, routing and checkpoints would break compatibility
/// assert_eq!(item_hash(""), 0x2d06800538d394c2);
/// // deterministic: a function of the bytes alone
/// assert_eq!(item_hash("video-8841"), item_hash(&String::from("video-8841")));
/// assert_ne!(item_hash("video-8841"), item_hash("video-8842"));
/// ```
#[inline]
pub fn item_hash(item_id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(item_id.as_bytes())
}

/// The key group of an item hash (its top bits, so it is independent of the low bits that
/// hash tables use).
///
/// # Examples
///
/// ```
/// use hotlist_operators::hash::{item_hash, key_group, KEY_GROUPS};
///
/// // the top 12 bits of 0x2d06800538d394c2
/// assert_eq!(key_group(item_hash("")), 0x2d0);
/// assert_eq!(key_group(0), 0);
/// assert_eq!(key_group(u64::MAX), KEY_GROUPS - 1);
/// ```
#[inline]
pub fn key_group(hash: u64) -> u32 {
    (hash >> 52) as u32 // 64 - 12 bits = 4096 groups
}

/// The worker, of `workers`, that owns an item with this hash.
///
/// # Examples
///
/// Worker `w` of `n` owns the key groups `g` with `g % n == w`:
///
/// ```
/// use hotlist_operators::hash::{item_hash, key_group, owner};
///
/// let h = item_hash(""); // key group 0x2d0 = 720
/// assert_eq!(owner(h, 1), 0);
/// assert_eq!(owner(h, 7), 720 % 7);
/// assert_eq!(owner(h, 7), key_group(h) as usize % 7);
/// // no workers is one worker
/// assert_eq!(owner(h, 0), 0);
/// ```
#[inline]
pub fn owner(hash: u64, workers: usize) -> usize {
    key_group(hash) as usize % workers.max(1)
}

/// [`owner`] for one worker count, without a division per item: the owner of every event is
/// found twice on a job of many workers (where its source writes it, and where the exchange
/// checks it), and the hardware division was 1 % of a 2-worker job's samples (`perf`, AMD EPYC).
/// The remainder by multiplication (Lemire, Kaser and Kurz, "Faster remainder by direct
/// computation", 2019): exact for every 32-bit dividend and divisor, so the same owner as
/// [`owner`] always.
///
/// # Examples
///
/// ```
/// use hotlist_operators::hash::{item_hash, owner, Owners};
///
/// let h = item_hash("video-8841");
/// for workers in [0, 1, 2, 3, 7, 64, 5000] {
///     assert_eq!(Owners::new(workers).of(h), owner(h, workers));
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Owners {
    /// The workers, at least 1 and at most [`KEY_GROUPS`] (every key group is below it, so
    /// more workers own the same groups as that many).
    workers: u64,
    /// `⌈2⁶⁴ / workers⌉` (0 for one worker, where every remainder is 0).
    inverse: u64,
}

impl Owners {
    /// The owners among `workers` workers (none is one, as for [`owner`]).
    pub fn new(workers: usize) -> Owners {
        let workers = workers.clamp(1, KEY_GROUPS as usize) as u64;
        Owners {
            workers,
            inverse: (u64::MAX / workers).wrapping_add(1),
        }
    }

    /// The worker that owns an item with this hash: [`owner`]`(hash, workers)`.
    #[inline(always)]
    pub fn of(self, hash: u64) -> usize {
        let fraction = self.inverse.wrapping_mul(u64::from(key_group(hash)));
        ((u128::from(fraction) * u128::from(self.workers)) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_pinned() {
        // Golden values: if these change, routing and checkpoints break compatibility.
        assert_eq!(item_hash(""), 0x2d06800538d394c2);
        assert_eq!(item_hash("video-8841"), item_hash("video-8841"));
        assert_ne!(item_hash("a"), item_hash("b"));
    }

    #[test]
    fn key_groups_cover_the_range() {
        assert_eq!(key_group(u64::MAX), KEY_GROUPS - 1);
        assert_eq!(key_group(0), 0);
        for h in [0u64, 1 << 52, 3 << 52, u64::MAX] {
            assert_eq!(owner(h, 1), 0);
            assert_eq!(owner(h, 4), key_group(h) as usize % 4);
        }
        assert_eq!(owner(3 << 52, 4), 3);
    }

    #[test]
    fn owners_agree_with_owner_for_every_key_group() {
        let groups = || (0..u64::from(KEY_GROUPS)).map(|g| g << 52 | 0x5_a5a5);
        for workers in (0..=300).chain([1000, 2047, 4095, 4096, 4097, 100_000, usize::MAX]) {
            let owners = Owners::new(workers);
            for h in groups() {
                assert_eq!(owners.of(h), owner(h, workers), "{h:#x} of {workers}");
            }
        }
    }
}

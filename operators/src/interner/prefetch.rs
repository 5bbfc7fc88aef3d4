//! Asking the CPU to bring a key's table slot into cache before the key is looked up.
//!
//! `hashbrown` has no prefetch, and a lookup waits for three cache misses in a row: the
//! control bytes of the key's probe group, its slot, then its record. Where the first two live
//! follows from the table's layout (hashbrown 0.17: the slots are stored downwards from the
//! control bytes, slot `i` at `ctrl - (i + 1) * size`, the probe starting at `hash & mask`),
//! and the address of one occupied slot gives `ctrl`. A prefetch is a hint that cannot fault
//! and changes nothing but timing, so a layout that changes costs speed, never correctness.

use hashbrown::HashTable;

/// Where a table's probe groups start, for prefetching (`None`: nothing to prefetch): its
/// control bytes, its bucket mask and the size of a slot.
#[derive(Clone, Copy, Default)]
pub struct SlotPrefetch(Option<(usize, usize, usize)>);

impl SlotPrefetch {
    /// For `table`'s present allocation, reusing `last` (this table's, from an earlier call)
    /// while the table has as many buckets: an allocation changes only by growing or
    /// shrinking, and finding an occupied slot scans the table from its start, which a table
    /// nearly emptied by a sealed window would pay for at every call.
    pub fn of<T>(table: &HashTable<T>, last: SlotPrefetch) -> SlotPrefetch {
        let mask = table.num_buckets().wrapping_sub(1);
        if table.is_empty() {
            return SlotPrefetch(None);
        }
        if matches!(last.0, Some((_, m, _)) if m == mask) {
            return last;
        }
        let anchor = table.iter_buckets().next().and_then(|i| {
            let slot = table.get_bucket(i)? as *const T as usize;
            Some((slot.wrapping_add((i + 1) * size_of::<T>()), mask, size_of::<T>()))
        });
        SlotPrefetch(anchor)
    }

    /// Prefetches the control bytes and the first slots that a lookup by `probe` reads.
    #[inline(always)]
    pub fn fetch(self, probe: u64) {
        if let Some((ctrl, mask, size)) = self.0 {
            let pos = probe as usize & mask;
            prefetch(ctrl.wrapping_add(pos));
            prefetch(ctrl.wrapping_sub((pos + 1) * size));
        }
    }
}

/// Prefetches the cache line of `addr` (any address: see above).
#[inline(always)]
pub fn prefetch(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and does not fault, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

//! An epoch's events summed per (instance, item) before they are added to the sketches: the
//! sketch counter's batch (see `SketchCounter::apply_epoch`).

use crate::record::TimedEvent;
use crate::window::InstanceKey;
use hashbrown::hash_table::{Entry, HashTable};

/// One (instance, item) of the epoch: where its first event is, and how many there were.
pub(super) struct PendingCount {
    pub key: InstanceKey,
    /// (batch, index) of its first event (the item id is read there, not copied).
    pub at: (u32, u32),
    pub n: u64,
}

/// The epoch's counts, keyed by instance and item id (hashed by the pinned item hash).
#[derive(Default)]
pub(super) struct Pending {
    table: HashTable<PendingCount>,
}

impl Pending {
    /// Counts `ev` (at `at` in `batches`) for instance `key`.
    #[inline]
    pub fn add(&mut self, key: InstanceKey, at: (u32, u32), ev: &TimedEvent, batches: &[Vec<TimedEvent>]) {
        let item = |p: &PendingCount| &batches[p.at.0 as usize][p.at.1 as usize];
        let hash = |key: &InstanceKey, item_hash: u64| {
            item_hash ^ (key.start.0 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(key.window.0)
        };
        let same = |p: &PendingCount| p.key == key && item(p).item == ev.item;
        match self
            .table
            .entry(hash(&key, ev.hash), same, |p| hash(&p.key, item(p).hash))
        {
            Entry::Occupied(mut o) => o.get_mut().n += 1,
            Entry::Vacant(v) => {
                v.insert(PendingCount { key, at, n: 1 });
            }
        }
    }

    /// Takes every count out, leaving the table empty (its capacity kept for the next epoch).
    pub fn drain(&mut self) -> impl Iterator<Item = PendingCount> + '_ {
        self.table.drain()
    }
}

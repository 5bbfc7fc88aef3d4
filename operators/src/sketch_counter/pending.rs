//! An epoch's events summed per (instance, item) before they are added to the sketches: the
//! sketch counter's batch (see `SketchCounter::apply_epoch`).

use crate::record::{ItemId, TimedEvent};
use crate::window::InstanceKey;
use hashbrown::hash_table::{Entry, HashTable};

/// One (instance, item) of the epoch and how many events it had. The id is kept here (ids of up
/// to 24 bytes are inline): comparing against the event it came from would be a cache miss.
pub(super) struct PendingCount {
    pub key: InstanceKey,
    pub item: ItemId,
    pub hash: u64,
    pub n: u64,
}

/// The epoch's counts, keyed by instance and item id (hashed by the pinned item hash).
#[derive(Default)]
pub(super) struct Pending {
    table: HashTable<PendingCount>,
}

/// The table hash of (instance, item hash).
#[inline]
fn mix(key: &InstanceKey, item_hash: u64) -> u64 {
    item_hash ^ (key.start.0 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(key.window.0)
}

impl Pending {
    /// Counts `ev` for instance `key`.
    #[inline]
    pub fn add(&mut self, key: InstanceKey, ev: &TimedEvent) {
        let same = |p: &PendingCount| p.hash == ev.hash && p.key == key && p.item == ev.item;
        match self.table.entry(mix(&key, ev.hash), same, |p| mix(&p.key, p.hash)) {
            Entry::Occupied(mut o) => o.get_mut().n += 1,
            Entry::Vacant(v) => {
                v.insert(PendingCount {
                    key,
                    item: ev.item.clone(),
                    hash: ev.hash,
                    n: 1,
                });
            }
        }
    }

    /// Takes every count out, leaving the table empty (its capacity kept for the next epoch).
    pub fn drain(&mut self) -> impl Iterator<Item = PendingCount> + '_ {
        self.table.drain()
    }
}

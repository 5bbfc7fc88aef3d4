//! An epoch's events summed per (instance, item) before they are added to the sketches: the
//! sketch counter's batch (see `SketchCounter::apply_epoch`).

use crate::record::{ItemId, TimedEvent};
use crate::window::InstanceKey;
use hashbrown::hash_table::{Entry, HashTable};

/// One (instance, item) of the epoch and how many events it had. The id is kept here (ids of up
/// to 24 bytes are inline): comparing against the event it came from would be a cache miss.
/// For a per-group window `item` is the key `group NUL item` and `hash` still the item's.
pub(super) struct PendingCount {
    pub key: InstanceKey,
    pub item: ItemId,
    pub hash: u64,
    pub n: u64,
    /// Its hash in the table (also on a resize).
    slot_hash: u64,
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
        let same = |p: &PendingCount| p.hash == ev.hash && p.key == key && p.item == ev.item();
        let slot_hash = mix(&key, ev.hash);
        match self.table.entry(slot_hash, same, |p| p.slot_hash) {
            Entry::Occupied(mut o) => o.get_mut().n += 1,
            Entry::Vacant(v) => {
                v.insert(PendingCount {
                    key,
                    item: ev.item().into(),
                    hash: ev.hash,
                    n: 1,
                    slot_hash,
                });
            }
        }
    }

    /// Counts one event of a per-group window's instance `key` under its key `group NUL item`
    /// (`item_hash`: the item's pinned hash).
    #[inline]
    pub fn add_keyed(&mut self, key: InstanceKey, keyed: &str, item_hash: u64) {
        let slot_hash = mix(&key, item_hash ^ crate::hash::item_hash(keyed));
        let same = |p: &PendingCount| p.slot_hash == slot_hash && p.key == key && p.item == keyed;
        match self.table.entry(slot_hash, same, |p| p.slot_hash) {
            Entry::Occupied(mut o) => o.get_mut().n += 1,
            Entry::Vacant(v) => {
                v.insert(PendingCount {
                    key,
                    item: keyed.into(),
                    hash: item_hash,
                    n: 1,
                    slot_hash,
                });
            }
        }
    }

    /// Takes every count out, leaving the table empty (its capacity kept for the next epoch).
    pub fn drain(&mut self) -> impl Iterator<Item = PendingCount> + '_ {
        self.table.drain()
    }
}

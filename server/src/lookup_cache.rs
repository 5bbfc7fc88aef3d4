//! Store answers that hold for one committed epoch: each group's latest list and each window's
//! groups (`/v1/groups`). The snapshot (`crate::cache`) holds the global lists only; without
//! this, every request for a group's latest list or for a window's groups was a store read on
//! the one history thread, and a page polling a per-group window once a second per viewer could
//! fill its queue by itself.
//!
//! An entry is tagged with the snapshot epoch at which it was asked for, and every entry is
//! dropped when the served epoch changes, so an answer is never older than the snapshot it is
//! served beside. At most [`MAX_CACHED_LISTS`] lists are kept (then the lists are dropped and
//! the cache refills): memory stays bounded however many groups clients name, including groups
//! that do not exist (a miss is cached too, as `None`).

use hotlist_operators::group::GroupKey;
use hotlist_operators::time::Millis;
use hotlist_sinks::StoredList;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Most group lists cached at once (each at most K items).
pub const MAX_CACHED_LISTS: usize = 4096;

/// A window's groups as read from the store.
#[derive(Debug, Default)]
pub struct Groups {
    /// The latest instance's start (None: the window has no list).
    pub start: Option<Millis>,
    /// Its groups, in key order.
    pub keys: Vec<GroupKey>,
    /// The store read stopped at its cap (`hotlist_sinks::MAX_GROUPS_READ`): there may be
    /// more groups than `keys`.
    pub read_capped: bool,
}

#[derive(Default)]
struct Entries {
    epoch: Option<u64>,
    lists: HashMap<(String, GroupKey), Option<Arc<StoredList>>>,
    groups: HashMap<String, Arc<Groups>>,
}

impl Entries {
    /// The entries of `epoch`: empty if it is not the epoch they were read at.
    fn at(&mut self, epoch: Option<u64>) -> &mut Entries {
        if self.epoch != epoch {
            *self = Entries {
                epoch,
                ..Entries::default()
            };
        }
        self
    }
}

/// The cache (shared by the handlers).
#[derive(Default)]
pub struct LookupCache {
    entries: Mutex<Entries>,
}

impl LookupCache {
    fn entries(&self) -> MutexGuard<'_, Entries> {
        // plain maps: a panic while holding the lock cannot leave them inconsistent
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached latest list of `group` (`Some(None)`: cached as absent), if cached at `epoch`.
    pub fn list(&self, epoch: Option<u64>, window: &str, group: &GroupKey) -> Option<Option<Arc<StoredList>>> {
        self.entries()
            .at(epoch)
            .lists
            .get(&(window.to_string(), group.clone()))
            .cloned()
    }

    /// Caches the latest list of `group` as read when `epoch` was served.
    pub fn put_list(&self, epoch: Option<u64>, window: &str, group: &GroupKey, list: Option<Arc<StoredList>>) {
        let mut e = self.entries();
        if e.epoch.is_some_and(|current| epoch.is_none_or(|asked| asked < current)) {
            return; // read for an older snapshot: the newer one must read again
        }
        let lists = &mut e.at(epoch).lists;
        if lists.len() >= MAX_CACHED_LISTS {
            lists.clear();
        }
        lists.insert((window.to_string(), group.clone()), list);
    }

    /// The cached groups of `window`, if cached at `epoch`.
    pub fn groups(&self, epoch: Option<u64>, window: &str) -> Option<Arc<Groups>> {
        self.entries().at(epoch).groups.get(window).cloned()
    }

    /// Caches the groups of `window` as read when `epoch` was served.
    pub fn put_groups(&self, epoch: Option<u64>, window: &str, groups: Arc<Groups>) {
        let mut e = self.entries();
        if e.epoch.is_some_and(|current| epoch.is_none_or(|asked| asked < current)) {
            return;
        }
        e.at(epoch).groups.insert(window.to_string(), groups);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries are served for their epoch only, a newer epoch drops them, an answer read for
    /// an older epoch is not kept, and the number of lists is bounded.
    #[test]
    fn entries_live_for_one_epoch() {
        let c = LookupCache::default();
        let g = GroupKey::from_pairs([("country", "US")]);
        assert_eq!(c.list(Some(1), "w", &g), None);
        c.put_list(Some(1), "w", &g, None);
        assert_eq!(c.list(Some(1), "w", &g), Some(None), "a miss is cached");
        c.put_groups(Some(1), "w", Arc::new(Groups::default()));
        assert!(c.groups(Some(1), "w").is_some());
        assert_eq!(c.list(Some(2), "w", &g), None, "a new epoch drops the entries");
        assert!(c.groups(Some(2), "w").is_none());
        c.put_list(Some(1), "w", &g, None);
        assert_eq!(c.list(Some(2), "w", &g), None, "read for an older epoch: not kept");
        for i in 0..MAX_CACHED_LISTS + 10 {
            c.put_list(
                Some(2),
                "w",
                &GroupKey::from_pairs([("n", i.to_string().as_str())]),
                None,
            );
        }
        assert!(c.entries().lists.len() <= MAX_CACHED_LISTS);
    }
}

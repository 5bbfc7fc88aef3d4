//! The key layout (see the module documentation): every key is `{prefix}:{job}:…`, so a job
//! id or window name holding `:` could make two keys collide and is refused.

use super::RedisStore;
use crate::error::SinkError;
use hotlist_operators::group::GroupKey;

impl RedisStore {
    /// The sorted set of the window's latest global list.
    pub(super) fn list_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:latest", self.prefix)
    }

    /// The meta hash of the window's latest global list.
    pub(super) fn meta_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:latest:meta", self.prefix)
    }

    /// The sorted set of `group`'s latest list: the global list's key for `""` (so the keys
    /// of global lists stay as they were), else under `{window}:group:{group}` (a window name
    /// holds no `:`, a group key neither, so no two keys collide).
    pub(super) fn group_list_key(&self, job: &str, window: &str, group: &GroupKey) -> String {
        match group.is_global() {
            true => self.list_key(job, window),
            false => format!("{}:{job}:{window}:group:{}:latest", self.prefix, group.as_str()),
        }
    }

    /// The meta hash of `group`'s latest list (see [`RedisStore::group_list_key`]).
    pub(super) fn group_meta_key(&self, job: &str, window: &str, group: &GroupKey) -> String {
        format!("{}:meta", self.group_list_key(job, window, group))
    }

    /// The trend hash of `group`'s latest list (see [`RedisStore::group_list_key`] and
    /// `redis/trend.rs`): rank → the item's trend record, for a trend list only.
    pub(super) fn group_trend_key(&self, job: &str, window: &str, group: &GroupKey) -> String {
        format!("{}:trend", self.group_list_key(job, window, group))
    }

    /// The sorted set of the window's groups: member = group key (`""` for the global list),
    /// score = the start of its latest list.
    pub(super) fn groups_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:groups", self.prefix)
    }

    /// The job's windows document.
    pub(super) fn windows_key(&self, job: &str) -> String {
        format!("{}:{job}:windows", self.prefix)
    }

    /// The job's owner hash (see `crate::ownership`).
    pub(super) fn owner_key(&self, job: &str) -> String {
        format!("{}:{job}:owner", self.prefix)
    }

    /// The job's commit hash.
    pub(super) fn commit_key(&self, job: &str) -> String {
        format!("{}:{job}:commit", self.prefix)
    }
}

/// Refuses a job id or window name (`what`) that would make keys ambiguous.
pub(super) fn check_key_part(job: &str, what: &str, name: &str) -> Result<(), SinkError> {
    if name.contains(':') {
        return Err(SinkError::invalid(
            job,
            format!("{what} {name:?} contains ':', which the Redis key layout does not allow"),
        ));
    }
    Ok(())
}

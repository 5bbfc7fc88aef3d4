//! The key layout (see the module documentation): every key is `{prefix}:{job}:…`, so a job
//! id or window name holding `:` could make two keys collide and is refused.

use super::RedisStore;
use crate::error::SinkError;

impl RedisStore {
    /// The sorted set of the window's latest list.
    pub(super) fn list_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:latest", self.prefix)
    }

    /// The meta hash of the window's latest list.
    pub(super) fn meta_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:latest:meta", self.prefix)
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

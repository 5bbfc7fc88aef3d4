//! Who owns a job in a store: the **liveness lock** and the **generation** (docs/operations.md,
//! "One live run per job").
//!
//! Two runs of one job id writing one store would skip each other's commits (epochs only grow)
//! and drop lists and dead letters without a word. So the run that writes a job owns it:
//!
//! - [`SinkStore::lock`](crate::SinkStore::lock) takes the store's liveness lock on the job for
//!   as long as the handle lives (SQLite: an `flock` on a file next to the database;
//!   PostgreSQL: a session advisory lock of the handle's connection, taken again after a
//!   reconnect). A second live run is refused at start with [`SinkError::JobLocked`]. Redis
//!   and the in-memory store have none: their `lock` does nothing.
//! - [`SinkStore::claim`](crate::SinkStore::claim) makes the handle the job's owner: the job's
//!   **generation** in the store (`hotlist_jobs`; Redis: `{prefix}:{job}:owner`) goes up by one
//!   and records the owner's token. From then on every commit of the job through that handle
//!   checks, inside its transaction, that the generation is still its own; if another run
//!   claimed the job since, the commit fails with [`SinkError::TakenOver`] (permanent) and
//!   writes nothing. A stale writer — one whose lock was lost or bypassed — therefore stops
//!   instead of overwriting its successor's results.
//!
//! A handle that never claimed a job commits it unchecked (tests, benchmarks, tools).

use crate::error::SinkError;
use std::collections::BTreeMap;

/// A job's owner as the store records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The claim's generation: 1 for the job's first claim, then one more per claim.
    pub generation: u64,
    /// The token the owner claimed with (the run's id, written into its checkpoints too).
    pub owner: String,
}

/// What a claim returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The generation this handle now owns.
    pub generation: u64,
    /// The owner before this claim (`None`: the job was never claimed in this store).
    pub previous: Option<Owner>,
}

/// The generations one handle claimed, by job: what its commits are fenced with.
#[derive(Clone, Debug, Default)]
pub(crate) struct Claims(BTreeMap<String, u64>);

impl Claims {
    /// Records that this handle claimed `job` at `generation`.
    pub(crate) fn insert(&mut self, job: &str, generation: u64) {
        self.0.insert(job.to_string(), generation);
    }

    /// The generation this handle claimed `job` at, if it did.
    pub(crate) fn of(&self, job: &str) -> Option<u64> {
        self.0.get(job).copied()
    }

    /// Whether this handle may still commit `job`, given the job's generation in the store now
    /// (`None`: no claim recorded). A job this handle never claimed is not checked.
    pub(crate) fn check(&self, job: &str, current: Option<u64>) -> Result<(), SinkError> {
        match self.of(job) {
            Some(ours) if current != Some(ours) => Err(SinkError::TakenOver {
                job: job.to_string(),
                ours,
                current: current.unwrap_or(0),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_claimed_jobs_are_fenced() {
        let mut c = Claims::default();
        assert!(c.check("j", Some(7)).is_ok(), "never claimed: not checked");
        c.insert("j", 3);
        assert!(c.check("j", Some(3)).is_ok());
        let err = c.check("j", Some(4)).unwrap_err();
        assert!(
            matches!(
                err,
                SinkError::TakenOver {
                    ours: 3,
                    current: 4,
                    ..
                }
            ),
            "{err}"
        );
        assert!(c.check("j", None).is_err(), "the claim is gone");
        assert!(c.check("other", Some(1)).is_ok());
    }
}

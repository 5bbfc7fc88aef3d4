//! One live run per job in an SQLite database (see `crate::ownership`): the liveness lock is
//! an `flock` on `<db>.hotlist-<hash of the job id>.lock` next to the database (SQLite's own
//! locks last one transaction, not a run); the generation is the job's `hotlist_jobs` row,
//! checked inside every commit transaction of a handle that claimed the job.

use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use crate::file_lock::{FileLock, LockError};
use crate::ownership::{Claim, Owner};
use crate::sql_rows::non_negative;
use crate::write_checks::check_job;
use hotlist_operators::hash::item_hash;
use hotlist_operators::time::Millis;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};

const SELECT_OWNER: &str = "SELECT generation, owner FROM hotlist_jobs WHERE job = ?1";

const UPSERT_OWNER: &str = "
INSERT INTO hotlist_jobs (job, generation, owner, claimed_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (job) DO UPDATE SET
    generation = excluded.generation, owner = excluded.owner, claimed_at = excluded.claimed_at";

/// Everything `reset` deletes: the job's results, not its windows or its owner.
const RESET: [&str; 7] = [
    "DELETE FROM topk WHERE job = ?1",
    "DELETE FROM instance_ranges WHERE job = ?1",
    "DELETE FROM hot_keys WHERE job = ?1",
    "DELETE FROM hot_key_windows WHERE job = ?1",
    "DELETE FROM topk_instances WHERE job = ?1",
    "DELETE FROM dead_letters WHERE job = ?1",
    "DELETE FROM hotlist_commits WHERE job = ?1",
];

/// The lock file of `job` next to the database at `db` (the job id is hashed: it may hold any
/// character).
pub fn lock_file(db: &Path, job: &str) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".hotlist-{:016x}.lock", item_hash(job)));
    db.with_file_name(name)
}

/// The job's owner as stored (inside a transaction or not).
pub(super) fn read_owner(conn: &Connection, path: &Path, job: &str) -> Result<Option<Owner>, SinkError> {
    let row: Option<(i64, String)> = conn
        .prepare_cached(SELECT_OWNER)
        .and_then(|mut s| s.query_row(params![job], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(sql_err(path, format!("reading the owner of job {job:?}")))?;
    row.map(|(generation, owner)| {
        Ok(Owner {
            generation: non_negative(path, generation, "job generation")?,
            owner,
        })
    })
    .transpose()
}

impl SqliteStore {
    /// Takes the job's lock file (see the module documentation).
    pub(super) fn lock_job(&mut self, job: &str) -> Result<(), SinkError> {
        self.writable("lock a job")?;
        check_job(job)?;
        if self.locks.contains_key(job) {
            return Ok(());
        }
        let lock = FileLock::try_lock(&lock_file(&self.path, job)).map_err(|e| match e {
            LockError::Held { .. } => SinkError::JobLocked {
                job: job.to_string(),
                location: self.path.display().to_string(),
                detail: format!("{e} (another run of the job is live; stop it first)"),
            },
            LockError::Io { path, source } => SinkError::Io {
                path,
                op: format!("locking job {job:?}"),
                source,
            },
        })?;
        self.locks.insert(job.to_string(), lock);
        Ok(())
    }

    /// Bumps the job's generation in one `IMMEDIATE` transaction and fences this handle's
    /// later commits with it.
    pub(super) fn claim_job(&mut self, job: &str, owner: &str) -> Result<Claim, SinkError> {
        self.writable("claim a job")?;
        check_job(job)?;
        let path = self.path.as_path();
        let op = || format!("claiming job {job:?}");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, op()))?;
        let previous = read_owner(&tx, path, job)?;
        let generation = previous.as_ref().map_or(1, |o| o.generation + 1);
        let stored =
            i64::try_from(generation).map_err(|_| SinkError::corrupt(path, "job generation overflow".into()))?;
        tx.prepare_cached(UPSERT_OWNER)
            .and_then(|mut s| s.execute(params![job, stored, owner, Millis::now().0]))
            .map_err(sql_err(path, op()))?;
        tx.commit().map_err(sql_err(path, op()))?;
        self.claims.insert(job, generation);
        Ok(Claim { generation, previous })
    }

    /// Deletes the job's results in one transaction.
    pub(super) fn reset_job(&mut self, job: &str) -> Result<(), SinkError> {
        self.writable("reset a job")?;
        check_job(job)?;
        let path = self.path.as_path();
        let op = || format!("resetting job {job:?}");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, op()))?;
        self.claims
            .check(job, read_owner(&tx, path, job)?.map(|o| o.generation))?;
        for sql in RESET {
            tx.execute(sql, params![job]).map_err(sql_err(path, op()))?;
        }
        tx.commit().map_err(sql_err(path, op()))
    }
}

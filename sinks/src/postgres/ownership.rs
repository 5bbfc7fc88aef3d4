//! One live run per job in a PostgreSQL schema (see `crate::ownership`): the liveness lock is
//! a session advisory lock of the handle's connection on (schema, job), held until the
//! connection ends and taken again after a reconnect; the generation is the job's
//! `hotlist_jobs` row, read inside every commit transaction of a handle that claimed the job
//! (after the job's commit lock, so claims and commits of a job are serialized).
//!
//! After a reconnect the old session may linger on the server for a while, still holding the
//! lock. The handle then goes on without it: its commits stay fenced by the generation, which
//! is what makes a stale writer stop.

use super::client::Queries;
use super::encode::pg_text;
use super::ident::quote_ident;
use super::statements::{COMMIT_LOCK_CLASS, LOCK_JOB, SELECT_OWNER};
use super::PostgresStore;
use crate::error::SinkError;
use crate::ownership::{Claim, Owner};
use crate::sql_rows::non_negative;
use crate::write_checks::check_job;
use hotlist_operators::time::Millis;
use postgres::types::Timestamp;
use postgres::ToStatement;

/// A session advisory lock on a 64-bit hash of the quoted schema and job names.
const TRY_LOCK: &str = "SELECT pg_try_advisory_lock(hashtextextended($1::text, 0))";

const UPSERT_OWNER: &str = "
INSERT INTO hotlist_jobs (job, generation, owner, claimed_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (job) DO UPDATE SET
    generation = excluded.generation, owner = excluded.owner, claimed_at = excluded.claimed_at";

/// Everything `reset` deletes: the job's results, not its windows or its owner.
const RESET: [&str; 7] = [
    "DELETE FROM topk WHERE job = $1",
    "DELETE FROM instance_ranges WHERE job = $1",
    "DELETE FROM hot_keys WHERE job = $1",
    "DELETE FROM hot_key_windows WHERE job = $1",
    "DELETE FROM topk_instances WHERE job = $1",
    "DELETE FROM dead_letters WHERE job = $1",
    "DELETE FROM hotlist_commits WHERE job = $1",
];

/// The job's owner as stored, read through `c` (a connection or a transaction) with `select`
/// ([`SELECT_OWNER`], prepared or not).
pub(super) fn read_owner(
    c: &mut impl Queries,
    select: &(impl ToStatement + ?Sized),
    location: &str,
    job: &str,
) -> Result<Result<Option<Owner>, SinkError>, postgres::Error> {
    let Some(row) = c.query_opt(select, &[&job])? else {
        return Ok(Ok(None));
    };
    let generation = match non_negative(std::path::Path::new(location), row.try_get(0)?, "job generation") {
        Ok(g) => g,
        Err(e) => return Ok(Err(e)),
    };
    Ok(Ok(Some(Owner {
        generation,
        owner: row.try_get(1)?,
    })))
}

/// The text the liveness lock of `job` in `schema` is keyed on (hashed with
/// `hashtextextended(key, 0)`): tools and tests find the lock's holder in `pg_locks` with it.
pub fn job_lock_key(schema: &str, job: &str) -> String {
    format!("hotlist {}.{}", quote_ident(schema), quote_ident(job))
}

impl PostgresStore {
    /// The text the liveness lock of `job` is keyed on.
    fn lock_key(&self, job: &str) -> String {
        job_lock_key(&self.schema, job)
    }

    /// Tries the session lock of `job` on the current connection.
    fn try_session_lock(&mut self, job: &str) -> Result<bool, SinkError> {
        let key = self.lock_key(job);
        self.run(
            || format!("locking job {job:?}"),
            |c, _| c.query_one(TRY_LOCK, &[&key])?.try_get::<_, bool>(0),
        )
    }

    /// Takes the job's session lock (see the module documentation).
    pub(super) fn lock_job(&mut self, job: &str) -> Result<(), SinkError> {
        check_job(job)?;
        pg_text(job, job, || "job id".into())?;
        if self.locked.contains(job) {
            return Ok(());
        }
        if !self.try_session_lock(job)? {
            return Err(SinkError::JobLocked {
                job: job.to_string(),
                location: self.location.clone(),
                detail: "another session holds the job's advisory lock (another run of the job is live; stop it first)"
                    .into(),
            });
        }
        self.locked.insert(job.to_string());
        Ok(())
    }

    /// After a reconnect: takes the session locks again. A lock another session holds is a
    /// takeover if the job's generation moved on; otherwise (most likely this handle's old
    /// session, not yet ended by the server) the handle goes on fenced by the generation alone.
    pub(super) fn relock(&mut self) -> Result<(), SinkError> {
        for job in self.locked.clone() {
            if self.try_session_lock(&job)? {
                continue;
            }
            let location = self.location.clone();
            let current = self.run(
                || format!("reading the owner of job {job:?}"),
                |c, _| read_owner(c, SELECT_OWNER, &location, &job),
            )??;
            self.claims.check(&job, current.map(|o| o.generation))?;
        }
        Ok(())
    }

    /// Bumps the job's generation in one transaction (under the job's commit lock) and fences
    /// this handle's later commits with it.
    pub(super) fn claim_job(&mut self, job: &str, owner: &str) -> Result<Claim, SinkError> {
        check_job(job)?;
        pg_text(job, job, || "job id".into())?;
        pg_text(job, owner, || "owner".into())?;
        let location = self.location.clone();
        let now = super::encode::to_pg(Millis::now()).unwrap_or(Timestamp::PosInfinity);
        let claim = self.run(
            || format!("claiming job {job:?}"),
            |c, _| -> Result<Result<Claim, SinkError>, postgres::Error> {
                let mut tx = c.transaction()?;
                tx.execute(LOCK_JOB, &[&COMMIT_LOCK_CLASS, &job])?;
                let previous = match read_owner(&mut tx, SELECT_OWNER, &location, job)? {
                    Ok(p) => p,
                    Err(e) => return Ok(Err(e)),
                };
                let generation = previous.as_ref().map_or(1, |o| o.generation + 1);
                let stored = generation as i64; // from a non-negative i64, plus one
                tx.execute(UPSERT_OWNER, &[&job, &stored, &owner, &now])?;
                tx.commit()?;
                Ok(Ok(Claim { generation, previous }))
            },
        )??;
        self.claims.insert(job, claim.generation);
        Ok(claim)
    }

    /// Deletes the job's results in one transaction (under the job's commit lock).
    pub(super) fn reset_job(&mut self, job: &str) -> Result<(), SinkError> {
        check_job(job)?;
        pg_text(job, job, || "job id".into())?;
        let location = self.location.clone();
        let claims = self.claims.clone();
        self.run(
            || format!("resetting job {job:?}"),
            |c, _| -> Result<Result<(), SinkError>, postgres::Error> {
                let mut tx = c.transaction()?;
                tx.execute(LOCK_JOB, &[&COMMIT_LOCK_CLASS, &job])?;
                let current = match read_owner(&mut tx, SELECT_OWNER, &location, job)? {
                    Ok(o) => o.map(|o| o.generation),
                    Err(e) => return Ok(Err(e)),
                };
                if let Err(e) = claims.check(job, current) {
                    return Ok(Err(e));
                }
                for sql in RESET {
                    tx.execute(sql, &[&job])?;
                }
                tx.commit()?;
                Ok(Ok(()))
            },
        )?
    }
}

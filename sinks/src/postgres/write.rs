//! Writing to PostgreSQL: `prepare` records a job's windows, `commit` writes a batch in one
//! `READ COMMITTED` transaction serialized with the job's other committers (see the module
//! documentation for the statements it runs).

use super::client::{Queries, Transaction};
use super::encode::{pg_text, pg_window, to_pg, Columns, PgTime};
use super::ownership::read_owner;
use super::ranges::RangeColumns;
use super::schema::ensure_schema;
use super::statements::{Statements, COMMIT_LOCK_CLASS, INSERT_ROWS};
use super::PostgresStore;
use crate::error::SinkError;
use crate::ownership::Claim;
use crate::sql_rows::non_negative;
use crate::store::{DeadLetterBlocks, SinkStore};
use crate::types::CommitBatch;
use crate::write_checks::{check_batch, check_prepare};
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use postgres::types::{Timestamp, ToSql};
use postgres::IsolationLevel;

impl SinkStore for PostgresStore {
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
        check_prepare(job, windows)?;
        pg_text(job, job, || "job id".into())?;
        for w in windows {
            pg_text(job, &w.name, || "window name".into())?;
            pg_window(job, w)?;
        }
        self.live()?;
        ensure_schema(&mut self.client, &self.schema, &self.location)?;
        self.run(
            || format!("recording the windows of job {job:?}"),
            |c, s| {
                let mut tx = c.transaction()?;
                // Every process of a cluster prepares: serialize them (delete + insert would race).
                tx.execute(&s.lock_job, &[&COMMIT_LOCK_CLASS, &job])?;
                tx.execute(&s.delete_windows, &[&job])?;
                for (ord, w) in windows.iter().enumerate() {
                    // `check_prepare` has verified k fits; spans are at most i64::MAX.
                    let by = crate::sql_rows::join_dims(&w.key.by);
                    let params: [&(dyn ToSql + Sync); 7] = [
                        &job,
                        &w.name,
                        &w.size.as_i64(),
                        &w.slide.as_i64(),
                        &(w.k as i64),
                        &(ord as i64),
                        &by,
                    ];
                    tx.execute(&s.insert_window, &params)?;
                }
                tx.commit()
            },
        )
    }

    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError> {
        check_batch(batch)?;
        let cols = Columns::of(batch)?;
        let ranges = RangeColumns::of(&batch.job, &batch.ranges)?;
        let loc = self.loc().to_path_buf();
        let job = batch.job.as_str();
        let now = to_pg(Millis::now()).unwrap_or(Timestamp::PosInfinity);
        let op = || format!("commit of job {:?} epoch {}", batch.job, batch.epoch);
        let (claims, location) = (self.claims.clone(), self.location.clone());
        self.run(op, |c, s| -> Result<Result<bool, SinkError>, _> {
            let mut tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::ReadCommitted)
                .start()?;
            // Serialize with other committers of the job, even before its first commit row exists.
            tx.execute(&s.lock_job, &[&COMMIT_LOCK_CLASS, &job])?;
            // a stale writer (another run claimed the job since) writes nothing
            let owner = match read_owner(&mut tx, &s.select_owner, &location, job)? {
                Ok(o) => o,
                Err(e) => return Ok(Err(e)),
            };
            if let Err(e) = claims.check(job, owner.map(|o| o.generation)) {
                return Ok(Err(e));
            }
            if let Some(r) = tx.query_opt(&s.select_epoch_for_update, &[&job])? {
                let committed = match non_negative(&loc, r.try_get(0)?, "committed epoch") {
                    Ok(c) => c,
                    Err(e) => return Ok(Err(e)),
                };
                if committed >= batch.epoch {
                    tx.rollback()?;
                    return Ok(Ok(false));
                }
            }
            write_batch(&mut tx, s, batch, (&cols, &ranges), now)?;
            crate::crash_point::crash_point("sink.commit");
            tx.commit()?;
            Ok(Ok(true))
        })?
    }

    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError> {
        let epoch = self.run(
            || format!("reading the committed epoch of job {job:?}"),
            |c, s| match c.query_opt(&s.select_epoch, &[&job])? {
                Some(r) => r.try_get::<_, i64>(0).map(Some),
                None => Ok(None),
            },
        )?;
        epoch
            .map(|e| non_negative(self.loc(), e, "committed epoch"))
            .transpose()
    }

    fn lock(&mut self, job: &str) -> Result<(), SinkError> {
        self.lock_job(job)
    }

    fn claim(&mut self, job: &str, owner: &str) -> Result<Claim, SinkError> {
        self.claim_job(job, owner)
    }

    fn reset(&mut self, job: &str) -> Result<(), SinkError> {
        self.reset_job(job)
    }

    fn dead_letter_blocks(&mut self, job: &str) -> Result<DeadLetterBlocks, SinkError> {
        self.stored_dead_letter_blocks(job)
    }
}

/// Writes a batch (as `cols` and `ranges`) inside the commit transaction: replaces the
/// instances' rows, upserts their headers, appends the dead letters (in chunks, in order),
/// writes the hot-key windows, upserts the instances' ranges and the job's commit row.
fn write_batch(
    tx: &mut Transaction<'_>,
    stmts: &Statements,
    batch: &CommitBatch,
    (cols, ranges): (&Columns<'_>, &RangeColumns<'_>),
    now: PgTime,
) -> Result<(), postgres::Error> {
    let job = batch.job.as_str();
    // `check_batch` has verified the epoch fits an i64.
    let epoch = batch.epoch as i64;
    let (h, r, d) = (&cols.headers, &cols.rows, &cols.letters);
    if !h.window.is_empty() {
        tx.execute(&stmts.delete_rows, &[&job, &h.window, &h.start, &h.group])?;
        let headers: [&(dyn ToSql + Sync); 20] = [
            &job,
            &h.window,
            &h.start,
            &h.end,
            &h.revision,
            &h.state,
            &h.is_final,
            &h.watermark,
            &h.as_of,
            &h.item_count,
            &h.exact,
            &h.error_bound,
            &h.sketch[0],
            &h.sketch[1],
            &h.sketch[2],
            &h.sketch[3],
            &h.group,
            &h.certificate[0],
            &h.certificate[1],
            &h.certificate[2],
        ];
        tx.execute(&stmts.upsert_instances, &headers)?;
    }
    if !r.item.is_empty() {
        let rows: [&(dyn ToSql + Sync); 17] = [
            &job,
            &r.window,
            &r.start,
            &r.end,
            &r.revision,
            &r.is_final,
            &r.state,
            &r.as_of,
            &r.exact,
            &r.error_bound,
            &r.rank,
            &r.item,
            &r.count,
            &r.group,
            &r.baseline,
            &r.score,
            &r.history,
        ];
        match &stmts.insert_rows {
            Some(insert_rows) => tx.execute(insert_rows, &rows)?,
            // a handle opened as a reader of an older schema (the job may have migrated it since)
            None => tx.execute(INSERT_ROWS, &rows)?,
        };
    }
    for c in d.chunks() {
        let (source, partition, position) = (&d.source[c.clone()], &d.partition[c.clone()], &d.position[c.clone()]);
        let (reason, detail, raw) = (&d.reason[c.clone()], &d.detail[c.clone()], &d.raw[c]);
        let letters: [&(dyn ToSql + Sync); 9] = [
            &job, &epoch, &now, &source, &partition, &position, &reason, &detail, &raw,
        ];
        tx.execute(&stmts.insert_dead_letters, &letters)?;
    }
    for d in batch.dead_letters.iter().filter(|d| d.is_summary()) {
        super::summaries::write_summary(tx, stmts, job, d, epoch, now)?;
    }
    super::hot_keys::write_hot_windows(tx, job, &batch.hot_keys)?;
    super::ranges::write_ranges(tx, job, ranges)?;
    tx.execute(&stmts.upsert_commit, &[&job, &epoch, &cols.watermark, &now])?;
    Ok(())
}

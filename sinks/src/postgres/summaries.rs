//! Dead-letter summaries in PostgreSQL: a summary row per (job, source, reason, block) that a
//! commit adds its count to (`hotlist_operators::dead_letter_cap`), and the stored count per
//! block a restarted job resumes the cap from.

use super::client::{Queries, Transaction};
use super::encode::PgTime;
use super::statements::{Statements, INSERT_SUMMARY, SELECT_DEAD_LETTER_BLOCKS, UPDATE_SUMMARY};
use super::PostgresStore;
use crate::error::SinkError;
use crate::sql_rows::non_negative;
use crate::store::DeadLetterBlocks;
use crate::types::SourcedDeadLetter;
use hotlist_operators::dead_letter_cap::{block_of, block_range, BLOCK};
use postgres::types::ToSql;

/// Writes a summary (`d.is_summary()`, checked by `check_batch`) inside the commit transaction:
/// added to its block's row, or that row's first version.
pub(super) fn write_summary(
    tx: &mut Transaction<'_>,
    stmts: &Statements,
    job: &str,
    d: &SourcedDeadLetter,
    epoch: i64,
    now: PgTime,
) -> Result<(), postgres::Error> {
    // `check_batch` has verified the numbers fit an i64 and the summary lies in one block
    let (first, count) = (d.letter.position as i64, d.count as i64);
    let last = d.last_position.unwrap_or(d.letter.position) as i64;
    let (lo, hi) = block_range(block_of(d.letter.position));
    let (lo, hi) = (lo as i64, hi.min(i64::MAX as u64) as i64);
    let reason = d.letter.reason.as_str();
    let update: [&(dyn ToSql + Sync); 10] = [&job, &d.source, &reason, &count, &first, &lo, &hi, &last, &epoch, &now];
    // a handle opened on an older schema has no prepared statement: it runs the text
    let updated = match &stmts.update_summary {
        Some(prepared) => tx.execute(prepared, &update)?,
        None => tx.execute(UPDATE_SUMMARY, &update)?,
    };
    if updated == 0 {
        let partition = i64::from(d.letter.partition.0);
        let insert: [&(dyn ToSql + Sync); 10] = [
            &job,
            &d.source,
            &partition,
            &first,
            &reason,
            &d.letter.detail,
            &epoch,
            &now,
            &count,
            &last,
        ];
        match &stmts.insert_summary {
            Some(prepared) => tx.execute(prepared, &insert)?,
            None => tx.execute(INSERT_SUMMARY, &insert)?,
        };
    }
    Ok(())
}

impl PostgresStore {
    /// Per (source, block), the dead letters the job has stored.
    pub(super) fn stored_dead_letter_blocks(&mut self, job: &str) -> Result<DeadLetterBlocks, SinkError> {
        let block = BLOCK as i64;
        let raw: Vec<(String, i64, i64)> = self.run(
            || format!("counting the dead letters of job {job:?} per block"),
            |c, s| {
                let rows = match &s.select_dead_letter_blocks {
                    Some(prepared) => c.query(prepared, &[&job, &block])?,
                    None => c.query(SELECT_DEAD_LETTER_BLOCKS, &[&job, &block])?,
                };
                rows.iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                    .collect()
            },
        )?;
        raw.into_iter()
            .map(|(source, b, n)| {
                let b = non_negative(self.loc(), b, "dead letter block")?;
                Ok(((source, b), non_negative(self.loc(), n, "dead letter count")?))
            })
            .collect()
    }
}

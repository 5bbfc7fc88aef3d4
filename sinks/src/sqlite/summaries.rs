//! Dead-letter summaries in SQLite: a summary row per (job, source, reason, block) that a
//! commit adds its count to (`hotlist_operators::dead_letter_cap`), and the stored count per
//! block a restarted job resumes the cap from.

use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use crate::store::DeadLetterBlocks;
use crate::types::SourcedDeadLetter;
use hotlist_operators::dead_letter_cap::{block_of, block_range, BLOCK};
use hotlist_operators::time::Millis;
use rusqlite::{params, Connection};

/// Adds to a block's summary row (`?6..=?7`: the block's positions).
const UPDATE_SUMMARY: &str = "
UPDATE dead_letters SET count = count + ?4, position = min(position, ?5), last_position = max(last_position, ?8),
    epoch = ?9, recorded_at = ?10
WHERE job = ?1 AND source = ?2 AND reason = ?3 AND last_position IS NOT NULL AND position BETWEEN ?6 AND ?7";

/// A block's first summary row.
const INSERT_SUMMARY: &str = "
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at, count, last_position)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, X'', ?7, ?8, ?9, ?10)";

/// Writes a summary (`d.is_summary()`, checked by `check_batch`) inside the commit transaction:
/// added to its block's row, or that row's first version.
pub(super) fn write_summary(
    tx: &Connection,
    job: &str,
    d: &SourcedDeadLetter,
    epoch: i64,
    now: Millis,
) -> rusqlite::Result<()> {
    // `check_batch` has verified the numbers fit an i64 and the summary lies in one block
    let (first, count) = (d.letter.position as i64, d.count as i64);
    let last = d.last_position.unwrap_or(d.letter.position) as i64;
    let (lo, hi) = block_range(block_of(d.letter.position));
    let reason = d.letter.reason.as_str();
    let updated = tx.prepare_cached(UPDATE_SUMMARY)?.execute(params![
        job,
        d.source,
        reason,
        count,
        first,
        lo as i64,
        hi.min(i64::MAX as u64) as i64,
        last,
        epoch,
        now.0
    ])?;
    if updated == 0 {
        tx.prepare_cached(INSERT_SUMMARY)?.execute(params![
            job,
            d.source,
            d.letter.partition.0,
            first,
            reason,
            d.letter.detail,
            epoch,
            now.0,
            count,
            last
        ])?;
    }
    Ok(())
}

impl SqliteStore {
    /// Per (source, block), the dead letters the job has stored.
    pub(super) fn stored_dead_letter_blocks(&self, job: &str) -> Result<DeadLetterBlocks, SinkError> {
        let path = self.path.as_path();
        let raw = (|| -> rusqlite::Result<Vec<(String, i64, i64)>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT source, position / ?2, SUM(count) FROM dead_letters WHERE job = ?1 GROUP BY 1, 2",
            )?;
            let rows = stmt.query_map(params![job, BLOCK as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect()
        })()
        .map_err(sql_err(
            path,
            format!("counting the dead letters of job {job:?} per block"),
        ))?;
        raw.into_iter()
            .map(|(source, block, n)| {
                let block = crate::sql_rows::non_negative(path, block, "dead letter block")?;
                Ok((
                    (source, block),
                    crate::sql_rows::non_negative(path, n, "dead letter count")?,
                ))
            })
            .collect()
    }
}

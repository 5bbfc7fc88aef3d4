//! Finding dead letters by their bytes in SQLite: the whole letters of some reasons whose raw
//! record holds a needle (`hotlist explain` looks for an item's late and sealed drops).

use super::read::dead_letter_row;
use super::schema::BOUNDED_DEAD_LETTERS_VERSION;
use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use crate::sql_rows::{self, RawDeadLetter};
use crate::types::SourcedDeadLetter;
use hotlist_operators::record::DeadReason;
use rusqlite::params;

impl SqliteStore {
    /// See `StoreReader::dead_letters_containing`.
    pub(super) fn search_dead_letters(
        &self,
        job: &str,
        reasons: &[DeadReason],
        needle: &[u8],
        limit: usize,
    ) -> Result<Vec<SourcedDeadLetter>, SinkError> {
        let path = self.path.as_path();
        let reasons: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
        let raw = (|| -> rusqlite::Result<Vec<RawDeadLetter>> {
            let tx = self.conn.unchecked_transaction()?;
            // before version 7 every row is one whole letter
            let (counts, whole) = if tx.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))?
                >= BOUNDED_DEAD_LETTERS_VERSION
            {
                ("count, last_position", "last_position IS NULL")
            } else {
                ("1, NULL", "1")
            };
            // the reasons are our own names, never user input
            let listed: Vec<String> = reasons.iter().map(|r| format!("'{r}'")).collect();
            let mut stmt = tx.prepare(&format!(
                "SELECT source, partition, position, reason, detail, raw, {counts} FROM dead_letters
                 WHERE job = ?1 AND reason IN ({}) AND {whole} AND instr(raw, ?2) > 0
                 ORDER BY id LIMIT ?3",
                listed.join(", ")
            ))?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(params![job, needle, limit], dead_letter_row)?;
            rows.collect()
        })()
        .map_err(sql_err(path, format!("searching the dead letters of job {job:?}")))?;
        raw.into_iter().map(|d| sql_rows::dead_letter(path, job, d)).collect()
    }
}

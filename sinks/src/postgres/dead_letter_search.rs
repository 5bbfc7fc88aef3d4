//! Finding dead letters by their bytes in PostgreSQL: the whole letters of some reasons whose
//! raw record holds a needle (`hotlist explain` looks for an item's late and sealed drops).

use super::client::Queries;
use super::read::columns;
use super::schema::BOUNDED_DEAD_LETTERS_VERSION;
use super::PostgresStore;
use crate::error::SinkError;
use crate::sql_rows::{self, RawDeadLetter};
use crate::types::SourcedDeadLetter;
use hotlist_operators::record::DeadReason;
use postgres::IsolationLevel;

impl PostgresStore {
    /// See `StoreReader::dead_letters_containing`.
    pub(super) fn search_dead_letters(
        &mut self,
        job: &str,
        reasons: &[DeadReason],
        needle: &[u8],
        limit: usize,
    ) -> Result<Vec<SourcedDeadLetter>, SinkError> {
        let reasons: Vec<String> = reasons.iter().map(|r| r.as_str().to_string()).collect();
        let limit = sql_rows::sql_limit(limit);
        let raw: Vec<RawDeadLetter> = self.run(
            || format!("searching the dead letters of job {job:?}"),
            |c, _| -> Result<Vec<RawDeadLetter>, postgres::Error> {
                let mut tx = c
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()?;
                let version: Option<i64> = tx
                    .query_opt("SELECT version FROM hotlist_schema", &[])?
                    .map(|r| r.try_get(0))
                    .transpose()?;
                // before version 7 every row is one whole letter
                let (counts, whole) = if version.is_some_and(|v| v >= BOUNDED_DEAD_LETTERS_VERSION) {
                    ("count, last_position", "last_position IS NULL")
                } else {
                    ("1::BIGINT, NULL::BIGINT", "TRUE")
                };
                let sql = format!(
                    "SELECT source, partition, position, reason, detail, raw, {counts} FROM dead_letters
                     WHERE job = $1 AND reason = ANY($2) AND {whole} AND position($3::BYTEA IN raw) > 0
                     ORDER BY id LIMIT $4"
                );
                let rows = tx.query(sql.as_str(), &[&job, &reasons.as_slice(), &needle, &limit])?;
                tx.commit()?;
                rows.iter().map(columns).collect()
            },
        )?;
        raw.into_iter()
            .map(|d| sql_rows::dead_letter(self.loc(), job, d))
            .collect()
    }
}

//! Hot-key windows in PostgreSQL (schema version 4): the same two tables as SQLite's,
//! `hot_key_windows` (one header per closed window) and `hot_keys` (one row per reported key),
//! with `timestamptz` times and `double precision` rates. A window is written whole in the
//! commit that carries it; the read takes the latest header and at most its key count + 1 rows
//! in one `REPEATABLE READ READ ONLY` transaction. A schema older than version 4 has no hot
//! keys (`None`).

use super::client::{Queries, Transaction};
use super::encode::{from_pg, pg_watermark, PgTime};
use super::PostgresStore;
use crate::error::SinkError;
use crate::read_checks::{hot_header, hot_window, RawHotHeader};
use hotlist_operators::hot_keys::HotWindow;
use postgres::types::ToSql;
use postgres::IsolationLevel;

/// The first schema version with the hot-key tables.
pub(super) const HOT_KEYS_VERSION: i64 = 4;

const UPSERT_WINDOW: &str = "
INSERT INTO hot_key_windows (job, window_start, window_end, watermark, as_of, key_count)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (job, window_start) DO UPDATE SET
    window_end = excluded.window_end, watermark = excluded.watermark, as_of = excluded.as_of,
    key_count = excluded.key_count";

const DELETE_KEYS: &str = "DELETE FROM hot_keys WHERE job = $1 AND window_start = $2";

/// All keys of a window in one statement (arrays unnested).
const INSERT_KEYS: &str = "
INSERT INTO hot_keys (job, window_start, window_end, item_id, rate, state, as_of)
SELECT $1, $2, $3, k.item_id, k.rate, k.state, $4
FROM unnest($5::text[], $6::float8[], $7::text[]) AS k(item_id, rate, state)";

const SELECT_LATEST: &str = "
SELECT window_start, window_end, watermark, as_of, key_count FROM hot_key_windows
WHERE job = $1 ORDER BY window_start DESC LIMIT 1";

const SELECT_KEYS: &str = "SELECT item_id, rate, state FROM hot_keys WHERE job = $1 AND window_start = $2 LIMIT $3";

/// Writes the batch's closed windows (checked by `check_batch`) inside the commit transaction.
pub(super) fn write_hot_windows(
    tx: &mut Transaction<'_>,
    job: &str,
    windows: &[HotWindow],
) -> Result<(), postgres::Error> {
    for w in windows {
        let (start, end) = (pg_watermark(w.start), pg_watermark(w.end));
        let (watermark, as_of) = (pg_watermark(w.watermark), pg_watermark(w.as_of));
        let count = w.keys.len() as i64;
        let header: [&(dyn ToSql + Sync); 6] = [&job, &start, &end, &watermark, &as_of, &count];
        tx.execute(UPSERT_WINDOW, &header)?;
        tx.execute(DELETE_KEYS, &[&job, &start])?;
        if w.keys.is_empty() {
            continue;
        }
        let ids: Vec<&str> = w.keys.iter().map(|k| k.item_id.as_str()).collect();
        let rates: Vec<f64> = w.keys.iter().map(|k| k.rate).collect();
        let states: Vec<&str> = w.keys.iter().map(|k| k.state.as_str()).collect();
        let rows: [&(dyn ToSql + Sync); 7] = [&job, &start, &end, &as_of, &ids, &rates, &states];
        tx.execute(INSERT_KEYS, &rows)?;
    }
    Ok(())
}

type Rows = Vec<(String, f64, String)>;

/// A read: the header, and its rows or why its header is damaged (`None`: no window).
type HotRead = Option<(RawHotHeader, Result<(usize, Rows), String>)>;

impl PostgresStore {
    /// The latest closed hot-key window of the job (see `StoreReader::hot_keys`).
    pub fn hot_keys(&mut self, job: &str) -> Result<Option<HotWindow>, SinkError> {
        let op = || format!("reading the hot keys of job {job:?}");
        let read = self.run(op, |c, _| -> Result<HotRead, _> {
            let mut tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let version: Option<i64> = tx
                .query_opt("SELECT version FROM hotlist_schema", &[])?
                .map(|r| r.try_get(0))
                .transpose()?;
            if version.is_none_or(|v| v < HOT_KEYS_VERSION) {
                tx.commit()?;
                return Ok(None);
            }
            let Some(row) = tx.query_opt(SELECT_LATEST, &[&job])? else {
                tx.commit()?;
                return Ok(None);
            };
            let start: PgTime = row.try_get(0)?;
            let header = RawHotHeader {
                start: from_pg(start),
                end: from_pg(row.try_get(1)?),
                watermark: from_pg(row.try_get(2)?),
                as_of: from_pg(row.try_get(3)?),
                key_count: row.try_get(4)?,
            };
            let count = match hot_header(job, &header) {
                Ok(c) => c,
                Err(d) => return Ok(Some((header, Err(d)))),
            };
            let limit = i64::try_from(count + 1).unwrap_or(i64::MAX);
            let rows = tx
                .query(SELECT_KEYS, &[&job, &start, &limit])?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                .collect::<Result<Rows, postgres::Error>>()?;
            tx.commit()?;
            Ok(Some((header, Ok((count, rows)))))
        })?;
        let Some((header, rows)) = read else { return Ok(None) };
        let corrupt = |d: String| SinkError::corrupt(self.loc(), d);
        let (count, rows) = rows.map_err(corrupt)?;
        hot_window(job, &header, count, rows).map(Some).map_err(corrupt)
    }
}

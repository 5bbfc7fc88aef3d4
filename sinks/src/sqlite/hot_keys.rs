//! Hot-key windows in SQLite (schema version 4): one `hot_key_windows` header per closed window
//! and one `hot_keys` row per reported key. A window is written whole in the commit that carries
//! it (its header and rows replaced, so a replay after a restart writes the same rows again);
//! the read takes the latest header and at most its key count + 1 rows in one read transaction.
//! A database older than version 4 has no hot keys (`None`).

use super::schema::HOT_KEYS_VERSION;
use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use crate::read_checks::{hot_header, hot_window, RawHotHeader};
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::time::Millis;
use rusqlite::{params, Connection, OptionalExtension};

const UPSERT_WINDOW: &str = "
INSERT INTO hot_key_windows (job, window_start, window_end, watermark, as_of, key_count)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (job, window_start) DO UPDATE SET
    window_end = excluded.window_end, watermark = excluded.watermark, as_of = excluded.as_of,
    key_count = excluded.key_count";

const DELETE_KEYS: &str = "DELETE FROM hot_keys WHERE job = ?1 AND window_start = ?2";

const INSERT_KEY: &str = "
INSERT INTO hot_keys (job, window_start, window_end, item_id, rate, state, as_of)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

const SELECT_LATEST: &str = "
SELECT window_start, window_end, watermark, as_of, key_count FROM hot_key_windows
WHERE job = ?1 ORDER BY window_start DESC LIMIT 1";

const SELECT_KEYS: &str = "
SELECT item_id, rate, state FROM hot_keys WHERE job = ?1 AND window_start = ?2 LIMIT ?3";

/// Writes one closed window (checked by `check_batch`) inside the commit transaction.
pub(super) fn write_hot_window(tx: &Connection, job: &str, w: &HotWindow) -> rusqlite::Result<()> {
    tx.prepare_cached(UPSERT_WINDOW)?.execute(params![
        job,
        w.start.0,
        w.end.0,
        w.watermark.0,
        w.as_of.0,
        w.keys.len() as i64
    ])?;
    tx.prepare_cached(DELETE_KEYS)?.execute(params![job, w.start.0])?;
    let mut insert = tx.prepare_cached(INSERT_KEY)?;
    for k in &w.keys {
        insert.execute(params![
            job,
            w.start.0,
            w.end.0,
            k.item_id.as_str(),
            k.rate,
            k.state.as_str(),
            w.as_of.0
        ])?;
    }
    Ok(())
}

type Rows = Vec<(String, f64, String)>;

/// A read: the header, and its rows or why its header is damaged (`None`: no window).
type HotRead = Option<(RawHotHeader, Result<(usize, Rows), String>)>;

impl SqliteStore {
    /// The latest closed hot-key window of the job (see `StoreReader::hot_keys`).
    pub fn hot_keys(&self, job: &str) -> Result<Option<HotWindow>, SinkError> {
        let path = self.path.as_path();
        let op = || format!("reading the hot keys of job {job:?}");
        // the header is checked before its key count bounds the rows read
        let read = || -> rusqlite::Result<HotRead> {
            let tx = self.conn.unchecked_transaction()?;
            let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version < HOT_KEYS_VERSION {
                return Ok(None);
            }
            let header = tx
                .prepare_cached(SELECT_LATEST)?
                .query_row(params![job], |r| {
                    Ok(RawHotHeader {
                        start: Millis(r.get(0)?),
                        end: Millis(r.get(1)?),
                        watermark: Millis(r.get(2)?),
                        as_of: Millis(r.get(3)?),
                        key_count: r.get(4)?,
                    })
                })
                .optional()?;
            let Some(header) = header else { return Ok(None) };
            let count = match hot_header(job, &header) {
                Ok(c) => c,
                Err(d) => return Ok(Some((header, Err(d)))),
            };
            let limit = i64::try_from(count + 1).unwrap_or(i64::MAX);
            let mut stmt = tx.prepare_cached(SELECT_KEYS)?;
            let rows = stmt
                .query_map(params![job, header.start.0, limit], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<rusqlite::Result<Rows>>()?;
            drop(stmt);
            tx.commit()?;
            Ok(Some((header, Ok((count, rows)))))
        };
        let Some((header, rows)) = read().map_err(sql_err(path, op()))? else {
            return Ok(None);
        };
        let corrupt = |d: String| SinkError::corrupt(path, d);
        let (count, rows) = rows.map_err(corrupt)?;
        hot_window(job, &header, count, rows).map(Some).map_err(corrupt)
    }
}

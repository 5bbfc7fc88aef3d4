//! Sealed instances' input ranges in SQLite (schema version 9): one `instance_ranges` row per
//! instance, upserted in the commit transaction that carries them (a later commit's ranges of
//! the same instance replace the row), read back checked (`crate::ranges`). A database older
//! than version 9 has no ranges (`None`, no instances).

use super::schema::RANGES_VERSION;
use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use crate::ranges::{from_columns, latest_ranges, ranges_columns};
use crate::read_checks::ListAt;
use crate::sql_rows;
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::time::Millis;
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension};

const UPSERT_RANGES: &str = "
INSERT INTO instance_ranges (job, window_name, window_start, window_end, ranges, unreadable)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (job, window_name, window_start) DO UPDATE SET
    window_end = excluded.window_end, ranges = excluded.ranges, unreadable = excluded.unreadable";

const SELECT_RANGES: &str = "
SELECT window_end, ranges, unreadable FROM instance_ranges
WHERE job = ?1 AND window_name = ?2 AND window_start = ?3";

/// At most `?4` starts at or after `?3`, ascending: one range scan of the primary key.
const SELECT_STARTS: &str = "
SELECT window_start FROM instance_ranges
WHERE job = ?1 AND window_name = ?2 AND window_start >= ?3 ORDER BY window_start LIMIT ?4";

/// A text column as read: its text (`None`: NULL), or what else it holds (a damaged file).
type Text = Result<Option<String>, &'static str>;

/// A row as read: `window_end`, `ranges`, `unreadable`.
type RangesRow = (i64, Text, Text);

/// Column `i` of `r` as text, or what it holds instead.
fn text(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Text> {
    Ok(match r.get_ref(i)? {
        ValueRef::Null => Ok(None),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .map(|t| Some(t.to_string()))
            .map_err(|_| "text that is not UTF-8"),
        ValueRef::Integer(_) => Err("an integer"),
        ValueRef::Real(_) => Err("a real"),
        ValueRef::Blob(_) => Err("a blob"),
    })
}

/// Writes the batch's ranges (checked by `check_batch`; the last of an instance's wins) inside
/// the commit transaction.
pub(super) fn write_ranges(tx: &Connection, job: &str, ranges: &[SealedRanges]) -> rusqlite::Result<()> {
    if ranges.is_empty() {
        return Ok(());
    }
    let mut upsert = tx.prepare_cached(UPSERT_RANGES)?;
    for r in latest_ranges(ranges) {
        let (json, unreadable) = ranges_columns(r);
        upsert.execute(params![job, r.window, r.start.0, r.end.0, json, unreadable])?;
    }
    Ok(())
}

impl SqliteStore {
    /// The instance's ranges (see `StoreReader::sealed_ranges`).
    pub fn sealed_ranges(&self, job: &str, window: &str, start: Millis) -> Result<Option<SealedRanges>, SinkError> {
        let path = self.path.as_path();
        let read = || -> rusqlite::Result<Option<RangesRow>> {
            let tx = self.conn.unchecked_transaction()?;
            let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version < RANGES_VERSION {
                return Ok(None);
            }
            let row = tx
                .prepare_cached(SELECT_RANGES)?
                .query_row(params![job, window, start.0], |r| {
                    Ok((r.get(0)?, text(r, 1)?, text(r, 2)?))
                })
                .optional()?;
            tx.commit()?;
            Ok(row)
        };
        let op = || {
            format!(
                "reading the ranges of job {job:?} window {window:?} instance {}",
                start.0
            )
        };
        let Some((end, ranges, unreadable)) = read().map_err(sql_err(path, op()))? else {
            return Ok(None);
        };
        let at = ListAt { job, window, start };
        let corrupt = |d: String| SinkError::corrupt(path, d);
        let not_text = |field: &str, kind: &str| corrupt(format!("{at}: {field} is {kind}, not text"));
        let ranges = ranges.map_err(|kind| not_text("ranges", kind))?;
        let unreadable = unreadable.map_err(|kind| not_text("unreadable", kind))?;
        from_columns(&at, Millis(end), ranges, unreadable)
            .map(Some)
            .map_err(corrupt)
    }

    /// The starts of the window's instances with ranges (see `StoreReader::sealed_instances`).
    pub fn sealed_instances(
        &self,
        job: &str,
        window: &str,
        since: Millis,
        limit: usize,
    ) -> Result<Vec<Millis>, SinkError> {
        let path = self.path.as_path();
        let read = || -> rusqlite::Result<Vec<i64>> {
            let tx = self.conn.unchecked_transaction()?;
            let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version < RANGES_VERSION || limit == 0 {
                return Ok(Vec::new());
            }
            let mut stmt = tx.prepare_cached(SELECT_STARTS)?;
            let starts = stmt
                .query_map(params![job, window, since.0, sql_rows::sql_limit(limit)], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<i64>>>()?;
            drop(stmt);
            tx.commit()?;
            Ok(starts)
        };
        let op = || format!("listing the sealed instances of job {job:?} window {window:?}");
        let starts = read().map_err(sql_err(path, op()))?;
        Ok(starts.into_iter().map(Millis).collect())
    }
}

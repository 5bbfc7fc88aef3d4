//! The SQLite read API: windows, lists (header, the window's `k` and at most `k + 1` rows in
//! one read transaction), instances, dead letters and the last commit. What is read is checked
//! by [`crate::sql_rows`]; no statement reads more rows than a job may have written.
//!
//! A database older than version 3 (read as it is, see `open`) has no accuracy columns: its
//! lists are read as exact (the statements select constants in their place); one older than
//! version 6 has no certificate columns: its lists have none; one older than version 7 has no
//! dead-letter counts: every row is one whole letter. The version is read in each
//! list's transaction, so a reader sees a migration that happened after it opened.

use super::schema::{
    ACCURACY_VERSION, BOUNDED_DEAD_LETTERS_VERSION, CERTIFICATE_VERSION, GROUPS_VERSION, TREND_VERSION,
};
use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use crate::read_checks::RawAccuracy;
use crate::sql_rows::{self, RawDeadLetter, RawHeader, RawList, RawRow, RawTrend, RawWindow, WINDOW_ROW_LIMIT};
use crate::store::MAX_GROUPS_READ;
use crate::types::{SourcedDeadLetter, StoredList, StoredWindow};
use hotlist_operators::group::GroupKey;
use hotlist_operators::record::{ItemId, ListState};
use hotlist_operators::time::Millis;
use rusqlite::{params, OptionalExtension};

/// What a list read selects: the header's columns and the rows' accuracy columns, per schema.
struct ListColumns {
    /// `SELECT` of a header (the columns `RawHeader::from_columns` takes, then its accuracy)
    /// `FROM topk_instances`.
    header: &'static str,
    /// The accuracy columns of a `topk` row.
    row_accuracy: &'static str,
    /// The trend columns of a `topk` row (baseline, score, history).
    row_trend: &'static str,
}

/// A version-8 database's.
const COLUMNS: ListColumns = ListColumns {
    row_trend: "baseline, score, history",
    ..COLUMNS_BEFORE_TRENDS
};

/// A version-6 or 7 database's: no trend lists.
const COLUMNS_BEFORE_TRENDS: ListColumns = ListColumns {
    header: "SELECT window_start, window_end, revision, state, watermark, as_of, item_count, exact, error_bound, \
             sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount, \
             certificate_threshold, certificate_counted, certificate_passes FROM topk_instances",
    row_accuracy: "exact, error_bound",
    row_trend: "NULL, NULL, NULL",
};

/// A version-3 to 5 database's: no certificates.
const COLUMNS_BEFORE_CERTIFICATES: ListColumns = ListColumns {
    header: "SELECT window_start, window_end, revision, state, watermark, as_of, item_count, exact, error_bound, \
             sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount, NULL, NULL, NULL \
             FROM topk_instances",
    row_accuracy: "exact, error_bound",
    row_trend: "NULL, NULL, NULL",
};

/// An older database's: every list exact, no sketch check, no certificate.
const COLUMNS_BEFORE_ACCURACY: ListColumns = ListColumns {
    header: "SELECT window_start, window_end, revision, state, watermark, as_of, item_count, 1, 0, \
             NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM topk_instances",
    row_accuracy: "1, 0",
    row_trend: "NULL, NULL, NULL",
};

impl SqliteStore {
    /// The job's windows, in configured order.
    pub fn windows(&self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        let path = self.path.as_path();
        let raw = (|| -> rusqlite::Result<Vec<RawWindow>> {
            let tx = self.conn.unchecked_transaction()?;
            let by = if self.version(&tx)? >= GROUPS_VERSION {
                "by_dims"
            } else {
                "''"
            };
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT name, size_ms, slide_ms, k, {by} FROM hotlist_windows WHERE job = ?1 ORDER BY ord LIMIT ?2"
            ))?;
            let limit = sql_rows::sql_limit(WINDOW_ROW_LIMIT);
            let rows = stmt.query_map(params![job, limit], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?;
            let rows = rows.collect();
            drop(stmt);
            tx.commit()?;
            rows
        })()
        .map_err(sql_err(path, format!("reading the windows of job {job:?}")))?;
        sql_rows::windows(path, job, raw)
    }

    /// The stored global list of the window's instance with the greatest start, if any.
    pub fn latest(&self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, (window, &GroupKey::global()), None)
    }

    /// The stored global list of the window's instance starting at `start`, if any.
    pub fn instance(&self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, (window, &GroupKey::global()), Some(start))
    }

    /// The stored list of `group` in the latest instance that has one, if any.
    pub fn latest_of(&self, job: &str, window: &str, group: &GroupKey) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, (window, group), None)
    }

    /// The stored list of `group` in the window's instance starting at `start`, if any.
    pub fn instance_of(
        &self,
        job: &str,
        window: &str,
        group: &GroupKey,
        start: Millis,
    ) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, (window, group), Some(start))
    }

    /// The groups of the window's latest instance, in key order, with its start.
    pub fn groups(&self, job: &str, window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, SinkError> {
        let path = self.path.as_path();
        let read = || -> rusqlite::Result<Option<(i64, Vec<String>)>> {
            let tx = self.conn.unchecked_transaction()?;
            let group = if self.version(&tx)? >= GROUPS_VERSION {
                "group_key"
            } else {
                "''"
            };
            let latest: Option<i64> = tx
                .prepare_cached("SELECT MAX(window_start) FROM topk_instances WHERE job = ?1 AND window_name = ?2")?
                .query_row(params![job, window], |r| r.get(0))?;
            let Some(latest) = latest else {
                return Ok(None);
            };
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {group} FROM topk_instances WHERE job = ?1 AND window_name = ?2 AND window_start = ?3
                 ORDER BY 1 LIMIT ?4"
            ))?;
            let limit = sql_rows::sql_limit(MAX_GROUPS_READ);
            let groups = stmt
                .query_map(params![job, window, latest, limit], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?;
            drop(stmt);
            tx.commit()?;
            Ok(Some((latest, groups)))
        };
        let op = || format!("listing the groups of job {job:?} window {window:?}");
        let found = read().map_err(sql_err(path, op()))?;
        Ok(found.map(|(start, groups)| (Millis(start), groups.into_iter().map(GroupKey::from_stored).collect())))
    }

    /// The schema version, read inside `tx` (a reader sees a migration made after it opened).
    fn version(&self, tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<i64> {
        tx.pragma_query_value(None, "user_version", |r| r.get(0))
    }

    /// Every final list of the window as (instance start, group), earliest first (a database
    /// older than per-group lists: every list is global). For the restore drill, which
    /// compares a scratch store's lists with the live store's.
    pub fn final_lists(&self, job: &str, window: &str) -> Result<Vec<(Millis, GroupKey)>, SinkError> {
        let path = self.path.as_path();
        let raw = (|| -> rusqlite::Result<Vec<(i64, String)>> {
            let tx = self.conn.unchecked_transaction()?;
            let group = if self.version(&tx)? >= GROUPS_VERSION {
                "group_key"
            } else {
                "''"
            };
            let mut stmt = tx.prepare(&format!(
                "SELECT window_start, {group} FROM topk_instances
                 WHERE job = ?1 AND window_name = ?2 AND state = 'final' ORDER BY window_start, 2"
            ))?;
            let rows = stmt.query_map(params![job, window], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })()
        .map_err(sql_err(
            path,
            format!("listing the final lists of job {job:?} window {window:?}"),
        ))?;
        Ok(raw
            .into_iter()
            .map(|(start, group)| (Millis(start), GroupKey::from_stored(group)))
            .collect())
    }

    /// Every stored instance of the window as (start, revision, state), earliest first.
    pub fn instances(&self, job: &str, window: &str) -> Result<Vec<(Millis, u32, ListState)>, SinkError> {
        let path = self.path.as_path();
        let raw = (|| -> rusqlite::Result<Vec<(i64, i64, String)>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT window_start, revision, state FROM topk_instances
                 WHERE job = ?1 AND window_name = ?2 ORDER BY window_start",
            )?;
            let rows = stmt.query_map(params![job, window], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect()
        })()
        .map_err(sql_err(
            path,
            format!("listing the instances of job {job:?} window {window:?}"),
        ))?;
        raw.into_iter()
            .map(|(start, revision, state)| {
                let revision = sql_rows::revision(path, revision)?;
                Ok((Millis(start), revision, sql_rows::list_state(path, &state)?))
            })
            .collect()
    }

    /// The job's most recent dead letters, newest first, at most `limit`.
    pub fn dead_letters(&self, job: &str, limit: usize) -> Result<Vec<SourcedDeadLetter>, SinkError> {
        let path = self.path.as_path();
        let raw = (|| -> rusqlite::Result<Vec<RawDeadLetter>> {
            let tx = self.conn.unchecked_transaction()?;
            // before version 7 every row is one whole letter: literals stand in for the columns
            let counts = if self.version(&tx)? >= BOUNDED_DEAD_LETTERS_VERSION {
                "count, last_position"
            } else {
                "1, NULL"
            };
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT source, partition, position, reason, detail, raw, {counts} FROM dead_letters
                 WHERE job = ?1 ORDER BY id DESC LIMIT ?2"
            ))?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(params![job, limit], dead_letter_row)?;
            rows.collect()
        })()
        .map_err(sql_err(path, format!("reading the dead letters of job {job:?}")))?;
        raw.into_iter().map(|d| sql_rows::dead_letter(path, job, d)).collect()
    }

    /// How many dead letters the job has per reason (`"bad"`, `"late"`, `"sealed"`), by reason
    /// name; reasons without letters are left out.
    pub fn dead_letter_counts(&self, job: &str) -> Result<Vec<(String, u64)>, SinkError> {
        let path = self.path.as_path();
        let raw = (|| -> rusqlite::Result<Vec<(String, i64)>> {
            let tx = self.conn.unchecked_transaction()?;
            let count = if self.version(&tx)? >= BOUNDED_DEAD_LETTERS_VERSION {
                "SUM(count)"
            } else {
                "COUNT(*)"
            };
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT reason, {count} FROM dead_letters WHERE job = ?1
                 GROUP BY reason ORDER BY reason"
            ))?;
            let rows = stmt.query_map(params![job], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })()
        .map_err(sql_err(path, format!("counting the dead letters of job {job:?}")))?;
        raw.into_iter()
            .map(|row| sql_rows::reason_count(path, job, row))
            .collect()
    }

    /// The job's last commit as `(epoch, watermark)`.
    pub fn last_commit(&self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        let path = self.path.as_path();
        let row = self
            .conn
            .prepare_cached("SELECT epoch, watermark FROM hotlist_commits WHERE job = ?1")
            .and_then(|mut s| {
                s.query_row(params![job], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                    .optional()
            })
            .map_err(sql_err(path, format!("reading the last commit of job {job:?}")))?;
        row.map(|(epoch, wm)| sql_rows::commit(path, job, epoch, Millis(wm)))
            .transpose()
    }

    /// Reads one instance's header, its window's `k` and at most `k + 1` rows in one read
    /// transaction, and checks they agree.
    fn read_list(
        &self,
        job: &str,
        (window, group): (&str, &GroupKey),
        start: Option<Millis>,
    ) -> Result<Option<StoredList>, SinkError> {
        let path = self.path.as_path();
        let op = || match start {
            Some(s) => format!(
                "reading job {job:?} window {window:?} group {:?} instance {}",
                group.as_str(),
                s.0
            ),
            None => format!(
                "reading the latest list of job {job:?} window {window:?} group {:?}",
                group.as_str()
            ),
        };
        let read = || -> rusqlite::Result<Option<RawList<i64>>> {
            let tx = self.conn.unchecked_transaction()?;
            let version = self.version(&tx)?;
            let columns = if version >= TREND_VERSION {
                &COLUMNS
            } else if version >= CERTIFICATE_VERSION {
                &COLUMNS_BEFORE_TRENDS
            } else if version >= ACCURACY_VERSION {
                &COLUMNS_BEFORE_CERTIFICATES
            } else {
                &COLUMNS_BEFORE_ACCURACY
            };
            // before version 5 every list is global: the literal stands in for the column
            let group_col = if version >= GROUPS_VERSION { "group_key" } else { "''" };
            let Some(header) = read_header(&tx, columns, (job, window, group_col, group.as_str()), start)? else {
                return Ok(None);
            };
            let k: Option<i64> = tx
                .prepare_cached("SELECT k FROM hotlist_windows WHERE job = ?1 AND name = ?2")?
                .query_row(params![job, window], |r| r.get(0))
                .optional()?;
            let limit = sql_rows::row_limit(job, window, k);
            let rows = read_rows(
                &tx,
                columns,
                (job, window, group_col, group.as_str()),
                header.start,
                limit,
            )?;
            tx.commit()?;
            Ok(Some(RawList { header, k, rows, limit }))
        };
        let Some(list) = read().map_err(sql_err(path, op()))? else {
            return Ok(None);
        };
        sql_rows::stored_list(path, (job, window, group), list, Millis).map(Some)
    }
}

/// At most `limit` rows of the instance, in rank order, inside `tx`.
fn read_rows(
    tx: &rusqlite::Transaction<'_>,
    columns: &ListColumns,
    (job, window, group_col, group): (&str, &str, &str, &str),
    start: i64,
    limit: usize,
) -> rusqlite::Result<Vec<RawRow>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT rank, item_id, count, revision, {}, {} FROM topk
         WHERE job = ?1 AND window_name = ?2 AND window_start = ?3 AND {group_col} = ?5 ORDER BY rank LIMIT ?4",
        columns.row_accuracy, columns.row_trend
    ))?;
    let mut q = stmt.query(params![job, window, start, sql_rows::sql_limit(limit), group])?;
    let mut rows = Vec::new();
    while let Some(r) = q.next()? {
        let item = r
            .get_ref(1)?
            .as_str()
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e)))?;
        rows.push((
            r.get(0)?,
            ItemId::from(item),
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            RawTrend::from_columns(r.get(6)?, r.get(7)?, r.get(8)?),
        ));
    }
    Ok(rows)
}

/// The header of the instance at `start` (the latest one if `None`), inside `tx`.
fn read_header(
    tx: &rusqlite::Transaction<'_>,
    columns: &ListColumns,
    (job, window, group_col, group): (&str, &str, &str, &str),
    start: Option<Millis>,
) -> rusqlite::Result<Option<RawHeader<i64>>> {
    let header_of = |r: &rusqlite::Row<'_>| {
        let accuracy = RawAccuracy {
            exact: r.get(7)?,
            error_bound: r.get(8)?,
            sketch: [r.get(9)?, r.get(10)?, r.get(11)?, r.get(12)?],
            certificate: [r.get(13)?, r.get(14)?, r.get(15)?],
        };
        Ok(RawHeader::from_columns(r.try_into()?, accuracy))
    };
    let header_columns = columns.header;
    match start {
        Some(s) => tx
            .prepare_cached(&format!(
                "{header_columns} WHERE job = ?1 AND window_name = ?2 AND window_start = ?3 AND {group_col} = ?4"
            ))?
            .query_row(params![job, window, s.0, group], header_of)
            .optional(),
        None => tx
            .prepare_cached(&format!(
                "{header_columns} WHERE job = ?1 AND window_name = ?2 AND {group_col} = ?3
                 ORDER BY window_start DESC LIMIT 1"
            ))?
            .query_row(params![job, window, group], header_of)
            .optional(),
    }
}

/// A `dead_letters` row selected as `source, partition, position, reason, detail, raw, count,
/// last_position`.
pub(super) fn dead_letter_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawDeadLetter> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

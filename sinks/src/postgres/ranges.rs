//! Sealed instances' input ranges in PostgreSQL (schema version 9): the same `instance_ranges`
//! table as SQLite's, with `timestamptz` instants, upserted in the commit transaction in one
//! statement over `unnest`ed arrays (a later commit's ranges of an instance replace its row),
//! read back checked (`crate::ranges`) in one `REPEATABLE READ READ ONLY` transaction. The
//! statements run unprepared, as the hot-key tables' do: a reader opened on an older schema
//! cannot prepare them, and it reads none (`None`, no instances) until the job migrated.

use super::client::{Queries, Transaction};
use super::encode::{from_pg, pg_text, pg_time, to_pg, PgTime};
use super::schema::RANGES_VERSION;
use super::PostgresStore;
use crate::error::SinkError;
use crate::ranges::{from_columns, latest_ranges, ranges_columns};
use crate::read_checks::ListAt;
use crate::sql_rows;
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::time::Millis;
use postgres::types::ToSql;
use postgres::IsolationLevel;

/// Every instance's ranges, given as arrays; one row per instance (`latest_ranges`).
const UPSERT_RANGES: &str = "
INSERT INTO instance_ranges (job, window_name, window_start, window_end, ranges, unreadable)
SELECT $1::text, * FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[])
ON CONFLICT (job, window_name, window_start) DO UPDATE SET
    window_end = excluded.window_end, ranges = excluded.ranges, unreadable = excluded.unreadable";

const SELECT_RANGES: &str = "
SELECT window_end, ranges, unreadable FROM instance_ranges
WHERE job = $1 AND window_name = $2 AND window_start = $3";

/// At most `$4` starts at or after `$3`, ascending: one range scan of the primary key.
const SELECT_STARTS: &str = "
SELECT window_start FROM instance_ranges
WHERE job = $1 AND window_name = $2 AND window_start >= $3 ORDER BY window_start LIMIT $4";

/// A batch's ranges as the column arrays [`UPSERT_RANGES`] binds, one entry per instance.
#[derive(Default)]
pub(super) struct RangeColumns<'a> {
    window: Vec<&'a str>,
    start: Vec<PgTime>,
    end: Vec<PgTime>,
    ranges: Vec<Option<String>>,
    unreadable: Vec<Option<String>>,
}

impl<'a> RangeColumns<'a> {
    /// Converts the checked ranges of a batch (the last of an instance's), rejecting what
    /// PostgreSQL cannot hold; U+0000 in a (human-readable) reason becomes U+FFFD.
    pub(super) fn of(job: &str, ranges: &'a [SealedRanges]) -> Result<RangeColumns<'a>, SinkError> {
        let mut c = RangeColumns::default();
        for r in latest_ranges(ranges) {
            let at = || format!("ranges {:?}@{}", r.window, r.start.0);
            pg_text(job, &r.window, || "window name".into())?;
            c.start.push(pg_time(job, r.start, || format!("{}: start", at()))?);
            c.end.push(pg_time(job, r.end, || format!("{}: end", at()))?);
            c.window.push(&r.window);
            let (json, unreadable) = ranges_columns(r);
            c.ranges.push(json);
            c.unreadable.push(unreadable.map(|u| u.replace('\0', "\u{FFFD}")));
        }
        Ok(c)
    }
}

/// Upserts the batch's ranges (as `c`) inside the commit transaction.
pub(super) fn write_ranges(tx: &mut Transaction<'_>, job: &str, c: &RangeColumns<'_>) -> Result<(), postgres::Error> {
    if c.window.is_empty() {
        return Ok(());
    }
    let params: [&(dyn ToSql + Sync); 6] = [&job, &c.window, &c.start, &c.end, &c.ranges, &c.unreadable];
    tx.execute(UPSERT_RANGES, &params)?;
    Ok(())
}

/// A row as read: `window_end`, `ranges`, `unreadable`.
type RangesRow = (PgTime, Option<String>, Option<String>);

/// Whether the schema has the ranges table, read inside `tx` (a reader opened on an older
/// schema sees the job's migration).
fn has_ranges(tx: &mut Transaction<'_>) -> Result<bool, postgres::Error> {
    let version: Option<i64> = tx
        .query_opt("SELECT version FROM hotlist_schema", &[])?
        .map(|r| r.try_get(0))
        .transpose()?;
    Ok(version.is_some_and(|v| v >= RANGES_VERSION))
}

impl PostgresStore {
    /// The instance's ranges (see `StoreReader::sealed_ranges`).
    pub(super) fn read_sealed_ranges(
        &mut self,
        job: &str,
        window: &str,
        start: Millis,
    ) -> Result<Option<SealedRanges>, SinkError> {
        // An instant PostgreSQL cannot hold is never stored.
        let Some(at_start) = to_pg(start) else { return Ok(None) };
        let op = || {
            format!(
                "reading the ranges of job {job:?} window {window:?} instance {}",
                start.0
            )
        };
        let row = self.run(op, |c, _| -> Result<Option<RangesRow>, postgres::Error> {
            let mut tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            if !has_ranges(&mut tx)? {
                tx.commit()?;
                return Ok(None);
            }
            let row = tx.query_opt(SELECT_RANGES, &[&job, &window, &at_start])?;
            tx.commit()?;
            row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                .transpose()
        })?;
        let Some((end, ranges, unreadable)) = row else {
            return Ok(None);
        };
        let at = ListAt { job, window, start };
        from_columns(&at, from_pg(end), ranges, unreadable)
            .map(Some)
            .map_err(|d| SinkError::corrupt(self.loc(), d))
    }

    /// The starts of the window's instances with ranges (see `StoreReader::sealed_instances`).
    pub(super) fn read_sealed_instances(
        &mut self,
        job: &str,
        window: &str,
        since: Millis,
        limit: usize,
    ) -> Result<Vec<Millis>, SinkError> {
        // before PostgreSQL's range: every stored start is at or after it
        let since = super::encode::pg_watermark(since);
        let limit = sql_rows::sql_limit(limit);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let starts = self.run(
            || format!("listing the sealed instances of job {job:?} window {window:?}"),
            |c, _| -> Result<Vec<PgTime>, postgres::Error> {
                let mut tx = c
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()?;
                if !has_ranges(&mut tx)? {
                    tx.commit()?;
                    return Ok(Vec::new());
                }
                let rows = tx.query(SELECT_STARTS, &[&job, &window, &since, &limit])?;
                tx.commit()?;
                rows.iter().map(|r| r.try_get(0)).collect()
            },
        )?;
        Ok(starts.into_iter().map(from_pg).collect())
    }
}

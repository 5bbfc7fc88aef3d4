//! The PostgreSQL read API: windows, lists (header, the window's `k` and at most `k + 1` rows
//! in one `REPEATABLE READ READ ONLY` transaction), instances, dead letters and the last
//! commit. Each call reads the columns in one go (reconnecting first if the connection was
//! lost), then [`crate::sql_rows`] checks them; no statement reads more rows than a job may
//! have written. A reader opened on a schema older than version 8 reads the version with each
//! list: before the job migrates it, every list is count-ranked (NULL trend columns); one
//! opened on a version-6 schema reads the version with each dead-letter read: before the job
//! migrates it, every row is one whole letter.

use super::client::{Client, Queries, Transaction};
use super::encode::{from_pg, to_pg, PgTime};
use super::schema::{BOUNDED_DEAD_LETTERS_VERSION, TREND_VERSION};
use super::statements::{
    Statements, SELECT_DEAD_LETTERS, SELECT_DEAD_LETTERS_BEFORE_COUNTS, SELECT_DEAD_LETTER_COUNTS,
    SELECT_DEAD_LETTER_COUNTS_BEFORE_COUNTS, SELECT_ROWS, SELECT_ROWS_BEFORE_TRENDS,
};
use super::PostgresStore;
use crate::error::SinkError;
use crate::read_checks::RawAccuracy;
use crate::sql_rows::{self, RawDeadLetter, RawHeader, RawList, RawTrend, RawWindow, WINDOW_ROW_LIMIT};
use crate::store::{StoreReader, MAX_GROUPS_READ};
use crate::types::{SourcedDeadLetter, StoredList, StoredWindow};
use hotlist_operators::group::GroupKey;
use hotlist_operators::record::{ItemId, ListState};
use hotlist_operators::time::Millis;
use postgres::types::{FromSql, ToSql};
use postgres::{IsolationLevel, Row, Statement};

impl StoreReader for PostgresStore {
    fn dead_letters_containing(
        &mut self,
        job: &str,
        reasons: &[hotlist_operators::record::DeadReason],
        needle: &[u8],
        limit: usize,
    ) -> Result<Option<Vec<crate::types::SourcedDeadLetter>>, SinkError> {
        self.search_dead_letters(job, reasons, needle, limit).map(Some)
    }

    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        let raw: Vec<RawWindow> = self.run(
            || format!("reading the windows of job {job:?}"),
            |c, s| {
                let limit = sql_rows::sql_limit(WINDOW_ROW_LIMIT);
                let rows = c.query(&s.select_windows, &[&job, &limit])?;
                rows.iter().map(columns).collect()
            },
        )?;
        sql_rows::windows(self.loc(), job, raw)
    }

    fn latest_of(&mut self, job: &str, window: &str, group: &GroupKey) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, (window, group), None)
    }

    fn instance_of(
        &mut self,
        job: &str,
        window: &str,
        group: &GroupKey,
        start: Millis,
    ) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, (window, group), Some(start))
    }

    fn groups(&mut self, job: &str, window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, SinkError> {
        let limit = sql_rows::sql_limit(MAX_GROUPS_READ);
        let found: Option<(PgTime, Vec<String>)> = self.run(
            || format!("listing the groups of job {job:?} window {window:?}"),
            |c, s| {
                let mut tx = c
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()?;
                let latest: Option<PgTime> = tx.query_one(&s.select_latest_start, &[&job, &window])?.try_get(0)?;
                let Some(latest) = latest else {
                    tx.commit()?;
                    return Ok(None);
                };
                let rows = tx.query(&s.select_groups, &[&job, &window, &latest, &limit])?;
                tx.commit()?;
                let groups = rows.iter().map(|r| r.try_get(0)).collect::<Result<Vec<String>, _>>()?;
                Ok(Some((latest, groups)))
            },
        )?;
        Ok(found.map(|(start, groups)| (from_pg(start), groups.into_iter().map(GroupKey::from_stored).collect())))
    }

    fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        let raw: Option<(i64, PgTime)> = self.run(
            || format!("reading the last commit of job {job:?}"),
            |c, s| {
                c.query_opt(&s.select_last_commit, &[&job])?
                    .as_ref()
                    .map(columns)
                    .transpose()
            },
        )?;
        raw.map(|(epoch, watermark)| sql_rows::commit(self.loc(), job, epoch, from_pg(watermark)))
            .transpose()
    }

    fn hot_keys(&mut self, job: &str) -> Result<Option<hotlist_operators::hot_keys::HotWindow>, SinkError> {
        PostgresStore::hot_keys(self, job)
    }

    fn sealed_ranges(
        &mut self,
        job: &str,
        window: &str,
        start: Millis,
    ) -> Result<Option<hotlist_operators::replay::SealedRanges>, SinkError> {
        self.read_sealed_ranges(job, window, start)
    }

    fn sealed_instances(
        &mut self,
        job: &str,
        window: &str,
        since: Millis,
        limit: usize,
    ) -> Result<Vec<Millis>, SinkError> {
        self.read_sealed_instances(job, window, since, limit)
    }
}

impl PostgresStore {
    /// Every stored instance of the window as (start, revision, state), earliest first.
    pub fn instances(&mut self, job: &str, window: &str) -> Result<Vec<(Millis, u32, ListState)>, SinkError> {
        let raw: Vec<(PgTime, i64, String)> = self.run(
            || format!("listing the instances of job {job:?} window {window:?}"),
            |c, s| {
                let rows = c.query(&s.select_instances, &[&job, &window])?;
                rows.iter().map(columns).collect()
            },
        )?;
        raw.into_iter()
            .map(|(start, revision, state)| {
                let revision = sql_rows::revision(self.loc(), revision)?;
                Ok((from_pg(start), revision, sql_rows::list_state(self.loc(), &state)?))
            })
            .collect()
    }

    /// The job's most recent dead letters, newest first, at most `limit`.
    pub fn dead_letters(&mut self, job: &str, limit: usize) -> Result<Vec<SourcedDeadLetter>, SinkError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let raw: Vec<RawDeadLetter> = self.run(
            || format!("reading the dead letters of job {job:?}"),
            |c, s| {
                let rows = counted_query(c, &s.select_dead_letters, DEAD_LETTERS, &[&job, &limit])?;
                rows.iter().map(columns).collect()
            },
        )?;
        raw.into_iter()
            .map(|d| sql_rows::dead_letter(self.loc(), job, d))
            .collect()
    }

    /// How many dead letters the job has per reason (`"bad"`, `"late"`, `"sealed"`), by reason
    /// name; reasons without letters are left out.
    pub fn dead_letter_counts(&mut self, job: &str) -> Result<Vec<(String, u64)>, SinkError> {
        let raw: Vec<(String, i64)> = self.run(
            || format!("counting the dead letters of job {job:?}"),
            |c, s| {
                let rows = counted_query(c, &s.select_dead_letter_counts, DEAD_LETTER_COUNTS, &[&job])?;
                rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
            },
        )?;
        raw.into_iter()
            .map(|row| sql_rows::reason_count(self.loc(), job, row))
            .collect()
    }

    /// Reads one instance's header, its window's `k` and at most `k + 1` rows in one read-only
    /// REPEATABLE READ transaction, and checks they agree.
    fn read_list(
        &mut self,
        job: &str,
        (window, group): (&str, &GroupKey),
        start: Option<Millis>,
    ) -> Result<Option<StoredList>, SinkError> {
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
        let group_key = group.as_str();
        let start = match start {
            // An instant PostgreSQL cannot hold is never stored.
            Some(s) => match to_pg(s) {
                Some(t) => Some(t),
                None => return Ok(None),
            },
            None => None,
        };
        let list = self.run(op, |c, s| -> Result<Option<RawList<PgTime>>, _> {
            let mut tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let header = match &start {
                Some(t) => tx.query_opt(&s.select_header_at, &[&job, &window, t, &group_key])?,
                None => tx.query_opt(&s.select_latest_header, &[&job, &window, &group_key])?,
            };
            let Some(header) = header else {
                tx.commit()?;
                return Ok(None);
            };
            let header: RawHeader<PgTime> = RawHeader::from_columns(columns(&header)?, accuracy(&header)?);
            let k: Option<i64> = tx
                .query_opt(&s.select_window_k, &[&job, &window])?
                .map(|r| r.try_get(0))
                .transpose()?;
            let limit = sql_rows::row_limit(job, window, k);
            let params: [&(dyn ToSql + Sync); 5] =
                [&job, &window, &header.start, &sql_rows::sql_limit(limit), &group_key];
            let found = select_rows(&mut tx, s, &params)?;
            tx.commit()?;
            let mut rows = Vec::with_capacity(found.len());
            for r in &found {
                let item: &str = r.try_get(1)?;
                let exact: bool = r.try_get(4)?;
                rows.push((
                    r.try_get(0)?,
                    ItemId::from(item),
                    r.try_get(2)?,
                    r.try_get(3)?,
                    i64::from(exact),
                    r.try_get(5)?,
                    RawTrend::from_columns(r.try_get(6)?, r.try_get(7)?, r.try_get(8)?),
                ));
            }
            Ok(Some(RawList { header, k, rows, limit }))
        })?;
        let Some(list) = list else {
            return Ok(None);
        };
        sql_rows::stored_list(self.loc(), (job, window, group), list, from_pg).map(Some)
    }
}

/// A list's rows with their trend columns (`params` as [`SELECT_ROWS`] takes them), in `tx`:
/// through the prepared statement, or on a handle opened on a schema older than
/// [`TREND_VERSION`] (which cannot prepare it) the text for the version the schema has now (the
/// job may have migrated it since): NULL trend columns before.
fn select_rows(
    tx: &mut Transaction<'_>,
    s: &Statements,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, postgres::Error> {
    if let Some(select_rows) = &s.select_rows {
        return tx.query(select_rows, params);
    }
    let version: i64 = tx.query_one("SELECT version FROM hotlist_schema", &[])?.try_get(0)?;
    let sql = if version >= TREND_VERSION {
        SELECT_ROWS
    } else {
        SELECT_ROWS_BEFORE_TRENDS
    };
    tx.query(sql, params)
}

/// A dead-letter read's texts: for a schema with the dead-letter counts, and before them.
type Texts = (&'static str, &'static str);

/// [`SELECT_DEAD_LETTERS`]'s texts.
const DEAD_LETTERS: Texts = (SELECT_DEAD_LETTERS, SELECT_DEAD_LETTERS_BEFORE_COUNTS);

/// [`SELECT_DEAD_LETTER_COUNTS`]'s texts.
const DEAD_LETTER_COUNTS: Texts = (SELECT_DEAD_LETTER_COUNTS, SELECT_DEAD_LETTER_COUNTS_BEFORE_COUNTS);

/// A dead-letter read: through the prepared statement, or on a handle opened on a schema
/// older than [`BOUNDED_DEAD_LETTERS_VERSION`] (which cannot prepare it) the text for the
/// version the schema has now, read in the same transaction (the job may have migrated it
/// since): every row one whole letter before.
fn counted_query(
    c: &mut Client,
    prepared: &Option<Statement>,
    (counted, before): Texts,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, postgres::Error> {
    if let Some(prepared) = prepared {
        return c.query(prepared, params);
    }
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let version: i64 = tx.query_one("SELECT version FROM hotlist_schema", &[])?.try_get(0)?;
    let sql = if version >= BOUNDED_DEAD_LETTERS_VERSION {
        counted
    } else {
        before
    };
    let rows = tx.query(sql, params)?;
    tx.commit()?;
    Ok(rows)
}

/// A header's accuracy: its columns after the first seven (`exact`, `error_bound`, the sketch
/// check's four and the certificate's three, NULL when there is none).
fn accuracy(r: &Row) -> Result<RawAccuracy, postgres::Error> {
    let exact: bool = r.try_get(7)?;
    Ok(RawAccuracy {
        exact: i64::from(exact),
        error_bound: r.try_get(8)?,
        sketch: [r.try_get(9)?, r.try_get(10)?, r.try_get(11)?, r.try_get(12)?],
        certificate: [r.try_get(13)?, r.try_get(14)?, r.try_get(15)?],
    })
}

/// A row's columns, in order, as a tuple (what rusqlite offers as `TryFrom<&Row>`).
pub(super) trait FromColumns: Sized {
    /// The first columns of `r`, as many as the tuple has.
    fn from_columns(r: &Row) -> Result<Self, postgres::Error>;
}

macro_rules! tuple_from_columns {
    ($($t:ident $i:tt),+) => {
        impl<$($t: for<'a> FromSql<'a>),+> FromColumns for ($($t,)+) {
            fn from_columns(r: &Row) -> Result<Self, postgres::Error> {
                Ok(($(r.try_get::<_, $t>($i)?,)+))
            }
        }
    };
}
tuple_from_columns!(A 0, B 1);
tuple_from_columns!(A 0, B 1, C 2);
tuple_from_columns!(A 0, B 1, C 2, D 3);
tuple_from_columns!(A 0, B 1, C 2, D 3, E 4);
tuple_from_columns!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_from_columns!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_from_columns!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// The row's columns as a tuple of the types asked for.
pub(super) fn columns<T: FromColumns>(r: &Row) -> Result<T, postgres::Error> {
    T::from_columns(r)
}

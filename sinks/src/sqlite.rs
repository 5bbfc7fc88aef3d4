//! `SqliteStore`: the SQLite sink. One database file holds the latest revision of every window
//! instance's list (`topk` rows under a `topk_instances` header), the dead letters, the jobs'
//! window definitions and their committed epochs.
//!
//! The file is in WAL mode: one writer (the job) commits one transaction per batch while any
//! number of readers (`hotlist query`, the HTTP API) read consistent snapshots. Every list read
//! (header and rows) happens in one read transaction, so it never mixes revisions.
//!
//! Times are INTEGER milliseconds since the Unix epoch; `rank` starts at 1.

use crate::error::SinkError;
use crate::store::SinkStore;
use crate::types::{
    check_batch, check_prepare, latest_revisions, parse_reason, CommitBatch, SourcedDeadLetter, StoredList,
    StoredWindow,
};
use hotlist_operators::record::{DeadLetter, ItemId, ListState, PartitionId, RankedItem};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// How long a connection waits for a lock before failing with a (retryable) busy error.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The tables; every statement is idempotent.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS topk (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    rank         INTEGER NOT NULL CHECK (rank >= 1),
    item_id      TEXT    NOT NULL,
    count        INTEGER NOT NULL CHECK (count >= 0),
    revision     INTEGER NOT NULL,
    final        INTEGER NOT NULL CHECK (final IN (0, 1)),
    state        TEXT    NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    as_of        INTEGER NOT NULL,
    PRIMARY KEY (job, window_name, window_start, rank)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS topk_instances (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    revision     INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    final        INTEGER NOT NULL CHECK (final IN (0, 1)),
    watermark    INTEGER NOT NULL,
    as_of        INTEGER NOT NULL,
    item_count   INTEGER NOT NULL CHECK (item_count >= 0),
    PRIMARY KEY (job, window_name, window_start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dead_letters (
    id          INTEGER PRIMARY KEY,
    job         TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    position    INTEGER NOT NULL,
    reason      TEXT    NOT NULL CHECK (reason IN ('bad', 'late', 'sealed')),
    detail      TEXT    NOT NULL,
    raw         BLOB    NOT NULL,
    epoch       INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
CREATE TABLE IF NOT EXISTS hotlist_windows (
    job      TEXT    NOT NULL,
    name     TEXT    NOT NULL,
    size_ms  INTEGER NOT NULL,
    slide_ms INTEGER NOT NULL,
    k        INTEGER NOT NULL,
    ord      INTEGER NOT NULL,
    PRIMARY KEY (job, name)
);
CREATE TABLE IF NOT EXISTS hotlist_commits (
    job          TEXT    NOT NULL PRIMARY KEY,
    epoch        INTEGER NOT NULL,
    watermark    INTEGER NOT NULL,
    committed_at INTEGER NOT NULL
);
";

const UPSERT_INSTANCE: &str = "
INSERT INTO topk_instances
    (job, window_name, window_start, window_end, revision, state, final, watermark, as_of, item_count)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
ON CONFLICT (job, window_name, window_start) DO UPDATE SET
    window_end = excluded.window_end, revision = excluded.revision, state = excluded.state,
    final = excluded.final, watermark = excluded.watermark, as_of = excluded.as_of,
    item_count = excluded.item_count";

/// Rows per multi-row insert statement: binding 3 values per row instead of 11 and stepping
/// one statement per chunk roughly doubles the write rate for large lists.
const ROWS_PER_INSERT: usize = 64;

/// `INSERT INTO topk` of `n` ranks of one instance: ?1..?8 are the instance's columns, then
/// (rank, item_id, count) per row.
fn insert_rows_sql(n: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO topk (job, window_name, window_start, window_end, revision, final, state,
                           as_of, rank, item_id, count)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, column1, column2, column3 FROM (VALUES ",
    );
    for i in 0..n {
        let b = 9 + 3 * i;
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("(?{}, ?{}, ?{})", b, b + 1, b + 2));
    }
    sql.push(')');
    sql
}

/// Chunk sizes, largest first: a list is written in as few statements as possible.
const CHUNKS: [usize; 3] = [ROWS_PER_INSERT, 8, 1];

static INSERT_ROWS_SQL: LazyLock<[String; 3]> = LazyLock::new(|| CHUNKS.map(insert_rows_sql));

const DELETE_ROWS: &str = "DELETE FROM topk WHERE job = ?1 AND window_name = ?2 AND window_start = ?3";

const INSERT_DEAD_LETTER: &str = "
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

const UPSERT_COMMIT: &str = "
INSERT INTO hotlist_commits (job, epoch, watermark, committed_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (job) DO UPDATE SET
    epoch = excluded.epoch, watermark = excluded.watermark, committed_at = excluded.committed_at";

const SELECT_EPOCH: &str = "SELECT epoch FROM hotlist_commits WHERE job = ?1";

const HEADER_COLUMNS: &str =
    "SELECT window_start, window_end, revision, state, watermark, as_of, item_count FROM topk_instances";

/// A hotlist SQLite database: the job's sink (`open`) or a reader's view (`open_read_only`).
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    read_only: bool,
}

/// An instance header as stored, before validation.
struct RawHeader {
    start: i64,
    end: i64,
    revision: i64,
    state: String,
    watermark: i64,
    as_of: i64,
    item_count: i64,
}

fn sql_err(path: &Path, op: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> SinkError {
    let path = path.to_path_buf();
    let op = op.into();
    move |source| SinkError::Sqlite { path, op, source }
}

fn corrupt(path: &Path, detail: String) -> SinkError {
    SinkError::Corrupt {
        path: path.to_path_buf(),
        detail,
    }
}

fn non_negative(path: &Path, value: i64, what: &str) -> Result<u64, SinkError> {
    u64::try_from(value).map_err(|_| corrupt(path, format!("{what} is negative ({value})")))
}

fn parse_state(path: &Path, s: &str) -> Result<ListState, SinkError> {
    ListState::parse(s).ok_or_else(|| corrupt(path, format!("unknown list state {s:?}")))
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `path` for writing: WAL mode,
    /// `synchronous=NORMAL`, a 5 s busy timeout, tables created if missing. The parent directory
    /// must exist.
    pub fn open(path: &Path) -> Result<SqliteStore, SinkError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            match std::fs::metadata(parent) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(SinkError::MissingParent {
                        path: path.to_path_buf(),
                        parent: parent.to_path_buf(),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(SinkError::MissingParent {
                        path: path.to_path_buf(),
                        parent: parent.to_path_buf(),
                    })
                }
                Err(source) => {
                    return Err(SinkError::Io {
                        path: parent.to_path_buf(),
                        op: "checking the database directory".into(),
                        source,
                    })
                }
            }
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(sql_err(path, "opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_err(path, "setting the busy timeout"))?;
        // Switching a new database to WAL takes an exclusive lock without waiting in the busy
        // handler: processes opening it at once (a cluster's) retry here instead of failing.
        let started = std::time::Instant::now();
        let mode: String = loop {
            match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)) {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                other => break other.map_err(sql_err(path, "switching to WAL mode"))?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(SinkError::Schema {
                path: path.to_path_buf(),
                detail: format!("cannot use WAL journal mode (sqlite chose {mode:?})"),
            });
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql_err(path, "setting synchronous=NORMAL"))?;
        conn.set_prepared_statement_cache_capacity(32);
        let mut store = SqliteStore {
            conn,
            path: path.to_path_buf(),
            read_only: false,
        };
        store.ensure_schema()?;
        Ok(store)
    }

    /// Opens an existing database for reading only. Fails with [`SinkError::NoDatabase`] if
    /// the file does not exist and [`SinkError::Schema`] if it is not a hotlist database.
    pub fn open_read_only(path: &Path) -> Result<SqliteStore, SinkError> {
        match path.try_exists() {
            Ok(true) => {}
            Ok(false) => {
                return Err(SinkError::NoDatabase {
                    path: path.to_path_buf(),
                })
            }
            Err(source) => {
                return Err(SinkError::Io {
                    path: path.to_path_buf(),
                    op: "looking for the database".into(),
                    source,
                })
            }
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(sql_err(path, "opening read-only"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_err(path, "setting the busy timeout"))?;
        conn.set_prepared_statement_cache_capacity(32);
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql_err(path, "reading the schema version"))?;
        if version != SCHEMA_VERSION {
            let detail = if version == 0 {
                "it has no hotlist tables (schema version 0)".to_string()
            } else {
                format!("schema version {version}, this build reads version {SCHEMA_VERSION}")
            };
            return Err(SinkError::Schema {
                path: path.to_path_buf(),
                detail,
            });
        }
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
            read_only: true,
        })
    }

    /// The database path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn writable(&self, op: &'static str) -> Result<(), SinkError> {
        if self.read_only {
            return Err(SinkError::ReadOnly {
                path: self.path.clone(),
                op,
            });
        }
        Ok(())
    }

    /// Creates the tables if missing and stamps the schema version, in one transaction.
    fn ensure_schema(&mut self) -> Result<(), SinkError> {
        let path = self.path.as_path();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, "starting the schema transaction"))?;
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql_err(path, "reading the schema version"))?;
        if version > SCHEMA_VERSION {
            return Err(SinkError::Schema {
                path: path.to_path_buf(),
                detail: format!("schema version {version} is newer than this build's ({SCHEMA_VERSION})"),
            });
        }
        tx.execute_batch(SCHEMA).map_err(sql_err(path, "creating the tables"))?;
        if version < SCHEMA_VERSION {
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(sql_err(path, "setting the schema version"))?;
        }
        tx.commit().map_err(sql_err(path, "committing the schema"))
    }

    /// The job's windows, in configured order.
    pub fn windows(&self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        let path = self.path.as_path();
        let op = || format!("reading the windows of job {job:?}");
        let raw = (|| -> rusqlite::Result<Vec<(String, i64, i64, i64)>> {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT name, size_ms, slide_ms, k FROM hotlist_windows WHERE job = ?1 ORDER BY ord")?;
            let rows = stmt.query_map(params![job], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
            rows.collect()
        })()
        .map_err(sql_err(path, op()))?;
        raw.into_iter()
            .map(|(name, size, slide, k)| {
                let what = |c: &str| format!("window {name:?} {c}");
                let size = non_negative(path, size, &what("size"))?;
                let slide = non_negative(path, slide, &what("slide"))?;
                let k = usize::try_from(non_negative(path, k, &what("k"))?)
                    .map_err(|_| corrupt(path, what("k is too large")))?;
                Ok(StoredWindow {
                    name,
                    size: Span::from_millis(size),
                    slide: Span::from_millis(slide),
                    k,
                })
            })
            .collect()
    }

    /// The stored list of the window's instance with the greatest start, if any.
    pub fn latest(&self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, window, None)
    }

    /// The stored list of the window's instance starting at `start`, if any.
    pub fn instance(&self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, window, Some(start))
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
                let revision =
                    u32::try_from(revision).map_err(|_| corrupt(path, format!("revision {revision} out of range")))?;
                Ok((Millis(start), revision, parse_state(path, &state)?))
            })
            .collect()
    }

    /// The job's most recent dead letters, newest first, at most `limit`.
    pub fn dead_letters(&self, job: &str, limit: usize) -> Result<Vec<SourcedDeadLetter>, SinkError> {
        let path = self.path.as_path();
        type Raw = (String, i64, i64, String, String, Vec<u8>);
        let raw = (|| -> rusqlite::Result<Vec<Raw>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT source, partition, position, reason, detail, raw FROM dead_letters
                 WHERE job = ?1 ORDER BY id DESC LIMIT ?2",
            )?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(params![job, limit], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
            })?;
            rows.collect()
        })()
        .map_err(sql_err(path, format!("reading the dead letters of job {job:?}")))?;
        raw.into_iter()
            .map(|(source, partition, position, reason, detail, raw)| {
                let partition = u32::try_from(partition)
                    .map_err(|_| corrupt(path, format!("dead letter partition {partition} out of range")))?;
                let position = non_negative(path, position, "dead letter position")?;
                let reason = parse_reason(&reason)
                    .ok_or_else(|| corrupt(path, format!("unknown dead letter reason {reason:?}")))?;
                Ok(SourcedDeadLetter {
                    source,
                    letter: DeadLetter {
                        partition: PartitionId(partition),
                        position,
                        raw,
                        reason,
                        detail,
                    },
                })
            })
            .collect()
    }

    /// How many dead letters the job has per reason (`"bad"`, `"late"`, `"sealed"`), by reason
    /// name; reasons without letters are left out.
    pub fn dead_letter_counts(&self, job: &str) -> Result<Vec<(String, u64)>, SinkError> {
        let path = self.path.as_path();
        let raw = (|| -> rusqlite::Result<Vec<(String, i64)>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT reason, COUNT(*) FROM dead_letters WHERE job = ?1
                 GROUP BY reason ORDER BY reason",
            )?;
            let rows = stmt.query_map(params![job], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })()
        .map_err(sql_err(path, format!("counting the dead letters of job {job:?}")))?;
        raw.into_iter()
            .map(|(reason, n)| Ok((reason, non_negative(path, n, "count")?)))
            .collect()
    }

    /// Reads one instance's header and rows in one read transaction and checks they agree.
    fn read_list(&self, job: &str, window: &str, start: Option<Millis>) -> Result<Option<StoredList>, SinkError> {
        let path = self.path.as_path();
        let op = || match start {
            Some(s) => format!("reading job {job:?} window {window:?} instance {}", s.0),
            None => format!("reading the latest list of job {job:?} window {window:?}"),
        };
        type Rows = Vec<(i64, ItemId, i64, i64)>;
        let read = || -> rusqlite::Result<Option<(RawHeader, Rows)>> {
            let tx = self.conn.unchecked_transaction()?;
            let header = {
                let header_of = |r: &rusqlite::Row<'_>| {
                    Ok(RawHeader {
                        start: r.get(0)?,
                        end: r.get(1)?,
                        revision: r.get(2)?,
                        state: r.get(3)?,
                        watermark: r.get(4)?,
                        as_of: r.get(5)?,
                        item_count: r.get(6)?,
                    })
                };
                match start {
                    Some(s) => tx
                        .prepare_cached(&format!(
                            "{HEADER_COLUMNS} WHERE job = ?1 AND window_name = ?2 AND window_start = ?3"
                        ))?
                        .query_row(params![job, window, s.0], header_of)
                        .optional()?,
                    None => tx
                        .prepare_cached(&format!(
                            "{HEADER_COLUMNS} WHERE job = ?1 AND window_name = ?2
                             ORDER BY window_start DESC LIMIT 1"
                        ))?
                        .query_row(params![job, window], header_of)
                        .optional()?,
                }
            };
            let Some(header) = header else {
                return Ok(None);
            };
            let mut rows = Vec::with_capacity(usize::try_from(header.item_count).unwrap_or(0));
            {
                let mut stmt = tx.prepare_cached(
                    "SELECT rank, item_id, count, revision FROM topk
                     WHERE job = ?1 AND window_name = ?2 AND window_start = ?3 ORDER BY rank",
                )?;
                let mut q = stmt.query(params![job, window, header.start])?;
                while let Some(r) = q.next()? {
                    let item = r.get_ref(1)?.as_str().map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e))
                    })?;
                    rows.push((r.get(0)?, ItemId::from(item), r.get(2)?, r.get(3)?));
                }
            }
            tx.commit()?;
            Ok(Some((header, rows)))
        };
        let Some((h, rows)) = read().map_err(sql_err(path, op()))? else {
            return Ok(None);
        };
        let at = || format!("job {job:?} window {window:?} instance {}", h.start);
        let (revision, items) =
            crate::types::check_rows(&at(), h.revision, h.item_count, rows).map_err(|detail| corrupt(path, detail))?;
        Ok(Some(StoredList {
            window: window.to_string(),
            start: Millis(h.start),
            end: Millis(h.end),
            revision,
            state: parse_state(path, &h.state)?,
            watermark: Millis(h.watermark),
            as_of: Millis(h.as_of),
            items,
        }))
    }
}

/// Binds (rank, item_id, count) at parameters `first`, `first + 1`, `first + 2`.
fn bind_row(stmt: &mut rusqlite::Statement<'_>, first: usize, rank: i64, item: &RankedItem) -> rusqlite::Result<()> {
    stmt.raw_bind_parameter(first, rank)?;
    stmt.raw_bind_parameter(first + 1, item.item_id.as_str())?;
    // `check_batch` has verified the count fits an i64.
    stmt.raw_bind_parameter(first + 2, item.count as i64)
}

/// Writes a checked batch inside the commit transaction.
fn write_batch(tx: &Connection, batch: &CommitBatch, now: Millis) -> rusqlite::Result<()> {
    let job = batch.job.as_str();
    // `check_batch` has verified every u64 below fits an i64.
    let epoch = batch.epoch as i64;
    let mut header = tx.prepare_cached(UPSERT_INSTANCE)?;
    let mut delete = tx.prepare_cached(DELETE_ROWS)?;
    let sql = &*INSERT_ROWS_SQL;
    let mut inserts = [
        tx.prepare_cached(&sql[0])?,
        tx.prepare_cached(&sql[1])?,
        tx.prepare_cached(&sql[2])?,
    ];
    for l in latest_revisions(&batch.lists) {
        let state = l.state.as_str();
        let is_final = i64::from(l.state == ListState::Final);
        header.execute(params![
            job,
            l.window,
            l.start.0,
            l.end.0,
            l.revision,
            state,
            is_final,
            l.watermark.0,
            l.as_of.0,
            l.items.len() as i64
        ])?;
        // Replace: the previous revision's rows go, all of this revision's rows come in.
        delete.execute(params![job, l.window, l.start.0])?;
        let mut rest = l.items.as_slice();
        let mut rank = 0i64;
        for (size, stmt) in CHUNKS.iter().zip(inserts.iter_mut()) {
            if rest.len() < *size {
                continue;
            }
            stmt.raw_bind_parameter(1, job)?;
            stmt.raw_bind_parameter(2, &l.window)?;
            stmt.raw_bind_parameter(3, l.start.0)?;
            stmt.raw_bind_parameter(4, l.end.0)?;
            stmt.raw_bind_parameter(5, l.revision)?;
            stmt.raw_bind_parameter(6, is_final)?;
            stmt.raw_bind_parameter(7, state)?;
            stmt.raw_bind_parameter(8, l.as_of.0)?;
            while rest.len() >= *size {
                let (chunk, tail) = rest.split_at(*size);
                for (i, item) in chunk.iter().enumerate() {
                    rank += 1;
                    bind_row(stmt, 9 + 3 * i, rank, item)?;
                }
                stmt.raw_execute()?;
                rest = tail;
            }
        }
    }
    let mut dead = tx.prepare_cached(INSERT_DEAD_LETTER)?;
    for d in &batch.dead_letters {
        dead.execute(params![
            job,
            d.source,
            d.letter.partition.0,
            d.letter.position as i64,
            d.letter.reason.as_str(),
            d.letter.detail,
            d.letter.raw,
            epoch,
            now.0
        ])?;
    }
    tx.prepare_cached(UPSERT_COMMIT)?
        .execute(params![job, epoch, batch.watermark.0, now.0])?;
    Ok(())
}

impl SinkStore for SqliteStore {
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
        self.writable("prepare a job")?;
        check_prepare(job, windows)?;
        self.ensure_schema()?;
        let path = self.path.as_path();
        let op = || format!("recording the windows of job {job:?}");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, op()))?;
        (|| -> rusqlite::Result<()> {
            tx.prepare_cached("DELETE FROM hotlist_windows WHERE job = ?1")?
                .execute(params![job])?;
            let mut insert = tx.prepare_cached(
                "INSERT INTO hotlist_windows (job, name, size_ms, slide_ms, k, ord)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for (ord, w) in windows.iter().enumerate() {
                // `check_prepare` has verified k fits; spans are at most i64::MAX.
                insert.execute(params![
                    job,
                    w.name,
                    w.size.as_i64(),
                    w.slide.as_i64(),
                    w.k as i64,
                    ord as i64
                ])?;
            }
            Ok(())
        })()
        .map_err(sql_err(path, op()))?;
        tx.commit().map_err(sql_err(path, op()))
    }

    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError> {
        self.writable("commit a batch")?;
        check_batch(batch)?;
        let path = self.path.as_path();
        let op = || format!("commit of job {:?} epoch {}", batch.job, batch.epoch);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, op()))?;
        let committed: Option<i64> = tx
            .prepare_cached(SELECT_EPOCH)
            .and_then(|mut s| s.query_row(params![batch.job], |r| r.get(0)).optional())
            .map_err(sql_err(path, op()))?;
        if let Some(c) = committed {
            if non_negative(path, c, "committed epoch")? >= batch.epoch {
                return Ok(false); // dropping `tx` rolls back the (empty) transaction
            }
        }
        write_batch(&tx, batch, Millis::now()).map_err(sql_err(path, op()))?;
        crate::crash_point::crash_point("sink.commit");
        tx.commit().map_err(sql_err(path, op()))?;
        Ok(true)
    }

    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError> {
        let path = self.path.as_path();
        let epoch: Option<i64> = self
            .conn
            .prepare_cached(SELECT_EPOCH)
            .and_then(|mut s| s.query_row(params![job], |r| r.get(0)).optional())
            .map_err(sql_err(path, format!("reading the committed epoch of job {job:?}")))?;
        epoch.map(|e| non_negative(path, e, "committed epoch")).transpose()
    }
}

impl SqliteStore {
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
        match row {
            None => Ok(None),
            Some((epoch, wm)) => Ok(Some((non_negative(path, epoch, "commit epoch")?, Millis(wm)))),
        }
    }
}

impl crate::store::StoreReader for SqliteStore {
    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        SqliteStore::windows(self, job)
    }
    fn latest(&mut self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        SqliteStore::latest(self, job, window)
    }
    fn instance(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, SinkError> {
        SqliteStore::instance(self, job, window, start)
    }
    fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        SqliteStore::last_commit(self, job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{
        batch, letter, list, measure_throughput, race_commits_and_reads, rows_for, windows, JOB,
    };
    use hotlist_operators::record::DeadReason;

    /// The processes of a cluster open (and create) the database at the same moment: every
    /// open succeeds (found by the 2-process crash test: the switch to WAL mode was "locked").
    #[test]
    fn concurrent_opens_of_a_new_database_all_succeed() {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("new.db");
            let barrier = std::sync::Barrier::new(4);
            let errors: Vec<String> = std::thread::scope(|s| {
                let threads: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            SqliteStore::open(&path).err().map(|e| e.to_string())
                        })
                    })
                    .collect();
                threads.into_iter().filter_map(|t| t.join().unwrap()).collect()
            });
            assert!(errors.is_empty(), "round {round}: {errors:?}");
        }
    }

    fn raw_rows(path: &Path, start: i64) -> Vec<(i64, i64)> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT rank, revision FROM topk WHERE window_start = ?1 ORDER BY rank")
            .unwrap();
        let rows = stmt.query_map([start], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn higher_revision_replaces_rows_without_stale_ranks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hot.db");
        let mut store = SqliteStore::open(&path).unwrap();
        // 137 rows: written as 2 chunks of 64, one of 8 and a single row.
        assert!(store.commit(&batch(1, vec![list(0, 1, 137)])).unwrap());
        let got = store.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert_eq!(got, StoredList::from(list(0, 1, 137)));
        // Two revisions in one batch: the highest wins, regardless of order.
        assert!(store.commit(&batch(2, vec![list(0, 3, 2), list(0, 2, 7)])).unwrap());
        let got = store.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert_eq!(got, StoredList::from(list(0, 3, 2)));
        assert_eq!(got.state, ListState::Final);
        assert_eq!(raw_rows(&path, 0), vec![(1, 3), (2, 3)]);
        // An empty list still has a header.
        assert!(store.commit(&batch(3, vec![list(0, 4, 0)])).unwrap());
        let got = store.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert_eq!((got.revision, got.items.len()), (4, 0));
        assert!(raw_rows(&path, 0).is_empty());
        assert_eq!(store.instance(JOB, "1m", Millis(60_000)).unwrap(), None);
        assert_eq!(store.instance("other", "1m", Millis(0)).unwrap(), None);
    }

    #[test]
    fn epochs_at_or_below_the_committed_one_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hot.db");
        let mut store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.committed_epoch(JOB).unwrap(), None);
        assert!(store.commit(&batch(5, vec![list(0, 1, 3)])).unwrap());
        for epoch in [5, 4, 0] {
            let mut b = batch(epoch, vec![list(0, 9, 1)]);
            b.dead_letters = vec![letter(1, DeadReason::Bad, b"x")];
            assert!(!store.commit(&b).unwrap());
        }
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(5));
        assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap().unwrap().revision, 1);
        assert!(store.dead_letters(JOB, 10).unwrap().is_empty());
        // Epochs are per job.
        let mut other = batch(1, vec![]);
        other.job = "other".into();
        assert!(store.commit(&other).unwrap());
        assert_eq!(store.committed_epoch("other").unwrap(), Some(1));
        // Survives reopening.
        drop(store);
        let mut store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(5));
        assert!(store.commit(&batch(6, vec![])).unwrap());
    }

    #[test]
    fn dead_letters_round_trip_raw_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hot.db");
        let mut store = SqliteStore::open(&path).unwrap();
        let letters = [
            letter(1, DeadReason::Bad, &[0xff, 0x00, 0xc3, 0x28, b'{']),
            letter(2, DeadReason::Late, b"{\"item\":\"a\",\"ts\":1}"),
            letter(3, DeadReason::Bad, &[]),
            letter(u64::from(u32::MAX) + 7, DeadReason::Sealed, &[0x80; 300]),
        ];
        let mut b = batch(1, vec![]);
        b.dead_letters = letters[..2].to_vec();
        assert!(store.commit(&b).unwrap());
        let mut b = batch(2, vec![]);
        b.dead_letters = letters[2..].to_vec();
        assert!(store.commit(&b).unwrap());
        drop(store);
        let reader = SqliteStore::open_read_only(&path).unwrap();
        let newest_first: Vec<_> = letters.iter().rev().cloned().collect();
        assert_eq!(reader.dead_letters(JOB, 100).unwrap(), newest_first);
        assert_eq!(reader.dead_letters(JOB, 2).unwrap(), newest_first[..2]);
        assert!(reader.dead_letters("other", 10).unwrap().is_empty());
        assert_eq!(
            reader.dead_letter_counts(JOB).unwrap(),
            vec![
                ("bad".to_string(), 2),
                ("late".to_string(), 1),
                ("sealed".to_string(), 1)
            ]
        );
    }

    #[test]
    fn latest_instances_and_windows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hot.db");
        let mut store = SqliteStore::open(&path).unwrap();
        let m = |n| Span::from_millis(n);
        let windows = windows();
        store.prepare(JOB, &windows).unwrap();
        let stored = store.windows(JOB).unwrap();
        assert_eq!(stored, windows.iter().map(StoredWindow::from).collect::<Vec<_>>());
        // Re-preparing replaces the definition.
        store.prepare(JOB, &windows[1..]).unwrap();
        assert_eq!(store.windows(JOB).unwrap().len(), 1);
        assert_eq!(store.windows(JOB).unwrap()[0].slide, m(30_000));
        assert!(store.prepare(JOB, &[WindowSpec::tumbling("x", m(0), 1)]).is_err());

        assert_eq!(store.latest(JOB, "1m").unwrap(), None);
        let b = batch(1, vec![list(120_000, 1, 2), list(-60_000, 2, 1), list(60_000, 1, 4)]);
        assert!(store.commit(&b).unwrap());
        let latest = store.latest(JOB, "1m").unwrap().unwrap();
        assert_eq!(latest, StoredList::from(list(120_000, 1, 2)));
        assert_eq!(
            store.instances(JOB, "1m").unwrap(),
            vec![
                (Millis(-60_000), 2, ListState::Open),
                (Millis(60_000), 1, ListState::Open),
                (Millis(120_000), 1, ListState::Open),
            ]
        );
        assert!(store.instances(JOB, "5m").unwrap().is_empty());
    }

    #[test]
    fn open_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.db");
        let err = SqliteStore::open_read_only(&missing).unwrap_err();
        assert!(matches!(err, SinkError::NoDatabase { .. }));
        assert_eq!(
            err.to_string(),
            format!("no hotlist database at {} (run the job first)", missing.display())
        );
        assert!(!err.retryable());
        assert!(!missing.exists(), "a reader must not create the file");

        let nested = dir.path().join("no/such/dir/hot.db");
        let err = SqliteStore::open(&nested).unwrap_err();
        assert!(matches!(err, SinkError::MissingParent { .. }), "{err}");
        assert!(err.to_string().contains(&nested.display().to_string()));

        // An SQLite file without the hotlist tables.
        let foreign = dir.path().join("foreign.db");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        let err = SqliteStore::open_read_only(&foreign).unwrap_err();
        assert!(matches!(err, SinkError::Schema { .. }), "{err}");
    }

    #[test]
    fn read_only_handles_refuse_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hot.db");
        let mut writer = SqliteStore::open(&path).unwrap();
        assert!(writer.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
        let mut reader = SqliteStore::open_read_only(&path).unwrap();
        let err = reader.commit(&batch(2, vec![])).unwrap_err();
        assert!(matches!(err, SinkError::ReadOnly { .. }), "{err}");
        assert!(reader.prepare(JOB, &[]).is_err());
        assert_eq!(reader.committed_epoch(JOB).unwrap(), Some(1));
        // The reader sees later commits.
        assert!(writer.commit(&batch(2, vec![list(0, 2, 1)])).unwrap());
        let got = reader.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert_eq!(got.revision, 2);
    }

    #[test]
    fn concurrent_reader_never_sees_a_mix_of_revisions() {
        const REVISIONS: u32 = 200;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hot.db");
        let mut writer = SqliteStore::open(&path).unwrap();
        assert!(writer.commit(&batch(1, vec![list(0, 1, rows_for(1))])).unwrap());
        let reader = SqliteStore::open_read_only(&path).unwrap();
        let (reads, last) = race_commits_and_reads(REVISIONS, writer, list, move |last| {
            let l = reader.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
            assert!(l.revision >= last, "revisions went backwards");
            assert_eq!(l.items.len(), rows_for(l.revision));
            let prefix = format!("r{}-", l.revision);
            assert!(l.items.iter().all(|i| i.item_id.starts_with(&prefix)));
            l.revision
        });
        assert_eq!(last, REVISIONS);
        assert!(reads >= 1);
        assert_eq!(raw_rows(&path, 0).len(), rows_for(REVISIONS));
    }

    /// `cargo test -p hotlist-sinks --release -- --ignored --nocapture throughput`
    #[test]
    #[ignore = "benchmark"]
    fn throughput() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("hot.db")).unwrap();
        measure_throughput(&mut store);
    }
}

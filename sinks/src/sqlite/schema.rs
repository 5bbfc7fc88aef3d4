//! The SQLite tables and their version (`PRAGMA user_version`), created if missing.

use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use rusqlite::TransactionBehavior;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

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
CREATE TABLE IF NOT EXISTS hotlist_jobs (
    job        TEXT    NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    owner      TEXT    NOT NULL,
    claimed_at INTEGER NOT NULL
);
";

impl SqliteStore {
    /// Creates the tables if missing and stamps the schema version, in one transaction.
    pub(super) fn ensure_schema(&mut self) -> Result<(), SinkError> {
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
}

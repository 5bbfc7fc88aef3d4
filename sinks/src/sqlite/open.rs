//! Opening an SQLite database: for writing (created if missing, WAL mode, tables ensured) or
//! for reading only (it must exist and be of a schema version this build reads: an older
//! job's version-1 or -2 database is read as it is, without migrating it, every list exact).

use super::schema::{OLDEST_READABLE_VERSION, SCHEMA_VERSION};
use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::time::Duration;

/// How long a connection waits for a lock before failing with a (retryable) busy error.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

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
            locks: Default::default(),
            claims: Default::default(),
        };
        store.ensure_schema()?;
        Ok(store)
    }

    /// Opens an existing database for reading only. Fails with [`SinkError::NoDatabase`] if
    /// the file does not exist and [`SinkError::Schema`] if it is not a hotlist database or of a
    /// version this build does not read. A database an older job writes (version 1 or 2) is
    /// read without migrating it (a reader never writes): its lists, which hold no accuracy
    /// columns, read as exact.
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
        if !(OLDEST_READABLE_VERSION..=SCHEMA_VERSION).contains(&version) {
            let detail = if version == 0 {
                "it has no hotlist tables (schema version 0)".to_string()
            } else {
                format!(
                    "schema version {version}, this build reads versions {OLDEST_READABLE_VERSION} to {SCHEMA_VERSION}"
                )
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
            locks: Default::default(),
            claims: Default::default(),
        })
    }
}

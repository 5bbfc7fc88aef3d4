//! The one error type of the sink stores, classified into retryable and permanent failures.
//!
//! Every message names the database path and the operation that failed and, for SQLite and I/O
//! failures, ends with the underlying cause, so printing the error with `{}` is enough.

use std::path::PathBuf;

/// Why a sink operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The directory a new database would be created in does not exist (bad configuration).
    #[error("cannot create hotlist database {path}: directory {parent} does not exist")]
    MissingParent {
        /// The database path.
        path: PathBuf,
        /// Its missing parent directory.
        parent: PathBuf,
    },
    /// A reader asked for a database file that does not exist.
    #[error("no hotlist database at {path} (run the job first)")]
    NoDatabase {
        /// The database path.
        path: PathBuf,
    },
    /// The file is not a hotlist database, or one of an unknown schema version.
    #[error("{path} is not a usable hotlist database: {detail}")]
    Schema {
        /// The database path.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A write was attempted through a store opened with `open_read_only`.
    #[error("cannot {op} through a read-only handle on {path}")]
    ReadOnly {
        /// The database path.
        path: PathBuf,
        /// The refused operation.
        op: &'static str,
    },
    /// The job id, window definitions or batch contents are invalid (bad configuration or a bug
    /// upstream); retrying the same call fails the same way.
    #[error("invalid input for job {job:?}: {detail}")]
    Invalid {
        /// The job id.
        job: String,
        /// What is invalid.
        detail: String,
    },
    /// Stored data violates the store's invariants (written by something else, or damaged).
    #[error("corrupt data in {path}: {detail}")]
    Corrupt {
        /// The database path (`"memory"` for the in-memory store).
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// SQLite reported an error during `op`.
    #[error("{op} on {path} failed: {source}")]
    Sqlite {
        /// The database path.
        path: PathBuf,
        /// The operation, e.g. `commit of job "hotlist" epoch 7`.
        op: String,
        /// The underlying error.
        source: rusqlite::Error,
    },
    /// A file-system operation failed.
    #[error("{op} on {path} failed: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The operation.
        op: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A Redis request failed during `op`.
    #[error("{op} on {url} failed: {cause}")]
    Redis {
        /// The server URL, without its password.
        url: String,
        /// The operation, e.g. `commit of job "hotlist" epoch 7`.
        op: String,
        /// The cause (not named `source`: thiserror would require it to be an `Error`). It starts
        /// with a class word that [`SinkError::retryable`] reads: `IO` for connection, I/O and
        /// timeout failures, `CLIENT` for client-side failures, otherwise the server's error
        /// code (`ERR`, `BUSY`, `LOADING`, `TRYAGAIN`, …).
        cause: String,
    },
    /// PostgreSQL reported an error (or the connection failed) during `op`.
    #[error("{op} on {url} failed: {}", crate::postgres::describe(.source))]
    Postgres {
        /// The server and schema, without user name and password.
        url: String,
        /// The operation, e.g. `commit of job "hotlist" epoch 7`.
        op: String,
        /// The underlying error.
        source: postgres::Error,
    },
}

impl SinkError {
    /// Whether retrying the same operation later may succeed: true for a busy or locked
    /// database and for I/O failures; false for schema, constraint, corruption and configuration
    /// errors, which fail again until someone fixes something.
    pub fn retryable(&self) -> bool {
        match self {
            SinkError::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(
                    rusqlite::ErrorCode::DatabaseBusy
                        | rusqlite::ErrorCode::DatabaseLocked
                        | rusqlite::ErrorCode::SystemIoFailure
                )
            ),
            SinkError::Io { .. } => true,
            SinkError::Postgres { source, .. } => crate::postgres::pg_retryable(source),
            SinkError::Redis { cause, .. } => {
                matches!(cause.split(' ').next(), Some("IO" | "BUSY" | "TRYAGAIN" | "LOADING"))
            }
            SinkError::MissingParent { .. }
            | SinkError::NoDatabase { .. }
            | SinkError::Schema { .. }
            | SinkError::ReadOnly { .. }
            | SinkError::Invalid { .. }
            | SinkError::Corrupt { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: i32) -> SinkError {
        SinkError::Sqlite {
            path: PathBuf::from("x.db"),
            op: "commit".into(),
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
        }
    }

    #[test]
    fn classification() {
        assert!(sqlite(rusqlite::ffi::SQLITE_BUSY).retryable());
        assert!(sqlite(rusqlite::ffi::SQLITE_LOCKED).retryable());
        assert!(sqlite(rusqlite::ffi::SQLITE_IOERR).retryable());
        assert!(!sqlite(rusqlite::ffi::SQLITE_CONSTRAINT).retryable());
        assert!(!sqlite(rusqlite::ffi::SQLITE_CORRUPT).retryable());
        let io = SinkError::Io {
            path: PathBuf::from("x.db"),
            op: "stat".into(),
            source: std::io::Error::other("boom"),
        };
        assert!(io.retryable());
        let missing = SinkError::NoDatabase {
            path: PathBuf::from("/tmp/none.db"),
        };
        assert!(!missing.retryable());
        assert_eq!(
            missing.to_string(),
            "no hotlist database at /tmp/none.db (run the job first)"
        );
        let msg = sqlite(rusqlite::ffi::SQLITE_BUSY).to_string();
        assert!(msg.starts_with("commit on x.db failed: "), "{msg}");
    }
}

//! The one error type of the sink stores, and its retry class.
//!
//! Every message names the database (path, or server without credentials) and the operation
//! that failed and, for backend failures, ends with the underlying cause, so printing the error
//! with `{}` is enough.
//!
//! Whether a failure is worth retrying is decided once, by the backend, where it builds the
//! error (from SQLite's error code, PostgreSQL's SQLSTATE or connection state, the Redis error
//! kind), and stored in the error as a [`Retry`]; [`SinkError::retryable`] only reads it. This
//! module knows no backend.

use std::path::PathBuf;

/// Whether retrying a failed call may succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// The condition may pass by itself (a busy or locked database, a lost or refused
    /// connection, a timeout, a server loading its data): back off and retry the same call.
    Transient,
    /// The call fails the same way until someone fixes something (configuration, schema,
    /// constraint, corrupt data, a bug upstream): stop.
    Permanent,
}

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
    /// Another live run holds the job's lock in this store: a second run of the same job.
    #[error("job {job:?} is already running on {location}: {detail}")]
    JobLocked {
        /// The job id.
        job: String,
        /// The store (a path, or a server without credentials).
        location: String,
        /// Which lock, and who holds it where known.
        detail: String,
    },
    /// Another run claimed the job after this handle did: this handle is a stale writer, and
    /// its commit was refused without writing anything.
    #[error("job {job:?} was taken over by another run (generation {current}; this run's is {ours}); this run stops")]
    TakenOver {
        /// The job id.
        job: String,
        /// The generation this handle claimed.
        ours: u64,
        /// The job's generation in the store now.
        current: u64,
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
        /// Transient for a busy or locked database and I/O failures.
        retry: Retry,
    },
    /// A file-system operation failed (always [`Retry::Transient`]).
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
        /// The cause (not named `source`: thiserror would require it to be an `Error`): a class
        /// word (`IO` for connection, I/O and timeout failures, `CLIENT` for client-side
        /// failures, otherwise the server's error code: `ERR`, `BUSY`, `LOADING`, …), then the
        /// message.
        cause: String,
        /// Transient for I/O failures and a busy or loading server.
        retry: Retry,
    },
    /// PostgreSQL reported an error (or the connection failed) during `op`.
    #[error("{op} on {url} failed: {cause}")]
    Postgres {
        /// The server and schema, without user name and password.
        url: String,
        /// The operation, e.g. `commit of job "hotlist" epoch 7`.
        op: String,
        /// The error with its causes and SQLSTATE on one line (the `Display` of
        /// `postgres::Error` names only its kind, e.g. `db error`).
        cause: String,
        /// Transient for a lost or refused connection, a serialization failure, a lock timeout,
        /// a server shutting down or out of resources.
        retry: Retry,
        /// The underlying error.
        source: postgres::Error,
    },
}

impl SinkError {
    /// Whether retrying the same call later may succeed, as decided where the error was made.
    pub fn retry(&self) -> Retry {
        match self {
            SinkError::Sqlite { retry, .. } | SinkError::Redis { retry, .. } | SinkError::Postgres { retry, .. } => {
                *retry
            }
            SinkError::Io { .. } => Retry::Transient,
            SinkError::MissingParent { .. }
            | SinkError::NoDatabase { .. }
            | SinkError::Schema { .. }
            | SinkError::ReadOnly { .. }
            | SinkError::Invalid { .. }
            | SinkError::Corrupt { .. }
            | SinkError::JobLocked { .. }
            | SinkError::TakenOver { .. } => Retry::Permanent,
        }
    }

    /// Whether retrying the same operation later may succeed: true for a busy or locked
    /// database, a lost connection and I/O failures; false for schema, constraint, corruption
    /// and configuration errors, which fail again until someone fixes something.
    pub fn retryable(&self) -> bool {
        self.retry() == Retry::Transient
    }

    /// Stored data at `location` (a path, or a server without credentials) violates the
    /// store's invariants.
    pub(crate) fn corrupt(location: impl Into<PathBuf>, detail: String) -> SinkError {
        SinkError::Corrupt {
            path: location.into(),
            detail,
        }
    }

    /// The input for `job` is invalid.
    pub(crate) fn invalid(job: &str, detail: String) -> SinkError {
        SinkError::Invalid {
            job: job.to_string(),
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_classes() {
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
        // A backend error is what its constructor decided.
        for retry in [Retry::Transient, Retry::Permanent] {
            let e = SinkError::Redis {
                url: "redis://h/".into(),
                op: "commit".into(),
                cause: "ERR x".into(),
                retry,
            };
            assert_eq!(e.retry(), retry);
            assert_eq!(e.to_string(), "commit on redis://h/ failed: ERR x");
        }
        assert!(!SinkError::corrupt("memory", "x".into()).retryable());
        assert!(!SinkError::invalid("j", "x".into()).retryable());
        let stale = SinkError::TakenOver {
            job: "j".into(),
            ours: 3,
            current: 4,
        };
        assert!(!stale.retryable());
        assert_eq!(
            stale.to_string(),
            "job \"j\" was taken over by another run (generation 4; this run's is 3); this run stops"
        );
    }
}

//! How a PostgreSQL failure becomes a [`SinkError::Postgres`]: described on one line with its
//! causes and SQLSTATE, and classified as transient or permanent where it happens.

use crate::error::{Retry, SinkError};
use postgres::error::SqlState;

/// Wraps a failure of `op` on `location` (server and schema, without credentials).
pub(super) fn pg_err(location: &str, op: impl Into<String>) -> impl FnOnce(postgres::Error) -> SinkError {
    let url = location.to_string();
    let op = op.into();
    move |source| SinkError::Postgres {
        url,
        op,
        cause: describe(&source),
        retry: retry_class(&source),
        source,
    }
}

/// Whether an error from PostgreSQL may go away on retry: a lost or refused connection, a
/// serialization failure or deadlock, a lock timeout, a server shutting down or out of
/// resources. Constraint, syntax, permission and conversion errors are permanent.
pub(super) fn retry_class(e: &postgres::Error) -> Retry {
    if transient(e) {
        Retry::Transient
    } else {
        Retry::Permanent
    }
}

/// Whether `e` is one of the failures [`retry_class`] calls transient.
fn transient(e: &postgres::Error) -> bool {
    if let Some(code) = e.code() {
        let c = code.code();
        return c.starts_with("08") // connection exception
            || c.starts_with("53") // insufficient resources (too many connections, disk full)
            || c.starts_with("57P") // admin/crash shutdown, cannot connect now
            || *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::LOCK_NOT_AVAILABLE
            || *code == SqlState::QUERY_CANCELED; // lock_timeout / statement_timeout
    }
    if e.is_closed() {
        return true;
    }
    // Connect and I/O failures carry the io::Error as their source.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    // The client's own timeout has no public kind: its message is the only sign of it.
    e.to_string() == "timeout waiting for server"
}

/// The error with its causes and, for a server error, its SQLSTATE, on one line (the
/// `Display` of `postgres::Error` names only its kind, e.g. `db error`).
pub(super) fn describe(e: &postgres::Error) -> String {
    let mut out = e.to_string();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string().replace('\n', "; "));
        cause = c.source();
    }
    if let Some(code) = e.code() {
        out.push_str(&format!(" (SQLSTATE {})", code.code()));
    }
    out
}

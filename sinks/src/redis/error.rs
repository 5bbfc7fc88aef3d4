//! How a Redis failure becomes a [`SinkError`]: damage the commit script found is
//! [`SinkError::Corrupt`]; anything else is [`SinkError::Redis`] with a described cause and a
//! retry class decided from the error's kind.

use crate::error::{Retry, SinkError};
use ::redis::{ErrorKind, RedisError, ServerErrorKind};

/// Error code the commit script uses for data it finds damaged (mapped to `SinkError::Corrupt`).
pub(super) const CORRUPT_CODE: &str = "HOTLIST_CORRUPT";

/// Error code the commit script uses when the committing handle's generation is no longer the
/// job's (the commit maps it to `SinkError::TakenOver`).
pub(super) const TAKEN_OVER_CODE: &str = "HOTLIST_TAKEN_OVER";

/// Wraps a failure of `op` on `url` (without its password).
pub(super) fn redis_err(url: &str, op: String, e: &RedisError) -> SinkError {
    if e.code() == Some(CORRUPT_CODE) {
        return SinkError::corrupt(url, e.detail().unwrap_or("").to_string());
    }
    SinkError::Redis {
        url: url.to_string(),
        op,
        cause: describe(e),
        retry: retry_class(e),
    }
}

/// I/O failures (connection refused or lost, timeouts) and a server that is busy running a
/// script, loading its data or asking to try again may pass; every other error recurs.
pub(super) fn retry_class(e: &RedisError) -> Retry {
    match e.kind() {
        ErrorKind::Io | ErrorKind::Server(ServerErrorKind::BusyLoading | ServerErrorKind::TryAgain) => Retry::Transient,
        // BUSY (a script running too long) is not a kind the client knows by name.
        ErrorKind::Extension if e.code() == Some("BUSY") => Retry::Transient,
        _ => Retry::Permanent,
    }
}

/// The error's class word (`IO`, `CLIENT` or the server's error code) followed by its message.
fn describe(e: &RedisError) -> String {
    if e.is_io_error() {
        return format!("IO {e}");
    }
    match e.code() {
        Some(code) => match e.detail() {
            Some(detail) => format!("{code} {detail}"),
            None => format!("{code} {e}"),
        },
        None => format!("CLIENT {e}"),
    }
}

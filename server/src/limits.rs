//! How long a client may take and how many connections may be open: the HTTP server's limits
//! and their defaults. The defaults are set here; `hotlist serve` repeats them in its flags'
//! `--help` text, and a test there keeps the two equal.
//!
//! What each bounds:
//! - a connection that is sending a request head (or has sent nothing since it connected) is
//!   closed after [`ConnectionLimits::header_timeout`]: slowloris clients, and sockets opened
//!   and left;
//! - a keep-alive connection with no request since the last response is closed after
//!   [`ConnectionLimits::idle_timeout`];
//! - a handler that runs longer than [`ConnectionLimits::request_timeout`] answers 503;
//! - at most [`ConnectionLimits::max_connections`] are open: a new one past the limit closes
//!   the longest-idle one first (see `listener`).
//!
//! Not bounded: how fast a client reads a response. A client that stops reading holds its
//! connection until the idle timeout (the response has left the handler by then).

use std::time::Duration;

/// Default [`ConnectionLimits::header_timeout`]: a request head is one packet from any real
/// client; 5 s leaves room for a slow mobile link.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Default [`ConnectionLimits::idle_timeout`]: longer than the 60 s idle timeout of common
/// proxies and load balancers (nginx upstream keep-alive, AWS ALB), so a proxy's pooled
/// connection is closed by the proxy, never by us just as the proxy reuses it. Idle connections
/// cost one file descriptor each and are the first closed when the server is full.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);
/// Default [`ConnectionLimits::request_timeout`]: handlers answer from memory in microseconds;
/// only history lookups wait for the store, and a store slower than this is down.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`ConnectionLimits::max_connections`], before [`cap_to_open_files`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default queue of history lookups (`--history-queue`): store reads of older instances,
/// per-group lists and group listings wait here for the one history thread. A lookup takes
/// milliseconds, so 64 waiting is a burst; past it a lookup is answered 503 with `Retry-After`
/// at once rather than after the request timeout.
pub const DEFAULT_HISTORY_QUEUE: usize = 64;
/// The shortest store poll interval `hotlist serve --poll` accepts: below it the refresher
/// would spin on the store (0 was a busy loop) for no fresher lists than the job commits.
pub const MIN_POLL: Duration = Duration::from_millis(10);
/// File descriptors kept for everything but client connections: stdio, the listener, the
/// runtime's epoll and wakers, and the store readers (SQLite opens the database, its WAL and
/// shared-memory files per reader; PostgreSQL and Redis a socket each).
pub const RESERVED_FILES: u64 = 32;

/// The server's connection limits (see the module doc for what each bounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time from connecting, or from the first byte of a request after an idle spell, until the
    /// request head must be complete.
    pub header_timeout: Duration,
    /// Time a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Time a handler may take before the request is answered 503.
    pub request_timeout: Duration,
    /// Open connections at most (at least 1).
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    /// The defaults, with `max_connections` not yet capped to the process's open-file limit.
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The process's soft limit on open files (`RLIMIT_NOFILE`), or `None` when unlimited or
/// unknown.
pub fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// `requested` connections, lowered so they fit in `open_files` with [`RESERVED_FILES`] to
/// spare (at least 1). Past the limit the server closes idle connections instead of running
/// out of descriptors, which would leave it unable to accept anyone.
///
/// ```
/// use hotlist_server::limits::cap_to_open_files;
/// assert_eq!(cap_to_open_files(1024, Some(256)), 224);
/// assert_eq!(cap_to_open_files(1024, Some(65536)), 1024);
/// assert_eq!(cap_to_open_files(1024, None), 1024);
/// assert_eq!(cap_to_open_files(1024, Some(8)), 1);
/// ```
pub fn cap_to_open_files(requested: usize, open_files: Option<u64>) -> usize {
    let fits = open_files.map_or(usize::MAX, |n| {
        usize::try_from(n.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX)
    });
    requested.min(fits).max(1)
}

//! The open connections: what each is doing (waiting for a request head, in a handler, idle
//! between requests) and since when. Each connection's watchdog asks it when the connection's
//! time is up; the accept loop asks it for the longest-idle connection to close when the
//! server is full or out of file descriptors (and, when every connection is in a handler, for
//! the one in a handler longest: a new client, a health check, always gets in).
//!
//! A connection reports its own progress: [`TrackedIo`] sees the bytes it reads, and the
//! listener's service calls [`Conn::request_started`] / [`Conn::response_ready`] around each
//! handler. The phase moves Head → Busy → Idle → Head (first byte of the next request) → …
//!
//! Locks are std `Mutex`es, not Tokio's: nothing awaits while holding one, and each critical
//! section is a few field updates. Finding the longest-idle connection scans all of them
//! (O(open connections), microseconds at the default limit of 1,024), and happens only when
//! the server is full.

use crate::limits::ConnectionLimits;
use crate::metrics::ConnectionMetrics;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for, or reading, a request head: since it connected, or since the first byte
    /// after an idle spell. Bounded by the header timeout.
    Head,
    /// A request is in a handler (bounded by the request timeout, inside the router).
    /// `read_ahead`: bytes of a next request arrived meanwhile (pipelining), so the
    /// connection goes back to `Head`, not `Idle`, when the response is ready.
    Busy { read_ahead: bool },
    /// Between requests on a keep-alive connection. Bounded by the idle timeout.
    Idle,
}

/// Why the server closed a connection (the `reason` label of
/// `hotlist_api_connections_closed_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// The request head did not arrive within the header timeout.
    HeaderTimeout,
    /// No request within the idle timeout.
    IdleTimeout,
    /// The server was full (or out of file descriptors) and this was the longest-idle one.
    Evicted,
    /// The server was full, every connection was in a handler, and this one had been in its
    /// handler longest: its request is dropped so that a new client gets in.
    EvictedBusy,
    /// The server was full and no connection could be closed: the new one was dropped.
    Refused,
    /// Shutting down, and the connection was not in a handler.
    Shutdown,
}

impl CloseReason {
    pub(crate) fn label(self) -> &'static str {
        match self {
            CloseReason::HeaderTimeout => "header_timeout",
            CloseReason::IdleTimeout => "idle_timeout",
            CloseReason::Evicted => "evicted",
            CloseReason::EvictedBusy => "evicted_busy",
            CloseReason::Refused => "refused",
            CloseReason::Shutdown => "shutdown",
        }
    }
}

/// What the watchdog should do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keep the connection; look again at `until` (None: only when woken).
    Open { until: Option<Instant> },
    /// Close it.
    Close(CloseReason),
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// When the phase began.
    since: Instant,
    /// Chosen to be closed to make room; the watchdog closes it at its next look.
    evicted: Option<CloseReason>,
}

/// One open connection's shared state.
#[derive(Debug)]
pub(crate) struct Conn {
    state: Mutex<State>,
    /// Wakes the watchdog when the deadline may have moved earlier, or on eviction.
    pub(crate) changed: Notify,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            state: Mutex::new(State {
                phase: Phase::Head,
                since: Instant::now(),
                evicted: None,
            }),
            changed: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // a panic while holding this lock cannot leave the plain fields inconsistent
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn bytes_read(&self) {
        let mut s = self.state();
        match s.phase {
            Phase::Idle => {
                s.phase = Phase::Head;
                s.since = Instant::now();
                drop(s);
                self.changed.notify_one(); // the header deadline is earlier than the idle one
            }
            Phase::Busy { .. } => s.phase = Phase::Busy { read_ahead: true },
            Phase::Head => {} // the header timeout counts from the head's first byte
        }
    }

    /// A request head was parsed and goes to a handler.
    pub(crate) fn request_started(&self) {
        let mut s = self.state();
        s.phase = Phase::Busy { read_ahead: false };
        s.since = Instant::now();
    }

    /// The handler produced its response (hyper writes it next).
    pub(crate) fn response_ready(&self) {
        let mut s = self.state();
        s.phase = match s.phase {
            Phase::Busy { read_ahead: true } => Phase::Head,
            _ => Phase::Idle,
        };
        s.since = Instant::now();
        drop(s);
        self.changed.notify_one();
    }

    /// What to do at `now`. `draining_since`: when shutdown began, if it did; a connection not
    /// in a handler then gets at most `header_timeout` more to finish what it was doing.
    pub(crate) fn verdict(&self, limits: &ConnectionLimits, now: Instant, draining_since: Option<Instant>) -> Verdict {
        let s = self.state();
        if let Some(reason) = s.evicted {
            return Verdict::Close(reason);
        }
        let (deadline, reason) = match s.phase {
            Phase::Busy { .. } => return Verdict::Open { until: None },
            Phase::Head => (s.since + limits.header_timeout, CloseReason::HeaderTimeout),
            Phase::Idle => (s.since + limits.idle_timeout, CloseReason::IdleTimeout),
        };
        let (deadline, reason) = match draining_since.map(|t| t + limits.header_timeout) {
            Some(drained) if drained < deadline => (drained, CloseReason::Shutdown),
            _ => (deadline, reason),
        };
        if now >= deadline {
            Verdict::Close(reason)
        } else {
            Verdict::Open { until: Some(deadline) }
        }
    }
}

/// All open connections.
pub(crate) struct Registry {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    /// Notified (all waiters) whenever a connection is removed.
    closed: Notify,
    metrics: Arc<ConnectionMetrics>,
}

impl Registry {
    pub(crate) fn new(metrics: Arc<ConnectionMetrics>) -> Registry {
        Registry {
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            closed: Notify::new(),
            metrics,
        }
    }

    fn conns(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Open connections (including ones chosen to close that have not closed yet).
    pub(crate) fn len(&self) -> usize {
        self.conns().len()
    }

    /// Adds a new connection; it is removed when the returned registration is dropped.
    pub(crate) fn register(self: &Arc<Self>) -> Registration {
        let id = self.next_id.fetch_add(1, Relaxed);
        let conn = Arc::new(Conn::new());
        self.conns().insert(id, conn.clone());
        self.metrics.open.inc();
        Registration {
            registry: self.clone(),
            id,
            conn,
        }
    }

    /// Counts a connection the server closed.
    pub(crate) fn count_closed(&self, reason: CloseReason) {
        self.metrics.closed.with_label_values(&[reason.label()]).inc();
    }

    /// Chooses the connection that has been waiting (idle, or for a request head) the longest
    /// and tells its watchdog to close it. False if every connection is in a handler.
    fn evict_longest_idle(&self) -> bool {
        self.evict_oldest(false)
    }

    /// Chooses the connection that has been in its handler the longest and tells its watchdog
    /// to close it (its request is dropped). False if none is in a handler.
    fn evict_longest_busy(&self) -> bool {
        self.evict_oldest(true)
    }

    fn evict_oldest(&self, busy: bool) -> bool {
        let conns = self.conns();
        let mut oldest: Option<(Instant, &Arc<Conn>)> = None;
        for conn in conns.values() {
            let s = conn.state();
            if s.evicted.is_some() || matches!(s.phase, Phase::Busy { .. }) != busy {
                continue;
            }
            if oldest.is_none_or(|(since, _)| s.since < since) {
                oldest = Some((s.since, conn));
            }
        }
        let Some((_, conn)) = oldest else {
            return false;
        };
        conn.state().evicted = Some(match busy {
            true => CloseReason::EvictedBusy,
            false => CloseReason::Evicted,
        });
        conn.changed.notify_one();
        true
    }

    /// Closes the longest-idle connection (or, if every connection is in a handler, the one in
    /// its handler longest) and waits (at most `wait`) until a connection has closed and its
    /// file descriptor is free. False, at once, if there is no connection to close.
    ///
    /// Closing a busy connection drops one request so that a new client, e.g. a health check,
    /// is never refused: handlers are bounded by the request timeout, but a server whose every
    /// connection waits on a slow store would otherwise refuse everyone for that long.
    pub(crate) async fn make_room(&self, wait: Duration) -> bool {
        let closed = self.closed.notified();
        tokio::pin!(closed);
        closed.as_mut().enable(); // registered before the eviction: its close cannot be missed
        if !self.evict_longest_idle() && !self.evict_longest_busy() {
            return false;
        }
        let _ = tokio::time::timeout(wait, closed).await;
        true
    }
}

/// A connection's place in the registry; dropping it removes the connection.
pub(crate) struct Registration {
    registry: Arc<Registry>,
    id: u64,
    conn: Arc<Conn>,
}

impl Registration {
    /// The connection's shared state.
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    /// Counts that the server is closing this connection, and why.
    pub(crate) fn closing(&self, reason: CloseReason) {
        self.registry.count_closed(reason);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.conns().remove(&self.id);
        self.registry.metrics.open.dec();
        self.registry.closed.notify_waiters();
    }
}

/// A connection's socket that reports each read to the connection's state.
pub(crate) struct TrackedIo<T> {
    inner: T,
    conn: Arc<Conn>,
}

impl<T> TrackedIo<T> {
    pub(crate) fn new(inner: T, conn: Arc<Conn>) -> TrackedIo<T> {
        TrackedIo { inner, conn }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TrackedIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.conn.bytes_read();
        }
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TrackedIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
            max_connections: 8,
        }
    }

    fn deadline(conn: &Conn, draining: Option<Instant>) -> Option<Instant> {
        match conn.verdict(&limits(), Instant::now(), draining) {
            Verdict::Open { until } => until,
            Verdict::Close(r) => panic!("closed: {r:?}"),
        }
    }

    /// A connection's deadline follows its phase: header timeout while a head is due, none in
    /// a handler, idle timeout after a response, header timeout again from the next byte.
    #[test]
    fn deadline_follows_the_phase() {
        let c = Conn::new();
        let since = c.state().since;
        assert_eq!(deadline(&c, None), Some(since + Duration::from_secs(5)));
        c.request_started();
        assert_eq!(deadline(&c, None), None, "no deadline in a handler");
        c.response_ready();
        let idle_since = c.state().since;
        assert_eq!(deadline(&c, None), Some(idle_since + Duration::from_secs(60)));
        c.bytes_read();
        let head_since = c.state().since;
        assert_eq!(deadline(&c, None), Some(head_since + Duration::from_secs(5)));
        c.bytes_read();
        assert_eq!(
            c.state().since,
            head_since,
            "later bytes of the same head do not extend it"
        );
        let later = c.verdict(&limits(), head_since + Duration::from_secs(5), None);
        assert_eq!(later, Verdict::Close(CloseReason::HeaderTimeout));
    }

    /// Bytes of a pipelined request read while in a handler start its header clock at once.
    #[test]
    fn pipelined_bytes_start_the_next_head() {
        let c = Conn::new();
        c.request_started();
        c.bytes_read();
        c.response_ready();
        let s = c.state().since;
        assert_eq!(deadline(&c, None), Some(s + Duration::from_secs(5)));
    }

    /// Shutting down caps an idle connection's time at the header timeout; a busy one finishes.
    #[test]
    fn draining_caps_idle_connections() {
        let c = Conn::new();
        c.request_started();
        c.response_ready();
        let now = Instant::now();
        assert_eq!(deadline(&c, Some(now)), Some(now + Duration::from_secs(5)));
        assert_eq!(
            c.verdict(&limits(), now + Duration::from_secs(5), Some(now)),
            Verdict::Close(CloseReason::Shutdown)
        );
        c.request_started();
        assert_eq!(deadline(&c, Some(now)), None);
    }

    /// Eviction picks the connection waiting longest, one in a handler only when every one is,
    /// never the same twice.
    #[test]
    fn evicts_the_longest_idle_first() {
        let registry = Arc::new(Registry::new(Arc::new(ConnectionMetrics::new("test"))));
        let old = registry.register();
        std::thread::sleep(Duration::from_millis(2)); // distinct `since` instants
        let busy = registry.register();
        let newer = registry.register();
        old.conn().request_started(); // the oldest is in a handler: not a candidate
        std::thread::sleep(Duration::from_millis(2));
        busy.conn().request_started();
        old.conn().response_ready(); // idle since now: newer than `newer`'s head
        let now = Instant::now();
        assert!(registry.evict_longest_idle());
        assert_eq!(
            newer.conn().verdict(&limits(), now, None),
            Verdict::Close(CloseReason::Evicted)
        );
        assert!(registry.evict_longest_idle());
        assert_eq!(
            old.conn().verdict(&limits(), now, None),
            Verdict::Close(CloseReason::Evicted)
        );
        assert!(!registry.evict_longest_idle(), "only a busy one is left");
        assert!(registry.evict_longest_busy(), "the busy one, when nothing else is left");
        assert_eq!(
            busy.conn().verdict(&limits(), now, None),
            Verdict::Close(CloseReason::EvictedBusy)
        );
        assert!(!registry.evict_longest_busy(), "never twice");
        assert_eq!(registry.len(), 3);
        drop(newer);
        assert_eq!(registry.len(), 2);
    }
}

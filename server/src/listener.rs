//! The accept loop and the per-connection tasks: HTTP/1.1 with hyper, under the
//! [`ConnectionLimits`].
//!
//! `axum::serve` has no header or idle timeout and no connection control: a server there can be
//! held by idle sockets until it runs out of file descriptors, and then it cannot accept even a
//! health check. Here:
//! - every connection is in the [`Registry`] with its phase, and a watchdog beside it closes it
//!   when its header or idle time is up (hyper's own `header_read_timeout` is off: its clock
//!   also runs while a keep-alive connection is idle, so it cannot tell idle from slow);
//! - at `max_connections`, a newly accepted connection first closes the longest-idle one (if
//!   every connection is in a handler, the one in its handler longest: a health check always
//!   gets in);
//! - when `accept` fails for lack of file descriptors (EMFILE/ENFILE) or memory, the
//!   longest-idle connection is closed and accepting resumes as soon as it is gone. If nothing
//!   can be closed, the loop backs off: 10 ms, doubling up to 1 s, reset by the next success.
//!   It never spins.
//!
//! Shutdown (after mini-redis): the signal stops the accept loop, every connection is told to
//! finish (a request in a handler completes; others get at most the header timeout more), and
//! [`serve`] returns when the last one has closed.

use crate::connections::{CloseReason, Conn, Registration, Registry, TrackedIo, Verdict};
use crate::limits::ConnectionLimits;
use crate::metrics::ConnectionMetrics;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How long the accept loop waits for a connection it chose to close to be gone.
const CLOSE_WAIT: Duration = Duration::from_millis(100);
/// First and longest pause when `accept` fails and no connection can be closed.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `shutdown` completes, then waits for open connections.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    metrics: Arc<ConnectionMetrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let registry = Arc::new(Registry::new(metrics));
    let mut http = http1::Builder::new();
    http.keep_alive(true).header_read_timeout(None);
    // `true` tells connections to finish; every task holds an `alive` receiver until it ends
    let (stop_tx, stop_rx) = watch::channel(false);
    let (alive_tx, alive_rx) = watch::channel(());
    tokio::pin!(shutdown);
    let mut backoff = BACKOFF_MIN;
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                backoff = BACKOFF_MIN;
                if registry.len() >= limits.max_connections && !registry.make_room(CLOSE_WAIT).await {
                    tracing::debug!("no connection of {} can be closed: dropping a new one", registry.len());
                    registry.count_closed(CloseReason::Refused);
                    continue;
                }
                let connection = Connection {
                    registration: registry.register(),
                    router: router.clone(),
                    http: http.clone(),
                    limits,
                    stop: stop_rx.clone(),
                    _alive: alive_rx.clone(),
                };
                tokio::spawn(connection.run(stream));
            }
            Err(e) if is_per_connection(&e) => {}
            Err(e) => {
                if !registry.make_room(CLOSE_WAIT).await {
                    tracing::warn!("cannot accept connections ({e}); retrying in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(alive_rx);
    alive_tx.closed().await;
}

/// Errors of one pending connection (it is gone; the next accept is unaffected).
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
    )
}

/// One accepted connection and what its task needs.
struct Connection {
    registration: Registration,
    router: Router,
    http: http1::Builder,
    limits: ConnectionLimits,
    stop: watch::Receiver<bool>,
    /// Dropped when the task ends: `serve` waits for all of them.
    _alive: watch::Receiver<()>,
}

impl Connection {
    /// Serves the connection until the client or hyper closes it, or its watchdog does.
    async fn run(mut self, stream: TcpStream) {
        let conn = self.registration.conn().clone();
        let io = TokioIo::new(TrackedIo::new(stream, conn.clone()));
        let service = tracked_service(self.router.clone(), conn.clone());
        let http = self.http.serve_connection(io, service);
        tokio::pin!(http);
        let mut draining_since: Option<Instant> = None;
        loop {
            let until = match conn.verdict(&self.limits, Instant::now(), draining_since) {
                Verdict::Close(reason) => {
                    tracing::debug!("closing a connection: {}", reason.label());
                    self.registration.closing(reason);
                    return; // dropping `http` closes the socket
                }
                Verdict::Open { until } => until,
            };
            let wake = async {
                match until {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                result = http.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("connection ended: {e}");
                    }
                    return;
                }
                _ = conn.changed.notified() => {}
                _ = wake => {}
                _ = self.stop.changed(), if draining_since.is_none() => {
                    http.as_mut().graceful_shutdown();
                    draining_since = Some(Instant::now());
                }
            }
        }
    }
}

/// The router as a hyper service that tells the connection when each request enters and
/// leaves its handler.
fn tracked_service(
    router: Router,
    conn: Arc<Conn>,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = TrackedResponse,
> {
    let inner = TowerToHyperService::new(router);
    hyper::service::service_fn(move |req| -> TrackedResponse {
        use hyper::service::Service;
        conn.request_started();
        let response = inner.call(req);
        let conn = conn.clone();
        Box::pin(async move {
            let response = response.await;
            conn.response_ready();
            response
        })
    })
}

/// A response on its way out of the handler.
type TrackedResponse =
    std::pin::Pin<Box<dyn Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send>>;

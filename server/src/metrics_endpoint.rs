//! The job's `/metrics` endpoint (`hotlist run --metrics-addr`): `GET /metrics` on a thread of
//! its own (a small current-thread runtime), behind the same connection guard as `hotlist
//! serve` (`listener`): header and idle timeouts, and a connection limit past which the
//! longest-idle connection is closed.
//!
//! Why the guard matters more here than anywhere: the job's file descriptors are its
//! checkpoints, pane files, S3 and Kafka connections. With a plain `axum::serve`, idle sockets
//! held open against this port would take them all, and the job's next checkpoint would fail.
//! A scraper needs one connection; [`DEFAULT_MAX_CONNECTIONS`] leaves room for a few.

use crate::limits::ConnectionLimits;
use crate::metrics::{render_connections, ConnectionMetrics};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use std::net::SocketAddr;
use std::sync::Arc;

/// Default connection limit of the job's metrics endpoint (`--metrics-max-connections`): a
/// few scrapers and a curl, far below any open-file limit.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// The metrics endpoint's default limits: `serve`'s timeouts, [`DEFAULT_MAX_CONNECTIONS`].
pub fn default_limits() -> ConnectionLimits {
    ConnectionLimits {
        max_connections: DEFAULT_MAX_CONNECTIONS,
        ..ConnectionLimits::default()
    }
}

/// Serves `GET /metrics` with `render()` (followed by the guard's own connection metrics,
/// `hotlist_metrics_endpoint_open_connections` and
/// `hotlist_metrics_endpoint_connections_closed_total`) on `addr` from a background thread,
/// under `limits`. Returns the bound address (useful with port 0).
pub fn serve(
    addr: SocketAddr,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    limits: ConnectionLimits,
) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let connections = Arc::new(ConnectionMetrics::new("hotlist_metrics_endpoint"));
    let app = {
        let connections = connections.clone();
        axum::Router::new()
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let text = format!("{}{}", render(), render_connections(&connections));
                    async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
                }),
            )
            .fallback(|| async { (StatusCode::NOT_FOUND, "only /metrics here\n").into_response() })
    };
    std::thread::Builder::new()
        .name("hotlist-metrics".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("metrics endpoint: cannot start a runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    // runs as long as the job: the process exits with it
                    Ok(l) => crate::listener::serve(l, app, limits, connections, std::future::pending()).await,
                    Err(e) => tracing::error!("metrics endpoint: {e}"),
                }
            });
        })?;
    Ok(bound)
}

//! API metrics in the Prometheus text format, and a tiny `/metrics` endpoint for other
//! processes (the job exposes its own metrics through [`serve_text`]).

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};
use std::net::SocketAddr;
use std::sync::Arc;

/// The server's metrics.
pub struct ApiMetrics {
    registry: Registry,
    /// Request latency by route and status.
    pub requests: HistogramVec,
    /// Snapshot reloads (a new epoch committed).
    pub reloads: IntCounter,
    /// Time to poll (and reload) the store.
    pub refresh_seconds: Histogram,
    /// Epoch of the served snapshot (-1 before any commit).
    pub epoch: IntGauge,
    /// Open HTTP connections.
    pub open_connections: IntGauge,
    /// Connections the server closed, by reason (header_timeout, idle_timeout, evicted,
    /// refused, shutdown).
    pub connections_closed: IntCounterVec,
}

impl ApiMetrics {
    /// Registers the metrics.
    pub fn new() -> ApiMetrics {
        let registry = Registry::new();
        let buckets = vec![
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
        ];
        let requests = HistogramVec::new(
            HistogramOpts::new("hotlist_api_request_seconds", "API request latency").buckets(buckets.clone()),
            &["route", "status"],
        )
        .expect("valid metric");
        let reloads = IntCounter::new("hotlist_api_snapshot_reloads_total", "snapshot reloads").expect("valid metric");
        let refresh_seconds = Histogram::with_opts(
            HistogramOpts::new("hotlist_api_refresh_seconds", "store poll and reload time").buckets(buckets),
        )
        .expect("valid metric");
        let epoch = IntGauge::new("hotlist_api_snapshot_epoch", "committed epoch being served").expect("valid metric");
        let open_connections =
            IntGauge::new("hotlist_api_open_connections", "open HTTP connections").expect("valid metric");
        let connections_closed = IntCounterVec::new(
            Opts::new(
                "hotlist_api_connections_closed_total",
                "connections the server closed, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        for m in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(reloads.clone()),
            Box::new(refresh_seconds.clone()),
            Box::new(epoch.clone()),
            Box::new(open_connections.clone()),
            Box::new(connections_closed.clone()),
        ] {
            registry.register(m).expect("unique metric names");
        }
        ApiMetrics {
            registry,
            requests,
            reloads,
            refresh_seconds,
            epoch,
            open_connections,
            connections_closed,
        }
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        render_registry(&self.registry)
    }
}

impl Default for ApiMetrics {
    fn default() -> Self {
        ApiMetrics::new()
    }
}

/// Renders a registry in the text format.
pub fn render_registry(registry: &Registry) -> String {
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut buf) {
        return format!("# error encoding metrics: {e}\n");
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Serves `GET /metrics` with `render()` on `addr` from a background thread (its own small
/// runtime). Returns the bound address (useful with port 0).
pub fn serve_text(addr: SocketAddr, render: Arc<dyn Fn() -> String + Send + Sync>) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
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
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!("metrics endpoint: {e}");
                        return;
                    }
                };
                let app = axum::Router::new().route(
                    "/metrics",
                    axum::routing::get(move || {
                        let render = render.clone();
                        async move {
                            (
                                [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                                render(),
                            )
                        }
                    }),
                );
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!("metrics endpoint stopped: {e}");
                }
            });
        })?;
    Ok(bound)
}

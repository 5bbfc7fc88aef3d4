//! API metrics in the Prometheus text format, and the connection guard's metrics (also used by
//! the job's `/metrics` endpoint, `crate::metrics_endpoint`).

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};
use std::sync::Arc;

/// The metrics of a connection guard (`listener`): open connections and the connections it
/// closed, by reason. `hotlist serve` names them `hotlist_api_…`, the job's metrics endpoint
/// `hotlist_metrics_endpoint_…`.
pub struct ConnectionMetrics {
    /// Open HTTP connections.
    pub open: IntGauge,
    /// Connections the server closed, by reason (header_timeout, idle_timeout, evicted,
    /// evicted_busy, refused, shutdown).
    pub closed: IntCounterVec,
}

impl ConnectionMetrics {
    /// The two series, named `<prefix>_open_connections` and `<prefix>_connections_closed_total`.
    pub fn new(prefix: &str) -> ConnectionMetrics {
        let open = IntGauge::new(format!("{prefix}_open_connections"), "open HTTP connections").expect("valid metric");
        let closed = IntCounterVec::new(
            Opts::new(
                format!("{prefix}_connections_closed_total"),
                "connections the server closed, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        ConnectionMetrics { open, closed }
    }

    fn collectors(&self) -> [Box<dyn prometheus::core::Collector>; 2] {
        [Box::new(self.open.clone()), Box::new(self.closed.clone())]
    }
}

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
    /// Open connections and connections closed (`hotlist_api_…`).
    pub connections: Arc<ConnectionMetrics>,
    /// Store lookups waiting for the history thread.
    pub history_queued: IntGauge,
    /// Store lookups not queued because the queue was full (answered 503).
    pub history_rejected: IntCounter,
    /// Queued lookups dropped unread because their request was gone (timed out, disconnected).
    pub history_abandoned: IntCounter,
    /// Per-group lists and group listings answered from the epoch cache, and read from the
    /// store (`result` = hit, miss).
    pub lookup_cache: IntCounterVec,
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
        let connections = Arc::new(ConnectionMetrics::new("hotlist_api"));
        let history_queued = IntGauge::new(
            "hotlist_api_history_queued",
            "store lookups waiting for the history thread",
        )
        .expect("valid metric");
        let history_rejected = IntCounter::new(
            "hotlist_api_history_rejected_total",
            "store lookups refused with 503 because the history queue was full",
        )
        .expect("valid metric");
        let history_abandoned = IntCounter::new(
            "hotlist_api_history_abandoned_total",
            "queued store lookups dropped unread because their request was gone",
        )
        .expect("valid metric");
        let lookup_cache = IntCounterVec::new(
            Opts::new(
                "hotlist_api_lookup_cache_total",
                "per-group lists and group listings answered from the epoch cache (hit) or read from the store (miss)",
            ),
            &["result"],
        )
        .expect("valid metric");
        let mut all: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(requests.clone()),
            Box::new(reloads.clone()),
            Box::new(refresh_seconds.clone()),
            Box::new(epoch.clone()),
            Box::new(history_queued.clone()),
            Box::new(history_rejected.clone()),
            Box::new(history_abandoned.clone()),
            Box::new(lookup_cache.clone()),
        ];
        all.extend(connections.collectors());
        for m in all {
            registry.register(m).expect("unique metric names");
        }
        ApiMetrics {
            registry,
            requests,
            reloads,
            refresh_seconds,
            epoch,
            connections,
            history_queued,
            history_rejected,
            history_abandoned,
            lookup_cache,
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

/// The connection guard's metrics alone, in the text format (for an endpoint that renders
/// the rest itself).
pub fn render_connections(m: &ConnectionMetrics) -> String {
    let registry = Registry::new();
    for c in m.collectors() {
        let _ = registry.register(c);
    }
    render_registry(&registry)
}

/// Renders a registry in the text format.
pub fn render_registry(registry: &Registry) -> String {
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut buf) {
        return format!("# error encoding metrics: {e}\n");
    }
    String::from_utf8_lossy(&buf).into_owned()
}

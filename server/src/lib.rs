//! hotlist's read side over HTTP: the API, the live page and metrics.
//!
//! Module map:
//! - [`cache`]: the snapshot of every window's latest list and the latest hot-key window,
//!   reloaded when an epoch commits, by
//!   a refresher that survives any failure of the store;
//! - [`history`]: the thread that answers lookups of older instances from the store;
//! - [`api`]: the API handlers (`/v1/top`, `/v1/hot`, `/v1/windows`, `/metrics`);
//! - [`probes`]: `/livez` (liveness), `/readyz` (readiness: the store is fresh), `/healthz`;
//! - [`lookup_cache`]: per-group latest lists and group listings, kept for one epoch;
//! - [`state`]: what every handler shares (`AppState`) and the lookup of a request's window;
//! - [`error`]: `ApiError`, every 4xx/5xx as a JSON body;
//! - [`groups`]: per-group lists: the group a `/v1/top` request names, and `/v1/groups`;
//! - [`page`]: the live page at `/` and its Content-Security-Policy;
//! - [`middleware`]: what wraps every handler (latency metric, request timeout, `nosniff`);
//! - [`limits`]: the connection limits and timeouts, and their defaults;
//! - `listener` and `connections`: the accept loop and per-connection tasks that enforce them;
//! - `panics`: contains panics of store readers;
//! - `fake_store` (tests only): a store reader that fails, panics or corrupts on demand;
//! - [`metrics`]: Prometheus metrics;
//! - [`metrics_endpoint`]: the job's `/metrics` endpoint, behind the same connection guard.
//!
//! Shape (after mini-redis): [`run`] takes a bound listener and a shutdown future, so tests run
//! the real server on `127.0.0.1:0`; the binary only parses flags, binds and calls it.
#![deny(missing_docs)]
// No product function over 80 lines (the threshold is in clippy.toml); tests may be longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod api;
pub mod cache;
mod connections;
pub mod error;
#[cfg(test)]
mod fake_store;
pub mod groups;
pub mod history;
pub mod limits;
mod listener;
pub mod lookup_cache;
pub mod metrics;
pub mod metrics_endpoint;
pub mod middleware;
pub mod page;
mod panics;
pub mod probes;
pub mod state;

use axum::routing::get;
use axum::Router;
use cache::{Cache, ReaderFactory};
use limits::ConnectionLimits;
use state::AppState;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// How to serve.
pub struct ServeOptions {
    /// The job whose lists are served.
    pub job: String,
    /// Opens a store reader (called again after errors).
    pub open: Arc<dyn Fn() -> Result<Box<dyn hotlist_sinks::StoreReader>, hotlist_sinks::SinkError> + Send + Sync>,
    /// How often to poll the store for a new commit (the binary refuses less than
    /// [`limits::MIN_POLL`]).
    pub poll: Duration,
    /// History lookups waiting at most (past it a lookup is answered 503 with `Retry-After`).
    pub history_queue: usize,
    /// `Cache-Control: max-age` for lists that may still change (the job's emit interval).
    pub max_age: Duration,
    /// Timeouts and the connection limit, used as given (the binary caps `max_connections` to
    /// the open-file limit with [`limits::cap_to_open_files`]).
    pub limits: ConnectionLimits,
}

/// The router, for a given state.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(page::page))
        .route("/v1/top", get(api::top))
        .route("/v1/hot", get(api::hot))
        .route("/v1/windows", get(api::windows))
        .route("/v1/groups", get(groups::groups))
        .route("/livez", get(probes::livez))
        .route("/readyz", get(probes::readyz))
        .route("/healthz", get(probes::healthz))
        .route("/metrics", get(api::metrics))
        .fallback(api::not_found)
        // the last layer added runs first: the latency metric sees the timeout's 503
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::request_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(state.clone(), middleware::timed))
        .layer(axum::middleware::map_response(middleware::nosniff))
        .with_state(state)
}

/// Serves until `shutdown` completes: starts the refresher thread, then the HTTP server; when
/// it returns, open connections have finished and the refresher has stopped (or, stuck on a
/// store that does not answer, been left behind after [`REFRESHER_STOP_WAIT`]).
pub async fn run(
    listener: tokio::net::TcpListener,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let cache = Arc::new(Cache::default());
    let metrics = Arc::new(metrics::ApiMetrics::new());
    let stop = Arc::new(AtomicBool::new(false));
    let open = options.open.clone();
    let factory: ReaderFactory = Box::new(move || open());
    let refresher = {
        let (cache, job, stop, m) = (cache.clone(), options.job.clone(), stop.clone(), metrics.clone());
        std::thread::Builder::new()
            .name("hotlist-refresh".into())
            .spawn(move || {
                cache::refresh_loop(cache, factory, job, options.poll, stop, |reloaded, took| {
                    m.refresh_seconds.observe(took.as_secs_f64());
                    if reloaded {
                        m.reloads.inc();
                    }
                })
            })?
    };
    let open = options.open.clone();
    let state = Arc::new(AppState {
        job: options.job,
        cache,
        history: history::HistoryWorker::start(Box::new(move || open()), options.history_queue, metrics.clone())?,
        lookups: lookup_cache::LookupCache::default(),
        max_age: options.max_age,
        request_timeout: options.limits.request_timeout,
        metrics: metrics.clone(),
    });
    listener::serve(
        listener,
        router(state),
        options.limits,
        metrics.connections.clone(),
        shutdown,
    )
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // The refresher only reads: wait briefly for it, but never for a call to a frozen store
    // (up to sink.statement_timeout + 5 s, past a pod's grace period); the process exits anyway.
    let deadline = std::time::Instant::now() + REFRESHER_STOP_WAIT;
    while !refresher.is_finished() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    if refresher.is_finished() {
        let _ = refresher.join();
    } else {
        tracing::warn!("the store refresher is still waiting for the store; exiting without it");
    }
    Ok(())
}

/// How long shutting down waits for the refresher to finish its current store call.
const REFRESHER_STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;
    use fake_store::{Behaviour, FakeStore};
    use std::time::Instant;

    /// A request whose handler outlasts the request timeout (a history lookup on a store that
    /// hangs) is answered 503 with a JSON error when the timeout passes, and counted as such.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_handler_is_answered_503_at_the_request_timeout() {
        let store = FakeStore::new();
        let options = ServeOptions {
            job: "job".into(),
            open: Arc::new(store.opener()),
            poll: Duration::from_millis(5),
            history_queue: limits::DEFAULT_HISTORY_QUEUE,
            max_age: Duration::from_secs(1),
            limits: ConnectionLimits {
                request_timeout: Duration::from_millis(300),
                ..ConnectionLimits::default()
            },
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(run(listener, options, async {
            let _ = stopped.await;
        }));
        let client = reqwest::Client::new();
        let get = |path: &str| client.get(format!("{base}{path}")).send();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let windows: serde_json::Value = get("/v1/windows").await.expect("get").json().await.expect("json");
            if windows["epoch"] == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "never served epoch 1: {windows}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        store.set(1, Behaviour::Slow);
        let asked = Instant::now();
        let r = get("/v1/top?window=1m&at=120000").await.expect("get");
        let took = asked.elapsed();
        assert_eq!(r.status(), 503);
        let body: serde_json::Value = r.json().await.expect("json");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("took longer than 300ms")),
            "{body}"
        );
        assert!(
            took < Duration::from_millis(1500),
            "answered at the timeout, not after the store: {took:?}"
        );
        let metrics = get("/metrics").await.expect("get").text().await.expect("text");
        assert!(metrics.contains("route=\"/v1/top\",status=\"503\""), "{metrics}");
        store.set(1, Behaviour::Good);
        let _ = stop.send(());
        server.await.expect("join").expect("server ran");
    }
}

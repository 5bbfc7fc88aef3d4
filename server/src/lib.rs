//! hotlist's read side over HTTP: the API, the live page and metrics.
//!
//! Module map:
//! - [`cache`]: the snapshot of every window's latest list, reloaded when an epoch commits;
//! - [`api`]: the handlers (`/v1/top`, `/v1/windows`, `/healthz`, `/metrics`, `/`);
//! - [`metrics`]: Prometheus metrics, and a small `/metrics` endpoint other processes reuse.
//!
//! Shape (after mini-redis): [`run`] takes a bound listener and a shutdown future, so tests run
//! the real server on `127.0.0.1:0`; the binary only parses flags, binds and calls it.
#![deny(missing_docs)]

pub mod api;
pub mod cache;
pub mod metrics;

use api::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use cache::{Cache, ReaderFactory};
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to serve.
pub struct ServeOptions {
    /// The job whose lists are served.
    pub job: String,
    /// Opens a store reader (called again after errors).
    pub open: Arc<dyn Fn() -> Result<Box<dyn hotlist_sinks::StoreReader>, hotlist_sinks::SinkError> + Send + Sync>,
    /// How often to poll the store for a new commit.
    pub poll: Duration,
    /// `Cache-Control: max-age` for lists that may still change (the job's emit interval).
    pub max_age: Duration,
}

/// The router, for a given state.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(api::page))
        .route("/v1/top", get(api::top))
        .route("/v1/windows", get(api::windows))
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(api::metrics))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), timed))
        .with_state(state)
}

async fn timed(State(app): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "other".into());
    let started = Instant::now();
    let resp = next.run(req).await;
    app.metrics
        .requests
        .with_label_values(&[route.as_str(), resp.status().as_str()])
        .observe(started.elapsed().as_secs_f64());
    resp
}

/// Serves until `shutdown` completes: starts the refresher thread, then the HTTP server.
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
        history: api::HistoryWorker::start(Box::new(move || open()))?,
        max_age: options.max_age,
        metrics,
    });
    let result = axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = refresher.join();
    result
}

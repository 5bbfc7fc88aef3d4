//! The probes: `/livez` (the process serves: for a liveness probe), `/readyz` (the store is
//! fresh: for a readiness probe) and `/healthz` (the same as `/readyz`, kept for existing
//! probes and monitors).
//!
//! Why two: a store outage is not a reason to restart a server. It keeps serving its last
//! snapshot, which is exactly what it is for; a liveness probe that failed with the store would
//! restart every serving pod at once and throw those snapshots away. So liveness asks only
//! whether this process can still answer and still tries to refresh; readiness (whether to
//! send it traffic) asks whether what it serves is fresh.

use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// How recently the store must have answered for `/readyz` (and `/healthz`) to be 200.
pub const READY_WITHIN: Duration = Duration::from_secs(10);

/// `GET /livez`: 200 while the refresher thread runs (the handler answering shows the runtime
/// does), else 503. Says nothing about the store.
pub async fn livez(State(app): State<Arc<AppState>>) -> Response {
    let running = app.cache.refresher_running();
    let body = json!({
        "status": if running { "alive" } else { "refresher stopped" },
        "epoch": app.cache.get().epoch,
    });
    let code = match running {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (code, axum::Json(body)).into_response()
}

/// `GET /readyz`: 200 while the store answered within [`READY_WITHIN`], else 503 (the last
/// snapshot is still served); `last_error` says why the last refresh failed.
pub async fn readyz(State(app): State<Arc<AppState>>) -> Response {
    let (age, err) = app.cache.health();
    let s = app.cache.get();
    let ready = age.is_some_and(|a| a < READY_WITHIN);
    let body = json!({
        "status": if ready { "ok" } else { "degraded" },
        "epoch": s.epoch,
        "store_answered_ms_ago": age.map(|a| a.as_millis() as u64),
        "last_error": err,
    });
    let code = match ready {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (code, axum::Json(body)).into_response()
}

/// `GET /healthz`: `/readyz`, under its old name (503 when the store is stale: do not use it
/// for liveness).
pub async fn healthz(state: State<Arc<AppState>>) -> Response {
    readyz(state).await
}

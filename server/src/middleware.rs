//! What wraps every handler: the request latency metric, the request timeout, and
//! `X-Content-Type-Options: nosniff` (browsers must not guess a type other than the one sent,
//! e.g. run a JSON error that echoes user input as HTML).

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Instant;

/// Observes each request's latency by route and status.
pub async fn timed(State(app): State<Arc<AppState>>, req: Request, next: Next) -> Response {
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

/// Answers 503 (JSON) when the handler takes longer than the request timeout; the handler is
/// dropped (a history lookup it queued is then skipped by the history thread, unread; one
/// already being read finishes there, unseen).
pub async fn request_timeout(State(app): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(app.request_timeout, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => ApiError::unavailable(format!(
            "the request took longer than {:?}; try again later",
            app.request_timeout
        ))
        .into_response(),
    }
}

/// Adds `X-Content-Type-Options: nosniff`.
pub async fn nosniff(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

//! `ApiError`: every 4xx/5xx the API answers, as a JSON body `{"error": "...", "parameter":
//! "..."}` that is never cached. A 503 for a full history queue also says `Retry-After`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A 4xx/5xx with a JSON body.
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) parameter: Option<&'static str>,
    /// Seconds for `Retry-After` (a 503 that will likely succeed shortly).
    pub(crate) retry_after: Option<u32>,
}

impl ApiError {
    pub(crate) fn bad(parameter: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            parameter: Some(parameter),
            retry_after: None,
        }
    }
    pub(crate) fn not_found(parameter: Option<&'static str>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
            parameter,
            retry_after: None,
        }
    }
    pub(crate) fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
            parameter: None,
            retry_after: None,
        }
    }
}

/// Seconds a client refused by a full history queue is asked to wait: lookups take
/// milliseconds, so the queue has drained by then unless the store is down.
pub const BUSY_RETRY_AFTER_SECS: u32 = 1;

impl From<crate::history::LookupError> for ApiError {
    fn from(e: crate::history::LookupError) -> ApiError {
        let busy = matches!(e, crate::history::LookupError::Busy { .. });
        ApiError {
            retry_after: busy.then_some(BUSY_RETRY_AFTER_SECS),
            ..ApiError::unavailable(e.to_string())
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match self.parameter {
            Some(p) => json!({"error": self.message, "parameter": p}),
            None => json!({"error": self.message}),
        };
        let mut r = (self.status, axum::Json(body)).into_response();
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(s) = self.retry_after {
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

//! `ApiError`: every 4xx/5xx the API answers, as a JSON body `{"error": "...", "parameter":
//! "..."}` that is never cached.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A 4xx/5xx with a JSON body.
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) parameter: Option<&'static str>,
}

impl ApiError {
    pub(crate) fn bad(parameter: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            parameter: Some(parameter),
        }
    }
    pub(crate) fn not_found(parameter: Option<&'static str>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
            parameter,
        }
    }
    pub(crate) fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
            parameter: None,
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
        r
    }
}

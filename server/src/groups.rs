//! Per-group lists in the API: which group a `/v1/top` request names, and `GET /v1/groups`.
//!
//! A window with `by` dims keeps one list per group. `/v1/top?window=W&country=US` names the
//! group by one query parameter per `by` dim (all of them; missing ones are a 400 naming them),
//! or by its canonical key `group=country=US` (`group=(other)` for the overflow group). A
//! parameter naming a `by` dim of another window of the job, on a window without it, is a 400
//! naming it; other unknown parameters are ignored like elsewhere (cache busters).

use crate::error::ApiError;
use crate::state::{find_window, AppState};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use hotlist_operators::group::GroupKey;
use hotlist_sinks::StoredWindow;
use serde_json::json;
use std::sync::Arc;

/// The group a request names for window `spec`: `extra` are its parameters other than
/// `window`, `k`, `date`, `at`; `windows` all of the job's windows.
pub(crate) fn select_group(
    windows: &[StoredWindow],
    spec: &StoredWindow,
    extra: &[(String, String)],
) -> Result<GroupKey, ApiError> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    let mut key: Option<&str> = None;
    for (name, value) in extra {
        if name == "group" {
            if key.replace(value).is_some() {
                return Err(ApiError::bad("group", "group given more than once"));
            }
        } else if spec.by.contains(name) {
            if pairs.iter().any(|(n, _)| n == name) {
                return Err(ApiError::bad("group", format!("{name} given more than once")));
            }
            pairs.push((name, value));
        } else if windows.iter().any(|w| w.by.contains(name)) {
            return Err(ApiError::bad("group", not_a_dim(spec, name)));
        }
    }
    if let Some(key) = key {
        if !pairs.is_empty() {
            return Err(ApiError::bad("group", "give the group or its dims, not both"));
        }
        return group_of_key(spec, key);
    }
    if spec.by.is_empty() {
        return Ok(GroupKey::global());
    }
    let missing: Vec<&str> = spec
        .by
        .iter()
        .map(String::as_str)
        .filter(|d| !pairs.iter().any(|(n, _)| n == d))
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::bad(
            "group",
            format!(
                "window {:?} keeps one list per {}: give {} (see /v1/groups?window={})",
                spec.name,
                spec.by.join(", "),
                missing
                    .iter()
                    .map(|d| format!("{d}=…"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                spec.name
            ),
        ));
    }
    Ok(GroupKey::from_pairs(pairs))
}

/// The message for a parameter naming a dim the window is not grouped by.
fn not_a_dim(spec: &StoredWindow, name: &str) -> String {
    match spec.by.is_empty() {
        true => format!("window {:?} has no groups: {name} is not one of its dims", spec.name),
        false => format!(
            "{name} is not a dim of window {:?} (its dims: {})",
            spec.name,
            spec.by.join(", ")
        ),
    }
}

/// A canonical group key given as `group=`, checked against the window's dims.
fn group_of_key(spec: &StoredWindow, key: &str) -> Result<GroupKey, ApiError> {
    let pairs = GroupKey::parse(key).map_err(|e| ApiError::bad("group", format!("group {key:?}: {e}")))?;
    if spec.by.is_empty() && !key.is_empty() {
        return Err(ApiError::bad("group", format!("window {:?} has no groups", spec.name)));
    }
    if let Some(pairs) = pairs {
        let names: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
        if names != spec.by.iter().map(String::as_str).collect::<Vec<_>>() {
            return Err(ApiError::bad(
                "group",
                format!(
                    "group {key:?} does not name window {:?}'s dims ({})",
                    spec.name,
                    spec.by.join(", ")
                ),
            ));
        }
    }
    Ok(GroupKey::from_stored(key.to_string()))
}

/// A group as the API's JSON: its key, and its dims' values (none for `(other)`).
pub fn group_json(g: &GroupKey) -> serde_json::Value {
    match GroupKey::parse(g.as_str()) {
        Ok(Some(pairs)) => {
            let dims: serde_json::Map<String, serde_json::Value> =
                pairs.into_iter().map(|(n, v)| (n, json!(v))).collect();
            json!({"key": g.as_str(), "dims": dims})
        }
        _ => json!({"key": g.as_str(), "other": true}),
    }
}

/// `GET /v1/groups?window=W`: the groups of the window's latest instance, in key order.
pub async fn groups(State(app): State<Arc<AppState>>, RawQuery(raw): RawQuery) -> Response {
    match groups_inner(&app, raw.as_deref()).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn groups_inner(app: &Arc<AppState>, raw: Option<&str>) -> Result<Response, ApiError> {
    let window = form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "window")
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| ApiError::bad("window", "window is required, e.g. ?window=5m"))?;
    let snapshot = app.cache.get();
    let spec = find_window(&snapshot, &window)?;
    let found = app
        .history
        .groups(&app.job, &spec.name)
        .await
        .map_err(ApiError::unavailable)?;
    let (start, groups) = match found {
        Some((start, groups)) => (Some(start.0), groups),
        None => (None, Vec::new()),
    };
    let groups: Vec<serde_json::Value> = groups.iter().map(group_json).collect();
    let body = json!({"window": spec.name, "by": spec.by, "window_start": start, "groups": groups});
    let mut r = axum::Json(body).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(r)
}

//! Per-group lists in the API: which group a `/v1/top` request names, and `GET /v1/groups`.
//!
//! A window with `by` dims keeps one list per group. `/v1/top?window=W&country=US` names the
//! group by one query parameter per `by` dim (all of them; missing ones are a 400 naming them),
//! or by its canonical key `group=country=US` (`group=(other)` for the overflow group). A
//! parameter naming a `by` dim of another window of the job, on a window without it, is a 400
//! naming it; other unknown parameters are ignored like elsewhere (cache busters).

use crate::error::ApiError;
use crate::lookup_cache::Groups;
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

/// Groups `/v1/groups` lists when no `limit` is given.
pub const DEFAULT_GROUPS_LIMIT: usize = 1000;
/// The largest `limit` of `/v1/groups` (page on with `after` for more).
pub const MAX_GROUPS_LIMIT: usize = 10_000;

/// `GET /v1/groups?window=W[&limit=N][&after=KEY]`: the groups of the window's latest instance,
/// in key order: at most `limit` of them (default [`DEFAULT_GROUPS_LIMIT`], at most
/// [`MAX_GROUPS_LIMIT`]), those after the key `after` if given. `truncated` says whether groups
/// were left out, `next_after` the key to pass as `after` for the next page (null on the last
/// page; when `truncated` is true anyway, the instance has more groups than the server reads,
/// [`hotlist_sinks::store::MAX_GROUPS_READ`]). The listing is read from the store once per epoch.
pub async fn groups(State(app): State<Arc<AppState>>, RawQuery(raw): RawQuery) -> Response {
    match groups_inner(&app, raw.as_deref()).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Parsed `/v1/groups` parameters.
struct GroupsParams {
    window: String,
    limit: usize,
    after: Option<String>,
}

fn parse_groups(raw: Option<&str>) -> Result<GroupsParams, ApiError> {
    let (mut window, mut limit, mut after) = (None, None, None);
    for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        let (slot, name) = match key.as_ref() {
            "window" => (&mut window, "window"),
            "limit" => (&mut limit, "limit"),
            "after" => (&mut after, "after"),
            _ => continue,
        };
        if slot.replace(value.into_owned()).is_some() {
            return Err(ApiError::bad(name, format!("{name} given more than once")));
        }
    }
    let window = window.ok_or_else(|| ApiError::bad("window", "window is required, e.g. ?window=5m"))?;
    let limit = match limit {
        None => DEFAULT_GROUPS_LIMIT,
        Some(l) => match l.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_GROUPS_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::bad(
                    "limit",
                    format!("limit must be an integer from 1 to {MAX_GROUPS_LIMIT}"),
                ))
            }
        },
    };
    Ok(GroupsParams { window, limit, after })
}

async fn groups_inner(app: &Arc<AppState>, raw: Option<&str>) -> Result<Response, ApiError> {
    let p = parse_groups(raw)?;
    let snapshot = app.cache.get();
    let spec = find_window(&snapshot, &p.window)?;
    let listing = match app.lookups.groups(snapshot.epoch, &spec.name) {
        Some(cached) => {
            app.metrics.lookup_cache.with_label_values(&["hit"]).inc();
            cached
        }
        None => {
            app.metrics.lookup_cache.with_label_values(&["miss"]).inc();
            let read = app.history.groups(&app.job, &spec.name).await?;
            let listing = Arc::new(match read {
                Some((start, mut keys)) => {
                    // byte order, whatever the store's collation: `after` pages by it
                    keys.sort_unstable();
                    Groups {
                        start: Some(start),
                        read_capped: keys.len() >= hotlist_sinks::store::MAX_GROUPS_READ,
                        keys,
                    }
                }
                None => Groups::default(),
            });
            app.lookups.put_groups(snapshot.epoch, &spec.name, listing.clone());
            listing
        }
    };
    let from = match &p.after {
        // keys are sorted: the first one after `after`
        Some(after) => listing.keys.partition_point(|k| k.as_str() <= after.as_str()),
        None => 0,
    };
    let page = &listing.keys[from.min(listing.keys.len())..];
    let shown = &page[..page.len().min(p.limit)];
    let more = shown.len() < page.len();
    let body = json!({
        "window": spec.name,
        "by": spec.by,
        "window_start": listing.start.map(|s| s.0),
        "groups": shown.iter().map(group_json).collect::<Vec<_>>(),
        "limit": p.limit,
        "truncated": more || listing.read_capped,
        "next_after": if more { shown.last().map(|k| k.as_str()) } else { None },
    });
    let mut r = axum::Json(body).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(r)
}

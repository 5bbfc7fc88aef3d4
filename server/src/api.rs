//! The API handlers: `/v1/top`, `/v1/hot`, `/v1/windows`, `/metrics`, and the 404 fallback
//! (`/v1/groups` and the group parameters of `/v1/top` are in `crate::groups`; the probes
//! `/livez`, `/readyz`, `/healthz` in `crate::probes`).
//!
//! Every user-input problem is a 4xx with a JSON body `{"error": "...", "parameter": "..."}`;
//! store trouble on a history lookup is a 503; nothing a client sends can cause a 500.
//! `k` above the window's K is a 400 (not silently capped): a client asking for 500 items from
//! a K=100 window should learn that it gets at most 100.

use crate::cache::Snapshot;
use crate::error::ApiError;
use crate::state::{find_window, AppState};
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hotlist_operators::certify::Certificate;
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::record::{ListState, RankedItem, SketchCheck};
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{StoredList, StoredWindow};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Parsed `/v1/top` parameters.
#[derive(Debug, Default)]
struct TopParams {
    window: Option<String>,
    k: Option<String>,
    date: Option<String>,
    at: Option<String>,
    /// The other parameters (a per-group window's dims among them).
    extra: Vec<(String, String)>,
}

fn parse_top(raw: Option<&str>) -> Result<TopParams, ApiError> {
    let mut p = TopParams::default();
    for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        let slot = match key.as_ref() {
            "window" => (&mut p.window, "window"),
            "k" => (&mut p.k, "k"),
            "date" => (&mut p.date, "date"),
            "at" => (&mut p.at, "at"),
            // dims select a group (`crate::groups`); other unknown parameters are ignored
            // (cache busters, tracking tags)
            _ => {
                p.extra.push((key.into_owned(), value.into_owned()));
                continue;
            }
        };
        if slot.0.is_some() {
            return Err(ApiError::bad(slot.1, format!("{} given more than once", slot.1)));
        }
        *slot.0 = Some(value.into_owned());
    }
    Ok(p)
}

/// `GET /v1/top?window=W[&k=N][&date=YYYY-MM-DD | &at=TIME]`.
pub async fn top(State(app): State<Arc<AppState>>, RawQuery(raw): RawQuery, headers: HeaderMap) -> Response {
    match top_inner(&app, raw.as_deref(), &headers).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn top_inner(app: &Arc<AppState>, raw: Option<&str>, headers: &HeaderMap) -> Result<Response, ApiError> {
    let p = parse_top(raw)?;
    let snapshot = app.cache.get();
    let window = p
        .window
        .as_deref()
        .ok_or_else(|| ApiError::bad("window", "window is required, e.g. ?window=5m"))?;
    let spec = find_window(&snapshot, window)?;
    let group = crate::groups::select_group(&snapshot.windows, spec, &p.extra)?;
    let k = parse_k(p.k.as_deref(), spec.k)?;
    let at = parse_at(p.date.as_deref(), p.at.as_deref())?;
    let list = match group.is_global() {
        true => resolve_list(app, &snapshot, spec, at).await?,
        false => resolve_group_list(app, snapshot.epoch, spec, &group, at).await?,
    };
    // as_of tells apart equal revision numbers of different runs over the same store
    let etag = format!(
        "\"{}-{}-{}-{}-{}-{}\"",
        list.window,
        list.group.as_str(),
        list.start.0,
        list.revision,
        list.as_of.0,
        k
    );
    let immutable = at.is_some() && never_changes(&list);
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag))
    {
        let mut r = StatusCode::NOT_MODIFIED.into_response();
        set_cache_headers(&mut r, &etag, immutable, app.max_age);
        return Ok(r);
    }
    let body = list_json(&list, k);
    let mut r = Response::new(Body::from(body));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    set_cache_headers(&mut r, &etag, immutable, app.max_age);
    Ok(r)
}

/// Whether a stored list can never change again, so that a URL naming its instance may be
/// cached forever (`immutable`). Only a final list that is exact: an approximate final list
/// of an `exact_at_seal` window is replaced by its exact revision after the replay, and the
/// store does not say which approximate final lists will be (the window's mode is not stored,
/// nor a replay that gave up), so none is immutable. "Latest" is never immutable either (the
/// caller checks): it moves on to the next instance.
pub fn never_changes(list: &StoredList) -> bool {
    list.state == ListState::Final && list.exact
}

/// A group's list: its latest (from the lookup cache while the snapshot's epoch is served,
/// else from the store), or its instance for `at` (from the store).
async fn resolve_group_list(
    app: &Arc<AppState>,
    epoch: Option<u64>,
    spec: &StoredWindow,
    group: &GroupKey,
    at: Option<Millis>,
) -> Result<Arc<StoredList>, ApiError> {
    let window = spec.name.as_str();
    let found = match at {
        None => match app.lookups.list(epoch, window, group) {
            Some(cached) => {
                app.metrics.lookup_cache.with_label_values(&["hit"]).inc();
                cached
            }
            None => {
                app.metrics.lookup_cache.with_label_values(&["miss"]).inc();
                let read = app.history.latest_of(&app.job, window, group).await?.map(Arc::new);
                app.lookups.put_list(epoch, window, group, read.clone());
                read
            }
        },
        Some(t) => {
            let start = window_spec(spec).start_for_query(t);
            app.history
                .instance_of(&app.job, window, group, start)
                .await?
                .map(Arc::new)
        }
    };
    found.ok_or_else(|| {
        ApiError::not_found(
            Some("group"),
            format!("window {window:?} has no list for group {:?}", group.as_str()),
        )
    })
}

/// The window as the operators' spec (for its instance arithmetic).
fn window_spec(spec: &StoredWindow) -> WindowSpec {
    WindowSpec {
        rank: Default::default(),
        key: Default::default(),
        name: spec.name.clone(),
        size: spec.size,
        slide: spec.slide,
        k: spec.k,
    }
}

/// `k`: 1 to the window's K (the window's K when absent).
fn parse_k(raw: Option<&str>, window_k: usize) -> Result<usize, ApiError> {
    match raw {
        None => Ok(window_k),
        Some(s) => match s.trim().parse::<u64>() {
            Ok(0) | Err(_) => Err(ApiError::bad("k", format!("k must be an integer from 1 to {window_k}"))),
            Ok(k) if k > window_k as u64 => Err(ApiError::bad(
                "k",
                format!("k must be at most {window_k} (the window's K)"),
            )),
            Ok(k) => Ok(k as usize),
        },
    }
}

/// The instant a `date` or `at` parameter names (at most one of them), if any.
fn parse_at(date: Option<&str>, at: Option<&str>) -> Result<Option<Millis>, ApiError> {
    match (date, at) {
        (Some(_), Some(_)) => Err(ApiError::bad("at", "give date or at, not both")),
        (Some(d), None) => Ok(Some(
            Millis::parse_date(d).ok_or_else(|| ApiError::bad("date", "date must be YYYY-MM-DD"))?,
        )),
        (None, Some(t)) => Ok(Some(Millis::parse_user(t).ok_or_else(|| {
            ApiError::bad("at", "at must be an RFC 3339 time with an offset, or milliseconds")
        })?)),
        (None, None) => Ok(None),
    }
}

/// The list a request names: the window's latest (from the snapshot), or the instance for `at`.
async fn resolve_list(
    app: &Arc<AppState>,
    snapshot: &Snapshot,
    spec: &StoredWindow,
    at: Option<Millis>,
) -> Result<Arc<StoredList>, ApiError> {
    let window = spec.name.as_str();
    Ok(match at {
        None => snapshot
            .latest
            .get(window)
            .cloned()
            .ok_or_else(|| ApiError::not_found(None, format!("window {window:?} has no list yet")))?,
        Some(t) => {
            let start = window_spec(spec).start_for_query(t);
            // The latest instance is in the snapshot: no database round trip for it either.
            match snapshot.latest.get(window).filter(|l| l.start == start) {
                Some(l) => l.clone(),
                None => Arc::new(history(app, window, start).await?.ok_or_else(|| {
                    ApiError::not_found(
                        None,
                        format!("window {window:?} has no list for the instance starting {start}"),
                    )
                })?),
            }
        }
    })
}

async fn history(app: &Arc<AppState>, window: &str, start: Millis) -> Result<Option<StoredList>, ApiError> {
    Ok(app.history.instance(&app.job, window, start).await?)
}

fn set_cache_headers(r: &mut Response, etag: &str, immutable: bool, max_age: Duration) {
    if let Ok(v) = HeaderValue::from_str(etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    let cc = if immutable {
        "public, max-age=31536000, immutable".to_string()
    } else {
        format!("public, max-age={}", max_age.as_secs().max(1))
    };
    if let Ok(v) = HeaderValue::from_str(&cc) {
        r.headers_mut().insert(header::CACHE_CONTROL, v);
    }
}

/// The list as the API's JSON: what the store holds, the first `k` items, and what the list is
/// (`exact`, `error_bound`, `sketch_check` when a sketch was compared with it, and
/// `certificate` when a sketch-guided replay proved a sketch window's final list exact:
/// `{"threshold": T, "counted": N, "passes": P}`, see [`certificate_json`]). A field that does
/// not apply is left out.
pub fn list_json(l: &StoredList, k: usize) -> String {
    let mut v = json!({
        "window": l.window,
        "window_start": l.start.0,
        "window_end": l.end.0,
        "as_of": l.as_of.to_rfc3339(),
        "revision": l.revision,
        "state": l.state.as_str(),
        "final": l.state == ListState::Final,
        "exact": l.exact,
        "error_bound": l.error_bound,
        "items": l.items.iter().take(k).map(item_json).collect::<Vec<_>>(),
    });
    if let Some(c) = &l.sketch_check {
        v["sketch_check"] = sketch_check_json(c);
    }
    if let Some(c) = &l.certificate {
        v["certificate"] = certificate_json(c);
    }
    if !l.group.is_global() {
        v["group"] = crate::groups::group_json(&l.group);
    }
    v.to_string()
}

/// A listed item as the API's and `hotlist query --json`'s JSON: `item_id` and `count`, and
/// for an item of a trend list (docs/trends.md) `baseline` (its counts in the instances before,
/// summed), `score` (z), `ratio` ("× usual": `(count + 1) / (baseline / W + 1)`) and
/// `history` (those counts, oldest first, for a sparkline).
pub fn item_json(r: &RankedItem) -> serde_json::Value {
    let mut v = json!({"item_id": r.item_id.as_str(), "count": r.count});
    if let Some(t) = &r.trend {
        let w = u32::try_from(t.history.len()).unwrap_or(u32::MAX);
        v["baseline"] = json!(t.baseline());
        v["score"] = json!(hotlist_operators::trend::score(r.count, t.baseline(), w));
        v["ratio"] = json!(hotlist_operators::trend::ratio(r.count, t.baseline(), w));
        v["history"] = json!(t.history);
    }
    v
}

/// A sketch check as the API's and `hotlist query --json`'s JSON: recall@K (`found / of`), what
/// it compared, and the largest and the mean over-count of the sketch's counts.
pub fn sketch_check_json(c: &SketchCheck) -> serde_json::Value {
    json!({
        "recall": c.recall(),
        "found": c.found,
        "of": c.of,
        "max_overcount": c.max_overcount,
        "mean_overcount": c.mean_overcount(),
    })
}

/// A certificate as the API's JSON: the threshold of the replay pass that proved the list exact
/// (every item the sketch estimated at least that high was counted exactly), how many items
/// that pass counted, and how many passes it took (1 when the first threshold held).
pub fn certificate_json(c: &Certificate) -> serde_json::Value {
    json!({
        "threshold": c.threshold,
        "counted": c.counted,
        "passes": c.passes,
    })
}

/// `GET /v1/hot`: the latest closed hot-key window, from the snapshot: its bounds and its hot
/// and cooling keys with their estimated rates (events per second), highest rate first. 404
/// while there is none (the job has no `[hot_keys]`, or no window closed yet).
pub async fn hot(State(app): State<Arc<AppState>>) -> Response {
    let s = app.cache.get();
    let Some(w) = &s.hot else {
        return ApiError::not_found(
            None,
            "no hot-key window yet (the job needs a [hot_keys] section, and one window closed)",
        )
        .into_response();
    };
    let etag = format!("\"hot-{}-{}\"", w.start.0, w.as_of.0);
    let mut r = axum::Json(hot_json(w)).into_response();
    set_cache_headers(&mut r, &etag, false, app.max_age);
    r
}

/// A hot-key window as the API's JSON.
pub fn hot_json(w: &HotWindow) -> serde_json::Value {
    let keys: Vec<serde_json::Value> = w
        .keys
        .iter()
        .map(|k| json!({"item_id": k.item_id.as_str(), "rate": k.rate, "state": k.state.as_str()}))
        .collect();
    json!({
        "window_start": w.start.0,
        "window_end": w.end.0,
        "as_of": w.as_of.to_rfc3339(),
        "keys": keys,
    })
}

/// `GET /v1/windows`.
pub async fn windows(State(app): State<Arc<AppState>>) -> Response {
    let s = app.cache.get();
    let ws: Vec<serde_json::Value> = s
        .windows
        .iter()
        .map(|w| {
            let latest = s.latest.get(&w.name).map(|l| {
                json!({"window_start": l.start.0, "window_end": l.end.0, "revision": l.revision,
                       "state": l.state.as_str(), "as_of": l.as_of.to_rfc3339()})
            });
            json!({"name": w.name, "size_ms": w.size.as_millis(), "slide_ms": w.slide.as_millis(), "k": w.k, "by": w.by, "latest": latest})
        })
        .collect();
    let wm = s.watermark.map(|w| match w {
        Millis::MIN => serde_json::Value::Null,
        w => json!(w.to_rfc3339()),
    });
    let mut r = axum::Json(json!({"job": app.job, "epoch": s.epoch, "watermark": wm, "windows": ws})).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// `GET /metrics` (Prometheus text format).
pub async fn metrics(State(app): State<Arc<AppState>>) -> Response {
    let s = app.cache.get();
    app.metrics.epoch.set(s.epoch.map(|e| e as i64).unwrap_or(-1));
    let mut r = Response::new(Body::from(app.metrics.render()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

/// Anything else: 404 JSON.
pub async fn not_found() -> Response {
    ApiError::not_found(
        None,
        "no such endpoint; see /v1/top, /v1/hot, /v1/windows, /v1/groups, /livez, /readyz, /healthz, /metrics",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params() {
        let p = parse_top(Some("window=5m&k=10&x=1")).map_err(|e| e.message).unwrap();
        assert_eq!((p.window.as_deref(), p.k.as_deref()), (Some("5m"), Some("10")));
        assert_eq!(
            parse_top(Some("window=a&window=b")).err().map(|e| e.parameter),
            Some(Some("window"))
        );
        let p = parse_top(Some("window=%E2%9C%93&at=2024-01-01T00%3A00%3A00Z"))
            .map_err(|e| e.message)
            .unwrap();
        assert_eq!(p.window.as_deref(), Some("✓"));
        assert_eq!(p.at.as_deref(), Some("2024-01-01T00:00:00Z"));
        assert!(
            parse_top(Some("%ZZ=%")).is_ok(),
            "bad escapes decode lossily, never fail"
        );
    }
}

//! The HTTP API against real stores: a writer commits through the sinks crate while the real
//! server (on 127.0.0.1:0) serves what it reads. The stores are the real SQLite file here;
//! `api_stores.rs` runs the same checks against real PostgreSQL and Redis.

use crate::common;

use crate::common::{list, start, Kind};
use hotlist_operators::record::ListState;

/// The API returns exactly the stored lists: latest from the cache, `k` truncation, history
/// by `at`, the window catalogue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_returns_exactly_the_stored_lists() {
    common::returns_exactly_the_stored_lists(Kind::Sqlite).await;
}

/// A new commit is visible after the next refresh: the cache follows the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_cache_refreshes_after_commit() {
    common::cache_refreshes_after_commit(Kind::Sqlite).await;
}

/// While revisions are committed continuously, no response ever mixes two revisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_never_mixes_revisions() {
    common::never_mixes_revisions(Kind::Sqlite).await;
}

/// Approximate lists and sketch checks as the API returns them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_lists_say_what_they_are() {
    common::lists_say_what_they_are(Kind::Sqlite).await;
}

/// A certified list stored in SQLite comes back with its certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_certified_lists_carry_their_certificate() {
    common::certified_lists_carry_their_certificate(Kind::Sqlite).await;
}

/// A trend list stored in SQLite comes back with each item's baseline, score, ratio and history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_trend_lists_carry_their_baselines() {
    common::trend_lists_carry_their_baselines(Kind::Sqlite).await;
}

/// `/v1/hot` serves the latest hot-key window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_hot_keys_are_served() {
    common::hot_keys_are_served(Kind::Sqlite).await;
}

/// ETag / If-None-Match gives 304; open lists are cacheable briefly, final ones forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etag_and_cache_control() {
    let mut h = start(Kind::Sqlite).await;
    h.commit(1, vec![list("1m", 0, 1, ListState::Open, &[("a", 3)])]);
    h.wait_epoch(1).await;
    let r = h.get("/v1/top?window=1m").await;
    assert_eq!(r.status(), 200);
    let etag = r.headers()["etag"].to_str().expect("ascii").to_string();
    assert_eq!(r.headers()["cache-control"], "public, max-age=1");
    let r = h
        .client
        .get(format!("{}/v1/top?window=1m", h.base))
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 304);
    // another k is another representation
    let r = h
        .client
        .get(format!("{}/v1/top?window=1m&k=1", h.base))
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200);
    h.commit(2, vec![list("1m", 0, 2, ListState::Final, &[("a", 3)])]);
    h.wait_epoch(2).await;
    let r = h
        .client
        .get(format!("{}/v1/top?window=1m", h.base))
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200, "a new revision invalidates the ETag");
    assert_eq!(
        r.headers()["cache-control"],
        "public, max-age=1",
        "'latest' moves on: never immutable"
    );
    let r = h.get("/v1/top?window=1m&at=0").await;
    assert_eq!(
        r.headers()["cache-control"],
        "public, max-age=31536000, immutable",
        "a final instance by time is"
    );
    h.stop().await;
}

/// Bad parameters are 400 naming the parameter; unknown windows and paths are 404; all JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_4xx_json_naming_the_parameter() {
    let mut h = start(Kind::Sqlite).await;
    h.commit(1, vec![list("1m", 0, 1, ListState::Open, &[("a", 3)])]);
    h.wait_epoch(1).await;
    let cases: &[(&str, u16, Option<&str>)] = &[
        ("/v1/top", 400, Some("window")),
        ("/v1/top?window=", 404, Some("window")),
        ("/v1/top?window=7m", 404, Some("window")),
        ("/v1/top?window=1m&k=0", 400, Some("k")),
        ("/v1/top?window=1m&k=-1", 400, Some("k")),
        ("/v1/top?window=1m&k=abc", 400, Some("k")),
        ("/v1/top?window=1m&k=6", 400, Some("k")),
        ("/v1/top?window=1m&k=99999999999999999999999", 400, Some("k")),
        ("/v1/top?window=1m&date=2024-13-01", 400, Some("date")),
        ("/v1/top?window=1m&at=yesterday", 400, Some("at")),
        ("/v1/top?window=1m&at=1&date=2024-01-01", 400, Some("at")),
        ("/v1/top?window=1m&window=5m", 400, Some("window")),
        ("/v1/top?window=1m&at=1000000", 404, None),
        ("/v2/top", 404, None),
    ];
    for (path, status, parameter) in cases {
        let r = h.get(path).await;
        assert_eq!(r.status().as_u16(), *status, "{path}");
        let body: serde_json::Value = r
            .json()
            .await
            .unwrap_or_else(|e| panic!("{path}: body is not JSON: {e}"));
        assert!(body["error"].is_string(), "{path}: {body}");
        assert_eq!(body["parameter"].as_str(), *parameter, "{path}: {body}");
    }
    h.stop().await;
}

/// Random and hostile query strings (garbage bytes, huge numbers, unicode, injection attempts)
/// always get a 2xx/4xx JSON answer: never a 5xx, never a dropped connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_parameters_never_5xx() {
    use rand::{Rng, SeedableRng};
    let mut h = start(Kind::Sqlite).await;
    h.commit(1, vec![list("1m", 0, 1, ListState::Open, &[("a", 3)])]);
    h.wait_epoch(1).await;
    let fragments = [
        "1m",
        "5m",
        "' OR 1=1 --",
        "\"; DROP TABLE topk; --",
        "%00",
        "%ff%fe",
        "💥",
        "é",
        "../../etc/passwd",
        "99999999999999999999999999",
        "-9223372036854775808",
        "1e309",
        "NaN",
        "<script>alert(1)</script>",
        "%",
        "%%",
        "2024-02-30",
        "2024-01-01T00:00:00",
        "2024-01-01T00:00:00+25:00",
        "+inf",
        " ",
        "&",
        "=",
        "k",
        "window",
    ];
    let keys = ["window", "k", "date", "at", "x", "window[]", "", "%77indow"];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for _ in 0..400 {
        let mut q = String::new();
        for _ in 0..rng.random_range(0..5) {
            let key = keys[rng.random_range(0..keys.len())];
            let mut v = String::new();
            for _ in 0..rng.random_range(0..3) {
                v.push_str(fragments[rng.random_range(0..fragments.len())]);
            }
            if rng.random_bool(0.5) {
                v = v.bytes().map(|b| format!("%{b:02X}")).collect();
            }
            q.push_str(&format!("{key}={v}&"));
        }
        let path = format!("/v1/top?{q}");
        let r = h.client.get(format!("{}{}", h.base, path)).send().await;
        let r = match r {
            Ok(r) => r,
            // the client itself refuses some raw strings as URLs: not the server's doing
            Err(e) if e.is_builder() => continue,
            Err(e) => panic!("{path}: {e}"),
        };
        let status = r.status().as_u16();
        assert!(status < 500, "{path} -> {status}");
        let body: serde_json::Value = r.json().await.unwrap_or_else(|e| panic!("{path}: not JSON: {e}"));
        if status >= 400 {
            assert!(body["error"].is_string(), "{path}: {body}");
        }
    }
    h.stop().await;
}

/// The live page is served as HTML and polls the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_page_is_served() {
    let h = start(Kind::Sqlite).await;
    let r = h.get("/").await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap_or("")
        .starts_with("text/html"));
    let text = r.text().await.expect("body");
    assert!(text.contains("/v1/windows") && text.contains("/v1/top") && text.contains("/v1/hot"));
    h.stop().await;
}

/// `/healthz` is 200 while the store answers; `/metrics` exposes the request histogram.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics() {
    let mut h = start(Kind::Sqlite).await;
    h.commit(1, vec![list("1m", 0, 1, ListState::Open, &[("a", 3)])]);
    h.wait_epoch(1).await;
    let r = h.get("/healthz").await;
    assert_eq!(r.status(), 200);
    let _ = h.get("/v1/top?window=1m").await;
    let text = h.get("/metrics").await.text().await.expect("metrics");
    assert!(
        text.contains("hotlist_api_request_seconds_bucket{route=\"/v1/top\",status=\"200\""),
        "{text}"
    );
    assert!(text.contains("hotlist_api_snapshot_epoch 1"), "{text}");
    h.stop().await;
}

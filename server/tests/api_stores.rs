//! The same API checks as `api.rs`, against the real PostgreSQL (127.0.0.1:5432) and Redis
//! (127.0.0.1:6379) that `scripts/test` starts. Redis holds only the latest list per window,
//! so history lookups are checked on PostgreSQL only.

use crate::common;

use crate::common::Kind;

/// The API returns exactly the lists stored in PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_returns_exactly_the_stored_lists() {
    common::returns_exactly_the_stored_lists(Kind::Postgres).await;
}

/// The cache follows PostgreSQL commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_cache_refreshes_after_commit() {
    common::cache_refreshes_after_commit(Kind::Postgres).await;
}

/// No response mixes two revisions committed to PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_never_mixes_revisions() {
    common::never_mixes_revisions(Kind::Postgres).await;
}

/// Approximate lists and sketch checks stored in PostgreSQL, as the API returns them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_lists_say_what_they_are() {
    common::lists_say_what_they_are(Kind::Postgres).await;
}

/// Approximate lists and sketch checks stored in Redis, as the API returns them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lists_say_what_they_are() {
    common::lists_say_what_they_are(Kind::Redis).await;
}

/// A certified list stored in PostgreSQL comes back with its certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_certified_lists_carry_their_certificate() {
    common::certified_lists_carry_their_certificate(Kind::Postgres).await;
}

/// A certified list stored in Redis comes back with its certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_certified_lists_carry_their_certificate() {
    common::certified_lists_carry_their_certificate(Kind::Redis).await;
}

/// The API returns exactly the lists stored in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_returns_exactly_the_stored_lists() {
    common::returns_exactly_the_stored_lists(Kind::Redis).await;
}

/// The cache follows Redis commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cache_refreshes_after_commit() {
    common::cache_refreshes_after_commit(Kind::Redis).await;
}

/// No response mixes two revisions committed to Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_never_mixes_revisions() {
    common::never_mixes_revisions(Kind::Redis).await;
}

/// `/v1/hot` on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_hot_keys_are_served() {
    common::hot_keys_are_served(Kind::Postgres).await;
}

/// `/v1/hot` on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_hot_keys_are_served() {
    common::hot_keys_are_served(Kind::Redis).await;
}

//! `RedisStore`: the serving fan-out. Redis holds each window's LATEST list (the instance with
//! the greatest start) so that a home page reads it in milliseconds. It is not the primary
//! store: it keeps no older instances (no history) and no dead letters; those live in the
//! primary store (SQLite or PostgreSQL), which the job commits to as well.
//!
//! # Keys
//!
//! - `{prefix}:{job}:{window}:latest` — sorted set: member = item_id, score = count;
//! - `{prefix}:{job}:{window}:latest:meta` — hash: window, window_start (ms), window_end (ms),
//!   revision, state (open|closed|final), final (0|1), as_of (ms), watermark (ms), item_count,
//!   epoch, exact (0|1), error_bound (0 when exact), and for a list with a sketch check
//!   sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount (all four or none),
//!   and for a certified list (a sketch window's final list a replay proved exact)
//!   certificate_threshold, certificate_counted, certificate_passes (all three or none),
//!   and for a trend list (`rank_by = "trend"`) rank_by = `trend` (a count-ranked list's meta
//!   hash has no rank_by, as before trend lists).
//!   A meta hash without `exact` (written before lists said what they are) is an exact list;
//! - `{prefix}:{job}:{window}:latest:trend` — hash, for a trend list only: field = an item's
//!   rank (`1` … item_count: a trend list's order, by score, is not its counts'), value = the
//!   item's trend record, JSON `{"item_id","baseline","score","history"}` (its baseline sum,
//!   score and counts in the instances before, oldest first; see `redis/trend.rs`);
//! - `{prefix}:{job}:{window}:group:{group}:latest`, `…:latest:meta` and `…:latest:trend` — the same for the
//!   latest list of a group of a window with `by` (`group` its canonical key; the meta hash
//!   also has `group`); the global list (group `""`) keeps the keys above;
//! - `{prefix}:{job}:{window}:groups` — sorted set: member = group key (`""` for the global
//!   list), score = the start of its latest list; the groups of the latest instance are the
//!   members with the greatest score;
//! - `{prefix}:{job}:windows` — a string holding JSON `[{"name","size_ms","slide_ms","k"}…]` in
//!   configured order (written by `prepare`), with `"by"` for a window with `by` dims;
//! - `{prefix}:{job}:commit` — hash: epoch, watermark (ms), committed_at (ms);
//! - `{prefix}:{job}:hot` — hash: the latest closed hot-key window (`[hot_keys]`):
//!   window_start, window_end, watermark, as_of (ms), key_count, epoch and keys (JSON
//!   `[[item_id, rate, state]…]`, highest rate first); see `redis/hot_keys.rs`;
//! - `{prefix}:{job}:owner` — hash: generation, owner, claimed_at (ms): the job's owner (see
//!   `crate::ownership`; Redis has no liveness lock, the generation alone fences a stale run);
//! - `{prefix}:{job}:{window}:ranges` — hash: field = a sealed instance's start (ms), value =
//!   JSON `{"end":…,"ranges":[…]}` (where its events lie in the input, `crate::ranges`) or
//!   `{"end":…,"unreadable":"…"}`, for every sealed instance (not only the latest);
//!   `{prefix}:{job}:{window}:ranges:starts` — sorted set of those starts (member = score =
//!   start); `{prefix}:{job}:ranges` — set of the windows with ranges; see `redis/ranges.rs`.
//!
//! `prefix` defaults to [`DEFAULT_PREFIX`] (`hotlist`). Times are decimal milliseconds since the
//! Unix epoch. `epoch` in the meta hash is the commit that wrote the list. Job ids and window
//! names must not contain `:` (it would make two different keys collide); such names are
//! refused as invalid input.
//!
//! # Writing
//!
//! Each [`commit`](crate::SinkStore::commit) is ONE Lua script, so it is atomic and idempotent:
//! 0. if the handle claimed the job and the owner hash holds another generation now, nothing is
//!    written and the commit fails with `SinkError::TakenOver`;
//! 1. if the batch's epoch is at or below the stored `commit` epoch, nothing is written and the
//!    commit returns `Ok(false)` (a checkpoint number lower than the stored one is refused);
//! 2. for each window in the batch, the list of the instance with the greatest start (its
//!    highest revision in the batch) is written only if its start is at or after the stored
//!    meta's `window_start`: a newer instance (or a new revision of the same one) replaces the
//!    list, an older instance's correction does not clobber it. Writing deletes the sorted set,
//!    the meta hash and the trend hash, adds every member, sets the meta hash and, for a trend
//!    list, the trend hash, so no member or trend record of an earlier list survives;
//!    Then, in every window written, the lists of groups whose latest instance ended before
//!    the window's newest instance started (`crate::retention`: a group score + the window's
//!    size below the groups set's greatest score) are deleted (sorted set, meta and trend
//!    hashes) with their groups-set members,
//!    so rotating group values keep a bounded number of keys (the global list's keys stay);
//!    the primary store keeps their history;
//! 3. the batch's latest hot-key window replaces the `hot` hash if it starts at or after the
//!    stored one;
//! 4. every sealed instance's ranges in the batch replace what the ranges hash holds for it
//!    (its start added to the starts sorted set, its window to the job's set);
//! 5. the `commit` hash gets the batch's epoch and watermark and the wall-clock time.
//!
//! The script checks every key's type and every stored number before its first write, and each
//! list's accuracy arguments as a reader would (`exact` 0 or 1, an exact list's `error_bound`
//! 0, a whole sketch check with found ≤ of), so it either fails before writing anything or runs
//! to its end (Redis does not roll scripts back).
//! Dead letters in a batch are ignored: Redis holds no dead letters, the primary store does.
//! Scores are doubles, so a count above 2^53 ([`MAX_EXACT_COUNT`]) is refused as invalid input
//! rather than stored inexactly.
//!
//! # Reading
//!
//! [`latest`](crate::StoreReader::latest) reads the window's `k` from the windows document, then
//! in one MULTI/EXEC transaction the meta fields, the member count, at most `k + 1` members and
//! the windows document again, so all are of the same revision and no read is sized by a stored
//! count; it checks them (`read_checks`: `item_count` within `k`, equal to the member
//! count, …) and orders the items by the ranking (count descending, then item id ascending
//! bytewise) on the client side, since Redis orders ties differently. The same transaction
//! reads `rank_by` and the trend hash's size: a trend list is read once more with its trend
//! records (at most `k + 1`), its items put in the order of their ranks, each record checked
//! against its member's count (all of baseline, score and history; the baseline the history's
//! sum; the score the one count and history give) and the whole in the trend order.
//! [`instance`](crate::StoreReader::instance) can only return the latest instance: Redis holds no
//! other. After a connection, I/O or protocol failure the connection is dropped and the next
//! call reconnects, so retrying a retryable error is meaningful.
//!
//! Files: `commit.lua` (the commit script), `keys` (the key layout), `encode` (the windows
//! document, what scores can hold), `conn` (connecting, reconnecting, redacting the URL),
//! `error` (how failures become a `SinkError` with a retry class), `write` (prepare and
//! commit), `ownership` (claiming the job, `reset`), `read` (the read API), `trend` (a trend
//! list's records: written, parsed and checked), `hot_keys` (the
//! hot-key hash: its commit arguments and its read), `ranges` (sealed instances' ranges: the
//! keys, their commit arguments and their reads), [`fanout`] (the job's thread that copies
//! each committed batch's newest lists into Redis, riding out outages); tests in `tests` (the
//! key layout, latest only, scores; the fixture; the conformance suite), `corrupt_tests` (the
//! windows document, corrupt data), `accuracy_tests` (the meta hash's accuracy and certificate),
//! `trend_tests` (trend lists: layout, round trip, damage, retention, the fan-out),
//! `ranges_tests` (instance ranges: layout, damage) and `connection_tests` (credentials,
//! reconnecting, error classes).

#[cfg(test)]
mod accuracy_tests;
mod conn;
#[cfg(test)]
mod connection_tests;
#[cfg(test)]
mod corrupt_tests;
mod encode;
mod error;
pub mod fanout;
mod hot_keys;
mod keys;
mod ownership;
mod ranges;
#[cfg(test)]
mod ranges_tests;
mod read;
#[cfg(test)]
mod tests;
mod trend;
#[cfg(test)]
mod trend_tests;
mod write;

pub use fanout::{Fanout, FanoutStats, FanoutTarget};

use crate::error::SinkError;
use crate::ownership::Claims;
use ::redis::{Client, Connection};
use std::fmt;
use std::time::Duration;

/// The key prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "hotlist";

/// How long connecting (TCP connect and handshake) may take before failing (retryable).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one request may wait for its reply (or to be sent) before failing (retryable).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest count stored exactly: sorted-set scores are doubles.
pub const MAX_EXACT_COUNT: u64 = 1 << 53;

/// A Redis sink store and reader: one connection, re-established after a connection failure.
pub struct RedisStore {
    client: Client,
    conn: Option<Connection>,
    /// The URL without credentials, for messages.
    url: String,
    prefix: String,
    /// The generations this handle claimed: its commits are fenced by them.
    claims: Claims,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not derived: the client's connection info holds the password.
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

impl RedisStore {
    /// The server URL, without its password.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Stored data violates the layout (written by something else, or damaged).
    fn corrupt(&self, detail: String) -> SinkError {
        SinkError::corrupt(&self.url, detail)
    }
}

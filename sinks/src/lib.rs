//! hotlist's sink stores: commit an epoch's results atomically, read a window's list back.
//!
//! Module map:
//! - [`types`]: what goes in (`CommitBatch`, `SourcedDeadLetter`) and comes out (`StoredList`,
//!   `StoredWindow`), and the "highest revision wins" rule;
//! - `write_checks`: the input checks every store shares (a job id, the windows `prepare`
//!   records, every number of a batch), run before anything is written;
//! - [`store`]: the `SinkStore` write protocol (prepare, commit, committed_epoch) and the
//!   `StoreReader` read side;
//! - [`error`]: `SinkError`, each carrying the `Retry` class its backend decided;
//! - [`ownership`]: one live run per job: the liveness lock and the generation every commit
//!   checks (`Claim`, `Owner`);
//! - [`file_lock`]: `FileLock`, an exclusive `flock` held while the value lives;
//! - [`crash_point`]: named points where crash tests make the process SIGKILL itself;
//! - [`memory`]: `MemoryStore`, an in-memory store with the same semantics, for tests;
//! - [`sqlite`]: `SqliteStore`, the SQLite sink and its read API;
//! - [`postgres`]: `PostgresStore`, the PostgreSQL sink (same tables and semantics as SQLite);
//! - [`redis`]: `RedisStore`, the serving fan-out holding each window's latest list, and
//!   `Fanout`, the job's thread that writes into it;
//! - [`retention`]: which latest lists are kept where only latest lists live (Redis, the run's
//!   map): those of the instances overlapping a window's newest one;
//! - `read_checks`: what every store checks in what it reads back (counts bounded by the
//!   window's `k`, ranges of instants, revisions and epochs, a list's accuracy: `exact`,
//!   `error_bound`, the sketch check), so a damaged row is a clear [`SinkError::Corrupt`],
//!   never a huge allocation or a panic (files: `list`, `accuracy`, `job`, `hot_keys`);
//! - `sql_rows`: decoding the two SQL stores' rows, with those checks;
//! - `ranges`: a sealed instance's input ranges as every store keeps them (one JSON array of
//!   partition ranges, or why the instance cannot be read again), read back checked;
//! - `conformance` (tests only): the one suite of store tests every backend runs (a folder:
//!   its subject, and the cases by concern);
//! - `test_fixtures` (tests only): lists, batches and dead letters the tests share.
#![deny(missing_docs)]
// No product function over 80 lines (the threshold is in clippy.toml); tests may be longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod crash_point;
pub mod error;
pub mod file_lock;
pub mod memory;
pub mod ownership;
pub mod postgres;
mod ranges;
mod read_checks;
pub mod redis;
pub mod retention;
mod sql_rows;
pub mod sqlite;
pub mod store;
pub mod types;
mod write_checks;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod test_fixtures;

pub use error::{Retry, SinkError};
pub use memory::MemoryStore;
pub use ownership::{Claim, Owner};
pub use postgres::PostgresStore;
pub use redis::RedisStore;
pub use sqlite::SqliteStore;
pub use store::{DeadLetterBlocks, SinkStore, StoreReader};
pub use types::{CommitBatch, SourcedDeadLetter, StoredList, StoredWindow};

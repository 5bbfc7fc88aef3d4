//! hotlist's sink stores: commit an epoch's results atomically, read a window's list back.
//!
//! Module map:
//! - [`types`]: what goes in (`CommitBatch`, `SourcedDeadLetter`) and comes out (`StoredList`,
//!   `StoredWindow`);
//! - [`crash_point`]: named points where crash tests make the process SIGKILL itself;
//! - [`error`]: `SinkError` and its retryable/permanent classification;
//! - [`store`]: the `SinkStore` write protocol (prepare, commit, committed_epoch);
//! - [`sqlite`]: `SqliteStore`, the SQLite sink and its read API;
//! - [`memory`]: `MemoryStore`, an in-memory store with the same semantics, for tests.
#![deny(missing_docs)]

pub mod crash_point;
pub mod error;
pub mod memory;
pub mod postgres;
pub mod redis_store;
pub mod sqlite;
pub mod store;
#[cfg(test)]
mod test_fixtures;
pub mod types;

pub use error::SinkError;
pub use memory::MemoryStore;
pub use sqlite::SqliteStore;
pub use store::{SinkStore, StoreReader};
pub use types::{CommitBatch, SourcedDeadLetter, StoredList, StoredWindow};

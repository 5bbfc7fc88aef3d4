//! `SqliteStore`: the SQLite sink. One database file holds the latest revision of every window
//! instance's list (`topk` rows under a `topk_instances` header), the dead letters, the
//! sealed instances' input ranges (`instance_ranges`), the jobs' window definitions and their
//! committed epochs.
//!
//! The file is in WAL mode: one writer (the job) commits one transaction per batch while any
//! number of readers (`hotlist query`, the HTTP API) read consistent snapshots. Every list read
//! (header and rows) happens in one read transaction, so it never mixes revisions.
//!
//! Times are INTEGER milliseconds since the Unix epoch; `rank` starts at 1.
//!
//! Files: `open` (opening for writing or reading), `schema` (tables, version, the migrations
//! from versions 1, 2 and 3), `write` (prepare and commit), `summaries` (dead-letter summaries: a block's row and
//! its stored count), `dead_letter_search` (dead letters found by their bytes, for `explain`), `hot_keys` (hot-key windows: write
//! and read), `ranges` (sealed instances' input ranges: write and read), `ownership` (the job's
//! lock file and generation, `reset`), `read` (the read API); tests in `tests` and `migration_tests` (one
//! table of cases, a database of each older version read as it is, then migrated: what the
//! version lacked commits and reads back, migrated tables equal new ones, the checks refuse
//! impossible rows), starting from the databases `old_schemas` builds (their DDL verbatim).

mod dead_letter_search;
mod hot_keys;
#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod old_schemas;
mod open;
mod ownership;
mod ranges;
mod read;
mod schema;
mod summaries;
#[cfg(test)]
mod tests;
mod write;

pub use open::BUSY_TIMEOUT;
pub use ownership::lock_file;
pub use schema::SCHEMA_VERSION;

use crate::error::{Retry, SinkError};
use crate::file_lock::FileLock;
use crate::ownership::Claims;
use crate::store::StoreReader;
use crate::types::{StoredList, StoredWindow};
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::time::Millis;
use rusqlite::{Connection, ErrorCode};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A hotlist SQLite database: the job's sink (`open`) or a reader's view (`open_read_only`).
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    read_only: bool,
    /// The liveness locks this handle holds, by job (see `ownership`).
    locks: BTreeMap<String, FileLock>,
    /// The generations this handle claimed: its commits are fenced by them.
    claims: Claims,
}

impl SqliteStore {
    /// The database path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn writable(&self, op: &'static str) -> Result<(), SinkError> {
        if self.read_only {
            return Err(SinkError::ReadOnly {
                path: self.path.clone(),
                op,
            });
        }
        Ok(())
    }
}

impl StoreReader for SqliteStore {
    fn dead_letters_containing(
        &mut self,
        job: &str,
        reasons: &[hotlist_operators::record::DeadReason],
        needle: &[u8],
        limit: usize,
    ) -> Result<Option<Vec<crate::types::SourcedDeadLetter>>, SinkError> {
        SqliteStore::search_dead_letters(self, job, reasons, needle, limit).map(Some)
    }

    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        SqliteStore::windows(self, job)
    }
    fn latest_of(&mut self, job: &str, window: &str, group: &GroupKey) -> Result<Option<StoredList>, SinkError> {
        SqliteStore::latest_of(self, job, window, group)
    }
    fn instance_of(
        &mut self,
        job: &str,
        window: &str,
        group: &GroupKey,
        start: Millis,
    ) -> Result<Option<StoredList>, SinkError> {
        SqliteStore::instance_of(self, job, window, group, start)
    }
    fn groups(&mut self, job: &str, window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, SinkError> {
        SqliteStore::groups(self, job, window)
    }
    fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        SqliteStore::last_commit(self, job)
    }
    fn hot_keys(&mut self, job: &str) -> Result<Option<HotWindow>, SinkError> {
        SqliteStore::hot_keys(self, job)
    }
    fn sealed_ranges(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<SealedRanges>, SinkError> {
        SqliteStore::sealed_ranges(self, job, window, start)
    }
    fn sealed_instances(
        &mut self,
        job: &str,
        window: &str,
        since: Millis,
        limit: usize,
    ) -> Result<Vec<Millis>, SinkError> {
        SqliteStore::sealed_instances(self, job, window, since, limit)
    }
}

/// Wraps an SQLite error of `op` on `path` into a [`SinkError::Sqlite`], classifying it.
fn sql_err(path: &Path, op: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> SinkError {
    let path = path.to_path_buf();
    let op = op.into();
    move |source| {
        let retry = retry_class(&source);
        SinkError::Sqlite {
            path,
            op,
            source,
            retry,
        }
    }
}

/// A busy or locked database and I/O failures may pass; every other error (constraint,
/// corruption, misuse, …) recurs.
fn retry_class(e: &rusqlite::Error) -> Retry {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::SystemIoFailure) => Retry::Transient,
        _ => Retry::Permanent,
    }
}

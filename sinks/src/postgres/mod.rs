//! `PostgresStore`: the PostgreSQL sink, with the same tables, semantics and checks as
//! [`SqliteStore`](crate::sqlite::SqliteStore).
//!
//! # Contract
//!
//! - [`PostgresStore::connect`] / [`PostgresStore::connect_with_schema`] open a connection, create
//!   the schema (if missing) and the tables (if missing) in one transaction under a
//!   transaction-scoped advisory lock, so processes starting at once do not race, and point the
//!   session's `search_path` at the schema.
//! - [`commit`](crate::SinkStore::commit) is ONE `READ COMMITTED` transaction: it serializes
//!   with other committers of the job (advisory lock on the job, then the commit row
//!   `FOR UPDATE`), skips a batch whose epoch is <= the committed one (`Ok(false)`), replaces
//!   each instance's rows with those of its highest revision in the batch (one multi-row
//!   `DELETE` and one multi-row `INSERT` over `unnest`ed arrays), upserts the instance headers,
//!   appends the dead letters in order, upserts the sealed instances' ranges (`instance_ranges`)
//!   and the job's commit row. Statements are prepared once per connection.
//! - Every list read (header, then rows) runs in one `REPEATABLE READ READ ONLY` transaction, so
//!   it never mixes revisions, and is checked (row count = `item_count`, ranks 1..n, every row
//!   of the header's revision and accuracy, the accuracy itself, a trend list's `baseline`,
//!   `score` and `history` on every row and agreeing) before it is returned; a violation is
//!   [`SinkError::Corrupt`](crate::SinkError::Corrupt).
//! - Instants are `timestamptz` (microsecond precision, so milliseconds round-trip exactly);
//!   `Millis::MIN` / `Millis::MAX` are stored as `-infinity` / `infinity`, and so is a
//!   watermark before PostgreSQL's range (it precedes every event time). Other instants must
//!   lie in PostgreSQL's range (4714-11-24 BC .. 294276-12-31 AD); a batch holding one outside
//!   it is rejected as [`SinkError::Invalid`](crate::SinkError::Invalid) before anything is
//!   written. That never happens to what the job validated: event times are years 0000–9999
//!   and `prepare` refuses a window longer than ~4712 years, whose instances near year 0 would
//!   start before the range. Dead letters are inserted in chunks of at most 64 MiB (a summary of
//!   those beyond a block's cap is added to its block's row). So is a batch whose job, window name, item id or source contains
//!   U+0000, which PostgreSQL text cannot hold; in a dead letter's (human-readable) detail
//!   U+0000 is replaced by U+FFFD, its raw bytes are stored exactly (`bytea`).
//! - Errors name the operation, the job and the server without credentials (user name and
//!   password are stripped from the connection string). After a connection is lost the call
//!   fails with a retryable error and the next call reconnects.
//!
//! - One live run per job (`crate::ownership`): [`lock`](crate::SinkStore::lock) is a session
//!   advisory lock of the connection, taken again after a reconnect;
//!   [`claim`](crate::SinkStore::claim) bumps the job's generation in `hotlist_jobs`, which every
//!   commit of a claiming handle checks after the job's commit lock.
//!
//! - No call waits forever ([`PgTimeouts`]): connecting has `connect` for the TCP connect and
//!   the handshake, every statement `statement` (the session's `statement_timeout`) and the
//!   client waits for any reply that plus [`REPLY_GRACE`] (`client`: a frozen server answers
//!   nothing, not even TCP keepalives' failure); a timeout is transient and the next call
//!   reconnects.
//! - [`PostgresStore::open_reader`] (`serve`, `query`) runs no DDL: it checks the schema
//!   version (`READ_SCHEMA_VERSION` ..= `SCHEMA_VERSION`) and works under a role with only
//!   `SELECT` on the tables. On a schema without the trend columns (before version 8) it reads
//!   every list as a count-ranked one, and the job's trend lists once the job migrated it; on
//!   one without dead-letter counts (version 6) every dead letter as a whole one; on one
//!   without `instance_ranges` (before version 9) no instance ranges.
//!
//! Files: `client` (the blocking client with deadlines), `schema` (tables, version, the migrations from older versions, `drop_schema`),
//! `hot_keys` (hot-key windows: write and read), `statements` (the SQL and the connection's
//! prepared statements, the commit lock), `conn` (connecting, reconnecting), `ident` (quoted
//! identifiers, the connection string without credentials), `error` (how failures become a
//! `SinkError` with a retry class), `encode` (instants and a batch as the column arrays the
//! commit binds), `write` (prepare and commit), `summaries` (dead-letter summaries: a block's
//! row and its stored count), `dead_letter_search` (dead letters found by their bytes, for
//! `explain`), `ranges` (sealed instances' input ranges: write and read),
//! `ownership` (the job's lock and generation, `reset`), `read` (the read API); tests in `tests` and `migration_tests` (one table of cases,
//! a schema of each older version migrated on connect: what the version lacked commits and
//! reads back, migrated tables equal new ones, the constraints refuse impossible rows),
//! starting from the schemas `old_schemas` builds (their DDL verbatim).

mod client;
mod conn;
mod dead_letter_search;
mod encode;
mod error;
mod hot_keys;
mod ident;
#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod old_schemas;
mod ownership;
mod ranges;
mod read;
mod schema;
mod statements;
mod summaries;
#[cfg(test)]
mod tests;
mod write;

pub use ownership::job_lock_key;
pub use schema::{drop_schema, READ_SCHEMA_VERSION, SCHEMA_VERSION};

use crate::ownership::Claims;
use client::Client;
use statements::Statements;
use std::collections::BTreeSet;
use std::time::Duration;

/// The schema used by [`PostgresStore::connect`].
pub const DEFAULT_SCHEMA: &str = "public";

/// How long a statement waits for a lock before failing with a (retryable) error.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the client waits for a reply beyond the statement timeout: a live server cancels a
/// slow statement itself (a clear SQLSTATE 57014) before the client gives up on a frozen one.
pub const REPLY_GRACE: Duration = Duration::from_secs(5);

/// The client's timeouts (`sink.connect_timeout`, `sink.statement_timeout`,
/// `sink.keepalives_idle`): no call waits for the server forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PgTimeouts {
    /// Connecting: the TCP connect and the whole handshake (a frozen server accepts TCP
    /// connections in its kernel and never answers the handshake).
    pub connect: Duration,
    /// The session's `statement_timeout`; the client waits for any reply at most this plus
    /// [`REPLY_GRACE`], then drops the connection (the error is transient: retried, and the
    /// next call reconnects).
    pub statement: Duration,
    /// Idle time before TCP keepalive probes (a vanished host or a cut network on an idle
    /// connection is noticed within about this plus 30 s).
    pub keepalives_idle: Duration,
}

impl PgTimeouts {
    /// The longest wait for one reply.
    pub fn reply(&self) -> Duration {
        self.statement + REPLY_GRACE
    }
}

impl Default for PgTimeouts {
    fn default() -> PgTimeouts {
        PgTimeouts {
            connect: Duration::from_secs(10),
            statement: Duration::from_secs(60),
            keepalives_idle: Duration::from_secs(30),
        }
    }
}

/// What a handle is opened for: the job's writer creates and migrates the tables, a reader
/// only checks their version (and needs no DDL rights).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Writer,
    Reader,
}

/// A hotlist database in one schema of a PostgreSQL database: the job's sink and the readers'
/// view (both through one connection; open one store per thread).
pub struct PostgresStore {
    client: Client,
    stmts: Statements,
    /// The connection string as given (may hold a password: never printed).
    conn_str: String,
    schema: String,
    /// `<url without credentials> schema <schema>`: what errors name.
    location: String,
    /// The client's timeouts (kept for reconnecting).
    timeouts: PgTimeouts,
    /// Writer or reader (kept for reconnecting: a reader never runs DDL).
    role: Role,
    /// The jobs whose session lock this handle took (taken again after a reconnect).
    locked: BTreeSet<String>,
    /// The generations this handle claimed: its commits are fenced by them.
    claims: Claims,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// The schema this store uses.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The server and schema, without credentials (as errors name them).
    pub fn location(&self) -> &str {
        &self.location
    }
}

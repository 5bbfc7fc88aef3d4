//! `PostgresStore`: the PostgreSQL sink, with the same tables, semantics and checks as
//! [`SqliteStore`](crate::sqlite::SqliteStore).
//!
//! # Contract
//!
//! - [`PostgresStore::connect`] / [`PostgresStore::connect_with_schema`] open a connection, create
//!   the schema (if missing) and the tables (if missing) in one transaction under a
//!   transaction-scoped advisory lock, so processes starting at once do not race, and point the
//!   session's `search_path` at the schema.
//! - [`SinkStore::commit`] is ONE `READ COMMITTED` transaction: it serializes with other
//!   committers of the job (advisory lock on the job, then the commit row `FOR UPDATE`), skips a
//!   batch whose epoch is <= the committed one (`Ok(false)`), replaces each instance's rows with
//!   those of its highest revision in the batch (one multi-row `DELETE` and one multi-row
//!   `INSERT` over `unnest`ed arrays), upserts the instance headers, appends the dead letters in
//!   order and upserts the job's commit row. Statements are prepared once per connection.
//! - Every list read (header, then rows) runs in one `REPEATABLE READ READ ONLY` transaction, so
//!   it never mixes revisions, and is checked (row count = `item_count`, ranks 1..n, every row
//!   of the header's revision) before it is returned; a violation is [`SinkError::Corrupt`].
//! - Instants are `timestamptz` (microsecond precision, so milliseconds round-trip exactly);
//!   [`Millis::MIN`] / [`Millis::MAX`] are stored as `-infinity` / `infinity`. Other instants
//!   must lie in PostgreSQL's range (4714-11-24 BC .. 294276-12-31 AD); a batch holding one
//!   outside it is rejected as [`SinkError::Invalid`] before anything is written. So is a batch
//!   whose job, window name, item id or source contains U+0000, which PostgreSQL text cannot
//!   hold; in a dead letter's (human-readable) detail U+0000 is replaced by U+FFFD, its raw bytes
//!   are stored exactly (`bytea`).
//! - Errors name the operation, the job and the server without credentials (user name and
//!   password are stripped from the connection string). After a connection is lost the call
//!   fails with a retryable error and the next call reconnects.

use crate::error::SinkError;
use crate::store::{SinkStore, StoreReader};
use crate::types::{
    check_batch, check_prepare, latest_revisions, parse_reason, CommitBatch, SourcedDeadLetter, StoredList,
    StoredWindow,
};
use hotlist_operators::record::{DeadLetter, ItemId, ListState, PartitionId};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use postgres::error::SqlState;
use postgres::types::{Timestamp, ToSql};
use postgres::{Client, IsolationLevel, NoTls, Statement};
use std::borrow::Cow;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The schema version this build writes (the `hotlist_schema` table).
pub const SCHEMA_VERSION: i64 = 1;

/// The schema used by [`PostgresStore::connect`].
pub const DEFAULT_SCHEMA: &str = "public";

/// How long a statement waits for a lock before failing with a (retryable) error.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// Advisory lock (single 64-bit key space) held while creating the schema and tables.
const MIGRATION_LOCK: i64 = 0x686f_746c_6973_7401; // "hotlist" + 1

/// First key of the advisory lock (two 32-bit key space) a commit holds on its job.
const COMMIT_LOCK_CLASS: i32 = 0x686f_746c; // "hotl"

/// Earliest instant PostgreSQL's `timestamptz` holds: 4714-11-24T00:00:00Z BC, in ms.
const PG_MIN_MS: i64 = -210_866_803_200_000;
/// First instant past PostgreSQL's `timestamptz` range: 294277-01-01T00:00:00Z, in ms.
const PG_END_MS: i64 = 9_224_318_016_000_000;

/// The tables; every statement is idempotent.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS topk (
    job          TEXT        NOT NULL,
    window_name  TEXT        NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    window_end   TIMESTAMPTZ NOT NULL,
    rank         BIGINT      NOT NULL CHECK (rank >= 1),
    item_id      TEXT        NOT NULL,
    count        BIGINT      NOT NULL CHECK (count >= 0),
    revision     BIGINT      NOT NULL,
    final        BOOLEAN     NOT NULL,
    state        TEXT        NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    as_of        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job, window_name, window_start, rank)
);
CREATE TABLE IF NOT EXISTS topk_instances (
    job          TEXT        NOT NULL,
    window_name  TEXT        NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    window_end   TIMESTAMPTZ NOT NULL,
    revision     BIGINT      NOT NULL,
    state        TEXT        NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    final        BOOLEAN     NOT NULL,
    watermark    TIMESTAMPTZ NOT NULL,
    as_of        TIMESTAMPTZ NOT NULL,
    item_count   BIGINT      NOT NULL CHECK (item_count >= 0),
    PRIMARY KEY (job, window_name, window_start)
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id          BIGSERIAL   PRIMARY KEY,
    job         TEXT        NOT NULL,
    source      TEXT        NOT NULL,
    partition   BIGINT      NOT NULL,
    position    BIGINT      NOT NULL,
    reason      TEXT        NOT NULL CHECK (reason IN ('bad', 'late', 'sealed')),
    detail      TEXT        NOT NULL,
    raw         BYTEA       NOT NULL,
    epoch       BIGINT      NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
CREATE TABLE IF NOT EXISTS hotlist_windows (
    job      TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    size_ms  BIGINT NOT NULL,
    slide_ms BIGINT NOT NULL,
    k        BIGINT NOT NULL,
    ord      BIGINT NOT NULL,
    PRIMARY KEY (job, name)
);
CREATE TABLE IF NOT EXISTS hotlist_commits (
    job          TEXT        NOT NULL PRIMARY KEY,
    epoch        BIGINT      NOT NULL,
    watermark    TIMESTAMPTZ NOT NULL,
    committed_at TIMESTAMPTZ NOT NULL
);
";

/// The schema version table (PostgreSQL has no `PRAGMA user_version`): at most one row.
const VERSION_TABLE: &str = "
CREATE TABLE IF NOT EXISTS hotlist_schema (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT  NOT NULL
)";

const LOCK_JOB: &str = "SELECT pg_advisory_xact_lock($1::int4, hashtext($2::text))";

const SELECT_EPOCH: &str = "SELECT epoch FROM hotlist_commits WHERE job = $1";

const SELECT_EPOCH_FOR_UPDATE: &str = "SELECT epoch FROM hotlist_commits WHERE job = $1 FOR UPDATE";

/// Deletes the rows of every instance given as (window_name, window_start) arrays.
const DELETE_ROWS: &str = "
DELETE FROM topk t
USING unnest($2::text[], $3::timestamptz[]) AS d(window_name, window_start)
WHERE t.job = $1::text AND t.window_name = d.window_name AND t.window_start = d.window_start";

const UPSERT_INSTANCES: &str = "
INSERT INTO topk_instances
    (job, window_name, window_start, window_end, revision, state, final, watermark, as_of, item_count)
SELECT $1::text, * FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[], $5::int8[], $6::text[],
                               $7::bool[], $8::timestamptz[], $9::timestamptz[], $10::int8[])
ON CONFLICT (job, window_name, window_start) DO UPDATE SET
    window_end = excluded.window_end, revision = excluded.revision, state = excluded.state,
    final = excluded.final, watermark = excluded.watermark, as_of = excluded.as_of,
    item_count = excluded.item_count";

const INSERT_ROWS: &str = "
INSERT INTO topk
    (job, window_name, window_start, window_end, revision, final, state, as_of, rank, item_id, count)
SELECT $1::text, * FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[], $5::int8[], $6::bool[],
                               $7::text[], $8::timestamptz[], $9::int8[], $10::text[], $11::int8[])";

/// Appends dead letters in array order (ids are assigned in that order).
const INSERT_DEAD_LETTERS: &str = "
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at)
SELECT $1::text, d.source, d.partition, d.position, d.reason, d.detail, d.raw, $2::int8, $3::timestamptz
FROM unnest($4::text[], $5::int8[], $6::int8[], $7::text[], $8::text[], $9::bytea[])
     WITH ORDINALITY AS d(source, partition, position, reason, detail, raw, ord)
ORDER BY d.ord";

const UPSERT_COMMIT: &str = "
INSERT INTO hotlist_commits (job, epoch, watermark, committed_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (job) DO UPDATE SET
    epoch = excluded.epoch, watermark = excluded.watermark, committed_at = excluded.committed_at";

const DELETE_WINDOWS: &str = "DELETE FROM hotlist_windows WHERE job = $1";

const INSERT_WINDOW: &str =
    "INSERT INTO hotlist_windows (job, name, size_ms, slide_ms, k, ord) VALUES ($1, $2, $3, $4, $5, $6)";

const SELECT_WINDOWS: &str = "SELECT name, size_ms, slide_ms, k FROM hotlist_windows WHERE job = $1 ORDER BY ord";

/// The header of the window's instance with the greatest start: one backward scan of the
/// `topk_instances` primary key.
const SELECT_LATEST_HEADER: &str = "
SELECT window_start, window_end, revision, state, watermark, as_of, item_count FROM topk_instances
WHERE job = $1 AND window_name = $2 ORDER BY window_start DESC LIMIT 1";

/// The header of the instance starting at `$3`: one lookup in the `topk_instances` primary key.
const SELECT_HEADER_AT: &str = "
SELECT window_start, window_end, revision, state, watermark, as_of, item_count FROM topk_instances
WHERE job = $1 AND window_name = $2 AND window_start = $3";

/// An instance's rows: one range scan of the `topk` primary key.
const SELECT_ROWS: &str = "
SELECT rank, item_id, count, revision FROM topk
WHERE job = $1 AND window_name = $2 AND window_start = $3 ORDER BY rank";

const SELECT_INSTANCES: &str = "
SELECT window_start, revision, state FROM topk_instances
WHERE job = $1 AND window_name = $2 ORDER BY window_start";

const SELECT_DEAD_LETTERS: &str = "
SELECT source, partition, position, reason, detail, raw FROM dead_letters
WHERE job = $1 ORDER BY id DESC LIMIT $2";

const SELECT_DEAD_LETTER_COUNTS: &str =
    "SELECT reason, COUNT(*) FROM dead_letters WHERE job = $1 GROUP BY reason ORDER BY reason";

const SELECT_LAST_COMMIT: &str = "SELECT epoch, watermark FROM hotlist_commits WHERE job = $1";

/// The connection's prepared statements.
struct Statements {
    lock_job: Statement,
    select_epoch: Statement,
    select_epoch_for_update: Statement,
    delete_rows: Statement,
    upsert_instances: Statement,
    insert_rows: Statement,
    insert_dead_letters: Statement,
    upsert_commit: Statement,
    delete_windows: Statement,
    insert_window: Statement,
    select_windows: Statement,
    select_latest_header: Statement,
    select_header_at: Statement,
    select_rows: Statement,
    select_instances: Statement,
    select_dead_letters: Statement,
    select_dead_letter_counts: Statement,
    select_last_commit: Statement,
}

impl Statements {
    fn prepare(client: &mut Client) -> Result<Statements, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(Statements {
            lock_job: p(LOCK_JOB)?,
            select_epoch: p(SELECT_EPOCH)?,
            select_epoch_for_update: p(SELECT_EPOCH_FOR_UPDATE)?,
            delete_rows: p(DELETE_ROWS)?,
            upsert_instances: p(UPSERT_INSTANCES)?,
            insert_rows: p(INSERT_ROWS)?,
            insert_dead_letters: p(INSERT_DEAD_LETTERS)?,
            upsert_commit: p(UPSERT_COMMIT)?,
            delete_windows: p(DELETE_WINDOWS)?,
            insert_window: p(INSERT_WINDOW)?,
            select_windows: p(SELECT_WINDOWS)?,
            select_latest_header: p(SELECT_LATEST_HEADER)?,
            select_header_at: p(SELECT_HEADER_AT)?,
            select_rows: p(SELECT_ROWS)?,
            select_instances: p(SELECT_INSTANCES)?,
            select_dead_letters: p(SELECT_DEAD_LETTERS)?,
            select_dead_letter_counts: p(SELECT_DEAD_LETTER_COUNTS)?,
            select_last_commit: p(SELECT_LAST_COMMIT)?,
        })
    }
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
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// A PostgreSQL `timestamptz` that may be `±infinity`.
type PgTime = Timestamp<SystemTime>;

/// `t` as a `timestamptz`, or `None` if PostgreSQL cannot hold it.
fn to_pg(t: Millis) -> Option<PgTime> {
    match t {
        Millis::MIN => Some(Timestamp::NegInfinity),
        Millis::MAX => Some(Timestamp::PosInfinity),
        Millis(ms) if (PG_MIN_MS..PG_END_MS).contains(&ms) => {
            let d = Duration::from_millis(ms.unsigned_abs());
            let t = if ms >= 0 {
                UNIX_EPOCH.checked_add(d)
            } else {
                UNIX_EPOCH.checked_sub(d)
            };
            t.map(Timestamp::Value)
        }
        Millis(_) => None,
    }
}

/// A `timestamptz` as milliseconds, flooring sub-millisecond digits (this store writes none).
fn from_pg(t: PgTime) -> Millis {
    match t {
        Timestamp::NegInfinity => Millis::MIN,
        Timestamp::PosInfinity => Millis::MAX,
        Timestamp::Value(t) => {
            let nanos = match t.duration_since(UNIX_EPOCH) {
                Ok(d) => d.as_nanos() as i128,
                Err(e) => -(e.duration().as_nanos() as i128),
            };
            let ms = nanos.div_euclid(1_000_000);
            // PostgreSQL's range is far inside i64 milliseconds.
            Millis(i64::try_from(ms).unwrap_or(if ms < 0 { i64::MIN } else { i64::MAX }))
        }
    }
}

/// Whether an error from PostgreSQL may go away on retry: a lost or refused connection, a
/// serialization failure or deadlock, a lock timeout, a server shutting down or out of
/// resources. Constraint, syntax, permission and conversion errors are permanent.
pub(crate) fn pg_retryable(e: &postgres::Error) -> bool {
    if let Some(code) = e.code() {
        let c = code.code();
        return c.starts_with("08") // connection exception
            || c.starts_with("53") // insufficient resources (too many connections, disk full)
            || c.starts_with("57P") // admin/crash shutdown, cannot connect now
            || *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::LOCK_NOT_AVAILABLE
            || *code == SqlState::QUERY_CANCELED; // lock_timeout / statement_timeout
    }
    if e.is_closed() {
        return true;
    }
    // Connect and I/O failures carry the io::Error as their source.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    e.to_string() == "timeout waiting for server"
}

/// The error with its causes and, for a server error, its SQLSTATE, on one line (the
/// `Display` of `postgres::Error` names only its kind, e.g. `db error`).
pub(crate) fn describe(e: &postgres::Error) -> String {
    let mut out = e.to_string();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string().replace('\n', "; "));
        cause = c.source();
    }
    if let Some(code) = e.code() {
        out.push_str(&format!(" (SQLSTATE {})", code.code()));
    }
    out
}

/// The connection string without user name and password, for messages.
pub(crate) fn redact(conn: &str) -> String {
    if let Some((scheme, rest)) = conn.split_once("://") {
        // Userinfo ends at the last '@' (an unencoded '@', '/' or '?' in a password still
        // comes before it); anything that looks like userinfo goes, even if it over-redacts.
        let rest = rest.rfind('@').map_or(rest, |i| &rest[i + 1..]);
        let (base, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let mut out = format!("{scheme}://{base}");
        if let Some(q) = query {
            let kept: Vec<&str> = q
                .split('&')
                .filter(|kv| {
                    let key = kv.split('=').next().unwrap_or("");
                    !key.eq_ignore_ascii_case("password") && !key.eq_ignore_ascii_case("user")
                })
                .collect();
            if !kept.is_empty() {
                out.push('?');
                out.push_str(&kept.join("&"));
            }
        }
        return out;
    }
    redact_key_values(conn).unwrap_or_else(|| "<unparsable connection string>".to_string())
}

/// `key=value` connection strings (`host=x password='a b'`) without `password` and `user`.
fn redact_key_values(conn: &str) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    let mut it = conn.chars().peekable();
    loop {
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        if it.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = it.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        it.next_if_eq(&'=')?;
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if it.next_if_eq(&'\'').is_some() {
            value.push('\'');
            loop {
                match it.next()? {
                    '\\' => {
                        value.push('\\');
                        value.push(it.next()?);
                    }
                    '\'' => break,
                    c => value.push(c),
                }
            }
            value.push('\'');
        } else {
            while let Some(c) = it.next_if(|c| !c.is_whitespace()) {
                value.push(c);
            }
        }
        if !key.eq_ignore_ascii_case("password") && !key.eq_ignore_ascii_case("user") {
            out.push(format!("{key}={value}"));
        }
    }
    Some(out.join(" "))
}

/// Drops the schema `schema` of the database at `url` with everything in it (for throwaway
/// schemas: benchmarks, tests). A schema that does not exist is no error.
pub fn drop_schema(url: &str, schema: &str) -> Result<(), SinkError> {
    let location = format!("{} schema {schema}", redact(url));
    let mut client = Client::connect(url, NoTls).map_err(pg_err(&location, "connecting"))?;
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", quote_ident(schema)))
        .map_err(pg_err(&location, "dropping the schema"))
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn pg_err(location: &str, op: impl Into<String>) -> impl FnOnce(postgres::Error) -> SinkError {
    let url = location.to_string();
    let op = op.into();
    move |source| SinkError::Postgres { url, op, source }
}

fn corrupt(location: &str, detail: String) -> SinkError {
    SinkError::Corrupt {
        path: PathBuf::from(location),
        detail,
    }
}

fn non_negative(location: &str, value: i64, what: &str) -> Result<u64, SinkError> {
    u64::try_from(value).map_err(|_| corrupt(location, format!("{what} is negative ({value})")))
}

fn parse_state(location: &str, s: &str) -> Result<ListState, SinkError> {
    ListState::parse(s).ok_or_else(|| corrupt(location, format!("unknown list state {s:?}")))
}

fn invalid(job: &str, detail: String) -> SinkError {
    SinkError::Invalid {
        job: job.to_string(),
        detail,
    }
}

/// `t` as a `timestamptz`, or [`SinkError::Invalid`] naming `what`.
fn pg_time(job: &str, t: Millis, what: impl FnOnce() -> String) -> Result<PgTime, SinkError> {
    to_pg(t).ok_or_else(|| {
        invalid(
            job,
            format!(
                "{}: {} ms is outside PostgreSQL's timestamptz range (4714-11-24 BC .. 294276-12-31)",
                what(),
                t.0
            ),
        )
    })
}

/// Rejects text PostgreSQL cannot store (U+0000).
fn pg_text(job: &str, s: &str, what: impl FnOnce() -> String) -> Result<(), SinkError> {
    if s.contains('\0') {
        return Err(invalid(
            job,
            format!("{} {s:?} contains U+0000, which PostgreSQL text cannot hold", what()),
        ));
    }
    Ok(())
}

/// A checked batch as the column arrays the commit statements bind.
struct Columns<'a> {
    // One entry per instance (headers and the DELETE).
    h_window: Vec<&'a str>,
    h_start: Vec<PgTime>,
    h_end: Vec<PgTime>,
    h_revision: Vec<i64>,
    h_state: Vec<&'static str>,
    h_final: Vec<bool>,
    h_watermark: Vec<PgTime>,
    h_as_of: Vec<PgTime>,
    h_count: Vec<i64>,
    // One entry per row.
    r_window: Vec<&'a str>,
    r_start: Vec<PgTime>,
    r_end: Vec<PgTime>,
    r_revision: Vec<i64>,
    r_final: Vec<bool>,
    r_state: Vec<&'static str>,
    r_as_of: Vec<PgTime>,
    r_rank: Vec<i64>,
    r_item: Vec<&'a str>,
    r_count: Vec<i64>,
    // One entry per dead letter.
    d_source: Vec<&'a str>,
    d_partition: Vec<i64>,
    d_position: Vec<i64>,
    d_reason: Vec<&'static str>,
    d_detail: Vec<Cow<'a, str>>,
    d_raw: Vec<&'a [u8]>,
    watermark: PgTime,
}

impl<'a> Columns<'a> {
    /// Converts a batch `check_batch` accepted, rejecting what PostgreSQL cannot hold.
    fn of(batch: &'a CommitBatch) -> Result<Columns<'a>, SinkError> {
        let job = batch.job.as_str();
        pg_text(job, job, || "job id".into())?;
        let lists = latest_revisions(&batch.lists);
        let rows: usize = lists.iter().map(|l| l.items.len()).sum();
        let mut c = Columns {
            h_window: Vec::with_capacity(lists.len()),
            h_start: Vec::with_capacity(lists.len()),
            h_end: Vec::with_capacity(lists.len()),
            h_revision: Vec::with_capacity(lists.len()),
            h_state: Vec::with_capacity(lists.len()),
            h_final: Vec::with_capacity(lists.len()),
            h_watermark: Vec::with_capacity(lists.len()),
            h_as_of: Vec::with_capacity(lists.len()),
            h_count: Vec::with_capacity(lists.len()),
            r_window: Vec::with_capacity(rows),
            r_start: Vec::with_capacity(rows),
            r_end: Vec::with_capacity(rows),
            r_revision: Vec::with_capacity(rows),
            r_final: Vec::with_capacity(rows),
            r_state: Vec::with_capacity(rows),
            r_as_of: Vec::with_capacity(rows),
            r_rank: Vec::with_capacity(rows),
            r_item: Vec::with_capacity(rows),
            r_count: Vec::with_capacity(rows),
            d_source: Vec::with_capacity(batch.dead_letters.len()),
            d_partition: Vec::with_capacity(batch.dead_letters.len()),
            d_position: Vec::with_capacity(batch.dead_letters.len()),
            d_reason: Vec::with_capacity(batch.dead_letters.len()),
            d_detail: Vec::with_capacity(batch.dead_letters.len()),
            d_raw: Vec::with_capacity(batch.dead_letters.len()),
            watermark: pg_time(job, batch.watermark, || "the batch watermark".into())?,
        };
        for l in lists {
            let at = || format!("list {:?}@{}", l.window, l.start.0);
            pg_text(job, &l.window, || "window name".into())?;
            let start = pg_time(job, l.start, || format!("{}: start", at()))?;
            let end = pg_time(job, l.end, || format!("{}: end", at()))?;
            let watermark = pg_time(job, l.watermark, || format!("{}: watermark", at()))?;
            let as_of = pg_time(job, l.as_of, || format!("{}: as_of", at()))?;
            let state = l.state.as_str();
            let is_final = l.state == ListState::Final;
            let revision = i64::from(l.revision);
            c.h_window.push(&l.window);
            c.h_start.push(start);
            c.h_end.push(end);
            c.h_revision.push(revision);
            c.h_state.push(state);
            c.h_final.push(is_final);
            c.h_watermark.push(watermark);
            c.h_as_of.push(as_of);
            c.h_count.push(i64::try_from(l.items.len()).unwrap_or(i64::MAX));
            for (i, item) in l.items.iter().enumerate() {
                pg_text(job, &item.item_id, || format!("{}: item id", at()))?;
                c.r_window.push(&l.window);
                c.r_start.push(start);
                c.r_end.push(end);
                c.r_revision.push(revision);
                c.r_final.push(is_final);
                c.r_state.push(state);
                c.r_as_of.push(as_of);
                c.r_rank.push(i64::try_from(i + 1).unwrap_or(i64::MAX));
                c.r_item.push(&item.item_id);
                // `check_batch` has verified the count fits an i64.
                c.r_count.push(item.count as i64);
            }
        }
        for d in &batch.dead_letters {
            pg_text(job, &d.source, || "dead letter source".into())?;
            c.d_source.push(&d.source);
            c.d_partition.push(i64::from(d.letter.partition.0));
            // `check_batch` has verified the position fits an i64.
            c.d_position.push(d.letter.position as i64);
            c.d_reason.push(d.letter.reason.as_str());
            c.d_detail.push(if d.letter.detail.contains('\0') {
                Cow::Owned(d.letter.detail.replace('\0', "\u{FFFD}"))
            } else {
                Cow::Borrowed(d.letter.detail.as_str())
            });
            c.d_raw.push(&d.letter.raw);
        }
        Ok(c)
    }
}

/// An instance header as stored, before validation.
struct RawHeader {
    start: PgTime,
    end: PgTime,
    revision: i64,
    state: String,
    watermark: PgTime,
    as_of: PgTime,
    item_count: i64,
}

impl RawHeader {
    fn of(r: &postgres::Row) -> Result<RawHeader, postgres::Error> {
        Ok(RawHeader {
            start: r.try_get(0)?,
            end: r.try_get(1)?,
            revision: r.try_get(2)?,
            state: r.try_get(3)?,
            watermark: r.try_get(4)?,
            as_of: r.try_get(5)?,
            item_count: r.try_get(6)?,
        })
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (e.g. `postgresql://postgres@127.0.0.1:5432/test`, or a
    /// `host=… dbname=…` string; no TLS) and uses its `public` schema, creating the tables if
    /// missing.
    pub fn connect(url: &str) -> Result<PostgresStore, SinkError> {
        PostgresStore::connect_with_schema(url, DEFAULT_SCHEMA)
    }

    /// Connects to the database at `url` and uses the schema `schema` (created if missing; the
    /// name is used as is, case-sensitive), creating the tables if missing. Several jobs or test
    /// runs can share a database in separate schemas.
    pub fn connect_with_schema(url: &str, schema: &str) -> Result<PostgresStore, SinkError> {
        let location = format!("{} schema {schema}", redact(url));
        let mut client = Client::connect(url, NoTls).map_err(pg_err(&location, "connecting"))?;
        let session = format!(
            "SET search_path TO {}; SET lock_timeout = {}",
            quote_ident(schema),
            LOCK_TIMEOUT.as_millis()
        );
        client
            .batch_execute(&session)
            .map_err(pg_err(&location, "setting the search path and lock timeout"))?;
        ensure_schema(&mut client, schema, &location)?;
        let stmts = Statements::prepare(&mut client).map_err(pg_err(&location, "preparing the statements"))?;
        Ok(PostgresStore {
            client,
            stmts,
            conn_str: url.to_string(),
            schema: schema.to_string(),
            location,
        })
    }

    /// The schema this store uses.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The server and schema, without credentials (as errors name them).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Reconnects if the connection was lost (a previous call then failed with a retryable
    /// error), so that retrying the call can succeed.
    fn live(&mut self) -> Result<(), SinkError> {
        if self.client.is_closed() {
            *self = PostgresStore::connect_with_schema(&self.conn_str, &self.schema)?;
        }
        Ok(())
    }

    /// The job's windows, in configured order.
    pub fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        self.live()?;
        let loc = self.location.as_str();
        let rows = self
            .client
            .query(&self.stmts.select_windows, &[&job])
            .map_err(pg_err(loc, format!("reading the windows of job {job:?}")))?;
        rows.iter()
            .map(|r| {
                let get = || -> Result<(String, i64, i64, i64), postgres::Error> {
                    Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?))
                };
                let (name, size, slide, k) =
                    get().map_err(pg_err(loc, format!("reading the windows of job {job:?}")))?;
                let what = |c: &str| format!("window {name:?} {c}");
                let size = non_negative(loc, size, &what("size"))?;
                let slide = non_negative(loc, slide, &what("slide"))?;
                let k = usize::try_from(non_negative(loc, k, &what("k"))?)
                    .map_err(|_| corrupt(loc, what("k is too large")))?;
                Ok(StoredWindow {
                    name,
                    size: Span::from_millis(size),
                    slide: Span::from_millis(slide),
                    k,
                })
            })
            .collect()
    }

    /// The stored list of the window's instance with the greatest start, if any.
    pub fn latest(&mut self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, window, None)
    }

    /// The stored list of the window's instance starting at `start`, if any.
    pub fn instance(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, SinkError> {
        self.read_list(job, window, Some(start))
    }

    /// Every stored instance of the window as (start, revision, state), earliest first.
    pub fn instances(&mut self, job: &str, window: &str) -> Result<Vec<(Millis, u32, ListState)>, SinkError> {
        self.live()?;
        let loc = self.location.as_str();
        let op = || format!("listing the instances of job {job:?} window {window:?}");
        let rows = self
            .client
            .query(&self.stmts.select_instances, &[&job, &window])
            .map_err(pg_err(loc, op()))?;
        rows.iter()
            .map(|r| {
                let get = || -> Result<(PgTime, i64, String), postgres::Error> {
                    Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?))
                };
                let (start, revision, state) = get().map_err(pg_err(loc, op()))?;
                let revision =
                    u32::try_from(revision).map_err(|_| corrupt(loc, format!("revision {revision} out of range")))?;
                Ok((from_pg(start), revision, parse_state(loc, &state)?))
            })
            .collect()
    }

    /// The job's most recent dead letters, newest first, at most `limit`.
    pub fn dead_letters(&mut self, job: &str, limit: usize) -> Result<Vec<SourcedDeadLetter>, SinkError> {
        self.live()?;
        let loc = self.location.as_str();
        let op = || format!("reading the dead letters of job {job:?}");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .client
            .query(&self.stmts.select_dead_letters, &[&job, &limit])
            .map_err(pg_err(loc, op()))?;
        rows.iter()
            .map(|r| {
                type Raw = (String, i64, i64, String, String, Vec<u8>);
                let get = || -> Result<Raw, postgres::Error> {
                    Ok((
                        r.try_get(0)?,
                        r.try_get(1)?,
                        r.try_get(2)?,
                        r.try_get(3)?,
                        r.try_get(4)?,
                        r.try_get(5)?,
                    ))
                };
                let (source, partition, position, reason, detail, raw) = get().map_err(pg_err(loc, op()))?;
                let partition = u32::try_from(partition)
                    .map_err(|_| corrupt(loc, format!("dead letter partition {partition} out of range")))?;
                let position = non_negative(loc, position, "dead letter position")?;
                let reason = parse_reason(&reason)
                    .ok_or_else(|| corrupt(loc, format!("unknown dead letter reason {reason:?}")))?;
                Ok(SourcedDeadLetter {
                    source,
                    letter: DeadLetter {
                        partition: PartitionId(partition),
                        position,
                        raw,
                        reason,
                        detail,
                    },
                })
            })
            .collect()
    }

    /// How many dead letters the job has per reason (`"bad"`, `"late"`, `"sealed"`), by reason
    /// name; reasons without letters are left out.
    pub fn dead_letter_counts(&mut self, job: &str) -> Result<Vec<(String, u64)>, SinkError> {
        self.live()?;
        let loc = self.location.as_str();
        let op = || format!("counting the dead letters of job {job:?}");
        let rows = self
            .client
            .query(&self.stmts.select_dead_letter_counts, &[&job])
            .map_err(pg_err(loc, op()))?;
        rows.iter()
            .map(|r| {
                let get = || -> Result<(String, i64), postgres::Error> { Ok((r.try_get(0)?, r.try_get(1)?)) };
                let (reason, n) = get().map_err(pg_err(loc, op()))?;
                Ok((reason, non_negative(loc, n, "count")?))
            })
            .collect()
    }

    /// The job's last commit as `(epoch, watermark)`.
    pub fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        self.live()?;
        let loc = self.location.as_str();
        let op = || format!("reading the last commit of job {job:?}");
        let row = self
            .client
            .query_opt(&self.stmts.select_last_commit, &[&job])
            .map_err(pg_err(loc, op()))?;
        let Some(r) = row else {
            return Ok(None);
        };
        let get = || -> Result<(i64, PgTime), postgres::Error> { Ok((r.try_get(0)?, r.try_get(1)?)) };
        let (epoch, wm) = get().map_err(pg_err(loc, op()))?;
        Ok(Some((non_negative(loc, epoch, "commit epoch")?, from_pg(wm))))
    }

    /// Reads one instance's header and rows in one read-only REPEATABLE READ transaction and
    /// checks they agree.
    fn read_list(&mut self, job: &str, window: &str, start: Option<Millis>) -> Result<Option<StoredList>, SinkError> {
        self.live()?;
        let PostgresStore {
            client,
            stmts,
            location,
            ..
        } = self;
        let loc = location.as_str();
        let op = || match start {
            Some(s) => format!("reading job {job:?} window {window:?} instance {}", s.0),
            None => format!("reading the latest list of job {job:?} window {window:?}"),
        };
        let start = match start {
            // An instant PostgreSQL cannot hold is never stored.
            Some(s) => match to_pg(s) {
                Some(t) => Some(t),
                None => return Ok(None),
            },
            None => None,
        };
        type Rows = Vec<(i64, ItemId, i64, i64)>;
        let mut read = || -> Result<Option<(RawHeader, Rows)>, postgres::Error> {
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let header = match &start {
                Some(s) => tx.query_opt(&stmts.select_header_at, &[&job, &window, s])?,
                None => tx.query_opt(&stmts.select_latest_header, &[&job, &window])?,
            };
            let Some(header) = header else {
                tx.commit()?;
                return Ok(None);
            };
            let header = RawHeader::of(&header)?;
            let found = tx.query(&stmts.select_rows, &[&job, &window, &header.start])?;
            tx.commit()?;
            let mut rows = Vec::with_capacity(found.len());
            for r in &found {
                let item: &str = r.try_get(1)?;
                rows.push((r.try_get(0)?, ItemId::from(item), r.try_get(2)?, r.try_get(3)?));
            }
            Ok(Some((header, rows)))
        };
        let Some((h, rows)) = read().map_err(pg_err(loc, op()))? else {
            return Ok(None);
        };
        let start = from_pg(h.start);
        let at = || format!("job {job:?} window {window:?} instance {}", start.0);
        let (revision, items) =
            crate::types::check_rows(&at(), h.revision, h.item_count, rows).map_err(|detail| corrupt(loc, detail))?;
        Ok(Some(StoredList {
            window: window.to_string(),
            start,
            end: from_pg(h.end),
            revision,
            state: parse_state(loc, &h.state)?,
            watermark: from_pg(h.watermark),
            as_of: from_pg(h.as_of),
            items,
        }))
    }
}

/// Creates the schema (if missing) and the tables (if missing) and stamps the schema version, in
/// one transaction under an advisory lock; the session's `search_path` already names `schema`.
fn ensure_schema(client: &mut Client, schema: &str, location: &str) -> Result<(), SinkError> {
    let op = "creating the tables";
    let err = |e| pg_err(location, op)(e);
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(err)?;
    // Only try to create a missing schema: creating needs a privilege using one does not.
    let exists = tx
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .map_err(err)?
        .is_some();
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema)))
            .map_err(err)?;
    }
    tx.batch_execute(VERSION_TABLE).map_err(err)?;
    let version: Option<i64> = match tx.query_opt("SELECT version FROM hotlist_schema", &[]).map_err(err)? {
        Some(r) => Some(r.try_get(0).map_err(err)?),
        None => None,
    };
    if let Some(v) = version.filter(|v| *v > SCHEMA_VERSION) {
        return Err(SinkError::Schema {
            path: PathBuf::from(location),
            detail: format!("schema version {v} is newer than this build's ({SCHEMA_VERSION})"),
        });
    }
    tx.batch_execute(SCHEMA).map_err(err)?;
    if version != Some(SCHEMA_VERSION) {
        tx.execute(
            "INSERT INTO hotlist_schema (one, version) VALUES (TRUE, $1)
             ON CONFLICT (one) DO UPDATE SET version = excluded.version",
            &[&SCHEMA_VERSION],
        )
        .map_err(err)?;
    }
    tx.commit().map_err(err)
}

impl SinkStore for PostgresStore {
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
        check_prepare(job, windows)?;
        pg_text(job, job, || "job id".into())?;
        for w in windows {
            pg_text(job, &w.name, || "window name".into())?;
        }
        self.live()?;
        let PostgresStore {
            client,
            stmts,
            location,
            schema,
            ..
        } = self;
        ensure_schema(client, schema, location)?;
        let op = format!("recording the windows of job {job:?}");
        (|| -> Result<(), postgres::Error> {
            let mut tx = client.transaction()?;
            // Every process of a cluster prepares: serialize them (delete + insert would race).
            tx.execute(&stmts.lock_job, &[&COMMIT_LOCK_CLASS, &job])?;
            tx.execute(&stmts.delete_windows, &[&job])?;
            for (ord, w) in windows.iter().enumerate() {
                // `check_prepare` has verified k fits; spans are at most i64::MAX.
                let params: [&(dyn ToSql + Sync); 6] = [
                    &job,
                    &w.name,
                    &w.size.as_i64(),
                    &w.slide.as_i64(),
                    &(w.k as i64),
                    &(ord as i64),
                ];
                tx.execute(&stmts.insert_window, &params)?;
            }
            tx.commit()
        })()
        .map_err(pg_err(location, op))
    }

    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError> {
        check_batch(batch)?;
        let cols = Columns::of(batch)?;
        self.live()?;
        let PostgresStore {
            client,
            stmts,
            location,
            ..
        } = self;
        let loc = location.as_str();
        let op = || format!("commit of job {:?} epoch {}", batch.job, batch.epoch);
        let job = batch.job.as_str();
        // `check_batch` has verified the epoch fits an i64.
        let epoch = batch.epoch as i64;
        let now = to_pg(Millis::now()).unwrap_or(Timestamp::PosInfinity);
        let mut write = || -> Result<Result<bool, SinkError>, postgres::Error> {
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::ReadCommitted)
                .start()?;
            // Serialize with other committers of the job, even before its first commit row exists.
            tx.execute(&stmts.lock_job, &[&COMMIT_LOCK_CLASS, &job])?;
            if let Some(r) = tx.query_opt(&stmts.select_epoch_for_update, &[&job])? {
                let committed: i64 = r.try_get(0)?;
                let committed = match non_negative(loc, committed, "committed epoch") {
                    Ok(c) => c,
                    Err(e) => return Ok(Err(e)),
                };
                if committed >= batch.epoch {
                    tx.rollback()?;
                    return Ok(Ok(false));
                }
            }
            if !cols.h_window.is_empty() {
                tx.execute(&stmts.delete_rows, &[&job, &cols.h_window, &cols.h_start])?;
                tx.execute(
                    &stmts.upsert_instances,
                    &[
                        &job,
                        &cols.h_window,
                        &cols.h_start,
                        &cols.h_end,
                        &cols.h_revision,
                        &cols.h_state,
                        &cols.h_final,
                        &cols.h_watermark,
                        &cols.h_as_of,
                        &cols.h_count,
                    ],
                )?;
            }
            if !cols.r_item.is_empty() {
                tx.execute(
                    &stmts.insert_rows,
                    &[
                        &job,
                        &cols.r_window,
                        &cols.r_start,
                        &cols.r_end,
                        &cols.r_revision,
                        &cols.r_final,
                        &cols.r_state,
                        &cols.r_as_of,
                        &cols.r_rank,
                        &cols.r_item,
                        &cols.r_count,
                    ],
                )?;
            }
            if !cols.d_source.is_empty() {
                tx.execute(
                    &stmts.insert_dead_letters,
                    &[
                        &job,
                        &epoch,
                        &now,
                        &cols.d_source,
                        &cols.d_partition,
                        &cols.d_position,
                        &cols.d_reason,
                        &cols.d_detail,
                        &cols.d_raw,
                    ],
                )?;
            }
            tx.execute(&stmts.upsert_commit, &[&job, &epoch, &cols.watermark, &now])?;
            crate::crash_point::crash_point("sink.commit");
            tx.commit()?;
            Ok(Ok(true))
        };
        write().map_err(pg_err(loc, op()))?
    }

    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError> {
        self.live()?;
        let loc = self.location.as_str();
        let op = || format!("reading the committed epoch of job {job:?}");
        let row = self
            .client
            .query_opt(&self.stmts.select_epoch, &[&job])
            .map_err(pg_err(loc, op()))?;
        match row {
            None => Ok(None),
            Some(r) => {
                let epoch: i64 = r.try_get(0).map_err(pg_err(loc, op()))?;
                Ok(Some(non_negative(loc, epoch, "committed epoch")?))
            }
        }
    }
}

impl StoreReader for PostgresStore {
    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        PostgresStore::windows(self, job)
    }
    fn latest(&mut self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        PostgresStore::latest(self, job, window)
    }
    fn instance(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, SinkError> {
        PostgresStore::instance(self, job, window, start)
    }
    fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        PostgresStore::last_commit(self, job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{
        batch, letter, list, measure_throughput, race_commits_and_reads, rows_for, windows, JOB,
    };
    use hotlist_operators::record::{DeadReason, PublishedList};
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::Barrier;

    /// The test server: `HOTLIST_TEST_POSTGRES_URL`, or the local one.
    fn test_url() -> String {
        std::env::var("HOTLIST_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432/test".into())
    }

    /// A schema of its own for one test, dropped with everything in it when the test ends.
    struct TestDb {
        url: String,
        schema: String,
    }

    impl TestDb {
        fn new() -> TestDb {
            let url = test_url();
            if let Err(e) = Client::connect(&url, NoTls) {
                panic!(
                    "PostgreSQL is not reachable at {} ({}). These tests need a real server: start it \
                     (`sudo service postgresql start` or `pg_ctlcluster 15 main start`), create the database \
                     (`createdb -h 127.0.0.1 -U postgres test`) with trust auth for user postgres on 127.0.0.1, \
                     or set HOTLIST_TEST_POSTGRES_URL to another server.",
                    redact(&url),
                    describe(&e)
                );
            }
            let mut h = RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            let schema = format!("hotlist_test_{:016x}", h.finish());
            TestDb { url, schema }
        }

        fn store(&self) -> PostgresStore {
            PostgresStore::connect_with_schema(&self.url, &self.schema).unwrap_or_else(|e| panic!("{e}"))
        }

        /// A plain connection on the test schema, for looking at the tables directly.
        fn client(&self) -> Client {
            let mut c = Client::connect(&self.url, NoTls).unwrap();
            c.batch_execute(&format!(
                "SET search_path TO {}; SET TimeZone = 'UTC'",
                quote_ident(&self.schema)
            ))
            .unwrap();
            c
        }
    }

    impl Drop for TestDb {
        fn drop(&mut self) {
            if let Err(e) = drop_schema(&self.url, &self.schema) {
                eprintln!("could not drop test schema {}: {e}", self.schema);
            }
        }
    }

    /// (rank, revision) of the rows of the `1m` instance at `start`.
    fn raw_rows(db: &TestDb, start: i64) -> Vec<(i64, i64)> {
        let t = to_pg(Millis(start)).unwrap();
        db.client()
            .query(
                "SELECT rank, revision FROM topk WHERE window_name = '1m' AND window_start = $1 ORDER BY rank",
                &[&t],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    #[test]
    fn higher_revision_replaces_rows_without_stale_ranks() {
        let db = TestDb::new();
        let mut store = db.store();
        assert!(store.commit(&batch(1, vec![list(0, 1, 137)])).unwrap());
        let got = store.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert_eq!(got, StoredList::from(list(0, 1, 137)));
        // Two revisions in one batch: the highest wins, regardless of order.
        assert!(store.commit(&batch(2, vec![list(0, 3, 2), list(0, 2, 7)])).unwrap());
        let got = store.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert_eq!(got, StoredList::from(list(0, 3, 2)));
        assert_eq!(got.state, ListState::Final);
        assert_eq!(raw_rows(&db, 0), vec![(1, 3), (2, 3)]);
        let finals: Vec<bool> = db
            .client()
            .query("SELECT final FROM topk UNION ALL SELECT final FROM topk_instances", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(finals, vec![true; 3]);
        // An empty list still has a header.
        assert!(store.commit(&batch(3, vec![list(0, 4, 0)])).unwrap());
        let got = store.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert_eq!((got.revision, got.items.len()), (4, 0));
        assert!(raw_rows(&db, 0).is_empty());
        assert_eq!(store.instance(JOB, "1m", Millis(60_000)).unwrap(), None);
        assert_eq!(store.instance("other", "1m", Millis(0)).unwrap(), None);
        // An instant PostgreSQL cannot hold is simply not there.
        assert_eq!(store.instance(JOB, "1m", Millis(PG_END_MS)).unwrap(), None);
    }

    #[test]
    fn epochs_at_or_below_the_committed_one_are_skipped() {
        let db = TestDb::new();
        let mut store = db.store();
        assert_eq!(store.committed_epoch(JOB).unwrap(), None);
        assert!(store.commit(&batch(5, vec![list(0, 1, 3)])).unwrap());
        for epoch in [5, 4, 0] {
            let mut b = batch(epoch, vec![list(0, 9, 1)]);
            b.dead_letters = vec![letter(1, DeadReason::Bad, b"x")];
            assert!(!store.commit(&b).unwrap());
        }
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(5));
        assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap().unwrap().revision, 1);
        assert!(store.dead_letters(JOB, 10).unwrap().is_empty());
        // Epochs are per job.
        let mut other = batch(1, vec![]);
        other.job = "other".into();
        assert!(store.commit(&other).unwrap());
        assert_eq!(store.committed_epoch("other").unwrap(), Some(1));
        // Survives reconnecting (and re-running the migrations).
        drop(store);
        let mut store = db.store();
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(5));
        assert!(store.commit(&batch(6, vec![])).unwrap());
        assert_eq!(store.last_commit(JOB).unwrap(), Some((6, Millis(6000))));
        assert_eq!(store.last_commit("nobody").unwrap(), None);
    }

    #[test]
    fn dead_letters_round_trip_raw_bytes() {
        let db = TestDb::new();
        let mut store = db.store();
        let letters = [
            letter(1, DeadReason::Bad, &[0xff, 0x00, 0xc3, 0x28, b'{']),
            letter(2, DeadReason::Late, b"{\"item\":\"a\",\"ts\":1}"),
            letter(3, DeadReason::Bad, &[]),
            letter(u64::from(u32::MAX) + 7, DeadReason::Sealed, &[0x80; 300]),
            letter(i64::MAX as u64, DeadReason::Bad, b"\0"),
        ];
        let mut b = batch(1, vec![]);
        b.dead_letters = letters[..2].to_vec();
        assert!(store.commit(&b).unwrap());
        let mut b = batch(2, vec![]);
        b.dead_letters = letters[2..].to_vec();
        assert!(store.commit(&b).unwrap());
        drop(store);
        let mut reader = db.store();
        let newest_first: Vec<_> = letters.iter().rev().cloned().collect();
        assert_eq!(reader.dead_letters(JOB, 100).unwrap(), newest_first);
        assert_eq!(reader.dead_letters(JOB, 2).unwrap(), newest_first[..2]);
        assert_eq!(reader.dead_letters(JOB, usize::MAX).unwrap().len(), letters.len());
        assert!(reader.dead_letters("other", 10).unwrap().is_empty());
        assert_eq!(
            reader.dead_letter_counts(JOB).unwrap(),
            vec![
                ("bad".to_string(), 3),
                ("late".to_string(), 1),
                ("sealed".to_string(), 1)
            ]
        );
        // U+0000 cannot be stored in text: a detail keeps the rest, with U+FFFD in its place.
        let mut b = batch(3, vec![]);
        let mut l = letter(9, DeadReason::Bad, b"\0\x01");
        l.letter.detail = "ts: \"\0\" is not a time".into();
        b.dead_letters = vec![l];
        assert!(reader.commit(&b).unwrap());
        let got = reader.dead_letters(JOB, 1).unwrap().remove(0);
        assert_eq!(got.letter.detail, "ts: \"\u{FFFD}\" is not a time");
        assert_eq!(got.letter.raw, b"\0\x01");
        // Position and ids are stored as BIGINT, raw as bytea.
        let types: Vec<String> = db
            .client()
            .query(
                "SELECT data_type FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = 'dead_letters'
                   AND column_name IN ('position', 'raw', 'recorded_at') ORDER BY column_name",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(types, ["bigint", "bytea", "timestamp with time zone"]);
    }

    #[test]
    fn times_round_trip_as_timestamptz_including_negative_and_infinite() {
        let db = TestDb::new();
        let mut store = db.store();
        let mut a = list(-1, 1, 2); // one millisecond before the epoch
        a.watermark = Millis::MIN;
        a.as_of = Millis::MAX;
        let mut b = list(PG_MIN_MS, 1, 1); // the earliest instant PostgreSQL holds
        b.end = Millis(PG_END_MS - 1); // and the last
        let mut c = list(-62_135_596_800_001, 2, 1); // 0000-12-31T23:59:59.999Z (1 BC)
        c.end = Millis::MAX;
        let mut bt = batch(1, vec![a.clone(), b.clone(), c.clone()]);
        bt.watermark = Millis::MIN;
        assert!(store.commit(&bt).unwrap());
        assert_eq!(store.last_commit(JOB).unwrap(), Some((1, Millis::MIN)));
        for l in [&a, &b, &c] {
            let got = store.instance(JOB, "1m", l.start).unwrap().unwrap();
            assert_eq!(got, StoredList::from(l.clone()));
        }
        // The columns are real timestamptz values, not integers in disguise.
        let text: Vec<(String, String, String, String)> = db
            .client()
            .query(
                "SELECT window_start::text, window_end::text, watermark::text, as_of::text
                 FROM topk_instances t ORDER BY t.window_start",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        let s = |x: &str| x.to_string();
        assert_eq!(
            text,
            vec![
                (
                    s("4714-11-24 00:00:00+00 BC"),
                    s("294276-12-31 23:59:59.999+00"),
                    s("4714-11-24 00:00:00.001+00 BC"),
                    s("2023-11-14 22:13:20+00")
                ),
                (
                    s("0001-12-31 23:59:59.999+00 BC"),
                    s("infinity"),
                    s("0001-01-01 00:00:00+00"),
                    s("2023-11-14 22:13:20+00")
                ),
                (
                    s("1969-12-31 23:59:59.999+00"),
                    s("1970-01-01 00:00:59.999+00"),
                    s("-infinity"),
                    s("infinity")
                ),
            ]
        );
        let mut bt = batch(2, vec![]);
        bt.watermark = Millis::MAX;
        assert!(store.commit(&bt).unwrap());
        assert_eq!(store.last_commit(JOB).unwrap(), Some((2, Millis::MAX)));

        // Instants PostgreSQL cannot hold are refused before anything is written.
        for bad in [Millis(PG_MIN_MS - 1), Millis(PG_END_MS), Millis(i64::MIN + 1)] {
            let mut l = list(0, 5, 3);
            l.watermark = bad;
            let err = store.commit(&batch(3, vec![l])).unwrap_err();
            assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
            assert!(!err.retryable());
            assert!(err.to_string().contains("timestamptz range"), "{err}");
        }
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(2));
        assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap(), None);
    }

    #[test]
    fn text_postgres_cannot_hold_is_refused() {
        let db = TestDb::new();
        let mut store = db.store();
        let mut l = list(0, 1, 2);
        l.items[1].item_id = "a\0b".into();
        let err = store.commit(&batch(1, vec![l])).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(err.to_string().contains("U+0000"), "{err}");
        assert_eq!(store.committed_epoch(JOB).unwrap(), None);
        let err = store
            .prepare(JOB, &[WindowSpec::tumbling("a\0", Span::from_millis(60_000), 3)])
            .unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
    }

    /// The processes of a cluster all prepare the sink at start, at the same moment: none
    /// fails (found by the 2-process Kafka crash test: delete + insert raced on the key).
    #[test]
    fn concurrent_prepares_of_one_job_all_succeed() {
        let db = TestDb::new();
        db.store().prepare(JOB, &windows()).unwrap();
        let barrier = std::sync::Barrier::new(4);
        let errors: Vec<String> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut store = db.store();
                        (0..25)
                            .filter_map(|_| {
                                barrier.wait();
                                store.prepare(JOB, &windows()).err().map(|e| e.to_string())
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
        });
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(db.store().windows(JOB).unwrap().len(), windows().len());
    }

    #[test]
    fn latest_instances_and_windows() {
        let db = TestDb::new();
        let mut store = db.store();
        let m = |n| Span::from_millis(n);
        let windows = windows();
        assert!(store.windows(JOB).unwrap().is_empty());
        store.prepare(JOB, &windows).unwrap();
        let stored = store.windows(JOB).unwrap();
        assert_eq!(stored, windows.iter().map(StoredWindow::from).collect::<Vec<_>>());
        // Re-preparing replaces the definition.
        store.prepare(JOB, &windows[1..]).unwrap();
        assert_eq!(store.windows(JOB).unwrap().len(), 1);
        assert_eq!(store.windows(JOB).unwrap()[0].slide, m(30_000));
        assert!(store.prepare(JOB, &[WindowSpec::tumbling("x", m(0), 1)]).is_err());
        assert!(store.prepare("", &windows).is_err());

        assert_eq!(store.latest(JOB, "1m").unwrap(), None);
        let b = batch(1, vec![list(120_000, 1, 2), list(-60_000, 2, 1), list(60_000, 1, 4)]);
        assert!(store.commit(&b).unwrap());
        let latest = store.latest(JOB, "1m").unwrap().unwrap();
        assert_eq!(latest, StoredList::from(list(120_000, 1, 2)));
        assert_eq!(
            store.instances(JOB, "1m").unwrap(),
            vec![
                (Millis(-60_000), 2, ListState::Open),
                (Millis(60_000), 1, ListState::Open),
                (Millis(120_000), 1, ListState::Open),
            ]
        );
        assert!(store.instances(JOB, "5m").unwrap().is_empty());
        // Through the reader trait.
        let reader: &mut dyn StoreReader = &mut store;
        assert_eq!(reader.latest(JOB, "1m").unwrap(), Some(latest));
        assert_eq!(reader.last_commit(JOB).unwrap(), Some((1, Millis(1000))));
        assert_eq!(reader.windows(JOB).unwrap().len(), 1);
        assert_eq!(
            reader.instance(JOB, "1m", Millis(60_000)).unwrap().unwrap().items.len(),
            4
        );
    }

    /// "Latest list of window W" and "list of window W at start D" (header and rows) are index
    /// lookups in the primary keys, not scans.
    #[test]
    fn list_reads_use_the_primary_keys() {
        let db = TestDb::new();
        let mut store = db.store();
        // Enough instances and rows that a sequential scan would be the planner's choice if the
        // keys did not serve the queries.
        let lists: Vec<PublishedList> = (0..3000).map(|i| list(i * 60_000, 1, 5)).collect();
        assert!(store.commit(&batch(1, lists)).unwrap());
        let mut c = db.client();
        c.batch_execute("ANALYZE topk; ANALYZE topk_instances").unwrap();
        let plan = |c: &mut Client, sql: &str| -> String {
            c.query(&format!("EXPLAIN {sql}"), &[])
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let at = "'1970-01-01T01:00:00Z'::timestamptz";
        for (sql, index) in [
            (
                SELECT_LATEST_HEADER.replace("$1", "'hotlist'").replace("$2", "'1m'"),
                "topk_instances_pkey",
            ),
            (
                SELECT_HEADER_AT
                    .replace("$1", "'hotlist'")
                    .replace("$2", "'1m'")
                    .replace("$3", at),
                "topk_instances_pkey",
            ),
            (
                SELECT_ROWS
                    .replace("$1", "'hotlist'")
                    .replace("$2", "'1m'")
                    .replace("$3", at),
                "topk_pkey",
            ),
        ] {
            let p = plan(&mut c, &sql);
            assert!(p.contains("Index") && p.contains(index), "{sql}\n{p}");
            assert!(!p.contains("Seq Scan") && !p.contains("Sort"), "{sql}\n{p}");
        }
        assert_eq!(store.latest(JOB, "1m").unwrap().unwrap().start, Millis(2999 * 60_000));
    }

    #[test]
    fn inconsistent_rows_are_reported_as_corrupt() {
        let db = TestDb::new();
        let mut store = db.store();
        assert!(store.commit(&batch(1, vec![list(0, 1, 4)])).unwrap());
        let mut c = db.client();
        c.batch_execute("DELETE FROM topk WHERE rank = 4").unwrap();
        let err = store.latest(JOB, "1m").unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("3 rows but item_count 4"), "{err}");
        assert!(err.to_string().contains(&db.schema), "{err}");
        c.batch_execute("UPDATE topk_instances SET item_count = 3; UPDATE topk SET revision = 2 WHERE rank = 2")
            .unwrap();
        let err = store.instance(JOB, "1m", Millis(0)).unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        c.batch_execute("UPDATE topk SET revision = 1; UPDATE topk SET rank = 7 WHERE rank = 3")
            .unwrap();
        let err = store.instance(JOB, "1m", Millis(0)).unwrap_err();
        assert!(err.to_string().contains("rank 7"), "{err}");
    }

    #[test]
    fn errors_name_the_server_without_credentials() {
        let url = "postgresql://postgres:s3cret@127.0.0.1:1/test?connect_timeout=5&password=s3cret";
        let err = PostgresStore::connect(url).unwrap_err();
        let msg = err.to_string();
        assert!(!msg.contains("s3cret"), "{msg}");
        assert!(
            msg.starts_with("connecting on postgresql://127.0.0.1:1/test?connect_timeout=5 schema public failed: "),
            "{msg}"
        );
        assert!(err.retryable(), "a refused connection may succeed later: {msg}");
        assert!(msg.contains("Connection refused"), "{msg}");
        assert!(!format!("{err:?}").contains("s3cret"));

        assert_eq!(
            redact("postgresql://u:p@ss/w?rd@host:5432/db"),
            "postgresql://host:5432/db"
        );
        assert_eq!(
            redact("postgres://host/db?user=u&password=x&sslmode=disable"),
            "postgres://host/db?sslmode=disable"
        );
        assert_eq!(
            redact("host=h  password = 'a \\' b' user=u dbname=d"),
            "host=h dbname=d"
        );
        assert_eq!(
            redact("host=h password='unterminated"),
            "<unparsable connection string>"
        );

        // A bad query is permanent, and says where it failed.
        let db = TestDb::new();
        let mut store = db.store();
        let e = store.client.execute("SELECT * FROM no_such_table", &[]).unwrap_err();
        assert!(!pg_retryable(&e));
        let err = pg_err(store.location(), "probing")(e);
        assert_eq!(
            err.to_string(),
            format!(
                "probing on {} schema {} failed: db error: ERROR: relation \"no_such_table\" does not exist \
                 (SQLSTATE 42P01)",
                redact(&db.url),
                db.schema
            )
        );
        let e = store.client.execute("SELECT 1/0", &[]).unwrap_err();
        assert!(!pg_retryable(&e));
        assert!(format!("{store:?}").contains(&db.schema));
    }

    #[test]
    fn a_lost_connection_is_retryable_and_the_next_call_reconnects() {
        let db = TestDb::new();
        let mut store = db.store();
        assert!(store.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
        let pid: i32 = store.client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        let killed: bool = db
            .client()
            .query_one("SELECT pg_terminate_backend($1, 10000)", &[&pid])
            .unwrap()
            .get(0);
        assert!(killed);
        // The first call may notice the loss (a retryable error) or find the connection already
        // closed and reconnect; retrying succeeds either way.
        let b = batch(2, vec![list(0, 2, 5)]);
        match store.commit(&b) {
            Ok(committed) => assert!(committed),
            Err(e) => {
                eprintln!("after the backend was terminated: {e}");
                assert!(e.retryable(), "{e}");
                assert!(e.to_string().contains("commit of job \"hotlist\" epoch 2"), "{e}");
                assert!(store.commit(&b).unwrap());
            }
        }
        let new_pid: i32 = store.client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        assert_ne!(pid, new_pid);
        assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap().unwrap().revision, 2);
    }

    #[test]
    fn simultaneous_first_starts_do_not_race() {
        let db = TestDb::new();
        let start = Barrier::new(6);
        std::thread::scope(|s| {
            let starts: Vec<_> = (0..6)
                .map(|_| {
                    let (db, start) = (&db, &start);
                    s.spawn(move || {
                        start.wait();
                        // Each creates the schema and tables if missing: exactly one of them does.
                        PostgresStore::connect_with_schema(&db.url, &db.schema).map(|_| ())
                    })
                })
                .collect();
            for st in starts {
                st.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
            }
        });
        let version: i64 = db
            .client()
            .query_one("SELECT version FROM hotlist_schema", &[])
            .unwrap()
            .get(0);
        assert_eq!(version, SCHEMA_VERSION);
        // A newer schema is refused rather than written to.
        db.client()
            .batch_execute("UPDATE hotlist_schema SET version = 99")
            .unwrap();
        let err = PostgresStore::connect_with_schema(&db.url, &db.schema).unwrap_err();
        assert!(matches!(err, SinkError::Schema { .. }), "{err}");
        assert!(!err.retryable());
    }

    #[test]
    fn concurrent_committers_serialize() {
        let db = TestDb::new();
        db.store(); // create the tables before the race
        let start = Barrier::new(2);
        let committed: Vec<Vec<u64>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|w| {
                    let (db, start) = (&db, &start);
                    s.spawn(move || {
                        let mut store = db.store();
                        start.wait();
                        let mut mine = vec![];
                        for epoch in 1..=40u64 {
                            let mut b = batch(epoch, vec![list(0, epoch as u32, 3 + w)]);
                            b.dead_letters = vec![letter(epoch, DeadReason::Bad, b"x")];
                            if store.commit(&b).unwrap() {
                                mine.push(epoch);
                            }
                        }
                        mine
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut all: Vec<u64> = committed.concat();
        all.sort_unstable();
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n, "an epoch was committed twice: {committed:?}");
        let mut store = db.store();
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(40));
        assert_eq!(store.dead_letters(JOB, 1000).unwrap().len(), n);
        assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap().unwrap().revision, 40);
    }

    #[test]
    fn concurrent_reader_never_sees_a_mix_of_revisions() {
        const REVISIONS: u32 = 150;
        let db = TestDb::new();
        let mut writer = db.store();
        assert!(writer.commit(&batch(1, vec![list(0, 1, rows_for(1))])).unwrap());
        let mut reader = db.store();
        let (reads, last) = race_commits_and_reads(REVISIONS, writer, list, move |last| {
            let l = reader.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
            assert!(l.revision >= last, "revisions went backwards");
            assert_eq!(l.items.len(), rows_for(l.revision));
            let prefix = format!("r{}-", l.revision);
            assert!(l.items.iter().all(|i| i.item_id.starts_with(&prefix)));
            let latest = reader.latest(JOB, "1m").unwrap().unwrap();
            assert!(latest.revision >= l.revision);
            assert_eq!(latest.items.len(), rows_for(latest.revision));
            latest.revision
        });
        assert_eq!(last, REVISIONS);
        assert!(reads >= 1);
        eprintln!("{reads} consistent reads during {REVISIONS} commits");
        assert_eq!(raw_rows(&db, 0).len(), rows_for(REVISIONS));
    }

    /// `cargo test -p hotlist-sinks --release -- --ignored --nocapture postgres::tests::throughput`
    #[test]
    #[ignore = "benchmark"]
    fn throughput() {
        let db = TestDb::new();
        let mut store = db.store();
        measure_throughput(&mut store);
    }
}

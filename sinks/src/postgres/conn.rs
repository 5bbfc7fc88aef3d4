//! Connecting (timeouts, session settings, tables or the schema version check, prepared
//! statements), reconnecting after a lost connection.

use super::client::Client;
use super::client::Queries;
use super::error::pg_err;
use super::ident::{quote_ident, redact};
use super::schema::{check_readable, ensure_schema, SCHEMA_VERSION};
use super::statements::Statements;
use super::{PgTimeouts, PostgresStore, Role, DEFAULT_SCHEMA, LOCK_TIMEOUT, REPLY_GRACE};
use crate::error::{Retry, SinkError};
use std::collections::BTreeSet;
use std::path::Path;

impl PostgresStore {
    /// Connects to the database at `url` (e.g. `postgresql://postgres@127.0.0.1:5432/test`, or a
    /// `host=… dbname=…` string; no TLS) and uses its `public` schema, creating the tables if
    /// missing.
    pub fn connect(url: &str) -> Result<PostgresStore, SinkError> {
        PostgresStore::connect_with_schema(url, DEFAULT_SCHEMA)
    }

    /// Connects to the database at `url` and uses the schema `schema` (created if missing; the
    /// name is used as is, case-sensitive), creating the tables if missing. Several jobs or test
    /// runs can share a database in separate schemas. Default timeouts.
    pub fn connect_with_schema(url: &str, schema: &str) -> Result<PostgresStore, SinkError> {
        PostgresStore::connect_with(url, schema, PgTimeouts::default())
    }

    /// [`PostgresStore::connect_with_schema`] with the given timeouts: the job's sink.
    pub fn connect_with(url: &str, schema: &str, timeouts: PgTimeouts) -> Result<PostgresStore, SinkError> {
        PostgresStore::open(url, schema, timeouts, Role::Writer)
    }

    /// Opens the schema `schema` of the database at `url` for reading only (`serve`, `query`):
    /// it runs no DDL, so a role with only `CONNECT`, `USAGE` on the schema and `SELECT` on its
    /// tables is enough; it checks the schema version and refuses, with
    /// [`SinkError::Schema`], tables older than this build reads or newer than it knows.
    pub fn open_reader(url: &str, schema: &str, timeouts: PgTimeouts) -> Result<PostgresStore, SinkError> {
        PostgresStore::open(url, schema, timeouts, Role::Reader)
    }

    fn open(url: &str, schema: &str, timeouts: PgTimeouts, role: Role) -> Result<PostgresStore, SinkError> {
        let location = format!("{} schema {schema}", redact(url));
        let mut client = connect_client(url, &location, timeouts)?;
        let session = format!(
            "SET search_path TO {}; SET lock_timeout = {}; SET statement_timeout = {}",
            quote_ident(schema),
            LOCK_TIMEOUT.as_millis(),
            timeouts.statement.as_millis()
        );
        client
            .batch_execute(&session)
            .map_err(pg_err(&location, "setting the search path and timeouts"))?;
        let version = match role {
            Role::Writer => {
                ensure_schema(&mut client, schema, &location)?;
                SCHEMA_VERSION
            }
            Role::Reader => check_readable(&mut client, &location)?,
        };
        let stmts = Statements::prepare(&mut client, version).map_err(pg_err(&location, "preparing the statements"))?;
        Ok(PostgresStore {
            client,
            stmts,
            conn_str: url.to_string(),
            schema: schema.to_string(),
            location,
            timeouts,
            role,
            locked: BTreeSet::new(),
            claims: Default::default(),
        })
    }

    /// Reconnects if the connection was lost (a previous call then failed with a retryable
    /// error), so that retrying the call can succeed; the new connection takes the handle's
    /// job locks again (see `ownership`).
    pub(super) fn live(&mut self) -> Result<(), SinkError> {
        if self.client.is_closed() {
            let mut fresh = PostgresStore::open(&self.conn_str, &self.schema, self.timeouts, self.role)?;
            fresh.locked = std::mem::take(&mut self.locked);
            fresh.claims = std::mem::take(&mut self.claims);
            *self = fresh;
            self.relock()?;
        }
        Ok(())
    }

    /// Runs `f` on the connection and its prepared statements, reconnecting first if the
    /// connection was lost; a failure of `f` becomes a [`SinkError::Postgres`] naming `op`.
    pub(super) fn run<T>(
        &mut self,
        op: impl FnOnce() -> String,
        f: impl FnOnce(&mut Client, &Statements) -> Result<T, postgres::Error>,
    ) -> Result<T, SinkError> {
        self.live()?;
        let reply = self.timeouts.reply();
        f(&mut self.client, &self.stmts).map_err(|e| with_deadline(pg_err(&self.location, op())(e), reply))
    }

    /// The server and schema as the location of corrupt data.
    pub(super) fn loc(&self) -> &Path {
        Path::new(&self.location)
    }
}

/// Opens a connection with the timeouts: TCP connect and keepalives, the handshake within
/// `connect`, every reply within [`PgTimeouts::reply`].
fn connect_client(url: &str, location: &str, t: PgTimeouts) -> Result<Client, SinkError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(pg_err(location, "parsing the connection string"))?;
    config
        .connect_timeout(t.connect)
        .keepalives(true)
        .keepalives_idle(t.keepalives_idle)
        .keepalives_interval(t.keepalives_idle.min(std::time::Duration::from_secs(10)))
        .keepalives_retries(3);
    let runtime = Client::runtime().map_err(|e| SinkError::Postgres {
        url: location.to_string(),
        op: "connecting".into(),
        cause: format!("cannot start the client's runtime: {e}"),
        retry: Retry::Transient,
        source: postgres::Error::__private_api_timeout(),
    })?;
    Client::connect(runtime, &config, t.connect, t.reply())
        .map_err(|e| with_deadline(pg_err(location, "connecting")(e), t.connect))
}

/// A client timeout's error says how long it waited and which key sets it.
fn with_deadline(e: SinkError, waited: std::time::Duration) -> SinkError {
    match e {
        SinkError::Postgres {
            url,
            op,
            cause,
            retry,
            source,
        } if source.to_string() == "timeout waiting for server" => SinkError::Postgres {
            url,
            op,
            cause: format!(
                "{cause}: no reply within {waited:?} (sink.connect_timeout to connect, \
                 sink.statement_timeout + {REPLY_GRACE:?} for a statement)"
            ),
            retry,
            source,
        },
        other => other,
    }
}

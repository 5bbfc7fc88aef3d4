//! Connecting (session settings, tables, prepared statements), reconnecting after a lost
//! connection.

use super::error::pg_err;
use super::ident::{quote_ident, redact};
use super::schema::ensure_schema;
use super::statements::Statements;
use super::{PostgresStore, DEFAULT_SCHEMA, LOCK_TIMEOUT};
use crate::error::SinkError;
use postgres::{Client, NoTls};
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
            locked: BTreeSet::new(),
            claims: Default::default(),
        })
    }

    /// Reconnects if the connection was lost (a previous call then failed with a retryable
    /// error), so that retrying the call can succeed; the new connection takes the handle's
    /// job locks again (see `ownership`).
    pub(super) fn live(&mut self) -> Result<(), SinkError> {
        if self.client.is_closed() {
            let mut fresh = PostgresStore::connect_with_schema(&self.conn_str, &self.schema)?;
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
        f(&mut self.client, &self.stmts).map_err(|e| pg_err(&self.location, op())(e))
    }

    /// The server and schema as the location of corrupt data.
    pub(super) fn loc(&self) -> &Path {
        Path::new(&self.location)
    }
}

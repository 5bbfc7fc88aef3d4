//! Connecting (session settings, tables, prepared statements), reconnecting after a lost
//! connection, and the connection string without credentials that messages show.

use super::error::pg_err;
use super::schema::{ensure_schema, quote_ident};
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

/// The connection string without user name and password, for messages.
pub(super) fn redact(conn: &str) -> String {
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

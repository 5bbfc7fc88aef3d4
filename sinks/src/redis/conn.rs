//! Connecting (with timeouts), running a request on the connection (reconnecting first when an
//! earlier failure dropped it), and the URL without its password that messages show.

use super::error::redis_err;
use super::{RedisStore, CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use crate::error::SinkError;
use ::redis::{Client, Connection, ConnectionLike, RedisResult};

impl RedisStore {
    /// Connects to the Redis server at `url` (e.g. `redis://127.0.0.1:6379/`, or
    /// `redis://:password@host:6379/0`) with keys under `prefix` (normally
    /// [`DEFAULT_PREFIX`](super::DEFAULT_PREFIX)). Fails with [`SinkError::Redis`] if the URL
    /// does not parse or the server cannot be reached within [`CONNECT_TIMEOUT`], and with
    /// [`SinkError::Invalid`] on an empty prefix. Error messages show the URL without its
    /// password.
    pub fn connect(url: &str, prefix: &str) -> Result<RedisStore, SinkError> {
        let shown = redact_url(url);
        if prefix.is_empty() {
            return Err(SinkError::invalid(
                "",
                format!("the Redis key prefix for {shown} is empty"),
            ));
        }
        let client = Client::open(url).map_err(|e| redis_err(&shown, "parsing the Redis URL".into(), &e))?;
        let conn = open_connection(&client).map_err(|e| redis_err(&shown, "connecting".into(), &e))?;
        Ok(RedisStore {
            client,
            conn: Some(conn),
            url: shown,
            prefix: prefix.to_string(),
            claims: Default::default(),
        })
    }

    /// Runs `f` on the connection (reconnecting first if an earlier failure dropped it). After
    /// any failure other than an error reply from the server, the connection may be out of step
    /// with the server, so it is dropped.
    pub(super) fn run<T>(
        &mut self,
        op: impl FnOnce() -> String,
        f: impl FnOnce(&mut Connection) -> RedisResult<T>,
    ) -> Result<T, SinkError> {
        let attempt = match self.conn.take() {
            Some(conn) => Ok(conn),
            None => open_connection(&self.client),
        }
        .and_then(|mut conn| {
            let result = f(&mut conn);
            match &result {
                Err(e) if e.code().is_none() || !conn.is_open() => {}
                _ => self.conn = Some(conn),
            }
            result
        });
        attempt.map_err(|e| redis_err(&self.url, op(), &e))
    }
}

fn open_connection(client: &Client) -> RedisResult<Connection> {
    let conn = client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
    conn.set_read_timeout(Some(RESPONSE_TIMEOUT))?;
    conn.set_write_timeout(Some(RESPONSE_TIMEOUT))?;
    Ok(conn)
}

/// `url` with the password and the query string (which may carry one) masked.
pub(super) fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let (rest, query) = match rest.find(['?', '#']) {
        Some(i) => (&rest[..i], "?***"),
        None => (rest, ""),
    };
    let rest = match rest.rfind('@') {
        Some(at) => {
            let (userinfo, host) = rest.split_at(at);
            match userinfo.find(':') {
                Some(colon) => format!("{}:***{host}", &userinfo[..colon]),
                None => rest.to_string(),
            }
        }
        None => rest.to_string(),
    };
    format!("{scheme}{rest}{query}")
}

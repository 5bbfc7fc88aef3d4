//! Redis-only tests of connections and errors: credentials hidden, a lost connection
//! re-established, URLs redacted, errors classified.

use super::conn::redact_url;
use super::error::{redis_err, retry_class};
use super::tests::{test_url, Fixture};
use super::*;
use crate::error::Retry;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, list, JOB};
use crate::types::StoredList;
use ::redis::{ErrorKind, RedisError, Value};

#[test]
fn connection_errors_are_retryable_and_hide_the_password() {
    let err = RedisStore::connect("redis://alice:s3cret@127.0.0.1:1/", "p").unwrap_err();
    assert!(err.retryable(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("connecting on redis://alice:***@127.0.0.1:1/ failed: IO "),
        "{msg}"
    );
    assert!(!msg.contains("s3cret"), "{msg}");
    assert!(!format!("{err:?}").contains("s3cret"));
    let err = RedisStore::connect("nonsense://x", "p").unwrap_err();
    assert!(!err.retryable(), "{err}");
    assert!(RedisStore::connect(&test_url(), "").is_err());
    let store = RedisStore::connect(&test_url(), DEFAULT_PREFIX).unwrap();
    assert!(!format!("{store:?}").contains("s3cret"));
    assert_eq!(store.prefix(), "hotlist");
}

#[test]
fn a_lost_connection_is_retryable_and_reestablished() {
    let mut fx = Fixture::new();
    let mut store = fx.store();
    assert!(store.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
    let id: u64 = store
        .run(|| "CLIENT ID".into(), |c| ::redis::cmd("CLIENT").arg("ID").query(c))
        .unwrap();
    ::redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .exec(&mut fx.raw)
        .unwrap();
    let err = store.latest(JOB, "1m").unwrap_err();
    assert!(err.retryable(), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "reading the latest list of job \"hotlist\" window \"1m\" on {}",
            test_url()
        )),
        "{err}"
    );
    // Retrying the same call reconnects and succeeds.
    assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 2))));
}

#[test]
fn urls_are_redacted() {
    let cases = [
        ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://user:p@ss/w@host/", "redis://user:***@host/"),
        ("rediss://user@host/", "rediss://user@host/"),
        ("redis+unix:///tmp/r.sock?db=1&pass=pw", "redis+unix:///tmp/r.sock?***"),
    ];
    for (url, want) in cases {
        assert_eq!(redact_url(url), want, "{url}");
    }
}

/// I/O failures and a busy, loading or try-again server are transient; other server errors
/// and client-side failures are permanent. The message starts with the class word.
#[test]
fn redis_errors_are_classified_by_kind() {
    let server = |reply: &str| -> RedisError {
        match ::redis::parse_redis_value(reply.as_bytes()) {
            Ok(Value::ServerError(e)) => e.into(),
            other => panic!("{reply:?} is not an error reply: {other:?}"),
        }
    };
    let io = || RedisError::from(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused"));
    for e in [
        io(),
        server("-BUSY Redis is busy\r\n"),
        server("-TRYAGAIN x\r\n"),
        server("-LOADING y\r\n"),
    ] {
        assert_eq!(retry_class(&e), Retry::Transient, "{e}");
        assert!(redis_err("redis://h/", "commit".into(), &e).retryable(), "{e}");
    }
    for e in [
        server("-ERR wrong number of arguments\r\n"),
        server("-NOPERM no\r\n"),
        server("-IOX\r\n"),
        RedisError::from((ErrorKind::UnexpectedReturnType, "type error")),
    ] {
        assert_eq!(retry_class(&e), Retry::Permanent, "{e}");
        assert!(!redis_err("redis://h/", "commit".into(), &e).retryable(), "{e}");
    }
    let msg = |e: &RedisError| redis_err("redis://h/", "commit".into(), e).to_string();
    assert_eq!(msg(&server("-ERR x\r\n")), "commit on redis://h/ failed: ERR x");
    assert!(
        msg(&io()).starts_with("commit on redis://h/ failed: IO "),
        "{}",
        msg(&io())
    );
    let client = RedisError::from((ErrorKind::UnexpectedReturnType, "type error"));
    assert!(
        msg(&client).starts_with("commit on redis://h/ failed: CLIENT "),
        "{}",
        msg(&client)
    );
    // Damage the commit script reports is corrupt data, not a Redis failure.
    let err = redis_err(
        "redis://h/",
        "commit".into(),
        &server("-HOTLIST_CORRUPT k is a string\r\n"),
    );
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert_eq!(err.to_string(), "corrupt data in redis://h/: k is a string");
}

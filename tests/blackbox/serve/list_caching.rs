//! What `hotlist serve` lets caches keep (issue 21 item 9): only a list that can never change
//! again is `immutable`. The store is written through the sinks crate as an `exact_at_seal`
//! window's job writes it: the sealed list first as an approximate final revision, later
//! replaced by its exact revision with a certificate (tests/oracle/exact_at_seal.rs runs the
//! real replay; here the two revisions are committed directly so that each can be looked at).

use super::{list, parse_response, Response, Store, WAIT};
use hotlist_operators::certify::Certificate;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::ListState;
use hotlist_operators::time::Millis;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// GET with `If-None-Match: etag`.
fn get_if_none_match(port: u16, path: &str, etag: &str) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: {etag}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    parse_response(&raw).expect("a response")
}

/// Instance 0 of window 1m, sealed, at `revision`: approximate, or exact with a certificate.
fn sealed(revision: u32, exact: bool) -> PublishedList {
    let mut l = list("1m", revision, &[("a", 7)]);
    l.state = ListState::Final;
    l.exact = exact;
    l.error_bound = if exact { 0 } else { 4 };
    l.certificate = exact.then_some(Certificate {
        threshold: 3,
        counted: 1,
        passes: 1,
    });
    l
}

/// An approximate final list is sent with a short `max-age` and an `ETag` (answered 304 while
/// it is unchanged), never `immutable`: the replay will replace it. Its exact revision, which
/// can never change again, is `immutable`, under a new `ETag`.
#[test]
fn only_a_list_that_cannot_change_is_immutable() {
    let mut store = Store::new();
    let mut next = list("1m", 1, &[("b", 1)]);
    (next.start, next.end) = (Millis(60_000), Millis(120_000));
    store.commit(2, vec![sealed(2, false), next]);
    let mut server = super::Server::start(store.path(), &[], None);
    let path = "/v1/top?window=1m&at=0";
    server.wait_json(path, "the approximate final list", |status, v| {
        status == 200 && v["revision"] == 2
    });
    let approx = server.get(path);
    let cc = approx.header("cache-control").unwrap_or_default().to_string();
    assert!(
        !cc.contains("immutable"),
        "an approximate final list may still change: {cc}"
    );
    assert!(cc.contains("max-age=1"), "a short max-age (the emit interval): {cc}");
    let etag = approx.header("etag").expect("an ETag").to_string();
    assert_eq!(get_if_none_match(server.port, path, &etag).status, 304);

    store.commit(3, vec![sealed(3, true)]);
    let deadline = Instant::now() + WAIT;
    let exact = loop {
        let r = server.get(path);
        if r.body.contains("\"revision\":3") {
            break r;
        }
        assert!(Instant::now() < deadline, "never served the exact revision: {}", r.body);
        std::thread::sleep(Duration::from_millis(20));
    };
    let cc = exact.header("cache-control").unwrap_or_default();
    assert!(cc.contains("immutable"), "the exact final list cannot change: {cc}");
    assert_ne!(exact.header("etag"), Some(etag.as_str()), "a new revision, a new ETag");
    assert_eq!(
        get_if_none_match(server.port, path, &etag).status,
        200,
        "the old ETag is stale"
    );
}

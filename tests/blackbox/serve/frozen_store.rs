//! `hotlist serve` over a PostgreSQL server that stops answering (issue 21 items 8 and 6): the
//! store is reached through a [`FreezableProxy`], which, frozen, holds the connections open and
//! forwards nothing (as a SIGSTOPped server or a hung host does, where neither TCP keepalives
//! nor the server's own timeouts fire).
//!
//! Frozen, the server keeps answering from its last snapshot, `/livez` stays 200, `/readyz`
//! turns 503, and a history lookup is answered 503 once the client's reply deadline passes,
//! not when the server answers again; thawed, it is ready and serves fresh lists again. And
//! with its only connection waiting on the frozen store, a health check still gets in.

use super::{get, parse_response, Response, Server, JOB};
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{CommitBatch, PostgresStore, SinkStore};
use hotlist_tests::proxy::FreezableProxy;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn url() -> String {
    std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into())
}

/// The instance of window 1m starting at `start` (ms), holding `item` once.
fn list(start: i64, item: &str) -> PublishedList {
    PublishedList {
        group: Default::default(),
        window: "1m".into(),
        start: Millis(start),
        end: Millis(start + 60_000),
        revision: 1,
        state: ListState::Open,
        watermark: Millis(0),
        as_of: Millis(1_700_000_000_000),
        items: vec![RankedItem {
            item_id: item.into(),
            count: 1,
            trend: None,
        }],
        exact: true,
        error_bound: 0,
        sketch_check: None,
        certificate: None,
    }
}

/// A schema of the local PostgreSQL (dropped with this) holding epoch 1: instances 0 ("a"),
/// 60000 ("b") and 120000 ("c", the latest, in the snapshot), so that `at=0` and `at=60000`
/// are store lookups; and a config in a temporary directory that reaches it through `proxy`,
/// with the client timeouts `timeouts` (TOML lines of `[sink]`).
struct FrozenStore {
    dir: tempfile::TempDir,
    schema: String,
    writer: PostgresStore,
    proxy: FreezableProxy,
}

impl FrozenStore {
    fn new(timeouts: &str) -> FrozenStore {
        let schema = format!("hotlist_frozen_{}_{}", std::process::id(), rand::random::<u32>());
        let proxy = FreezableProxy::start("127.0.0.1:5432");
        let dir = tempfile::tempdir().expect("tempdir");
        let config = format!(
            "[job]\nid = \"{JOB}\"\n\n[source]\nkind = \"generator\"\nevents = 1\n\n[[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 10\n\n\
             [sink]\nkind = \"postgres\"\nurl = \"postgresql://postgres@127.0.0.1:{}/test\"\nschema = \"{schema}\"\n{timeouts}\n",
            proxy.port
        );
        std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
        // the writer goes to the server directly: it commits while the proxy is frozen
        let mut writer = PostgresStore::connect_with_schema(&url(), &schema).expect("connect postgres");
        let mut store = FrozenStore {
            dir,
            schema,
            writer: {
                writer
                    .prepare(JOB, &[WindowSpec::tumbling("1m", Span::from_millis(60_000), 10)])
                    .expect("prepare");
                writer
            },
            proxy,
        };
        store.commit(1, vec![list(0, "a"), list(60_000, "b"), list(120_000, "c")]);
        store
    }

    fn commit(&mut self, epoch: u64, lists: Vec<PublishedList>) {
        let batch = CommitBatch {
            job: JOB.into(),
            epoch,
            watermark: Millis(0),
            lists,
            dead_letters: vec![],
            hot_keys: Vec::new(),
            ranges: Vec::new(),
        };
        assert!(self.writer.commit(&batch).expect("commit"));
    }
}

impl Drop for FrozenStore {
    fn drop(&mut self) {
        self.proxy.thaw();
        let _ = hotlist_sinks::postgres::drop_schema(&url(), &self.schema);
    }
}

/// GET on a new connection, waiting up to `within` for the whole response.
fn get_within(port: u16, path: &str, within: Duration) -> std::io::Result<Response> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(within))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    parse_response(&raw)
}

/// Polls until `done` holds for `path`'s response (bounded by `within`); panics with the last
/// response and the server's logs.
fn wait_for(server: &mut Server, path: &str, what: &str, within: Duration, done: impl Fn(&Response) -> bool) {
    let deadline = Instant::now() + within;
    loop {
        server.assert_running();
        let r = server.get(path);
        if done(&r) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} (within {within:?}): last {path} {} {}{}",
            r.status,
            r.body,
            server.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// With client timeouts of 1 s (connect) and 1 s + 5 s (a reply), the store freezes: the
/// latest list is still served and `/livez` stays 200 while `/readyz` turns 503 (the store
/// silent for 10 s); a lookup of an older instance is answered 503 naming the timeout within
/// the reply deadline, though requests may take 60 s here (before the client timeouts the
/// history thread waited for the reply forever, and every later lookup behind it), and so is
/// the next one (reconnecting times out too). Meanwhile the job commits a newer list; once the
/// store answers again `/readyz` is 200, the newer list is served and lookups succeed.
#[test]
fn a_frozen_store_keeps_serving_and_lookups_time_out() {
    let _postgres = hotlist_tests::serial::postgres();
    let mut store = FrozenStore::new("connect_timeout = \"1s\"\nstatement_timeout = \"1s\"");
    let mut server = Server::start(store.dir.path(), &["--request-timeout", "60s"], None);
    // the history thread connects (through the proxy) on its first lookup
    let older = server.get("/v1/top?window=1m&at=60000");
    assert_eq!(older.status, 200, "{}", older.body);
    assert!(older.body.contains("\"item_id\":\"b\""), "{}", older.body);

    store.proxy.freeze();
    let frozen_at = Instant::now();
    // the freshness window (10 s) plus a refresh cut short by the reply deadline (6 s)
    wait_for(
        &mut server,
        "/readyz",
        "readyz turns 503",
        Duration::from_secs(25),
        |r| r.status == 503,
    );
    assert!(
        frozen_at.elapsed() >= Duration::from_secs(9),
        "ready while the store was fresh"
    );
    let live = server.get("/livez");
    assert_eq!(live.status, 200, "/livez with the store frozen: {}", live.body);
    let top = server.get("/v1/top?window=1m");
    assert_eq!(top.status, 200, "the last snapshot is served: {}", top.body);
    assert!(top.body.contains("\"item_id\":\"c\""), "{}", top.body);

    for attempt in ["a connected reader's lookup", "the next lookup, reconnecting"] {
        let asked = Instant::now();
        let r = get_within(server.port, "/v1/top?window=1m&at=0", Duration::from_secs(40))
            .unwrap_or_else(|e| panic!("{attempt}: no answer within 40 s: {e}{}", server.logs()));
        let took = asked.elapsed();
        assert!(matches!(r.status, 503 | 504), "{attempt}: {} {}", r.status, r.body);
        assert!(r.body.contains("timeout waiting for server"), "{attempt}: {}", r.body);
        assert!(took < Duration::from_secs(15), "{attempt}: answered after {took:?}");
    }

    store.commit(2, vec![list(180_000, "d")]);
    store.proxy.thaw();
    wait_for(
        &mut server,
        "/readyz",
        "readyz is 200 again",
        Duration::from_secs(30),
        |r| r.status == 200,
    );
    wait_for(
        &mut server,
        "/v1/top?window=1m",
        "the newer list is served",
        Duration::from_secs(30),
        |r| r.status == 200 && r.body.contains("\"item_id\":\"d\""),
    );
    wait_for(
        &mut server,
        "/v1/top?window=1m&at=0",
        "lookups succeed again",
        Duration::from_secs(30),
        |r| r.status == 200 && r.body.contains("\"item_id\":\"a\""),
    );
}

/// `--max-connections 1`, and that connection's request waits on the frozen store (the history
/// thread connecting to it: timeouts of 60 s, requests of up to 60 s): every connection is in a
/// handler. A health check still gets in at once, by closing the connection that has been in
/// its handler longest (its request dropped, counted `evicted_busy`). Before, a full server
/// whose connections were all busy refused every new connection until one finished.
#[test]
fn with_every_connection_waiting_on_a_frozen_store_livez_gets_in() {
    let _postgres = hotlist_tests::serial::postgres();
    let store = FrozenStore::new("connect_timeout = \"60s\"\nstatement_timeout = \"60s\"");
    let mut server = Server::start(
        store.dir.path(),
        &["--max-connections", "1", "--request-timeout", "60s"],
        None,
    );
    store.proxy.freeze();
    // the refresher's connection is open (the server is ready): a new one is the history thread's
    let before = store.proxy.accepted();
    let mut busy = server.connect();
    write!(
        busy,
        "GET /v1/top?window=1m&at=0 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("send the lookup");
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.proxy.accepted() == before {
        server.assert_running();
        assert!(
            Instant::now() < deadline,
            "the lookup never reached the store{}",
            server.logs()
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    let asked = Instant::now();
    let live = get(server.port, "/livez")
        .unwrap_or_else(|e| panic!("/livez with every connection busy: {e}{}", server.logs()));
    let took = asked.elapsed();
    assert_eq!(live.status, 200, "{}", live.body);
    assert!(took < Duration::from_secs(2), "/livez answered after {took:?}");

    // the busy connection was closed without an answer
    busy.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut answer = Vec::new();
    match busy.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the busy connection stayed open: {e}{}", server.logs()),
    }
    assert!(
        answer.is_empty(),
        "the busy lookup was answered: {}",
        String::from_utf8_lossy(&answer)
    );
    // (the evicted connection may be registered for a moment after its socket closed: with
    // nothing left to close, a new one would be refused then)
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        match get(server.port, "/metrics") {
            Ok(r) => break r.body,
            Err(e) => assert!(Instant::now() < deadline, "/metrics: {e}{}", server.logs()),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let evicted_busy = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hotlist_api_connections_closed_total{reason=\"evicted_busy\"} "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert_eq!(evicted_busy, Some(1), "{metrics}");

    // a graceful stop while the refresher waits on the frozen store (it polls every 20 ms, so
    // its call is in flight by now): serve exits without waiting out the call (up to
    // statement_timeout + 5 s = 65 s here, past Kubernetes' 30 s grace period)
    let asked = Instant::now();
    assert!(
        server.terminate(Duration::from_secs(20)),
        "serve did not exit within 20 s of SIGTERM{}",
        server.logs()
    );
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "exit took {:?}",
        asked.elapsed()
    );
}

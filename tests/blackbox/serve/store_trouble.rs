//! `hotlist serve` over a PostgreSQL store that hangs or goes away (issue 21 items 6 and 12):
//! a flood of history lookups while the store hangs is answered 503 with `Retry-After` at once
//! (the queue is bounded) and the probes keep answering; with the store gone, `/livez` stays
//! 200 (do not restart the pod) while `/readyz` turns 503 (take it out of the Service).

use super::{get, list, Server, JOB, WAIT};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{CommitBatch, PostgresStore, SinkStore};
use std::path::Path;
use std::time::{Duration, Instant};

fn url() -> String {
    std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into())
}

/// A schema of the local PostgreSQL holding epoch 1 (window 1m: instances 0 and 60000, so
/// that `at=0` is a store lookup, not the snapshot's latest list), dropped when this is.
struct PgStore {
    dir: tempfile::TempDir,
    schema: String,
}

impl PgStore {
    fn new() -> PgStore {
        let schema = format!("hotlist_serve_{}_{}", std::process::id(), rand::random::<u32>());
        let dir = tempfile::tempdir().expect("tempdir");
        let config = format!(
            "[job]\nid = \"{JOB}\"\n\n[source]\nkind = \"generator\"\nevents = 1\n\n[[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 10\n\n\
             [sink]\nkind = \"postgres\"\nurl = \"{}\"\nschema = \"{schema}\"\n",
            url()
        );
        std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
        let mut writer = PostgresStore::connect_with_schema(&url(), &schema).expect("connect postgres");
        writer
            .prepare(JOB, &[WindowSpec::tumbling("1m", Span::from_millis(60_000), 10)])
            .expect("prepare");
        let mut later = list("1m", 1, &[("b", 2)]);
        (later.start, later.end) = (Millis(60_000), Millis(120_000));
        let batch = CommitBatch {
            job: JOB.into(),
            epoch: 1,
            watermark: Millis(0),
            lists: vec![list("1m", 1, &[("a", 3)]), later],
            dead_letters: vec![],
            hot_keys: Vec::new(),
            ranges: Vec::new(),
        };
        assert!(writer.commit(&batch).expect("commit"));
        PgStore { dir, schema }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&url(), postgres::NoTls).expect("connect postgres")
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        let _ = hotlist_sinks::postgres::drop_schema(&url(), &self.schema);
    }
}

/// The store hangs on list reads (a transaction holds an exclusive lock on the list headers);
/// 12 clients ask for an older instance at once. With a history queue of 2, the lookups past
/// the one being read and the two queued are answered 503 with `Retry-After: 1` at once (not
/// after the 10 s request timeout), counted in `hotlist_api_history_rejected_total`; `/healthz`
/// and `/livez` answer 200 throughout; once the store answers again, so do lookups.
#[test]
fn a_flood_of_history_lookups_is_refused_503_with_retry_after() {
    let _postgres = hotlist_tests::serial::postgres();
    let store = PgStore::new();
    let server = Server::start(store.path(), &["--history-queue", "2"], None);
    let mut locker = store.client();
    let mut lock = locker.transaction().expect("begin");
    lock.batch_execute(&format!(
        "LOCK TABLE \"{}\".topk_instances IN ACCESS EXCLUSIVE MODE",
        store.schema
    ))
    .expect("lock the list headers");

    let port = server.port;
    let flood: Vec<_> = (0..12)
        .map(|_| {
            std::thread::spawn(move || {
                let asked = Instant::now();
                let r = get(port, "/v1/top?window=1m&at=0");
                (r, asked.elapsed())
            })
        })
        .collect();
    let mut refused = 0;
    let health = server.get("/healthz");
    let live = server.get("/livez");
    for t in flood {
        let (r, took) = t.join().expect("flood thread");
        // the lookups that got in hang until the lock goes: their read times out here
        let Ok(r) = r else { continue };
        if r.status == 503 && r.header("retry-after") == Some("1") {
            assert!(
                took < Duration::from_secs(2),
                "refused at once, not after {took:?}: {}",
                r.body
            );
            assert!(r.body.contains("history queue holds 2"), "{}", r.body);
            refused += 1;
        }
    }
    assert!(
        refused >= 9,
        "{refused} of 12 refused with Retry-After{}",
        server.logs()
    );
    assert_eq!(health.status, 200, "/healthz while flooded: {}", health.body);
    assert_eq!(live.status, 200, "/livez while flooded: {}", live.body);
    let metrics = server.get("/metrics").body;
    let rejected = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hotlist_api_history_rejected_total "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert_eq!(rejected, Some(refused), "{metrics}");

    lock.rollback().expect("release the lock");
    let deadline = Instant::now() + WAIT;
    loop {
        let r = server.get("/v1/top?window=1m&at=0");
        if r.status == 200 {
            assert!(r.body.contains("\"item_id\":\"a\""), "{}", r.body);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lookups never recovered: {} {}",
            r.status,
            r.body
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// With the store gone (its schema dropped), `/readyz` and `/healthz` turn 503 once it has been
/// silent for 10 s, while `/livez` stays 200 and the last lists are still served: a liveness
/// probe on `/livez` does not restart a server that is doing its job.
#[test]
fn with_the_store_gone_livez_is_200_and_readyz_503() {
    let _postgres = hotlist_tests::serial::postgres();
    let store = PgStore::new();
    let mut server = Server::start(store.path(), &[], None);
    assert_eq!(server.get("/livez").status, 200);
    assert_eq!(server.get("/readyz").status, 200);
    store
        .client()
        .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", store.schema))
        .expect("drop the store");
    let ready = server.wait_json("/readyz", "readyz turns 503", |status, _| status == 503);
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert!(ready["last_error"].is_string(), "{ready}");
    let live = server.get("/livez");
    assert_eq!(live.status, 200, "{}", live.body);
    assert_eq!(server.get("/healthz").status, 503, "/healthz is /readyz");
    let top = server.get("/v1/top?window=1m");
    assert_eq!(top.status, 200, "the last lists are still served: {}", top.body);
}

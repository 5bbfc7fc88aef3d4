//! The Redis fan-out against the SQL store it copies: a `by` window with many groups, groups
//! rotating with the instances, revisions and late corrections, and a Redis that goes away in
//! the middle and comes back empty. Afterwards Redis holds exactly the SQL store's latest list
//! of every group of the window's live instances (`crate::retention`), none of the others, and
//! the same groups of the latest instance.

use crate::redis::{Fanout, FanoutStats, FanoutTarget, RedisStore};
use crate::retention::superseded;
use crate::sqlite::SqliteStore;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, list, windows, JOB};
use hotlist_operators::group::GroupKey;
use hotlist_operators::message::PublishedList;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A `redis-server` of the test's own, without persistence; killed when dropped.
struct RedisServer(Child);

impl RedisServer {
    fn start(port: u16) -> RedisServer {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let server = RedisServer(child);
        wait_for("redis-server to answer", || {
            RedisStore::connect(&url(port), "x").is_ok()
        });
        server
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

/// Polls `f` every 10 ms for up to 30 s.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Group `g` of the `1m` window (size 60 s, slide 30 s).
fn group(g: &str) -> GroupKey {
    GroupKey::from_pairs([("g", g)])
}

/// Revision `revision` of `g`'s list of the instance starting at `instance * 30 s`.
fn group_list(g: &str, instance: i64, revision: u32) -> PublishedList {
    PublishedList {
        group: group(g),
        ..list(instance * 30_000, revision, 3)
    }
}

/// The groups of an instance: 60, a third of them rotating with every instance.
fn groups_of(instance: i64) -> Vec<String> {
    (0..60)
        .map(|j| match j % 3 {
            0 => format!("rot{instance}-{j}"),
            _ => format!("stay{}", j + 60 * (instance % 2)),
        })
        .collect()
}

/// The batches: per instance three revisions of every group's list (the third final), and
/// with the first revision of the next instance a late correction of the one before.
fn batches() -> Vec<Vec<PublishedList>> {
    let mut out = Vec::new();
    for instance in 0..12i64 {
        for revision in 1..=3u32 {
            let mut lists: Vec<PublishedList> = groups_of(instance)
                .iter()
                .map(|g| group_list(g, instance, revision))
                .collect();
            if revision == 1 && instance > 0 {
                lists.extend(
                    groups_of(instance - 1)
                        .iter()
                        .take(5)
                        .map(|g| group_list(g, instance - 1, 4)),
                );
            }
            out.push(lists);
        }
    }
    out
}

/// Every group's latest list in Redis equals the SQL store's, in order, after an outage in
/// which Redis restarted empty. (Before: pending lists were kept per window, so one group per
/// flush reached Redis.)
#[test]
fn the_fanout_holds_the_sql_stores_latest_list_of_every_live_group() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut specs = windows();
    specs[1].key.by = vec!["g".into()];
    let mut sql = SqliteStore::open(&dir.path().join("out.db")).expect("open sqlite");
    sql.prepare(JOB, &specs).expect("prepare");
    let mut redis = Some(RedisServer::start(port));
    let stats = Arc::new(FanoutStats::default());
    let target = FanoutTarget {
        url: url(port),
        prefix: "fan".into(),
        job: JOB.into(),
        windows: specs,
        start_over: false,
    };
    let fanout = Fanout::start(target, stats.clone()).expect("start the fan-out");
    let all = batches();
    let mut epoch = 0u64;
    for (i, lists) in all.iter().enumerate() {
        epoch += 1;
        let b = batch(epoch, lists.clone());
        assert!(sql.commit(&b).expect("commit to sqlite"));
        fanout.offer(&b);
        if i == all.len() / 3 {
            wait_for("the fan-out to write", || stats.committed_epoch.load(Relaxed) == epoch);
            redis = None; // the outage
        }
        if i == 2 * all.len() / 3 {
            wait_for("a failed attempt", || stats.failures.load(Relaxed) > 0);
            redis = Some(RedisServer::start(port)); // back, empty
        }
    }
    wait_for("the fan-out to catch up", || {
        stats.committed_epoch.load(Relaxed) == epoch
    });
    drop(fanout);
    assert!(redis.is_some());

    let mut fan = RedisStore::connect(&url(port), "fan").expect("connect");
    let (newest, latest_groups) = sql.groups(JOB, "1m").expect("groups").expect("some");
    assert_eq!(
        fan.groups(JOB, "1m").expect("redis groups"),
        Some((newest, latest_groups))
    );
    let mut every: Vec<String> = (0..12).flat_map(groups_of).collect();
    every.sort();
    every.dedup();
    let (mut live, mut gone) = (0, 0);
    for g in &every {
        let want = sql.latest_of(JOB, "1m", &group(g)).expect("sql read").expect("a list");
        let got = fan.latest_of(JOB, "1m", &group(g)).expect("redis read");
        if superseded(want.end, newest) {
            assert_eq!(got, None, "group {g}: its instance is superseded");
            gone += 1;
        } else {
            assert_eq!(got, Some(want), "group {g}");
            live += 1;
        }
    }
    assert!(live >= 100 && gone >= 100, "{live} live groups, {gone} superseded");
}

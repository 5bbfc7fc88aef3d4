//! `hotlist serve`'s small limits (issue 21 item 13): `--poll` below its minimum is refused
//! (0 made the refresher a busy loop), and `/v1/groups` pages its listing (`limit`, `after`)
//! and says when groups were left out (`truncated`) instead of truncating silently; the
//! listing is read from the store once per epoch.

use super::{Server, JOB};
use hotlist_operators::group::{GroupKey, KeyShape};
use hotlist_operators::message::PublishedList;
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{CommitBatch, SinkStore, SqliteStore};
use hotlist_tests::hotlist_bin;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `serve --poll 0ms` (and 9ms) exits at once with one line naming the flag and its minimum.
#[test]
fn a_poll_below_the_minimum_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    // a config that serves: without the check, the server would start (and spin)
    std::fs::write(dir.path().join("hotlist.toml"), super::CONFIG).expect("config");
    for poll in ["0ms", "9ms"] {
        let mut child = Command::new(hotlist_bin())
            .args([
                "serve",
                "--config",
                "hotlist.toml",
                "--listen",
                "127.0.0.1:0",
                "--poll",
                poll,
            ])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hotlist serve");
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().expect("poll").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("serve --poll {poll} is still running");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().expect("output");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains("--poll") && first.contains("must be at least 10ms"),
            "one line naming the flag and its minimum: {err}"
        );
    }
}

/// A by-country window whose latest instance has 25 groups.
fn store_with_groups(dir: &std::path::Path) {
    let config = format!(
        "[job]\nid = \"{JOB}\"\n\n[source]\nkind = \"generator\"\nevents = 1\n\n[[window]]\nname = \"c\"\nsize = \"1m\"\nk = 10\nby = [\"country\"]\n\n\
         [sink]\nkind = \"sqlite\"\npath = \"hotlist.db\"\n"
    );
    std::fs::write(dir.join("hotlist.toml"), config).expect("config");
    let mut spec = WindowSpec::tumbling("c", Span::from_millis(60_000), 10);
    spec.key = KeyShape {
        by: vec!["country".into()],
        ..KeyShape::default()
    };
    let mut writer = SqliteStore::open(&dir.join("hotlist.db")).expect("create the store");
    writer.prepare(JOB, &[spec]).expect("prepare");
    let lists: Vec<PublishedList> = (0..25)
        .map(|i| {
            let mut l = super::list("c", 1, &[("a", 1)]);
            l.group = GroupKey::from_pairs([("country", format!("c{i:02}").as_str())]);
            l
        })
        .collect();
    let batch = CommitBatch {
        job: JOB.into(),
        epoch: 1,
        watermark: Millis(0),
        lists,
        dead_letters: vec![],
        hot_keys: Vec::new(),
        ranges: Vec::new(),
    };
    assert!(writer.commit(&batch).expect("commit"));
}

fn keys(v: &Value) -> Vec<String> {
    v["groups"]
        .as_array()
        .map(|g| g.iter().filter_map(|x| x["key"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// `/v1/groups` lists at most `limit` groups and says so: `truncated` and the `next_after` key
/// to page on with `after`; the last page has `truncated: false`. A `limit` out of range is a
/// 400 naming it. The listing is read from the store once for the epoch (the lookup cache's
/// hits and misses are counted).
#[test]
fn groups_are_paged_and_truncation_is_explicit() {
    let dir = tempfile::tempdir().expect("tempdir");
    store_with_groups(dir.path());
    let mut server = Server::start(dir.path(), &[], None);
    let first = server.wait_json("/v1/groups?window=c&limit=10", "a page of groups", |s, v| {
        s == 200 && v["groups"].as_array().is_some_and(|g| !g.is_empty())
    });
    let want: Vec<String> = (0..25).map(|i| format!("country=c{i:02}")).collect();
    assert_eq!(keys(&first), want[..10], "{first}");
    assert_eq!(first["truncated"], true, "{first}");
    assert_eq!(first["next_after"], want[9].as_str(), "{first}");
    let second = server.json(&format!("/v1/groups?window=c&limit=10&after={}", "country%3Dc09"));
    assert_eq!(keys(&second), want[10..20], "{second}");
    let last = server.json("/v1/groups?window=c&limit=10&after=country%3Dc19");
    assert_eq!(keys(&last), want[20..], "{last}");
    assert_eq!(last["truncated"], false, "{last}");
    assert!(last["next_after"].is_null(), "{last}");
    let all = server.json("/v1/groups?window=c");
    assert_eq!(keys(&all).len(), 25, "the default limit holds them all: {all}");
    assert_eq!(all["truncated"], false);
    for bad in ["0", "10001", "x"] {
        let r = server.get(&format!("/v1/groups?window=c&limit={bad}"));
        assert_eq!(r.status, 400, "limit={bad}: {}", r.body);
        assert!(r.body.contains("\"parameter\":\"limit\""), "{}", r.body);
    }
    let metrics = server.get("/metrics").body;
    let count = |result: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("hotlist_api_lookup_cache_total{{result=\"{result}\"}} ")))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert_eq!(count("miss"), 1, "read from the store once: {metrics}");
    assert!(count("hit") >= 3, "{metrics}");
}

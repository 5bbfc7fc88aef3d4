//! Bot resistance and per-group lists on the real binary, into SQLite: one user floods an item
//! with 1,000 clicks while 40 users each touch another once. Counting events, the flood wins;
//! counting distinct users, the item many people touched ranks first and the flood counts once.
//! A record without a user still counts in the events windows (and in
//! `hotlist_events_without_user_total`'s tally), never vanishing.

use hotlist_tests::run_hotlist;
use std::collections::BTreeMap;
use std::fmt::Write as _;

const CONFIG: &str = r#"
[job]
id = "bots"
[source]
kind = "file"
path = "events.jsonl"
[source.format]
user = "/user"
[time]
max_out_of_orderness = "0s"
allowed_lateness = "0s"
[[window]]
name = "events"
size = "1m"
k = 3
[[window]]
name = "people"
size = "1m"
k = 3
count = "distinct_users"
[[window]]
name = "by-country"
size = "1m"
k = 3
by = ["country"]
count = "distinct_users"
[sink]
kind = "sqlite"
path = "out.db"
"#;

/// (window, group) → the sealed list.
fn lists(db: &std::path::Path) -> BTreeMap<(String, String), Vec<(String, i64)>> {
    let conn = rusqlite::Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT window_name, group_key, item_id, count, state FROM topk WHERE job = 'bots' ORDER BY window_name, group_key, rank")
        .expect("prepare");
    let mut out: BTreeMap<(String, String), Vec<(String, i64)>> = BTreeMap::new();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
            ))
        })
        .expect("query");
    for row in rows {
        let (w, g, item, count, state) = row.expect("row");
        assert_eq!(state, "final");
        out.entry((w, g)).or_default().push((item, count));
    }
    out
}

#[test]
fn one_bot_counts_once_and_groups_keep_their_own_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut input = String::new();
    for i in 0..1000 {
        writeln!(
            input,
            r#"{{"item_id":"spam","ts":{},"user":"bot","dims":{{"country":"US"}}}}"#,
            1000 + i
        )
        .unwrap();
    }
    for u in 0..40 {
        let country = if u % 4 == 0 { "DE" } else { "US" };
        writeln!(
            input,
            r#"{{"item_id":"real","ts":{},"user":"u{u}","dims":{{"country":"{country}"}}}}"#,
            2000 + u
        )
        .unwrap();
    }
    // no user: counted by the events window only
    writeln!(input, r#"{{"item_id":"anon","ts":3000}}"#).unwrap();
    std::fs::write(dir.path().join("events.jsonl"), input).expect("write");
    std::fs::write(dir.path().join("job.toml"), CONFIG).expect("write");
    let out = run_hotlist(dir.path(), &["run", "--config", "job.toml"], true);
    let got = lists(&dir.path().join("out.db"));
    let l = |w: &str, g: &str| got.get(&(w.to_string(), g.to_string())).cloned().unwrap_or_default();
    assert_eq!(
        l("events", ""),
        [("spam".into(), 1000), ("real".into(), 40), ("anon".into(), 1)]
    );
    assert_eq!(l("people", ""), [("real".into(), 40), ("spam".into(), 1)]);
    assert_eq!(l("by-country", "country=US"), [("real".into(), 30), ("spam".into(), 1)]);
    assert_eq!(l("by-country", "country=DE"), [("real".to_string(), 10)]);
    assert_eq!(got.len(), 4, "{got:?}");
    let (dead, _) = hotlist_tests::sqlite_dead_letters(&dir.path().join("out.db"), "bots");
    assert!(dead.is_empty(), "the user-less record is no dead letter: {dead:?}");
    assert!(out.status.success());
    // query --group reads one group back
    let q = run_hotlist(
        dir.path(),
        &[
            "query",
            "--config",
            "job.toml",
            "--window",
            "by-country",
            "--group",
            "country=DE",
        ],
        true,
    );
    let text = String::from_utf8_lossy(&q.stdout);
    assert!(
        text.contains("real") && text.contains("10") && !text.contains("spam"),
        "{text}"
    );
}

/// When every window counts distinct users, a record without a user could count nowhere: it is
/// a `bad` dead letter whose detail names the pointer, and the other records count as usual.
#[test]
fn a_record_without_a_user_is_bad_when_every_window_needs_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = CONFIG
        .replace("[[window]]\nname = \"events\"\nsize = \"1m\"\nk = 3\n", "")
        .replace("id = \"bots\"", "id = \"users-only\"");
    assert!(!config.contains("name = \"events\""), "{config}");
    let input = [
        r#"{"item_id":"a","ts":1000,"user":"u1","dims":{"country":"US"}}"#,
        r#"{"item_id":"anon","ts":1001}"#,
        r#"{"item_id":"a","ts":1002,"user":"u2"}"#,
    ]
    .join("\n");
    std::fs::write(dir.path().join("events.jsonl"), input + "\n").expect("write");
    std::fs::write(dir.path().join("job.toml"), config).expect("write");
    let out = run_hotlist(dir.path(), &["run", "--config", "job.toml"], true);
    assert!(out.status.success());
    let db = dir.path().join("out.db");
    let (dead, raw) = hotlist_tests::sqlite_dead_letters(&db, "users-only");
    assert_eq!(dead, vec![(0, 2, "bad".to_string())]);
    assert_eq!(raw[&(0, 2)], br#"{"item_id":"anon","ts":1001}"#.to_vec());
    let conn = rusqlite::Connection::open(&db).expect("open");
    let detail: String = conn
        .query_row("SELECT detail FROM dead_letters WHERE job = 'users-only'", [], |r| {
            r.get(0)
        })
        .expect("detail");
    assert!(detail.contains("/user"), "{detail}");
    let counts: Vec<(String, String, i64)> = conn
        .prepare("SELECT window_name, group_key, count FROM topk WHERE job = 'users-only' AND item_id = 'a' ORDER BY window_name, group_key")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(
        counts,
        vec![
            ("by-country".to_string(), "country=".to_string(), 1),
            ("by-country".to_string(), "country=US".to_string(), 1),
            ("people".to_string(), String::new(), 2),
        ]
    );
}

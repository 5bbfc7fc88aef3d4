//! Per-group lists over HTTP: `/v1/top` selects a group by the window's `by` dims (or
//! `group=KEY`), refuses missing and foreign dims with a 400 naming them, and `/v1/groups`
//! lists the groups of the latest instance.

use crate::common::{list, start, windows, Kind};
use hotlist_operators::group::GroupKey;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::ListState;

fn in_group(mut l: PublishedList, group: &GroupKey) -> PublishedList {
    l.group = group.clone();
    l
}

async fn groups_are_served(kind: Kind) {
    let mut h = start(kind).await;
    let mut specs = windows();
    specs[1].key.by = vec!["country".into()];
    h.prepare(&specs);
    let us = GroupKey::from_pairs([("country", "US")]);
    let de = GroupKey::from_pairs([("country", "DE")]);
    let hop = |items: &[(&str, u64)]| list("5m-hop", 0, 1, ListState::Open, items);
    h.commit(
        1,
        vec![
            list("1m", 0, 1, ListState::Open, &[("g", 1)]),
            in_group(hop(&[("us1", 5), ("us2", 2)]), &us),
            in_group(hop(&[("de1", 7)]), &de),
            in_group(hop(&[("o", 1)]), &GroupKey::other()),
        ],
    );
    h.wait_epoch(1).await;
    let v = h.json("/v1/top?window=5m-hop&country=US").await;
    assert_eq!(v["items"][0]["item_id"], "us1");
    assert_eq!(v["group"]["key"], "country=US");
    assert_eq!(v["group"]["dims"]["country"], "US");
    let v = h.json("/v1/top?window=5m-hop&country=DE&at=250000").await;
    assert_eq!(v["items"][0]["item_id"], "de1");
    let v = h.json("/v1/top?window=5m-hop&group=(other)").await;
    assert_eq!(v["items"][0]["item_id"], "o");
    assert_eq!(v["group"]["other"], true);
    let v = h.json("/v1/top?window=1m").await;
    assert_eq!(v["items"][0]["item_id"], "g");
    assert!(v.get("group").is_none(), "a global list names no group: {v}");

    let bad = |path: &'static str| {
        let h = &h;
        async move {
            let r = h.get(path).await;
            assert_eq!(r.status(), 400, "{path}");
            let v: serde_json::Value = r.json().await.expect("json");
            v["error"].as_str().expect("error").to_string()
        }
    };
    assert!(bad("/v1/top?window=5m-hop").await.contains("country=…"));
    assert!(bad("/v1/top?window=1m&country=US")
        .await
        .contains("country is not one of its dims"));
    assert!(bad("/v1/top?window=5m-hop&group=device=x").await.contains("country"));
    let r = h.get("/v1/top?window=5m-hop&country=FR").await;
    assert_eq!(r.status(), 404);

    let v = h.json("/v1/groups?window=5m-hop").await;
    assert_eq!(v["by"], serde_json::json!(["country"]));
    assert_eq!(v["window_start"], 0);
    let keys: Vec<&str> = v["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g["key"].as_str().expect("key"))
        .collect();
    assert_eq!(keys, ["(other)", "country=DE", "country=US"]);
    assert_eq!(v["groups"][2]["dims"]["country"], "US");
    let v = h.json("/v1/windows").await;
    assert_eq!(v["windows"][1]["by"], serde_json::json!(["country"]));
    assert_eq!(h.get("/v1/groups").await.status(), 400);
    assert_eq!(h.get("/v1/groups?window=nope").await.status(), 404);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_groups_are_served() {
    groups_are_served(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_groups_are_served() {
    groups_are_served(Kind::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_groups_are_served() {
    groups_are_served(Kind::Postgres).await;
}

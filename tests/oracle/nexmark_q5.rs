//! Nexmark Q5 ("hot items") on the real binary with the shipped config
//! (`configs/nexmark-q5.toml`): 3,000 bids from the `nexmark` crate's generator
//! (`tests/data/nexmark-bids-3000.jsonl`) read through the field mapping, counted per auction in
//! a 10 s window sliding every 2 s. The sealed lists equal an independent computation: each bid
//! read with `serde_json::Value`, turned into the plain event contract and counted by the
//! brute-force model.

use hotlist_tests::model::{self, ModelWindow};
use hotlist_tests::{run_hotlist, sqlite_sealed_lists};
use std::path::Path;

#[test]
fn q5_sealed_lists_equal_an_independent_count() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bids = std::fs::read_to_string(root.join("tests/data/nexmark-bids-3000.jsonl")).expect("fixture");
    let config = std::fs::read_to_string(root.join("configs/nexmark-q5.toml")).expect("config");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("bids.jsonl"), &bids).expect("write");
    std::fs::write(dir.path().join("q5.toml"), config).expect("write");
    run_hotlist(dir.path(), &["run", "--config", "q5.toml"], true);
    let got = sqlite_sealed_lists(&dir.path().join("nexmark-q5.db"), "nexmark-q5");

    // the independent side: auction and date_time by hand, then the plain contract
    let lines: Vec<Vec<u8>> = bids
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a bid");
            let auction = v["Bid"]["auction"].as_u64().expect("auction");
            let ts = v["Bid"]["date_time"].as_i64().expect("date_time");
            format!(r#"{{"item_id":"{auction}","ts":{ts}}}"#).into_bytes()
        })
        .collect();
    assert_eq!(lines.len(), 3000);
    let (want, dead) = model::run(&[lines], &[ModelWindow::new("q5", 10_000, 2_000, 10)], 0, 0);
    assert!(dead.is_empty(), "{dead:?}");
    assert!(want.len() >= 5, "the fixture spans several windows: {}", want.len());
    assert_eq!(got, want);
}

//! Nexmark Q5 ("hot items") on the real binary with the shipped config
//! (`configs/nexmark-q5.toml`): 3,000 bids from the `nexmark` crate's generator
//! (`tests/data/nexmark-bids-3000.jsonl`) read through the field mapping, counted per auction in
//! a 10 s window sliding every 2 s. The sealed lists equal an independent computation: each bid
//! read with `serde_json::Value`, turned into the plain event contract and counted by the
//! brute-force model.

use hotlist_tests::model::{self, ModelWindow};
use hotlist_tests::{run_hotlist, sqlite_dead_letters, sqlite_sealed_lists};
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

/// The same bids with records of the same shape but other values woven in (read through the
/// shape the bids before them left, or not): the good ones are counted as the independent
/// side counts them (a string auction is the same item, an escape or a non-ASCII byte in a
/// skipped string changes nothing), and every bad one is a `bad` dead letter with its bytes,
/// never a count.
#[test]
fn q5_reads_bids_of_one_shape_with_other_values_as_the_walk_does() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bids = std::fs::read_to_string(root.join("tests/data/nexmark-bids-3000.jsonl")).expect("fixture");
    let config = std::fs::read_to_string(root.join("configs/nexmark-q5.toml")).expect("config");
    type Change = fn(&str) -> String;
    let good: [Change; 4] = [
        |l| l.replace("https://", r"https:\/\/"),
        |l| l.replacen(r#""extra":""#, r#""extra":"é"#, 1),
        |l| l.replacen(r#""price":"#, r#""price":-1.5e3,"p":"#, 1),
        |l| auction(l, &format!("\"{}\"", auction_of(l))),
    ];
    /// A bid's auction, as a number.
    fn auction_of(l: &str) -> u64 {
        let v: serde_json::Value = serde_json::from_str(l).expect("a bid");
        v["Bid"]["auction"].as_u64().expect("auction")
    }
    // (values changed in place: the record keeps the bids' shape)
    fn auction(l: &str, to: &str) -> String {
        let auction = auction_of(l);
        l.replacen(&format!(r#""auction":{auction},"#), &format!(r#""auction":{to},"#), 1)
    }
    let bad: [Change; 5] = [
        |l| auction(l, "-0"),
        |l| auction(l, "1.5"),
        |l| auction(l, "12345678901234567890123"),
        |l| l[..l.len() - 1].to_string(),
        |l| l.replacen(r#""extra":""#, "\"extra\":\"\u{1}", 1),
    ];
    assert!(
        bids.lines().all(|l| bad.iter().all(|b| b(l) != l)),
        "every bad change changes the bid"
    );
    let (mut input, mut counted, mut dead) = (String::new(), Vec::new(), Vec::new());
    for (i, line) in bids.lines().enumerate() {
        input.push_str(line);
        input.push('\n');
        counted.push(line.to_string());
        if i % 7 == 3 {
            let changed = good[i % good.len()](line);
            input.push_str(&changed);
            input.push('\n');
            counted.push(changed);
        }
        if i % 11 == 5 {
            let changed = bad[i % bad.len()](line);
            input.push_str(&changed);
            input.push('\n');
            dead.push(changed.into_bytes());
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("bids.jsonl"), &input).expect("write");
    std::fs::write(dir.path().join("q5.toml"), config).expect("write");
    run_hotlist(dir.path(), &["run", "--config", "q5.toml"], true);
    let db = dir.path().join("nexmark-q5.db");
    let got = sqlite_sealed_lists(&db, "nexmark-q5");
    let lines: Vec<Vec<u8>> = counted
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a good bid");
            let auction = match &v["Bid"]["auction"] {
                serde_json::Value::String(s) => s.clone(),
                n => n.as_u64().expect("auction").to_string(),
            };
            let ts = v["Bid"]["date_time"].as_i64().expect("date_time");
            format!(r#"{{"item_id":"{auction}","ts":{ts}}}"#).into_bytes()
        })
        .collect();
    let (want, model_dead) = model::run(&[lines], &[ModelWindow::new("q5", 10_000, 2_000, 10)], 0, 0);
    assert!(model_dead.is_empty(), "{model_dead:?}");
    assert_eq!(got, want);
    let (letters, raw) = sqlite_dead_letters(&db, "nexmark-q5");
    assert!(letters.iter().all(|(_, _, reason)| reason == "bad"), "{letters:?}");
    let mut raw: Vec<Vec<u8>> = raw.into_values().collect();
    raw.sort();
    dead.sort();
    assert_eq!(raw.len(), dead.len());
    assert!(raw == dead, "the bad records' bytes are the dead letters'");
}

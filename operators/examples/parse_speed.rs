//! Parse-path speed: lines/s of the event contract through `parse_event` (the code of main
//! before the field mapping, unchanged) and through a `Parser` of `Format::default()` (what
//! sources call now), interleaved rounds, best of each; with a file argument of Nexmark bid
//! lines, also the mapped path on them.
//!
//!   cargo run --release -p hotlist-operators --example parse_speed [bids.jsonl]
//!
//! `PARSE_SPEED_ONCE=1` parses the bid lines once with each mapping and nothing else, for
//! `valgrind --tool=cachegrind` (instruction counts are exact where wall time is noisy).

use hotlist_operators::event::parse_event;
use hotlist_operators::format::{Format, Parser, Pointer, TsUnit};
use std::hint::black_box;
use std::time::Instant;

fn rate(lines: &[Vec<u8>], parse: &dyn Fn(&[u8]) -> bool) -> f64 {
    let t = Instant::now();
    let ok = lines.iter().filter(|l| parse(black_box(l))).count();
    assert_eq!(ok, lines.len(), "every line parses");
    lines.len() as f64 / t.elapsed().as_secs_f64()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let once = std::env::var_os("PARSE_SPEED_ONCE").is_some();
    let lines: Vec<Vec<u8>> = (0..1_000_000u64)
        .map(|i| {
            let item = (i * 2_654_435_761) % 100_000;
            format!(r#"{{"item_id":"item-{item}","ts":{}}}"#, 1_700_000_000_000 + i).into_bytes()
        })
        .collect();
    let contract = Parser::new(Format::default());
    let (mut before, mut after) = (0f64, 0f64);
    for _ in 0..if once { 0 } else { 7 } {
        before = before.max(rate(&lines, &|l| parse_event(l).is_ok()));
        after = after.max(rate(&lines, &|l| contract.parse(l).is_ok()));
    }
    println!(
        "contract: parse_event {before:.0} lines/s, Parser(default) {after:.0} lines/s, ratio {:.3}",
        after / before
    );
    if let Some(path) = std::env::args().nth(1) {
        let text = std::fs::read(&path)?;
        let bids: Vec<Vec<u8>> = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        let p = |t: &str| Pointer::parse(t).map_err(|e| e.to_string());
        let mut f = Format {
            item_id: p("/Bid/auction")?,
            ts: p("/Bid/date_time")?,
            ts_unit: TsUnit::Millis,
            user: None,
            user_is_extra: false,
            dims: Vec::new(),
            bounds: Default::default(),
            args: Vec::new(),
            computed: Default::default(),
        };
        let parser = Parser::new(f.clone());
        let plain = (0..if once { 1 } else { 5 })
            .map(|_| rate(&bids, &|l| parser.parse(l).is_ok()))
            .fold(0f64, f64::max);
        f.user = Some(p("/Bid/bidder")?);
        f.dims = vec![("channel".into(), p("/Bid/channel")?)];
        let parser = Parser::new(f);
        let full = (0..if once { 1 } else { 5 })
            .map(|_| rate(&bids, &|l| parser.parse(l).is_ok()))
            .fold(0f64, f64::max);
        println!(
            "nexmark bids ({} lines): item+ts {plain:.0} lines/s, item+ts+user+channel {full:.0} lines/s",
            bids.len()
        );
    }
    Ok(())
}

//! `hotlist explain` over Kafka: after bounded runs with checkpoints every 10 ms on 1 and 2
//! workers, the most frequent items' counts in sealed instances of a tumbling and a hopping
//! window, taken apart by explain reading the instances' offsets again with a consumer of its
//! own, equal the model of the records (per partition, late but accepted, late and dropped),
//! and the store agrees.

use super::harness::{read_parts, run_to_the_end, setup_generated};
use crate::explain::{events, explain, got, want, Ev, Of};
use serde_json::Value;
use std::collections::BTreeMap;

const OOO: i64 = 2_000;
const LATENESS: i64 = 30_000;

/// The `n` items with the most events in `[start, start + size)`.
fn frequent(evs: &[Ev], start: i64, size: i64, n: usize) -> Vec<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for e in evs.iter().filter(|e| e.ts >= start && e.ts < start + size) {
        *counts.entry(e.item.as_str()).or_default() += 1;
    }
    let mut items: Vec<(&str, usize)> = counts.into_iter().collect();
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    items.into_iter().take(n).map(|(i, _)| i.to_string()).collect()
}

#[test]
fn explain_reads_kafka_offsets_again_as_the_model_says() {
    // 80 s of event time with events 35 s late: in instances that also count on-time events,
    // some accepted late (their partition's watermark past the end, within the lateness), some
    // dropped
    let s = setup_generated(
        "explain",
        true,
        true,
        6_000,
        &["source.rate=25", "source.late_by=\"35s\""],
    );
    let dir = s.dir.path();
    let evs = events(&read_parts(&dir.join("files")), OOO);
    // instances with on-time events and late drops
    let first = evs.iter().map(|e| e.ts).filter(|ts| *ts >= 0).min().unwrap_or(0);
    let instances: Vec<i64> = (evs.iter())
        .filter(|e| {
            let end = e.ts.div_euclid(10_000) * 10_000 + 10_000;
            end + LATENESS <= e.wm_before
        })
        .map(|e| e.ts.div_euclid(10_000) * 10_000)
        .filter(|s| *s >= first + 10_000)
        .collect::<std::collections::BTreeSet<i64>>()
        .into_iter()
        .collect();
    assert!(instances.len() >= 2, "the data set has instances with late drops");
    let of = |size: i64, start: i64| Of {
        size,
        start,
        group: None,
        distinct: false,
        max_groups: 0,
        lateness: LATENESS,
    };
    let (mut accepted, mut dropped) = (0, 0);
    for workers in [1, 2] {
        for entry in std::fs::read_dir(dir).expect("dir").flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with("out.db") {
                std::fs::remove_file(entry.path()).expect("remove store");
            }
        }
        let _ = std::fs::remove_dir_all(dir.join("ckpt"));
        run_to_the_end(dir, workers);
        for &start in instances.iter().take(2) {
            for item in frequent(&evs, start, 10_000, 2) {
                let w = want(&evs, &of(10_000, start), &item);
                (accepted, dropped) = (accepted + w.late_accepted, dropped + w.late_dropped);
                let v = explain(dir, "10s", &item, start, None);
                assert_eq!(got(&v), w, "10s [{start}] {item} with {workers} worker(s): {v}");
                assert_eq!(v["agrees"], Value::Bool(true), "{v}");
                assert_eq!(v["distinct_users"], Value::Null, "the job reads no users: {v}");
            }
            // the 30 s instance (sliding by 10 s) that ends first after this one
            let hop = start - 10_000;
            for item in frequent(&evs, hop, 30_000, 1) {
                let w = want(&evs, &of(30_000, hop), &item);
                let v = explain(dir, "30s-hop", &item, hop + 30_000 - 1, None);
                assert_eq!(got(&v), w, "30s-hop [{hop}] {item} with {workers} worker(s): {v}");
                assert_eq!(v["agrees"], Value::Bool(true), "{v}");
            }
        }
    }
    assert!(accepted > 0 && dropped > 0, "late events of both kinds explained");
}

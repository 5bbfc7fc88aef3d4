//! The detector against a brute-force model: exact counts of the sampled events per window,
//! the lateness and closing rules and the hysteresis written out independently.

use super::*;
use crate::hash::item_hash;
use crate::record::PartitionId;
use crate::snapshot::{decode, encode, SnapshotError};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const W: u64 = 1000; // window, ms
const L: u64 = 500; // allowed lateness, ms

fn spec(sample: u32, width: u32, candidates: usize) -> HotKeySpec {
    HotKeySpec {
        sample,
        window: Span::from_millis(W),
        threshold: 4.0 * f64::from(sample), // 4 sampled events per window at W = 1s
        hysteresis: 0.5,
        shape: CmsShape::new(width, 5).expect("valid"),
        candidates,
    }
}

#[derive(Clone, Debug)]
enum Step {
    /// An event: partition, item, event time, the partition watermark before it.
    Event(u32, u8, i64, i64),
    /// The global watermark moves to this.
    Advance(i64),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        6 => (0u32..3, 0u8..6, 0i64..8000, -1000i64..8000).prop_map(|(p, i, ts, wm)| Step::Event(p, i, ts, wm)),
        1 => (0i64..10_000).prop_map(Step::Advance),
    ];
    proptest::collection::vec(step, 0..300)
}

/// Feeds `steps` (positions numbered per partition, sampled as the source does) and collects
/// every report; restores from a snapshot after `split` steps when given.
fn run(spec: HotKeySpec, steps: &[Step], split: Option<usize>) -> Vec<HotWindow> {
    let mut d = HotKeyDetector::new(spec, Span::from_millis(L)).expect("valid");
    let mut positions = [0u64; 3];
    let mut out = Vec::new();
    for (n, s) in steps.iter().enumerate() {
        if split == Some(n) {
            let bytes = encode(&d.snapshot());
            let snap: HotKeysSnapshot = decode(&bytes).expect("decodes");
            d = HotKeyDetector::restore(spec, Span::from_millis(L), &snap).expect("restores");
        }
        match *s {
            Step::Event(p, item, ts, wm) => {
                positions[p as usize] += 1;
                if is_sampled(PartitionId(p), positions[p as usize], spec.sample) {
                    let id = format!("k{item}");
                    d.add(&id, item_hash(&id), Millis(ts), Millis(wm));
                }
            }
            Step::Advance(wm) => out.extend(d.advance(Millis(wm), Millis(0))),
        }
    }
    out.extend(d.advance(Millis::MAX, Millis(0)));
    out
}

/// The model: exact counting, its own window arithmetic, its own state machine.
fn model(spec: HotKeySpec, steps: &[Step]) -> Vec<HotWindow> {
    let (w, l) = (W as i64, L as i64);
    let mut counts: BTreeMap<i64, BTreeMap<String, u64>> = BTreeMap::new();
    let mut closed_until = i64::MIN;
    let mut positions = [0u64; 3];
    let mut previous: Option<(i64, BTreeSet<String>)> = None;
    let mut out = Vec::new();
    let mut close = |wm: i64, counts: &mut BTreeMap<i64, BTreeMap<String, u64>>, closed_until: &mut i64| {
        let horizon = wm.saturating_sub(l);
        while let Some((&start, _)) = counts.first_key_value() {
            if start + w > horizon {
                break;
            }
            let c = counts.remove(&start).unwrap_or_default();
            let prev = match previous.take() {
                Some((end, keys)) if end == start => keys,
                _ => BTreeSet::new(),
            };
            let mut keys = Vec::new();
            for (id, n) in &c {
                let rate = *n as f64 * f64::from(spec.sample) * 1000.0 / W as f64;
                if rate >= spec.threshold {
                    keys.push(HotKey {
                        item_id: id.into(),
                        rate,
                        state: HotState::Hot,
                    });
                } else if prev.contains(id) && rate >= spec.threshold * (1.0 - spec.hysteresis) {
                    keys.push(HotKey {
                        item_id: id.into(),
                        rate,
                        state: HotState::Cooling,
                    });
                }
            }
            // previously reported keys without a sampled event this window: rate 0, gone
            keys.sort_by(|a, b| b.rate.total_cmp(&a.rate).then_with(|| a.item_id.cmp(&b.item_id)));
            previous = Some((start + w, keys.iter().map(|k| k.item_id.to_string()).collect()));
            out.push(HotWindow {
                start: Millis(start),
                end: Millis(start + w),
                watermark: Millis(wm),
                as_of: Millis(0),
                keys,
            });
        }
        *closed_until = (*closed_until).max(horizon.div_euclid(w).saturating_mul(w));
    };
    for s in steps {
        match *s {
            Step::Event(p, item, ts, wm) => {
                positions[p as usize] += 1;
                if !is_sampled(PartitionId(p), positions[p as usize], spec.sample) {
                    continue;
                }
                let start = ts.div_euclid(w) * w;
                if wm >= start + w + l || start + w <= closed_until {
                    continue; // late for its partition, or its window is closed
                }
                *counts.entry(start).or_default().entry(format!("k{item}")).or_insert(0) += 1;
            }
            Step::Advance(wm) => close(wm, &mut counts, &mut closed_until),
        }
    }
    close(i64::MAX, &mut counts, &mut closed_until);
    out
}

/// Reports without the watermark (the model's `i64::MAX` close and the detector's agree; the
/// rest is compared as is).
fn strip(mut r: Vec<HotWindow>) -> Vec<HotWindow> {
    for w in &mut r {
        w.watermark = Millis(0);
    }
    r
}

proptest! {
    /// With a table wide enough for six keys (no collision in all five rows), the detector
    /// reports exactly what exact counting of the sampled events reports, at every sample rate.
    #[test]
    fn matches_the_model(steps in steps(), sample in prop_oneof![Just(1u32), Just(2), Just(10)]) {
        let spec = spec(sample, 1 << 16, 8);
        prop_assert_eq!(strip(run(spec, &steps, None)), strip(model(spec, &steps)));
    }

    /// Restoring from a snapshot anywhere gives the same reports as not stopping.
    #[test]
    fn snapshot_restore_continues_identically(steps in steps(), at in 0usize..300) {
        let spec = spec(1, 64, 4);
        prop_assert_eq!(run(spec, &steps, Some(at.min(steps.len()))), run(spec, &steps, None));
    }

    /// A small table over-estimates, never under: every key exactly hot is reported (candidates
    /// hold every key), and no rate is below the exact one.
    #[test]
    fn a_small_sketch_never_misses_a_hot_key(steps in steps()) {
        let spec = spec(1, 3, 8);
        let exact = model(spec, &steps);
        let got = run(spec, &steps, None);
        prop_assert_eq!(got.len(), exact.len());
        for (g, e) in got.iter().zip(&exact) {
            prop_assert_eq!((g.start, g.end), (e.start, e.end));
            for k in e.keys.iter().filter(|k| k.state == HotState::Hot) {
                let found = g.keys.iter().find(|x| x.item_id == k.item_id);
                prop_assert!(found.is_some_and(|x| x.rate >= k.rate && x.state == HotState::Hot), "{} missing", k.item_id);
            }
        }
    }
}

#[test]
fn a_surge_enters_hot_cools_and_leaves() {
    let spec = spec(1, 1 << 12, 8);
    let mut d = HotKeyDetector::new(spec, Span::from_millis(L)).expect("valid");
    // sampled counts per window of key "a": 5 (hot), 3 (cooling: ≥ 2), 2 (cooling), 1 (gone)
    for (window, n) in [(0i64, 5u32), (1, 3), (2, 2), (3, 1)] {
        for i in 0..n {
            d.add("a", item_hash("a"), Millis(window * 1000 + i64::from(i)), Millis::MIN);
        }
        d.add("b", item_hash("b"), Millis(window * 1000), Millis::MIN);
    }
    let got: Vec<Vec<(String, HotState, f64)>> = d
        .advance(Millis(10_000), Millis(0))
        .into_iter()
        .map(|w| {
            w.keys
                .into_iter()
                .map(|k| (k.item_id.to_string(), k.state, k.rate))
                .collect()
        })
        .collect();
    assert_eq!(
        got,
        vec![
            vec![("a".to_string(), HotState::Hot, 5.0)],
            vec![("a".to_string(), HotState::Cooling, 3.0)],
            vec![("a".to_string(), HotState::Cooling, 2.0)],
            vec![],
        ]
    );
}

#[test]
fn late_and_closed_events_do_not_count() {
    let spec = spec(1, 1 << 12, 8);
    let mut d = HotKeyDetector::new(spec, Span::from_millis(L)).expect("valid");
    // its partition's watermark had passed end (1000) + lateness (500): late
    assert_eq!(d.add("a", 1, Millis(10), Millis(1500)), Added::Late);
    assert_eq!(d.add("a", 1, Millis(10), Millis(1499)), Added::Counted);
    assert_eq!(d.advance(Millis(1500), Millis(0)).len(), 1);
    // window [0, 1000) is closed now, and so is [1000, 2000) once the watermark passes 2500,
    // even though it never saw an event
    assert_eq!(d.add("a", 1, Millis(20), Millis::MIN), Added::Closed);
    assert!(d.advance(Millis(2500), Millis(0)).is_empty());
    assert_eq!(d.add("a", 1, Millis(1200), Millis::MIN), Added::Closed);
    assert_eq!(d.add("a", 1, Millis(2000), Millis::MIN), Added::Counted);
}

#[test]
fn a_gap_resets_hysteresis() {
    let spec = spec(1, 1 << 12, 8);
    let mut d = HotKeyDetector::new(spec, Span::from_millis(L)).expect("valid");
    for i in 0..5 {
        d.add("a", item_hash("a"), Millis(i), Millis::MIN);
    }
    // nothing at all in [1000, 2000); 3 events in [2000, 3000): not hot, and not cooling either
    for i in 0..3 {
        d.add("a", item_hash("a"), Millis(2000 + i), Millis::MIN);
    }
    let reports = d.advance(Millis::MAX, Millis(0));
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].keys.len(), 1);
    assert!(reports[1].keys.is_empty());
}

#[test]
fn restore_refuses_other_settings() {
    let d = HotKeyDetector::new(spec(1, 64, 4), Span::from_millis(L)).expect("valid");
    let snap = d.snapshot();
    let other = spec(10, 64, 4);
    assert!(matches!(
        HotKeyDetector::restore(other, Span::from_millis(L), &snap),
        Err(SnapshotError::Incompatible)
    ));
    let mut bad = snap.clone();
    let blank = crate::sketch::CountMinTopK::new(CmsShape::new(64, 5).expect("valid"), 4).expect("valid");
    bad.windows.push((Millis(5), blank.snapshot()));
    assert!(matches!(
        HotKeyDetector::restore(spec(1, 64, 4), Span::from_millis(L), &bad),
        Err(SnapshotError::Invalid(_))
    ));
}

#[test]
fn spec_checks_name_the_key() {
    let ok = spec(1, 64, 4);
    assert!(ok.validate().is_ok());
    let cases: [(HotKeySpec, &str); 5] = [
        (HotKeySpec { sample: 0, ..ok }, "hot_keys.sample"),
        (
            HotKeySpec {
                window: Span::ZERO,
                ..ok
            },
            "hot_keys.window",
        ),
        (
            HotKeySpec {
                threshold: f64::NAN,
                ..ok
            },
            "hot_keys.threshold",
        ),
        (HotKeySpec { hysteresis: 1.0, ..ok }, "hot_keys.hysteresis"),
        (HotKeySpec { candidates: 0, ..ok }, "hot_keys.candidates"),
    ];
    for (s, key) in cases {
        let e = s.validate().expect_err("refused");
        assert!(e.starts_with(key), "{e}");
    }
}

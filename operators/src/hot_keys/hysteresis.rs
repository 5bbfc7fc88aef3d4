//! The hot/cooling state machine of one window: from the keys' rates and the keys reported in
//! the previous window, what this window reports.
//!
//! ```text
//!            rate ≥ T                     rate < T·(1−h)
//!   (none) ──────────▶ hot ──rate < T──▶ cooling ──────────▶ (none)
//!                       ▲                   │
//!                       └──── rate ≥ T ─────┘
//! ```
//!
//! A key not reported in the previous window is reported only when hot: hysteresis keeps a key,
//! it never admits one.

use super::{HotKey, HotState};
use crate::record::ItemId;
use std::collections::BTreeSet;

/// Classifies `(key, rate)` pairs (each key once) given the keys reported in the previous
/// window: hot at rate ≥ `threshold`; cooling when previously reported and rate ≥
/// `threshold × (1 − hysteresis)`; otherwise not reported. The result is ordered by rate
/// descending, then item id ascending.
pub fn classify(
    rates: impl IntoIterator<Item = (ItemId, f64)>,
    previous: &BTreeSet<ItemId>,
    threshold: f64,
    hysteresis: f64,
) -> Vec<HotKey> {
    let keep = threshold * (1.0 - hysteresis);
    let mut keys: Vec<HotKey> = rates
        .into_iter()
        .filter_map(|(item_id, rate)| {
            let state = if rate >= threshold {
                HotState::Hot
            } else if rate >= keep && previous.contains(&item_id) {
                HotState::Cooling
            } else {
                return None;
            };
            Some(HotKey { item_id, rate, state })
        })
        .collect();
    keys.sort_by(|a, b| b.rate.total_cmp(&a.rate).then_with(|| a.item_id.cmp(&b.item_id)));
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rates: &[(&str, f64)], previous: &[&str], h: f64) -> Vec<(String, HotState)> {
        let prev = previous.iter().map(|s| ItemId::from(*s)).collect();
        classify(rates.iter().map(|(k, r)| (ItemId::from(*k), *r)), &prev, 100.0, h)
            .into_iter()
            .map(|k| (k.item_id.to_string(), k.state))
            .collect()
    }

    #[test]
    fn a_key_enters_only_at_the_threshold() {
        assert_eq!(
            run(&[("a", 100.0), ("b", 99.9)], &[], 0.5),
            vec![("a".into(), HotState::Hot)]
        );
    }

    #[test]
    fn a_reported_key_cools_then_leaves() {
        assert_eq!(run(&[("a", 60.0)], &["a"], 0.5), vec![("a".into(), HotState::Cooling)]);
        assert_eq!(run(&[("a", 50.0)], &["a"], 0.5), vec![("a".into(), HotState::Cooling)]);
        assert_eq!(run(&[("a", 49.9)], &["a"], 0.5), vec![]);
        // a cooling key that rises again is hot
        assert_eq!(run(&[("a", 120.0)], &["a"], 0.5), vec![("a".into(), HotState::Hot)]);
    }

    #[test]
    fn no_hysteresis_no_cooling() {
        assert_eq!(run(&[("a", 99.0)], &["a"], 0.0), vec![]);
    }

    #[test]
    fn ordered_by_rate_then_id() {
        let got = run(&[("b", 200.0), ("a", 200.0), ("c", 300.0), ("d", 80.0)], &["d"], 0.3);
        let ids: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(ids, ["c", "a", "b", "d"]);
    }
}

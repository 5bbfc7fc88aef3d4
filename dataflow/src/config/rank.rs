//! A window's `rank_by`, `baseline` and `min_count`: how its lists are ordered.

use super::raw::RawWindow;
use anyhow::{bail, Result};
use hotlist_operators::trend::{Rank, TrendRule, DEFAULT_BASELINE, DEFAULT_MIN_COUNT, MAX_BASELINE};
use hotlist_operators::window::WindowSpec;

/// The ranking of configured window `raw`, whose size, slide and key shape are in `w`.
pub fn rank(raw: &RawWindow, w: &WindowSpec) -> Result<Rank> {
    let at = |key: &str| format!("window {:?}: {key}", w.name);
    let trend = match raw.rank_by.as_deref().unwrap_or("count") {
        "count" => false,
        "trend" => true,
        other => bail!(
            "{}: unknown ranking {other:?} (expected \"count\" or \"trend\")",
            at("rank_by")
        ),
    };
    if !trend {
        for (key, set) in [
            ("baseline", raw.baseline.is_some()),
            ("min_count", raw.min_count.is_some()),
        ] {
            if set {
                bail!("{}: only for rank_by = \"trend\"", at(key));
            }
        }
        return Ok(Rank::Count);
    }
    if w.slide != w.size {
        bail!(
            "{}: a hopping window cannot rank by trend (its instances overlap, so there is no \"previous instance\" to be a baseline); use a tumbling window",
            at("rank_by")
        );
    }
    let mode = raw.mode.as_deref().unwrap_or("exact");
    if mode != "exact" {
        bail!(
            "{}: trend windows count exactly for now (this one's mode is {mode:?}): a score compares two counts, and sketch counts are high by up to their error",
            at("rank_by")
        );
    }
    if w.key.distinct_users {
        bail!(
            "{}: trend windows count events for now, not count = \"distinct_users\"",
            at("rank_by")
        );
    }
    let baseline = raw.baseline.unwrap_or(DEFAULT_BASELINE);
    if !(1..=MAX_BASELINE).contains(&baseline) {
        bail!(
            "{}: must be 1 to {MAX_BASELINE} instances (got {baseline})",
            at("baseline")
        );
    }
    let min_count = raw.min_count.unwrap_or(DEFAULT_MIN_COUNT);
    if min_count == 0 {
        bail!("{}: must be at least 1", at("min_count"));
    }
    Ok(Rank::Trend(TrendRule { baseline, min_count }))
}

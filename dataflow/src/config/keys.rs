//! A window's `by`, `max_groups` and `count`: what it keeps a list of and what it counts.

use super::raw::RawWindow;
use anyhow::{bail, Result};
use hotlist_operators::group::{check_by_dim, KeyShape, DEFAULT_MAX_GROUPS};

/// Most dims one window may group by.
pub const MAX_BY_DIMS: usize = 8;
/// Largest `max_groups`.
pub const MAX_MAX_GROUPS: u32 = 1_000_000;

/// The key shape of a configured window.
pub fn key_shape(w: &RawWindow) -> Result<KeyShape> {
    let at = |key: &str| format!("window {:?}: {key}", w.name);
    let mut by = w.by.clone().unwrap_or_default();
    if w.by.is_some() && by.is_empty() {
        bail!("{}: empty (leave it out for a global list)", at("by"));
    }
    if by.len() > MAX_BY_DIMS {
        bail!("{}: at most {MAX_BY_DIMS} dims", at("by"));
    }
    for d in &by {
        if let Err(e) = check_by_dim(d) {
            bail!("{}: {e}", at("by"));
        }
    }
    by.sort();
    if let Some(d) = by.windows(2).find(|p| p[0] == p[1]) {
        bail!("{}: dim {:?} is listed twice", at("by"), d[0]);
    }
    let max_groups = match w.max_groups {
        None => DEFAULT_MAX_GROUPS,
        Some(_) if by.is_empty() => bail!("{}: only for a window with `by`", at("max_groups")),
        Some(n) if !(1..=MAX_MAX_GROUPS).contains(&n) => {
            bail!("{}: must be 1 to {MAX_MAX_GROUPS} (got {n})", at("max_groups"))
        }
        Some(n) => n,
    };
    let distinct_users = match w.count.as_deref().unwrap_or("events") {
        "events" => false,
        "distinct_users" => true,
        other => bail!(
            "{}: unknown count {other:?} (expected \"events\" or \"distinct_users\")",
            at("count")
        ),
    };
    let mode = w.mode.as_deref().unwrap_or("exact");
    let shaped = !by.is_empty() || distinct_users;
    if shaped && mode == "both" {
        bail!(
            "window {:?}: `by` and count = \"distinct_users\" are for mode = \"exact\", \"sketch\" or \"auto\" windows (this one is \"both\")",
            w.name
        );
    }
    if shaped && mode != "exact" {
        let algorithm = w.sketch.as_ref().and_then(|s| s.algorithm.as_deref()).unwrap_or("cms");
        if algorithm != "cms" {
            bail!(
                "window {:?}: sketch.algorithm: a window with `by` or count = \"distinct_users\" needs \"cms\" (a folded group's table is added into (other)'s, and HeavyKeeper tables do not add up)",
                w.name
            );
        }
    }
    Ok(KeyShape {
        by,
        distinct_users,
        max_groups,
    })
}

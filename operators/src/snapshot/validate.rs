//! Semantic validation of decoded snapshots against the job that restores them.
//!
//! The envelope's checksum proves the bytes are the ones written, not that what was written
//! makes sense: a buggy or crafted snapshot with a valid checksum can name a window the job
//! does not have, and restore code indexes by what a snapshot says. So before anything is
//! restored, every snapshot is checked here: indexes in range (windows, key groups), panes and
//! instances aligned to the job's windows and inside the event time range, items valid ids in
//! the key group they hash to, nothing listed twice, counts positive and summing to at most
//! [`MAX_TOTAL_COUNT`] (so no later sum or increment can overflow). Snapshots hold item ids,
//! never interned indexes, so there are no item references to check.
//!
//! `WindowedCounter::restore` and `ListMerger::try_restore` call these; `hotlist checkpoints
//! verify` calls them too, so a checkpoint that verifies also restores.

use super::{
    CounterSnapshot, InstanceCounts, KeyGroupState, MergerSnapshot, PublishedState, SnapshotError, SourceSnapshot,
};
use crate::event::check_item_id;
use crate::group::{check_counter_key, route_hash, GroupKey};
use crate::hash::{key_group, KEY_GROUPS};
use crate::record::{ItemId, RankedItem};
use crate::time::{Millis, Span};
use crate::topk::ranked_cmp;
use crate::window::{InstanceKey, WindowSpec};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// Largest sum of all counts in one counter snapshot: far above any real stream, and low enough
/// that sums over an instance's panes, and increments after the restore, never overflow a `u64`.
pub const MAX_TOTAL_COUNT: u64 = i64::MAX as u64;

/// What is wrong, with where (`"key group 7, pane 60000@-60000: ..."`).
type Problem = String;

fn invalid(problem: Problem) -> SnapshotError {
    SnapshotError::Invalid(problem)
}

impl CounterSnapshot {
    /// Checks this counter snapshot (whole or incremental base) against the job's windows and
    /// allowed lateness: `Incompatible` when they differ, `Invalid` naming the first problem.
    pub fn validate(&self, windows: &[WindowSpec], allowed_lateness: Span) -> Result<(), SnapshotError> {
        if self.windows != windows || self.allowed_lateness != allowed_lateness {
            return Err(SnapshotError::Incompatible);
        }
        for name in &self.pane_files {
            check_pane_file_name(name).map_err(invalid)?;
        }
        check_sealed_until(&self.sealed_until, windows).map_err(invalid)?;
        check_groups_seen(&self.groups_seen, windows).map_err(invalid)?;
        distinct(self.key_groups.iter().map(|k| k.key_group), |kg| {
            format!("key group {kg} is listed twice")
        })
        .map_err(invalid)?;
        let mut total = 0u64;
        for kg in &self.key_groups {
            check_key_group(kg, windows, &mut total)
                .map_err(|p| invalid(format!("key group {}: {p}", kg.key_group)))?;
        }
        Ok(())
    }
}

/// Validates the counter snapshots of one checkpoint together: each one (see
/// [`CounterSnapshot::validate`]), and no key group in two of them (each was owned by one
/// worker; a restore would otherwise add its counts twice).
pub fn validate_counters(
    snapshots: &[CounterSnapshot],
    windows: &[WindowSpec],
    allowed_lateness: Span,
) -> Result<(), SnapshotError> {
    for (i, s) in snapshots.iter().enumerate() {
        s.validate(windows, allowed_lateness).map_err(|e| match e {
            SnapshotError::Invalid(p) => invalid(format!("counter snapshot {i}: {p}")),
            other => other,
        })?;
    }
    distinct(
        snapshots.iter().flat_map(|s| s.key_groups.iter().map(|k| k.key_group)),
        |kg| format!("key group {kg} is in two counter snapshots"),
    )
    .map_err(invalid)
}

impl MergerSnapshot {
    /// Checks the merger's snapshot against the job's windows: instances of existing windows,
    /// aligned, listed once; a revision exactly when something was published, with room for
    /// the next; published lists of valid items, ranked, at most K long.
    pub fn validate(&self, windows: &[WindowSpec]) -> Result<(), SnapshotError> {
        distinct(self.instances.iter().map(|p| (p.instance, &p.group)), |(i, g)| {
            format!("instance {} group {:?} is listed twice", instance_name(&i), g.as_str())
        })
        .map_err(invalid)?;
        for p in &self.instances {
            check_group(p, windows)
                .and_then(|()| check_published(p, windows))
                .map_err(|e| invalid(format!("instance {}: {e}", instance_name(&p.instance))))?;
        }
        Ok(())
    }
}

impl SourceSnapshot {
    /// Checks the sources' snapshot: each partition once, its largest event time an event time
    /// (or `Millis::MIN`, none yet; or `Millis::MAX`, finished).
    pub fn validate(&self) -> Result<(), SnapshotError> {
        distinct(self.partitions.iter().map(|p| p.partition.0), |p| {
            format!("partition {p} is listed twice")
        })
        .map_err(invalid)?;
        for p in &self.partitions {
            let t = p.max_ts;
            if !(t.is_event_time() || t == Millis::MIN || t == Millis::MAX) {
                return Err(invalid(format!(
                    "partition {}: largest event time {} is outside years 0000-9999",
                    p.partition.0, t.0
                )));
            }
        }
        Ok(())
    }
}

/// A published list's group: `""` for a global window, else a canonical key of the window's
/// `by` dims or `(other)`.
fn check_group(p: &PublishedState, windows: &[WindowSpec]) -> Result<(), Problem> {
    let Some(w) = windows.get(p.instance.window.0 as usize) else {
        return Ok(()); // check_published names the missing window
    };
    let dims = GroupKey::parse(p.group.as_str()).map_err(|e| format!("group: {e}"))?;
    let fits = match dims {
        None => !w.key.by.is_empty(),
        Some(pairs) => pairs.iter().map(|(d, _)| d).eq(w.key.by.iter()),
    };
    if fits {
        Ok(())
    } else {
        Err(format!(
            "group {:?} is not one of window {:?}'s",
            p.group.as_str(),
            w.name
        ))
    }
}

/// `groups_seen`: instances of windows with `by` dims, each once, hashes ascending and distinct.
fn check_groups_seen(seen: &[(InstanceKey, Vec<u64>)], windows: &[WindowSpec]) -> Result<(), Problem> {
    distinct(seen.iter().map(|(k, _)| *k), |k| {
        format!("groups of instance {} are listed twice", instance_name(&k))
    })?;
    for (key, hashes) in seen {
        let at = || format!("groups of instance {}", instance_name(key));
        check_instance(*key, windows).map_err(|p| format!("{}: {p}", at()))?;
        if windows[key.window.0 as usize].key.by.is_empty() {
            return Err(format!("{}: the window has no by dims", at()));
        }
        if !hashes.windows(2).all(|w| w[0] < w[1]) {
            return Err(format!("{}: hashes not ascending and distinct", at()));
        }
    }
    Ok(())
}

/// `sealed_until`: none, or one per window, each `Millis::MIN` (nothing) or an instance end of
/// the window inside the event time range (an end of input sealed up to there).
fn check_sealed_until(sealed_until: &[Millis], windows: &[WindowSpec]) -> Result<(), Problem> {
    if sealed_until.is_empty() {
        return Ok(());
    }
    if sealed_until.len() != windows.len() {
        return Err(format!(
            "sealed_until has {} entries for {} windows",
            sealed_until.len(),
            windows.len()
        ));
    }
    for (w, (end, spec)) in sealed_until.iter().zip(windows).enumerate() {
        if *end != Millis::MIN {
            check_span(end.minus(spec.size), spec.size, spec.slide)
                .map_err(|p| format!("sealed_until of window {w}: the instance ending at {}: {p}", end.0))?;
        }
    }
    Ok(())
}

/// A pane file name as an incremental checkpoint writes it: a plain name in the same directory.
fn check_pane_file_name(name: &str) -> Result<(), Problem> {
    let plain = name.starts_with("pane-") && name.ends_with(".snap") && !name.contains(['/', '\\', '\0']);
    if plain {
        Ok(())
    } else {
        Err(format!("pane file name {name:?} is not a plain pane-*.snap name"))
    }
}

fn check_key_group(kg: &KeyGroupState, windows: &[WindowSpec], total: &mut u64) -> Result<(), Problem> {
    if kg.key_group >= KEY_GROUPS {
        return Err(format!("not below the {KEY_GROUPS} key groups"));
    }
    distinct(kg.panes.iter().map(|p| (p.width, p.start)), |(w, s)| {
        format!("pane {}@{} is listed twice", w.as_millis(), s.0)
    })?;
    for pane in &kg.panes {
        let at = |p: Problem| format!("pane {}@{}: {p}", pane.width.as_millis(), pane.start.0);
        check_pane(pane.width, pane.start, windows).map_err(at)?;
        check_items(&pane.items, kg.key_group, total).map_err(at)?;
    }
    distinct(kg.exclusions.iter().map(|e| e.instance), |i| {
        format!("exclusions of instance {} are listed twice", instance_name(&i))
    })?;
    for InstanceCounts { instance, items } in &kg.exclusions {
        let at = |p: Problem| format!("exclusions of instance {}: {p}", instance_name(instance));
        check_instance(*instance, windows).map_err(at)?;
        check_items(items, kg.key_group, total).map_err(at)?;
    }
    Ok(())
}

/// A pane of one of the windows' pane widths, aligned to it, holding some event time.
fn check_pane(width: Span, start: Millis, windows: &[WindowSpec]) -> Result<(), Problem> {
    if !windows.iter().any(|w| w.pane_width() == width) {
        let widths: BTreeSet<u64> = windows.iter().map(|w| w.pane_width().as_millis()).collect();
        return Err(format!(
            "width {} ms is none of the windows' pane widths {widths:?}",
            width.as_millis()
        ));
    }
    check_span(start, width, width)
}

/// An instance of an existing window, aligned to its slide, holding some event time.
fn check_instance(key: InstanceKey, windows: &[WindowSpec]) -> Result<(), Problem> {
    let Some(spec) = windows.get(key.window.0 as usize) else {
        return Err(format!(
            "window id {}, but the job has {} windows",
            key.window.0,
            windows.len()
        ));
    };
    check_span(key.start, spec.size, spec.slide)
}

/// `[start, start + len)` starts on a multiple of `align` and overlaps the event time range.
/// (Spans here are a job's window sizes, validated or not: i128 keeps every sum exact.)
fn check_span(start: Millis, len: Span, align: Span) -> Result<(), Problem> {
    let (s, len, align) = (start.0 as i128, len.as_millis() as i128, align.as_millis() as i128);
    if align == 0 || s.rem_euclid(align) != 0 {
        return Err(format!("start {} is not a multiple of {align} ms", start.0));
    }
    if s > Millis::MAX_EVENT.0 as i128 || s + len <= Millis::MIN_EVENT.0 as i128 {
        return Err(format!("start {} is outside years 0000-9999", start.0));
    }
    Ok(())
}

/// Counted items of one key group: valid ids that hash to it, each once, counts positive, the
/// running total within [`MAX_TOTAL_COUNT`].
fn check_items(items: &[(ItemId, u64)], kg: u32, total: &mut u64) -> Result<(), Problem> {
    for (id, count) in items {
        check_counter_key(id).map_err(|e| format!("item {id:?}: {e}"))?;
        if key_group(route_hash(id)) != kg {
            return Err(format!(
                "item {id:?} belongs to key group {}",
                key_group(route_hash(id))
            ));
        }
        if *count == 0 {
            return Err(format!("item {id:?} has count 0"));
        }
        *total = total
            .checked_add(*count)
            .filter(|t| *t <= MAX_TOTAL_COUNT)
            .ok_or_else(|| format!("counts sum to more than {MAX_TOTAL_COUNT}"))?;
    }
    distinct(items.iter().map(|(id, _)| id.as_str()), |id| {
        format!("item {id:?} is listed twice")
    })
}

fn check_published(p: &PublishedState, windows: &[WindowSpec]) -> Result<(), Problem> {
    check_instance(p.instance, windows)?;
    if p.revision == u32::MAX {
        return Err(format!("revision {} leaves no room for the next", p.revision));
    }
    let Some((_, items)) = &p.published else {
        return match p.revision {
            0 => Ok(()),
            r => Err(format!("revision {r} without a published list")),
        };
    };
    if p.revision == 0 {
        return Err("a published list at revision 0".into());
    }
    let k = windows[p.instance.window.0 as usize].k;
    if items.len() > k {
        return Err(format!("{} items published, K is {k}", items.len()));
    }
    check_ranked(items)
}

/// A published list: valid ids, positive counts, strictly in ranking order (so each id once).
/// (Also the sketches' candidate lists, `sketch/snapshot.rs`.)
pub(crate) fn check_ranked(items: &[RankedItem]) -> Result<(), Problem> {
    for r in items {
        check_item_id(&r.item_id).map_err(|e| format!("item {:?}: {e}", r.item_id))?;
        if r.count == 0 {
            return Err(format!("item {:?} has count 0", r.item_id));
        }
    }
    distinct(items.iter().map(|r| r.item_id.as_str()), |id| {
        format!("item {id:?} is listed twice")
    })?;
    match items.windows(2).find(|w| ranked_cmp(&w[0], &w[1]) != Ordering::Less) {
        Some(w) => Err(format!(
            "items {:?} and {:?} are out of rank order",
            w[0].item_id, w[1].item_id
        )),
        None => Ok(()),
    }
}

/// `Err(twice(x))` for the first value that occurs twice.
fn distinct<T: Ord + Copy>(values: impl Iterator<Item = T>, twice: impl FnOnce(T) -> Problem) -> Result<(), Problem> {
    let mut sorted: Vec<T> = values.collect();
    sorted.sort_unstable();
    match sorted.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(twice(w[0])),
        None => Ok(()),
    }
}

/// `window 2 at 1713462000000` — ids, not names: the point is that they may not exist.
fn instance_name(key: &InstanceKey) -> String {
    format!("window id {} at {}", key.window.0, key.start.0)
}

#[cfg(test)]
mod tests;

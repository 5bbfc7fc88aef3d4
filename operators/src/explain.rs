//! `hotlist explain`: what one item's count in one sealed window instance is made of, tallied
//! from the instance's events as a replay reads them again (the reading is in
//! `dataflow/src/source/replay.rs`; this is the arithmetic, with no I/O).
//!
//! The rules are the counters': an event counts in the instance when its time is in it and its
//! partition's watermark before it had not passed the instance's end + allowed lateness
//! ([`counts_in`]); a per-group window counts it in its group's list when the group is one of
//! the instance's `max_groups` lowest key hashes, else in `(other)`; a distinct-user window
//! counts the item's distinct users (an event without a user counts nowhere).

use crate::group::{GroupKey, InstanceGroups};
use crate::hash::item_hash;
use crate::record::{DeadReason, PartitionId, TimedEvent};
use crate::replay::counts_in;
use crate::time::{Millis, Span};
use crate::window::WindowSpec;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How many users [`Explanation::top_users`] names.
pub const TOP_USERS: usize = 5;

/// Most distinct users of the item kept per group (beyond: `distinct_users` is a lower bound
/// and says so): bounds explain's memory whatever the input.
pub const MAX_USERS: usize = 10_000_000;

/// One item's events in one group of the instance.
#[derive(Debug, Default)]
struct GroupTally {
    /// Events counted, per partition.
    events: BTreeMap<PartitionId, u64>,
    /// Distinct users counted, per partition (distinct-user windows).
    users_by_partition: BTreeMap<PartitionId, BTreeSet<u64>>,
    /// Events counted per user.
    users: HashMap<String, u64>,
    /// Events counted although their partition's watermark had passed the instance's end.
    late_accepted: u64,
    /// Users beyond [`MAX_USERS`] were not kept.
    users_capped: bool,
}

impl GroupTally {
    fn add(&mut self, other: GroupTally) {
        for (p, n) in other.events {
            *self.events.entry(p).or_default() += n;
        }
        for (p, u) in other.users_by_partition {
            self.users_by_partition.entry(p).or_default().extend(u);
        }
        for (u, n) in other.users {
            *self.users.entry(u).or_default() += n;
        }
        self.late_accepted += other.late_accepted;
        self.users_capped |= other.users_capped;
    }
}

/// Tallies one item's events of one instance.
pub struct Explainer {
    window: WindowSpec,
    start: Millis,
    end: Millis,
    lateness: Span,
    item: String,
    /// Per-group windows: the instance's groups, and which keep a list of their own.
    groups_seen: InstanceGroups,
    /// The item's tallies per group key (`""` for a global window).
    groups: BTreeMap<String, GroupTally>,
}

/// What explain prints (besides what the store holds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The item's count as the job seals it: events, or distinct users.
    pub count: u64,
    /// Its count per input partition (distinct-user windows: the distinct users of each
    /// partition's events, which may add up to more than `count`).
    pub by_partition: BTreeMap<u32, u64>,
    /// Counted events read after their partition's watermark had passed the instance's end
    /// (within the allowed lateness): late but accepted, each a correction of the closed list.
    pub late_accepted: u64,
    /// Distinct users among the counted events (`None` when the job maps no user field).
    pub distinct_users: Option<u64>,
    /// The users with the most counted events, most first (then by name), at most
    /// [`TOP_USERS`].
    pub top_users: Vec<(String, u64)>,
    /// Whether `distinct_users` is a lower bound (more than [`MAX_USERS`] users).
    pub users_capped: bool,
}

impl Explainer {
    /// An explainer of `item` in `window`'s instance starting at `start`.
    pub fn new(window: WindowSpec, start: Millis, lateness: Span, item: &str) -> Explainer {
        let end = window.end_of(start);
        Explainer {
            groups_seen: InstanceGroups::new(window.key.max_groups),
            window,
            start,
            end,
            lateness,
            item: item.to_string(),
            groups: BTreeMap::new(),
        }
    }

    /// Takes one event as the replay read it; `group` is the key of the group it counts in
    /// under the window's `by` (`""` for a global window; `None` when it counts in no group: a
    /// distinct-user window's event without a user).
    pub fn event(&mut self, e: &TimedEvent, group: Option<&str>) {
        let Some(group) = group else { return };
        let in_instance = e.ts >= self.start && e.ts < self.end;
        if !in_instance {
            return;
        }
        let counts = counts_in(&self.window, self.start, self.lateness, e.ts, e.wm_before);
        if counts && !self.window.key.by.is_empty() {
            self.groups_seen.insert(item_hash(group));
        }
        if e.item() != self.item {
            return;
        }
        if !counts {
            return; // a dead letter the store has (`dropped_from`)
        }
        let t = self.groups.entry(group.to_string()).or_default();
        *t.events.entry(e.partition).or_default() += 1;
        if e.wm_before >= self.end {
            t.late_accepted += 1;
        }
        if let Some(user) = e.text.user() {
            if t.users.len() < MAX_USERS || t.users.contains_key(user) {
                *t.users.entry(user.to_string()).or_default() += 1;
                t.users_by_partition
                    .entry(e.partition)
                    .or_default()
                    .insert(item_hash(user));
            } else {
                t.users_capped = true;
            }
        }
    }

    /// Whether an event of group `event_group` (its key under the window's `by`) counts in
    /// `list`'s list, by the instance's groups seen so far (all of them once the instance's
    /// events are read): its own group's, when that is one of the `max_groups` lowest hashes,
    /// else `(other)`'s. A global window has one list.
    pub fn in_list(&self, event_group: &str, list: &GroupKey) -> bool {
        if self.window.key.by.is_empty() {
            return true;
        }
        let admitted = self.groups_seen.admits(item_hash(event_group));
        if list.is_other() {
            !admitted
        } else {
            admitted && event_group == list.as_str()
        }
    }

    /// The explanation of the item in `group`'s list (a global window: [`GroupKey::global`]);
    /// `user_mapped`: whether the job reads a user field.
    pub fn finish(mut self, group: &GroupKey, user_mapped: bool) -> Explanation {
        let per_group = !self.window.key.by.is_empty();
        let admitted = |g: &str, seen: &InstanceGroups| seen.admits(item_hash(g));
        let mut t = GroupTally::default();
        if !per_group {
            t = self.groups.remove("").unwrap_or_default();
        } else if group.is_other() {
            for (g, tally) in std::mem::take(&mut self.groups) {
                if !admitted(&g, &self.groups_seen) {
                    t.add(tally);
                }
            }
        } else if admitted(group.as_str(), &self.groups_seen) {
            t = self.groups.remove(group.as_str()).unwrap_or_default();
        }
        let distinct = self.window.key.distinct_users;
        let count = if distinct {
            t.users.len() as u64
        } else {
            t.events.values().sum()
        };
        let by_partition = if distinct {
            t.users_by_partition
                .iter()
                .map(|(p, u)| (p.0, u.len() as u64))
                .collect()
        } else {
            t.events.iter().map(|(p, n)| (p.0, *n)).collect()
        };
        let mut top: Vec<(String, u64)> = t.users.into_iter().collect();
        top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let distinct_users = user_mapped.then_some(top.len() as u64);
        top.truncate(TOP_USERS);
        Explanation {
            count,
            by_partition,
            late_accepted: t.late_accepted,
            distinct_users,
            top_users: top,
            users_capped: t.users_capped,
        }
    }
}

/// Whether a dead letter of an event in the instance `[.., end)` of window `window` says the
/// event was dropped from it: a `late` letter naming the window whose partition watermark had
/// reached `end + lateness` (the lateness rule), or a `sealed` one whose global watermark had
/// (the instance was sealed). `detail` is the letter's, as the source and the counters word it.
pub fn dropped_from(reason: DeadReason, detail: &str, window: &str, end: Millis, lateness: Span) -> bool {
    let sealed_at = end.plus(lateness);
    let watermark = |text: &str| {
        let t = text.split(" (").next().unwrap_or(text).trim();
        Millis::parse_user(t)
    };
    match reason {
        DeadReason::Late => {
            let Some(rest) = detail.strip_prefix("late for window(s) ") else {
                return false;
            };
            let Some((names, rest)) = rest.split_once(": partition watermark was ") else {
                return false;
            };
            names.split(',').any(|n| n == window) && watermark(rest).is_some_and(|wm| wm >= sealed_at)
        }
        DeadReason::Sealed => detail
            .strip_prefix("window already sealed at watermark ")
            .and_then(watermark)
            .is_some_and(|wm| wm >= sealed_at),
        _ => false,
    }
}

#[cfg(test)]
mod tests;

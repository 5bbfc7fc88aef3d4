//! Trend windows (`rank_by = "trend"`, see `crate::trend`): their lists, and the state their
//! baselines read.
//!
//! A trend window is tumbling, so each of its instances is exactly one pane of its pane group
//! (the group's width is the window's size). Its baseline is therefore the panes of the `W`
//! instances before: the counter keeps a trend window's panes `W` instances longer than it
//! would (`retention`), and the late-event exclusions of its sealed instances as long
//! (`WindowedCounter::trend_exclusions`), so an item's history is read from the panes like any
//! count. Panes and exclusions are in snapshots already, so baselines survive a restore onto any
//! worker count. An instance before the job's first event has no pane: it counts 0.
//!
//! A trend list is always recounted (a score can fall when a late event raises the baseline,
//! so the incremental argument of `emit` does not hold), and an open instance's list is dirty
//! when a pane of its baseline changed, so a late event in an earlier instance revises it.

use super::{Counter, FxMap, Pane, WindowedCounter};
use crate::group::GroupKey;
use crate::hash::item_hash;
use crate::record::RankedItem;
use crate::time::{Millis, Span};
use crate::trend::{trend_lists, TrendRule};
use crate::window::{InstanceKey, WindowSpec};

/// How much longer than its instances a window's panes are kept: `W` instances for a trend
/// window (its later instances' baselines read them), none otherwise.
pub(super) fn retention(w: &WindowSpec) -> Span {
    match w.rank.trend() {
        Some(rule) => Span::from_millis(w.size.as_millis().saturating_mul(u64::from(rule.baseline))),
        None => Span::ZERO,
    }
}

/// One instance of a baseline: its pane (`None`: it had no events) and its exclusions.
type Before<'a> = (Option<&'a Pane>, Option<&'a FxMap<Counter, u64>>);

impl WindowedCounter {
    /// The lists of trend window instance `key`: every key of the instance scored against its
    /// baseline (see `crate::trend::trend_lists`), plus an empty list per group listed before
    /// that has nothing ranking now.
    pub(super) fn trend_top_k(&mut self, key: InstanceKey, rule: TrendRule) -> Vec<(GroupKey, Vec<RankedItem>)> {
        self.emits.1 += 1;
        let g = self.group_of(key.window);
        self.groups[g].settle(); // (`history` looks counters up in the baseline's panes)
        let shape = self.shapes.of_window(key.window.0 as usize);
        let k = self.windows[key.window.0 as usize].k;
        let mut candidates = self.full_candidates(key, g);
        if self.groups[g].shapes.len() > 1 {
            candidates.retain(|(_, c)| self.shape_of(*c) == shape);
        }
        let admission = self.admission.get(&key);
        // a key below min_count cannot rank unless its group folds into (other) with others
        let folds = admission.is_some_and(|a| a.folded() > 0);
        let before = self.baseline(key, rule.baseline);
        // (a numbered counter's key text is written out: see `counter_text`)
        let kept: Vec<(u64, Counter)> = candidates
            .into_iter()
            .filter(|(n, _)| folds || *n >= rule.min_count)
            .collect();
        let texts: Vec<std::borrow::Cow<'_, str>> = kept.iter().map(|(_, c)| self.counter_text(*c)).collect();
        let keys = texts
            .iter()
            .zip(&kept)
            .map(|(key, &(n, c))| (key.as_ref(), n, self.history(g, &before, c)));
        let mut lists = trend_lists(keys, shape == 0, rule, k, |group| {
            admission.is_none_or(|a| a.admits(item_hash(group)))
        });
        if shape != 0 {
            self.withdraw_gone(key, &mut lists);
        }
        lists
    }

    /// The instances before trend instance `key` that its baseline sums, oldest first: each
    /// one's pane (`None`: it has none, no events) and its exclusions.
    fn baseline(&self, key: InstanceKey, w: u32) -> Vec<Before<'_>> {
        let size = self.windows[key.window.0 as usize].size.as_i64();
        let g = self.group_of(key.window);
        let group = &self.groups[g];
        let width = group.width.as_i64();
        (1..=i64::from(w))
            .rev()
            .map(|j| {
                let start = Millis(key.start.0.saturating_sub(j.saturating_mul(size)));
                let pane = group
                    .index
                    .get(&start.0.div_euclid(width))
                    .and_then(|&s| group.slots[s].as_ref());
                let before = InstanceKey {
                    window: key.window,
                    start,
                };
                let excluded = match self.instances.get(&before) {
                    Some(inst) => Some(&inst.exclusions),
                    None => self.trend_exclusions.get(&before),
                };
                (pane, excluded)
            })
            .collect()
    }

    /// Counter `c`'s counts in the baseline instances `before`, oldest first.
    fn history(&self, g: usize, before: &[Before<'_>], c: Counter) -> Vec<u64> {
        before
            .iter()
            .map(|(pane, excluded)| {
                let counted = pane.map_or(0, |p| self.count_in(g, p, c));
                counted.saturating_sub(excluded.and_then(|x| x.get(&c)).copied().unwrap_or(0))
            })
            .collect()
    }

    /// Whether a pane in the baseline of trend instance `key` changed after apply sequence
    /// `since` (a late event in an earlier instance: the list must be revised).
    pub(super) fn baseline_changed(&self, key: InstanceKey, since: u64) -> bool {
        let Some(rule) = self.windows[key.window.0 as usize].rank.trend() else {
            return false;
        };
        self.baseline(key, rule.baseline)
            .iter()
            .any(|(p, _)| p.is_some_and(|p| p.touched > since))
    }

    /// Frees the exclusions of sealed trend instances that no baseline reads any more (those
    /// whose retention ended by horizon `sealed_h`).
    pub(super) fn free_trend_exclusions(&mut self, sealed_h: Millis) {
        let windows = &self.windows;
        self.trend_exclusions.retain(|key, _| {
            windows[key.window.0 as usize]
                .end_of(key.start)
                .plus(retention(&windows[key.window.0 as usize]))
                > sealed_h
        });
    }
}

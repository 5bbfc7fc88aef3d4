//! The global list merger: per-worker lists in, published revisions out.
//!
//! Runs on one worker. Each worker sends its exact local top-K for an instance whenever it
//! changed (at a tick, on close, on a correction, on seal); the merger keeps the latest list
//! per worker and, at the end of each epoch, merges them (exact: items are disjoint across
//! workers) and publishes a new revision when the list or the instance's state changed.
//! Sealed instances are published with state `Final` once and then forgotten.

use crate::counting::Counting;
use crate::group::GroupKey;
use crate::record::{ListSource, ListState, LocalList, PublishedList, RankedItem, SketchCheck};
use crate::snapshot::{MergerSnapshot, PublishedState, SnapshotError};
use crate::time::{Millis, Span};
use crate::topk::merge_top_k;
use crate::window::{list_state, InstanceKey, WindowSpec};
use std::collections::BTreeMap;

mod overflow;

#[derive(Default)]
struct Merging {
    /// A group beyond its window's `max_groups`: folded into `(other)`, not published.
    overflow: bool,
    /// For the `(other)` group: the fold of the overflow groups (list, error bound).
    folded: Option<(Vec<RankedItem>, u64)>,
    /// Each worker's latest list from its exact pane counter.
    locals: BTreeMap<u32, Vec<RankedItem>>,
    /// Each worker's latest list from its sketch counter, with its events and exactness.
    sketch_locals: BTreeMap<u32, (Vec<RankedItem>, u64, bool)>,
    changed: bool,
    published: Option<(ListState, Vec<RankedItem>)>,
    /// Whether the last published list was approximate (not in snapshots; see `with_counting`).
    published_approximate: bool,
    revision: u32,
}

/// The merger.
pub struct ListMerger {
    windows: Vec<WindowSpec>,
    /// How each window counts (all exact unless [`with_counting`](Self::with_counting) says).
    counting: Vec<Counting>,
    allowed_lateness: Span,
    /// Per instance and group (global lists: group `""`).
    instances: BTreeMap<(InstanceKey, GroupKey), Merging>,
}

impl ListMerger {
    /// A merger for the job's windows.
    pub fn new(windows: Vec<WindowSpec>, allowed_lateness: Span) -> ListMerger {
        ListMerger {
            counting: vec![Counting::Exact; windows.len()],
            windows,
            allowed_lateness,
            instances: BTreeMap::new(),
        }
    }

    /// This merger with each window's counting (in window order; missing ones count exactly).
    pub fn with_counting(mut self, counting: &[Counting]) -> ListMerger {
        for (mine, c) in self.counting.iter_mut().zip(counting) {
            *mine = *c;
        }
        // restored instances of sketch windows published approximate lists (an `auto` one that
        // was exact and folds says so at its next change)
        for ((key, _), m) in self.instances.iter_mut() {
            let publishes_sketch = self.counting[key.window.0 as usize].publishes_sketch();
            m.published_approximate |= publishes_sketch && m.published.is_some();
        }
        self
    }

    /// Takes a worker's latest list for an instance.
    pub fn receive(&mut self, list: LocalList) {
        let m = self.instances.entry((list.instance, list.group)).or_default();
        match list.source {
            ListSource::PaneCounter => {
                m.locals.insert(list.worker, list.items);
            }
            ListSource::SketchCounter { events, exact } => {
                m.sketch_locals.insert(list.worker, (list.items, events, exact));
            }
        }
        m.changed = true;
    }

    /// Ends an epoch at global watermark `wm`: publishes what changed, forgets sealed instances.
    pub fn advance(&mut self, wm: Millis, as_of: Millis) -> Vec<PublishedList> {
        self.fold_overflow();
        let mut out = Vec::new();
        self.instances.retain(|(key, group), m| {
            let spec = &self.windows[key.window.0 as usize];
            let end = spec.end_of(key.start);
            let state = list_state(end, wm, self.allowed_lateness);
            let state_changed = m.published.as_ref().map(|p| p.0) != Some(state);
            if (m.changed || state_changed) && !m.overflow {
                m.changed = false;
                let Merged {
                    items,
                    exact,
                    error_bound,
                    sketch_check,
                } = match &m.folded {
                    Some((items, bound)) => Merged {
                        items: items.clone(),
                        exact: false,
                        error_bound: *bound,
                        sketch_check: None,
                    },
                    None => merged(m, &self.counting[key.window.0 as usize], spec.k),
                };
                // An instance whose every event was excluded as late has no list at all.
                let never_counted = items.is_empty() && m.published.is_none();
                let turned_approximate = !exact && !m.published_approximate;
                let differs =
                    turned_approximate || m.published.as_ref().is_none_or(|(s, l)| *s != state || *l != items);
                let differs = differs && !never_counted;
                if differs {
                    m.revision = m.revision.saturating_add(1);
                    out.push(PublishedList {
                        window: spec.name.clone(),
                        start: key.start,
                        end,
                        group: group.clone(),
                        revision: m.revision,
                        state,
                        watermark: wm,
                        as_of,
                        items: items.clone(),
                        exact,
                        error_bound,
                        sketch_check,
                    });
                    m.published = Some((state, items));
                    m.published_approximate = !exact;
                }
            }
            state != ListState::Final
        });
        out
    }

    /// Folds the groups beyond each per-group instance's `max_groups` into its `(other)` group
    /// (see `merge/overflow.rs`), when any of them changed.
    fn fold_overflow(&mut self) {
        let mut per_instance: BTreeMap<InstanceKey, Vec<&GroupKey>> = BTreeMap::new();
        for (key, group) in self.instances.keys() {
            if !group.is_global() && group.as_str() != crate::group::OTHER_GROUP {
                per_instance.entry(*key).or_default().push(group);
            }
        }
        let mut folds: Vec<(InstanceKey, Vec<GroupKey>)> = Vec::new();
        for (key, groups) in per_instance {
            let max = self.windows[key.window.0 as usize].key.max_groups as usize;
            let over = overflow::overflowing(&groups, max);
            if !over.is_empty() {
                folds.push((key, over));
            }
        }
        for (key, over) in folds {
            let k = self.windows[key.window.0 as usize].k;
            let mut changed = false;
            let mut lists = Vec::with_capacity(over.len());
            for g in &over {
                if let Some(m) = self.instances.get_mut(&(key, g.clone())) {
                    changed |= m.changed || !m.overflow;
                    m.overflow = true;
                    m.changed = false;
                    lists.push(merge_top_k(m.locals.values().map(|v| v.as_slice()), k));
                }
            }
            let other = self.instances.entry((key, GroupKey::other())).or_default();
            if changed || other.folded.is_none() {
                other.folded = Some(overflow::fold(&lists, k));
                other.changed = true;
            }
        }
    }

    /// Per window, the most groups folded into `(other)` in one live instance.
    pub fn overflow_groups(&self) -> BTreeMap<String, u64> {
        let mut per: BTreeMap<InstanceKey, u64> = BTreeMap::new();
        for ((key, _), m) in &self.instances {
            *per.entry(*key).or_default() += u64::from(m.overflow);
        }
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (key, n) in per {
            let e = out.entry(self.windows[key.window.0 as usize].name.clone()).or_default();
            *e = (*e).max(n);
        }
        out
    }

    /// What was published per live instance (call between epochs).
    pub fn snapshot(&self) -> MergerSnapshot {
        MergerSnapshot {
            instances: self
                .instances
                .iter()
                .map(|((k, group), m)| PublishedState {
                    instance: *k,
                    group: group.clone(),
                    revision: m.revision,
                    published: m.published.clone(),
                })
                .collect(),
        }
    }

    /// A merger that continues from a snapshot, once it is checked against the job's windows
    /// (`MergerSnapshot::validate`). Its per-worker lists start empty: restored counters send
    /// all of theirs in their first epoch, before anything is published.
    pub fn try_restore(
        windows: Vec<WindowSpec>,
        allowed_lateness: Span,
        s: &MergerSnapshot,
    ) -> Result<ListMerger, SnapshotError> {
        s.validate(&windows)?;
        Ok(ListMerger::restore(windows, allowed_lateness, s))
    }

    /// Like [`try_restore`](Self::try_restore) without the check: for a snapshot validated
    /// already. It still never panics: instances of windows the job does not have are skipped.
    pub fn restore(windows: Vec<WindowSpec>, allowed_lateness: Span, s: &MergerSnapshot) -> ListMerger {
        let mut m = ListMerger::new(windows, allowed_lateness);
        for p in s
            .instances
            .iter()
            .filter(|p| (p.instance.window.0 as usize) < m.windows.len())
        {
            m.instances.insert(
                (p.instance, p.group.clone()),
                Merging {
                    overflow: false,
                    folded: None,
                    locals: BTreeMap::new(),
                    sketch_locals: BTreeMap::new(),
                    published_approximate: false,
                    changed: false,
                    published: p.published.clone(),
                    revision: p.revision,
                },
            );
        }
        m
    }

    /// Instances being merged (not yet sealed).
    pub fn live_instances(&self) -> usize {
        self.instances.len()
    }
}

/// An instance's list as the merger publishes it.
struct Merged {
    items: Vec<RankedItem>,
    exact: bool,
    error_bound: u64,
    sketch_check: Option<SketchCheck>,
}

/// The global list of an instance from its workers' latest lists: the exact counters' (exact
/// and `both` windows, the latter with the sketch's list compared) or the sketch counters'
/// (`sketch` and `auto`: exact only while no worker's instance folded; the bound from the
/// instance's events N, summed over workers). Items are disjoint across workers.
fn merged(m: &Merging, counting: &Counting, k: usize) -> Merged {
    let exact_list = || merge_top_k(m.locals.values().map(|v| v.as_slice()), k);
    let sketch_list = || merge_top_k(m.sketch_locals.values().map(|v| v.0.as_slice()), k);
    match (counting.publishes_sketch(), counting.sketch()) {
        (true, Some(spec)) => {
            let exact = m.sketch_locals.values().all(|v| v.2);
            let events = m.sketch_locals.values().map(|v| v.1).fold(0, u64::saturating_add);
            Merged {
                items: sketch_list(),
                exact,
                error_bound: if exact { 0 } else { spec.error_bound(events) },
                sketch_check: None,
            }
        }
        _ => {
            let items = exact_list();
            let sketch_check = (counting.sketch().is_some() && !m.sketch_locals.is_empty())
                .then(|| sketch_check(&items, &sketch_list()));
            Merged {
                items,
                exact: true,
                error_bound: 0,
                sketch_check,
            }
        }
    }
}

/// How a sketch's top-K compares with the exact top-K of the same instance: how many of the
/// exact items it found, and its over-counts on the items in both lists (the only ones whose
/// exact count the merger knows).
pub fn sketch_check(exact: &[RankedItem], sketch: &[RankedItem]) -> SketchCheck {
    let exact_counts: BTreeMap<&str, u64> = exact.iter().map(|r| (r.item_id.as_str(), r.count)).collect();
    let mut check = SketchCheck {
        of: exact.len() as u32, // ≤ k ≤ MAX_K
        ..SketchCheck::default()
    };
    for r in sketch {
        if let Some(c) = exact_counts.get(r.item_id.as_str()) {
            check.found += 1;
            let over = r.count.saturating_sub(*c);
            check.max_overcount = check.max_overcount.max(over);
            check.total_overcount = check.total_overcount.saturating_add(over);
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::GroupKey;
    use crate::window::WindowId;

    fn local(worker: u32, start: i64, items: &[(&str, u64)]) -> LocalList {
        LocalList {
            group: Default::default(),
            instance: InstanceKey {
                window: WindowId(0),
                start: Millis(start),
            },
            worker,
            items: items
                .iter()
                .map(|(i, c)| RankedItem {
                    item_id: (*i).into(),
                    count: *c,
                })
                .collect(),
            source: ListSource::PaneCounter,
        }
    }

    /// Groups beyond `max_groups` are folded into `(other)`: approximate, with its bound; the
    /// kept groups are the lowest hashes whatever order the lists came in.
    #[test]
    fn overflow_groups_fold_into_other() {
        let mut w = WindowSpec::tumbling("t", Span::from_millis(10), 2);
        w.key.by = vec!["c".to_string()];
        w.key.max_groups = 2;
        let groups: Vec<GroupKey> = ["x", "y", "z"]
            .iter()
            .map(|v| GroupKey::from_pairs([("c", *v)]))
            .collect();
        let publish = |order: &[usize]| {
            let mut m = ListMerger::new(vec![w.clone()], Span::ZERO);
            for &g in order {
                let mut l = local(g as u32 % 2, 0, &[("a", 3 + g as u64), ("b", 2), ("c", 1)]);
                l.group = groups[g].clone();
                m.receive(l);
            }
            let out = m.advance(Millis(5), Millis(0));
            (out, m.overflow_groups())
        };
        let (out, overflow) = publish(&[0, 1, 2]);
        assert_eq!(publish(&[2, 0, 1]).0, out);
        assert_eq!(overflow.get("t"), Some(&1));
        let published: Vec<&str> = out.iter().map(|l| l.group.as_str()).collect();
        assert_eq!(published.len(), 3, "{published:?}");
        let other = out
            .iter()
            .find(|l| l.group == GroupKey::other())
            .expect("an (other) list");
        // one group folded: its own top-2 exactly, bound = its 2nd count
        assert_eq!(
            (other.exact, other.error_bound, other.state),
            (false, 2, ListState::Open)
        );
        assert_eq!(other.items.len(), 2);
        assert!(out
            .iter()
            .filter(|l| !l.group.is_global() && l.group != GroupKey::other())
            .all(|l| l.exact));
    }

    #[test]
    fn merges_publishes_revisions_and_seals() {
        let w = WindowSpec::tumbling("t", Span::from_millis(10), 2);
        let mut m = ListMerger::new(vec![w], Span::from_millis(5));
        m.receive(local(0, 0, &[("a", 3)]));
        m.receive(local(1, 0, &[("b", 5), ("c", 1)]));
        let out = m.advance(Millis(1), Millis(0));
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].revision, out[0].state), (1, ListState::Open));
        assert_eq!(
            out[0].items.iter().map(|r| r.item_id.as_str()).collect::<Vec<_>>(),
            ["b", "a"]
        );
        // the same list again: no new revision
        m.receive(local(1, 0, &[("b", 5), ("c", 1)]));
        assert!(m.advance(Millis(2), Millis(0)).is_empty());
        // closing publishes a closed revision even without new data
        let out = m.advance(Millis(10), Millis(0));
        assert_eq!((out[0].revision, out[0].state), (2, ListState::Closed));
        // a correction that does not change the top-2 publishes nothing
        m.receive(local(1, 0, &[("b", 5), ("c", 2)]));
        assert!(m.advance(Millis(11), Millis(0)).is_empty());
        // one that does: a new revision
        m.receive(local(1, 0, &[("b", 5), ("c", 4)]));
        let out = m.advance(Millis(12), Millis(0));
        assert_eq!(out[0].revision, 3);
        assert_eq!(out[0].items[1].item_id, "c");
        // sealed: final revision, then forgotten
        let out = m.advance(Millis(15), Millis(0));
        assert_eq!((out[0].revision, out[0].state), (4, ListState::Final));
        assert_eq!(m.live_instances(), 0);
    }
}

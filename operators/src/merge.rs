//! The global list merger: per-worker lists in, published revisions out.
//!
//! Runs on one worker. Each worker sends its exact local top-K for an instance whenever it
//! changed (at a tick, on close, on a correction, on seal); the merger keeps the latest list
//! per worker and, at the end of each epoch, merges them (exact: items are disjoint across
//! workers) and publishes a new revision when the list or the instance's state changed.
//! Sealed instances are published with state `Final` once and then forgotten.

use crate::certify::first_threshold;
use crate::counting::Counting;
use crate::group::GroupKey;
use crate::message::{LocalList, PublishedList, Share};
use crate::record::{ListSource, ListState, RankedItem, SketchCheck};
use crate::sketch::CountMinSketch;
use crate::snapshot::{MergerSnapshot, PublishedState, SnapshotError};
use crate::time::{Millis, Span};
use crate::topk::merge_top_k;
use crate::window::{list_state, InstanceKey, WindowSpec};
use std::collections::BTreeMap;

#[derive(Default)]
struct Merging {
    /// Each worker's latest list from its exact pane counter.
    locals: BTreeMap<u32, Vec<RankedItem>>,
    /// Each worker's latest list from its sketch counter, with its events and exactness.
    sketch_locals: BTreeMap<u32, (Vec<RankedItem>, u64, bool)>,
    changed: bool,
    published: Option<(ListState, Vec<RankedItem>)>,
    /// Whether the last published list was approximate (not in snapshots; see `with_counting`).
    published_approximate: bool,
    revision: u32,
    /// `exact_at_seal`: the workers' shares of the instance's table, summed as they arrive.
    share: Option<CountMinSketch>,
    /// `exact_at_seal`: exact places' (item hash, events), added into `share` if it is replayed.
    share_items: Vec<(u64, u64)>,
}

impl Merging {
    /// The sum of the workers' shares, exact places' counts added in (`None`: no worker sent a
    /// table, so no replay can be guided).
    fn sealed_table(&mut self) -> Option<CountMinSketch> {
        let mut table = self.share.take()?;
        for (hash, mut n) in std::mem::take(&mut self.share_items) {
            while n > 0 {
                let step = n.min(u64::from(u32::MAX));
                table.add(hash, step as u32);
                n -= step;
            }
        }
        Some(table)
    }
}

/// The merger.
pub struct ListMerger {
    windows: Vec<WindowSpec>,
    /// How each window counts (all exact unless [`with_counting`](Self::with_counting) says).
    counting: Vec<Counting>,
    allowed_lateness: Span,
    /// Per instance and group (global lists: group `""`).
    instances: BTreeMap<(InstanceKey, GroupKey), Merging>,
    /// Instances of `exact_at_seal` windows sealed with an approximate list, until taken.
    sealed: Vec<SealedSketch>,
}

/// A sealed instance of an `exact_at_seal` window whose final list is approximate: where its
/// replay starts from (`replay.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedSketch {
    /// The instance.
    pub instance: InstanceKey,
    /// The list's group (a global list's: `""`).
    pub group: GroupKey,
    /// Per-group windows: the groups with a list of their own are those whose key hash is at
    /// most this (`None`: every group; see `replay::ReplayJob`).
    pub admit_up_to: Option<u64>,
    /// Its window's name.
    pub window: String,
    /// Instance start and end.
    pub start: Millis,
    /// Instance end.
    pub end: Millis,
    /// The list length.
    pub k: usize,
    /// The approximate final list's revision.
    pub revision: u32,
    /// The global watermark it sealed at.
    pub watermark: Millis,
    /// The first pass's threshold: the final list's K-th count minus its error bound.
    pub threshold: u64,
    /// The sum of the workers' shares (`None`: none arrived, so no replay can be guided).
    pub sketch: Option<CountMinSketch>,
}

impl ListMerger {
    /// A merger for the job's windows.
    pub fn new(windows: Vec<WindowSpec>, allowed_lateness: Span) -> ListMerger {
        ListMerger {
            counting: vec![Counting::Exact; windows.len()],
            windows,
            allowed_lateness,
            instances: BTreeMap::new(),
            sealed: Vec::new(),
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
        match list.share.map(|s| *s) {
            Some(Share::Table(share)) => match &mut m.share {
                None => m.share = Some(share),
                // shapes are the window's on every worker; a mismatch keeps the larger counts
                Some(sum) => {
                    if sum.merge(&share).is_err() && share.total() > sum.total() {
                        *sum = share;
                    }
                }
            },
            Some(Share::Items(items)) => m.share_items.extend(items),
            None => {}
        }
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
        let mut out = Vec::new();
        let sealed_before = self.sealed.len();
        // per sealing instance of a per-group window: the highest admitted group hash, and
        // whether `(other)` has events (see `admit_up_to`)
        let mut admitted: BTreeMap<InstanceKey, (u64, bool)> = BTreeMap::new();
        self.instances.retain(|(key, group), m| {
            let spec = &self.windows[key.window.0 as usize];
            let end = spec.end_of(key.start);
            let state = list_state(end, wm, self.allowed_lateness);
            let state_changed = m.published.as_ref().map(|p| p.0) != Some(state);
            if m.changed || state_changed {
                m.changed = false;
                let Merged {
                    items,
                    exact,
                    error_bound,
                    sketch_check,
                } = merged(m, &self.counting[key.window.0 as usize], spec);
                // An instance whose every event was excluded as late has no list at all. A
                // group that went to `(other)` after it was published (its workers withdrew it
                // with empty lists; see `group::admission`) is published empty, and sealed so.
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
                        certificate: None,
                    });
                    m.published = Some((state, items));
                    m.published_approximate = !exact;
                }
            }
            let counting = &self.counting[key.window.0 as usize];
            let non_empty = m.published.as_ref().is_some_and(|p| !p.1.is_empty());
            if state == ListState::Final && !spec.key.by.is_empty() && non_empty {
                let a = admitted.entry(*key).or_insert((0, false));
                if group.is_other() {
                    a.1 = true;
                } else {
                    a.0 = a.0.max(crate::hash::item_hash(group.as_str()));
                }
            }
            if state == ListState::Final && counting.exact_at_seal() && m.published_approximate {
                let items = m.published.as_ref().map_or(&[][..], |p| p.1.as_slice());
                let counts: Vec<u64> = items.iter().map(|r| r.count).collect();
                let events = m.sketch_locals.values().map(|v| v.1).fold(0, u64::saturating_add);
                let bound = counting.sketch().map_or(0, |s| list_bound(s, spec, events, items));
                self.sealed.push(SealedSketch {
                    instance: *key,
                    group: group.clone(),
                    admit_up_to: None,
                    window: spec.name.clone(),
                    start: key.start,
                    end,
                    k: spec.k,
                    revision: m.revision,
                    watermark: wm,
                    threshold: first_threshold(&counts, spec.k, bound),
                    sketch: m.sealed_table(),
                });
            }
            state != ListState::Final
        });
        for s in &mut self.sealed[sealed_before..] {
            s.admit_up_to = admitted
                .get(&s.instance)
                .and_then(|(up_to, other)| other.then_some(*up_to));
        }
        out
    }

    /// The instances of `exact_at_seal` windows sealed since the last call whose final list is
    /// approximate: each is replayed to publish it exact.
    pub fn take_sealed(&mut self) -> Vec<SealedSketch> {
        std::mem::take(&mut self.sealed)
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
                    locals: BTreeMap::new(),
                    sketch_locals: BTreeMap::new(),
                    published_approximate: false,
                    changed: false,
                    published: p.published.clone(),
                    revision: p.revision,
                    share: None,
                    share_items: Vec::new(),
                },
            );
        }
        m
    }

    /// The earliest event time an instance that is not sealed at global watermark `wm` can
    /// hold: every instance covering an earlier time has sealed.
    pub fn all_sealed_before(&self, wm: Millis) -> Millis {
        let longest = self.windows.iter().map(|w| w.size).max().unwrap_or(Span::ZERO);
        wm.minus(self.allowed_lateness).minus(longest)
    }

    /// Instances being merged (not yet sealed).
    pub fn live_instances(&self) -> usize {
        self.instances.len()
    }
}

/// The stated error of an approximate list: count-min counts are high by at most
/// ⌈(e/w)·N⌉ (N the list's events); a distinct-user sketch's counts are HyperLogLog estimates,
/// within 2 standard errors (2 × 1.04/√m) of the largest listed count either way (about 95 %
/// of the time; not a hard bound — `exact_at_seal` makes the sealed list exact).
fn list_bound(spec: &crate::counting::SketchSpec, w: &WindowSpec, events: u64, items: &[RankedItem]) -> u64 {
    if w.key.distinct_users {
        let top = items.iter().map(|r| r.count).max().unwrap_or(0);
        (2.0 * crate::sketch::Hll::relative_error() * top as f64).ceil() as u64
    } else {
        spec.error_bound(events)
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
fn merged(m: &Merging, counting: &Counting, spec_w: &WindowSpec) -> Merged {
    let k = spec_w.k;
    let exact_list = || merge_top_k(m.locals.values().map(|v| v.as_slice()), k);
    let sketch_list = || merge_top_k(m.sketch_locals.values().map(|v| v.0.as_slice()), k);
    match (counting.publishes_sketch(), counting.sketch()) {
        (true, Some(spec)) => {
            let exact = m.sketch_locals.values().all(|v| v.2);
            let events = m.sketch_locals.values().map(|v| v.1).fold(0, u64::saturating_add);
            let items = sketch_list();
            Merged {
                error_bound: if exact {
                    0
                } else {
                    list_bound(spec, spec_w, events, &items)
                },
                items,
                exact,
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
                    trend: None,
                })
                .collect(),
            source: ListSource::PaneCounter,
            share: None,
        }
    }

    /// A group its workers withdrew (empty lists: it went to `(other)`) is published empty,
    /// and final so when its instance seals.
    #[test]
    fn withdrawn_groups_are_published_empty() {
        let mut w = WindowSpec::tumbling("t", Span::from_millis(10), 2);
        w.key.by = vec!["c".to_string()];
        let x = GroupKey::from_pairs([("c", "x")]);
        let mut m = ListMerger::new(vec![w], Span::ZERO);
        let mut l = local(0, 0, &[("a", 3)]);
        l.group = x.clone();
        m.receive(l);
        let out = m.advance(Millis(5), Millis(0));
        assert_eq!(out.len(), 1, "published while open");
        let mut gone = local(0, 0, &[]);
        gone.group = x.clone();
        m.receive(gone);
        let mut other = local(0, 0, &[("a", 3)]);
        other.group = GroupKey::other();
        m.receive(other);
        let out = m.advance(Millis(20), Millis(0));
        let groups: Vec<(&str, ListState, usize)> =
            out.iter().map(|l| (l.group.as_str(), l.state, l.items.len())).collect();
        assert_eq!(
            groups,
            vec![("(other)", ListState::Final, 1), ("c=x", ListState::Final, 0)]
        );
        assert_eq!(m.live_instances(), 0, "both forgotten once final");
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

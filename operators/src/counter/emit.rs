//! Emission: an instance's top-K lists, recounted from its panes or built incrementally.
//!
//! Incremental emission: an instance's new top-K from its last list and what changed since.
//!
//! Within an instance an item's count never decreases (a late event excluded from an instance
//! is excluded by the same `apply` that counts it in the pane). So with the instance's last
//! emitted top-K `L` and the set `D` of items whose count in one of its panes changed since,
//! the new top-K is the top-K of `L ∪ D` at their current counts: any other item ranked below
//! the old K-th and did not change (and when `L` was shorter than K, it held every item with a
//! positive count). The cost of an emission follows `|L| + |D|`, not the instance's items.
//!
//! `D` comes from per-pane change logs: `count` appends an item to its pane's log the first
//! time its count there changes in an emit generation (the inline counter remembers the
//! generation in 8 bits of its word; map counts, which are rare, are logged at every change). Each instance keeps,
//! per pane, a cursor into the log. After an emitting `advance` a log is trimmed to the oldest
//! cursor of the instances covering its pane, and after any `advance` a log longer than a cap
//! (twice the pane's counters, plus a margin) is cut: the instances behind the cut recount in
//! full, so a log never outgrows its pane.
//!
//! Per-group windows counting events emit the same way while none of the instance's groups
//! counts in `(other)`: a counter key is then one (group, item), `L` is the keys of every
//! group's last list, and each group's new list is the top-K of its keys in `L ∪ D` (the
//! argument above, per group). `group_lists` builds the lists from those keys as from all.
//!
//! Distinct-user windows (global, or per group under the same no-fold condition) emit the same
//! way over (group, item)s instead of keys: an item's user count in an instance never decreases
//! either (its keys' counts never do), the instance keeps every (group, item)'s user count up to
//! date from its second recount on and logs those that changed (`users`), so `D` is that log,
//! `L` one representative key per listed (group, item), and each candidate's count is read from
//! the user counts (no pane is read). A changed key alone would not do: whether its item gained
//! a user depends on whether the key was already counted in the instance, which `users` tests
//! when the event is counted.
//!
//! A per-group distinct-user instance with groups in `(other)` emits the same way: its
//! admitted groups' lists from their last lists and what changed since (the admitted groups
//! stay the same while the admission state does), `(other)`'s from the user counts per item it
//! keeps (`others`): its last list and the items whose count changed since.
//!
//! Which windows emit incrementally: plain windows; per-group windows counting events while
//! none of the instance's groups counts in `(other)`; distinct-user windows, global or per
//! group, with folds or without. The full recount stays for: an instance's first emission (a
//! user-keyed distinct-user instance's first two: see `remember_users`), every instance after a
//! restore (`force_emit`; user counts are not in snapshots), an instance behind a cut log, an
//! events instance whose changes are not much fewer than its counters (the plain scan is
//! cheaper then), a distinct-user instance's first emission after its admission state changed
//! (a group displaced), and a per-group events instance with a group in `(other)` (a fold moves
//! counts from a group's list to `(other)`'s).

use super::dense::ItemSet;
use super::shapes::group_lists;
use super::users::UserCounts;
use super::{Counter, ItemIdx, Pane, WindowedCounter};
use crate::group::{compose_key, split_key, GroupKey};
use crate::hash::item_hash;
use crate::interner::{in_record_order, Interner};
use crate::record::{ItemId, RankedItem};
use crate::topk::{rank_cmp, select_top_by, select_top_counted};
use crate::window::InstanceKey;
use rustc_hash::{FxHashMap, FxHashSet};

/// What an instance emitted last, for its next incremental emission.
pub(super) struct Emitted {
    /// The counters of its last list, best first.
    items: Vec<Counter>,
    /// Per pane of the instance, in time order: the log entry number read up to.
    pub(super) cursors: Vec<u64>,
}

impl Emitted {
    /// Approximate heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.items.capacity() * 8 + self.cursors.capacity() * 8
    }
}

impl Pane {
    /// The number of the entry after the log's last.
    fn log_end(&self) -> u64 {
        self.log.end()
    }
}

impl WindowedCounter {
    /// This worker's exact top-K lists for an instance: one global list, or one per group
    /// (per-group windows).
    /// (`force`: recount in full.) A sealed instance's list is its last (it is dropped after
    /// it): nothing is kept for a next one, so a window that first emits when it seals, as in a
    /// replay of files, skips building user counts that nothing would read.
    pub(super) fn instance_top_k(&mut self, key: InstanceKey, force: bool) -> Vec<(GroupKey, Vec<RankedItem>)> {
        if let Some(rule) = self.windows[key.window.0 as usize].rank.trend() {
            return self.trend_top_k(key, rule);
        }
        let g_of = self.group_of(key.window);
        let shape = self.shapes.of_window(key.window.0 as usize);
        // (a paired shape's key counts are its items' users already: see `pairs`)
        let distinct = self.shapes.distinct_users(shape) && !self.is_paired(shape);
        let incremental = (!force && self.emits_incrementally(key, shape))
            .then(|| match distinct {
                true => self.user_candidates(key),
                false => self.incremental_candidates(key, g_of),
            })
            .flatten();
        let checking = self.checked && incremental.is_some();
        let incremental_used = incremental.is_some();
        let k = self.windows[key.window.0 as usize].k;
        let mut candidates = match incremental {
            Some(c) => {
                self.emits.0 += 1;
                c
            }
            None => {
                self.emits.1 += 1;
                // (`distinct` is false for a paired distinct-user shape too: its keys count users)
                if shape != 0 && !self.shapes.distinct_users(shape) {
                    if let Some(lists) = self.single_pane_group_lists(key, shape, g_of, k) {
                        return lists;
                    }
                }
                // (only a plain window's list is cut to k here: group lists need every key)
                let top = (shape == 0).then(|| self.top_of_single_pane(key, g_of, k)).flatten();
                top.unwrap_or_else(|| self.full_candidates(key, g_of))
            }
        };
        if self.groups[g_of].shapes.len() > 1 {
            candidates.retain(|(_, c)| self.shape_of(*c) == shape);
        }
        if shape != 0 {
            return self.group_top_k(key, shape, g_of, candidates, checking, distinct && incremental_used);
        }
        let interner = &self.interner;
        select_top_counted(&mut candidates, k, |c| interner.id(c.item()));
        if checking {
            let mut full = self.full_candidates(key, g_of);
            full.retain(|(_, c)| self.shape_of(*c) == 0);
            let interner = &self.interner;
            select_top_by(&mut full, k, |a, b| {
                rank_cmp(a.0, interner.id(a.1.item()), b.0, interner.id(b.1.item()))
            });
            assert_eq!(candidates, full, "incremental list of {key:?} differs from the recount");
        }
        let interner = &self.interner;
        let list = candidates
            .iter()
            .map(|(count, c)| RankedItem {
                item_id: ItemId::from(interner.id(c.item())),
                count: *count,
                trend: None,
            })
            .collect();
        if !self.is_sealed(key) {
            self.remember(key, candidates.into_iter().map(|(_, i)| i).collect());
        }
        vec![(GroupKey::global(), list)]
    }

    /// Whether instance `key` (of shape `shape`) can be emitted from its last lists and the
    /// keys changed since: plain windows, and per-group event windows while none of the
    /// instance's groups counts in `(other)` (each key is then one (group, item), its count
    /// never decreases, and a group's new top-K is among its last list and its changed keys;
    /// a fold moves counts between lists). Distinct-user windows, global or per group, too:
    /// from their user counts per (group, item) (see `users`; paired ones from their keys'),
    /// with folds while they keep `(other)`'s counts under their admission state (`others`).
    pub(super) fn emits_incrementally(&self, key: InstanceKey, shape: u8) -> bool {
        shape == 0 || self.admission.get(&key).is_none_or(|a| a.folded() == 0) || self.other_counts_valid(key)
    }

    /// The per-group lists of instance `key` (shape `shape` > 0) from `candidates` (its keys
    /// of that shape, all or those of its last lists and changed since; `per_item`: one
    /// representative key per (group, item) of a distinct-user window, at its user count), plus
    /// an empty list per group emitted before that now counts in `(other)`; remembers the keys
    /// listed for the next incremental emission unless the instance is sealed. (`checking`:
    /// compare with the recount.)
    fn group_top_k(
        &mut self,
        key: InstanceKey,
        shape: u8,
        g_of: usize,
        candidates: Vec<(u64, Counter)>,
        checking: bool,
        per_item: bool,
    ) -> Vec<(GroupKey, Vec<RankedItem>)> {
        let distinct = self.shapes.distinct_users(shape) && !self.is_paired(shape);
        let paired = self.is_paired(shape);
        let folded = self.admission.get(&key).is_some_and(|a| a.folded() > 0);
        // (a user-keyed instance's candidates are per (group, item) from its user counts only
        // while its `(other)`'s counts are kept: see `emits_incrementally`)
        debug_assert!(!(folded && per_item) || self.other_counts_valid(key));
        let (mut lists, other_kept) = match folded && (paired || per_item) {
            true => self.kept_folded_lists(key, shape, &candidates),
            false => (self.shaped_lists(key, distinct && !per_item, &candidates), false),
        };
        // ((other) from its kept counts is checked against the recount too)
        let checking = checking || (self.checked && other_kept);
        if checking {
            let mut full = self.full_candidates(key, g_of);
            full.retain(|(_, c)| self.shape_of(*c) == shape);
            let full_lists = self.shaped_lists(key, distinct, &full);
            assert_eq!(
                lists, full_lists,
                "incremental lists of {key:?} differ from the recount"
            );
            if distinct {
                let interner = &self.interner;
                let recounted = UserCounts::build(interner, full.iter().map(|(_, c)| c.item())).sorted(interner);
                let kept = self
                    .instances
                    .get(&key)
                    .and_then(|i| i.users.as_ref())
                    .map(|u| u.sorted(interner));
                assert_eq!(kept, Some(recounted), "user counts of {key:?} differ from the recount");
            }
            if folded && other_kept {
                let state = self.admission.get(&key).map(|a| a.state()).unwrap_or_default();
                let recounted = match paired {
                    true => self.other_counts(key, shape, state),
                    false => self.keyed_other_counts(key, full.iter().map(|(_, c)| c.item()), state),
                };
                let kept = self
                    .instances
                    .get(&key)
                    .and_then(|i| i.other.as_ref())
                    .map(|o| o.sorted(&self.interner));
                assert_eq!(
                    kept,
                    Some(recounted.sorted(&self.interner)),
                    "(other)'s counts of {key:?} differ from the recount"
                );
            }
        }
        if self.is_sealed(key) {
            // its last list: nothing to keep
        } else if distinct {
            self.remember_users(key, shape, &lists, (!per_item).then_some(&candidates));
        } else if self.emits_incrementally(key, shape) {
            // the keys now listed: (group, item) is one key in an events window without folds
            let listed: FxHashSet<(&str, &str)> = lists
                .iter()
                .flat_map(|(g, items)| items.iter().map(move |r| (g.as_str(), r.item_id.as_str())))
                .collect();
            // (a key below every list's last count is in none: most keys, skipped unsplit)
            let least = lists
                .iter()
                .filter_map(|(_, items)| items.last())
                .map(|r| r.count)
                .min();
            let least = least.unwrap_or(u64::MAX);
            let items: Vec<Counter> = candidates
                .iter()
                .filter(|(n, _)| *n >= least)
                .filter(|(_, c)| match c.group() {
                    Some(gid) => listed.contains(&(self.numbers.text(gid), self.interner.id(c.item()))),
                    None => {
                        let (group, item, _) = split_key(self.interner.id(c.item()));
                        listed.contains(&(group, item))
                    }
                })
                .map(|(_, c)| *c)
                .collect();
            self.remember(key, items);
        }
        self.withdraw_gone(key, &mut lists);
        lists
    }

    /// Adds to instance `key`'s new per-group `lists` (in group order) an empty list for each
    /// group it listed before that has none now (gone to `(other)`, or nothing ranks): the
    /// merger then withdraws it. Remembers the groups listed now.
    pub(super) fn withdraw_gone(&mut self, key: InstanceKey, lists: &mut Vec<(GroupKey, Vec<RankedItem>)>) {
        let now: Vec<GroupKey> = lists.iter().map(|(g, _)| g.clone()).collect();
        if let Some(inst) = self.instances.get_mut(&key) {
            let before = std::mem::replace(&mut inst.groups, now);
            let withdrawn: Vec<GroupKey> = before
                .into_iter()
                .filter(|g| lists.binary_search_by(|(x, _)| x.cmp(g)).is_err())
                .collect();
            lists.extend(withdrawn.into_iter().map(|g| (g, Vec::new())));
        }
    }

    /// `group_lists` of an instance's (count, key) pairs of one shape, under its admission
    /// (`distinct_users`: count an item's keys; else sum their counts, as for a distinct-user
    /// window's representative keys at their items' user counts).
    pub(super) fn shaped_lists(
        &self,
        key: InstanceKey,
        distinct_users: bool,
        candidates: &[(u64, Counter)],
    ) -> Vec<(GroupKey, Vec<RankedItem>)> {
        let admission = self.admission.get(&key);
        let shape = self.shapes.of_window(key.window.0 as usize);
        let paired = self.is_paired(shape);
        if paired && admission.is_some_and(|a| a.folded() > 0) {
            return self.paired_folded_lists(key, shape, candidates);
        }
        if let Some(lists) = self.numbered[shape as usize]
            .then(|| self.numbered_lists(key, candidates))
            .flatten()
        {
            // (tests: against the lists of the key texts)
            if self.checked {
                assert_eq!(
                    lists,
                    self.text_lists(key, false, candidates).0,
                    "numbered lists of {key:?}"
                );
            }
            return lists;
        }
        let lists = self.text_lists(key, distinct_users, candidates);
        match lists.1 && paired {
            true => self.paired_folded_lists(key, shape, candidates),
            false => lists.0,
        }
    }

    /// `group_lists` of `candidates`' key texts (a numbered counter's written out: see
    /// `counter_text`) under instance `key`'s admission, and whether a group folded.
    fn text_lists(
        &self,
        key: InstanceKey,
        distinct_users: bool,
        candidates: &[(u64, Counter)],
    ) -> (Vec<(GroupKey, Vec<RankedItem>)>, bool) {
        let k = self.windows[key.window.0 as usize].k;
        let admission = self.admission.get(&key);
        let texts: Vec<(std::borrow::Cow<'_, str>, u64)> =
            candidates.iter().map(|(n, c)| (self.counter_text(*c), *n)).collect();
        let keys = texts.iter().map(|(key, n)| (key.as_ref(), *n));
        let mut folds = false;
        let lists = group_lists(keys, distinct_users, k, |group| {
            let admitted = admission.is_none_or(|a| a.admits(item_hash(group)));
            folds |= !admitted;
            admitted
        });
        (lists, folds)
    }

    /// The per-group lists of an instance of paired shape `shape` with groups in `(other)`, from
    /// its `candidates` (its keys at their users). An admitted group's keys count its users;
    /// `(other)` counts an item's users once over the folded groups (a user seen in two of them
    /// is one user), which their keys' counts, summed, would not: it is recounted from the
    /// pane's pairs, as (item, user index) pairs, not as user keys written out (a string per
    /// pair, at every emit: 3× the time of the user keys' recount on a folded 7d window), by
    /// building `(other)`'s counts afresh (`OtherCounts::build`). The recount that the kept
    /// counts are checked against (see `kept_folded_lists`).
    fn paired_folded_lists(
        &self,
        key: InstanceKey,
        shape: u8,
        candidates: &[(u64, Counter)],
    ) -> Vec<(GroupKey, Vec<RankedItem>)> {
        let k = self.windows[key.window.0 as usize].k;
        let mut lists = self.admitted_lists(key, candidates);
        let state = self.admission.get(&key).map(|a| a.state()).unwrap_or_default();
        push_other_list(&self.interner, &mut self.other_counts(key, shape, state), k, &mut lists);
        lists
    }

    /// The per-group lists of an instance of paired shape `shape` with groups in `(other)`:
    /// the admitted groups' from `candidates` (its keys at their users, all or those of its
    /// last lists and changed since), `(other)`'s from its kept counts (see `others`), built
    /// from the pane's pairs first when it keeps none under its admission state. Whether
    /// `(other)`'s were kept (not built now).
    fn kept_folded_lists(
        &mut self,
        key: InstanceKey,
        shape: u8,
        candidates: &[(u64, Counter)],
    ) -> (Vec<(GroupKey, Vec<RankedItem>)>, bool) {
        let kept = self.other_counts_valid(key);
        if !kept && self.is_paired(shape) {
            let state = self.admission.get(&key).map(|a| a.state()).unwrap_or_default();
            let built = self.other_counts(key, shape, state);
            if let Some(inst) = self.instances.get_mut(&key) {
                inst.other = Some(built);
            }
        }
        let k = self.windows[key.window.0 as usize].k;
        let mut lists = self.admitted_lists(key, candidates);
        let interner = &self.interner;
        let Some(other) = self.instances.get_mut(&key).and_then(|i| i.other.as_mut()) else {
            return (lists, false);
        };
        push_other_list(interner, other, k, &mut lists);
        (lists, kept)
    }

    /// Per group (its key's text), whether instance `key` gives it a list of its own (decided
    /// once per group: a look-up instead of a hash and an admission test per key).
    fn admits_groups<'a>(&'a self, key: InstanceKey) -> impl FnMut(&'a str) -> bool + 'a {
        let admission = self.admission.get(&key);
        let mut admitted: FxHashMap<&str, bool> = FxHashMap::default();
        move |group| {
            *admitted
                .entry(group)
                .or_insert_with(|| admission.is_none_or(|a| a.admits(item_hash(group))))
        }
    }

    /// The admitted groups' lists of instance `key` from `candidates` (one key per (group,
    /// item) at its count: a distinct-user window's representatives, or a paired one's keys).
    fn admitted_lists(&self, key: InstanceKey, candidates: &[(u64, Counter)]) -> Vec<(GroupKey, Vec<RankedItem>)> {
        let k = self.windows[key.window.0 as usize].k;
        let interner = &self.interner;
        let mut admits = self.admits_groups(key);
        let kept = candidates
            .iter()
            .map(|(n, c)| (interner.id(c.item()), *n))
            .filter(|(id, _)| admits(split_key(id).0));
        group_lists(kept, false, k, |_| true)
    }

    /// `(other)`'s counts of paired instance `key` (of shape `shape`), recounted from its
    /// pane's pairs under admission state `state`.
    fn other_counts(&self, key: InstanceKey, shape: u8, state: (usize, u64)) -> super::others::OtherCounts {
        let mut admits = self.admits_groups(key);
        let (_, mut panes) = self.panes_of(key);
        let pane = panes.next().flatten();
        super::others::OtherCounts::build(&self.interner, pane, shape, state, |group| !admits(group))
    }

    /// `(other)`'s counts of user-keyed instance `key` from `keys` (its keys with a positive
    /// count, of its shape) under admission state `state`.
    fn keyed_other_counts(
        &self,
        key: InstanceKey,
        keys: impl Iterator<Item = ItemIdx>,
        state: (usize, u64),
    ) -> super::others::OtherCounts {
        let mut admits = self.admits_groups(key);
        super::others::OtherCounts::build_keyed(&self.interner, keys, state, |group| !admits(group))
    }

    /// A plain recount's candidates in O(k) memory: for an instance of one pane and no
    /// exclusions, at least its top `k` bare items (ranked by count, then id), never every
    /// item (a 1d window over 13 M items would need 200 MB for the (count, item) pairs at each
    /// recount); `None` for other instances (`full_candidates` then).
    fn top_of_single_pane(&mut self, key: InstanceKey, g_of: usize, k: usize) -> Option<Vec<(u64, Counter)>> {
        self.members_in_record_order(key, g_of);
        let no_exclusions = self.instances.get(&key).is_none_or(|i| i.exclusions.is_empty());
        let (n, mut panes) = self.panes_of(key);
        if n != 1 || !no_exclusions || k == 0 {
            return None;
        }
        let interner = &self.interner;
        let id = |c: Counter| interner.id(c.item());
        // keep at most `cap` pairs; when full, cut to the top k and raise the floor to the
        // k-th count: a pair below it can no longer rank (ranking is a total order, so the top
        // k of the whole is the top k of (the top k so far ∪ the rest))
        let cap = (2 * k).max(1024);
        let mut top: Vec<(u64, Counter)> = Vec::with_capacity(cap);
        let mut floor = 0;
        if let Some(p) = panes.next().flatten() {
            self.pane_counts(g_of, p, |c, n| {
                if n < floor || c.group().is_some() || interner.shape(c.item()) != 0 {
                    return;
                }
                if top.len() == cap {
                    select_top_counted(&mut top, k, id);
                    floor = top.last().map_or(0, |x| x.0);
                    if n < floor {
                        return;
                    }
                }
                top.push((n, c));
            });
        }
        Some(top)
    }

    /// Every (count, item) of an instance with a positive count, recounted from its panes.
    pub(super) fn full_candidates(&mut self, key: InstanceKey, g_of: usize) -> Vec<(u64, Counter)> {
        self.members_in_record_order(key, g_of);
        let no_exclusions = self.instances.get(&key).is_none_or(|i| i.exclusions.is_empty());
        let single: Option<Vec<(u64, Counter)>> = {
            let (n, mut panes) = self.panes_of(key);
            (n == 1 && no_exclusions).then(|| {
                let mut v = Vec::new();
                if let Some(p) = panes.next().flatten() {
                    self.pane_counts(g_of, p, |c, n| v.push((n, c)));
                }
                v
            })
        };
        match single {
            Some(c) => c,
            None if self.numbers.len() > 0 => self.summed_candidates(key, g_of),
            None => {
                let mut sums = std::mem::take(&mut self.sums);
                {
                    let (_, panes) = self.panes_of(key);
                    for p in panes.flatten() {
                        self.pane_counts(g_of, p, |c, n| sums.add(c, n));
                    }
                }
                if let Some(inst) = self.instances.get(&key) {
                    for (c, n) in &inst.exclusions {
                        sums.sub(*c, *n);
                    }
                }
                let mut candidates = Vec::with_capacity(sums.items().len());
                sums.drain(|n, c| candidates.push((n, c)));
                self.sums = sums;
                candidates
            }
        }
    }

    /// Puts the members of instance `key`'s panes (of pane group `g_of`) in record order, so
    /// that a recount reads their records front to back, and so does whatever reads its
    /// candidates' keys after it (`group_lists`): in the order they were counted, every read
    /// was a cache miss (80 % of `group_lists`' samples in a per-group job were its first read
    /// of a key's record). A member's place in the list means nothing else.
    pub(super) fn members_in_record_order(&mut self, key: InstanceKey, g_of: usize) {
        let spec = &self.windows[key.window.0 as usize];
        let group = &mut self.groups[g_of];
        let w = group.width.as_i64();
        let first = key.start.0.div_euclid(w);
        for no in first..first + spec.size.as_i64() / w {
            if let Some(pane) = group.index.get(&no).and_then(|&s| group.slots[s].as_mut()) {
                in_record_order(&mut pane.members);
                in_record_order(&mut pane.grouped_members);
            }
        }
    }

    /// `full_candidates` of an instance of several panes or with exclusions, in a counter
    /// with numbered counters (not dense by record: summed in a map).
    fn summed_candidates(&self, key: InstanceKey, g_of: usize) -> Vec<(u64, Counter)> {
        let mut sums: FxHashMap<Counter, u64> = FxHashMap::default();
        let (_, panes) = self.panes_of(key);
        for p in panes.flatten() {
            self.pane_counts(g_of, p, |c, n| *sums.entry(c).or_insert(0) += n);
        }
        if let Some(inst) = self.instances.get(&key) {
            for (c, n) in &inst.exclusions {
                if let Some(s) = sums.get_mut(c) {
                    *s = s.saturating_sub(*n);
                }
            }
        }
        sums.into_iter().filter(|(_, n)| *n > 0).map(|(c, n)| (n, c)).collect()
    }

    /// The count of counter `c` in pane `p` of group `g` (inline, in its item's group block,
    /// or in the map), a settled pane (see `moved`).
    #[inline]
    pub(super) fn count_in(&self, g: usize, p: &Pane, c: Counter) -> u64 {
        debug_assert!(p.moved.is_empty(), "a look-up in an unsettled pane");
        self.count_held(g, p, c)
    }

    /// `count_in` but for the pane's moved counts.
    #[inline]
    fn count_held(&self, g: usize, p: &Pane, c: Counter) -> u64 {
        if let Some(rel) = p.rel {
            match c.group() {
                None => {
                    let inl = self.interner.inline(c.item(), g);
                    if inl.pane == rel {
                        return inl.count() as u64;
                    }
                }
                Some(gid) => {
                    let held = self.interner.block(c.item()).filter(|b| g == 0 && b.pane() == rel);
                    if let Some(n) = held.and_then(|b| b.get(gid.raw())) {
                        return u64::from(n.count());
                    }
                }
            }
        }
        p.counts.get(&c).copied().unwrap_or(0)
    }

    /// Moves to the next emit generation. Generations are 8 bits (they share the inline
    /// counter's word): when they wrap, every inline counter's is reset to 0, which no
    /// generation is, so no change can go unlogged.
    pub(super) fn next_gen(&mut self) {
        self.gen = match self.gen.checked_add(1) {
            Some(g) => g,
            None => {
                self.interner.clear_logged();
                1
            }
        };
    }

    /// The (count, item) pairs the new top-K of plain instance `key` (of pane group `g`) is
    /// among: its last list and the items changed since, at their current counts. `None` when
    /// it must (no last list, a cut log) or had better (many changes) be recounted in full.
    pub(super) fn incremental_candidates(&mut self, key: InstanceKey, g: usize) -> Option<Vec<(u64, Counter)>> {
        let mut set = std::mem::take(&mut self.candidates);
        let candidates = self.changed_candidates(key, g, &mut set);
        set.clear();
        self.candidates = set;
        candidates
    }

    /// `incremental_candidates` with `set` as scratch.
    fn changed_candidates(&self, key: InstanceKey, g: usize, set: &mut ItemSet) -> Option<Vec<(u64, Counter)>> {
        let inst = self.instances.get(&key)?;
        let last = inst.last.as_ref()?;
        let (_, panes) = self.panes_of(key);
        let panes: Vec<Option<&Pane>> = panes.collect();
        let live = panes.iter().flatten().count();
        let mut counters = 0usize;
        let mut changes = 0usize;
        for (p, cursor) in panes.iter().zip(&last.cursors) {
            let Some(p) = p else { continue };
            if *cursor < p.log.start() {
                return None; // the log was cut past this instance's cursor
            }
            counters += p.counters();
            changes += (p.log_end() - cursor) as usize;
        }
        // Each candidate costs a look-up per pane; the recount, about one step per counter.
        if !self.checked && (changes + last.items.len()) * (live + 1) >= counters {
            return None;
        }
        // (numbered counters are not dense by record: deduplicated in a hash set)
        let mut grouped: FxHashSet<Counter> = FxHashSet::default();
        let mut insert = |c: Counter| match c.group() {
            None => set.insert(c),
            Some(_) => {
                grouped.insert(c);
            }
        };
        for c in &last.items {
            insert(*c);
        }
        for (p, cursor) in panes.iter().zip(&last.cursors) {
            if let Some(p) = p {
                for c in p.log.since(*cursor) {
                    insert(c);
                }
            }
        }
        let mut counted: Vec<(u64, Counter)> = set
            .items()
            .chain(grouped)
            .map(|c| (panes.iter().flatten().map(|p| self.count_held(g, p, c)).sum(), c))
            .collect();
        // (a closed pane's moved counts are read in one pass, not settled into its map for a
        // few look-ups: a sealing instance's list is mostly its last)
        if panes.iter().flatten().any(|p| !p.moved.is_empty()) {
            let at: FxHashMap<Counter, usize> = counted.iter().enumerate().map(|(i, (_, c))| (*c, i)).collect();
            for p in panes.iter().flatten() {
                for (c, n) in &p.moved {
                    if let Some(&i) = at.get(c) {
                        counted[i].0 += n;
                    }
                }
            }
        }
        let exclusions = &inst.exclusions;
        counted.retain_mut(|(n, c)| {
            *n = n.saturating_sub(exclusions.get(c).copied().unwrap_or(0));
            *n > 0
        });
        Some(counted)
    }

    /// The (user count, representative key) pairs the new lists of distinct-user instance `key`
    /// are among: its last lists' (group, item)s and those whose user count changed since.
    /// `None` when it must be recounted (no last lists or no user counts).
    fn user_candidates(&mut self, key: InstanceKey) -> Option<Vec<(u64, Counter)>> {
        let inst = self.instances.get_mut(&key)?;
        let (Some(last), Some(users)) = (inst.last.as_ref(), inst.users.as_mut()) else {
            return None;
        };
        let interner = &self.interner;
        let set = &mut self.sums;
        // (a sum of 1 marks a candidate: the set dedups them)
        for c in last
            .items
            .iter()
            .copied()
            .chain(users.take_changed().into_iter().map(Counter::of))
        {
            set.add(c, 1);
        }
        let candidates = set.items().map(|c| (users.count(interner, c.item()), c)).collect();
        set.clear();
        Some(candidates)
    }

    /// After distinct-user instance `key` (shape `shape`) emitted `lists`: while it can emit
    /// incrementally, remembers the representatives of the (group, item)s listed, first
    /// building its user counts from `recounted` (its keys with a positive count) when given,
    /// and with groups in `(other)` `(other)`'s counts too; else drops them (nothing keeps them
    /// up to date any more).
    fn remember_users(
        &mut self,
        key: InstanceKey,
        shape: u8,
        lists: &[(GroupKey, Vec<RankedItem>)],
        recounted: Option<&Vec<(u64, Counter)>>,
    ) {
        let state = self.admission.get(&key).filter(|a| a.folded() > 0).map(|a| a.state());
        let first = self.instances.get(&key).is_some_and(|i| i.emitted == 0);
        // with groups in `(other)`: its counts too, built with the user counts (see `others`)
        let other = match (recounted, state) {
            (Some(all), Some(state)) if !first => {
                Some(self.keyed_other_counts(key, all.iter().filter(|(n, _)| *n > 0).map(|(_, c)| c.item()), state))
            }
            _ => None,
        };
        if let (Some(inst), Some(other)) = (self.instances.get_mut(&key), other) {
            inst.other = Some(other);
        }
        let incremental = self.emits_incrementally(key, shape);
        let interner = &self.interner;
        let Some(inst) = self.instances.get_mut(&key) else {
            return;
        };
        if !incremental {
            inst.users = None;
            inst.last = None;
            inst.other = None;
            return;
        }
        if recounted.is_some() && inst.emitted == 0 {
            // Its first emission (always a recount: it has no user counts; `advance` marks it
            // emitted after this, and a restored instance starts unemitted): user counts cost
            // a look-up per key now and per new key of every event after, while an instance
            // that emits once more, when it seals (a replay), needs none. They are built at
            // its second recount, for a third emission.
            inst.users = None;
            inst.last = None;
            return;
        }
        if let Some(all) = recounted {
            inst.users = Some(UserCounts::build(
                interner,
                all.iter().filter(|(n, _)| *n > 0).map(|(_, c)| c.item()),
            ));
        }
        let Some(users) = inst.users.as_ref() else {
            return;
        };
        let mut part = String::new();
        let mut items = Vec::new();
        for (group, listed) in lists {
            for r in listed {
                compose_key(group.as_str(), r.item_id.as_str(), None, &mut part);
                items.extend(users.rep(interner, &part).map(Counter::of));
            }
        }
        // (no pane cursors: the user counts log the changes)
        inst.last = Some(Emitted {
            items,
            cursors: Vec::new(),
        });
    }

    /// Records what plain instance `key` just emitted (`items`, best first) and reads its panes'
    /// logs up to their ends.
    pub(super) fn remember(&mut self, key: InstanceKey, items: Vec<Counter>) {
        let (_, panes) = self.panes_of(key);
        // (a pane not created yet will log from entry 0)
        let cursors = panes.map(|p| p.map_or(0, Pane::log_end)).collect();
        if let Some(inst) = self.instances.get_mut(&key) {
            inst.last = Some(Emitted { items, cursors });
        }
    }
}

/// Adds `(other)`'s top `k` from `other` (its last list and the items changed since, or all of
/// them) to `lists`, in group order, and remembers it in `other` for the next one.
fn push_other_list(
    interner: &Interner,
    other: &mut super::others::OtherCounts,
    k: usize,
    lists: &mut Vec<(GroupKey, Vec<RankedItem>)>,
) {
    let mut top = other.candidates(interner);
    let item = |rep: ItemIdx| super::others::item_of(interner.id(rep));
    select_top_counted(&mut top, k, item);
    let list: Vec<RankedItem> = top
        .iter()
        .map(|&(count, rep)| RankedItem {
            item_id: ItemId::from(item(rep)),
            count,
            trend: None,
        })
        .collect();
    other.set_listed(top.into_iter().map(|(_, rep)| rep).collect());
    if !list.is_empty() {
        lists.push((GroupKey::other(), list));
        // (in group order, as `group_lists` gives them)
        lists.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    }
}

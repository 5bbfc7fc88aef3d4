//! The per-group top-K lists of an events window's keys (`group NUL item`, one per (group,
//! item)) built in one pass as the keys stream in, each group's pairs cut to its top K
//! whenever they reach a cap: the count of its K-th then becomes the group's floor, and a pair
//! below it is not kept (ranking is a total order, so the top K of the whole is the top K of
//! the top K so far and the rest). [`group_lists`](super::group_lists) builds the same lists
//! from every key kept first; this is what a recount of one pane feeds its keys to, so that a
//! key is read from its record together with its count
//! ([`WindowedCounter::single_pane_group_lists`], below).

use super::numbers::GroupNumbers;
use super::{Counter, WindowedCounter};
use crate::group::{group_of_key, GroupKey};
use crate::hash::item_hash;
use crate::record::{ItemId, RankedItem};
use crate::topk::select_top_counted;
use crate::window::InstanceKey;

/// Per group, its best (count, key) pairs so far.
pub(super) struct GroupTops<'a, T> {
    k: usize,
    /// How many pairs a group keeps before it is cut to its top `k`.
    cap: usize,
    /// Each group's place in `groups`: its number. (Found by the string, every key's look-up
    /// called `memcmp`.)
    numbers: GroupNumbers,
    groups: Vec<GroupTop<'a, T>>,
}

/// One group's best pairs so far.
struct GroupTop<'a, T> {
    group: &'a str,
    /// A pair counted below it cannot rank (0 until the group is first cut).
    floor: u64,
    pairs: Vec<(u64, T)>,
}

impl<'a, T: Copy> GroupTops<'a, T> {
    /// Lists of `k` (`k` > 0) per group.
    pub(super) fn new(k: usize) -> GroupTops<'a, T> {
        debug_assert!(k > 0, "a list of no items needs no pass");
        GroupTops {
            k,
            cap: (2 * k).max(256),
            numbers: GroupNumbers::default(),
            groups: Vec::new(),
        }
    }

    /// Adds a key of group `group` at a positive `count` as `t`, `id(t)` being what ranks it
    /// among its group's keys of equal count (its key text, or its item id: the same order
    /// within one group). `admits` is asked once per group whether it keeps its own list;
    /// `false` when it does not (the lists are then not these: the key is not added).
    #[inline]
    pub(super) fn add(
        &mut self,
        group: &'a str,
        count: u64,
        t: T,
        id: impl Fn(T) -> &'a str,
        admits: impl FnOnce(&str) -> bool,
    ) -> bool {
        let at = match self.numbers.find(group) {
            Some(n) => n.index(),
            None => {
                if !admits(group) {
                    return false;
                }
                // (numbers are given densely from 0 and none is freed in one pass)
                let at = self.numbers.number(group, 0).index();
                debug_assert_eq!(at, self.groups.len());
                self.groups.push(GroupTop {
                    group,
                    floor: 0,
                    pairs: Vec::new(),
                });
                at
            }
        };
        let top = &mut self.groups[at];
        if count >= top.floor {
            top.pairs.push((count, t));
            if top.pairs.len() == self.cap {
                select_top_counted(&mut top.pairs, self.k, id);
                top.floor = top.pairs.last().map_or(0, |p| p.0);
            }
        }
        true
    }

    /// Each group with its top-`k` pairs, best first, the groups in key order.
    pub(super) fn finish(self, id: impl Fn(T) -> &'a str + Copy) -> Vec<(&'a str, Vec<(u64, T)>)> {
        let k = self.k;
        let mut groups: Vec<(&str, Vec<(u64, T)>)> = self
            .groups
            .into_iter()
            .map(|mut g| {
                select_top_counted(&mut g.pairs, k, id);
                (g.group, g.pairs)
            })
            .collect();
        groups.sort_unstable_by(|a, b| a.0.cmp(b.0));
        groups
    }
}

impl WindowedCounter {
    /// The per-group lists of instance `key` of a numbered shape from `candidates` (one per
    /// (group, item), at their counts in the instance) in one pass, as `group_lists` builds them
    /// from their key texts, without writing those; `None` when a group counts in `(other)` (the
    /// lists then fold: `group_lists`) or none are asked for.
    pub(super) fn numbered_lists(
        &self,
        key: InstanceKey,
        candidates: &[(u64, Counter)],
    ) -> Option<Vec<(GroupKey, Vec<RankedItem>)>> {
        let k = self.windows[key.window.0 as usize].k;
        if k == 0 {
            return None;
        }
        let (interner, numbers) = (&self.interner, &self.numbers);
        let admission = self.admission.get(&key);
        let id = |c: Counter| interner.id(c.item());
        let mut tops = GroupTops::new(k);
        for &(n, c) in candidates.iter().filter(|(n, _)| *n > 0) {
            let gid = c.group()?;
            let admits = |group: &str| admission.is_none_or(|a| a.admits(item_hash(group)));
            if !tops.add(numbers.text(gid), n, c, id, admits) {
                return None;
            }
        }
        Some(lists_of(tops.finish(id), |_, c| interner.id(c.item())))
    }

    /// The per-group lists of an instance of an events window with `by` dims (shape `shape`)
    /// over one pane and without exclusions, recounted in one pass: each key is read from its
    /// record with its count and kept only while it can rank in its group ([`GroupTops`]).
    /// (Recounted into candidates first, a key's record was read twice, the second time a cache
    /// miss for most keys: 60 % of `group_lists`' samples in a per-group job, `perf`.)
    /// Remembers the listed keys and withdraws gone groups, as [`Self::group_top_k`] does.
    /// `None` for any other instance, and when a group counts in `(other)` (the general path).
    pub(super) fn single_pane_group_lists(
        &mut self,
        key: InstanceKey,
        shape: u8,
        g_of: usize,
        k: usize,
    ) -> Option<Vec<(GroupKey, Vec<RankedItem>)>> {
        let no_exclusions = self.instances.get(&key).is_none_or(|i| i.exclusions.is_empty());
        if self.panes_of(key).0 != 1 || !no_exclusions || k == 0 {
            return None;
        }
        self.members_in_record_order(key, g_of);
        // (a numbered counter's group is its number's, its id its item record's; a key record's
        // group is its key's first part, its id the whole key: either ranks a group's keys alike)
        let numbered = self.numbered[shape as usize];
        let (mut lists, listed) = {
            let (_, mut panes) = self.panes_of(key);
            let (interner, numbers) = (&self.interner, &self.numbers);
            let admission = self.admission.get(&key);
            let id = |c: Counter| interner.id(c.item());
            let mut tops = GroupTops::new(k);
            let mut all_admitted = true;
            if let Some(p) = panes.next().flatten() {
                self.pane_counts(g_of, p, |c, n| {
                    if n == 0 || !all_admitted {
                        return;
                    }
                    let group = match (numbered, c.group()) {
                        (true, Some(gid)) if numbers.shape(gid) == shape => numbers.text(gid),
                        (false, None) if interner.shape(c.item()) == shape => group_of_key(interner.id(c.item())),
                        _ => return,
                    };
                    let admits = |group: &str| admission.is_none_or(|a| a.admits(item_hash(group)));
                    all_admitted = tops.add(group, n, c, id, admits);
                });
            }
            if !all_admitted {
                return None;
            }
            let groups = tops.finish(id);
            let listed: Vec<Counter> = groups.iter().flat_map(|(_, pairs)| pairs.iter().map(|p| p.1)).collect();
            let lists = lists_of(groups, |group, c| match numbered {
                true => interner.id(c.item()),
                false => &interner.id(c.item())[group.len() + 1..],
            });
            (lists, listed)
        };
        if self.checked {
            let mut full = self.full_candidates(key, g_of);
            full.retain(|(_, c)| self.shape_of(*c) == shape);
            let recounted = self.shaped_lists(key, false, &full);
            assert_eq!(lists, recounted, "one-pass lists of {key:?} differ from the recount");
        }
        if !self.is_sealed(key) && self.emits_incrementally(key, shape) {
            self.remember(key, listed);
        }
        self.withdraw_gone(key, &mut lists);
        Some(lists)
    }
}

/// [`GroupTops::finish`]'s groups as lists, each counter's item id `item(group, counter)`.
fn lists_of<'a>(
    groups: Vec<(&'a str, Vec<(u64, Counter)>)>,
    item: impl Fn(&'a str, Counter) -> &'a str,
) -> Vec<(GroupKey, Vec<RankedItem>)> {
    groups
        .into_iter()
        .map(|(group, pairs)| {
            let items = pairs
                .into_iter()
                .map(|(count, c)| RankedItem {
                    item_id: ItemId::from(item(group, c)),
                    count,
                    trend: None,
                })
                .collect();
            (GroupKey::from_stored(group.to_string()), items)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::group_lists;
    use proptest::prelude::*;

    /// The lists of `keys` (key, count) as `group_lists` builds them from every key.
    fn lists_of(keys: &[(String, u64)], k: usize) -> Vec<(String, Vec<(String, u64)>)> {
        let mut tops = GroupTops::new(k);
        for (i, (key, count)) in keys.iter().enumerate() {
            assert!(tops.add(group_of_key(key), *count, i, |i| keys[i].0.as_str(), |_| true));
        }
        tops.finish(|i| keys[i].0.as_str())
            .into_iter()
            .map(|(g, pairs)| {
                let items = pairs
                    .into_iter()
                    .map(|(c, i)| (keys[i].0[g.len() + 1..].to_string(), c))
                    .collect();
                (g.to_string(), items)
            })
            .collect()
    }

    proptest! {
        /// One pass with cuts gives `group_lists`' lists: keys of a few groups, counts with
        /// many ties, more keys than a group keeps before its first cut, groups short and long.
        #[test]
        fn one_pass_lists_equal_group_lists(
            raw in prop::collection::vec((0u8..4, 0u16..2000, 1u64..6), 0..3000),
            k in 1usize..12,
        ) {
            // one count per key: a key is one (group, item)
            let mut seen = std::collections::BTreeMap::new();
            for (g, item, count) in raw {
                // (groups past 16 bytes are found by their string, shorter ones by a number)
                let group = match g {
                    3 => "country=a-name-longer-than-sixteen".to_string(),
                    g => format!("country=C{g}"),
                };
                seen.entry(format!("{group}\0item-{item}")).or_insert(count);
            }
            let keys: Vec<(String, u64)> = seen.into_iter().collect();
            // (BTreeMap order is key order: shuffle it by a fixed permutation so that cuts
            // see ranks out of order)
            let mut keys = keys;
            let n = keys.len();
            if n > 1 {
                for i in 0..n {
                    keys.swap(i, (i * 7919 + 13) % n);
                }
            }
            let want: Vec<(String, Vec<(String, u64)>)> =
                group_lists(keys.iter().map(|(k, c)| (k.as_str(), *c)), false, k, |_| true)
                    .into_iter()
                    .map(|(g, items)| {
                        (g.as_str().to_string(), items.into_iter().map(|r| (r.item_id.to_string(), r.count)).collect())
                    })
                    .collect();
            prop_assert_eq!(lists_of(&keys, k), want);
        }
    }

    /// A group that does not keep its own list stops the pass, and is asked about once.
    #[test]
    fn a_refused_group_stops_the_pass() {
        let keys = ["a=1\0x", "a=1\0y", "b=2\0x"];
        let mut tops = GroupTops::new(3);
        let mut asked = Vec::new();
        let mut add = |i: usize| {
            tops.add(
                group_of_key(keys[i]),
                1,
                i,
                |i| keys[i],
                |g| {
                    asked.push(g.to_string());
                    g != "b=2"
                },
            )
        };
        assert!(add(0));
        assert!(add(1));
        assert!(!add(2));
        assert_eq!(asked, ["a=1", "b=2"]);
    }
}

//! A record's group block: the counts of an item in the groups of per-group windows, for the
//! item's newest pane of the first pane group (as [`Inline`](super::Inline) holds its plain
//! count there). The common event (same item, same pane, a group it was counted in) then
//! touches the item's record and nothing else, where a record per (group, item) key doubled
//! the records an event could miss in the cache (docs/plans/counter-key-model.md).
//!
//! Groups are numbers (`counter::numbers`). A block holds one group's count in the record, a
//! few in a small box, and then, while every group's number is small, an array by number (a
//! hot item counts in every group: a scan of 50 entries per event gave the gain back, the
//! model in `operators/examples/keyed_layouts.rs`). A count the block has no room for (a
//! large number past the few) is the caller's to keep elsewhere (the pane's map).

/// One group's count (24 bits) and the emit generation in which it was last logged (8 bits),
/// as [`Inline`](super::Inline) packs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupCount(u32);

impl GroupCount {
    /// The largest count a block holds.
    pub const MAX_COUNT: u32 = (1 << 24) - 1;

    /// A count of `count` (1 to `MAX_COUNT`), logged in generation `logged`.
    #[inline]
    pub fn new(count: u32, logged: u8) -> GroupCount {
        debug_assert!((1..=Self::MAX_COUNT).contains(&count));
        GroupCount(count | u32::from(logged) << 24)
    }

    /// The count.
    #[inline]
    pub fn count(self) -> u32 {
        self.0 & Self::MAX_COUNT
    }

    /// The generation in which the count was last logged (0: none).
    #[inline]
    pub fn logged(self) -> u8 {
        (self.0 >> 24) as u8
    }

    /// Adds one to a count below `MAX_COUNT`.
    #[inline]
    pub fn increment(&mut self) {
        debug_assert!(self.count() < Self::MAX_COUNT);
        self.0 += 1;
    }

    /// Records that the count was logged in generation `g`.
    #[inline]
    pub fn set_logged(&mut self, g: u8) {
        self.0 = (self.0 & Self::MAX_COUNT) | u32::from(g) << 24;
    }
}

/// Groups a block holds in its small box before it needs its array (small in unit tests, so
/// that every form is reached).
const FEW: usize = if cfg!(test) { 2 } else { 4 };

/// Group numbers below this fit the array (small in unit tests, so that a count past it is).
pub const DENSE: usize = if cfg!(test) { 8 } else { 64 };

/// A block's pane and counts. A present count is at least 1: 0 in the array is an absent
/// group. (The pane in each variant, not beside the enum: 16 bytes in all, where a field
/// beside it made 24, and four inline counters' records past 64 bytes.)
#[derive(Clone, Debug)]
enum Counts {
    Empty { pane: i32 },
    One { pane: i32, group: u32, count: GroupCount },
    Few { pane: i32, few: Box<Few> },
    Dense { pane: i32, dense: Box<[GroupCount; DENSE]> },
}

#[derive(Clone, Debug)]
struct Few {
    len: usize,
    groups: [(u32, GroupCount); FEW],
}

/// The counts of one item in its groups, for one pane: its pane (relative to the pane group's
/// base; `i32::MIN` for none yet) and each group's count there.
#[derive(Clone, Debug)]
pub struct GroupBlock(Counts);

impl Default for GroupBlock {
    fn default() -> Self {
        GroupBlock::EMPTY
    }
}

impl GroupBlock {
    /// No pane, no counts.
    pub const EMPTY: GroupBlock = GroupBlock(Counts::Empty { pane: i32::MIN });

    /// Its pane.
    #[inline(always)]
    pub fn pane(&self) -> i32 {
        match &self.0 {
            Counts::Empty { pane }
            | Counts::One { pane, .. }
            | Counts::Few { pane, .. }
            | Counts::Dense { pane, .. } => *pane,
        }
    }

    /// Empties it for pane `pane`, calling `f` with every (group, count) it held, in no
    /// particular order. Its box, if any, is kept for the next pane's counts: an item's block
    /// moves at each new pane, and freeing and allocating it again was 4 % of a per-group
    /// job's worker (`perf`).
    pub fn move_to(&mut self, new_pane: i32, f: impl FnMut(u32, GroupCount)) {
        self.for_each(f);
        match &mut self.0 {
            Counts::Few { pane, few } => {
                few.len = 0;
                *pane = new_pane;
            }
            Counts::Dense { pane, dense } => {
                dense.fill(GroupCount(0));
                *pane = new_pane;
            }
            Counts::Empty { .. } | Counts::One { .. } => self.0 = Counts::Empty { pane: new_pane },
        }
    }

    /// The count of group `group`, to change, if the block holds one.
    #[inline(always)]
    pub fn get_mut(&mut self, group: u32) -> Option<&mut GroupCount> {
        match &mut self.0 {
            Counts::One { group: g, count, .. } if *g == group => Some(count),
            Counts::Empty { .. } | Counts::One { .. } => None,
            Counts::Few { few, .. } => few.groups[..few.len]
                .iter_mut()
                .find(|(g, _)| *g == group)
                .map(|(_, c)| c),
            Counts::Dense { dense, .. } => dense.get_mut(group as usize).filter(|c| c.0 != 0),
        }
    }

    /// The count of group `group`, if the block holds one.
    #[inline]
    pub fn get(&self, group: u32) -> Option<GroupCount> {
        match &self.0 {
            Counts::One { group: g, count, .. } if *g == group => Some(*count),
            Counts::Empty { .. } | Counts::One { .. } => None,
            Counts::Few { few, .. } => few.groups[..few.len].iter().find(|(g, _)| *g == group).map(|(_, c)| *c),
            Counts::Dense { dense, .. } => dense.get(group as usize).filter(|c| c.0 != 0).copied(),
        }
    }

    /// Adds group `group` (not held) at `count`; `false` when the block has no room for it (it
    /// holds [`FEW`] groups and one of them or `group` is numbered past [`DENSE`]).
    pub fn insert(&mut self, group: u32, count: GroupCount) -> bool {
        debug_assert!(self.get(group).is_none(), "group {group} held twice");
        debug_assert!(count.count() > 0);
        let pane = self.pane();
        match &mut self.0 {
            Counts::Empty { .. } => self.0 = Counts::One { pane, group, count },
            Counts::One { group: g, count: c, .. } => {
                let mut groups = [(0, GroupCount(0)); FEW];
                groups[0] = (*g, *c);
                groups[1] = (group, count);
                self.0 = Counts::Few {
                    pane,
                    few: Box::new(Few { len: 2, groups }),
                };
            }
            Counts::Few { few, .. } if few.len < FEW => {
                few.groups[few.len] = (group, count);
                few.len += 1;
            }
            Counts::Few { few, .. } => {
                if (group as usize) >= DENSE || few.groups.iter().any(|(g, _)| *g as usize >= DENSE) {
                    return false;
                }
                let mut dense = Box::new([GroupCount(0); DENSE]);
                for (g, c) in few.groups {
                    dense[g as usize] = c;
                }
                dense[group as usize] = count;
                self.0 = Counts::Dense { pane, dense };
            }
            Counts::Dense { dense, .. } => match dense.get_mut(group as usize) {
                Some(slot) => *slot = count,
                None => return false,
            },
        }
        true
    }

    /// Removes group `group`'s count, if held.
    pub fn remove(&mut self, group: u32) -> Option<GroupCount> {
        let pane = self.pane();
        match &mut self.0 {
            Counts::One { group: g, count, .. } if *g == group => {
                let c = *count;
                self.0 = Counts::Empty { pane };
                Some(c)
            }
            Counts::Empty { .. } | Counts::One { .. } => None,
            Counts::Few { few, .. } => {
                let at = few.groups[..few.len].iter().position(|(g, _)| *g == group)?;
                let c = few.groups[at].1;
                few.groups[at] = few.groups[few.len - 1];
                few.len -= 1;
                Some(c)
            }
            Counts::Dense { dense, .. } => {
                let slot = dense.get_mut(group as usize).filter(|c| c.0 != 0)?;
                Some(std::mem::replace(slot, GroupCount(0)))
            }
        }
    }

    /// Calls `f` with every (group, count) held, in no particular order.
    pub fn for_each(&self, mut f: impl FnMut(u32, GroupCount)) {
        match &self.0 {
            Counts::Empty { .. } => {}
            Counts::One { group, count, .. } => f(*group, *count),
            Counts::Few { few, .. } => few.groups[..few.len].iter().for_each(|&(g, c)| f(g, c)),
            Counts::Dense { dense, .. } => {
                for (g, &c) in dense.iter().enumerate() {
                    if c.0 != 0 {
                        f(g as u32, c);
                    }
                }
            }
        }
    }

    /// Groups held.
    pub fn len(&self) -> usize {
        match &self.0 {
            Counts::Empty { .. } => 0,
            Counts::One { .. } => 1,
            Counts::Few { few, .. } => few.len,
            Counts::Dense { dense, .. } => dense.iter().filter(|c| c.0 != 0).count(),
        }
    }

    /// Whether it holds no group.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resets every count's logged generation to 0 (none), when generations wrap.
    pub fn clear_logged(&mut self) {
        match &mut self.0 {
            Counts::Empty { .. } => {}
            Counts::One { count, .. } => count.set_logged(0),
            Counts::Few { few, .. } => few.groups.iter_mut().for_each(|(_, c)| c.set_logged(0)),
            Counts::Dense { dense, .. } => dense.iter_mut().for_each(|c| c.set_logged(0)),
        }
    }

    /// Starts loading its box, if it has one, where group `group`'s count is (its first line
    /// when the group is not known): a counter looks up a run of events' records together, and
    /// then their boxes, so that counting them waits for neither (see `counter::lookahead`).
    #[inline]
    pub fn prefetch(&self, group: Option<u32>) {
        match &self.0 {
            Counts::Empty { .. } | Counts::One { .. } => {}
            Counts::Few { few, .. } => super::prefetch::prefetch(&**few as *const Few as usize),
            Counts::Dense { dense, .. } => {
                let at = group.map_or(0, |g| (g as usize).min(DENSE - 1));
                super::prefetch::prefetch(&dense[at] as *const GroupCount as usize);
            }
        }
    }

    /// Heap bytes held (its box, if any).
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            Counts::Empty { .. } | Counts::One { .. } => 0,
            Counts::Few { .. } => std::mem::size_of::<Few>(),
            Counts::Dense { .. } => std::mem::size_of::<[GroupCount; DENSE]>(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32, u32),
        Increment(u32),
        Log(u32, u8),
        Remove(u32),
        TakeAll,
        ClearLogged,
    }

    fn op() -> impl Strategy<Value = Op> {
        // (numbers mostly below DENSE, some past it)
        let group = prop_oneof![4 => 0u32..DENSE as u32, 1 => 0u32..1000];
        (0u8..12, group, 1u32..5, 1u8..=255).prop_map(|(k, g, c, gen)| match k {
            0..=3 => Op::Insert(g, c),
            4..=6 => Op::Increment(g),
            7 => Op::Log(g, gen),
            8 | 9 => Op::Remove(g),
            10 => Op::TakeAll,
            _ => Op::ClearLogged,
        })
    }

    proptest! {
        /// Against a map of group → (count, logged): what the block holds, whatever its form,
        /// and that it refuses only a group it has no room for.
        #[test]
        fn blocks_follow_the_model(ops in prop::collection::vec(op(), 0..200)) {
            let mut block = GroupBlock::EMPTY;
            prop_assert_eq!(std::mem::size_of::<GroupBlock>(), 16);
            let mut model: BTreeMap<u32, (u32, u8)> = BTreeMap::new();
            let mut dense = false;
            for op in ops {
                match op {
                    Op::Insert(g, c) => {
                        if model.contains_key(&g) {
                            continue;
                        }
                        // (an array stays one, across moves too)
                        let fits_dense = |g: u32| (g as usize) < DENSE;
                        let room = match dense {
                            true => fits_dense(g),
                            false => model.len() < FEW || (fits_dense(g) && model.keys().all(|&m| fits_dense(m))),
                        };
                        dense |= room && !dense && model.len() == FEW;
                        prop_assert_eq!(block.insert(g, GroupCount::new(c, 0)), room);
                        if room {
                            model.insert(g, (c, 0));
                        }
                    }
                    Op::Increment(g) => {
                        let held = block.get_mut(g).map(|c| c.increment()).is_some();
                        prop_assert_eq!(held, model.contains_key(&g));
                        if let Some(m) = model.get_mut(&g) {
                            m.0 += 1;
                        }
                    }
                    Op::Log(g, gen) => {
                        if let Some(c) = block.get_mut(g) {
                            c.set_logged(gen);
                        }
                        if let Some(m) = model.get_mut(&g) {
                            m.1 = gen;
                        }
                    }
                    Op::Remove(g) => {
                        let got = block.remove(g).map(|c| (c.count(), c.logged()));
                        prop_assert_eq!(got, model.remove(&g));
                    }
                    Op::TakeAll => {
                        let mut taken = BTreeMap::new();
                        let next = block.pane().wrapping_add(1);
                        block.move_to(next, |g, c| {
                            taken.insert(g, (c.count(), c.logged()));
                        });
                        prop_assert_eq!(&taken, &model);
                        prop_assert_eq!(block.pane(), next);
                        model.clear();
                        // (an array stays one: the block keeps its box)
                    }
                    Op::ClearLogged => {
                        block.clear_logged();
                        model.values_mut().for_each(|m| m.1 = 0);
                    }
                }
                let mut held = BTreeMap::new();
                block.for_each(|g, c| {
                    held.insert(g, (c.count(), c.logged()));
                });
                prop_assert_eq!(&held, &model);
                prop_assert_eq!(block.len(), model.len());
                prop_assert_eq!(block.is_empty(), model.is_empty());
                for g in 0..(DENSE as u32 + 2) {
                    prop_assert_eq!(block.get(g).map(|c| (c.count(), c.logged())), model.get(&g).copied());
                }
            }
        }
    }
}

//! A replay's memory bound (`[exact_at_seal] max_replay_keys`): the passes of `certify.rs`
//! run within a budget of items counted exactly at once, split by item-hash ranges when one
//! map would outgrow it, and give up — the list stays approximate — only when no pass that
//! could prove the list fits.
//!
//! **Splitting.** A pass counts the items whose estimate reaches its threshold `T`. When its
//! map would hold more than `max_keys` items it stops, and the hash space is halved: each half
//! re-reads the input counting only its own items (a half that still overflows is halved
//! again), down to `max_ranges` ranges. The halves' top-K lists merge into the pass's top-K
//! (the ranking is a total order), and their counts add up: the pass's result is the one an
//! unsplit pass would give.
//!
//! **Giving up, deterministically.** A pass from `T` proves the list iff `T ≤ c_K`, the exact
//! K-th count (1 when fewer than K items were seen), and the items it needs are a subset of the
//! ones every lower threshold needs. So a proving pass fits iff the pass from `c_K` fits
//! ("fits": no finest range holds more than `max_keys` counted items), and [`replay_within`]
//! searches thresholds until it finds one that proves and fits, or knows `c_K` does not fit.
//! The outcome — exact list or over budget — depends only on the input, the count-min table
//! (the cell-wise sum of every event, whatever the worker count or order) and the budget; not
//! on the first threshold, which depends on the approximate list.
//!
//! **Threads and processes.** Each read goes over the instance's parts (partition ranges) on
//! up to `run.workers` threads (`replay_count`), and in a cluster on every process that owns
//! some (`replay_pass`); `max_keys` bounds the pass's merged map, so the outcome, the
//! certificate and the stats are the same for any thread or process count, and each thread's
//! map holds at most `max_keys` items (at most `threads × max_keys` at once per process).

use crate::certify::{certify, Certificate};
use crate::record::{ItemId, RankedItem};
use crate::replay_count::{Counted, FxMap};
use crate::replay_pass::{CountPass, PassRule};
use crate::topk::top_k;
use serde::{Deserialize, Serialize};
use std::hash::Hash;

/// Default items one replay map may hold (~100 bytes each: tens of MB).
pub const DEFAULT_MAX_REPLAY_KEYS: usize = 250_000;
/// Default most hash ranges a pass is split into.
pub const DEFAULT_MAX_KEY_RANGES: u32 = 16;
/// The largest `max_key_ranges` (each range re-reads the instance's input).
pub const MAX_KEY_RANGES_LIMIT: u32 = 1024;

/// How much a replay may count exactly at once: at most `max_keys` items in one map, a pass
/// split into at most `max_ranges` hash ranges (a power of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayBudget {
    max_keys: usize,
    max_ranges: u32,
}

impl Default for ReplayBudget {
    fn default() -> ReplayBudget {
        ReplayBudget {
            max_keys: DEFAULT_MAX_REPLAY_KEYS,
            max_ranges: DEFAULT_MAX_KEY_RANGES,
        }
    }
}

impl ReplayBudget {
    /// A budget; `Err` says which value is out of range.
    pub fn new(max_keys: usize, max_ranges: u32) -> Result<ReplayBudget, String> {
        if max_keys == 0 {
            return Err("max_replay_keys: must be positive".into());
        }
        if !max_ranges.is_power_of_two() || max_ranges > MAX_KEY_RANGES_LIMIT {
            return Err(format!(
                "max_key_ranges: must be a power of two between 1 and {MAX_KEY_RANGES_LIMIT}, got {max_ranges}"
            ));
        }
        Ok(ReplayBudget { max_keys, max_ranges })
    }

    /// Most items one map holds.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Most hash ranges a pass is split into.
    pub fn max_ranges(&self) -> u32 {
        self.max_ranges
    }
}

/// The item hashes whose top `bits` bits are `index` (`bits` 0: every hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRange {
    bits: u32,
    index: u64,
}

impl KeyRange {
    /// Every hash.
    pub const ALL: KeyRange = KeyRange { bits: 0, index: 0 };

    /// Whether `hash` lies in it.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        self.bits == 0 || hash >> (64 - self.bits) == self.index
    }

    /// How many ranges of its size cover every hash.
    pub fn ranges(&self) -> u64 {
        1 << self.bits
    }

    /// Its two halves, lower first.
    fn halves(self) -> [KeyRange; 2] {
        let bits = self.bits + 1;
        [
            KeyRange {
                bits,
                index: self.index << 1,
            },
            KeyRange {
                bits,
                index: (self.index << 1) | 1,
            },
        ]
    }
}

/// What a budgeted replay did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Thresholds tried (the certificate's passes when it ended exact).
    pub passes: u32,
    /// Reads of the instance's input (one per range of every pass).
    pub reads: u32,
    /// The most items one map held.
    pub peak_keys: usize,
    /// The most ranges a pass was split into.
    pub ranges: u32,
}

/// How a budgeted replay ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replayed {
    /// The exact list, with what proves it.
    Exact(Vec<RankedItem>, Certificate, ReplayStats),
    /// No pass that proves the list fits the budget: it stays approximate.
    OverBudget(ReplayStats),
}

/// What one pass found: every item from its threshold counted (the ranges' top-K lists and how
/// many were counted), or a finest range over budget.
enum Pass {
    Fits(Vec<(ItemId, u64)>, u64),
    Over,
}

/// The exact top-`k` of list `list` of an instance (or that it does not fit `budget`), counting
/// from `first` with the list's estimate (never below an item's count; every estimate
/// `< upper`), each pass over the whole input by `count` (in parallel: `replay_count`, and
/// over processes: `replay_pass`). The result is the same however `count` spreads the input.
pub fn replay_within<K: CountedKey, E: Send>(
    list: u32,
    upper: u64,
    k: usize,
    first: u64,
    budget: ReplayBudget,
    count: &CountPass<'_, K, E>,
) -> Result<Replayed, E> {
    let mut stats = ReplayStats::default();
    // every threshold ≤ `lo` overflows; `c_K` < `hi`; `c_K` ≥ `floor` (`c_K` is at least 1)
    let (mut lo, mut hi, mut floor) = (0u64, upper.max(2), 1u64);
    let mut t = first.max(1);
    loop {
        stats.passes += 1;
        match pass(list, k, t, budget, &mut stats, count)? {
            Pass::Over => lo = lo.max(t),
            Pass::Fits(kept, counted) => match certify(kept, k, t) {
                Ok(items) => {
                    let certificate = Certificate {
                        threshold: t,
                        counted,
                        passes: stats.passes,
                    };
                    return Ok(Replayed::Exact(items, certificate, stats));
                }
                Err(next) => {
                    hi = hi.min(t);
                    floor = floor.max(next);
                }
            },
        }
        if hi <= lo.saturating_add(1) {
            return Ok(Replayed::OverBudget(stats));
        }
        // `floor` proves the list; else halve the thresholds still in question
        t = if floor > lo { floor } else { lo + (hi - lo) / 2 };
    }
}

/// One pass from threshold `t`, split into halves of the hash space while a range overflows.
fn pass<K: CountedKey, E: Send>(
    list: u32,
    k: usize,
    t: u64,
    budget: ReplayBudget,
    stats: &mut ReplayStats,
    count: &CountPass<'_, K, E>,
) -> Result<Pass, E> {
    let (mut kept, mut counted) = (Vec::new(), 0u64);
    let mut todo = vec![KeyRange::ALL];
    while let Some(range) = todo.pop() {
        stats.reads += 1;
        stats.ranges = stats.ranges.max(range.ranges() as u32);
        let counts = match count(&PassRule::only(list, t, range), budget.max_keys)? {
            Counted::Fits(counts) => counts,
            Counted::Over => {
                // the merged map reached the budget before the key that overflowed it
                stats.peak_keys = stats.peak_keys.max(budget.max_keys);
                if range.ranges() >= u64::from(budget.max_ranges) {
                    return Ok(Pass::Over);
                }
                let [low, high] = range.halves();
                todo.push(high);
                todo.push(low);
                continue;
            }
        };
        stats.peak_keys = stats.peak_keys.max(counts.len());
        let per_item = per_item(counts);
        counted += per_item.len() as u64;
        let ranked = per_item
            .into_iter()
            .map(|(item_id, count)| RankedItem {
                item_id,
                count,
                trend: None,
            })
            .collect();
        kept.extend(top_k(ranked, k).into_iter().map(|r| (r.item_id, r.count)));
    }
    Ok(Pass::Fits(kept, counted))
}

/// What a replay counts: an item's events (the key is the item), or, for a distinct-user
/// list, one (item, user) pair per key — an item's count is then its number of keys. Either
/// way the budget counts keys: what the maps hold.
pub trait CountedKey: Hash + Eq + Clone + Send + Sync {
    /// The item the key counts for.
    fn item(&self) -> &ItemId;
    /// Whether the key is one (item, user) pair (its events count once).
    fn is_pair(&self) -> bool;
    /// Which list of the replay it counts for (`replay_pass::PassRule`).
    fn list(&self) -> u32;
}

impl CountedKey for ItemId {
    fn item(&self) -> &ItemId {
        self
    }

    fn is_pair(&self) -> bool {
        false
    }

    /// An item alone counts for the replay's one list.
    fn list(&self) -> u32 {
        0
    }
}

/// Per item: the sum of its keys' counts (events) or its number of keys (pairs).
pub fn per_item<K: CountedKey>(counts: FxMap<K, u64>) -> Vec<(ItemId, u64)> {
    let mut items: FxMap<ItemId, u64> = FxMap::default();
    for (key, count) in counts {
        let add = if key.is_pair() { 1 } else { count };
        match items.get_mut(key.item()) {
            Some(c) => *c += add,
            None => {
                items.insert(key.item().clone(), add);
            }
        }
    }
    items.into_iter().collect()
}

#[cfg(test)]
mod tests;

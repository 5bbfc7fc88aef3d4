//! Bounded dead letters: per source and block of [`BLOCK`] positions, the first `cap` dead
//! letters (in position, reason, detail, raw order) are kept whole; every later one of the
//! block is only counted, per reason, into one summary (count, first and last position).
//!
//! The rule depends on the input alone, never on batching, epochs or checkpoint timing: within
//! a source, dead letters arrive in position order epoch by epoch (an epoch's letters in any
//! order), so folding complete epochs in order, each sorted, sees a block's letters in order.
//! What came before (earlier epochs, earlier runs) is the block's count so far
//! ([`BlockCounts`]), which a restart reads back from the store.
//!
//! Memory stays bounded while letters arrive too: an epoch still open holds at most `cap`
//! whole letters per block ([`EpochLetters`]), the smallest so far; a larger one is counted at
//! once.

use crate::record::{DeadLetter, DeadReason, PartitionId};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Positions per block: the unit the cap applies to.
pub const BLOCK: u64 = 1_000_000;

/// The block of a position.
pub fn block_of(position: u64) -> u64 {
    position / BLOCK
}

/// The positions of block `b`, inclusive.
pub fn block_range(b: u64) -> (u64, u64) {
    let lo = b.saturating_mul(BLOCK);
    (lo, lo.saturating_add(BLOCK - 1))
}

/// The dead letters of one (source, block, reason) beyond the block's cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The source's partition.
    pub partition: PartitionId,
    /// How many letters.
    pub count: u64,
    /// The least position.
    pub first: u64,
    /// The greatest position.
    pub last: u64,
}

impl Summary {
    fn of(l: &DeadLetter) -> Summary {
        Summary {
            partition: l.partition,
            count: 1,
            first: l.position,
            last: l.position,
        }
    }

    /// Adds `o`'s letters.
    pub fn merge(&mut self, o: &Summary) {
        self.count += o.count;
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
    }
}

/// A dead letter in the rule's order.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ordered(DeadLetter);

impl Ordered {
    fn key(&self) -> (u64, DeadReason, &str, &[u8], PartitionId) {
        let l = &self.0;
        (l.position, l.reason, l.detail.as_str(), l.raw.as_slice(), l.partition)
    }
}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Ordered {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key().cmp(&o.key())
    }
}

/// Summaries by (source, block, reason).
pub type Summaries<K> = BTreeMap<(K, u64, DeadReason), Summary>;

fn add_summary<K: Ord>(into: &mut Summaries<K>, key: (K, u64, DeadReason), s: &Summary) {
    into.entry(key).and_modify(|t| t.merge(s)).or_insert(*s);
}

/// One block's letters of an open epoch: the `cap` smallest whole (a multiset: equal letters
/// are not one), the rest counted.
#[derive(Debug, Default)]
struct Held {
    whole: BTreeMap<Ordered, usize>,
    held: usize,
    rest: BTreeMap<DeadReason, Summary>,
}

/// The dead letters of one epoch while it is open, bounded by `cap` whole letters per
/// (source, block).
#[derive(Debug)]
pub struct EpochLetters<K> {
    cap: usize,
    blocks: BTreeMap<(K, u64), Held>,
}

impl<K: Ord + Clone> EpochLetters<K> {
    /// No letters yet.
    pub fn new(cap: usize) -> Self {
        EpochLetters {
            cap,
            blocks: BTreeMap::new(),
        }
    }

    /// Adds a letter of source `key`.
    pub fn add(&mut self, key: K, letter: DeadLetter) {
        let held = self.blocks.entry((key, block_of(letter.position))).or_default();
        *held.whole.entry(Ordered(letter)).or_insert(0) += 1;
        held.held += 1;
        if held.held > self.cap {
            if let Some(mut last) = held.whole.last_entry() {
                let s = Summary::of(&last.key().0);
                held.rest
                    .entry(last.key().0.reason)
                    .and_modify(|t| t.merge(&s))
                    .or_insert(s);
                *last.get_mut() -= 1;
                if *last.get() == 0 {
                    last.remove();
                }
                held.held -= 1;
            }
        }
    }
}

/// What the rule made of some epochs: whole letters and summaries (to add to the stored ones).
#[derive(Debug, PartialEq, Eq)]
pub struct Folded<K: Ord> {
    /// Letters kept whole, by source and block, each block's in the rule's order.
    pub whole: Vec<(K, DeadLetter)>,
    /// Letters counted only.
    pub summaries: Summaries<K>,
    /// Blocks that went over their cap here (for the first time).
    pub overflowed: Vec<(K, u64)>,
}

impl<K: Ord> Default for Folded<K> {
    fn default() -> Self {
        Folded {
            whole: Vec::new(),
            summaries: BTreeMap::new(),
            overflowed: Vec::new(),
        }
    }
}

impl<K: Ord + Clone> Folded<K> {
    /// Adds a later fold (of later epochs).
    pub fn extend(&mut self, later: Folded<K>) {
        self.whole.extend(later.whole);
        for (k, s) in later.summaries {
            add_summary(&mut self.summaries, k, &s);
        }
        self.overflowed.extend(later.overflowed);
    }

    /// How many letters were counted only.
    pub fn summarised(&self) -> u64 {
        self.summaries.values().map(|s| s.count).sum()
    }
}

/// Per (source, block), how many dead letters the output has already (whole or counted).
#[derive(Clone, Debug, Default)]
pub struct BlockCounts<K> {
    cap: usize,
    seen: BTreeMap<(K, u64), u64>,
}

impl<K: Ord + Clone> BlockCounts<K> {
    /// The counts of a store holding `prior` ((source, block) → letters, whole or counted).
    pub fn new(cap: usize, prior: impl IntoIterator<Item = ((K, u64), u64)>) -> Self {
        let mut seen = BTreeMap::new();
        for (k, n) in prior {
            *seen.entry(k).or_insert(0) += n;
        }
        let mut counts = BlockCounts { cap, seen };
        counts.forget_passed_blocks();
        counts
    }

    /// Keeps only each source's newest block: positions only rise within a source (epoch by
    /// epoch, and a restore drops the letters the store already holds), so an older block is
    /// never added to again, and the map stays one entry per source over any run length.
    fn forget_passed_blocks(&mut self) {
        let mut newest: BTreeMap<K, u64> = BTreeMap::new();
        for (k, b) in self.seen.keys() {
            let n = newest.entry(k.clone()).or_insert(*b);
            *n = (*n).max(*b);
        }
        self.seen.retain(|(k, b), _| newest.get(k) == Some(b));
    }

    /// The (source, block) entries held (one per source that had dead letters).
    pub fn tracked(&self) -> usize {
        self.seen.len()
    }

    /// The cap per block.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Applies the rule to the next complete epoch.
    pub fn fold(&mut self, epoch: EpochLetters<K>) -> Folded<K> {
        let mut out = Folded::default();
        let cap = self.cap as u64;
        for ((key, block), held) in epoch.blocks {
            let seen = self.seen.entry((key.clone(), block)).or_insert(0);
            let before = *seen;
            for (Ordered(l), n) in held.whole {
                for _ in 0..n {
                    if *seen < cap {
                        out.whole.push((key.clone(), l.clone()));
                    } else {
                        add_summary(&mut out.summaries, (key.clone(), block, l.reason), &Summary::of(&l));
                    }
                    *seen += 1;
                }
            }
            for (reason, s) in held.rest {
                add_summary(&mut out.summaries, (key.clone(), block, reason), &s);
                *seen += s.count;
            }
            if before <= cap && *seen > cap {
                out.overflowed.push((key, block));
            }
        }
        self.forget_passed_blocks();
        out
    }
}

#[cfg(test)]
mod tests;

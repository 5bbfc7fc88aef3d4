//! Bounded-memory counting: sketches that keep a top-K list in fixed memory, with a stated error.
//!
//! Exact counting costs memory per distinct item; a sketch costs a fixed table whatever the
//! number of items, and pays in accuracy. Two implementations stand behind one small trait,
//! [`TopKSketch`], so a window can use either:
//!
//! - [`CountMinTopK`] (`sketch/cms_topk.rs`): a [`CountMinSketch`] (`sketch/cms.rs`) and a
//!   [`Candidates`] list (`sketch/candidates.rs`) beside it. Counts are **upper bounds**: never
//!   below the true count, and each at most ⌈(e/w)·N⌉ above it with probability ≥ 1 − e^(−d)
//!   (N the events added, w × d the table). The sketch merges by cell-wise addition.
//! - [`HeavyKeeper`] (`sketch/heavykeeper.rs`), the algorithm behind Redis `TOPK`: buckets of
//!   (fingerprint, count) that decay exponentially on collision, and the same candidate list.
//!   Counts are **lower bounds** (never above the true count, barring a 32-bit fingerprint
//!   collision in a bucket), with no bound on how far below; it does not merge.
//!
//! Distinct counts (`count = "distinct_users"`) use [`Hll`] (`sketch/hll.rs`), a HyperLogLog
//! per candidate: a few hundred bytes for any number of users, 1.04/√m relative error.
//!
//! Both index their rows from the pinned item hash (`sketch/rows.rs`), and everything is
//! deterministic: the same events in the same order give the same state, bit for bit
//! (HeavyKeeper's decay draws come from a seeded generator kept in its state). Event *order*
//! matters for the candidate lists, conservative update and HeavyKeeper; only the plain
//! count-min cells are order-independent. Snapshots (`sketch/snapshot.rs`) are plain data,
//! encoded with the crate's [`snapshot::encode`](crate::snapshot::encode) and validated
//! against the expected shape before a restore.

mod candidates;
mod cms;
mod cms_topk;
mod distinct_topk;
mod heavykeeper;
mod hll;
mod rows;
mod snapshot;

pub use candidates::{Candidates, MAX_CANDIDATES};
pub use cms::{Cells, CmsShape, CountMinSketch};
pub use cms_topk::CountMinTopK;
pub use distinct_topk::DistinctTopK;
pub use heavykeeper::{Bucket, HeavyKeeper, HkShape, DECAY_BASE};
pub use hll::{Hll, HLL_BITS};
pub use rows::{cell, fingerprint, DEFAULT_SEED, MAX_CELLS, MAX_DEPTH, MAX_WIDTH};
pub use snapshot::{CountMinTopKSnapshot, HeavyKeeperSnapshot};

use crate::record::RankedItem;

/// What a sketch's counts promise about the true counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorBound {
    /// Every count is at least the true count, and at most `at_most` above it (each count with
    /// probability ≥ 1 − δ; count-min).
    Overcount {
        /// ⌈(e/w)·N⌉: the over-count bound.
        at_most: u64,
    },
    /// Every count is at most the true count (barring a fingerprint collision); how far below
    /// is not bounded (HeavyKeeper).
    Undercount,
}

/// A fixed-memory counter that keeps a top-K list: what a sketch window needs of either sketch.
pub trait TopKSketch {
    /// Counts `n` events of `item`; `hash` is `hash::item_hash(item)`.
    fn add(&mut self, item: &str, hash: u64, n: u32);
    /// The estimated count of `item` (a candidate's listed count when it is one).
    fn estimate(&self, item: &str, hash: u64) -> u64;
    /// The best `k` candidates (at most the candidate capacity), in ranking order.
    fn top(&self, k: usize) -> Vec<RankedItem>;
    /// Events added (N), saturating.
    fn total(&self) -> u64;
    /// What the counts promise.
    fn error_bound(&self) -> ErrorBound;
    /// Heap bytes of the whole state (table and candidates).
    fn heap_bytes(&self) -> usize;
}

/// Why a sketch cannot be built or merged.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SketchError {
    /// A parameter is out of range (says which, and the range).
    #[error("{0}")]
    Parameters(String),
    /// Merging sketches of different shapes (width, depth, seed, update rule or capacity).
    #[error("cannot merge sketches of different shapes: {0} and {1}")]
    ShapeMismatch(String, String),
}

//! How a window counts: exactly (the pane counter), with a sketch (fixed memory, stated error),
//! exactly until its instances hold too many items (`auto`), or exactly with a sketch beside it
//! to measure the sketch (`both`).
//!
//! The exact pane counter (`counter.rs`) counts the windows for which
//! [`Counting::counts_exactly`] holds; the sketch counter (`sketch_counter.rs`) counts those
//! with a [`Counting::sketch`]. A `both` window is counted by the two.

use crate::record::RankedItem;
use crate::sketch::{CmsShape, CountMinTopK, HeavyKeeper, HkShape, SketchError, TopKSketch};
use serde::{Deserialize, Serialize};

/// How one window counts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Counting {
    /// Exact counts (the pane counter); the default.
    Exact,
    /// Counts from a sketch of every instance.
    Sketch(SketchSpec),
    /// Exact per instance until a worker's share of `max_items` distinct items is passed, then
    /// the instance's counts fold into a sketch and it goes on there.
    Auto {
        /// The sketch an instance folds into.
        sketch: SketchSpec,
        /// Distinct items per instance (summed over workers) before it folds.
        max_items: u64,
    },
    /// Exact counts, published, and a sketch beside them, compared at every revision.
    Both(SketchSpec),
}

/// Which sketch, and how large.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SketchSpec {
    /// Count-min with candidates, or HeavyKeeper.
    pub algorithm: Algorithm,
    /// The over-count bound as a fraction of N (count-min: w = ⌈e/ε⌉; HeavyKeeper: its width).
    pub epsilon: f64,
    /// The probability that one count exceeds its bound (d = ⌈ln(1/δ)⌉ rows).
    pub delta: f64,
    /// How many candidates each instance keeps (≥ the window's k).
    pub candidates: usize,
    /// Count-min conservative update (smaller over-counts; order-dependent cells).
    pub conservative: bool,
    /// `sketch` and `auto` count-min windows: make each sealed list exact by a sketch-guided
    /// replay of the instance's input (`certify.rs`, `replay.rs`).
    #[serde(default)]
    pub exact_at_seal: bool,
}

/// The two sketches behind [`crate::sketch::TopKSketch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Algorithm {
    /// [`CountMinTopK`]: counts never low, high by at most ⌈ε·N⌉ (probability 1 − δ).
    Cms,
    /// [`HeavyKeeper`]: counts never high, low by an unbounded amount.
    HeavyKeeper,
}

impl Counting {
    /// Whether the exact pane counter counts this window (`exact` and `both`).
    pub fn counts_exactly(&self) -> bool {
        matches!(self, Counting::Exact | Counting::Both(_))
    }

    /// The sketch the sketch counter keeps for this window, if any.
    pub fn sketch(&self) -> Option<&SketchSpec> {
        match self {
            Counting::Exact => None,
            Counting::Sketch(s) | Counting::Both(s) | Counting::Auto { sketch: s, .. } => Some(s),
        }
    }

    /// Whether sealed lists are made exact by a replay (`exact_at_seal`).
    pub fn exact_at_seal(&self) -> bool {
        self.publishes_sketch() && self.sketch().is_some_and(|s| s.exact_at_seal)
    }

    /// Whether the published list comes from the sketch counter (`sketch` and `auto`).
    pub fn publishes_sketch(&self) -> bool {
        matches!(self, Counting::Sketch(_) | Counting::Auto { .. })
    }
}

impl SketchSpec {
    /// The count-min shape for ε and δ (also HeavyKeeper's width and depth).
    pub fn cms_shape(&self) -> Result<CmsShape, SketchError> {
        Ok(CmsShape::from_error(self.epsilon, self.delta)?.conservative(self.conservative))
    }

    /// An empty sketch.
    pub fn new_sketch(&self) -> Result<AnySketch, SketchError> {
        let shape = self.cms_shape()?;
        Ok(match self.algorithm {
            Algorithm::Cms => AnySketch::Cms(CountMinTopK::new(shape, self.candidates)?),
            Algorithm::HeavyKeeper => AnySketch::Hk(HeavyKeeper::new(
                HkShape::new(shape.width(), shape.depth())?,
                self.candidates,
            )?),
        })
    }

    /// The largest over-count of any count of an instance of `events` events: ⌈(e/w)·N⌉ for
    /// count-min (w from ε, so at most ⌈ε·N⌉), 0 for HeavyKeeper (whose counts are low, if off).
    pub fn error_bound(&self, events: u64) -> u64 {
        match (self.algorithm, self.cms_shape()) {
            (Algorithm::Cms, Ok(shape)) => (shape.epsilon() * events as f64).ceil() as u64,
            (Algorithm::Cms, Err(_)) => events, // (validated: unreachable) the trivial bound
            (Algorithm::HeavyKeeper, _) => 0,
        }
    }
}

/// Either sketch, so that one window's instances can use the configured one.
pub enum AnySketch {
    /// Count-min with candidates.
    Cms(CountMinTopK),
    /// HeavyKeeper.
    Hk(HeavyKeeper),
}

impl AnySketch {
    fn inner(&self) -> &dyn TopKSketch {
        match self {
            AnySketch::Cms(s) => s,
            AnySketch::Hk(s) => s,
        }
    }

    /// Counts `n` events of `item` (any `n`: split into 32-bit adds).
    #[inline]
    pub fn add(&mut self, item: &str, hash: u64, mut n: u64) {
        while n > 0 {
            let step = n.min(u64::from(u32::MAX)) as u32;
            match self {
                AnySketch::Cms(s) => s.add(item, hash, step),
                AnySketch::Hk(s) => s.add(item, hash, step),
            }
            n -= u64::from(step);
        }
    }

    /// The best `k` candidates, in ranking order.
    pub fn top(&self, k: usize) -> Vec<RankedItem> {
        self.inner().top(k)
    }

    /// Heap bytes of the whole state.
    pub fn heap_bytes(&self) -> usize {
        self.inner().heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(algorithm: Algorithm) -> SketchSpec {
        SketchSpec {
            algorithm,
            epsilon: 0.01,
            delta: 0.01,
            candidates: 8,
            conservative: false,
            exact_at_seal: false,
        }
    }

    #[test]
    fn modes_say_who_counts_them() {
        let s = spec(Algorithm::Cms);
        let modes = [
            (Counting::Exact, true, false, false),
            (Counting::Sketch(s), false, true, true),
            (
                Counting::Auto {
                    sketch: s,
                    max_items: 5,
                },
                false,
                true,
                true,
            ),
            (Counting::Both(s), true, true, false),
        ];
        for (mode, exact, sketch, publishes) in modes {
            assert_eq!(mode.counts_exactly(), exact, "{mode:?}");
            assert_eq!(mode.sketch().is_some(), sketch, "{mode:?}");
            assert_eq!(mode.publishes_sketch(), publishes, "{mode:?}");
        }
    }

    #[test]
    fn error_bounds_are_the_sketches_own() {
        let cms = spec(Algorithm::Cms);
        let mut s = cms.new_sketch().unwrap();
        s.add("a", crate::hash::item_hash("a"), 10_000);
        let AnySketch::Cms(inner) = &s else { panic!("count-min") };
        assert_eq!(cms.error_bound(10_000), inner.sketch().error_bound());
        assert!(cms.error_bound(10_000) <= 100, "at most ⌈ε·N⌉");
        assert_eq!(spec(Algorithm::HeavyKeeper).error_bound(10_000), 0);
    }

    #[test]
    fn adds_of_more_than_32_bits_are_split() {
        let mut s = spec(Algorithm::Cms).new_sketch().unwrap();
        let n = u64::from(u32::MAX) + 7;
        s.add("big", crate::hash::item_hash("big"), n);
        assert_eq!(s.top(1)[0].count, n);
    }
}

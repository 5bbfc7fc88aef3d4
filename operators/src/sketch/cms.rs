//! The count-min sketch: d rows of w counters; an item adds to one counter per row and its
//! estimate is the smallest of them.
//!
//! Contract (Cormode & Muthukrishnan, 2005): an estimate is **never below** the item's true
//! count, and it is at most ⌈(e/w)·N⌉ above it (N = events added) with probability
//! ≥ 1 − e^(−d) for each item. [`CmsShape::from_error`] sizes the table from the wanted
//! (ε, δ) as w = ⌈e/ε⌉, d = ⌈ln(1/δ)⌉, so that bound is ≤ ⌈ε·N⌉ with probability ≥ 1 − δ.
//! (Redis's `CMS.INITBYPROB` sizes with w = ⌈2/ε⌉, d = ⌈log₂(1/δ)⌉ instead: a Markov-style
//! bound; the shapes differ, the guarantee's form is the same.)
//!
//! - **Conservative update** (optional, part of the shape): an add raises each of the item's
//!   counters only to (its current estimate + n). Estimates stay upper bounds and are never
//!   higher than plain update's, but the cells then depend on event order.
//! - **Merge** is cell-wise addition of sketches of the same shape: for plain update the result
//!   is exactly the sketch of both streams; for conservative update it is cell-wise at most
//!   that, and still never under-counts.
//! - **Counters** are 4 bytes while N ≤ u32::MAX (every cell is at most N), and widen once to
//!   8 bytes when N would pass it: no counter ever saturates below 2^64, so estimates never
//!   under-count at any volume.

use super::rows::{RowCells, DEFAULT_SEED, MAX_CELLS, MAX_DEPTH, MAX_WIDTH};
use super::SketchError;
use serde::{Deserialize, Serialize};
use std::f64::consts::E;

/// The shape of a count-min sketch: width, depth, the seed of its row hashes and its update
/// rule. Sketches merge only with sketches of the same shape, and a snapshot restores only
/// into the shape it was taken with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CmsShape {
    width: u32,
    depth: u32,
    seed: u64,
    conservative: bool,
}

impl CmsShape {
    /// A `width` × `depth` shape (plain update, the pinned seed).
    pub fn new(width: u32, depth: u32) -> Result<CmsShape, SketchError> {
        if width == 0 || width > MAX_WIDTH {
            return Err(SketchError::Parameters(format!(
                "sketch width {width} is not in 1..={MAX_WIDTH}"
            )));
        }
        if depth == 0 || depth as usize > MAX_DEPTH {
            return Err(SketchError::Parameters(format!(
                "sketch depth {depth} is not in 1..={MAX_DEPTH}"
            )));
        }
        if u64::from(width) * u64::from(depth) > MAX_CELLS {
            return Err(SketchError::Parameters(format!(
                "sketch of {width} × {depth} cells is over the {MAX_CELLS} cell limit"
            )));
        }
        Ok(CmsShape {
            width,
            depth,
            seed: DEFAULT_SEED,
            conservative: false,
        })
    }

    /// The shape for an over-count of at most ε·N with probability 1 − δ: w = ⌈e/ε⌉,
    /// d = ⌈ln(1/δ)⌉. ε and δ must be in (0, 1), and the table within the limits of
    /// [`new`](Self::new) (ε ≥ e/2^26, δ ≥ e^−16).
    pub fn from_error(epsilon: f64, delta: f64) -> Result<CmsShape, SketchError> {
        let open_unit = |x: f64| x > 0.0 && x < 1.0;
        if !open_unit(epsilon) {
            return Err(SketchError::Parameters(format!(
                "sketch epsilon {epsilon} is not in (0, 1)"
            )));
        }
        if !open_unit(delta) {
            return Err(SketchError::Parameters(format!(
                "sketch delta {delta} is not in (0, 1)"
            )));
        }
        let width = (E / epsilon).ceil();
        let depth = (1.0 / delta).ln().ceil().max(1.0);
        if width > f64::from(MAX_WIDTH) || depth > MAX_DEPTH as f64 {
            return Err(SketchError::Parameters(format!(
                "sketch epsilon {epsilon}, delta {delta} need {width} × {depth} cells: \
                 over the limits (width ≤ {MAX_WIDTH}, depth ≤ {MAX_DEPTH})"
            )));
        }
        CmsShape::new(width as u32, depth as u32)
    }

    /// This shape with conservative update on or off.
    pub fn conservative(self, on: bool) -> CmsShape {
        CmsShape {
            conservative: on,
            ..self
        }
    }

    /// This shape with another seed for its row hashes (row `r` uses `seed + r`).
    pub fn with_seed(self, seed: u64) -> CmsShape {
        CmsShape { seed, ..self }
    }

    /// Columns per row.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Rows.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The seed of row 0.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Whether adds are conservative.
    pub fn is_conservative(&self) -> bool {
        self.conservative
    }

    /// Cells in the table (width × depth).
    pub fn cells(&self) -> usize {
        self.width as usize * self.depth as usize
    }

    /// e/w: the over-count bound as a fraction of N.
    pub fn epsilon(&self) -> f64 {
        E / f64::from(self.width)
    }

    /// e^(−d): the probability that one estimate exceeds its bound.
    pub fn delta(&self) -> f64 {
        (-f64::from(self.depth)).exp()
    }

    #[inline]
    fn row_cells(&self, hash: u64) -> RowCells {
        RowCells::new(hash, self.seed, self.width, self.depth)
    }
}

impl std::fmt::Display for CmsShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rule = if self.conservative { "conservative" } else { "plain" };
        write!(f, "{} × {} ({rule}, seed {:#x})", self.width, self.depth, self.seed)
    }
}

/// The counters, row-major (`row · width + column`): 4 bytes each while the sketch's total
/// fits in a `u32`, 8 bytes after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cells {
    /// 4-byte counters.
    U32(Vec<u32>),
    /// 8-byte counters.
    U64(Vec<u64>),
}

impl Cells {
    /// The number of counters.
    pub fn len(&self) -> usize {
        match self {
            Cells::U32(c) => c.len(),
            Cells::U64(c) => c.len(),
        }
    }

    /// Whether there are no counters (never, in a valid sketch).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counter `i`.
    pub fn get(&self, i: usize) -> u64 {
        match self {
            Cells::U32(c) => u64::from(c[i]),
            Cells::U64(c) => c[i],
        }
    }

    /// Every counter, widened.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// A counter width.
trait Cell: Copy {
    fn get(self) -> u64;
    /// `v` as a counter (callers keep `v` ≤ the sketch's total, which fits).
    fn put(v: u64) -> Self;
}

impl Cell for u32 {
    #[inline]
    fn get(self) -> u64 {
        u64::from(self)
    }
    #[inline]
    fn put(v: u64) -> u32 {
        u32::try_from(v).unwrap_or(u32::MAX)
    }
}

impl Cell for u64 {
    #[inline]
    fn get(self) -> u64 {
        self
    }
    #[inline]
    fn put(v: u64) -> u64 {
        v
    }
}

/// Adds `n` to the cells `idx` and returns the new estimate.
#[inline]
fn add_cells<C: Cell>(cells: &mut [C], idx: &[usize], n: u64, conservative: bool) -> u64 {
    if conservative {
        let target = min_of(cells, idx).saturating_add(n);
        for &i in idx {
            // a store either way: no branch to mispredict on which rows are raised
            cells[i] = C::put(cells[i].get().max(target));
        }
        target
    } else {
        let mut estimate = u64::MAX;
        for &i in idx {
            let v = cells[i].get().saturating_add(n);
            cells[i] = C::put(v);
            estimate = estimate.min(v);
        }
        estimate
    }
}

#[inline]
fn min_of<C: Cell>(cells: &[C], idx: &[usize]) -> u64 {
    idx.iter().map(|&i| cells[i].get()).min().unwrap_or(0)
}

fn add_all<A: Cell, B: Cell>(into: &mut [A], from: &[B]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = A::put(a.get().saturating_add(b.get()));
    }
}

/// A count-min sketch (see the module doc for its contract). Serializable for a replay job
/// (`replay.rs`), which checks it with [`CountMinSketch::is_consistent`] when restored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountMinSketch {
    shape: CmsShape,
    total: u64,
    cells: Cells,
}

impl CountMinSketch {
    /// An empty sketch.
    pub fn new(shape: CmsShape) -> CountMinSketch {
        CountMinSketch {
            shape,
            total: 0,
            cells: Cells::U32(vec![0; shape.cells()]),
        }
    }

    /// Rebuilds a sketch from its parts, unchecked: `sketch/snapshot.rs` validates them first.
    pub(crate) fn from_parts(shape: CmsShape, total: u64, cells: Cells) -> CountMinSketch {
        let mut s = CountMinSketch { shape, total, cells };
        if s.total > u64::from(u32::MAX) {
            s.widen();
        }
        s
    }

    /// Whether its cells fit its shape (a deserialized sketch may not).
    pub fn is_consistent(&self) -> bool {
        self.cells.len() == self.shape.cells() && self.shape.width() > 0 && self.shape.depth() > 0
    }

    /// Counts `n` events of the item with pinned hash `hash`; returns its new estimate.
    #[inline]
    pub fn add(&mut self, hash: u64, n: u32) -> u64 {
        if n == 0 {
            return self.estimate(hash);
        }
        if self.total > u64::from(u32::MAX - n) {
            self.widen();
        }
        self.total = self.total.saturating_add(u64::from(n));
        let idx = self.shape.row_cells(hash);
        let conservative = self.shape.conservative;
        match &mut self.cells {
            Cells::U32(c) => add_cells(c, idx.as_slice(), u64::from(n), conservative),
            Cells::U64(c) => add_cells(c, idx.as_slice(), u64::from(n), conservative),
        }
    }

    /// The estimated count of the item with pinned hash `hash`.
    #[inline]
    pub fn estimate(&self, hash: u64) -> u64 {
        let idx = self.shape.row_cells(hash);
        match &self.cells {
            Cells::U32(c) => min_of(c, idx.as_slice()),
            Cells::U64(c) => min_of(c, idx.as_slice()),
        }
    }

    /// Adds `other`'s counters into this one's, cell by cell (same shape only).
    pub fn merge(&mut self, other: &CountMinSketch) -> Result<(), SketchError> {
        if self.shape != other.shape {
            return Err(SketchError::ShapeMismatch(
                self.shape.to_string(),
                other.shape.to_string(),
            ));
        }
        self.total = self.total.saturating_add(other.total);
        if self.total > u64::from(u32::MAX) {
            self.widen();
        }
        match (&mut self.cells, &other.cells) {
            (Cells::U32(a), Cells::U32(b)) => add_all(a, b),
            (Cells::U32(a), Cells::U64(b)) => add_all(a, b),
            (Cells::U64(a), Cells::U32(b)) => add_all(a, b),
            (Cells::U64(a), Cells::U64(b)) => add_all(a, b),
        }
        Ok(())
    }

    /// This sketch minus `base`, cell by cell: the events added since this sketch was `base`
    /// (same shape; `base` must be an earlier state of this sketch, else cells clamp at 0).
    pub fn minus(&self, base: &CountMinSketch) -> Result<CountMinSketch, SketchError> {
        if self.shape != base.shape {
            return Err(SketchError::ShapeMismatch(
                self.shape.to_string(),
                base.shape.to_string(),
            ));
        }
        let total = self.total.saturating_sub(base.total);
        let diff = (0..self.cells.len()).map(|i| self.cells.get(i).saturating_sub(base.cells.get(i)));
        let cells = if total > u64::from(u32::MAX) {
            Cells::U64(diff.collect())
        } else {
            Cells::U32(diff.map(|v| u32::try_from(v).unwrap_or(u32::MAX)).collect())
        };
        Ok(CountMinSketch {
            shape: self.shape,
            total,
            cells,
        })
    }

    /// Events added (N), saturating.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// ⌈(e/w)·N⌉: no estimate is more than this above its true count, each with probability
    /// ≥ 1 − e^(−d) (≤ ⌈ε·N⌉ with probability ≥ 1 − δ for a shape from `from_error(ε, δ)`).
    pub fn error_bound(&self) -> u64 {
        (E * self.total as f64 / f64::from(self.shape.width)).ceil() as u64
    }

    /// The shape.
    pub fn shape(&self) -> &CmsShape {
        &self.shape
    }

    /// The counters, row-major.
    pub fn cells(&self) -> &Cells {
        &self.cells
    }

    /// Heap bytes of the counters.
    pub fn heap_bytes(&self) -> usize {
        match &self.cells {
            Cells::U32(c) => c.capacity() * 4,
            Cells::U64(c) => c.capacity() * 8,
        }
    }

    /// Switches to 8-byte counters (once; no-op after).
    fn widen(&mut self) {
        if let Cells::U32(c) = &self.cells {
            self.cells = Cells::U64(c.iter().map(|&v| u64::from(v)).collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn sketch_of(shape: CmsShape, stream: &[(u16, u32)]) -> CountMinSketch {
        let mut s = CountMinSketch::new(shape);
        for (item, n) in stream {
            s.add(item_hash(&format!("i{item}")), *n);
        }
        s
    }

    fn truth(stream: &[(u16, u32)]) -> HashMap<u16, u64> {
        let mut t = HashMap::new();
        for (item, n) in stream {
            *t.entry(*item).or_insert(0) += u64::from(*n);
        }
        t
    }

    #[test]
    fn shapes_from_error_follow_the_formulas() {
        let s = CmsShape::from_error(0.0001, 0.001).expect("valid");
        assert_eq!((s.width(), s.depth()), (27_183, 7));
        let s = CmsShape::from_error(0.01, 0.5).expect("valid");
        assert_eq!((s.width(), s.depth()), (272, 1));
        assert!(CmsShape::from_error(0.0, 0.1).is_err());
        assert!(CmsShape::from_error(1.0, 0.1).is_err());
        assert!(CmsShape::from_error(f64::NAN, 0.1).is_err());
        assert!(CmsShape::from_error(0.1, 1e-9).is_err(), "depth 21 > 16");
        assert!(CmsShape::from_error(1e-9, 0.1).is_err(), "width past the limit");
        assert!(CmsShape::new(0, 1).is_err());
        assert!(CmsShape::new(1, 17).is_err());
        assert!(CmsShape::new(MAX_WIDTH, 16).is_err(), "cells past the limit");
        let s = CmsShape::new(2048, 4).expect("valid");
        assert!((s.epsilon() - E / 2048.0).abs() < 1e-15);
        assert!((s.delta() - (-4.0f64).exp()).abs() < 1e-15);
    }

    #[test]
    fn error_bound_is_e_over_w_times_n() {
        let mut s = CountMinSketch::new(CmsShape::new(2048, 4).expect("valid"));
        assert_eq!(s.error_bound(), 0);
        for i in 0..200_000u32 {
            s.add(u64::from(i % 977), 1);
        }
        assert_eq!(s.total(), 200_000);
        assert_eq!(s.error_bound(), 266); // ⌈265.45⌉
    }

    /// Past u32::MAX events the counters widen instead of saturating: nothing under-counts.
    #[test]
    fn counters_widen_instead_of_saturating() {
        let mut s = CountMinSketch::new(CmsShape::new(4, 2).expect("valid"));
        let h = item_hash("hot");
        for _ in 0..3 {
            s.add(h, u32::MAX / 2);
        }
        assert!(matches!(s.cells(), Cells::U64(_)));
        assert_eq!(s.estimate(h), 3 * u64::from(u32::MAX / 2));
        assert_eq!(s.heap_bytes(), 8 * 8);
        let mut t = CountMinSketch::new(*s.shape());
        t.add(h, 1);
        t.merge(&s).expect("same shape");
        assert_eq!(t.estimate(h), 3 * u64::from(u32::MAX / 2) + 1);
        let mut u = CountMinSketch::new(*s.shape());
        u.add(h, u32::MAX);
        u.add(h, 1);
        assert_eq!(u.estimate(h), u64::from(u32::MAX) + 1);
    }

    #[test]
    fn merge_refuses_other_shapes() {
        let a = CmsShape::new(64, 3).expect("valid");
        let mut s = CountMinSketch::new(a);
        for other in [
            CmsShape::new(65, 3).expect("valid"),
            CmsShape::new(64, 2).expect("valid"),
            a.with_seed(1),
            a.conservative(true),
        ] {
            let err = s.merge(&CountMinSketch::new(other)).expect_err("other shape");
            assert!(matches!(err, SketchError::ShapeMismatch(..)), "{err}");
        }
        assert_eq!(s.merge(&CountMinSketch::new(a)), Ok(()));
    }

    fn stream() -> impl Strategy<Value = Vec<(u16, u32)>> {
        proptest::collection::vec((0u16..300, 1u32..4), 0..400)
    }

    proptest! {
        /// Never under-counts, plain or conservative, on a table small enough to collide; the
        /// conservative estimate is never above the plain one.
        #[test]
        fn never_under_counts(stream in stream(), width in 1u32..40, depth in 1u32..5) {
            let plain = CmsShape::new(width, depth).expect("valid");
            let p = sketch_of(plain, &stream);
            let c = sketch_of(plain.conservative(true), &stream);
            for (item, count) in truth(&stream) {
                let h = item_hash(&format!("i{}", item));
                prop_assert!(c.estimate(h) >= count);
                prop_assert!(p.estimate(h) >= c.estimate(h));
            }
            let n: u64 = stream.iter().map(|(_, n)| u64::from(*n)).sum();
            prop_assert_eq!(p.total(), n);
            prop_assert_eq!(c.total(), n);
        }

        /// Plain: merge(a, b) has exactly the cells of the sketch of both streams.
        /// Conservative: cell-wise at most those, and still never under-counts.
        #[test]
        fn merge_is_the_sketch_of_both_streams(a in stream(), b in stream(), width in 1u32..40) {
            let plain = CmsShape::new(width, 3).expect("valid");
            let both: Vec<(u16, u32)> = a.iter().chain(&b).copied().collect();
            let mut m = sketch_of(plain, &a);
            m.merge(&sketch_of(plain, &b)).expect("same shape");
            prop_assert_eq!(&m, &sketch_of(plain, &both));

            let cons = plain.conservative(true);
            let mut mc = sketch_of(cons, &a);
            mc.merge(&sketch_of(cons, &b)).expect("same shape");
            prop_assert_eq!(mc.total(), m.total());
            for (x, y) in mc.cells().iter().zip(m.cells().iter()) {
                prop_assert!(x <= y);
            }
            for (item, count) in truth(&both) {
                let h = item_hash(&format!("i{item}"));
                prop_assert!(mc.estimate(h) >= count);
            }
        }
    }
}

//! A count-min sketch with a candidate list: fixed-memory counts and a top-K list of upper
//! bounds.
//!
//! Each add counts the event in the sketch and offers the item to the candidates with its new
//! estimate. What holds (deterministically, for any event order, given that count-min never
//! under-counts):
//!
//! - every listed count is at least the item's true count, and at most the sketch's estimate
//!   now (so at most ⌈(e/w)·N⌉ above the true count, with probability ≥ 1 − e^(−d) each);
//! - an item that is not a candidate has a true count at most the worst candidate's count;
//! - so **every item whose true count exceeds the K-th listed count is in the top K**, and the
//!   top K is the true top-K set whenever the K-th and (K+1)-th true counts differ by more than
//!   the largest over-count among the listed items.
//!
//! Merging ([`CountMinTopK::merge`]) adds the sketches and re-estimates the union of both
//! candidate lists from the sum, keeping the best. When the two sketches counted disjoint item
//! sets (the job's key groups) the guarantees above hold for the result; for overlapping
//! streams the counts stay upper bounds, but an item spread over both may be missing.

use super::candidates::Candidates;
use super::cms::{CmsShape, CountMinSketch};
use super::{ErrorBound, SketchError, TopKSketch};
use crate::record::RankedItem;
use std::collections::BTreeMap;

/// A count-min sketch and its candidates (see the module doc).
#[derive(Clone)]
pub struct CountMinTopK {
    pub(super) sketch: CountMinSketch,
    pub(super) candidates: Candidates,
}

impl CountMinTopK {
    /// An empty sketch of `shape` keeping up to `candidates` candidates.
    pub fn new(shape: CmsShape, candidates: usize) -> Result<CountMinTopK, SketchError> {
        Ok(CountMinTopK {
            sketch: CountMinSketch::new(shape),
            candidates: Candidates::new(candidates)?,
        })
    }

    /// The sketch.
    pub fn sketch(&self) -> &CountMinSketch {
        &self.sketch
    }

    /// The candidates.
    pub fn candidates(&self) -> &Candidates {
        &self.candidates
    }

    /// Adds `other` into this one (same shape and candidate capacity): the sketches cell by
    /// cell, then the best of both candidate lists, re-estimated from the sum.
    pub fn merge(&mut self, other: &CountMinTopK) -> Result<(), SketchError> {
        if self.candidates.capacity() != other.candidates.capacity() {
            return Err(SketchError::ShapeMismatch(
                format!("{} candidates", self.candidates.capacity()),
                format!("{} candidates", other.candidates.capacity()),
            ));
        }
        self.sketch.merge(&other.sketch)?;
        let mut union: BTreeMap<&str, u64> = BTreeMap::new();
        for (id, hash, _) in self.candidates.iter().chain(other.candidates.iter()) {
            union.insert(id, hash);
        }
        let mut merged = Candidates::new(self.candidates.capacity())?;
        for (id, hash) in union {
            merged.offer(id, hash, self.sketch.estimate(hash));
        }
        self.candidates = merged;
        Ok(())
    }
}

impl CountMinTopK {
    /// A sketch with candidates (each offered with its count, capped at its estimate from
    /// `sketch`; at most `capacity` stay).
    pub fn with_candidates<'a>(
        sketch: CountMinSketch,
        capacity: usize,
        listed: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Result<CountMinTopK, SketchError> {
        let mut candidates = Candidates::new(capacity)?;
        for (id, count) in listed {
            let hash = crate::hash::item_hash(id);
            candidates.offer(id, hash, count.min(sketch.estimate(hash)));
        }
        Ok(CountMinTopK { sketch, candidates })
    }

    /// The sketch alone (its candidates dropped).
    pub fn into_sketch(self) -> CountMinSketch {
        self.sketch
    }

    /// Keeps only the candidates `keep` accepts (a restore onto another worker count keeps
    /// the items the worker owns).
    pub fn retain_candidates(&mut self, keep: impl Fn(&str) -> bool) {
        let capacity = self.candidates.capacity();
        let mut kept = Candidates::new(capacity).expect("the capacity of an existing list is valid");
        for (id, hash, count) in self.candidates.iter().filter(|(id, _, _)| keep(id)) {
            kept.offer(id, hash, count);
        }
        self.candidates = kept;
    }
}

impl TopKSketch for CountMinTopK {
    #[inline]
    fn add(&mut self, item: &str, hash: u64, n: u32) {
        let estimate = self.sketch.add(hash, n);
        self.candidates.offer(item, hash, estimate);
    }

    fn estimate(&self, item: &str, hash: u64) -> u64 {
        self.candidates
            .get(item, hash)
            .unwrap_or_else(|| self.sketch.estimate(hash))
    }

    fn top(&self, k: usize) -> Vec<RankedItem> {
        self.candidates.top(k)
    }

    fn total(&self) -> u64 {
        self.sketch.total()
    }

    fn error_bound(&self) -> ErrorBound {
        ErrorBound::Overcount {
            at_most: self.sketch.error_bound(),
        }
    }

    fn heap_bytes(&self) -> usize {
        self.sketch.heap_bytes() + self.candidates.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;
    use crate::topk::top_k;
    use proptest::prelude::*;

    fn run(shape: CmsShape, cap: usize, stream: &[u16]) -> CountMinTopK {
        let mut s = CountMinTopK::new(shape, cap).expect("valid");
        for item in stream {
            let id = format!("i{item}");
            s.add(&id, item_hash(&id), 1);
        }
        s
    }

    fn truth(stream: &[u16]) -> BTreeMap<String, u64> {
        let mut t = BTreeMap::new();
        for item in stream {
            *t.entry(format!("i{item}")).or_insert(0) += 1;
        }
        t
    }

    /// A skewed stream: item i with weight ~ 1/(i+1), so there are clear heavy hitters.
    fn skewed() -> impl Strategy<Value = Vec<u16>> {
        proptest::collection::vec((0u16..200, 0u16..200), 0..800)
            .prop_map(|v| v.into_iter().map(|(a, b)| a * b / 200).collect())
    }

    /// The guarantees of the module doc, checked against exact counts.
    fn check_guarantees(s: &CountMinTopK, truth: &BTreeMap<String, u64>, k: usize) -> Result<(), TestCaseError> {
        let list = s.top(k);
        let est = |id: &str| s.estimate(id, item_hash(id));
        let mut max_over = 0;
        for r in &list {
            let t = truth.get(r.item_id.as_str()).copied().unwrap_or(0);
            prop_assert!(r.count >= t, "{} listed {} < true {}", r.item_id, r.count, t);
            prop_assert!(r.count <= s.sketch().estimate(item_hash(&r.item_id)));
            max_over = max_over.max(r.count - t);
        }
        let kth = if list.len() < k { 0 } else { list[k - 1].count };
        let threshold = s.candidates().threshold().unwrap_or(0);
        for (id, &t) in truth {
            prop_assert!(est(id) >= t);
            if s.candidates().get(id, item_hash(id)).is_none() {
                prop_assert!(t <= threshold, "{id}: true {t} > worst candidate {threshold}");
            }
            if t > kth {
                prop_assert!(
                    list.iter().any(|r| r.item_id == id.as_str()),
                    "{id}: true {t} > K-th {kth}, not listed"
                );
            }
        }
        let exact = top_k(
            truth
                .iter()
                .map(|(i, c)| RankedItem {
                    item_id: i.into(),
                    count: *c,
                    trend: None,
                })
                .collect(),
            k + 1,
        );
        if exact.len() > k && exact[k - 1].count - exact[k].count > max_over {
            let want: std::collections::BTreeSet<_> = exact[..k].iter().map(|r| r.item_id.clone()).collect();
            let got: std::collections::BTreeSet<_> = list.iter().map(|r| r.item_id.clone()).collect();
            prop_assert_eq!(got, want);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn top_list_guarantees_hold(stream in skewed(), width in 4u32..64, k in 1usize..6, extra in 0usize..6, cons: bool) {
            let shape = CmsShape::new(width, 3).expect("valid").conservative(cons);
            let s = run(shape, k + extra, &stream);
            check_guarantees(&s, &truth(&stream), k)?;
        }

        /// Sketches of disjoint item sets (two workers' key groups) merge into one whose list
        /// keeps every guarantee over the union.
        #[test]
        fn merge_of_disjoint_workers_keeps_the_guarantees(stream in skewed(), width in 4u32..64, k in 1usize..6) {
            let shape = CmsShape::new(width, 3).expect("valid");
            let (a, b): (Vec<u16>, Vec<u16>) = stream.iter().partition(|i| *i % 2 == 0);
            let mut m = run(shape, 2 * k, &a);
            m.merge(&run(shape, 2 * k, &b)).expect("same shape");
            let whole = run(shape, 2 * k, &stream);
            prop_assert_eq!(m.sketch(), whole.sketch());
            check_guarantees(&m, &truth(&stream), k)?;
        }
    }

    #[test]
    fn merge_refuses_another_capacity() {
        let shape = CmsShape::new(16, 2).expect("valid");
        let mut a = CountMinTopK::new(shape, 4).expect("valid");
        let b = CountMinTopK::new(shape, 5).expect("valid");
        assert!(matches!(a.merge(&b), Err(SketchError::ShapeMismatch(..))));
        let c = CountMinTopK::new(shape.conservative(true), 4).expect("valid");
        assert!(matches!(a.merge(&c), Err(SketchError::ShapeMismatch(..))));
    }
}

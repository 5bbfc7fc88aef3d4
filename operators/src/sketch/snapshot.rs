//! Sketch snapshots for checkpoints: plain data, validated against the expected shape before a
//! restore.
//!
//! A snapshot is encoded like every other one (`snapshot::encode`: envelope, checksum, bincode
//! payload). As with counter snapshots, a valid checksum does not make the contents sensible,
//! and restore code indexes by them, so `restore` validates first: the shape and candidate
//! capacity are the expected ones (else `Incompatible`: the job's sketch settings changed),
//! the table has width × depth cells, and the invariants the sketch keeps hold — each
//! count-min row sums to N (plain update) or at most N (conservative), no cell or bucket above
//! N, candidates valid ids listed once in ranking order, each with a count in 1..=N (count-min:
//! at most the sketch's estimate). A restored sketch continues exactly as the one snapshotted
//! would have.

use super::candidates::Candidates;
use super::cms::{Cells, CmsShape, CountMinSketch};
use super::cms_topk::CountMinTopK;
use super::heavykeeper::{Bucket, HeavyKeeper, HkShape};
use crate::hash::item_hash;
use crate::record::RankedItem;
use crate::snapshot::{check_ranked, Snapshot, SnapshotError};
use serde::{Deserialize, Serialize};

/// A [`CountMinTopK`]'s state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountMinTopKSnapshot {
    /// The sketch's shape.
    pub shape: CmsShape,
    /// Events added (N).
    pub total: u64,
    /// The counters, row-major.
    pub cells: Cells,
    /// The candidate capacity.
    pub capacity: u32,
    /// The candidates with their counts, in ranking order.
    #[serde(with = "crate::record::counted_items")]
    pub candidates: Vec<RankedItem>,
}

/// A [`HeavyKeeper`]'s state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeavyKeeperSnapshot {
    /// The table's shape.
    pub shape: HkShape,
    /// Events added (N).
    pub total: u64,
    /// The decay generator's state.
    pub rng: u64,
    /// The buckets, row-major.
    pub buckets: Vec<Bucket>,
    /// The candidate capacity.
    pub capacity: u32,
    /// The candidates with their counts, in ranking order.
    #[serde(with = "crate::record::counted_items")]
    pub candidates: Vec<RankedItem>,
}

type Problem = String;

fn invalid(problem: Problem) -> SnapshotError {
    SnapshotError::Invalid(problem)
}

// both are new in snapshot format 3: every readable format holds them alike
impl Snapshot for CountMinTopKSnapshot {}
impl Snapshot for HeavyKeeperSnapshot {}

impl CountMinTopK {
    /// The state, as plain data.
    pub fn snapshot(&self) -> CountMinTopKSnapshot {
        CountMinTopKSnapshot {
            shape: *self.sketch.shape(),
            total: self.sketch.total(),
            cells: self.sketch.cells().clone(),
            capacity: self.candidates.capacity() as u32, // ≤ MAX_CANDIDATES
            candidates: self.candidates.top(usize::MAX),
        }
    }

    /// Restores a snapshot taken of a sketch of `shape` with `candidates` capacity.
    pub fn restore(
        s: &CountMinTopKSnapshot,
        shape: CmsShape,
        candidates: usize,
    ) -> Result<CountMinTopK, SnapshotError> {
        s.validate(shape, candidates)?;
        let sketch = CountMinSketch::from_parts(s.shape, s.total, s.cells.clone());
        Ok(CountMinTopK {
            sketch,
            candidates: restore_candidates(&s.candidates, candidates)?,
        })
    }
}

impl CountMinTopKSnapshot {
    /// Checks the snapshot against the expected shape and capacity (see the module doc).
    pub fn validate(&self, shape: CmsShape, candidates: usize) -> Result<(), SnapshotError> {
        if self.shape != shape || self.capacity as usize != candidates {
            return Err(SnapshotError::Incompatible);
        }
        check_cells(&self.cells, shape, self.total).map_err(|p| invalid(format!("count-min sketch: {p}")))?;
        let sketch = CountMinSketch::from_parts(self.shape, self.total, self.cells.clone());
        check_candidates(&self.candidates, candidates, self.total, |r| {
            let estimate = sketch.estimate(item_hash(&r.item_id));
            match r.count <= estimate {
                true => Ok(()),
                false => Err(format!("count {} is above the sketch's estimate {estimate}", r.count)),
            }
        })
        .map_err(|p| invalid(format!("count-min candidates: {p}")))
    }
}

impl HeavyKeeper {
    /// The state, as plain data.
    pub fn snapshot(&self) -> HeavyKeeperSnapshot {
        HeavyKeeperSnapshot {
            shape: self.shape,
            total: self.total,
            rng: self.rng,
            buckets: self.buckets.clone(),
            capacity: self.candidates.capacity() as u32, // ≤ MAX_CANDIDATES
            candidates: self.candidates.top(usize::MAX),
        }
    }

    /// Restores a snapshot taken of a HeavyKeeper of `shape` with `candidates` capacity.
    pub fn restore(s: &HeavyKeeperSnapshot, shape: HkShape, candidates: usize) -> Result<HeavyKeeper, SnapshotError> {
        s.validate(shape, candidates)?;
        Ok(HeavyKeeper {
            shape: s.shape,
            total: s.total,
            rng: s.rng,
            buckets: s.buckets.clone(),
            candidates: restore_candidates(&s.candidates, candidates)?,
        })
    }
}

impl HeavyKeeperSnapshot {
    /// Checks the snapshot against the expected shape and capacity (see the module doc).
    pub fn validate(&self, shape: HkShape, candidates: usize) -> Result<(), SnapshotError> {
        if self.shape != shape || self.capacity as usize != candidates {
            return Err(SnapshotError::Incompatible);
        }
        if self.buckets.len() != shape.buckets() {
            return Err(invalid(format!(
                "HeavyKeeper: {} buckets, the shape {shape} has {}",
                self.buckets.len(),
                shape.buckets()
            )));
        }
        let w = shape.width() as usize;
        for (r, row) in self.buckets.chunks(w).enumerate() {
            let sum: u64 = row.iter().map(|b| u64::from(b.count)).sum();
            if sum > self.total {
                return Err(invalid(format!(
                    "HeavyKeeper: row {r} counts {sum}, more than the {} events added",
                    self.total
                )));
            }
        }
        check_candidates(&self.candidates, candidates, self.total, |_| Ok(()))
            .map_err(|p| invalid(format!("HeavyKeeper candidates: {p}")))
    }
}

/// Count-min cells: width × depth of them, each row summing to `total` (plain) or at most it
/// (conservative; and plain once `total` saturated).
fn check_cells(cells: &Cells, shape: CmsShape, total: u64) -> Result<(), Problem> {
    if cells.len() != shape.cells() {
        return Err(format!(
            "{} cells, the shape {shape} has {}",
            cells.len(),
            shape.cells()
        ));
    }
    let w = shape.width() as usize;
    for r in 0..shape.depth() as usize {
        let sum: u128 = (r * w..(r + 1) * w).map(|i| u128::from(cells.get(i))).sum();
        let exact = !shape.is_conservative() && total < u64::MAX;
        if sum > u128::from(total) || (exact && sum != u128::from(total)) {
            let want = if exact { "" } else { "at most " };
            return Err(format!("row {r} sums to {sum}, not {want}the {total} events added"));
        }
    }
    Ok(())
}

/// Candidates: at most `capacity`, valid ids once each in ranking order, counts in 1..=`total`,
/// and whatever `check` says of each.
fn check_candidates(
    list: &[RankedItem],
    capacity: usize,
    total: u64,
    check: impl Fn(&RankedItem) -> Result<(), Problem>,
) -> Result<(), Problem> {
    if list.len() > capacity {
        return Err(format!("{} candidates, the capacity is {capacity}", list.len()));
    }
    check_ranked(list)?;
    for r in list {
        if r.count > total {
            return Err(format!(
                "item {:?}: count {} is above the {total} events added",
                r.item_id, r.count
            ));
        }
        check(r).map_err(|p| format!("item {:?}: {p}", r.item_id))?;
    }
    Ok(())
}

fn restore_candidates(list: &[RankedItem], capacity: usize) -> Result<Candidates, SnapshotError> {
    let mut c = Candidates::new(capacity).map_err(|e| SnapshotError::Invalid(e.to_string()))?;
    for r in list {
        c.offer(&r.item_id, item_hash(&r.item_id), r.count);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::TopKSketch;
    use crate::snapshot::{decode, encode};

    fn cms() -> CountMinTopK {
        let mut s = CountMinTopK::new(CmsShape::new(8, 2).expect("valid"), 3).expect("valid");
        for id in ["a", "b", "a", "c", "d", "a", "b"] {
            s.add(id, item_hash(id), 1);
        }
        s
    }

    fn hk() -> HeavyKeeper {
        let mut s = HeavyKeeper::new(HkShape::new(4, 2).expect("valid"), 3).expect("valid");
        for id in ["a", "b", "a", "c", "d", "a", "b"] {
            s.add(id, item_hash(id), 1);
        }
        s
    }

    fn problem(r: Result<(), SnapshotError>) -> String {
        match r {
            Err(SnapshotError::Invalid(p)) => p,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn snapshots_round_trip_through_the_envelope() {
        let s = cms();
        let snap = s.snapshot();
        let back: CountMinTopKSnapshot = decode(&encode(&snap)).expect("decodes");
        let r = CountMinTopK::restore(&back, *s.sketch().shape(), 3).expect("valid");
        assert_eq!(r.snapshot(), snap);
        let h = hk();
        let snap = h.snapshot();
        let back: HeavyKeeperSnapshot = decode(&encode(&snap)).expect("decodes");
        let r = HeavyKeeper::restore(&back, *h.shape(), 3).expect("valid");
        assert_eq!(r.snapshot(), snap);
    }

    #[test]
    fn other_settings_are_incompatible() {
        let s = cms().snapshot();
        let shape = s.shape;
        assert_eq!(s.validate(shape, 4), Err(SnapshotError::Incompatible));
        assert_eq!(
            s.validate(shape.conservative(true), 3),
            Err(SnapshotError::Incompatible)
        );
        assert_eq!(s.validate(shape.with_seed(7), 3), Err(SnapshotError::Incompatible));
        let h = hk().snapshot();
        assert_eq!(
            h.validate(HkShape::new(4, 3).expect("valid"), 3),
            Err(SnapshotError::Incompatible)
        );
    }

    #[test]
    fn cms_problems_are_named() {
        type Mutation = fn(&mut CountMinTopKSnapshot);
        let cases: &[(Mutation, &str)] = &[
            (|s| s.cells = Cells::U32(vec![0; 3]), "3 cells, the shape 8 × 2"),
            (|s| s.total += 1, "row 0 sums to 7, not the 8 events added"),
            (
                |s| {
                    if let Cells::U32(c) = &mut s.cells {
                        c[0] += 1;
                        c[1] = c[1].wrapping_sub(1);
                    }
                },
                "row 0 sums to",
            ),
            (
                |s| s.candidates.push(s.candidates[0].clone()),
                "4 candidates, the capacity is 3",
            ),
            (|s| s.candidates.swap(0, 1), "out of rank order"),
            (|s| s.candidates[0].count = 1000, "above the 7 events added"),
            (|s| s.candidates[0].count = 7, "above the sketch's estimate"),
            (|s| s.candidates[0].item_id = "".into(), "item_id is empty"),
        ];
        for (mutate, want) in cases {
            let mut s = cms().snapshot();
            mutate(&mut s);
            let p = problem(s.validate(s.shape, 3));
            assert!(p.contains(want), "{p:?} should say {want:?}");
            assert!(CountMinTopK::restore(&s, s.shape, 3).is_err());
        }
    }

    #[test]
    fn heavykeeper_problems_are_named() {
        type Mutation = fn(&mut HeavyKeeperSnapshot);
        let cases: &[(Mutation, &str)] = &[
            (
                |s| s.buckets.pop().map(drop).unwrap_or(()),
                "7 buckets, the shape 4 × 2",
            ),
            (|s| s.buckets[0].count = u32::MAX, "row 0 counts"),
            (|s| s.candidates[1].count = 99, "out of rank order"),
            (|s| s.candidates[0].count = 99, "above the 7 events added"),
        ];
        for (mutate, want) in cases {
            let mut s = hk().snapshot();
            mutate(&mut s);
            let p = problem(s.validate(s.shape, 3));
            assert!(p.contains(want), "{p:?} should say {want:?}");
        }
    }
}

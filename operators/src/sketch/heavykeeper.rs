//! HeavyKeeper (Gong et al., USENIX ATC 2018; the algorithm behind Redis `TOPK`): d rows of w
//! buckets (fingerprint, count) and a candidate list.
//!
//! An event of item x looks at one bucket per row (`sketch/rows.rs`): an empty bucket takes
//! x's fingerprint; a bucket with x's fingerprint counts up; a bucket held by another
//! fingerprint with count c **decays** by one with probability b^(−c), b = [`DECAY_BASE`]
//! (1.08), and when it reaches 0 x takes it over with the rest of its increment. x's estimate
//! is the largest count among its buckets that hold its fingerprint, and x is offered to the
//! candidates with it (a candidate keeps its largest offer).
//!
//! Contract: a bucket holding x's fingerprint only ever grew by x's own events (barring another
//! item with the same 32-bit fingerprint in the same bucket), so **estimates and listed counts
//! are lower bounds**, never above the true count; how far below is not bounded. Big items
//! keep their buckets (the decay probability falls exponentially with the count) and small
//! ones decay away, which is why the heavy hitters come out nearly exact. It does not merge.
//!
//! Determinism: the decay draws come from a SplitMix64 generator seeded with the shape's seed
//! and kept in the state (and snapshots); the probabilities are a table built at compile time
//! and the draws use IEEE basic operations only, so the same events in the same order give the
//! same state on any machine. A weighted add (`n` > 1, e.g. folding exact counts in) draws
//! once per decay rather than once per event, so its cost does not grow with `n`.

use super::candidates::Candidates;
use super::rows::{cell, fingerprint, DEFAULT_SEED, MAX_CELLS, MAX_DEPTH, MAX_WIDTH};
use super::{ErrorBound, SketchError, TopKSketch};
use crate::record::RankedItem;
use serde::{Deserialize, Serialize};

/// The decay base b: a bucket with count c held by another item decays with probability b^(−c).
pub const DECAY_BASE: f64 = 1.08;

/// Counts that can still decay: from c = 487 on, 1 − b^(−c) rounds to 1 in an f64.
const DECAY_TABLE: usize = 487;

/// `DECAY_P[c]` = b^(−c), built at compile time by repeated IEEE division (so every build and
/// machine has the same table).
const DECAY_P: [f64; DECAY_TABLE] = decay_probabilities();

// The table ends exactly where decaying becomes impossible in an f64.
const _: () = assert!(1.0 - DECAY_P[DECAY_TABLE - 1] < 1.0);
const _: () = assert!(1.0 - DECAY_P[DECAY_TABLE - 1] / DECAY_BASE == 1.0);

const fn decay_probabilities() -> [f64; DECAY_TABLE] {
    let mut t = [0f64; DECAY_TABLE];
    let mut p = 1.0f64;
    let mut c = 0;
    while c < DECAY_TABLE {
        t[c] = p;
        p /= DECAY_BASE;
        c += 1;
    }
    t
}

/// The shape of a HeavyKeeper: width and depth of its bucket table and the seed of its row
/// hashes (also its decay generator's first state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HkShape {
    width: u32,
    depth: u32,
    seed: u64,
}

impl HkShape {
    /// A `width` × `depth` table with the pinned seed.
    pub fn new(width: u32, depth: u32) -> Result<HkShape, SketchError> {
        let ok = (1..=MAX_WIDTH).contains(&width)
            && (1..=MAX_DEPTH as u32).contains(&depth)
            && u64::from(width) * u64::from(depth) <= MAX_CELLS;
        if !ok {
            return Err(SketchError::Parameters(format!(
                "HeavyKeeper {width} × {depth} is not within width 1..={MAX_WIDTH}, depth \
                 1..={MAX_DEPTH}, {MAX_CELLS} buckets"
            )));
        }
        Ok(HkShape {
            width,
            depth,
            seed: DEFAULT_SEED,
        })
    }

    /// This shape with another seed.
    pub fn with_seed(self, seed: u64) -> HkShape {
        HkShape { seed, ..self }
    }

    /// Buckets per row.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Rows.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Buckets in the table.
    pub fn buckets(&self) -> usize {
        self.width as usize * self.depth as usize
    }
}

impl std::fmt::Display for HkShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} × {} (seed {:#x})", self.width, self.depth, self.seed)
    }
}

/// One bucket: the fingerprint of the item holding it and its count (0: empty).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// The low 32 bits of the holder's pinned hash.
    pub fingerprint: u32,
    /// The holder's count (saturating).
    pub count: u32,
}

/// A HeavyKeeper (see the module doc).
pub struct HeavyKeeper {
    pub(super) shape: HkShape,
    pub(super) total: u64,
    /// SplitMix64 state of the decay draws.
    pub(super) rng: u64,
    /// Row-major buckets.
    pub(super) buckets: Vec<Bucket>,
    pub(super) candidates: Candidates,
}

impl HeavyKeeper {
    /// An empty HeavyKeeper of `shape` keeping up to `candidates` candidates.
    pub fn new(shape: HkShape, candidates: usize) -> Result<HeavyKeeper, SketchError> {
        Ok(HeavyKeeper {
            shape,
            total: 0,
            rng: shape.seed,
            buckets: vec![Bucket::default(); shape.buckets()],
            candidates: Candidates::new(candidates)?,
        })
    }

    /// The shape.
    pub fn shape(&self) -> &HkShape {
        &self.shape
    }

    /// The candidates.
    pub fn candidates(&self) -> &Candidates {
        &self.candidates
    }

    /// The buckets, row-major.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// The largest count among `hash`'s buckets that hold its fingerprint.
    fn bucket_estimate(&self, hash: u64) -> u32 {
        let fp = fingerprint(hash);
        let w = self.shape.width;
        (0..self.shape.depth)
            .map(|r| &self.buckets[r as usize * w as usize + cell(hash, self.shape.seed, r, w)])
            .filter(|b| b.count > 0 && b.fingerprint == fp)
            .map(|b| b.count)
            .max()
            .unwrap_or(0)
    }
}

/// Counts `n` events of fingerprint `fp` in bucket `b`; returns `b`'s count when `fp` holds it
/// after, else 0.
#[inline]
fn count_in(b: &mut Bucket, fp: u32, n: u32, rng: &mut u64) -> u32 {
    if b.count == 0 {
        *b = Bucket {
            fingerprint: fp,
            count: n,
        };
        b.count
    } else if b.fingerprint == fp {
        b.count = b.count.saturating_add(n);
        b.count
    } else {
        decay(b, fp, n, rng)
    }
}

/// `n` events of `fp` at a bucket held by another fingerprint: each decays the count by one
/// with probability b^(−count), and the one that brings it to 0 takes the bucket over with the
/// events left (itself included). Instead of one draw per event, one draw gives the number of
/// events until the next decay (a geometric variable, by inversion), so a weighted add costs
/// at most one draw per decay, whatever `n`. Returns the new count if `fp` took over, else 0.
fn decay(b: &mut Bucket, fp: u32, n: u32, rng: &mut u64) -> u32 {
    let mut left = n;
    while left > 0 {
        let Some(&p) = DECAY_P.get(b.count as usize) else {
            break; // too big to decay
        };
        let survived = survivals(p, left, uniform(rng));
        if survived == left {
            return 0;
        }
        b.count -= 1;
        if b.count == 0 {
            *b = Bucket {
                fingerprint: fp,
                count: left - survived,
            };
            return b.count;
        }
        left -= survived + 1;
    }
    0
}

/// How many of `left` events in a row do not decay (each decays with probability `p`), for the
/// uniform draw `u`: the largest m ≤ `left` with (1 − p)^m > u, found bit by bit from the
/// powers (1 − p)^(2^j). IEEE basic operations only: the same on every machine.
#[inline]
fn survivals(p: f64, left: u32, u: f64) -> u32 {
    let top = 31u32.saturating_sub(left.leading_zeros()); // 2^top ≤ left (left > 0)
    let mut powers = [0f64; 32];
    powers[0] = 1.0 - p;
    for j in 1..=top as usize {
        powers[j] = powers[j - 1] * powers[j - 1];
    }
    let (mut survive, mut m) = (1.0f64, 0u32);
    for j in (0..=top).rev() {
        let next = survive * powers[j as usize];
        if next > u && m + (1 << j) <= left {
            survive = next;
            m += 1 << j;
        }
    }
    m
}

/// A uniform draw in [0, 1) with 53 random bits.
#[inline]
fn uniform(rng: &mut u64) -> f64 {
    (splitmix64(rng) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// SplitMix64 (Steele, Lea & Flood 2014): the next draw.
#[inline]
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl TopKSketch for HeavyKeeper {
    #[inline]
    fn add(&mut self, item: &str, hash: u64, n: u32) {
        if n == 0 {
            return;
        }
        self.total = self.total.saturating_add(u64::from(n));
        let (fp, w, seed) = (fingerprint(hash), self.shape.width, self.shape.seed);
        let mut estimate = 0;
        for r in 0..self.shape.depth {
            let b = &mut self.buckets[r as usize * w as usize + cell(hash, seed, r, w)];
            estimate = estimate.max(count_in(b, fp, n, &mut self.rng));
        }
        self.candidates.offer(item, hash, u64::from(estimate));
    }

    fn estimate(&self, item: &str, hash: u64) -> u64 {
        self.candidates
            .get(item, hash)
            .unwrap_or_else(|| u64::from(self.bucket_estimate(hash)))
    }

    fn top(&self, k: usize) -> Vec<RankedItem> {
        self.candidates.top(k)
    }

    fn total(&self) -> u64 {
        self.total
    }

    fn error_bound(&self) -> ErrorBound {
        ErrorBound::Undercount
    }

    fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>() + self.candidates.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::item_hash;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn run(shape: HkShape, cap: usize, stream: &[(u16, u32)]) -> HeavyKeeper {
        let mut s = HeavyKeeper::new(shape, cap).expect("valid");
        for (item, n) in stream {
            let id = format!("i{item}");
            s.add(&id, item_hash(&id), *n);
        }
        s
    }

    #[test]
    fn decay_probabilities_are_b_to_the_minus_c() {
        assert_eq!(DECAY_P[0], 1.0);
        for c in [1usize, 10, 100, 486] {
            let want = DECAY_BASE.powi(-(c as i32));
            assert!((DECAY_P[c] / want - 1.0).abs() < 1e-12, "c = {c}");
        }
    }

    /// The geometric skip has the distribution of one draw per event: over many draws, the
    /// share of `n` events that all survive at count c is (1 − b^(−c))^n.
    #[test]
    fn survivals_are_geometric() {
        let mut rng = 1u64;
        for (c, n) in [(1usize, 1u32), (5, 3), (20, 10), (30, 100)] {
            let p = DECAY_P[c];
            let trials = 40_000;
            let all = (0..trials).filter(|_| survivals(p, n, uniform(&mut rng)) == n).count();
            let want = (1.0 - p).powi(n as i32);
            let got = all as f64 / trials as f64;
            assert!((got - want).abs() < 0.01, "c {c}, n {n}: {got} vs {want}");
            let firsts = (0..trials).filter(|_| survivals(p, n, uniform(&mut rng)) == 0).count();
            assert!((firsts as f64 / trials as f64 - p).abs() < 0.01, "c {c}: first decays");
        }
        assert_eq!(survivals(0.5, 7, 0.0), 7, "u = 0 survives everything");
        assert_eq!(survivals(0.5, 7, 0.5), 0, "(1 − p)^1 = 0.5 is not above u");
    }

    /// A weighted add costs one draw per decay: a big item folded in at once takes over a
    /// light bucket, and a huge increment against a big count ends.
    #[test]
    fn weighted_adds_are_bounded() {
        let mut s = HeavyKeeper::new(HkShape::new(1, 1).expect("valid"), 2).expect("valid");
        let (a, b) = (item_hash("a"), item_hash("b"));
        s.add("a", a, 50);
        s.add("b", b, 1_000_000);
        assert_eq!(s.buckets()[0].fingerprint, fingerprint(b));
        assert!(s.buckets()[0].count > 990_000);
        s.add("a", a, u32::MAX);
        assert_eq!(s.buckets()[0].fingerprint, fingerprint(b), "1.08^-990000 never decays");
        assert!(s.rng != 0);
    }

    /// SplitMix64's published first outputs for seed 0 (pins the decay draws).
    #[test]
    fn splitmix_is_the_published_one() {
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn a_heavy_item_takes_over_a_light_ones_bucket() {
        let mut s = HeavyKeeper::new(HkShape::new(1, 1).expect("valid"), 2).expect("valid");
        let (a, b) = (item_hash("a"), item_hash("b"));
        s.add("a", a, 3);
        assert_eq!(
            s.buckets()[0],
            Bucket {
                fingerprint: fingerprint(a),
                count: 3
            }
        );
        for _ in 0..200 {
            s.add("b", b, 1);
        }
        assert_eq!(
            s.buckets()[0].fingerprint,
            fingerprint(b),
            "decayed away, then taken over"
        );
        assert!(s.estimate("b", b) <= 200 && s.estimate("b", b) > 150);
        assert_eq!(s.estimate("a", a), 3, "a candidate keeps its listed count");
        assert_eq!(s.total(), 203);
        assert_eq!(s.error_bound(), ErrorBound::Undercount);
    }

    fn skewed() -> impl Strategy<Value = Vec<(u16, u32)>> {
        proptest::collection::vec((0u16..200, 0u16..200, 1u32..3), 0..800)
            .prop_map(|v| v.into_iter().map(|(a, b, n)| (a * b / 200, n)).collect())
    }

    proptest! {
        /// Never over-counts: listed counts and estimates are lower bounds. Replaying the same
        /// events gives the same state.
        #[test]
        fn never_over_counts_and_replays(stream in skewed(), width in 1u32..32, depth in 1u32..4, k in 1usize..8) {
            let shape = HkShape::new(width, depth).expect("valid");
            let s = run(shape, k, &stream);
            let mut truth: BTreeMap<String, u64> = BTreeMap::new();
            for (item, n) in &stream {
                *truth.entry(format!("i{item}")).or_insert(0) += u64::from(*n);
            }
            for r in s.top(k) {
                prop_assert!(r.count <= truth[r.item_id.as_str()], "{:?}", r);
            }
            for (id, t) in &truth {
                prop_assert!(s.estimate(id, item_hash(id)) <= *t);
            }
            let again = run(shape, k, &stream);
            prop_assert_eq!(&again.buckets, &s.buckets);
            prop_assert_eq!(again.rng, s.rng);
            prop_assert_eq!(again.top(k), s.top(k));
        }
    }
}

//! [`PartitionStream`]: the deterministic record stream of one partition (drawing, event times,
//! lateness, bad records) and O(1) seeking by position.

use super::bad::{render_bad, BadKind};
use super::render::render_json;
use super::spec::GeneratorSpec;
use super::tables::GeneratorTables;
use hotlist_operators::record::ItemId;
use hotlist_operators::time::{Millis, Span};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Multiplier that decorrelates the seeds of the partitions (the 64-bit golden ratio).
const PARTITION_SEED_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// 2^64 as a float, to turn a probability into a 64-bit threshold.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// Probability `p` in [0, 1] as a 64-bit acceptance threshold (`word < threshold`); 2^64 = always.
fn to_threshold64(p: f64) -> u128 {
    (p.clamp(0.0, 1.0) * TWO_POW_64) as u128
}

/// One record of a partition stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Generated {
    /// A valid event.
    Event {
        /// The item id.
        item: ItemId,
        /// Its event time.
        ts: Millis,
    },
    /// A bad line (without line terminator), rejected by the event parser.
    Bad {
        /// The raw bytes.
        raw: Vec<u8>,
    },
}

/// Records drawn ahead at a time: resolving a batch's alias-table lookups (random over the
/// whole table, i.e. cache misses for large item counts) in one tight loop lets the misses
/// overlap instead of stalling one record at a time. Invisible in the output.
const BATCH: usize = 64;

/// A record before rendering (nothing allocated: ids of up to 24 bytes are inline). A bad
/// record's kind and truncation point come from the low bits of its item word (the rank
/// depends on its high bits).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Raw {
    pub(super) word: u64,
    item: ItemId,
    pub(super) bad: bool,
    /// The event time, or the base time for bad records.
    ts: Millis,
}

/// The deterministic record stream of one partition.
#[derive(Clone, Debug)]
pub struct PartitionStream {
    tables: Arc<GeneratorTables>,
    rng: ChaCha8Rng,
    partition: u32,
    limit: Option<u64>,
    /// Records returned so far.
    position: u64,
    /// Records drawn so far (returned + waiting in `batch`).
    drawn: u64,
    batch: Vec<Raw>,
    next_in_batch: usize,
    /// Scratch space of `refill`.
    ranks: Vec<u32>,
    words: u64,
    start: i64,
    /// Base time of the record at `drawn`.
    base: i64,
    /// `(drawn * 1000) % rate`.
    rem: u128,
    rate: u128,
    step_ms: i64,
    step_rem: u128,
    /// `jitter + 1` (1 = no jitter draw).
    jitter_range: u128,
    late: Option<u128>,
    late_by: Span,
    bad: Option<u128>,
}

impl PartitionStream {
    /// The stream of partition `partition` of `spec`, positioned at its first record.
    ///
    /// Never panics. It expects a spec that passed [`GeneratorSpec::validate`] (as
    /// [`GeneratorTables::new`] checks) and tables built from it; use [`PartitionStream::try_new`]
    /// to have that checked. Otherwise out-of-range values are made harmless, not reported: a
    /// rate of 0 acts as 1, fractions are clamped to `[0, 1]` (NaN = 0), items are drawn from
    /// `tables` as they are, and a partition beyond `partitions` gets no events when `events`
    /// is bounded.
    pub fn new(spec: &GeneratorSpec, tables: Arc<GeneratorTables>, partition: u32) -> Self {
        let seed = spec.seed ^ u64::from(partition).wrapping_mul(PARTITION_SEED_MIX);
        let rate = u128::from(spec.rate.max(1));
        PartitionStream {
            tables,
            rng: ChaCha8Rng::seed_from_u64(seed),
            partition,
            limit: spec.partition_events(partition),
            position: 0,
            drawn: 0,
            batch: Vec::with_capacity(BATCH),
            next_in_batch: 0,
            ranks: Vec::with_capacity(BATCH),
            words: spec.words_per_record(),
            start: spec.start.0,
            base: spec.start.0,
            rem: 0,
            rate,
            step_ms: (1000 / rate) as i64,
            step_rem: 1000 % rate,
            jitter_range: u128::from(spec.jitter.as_millis()) + 1,
            late: (spec.late_fraction > 0.0).then(|| to_threshold64(spec.late_fraction)),
            late_by: spec.late_by,
            bad: (spec.bad_fraction > 0.0).then(|| to_threshold64(spec.bad_fraction)),
        }
    }

    /// [`PartitionStream::new`], but failing if the spec is invalid, the partition is out of
    /// range or `tables` were built for another item count or Zipf exponent.
    pub fn try_new(spec: &GeneratorSpec, tables: Arc<GeneratorTables>, partition: u32) -> Result<Self, String> {
        spec.validate()?;
        if partition >= spec.partitions {
            return Err(format!(
                "partition {partition} out of range (partitions = {})",
                spec.partitions
            ));
        }
        if tables.items() != spec.items || tables.zipf.to_bits() != spec.zipf.to_bits() {
            return Err(format!(
                "generator tables were built for items = {}, zipf = {} but the spec has \
                 items = {}, zipf = {}",
                tables.items(),
                tables.zipf,
                spec.items,
                spec.zipf
            ));
        }
        Ok(PartitionStream::new(spec, tables, partition))
    }

    /// The partition number.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Records this partition produces in total (`None` = endless).
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Records produced so far (= the position of the next record).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Moves to `position` (forward or backward) in O(1): the ChaCha stream is seeked to
    /// `position * words_per_record` words and the base-time state recomputed, so the records
    /// that follow are exactly those that generating and dropping would give. Positions past
    /// the partition's share simply leave the stream exhausted.
    pub fn skip_to(&mut self, position: u64) {
        self.rng.set_word_pos(u128::from(position) * u128::from(self.words) * 2);
        self.position = position;
        self.drawn = position;
        self.batch.clear();
        self.next_in_batch = 0;
        let scaled = u128::from(position) * 1000;
        self.rem = scaled % self.rate;
        let base = i128::from(self.start) + (scaled / self.rate) as i128;
        self.base = i64::try_from(base).unwrap_or(i64::MAX);
    }

    /// Appends the next record to `out` as one line without its terminator (events rendered
    /// by [`render_json`], bad records as their raw bytes). Returns false, leaving `out`
    /// untouched, once the partition is exhausted.
    pub fn next_line(&mut self, out: &mut Vec<u8>) -> bool {
        match self.next_raw() {
            Some(raw) => {
                Self::render_raw(&raw, out);
                true
            }
            None => false,
        }
    }

    /// The next record, drawing a new batch when the current one is used up.
    #[inline]
    pub(super) fn next_raw(&mut self) -> Option<Raw> {
        if self.next_in_batch == self.batch.len() && !self.refill() {
            return None;
        }
        let raw = std::mem::take(self.batch.get_mut(self.next_in_batch)?);
        self.next_in_batch += 1;
        self.position += 1;
        Some(raw)
    }

    /// Draws the next batch (at most the records left): exactly `words` 64-bit words per
    /// record, then resolves all ranks. Returns false when no record is left.
    fn refill(&mut self) -> bool {
        // An endless stream ends at position u64::MAX (after ~58 million years at 10k/s).
        let limit = self.limit.unwrap_or(u64::MAX);
        let n = limit.saturating_sub(self.drawn).min(BATCH as u64) as usize;
        self.batch.clear();
        self.next_in_batch = 0;
        for _ in 0..n {
            let base = self.base;
            let bad = match self.bad {
                Some(t) => u128::from(self.rng.next_u64()) < t,
                None => false,
            };
            let word = self.rng.next_u64();
            let late = match self.late {
                Some(t) => u128::from(self.rng.next_u64()) < t,
                None => false,
            };
            let jitter = if self.jitter_range > 1 {
                ((u128::from(self.rng.next_u64()) * self.jitter_range) >> 64) as i64
            } else {
                0
            };
            let ts = if bad {
                Millis(base)
            } else if late {
                Millis(base).minus(self.late_by)
            } else {
                Millis(base.saturating_sub(jitter))
            };
            self.batch.push(Raw {
                word,
                item: ItemId::default(),
                bad,
                ts,
            });
            self.base = self.base.saturating_add(self.step_ms);
            self.rem += self.step_rem;
            if self.rem >= self.rate {
                self.rem -= self.rate;
                self.base = self.base.saturating_add(1);
            }
        }
        // Two tight passes (alias slots, then ids) keep many cache misses in flight at once.
        let tables = &*self.tables;
        self.ranks.clear();
        self.ranks.extend(self.batch.iter().map(|raw| tables.sample(raw.word)));
        for (raw, &rank) in self.batch.iter_mut().zip(&self.ranks) {
            // `sample` returns ranks below the table length, which is the ids' length.
            if let Some(id) = tables.ids.get(rank as usize) {
                raw.item = id.clone();
            }
        }
        self.drawn += n as u64;
        n > 0
    }

    pub(super) fn render_raw(raw: &Raw, out: &mut Vec<u8>) {
        if raw.bad {
            let kind = BadKind::ALL[(raw.word & 7) as usize];
            render_bad(kind, &raw.item, raw.ts, raw.word >> 3, out);
        } else {
            render_json(&raw.item, raw.ts, out);
        }
    }
}

/// The records of the partition, in order: `next()` returns `None` once its share of `events`
/// is exhausted.
impl Iterator for PartitionStream {
    type Item = Generated;

    /// The next record, or `None` once this partition's share of `events` is exhausted
    /// (and forever after: the iterator is fused).
    #[inline]
    fn next(&mut self) -> Option<Generated> {
        let raw = self.next_raw()?;
        Some(if raw.bad {
            let mut out = Vec::new();
            Self::render_raw(&raw, &mut out);
            Generated::Bad { raw: out }
        } else {
            Generated::Event {
                item: raw.item,
                ts: raw.ts,
            }
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.limit {
            Some(limit) => {
                let left = usize::try_from(limit.saturating_sub(self.position)).unwrap_or(usize::MAX);
                (left, Some(left))
            }
            None => (usize::MAX, None),
        }
    }
}

impl std::iter::FusedIterator for PartitionStream {}

#[cfg(test)]
mod tests {
    use super::super::testing::{base_of, event_ts, spec, stream, take};
    use super::*;
    use crate::generator::det_math::zipf_weight;

    #[test]
    fn new_never_panics_on_unvalidated_specs() {
        let t = Arc::new(GeneratorTables::new(&spec(10)).expect("valid"));
        let wild = GeneratorSpec {
            rate: 0,
            late_fraction: f64::NAN,
            bad_fraction: 7.0,
            partitions: 0,
            events: Some(5),
            ..spec(10)
        };
        let mut st = PartitionStream::new(&wild, t.clone(), 3);
        assert_eq!(st.next(), None);
        let mut st = PartitionStream::new(&GeneratorSpec { partitions: 1, ..wild }, t, 0);
        let all: Vec<Generated> = st.by_ref().collect();
        assert_eq!(all.len(), 5);
        assert!(all.iter().all(|g| matches!(g, Generated::Bad { .. })));
        assert_eq!((st.next(), st.position()), (None, 5));
    }

    #[test]
    fn deterministic_and_partitions_differ() {
        let s = GeneratorSpec {
            jitter: Span::from_millis(20),
            late_fraction: 0.05,
            bad_fraction: 0.05,
            ..spec(1000)
        };
        let a = take(&mut stream(&s, 1), 5000);
        let b = take(&mut stream(&s, 1), 5000);
        assert_eq!(a, b);
        let c = take(&mut stream(&s, 2), 5000);
        assert_ne!(a, c);
        // Pinned: catches any change of the stream across versions and machines.
        let first: Vec<String> = take(&mut stream(&spec(1000), 0), 3)
            .iter()
            .map(|g| match g {
                Generated::Event { item, ts } => format!("{item}@{}", ts.0),
                Generated::Bad { .. } => "bad".to_string(),
            })
            .collect();
        assert_eq!(first, ["item-5@0", "item-41@0", "item-0@0"]);
        let mut lines = Vec::new();
        let mut s0 = stream(&s, 0);
        for _ in 0..1000 {
            assert!(s0.next_line(&mut lines));
            lines.push(b'\n');
        }
        let mut again = Vec::new();
        let mut s0 = stream(&s, 0);
        for _ in 0..1000 {
            assert!(s0.next_line(&mut again));
            again.push(b'\n');
        }
        assert_eq!(lines, again);
        // FNV-1a of the 1000 lines, pinned likewise (changed once on purpose: the empty-line
        // bad kind became trailing garbage when blank lines stopped being bad records).
        let fnv = lines.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        assert_eq!(fnv, 0x1bae_ecad_eb1f_b82a, "fingerprint {fnv:#x}");
    }

    #[test]
    fn events_are_split_over_partitions() {
        for (events, parts, want) in [
            (10u64, 3u32, vec![4u64, 3, 3]),
            (11, 3, vec![4, 4, 3]),
            (2, 4, vec![1, 1, 0, 0]),
            (0, 2, vec![0, 0]),
        ] {
            let s = GeneratorSpec {
                events: Some(events),
                partitions: parts,
                ..spec(50)
            };
            let got: Vec<u64> = (0..parts)
                .map(|p| {
                    let mut st = stream(&s, p);
                    let mut n = 0;
                    while st.next().is_some() {
                        n += 1;
                    }
                    assert_eq!(st.position(), n);
                    assert_eq!(Some(n), s.partition_events(p));
                    n
                })
                .collect();
            assert_eq!(got, want);
            assert_eq!(got.iter().sum::<u64>(), events);
        }
        assert_eq!(spec(5).partition_events(0), None);
        let mut lines = Vec::new();
        let s = GeneratorSpec {
            events: Some(1),
            partitions: 1,
            ..spec(5)
        };
        let mut st = stream(&s, 0);
        assert!(st.next_line(&mut lines));
        let len = lines.len();
        assert!(!st.next_line(&mut lines));
        assert_eq!(lines.len(), len);
    }

    #[test]
    fn base_time_is_exact_event_time() {
        let s = GeneratorSpec {
            rate: 1000,
            start: Millis(5),
            ..spec(10)
        };
        let ts: Vec<i64> = take(&mut stream(&s, 0), 5).iter().map(|g| event_ts(g).0).collect();
        assert_eq!(ts, vec![5, 6, 7, 8, 9]);
        let s = GeneratorSpec {
            rate: 3,
            start: Millis(0),
            ..spec(10)
        };
        let ts: Vec<i64> = take(&mut stream(&s, 0), 5).iter().map(|g| event_ts(g).0).collect();
        assert_eq!(ts, vec![0, 333, 666, 1000, 1333]);
        // The incremental arithmetic matches the closed form for awkward rates, including
        // after skips, and saturates at the end of time.
        for rate in [1u64, 7, 999, 1000, 1001, 10_000, 65_537, u64::MAX] {
            let s = GeneratorSpec {
                rate,
                start: Millis(-123_456),
                ..spec(10)
            };
            let mut st = stream(&s, 0);
            for i in 0..3000u64 {
                assert_eq!(st.next().map(|g| event_ts(&g).0), Some(base_of(&s, i)), "rate {rate}");
            }
            for at in [12_345u64, 1 << 40, u64::MAX - 5] {
                st.skip_to(at);
                for i in at..at.saturating_add(5) {
                    assert_eq!(event_ts(&st.next().expect("endless")).0, base_of(&s, i));
                }
            }
        }
        let s = GeneratorSpec {
            rate: 1,
            start: Millis(i64::MAX - 2500),
            ..spec(10)
        };
        let ts: Vec<i64> = take(&mut stream(&s, 0), 5).iter().map(|g| event_ts(g).0).collect();
        assert_eq!(
            ts,
            vec![i64::MAX - 2500, i64::MAX - 1500, i64::MAX - 500, i64::MAX, i64::MAX]
        );
    }

    #[test]
    fn jitter_stays_in_bounds() {
        let s = GeneratorSpec {
            rate: 100,
            jitter: Span::from_millis(50),
            ..spec(100)
        };
        let mut st = stream(&s, 3);
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for i in 0..100_000u64 {
            let ts = event_ts(&st.next().expect("endless")).0;
            let base = base_of(&s, i);
            assert!(ts <= base && ts >= base - 50, "{ts} vs base {base}");
            let d = (base - ts) as u64;
            lo = lo.min(d);
            hi = hi.max(d);
        }
        assert_eq!((lo, hi), (0, 50));
    }

    #[test]
    fn late_fraction_within_tolerance() {
        let s = GeneratorSpec {
            late_fraction: 0.1,
            late_by: Span::from_millis(600_000),
            jitter: Span::from_millis(10),
            ..spec(100)
        };
        let mut st = stream(&s, 0);
        let mut late = 0u64;
        for i in 0..100_000u64 {
            let ts = event_ts(&st.next().expect("endless")).0;
            let base = base_of(&s, i);
            if ts == base - 600_000 {
                late += 1;
            } else {
                assert!(ts <= base && ts >= base - 10);
            }
        }
        // Expected 10_000, sigma ~95: allow > 6 sigma.
        assert!((9_400..=10_600).contains(&late), "late = {late}");
        let s = GeneratorSpec {
            late_fraction: 1.0,
            ..spec(100)
        };
        let mut st = stream(&s, 0);
        for i in 0..1000 {
            assert_eq!(event_ts(&st.next().expect("endless")).0, base_of(&s, i) - 600_000);
        }
    }

    #[test]
    fn skip_to_equals_generating_and_dropping() {
        let s = GeneratorSpec {
            jitter: Span::from_millis(7),
            late_fraction: 0.2,
            bad_fraction: 0.2,
            rate: 333,
            ..spec(500)
        };
        let all = take(&mut stream(&s, 1), 3000);
        let mut st = stream(&s, 1);
        for at in [0u64, 1, 17, 64, 2500, 999, 3] {
            st.skip_to(at);
            assert_eq!(st.position(), at);
            let got = take(&mut st, 300);
            let end = (at as usize + 300).min(all.len());
            assert_eq!(got[..end - at as usize], all[at as usize..end], "skip to {at}");
        }
        // Every combination of enabled draws.
        for bits in 0..8u32 {
            let s = GeneratorSpec {
                jitter: Span::from_millis(if bits & 1 != 0 { 9 } else { 0 }),
                late_fraction: if bits & 2 != 0 { 0.3 } else { 0.0 },
                bad_fraction: if bits & 4 != 0 { 0.3 } else { 0.0 },
                events: Some(400),
                partitions: 1,
                ..spec(100)
            };
            let all = take(&mut stream(&s, 0), 1000);
            assert_eq!(all.len(), 400);
            let mut st = stream(&s, 0);
            st.skip_to(123);
            assert_eq!(take(&mut st, 1000), all[123..]);
            st.skip_to(400);
            assert!(st.next().is_none());
            st.skip_to(10_000);
            assert!(st.next().is_none());
        }
    }

    /// `cargo test --release -- --ignored --nocapture` prints the cost per record (best of 3
    /// runs of 10M records each, to discount noise from other processes).
    #[test]
    #[ignore]
    fn timing_next_per_event() {
        use rand_distr::Distribution;
        use std::hint::black_box;
        use std::time::Instant;
        const N: u64 = 10_000_000;
        fn best_of_3(mut run: impl FnMut()) -> f64 {
            (0..3)
                .map(|_| {
                    let t = Instant::now();
                    run();
                    t.elapsed().as_nanos() as f64 / N as f64
                })
                .fold(f64::INFINITY, f64::min)
        }
        let t0 = Instant::now();
        let tables = Arc::new(GeneratorTables::new(&GeneratorSpec::default()).expect("valid"));
        println!("tables for 1M items: {:?}", t0.elapsed());
        let variants = [
            ("default: 1M items, zipf 1.1", GeneratorSpec::default()),
            ("1000 items (all in cache)", spec(1000)),
            (
                "1M items + jitter, 1% late, 1% bad",
                GeneratorSpec {
                    jitter: Span::from_millis(2000),
                    late_fraction: 0.01,
                    bad_fraction: 0.01,
                    ..GeneratorSpec::default()
                },
            ),
        ];
        for (name, s) in variants {
            let tables = if s.items == tables.items() {
                tables.clone()
            } else {
                Arc::new(GeneratorTables::new(&s).expect("valid"))
            };
            let mut st = PartitionStream::try_new(&s, tables, 0).expect("valid");
            let ns_next = best_of_3(|| {
                let mut acc = 0i64;
                for _ in 0..N {
                    if let Some(Generated::Event { item, ts }) = st.next() {
                        acc = acc.wrapping_add(ts.0 ^ item.len() as i64);
                    }
                }
                black_box(acc);
            });
            let mut line = Vec::with_capacity(64);
            let ns_line = best_of_3(|| {
                for _ in 0..N {
                    line.clear();
                    st.next_line(&mut line);
                    black_box(&line);
                }
            });
            println!("[{name}] next(): {ns_next:.1} ns/event, next_line(): {ns_line:.1} ns/line");
        }
        // Sampling an id without batching: this alias table vs rand_distr's (two draws, two
        // tables), on the same weights.
        let weights: Vec<f64> = (0..1_000_000).map(|r| zipf_weight(r, 1.1)).collect();
        let alias = rand_distr::weighted::WeightedAliasIndex::new(weights).expect("weights");
        let ids = tables.ids().clone();
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let ns_ref = best_of_3(|| {
            for _ in 0..N {
                black_box(ids[alias.sample(&mut rng)].clone());
            }
        });
        let ns_own = best_of_3(|| {
            for _ in 0..N {
                black_box(ids[tables.sample(rng.next_u64()) as usize].clone());
            }
        });
        println!("unbatched sample + id: own alias {ns_own:.1} ns, WeightedAliasIndex {ns_ref:.1} ns");
    }
}

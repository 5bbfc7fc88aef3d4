//! The deterministic event generator, free of any engine or I/O.
//!
//! A [`GeneratorSpec`] describes a synthetic input of `partitions` independent streams of item
//! events whose popularity follows a Zipf law (`item-0` is the most popular). One
//! [`GeneratorTables`] (the alias table and the pre-rendered item ids) is built per generator and
//! shared by the [`PartitionStream`]s of all partitions through an `Arc`.
//!
//! # Contract
//!
//! - **Deterministic.** The records of a partition are a pure function of the spec and the
//!   partition number: the same spec gives the same sequence, byte for byte, on every run and
//!   every machine. Each partition has its own ChaCha8 stream seeded with
//!   `seed ^ partition * 0x9E3779B97F4A7C15`; the Zipf weights are computed with basic IEEE-754
//!   operations only (no platform `pow`/`exp`/`ln`), so the alias table is bit-identical
//!   everywhere too.
//! - **Fixed draws per record.** Every record consumes exactly [`GeneratorSpec::words_per_record`] 64-bit words
//!   of its partition's ChaCha stream (one for the item, plus one each for the bad, late and
//!   jitter decisions when those are enabled). That is what makes [`PartitionStream::skip_to`]
//!   O(1): it seeks the ChaCha stream instead of generating and dropping, and gives exactly the
//!   records that generating and dropping would.
//! - **Rate is event time, not wall-clock pacing.** Record `i` of a partition (bad records
//!   included: they consume a position and a time slot) has the base time
//!   `start + floor(i * 1000 / rate)` ms, computed exactly (no drift) and saturating at
//!   `Millis::MAX`. Nothing here sleeps: pacing to the wall clock is the source operator's job.
//! - **Disorder.** A late event (probability `late_fraction`) has `ts = base - late_by`; any other
//!   event has `ts = base - u` with `u` uniform in `[0, jitter]`.
//! - **Bad records.** With probability `bad_fraction` a record is a bad line instead of an event:
//!   truncated JSON, a float `ts`, a missing `item_id`, an empty `item_id`, not an object,
//!   invalid UTF-8, an empty line or a digit-string `ts`, chosen from the ChaCha stream. Every
//!   one is rejected by `hotlist_operators::event::parse_event`.
//! - **Volume.** `events` (if set) is split over the partitions as evenly as possible, lower
//!   partitions taking the remainder; `None` makes every partition endless.

use compact_str::format_compact;
use hotlist_operators::record::ItemId;
use hotlist_operators::time::{Millis, Span};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Most distinct items a generator may have (the ids and the alias table take ~32 bytes each).
pub const MAX_ITEMS: u32 = 100_000_000;

/// Multiplier that decorrelates the seeds of the partitions (the 64-bit golden ratio).
const PARTITION_SEED_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// 2^64 as a float, to turn a probability into a 64-bit threshold.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// 2^32 as a float, to turn an alias probability into a 32-bit threshold.
const TWO_POW_32: f64 = 4_294_967_296.0;

/// Settings of one generator (all partitions).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GeneratorSpec {
    /// Seed of every partition's random stream.
    pub seed: u64,
    /// Number of distinct items (`item-0` … `item-{items-1}`); 1 ..= [`MAX_ITEMS`].
    pub items: u32,
    /// Zipf exponent `s` (weight of rank `n` is `1/(n+1)^s`); finite, >= 0 (0 = uniform).
    pub zipf: f64,
    /// Number of partitions; >= 1.
    pub partitions: u32,
    /// Total records over all partitions (lower partitions get the remainder); `None` = endless.
    pub events: Option<u64>,
    /// Records per second of *event time* per partition; >= 1.
    pub rate: u64,
    /// Event time of the first record of every partition.
    pub start: Millis,
    /// Each on-time event's ts is its base time minus a uniform draw in `[0, jitter]`.
    pub jitter: Span,
    /// Fraction in `[0, 1]` of events made late: `ts = base - late_by`.
    pub late_fraction: f64,
    /// How far behind their base time late events are.
    pub late_by: Span,
    /// Fraction in `[0, 1]` of records that are bad lines instead of events.
    pub bad_fraction: f64,
}

impl Default for GeneratorSpec {
    fn default() -> Self {
        GeneratorSpec {
            seed: 42,
            items: 1_000_000,
            zipf: 1.1,
            partitions: 4,
            events: None,
            rate: 10_000,
            start: Millis(0),
            jitter: Span::ZERO,
            late_fraction: 0.0,
            late_by: Span::from_millis(10 * 60 * 1000),
            bad_fraction: 0.0,
        }
    }
}

impl GeneratorSpec {
    /// Checks every field; the message names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if self.items == 0 || self.items > MAX_ITEMS {
            return Err(format!("items must be between 1 and {MAX_ITEMS}, got {}", self.items));
        }
        if !self.zipf.is_finite() || self.zipf < 0.0 {
            return Err(format!(
                "zipf must be a finite number >= 0 (0 = uniform), got {}",
                self.zipf
            ));
        }
        if self.partitions == 0 {
            return Err("partitions must be at least 1, got 0".to_string());
        }
        if self.rate == 0 {
            return Err("rate must be at least 1 event per second, got 0".to_string());
        }
        for (name, value) in [
            ("late_fraction", self.late_fraction),
            ("bad_fraction", self.bad_fraction),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(format!("{name} must be between 0 and 1, got {value}"));
            }
        }
        Ok(())
    }

    /// Records partition `partition` produces: its share of `events` (`None` = endless).
    /// Partitions at or beyond `partitions` get `Some(0)`.
    pub fn partition_events(&self, partition: u32) -> Option<u64> {
        let total = self.events?;
        if partition >= self.partitions {
            return Some(0);
        }
        let parts = u64::from(self.partitions);
        let extra = u64::from(u64::from(partition) < total % parts);
        Some(total / parts + extra)
    }

    /// 64-bit words of the ChaCha stream every record of this spec consumes.
    pub fn words_per_record(&self) -> u64 {
        1 + u64::from(self.bad_fraction > 0.0)
            + u64::from(self.late_fraction > 0.0)
            + u64::from(self.jitter > Span::ZERO)
    }
}

/// One slot of the alias table: accept the drawn rank if the 32-bit fraction is below
/// `threshold`, else take `alias`. Full slots have `alias` = their own rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AliasSlot {
    threshold: u32,
    alias: u32,
}

/// The per-generator precomputation shared by all partitions: a Zipf alias table (O(1) sampling
/// from one 64-bit word) and the item ids rendered once.
#[derive(Debug)]
pub struct GeneratorTables {
    slots: Box<[AliasSlot]>,
    ids: Arc<[ItemId]>,
    zipf: f64,
    weight_sum: f64,
}

impl GeneratorTables {
    /// Builds the tables of `spec` (validating it first). O(items) time and ~32 bytes per item.
    pub fn new(spec: &GeneratorSpec) -> Result<Self, String> {
        spec.validate()?;
        let n = spec.items as usize;
        let weights: Vec<f64> = (0..spec.items).map(|r| zipf_weight(r, spec.zipf)).collect();
        // Smallest first: a fixed order (determinism) that also loses the least precision.
        let weight_sum: f64 = weights.iter().rev().sum();
        let scale = n as f64 / weight_sum;

        // Vose's alias method, with a fixed processing order.
        let mut prob: Vec<f64> = weights.iter().map(|w| w * scale).collect();
        drop(weights);
        let mut slots: Vec<AliasSlot> = (0..spec.items)
            .map(|r| AliasSlot {
                threshold: u32::MAX,
                alias: r,
            })
            .collect();
        let mut small: Vec<u32> = Vec::new();
        let mut large: Vec<u32> = Vec::new();
        for (r, &p) in (0..spec.items).zip(prob.iter()) {
            if p < 1.0 {
                small.push(r);
            } else {
                large.push(r);
            }
        }
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            large.pop();
            let ps = prob[s as usize];
            slots[s as usize] = AliasSlot {
                threshold: to_threshold32(ps),
                alias: l,
            };
            let pl = (prob[l as usize] + ps) - 1.0;
            prob[l as usize] = pl;
            if pl < 1.0 {
                small.push(l);
            } else {
                large.push(l);
            }
        }
        // Whatever is left has probability 1 up to rounding: keep the default full slot.

        let ids: Arc<[ItemId]> = (0..spec.items).map(|r| format_compact!("item-{r}")).collect();
        Ok(GeneratorTables {
            slots: slots.into_boxed_slice(),
            ids,
            zipf: spec.zipf,
            weight_sum,
        })
    }

    /// Number of distinct items.
    pub fn items(&self) -> u32 {
        self.ids.len() as u32
    }

    /// The item ids by rank (`ids()[n] == "item-{n}"`).
    pub fn ids(&self) -> &Arc<[ItemId]> {
        &self.ids
    }

    /// The exact probability of the item of rank `rank` (0 for ranks out of range).
    pub fn probability(&self, rank: u32) -> f64 {
        if rank >= self.items() {
            return 0.0;
        }
        zipf_weight(rank, self.zipf) / self.weight_sum
    }

    /// Samples a rank from one uniform 64-bit word: the high half of `word * items` picks a slot
    /// (bias at most items / 2^64), the top 32 bits of the low half decide slot or alias.
    #[inline]
    fn sample(&self, word: u64) -> u32 {
        let m = u128::from(word) * self.slots.len() as u128;
        let slot = (m >> 64) as usize;
        let frac = ((m as u64) >> 32) as u32;
        match self.slots.get(slot) {
            Some(s) if frac < s.threshold => slot as u32,
            Some(s) => s.alias,
            None => 0, // unreachable: slot < len because word < 2^64
        }
    }
}

/// Probability `p` in [0, 1] as a 32-bit acceptance threshold (`frac < threshold`).
fn to_threshold32(p: f64) -> u32 {
    let t = p * TWO_POW_32;
    if t >= u32::MAX as f64 {
        u32::MAX
    } else if t > 0.0 {
        t as u32
    } else {
        0
    }
}

/// Probability `p` in [0, 1] as a 64-bit acceptance threshold (`word < threshold`); 2^64 = always.
fn to_threshold64(p: f64) -> u128 {
    (p.clamp(0.0, 1.0) * TWO_POW_64) as u128
}

/// `1 / (rank + 1)^s` with basic IEEE-754 operations only, so it is bit-identical on every
/// platform (libm's `pow` may differ in the last bit between systems). Relative error ~1e-15.
fn zipf_weight(rank: u32, s: f64) -> f64 {
    if s == 0.0 || rank == 0 {
        return 1.0;
    }
    exp_det(-s * ln_det(f64::from(rank) + 1.0))
}

/// Natural logarithm of a finite `x >= 1`, deterministically.
fn ln_det(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    // ln m = 2 atanh(t), t = (m-1)/(m+1), |t| <= 0.172: 14 odd terms reach f64 precision.
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let mut series = 0.0;
    for k in (0..14).rev() {
        series = series * t2 + 1.0 / f64::from(2 * k + 1);
    }
    e as f64 * std::f64::consts::LN_2 + 2.0 * t * series
}

/// `e^y` for a finite `y <= 0`, deterministically (0 below the normal range).
fn exp_det(y: f64) -> f64 {
    if y.is_nan() || y < -708.0 {
        return 0.0;
    }
    // Cody–Waite reduction: y = k ln2 + r, |r| <= ln2/2.
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let k = (y / std::f64::consts::LN_2).round();
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let mut series = 1.0;
    for i in (1..=20).rev() {
        series = 1.0 + series * r / f64::from(i);
    }
    let k = k as i64; // in [-1022, 0] given the bound above
    series * f64::from_bits(((k + 1023) as u64) << 52)
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

/// The kinds of bad lines, in the order of their 3-bit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BadKind {
    Truncated,
    FloatTs,
    MissingItemId,
    EmptyItemId,
    NotObject,
    InvalidUtf8,
    EmptyLine,
    DigitStringTs,
}

impl BadKind {
    const ALL: [BadKind; 8] = [
        BadKind::Truncated,
        BadKind::FloatTs,
        BadKind::MissingItemId,
        BadKind::EmptyItemId,
        BadKind::NotObject,
        BadKind::InvalidUtf8,
        BadKind::EmptyLine,
        BadKind::DigitStringTs,
    ];
}

/// Records drawn ahead at a time: resolving a batch's alias-table lookups (random over the
/// whole table, i.e. cache misses for large item counts) in one tight loop lets the misses
/// overlap instead of stalling one record at a time. Invisible in the output.
const BATCH: usize = 64;

/// A record before rendering (nothing allocated: ids of up to 24 bytes are inline). A bad
/// record's kind and truncation point come from the low bits of its item word (the rank
/// depends on its high bits).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Raw {
    word: u64,
    item: ItemId,
    bad: bool,
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
    fn next_raw(&mut self) -> Option<Raw> {
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

    fn render_raw(raw: &Raw, out: &mut Vec<u8>) {
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

/// Appends `{"item_id":"<item, JSON-escaped>","ts":<ts as integer ms>}` to `out`.
pub fn render_json(item: &str, ts: Millis, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"item_id\":");
    write_json_str(item, out);
    out.extend_from_slice(b",\"ts\":");
    write_i64(ts.0, out);
    out.push(b'}');
}

/// Appends a bad line of kind `kind` built around a real item and time.
fn render_bad(kind: BadKind, item: &str, ts: Millis, cut: u64, out: &mut Vec<u8>) {
    match kind {
        BadKind::Truncated => {
            // Any proper non-empty prefix of an object is malformed JSON.
            let begin = out.len();
            render_json(item, ts, out);
            let len = (out.len() - begin) as u64;
            out.truncate(begin + (1 + cut % (len - 1)) as usize);
        }
        BadKind::FloatTs => {
            out.extend_from_slice(b"{\"item_id\":");
            write_json_str(item, out);
            out.extend_from_slice(b",\"ts\":");
            write_i64(ts.0, out);
            out.extend_from_slice(b".5}");
        }
        BadKind::MissingItemId => {
            out.extend_from_slice(b"{\"item\":");
            write_json_str(item, out);
            out.extend_from_slice(b",\"ts\":");
            write_i64(ts.0, out);
            out.push(b'}');
        }
        BadKind::EmptyItemId => render_json("", ts, out),
        BadKind::NotObject => {
            out.push(b'[');
            write_json_str(item, out);
            out.push(b',');
            write_i64(ts.0, out);
            out.push(b']');
        }
        BadKind::InvalidUtf8 => {
            out.extend_from_slice(b"{\"item_id\":");
            write_json_str(item, out);
            out.pop(); // the closing quote: the bad bytes go inside the string
            out.extend_from_slice(b"\xC3\x28\xFF\",\"ts\":");
            write_i64(ts.0, out);
            out.push(b'}');
        }
        BadKind::EmptyLine => {}
        BadKind::DigitStringTs => {
            out.extend_from_slice(b"{\"item_id\":");
            write_json_str(item, out);
            out.extend_from_slice(b",\"ts\":\"");
            write_i64(ts.0, out);
            out.extend_from_slice(b"\"}");
        }
    }
}

/// Appends `s` as a JSON string literal (escaping as serde_json does).
fn write_json_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[from..i]);
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(short);
        }
        from = i + 1;
    }
    out.extend_from_slice(&bytes[from..]);
    out.push(b'"');
}

/// Appends the decimal form of `v`.
fn write_i64(v: i64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::event::parse_event;

    fn spec(items: u32) -> GeneratorSpec {
        GeneratorSpec {
            items,
            ..GeneratorSpec::default()
        }
    }

    fn stream(spec: &GeneratorSpec, partition: u32) -> PartitionStream {
        let tables = Arc::new(GeneratorTables::new(spec).expect("valid spec"));
        PartitionStream::try_new(spec, tables, partition).expect("valid partition")
    }

    fn take(s: &mut PartitionStream, n: usize) -> Vec<Generated> {
        (0..n).map_while(|_| s.next()).collect()
    }

    fn base_of(spec: &GeneratorSpec, i: u64) -> i64 {
        let q = u128::from(i) * 1000 / u128::from(spec.rate);
        i64::try_from(i128::from(spec.start.0) + q as i128).unwrap_or(i64::MAX)
    }

    fn event_ts(g: &Generated) -> Millis {
        match g {
            Generated::Event { ts, .. } => *ts,
            Generated::Bad { .. } => panic!("unexpected bad record"),
        }
    }

    #[test]
    fn validation_names_the_field() {
        assert!(GeneratorSpec::default().validate().is_ok());
        let cases: Vec<(GeneratorSpec, &str)> = vec![
            (spec(0), "items"),
            (spec(MAX_ITEMS + 1), "items"),
            (GeneratorSpec { zipf: -0.1, ..spec(10) }, "zipf"),
            (
                GeneratorSpec {
                    zipf: f64::NAN,
                    ..spec(10)
                },
                "zipf",
            ),
            (
                GeneratorSpec {
                    partitions: 0,
                    ..spec(10)
                },
                "partitions",
            ),
            (GeneratorSpec { rate: 0, ..spec(10) }, "rate"),
            (
                GeneratorSpec {
                    late_fraction: 1.5,
                    ..spec(10)
                },
                "late_fraction",
            ),
            (
                GeneratorSpec {
                    bad_fraction: f64::NAN,
                    ..spec(10)
                },
                "bad_fraction",
            ),
        ];
        for (s, field) in cases {
            let err = s.validate().expect_err(field);
            assert!(err.starts_with(field), "{err}");
            assert!(GeneratorTables::new(&s).is_err());
        }
        let s = spec(10);
        let t = Arc::new(GeneratorTables::new(&s).expect("valid"));
        assert!(PartitionStream::try_new(&s, t.clone(), 4).is_err());
        assert!(PartitionStream::try_new(&spec(11), t.clone(), 0).is_err());
        assert!(PartitionStream::try_new(&GeneratorSpec { zipf: 1.0, ..s }, t, 0).is_err());
    }

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
    fn spec_deserializes_with_defaults() {
        let s: GeneratorSpec = serde_json::from_str(r#"{"items": 5, "events": 9}"#).expect("ok");
        assert_eq!((s.items, s.events, s.seed), (5, Some(9), 42));
        assert!(serde_json::from_str::<GeneratorSpec>(r#"{"itmes": 5}"#).is_err());
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
        // FNV-1a of the 1000 lines, pinned likewise.
        let fnv = lines.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        assert_eq!(fnv, 0x8010_25ae_1329_d35f, "fingerprint {fnv:#x}");
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
    fn zipf_skew_matches_exact_probability() {
        let s = GeneratorSpec {
            zipf: 1.1,
            ..spec(1000)
        };
        let tables = Arc::new(GeneratorTables::new(&s).expect("valid"));
        let h: f64 = (0..1000).map(|n| 1.0 / ((n + 1) as f64).powf(1.1)).sum();
        assert!((tables.probability(0) - 1.0 / h).abs() < 1e-12);
        let mut st = PartitionStream::try_new(&s, tables.clone(), 0).expect("valid");
        let mut counts = vec![0u64; 1000];
        let n = 200_000;
        for _ in 0..n {
            match st.next() {
                Some(Generated::Event { item, .. }) => {
                    let rank: usize = item["item-".len()..].parse().expect("rank");
                    counts[rank] += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        let f0 = counts[0] as f64 / n as f64;
        assert!((f0 * h - 1.0).abs() < 0.05, "f0 = {f0}, want {}", 1.0 / h);
        for r in [1usize, 2, 9] {
            let want = tables.probability(r as u32) * n as f64;
            assert!((counts[r] as f64 - want).abs() < 6.0 * want.sqrt() + 5.0, "rank {r}");
        }
        assert!(counts.windows(2).take(5).all(|w| w[0] > w[1]));

        // s = 0 is uniform.
        let s = GeneratorSpec { zipf: 0.0, ..spec(10) };
        let mut st = stream(&s, 0);
        let mut counts = [0u64; 10];
        for _ in 0..100_000 {
            if let Some(Generated::Event { item, .. }) = st.next() {
                counts[item["item-".len()..].parse::<usize>().expect("rank")] += 1;
            }
        }
        assert!(counts.iter().all(|&c| (9_000..=11_000).contains(&c)), "{counts:?}");
    }

    #[test]
    fn deterministic_weights_match_libm() {
        for s in [0.0, 0.5, 1.0, 1.1, 2.0, 3.7] {
            for rank in [0u32, 1, 2, 9, 99, 12_345, 999_999, MAX_ITEMS - 1] {
                let want = (f64::from(rank) + 1.0).powf(-s);
                let got = zipf_weight(rank, s);
                assert!((got - want).abs() <= want * 1e-13, "s {s} rank {rank}: {got} vs {want}");
            }
        }
        assert_eq!(zipf_weight(MAX_ITEMS - 1, 1e6), 0.0);
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

    #[test]
    fn bad_lines_are_rejected_and_cover_every_kind() {
        for ts in [0i64, 1_713_462_150_123, -5, i64::MIN, i64::MAX] {
            for item in ["item-0", "item-123456", "a\"b\\c\n"] {
                for kind in BadKind::ALL {
                    for cut in 0..64 {
                        let mut out = Vec::new();
                        render_bad(kind, item, Millis(ts), cut, &mut out);
                        assert!(!out.contains(&b'\n'));
                        assert!(
                            parse_event(&out).is_err(),
                            "{kind:?} accepted: {}",
                            String::from_utf8_lossy(&out)
                        );
                    }
                }
            }
        }
        let s = GeneratorSpec {
            bad_fraction: 1.0,
            ..spec(1000)
        };
        let mut st = stream(&s, 0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let mut out = Vec::new();
            let raw = st.next_raw().expect("endless");
            assert!(raw.bad);
            seen.insert(raw.word & 7);
            PartitionStream::render_raw(&raw, &mut out);
            assert!(parse_event(&out).is_err(), "{}", String::from_utf8_lossy(&out));
        }
        assert_eq!(seen.len(), BadKind::ALL.len());
        let s = GeneratorSpec {
            bad_fraction: 0.1,
            ..spec(1000)
        };
        let bad = take(&mut stream(&s, 0), 100_000)
            .iter()
            .filter(|g| matches!(g, Generated::Bad { .. }))
            .count();
        assert!((9_400..=10_600).contains(&bad), "bad = {bad}");
    }

    #[test]
    fn rendered_events_are_accepted_with_same_item_and_ts() {
        let s = GeneratorSpec {
            jitter: Span::from_millis(100),
            late_fraction: 0.1,
            start: Millis(1_713_462_150_123),
            ..spec(100_000)
        };
        let mut st = stream(&s, 2);
        let mut line = Vec::new();
        for _ in 0..20_000 {
            let Some(Generated::Event { item, ts }) = st.next() else {
                panic!("expected an event")
            };
            line.clear();
            render_json(&item, ts, &mut line);
            let parsed = parse_event(&line).expect("accepted");
            assert_eq!((parsed.item_id.as_ref(), parsed.ts), (item.as_str(), ts));
        }
        for item in [
            "x",
            "quote\"back\\slash",
            "ctl\u{1}\u{8}\u{c}\t\r\n\u{1f}",
            "ünï€😀",
            "\u{7f}",
        ] {
            for ts in [i64::MIN, -1, 0, 42, i64::MAX] {
                line.clear();
                render_json(item, Millis(ts), &mut line);
                let mut want = br#"{"item_id":"#.to_vec();
                serde_json::to_writer(&mut want, item).expect("vec");
                want.extend_from_slice(format!(",\"ts\":{ts}}}").as_bytes());
                assert_eq!(line, want);
                let parsed = parse_event(&line).expect("accepted");
                assert_eq!((parsed.item_id.as_ref(), parsed.ts), (item, Millis(ts)));
            }
        }
        // next_line and next agree.
        let s = GeneratorSpec { bad_fraction: 0.3, ..s };
        let (mut a, mut b) = (stream(&s, 0), stream(&s, 0));
        for _ in 0..2000 {
            let mut from_line = Vec::new();
            assert!(a.next_line(&mut from_line));
            let want = match b.next().expect("endless") {
                Generated::Event { item, ts } => {
                    let mut v = Vec::new();
                    render_json(&item, ts, &mut v);
                    v
                }
                Generated::Bad { raw } => raw,
            };
            assert_eq!(from_line, want);
        }
    }

    #[test]
    fn ids_are_inline_and_named_by_rank() {
        let t = GeneratorTables::new(&spec(12_345)).expect("valid");
        assert_eq!(t.ids()[0], "item-0");
        assert_eq!(t.ids()[12_344], "item-12344");
        assert!(t.ids().iter().all(|id| !id.is_heap_allocated()));
        let total: f64 = (0..t.items()).map(|r| t.probability(r)).sum();
        assert!((total - 1.0).abs() < 1e-9);
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

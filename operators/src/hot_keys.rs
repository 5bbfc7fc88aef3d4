//! The sampled hot-key detector: which items are being hit faster than a threshold, per
//! tumbling event-time window, with hysteresis so a key near the threshold does not flap.
//!
//! - **Sampling** (`hot_keys/sampling.rs`): 1 in N events, chosen by a pinned hash of the
//!   event's (partition, position), never by chance or arrival order: a replay or a restart
//!   samples exactly the same events.
//! - **Counting** (`hot_keys/detector.rs`): one [`CountMinTopK`](crate::sketch::CountMinTopK)
//!   per open window (fixed memory per window whatever the number of keys). A key's rate is
//!   its estimated sampled count × N / window seconds; estimates come from the count-min cells,
//!   which do not depend on event order (plain update), so the reported rates do not either.
//! - **Hysteresis** (`hot_keys/hysteresis.rs`): a key is `hot` when its rate ≥ threshold; a key
//!   reported in the previous window stays, as `cooling`, while its rate ≥ threshold × (1 − h).
//!
//! A window closes when the global watermark passes its end + `time.allowed_lateness` (the
//! job's "final"); its report is then fixed. An event of a partition whose watermark had
//! already passed its window's end + allowed lateness is late (the per-partition rule of
//! `lateness.rs`), and an event of an already-closed window is dropped: neither counts.

mod detector;
mod hysteresis;
mod sampling;

pub use detector::{Added, HotKeyDetector, HotKeysSnapshot};
pub use hysteresis::classify;
pub use sampling::{is_sampled, sample_hash, Sampler, SAMPLE_SEED};

use crate::record::ItemId;
use crate::sketch::{CmsShape, MAX_CANDIDATES};
use crate::time::{Millis, Span};
use serde::{Deserialize, Serialize};

/// The largest `sample` (1 in N): beyond it a window sees too few events to estimate anything.
pub const MAX_SAMPLE: u32 = 1_000_000;

/// The longest hot-key window: one day.
pub const MAX_WINDOW: Span = Span::from_millis(86_400_000);

/// What the detector is asked to do (validated by [`HotKeySpec::validate`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HotKeySpec {
    /// Count 1 in `sample` events (1: every event).
    pub sample: u32,
    /// The tumbling window, aligned to the Unix epoch.
    pub window: Span,
    /// Events per second at which a key is hot.
    pub threshold: f64,
    /// In [0, 1): a reported key stays (cooling) while its rate ≥ threshold × (1 − hysteresis).
    pub hysteresis: f64,
    /// The count-min sketch of each window.
    pub shape: CmsShape,
    /// Candidates kept beside each window's sketch: at least the number of keys expected hot.
    pub candidates: usize,
}

impl HotKeySpec {
    /// Checks every value; the message names the key (`hot_keys.sample: …`).
    pub fn validate(&self) -> Result<(), String> {
        if self.sample == 0 || self.sample > MAX_SAMPLE {
            return Err(format!(
                "hot_keys.sample: must be between 1 and {MAX_SAMPLE}, got {}",
                self.sample
            ));
        }
        if self.window == Span::ZERO || self.window > MAX_WINDOW {
            return Err(format!(
                "hot_keys.window: must be positive and at most 1d, got {}",
                self.window
            ));
        }
        if !(self.threshold.is_finite() && self.threshold > 0.0) {
            return Err(format!(
                "hot_keys.threshold: must be a positive number of events per second, got {}",
                self.threshold
            ));
        }
        if !(0.0..1.0).contains(&self.hysteresis) {
            return Err(format!(
                "hot_keys.hysteresis: must be in [0, 1), got {}",
                self.hysteresis
            ));
        }
        if self.candidates == 0 || self.candidates > MAX_CANDIDATES {
            return Err(format!(
                "hot_keys.candidates: must be between 1 and {MAX_CANDIDATES}, got {}",
                self.candidates
            ));
        }
        Ok(())
    }

    /// The estimated rate (events per second) of a key with `sampled` sampled events in a window.
    pub fn rate(&self, sampled: u64) -> f64 {
        sampled as f64 * f64::from(self.sample) * 1000.0 / self.window.as_millis() as f64
    }

    /// The start of the window holding event time `ts`.
    pub fn window_start(&self, ts: Millis) -> Millis {
        let w = self.window.as_i64();
        Millis(ts.0.div_euclid(w).saturating_mul(w))
    }
}

/// Whether a reported key is above the threshold or only above the hysteresis bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum HotState {
    /// Rate ≥ threshold.
    Hot,
    /// Reported in the previous window; threshold × (1 − h) ≤ rate < threshold.
    Cooling,
}

impl HotState {
    /// Lower-case name, as stored in sinks.
    pub fn as_str(self) -> &'static str {
        match self {
            HotState::Hot => "hot",
            HotState::Cooling => "cooling",
        }
    }

    /// Parses `as_str` output.
    pub fn parse(s: &str) -> Option<HotState> {
        match s {
            "hot" => Some(HotState::Hot),
            "cooling" => Some(HotState::Cooling),
            _ => None,
        }
    }
}

/// One reported key of a closed window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HotKey {
    /// The item id.
    pub item_id: ItemId,
    /// Estimated events per second over the window.
    pub rate: f64,
    /// Hot or cooling.
    pub state: HotState,
}

/// The report of one closed hot-key window: its keys, highest rate first (then item id).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HotWindow {
    /// Window start (inclusive).
    pub start: Millis,
    /// Window end (exclusive).
    pub end: Millis,
    /// The global watermark the window closed at.
    pub watermark: Millis,
    /// Wall-clock time of the report.
    pub as_of: Millis,
    /// The hot and cooling keys (possibly none).
    pub keys: Vec<HotKey>,
}

#[cfg(test)]
mod tests;

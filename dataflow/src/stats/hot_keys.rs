//! The hot-key detector's counters (`[hot_keys]`).

use crate::metrics::Metrics;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Counters of the hot-key detector (`[hot_keys]`).
#[derive(Debug, Default)]
pub struct HotKeyStats {
    /// Whether the job runs the detector (its metrics are exported only then).
    pub enabled: AtomicBool,
    /// Events the detector sampled (over all workers).
    pub sampled: AtomicU64,
    /// Sampled events not counted: late for their partition, or their window already closed.
    pub dropped: AtomicU64,
    /// Hot-key windows closed (reported).
    pub windows: AtomicU64,
    /// Keys `hot` in the last closed window.
    pub hot: AtomicU64,
    /// Keys `cooling` in the last closed window.
    pub cooling: AtomicU64,
    /// Open windows held.
    pub open_windows: AtomicU64,
}

impl HotKeyStats {
    /// Registers, if the job runs the detector, what the last closed window reported, sampled
    /// and dropped events, windows closed and open.
    pub fn register(&self, m: &Metrics) {
        if !self.enabled.load(Relaxed) {
            return;
        }
        let load = |a: &AtomicU64| a.load(Relaxed) as i64;
        m.scalars([
            (
                "hotlist_hot_keys",
                "keys at or above hot_keys.threshold (state hot) in the last closed hot-key window",
                load(&self.hot),
            ),
            (
                "hotlist_hot_keys_cooling",
                "keys below the threshold but within the hysteresis (state cooling) in the last closed hot-key window",
                load(&self.cooling),
            ),
            (
                "hotlist_hot_key_sampled_total",
                "events the hot-key detector sampled (1 in hot_keys.sample)",
                load(&self.sampled),
            ),
            (
                "hotlist_hot_key_dropped_total",
                "sampled events not counted: late for their partition or their hot-key window already closed",
                load(&self.dropped),
            ),
            (
                "hotlist_hot_key_windows_total",
                "hot-key windows closed and reported",
                load(&self.windows),
            ),
            (
                "hotlist_hot_key_open_windows",
                "hot-key windows open (one count-min sketch each)",
                load(&self.open_windows),
            ),
        ]);
    }
}

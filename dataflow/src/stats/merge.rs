//! The merge's counters (worker 0): the global watermark, list revisions, windows closed and
//! sealed, and the replays of `exact_at_seal` windows.

use crate::metrics::Metrics;
use hotlist_operators::time::Millis;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// Counters of the list merge and its replays.
#[derive(Debug)]
pub struct MergeStats {
    /// Global watermark (ms), as the merger last saw it.
    pub watermark: AtomicI64,
    /// List revisions published.
    pub revisions: AtomicU64,
    /// Window instances closed (watermark passed the end).
    pub windows_closed: AtomicU64,
    /// Window instances sealed (final).
    pub windows_sealed: AtomicU64,
    /// `exact_at_seal`: sealed lists a replay made exact.
    pub replays_exact: AtomicU64,
    /// `exact_at_seal`: sealed lists that stayed approximate (the replay could not read the
    /// input again; the log says why).
    pub replays_failed: AtomicU64,
    /// `exact_at_seal`: replays running or queued.
    pub replays_pending: AtomicU64,
    /// `exact_at_seal`: of the lists left approximate, those whose proving pass did not fit
    /// the replay budget (`[exact_at_seal] max_replay_keys`).
    pub replays_over_budget: AtomicU64,
    /// `exact_at_seal`: the most items one replay map held in this run.
    pub replay_keys_peak: AtomicU64,
}

impl Default for MergeStats {
    fn default() -> MergeStats {
        MergeStats {
            watermark: AtomicI64::new(i64::MIN),
            revisions: AtomicU64::new(0),
            windows_closed: AtomicU64::new(0),
            windows_sealed: AtomicU64::new(0),
            replays_exact: AtomicU64::new(0),
            replays_failed: AtomicU64::new(0),
            replays_pending: AtomicU64::new(0),
            replays_over_budget: AtomicU64::new(0),
            replay_keys_peak: AtomicU64::new(0),
        }
    }
}

impl MergeStats {
    /// The global watermark.
    pub fn watermark(&self) -> Millis {
        Millis(self.watermark.load(Relaxed))
    }

    /// Registers revisions, windows, the global watermark (once there is one) and the replays
    /// of `exact_at_seal` windows (docs/exact-at-seal.md).
    pub fn register(&self, m: &Metrics) {
        let load = |a: &AtomicU64| a.load(Relaxed) as i64;
        m.scalars([
            (
                "hotlist_revisions_total",
                "list revisions published",
                load(&self.revisions),
            ),
            (
                "hotlist_windows_closed_total",
                "window instances closed",
                load(&self.windows_closed),
            ),
            (
                "hotlist_windows_sealed_total",
                "window instances sealed (final)",
                load(&self.windows_sealed),
            ),
            (
                "hotlist_exact_at_seal_lists_total",
                "exact_at_seal: sealed sketch lists a replay made exact (with a certificate)",
                load(&self.replays_exact),
            ),
            (
                "hotlist_exact_at_seal_failures_total",
                "exact_at_seal: sealed sketch lists left approximate: their input could not be read again, or the replay was over its budget (the log says why)",
                load(&self.replays_failed),
            ),
            (
                "hotlist_exact_at_seal_pending",
                "exact_at_seal: replays running or queued",
                load(&self.replays_pending),
            ),
            (
                "hotlist_exact_at_seal_over_budget_total",
                "exact_at_seal: sealed sketch lists left approximate because no proving pass fitted exact_at_seal.max_replay_keys in exact_at_seal.max_key_ranges ranges",
                load(&self.replays_over_budget),
            ),
            (
                "hotlist_exact_at_seal_replay_keys_peak",
                "exact_at_seal: the most items one replay map held in this run (bounded by exact_at_seal.max_replay_keys)",
                load(&self.replay_keys_peak),
            ),
        ]);
        let g = self.watermark();
        if g != Millis::MIN && g != Millis::MAX {
            m.gauge("hotlist_watermark_seconds", "global watermark", g.0 as f64 / 1000.0);
        }
    }
}

//! Watermarks: per partition (at the source) and global (over partitions).
//!
//! A partition's watermark is the largest event time it has shown minus
//! `max_out_of_orderness`; bad records never move it. The global watermark is the minimum over
//! active partitions; idle partitions do not hold it back and finished ones count as +∞. It
//! never goes backwards, even when an idle partition comes back behind it. (Only a run that goes
//! on after an end of input starts it afresh from the partitions' clocks; what the end sealed
//! stays sealed by the counter's `sealed_until`.)

use crate::record::{PartitionId, PartitionStatus};
use crate::time::{Millis, Span};
use std::collections::BTreeMap;

/// The clock of one partition, advanced in partition order.
#[derive(Clone, Debug)]
pub struct PartitionClock {
    max_ts: Millis,
    out_of_orderness: Span,
    finished: bool,
}

impl PartitionClock {
    /// A clock that has seen nothing.
    pub fn new(out_of_orderness: Span) -> PartitionClock {
        PartitionClock {
            max_ts: Millis::MIN,
            out_of_orderness,
            finished: false,
        }
    }

    /// A clock restored to a known maximum event time.
    pub fn with_max(out_of_orderness: Span, max_ts: Millis) -> PartitionClock {
        PartitionClock {
            max_ts,
            out_of_orderness,
            finished: false,
        }
    }

    /// The watermark now: `max_ts - max_out_of_orderness` (`Millis::MIN` before any event,
    /// `Millis::MAX` once finished).
    #[inline]
    pub fn watermark(&self) -> Millis {
        if self.finished {
            Millis::MAX
        } else if self.max_ts == Millis::MIN {
            Millis::MIN
        } else {
            self.max_ts.minus(self.out_of_orderness)
        }
    }

    /// Records an event; returns the watermark as it was *before* the event.
    #[inline]
    pub fn observe(&mut self, ts: Millis) -> Millis {
        let before = self.watermark();
        if ts > self.max_ts {
            self.max_ts = ts;
        }
        before
    }

    /// Largest event time seen.
    pub fn max_ts(&self) -> Millis {
        self.max_ts
    }

    /// Marks the end of the partition: its watermark becomes +∞.
    pub fn finish(&mut self) {
        self.finished = true;
    }
}

/// The global watermark over all partitions reported so far.
#[derive(Clone, Debug, Default)]
pub struct GlobalWatermark {
    partitions: BTreeMap<PartitionId, (Millis, PartitionStatus)>,
    current: Option<Millis>,
}

impl GlobalWatermark {
    /// No partitions yet: the watermark is `Millis::MIN`.
    pub fn new() -> GlobalWatermark {
        GlobalWatermark::default()
    }

    /// Records a partition's latest watermark and status.
    pub fn update(&mut self, partition: PartitionId, watermark: Millis, status: PartitionStatus) {
        self.partitions.insert(partition, (watermark, status));
    }

    /// Recomputes and returns the global watermark: the minimum over active partitions; +∞ when
    /// every partition finished; unchanged when all remaining ones are idle. Never decreases.
    pub fn advance(&mut self) -> Millis {
        let mut min_active: Option<Millis> = None;
        let mut all_finished = !self.partitions.is_empty();
        for (wm, status) in self.partitions.values() {
            match status {
                PartitionStatus::Active => {
                    all_finished = false;
                    min_active = Some(min_active.map_or(*wm, |m| m.min(*wm)));
                }
                PartitionStatus::Idle => all_finished = false,
                PartitionStatus::Finished => {}
            }
        }
        let candidate = if all_finished { Some(Millis::MAX) } else { min_active };
        if let Some(c) = candidate {
            self.current = Some(self.current.map_or(c, |cur| cur.max(c)));
        }
        self.get()
    }

    /// Continues from a restored global watermark (it never goes below it).
    pub fn restore(&mut self, watermark: Millis) {
        if watermark != Millis::MIN {
            self.current = Some(self.current.map_or(watermark, |c| c.max(watermark)));
        }
    }

    /// The watermark as of the last `advance`.
    pub fn get(&self) -> Millis {
        self.current.unwrap_or(Millis::MIN)
    }

    /// Each partition's last reported watermark and status.
    pub fn partitions(&self) -> impl Iterator<Item = (PartitionId, Millis, PartitionStatus)> + '_ {
        self.partitions.iter().map(|(p, (w, s))| (*p, *w, *s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PartitionStatus::*;

    #[test]
    fn partition_clock_reports_watermark_before_event() {
        let mut c = PartitionClock::new(Span::from_millis(10));
        assert_eq!(c.observe(Millis(100)), Millis::MIN);
        assert_eq!(c.observe(Millis(50)), Millis(90));
        assert_eq!(c.observe(Millis(120)), Millis(90));
        assert_eq!(c.watermark(), Millis(110));
        c.finish();
        assert_eq!(c.watermark(), Millis::MAX);
    }

    #[test]
    fn global_is_min_of_active_and_monotone() {
        let mut g = GlobalWatermark::new();
        assert_eq!(g.advance(), Millis::MIN);
        g.update(PartitionId(0), Millis(100), Active);
        g.update(PartitionId(1), Millis(50), Active);
        assert_eq!(g.advance(), Millis(50));
        g.update(PartitionId(1), Millis(70), Idle);
        assert_eq!(g.advance(), Millis(100));
        // the idle partition comes back behind: the global watermark does not go back
        g.update(PartitionId(1), Millis(80), Active);
        assert_eq!(g.advance(), Millis(100));
        g.update(PartitionId(0), Millis::MAX, Finished);
        assert_eq!(g.advance(), Millis(100));
        g.update(PartitionId(1), Millis(200), Active);
        assert_eq!(g.advance(), Millis(200));
        g.update(PartitionId(1), Millis::MAX, Finished);
        assert_eq!(g.advance(), Millis::MAX);
    }

    #[test]
    fn all_idle_holds_still() {
        let mut g = GlobalWatermark::new();
        g.update(PartitionId(0), Millis(10), Active);
        assert_eq!(g.advance(), Millis(10));
        g.update(PartitionId(0), Millis(20), Idle);
        assert_eq!(g.advance(), Millis(10));
    }
}

//! The per-partition lateness rule, as a source applies it.
//!
//! An event is dropped for a window instance when, before it was read, its partition's
//! watermark had already reached `window_end + allowed_lateness`. The rule reads only the
//! partition's own order, so the verdict is the same on every run, worker count and batching.

use crate::time::{Millis, Span};
use crate::window::WindowSpec;

/// The verdict for one event over all windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Bit `i` set: the event is late for at least one instance of window `i`.
    pub late_windows: u64,
    /// The event is late for every instance it belongs to: nothing will count it.
    pub fully_late: bool,
}

impl Verdict {
    /// On time everywhere.
    pub const ON_TIME: Verdict = Verdict {
        late_windows: 0,
        fully_late: false,
    };
}

/// Applies the lateness rule for a fixed window list.
#[derive(Clone, Debug)]
pub struct LatenessJudge {
    windows: Vec<WindowSpec>,
    allowed_lateness: Span,
}

impl LatenessJudge {
    /// A judge for these windows (at most 64, see `window::MAX_WINDOWS`).
    pub fn new(windows: Vec<WindowSpec>, allowed_lateness: Span) -> LatenessJudge {
        LatenessJudge {
            windows,
            allowed_lateness,
        }
    }

    /// The verdict for an event at `ts` read when its partition watermark was `wm_before`.
    #[inline]
    pub fn judge(&self, ts: Millis, wm_before: Millis) -> Verdict {
        // Instance i is late iff end_i <= wm_before - lateness. Every covering instance ends
        // after ts, so an event at or after that horizon is on time: one comparison per event.
        let horizon = wm_before.minus(self.allowed_lateness);
        if ts >= horizon {
            return Verdict::ON_TIME;
        }
        let mut late_windows = 0u64;
        let mut fully_late = true;
        for (i, w) in self.windows.iter().enumerate() {
            if w.first_end_covering(ts) <= horizon {
                late_windows |= 1 << i;
            }
            if w.last_end_covering(ts) > horizon {
                fully_late = false;
            }
        }
        Verdict {
            late_windows,
            fully_late,
        }
    }

    /// The allowed lateness.
    pub fn allowed_lateness(&self) -> Span {
        self.allowed_lateness
    }

    /// Names of the windows in a `late_windows` mask, comma-separated.
    pub fn names(&self, mask: u64) -> String {
        let names: Vec<&str> = self
            .windows
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, w)| w.name.as_str())
            .collect();
        names.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let tumbling = WindowSpec::tumbling("t", Span::from_millis(10), 1);
        let hopping = WindowSpec {
            rank: Default::default(),
            key: Default::default(),
            name: "h".into(),
            size: Span::from_millis(20),
            slide: Span::from_millis(10),
            k: 1,
        };
        let j = LatenessJudge::new(vec![tumbling, hopping], Span::from_millis(5));
        assert_eq!(j.judge(Millis(3), Millis::MIN), Verdict::ON_TIME);
        // wm 15 -> horizon 10: instance [0,10) of t is late; h instances [-10,10) late, [0,20) not
        let v = j.judge(Millis(3), Millis(15));
        assert_eq!(
            v,
            Verdict {
                late_windows: 0b11,
                fully_late: false
            }
        );
        assert_eq!(j.names(v.late_windows), "t,h");
        // horizon 20: everything covering 3 has ended by 20
        assert_eq!(
            j.judge(Millis(3), Millis(25)),
            Verdict {
                late_windows: 0b11,
                fully_late: true
            }
        );
        // horizon exactly at the end of [0,10): late (end <= horizon)
        assert_eq!(j.judge(Millis(9), Millis(15)).late_windows & 1, 1);
        assert_eq!(j.judge(Millis(10), Millis(15)), Verdict::ON_TIME);
    }
}

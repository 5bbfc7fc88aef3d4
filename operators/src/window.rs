//! Windows, window instances and panes.
//!
//! Windows are aligned to the Unix epoch in UTC. A window of size `S` and slide `L` (tumbling:
//! `L = S`) has instances `[n·L, n·L + S)` for every integer `n`; an event at `t` belongs to
//! every instance that covers `t`. A `1d` window's instances are UTC calendar days.
//!
//! Counting happens per **pane**: a pane of width `W = gcd(S, L)` is the unit every instance of
//! the window is a whole number of, so an event increments one pane counter no matter how many
//! hopping instances cover it. Windows whose pane widths are equal share one pane store.
//!
//! No overflow: an event time lies in `Millis::MIN_EVENT..=Millis::MAX_EVENT` (|t| < 2^48 ms)
//! and a valid window is at most [`MAX_WINDOW_SIZE`] (< 2^49 ms), so every start, end and pane
//! computed here for an event stays below 2^50 ms in magnitude: far from saturating.

use crate::group::KeyShape;
use crate::time::{Millis, Span};
use crate::trend::Rank;
use serde::{Deserialize, Serialize};

/// A validated window specification.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSpec {
    /// The name the window is published under (`"5m"`).
    pub name: String,
    /// Instance length.
    pub size: Span,
    /// Distance between instance starts (`== size` for tumbling windows).
    pub slide: Span,
    /// How many items each list holds at most.
    pub k: usize,
    /// What it counts: global or per-group lists, events or distinct users.
    #[serde(default)]
    pub key: KeyShape,
    /// How its lists are ordered: by count, or by surge over a baseline (`trend`).
    #[serde(default)]
    pub rank: Rank,
}

/// Why a window specification is invalid.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WindowError {
    /// Zero-length window or slide.
    #[error("window {0:?}: size and slide must be positive")]
    Zero(String),
    /// Slide longer than the size: events between instances would belong to no window.
    #[error("window {0:?}: slide ({1}) must not exceed size ({2})")]
    SlideTooLong(String, Span, Span),
    /// `k = 0`.
    #[error("window {0:?}: k must be at least 1")]
    ZeroK(String),
    /// `k` above [`MAX_K`]: a list that long is no "top" list, and readers bound what they
    /// read from a store by it.
    #[error("window {0:?}: k must be at most {1}")]
    KTooLarge(String, usize),
    /// Too many overlapping instances per event (size/slide); would explode state.
    #[error("window {0:?}: size/slide must be at most {1} (hopping instances per event)")]
    TooManyHops(String, u64),
    /// The name is empty or used twice.
    #[error("window name {0:?} is empty or used twice")]
    BadName(String),
    /// More windows than the counter supports.
    #[error("at most {0} windows are supported")]
    TooMany(usize),
    /// Longer than the whole event time range: no instance could ever close.
    #[error("window {0:?}: size must be at most {max} ms (the event time range, years 0000-9999)", max = .1.as_millis())]
    TooLong(String, Span),
}

/// Most hopping instances one event may belong to.
pub const MAX_HOPS: u64 = 1024;
/// Most windows one job may configure.
pub const MAX_WINDOWS: usize = 64;
/// The largest `k` (list length) a window may have; the stores' readers never read more rows
/// of one list than this (or than the window's own `k`).
pub const MAX_K: usize = 1_000_000;
/// Longest window: the whole event time range (`MIN_EVENT..=MAX_EVENT`, 10000 Gregorian years).
pub const MAX_WINDOW_SIZE: Span = Span::from_millis((Millis::MAX_EVENT.0 - Millis::MIN_EVENT.0 + 1) as u64);

impl WindowSpec {
    /// A tumbling window.
    pub fn tumbling(name: &str, size: Span, k: usize) -> WindowSpec {
        WindowSpec {
            rank: Default::default(),
            name: name.to_string(),
            size,
            slide: size,
            k,
            key: KeyShape::default(),
        }
    }

    /// Checks the invariants every other function here relies on.
    pub fn validate(&self) -> Result<(), WindowError> {
        if self.size == Span::ZERO || self.slide == Span::ZERO {
            return Err(WindowError::Zero(self.name.clone()));
        }
        if self.slide > self.size {
            return Err(WindowError::SlideTooLong(self.name.clone(), self.slide, self.size));
        }
        if self.k == 0 {
            return Err(WindowError::ZeroK(self.name.clone()));
        }
        if self.k > MAX_K {
            return Err(WindowError::KTooLarge(self.name.clone(), MAX_K));
        }
        if self.size > MAX_WINDOW_SIZE {
            return Err(WindowError::TooLong(self.name.clone(), MAX_WINDOW_SIZE));
        }
        if self.size.as_millis().div_ceil(self.slide.as_millis()) > MAX_HOPS {
            return Err(WindowError::TooManyHops(self.name.clone(), MAX_HOPS));
        }
        Ok(())
    }

    /// Pane width: the largest span both size and slide are multiples of.
    pub fn pane_width(&self) -> Span {
        Span::from_millis(gcd(self.size.as_millis(), self.slide.as_millis()))
    }

    /// End (exclusive) of the instance starting at `start`.
    pub fn end_of(&self, start: Millis) -> Millis {
        start.plus(self.size)
    }

    /// Start of the latest-starting instance covering `t`.
    pub fn last_start_covering(&self, t: Millis) -> Millis {
        let l = self.slide.as_i64();
        Millis(t.0.div_euclid(l).saturating_mul(l))
    }

    /// Starts of all instances covering `t`, earliest first.
    ///
    /// # Examples
    ///
    /// Instances are aligned to the Unix epoch in UTC (the examples of `docs/time.md`):
    ///
    /// ```
    /// use hotlist_operators::time::{Millis, Span};
    /// use hotlist_operators::window::WindowSpec;
    ///
    /// let at = |s: &str| Millis::parse_rfc3339(s).expect("valid time");
    /// let span = |s: &str| Span::parse(s).expect("valid span");
    /// let t = at("2024-04-18T17:42:30.123Z");
    ///
    /// // tumbling: one instance, starting on the minute / at UTC midnight
    /// let minute = WindowSpec::tumbling("1m", span("1m"), 10);
    /// assert_eq!(minute.starts_covering(t).collect::<Vec<_>>(), [at("2024-04-18T17:42:00Z")]);
    /// let day = WindowSpec::tumbling("1d", span("1d"), 10);
    /// assert_eq!(day.starts_covering(t).collect::<Vec<_>>(), [at("2024-04-18T00:00:00Z")]);
    /// assert_eq!(day.end_of(at("2024-04-18T00:00:00Z")), at("2024-04-19T00:00:00Z"));
    ///
    /// // hopping, size 10m and slide 5m: [17:35, 17:45) and [17:40, 17:50)
    /// let hopping = WindowSpec { slide: span("5m"), ..WindowSpec::tumbling("10m", span("10m"), 10) };
    /// let starts: Vec<Millis> = hopping.starts_covering(t).collect();
    /// assert_eq!(starts, [at("2024-04-18T17:35:00Z"), at("2024-04-18T17:40:00Z")]);
    ///
    /// // size 1d, slide 1h: the 24 instances starting 2024-04-17T18:00Z … 2024-04-18T17:00Z
    /// let rolling = WindowSpec { slide: span("1h"), ..WindowSpec::tumbling("24h", span("1d"), 10) };
    /// let starts: Vec<Millis> = rolling.starts_covering(t).collect();
    /// assert_eq!(starts.len(), 24);
    /// assert_eq!(starts.first(), Some(&at("2024-04-17T18:00:00Z")));
    /// assert_eq!(starts.last(), Some(&at("2024-04-18T17:00:00Z")));
    ///
    /// // a week starts on a Thursday, 00:00 UTC: 1970-01-01 was one
    /// let week = WindowSpec::tumbling("1w", span("1w"), 10);
    /// assert_eq!(week.starts_covering(t).collect::<Vec<_>>(), [at("2024-04-18T00:00:00Z")]);
    /// assert_eq!(week.starts_covering(Millis(0)).collect::<Vec<_>>(), [Millis(0)]);
    /// ```
    pub fn starts_covering(&self, t: Millis) -> impl Iterator<Item = Millis> + use<> {
        let last = self.last_start_covering(t);
        let l = self.slide.as_i64();
        // n·L > t - S  <=>  instance end > t
        let first_n = (t.0.saturating_sub(self.size.as_i64())).div_euclid(l) + 1;
        let last_n = last.0.div_euclid(l);
        (first_n..=last_n).map(move |n| Millis(n.saturating_mul(l)))
    }

    /// End of the earliest-ending instance covering `t`.
    pub fn first_end_covering(&self, t: Millis) -> Millis {
        let l = self.slide.as_i64();
        let first_n = (t.0.saturating_sub(self.size.as_i64())).div_euclid(l) + 1;
        Millis(first_n.saturating_mul(l)).plus(self.size)
    }

    /// End of the latest-ending instance covering `t`.
    pub fn last_end_covering(&self, t: Millis) -> Millis {
        self.end_of(self.last_start_covering(t))
    }

    /// Start of the instance that ends soonest after `t` (the "last `size` up to `t`" view);
    /// for tumbling windows, simply the instance containing `t`.
    pub fn start_for_query(&self, t: Millis) -> Millis {
        self.first_end_covering(t).minus(self.size)
    }
}

/// Greatest common divisor.
pub fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Validates a list of windows together (names unique, count bounded).
pub fn validate_all(windows: &[WindowSpec]) -> Result<(), WindowError> {
    if windows.len() > MAX_WINDOWS {
        return Err(WindowError::TooMany(MAX_WINDOWS));
    }
    for (i, w) in windows.iter().enumerate() {
        w.validate()?;
        if w.name.is_empty() || windows[..i].iter().any(|o| o.name == w.name) {
            return Err(WindowError::BadName(w.name.clone()));
        }
    }
    Ok(())
}

/// Index of a window in the job's window list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WindowId(pub u16);

/// One instance of one window: `[start, start + size)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct InstanceKey {
    /// Which window.
    pub window: WindowId,
    /// Its start.
    pub start: Millis,
}

/// The defaults: 1m, 5m, 1h, 1d tumbling, K = 100.
pub fn default_windows() -> Vec<WindowSpec> {
    [
        ("1m", 60_000u64),
        ("5m", 300_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
    ]
    .iter()
    .map(|(n, ms)| WindowSpec::tumbling(n, Span::from_millis(*ms), 100))
    .collect()
}

/// Where an instance ending at `end` stands when the global watermark is `wm`.
///
/// # Examples
///
/// ```
/// use hotlist_operators::record::ListState;
/// use hotlist_operators::time::{Millis, Span};
/// use hotlist_operators::window::list_state;
///
/// let (end, lateness) = (Millis(60_000), Span::from_millis(5_000));
/// // the watermark has not reached the end: open
/// assert_eq!(list_state(end, Millis(59_999), lateness), ListState::Open);
/// // reached it: closed, late events may still correct it
/// assert_eq!(list_state(end, Millis(60_000), lateness), ListState::Closed);
/// // passed end + allowed lateness: final (sealed)
/// assert_eq!(list_state(end, Millis(65_000), lateness), ListState::Final);
/// ```
pub fn list_state(end: Millis, wm: Millis, allowed_lateness: Span) -> crate::record::ListState {
    use crate::record::ListState;
    if end <= wm.minus(allowed_lateness) {
        ListState::Final
    } else if end <= wm {
        ListState::Closed
    } else {
        ListState::Open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hop(size: u64, slide: u64) -> WindowSpec {
        WindowSpec {
            rank: Default::default(),
            key: Default::default(),
            name: "w".into(),
            size: Span::from_millis(size),
            slide: Span::from_millis(slide),
            k: 3,
        }
    }

    #[test]
    fn tumbling_instance_table() {
        let w = hop(10, 10);
        let cases = [(0, 0), (9, 0), (10, 10), (-1, -10), (-10, -10), (-11, -20)];
        for (t, start) in cases {
            assert_eq!(
                w.starts_covering(Millis(t)).collect::<Vec<_>>(),
                vec![Millis(start)],
                "t={t}"
            );
            assert_eq!(w.start_for_query(Millis(t)), Millis(start));
        }
    }

    #[test]
    fn hopping_instances_and_panes() {
        let w = hop(10, 4);
        assert_eq!(w.pane_width(), Span::from_millis(2));
        // instances [n·4, n·4+10) covering 9: n = 0, 1, 2 -> starts 0, 4, 8
        assert_eq!(
            w.starts_covering(Millis(9)).map(|m| m.0).collect::<Vec<_>>(),
            vec![0, 4, 8]
        );
        assert_eq!(w.first_end_covering(Millis(9)), Millis(10));
        assert_eq!(w.last_end_covering(Millis(9)), Millis(18));
        assert_eq!(w.start_for_query(Millis(9)), Millis(0));
    }

    #[test]
    fn validation() {
        assert!(hop(10, 20).validate().is_err());
        assert!(hop(0, 0).validate().is_err());
        assert!(hop(10_000, 1).validate().is_err());
        let longest = MAX_WINDOW_SIZE.as_millis();
        assert!(hop(longest, longest).validate().is_ok());
        assert_eq!(
            hop(longest + 1, longest + 1).validate(),
            Err(WindowError::TooLong("w".into(), MAX_WINDOW_SIZE))
        );
        assert!(validate_all(&default_windows()).is_ok());
        let mut k = hop(10, 10);
        k.k = MAX_K;
        assert!(k.validate().is_ok());
        k.k = MAX_K + 1;
        assert_eq!(k.validate(), Err(WindowError::KTooLarge("w".into(), MAX_K)));
        let mut two = default_windows();
        two[1].name = "1m".into();
        assert_eq!(validate_all(&two), Err(WindowError::BadName("1m".into())));
    }

    proptest! {
        /// The closed-form covering instances equal a brute-force scan.
        #[test]
        fn covering_matches_brute_force(size in 1u64..50, slide_div in 1u64..10, t in -200i64..200) {
            let slide = (size / slide_div).max(1);
            let w = hop(size, slide);
            let got: Vec<i64> = w.starts_covering(Millis(t)).map(|m| m.0).collect();
            let l = slide as i64;
            let want: Vec<i64> = (-400i64..400).filter(|n| n * l <= t && t < n * l + size as i64).map(|n| n * l).collect();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(w.first_end_covering(Millis(t)).0, want[0] + size as i64);
            prop_assert_eq!(w.last_end_covering(Millis(t)).0, want[want.len() - 1] + size as i64);
            // every instance is a whole number of panes
            let p = w.pane_width().as_i64();
            prop_assert!(want.iter().all(|s| s.rem_euclid(p) == 0) && (size as i64) % p == 0);
        }
    }
}

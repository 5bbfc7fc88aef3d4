//! Event time: instants in milliseconds since the Unix epoch and non-negative spans.
//!
//! `Millis` is an instant (may be negative: before 1970); `Span` is a duration. Keeping them
//! apart makes "added two instants" a type error. Arithmetic saturates at the ends so that
//! `Millis::MIN` / `Millis::MAX` can stand for "no watermark yet" and "end of input".
//!
//! Event times are bounded to RFC 3339's range, years 0000–9999 in UTC
//! ([`Millis::MIN_EVENT`]`..=`[`Millis::MAX_EVENT`]): anything outside is a bad record. The
//! bound keeps the sentinels `Millis::MIN` / `Millis::MAX` apart from real times and keeps all
//! window arithmetic far from `i64` overflow (see `window::MAX_WINDOW_SIZE`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// An instant of event time: milliseconds since 1970-01-01T00:00:00Z (UTC, no leap seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct Millis(pub i64);

/// A non-negative duration in milliseconds, at most `i64::MAX` (decoding refuses more).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(try_from = "u64")]
pub struct Span(u64);

impl Millis {
    /// The smallest instant: "no event seen yet".
    pub const MIN: Millis = Millis(i64::MIN);
    /// The largest instant: "the input has ended".
    pub const MAX: Millis = Millis(i64::MAX);
    /// The earliest event time: `0000-01-01T00:00:00.000Z`, the start of RFC 3339's range.
    pub const MIN_EVENT: Millis = Millis(-62_167_219_200_000);
    /// The latest event time: `9999-12-31T23:59:59.999Z`, the end of RFC 3339's range.
    pub const MAX_EVENT: Millis = Millis(253_402_300_799_999);

    /// Whether this instant is a valid event time (`MIN_EVENT..=MAX_EVENT`): two compares.
    #[inline]
    pub const fn is_event_time(self) -> bool {
        Millis::MIN_EVENT.0 <= self.0 && self.0 <= Millis::MAX_EVENT.0
    }

    /// `self + span`, saturating at `Millis::MAX`.
    ///
    /// # Examples
    ///
    /// The ends stand for "no watermark yet" and "end of input", and stay there:
    ///
    /// ```
    /// use hotlist_operators::time::{Millis, Span};
    ///
    /// assert_eq!(Millis(1_000).plus(Span::from_millis(500)), Millis(1_500));
    /// assert_eq!(Millis::MAX.plus(Span::from_millis(1)), Millis::MAX);
    /// assert_eq!(Millis::MIN.minus(Span::from_millis(1)), Millis::MIN);
    /// assert!(Millis::MAX_EVENT.is_event_time() && !Millis::MAX.is_event_time());
    /// ```
    pub fn plus(self, span: Span) -> Millis {
        Millis(self.0.saturating_add(span.as_i64()))
    }

    /// `self - span`, saturating at `Millis::MIN`.
    pub fn minus(self, span: Span) -> Millis {
        Millis(self.0.saturating_sub(span.as_i64()))
    }

    /// The wall clock now, in milliseconds since the epoch.
    pub fn now() -> Millis {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Millis(d.as_millis() as i64)
    }

    /// Formats as RFC 3339 with milliseconds in UTC (`1970-01-01T00:00:00.000Z`); the ends print
    /// as `-inf` / `+inf`.
    pub fn to_rfc3339(self) -> String {
        match self {
            Millis::MIN => "-inf".to_string(),
            Millis::MAX => "+inf".to_string(),
            Millis(ms) => {
                let nanos = (ms as i128) * 1_000_000;
                match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
                    Ok(t) => {
                        let fmt = time::macros::format_description!(
                            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
                        );
                        t.format(&fmt).unwrap_or_else(|_| ms.to_string())
                    }
                    Err(_) => ms.to_string(),
                }
            }
        }
    }

    /// Parses an RFC 3339 time with an offset (`Z` or `±hh:mm`). Fraction digits beyond
    /// milliseconds are truncated (not rounded), as the event contract says.
    ///
    /// # Examples
    ///
    /// ```
    /// use hotlist_operators::time::Millis;
    ///
    /// let t = Millis::parse_rfc3339("2024-04-18T17:42:30.123Z");
    /// assert_eq!(t, Some(Millis(1_713_462_150_123)));
    /// // the same instant at another offset; digits beyond milliseconds are cut, not rounded
    /// assert_eq!(Millis::parse_rfc3339("2024-04-18T19:42:30.123999+02:00"), t);
    /// // before 1970: negative, and still floored (to the millisecond at or before)
    /// assert_eq!(Millis::parse_rfc3339("1969-12-31T23:59:59.9995Z"), Some(Millis(-1)));
    /// assert_eq!(Millis(-1).to_rfc3339(), "1969-12-31T23:59:59.999Z");
    /// // no offset: not an RFC 3339 time
    /// assert_eq!(Millis::parse_rfc3339("2024-04-18T17:42:30"), None);
    /// ```
    pub fn parse_rfc3339(s: &str) -> Option<Millis> {
        let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
        let nanos = t.unix_timestamp_nanos();
        // Floor division: the fraction in the text is always a positive offset from the second,
        // so truncating its digits equals flooring the total toward -infinity.
        let ms = nanos.div_euclid(1_000_000);
        i64::try_from(ms).ok().map(Millis)
    }

    /// Parses a user-supplied time: RFC 3339, or an integer of milliseconds since the epoch.
    pub fn parse_user(s: &str) -> Option<Millis> {
        let s = s.trim();
        if let Ok(ms) = s.parse::<i64>() {
            return Some(Millis(ms));
        }
        Millis::parse_rfc3339(s)
    }

    /// Parses a calendar date `YYYY-MM-DD` as its UTC midnight.
    pub fn parse_date(s: &str) -> Option<Millis> {
        let fmt = time::macros::format_description!("[year]-[month]-[day]");
        let d = time::Date::parse(s.trim(), &fmt).ok()?;
        let t = d.midnight().assume_utc();
        Some(Millis((t.unix_timestamp_nanos() / 1_000_000) as i64))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Span {
    /// The zero span.
    pub const ZERO: Span = Span(0);

    /// A span of `ms` milliseconds. Spans above `i64::MAX` ms are clamped: nothing in event
    /// time is longer than the range of `Millis`.
    pub const fn from_millis(ms: u64) -> Span {
        if ms > i64::MAX as u64 {
            Span(i64::MAX as u64)
        } else {
            Span(ms)
        }
    }

    /// The span in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// The span as a signed millisecond count (always fits: see `from_millis`).
    pub const fn as_i64(self) -> i64 {
        self.0 as i64
    }

    /// As a `std::time::Duration` (for wall-clock timers).
    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0)
    }

    /// Parses a humantime string (`500ms`, `5s`, `1m`, `1h`, `1d`). Sub-millisecond remainders
    /// are an error rather than silently dropped.
    pub fn parse(s: &str) -> Result<Span, String> {
        let d = humantime::parse_duration(s.trim()).map_err(|e| format!("bad duration {s:?}: {e}"))?;
        if d.subsec_nanos() % 1_000_000 != 0 {
            return Err(format!("bad duration {s:?}: finer than a millisecond"));
        }
        let ms = u64::try_from(d.as_millis()).map_err(|_| format!("bad duration {s:?}: too long"))?;
        Ok(Span::from_millis(ms))
    }
}

impl TryFrom<u64> for Span {
    type Error = String;

    /// A decoded span: refused above `i64::MAX` ms (`from_millis` would clamp; a snapshot that
    /// says more was not written by us).
    fn try_from(ms: u64) -> Result<Span, String> {
        if ms > i64::MAX as u64 {
            return Err(format!("span of {ms} ms is longer than any instant range"));
        }
        Ok(Span(ms))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.as_std()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_offsets_and_truncation() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1970-01-01T00:00:00Z", Some(0)),
            ("1970-01-01T00:00:00.1239Z", Some(123)),
            ("1970-01-01T01:00:00+01:00", Some(0)),
            ("1969-12-31T23:59:59.9999Z", Some(-1)),
            ("2024-04-18T17:42:30.123456789-07:00", Some(1713487350123)),
            ("2024-04-18T17:42:30", None),
            ("2024-04-18", None),
            ("1713462150123", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(Millis::parse_rfc3339(text).map(|m| m.0), *want, "{text}");
        }
    }

    #[test]
    fn formats_round_trip() {
        for ms in [0i64, 1, -1, 1713462150123, -86_400_001] {
            let m = Millis(ms);
            assert_eq!(Millis::parse_rfc3339(&m.to_rfc3339()), Some(m));
        }
    }

    #[test]
    fn event_time_range_is_rfc3339s() {
        assert_eq!(Millis::parse_rfc3339("0000-01-01T00:00:00Z"), Some(Millis::MIN_EVENT));
        assert_eq!(
            Millis::parse_rfc3339("9999-12-31T23:59:59.999999Z"),
            Some(Millis::MAX_EVENT)
        );
        assert_eq!(Millis::MIN_EVENT.to_rfc3339(), "0000-01-01T00:00:00.000Z");
        assert_eq!(Millis::MAX_EVENT.to_rfc3339(), "9999-12-31T23:59:59.999Z");
        let inside = [Millis::MIN_EVENT, Millis(0), Millis::MAX_EVENT];
        assert!(inside.iter().all(|m| m.is_event_time()));
        let outside = [
            Millis::MIN,
            Millis(Millis::MIN_EVENT.0 - 1),
            Millis(Millis::MAX_EVENT.0 + 1),
            Millis::MAX,
        ];
        assert!(outside.iter().all(|m| !m.is_event_time()));
    }

    #[test]
    fn decoded_spans_are_bounded() {
        assert_eq!(Span::try_from(5), Ok(Span::from_millis(5)));
        assert_eq!(Span::try_from(i64::MAX as u64), Ok(Span::from_millis(u64::MAX)));
        assert!(Span::try_from(i64::MAX as u64 + 1).is_err());
    }

    #[test]
    fn spans_parse() {
        assert_eq!(Span::parse("500ms").unwrap().as_millis(), 500);
        assert_eq!(Span::parse("1d").unwrap().as_millis(), 86_400_000);
        assert_eq!(Span::parse("1m").unwrap().as_millis(), 60_000);
        assert!(Span::parse("1us").is_err());
        assert!(Span::parse("soon").is_err());
    }

    #[test]
    fn dates_are_utc_midnights() {
        assert_eq!(Millis::parse_date("1970-01-02"), Some(Millis(86_400_000)));
        assert_eq!(Millis::parse_date("1970-13-02"), None);
    }
}

//! [`GeneratorSpec`]: the settings of one generator, their checks, and what they imply
//! (each partition's share of the records, the random words every record consumes).

use hotlist_operators::time::{Millis, Span};
use serde::{Deserialize, Serialize};

/// Most distinct items a generator may have (the ids and the alias table take ~32 bytes each).
pub const MAX_ITEMS: u32 = 100_000_000;

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

    /// The latest base time of any record (`None` for an endless generator): record `i` of a
    /// partition is at `start + ⌊i · 1000 / rate⌋` ms before jitter and lateness (which only
    /// move it back), and partition 0 has the most records.
    pub fn last_base_time(&self) -> Option<Millis> {
        let n = self.partition_events(0)?;
        let ms = i128::from(n.saturating_sub(1)) * 1000 / i128::from(self.rate.max(1));
        Some(Millis(i64::try_from(i128::from(self.start.0) + ms).unwrap_or(i64::MAX)))
    }

    /// 64-bit words of the ChaCha stream every record of this spec consumes.
    pub fn words_per_record(&self) -> u64 {
        1 + u64::from(self.bad_fraction > 0.0)
            + u64::from(self.late_fraction > 0.0)
            + u64::from(self.jitter > Span::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::spec;
    use super::*;
    use crate::generator::{GeneratorTables, PartitionStream};
    use std::sync::Arc;

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

    /// `last_base_time` is the latest event time a generator without jitter produces.
    #[test]
    fn last_base_time_is_the_latest_event_time() {
        let s = GeneratorSpec {
            events: Some(10),
            partitions: 3,
            rate: 3,
            start: Millis(1000),
            ..spec(5)
        };
        let latest = (0..3)
            .flat_map(|p| super::super::testing::stream(&s, p))
            .filter_map(|g| match g {
                crate::generator::Generated::Event { ts, .. } => Some(ts),
                crate::generator::Generated::Bad { .. } => None,
            })
            .max();
        assert_eq!(s.last_base_time(), latest);
        assert_eq!(
            latest,
            Some(Millis(1000 + 1000)),
            "partition 0's 4th record: 1000 + 3 · 1000 / 3"
        );
        assert_eq!(GeneratorSpec { events: None, ..s }.last_base_time(), None);
    }

    #[test]
    fn spec_deserializes_with_defaults() {
        let s: GeneratorSpec = serde_json::from_str(r#"{"items": 5, "events": 9}"#).expect("ok");
        assert_eq!((s.items, s.events, s.seed), (5, Some(9), 42));
        assert!(serde_json::from_str::<GeneratorSpec>(r#"{"itmes": 5}"#).is_err());
    }
}

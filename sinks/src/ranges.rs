//! A sealed instance's input ranges ([`SealedRanges`]) as every store keeps them, and read back
//! checked.
//!
//! The ranges of an instance are stored as one JSON array (the SQL stores' column
//! `instance_ranges.ranges`; in Redis inside the value of the window's ranges hash), one object
//! per partition, in partition order:
//!
//! ```json
//! [{"partition":0,"from":120,"max_ts":1700000000000,"byte":{"offset":4096,"check":16045690984503111695},"to":180,"skips":[[130,0]]}]
//! ```
//!
//! `byte` is `null` where the partition is not a file (or its resume point has no byte mark),
//! `skips` is `[]` where the source rejected no record as `future` against the wall clock. The
//! document is this module's own, not the operators' serde form, so a renamed field in
//! `hotlist_operators::replay` cannot change what stores hold without a schema version; numbers
//! are written exactly (`check` is a full 64-bit XXH3 value). An instance that cannot be read
//! again is stored as its reason instead (`instance_ranges.unreadable`, or Redis's
//! `{"end":…,"unreadable":"…"}`).
//!
//! What is read back is checked: the JSON must be exactly this shape (unknown fields refused),
//! and the instance must pass [`SealedRanges::validate`]; otherwise the read fails with one
//! sentence naming the job, window, instance and field, which the store wraps in
//! [`SinkError::Corrupt`](crate::SinkError::Corrupt).

use crate::read_checks::ListAt;
use hotlist_operators::record::PartitionId;
use hotlist_operators::replay::{ByteMark, PartitionRange, SealedRanges};
use hotlist_operators::time::Millis;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One partition's range as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeDoc {
    partition: u32,
    from: u64,
    max_ts: i64,
    byte: Option<MarkDoc>,
    to: u64,
    skips: Vec<(u64, u32)>,
}

/// A file partition's byte mark as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkDoc {
    offset: u64,
    check: u64,
}

/// An instance as the Redis ranges hash stores it: its end, and its ranges or why it cannot be
/// read again (exactly one of the two).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstanceDoc {
    end: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ranges: Option<Vec<RangeDoc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unreadable: Option<String>,
}

impl From<&PartitionRange> for RangeDoc {
    fn from(r: &PartitionRange) -> RangeDoc {
        RangeDoc {
            partition: r.partition.0,
            from: r.from,
            max_ts: r.max_ts.0,
            byte: r.byte.map(|b| MarkDoc {
                offset: b.offset,
                check: b.check,
            }),
            to: r.to,
            skips: r.skips.clone(),
        }
    }
}

impl From<RangeDoc> for PartitionRange {
    fn from(d: RangeDoc) -> PartitionRange {
        PartitionRange {
            partition: PartitionId(d.partition),
            from: d.from,
            max_ts: Millis(d.max_ts),
            byte: d.byte.map(|b| ByteMark {
                offset: b.offset,
                check: b.check,
            }),
            to: d.to,
            skips: d.skips,
        }
    }
}

fn docs(ranges: &[PartitionRange]) -> Vec<RangeDoc> {
    ranges.iter().map(RangeDoc::from).collect()
}

/// The stored JSON of an instance's ranges (the SQL stores' `ranges` column).
pub(crate) fn ranges_json(ranges: &[PartitionRange]) -> String {
    // Integers and arrays of them only: serializing cannot fail.
    serde_json::to_string(&docs(ranges)).expect("partition ranges serialize")
}

/// The SQL columns of an instance's ranges: `(ranges, unreadable)`, exactly one of them set.
pub(crate) fn ranges_columns(r: &SealedRanges) -> (Option<String>, Option<&str>) {
    match &r.ranges {
        Ok(ranges) => (Some(ranges_json(ranges)), None),
        Err(reason) => (None, Some(reason.as_str())),
    }
}

/// The value of an instance in the Redis ranges hash: `{"end":…,"ranges":[…]}` or
/// `{"end":…,"unreadable":"…"}`.
pub(crate) fn instance_json(r: &SealedRanges) -> String {
    let (ranges, unreadable) = match &r.ranges {
        Ok(ranges) => (Some(docs(ranges)), None),
        Err(reason) => (None, Some(reason.clone())),
    };
    let doc = InstanceDoc {
        end: r.end.0,
        ranges,
        unreadable,
    };
    serde_json::to_string(&doc).expect("an instance's ranges serialize")
}

/// An instance read from a SQL row (`window_end`, `ranges`, `unreadable`), checked; `Err` is
/// one sentence naming the job, window, instance and field.
pub(crate) fn from_columns(
    at: &ListAt<'_>,
    end: Millis,
    ranges: Option<String>,
    unreadable: Option<String>,
) -> Result<SealedRanges, String> {
    let ranges = match (ranges, unreadable) {
        (Some(text), None) => Ok(parse_ranges(&text).map_err(|e| format!("{at}: ranges: {e}"))?),
        (None, Some(reason)) => Err(reason),
        (Some(_), Some(_)) => return Err(format!("{at}: both ranges and unreadable are set")),
        (None, None) => return Err(format!("{at}: neither ranges nor unreadable is set")),
    };
    checked(at, end, ranges)
}

/// An instance read from the Redis ranges hash (its value), checked; `Err` as
/// [`from_columns`]'s.
pub(crate) fn from_instance_json(at: &ListAt<'_>, text: &str) -> Result<SealedRanges, String> {
    let doc: InstanceDoc =
        serde_json::from_str(text).map_err(|e| format!("{at}: ranges: not the stored JSON of an instance: {e}"))?;
    let ranges = match (doc.ranges, doc.unreadable) {
        (Some(ranges), None) => Ok(ranges.into_iter().map(PartitionRange::from).collect()),
        (None, Some(reason)) => Err(reason),
        (Some(_), Some(_)) => return Err(format!("{at}: both ranges and unreadable are set")),
        (None, None) => return Err(format!("{at}: neither ranges nor unreadable is set")),
    };
    checked(at, Millis(doc.end), ranges)
}

/// The ranges array of the stored JSON; `Err` says what is wrong with it.
fn parse_ranges(text: &str) -> Result<Vec<PartitionRange>, String> {
    let docs: Vec<RangeDoc> =
        serde_json::from_str(text).map_err(|e| format!("not the stored JSON of partition ranges: {e}"))?;
    Ok(docs.into_iter().map(PartitionRange::from).collect())
}

/// The instance, checked as every store checks what it reads back.
fn checked(at: &ListAt<'_>, end: Millis, ranges: Result<Vec<PartitionRange>, String>) -> Result<SealedRanges, String> {
    if end <= at.start {
        return Err(format!("{at}: window_end {} ms is not after its start", end.0));
    }
    let sealed = SealedRanges {
        window: at.window.to_string(),
        start: at.start,
        end,
        ranges,
    };
    sealed.validate().map_err(|e| format!("{at}: ranges: {e}"))?;
    Ok(sealed)
}

/// Per instance (window, start), the last of its ranges in the batch (in order of first
/// appearance): a later entry replaces an earlier one, as a later commit does.
pub(crate) fn latest_ranges(ranges: &[SealedRanges]) -> Vec<&SealedRanges> {
    let mut slot: HashMap<(&str, Millis), usize> = HashMap::with_capacity(ranges.len());
    let mut out: Vec<&SealedRanges> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match slot.get(&(r.window.as_str(), r.start)) {
            Some(&i) => out[i] = r,
            None => {
                slot.insert((r.window.as_str(), r.start), out.len());
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{sealed, unreadable};

    fn at(start: i64) -> ListAt<'static> {
        ListAt {
            job: "hotlist",
            window: "1m",
            start: Millis(start),
        }
    }

    /// The documented shape, exactly: field names, `null` byte marks, skips as pairs, a full
    /// 64-bit check; and what it reads back is what was written.
    #[test]
    fn the_stored_json_is_the_documented_shape_and_round_trips() {
        let s = sealed("1m", 0);
        let Ok(ranges) = &s.ranges else { panic!("readable") };
        let json = ranges_json(ranges);
        assert!(
            json.starts_with(
                r#"[{"partition":0,"from":120,"max_ts":-9223372036854775808,"byte":{"offset":4096,"check":16045690984503111695},"to":180,"skips":[[130,0],[131,2]]},"#
            ),
            "{json}"
        );
        assert!(json.contains(r#""byte":null"#), "{json}");
        assert_eq!(from_columns(&at(0), s.end, Some(json), None), Ok(s.clone()));
        assert_eq!(from_instance_json(&at(0), &instance_json(&s)), Ok(s.clone()));
        let lost = unreadable("1m", 0, "too many future rejections");
        assert_eq!(
            instance_json(&lost),
            r#"{"end":60000,"unreadable":"too many future rejections"}"#
        );
        assert_eq!(from_instance_json(&at(0), &instance_json(&lost)), Ok(lost.clone()));
        assert_eq!(
            from_columns(&at(0), lost.end, None, Some("too many future rejections".into())),
            Ok(lost)
        );
    }

    /// Damaged JSON or columns are one sentence naming the instance and the field, never a
    /// panic.
    #[test]
    fn damaged_ranges_name_the_instance_and_field() {
        let here = r#"job "hotlist" window "1m" instance 1970-01-01T00:00:00.000Z"#;
        let range = |partition: i64, from: u64, to: u64| {
            format!(r#"{{"partition":{partition},"from":{from},"max_ts":0,"byte":null,"to":{to},"skips":[]}}"#)
        };
        let cases = [
            (r#"[{"partition":0,"from":"#.to_string(), "ranges: not the stored JSON"),
            ("{}".to_string(), "ranges: not the stored JSON"),
            (format!("[{}]", range(-1, 0, 1)), "ranges: not the stored JSON"),
            (format!("[{}]", range(1 << 32, 0, 1)), "ranges: not the stored JSON"),
            (
                format!("[{}]", range(0, 0, 1).replace("}", r#","extra":1}"#)),
                "unknown field `extra`",
            ),
            (
                format!("[{}]", range(0, 9, 3)),
                "ranges: partition 0: the range ends before it starts",
            ),
            (
                format!("[{},{}]", range(2, 0, 1), range(1, 0, 1)),
                "ranges: partitions not ascending",
            ),
            (
                format!("[{},{}]", range(1, 0, 1), range(1, 0, 1)),
                "ranges: partitions not ascending",
            ),
        ];
        for (text, want) in cases {
            let err = from_columns(&at(0), Millis(60_000), Some(text.clone()), None).unwrap_err();
            assert!(err.starts_with(here) && err.contains(want), "{text}: {err}");
            let value = format!(r#"{{"end":60000,"ranges":{text}}}"#);
            let err = from_instance_json(&at(0), &value).unwrap_err();
            assert!(err.starts_with(here) && err.contains(want), "{value}: {err}");
        }
        let ok = Some(format!("[{}]", range(0, 0, 1)));
        let err = from_columns(&at(0), Millis(0), ok.clone(), None).unwrap_err();
        assert_eq!(err, format!("{here}: window_end 0 ms is not after its start"));
        let err = from_columns(&at(0), Millis(60_000), ok, Some("x".into())).unwrap_err();
        assert_eq!(err, format!("{here}: both ranges and unreadable are set"));
        let err = from_columns(&at(0), Millis(60_000), None, None).unwrap_err();
        assert_eq!(err, format!("{here}: neither ranges nor unreadable is set"));
        for value in [
            r#"{"end":60000}"#,
            r#"{"end":60000,"ranges":[],"unreadable":"x"}"#,
            r#"{"ranges":[]}"#,
            "not json",
        ] {
            let err = from_instance_json(&at(0), value).unwrap_err();
            assert!(err.starts_with(here), "{value}: {err}");
        }
    }

    /// In a batch, the last ranges of an instance replace the earlier ones; other instances
    /// keep their place.
    #[test]
    fn the_last_ranges_of_an_instance_in_a_batch_win() {
        let (a, b) = (sealed("1m", 0), sealed("1m", 60_000));
        let a2 = unreadable("1m", 0, "later");
        let other = sealed("5m", 0);
        let all = [a, b.clone(), other.clone(), a2.clone()];
        assert_eq!(latest_ranges(&all), vec![&a2, &b, &other]);
    }
}

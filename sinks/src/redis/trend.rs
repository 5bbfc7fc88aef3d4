//! A trend list (`rank_by = "trend"`) in Redis: what its items say beyond their counts, and
//! where its order is kept.
//!
//! The sorted set keeps member = item id, score = count for every list, so a trend list's set
//! reads like any other; the meta hash has `rank_by` = `trend` (a count-ranked list's has no
//! `rank_by`, as before trend lists); and the hash `…:latest:trend` has one field per item:
//! its rank (`1` … `item_count`, the list's order: a trend list is ordered by score, compared
//! exactly, not by count) → a JSON record of the item's trend facts,
//! `{"item_id":"rising","baseline":6,"score":10.392304845413264,"history":[2,3,1]}`:
//! the baseline sum *S*, the score *z* (the double `trend::score` gives, for display) and its
//! counts in the *W* instances before, oldest first. A reader takes the order from the ranks,
//! checks each record as the SQL stores check their trend columns (all of baseline, score and
//! history; a history of 1 to `MAX_BASELINE` counts; the baseline its sum; the score the one
//! its count and history give, within 1e-9 relative) and then the trend order itself
//! (`read_checks::ranked_items`).

use hotlist_operators::record::{RankedItem, TrendFacts};
use hotlist_operators::trend::{self, MAX_BASELINE};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The meta hash field that marks a trend list.
pub(super) const RANK_BY_FIELD: &str = "rank_by";

/// `rank_by` of a trend list.
pub(super) const RANK_BY_TREND: &str = "trend";

/// A trend record as written.
#[derive(Serialize)]
struct RecordOut<'a> {
    item_id: &'a str,
    baseline: u64,
    score: f64,
    history: &'a [u64],
}

/// The trend record of an item of a trend list; `None` for an item of a count-ranked list.
pub(super) fn record(item: &RankedItem) -> Option<String> {
    let facts = item.trend.as_ref()?;
    let w = u32::try_from(facts.history.len()).unwrap_or(u32::MAX);
    let out = RecordOut {
        item_id: &item.item_id,
        baseline: facts.baseline(),
        score: trend::score(item.count, facts.baseline(), w),
        history: &facts.history,
    };
    // A string, integers and a finite double: serializing them cannot fail.
    Some(serde_json::to_string(&out).expect("a trend record serializes"))
}

/// A trend record as read: the item it names and its facts, not yet checked. Unknown fields
/// are ignored (a later version may add some); a field given twice is an error; `null` is no
/// field.
#[derive(Debug, Deserialize)]
pub(super) struct Record {
    /// The item the record is of.
    pub(super) item_id: String,
    #[serde(default)]
    baseline: Option<Value>,
    #[serde(default)]
    score: Option<Value>,
    #[serde(default)]
    history: Option<Value>,
}

/// Parses a trend record; `Err` says what is wrong with it.
pub(super) fn parse(text: &str) -> Result<Record, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

impl Record {
    /// The item's trend facts, checked against its count as the SQL stores check their trend
    /// columns (`sql_rows::RawTrend::facts`): all of baseline, score and history, the history
    /// counts (1 to `MAX_BASELINE` of them), the baseline their sum, the score the one the
    /// count, baseline and length give (`Err(detail)` otherwise).
    pub(super) fn facts(self, count: u64) -> Result<TrendFacts, String> {
        let (baseline, score, history) = match (self.baseline, self.score, self.history) {
            (Some(b), Some(s), Some(h)) => (b, s, h),
            _ => return Err("lacks some of baseline, score and history".into()),
        };
        let history: Vec<u64> = history
            .as_array()
            .and_then(|a| a.iter().map(Value::as_u64).collect())
            .ok_or_else(|| format!("has history {history}, not a list of counts"))?;
        let w = u32::try_from(history.len())
            .ok()
            .filter(|w| (1..=MAX_BASELINE).contains(w))
            .ok_or_else(|| format!("has a history of {} counts (1 to {MAX_BASELINE})", history.len()))?;
        let facts = TrendFacts { history };
        match (baseline.as_i64(), i64::try_from(facts.baseline())) {
            (Some(b), Ok(sum)) if b == sum => {}
            _ => {
                return Err(format!(
                    "has baseline {baseline}, but its history sums to {}",
                    facts.baseline()
                ))
            }
        }
        let score = score
            .as_f64()
            .ok_or_else(|| format!("has score {score}, not a number"))?;
        let want = trend::score(count, facts.baseline(), w);
        if !(score - want).abs().le(&(want.abs() * 1e-9 + 1e-9)) {
            return Err(format!("has score {score}, but its count and history give {want}"));
        }
        Ok(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(count: u64, history: &[u64]) -> RankedItem {
        RankedItem {
            item_id: "x\"é".into(),
            count,
            trend: Some(TrendFacts {
                history: history.to_vec(),
            }),
        }
    }

    /// A record is the documented JSON and reads back to the facts it was written from; a
    /// count-ranked item has none.
    #[test]
    fn records_round_trip() {
        assert_eq!(record(&RankedItem::counted("a", 3)), None);
        let text = record(&item(9, &[0, 0, 0])).unwrap();
        assert_eq!(text, r#"{"item_id":"x\"é","baseline":0,"score":9.0,"history":[0,0,0]}"#);
        for (count, history) in [(9, vec![0, 0, 0]), (20, vec![2, 3, 1]), (1, vec![7; 1000])] {
            let text = record(&item(count, &history)).unwrap();
            let r = parse(&text).unwrap();
            assert_eq!(r.item_id, "x\"é");
            assert_eq!(r.facts(count).unwrap(), TrendFacts { history });
        }
    }

    /// Records that do not agree with themselves or their count are refused, saying why.
    #[test]
    fn damaged_records_are_refused() {
        let cases = [
            (
                r#"{"item_id":"a","baseline":1,"score":9.0,"history":[0,0,0]}"#,
                "has baseline 1",
            ),
            (
                r#"{"item_id":"a","baseline":-1,"score":9.0,"history":[0,0,0]}"#,
                "has baseline -1",
            ),
            (
                r#"{"item_id":"a","baseline":18446744073709551615,"score":0,"history":[18446744073709551615]}"#,
                "has baseline 18446744073709551615",
            ),
            (
                r#"{"item_id":"a","baseline":0,"score":9.5,"history":[0,0,0]}"#,
                "has score 9.5",
            ),
            (
                r#"{"item_id":"a","baseline":0,"score":"9","history":[0,0,0]}"#,
                "not a number",
            ),
            (
                r#"{"item_id":"a","baseline":3,"score":9.0,"history":[1,"x",2]}"#,
                "has history",
            ),
            (
                r#"{"item_id":"a","baseline":0,"score":9.0,"history":[]}"#,
                "a history of 0 counts",
            ),
            (r#"{"item_id":"a","baseline":0,"score":9.0}"#, "lacks some of"),
            (
                r#"{"item_id":"a","baseline":0,"score":null,"history":[0,0,0]}"#,
                "lacks some of",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap().facts(9).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        let long = format!(
            r#"{{"item_id":"a","baseline":0,"score":9.0,"history":[{}]}}"#,
            vec!["0"; 1001].join(",")
        );
        assert!(parse(&long).unwrap().facts(9).unwrap_err().contains("1001 counts"));
        for bad in [
            "",
            "[]",
            "{}",
            r#"{"item_id":1}"#,
            r#"{"item_id":"a","item_id":"b"}"#,
            "{} x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        // Unknown fields are ignored.
        let r = parse(r#"{"item_id":"a","baseline":0,"score":9.0,"history":[0,0,0],"ratio":10}"#).unwrap();
        assert!(r.facts(9).is_ok());
    }
}

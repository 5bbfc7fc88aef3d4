//! What the SQL stores (SQLite, PostgreSQL) read back, checked before it is returned.
//!
//! Both stores have the same tables, so their rows decode the same way: each backend only reads
//! the columns into the `Raw…` shapes below (with its own instant type `T`), and these functions
//! check them with [`crate::read_checks`] — numbers that must not be negative or out of range,
//! names of list states and dead-letter reasons, a list's header against its window's `k` and
//! against the rows actually read — and build the public records. Every violation is
//! [`SinkError::Corrupt`] naming the store's location (a path, or a server without credentials).
//!
//! A list is read in one transaction as its header, its window's `k` and at most
//! [`row_limit`] rows (the statement's `LIMIT`): never more rows than the list may hold plus
//! one, whatever the header says. Its accuracy (`exact`, `error_bound`, the sketch check, the
//! certificate) is in the header and, but for the sketch check and the certificate, repeated in
//! every row: the rows must agree.

use crate::error::SinkError;
use crate::read_checks::{self, ListAt, RawAccuracy};
use crate::types::{SourcedDeadLetter, StoredList, StoredWindow};
use hotlist_operators::group::GroupKey;
use hotlist_operators::record::{DeadLetter, DeadReason, ItemId, ListState, PartitionId, RankedItem, TrendFacts};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::trend::{self, MAX_BASELINE};
use hotlist_operators::window::MAX_WINDOWS;
use std::path::Path;

/// A `hotlist_windows` row: name, size_ms, slide_ms, k, by_dims (the `by` dims joined by `,`).
pub(crate) type RawWindow = (String, i64, i64, i64, String);

/// The most window rows a reader reads: one more than a job may have, so too many show.
pub(crate) const WINDOW_ROW_LIMIT: usize = MAX_WINDOWS + 1;

/// A `topk` row of one instance: rank, item_id, count, revision, exact (0 or 1), error_bound,
/// and its trend columns.
pub(crate) type RawRow = (i64, ItemId, i64, i64, i64, i64, RawTrend);

/// A `topk` row's trend columns as read: `baseline`, `score` and `history`, all NULL on a
/// count-ranked list's row (and in a database from before trend lists).
#[derive(Debug, Default)]
pub(crate) struct RawTrend {
    baseline: Option<i64>,
    score: Option<f64>,
    history: Option<String>,
}

impl RawTrend {
    /// The columns as read.
    pub(crate) fn from_columns(baseline: Option<i64>, score: Option<f64>, history: Option<String>) -> RawTrend {
        RawTrend {
            baseline,
            score,
            history,
        }
    }

    /// The item's trend facts, checked: all three columns or none, the history a list of
    /// counts (1 to `MAX_BASELINE`), the baseline its sum, the score the one its count, baseline
    /// and length give (`Err(detail)` otherwise).
    fn facts(self, count: u64) -> Result<Option<TrendFacts>, String> {
        let (baseline, score, history) = match (self.baseline, self.score, self.history) {
            (None, None, None) => return Ok(None),
            (Some(b), Some(s), Some(h)) => (b, s, h),
            _ => return Err("has some of baseline, score and history but not all".into()),
        };
        let history: Vec<u64> = history
            .split(',')
            .map(|c| c.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("has history {history:?}, not counts separated by commas"))?;
        let w = u32::try_from(history.len())
            .ok()
            .filter(|w| (1..=MAX_BASELINE).contains(w))
            .ok_or_else(|| format!("has a history of {} counts (1 to {MAX_BASELINE})", history.len()))?;
        let facts = TrendFacts { history };
        if i64::try_from(facts.baseline()).ok() != Some(baseline) {
            return Err(format!(
                "has baseline {baseline}, but its history sums to {}",
                facts.baseline()
            ));
        }
        let want = trend::score(count, facts.baseline(), w);
        if !(score - want).abs().le(&(want.abs() * 1e-9 + 1e-9)) {
            return Err(format!("has score {score}, but its count and history give {want}"));
        }
        Ok(Some(facts))
    }
}

/// The trend columns (baseline, score, history) of an item of a trend list to write; `None`
/// for a count-ranked one's.
pub(crate) fn trend_columns(item: &RankedItem) -> Option<(i64, f64, String)> {
    let facts = item.trend.as_ref()?;
    let w = u32::try_from(facts.history.len()).unwrap_or(u32::MAX);
    let history: Vec<String> = facts.history.iter().map(u64::to_string).collect();
    // (`check_batch` has verified the baseline fits an i64)
    Some((
        facts.baseline() as i64,
        trend::score(item.count, facts.baseline(), w),
        history.join(","),
    ))
}

impl<T> RawHeader<T> {
    /// A header from its columns in the order the stores select them: `window_start,
    /// window_end, revision, state, watermark, as_of, item_count`, then its accuracy (`exact`,
    /// `error_bound`, the sketch check's and the certificate's columns).
    pub(crate) fn from_columns(
        (start, end, revision, state, watermark, as_of, item_count): (T, T, i64, String, T, T, i64),
        accuracy: RawAccuracy,
    ) -> Self {
        RawHeader {
            start,
            end,
            revision,
            state,
            watermark,
            as_of,
            item_count,
            accuracy,
        }
    }
}

/// An instance's header, its window's `k` (`None`: the window is not recorded) and its rows in
/// rank order, as read in one transaction with the statement's row limit `limit`.
pub(crate) struct RawList<T> {
    /// The `topk_instances` row.
    pub header: RawHeader<T>,
    /// The window's `hotlist_windows.k`, if the window is recorded.
    pub k: Option<i64>,
    /// The `topk` rows read (at most `limit`).
    pub rows: Vec<RawRow>,
    /// The row limit the rows were read with ([`row_limit`]).
    pub limit: usize,
}

/// A `dead_letters` row: source, partition, position, reason, detail, raw, count,
/// last_position.
pub(crate) type RawDeadLetter = (String, i64, i64, String, String, Vec<u8>, i64, Option<i64>);

/// A `topk_instances` row (an instance header) as stored; `T` is the store's instant type.
pub(crate) struct RawHeader<T> {
    /// `window_start`.
    pub start: T,
    /// `window_end`.
    pub end: T,
    /// `revision`.
    pub revision: i64,
    /// `state`.
    pub state: String,
    /// `watermark`.
    pub watermark: T,
    /// `as_of`.
    pub as_of: T,
    /// `item_count`.
    pub item_count: i64,
    /// `exact`, `error_bound`, the sketch check's and the certificate's columns.
    pub accuracy: RawAccuracy,
}

/// `value` as a count, position or epoch; negative is corrupt (`what` names the value).
pub(crate) fn non_negative(location: &Path, value: i64, what: &str) -> Result<u64, SinkError> {
    u64::try_from(value).map_err(|_| SinkError::corrupt(location, format!("{what} is negative ({value})")))
}

/// A list state by its stored name.
pub(crate) fn list_state(location: &Path, s: &str) -> Result<ListState, SinkError> {
    ListState::parse(s).ok_or_else(|| SinkError::corrupt(location, format!("unknown list state {s:?}")))
}

/// A revision as stored (`BIGINT`) as the `u32` it was written from.
pub(crate) fn revision(location: &Path, revision: i64) -> Result<u32, SinkError> {
    u32::try_from(revision).map_err(|_| SinkError::corrupt(location, format!("revision {revision} out of range")))
}

/// Parses `DeadReason::as_str` output.
pub(crate) fn parse_reason(s: &str) -> Option<DeadReason> {
    DeadReason::parse(s)
}

/// The job's window definitions as `prepare` recorded them (at most [`WINDOW_ROW_LIMIT`] rows
/// read), checked as the job checks its configuration.
pub(crate) fn windows(location: &Path, job: &str, raw: Vec<RawWindow>) -> Result<Vec<StoredWindow>, SinkError> {
    let corrupt = |detail| SinkError::corrupt(location, detail);
    let mut windows = Vec::new();
    for (name, size, slide, k, by) in raw {
        let what = |c: &str| format!("job {job:?} window {name:?} {c}");
        let size = non_negative(location, size, &what("size_ms"))?;
        let slide = non_negative(location, slide, &what("slide_ms"))?;
        let k = read_checks::window_k(job, &name, k).map_err(corrupt)?;
        windows.push(StoredWindow {
            name,
            size: Span::from_millis(size),
            slide: Span::from_millis(slide),
            k,
            by: split_dims(&by),
        });
    }
    read_checks::windows(job, windows).map_err(corrupt)
}

/// A window's `by` dims as `hotlist_windows.by_dims` holds them (dim names hold no `,`).
pub(crate) fn join_dims(by: &[String]) -> String {
    by.join(",")
}

/// The inverse of [`join_dims`].
pub(crate) fn split_dims(text: &str) -> Vec<String> {
    text.split(',').filter(|d| !d.is_empty()).map(str::to_string).collect()
}

/// The job's last commit row: epoch and watermark.
pub(crate) fn commit(location: &Path, job: &str, epoch: i64, watermark: Millis) -> Result<(u64, Millis), SinkError> {
    read_checks::commit(job, epoch, watermark).map_err(|d| SinkError::corrupt(location, d))
}

/// A dead letter as committed.
pub(crate) fn dead_letter(location: &Path, job: &str, raw: RawDeadLetter) -> Result<SourcedDeadLetter, SinkError> {
    let (source, partition, position, reason, detail, raw, count, last) = raw;
    let corrupt =
        |what: String| SinkError::corrupt(location, format!("job {job:?} dead letter from {source:?}: {what}"));
    let partition = u32::try_from(partition).map_err(|_| corrupt(format!("partition {partition} out of range")))?;
    let position = u64::try_from(position).map_err(|_| corrupt(format!("position {position} is negative")))?;
    let reason = parse_reason(&reason).ok_or_else(|| corrupt(format!("unknown reason {reason:?}")))?;
    let count = u64::try_from(count)
        .ok()
        .filter(|c| *c >= 1 && (last.is_some() || *c == 1))
        .ok_or_else(|| corrupt(format!("count {count} out of range")))?;
    let last_position = match last {
        None => None,
        Some(l) => Some(
            u64::try_from(l)
                .ok()
                .filter(|l| *l >= position)
                .ok_or_else(|| corrupt(format!("last position {l} before position {position}")))?,
        ),
    };
    Ok(SourcedDeadLetter {
        count,
        last_position,
        letter: DeadLetter {
            partition: PartitionId(partition),
            position,
            raw,
            reason,
            detail,
        },
        source,
    })
}

/// A `(reason, count)` row of the dead-letter counts.
pub(crate) fn reason_count(location: &Path, job: &str, (reason, n): (String, i64)) -> Result<(String, u64), SinkError> {
    if parse_reason(&reason).is_none() {
        return Err(SinkError::corrupt(
            location,
            format!("job {job:?}: unknown dead letter reason {reason:?}"),
        ));
    }
    Ok((reason, non_negative(location, n, "count")?))
}

/// How many `topk` rows to read for a list whose window has the stored `k` (`None`: the
/// window is not recorded): see [`read_checks::row_limit`]. A `k` out of range reads with the
/// largest bound and is reported by [`stored_list`].
pub(crate) fn row_limit(job: &str, window: &str, k: Option<i64>) -> usize {
    read_checks::row_limit(k.and_then(|k| read_checks::window_k(job, window, k).ok()))
}

/// [`row_limit`] as a SQL `LIMIT` value.
pub(crate) fn sql_limit(limit: usize) -> i64 {
    // At most MAX_K + 1.
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// One instance's list from its header, its window's `k` and its rows (in rank order), read
/// in one transaction: checks the header against `k` and the rows (ranks 1..n, every row of
/// the header's revision, in ranking order); `millis` converts the store's instants.
pub(crate) fn stored_list<T>(
    location: &Path,
    (job, window, group): (&str, &str, &GroupKey),
    list: RawList<T>,
    millis: impl Fn(T) -> Millis,
) -> Result<StoredList, SinkError> {
    let corrupt = |detail| SinkError::corrupt(location, detail);
    let RawList { header, k, rows, limit } = list;
    let k = k
        .map(|k| read_checks::window_k(job, window, k))
        .transpose()
        .map_err(corrupt)?;
    let h = read_checks::Header {
        start: millis(header.start),
        end: millis(header.end),
        revision: header.revision,
        state: &header.state,
        watermark: millis(header.watermark),
        as_of: millis(header.as_of),
        item_count: header.item_count,
    };
    let at = ListAt {
        job,
        window,
        start: h.start,
    };
    let checked = read_checks::header(&at, &h, k).map_err(corrupt)?;
    let accuracy = read_checks::accuracy(&at, &header.accuracy, k, checked.state).map_err(corrupt)?;
    read_checks::rows_match(&at, checked.item_count, rows.len(), limit).map_err(corrupt)?;
    let items = ranked_rows(&at, (header.revision, &header.accuracy), rows).map_err(corrupt)?;
    read_checks::ranked_items(&at, &items).map_err(corrupt)?;
    Ok(StoredList {
        window: window.to_string(),
        group: group.clone(),
        start: h.start,
        end: h.end,
        revision: checked.revision,
        state: checked.state,
        watermark: h.watermark,
        as_of: h.as_of,
        items,
        exact: accuracy.exact,
        error_bound: accuracy.error_bound,
        sketch_check: accuracy.sketch_check,
        certificate: accuracy.certificate,
    })
}

/// The rows as ranked items, checking ranks (1..n) and that every row is of the header's
/// revision and accuracy (`exact`, `error_bound`); `Err(detail)` names the first inconsistency.
fn ranked_rows(
    at: &ListAt<'_>,
    (revision, accuracy): (i64, &RawAccuracy),
    rows: Vec<RawRow>,
) -> Result<Vec<RankedItem>, String> {
    let mut items = Vec::with_capacity(rows.len());
    for (i, (rank, item_id, count, row_revision, exact, error_bound, trend)) in rows.into_iter().enumerate() {
        if i64::try_from(i + 1).ok() != Some(rank) || row_revision != revision {
            return Err(format!(
                "{at}: row {} has rank {rank} and revision {row_revision}, header revision {revision}",
                i + 1
            ));
        }
        if (exact, error_bound) != (accuracy.exact, accuracy.error_bound) {
            return Err(format!(
                "{at}: row {} has exact {exact} and error_bound {error_bound}, header exact {} and error_bound {}",
                i + 1,
                accuracy.exact,
                accuracy.error_bound
            ));
        }
        let count = u64::try_from(count).map_err(|_| format!("{at}: count {count} at rank {rank} is negative"))?;
        let trend = trend.facts(count).map_err(|e| format!("{at}: row {} {e}", i + 1))?;
        if items
            .first()
            .is_some_and(|first: &RankedItem| first.trend.is_some() != trend.is_some())
        {
            return Err(format!(
                "{at}: row {} is not the same kind (trend or count) as row 1",
                i + 1
            ));
        }
        items.push(RankedItem { item_id, count, trend });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip() {
        for r in DeadReason::ALL {
            assert_eq!(parse_reason(r.as_str()), Some(r));
        }
        let names: Vec<&str> = DeadReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names, ["bad", "late", "sealed", "future", "too_large", "udf"]);
        assert_eq!(parse_reason("other"), None);
    }
}

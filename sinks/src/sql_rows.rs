//! What the SQL stores (SQLite, PostgreSQL) read back, checked before it is returned.
//!
//! Both stores have the same tables, so their rows decode the same way: each backend only reads
//! the columns into the `Raw…` shapes below (with its own instant type `T`), and these functions
//! check them — numbers that must not be negative, names of list states and dead-letter
//! reasons, a list's rows against its header — and build the public records. Every violation is
//! [`SinkError::Corrupt`] naming the store's location (a path, or a server without credentials).

use crate::error::SinkError;
use crate::types::{SourcedDeadLetter, StoredList, StoredWindow};
use hotlist_operators::record::{DeadLetter, DeadReason, ItemId, ListState, PartitionId, RankedItem};
use hotlist_operators::time::{Millis, Span};
use std::path::Path;

/// A `hotlist_windows` row: name, size_ms, slide_ms, k.
pub(crate) type RawWindow = (String, i64, i64, i64);

/// A `topk` row of one instance: rank, item_id, count, revision.
pub(crate) type RawRow = (i64, ItemId, i64, i64);

impl<T> RawHeader<T> {
    /// A header from its columns in the order the stores select them: `window_start,
    /// window_end, revision, state, watermark, as_of, item_count`.
    pub(crate) fn from_columns(
        (start, end, revision, state, watermark, as_of, item_count): (T, T, i64, String, T, T, i64),
    ) -> Self {
        RawHeader {
            start,
            end,
            revision,
            state,
            watermark,
            as_of,
            item_count,
        }
    }
}

/// An instance's header and its rows, as read in one transaction.
pub(crate) type RawList<T> = (RawHeader<T>, Vec<RawRow>);

/// A `dead_letters` row: source, partition, position, reason, detail, raw.
pub(crate) type RawDeadLetter = (String, i64, i64, String, String, Vec<u8>);

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

/// A window definition as `prepare` recorded it.
pub(crate) fn window(location: &Path, (name, size, slide, k): RawWindow) -> Result<StoredWindow, SinkError> {
    let what = |c: &str| format!("window {name:?} {c}");
    let size = non_negative(location, size, &what("size"))?;
    let slide = non_negative(location, slide, &what("slide"))?;
    let k = usize::try_from(non_negative(location, k, &what("k"))?)
        .map_err(|_| SinkError::corrupt(location, what("k is too large")))?;
    Ok(StoredWindow {
        name,
        size: Span::from_millis(size),
        slide: Span::from_millis(slide),
        k,
    })
}

/// A dead letter as committed.
pub(crate) fn dead_letter(location: &Path, raw: RawDeadLetter) -> Result<SourcedDeadLetter, SinkError> {
    let (source, partition, position, reason, detail, raw) = raw;
    let partition = u32::try_from(partition)
        .map_err(|_| SinkError::corrupt(location, format!("dead letter partition {partition} out of range")))?;
    let position = non_negative(location, position, "dead letter position")?;
    let reason = parse_reason(&reason)
        .ok_or_else(|| SinkError::corrupt(location, format!("unknown dead letter reason {reason:?}")))?;
    Ok(SourcedDeadLetter {
        source,
        letter: DeadLetter {
            partition: PartitionId(partition),
            position,
            raw,
            reason,
            detail,
        },
    })
}

/// One instance's list from its header and its rows (in rank order), read in one transaction:
/// checks the header's revision and item count against the rows (ranks 1..n, every row of the
/// header's revision); `millis` converts the store's instants.
pub(crate) fn stored_list<T>(
    location: &Path,
    (job, window): (&str, &str),
    (header, rows): RawList<T>,
    millis: impl Fn(T) -> Millis,
) -> Result<StoredList, SinkError> {
    let start = millis(header.start);
    let at = format!("job {job:?} window {window:?} instance {}", start.0);
    let (revision, items) =
        check_rows(&at, header.revision, header.item_count, rows).map_err(|d| SinkError::corrupt(location, d))?;
    Ok(StoredList {
        window: window.to_string(),
        start,
        end: millis(header.end),
        revision,
        state: list_state(location, &header.state)?,
        watermark: millis(header.watermark),
        as_of: millis(header.as_of),
        items,
    })
}

/// Checks a list's header revision and item count against its rows and returns the revision
/// and the ranked items; `Err(detail)` names the first inconsistency (`at` says which instance).
fn check_rows(at: &str, revision: i64, item_count: i64, rows: Vec<RawRow>) -> Result<(u32, Vec<RankedItem>), String> {
    let rev = u32::try_from(revision).map_err(|_| format!("{at}: revision {revision} out of range"))?;
    if i64::try_from(rows.len()).ok() != Some(item_count) {
        return Err(format!("{at}: {} rows but item_count {item_count}", rows.len()));
    }
    let mut items = Vec::with_capacity(rows.len());
    for (i, (rank, item_id, count, row_revision)) in rows.into_iter().enumerate() {
        if i64::try_from(i + 1).ok() != Some(rank) || row_revision != revision {
            return Err(format!(
                "{at}: row {} has rank {rank} and revision {row_revision}, header revision {revision}",
                i + 1
            ));
        }
        let count = u64::try_from(count).map_err(|_| format!("{at}: count {count} is negative"))?;
        items.push(RankedItem { item_id, count });
    }
    Ok((rev, items))
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
        assert_eq!(names, ["bad", "late", "sealed", "future", "too_large"]);
        assert_eq!(parse_reason("other"), None);
    }
}

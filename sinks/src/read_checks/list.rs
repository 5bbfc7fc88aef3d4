//! What every store checks in a list's header and rows: which list a message is about
//! ([`ListAt`]), how many rows a reader reads at most, the header's fields, the rows against the
//! header, and the items' ranking order.

use hotlist_operators::event::MAX_ITEM_ID_BYTES;
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::time::Millis;
use hotlist_operators::topk::ranked_cmp;
use hotlist_operators::window::MAX_K;
use std::cmp::Ordering;
use std::fmt;

/// Which list a message is about; displays as `job "j" window "w" instance <start>`.
pub(crate) struct ListAt<'a> {
    /// The job id.
    pub job: &'a str,
    /// The window name.
    pub window: &'a str,
    /// The instance start as read (RFC 3339 when it is a printable instant, else milliseconds).
    pub start: Millis,
}

impl fmt::Display for ListAt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {:?} window {:?} instance {}", self.job, self.window, self.start)
    }
}

/// How many rows of one list a reader reads at most: one more than the list may hold (its
/// window's `k`, or [`MAX_K`] for a window that is not recorded), so a list with too many rows
/// shows without reading all of them.
pub(crate) fn row_limit(k: Option<usize>) -> usize {
    k.unwrap_or(MAX_K).min(MAX_K) + 1
}

/// A list's header as read, decoded to plain numbers but not yet checked.
pub(crate) struct Header<'a> {
    /// Instance start.
    pub start: Millis,
    /// Instance end (exclusive).
    pub end: Millis,
    /// Revision.
    pub revision: i64,
    /// State name.
    pub state: &'a str,
    /// The global watermark the list was computed at.
    pub watermark: Millis,
    /// Publication time (wall clock).
    pub as_of: Millis,
    /// How many items the list has.
    pub item_count: i64,
}

/// The checked parts of a header.
pub(crate) struct CheckedHeader {
    /// The revision, as written (`u32`).
    pub revision: u32,
    /// The list state.
    pub state: ListState,
    /// How many items the list has: at most the window's `k`.
    pub item_count: usize,
}

/// Checks a header: its item count against `k` (the window's checked `k`, `None` when the
/// window is not recorded) and [`MAX_K`], its revision and state, that it does not end before
/// it starts, and that its watermark is not past the last event time (unless it is "end of
/// input"). Other instants are any the store can hold, as its writer accepts them.
pub(crate) fn header(at: &ListAt<'_>, h: &Header<'_>, k: Option<usize>) -> Result<CheckedHeader, String> {
    let n = h.item_count;
    let item_count = match (usize::try_from(n), k) {
        (Err(_), _) => return Err(format!("{at}: header item_count {n} is negative")),
        (Ok(c), Some(k)) if c > k => return Err(format!("{at}: header item_count {n} exceeds the window's k ({k})")),
        (Ok(c), _) if c > MAX_K => return Err(format!("{at}: header item_count {n} exceeds the largest k ({MAX_K})")),
        (Ok(c), _) => c,
    };
    let revision =
        u32::try_from(h.revision).map_err(|_| format!("{at}: header revision {} is out of range", h.revision))?;
    let state = ListState::parse(h.state).ok_or_else(|| format!("{at}: header state {:?} is unknown", h.state))?;
    if h.end < h.start {
        return Err(format!("{at}: header end {} ms is before its start", h.end.0));
    }
    if h.watermark > Millis::MAX_EVENT && h.watermark != Millis::MAX {
        return Err(format!("{at}: header watermark {} ms is past year 9999", h.watermark.0));
    }
    Ok(CheckedHeader {
        revision,
        state,
        item_count,
    })
}

/// Compares how many rows a reader got (reading at most `limit`) with the header's count.
pub(crate) fn rows_match(at: &ListAt<'_>, item_count: usize, got: usize, limit: usize) -> Result<(), String> {
    match got {
        _ if got == item_count => Ok(()),
        _ if got >= limit => Err(format!("{at}: header item_count {item_count} but at least {got} rows")),
        _ => Err(format!("{at}: header item_count {item_count} but {got} rows")),
    }
}

/// Checks a list's items, best first: ids no longer than the event contract allows, strictly
/// in ranking order (count descending, then id ascending bytewise; so no item twice in a row).
pub(crate) fn ranked_items(at: &ListAt<'_>, items: &[RankedItem]) -> Result<(), String> {
    if let Some((i, item)) = items
        .iter()
        .enumerate()
        .find(|(_, item)| item.item_id.len() > MAX_ITEM_ID_BYTES)
    {
        return Err(format!(
            "{at}: the item at rank {} has an id of {} bytes (at most {MAX_ITEM_ID_BYTES})",
            i + 1,
            item.item_id.len()
        ));
    }
    if let Some(i) = items
        .windows(2)
        .position(|pair| ranked_cmp(&pair[0], &pair[1]) != Ordering::Less)
    {
        let (a, b) = (&items[i], &items[i + 1]);
        return Err(format!(
            "{at}: rank {} ({:?}, count {}) and rank {} ({:?}, count {}) are not in ranking order",
            i + 1,
            a.item_id,
            a.count,
            i + 2,
            b.item_id,
            b.count
        ));
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The list the tests' messages are about.
    pub(in crate::read_checks) const AT: ListAt<'static> = ListAt {
        job: "hotlist",
        window: "5m",
        start: Millis(1_796_032_800_000),
    };

    fn good() -> Header<'static> {
        Header {
            start: AT.start,
            end: Millis(AT.start.0 + 300_000),
            revision: 2,
            state: "closed",
            watermark: Millis(AT.start.0 + 300_000),
            as_of: Millis(1_796_033_100_000),
            item_count: 100,
        }
    }

    #[test]
    fn item_counts_are_bounded_by_k_and_the_largest_k() {
        let h = header(&AT, &good(), Some(100)).unwrap();
        assert_eq!((h.revision, h.state, h.item_count), (2, ListState::Closed, 100));
        let too_many = Header {
            item_count: 1 << 40,
            ..good()
        };
        assert_eq!(
            header(&AT, &too_many, Some(100)).err().unwrap(),
            "job \"hotlist\" window \"5m\" instance 2026-11-30T10:00:00.000Z: \
             header item_count 1099511627776 exceeds the window's k (100)"
        );
        let e = header(&AT, &too_many, None).err().unwrap();
        assert!(
            e.ends_with("header item_count 1099511627776 exceeds the largest k (1000000)"),
            "{e}"
        );
        let negative = Header {
            item_count: -1,
            ..good()
        };
        assert!(header(&AT, &negative, None).err().unwrap().ends_with("is negative"));
        assert_eq!(row_limit(Some(100)), 101);
        assert_eq!(row_limit(None), MAX_K + 1);
        assert_eq!(row_limit(Some(usize::MAX)), MAX_K + 1);
    }

    #[test]
    fn header_fields_must_be_in_range() {
        let cases: [(Header<'static>, &str); 4] = [
            (Header { revision: -1, ..good() }, "revision -1 is out of range"),
            (
                Header {
                    state: "done",
                    ..good()
                },
                "state \"done\" is unknown",
            ),
            (
                Header {
                    end: Millis(AT.start.0 - 1),
                    ..good()
                },
                "header end 1796032799999 ms is before its start",
            ),
            (
                Header {
                    watermark: Millis(1 << 62),
                    ..good()
                },
                "watermark 4611686018427387904 ms is past year 9999",
            ),
        ];
        for (h, want) in cases {
            let e = header(&AT, &h, Some(100)).err().unwrap();
            assert!(e.contains(want), "{e}");
        }
        for watermark in [Millis::MIN, Millis::MAX, Millis::MAX_EVENT] {
            assert!(header(&AT, &Header { watermark, ..good() }, Some(100)).is_ok());
        }
    }

    #[test]
    fn rows_are_compared_with_the_header() {
        assert!(rows_match(&AT, 3, 3, 101).is_ok());
        assert!(rows_match(&AT, 3, 2, 101)
            .err()
            .unwrap()
            .ends_with("header item_count 3 but 2 rows"));
        assert!(rows_match(&AT, 100, 101, 101)
            .err()
            .unwrap()
            .ends_with("header item_count 100 but at least 101 rows"));
        let item = |id: &str, count| RankedItem {
            item_id: id.into(),
            count,
            trend: None,
        };
        assert!(ranked_items(&AT, &[item("a", 3), item("b", 3), item("a", 1)]).is_ok());
        let e = ranked_items(&AT, &[item("b", 3), item("a", 3)]).err().unwrap();
        assert!(
            e.ends_with("rank 1 (\"b\", count 3) and rank 2 (\"a\", count 3) are not in ranking order"),
            "{e}"
        );
        assert!(
            ranked_items(&AT, &[item("a", 3), item("a", 3)]).is_err(),
            "an item twice"
        );
        let long = "x".repeat(MAX_ITEM_ID_BYTES + 1);
        assert!(ranked_items(&AT, &[item(&long, 1)])
            .err()
            .unwrap()
            .contains("id of 257 bytes"));
    }
}

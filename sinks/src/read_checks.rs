//! What every store checks in what it reads back, before handing it out.
//!
//! A store's rows may have been written by something else, or damaged, so nothing read is
//! trusted. Counts are bounded by what the job's configuration allows: a list holds at most its
//! window's `k` items, and a `k` is at most [`MAX_K`]. A reader reads at most one row more than
//! that bound ([`row_limit`]), never sizes anything from a stored count, and compares the rows
//! it got with the header afterwards ([`rows_match`]). Revisions, epochs and watermarks must
//! lie in the ranges the job writes. A list's accuracy ([`accuracy`]) must be one the job can
//! write: an exact list over-counts by nothing (`error_bound` 0), a sketch check compares at
//! most `k` items, finding at most as many as it compares, and a certificate (what proved a
//! sketch window's sealed list exact) is whole, on an exact final list only.
//!
//! Each check returns `Err(detail)`: one sentence naming the job, the window, the instance (as
//! RFC 3339) and the field, e.g. `job "hotlist" window "5m" instance 2026-11-30T10:00:00.000Z:
//! header item_count 1099511627776 exceeds the window's k (100)`. The backend wraps it in
//! [`SinkError::Corrupt`](crate::SinkError::Corrupt) with its location.
//!
//! A list longer than its window's *current* `k` is corrupt too: the job never writes one. (It
//! is also what a store holds after a window's `k` was lowered under the same `job.id`; such a
//! change needs a new `job.id`, as every window change with checkpoints does.)
//!
//! Hot-key windows have checks of their own (`read_checks/hot_keys.rs`).

mod hot_keys;

pub(crate) use hot_keys::{hot_header, hot_window, hot_window_to_write, RawHotHeader};

use crate::types::StoredWindow;
use hotlist_operators::certify::Certificate;
use hotlist_operators::event::MAX_ITEM_ID_BYTES;
use hotlist_operators::record::{ListState, RankedItem, SketchCheck};
use hotlist_operators::time::Millis;
use hotlist_operators::topk::ranked_cmp;
use hotlist_operators::window::{validate_all, WindowSpec, MAX_K};
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

/// A window's `k` as stored: from 1 to [`MAX_K`].
pub(crate) fn window_k(job: &str, window: &str, k: i64) -> Result<usize, String> {
    usize::try_from(k)
        .ok()
        .filter(|k| (1..=MAX_K).contains(k))
        .ok_or_else(|| format!("job {job:?} window {window:?}: k {k} is out of range (1 to {MAX_K})"))
}

/// The job's windows as stored, checked as the job checks its configuration (positive sizes,
/// `k` from 1 to [`MAX_K`], unique names, at most 64 windows).
pub(crate) fn windows(job: &str, windows: Vec<StoredWindow>) -> Result<Vec<StoredWindow>, String> {
    for w in &windows {
        window_k(job, &w.name, i64::try_from(w.k).unwrap_or(i64::MAX))?;
    }
    let specs: Vec<WindowSpec> = windows
        .iter()
        .map(|w| WindowSpec {
            key: Default::default(),
            name: w.name.clone(),
            size: w.size,
            slide: w.slide,
            k: w.k,
        })
        .collect();
    validate_all(&specs).map_err(|e| format!("job {job:?}: the recorded windows are invalid: {e}"))?;
    Ok(windows)
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

/// The names of a stored sketch check's four numbers, in [`RawAccuracy::sketch`] order: the
/// columns of `topk_instances` and the fields of the Redis meta hash.
pub(crate) const SKETCH_FIELDS: [&str; 4] = [
    "sketch_found",
    "sketch_of",
    "sketch_max_overcount",
    "sketch_total_overcount",
];

/// The names of a stored certificate's three numbers, in [`RawAccuracy::certificate`] order:
/// the columns of `topk_instances` and the fields of the Redis meta hash.
pub(crate) const CERTIFICATE_FIELDS: [&str; 3] = ["certificate_threshold", "certificate_counted", "certificate_passes"];

/// A list's accuracy as stored, decoded to plain numbers but not yet checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawAccuracy {
    /// `exact`: 1 (exact) or 0 (approximate), as SQLite stores it.
    pub exact: i64,
    /// `error_bound`.
    pub error_bound: i64,
    /// The sketch check's numbers ([`SKETCH_FIELDS`]), each `None` when NULL or absent: all or
    /// none of them are stored.
    pub sketch: [Option<i64>; 4],
    /// The certificate's numbers ([`CERTIFICATE_FIELDS`]), each `None` when NULL or absent: all
    /// or none of them are stored.
    pub certificate: [Option<i64>; 3],
}

impl RawAccuracy {
    /// An exact list without a sketch check or a certificate: what every list of a store
    /// written before lists said what they are is.
    pub const EXACT: RawAccuracy = RawAccuracy {
        exact: 1,
        error_bound: 0,
        sketch: [None; 4],
        certificate: [None; 3],
    };

    /// A list's accuracy as the stores write it; `Err((field, value))` names a number that does
    /// not fit their signed 64-bit columns.
    pub fn of(
        exact: bool,
        error_bound: u64,
        check: Option<SketchCheck>,
        certificate: Option<Certificate>,
    ) -> Result<RawAccuracy, (&'static str, u64)> {
        let fits = |v: u64, what: &'static str| i64::try_from(v).map_err(|_| (what, v));
        let sketch = match check {
            None => [None; 4],
            Some(c) => [
                Some(i64::from(c.found)),
                Some(i64::from(c.of)),
                Some(fits(c.max_overcount, SKETCH_FIELDS[2])?),
                Some(fits(c.total_overcount, SKETCH_FIELDS[3])?),
            ],
        };
        let certificate = match certificate {
            None => [None; 3],
            Some(c) => [
                Some(fits(c.threshold, CERTIFICATE_FIELDS[0])?),
                Some(fits(c.counted, CERTIFICATE_FIELDS[1])?),
                Some(i64::from(c.passes)),
            ],
        };
        Ok(RawAccuracy {
            exact: i64::from(exact),
            error_bound: fits(error_bound, "error_bound")?,
            sketch,
            certificate,
        })
    }
}

/// The checked accuracy of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Accuracy {
    /// Whether every count is exact.
    pub exact: bool,
    /// The largest possible over-count of any count in the list.
    pub error_bound: u64,
    /// How a sketch's list compared with this one, if it was compared.
    pub sketch_check: Option<SketchCheck>,
    /// What proved a sketch window's sealed list exact, if a replay did.
    pub certificate: Option<Certificate>,
}

/// Checks a list's accuracy: `exact` is 0 or 1, `error_bound` is not negative and 0 for an
/// exact list, the sketch check is whole or absent, with `found ≤ of ≤ k` (the window's
/// checked `k`, [`MAX_K`] when it is not recorded) and over-counts that are not negative, and
/// the certificate is whole or absent, on an exact list in state `state` final only, with a
/// threshold and passes of at least 1 and a count that is not negative.
pub(crate) fn accuracy(
    at: &ListAt<'_>,
    raw: &RawAccuracy,
    k: Option<usize>,
    state: ListState,
) -> Result<Accuracy, String> {
    let exact = match raw.exact {
        0 => false,
        1 => true,
        v => return Err(format!("{at}: exact {v} is not 0 or 1")),
    };
    let error_bound =
        u64::try_from(raw.error_bound).map_err(|_| format!("{at}: error_bound {} is negative", raw.error_bound))?;
    if exact && error_bound != 0 {
        return Err(format!("{at}: an exact list has error_bound {error_bound} (must be 0)"));
    }
    let sketch_check = match raw.sketch {
        [None, None, None, None] => None,
        [Some(found), Some(of), Some(max), Some(total)] => Some(sketch_check(at, [found, of, max, total], k)?),
        partial => {
            let missing: Vec<&str> = SKETCH_FIELDS
                .iter()
                .zip(partial)
                .filter(|(_, v)| v.is_none())
                .map(|(name, _)| *name)
                .collect();
            return Err(format!("{at}: the sketch check lacks {}", missing.join(", ")));
        }
    };
    let certificate = match raw.certificate {
        [None, None, None] => None,
        [Some(threshold), Some(counted), Some(passes)] => Some(certificate(at, [threshold, counted, passes])?),
        partial => {
            let missing: Vec<&str> = CERTIFICATE_FIELDS
                .iter()
                .zip(partial)
                .filter(|(_, v)| v.is_none())
                .map(|(name, _)| *name)
                .collect();
            return Err(format!("{at}: the certificate lacks {}", missing.join(", ")));
        }
    };
    if certificate.is_some() {
        if !exact {
            return Err(format!(
                "{at}: an approximate list has a certificate (only an exact list can)"
            ));
        }
        if state != ListState::Final {
            return Err(format!(
                "{at}: a list in state {} has a certificate (only a final list can)",
                state.as_str()
            ));
        }
    }
    Ok(Accuracy {
        exact,
        error_bound,
        sketch_check,
        certificate,
    })
}

/// A whole certificate's numbers (threshold, counted, passes), checked: a threshold and passes
/// of at least 1, a count that is not negative.
fn certificate(at: &ListAt<'_>, [threshold, counted, passes]: [i64; 3]) -> Result<Certificate, String> {
    let [t, c, p] = CERTIFICATE_FIELDS;
    let threshold = u64::try_from(threshold)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| format!("{at}: {t} {threshold} is not positive"))?;
    let counted = u64::try_from(counted).map_err(|_| format!("{at}: {c} {counted} is negative"))?;
    let passes = u32::try_from(passes)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| format!("{at}: {p} {passes} is out of range (1 to {})", u32::MAX))?;
    Ok(Certificate {
        threshold,
        counted,
        passes,
    })
}

/// A whole sketch check's numbers (found, of, max_overcount, total_overcount), checked.
fn sketch_check(at: &ListAt<'_>, [found, of, max, total]: [i64; 4], k: Option<usize>) -> Result<SketchCheck, String> {
    let count = |v: i64, what: &str| u32::try_from(v).map_err(|_| format!("{at}: {what} {v} is out of range"));
    let (found_n, of_n) = (count(found, "sketch_found")?, count(of, "sketch_of")?);
    if found_n > of_n {
        return Err(format!("{at}: sketch_found {found} exceeds sketch_of {of}"));
    }
    match k {
        Some(k) if of_n as usize > k => return Err(format!("{at}: sketch_of {of} exceeds the window's k ({k})")),
        _ if of_n as usize > MAX_K => return Err(format!("{at}: sketch_of {of} exceeds the largest k ({MAX_K})")),
        _ => {}
    }
    let overcount = |v: i64, what: &str| u64::try_from(v).map_err(|_| format!("{at}: {what} {v} is negative"));
    Ok(SketchCheck {
        found: found_n,
        of: of_n,
        max_overcount: overcount(max, "sketch_max_overcount")?,
        total_overcount: overcount(total, "sketch_total_overcount")?,
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

/// The job's last commit as read: the epoch fits the stores' signed 64-bit columns and the
/// watermark is not past the last event time (unless it is "end of input").
pub(crate) fn commit(job: &str, epoch: i64, watermark: Millis) -> Result<(u64, Millis), String> {
    let epoch = u64::try_from(epoch).map_err(|_| format!("job {job:?}: commit epoch {epoch} is negative"))?;
    if watermark > Millis::MAX_EVENT && watermark != Millis::MAX {
        return Err(format!(
            "job {job:?}: commit watermark {} ms is past year 9999",
            watermark.0
        ));
    }
    Ok((epoch, watermark))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::time::Span;

    const AT: ListAt<'static> = ListAt {
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

    #[test]
    fn accuracy_is_what_the_job_can_write() {
        let raw = |exact, error_bound, sketch| RawAccuracy {
            exact,
            error_bound,
            sketch,
            certificate: [None; 3],
        };
        let closed = ListState::Closed;
        let whole = [Some(2), Some(3), Some(5), Some(9)];
        let got = accuracy(&AT, &raw(0, 37, whole), Some(3), closed).unwrap();
        let check = SketchCheck {
            found: 2,
            of: 3,
            max_overcount: 5,
            total_overcount: 9,
        };
        assert_eq!(
            got,
            Accuracy {
                exact: false,
                error_bound: 37,
                sketch_check: Some(check),
                certificate: None,
            }
        );
        assert_eq!(RawAccuracy::of(false, 37, Some(check), None), Ok(raw(0, 37, whole)));
        assert_eq!(
            accuracy(&AT, &RawAccuracy::EXACT, None, closed).unwrap(),
            Accuracy {
                exact: true,
                error_bound: 0,
                sketch_check: None,
                certificate: None,
            }
        );
        assert!(
            accuracy(&AT, &raw(1, 0, whole), Some(3), closed).is_ok(),
            "an exact list with a check"
        );
        assert!(
            accuracy(&AT, &raw(0, 0, [None; 4]), Some(3), closed).is_ok(),
            "a sketch of no events"
        );
        let cases: [(RawAccuracy, Option<usize>, &str); 10] = [
            (raw(2, 0, [None; 4]), None, "exact 2 is not 0 or 1"),
            (raw(0, -1, [None; 4]), None, "error_bound -1 is negative"),
            (
                raw(1, 5, [None; 4]),
                None,
                "an exact list has error_bound 5 (must be 0)",
            ),
            (
                raw(0, 1, [Some(4), Some(3), Some(0), Some(0)]),
                None,
                "sketch_found 4 exceeds sketch_of 3",
            ),
            (
                raw(0, 1, [Some(2), Some(4), Some(0), Some(0)]),
                Some(3),
                "sketch_of 4 exceeds the window's k (3)",
            ),
            (
                raw(0, 1, [Some(0), Some(1 << 21), Some(0), Some(0)]),
                None,
                "sketch_of 2097152 exceeds the largest k (1000000)",
            ),
            (
                raw(0, 1, [Some(-1), Some(3), Some(0), Some(0)]),
                None,
                "sketch_found -1 is out of range",
            ),
            (
                raw(0, 1, [Some(1), Some(1 << 40), Some(0), Some(0)]),
                None,
                "sketch_of 1099511627776 is out of range",
            ),
            (
                raw(0, 1, [Some(1), Some(3), Some(0), Some(-9)]),
                None,
                "sketch_total_overcount -9 is negative",
            ),
            (
                raw(0, 1, [Some(1), None, None, Some(9)]),
                None,
                "the sketch check lacks sketch_of, sketch_max_overcount",
            ),
        ];
        for (raw, k, want) in cases {
            let e = accuracy(&AT, &raw, k, closed).err().unwrap();
            assert_eq!(e, format!("{AT}: {want}"), "{raw:?}");
        }
        assert_eq!(
            RawAccuracy::of(false, u64::MAX, None, None),
            Err(("error_bound", u64::MAX))
        );
    }

    #[test]
    fn a_certificate_is_whole_and_on_an_exact_final_list_only() {
        let certified = |exact, certificate| RawAccuracy {
            exact,
            error_bound: 0,
            sketch: [None; 4],
            certificate,
        };
        let cert = Certificate {
            threshold: 40,
            counted: 17,
            passes: 2,
        };
        let whole = [Some(40), Some(17), Some(2)];
        assert_eq!(RawAccuracy::of(true, 0, None, Some(cert)), Ok(certified(1, whole)));
        let got = accuracy(&AT, &certified(1, whole), Some(3), ListState::Final).unwrap();
        assert_eq!(got.certificate, Some(cert));
        assert_eq!((got.exact, got.error_bound, got.sketch_check), (true, 0, None));
        let huge = Certificate {
            threshold: u64::MAX,
            ..cert
        };
        assert_eq!(
            RawAccuracy::of(true, 0, None, Some(huge)),
            Err(("certificate_threshold", u64::MAX))
        );
        let cases: [(RawAccuracy, ListState, &str); 7] = [
            (
                certified(0, whole),
                ListState::Final,
                "an approximate list has a certificate (only an exact list can)",
            ),
            (
                certified(1, whole),
                ListState::Closed,
                "a list in state closed has a certificate (only a final list can)",
            ),
            (
                certified(1, [Some(0), Some(17), Some(2)]),
                ListState::Final,
                "certificate_threshold 0 is not positive",
            ),
            (
                certified(1, [Some(40), Some(-1), Some(2)]),
                ListState::Final,
                "certificate_counted -1 is negative",
            ),
            (
                certified(1, [Some(40), Some(17), Some(0)]),
                ListState::Final,
                "certificate_passes 0 is out of range (1 to 4294967295)",
            ),
            (
                certified(1, [Some(40), Some(17), Some(1 << 40)]),
                ListState::Final,
                "certificate_passes 1099511627776 is out of range (1 to 4294967295)",
            ),
            (
                certified(1, [Some(40), None, None]),
                ListState::Final,
                "the certificate lacks certificate_counted, certificate_passes",
            ),
        ];
        for (raw, state, want) in cases {
            let e = accuracy(&AT, &raw, None, state).err().unwrap();
            assert_eq!(e, format!("{AT}: {want}"), "{raw:?}");
        }
    }

    #[test]
    fn windows_and_commits() {
        let w = |k| StoredWindow {
            name: "5m".into(),
            size: Span::from_millis(300_000),
            slide: Span::from_millis(300_000),
            k,
            by: Vec::new(),
        };
        assert!(windows("j", vec![w(MAX_K)]).is_ok());
        let e = windows("j", vec![w(MAX_K + 1)]).err().unwrap();
        assert_eq!(e, "job \"j\" window \"5m\": k 1000001 is out of range (1 to 1000000)");
        let mut empty = w(3);
        empty.slide = Span::ZERO;
        let e = windows("j", vec![empty]).err().unwrap();
        assert_eq!(
            e,
            "job \"j\": the recorded windows are invalid: window \"5m\": size and slide must be positive"
        );
        assert!(windows("j", vec![w(3), w(3)]).is_err(), "a name twice");
        assert_eq!(window_k("j", "5m", 100), Ok(100));
        assert_eq!(
            window_k("j", "5m", 0).err().unwrap(),
            "job \"j\" window \"5m\": k 0 is out of range (1 to 1000000)"
        );
        assert_eq!(commit("j", 7, Millis::MAX), Ok((7, Millis::MAX)));
        assert_eq!(commit("j", 7, Millis::MIN), Ok((7, Millis::MIN)));
        assert!(commit("j", -1, Millis(0)).is_err());
        assert!(commit("j", 7, Millis(Millis::MAX_EVENT.0 + 1)).is_err());
    }
}

//! What PostgreSQL is handed: instants as `timestamptz` (`±infinity` for `Millis::MIN` /
//! `Millis::MAX`), text without U+0000, and a checked batch as the column arrays the commit
//! statements bind. What PostgreSQL cannot hold is refused as [`SinkError::Invalid`].
//!
//! Nothing the job validated can be refused at commit time (a refusal would fail every retry
//! and every restart): event times are years 0000–9999, [`PG_MAX_WINDOW_SIZE`] keeps every
//! instance of such an event inside `timestamptz`'s range (`prepare` refuses longer windows),
//! a watermark before the range (only a `max_out_of_orderness` of millennia gets there)
//! precedes every event time and is stored as `-infinity`, and dead letters are inserted in
//! chunks of at most [`LETTER_CHUNK_BYTES`] so no array parameter nears PostgreSQL's 1 GB limit.

use crate::error::SinkError;
use crate::types::{latest_revisions, CommitBatch, SourcedDeadLetter};
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::ListState;
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use postgres::types::Timestamp;
use std::borrow::Cow;
use std::ops::Range;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Earliest instant PostgreSQL's `timestamptz` holds: 4714-11-24T00:00:00Z BC, in ms.
pub(super) const PG_MIN_MS: i64 = -210_866_803_200_000;
/// First instant past PostgreSQL's `timestamptz` range: 294277-01-01T00:00:00Z, in ms.
pub(super) const PG_END_MS: i64 = 9_224_318_016_000_000;

/// The longest window this store takes: every instance of an event at year 0 then starts after
/// PostgreSQL's earliest instant (instances end at most this far after year 9999, far inside).
pub(super) const PG_MAX_WINDOW_SIZE: Span = Span::from_millis((Millis::MIN_EVENT.0 - PG_MIN_MS) as u64);

/// Raw and detail bytes of the dead letters one `INSERT` binds (at least one letter each).
pub(super) const LETTER_CHUNK_BYTES: usize = 64 << 20;

/// A PostgreSQL `timestamptz` that may be `±infinity`.
pub(super) type PgTime = Timestamp<SystemTime>;

/// `t` as a `timestamptz`, or `None` if PostgreSQL cannot hold it.
pub(super) fn to_pg(t: Millis) -> Option<PgTime> {
    match t {
        Millis::MIN => Some(Timestamp::NegInfinity),
        Millis::MAX => Some(Timestamp::PosInfinity),
        Millis(ms) if (PG_MIN_MS..PG_END_MS).contains(&ms) => {
            let d = Duration::from_millis(ms.unsigned_abs());
            let t = if ms >= 0 {
                UNIX_EPOCH.checked_add(d)
            } else {
                UNIX_EPOCH.checked_sub(d)
            };
            t.map(Timestamp::Value)
        }
        Millis(_) => None,
    }
}

/// A `timestamptz` as milliseconds, flooring sub-millisecond digits (this store writes none).
pub(super) fn from_pg(t: PgTime) -> Millis {
    match t {
        Timestamp::NegInfinity => Millis::MIN,
        Timestamp::PosInfinity => Millis::MAX,
        Timestamp::Value(t) => {
            let nanos = match t.duration_since(UNIX_EPOCH) {
                Ok(d) => d.as_nanos() as i128,
                Err(e) => -(e.duration().as_nanos() as i128),
            };
            let ms = nanos.div_euclid(1_000_000);
            // PostgreSQL's range is far inside i64 milliseconds.
            Millis(i64::try_from(ms).unwrap_or(if ms < 0 { i64::MIN } else { i64::MAX }))
        }
    }
}

/// `t` as a `timestamptz`, or [`SinkError::Invalid`] naming `what`.
pub(super) fn pg_time(job: &str, t: Millis, what: impl FnOnce() -> String) -> Result<PgTime, SinkError> {
    to_pg(t).ok_or_else(|| {
        SinkError::invalid(
            job,
            format!(
                "{}: {} ms is outside PostgreSQL's timestamptz range (4714-11-24 BC .. 294276-12-31)",
                what(),
                t.0
            ),
        )
    })
}

/// A watermark as a `timestamptz`: one before PostgreSQL's range precedes every event time and
/// every window end, so it means what `-infinity` means and is stored as such.
pub(super) fn pg_watermark(t: Millis) -> PgTime {
    match to_pg(t) {
        Some(pg) => pg,
        None if t.0 < PG_MIN_MS => Timestamp::NegInfinity,
        None => Timestamp::PosInfinity,
    }
}

/// Refuses a window longer than [`PG_MAX_WINDOW_SIZE`] (at `prepare`, before anything runs).
pub(super) fn pg_window(job: &str, w: &WindowSpec) -> Result<(), SinkError> {
    if w.size > PG_MAX_WINDOW_SIZE {
        return Err(SinkError::invalid(
            job,
            format!(
                "window {:?}: size {} is longer than {} ({} ms): its instances of events near year 0 \
                 would start before 4714-11-24 BC, outside PostgreSQL's timestamptz range",
                w.name,
                w.size,
                PG_MAX_WINDOW_SIZE,
                PG_MAX_WINDOW_SIZE.as_millis()
            ),
        ));
    }
    Ok(())
}

/// Rejects text PostgreSQL cannot store (U+0000).
pub(super) fn pg_text(job: &str, s: &str, what: impl FnOnce() -> String) -> Result<(), SinkError> {
    if s.contains('\0') {
        return Err(SinkError::invalid(
            job,
            format!("{} {s:?} contains U+0000, which PostgreSQL text cannot hold", what()),
        ));
    }
    Ok(())
}

/// A checked batch as the column arrays the commit statements bind.
pub(super) struct Columns<'a> {
    /// One entry per instance: its header, and which rows to delete.
    pub headers: Headers<'a>,
    /// One entry per row of every instance.
    pub rows: Rows<'a>,
    /// One entry per whole dead letter (summaries are written one by one).
    pub letters: Letters<'a>,
    /// The batch's watermark.
    pub watermark: PgTime,
}

/// The `topk_instances` columns, one entry per instance.
#[derive(Default)]
pub(super) struct Headers<'a> {
    pub window: Vec<&'a str>,
    pub group: Vec<&'a str>,
    pub start: Vec<PgTime>,
    pub end: Vec<PgTime>,
    pub revision: Vec<i64>,
    pub state: Vec<&'static str>,
    pub is_final: Vec<bool>,
    pub watermark: Vec<PgTime>,
    pub as_of: Vec<PgTime>,
    pub item_count: Vec<i64>,
    pub exact: Vec<bool>,
    pub error_bound: Vec<i64>,
    /// The sketch check's columns (`sketch_found`, …), NULL for a list without one.
    pub sketch: [Vec<Option<i64>>; 4],
    /// The certificate's columns (`certificate_threshold`, …), NULL for a list without one.
    pub certificate: [Vec<Option<i64>>; 3],
}

/// The `topk` columns, one entry per row.
#[derive(Default)]
pub(super) struct Rows<'a> {
    pub window: Vec<&'a str>,
    pub group: Vec<&'a str>,
    pub start: Vec<PgTime>,
    pub end: Vec<PgTime>,
    pub revision: Vec<i64>,
    pub is_final: Vec<bool>,
    pub state: Vec<&'static str>,
    pub as_of: Vec<PgTime>,
    pub exact: Vec<bool>,
    pub error_bound: Vec<i64>,
    pub rank: Vec<i64>,
    pub item: Vec<&'a str>,
    pub count: Vec<i64>,
    /// The trend columns (`baseline`, `score`, `history`), NULL on a count-ranked list's row.
    pub baseline: Vec<Option<i64>>,
    pub score: Vec<Option<f64>>,
    pub history: Vec<Option<String>>,
}

/// The `dead_letters` columns, one entry per letter.
#[derive(Default)]
pub(super) struct Letters<'a> {
    pub source: Vec<&'a str>,
    pub partition: Vec<i64>,
    pub position: Vec<i64>,
    pub reason: Vec<&'static str>,
    pub detail: Vec<Cow<'a, str>>,
    pub raw: Vec<&'a [u8]>,
}

impl<'a> Columns<'a> {
    /// Converts a batch `check_batch` accepted, rejecting what PostgreSQL cannot hold.
    pub(super) fn of(batch: &'a CommitBatch) -> Result<Columns<'a>, SinkError> {
        let job = batch.job.as_str();
        pg_text(job, job, || "job id".into())?;
        let mut c = Columns {
            headers: Headers::default(),
            rows: Rows::default(),
            letters: Letters::default(),
            watermark: pg_watermark(batch.watermark),
        };
        for l in latest_revisions(&batch.lists) {
            c.push_list(job, l)?;
        }
        for d in &batch.dead_letters {
            if d.is_summary() {
                // written one by one (`summaries`): checked here like every letter
                pg_text(job, &d.source, || "dead letter source".into())?;
                pg_text(job, &d.letter.detail, || "dead letter detail".into())?;
            } else {
                c.letters.push(job, d)?;
            }
        }
        Ok(c)
    }

    /// Adds an instance's header and its rows.
    fn push_list(&mut self, job: &str, l: &'a PublishedList) -> Result<(), SinkError> {
        let at = || format!("list {:?}@{}", l.window, l.start.0);
        pg_text(job, &l.window, || "window name".into())?;
        let start = pg_time(job, l.start, || format!("{}: start", at()))?;
        let end = pg_time(job, l.end, || format!("{}: end", at()))?;
        let watermark = pg_watermark(l.watermark);
        let as_of = pg_time(job, l.as_of, || format!("{}: as_of", at()))?;
        let state = l.state.as_str();
        let is_final = l.state == ListState::Final;
        let revision = i64::from(l.revision);
        // `check_batch` has verified the error bound, over-counts and the certificate's
        // threshold and count fit an i64.
        let error_bound = l.error_bound as i64;
        let sketch = l.sketch_check.map(|c| {
            [
                i64::from(c.found),
                i64::from(c.of),
                c.max_overcount as i64,
                c.total_overcount as i64,
            ]
        });
        let certificate = l
            .certificate
            .map(|c| [c.threshold as i64, c.counted as i64, i64::from(c.passes)]);
        let h = &mut self.headers;
        h.window.push(&l.window);
        h.group.push(l.group.as_str());
        h.start.push(start);
        h.end.push(end);
        h.revision.push(revision);
        h.state.push(state);
        h.is_final.push(is_final);
        h.watermark.push(watermark);
        h.as_of.push(as_of);
        h.item_count.push(i64::try_from(l.items.len()).unwrap_or(i64::MAX));
        h.exact.push(l.exact);
        h.error_bound.push(error_bound);
        for (i, column) in h.sketch.iter_mut().enumerate() {
            column.push(sketch.map(|values| values[i]));
        }
        for (i, column) in h.certificate.iter_mut().enumerate() {
            column.push(certificate.map(|values| values[i]));
        }
        let r = &mut self.rows;
        for (i, item) in l.items.iter().enumerate() {
            pg_text(job, &item.item_id, || format!("{}: item id", at()))?;
            r.window.push(&l.window);
            r.group.push(l.group.as_str());
            r.start.push(start);
            r.end.push(end);
            r.revision.push(revision);
            r.is_final.push(is_final);
            r.state.push(state);
            r.as_of.push(as_of);
            r.exact.push(l.exact);
            r.error_bound.push(error_bound);
            r.rank.push(i64::try_from(i + 1).unwrap_or(i64::MAX));
            r.item.push(&item.item_id);
            // `check_batch` has verified the count and the baseline fit an i64.
            r.count.push(item.count as i64);
            let trend = crate::sql_rows::trend_columns(item);
            r.baseline.push(trend.as_ref().map(|t| t.0));
            r.score.push(trend.as_ref().map(|t| t.1));
            r.history.push(trend.map(|t| t.2));
        }
        Ok(())
    }
}

impl<'a> Letters<'a> {
    /// The letters in consecutive chunks of at most [`LETTER_CHUNK_BYTES`] of raw and detail
    /// bytes (a larger letter is a chunk of its own), in order.
    pub(super) fn chunks(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let (mut start, mut bytes) = (0, 0usize);
        for (i, (raw, detail)) in self.raw.iter().zip(&self.detail).enumerate() {
            let size = raw.len() + detail.len();
            if i > start && bytes + size > LETTER_CHUNK_BYTES {
                out.push(start..i);
                (start, bytes) = (i, 0);
            }
            bytes += size;
        }
        if start < self.raw.len() {
            out.push(start..self.raw.len());
        }
        out
    }

    /// Adds a dead letter; U+0000 in its (human-readable) detail becomes U+FFFD.
    fn push(&mut self, job: &str, d: &'a SourcedDeadLetter) -> Result<(), SinkError> {
        pg_text(job, &d.source, || "dead letter source".into())?;
        self.source.push(&d.source);
        self.partition.push(i64::from(d.letter.partition.0));
        // `check_batch` has verified the position fits an i64.
        self.position.push(d.letter.position as i64);
        self.reason.push(d.letter.reason.as_str());
        self.detail.push(if d.letter.detail.contains('\0') {
            Cow::Owned(d.letter.detail.replace('\0', "\u{FFFD}"))
        } else {
            Cow::Borrowed(d.letter.detail.as_str())
        });
        self.raw.push(&d.letter.raw);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Watermarks before PostgreSQL's range are `-infinity`; the window bound is exact.
    #[test]
    fn watermarks_and_windows_stay_in_range() {
        assert!(matches!(pg_watermark(Millis(PG_MIN_MS - 1)), Timestamp::NegInfinity));
        assert!(matches!(pg_watermark(Millis::MIN), Timestamp::NegInfinity));
        assert!(matches!(pg_watermark(Millis::MAX), Timestamp::PosInfinity));
        assert!(matches!(pg_watermark(Millis(0)), Timestamp::Value(_)));
        assert!(to_pg(Millis(Millis::MIN_EVENT.0 - PG_MAX_WINDOW_SIZE.as_i64())).is_some());
        assert!(to_pg(Millis(Millis::MAX_EVENT.0 + PG_MAX_WINDOW_SIZE.as_i64())).is_some());
        let w = |ms: u64| WindowSpec::tumbling("w", Span::from_millis(ms), 1);
        assert!(pg_window("j", &w(PG_MAX_WINDOW_SIZE.as_millis())).is_ok());
        let err = pg_window("j", &w(PG_MAX_WINDOW_SIZE.as_millis() + 1)).unwrap_err();
        assert!(!err.retryable() && err.to_string().contains("window \"w\""), "{err}");
    }

    /// Dead letters are split into chunks by bytes, in order, every letter in exactly one.
    #[test]
    fn letters_are_chunked_by_bytes() {
        let big = vec![0u8; LETTER_CHUNK_BYTES / 2];
        let huge = vec![0u8; LETTER_CHUNK_BYTES + 1];
        let mut l = Letters::default();
        for raw in [&big[..], &big[..10], &big[..], &huge[..], &b"x"[..]] {
            l.raw.push(raw);
            l.detail.push(Cow::Borrowed("d"));
        }
        assert_eq!(l.chunks(), vec![0..2, 2..3, 3..4, 4..5]);
        assert_eq!(Letters::default().chunks(), Vec::<Range<usize>>::new());
    }
}

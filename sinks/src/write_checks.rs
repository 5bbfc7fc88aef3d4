//! The input checks every store shares, run before anything of a call is written: a job id,
//! the windows `prepare` records, and every number of a batch against the stores' signed
//! 64-bit columns, a list's accuracy and an instance's ranges as every reader will check them
//! (`read_checks`, `ranges`).

use crate::error::SinkError;
use crate::read_checks::{self, ListAt, RawAccuracy};
use crate::types::{CommitBatch, SourcedDeadLetter};
use hotlist_operators::dead_letter_cap::block_of;
use hotlist_operators::group::GroupKey;
use hotlist_operators::message::PublishedList;
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::window::{validate_all, WindowSpec};

/// Checks a job id before a store records anything under it.
pub(crate) fn check_job(job: &str) -> Result<(), SinkError> {
    if job.is_empty() {
        return Err(SinkError::invalid(job, "the job id is empty".into()));
    }
    Ok(())
}

/// Checks a job id and its windows before `prepare` stores them.
pub(crate) fn check_prepare(job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
    check_job(job)?;
    validate_all(windows).map_err(|e| SinkError::invalid(job, e.to_string()))?;
    for w in windows {
        if i64::try_from(w.k).is_err() {
            return Err(SinkError::invalid(job, format!("window {:?}: k is too large", w.name)));
        }
    }
    Ok(())
}

/// Checks that every number of a batch fits the stores' signed 64-bit columns, so a commit
/// never fails half way through for a reason retrying cannot fix.
pub(crate) fn check_batch(batch: &CommitBatch) -> Result<(), SinkError> {
    let job = batch.job.as_str();
    if job.is_empty() {
        return Err(SinkError::invalid(job, "the job id is empty".into()));
    }
    if i64::try_from(batch.epoch).is_err() {
        return Err(SinkError::invalid(job, format!("epoch {} is too large", batch.epoch)));
    }
    for l in &batch.lists {
        if l.end < l.start {
            return Err(SinkError::invalid(
                job,
                format!("list {:?}@{}: end before start", l.window, l.start.0),
            ));
        }
        check_accuracy(job, l)?;
        if let Err(e) = GroupKey::parse(l.group.as_str()) {
            return Err(SinkError::invalid(
                job,
                format!("list {:?}@{}: group {:?}: {e}", l.window, l.start.0, l.group.as_str()),
            ));
        }
        let too_large = |i: &&hotlist_operators::record::RankedItem| {
            i64::try_from(i.count).is_err() || i.baseline().is_some_and(|b| i64::try_from(b).is_err())
        };
        if let Some(item) = l.items.iter().find(too_large) {
            return Err(SinkError::invalid(
                job,
                format!(
                    "list {:?}@{}: count {} of {:?} is too large",
                    l.window, l.start.0, item.count, item.item_id
                ),
            ));
        }
    }
    for w in &batch.hot_keys {
        read_checks::hot_window_to_write(job, w).map_err(|d| SinkError::invalid(job, d))?;
    }
    for d in &batch.dead_letters {
        if i64::try_from(d.letter.position).is_err() {
            return Err(SinkError::invalid(
                job,
                format!(
                    "dead letter from {:?}: position {} is too large",
                    d.source, d.letter.position
                ),
            ));
        }
        check_count(job, d)?;
    }
    for r in &batch.ranges {
        check_ranges(job, r)?;
    }
    Ok(())
}

/// Checks an instance's ranges as every reader will (`SealedRanges::validate`), so ranges a
/// store accepts read back.
fn check_ranges(job: &str, r: &SealedRanges) -> Result<(), SinkError> {
    let at = ListAt {
        job,
        window: &r.window,
        start: r.start,
    };
    if r.window.is_empty() {
        return Err(SinkError::invalid(
            job,
            format!("{at}: ranges of a window without a name"),
        ));
    }
    r.validate()
        .map_err(|e| SinkError::invalid(job, format!("{at}: ranges: {e}")))
}

/// A whole letter counts 1; a summary at least 1, from its first position to its last (in the
/// same block), every number fitting the stores' signed 64-bit columns.
fn check_count(job: &str, d: &SourcedDeadLetter) -> Result<(), SinkError> {
    let bad = |what: String| {
        Err(SinkError::invalid(
            job,
            format!("dead letter from {:?}: {what}", d.source),
        ))
    };
    match d.last_position {
        None if d.count != 1 => bad(format!("a whole letter counts 1, not {}", d.count)),
        Some(last)
            if d.count == 0
                || i64::try_from(d.count).is_err()
                || i64::try_from(last).is_err()
                || last < d.letter.position
                || block_of(last) != block_of(d.letter.position) =>
        {
            bad(format!(
                "summary of {} from position {} to {last} is out of range",
                d.count, d.letter.position
            ))
        }
        _ => Ok(()),
    }
}

/// Checks a list's accuracy as every reader will ([`read_checks::accuracy`], bounding the
/// sketch check by the largest `k`), so a list a store accepts reads back: its numbers fit the
/// stores' signed 64-bit columns, an exact list has `error_bound` 0, a sketch check finds at
/// most the items it compares, and a certificate (threshold and passes at least 1) is on an
/// exact final list only.
fn check_accuracy(job: &str, l: &PublishedList) -> Result<(), SinkError> {
    let at = ListAt {
        job,
        window: &l.window,
        start: l.start,
    };
    let raw = RawAccuracy::of(l.exact, l.error_bound, l.sketch_check, l.certificate)
        .map_err(|(what, v)| SinkError::invalid(job, format!("{at}: {what} {v} is too large")))?;
    read_checks::accuracy(&at, &raw, None, l.state).map_err(|d| SinkError::invalid(job, d))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::certify::Certificate;
    use hotlist_operators::record::ListState;
    use hotlist_operators::time::Span;

    use crate::test_fixtures::empty_list as list;

    #[test]
    fn batch_checks() {
        let mut b = CommitBatch {
            job: "j".into(),
            epoch: 1,
            ..CommitBatch::default()
        };
        assert!(check_batch(&b).is_ok());
        b.epoch = u64::MAX;
        let e = check_batch(&b).map(|_| ()).unwrap_err();
        assert!(!e.retryable());
        assert!(e.to_string().contains("epoch"), "{e}");
        b.epoch = 1;
        b.job.clear();
        assert!(check_batch(&b).is_err());
        assert!(check_prepare("", &[]).is_err());
        b.job = "j".into();
        let mut l = list("1m", 0, 1);
        l.error_bound = 5;
        b.lists = vec![l.clone()];
        let e = check_batch(&b).map(|_| ()).unwrap_err();
        assert!(
            e.to_string().ends_with("an exact list has error_bound 5 (must be 0)"),
            "{e}"
        );
        l.exact = false;
        b.lists = vec![l.clone()];
        assert!(check_batch(&b).is_ok(), "an approximate list may over-count");
        l.error_bound = u64::MAX;
        b.lists = vec![l];
        let e = check_batch(&b).map(|_| ()).unwrap_err();
        assert!(
            e.to_string().ends_with("error_bound 18446744073709551615 is too large"),
            "{e}"
        );
        assert!(check_prepare("j", &[WindowSpec::tumbling("1m", Span::from_millis(60_000), 0)]).is_err());
    }

    /// Ranges a reader would refuse are refused before anything is written.
    #[test]
    fn ranges_are_checked_as_a_reader_checks_them() {
        use crate::test_fixtures::{sealed, unreadable};
        let mut b = CommitBatch {
            job: "j".into(),
            epoch: 1,
            ranges: vec![sealed("1m", 0), unreadable("5m", 0, "gone")],
            ..CommitBatch::default()
        };
        assert!(check_batch(&b).is_ok());
        let here = "job \"j\" window \"1m\" instance 1970-01-01T00:00:00.000Z: ranges";
        let mut backwards = sealed("1m", 0);
        if let Ok(ranges) = &mut backwards.ranges {
            ranges[1].to = ranges[1].from - 1;
        }
        let mut unordered = sealed("1m", 0);
        if let Ok(ranges) = &mut unordered.ranges {
            ranges.reverse();
        }
        let mut empty = unreadable("1m", 0, "x");
        empty.end = empty.start;
        let mut nameless = sealed("1m", 0);
        nameless.window.clear();
        for (bad, want) in [
            (
                backwards,
                format!("{here}: partition 3: the range ends before it starts"),
            ),
            (unordered, format!("{here}: partitions not ascending")),
            (empty, format!("{here}: instance 0..0 ends before it starts")),
            (
                nameless,
                "job \"j\" window \"\" instance 1970-01-01T00:00:00.000Z: ranges of a window without a name".into(),
            ),
        ] {
            b.ranges = vec![sealed("5m", 0), bad];
            let e = check_batch(&b).map(|_| ()).unwrap_err();
            assert!(matches!(e, SinkError::Invalid { .. }), "{e}");
            assert!(e.to_string().ends_with(&want), "{e} (want {want:?})");
        }
    }

    #[test]
    fn a_certificate_only_on_an_exact_final_list() {
        let certificate = Certificate {
            threshold: 40,
            counted: 17,
            passes: 1,
        };
        let mut l = list("1m", 0, 3);
        l.state = ListState::Final;
        l.certificate = Some(certificate);
        let mut b = CommitBatch {
            job: "j".into(),
            epoch: 1,
            lists: vec![l.clone()],
            ..CommitBatch::default()
        };
        assert!(check_batch(&b).is_ok());
        let mut approximate = l.clone();
        (approximate.exact, approximate.error_bound) = (false, 5);
        let mut open = l.clone();
        open.state = ListState::Open;
        let mut no_passes = l.clone();
        no_passes.certificate = Some(Certificate {
            passes: 0,
            ..certificate
        });
        let mut huge = l;
        huge.certificate = Some(Certificate {
            counted: u64::MAX,
            ..certificate
        });
        for (bad, want) in [
            (
                approximate,
                "an approximate list has a certificate (only an exact list can)",
            ),
            (open, "a list in state open has a certificate (only a final list can)"),
            (no_passes, "certificate_passes 0 is out of range (1 to 4294967295)"),
            (huge, "certificate_counted 18446744073709551615 is too large"),
        ] {
            b.lists = vec![bad];
            let e = check_batch(&b).map(|_| ()).unwrap_err();
            assert!(!e.retryable());
            assert!(e.to_string().ends_with(want), "{e}");
        }
    }
}

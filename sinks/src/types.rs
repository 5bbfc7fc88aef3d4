//! The records sink stores take in (`CommitBatch`) and hand back (`StoredList`, `StoredWindow`),
//! plus the input checks and the "highest revision wins" rule every store shares.

use crate::error::SinkError;
use crate::read_checks::{self, ListAt, RawAccuracy};
use hotlist_operators::certify::Certificate;
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{DeadLetter, ListState, RankedItem, SketchCheck};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::{validate_all, WindowSpec};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One atomic unit of output: everything the job produced in epochs `(prev_epoch, epoch]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommitBatch {
    /// Job id, e.g. `"hotlist"`.
    pub job: String,
    /// Last epoch covered; committed epochs never go backwards.
    pub epoch: u64,
    /// The global watermark at that epoch.
    pub watermark: Millis,
    /// Published lists; may hold several revisions of one instance: the highest revision wins.
    pub lists: Vec<PublishedList>,
    /// Dead letters, appended in this order.
    pub dead_letters: Vec<SourcedDeadLetter>,
    /// Closed hot-key windows (`[hot_keys]`), in window order; a window is written once.
    #[serde(default)]
    pub hot_keys: Vec<HotWindow>,
}

/// A dead letter with the source it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcedDeadLetter {
    /// The source, e.g. `"file:events/a.jsonl"` or `"generator:3"`.
    pub source: String,
    /// The letter.
    pub letter: DeadLetter,
}

/// The stored (latest) revision of one window instance's list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredList {
    /// Window name.
    pub window: String,
    /// The list's group (`""` for a window without `by`).
    #[serde(default)]
    pub group: GroupKey,
    /// Instance start (inclusive).
    pub start: Millis,
    /// Instance end (exclusive).
    pub end: Millis,
    /// The revision stored.
    pub revision: u32,
    /// Open, closed or final.
    pub state: ListState,
    /// The global watermark the list was computed at.
    pub watermark: Millis,
    /// Wall-clock time of publication.
    pub as_of: Millis,
    /// The list, best first (rank 1 first).
    pub items: Vec<RankedItem>,
    /// Whether every count is exact (false: counted by a sketch; see `error_bound`).
    pub exact: bool,
    /// The largest possible over-count of any count in the list: 0 when exact.
    pub error_bound: u64,
    /// With `mode = "both"`: how the sketch's list compared with this exact one.
    pub sketch_check: Option<SketchCheck>,
    /// For a sketch window with `exact_at_seal`: what proved its final list exact (then `exact`
    /// is true and `error_bound` 0); `None` for every other list.
    #[serde(default)]
    pub certificate: Option<Certificate>,
}

impl From<PublishedList> for StoredList {
    fn from(l: PublishedList) -> StoredList {
        StoredList {
            window: l.window,
            group: l.group,
            start: l.start,
            end: l.end,
            revision: l.revision,
            state: l.state,
            watermark: l.watermark,
            as_of: l.as_of,
            items: l.items,
            exact: l.exact,
            error_bound: l.error_bound,
            sketch_check: l.sketch_check,
            certificate: l.certificate,
        }
    }
}

/// A window as the job configured it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredWindow {
    /// The window name.
    pub name: String,
    /// Instance length.
    pub size: Span,
    /// Distance between instance starts.
    pub slide: Span,
    /// List length.
    pub k: usize,
    /// The `by` dims, sorted (empty: one global list per instance).
    #[serde(default)]
    pub by: Vec<String>,
}

impl From<&WindowSpec> for StoredWindow {
    fn from(w: &WindowSpec) -> StoredWindow {
        StoredWindow {
            name: w.name.clone(),
            size: w.size,
            slide: w.slide,
            k: w.k,
            by: w.key.by.clone(),
        }
    }
}

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
        if let Some(item) = l.items.iter().find(|i| i64::try_from(i.count).is_err()) {
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
    }
    Ok(())
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

/// The highest revision of every list in `lists` (one per window, group and instance; on a
/// tie, the later one), in order of first appearance.
pub(crate) fn latest_revisions(lists: &[PublishedList]) -> Vec<&PublishedList> {
    let mut slot: HashMap<(&str, &str, Millis), usize> = HashMap::with_capacity(lists.len());
    let mut out: Vec<&PublishedList> = Vec::with_capacity(lists.len());
    for l in lists {
        let key = (l.window.as_str(), l.group.as_str(), l.start);
        match slot.get(&key) {
            Some(&i) => {
                if l.revision >= out[i].revision {
                    out[i] = l;
                }
            }
            None => {
                slot.insert(key, out.len());
                out.push(l);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(window: &str, start: i64, revision: u32) -> PublishedList {
        PublishedList {
            group: Default::default(),
            window: window.into(),
            start: Millis(start),
            end: Millis(start + 10),
            revision,
            state: ListState::Open,
            watermark: Millis(0),
            as_of: Millis(0),
            items: vec![],
            exact: true,
            error_bound: 0,
            sketch_check: None,
            certificate: None,
        }
    }

    #[test]
    fn highest_revision_wins() {
        let lists = vec![
            list("1m", 0, 1),
            list("5m", 0, 1),
            list("1m", 0, 3),
            list("1m", 0, 2),
            list("1m", 60, 1),
        ];
        let got: Vec<(&str, i64, u32)> = latest_revisions(&lists)
            .iter()
            .map(|l| (l.window.as_str(), l.start.0, l.revision))
            .collect();
        assert_eq!(got, vec![("1m", 0, 3), ("5m", 0, 1), ("1m", 60, 1)]);
    }

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

//! The records sink stores take in (`CommitBatch`) and hand back (`StoredList`, `StoredWindow`),
//! plus the "highest revision wins" rule every store shares. The checks of what goes in are in
//! `write_checks`.

use hotlist_operators::certify::Certificate;
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{DeadLetter, ListState, RankedItem, SketchCheck};
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
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
    /// Where the instances sealed in these epochs lie in the input (every window's); an
    /// instance's ranges replace what the store had for it (a rerun after a restore records
    /// them again).
    #[serde(default)]
    pub ranges: Vec<SealedRanges>,
}

/// A dead letter with the source it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcedDeadLetter {
    /// The source, e.g. `"file:events/a.jsonl"` or `"generator:3"`.
    pub source: String,
    /// The letter; of a summary row: the first position, the reason and a summary detail.
    pub letter: DeadLetter,
    /// How many dead letters the row stands for: 1 for a whole letter, more for a summary of
    /// those beyond the block's cap (`hotlist_operators::dead_letter_cap`).
    #[serde(default = "one")]
    pub count: u64,
    /// Of a summary row: the last position it counts (`None` for a whole letter).
    #[serde(default)]
    pub last_position: Option<u64>,
}

fn one() -> u64 {
    1
}

impl SourcedDeadLetter {
    /// A whole dead letter of `source`.
    pub fn whole(source: String, letter: DeadLetter) -> Self {
        SourcedDeadLetter {
            source,
            letter,
            count: 1,
            last_position: None,
        }
    }

    /// Whether this row is a summary of letters beyond a block's cap.
    pub fn is_summary(&self) -> bool {
        self.last_position.is_some()
    }
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

    use crate::test_fixtures::empty_list as list;

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
}

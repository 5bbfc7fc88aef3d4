//! The sink writer's counters: commits, their latency, the last committed epoch, and each
//! window's latest committed list (what it is: exact or its error bound, the sketch check),
//! kept for the groups of each window's live instances only; and the dead letters counted only,
//! in a block's summary, beyond `run.max_dead_letters_per_block`.

use crate::metrics::{self, Metrics};
use hotlist_operators::group::GroupKey;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::DeadReason;
use hotlist_sinks::retention::superseded;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Counters of the sink writer.
#[derive(Debug)]
pub struct SinkStats {
    /// Last epoch committed to the sink.
    pub committed_epoch: AtomicU64,
    /// Sink transactions.
    pub commits: AtomicU64,
    /// Sink commit latency (seconds), and rows written.
    pub commit_seconds: prometheus::Histogram,
    /// Latest committed list per window and group (the newest instance).
    pub latest: Mutex<BTreeMap<(String, GroupKey), PublishedList>>,
    /// Dead letters counted only (in a block's summary row), per reason in `DeadReason::ALL`
    /// order.
    pub dead_letters_summarised: [AtomicU64; DeadReason::ALL.len()],
}

impl Default for SinkStats {
    fn default() -> SinkStats {
        SinkStats {
            committed_epoch: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_seconds: metrics::histogram(
                "hotlist_sink_commit_seconds",
                "sink commit latency",
                vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                ],
            ),
            latest: Mutex::new(BTreeMap::new()),
            dead_letters_summarised: Default::default(),
        }
    }
}

impl SinkStats {
    /// Records a committed list as its window and group's latest if it is the newest instance,
    /// and drops the lists of instances the window's newest instance supersedes
    /// (`hotlist_sinks::retention`): with rotating group values the map would otherwise keep
    /// every group ever seen.
    pub fn note_committed(&self, list: &PublishedList) {
        if let Ok(mut latest) = self.latest.lock() {
            note(&mut latest, list);
        }
    }

    /// How many latest lists are tracked (`hotlist_latest_lists`).
    pub fn latest_lists(&self) -> usize {
        self.latest.lock().map_or(0, |l| l.len())
    }

    /// Registers commits, their latency, the committed epoch and the lists' accuracy.
    pub fn register(&self, m: &Metrics) {
        m.scalars([
            (
                "hotlist_commits_total",
                "sink transactions",
                self.commits.load(Relaxed) as i64,
            ),
            (
                "hotlist_committed_epoch",
                "last committed epoch",
                self.committed_epoch.load(Relaxed) as i64,
            ),
            (
                "hotlist_latest_lists",
                "latest committed lists tracked, one per window and group of a live instance",
                self.latest_lists() as i64,
            ),
        ]);
        m.add(self.commit_seconds.clone());
        self.register_list_accuracy(m);
        let summarised = metrics::int_counter_vec(
            "hotlist_dead_letters_summarised_total",
            "dead letters beyond run.max_dead_letters_per_block in their block: counted in a summary row, not kept whole",
            &["reason"],
        );
        for (r, n) in DeadReason::ALL.iter().zip(&self.dead_letters_summarised) {
            summarised.with_label_values(&[r.as_str()]).inc_by(n.load(Relaxed));
        }
        m.add(summarised);
    }

    /// Counts dead letters of `reason` that went into a summary.
    pub fn note_summarised(&self, reason: DeadReason, n: u64) {
        if let Some(i) = DeadReason::ALL.iter().position(|r| *r == reason) {
            self.dead_letters_summarised[i].fetch_add(n, Relaxed);
        }
    }

    /// Per window, what its latest committed list is: exact (1) or not, its error bound, and
    /// for a `both` window how the sketch compared (recall@K, largest and mean over-count).
    fn register_list_accuracy(&self, m: &Metrics) {
        let vec = |name: &str, help: &str| metrics::gauge_vec(name, help, &["window"]);
        let exact = vec(
            "hotlist_list_exact",
            "1 when the window's latest list is exact, 0 when approximate",
        );
        let bound = vec(
            "hotlist_list_error_bound",
            "the largest possible over-count of any count in the window's latest list (0: exact)",
        );
        let recall = vec(
            "hotlist_sketch_recall",
            "mode = both: the share of the exact top-K the sketch's top-K found (latest list)",
        );
        let max_over = vec(
            "hotlist_sketch_max_overcount",
            "mode = both: the sketch's largest over-count on the items of both lists (latest list)",
        );
        let mean_over = vec(
            "hotlist_sketch_mean_overcount",
            "mode = both: the sketch's total over-count divided by K (latest list)",
        );
        if let Ok(latest) = self.latest.lock() {
            for ((window, _), l) in latest.iter().filter(|((_, g), _)| g.is_global()) {
                exact.with_label_values(&[window]).set(if l.exact { 1.0 } else { 0.0 });
                bound.with_label_values(&[window]).set(l.error_bound as f64);
                if let Some(c) = &l.sketch_check {
                    recall.with_label_values(&[window]).set(c.recall());
                    max_over.with_label_values(&[window]).set(c.max_overcount as f64);
                    mean_over.with_label_values(&[window]).set(c.mean_overcount());
                }
            }
        }
        for g in [exact, bound, recall, max_over, mean_over] {
            m.add(g);
        }
    }
}

/// [`SinkStats::note_committed`] on the map.
fn note(latest: &mut BTreeMap<(String, GroupKey), PublishedList>, list: &PublishedList) {
    let window = list.window.as_str();
    let of_window = || {
        latest
            .range((window.to_string(), GroupKey::default())..)
            .take_while(|((w, _), _)| w == window)
    };
    let newest = of_window().map(|(_, l)| l.start).max();
    if newest.is_some_and(|n| superseded(list.end, n)) {
        return;
    }
    let key = (list.window.clone(), list.group.clone());
    let newer = latest
        .get(&key)
        .is_none_or(|l| (l.start, l.revision) <= (list.start, list.revision));
    if newer {
        latest.insert(key, list.clone());
    }
    if newest.is_none_or(|n| list.start > n) {
        let gone: Vec<(String, GroupKey)> = latest
            .range((window.to_string(), GroupKey::default())..)
            .take_while(|((w, _), _)| w == window)
            .filter(|(_, l)| superseded(l.end, list.start))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            latest.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::record::ListState;
    use hotlist_operators::time::Millis;

    fn list(group: &str, start: i64) -> PublishedList {
        PublishedList {
            group: GroupKey::from_stored(format!("g={group}")),
            window: "1m".into(),
            start: Millis(start),
            end: Millis(start + 60_000),
            revision: 1,
            state: ListState::Open,
            watermark: Millis(start),
            as_of: Millis(0),
            items: vec![],
            exact: true,
            error_bound: 0,
            sketch_check: None,
            certificate: None,
        }
    }

    /// Groups rotating with every instance: the map keeps the newest instance's groups and the
    /// previous one's (a tumbling window), and an old instance's late list is not taken back.
    #[test]
    fn rotating_groups_keep_the_map_bounded() {
        let stats = SinkStats::default();
        stats.note_committed(&PublishedList {
            window: "5m".into(),
            ..list("x", 0)
        });
        for instance in 0..100i64 {
            for g in 0..10 {
                stats.note_committed(&list(&format!("{instance}-{g}"), instance * 60_000));
            }
            assert!(stats.latest_lists() <= 21, "{}", stats.latest_lists());
        }
        stats.note_committed(&list("late", 0));
        let latest = stats.latest.lock().expect("lock");
        let starts: std::collections::BTreeSet<i64> = latest.values().map(|l| l.start.0).collect();
        assert_eq!(
            starts.into_iter().collect::<Vec<_>>(),
            vec![0, 98 * 60_000, 99 * 60_000]
        );
        assert_eq!(latest.len(), 21, "the other window's list stays");
    }
}

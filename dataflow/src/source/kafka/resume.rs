//! How a checkpoint's partitions go on in a new run, decided once per run before the workers
//! start (every worker and process applies the same restored state).
//!
//! A partition that ended stays ended — except a **Kafka** partition: a bounded run ends it at
//! the end offset it had at start, but the topic grows. So a run after a bounded run (live, or
//! bounded again) reads each such partition on from its checkpointed offset, as an active
//! partition with the clock it had (its largest event time, kept in the checkpoint also once
//! finished). Files and a bounded generator do not grow: a rerun of a finished job reads nothing.
//!
//! What stays sealed: a bounded run that ended every partition sealed every instance at +∞,
//! published it final and freed its state. Going on, the global watermark starts afresh from the
//! partitions' clocks, and the counters keep, per window, every instance that can hold an event
//! of the earlier run sealed ([`sealed_after_end`]: up to the last instance covering its largest
//! event time): events for them become `sealed` dead letters, later instances of every window
//! count as usual. Results stay a pure function of the input and of where the bounded run ended.
//! When only some partitions had ended (a bounded run stopped or killed before its end), the
//! watermark is the checkpoint's; the partitions that had ended read on like partitions back
//! from idle.
//!
//! Checkpoints of older versions stored no event time for finished partitions (`Millis::MAX`):
//! those partitions stay finished, with a warning.

use crate::checkpoint::Restored;
use crate::config::{JobPlan, SourcePlan};
use hotlist_operators::counter::sealed_after_end;
use hotlist_operators::record::PartitionStatus;
use hotlist_operators::time::Millis;

/// `restored`, with the partitions that go on in this run set going (see the module doc).
pub fn continue_finished(mut restored: Restored, plan: &JobPlan) -> Restored {
    let SourcePlan::Kafka { spec, .. } = &plan.source else {
        return restored;
    };
    let partitions = &mut restored.sources.partitions;
    let finished: Vec<usize> = (0..partitions.len())
        .filter(|i| partitions[*i].status == PartitionStatus::Finished)
        .collect();
    if finished.is_empty() {
        return restored;
    }
    if finished.iter().any(|i| partitions[*i].max_ts == Millis::MAX) {
        tracing::warn!(
            "checkpoint {} was written by an older version, which kept no event time for partitions a bounded run finished: they stay finished (run the job under a new job.id to read {:?} on)",
            restored.epoch,
            spec.topic
        );
        return restored;
    }
    let ended = restored.counters.iter().all(|c| c.watermark == Millis::MAX);
    if ended {
        // at +∞ every instance was sealed and freed; live state here would be counted twice
        let freed = restored
            .counters
            .iter()
            .all(|c| c.key_groups.is_empty() && c.pane_files.is_empty())
            && restored.sketches.iter().all(|s| s.instances.is_empty())
            && restored.merger.instances.is_empty();
        if !freed {
            tracing::warn!(
                "checkpoint {} ended its input but holds live state: its partitions stay finished",
                restored.epoch
            );
            return restored;
        }
        let last = partitions.iter().map(|p| p.max_ts).max().unwrap_or(Millis::MIN);
        let sealed = sealed_after_end(&plan.window_specs(), last);
        for c in restored.counters.iter_mut() {
            c.watermark = Millis::MIN; // afresh, from the partitions' clocks
            c.sealed_until = sealed_until_max(&c.sealed_until, &sealed);
        }
        tracing::info!(
            "checkpoint {}: the input had ended; reading {:?} on (every window's instances up to the one covering the last event time, {last}, stay sealed)",
            restored.epoch,
            spec.topic
        );
    }
    for i in finished {
        let p = &mut partitions[i];
        p.status = PartitionStatus::Active;
        tracing::info!(
            "kafka {}/{}: finished by a bounded run; reading on from offset {}",
            spec.topic,
            p.partition.0,
            p.position
        );
    }
    restored
}

/// Per window, the later of two `sealed_until`s (either may be empty: none).
fn sealed_until_max(a: &[Millis], b: &[Millis]) -> Vec<Millis> {
    (0..a.len().max(b.len()))
        .map(|w| {
            let at = |v: &[Millis]| v.get(w).copied().unwrap_or(Millis::MIN);
            at(a).max(at(b))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse, Overrides};
    use hotlist_operators::record::PartitionId;
    use hotlist_operators::snapshot::{CounterSnapshot, MergerSnapshot, PartitionState, SourceSnapshot};

    const WINDOWS: &str = "[[window]]\nname = \"10s\"\nsize = \"10s\"\n[time]\nallowed_lateness = \"30s\"\n";

    fn plan(source: &str) -> JobPlan {
        parse(&format!("[source]\n{source}\n{WINDOWS}"), &Overrides::default()).expect("config")
    }

    fn kafka() -> JobPlan {
        plan("kind = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"")
    }

    /// A checkpoint at the end of a bounded run: every partition finished at `max_ts`, the
    /// global watermark +∞, nothing live.
    fn ended(max_ts: &[i64]) -> Restored {
        let partitions = max_ts
            .iter()
            .enumerate()
            .map(|(p, t)| PartitionState {
                partition: PartitionId(p as u32),
                position: 100 + p as u64,
                max_ts: Millis(*t),
                status: PartitionStatus::Finished,
            })
            .collect();
        let plan = kafka();
        Restored {
            epoch: 9,
            counters: vec![CounterSnapshot {
                windows: plan.window_specs(),
                allowed_lateness: plan.time.allowed_lateness,
                watermark: Millis::MAX,
                key_groups: Vec::new(),
                pane_files: Vec::new(),
                sealed_until: Vec::new(),
                groups_seen: Vec::new(),
            }],
            sketches: Vec::new(),
            merger: MergerSnapshot::default(),
            sources: SourceSnapshot { partitions },
            hot_keys: None,
            replay: None,
            stored_dead_letters: Default::default(),
        }
    }

    fn statuses(r: &Restored) -> Vec<PartitionStatus> {
        r.sources.partitions.iter().map(|p| p.status).collect()
    }

    /// Kafka partitions a bounded run finished go on at their offsets with their clocks; the
    /// global watermark starts afresh and the `10s` instances up to the one covering the last
    /// event time (12.3 s: [10 s, 20 s)) stay sealed; a second end seals on from there.
    #[test]
    fn kafka_partitions_read_on_after_a_bounded_run() {
        let r = continue_finished(ended(&[12_300, 4_000]), &kafka());
        assert_eq!(statuses(&r), [PartitionStatus::Active, PartitionStatus::Active]);
        assert_eq!(r.sources.partitions[0].position, 100);
        assert_eq!(r.sources.partitions[0].max_ts, Millis(12_300));
        assert_eq!(r.counters[0].watermark, Millis::MIN);
        assert_eq!(r.counters[0].sealed_until, vec![Millis(20_000)]);
        let mut again = ended(&[25_000, 4_000]);
        again.counters[0].sealed_until = vec![Millis(20_000)];
        let again = continue_finished(again, &kafka());
        assert_eq!(again.counters[0].sealed_until, vec![Millis(30_000)]);
        assert_eq!(sealed_until_max(&[], &[Millis(5)]), vec![Millis(5)]);
    }

    /// Files do not grow: a finished file job stays finished (a rerun reads nothing).
    #[test]
    fn files_stay_finished() {
        let files = plan("kind = \"file\"\npath = \"Cargo.toml\"");
        let r = continue_finished(ended(&[12_300]), &files);
        assert_eq!(statuses(&r), [PartitionStatus::Finished]);
        assert_eq!(r.counters[0].watermark, Millis::MAX);
    }

    /// A bounded run stopped before its end: the partitions that had ended go on, the global
    /// watermark stays the checkpoint's.
    #[test]
    fn partly_ended_keeps_the_watermark() {
        let mut r = ended(&[12_300, 4_000]);
        r.counters[0].watermark = Millis(2_000);
        r.sources.partitions[1].status = PartitionStatus::Active;
        let r = continue_finished(r, &kafka());
        assert_eq!(statuses(&r), [PartitionStatus::Active, PartitionStatus::Active]);
        assert_eq!(r.counters[0].watermark, Millis(2_000));
    }

    /// An older version's checkpoint has no event time for finished partitions: they stay
    /// finished and the watermark +∞ (the old behaviour), never reopened with a wrong clock.
    #[test]
    fn an_older_checkpoint_stays_finished() {
        let r = continue_finished(ended(&[12_300, i64::MAX]), &kafka());
        assert_eq!(statuses(&r), [PartitionStatus::Finished, PartitionStatus::Finished]);
        assert_eq!(r.counters[0].watermark, Millis::MAX);
        assert!(r.counters[0].sealed_until.is_empty());
    }
}

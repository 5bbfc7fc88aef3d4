//! The job's metrics in the Prometheus text format (`hotlist run --metrics-addr ADDR`).
//!
//! Per partition: records, events, bad and late counts, watermark and watermark lag (wall
//! clock minus watermark), status; job-wide: dropped events, global watermark, revisions,
//! windows closed and sealed, commits and their latency, checkpoint duration and size, live
//! state; per window what its latest committed list is (exact or its error bound, and for
//! `mode = "both"` the sketch check: recall@K and over-counts), sketch instances and `auto`
//! folds; for Kafka partitions the consumer lag and accepted data loss; with a Redis fan-out
//! its pending lists, failed attempts and last written epoch; with `[hot_keys]` the hot and
//! cooling keys of the last closed hot-key window, sampled and dropped events, windows.

use crate::stats::{JobStats, PartitionStats};
use hotlist_operators::time::Millis;
use prometheus::core::Collector;
use prometheus::{Encoder, GaugeVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Renders the job's metrics; `names[p]` names partition `p`.
pub fn render(stats: &JobStats, job: &str, names: &[String]) -> String {
    let registry = Registry::new_custom(None, Some([("job".to_string(), job.to_string())].into())).ok();
    let Some(registry) = registry else {
        return "# cannot build the registry\n".into();
    };
    register_partition_counters(&registry, stats, names);
    register_partition_gauges(&registry, stats);
    register_job_scalars(&registry, stats);
    register_exact_at_seal(&registry, stats);
    register_checkpoint_series(&registry, stats);
    register(&registry, stats.emit_seconds.clone());
    register_list_accuracy(&registry, stats);
    register_fanout_series(&registry, stats);
    register_hot_key_series(&registry, stats);
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut buf) {
        return format!("# error encoding metrics: {e}\n");
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Registers `metric` (a name already taken is skipped: every name here is registered once).
fn register(registry: &Registry, metric: impl Collector + 'static) {
    let _ = registry.register(Box::new(metric));
}

/// A counter (`…_total`) or else a gauge holding `v`.
fn register_scalar(registry: &Registry, name: &str, help: &str, v: i64) {
    if name.ends_with("_total") {
        let c = prometheus::IntCounter::new(name, help).expect("valid metric");
        c.inc_by(v.max(0) as u64);
        register(registry, c);
    } else {
        let g = IntGauge::new(name, help).expect("valid metric");
        g.set(v);
        register(registry, g);
    }
}

/// Records, events, bad and late counts per partition, labelled with the partition's source.
fn register_partition_counters(registry: &Registry, stats: &JobStats, names: &[String]) {
    type Field = fn(&PartitionStats) -> &AtomicU64;
    let per_part: [(&str, &str, Field); 6] = [
        ("hotlist_records_total", "records read per partition", |ps| &ps.records),
        ("hotlist_events_total", "valid events per partition", |ps| &ps.events),
        (
            "hotlist_bad_records_total",
            "bad records per partition (dead-lettered)",
            |ps| &ps.bad,
        ),
        (
            "hotlist_late_events_total",
            "events late for some window, per partition (dead-lettered)",
            |ps| &ps.late,
        ),
        (
            "hotlist_data_loss_total",
            "Kafka: data loss accepted with source.on_data_loss = \"continue\" (re-created topic, retention), per partition",
            |ps| &ps.data_loss,
        ),
        (
            "hotlist_data_loss_messages_total",
            "Kafka: messages known to be lost in those gaps, per partition",
            |ps| &ps.data_loss_messages,
        ),
    ];
    for (name, help, field) in per_part {
        let c = IntCounterVec::new(Opts::new(name, help), &["partition", "source"]).expect("valid metric");
        register(registry, c.clone());
        for (p, ps) in stats.partitions.all().iter().enumerate() {
            c.with_label_values(&[&p.to_string(), names.get(p).map(String::as_str).unwrap_or("")])
                .inc_by(field(ps).load(Relaxed));
        }
    }
}

/// Per partition: watermark and its lag behind the wall clock (once it has one), status, and
/// the Kafka consumer lag (where known).
fn register_partition_gauges(registry: &Registry, stats: &JobStats) {
    let gauge = |name: &str, help: &str| GaugeVec::new(Opts::new(name, help), &["partition"]).expect("valid metric");
    let int_gauge =
        |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), &["partition"]).expect("valid metric");
    let wm = gauge("hotlist_partition_watermark_seconds", "partition watermark");
    let lag = gauge(
        "hotlist_partition_watermark_lag_seconds",
        "wall clock minus partition watermark",
    );
    let status = int_gauge("hotlist_partition_status", "0 active, 1 idle, 2 finished");
    let consumer_lag = int_gauge(
        "hotlist_partition_consumer_lag",
        "Kafka: high watermark minus the next offset to read",
    );
    let now = Millis::now().0 as f64 / 1000.0;
    for (p, ps) in stats.partitions.all().iter().enumerate() {
        let w = ps.watermark.load(Relaxed);
        let label = p.to_string();
        status.with_label_values(&[&label]).set(ps.status.load(Relaxed) as i64);
        if w != i64::MIN && w != i64::MAX {
            wm.with_label_values(&[&label]).set(w as f64 / 1000.0);
            lag.with_label_values(&[&label]).set(now - w as f64 / 1000.0);
        }
        let l = ps.lag.load(Relaxed);
        if l >= 0 {
            consumer_lag.with_label_values(&[&label]).set(l);
        }
    }
    register(registry, wm);
    register(registry, lag);
    register(registry, status);
    register(registry, consumer_lag);
}

/// Job-wide counts and gauges: dropped events, revisions, windows, commits, live state, and
/// the global watermark (once there is one).
fn register_job_scalars(registry: &Registry, stats: &JobStats) {
    let load = |a: &AtomicU64| a.load(Relaxed) as i64;
    let sum = |v: &[AtomicU64]| v.iter().map(|a| a.load(Relaxed)).sum::<u64>() as i64;
    let scalars: [(&str, &str, i64); 13] = [
        (
            "hotlist_events_without_user_total",
            "events a count = \"distinct_users\" window could not count: they have no user (other windows counted them)",
            sum(&stats.without_user),
        ),
        (
            "hotlist_sketch_instances",
            "window instances counting in a sketch (sketch, auto after folding, both)",
            sum(&stats.sketch_instances),
        ),
        (
            "hotlist_auto_folds_total",
            "auto window instances folded from exact counts into a sketch (per worker, summed)",
            sum(&stats.auto_folds),
        ),
        (
            "hotlist_late_dropped_total",
            "events late for every window they belong to",
            load(&stats.late_dropped),
        ),
        (
            "hotlist_sealed_dropped_total",
            "events that reached only sealed windows",
            load(&stats.sealed_dropped),
        ),
        (
            "hotlist_revisions_total",
            "list revisions published",
            load(&stats.revisions),
        ),
        (
            "hotlist_windows_closed_total",
            "window instances closed",
            load(&stats.windows_closed),
        ),
        (
            "hotlist_windows_sealed_total",
            "window instances sealed (final)",
            load(&stats.windows_sealed),
        ),
        ("hotlist_commits_total", "sink transactions", load(&stats.commits)),
        (
            "hotlist_committed_epoch",
            "last committed epoch",
            load(&stats.committed_epoch),
        ),
        (
            "hotlist_live_counters",
            "live (item, pane) counters",
            stats.total_counters() as i64,
        ),
        ("hotlist_live_items", "live items", stats.total_items() as i64),
        (
            "hotlist_state_bytes",
            "approximate heap bytes of the counting state",
            stats.total_state_bytes() as i64,
        ),
    ];
    for (name, help, v) in scalars {
        register_scalar(registry, name, help, v);
    }
    let g = stats.watermark();
    if g != Millis::MIN && g != Millis::MAX {
        let gauge = prometheus::Gauge::new("hotlist_watermark_seconds", "global watermark").expect("valid metric");
        gauge.set(g.0 as f64 / 1000.0);
        register(registry, gauge);
    }
    register(registry, stats.commit_seconds.clone());
}

/// The replays of `exact_at_seal` windows (docs/exact-at-seal.md).
fn register_exact_at_seal(registry: &Registry, stats: &JobStats) {
    let load = |a: &AtomicU64| a.load(Relaxed) as i64;
    let scalars = [
        (
            "hotlist_exact_at_seal_lists_total",
            "exact_at_seal: sealed sketch lists a replay made exact (with a certificate)",
            load(&stats.replays_exact),
        ),
        (
            "hotlist_exact_at_seal_failures_total",
            "exact_at_seal: sealed sketch lists left approximate because their input could not be read again (the log says why)",
            load(&stats.replays_failed),
        ),
        (
            "hotlist_exact_at_seal_pending",
            "exact_at_seal: replays running or queued",
            load(&stats.replays_pending),
        ),
    ];
    for (name, help, v) in scalars {
        register_scalar(registry, name, help, v);
    }
}

/// Per window, what its latest committed list is: exact (1) or not, its error bound, and for a
/// `both` window how the sketch compared (recall@K, largest and mean over-count).
fn register_list_accuracy(registry: &Registry, stats: &JobStats) {
    let vec = |name: &str, help: &str| GaugeVec::new(Opts::new(name, help), &["window"]).expect("valid metric");
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
    if let Ok(latest) = stats.latest.lock() {
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
    let overflow = vec(
        "hotlist_overflow_groups",
        "groups beyond the window's max_groups folded into (other), in its fullest live instance",
    );
    if let Ok(o) = stats.overflow_groups.lock() {
        for (window, n) in o.iter() {
            overflow.with_label_values(&[window]).set(*n as f64);
        }
    }
    for g in [exact, bound, recall, max_over, mean_over, overflow] {
        register(registry, g);
    }
}

/// The Redis fan-out, if the job has one: lists pending, failed attempts, last epoch written.
fn register_fanout_series(registry: &Registry, stats: &JobStats) {
    let f = &stats.fanout;
    if !f.enabled.load(Relaxed) {
        return;
    }
    let load = |a: &AtomicU64| a.load(Relaxed) as i64;
    let series = [
        (
            "hotlist_fanout_pending_lists",
            "window lists waiting to be written to the Redis fan-out (at most one per window)",
            load(&f.pending_lists),
        ),
        (
            "hotlist_fanout_failures_total",
            "failed write attempts to the Redis fan-out",
            load(&f.failures),
        ),
        (
            "hotlist_fanout_committed_epoch",
            "last epoch written to the Redis fan-out",
            load(&f.committed_epoch),
        ),
    ];
    for (name, help, v) in series {
        register_scalar(registry, name, help, v);
    }
}

/// The hot-key detector, if the job runs one: what the last closed window reported, sampled
/// and dropped events, windows closed and open.
fn register_hot_key_series(registry: &Registry, stats: &JobStats) {
    let h = &stats.hot_keys;
    if !h.enabled.load(Relaxed) {
        return;
    }
    let load = |a: &AtomicU64| a.load(Relaxed) as i64;
    let series = [
        (
            "hotlist_hot_keys",
            "keys at or above hot_keys.threshold (state hot) in the last closed hot-key window",
            load(&h.hot),
        ),
        (
            "hotlist_hot_keys_cooling",
            "keys below the threshold but within the hysteresis (state cooling) in the last closed hot-key window",
            load(&h.cooling),
        ),
        (
            "hotlist_hot_key_sampled_total",
            "events the hot-key detector sampled (1 in hot_keys.sample)",
            load(&h.sampled),
        ),
        (
            "hotlist_hot_key_dropped_total",
            "sampled events not counted: late for their partition or their hot-key window already closed",
            load(&h.dropped),
        ),
        (
            "hotlist_hot_key_windows_total",
            "hot-key windows closed and reported",
            load(&h.windows),
        ),
        (
            "hotlist_hot_key_open_windows",
            "hot-key windows open (one count-min sketch each)",
            load(&h.open_windows),
        ),
    ];
    for (name, help, v) in series {
        register_scalar(registry, name, help, v);
    }
}

/// Checkpoints: write durations, the last checkpoint's size, and bytes written vs. linked.
fn register_checkpoint_series(registry: &Registry, stats: &JobStats) {
    register(registry, stats.checkpoint_seconds.clone());
    register(registry, stats.checkpoint_upload_seconds.clone());
    register_scalar(
        registry,
        "hotlist_checkpoint_bytes",
        "size of the last checkpoint's counter snapshots over all workers",
        stats.checkpoint_bytes.iter().map(|b| b.load(Relaxed)).sum::<u64>() as i64,
    );
    register_scalar(
        registry,
        "hotlist_checkpoint_written_bytes_total",
        "bytes checkpoints wrote (panes unchanged since the previous checkpoint are linked, not written)",
        stats.checkpoint_written_bytes.load(Relaxed) as i64,
    );
    register_scalar(
        registry,
        "hotlist_checkpoint_part_bytes_total",
        "bytes of the checkpoints' counter parts, linked panes included",
        stats.checkpoint_total_bytes.load(Relaxed) as i64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::message::PublishedList;
    use hotlist_operators::record::{ListState, SketchCheck};

    fn list(window: &str, exact: bool, error_bound: u64, sketch_check: Option<SketchCheck>) -> PublishedList {
        PublishedList {
            group: Default::default(),
            window: window.into(),
            start: Millis(0),
            end: Millis(10),
            revision: 1,
            state: ListState::Open,
            watermark: Millis(0),
            as_of: Millis(0),
            items: Vec::new(),
            exact,
            error_bound,
            sketch_check,
            certificate: None,
        }
    }

    #[test]
    fn lists_say_what_they_are_and_sketches_are_counted() {
        let stats = JobStats::new(2, 1);
        stats.note_committed(&list("approx", false, 37, None));
        let check = SketchCheck {
            found: 9,
            of: 10,
            max_overcount: 5,
            total_overcount: 20,
        };
        stats.note_committed(&list("checked", true, 0, Some(check)));
        stats.set_worker_sketches(0, 2, 1);
        stats.set_worker_sketches(1, 1, 3);
        let text = render(&stats, "j", &["p0".to_string()]);
        // a sample line: name{labels} value, labels in any order
        let value = |name: &str, window: Option<&str>| {
            text.lines().find_map(|l| {
                let (series, v) = l.rsplit_once(' ')?;
                let (n, labels) = series.split_once('{')?;
                let wanted = window.is_none_or(|w| labels.contains(&format!("window=\"{w}\"")));
                (n == name && wanted && labels.contains("job=\"j\"")).then(|| v.to_string())
            })
        };
        let cases = [
            ("hotlist_list_exact", Some("approx"), "0"),
            ("hotlist_list_error_bound", Some("approx"), "37"),
            ("hotlist_list_exact", Some("checked"), "1"),
            ("hotlist_sketch_recall", Some("checked"), "0.9"),
            ("hotlist_sketch_max_overcount", Some("checked"), "5"),
            ("hotlist_sketch_mean_overcount", Some("checked"), "2"),
            ("hotlist_sketch_instances", None, "3"),
            ("hotlist_auto_folds_total", None, "4"),
        ];
        for (name, window, want) in cases {
            assert_eq!(
                value(name, window).as_deref(),
                Some(want),
                "{name} {window:?} in\n{text}"
            );
        }
        assert_eq!(value("hotlist_sketch_recall", Some("approx")), None);
    }
}

//! The job's metrics in the Prometheus text format (`hotlist run --metrics-addr ADDR`).
//!
//! Per partition: records, events, bad and late counts, watermark and watermark lag (wall
//! clock minus watermark), status; job-wide: dropped events, global watermark, revisions,
//! windows closed and sealed, commits and their latency, checkpoint duration and size, live
//! state; for Kafka partitions the consumer lag.

use crate::stats::JobStats;
use hotlist_operators::time::Millis;
use prometheus::{Encoder, GaugeVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
use std::sync::atomic::Ordering::Relaxed;

/// Renders the job's metrics; `names[p]` names partition `p`, `windows` the windows.
pub fn render(stats: &JobStats, job: &str, names: &[String]) -> String {
    let registry = Registry::new_custom(None, Some([("job".to_string(), job.to_string())].into())).ok();
    let Some(registry) = registry else {
        return "# cannot build the registry\n".into();
    };
    let counter = |name: &str, help: &str, labels: &[&str]| {
        let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
        let _ = registry.register(Box::new(c.clone()));
        c
    };
    let per_part = [
        ("hotlist_records_total", "records read per partition", 0),
        ("hotlist_events_total", "valid events per partition", 1),
        (
            "hotlist_bad_records_total",
            "bad records per partition (dead-lettered)",
            2,
        ),
        (
            "hotlist_late_events_total",
            "events late for some window, per partition (dead-lettered)",
            3,
        ),
    ];
    for (name, help, which) in per_part {
        let c = counter(name, help, &["partition", "source"]);
        for (p, ps) in stats.partitions.iter().enumerate() {
            let v = match which {
                0 => ps.records.load(Relaxed),
                1 => ps.events.load(Relaxed),
                2 => ps.bad.load(Relaxed),
                _ => ps.late.load(Relaxed),
            };
            c.with_label_values(&[&p.to_string(), names.get(p).map(String::as_str).unwrap_or("")])
                .inc_by(v);
        }
    }
    let wm = GaugeVec::new(
        Opts::new("hotlist_partition_watermark_seconds", "partition watermark"),
        &["partition"],
    )
    .expect("valid metric");
    let lag = GaugeVec::new(
        Opts::new(
            "hotlist_partition_watermark_lag_seconds",
            "wall clock minus partition watermark",
        ),
        &["partition"],
    )
    .expect("valid metric");
    let status = IntGaugeVec::new(
        Opts::new("hotlist_partition_status", "0 active, 1 idle, 2 finished"),
        &["partition"],
    )
    .expect("valid metric");
    let now = Millis::now().0 as f64 / 1000.0;
    for (p, ps) in stats.partitions.iter().enumerate() {
        let w = ps.watermark.load(Relaxed);
        let label = p.to_string();
        status.with_label_values(&[&label]).set(ps.status.load(Relaxed) as i64);
        if w != i64::MIN && w != i64::MAX {
            wm.with_label_values(&[&label]).set(w as f64 / 1000.0);
            lag.with_label_values(&[&label]).set(now - w as f64 / 1000.0);
        }
    }
    let consumer_lag = IntGaugeVec::new(
        Opts::new(
            "hotlist_partition_consumer_lag",
            "Kafka: high watermark minus the next offset to read",
        ),
        &["partition"],
    )
    .expect("valid metric");
    for (p, ps) in stats.partitions.iter().enumerate() {
        let l = ps.lag.load(Relaxed);
        if l >= 0 {
            consumer_lag.with_label_values(&[&p.to_string()]).set(l);
        }
    }
    for m in [
        Box::new(wm) as Box<dyn prometheus::core::Collector>,
        Box::new(lag),
        Box::new(status),
        Box::new(consumer_lag),
    ] {
        let _ = registry.register(m);
    }
    let scalar = |name: &str, help: &str, v: i64| {
        if name.ends_with("_total") {
            let c = prometheus::IntCounter::new(name, help).expect("valid metric");
            c.inc_by(v.max(0) as u64);
            let _ = registry.register(Box::new(c));
        } else {
            let g = IntGauge::new(name, help).expect("valid metric");
            g.set(v);
            let _ = registry.register(Box::new(g));
        }
    };
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed) as i64;
    scalar(
        "hotlist_late_dropped_total",
        "events late for every window they belong to",
        load(&stats.late_dropped),
    );
    scalar(
        "hotlist_sealed_dropped_total",
        "events that reached only sealed windows",
        load(&stats.sealed_dropped),
    );
    scalar(
        "hotlist_revisions_total",
        "list revisions published",
        load(&stats.revisions),
    );
    scalar(
        "hotlist_windows_closed_total",
        "window instances closed",
        load(&stats.windows_closed),
    );
    scalar(
        "hotlist_windows_sealed_total",
        "window instances sealed (final)",
        load(&stats.windows_sealed),
    );
    scalar("hotlist_commits_total", "sink transactions", load(&stats.commits));
    scalar(
        "hotlist_committed_epoch",
        "last committed epoch",
        load(&stats.committed_epoch),
    );
    scalar(
        "hotlist_live_counters",
        "live (item, pane) counters",
        stats.total_counters() as i64,
    );
    scalar("hotlist_live_items", "live items", stats.total_items() as i64);
    scalar(
        "hotlist_state_bytes",
        "approximate heap bytes of the counting state",
        stats.total_state_bytes() as i64,
    );
    let g = stats.watermark();
    if g != Millis::MIN && g != Millis::MAX {
        let gauge = prometheus::Gauge::new("hotlist_watermark_seconds", "global watermark").expect("valid metric");
        gauge.set(g.0 as f64 / 1000.0);
        let _ = registry.register(Box::new(gauge));
    }
    let _ = registry.register(Box::new(stats.commit_seconds.clone()));
    let _ = registry.register(Box::new(stats.checkpoint_seconds.clone()));
    scalar(
        "hotlist_checkpoint_bytes",
        "size of the last checkpoint's counter snapshots over all workers",
        stats.checkpoint_bytes.iter().map(|b| b.load(Relaxed)).sum::<u64>() as i64,
    );
    scalar(
        "hotlist_checkpoint_written_bytes_total",
        "bytes checkpoints wrote (panes unchanged since the previous checkpoint are linked, not written)",
        load(&stats.checkpoint_written_bytes),
    );
    scalar(
        "hotlist_checkpoint_part_bytes_total",
        "bytes of the checkpoints' counter parts, linked panes included",
        load(&stats.checkpoint_total_bytes),
    );
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut buf) {
        return format!("# error encoding metrics: {e}\n");
    }
    String::from_utf8_lossy(&buf).into_owned()
}

//! What a finished run did: the figures `run` returns and the summary `hotlist run` prints.

use crate::config::{JobPlan, SinkPlan};
use crate::stats::JobStats;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// What a finished run did.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// Records read.
    pub records_in: u64,
    /// Valid events.
    pub events_in: u64,
    /// Bad records.
    pub bad: u64,
    /// Blank lines (skipped, not dead-lettered).
    pub blank: u64,
    /// Records the UDF filter dropped (counted, not dead-lettered).
    pub filtered: u64,
    /// Events late for some window.
    pub late: u64,
    /// Events late for all their windows.
    pub late_dropped: u64,
    /// Events dropped for sealed windows.
    pub sealed_dropped: u64,
    /// Revisions published.
    pub revisions: u64,
    /// Instances sealed.
    pub windows_sealed: u64,
    /// Sink transactions.
    pub commits: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Peak live (item, pane) counters.
    pub peak_counters: u64,
    /// Final global watermark.
    pub watermark: hotlist_operators::time::Millis,
    /// Whether the run was stopped (Ctrl-C) rather than reaching the end of its input.
    pub stopped: bool,
}

impl RunSummary {
    /// The figures of `stats` at the end of a run that took `elapsed`.
    pub fn from_stats(stats: &JobStats, elapsed: Duration, stopped: bool) -> RunSummary {
        RunSummary {
            records_in: stats.source.records_in.load(Relaxed),
            events_in: stats.source.events_in.load(Relaxed),
            bad: stats.source.bad.load(Relaxed),
            blank: stats.source.blank.load(Relaxed),
            filtered: stats.source.filtered.load(Relaxed),
            late: stats.source.late.load(Relaxed),
            late_dropped: stats.source.late_dropped.load(Relaxed),
            sealed_dropped: stats.counting.sealed_dropped.load(Relaxed),
            revisions: stats.merge.revisions.load(Relaxed),
            windows_sealed: stats.merge.windows_sealed.load(Relaxed),
            commits: stats.sink.commits.load(Relaxed),
            elapsed,
            peak_counters: stats.counting.peak_counters.load(Relaxed),
            watermark: stats.merge.watermark(),
            stopped,
        }
    }
}

/// The end-of-run summary printed by `hotlist run`.
pub fn summary_text(plan: &JobPlan, s: &RunSummary) -> String {
    let secs = s.elapsed.as_secs_f64().max(1e-9);
    let mut out =
        format!(
        "{} after {:.1}s: {} records, {} events ({:.0}/s), {} bad, {} late ({} counted nowhere), {} sealed-dropped, \
         {} blank lines{}; {} revisions, {} windows sealed, {} commits; watermark {}\n",
        if s.stopped { "stopped" } else { "finished" },
        secs,
        s.records_in,
        s.events_in,
        s.events_in as f64 / secs,
        s.bad,
        s.late,
        s.late_dropped,
        s.sealed_dropped,
        s.blank,
        if s.filtered > 0 { format!(", {} filtered", s.filtered) } else { String::new() },
        s.revisions,
        s.windows_sealed,
        s.commits,
        s.watermark,
    );
    out.push_str(&format!(
        "results are in {} (job {:?}); try: hotlist query --config <config> --window {}\n",
        match &plan.sink {
            SinkPlan::Sqlite(p) => p.display().to_string(),
            SinkPlan::Postgres { schema, .. } => format!("PostgreSQL (schema {schema})"),
            SinkPlan::Redis(t) => format!("Redis (prefix {})", t.prefix),
            SinkPlan::Memory(_) => "memory".into(),
        },
        plan.job_id,
        plan.windows.first().map(|w| w.spec.name.as_str()).unwrap_or("1m"),
    ));
    out
}

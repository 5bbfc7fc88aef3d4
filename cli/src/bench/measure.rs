//! Measuring one run: wall time, events, the counting state's peak and the process's RSS, and
//! the results table.

use anyhow::Result;
use hotlist_dataflow::config::JobPlan;
use hotlist_dataflow::run::{run_with_stats, Progress};
use hotlist_dataflow::stats::JobStats;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// One measured run.
#[derive(Clone, Debug)]
pub struct BenchResult {
    /// "memory" or "json".
    pub name: &'static str,
    /// Events counted.
    pub events: u64,
    /// Wall seconds.
    pub seconds: f64,
    /// Workers.
    pub workers: usize,
    /// Peak live counters.
    pub peak_counters: u64,
    /// Counter heap bytes per live counter at that peak.
    pub bytes_per_counter: f64,
    /// Peak RSS of the process so far (bytes).
    pub peak_rss: u64,
    /// RSS growth during the run per peak counter.
    pub rss_per_counter: f64,
    /// Input bytes (json run).
    pub input_bytes: u64,
    /// The largest counting state seen (bytes, exact and sketch state of all workers).
    pub peak_state_bytes: u64,
}

impl BenchResult {
    /// Events per second per worker.
    pub fn per_worker(&self) -> f64 {
        self.events as f64 / self.seconds / self.workers as f64
    }
}

/// Runs one measured job while sampling the state gauges.
pub(super) fn measure(name: &'static str, plan: &JobPlan, input_bytes: u64) -> Result<BenchResult> {
    measure_with_stats(name, plan, input_bytes).map(|r| r.0)
}

/// `measure`, returning the run's stats too.
pub(super) fn measure_with_stats(
    name: &'static str,
    plan: &JobPlan,
    input_bytes: u64,
) -> Result<(BenchResult, Arc<JobStats>)> {
    let rss_before = rss_bytes().0;
    let stats = Arc::new(JobStats::new(plan.total_workers(), plan.source.partitions() as usize));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stats = stats.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut best, mut peak_bytes) = ((0u64, 0u64), 0u64);
            while !done.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let c = stats.counting.total_counters();
                peak_bytes = peak_bytes.max(stats.counting.total_state_bytes());
                if c > best.0 {
                    best = (c, stats.counting.total_state_bytes());
                }
            }
            (best, peak_bytes)
        })
    };
    let summary = run_with_stats(plan, Progress::Never, Arc::new(AtomicBool::new(false)), stats.clone())?;
    done.store(true, Relaxed);
    let ((peak_counters, bytes_at_peak), peak_state_bytes) = sampler.join().unwrap_or(((0, 0), 0));
    let peak_rss = rss_bytes().1;
    Ok((
        BenchResult {
            name,
            events: summary.events_in,
            seconds: summary.elapsed.as_secs_f64(),
            workers: plan.workers,
            peak_counters,
            bytes_per_counter: bytes_at_peak as f64 / peak_counters.max(1) as f64,
            peak_rss,
            rss_per_counter: peak_rss.saturating_sub(rss_before) as f64 / peak_counters.max(1) as f64,
            input_bytes,
            peak_state_bytes,
        },
        stats,
    ))
}

/// CPU seconds (user + system) the process used so far, from /proc/self/stat (0 where
/// unavailable; ticks of 1/100 s, the kernel's USER_HZ on Linux).
pub(super) fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // the fields after the command name, which is in parentheses and may hold spaces
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |n: usize| {
        rest.split_whitespace()
            .nth(n)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field(11) + field(12)) as f64 / 100.0
}

/// (current RSS, peak RSS) in bytes, from /proc/self/status (0 where unavailable).
pub fn rss_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The results as a Markdown table.
pub(super) fn print_results(results: &[BenchResult]) {
    println!();
    println!("| run | events | seconds | events/s | events/s per worker | peak live counters | bytes/counter (state) | bytes/counter (RSS growth) | peak RSS |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        // (a sketch-only run has no live counters: nothing to divide by)
        let per_counter = |v: f64| match r.peak_counters {
            0 => "—".to_string(),
            _ => format!("{v:.1}"),
        };
        println!(
            "| {} | {} | {:.2} | {:.2} M | {:.2} M | {} | {} | {} | {:.0} MB |",
            r.name,
            r.events,
            r.seconds,
            r.events as f64 / r.seconds / 1e6,
            r.per_worker() / 1e6,
            r.peak_counters,
            per_counter(r.bytes_per_counter),
            per_counter(r.rss_per_counter),
            r.peak_rss as f64 / 1e6
        );
        if r.input_bytes > 0 {
            println!(
                "|   ({:.0} MB of JSON, {:.0} MB/s) | | | | | | | | |",
                r.input_bytes as f64 / 1e6,
                r.input_bytes as f64 / 1e6 / r.seconds
            );
        }
    }
}

//! The in-memory and JSON-lines runs, and what they report besides events/s: emits,
//! checkpoints, sketch lists.

use super::measure::{measure, measure_with_stats, BenchResult};
use super::{plan, spec, BenchArgs};
use anyhow::{Context, Result};
use hotlist_dataflow::config::{FileSplit, JobPlan, SinkPlan, SourcePlan};
use hotlist_dataflow::stats::JobStats;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The in-memory run (generator → counts → memory store), checkpointed with `--checkpoint`.
pub(super) fn bench_memory(args: &BenchArgs) -> Result<BenchResult> {
    let mem_spec = spec(args, args.events);
    // Build the generator tables before timing: they are set-up, not per-event work.
    let _tables = hotlist_dataflow::source::generator::shared_tables(&mem_spec)?; // held: the run's readers reuse them
    let mut mem_plan = plan(
        args,
        SourcePlan::Generator {
            spec: mem_spec,
            pace: false,
        },
    );
    let ckpt_dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    if args.checkpoint {
        mem_plan.checkpoint = Some(hotlist_dataflow::config::CheckpointPlan {
            dir: ckpt_dir.path().to_path_buf(),
            every: hotlist_operators::time::Span::from_millis(mem_plan.epoch_interval.as_millis() * 10),
            retain: 1_000,
            remote: None,
        });
    }
    let (mem, stats) = measure_with_stats("memory", &mem_plan, 0)?;
    report_emits(&stats, &mem);
    if args.checkpoint {
        report_checkpoints(&mem_plan, ckpt_dir.path(), &stats)?;
    }
    if args.mode != "exact" {
        report_sketches(&mem_plan, &mem);
    }
    Ok(mem)
}

/// The exact counter's emitting `advance`s (`hotlist_emit_seconds`): how many, mean, p50 and
/// max per emit, and their share of the run's wall time.
fn report_emits(stats: &JobStats, run: &BenchResult) {
    let mut samples = stats
        .counting
        .emit_samples
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default();
    if samples.is_empty() {
        return;
    }
    samples.sort_by(f64::total_cmp);
    let total: f64 = samples.iter().sum();
    let ms = |s: f64| s * 1000.0;
    let sum = |f: fn(&(AtomicU64, AtomicU64)) -> &AtomicU64| {
        stats.counting.emits.iter().map(|e| f(e).load(Relaxed)).sum::<u64>()
    };
    println!(
        "emits (exact counter, per worker and emitting advance): {} of them, mean {:.2} ms, p50 {:.2} ms, \
         max {:.2} ms; {:.2} s in all, {:.0}% of the run's wall time; lists {} incremental, {} recounted",
        samples.len(),
        ms(total / samples.len() as f64),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1]),
        total,
        total * 100.0 / run.seconds / run.workers as f64,
        sum(|e| &e.0),
        sum(|e| &e.1),
    );
}

/// What the sketch windows' final lists say (`--mode sketch`, `auto`, `both`): the counting
/// state at its peak, each list's exactness and error bound, and for `both` the sketch's
/// recall@K and over-counts against the exact list.
fn report_sketches(plan: &JobPlan, run: &BenchResult) {
    let SinkPlan::Memory(store) = &plan.sink else { return };
    println!(
        "counting state: peak {:.1} MB over all workers (counter heap accounting; peak RSS {:.0} MB)",
        run.peak_state_bytes as f64 / 1e6,
        run.peak_rss as f64 / 1e6
    );
    for l in store
        .lists()
        .iter()
        .filter(|l| l.state == hotlist_operators::record::ListState::Final)
    {
        let check = l.sketch_check.map_or(String::new(), |c| {
            format!(
                "; sketch recall@{} {:.3} ({} of {}), max over-count {}, mean {:.1}",
                c.of,
                c.recall(),
                c.found,
                c.of,
                c.max_overcount,
                c.mean_overcount()
            )
        });
        println!(
            "  {} [{} .. {}): {} items, exact {}, error bound {}{check}",
            l.window,
            l.start,
            l.end,
            l.items.len(),
            l.exact,
            l.error_bound
        );
    }
}

/// The JSON-lines run: the same kind of events written to files first (not timed), then read,
/// parsed and counted by the file source.
pub(super) fn bench_json(args: &BenchArgs) -> Result<BenchResult> {
    let tmp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    let written = crate::generate::write_partitions(&spec(args, args.json_events), &dir, "bench")?;
    let (paths, bytes) = (written.paths, written.bytes);
    let json_plan = plan(args, SourcePlan::Files(FileSplit::whole(paths)));
    measure("json", &json_plan, bytes)
}

/// Checkpoint figures of a checkpointed run: write time and size, and the time to load and
/// restore the largest checkpoint (what a restart costs before it reads again).
fn report_checkpoints(plan: &JobPlan, dir: &std::path::Path, stats: &JobStats) -> Result<()> {
    let h = &stats.checkpoints.checkpoint_seconds;
    let (count, sum) = (h.get_sample_count(), h.get_sample_sum());
    let (bytes, counters) = stats
        .checkpoints
        .largest_checkpoint
        .lock()
        .map(|l| *l)
        .unwrap_or((0, 0));
    let job_dir = dir.join(&plan.job_id);
    let largest = hotlist_dataflow::checkpoint::list(dir, &plan.job_id)
        .into_iter()
        .max_by_key(|e| {
            std::fs::read_dir(job_dir.join(format!("{e:020}")))
                .map(|rd| rd.filter_map(|f| f.ok()?.metadata().ok()).map(|m| m.len()).sum::<u64>())
                .unwrap_or(0)
        })
        .context("no checkpoint was written")?;
    let started = std::time::Instant::now();
    let layout = hotlist_dataflow::checkpoint::JobLayout::of(plan);
    let restored = hotlist_dataflow::checkpoint::load(
        &hotlist_dataflow::checkpoint::checkpoint_dir(dir, &plan.job_id, largest),
        largest,
        &layout,
    )?;
    let loaded = started.elapsed();
    let counter = hotlist_operators::counter::WindowedCounter::restore(
        plan.window_specs(),
        plan.time.allowed_lateness,
        0,
        1,
        &restored.counters,
    )
    .map_err(|e| anyhow::anyhow!("restore: {e}"))?;
    let restore = started.elapsed();
    let written = stats
        .checkpoints
        .checkpoint_written_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    let total = stats
        .checkpoints
        .checkpoint_total_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "checkpoints: {count} counter snapshots written, mean {:.0} ms each (off the worker thread), {:.0}% of \
         their bytes written (the rest: unchanged panes linked); largest {:.1} MB for {} live counters \
         ({:.1} bytes/counter); loading it took {:.0} ms, restoring {} counters onto 1 worker {:.0} ms in all",
        sum / count.max(1) as f64 * 1000.0,
        written as f64 * 100.0 / total.max(1) as f64,
        bytes as f64 / 1e6,
        counters,
        bytes as f64 / counters.max(1) as f64,
        loaded.as_secs_f64() * 1000.0,
        counter.stats().live_counters,
        restore.as_secs_f64() * 1000.0,
    );
    Ok(())
}

//! `--hot-keys`: the hot-key detector's cost.

use super::measure::{cpu_seconds, measure_with_stats};
use super::{plan, spec, BenchArgs};
use anyhow::Result;
use hotlist_dataflow::config::SourcePlan;
use hotlist_operators::hot_keys::HotKeySpec;
use hotlist_operators::sketch::CmsShape;
use hotlist_operators::time::Span;
use std::sync::atomic::Ordering::Relaxed;

/// The hot-key detector's cost: the in-memory run without it, and with it at sample 1 and 1
/// in 100; events/s are the median of 3 runs each (in 3 rounds over the three), the cost
/// relative to the run without.
pub(super) fn bench_hot_keys(args: &BenchArgs) -> Result<()> {
    let mem_spec = spec(args, args.events);
    let _tables = hotlist_dataflow::source::generator::shared_tables(&mem_spec)?; // held: the runs reuse them
    let source = SourcePlan::Generator {
        spec: mem_spec,
        pace: false,
    };
    let shape = CmsShape::from_error(0.001, 0.001).map_err(|e| anyhow::anyhow!("{e}"))?;
    let detector = |sample| HotKeySpec {
        sample,
        window: Span::from_millis(10_000),
        threshold: 1000.0,
        hysteresis: 0.2,
        shape,
        candidates: 64,
    };
    println!(
        "| hot-key detector | events/s (median of 3) | per worker | cost | CPU ns/event (median) | CPU cost | hot keys in the last window |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let configs = [
        ("off", None),
        ("sample = 1", Some(detector(1))),
        ("sample = 100", Some(detector(100))),
    ];
    // rounds interleave the configurations, so a load that comes and goes on a shared machine
    // hits them alike
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    // CPU time per event: what the detector costs, unlike wall time, hardly depends on what else
    // runs on the machine
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut hot_now = vec![0u64; configs.len()];
    for _ in 0..3 {
        for (i, (_, hot)) in configs.iter().enumerate() {
            let mut p = plan(args, source.clone());
            p.hot_keys = *hot;
            let before = cpu_seconds();
            let (r, stats) = measure_with_stats("memory", &p, 0)?;
            rates[i].push(r.events as f64 / r.seconds);
            cpu[i].push((cpu_seconds() - before) * 1e9 / r.events.max(1) as f64);
            hot_now[i] = stats.hot_keys.hot.load(Relaxed);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = median(&mut rates[0]);
    let base_cpu = median(&mut cpu[0]);
    for (i, (name, hot)) in configs.iter().enumerate() {
        let m = median(&mut rates[i]);
        let c = median(&mut cpu[i]);
        println!(
            "| {name} | {:.2} M | {:.2} M | {:+.1}% | {c:.0} | {:+.1}% | {} |",
            m / 1e6,
            m / 1e6 / args.workers as f64,
            (m / base - 1.0) * 100.0,
            (c / base_cpu - 1.0) * 100.0,
            if hot.is_some() {
                hot_now[i].to_string()
            } else {
                "–".into()
            }
        );
    }
    Ok(())
}

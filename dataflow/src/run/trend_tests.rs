//! Trend windows through the whole dataflow (file source, routing by item, per-worker lists
//! merged in trend order, the in-memory store): the final lists equal a model's, and are the
//! same for 1, 2 and 4 workers.

use super::{run, Progress};
use crate::config::{parse, Overrides, SinkPlan};
use hotlist_operators::record::ListState;
use hotlist_sinks::MemoryStore;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// (item, count, history) per final list, by instance start.
type Lists = BTreeMap<i64, Vec<(String, u64, Vec<u64>)>>;

const SIZE: i64 = 10_000;
const W: i64 = 3;
const MIN_COUNT: u64 = 2;
const K: usize = 5;

/// Events of 40 instances of 10 s: a steady background, and items that surge in some instances
/// (a small linear congruential generator: the same stream on every run), mildly out of order.
fn events() -> Vec<(String, i64)> {
    let mut x: u64 = 7;
    let mut next = |n: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let mut out = Vec::new();
    for i in 0..40i64 {
        for _ in 0..60 {
            let item = format!("bg{}", next(12));
            out.push((item, i * SIZE + next(SIZE as u64) as i64));
        }
        let surging = format!("s{}", next(6));
        for _ in 0..(5 + next(20)) {
            out.push((surging.clone(), i * SIZE + next(SIZE as u64) as i64));
        }
    }
    // mildly out of order: in order by the second, shuffled within one (the job allows 2 s)
    out.sort_by_key(|(_, ts)| ts / 1000);
    out
}

fn model(events: &[(String, i64)]) -> Lists {
    let mut counts: BTreeMap<i64, BTreeMap<String, u64>> = BTreeMap::new();
    for (item, ts) in events {
        *counts
            .entry(ts.div_euclid(SIZE) * SIZE)
            .or_default()
            .entry(item.clone())
            .or_insert(0) += 1;
    }
    let before = |start: i64, item: &str| -> Vec<u64> {
        (1..=W)
            .rev()
            .map(|j| {
                counts
                    .get(&(start - j * SIZE))
                    .and_then(|m| m.get(item))
                    .copied()
                    .unwrap_or(0)
            })
            .collect()
    };
    let mut lists = Lists::new();
    for (&start, items) in &counts {
        let mut ranked: Vec<(String, u64, Vec<u64>)> = items
            .iter()
            .map(|(i, c)| (i.clone(), *c, before(start, i)))
            .filter(|(_, c, h)| *c >= MIN_COUNT && (W as u64) * c > h.iter().sum::<u64>())
            .collect();
        // z² = n² / (W (S + W)): compare n_a² (S_b + W) with n_b² (S_a + W), exactly
        ranked.sort_by(|a, b| {
            let (sa, sb) = (a.2.iter().sum::<u64>() as i128, b.2.iter().sum::<u64>() as i128);
            let (na, nb) = (W as i128 * a.1 as i128 - sa, W as i128 * b.1 as i128 - sb);
            (nb * nb * (sa + W as i128))
                .cmp(&(na * na * (sb + W as i128)))
                .then(a.0.cmp(&b.0))
        });
        ranked.truncate(K);
        lists.insert(start, ranked);
    }
    lists
}

fn run_job(dir: &std::path::Path, workers: usize) -> Lists {
    let config = format!(
        "[job]\nid = \"t\"\n[source]\nkind = \"file\"\npath = \"{}\"\n\
         [time]\nmax_out_of_orderness = \"2s\"\nallowed_lateness = \"0s\"\n\
         [[window]]\nname = \"t\"\nsize = \"10s\"\nk = {K}\nrank_by = \"trend\"\nbaseline = {W}\nmin_count = {MIN_COUNT}\n",
        dir.join("*.jsonl").display()
    );
    let o = Overrides {
        workers: Some(workers),
        ..Default::default()
    };
    let mut plan = parse(&config, &o).expect("a valid config");
    let store = MemoryStore::new();
    plan.sink = SinkPlan::Memory(store.clone());
    run(&plan, Progress::Never, Arc::new(AtomicBool::new(false))).expect("the job runs");
    let mut lists = Lists::new();
    for l in store.lists().into_iter().filter(|l| l.state == ListState::Final) {
        let items = l
            .items
            .iter()
            .map(|r| {
                let history = r.trend.as_ref().map(|t| t.history.clone()).expect("trend facts");
                (r.item_id.to_string(), r.count, history)
            })
            .collect();
        lists.insert(l.start.0, items);
    }
    lists
}

#[test]
fn final_trend_lists_equal_the_model_on_any_worker_count() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let events = events();
    // two files (partitions), each over the whole time range
    let mut text = [String::new(), String::new()];
    for (n, (item, ts)) in events.iter().enumerate() {
        let _ = writeln!(text[n % 2], "{{\"item_id\":\"{item}\",\"ts\":{ts}}}");
    }
    for (n, t) in text.iter().enumerate() {
        std::fs::write(dir.path().join(format!("p{n}.jsonl")), t).expect("writes");
    }
    let want = model(&events);
    assert!(
        want.values().filter(|l| !l.is_empty()).count() > 30,
        "the stream has trends"
    );
    for workers in [1, 2, 4] {
        let got = run_job(dir.path(), workers);
        let got: Lists = got.into_iter().filter(|(_, l)| !l.is_empty()).collect();
        let want: Lists = want.clone().into_iter().filter(|(_, l)| !l.is_empty()).collect();
        assert_eq!(got, want, "{workers} workers");
    }
}

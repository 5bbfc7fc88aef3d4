//! Oracle tests: the job's sealed output equals a brute-force model of docs/time.md's rules, for
//! random inputs (several partitions, disorder, late events, bad lines, tumbling and hopping
//! windows, tiny K with ties) and for 1, 2 and 4 workers, with epochs forced small so windows
//! close, get corrected and seal mid-stream.

use hotlist_dataflow::config::{JobPlan, SinkPlan, SourcePlan, TimePlan};
use hotlist_dataflow::run::{run, Progress};
use hotlist_operators::record::{DeadReason, ListState};
use hotlist_operators::time::Span;
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::MemoryStore;
use hotlist_tests::inputs::{random_partitions, write_partitions, Shape};
use hotlist_tests::model::{self, ModelWindow};
use proptest::prelude::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const WINDOW_POOL: &[(&str, u64, u64)] = &[
    ("t10", 10, 10),
    ("t25", 25, 25),
    ("h30", 30, 10),
    ("h20", 20, 5),
    ("t7", 7, 7),
];

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    shape: Shape,
    windows: Vec<(usize, usize)>, // (pool index, k)
    ooo: u64,
    lateness: u64,
    batch: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        1usize..4,
        0usize..120,
        2usize..6,
        1i64..4,
        0i64..40,
        proptest::sample::subsequence((0..WINDOW_POOL.len()).collect::<Vec<_>>(), 1..=3),
        proptest::collection::vec(1usize..4, 3),
        0u64..15,
        0u64..30,
        1usize..40,
        -100i64..100,
    )
        .prop_map(
            |(seed, partitions, lines, items, step, disorder, ws, ks, ooo, lateness, batch, start)| Case {
                seed,
                shape: Shape {
                    partitions,
                    lines,
                    items,
                    step,
                    disorder,
                    late_p: 0.1,
                    late_by: 80,
                    bad_p: 0.05,
                    start,
                },
                windows: ws.into_iter().zip(ks).collect(),
                ooo,
                lateness,
                batch,
            },
        )
}

fn windows(c: &Case) -> Vec<WindowSpec> {
    c.windows
        .iter()
        .map(|&(i, k)| {
            let (name, size, slide) = WINDOW_POOL[i];
            WindowSpec {
                name: name.into(),
                size: Span::from_millis(size),
                slide: Span::from_millis(slide),
                k,
            }
        })
        .collect()
}

type Output = (model::Lists, model::Dead);

fn run_job(c: &Case, paths: Vec<std::path::PathBuf>, workers: usize) -> Result<Output, TestCaseError> {
    let store = MemoryStore::new();
    let plan = JobPlan {
        job_id: "oracle".into(),
        source: SourcePlan::Files(paths),
        max_record_bytes: hotlist_dataflow::config::DEFAULT_MAX_RECORD_BYTES,
        windows: windows(c),
        time: TimePlan {
            max_out_of_orderness: Span::from_millis(c.ooo),
            allowed_lateness: Span::from_millis(c.lateness),
            idle_timeout: Span::from_millis(3_600_000),
            emit_interval: Span::from_millis(1),
            max_future: Span::from_millis(3_600_000),
        },
        sink: SinkPlan::Memory(store.clone()),
        fanout: None,
        checkpoint: None,
        from_checkpoint: None,
        from_scratch: false,
        workers,
        epoch_interval: Span::from_millis(1),
        max_epochs_in_flight: 2,
        batch_size: c.batch,
        cluster: None,
        hot_keys: None,
    };
    let summary = run(&plan, Progress::Never, Arc::new(AtomicBool::new(false)))
        .map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
    prop_assert_eq!(summary.sealed_dropped, 0);
    let mut lists = model::Lists::new();
    for l in store.lists() {
        prop_assert_eq!(l.state, ListState::Final, "bounded input seals every window: {:?}", l);
        let items = l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
        lists.insert((l.window.clone(), l.start.0, l.end.0), items);
    }
    let mut dead: model::Dead = store
        .dead_letters()
        .into_iter()
        .map(|d| {
            (
                d.letter.partition.0,
                d.letter.position,
                d.letter.reason.as_str().to_string(),
            )
        })
        .collect();
    dead.sort();
    prop_assert!(store
        .dead_letters()
        .iter()
        .all(|d| d.letter.reason != DeadReason::Sealed));
    Ok((lists, dead))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Sealed lists and dead letters equal the brute-force model for 1, 2 and 4 workers.
    #[test]
    fn sealed_results_equal_the_model(c in case()) {
        let parts = random_partitions(c.seed, &c.shape);
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let paths = write_partitions(dir.path(), &parts).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mw: Vec<ModelWindow> = windows(&c)
            .iter()
            .map(|w| ModelWindow::new(&w.name, w.size.as_i64(), w.slide.as_i64(), w.k))
            .collect();
        let want = model::run(&parts, &mw, c.ooo as i64, c.lateness as i64);
        for workers in [1, 2, 4] {
            let got = run_job(&c, paths.clone(), workers)?;
            prop_assert_eq!(&got.0, &want.0, "lists with {} workers", workers);
            prop_assert_eq!(&got.1, &want.1, "dead letters with {} workers", workers);
        }
    }
}

/// The model itself on a hand-checked case: per-partition lateness, not global.
#[test]
fn model_judges_lateness_per_partition() {
    let p0: Vec<Vec<u8>> = vec![
        br#"{"item_id":"a","ts":100}"#.to_vec(),
        br#"{"item_id":"a","ts":5}"#.to_vec(),
    ];
    let p1: Vec<Vec<u8>> = vec![br#"{"item_id":"b","ts":5}"#.to_vec()];
    let w = vec![ModelWindow::new("t", 10, 10, 5)];
    let (lists, dead) = model::run(&[p0, p1], &w, 0, 0);
    // partition 0's second event is late (its own watermark is 100); partition 1's is not
    assert_eq!(dead, vec![(0, 2, "late".to_string())]);
    assert_eq!(lists[&("t".to_string(), 0, 10)], vec![("b".to_string(), 1)]);
}

//! Oracle tests: the job's sealed output equals a brute-force model of docs/time.md's rules, for
//! random inputs (several partitions, disorder, late events, bad lines, tumbling and hopping
//! windows, tiny K with ties) and for 1, 2 and 4 workers, with epochs forced small so windows
//! close, get corrected and seal mid-stream.

use hotlist_dataflow::config::{JobPlan, SinkPlan, SourcePlan, TimePlan, WindowPlan};
use hotlist_dataflow::run::{run, Progress};
use hotlist_operators::counting::{Algorithm, Counting, SketchSpec};
use hotlist_operators::message::PublishedList;
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
                rank: Default::default(),
                key: Default::default(),
                name: name.into(),
                size: Span::from_millis(size),
                slide: Span::from_millis(slide),
                k,
            }
        })
        .collect()
}

type Output = (model::Lists, model::Dead);

/// Runs the job over `paths` with `workers` workers; returns its sealed lists and dead letters.
fn run_plan(
    c: &Case,
    paths: Vec<std::path::PathBuf>,
    workers: usize,
    counting: Vec<Counting>,
) -> Result<(Vec<PublishedList>, model::Dead), TestCaseError> {
    run_windows(c, windows(c), paths, workers, counting)
}

/// [`run_plan`] with the given windows (per-group and distinct-user ones read `/dims` and
/// `/user`).
fn run_windows(
    c: &Case,
    windows: Vec<WindowSpec>,
    paths: Vec<std::path::PathBuf>,
    workers: usize,
    counting: Vec<Counting>,
) -> Result<(Vec<PublishedList>, model::Dead), TestCaseError> {
    let store = MemoryStore::new();
    let mut input = hotlist_dataflow::config::InputFormat {
        user: Some(hotlist_operators::format::Pointer::parse("/user").map_err(TestCaseError::fail)?),
        ..Default::default()
    };
    let dims = hotlist_operators::counter::job_dims(&windows);
    let needs_user = hotlist_operators::counter::needs_user(&windows);
    (input.format, input.sites) = input
        .compile(&dims, needs_user)
        .map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
    input.user_required = windows.iter().all(|w| w.key.distinct_users);
    let plan = JobPlan {
        job_id: "oracle".into(),
        source: SourcePlan::Files(hotlist_dataflow::config::FileSplit::whole(paths)),
        max_record_bytes: hotlist_dataflow::config::DEFAULT_MAX_RECORD_BYTES,
        input,
        windows: WindowPlan::zip(windows, counting),
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
        max_epoch_records: hotlist_dataflow::config::DEFAULT_MAX_EPOCH_RECORDS,
        batch_size: c.batch,
        max_dead_letters_per_block: hotlist_dataflow::config::DEFAULT_MAX_DEAD_LETTERS_PER_BLOCK,
        cluster: None,
        hot_keys: None,
        exact_at_seal: Default::default(),
        udfs: Vec::new(),
        udf_runner: Default::default(),
        accept_udf_change: false,
    };
    let summary = run(&plan, Progress::Never, Arc::new(AtomicBool::new(false)))
        .map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
    prop_assert_eq!(summary.sealed_dropped, 0);
    let lists = store.lists();
    for l in &lists {
        prop_assert_eq!(l.state, ListState::Final, "bounded input seals every window: {:?}", l);
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

fn run_job(c: &Case, paths: Vec<std::path::PathBuf>, workers: usize) -> Result<Output, TestCaseError> {
    let exact = vec![Counting::Exact; c.windows.len()];
    let (published, dead) = run_plan(c, paths, workers, exact)?;
    let mut lists = model::Lists::new();
    for l in published {
        let items = l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
        lists.insert((l.window.clone(), l.start.0, l.end.0), items);
    }
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

/// Per-group and distinct-user windows: random key shapes over the pool's windows.
fn grouped_windows(c: &Case, shapes: &[(u8, u32)]) -> Vec<WindowSpec> {
    windows(c)
        .into_iter()
        .zip(shapes)
        .map(|(mut w, (shape, max_groups))| {
            w.key.max_groups = *max_groups;
            let by = |d: &[&str]| d.iter().map(|s| s.to_string()).collect();
            match shape {
                0 => {}
                1 => w.key.by = by(&["country"]),
                2 => w.key.by = by(&["country", "device"]),
                3 => w.key.distinct_users = true,
                _ => {
                    w.key.by = by(&["device"]);
                    w.key.distinct_users = true;
                }
            }
            w
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Per group, the sealed lists equal the model (events or distinct users; with 1–4
    /// `max_groups` for up to 6 groups, so `(other)` is exercised), and so do the dead letters,
    /// for 1, 2 and 4 workers. (Half the cases count events by country in every window: their
    /// events travel as their keys, `EventText::keyed`.)
    #[test]
    fn sealed_group_lists_equal_the_model(
        c in case(),
        shapes in prop_oneof![
            proptest::collection::vec((0u8..5, 1u32..5), 3),
            proptest::collection::vec((Just(1u8), 1u32..5), 3),
        ],
    ) {
        let parts = hotlist_tests::inputs::random_grouped_partitions(c.seed, &c.shape);
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let paths = write_partitions(dir.path(), &parts).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let ws = grouped_windows(&c, &shapes);
        let mw: Vec<ModelWindow> = ws
            .iter()
            .map(|w| {
                let mut m = ModelWindow::new(&w.name, w.size.as_i64(), w.slide.as_i64(), w.k);
                m.by = w.key.by.clone();
                m.distinct_users = w.key.distinct_users;
                m.max_groups = w.key.max_groups as usize;
                m
            })
            .collect();
        let want = model::run_grouped(&parts, &mw, c.ooo as i64, c.lateness as i64);
        for workers in [1, 2, 4] {
            let exact = vec![Counting::Exact; ws.len()];
            let (published, dead) = run_windows(&c, ws.clone(), paths.clone(), workers, exact)?;
            let mut lists = model::GroupLists::new();
            // (a group that went to (other) after it was published is sealed empty)
            for l in published.into_iter().filter(|l| !l.items.is_empty()) {
                let items = l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
                lists.insert((l.window.clone(), l.start.0, l.end.0, l.group.to_string()), items);
            }
            prop_assert_eq!(&lists, &want.0, "lists with {} workers", workers);
            prop_assert_eq!(&dead, &want.1, "dead letters with {} workers", workers);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    /// Per-group windows counted by a sketch (`sketch` or `auto`, tiny tables) on the whole
    /// dataflow, for 1, 2 and 4 workers: the model's groups (and `(other)`) and dead letters;
    /// every count at least true and at most true + its group's bound (≤ ⌈ε·N_g⌉, N_g the
    /// group's events); exact lists equal to the model's.
    #[test]
    fn sealed_group_sketch_lists_hold_their_bounds(
        c in case(),
        max_groups in proptest::collection::vec(1u32..5, 3),
        modes in proptest::collection::vec((0u8..2, proptest::sample::select(vec![0.02, 0.1, 0.3]), 0usize..4), 3),
        max_items in 1u64..12,
    ) {
        let parts = hotlist_tests::inputs::random_grouped_partitions(c.seed, &c.shape);
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let paths = write_partitions(dir.path(), &parts).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let shapes: Vec<(u8, u32)> = max_groups.iter().enumerate().map(|(i, m)| (1 + (i % 2) as u8, *m)).collect();
        let ws = grouped_windows(&c, &shapes);
        let counting: Vec<Counting> = ws
            .iter()
            .zip(&modes)
            .map(|(w, (mode, eps, spare))| sketch_counting(*mode, *eps, w.k, *spare, max_items))
            .collect();
        let model_of = |k: Option<usize>| -> Vec<ModelWindow> {
            ws.iter()
                .map(|w| {
                    let mut m = ModelWindow::new(&w.name, w.size.as_i64(), w.slide.as_i64(), k.unwrap_or(w.k));
                    m.by = w.key.by.clone();
                    m.max_groups = w.key.max_groups as usize;
                    m
                })
                .collect()
        };
        let (want_top, want_dead) = model::run_grouped(&parts, &model_of(None), c.ooo as i64, c.lateness as i64);
        let (truth, _) = model::run_grouped(&parts, &model_of(Some(usize::MAX)), c.ooo as i64, c.lateness as i64);
        for workers in [1, 2, 4] {
            let (published, dead) = run_windows(&c, ws.clone(), paths.clone(), workers, counting.clone())?;
            prop_assert_eq!(&dead, &want_dead, "dead letters with {} workers", workers);
            let lists: Vec<&PublishedList> = published.iter().filter(|l| !l.items.is_empty()).collect();
            let keys: std::collections::BTreeSet<_> =
                lists.iter().map(|l| (l.window.clone(), l.start.0, l.end.0, l.group.to_string())).collect();
            let want_keys: std::collections::BTreeSet<_> = want_top.keys().cloned().collect();
            prop_assert_eq!(keys, want_keys, "groups with {} workers", workers);
            for l in lists {
                let key = (l.window.clone(), l.start.0, l.end.0, l.group.to_string());
                let w = ws.iter().position(|w| w.name == l.window).expect("a configured window");
                check_sketch_list(l, &counting[w], &want_top[&key], &truth[&key])?;
            }
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

/// A window's counting for the sketch oracle: `mode` 0 sketch, 1 auto, 2 both; a small table
/// (ε from the list) so that items collide; `spare` extra candidates over k. A count's bound
/// holds with probability ≥ 1 − δ (each row over-counts past (e/w)·N with probability ≤ 1/e, by
/// Markov): δ is 10⁻⁶ (14 rows) so that the hard assertions below fail on a broken bound, not on
/// the ≈ 5 % of items a 3-row table (δ 0.1) over-counts past it by chance.
fn sketch_counting(mode: u8, epsilon: f64, k: usize, spare: usize, max_items: u64) -> Counting {
    let sketch = SketchSpec {
        algorithm: Algorithm::Cms,
        epsilon,
        delta: 1e-6,
        candidates: k + spare,
        conservative: false,
        exact_at_seal: false,
    };
    match mode {
        0 => Counting::Sketch(sketch),
        1 => Counting::Auto { sketch, max_items },
        _ => Counting::Both(sketch),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Sketch windows against the model (docs/architecture.md, "Sketch windows"), for 1, 2 and
    /// 4 workers: dead letters are the model's; a `both` window publishes the model's exact
    /// list; a `sketch` or `auto` list has every count at least the true count and at most
    /// true + its error_bound (≤ ⌈ε·N⌉ with N the instance's counted events), is exact with
    /// bound 0 when it says so, and holds the true top-K set whenever the K-th and (K+1)-th
    /// true counts differ by more than 2·error_bound.
    #[test]
    fn sealed_sketch_lists_hold_their_bounds(
        c in case(),
        modes in proptest::collection::vec((0u8..3, proptest::sample::select(vec![0.02, 0.1, 0.3]), 0usize..4), 3),
        max_items in 1u64..12,
    ) {
        let parts = random_partitions(c.seed, &c.shape);
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let paths = write_partitions(dir.path(), &parts).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let ws = windows(&c);
        let counting: Vec<Counting> = ws
            .iter()
            .zip(&modes)
            .map(|(w, (mode, eps, spare))| sketch_counting(*mode, *eps, w.k, *spare, max_items))
            .collect();
        let exact_model: Vec<ModelWindow> = ws
            .iter()
            .map(|w| ModelWindow::new(&w.name, w.size.as_i64(), w.slide.as_i64(), w.k))
            .collect();
        let all_model: Vec<ModelWindow> = ws
            .iter()
            .map(|w| ModelWindow::new(&w.name, w.size.as_i64(), w.slide.as_i64(), usize::MAX))
            .collect();
        let (want_top, want_dead) = model::run(&parts, &exact_model, c.ooo as i64, c.lateness as i64);
        let (truth, _) = model::run(&parts, &all_model, c.ooo as i64, c.lateness as i64);
        for workers in [1, 2, 4] {
            let (lists, dead) = run_plan(&c, paths.clone(), workers, counting.clone())?;
            prop_assert_eq!(&dead, &want_dead, "dead letters with {} workers", workers);
            let keys: std::collections::BTreeSet<_> = lists.iter().map(|l| (l.window.clone(), l.start.0, l.end.0)).collect();
            let want_keys: std::collections::BTreeSet<_> = want_top.keys().cloned().collect();
            prop_assert_eq!(keys, want_keys, "instances with {} workers", workers);
            for l in &lists {
                let key = (l.window.clone(), l.start.0, l.end.0);
                let w = ws.iter().position(|w| w.name == l.window).expect("a configured window");
                check_sketch_list(l, &counting[w], &want_top[&key], &truth[&key])?;
            }
        }
    }
}

/// One sealed list of a sketch-counted window against the model's top-K and all true counts.
fn check_sketch_list(
    l: &PublishedList,
    counting: &Counting,
    top: &[(String, u64)],
    truth: &[(String, u64)],
) -> Result<(), TestCaseError> {
    let got: Vec<(String, u64)> = l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
    if let Counting::Both(_) = counting {
        prop_assert!(l.exact && l.error_bound == 0);
        prop_assert_eq!(&got, top);
        prop_assert!(l
            .sketch_check
            .is_some_and(|s| s.of as usize == top.len() && s.found <= s.of));
        return Ok(());
    }
    let true_of: std::collections::HashMap<&str, u64> = truth.iter().map(|(i, c)| (i.as_str(), *c)).collect();
    let n: u64 = truth.iter().map(|(_, c)| c).sum();
    let eps = counting.sketch().map_or(0.0, |s| s.epsilon);
    prop_assert!(
        l.error_bound <= (eps * n as f64).ceil() as u64,
        "bound {} for N = {}",
        l.error_bound,
        n
    );
    if l.exact {
        prop_assert_eq!(l.error_bound, 0);
        prop_assert_eq!(&got, top);
    }
    for (item, count) in &got {
        let t = true_of.get(item.as_str()).copied().unwrap_or(0);
        prop_assert!(
            *count >= t && *count <= t + l.error_bound,
            "{} counted {} of {} (bound {})",
            item,
            count,
            t,
            l.error_bound
        );
    }
    let k = got.len().max(top.len());
    if truth.len() > k && k > 0 && truth[k - 1].1 > truth[k].1 + 2 * l.error_bound {
        let mut want: Vec<&str> = truth[..k].iter().map(|(i, _)| i.as_str()).collect();
        let mut have: Vec<&str> = got.iter().map(|(i, _)| i.as_str()).collect();
        want.sort_unstable();
        have.sort_unstable();
        prop_assert_eq!(have, want, "the true top-{} is clear of the bound", k);
    }
    Ok(())
}

/// An `exact_at_seal` window's counting: mode 0 sketch, 1 auto; a tiny table (ε up to 0.5)
/// and few candidates, so that estimates are far off and first thresholds often fail.
fn replayed_counting(mode: u8, epsilon: f64, k: usize, spare: usize, max_items: u64) -> Counting {
    let sketch = SketchSpec {
        algorithm: Algorithm::Cms,
        epsilon,
        delta: 0.5,
        candidates: k + spare,
        conservative: false,
        exact_at_seal: true,
    };
    match mode {
        0 => Counting::Sketch(sketch),
        _ => Counting::Auto { sketch, max_items },
    }
}

/// Runs `c` with `exact_at_seal` windows on 1, 2 and 4 workers and checks every sealed list
/// against the model: the model's exact top-K, `exact` with bound 0, and a certificate on every
/// list a sketch counted (an `auto` instance that never folded is exact without a replay).
/// Returns the most passes any replay took.
fn check_replayed(c: &Case, modes: &[(u8, f64, usize)], max_items: u64) -> Result<u32, TestCaseError> {
    let parts = random_partitions(c.seed, &c.shape);
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let paths = write_partitions(dir.path(), &parts).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let ws = windows(c);
    let counting: Vec<Counting> = ws
        .iter()
        .zip(modes)
        .map(|(w, (mode, eps, spare))| replayed_counting(*mode, *eps, w.k, *spare, max_items))
        .collect();
    let mw: Vec<ModelWindow> = ws
        .iter()
        .map(|w| ModelWindow::new(&w.name, w.size.as_i64(), w.slide.as_i64(), w.k))
        .collect();
    let (want, want_dead) = model::run(&parts, &mw, c.ooo as i64, c.lateness as i64);
    let mut most_passes = 0;
    for workers in [1, 2, 4] {
        let (lists, dead) = run_plan(c, paths.clone(), workers, counting.clone())?;
        prop_assert_eq!(&dead, &want_dead, "dead letters with {} workers", workers);
        let mut got = model::Lists::new();
        for l in &lists {
            prop_assert!(l.exact && l.error_bound == 0, "{:?} with {} workers", l, workers);
            let auto_unfolded = l.certificate.is_none() && matches!(counting[0], Counting::Auto { .. });
            let w = ws.iter().position(|w| w.name == l.window).expect("a configured window");
            if let Some(cert) = l.certificate {
                prop_assert!(cert.passes >= 1 && cert.threshold >= 1);
                prop_assert!(cert.counted >= l.items.len() as u64);
                most_passes = most_passes.max(cert.passes);
            } else {
                prop_assert!(
                    auto_unfolded || matches!(counting[w], Counting::Auto { .. }),
                    "a sketch window's sealed list has no certificate: {:?}",
                    l
                );
            }
            let items = l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
            got.insert((l.window.clone(), l.start.0, l.end.0), items);
        }
        prop_assert_eq!(&got, &want, "sealed lists with {} workers", workers);
    }
    Ok(most_passes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// `exact_at_seal` (docs/exact-at-seal.md): sketch and auto windows with tiny sketches,
    /// random disorder, late events and bad lines, 1, 2 and 4 workers: every sealed list is the
    /// model's exact top-K, and the dead letters are the model's.
    #[test]
    fn replayed_sketch_lists_equal_the_model(
        c in case(),
        modes in proptest::collection::vec((0u8..2, proptest::sample::select(vec![0.05, 0.2, 0.5]), 0usize..3), 3),
        max_items in 1u64..12,
    ) {
        check_replayed(&c, &modes, max_items)?;
    }
}

/// `exact_at_seal` per-group and distinct-user windows (docs/exact-at-seal.md, "Per-group
/// windows"): tiny tables per group, 1–4 `max_groups` (so `(other)` is replayed too), random
/// key shapes (by country, by country and device, distinct users, distinct users by device), random disorder, late
/// events and bad lines, 1, 2 and 4 workers: every sealed group list is the model's exact
/// top-K, `exact` with bound 0, and the dead letters are the model's; and replays did happen
/// (certified lists over the cases).
#[test]
fn replayed_group_lists_equal_the_model() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let certified = std::cell::Cell::new(0usize);
    let strategy = (
        case(),
        proptest::collection::vec((1u8..5, 1u32..5), 3),
        proptest::collection::vec((0u8..2, proptest::sample::select(vec![0.05, 0.2, 0.5]), 0usize..3), 3),
        1u64..12,
    );
    let outcome = runner.run(&strategy, |(c, shapes, modes, max_items)| {
        certified.set(certified.get() + check_replayed_groups(&c, &shapes, &modes, max_items)?);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    assert!(certified.get() > 0, "no list was certified by a replay");
}

/// Runs `c` with per-group and distinct-user `exact_at_seal` windows on 1, 2 and 4 workers and checks every
/// sealed group list against the model; returns how many lists carried a certificate.
fn check_replayed_groups(
    c: &Case,
    shapes: &[(u8, u32)],
    modes: &[(u8, f64, usize)],
    max_items: u64,
) -> Result<usize, TestCaseError> {
    let parts = hotlist_tests::inputs::random_grouped_partitions(c.seed, &c.shape);
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let paths = write_partitions(dir.path(), &parts).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let ws = grouped_windows(c, shapes);
    let counting: Vec<Counting> = ws
        .iter()
        .zip(modes)
        .map(|(w, (mode, eps, spare))| replayed_counting(*mode, *eps, w.k, *spare, max_items))
        .collect();
    let mw: Vec<ModelWindow> = ws
        .iter()
        .map(|w| {
            let mut m = ModelWindow::new(&w.name, w.size.as_i64(), w.slide.as_i64(), w.k);
            m.by = w.key.by.clone();
            m.distinct_users = w.key.distinct_users;
            m.max_groups = w.key.max_groups as usize;
            m
        })
        .collect();
    let (want, want_dead) = model::run_grouped(&parts, &mw, c.ooo as i64, c.lateness as i64);
    let mut certified = 0;
    for workers in [1, 2, 4] {
        let (published, dead) = run_windows(c, ws.clone(), paths.clone(), workers, counting.clone())?;
        prop_assert_eq!(&dead, &want_dead, "dead letters with {} workers", workers);
        let mut got = model::GroupLists::new();
        for l in published.iter().filter(|l| !l.items.is_empty()) {
            prop_assert!(l.exact && l.error_bound == 0, "{:?} with {} workers", l, workers);
            if let Some(cert) = l.certificate {
                prop_assert!(cert.passes >= 1 && cert.threshold >= 1);
                prop_assert!(cert.counted >= l.items.len() as u64);
                certified += 1;
            }
            let items = l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
            got.insert((l.window.clone(), l.start.0, l.end.0, l.group.to_string()), items);
        }
        prop_assert_eq!(&got, &want, "sealed group lists with {} workers", workers);
    }
    Ok(certified)
}

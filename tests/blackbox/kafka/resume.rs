//! Reading on after a bounded run of the same job id.

use super::harness::{
    dead_by_partition, produce_more, results, run_to_the_end, setup, spawn_with, stop_gracefully, Metrics,
};
use hotlist_tests::model;

/// A run after a `--bounded` run of the same job id reads on from the bounded run's offsets
/// (it used to restore the partitions as finished and read nothing). Data set A (0-10 s) and a
/// bounded run of it; then data set B (from 12 s) produced; then a live run, stopped once it
/// has read B, and a bounded run that seals (`live`), or a bounded run at once. Either way the
/// results are the model of A, its end, then B: per window, B counts in the instances after
/// those the end sealed, and its events for those are `sealed` dead letters.
fn read_on_after_a_bounded_run(live: bool) {
    let s = setup("events", true);
    run_to_the_end(s.dir.path(), 2);
    assert_eq!(results(s.dir.path()), s.want, "the bounded run of A");
    // B from 12 s on: inside the `30s-hop` instances A's end sealed, after the `10s` ones
    let (a, b) = produce_more(&s, &["source.start=12000"], "files-b");
    let want = model::run_after_end(&a, &b, &model::crash_windows(), 2_000, 30_000);
    assert!(
        want.1.iter().any(|d| d.2 == "sealed"),
        "some events of B are for instances the end of A sealed"
    );
    assert!(
        want.0
            .keys()
            .any(|(w, start, _)| w == "10s" && (10_000..30_000).contains(start)),
        "B counts in `10s` instances inside a sealed `30s-hop` one"
    );
    if live {
        let metrics = Metrics::new();
        let mut child = spawn_with(
            s.dir.path(),
            2,
            &["--metrics-addr", &metrics.addr, "--set", "source.bounded=false"],
        );
        metrics.wait_for_records(3000, &mut child, "B, after the bounded run of A");
        let err = stop_gracefully(child);
        assert!(
            err.contains("finished by a bounded run; reading on from offset"),
            "{err}"
        );
    }
    run_to_the_end(s.dir.path(), 1);
    assert_eq!(
        results(s.dir.path()).0,
        want.0,
        "sealed lists = the model of A, its end, then B"
    );
    assert_eq!(results(s.dir.path()).1, dead_by_partition(&want.1), "dead letters");
}

#[test]
fn a_live_run_reads_on_after_a_bounded_run() {
    read_on_after_a_bounded_run(true);
}

#[test]
fn a_bounded_run_after_a_bounded_run_reads_only_what_is_new() {
    read_on_after_a_bounded_run(false);
}

//! The metrics say what the lists are.

use super::*;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, SketchCheck};
use hotlist_operators::time::Millis;

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
    stats.sink.note_committed(&list("approx", false, 37, None));
    let check = SketchCheck {
        found: 9,
        of: 10,
        max_overcount: 5,
        total_overcount: 20,
    };
    stats.sink.note_committed(&list("checked", true, 0, Some(check)));
    stats.counting.set_worker_sketches(0, 2, 1);
    stats.counting.set_worker_sketches(1, 1, 3);
    let text = stats.render_metrics("j", &["p0".to_string()]);
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

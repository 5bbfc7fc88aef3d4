//! A sealed instance's input read again for `explain` and `verify`: its recorded ranges through
//! the live per-record path, each event with the key of the group it counts in under the
//! window's `by`.

use hotlist_dataflow::config::JobPlan;
use hotlist_dataflow::source::file::Scanned;
use hotlist_dataflow::source::replay::read_ranges;
use hotlist_operators::counter::Shapes;
use hotlist_operators::record::TimedEvent;
use hotlist_operators::replay::PartitionRange;
use std::path::Path;

/// Reads `ranges` of window `wid`'s instance, handing `f` each event with its group key (`""`
/// for a global window; `None` when it counts in no list: a distinct-user window's event
/// without a user), until `f` returns `false`. `Err` says which partition could not be read
/// again and why.
pub(crate) fn read_instance(
    plan: &JobPlan,
    wid: usize,
    ranges: &[PartitionRange],
    f: &mut dyn FnMut(&TimedEvent, Option<&str>) -> bool,
) -> Result<(), String> {
    let specs = plan.window_specs();
    let shapes = Shapes::new(&specs);
    let shape = shapes.of_window(wid);
    let (by, distinct) = (!specs[wid].key.by.is_empty(), specs[wid].key.distinct_users);
    let mut key = String::new();
    let mut scanned = Scanned::default();
    read_ranges(plan, ranges, &mut scanned, &mut |e| {
        let counts = if by {
            shapes.group(shape, e, &mut key)
        } else {
            key.clear();
            !distinct || e.text.user().is_some()
        };
        f(e, counts.then_some(key.as_str()))
    })
}

/// Why the job's input cannot be generated again in another process, if so: a generator whose
/// `source.start` is `"now"` (the default) starts at the wall clock of the run that loaded it,
/// so another run generates other events.
pub(crate) fn not_rereadable(config: &Path) -> Option<String> {
    let t: toml::Table = std::fs::read_to_string(config).ok()?.parse().ok()?;
    let source = t.get("source")?.as_table()?;
    let start = source.get("start");
    let now = start.is_none_or(|s| s.as_str() == Some("now"));
    (source.get("kind")?.as_str() == Some("generator") && now).then(|| {
        "the generator's source.start is \"now\" (the wall clock of the run that generated the \
         events), so they cannot be generated again: set source.start to a time"
            .to_string()
    })
}

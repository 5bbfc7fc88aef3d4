//! A sealed instance's input read again for `explain` and `verify`: its recorded ranges through
//! the live per-record path, each event with the key of the group it counts in under the
//! window's `by`.

use hotlist_dataflow::config::JobPlan;
use hotlist_dataflow::source::file::Scanned;
use hotlist_dataflow::source::replay::read_ranges;
use hotlist_operators::counter::Shapes;
use hotlist_operators::record::TimedEvent;
use hotlist_operators::replay::PartitionRange;

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
            !distinct || e.extra.as_ref().is_some_and(|x| x.user.is_some())
        };
        f(e, counts.then_some(key.as_str()))
    })
}

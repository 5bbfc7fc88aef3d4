//! Which latest lists are still kept where only latest lists live (the Redis store and
//! fan-out, the run's map of latest committed lists): a group's latest list is dropped once
//! its instance ended before the window's newest instance started. A window's `by` groups
//! change with the data (rotating dim values), so without this rule every group ever seen
//! would be kept forever; with it, a window keeps the groups of the instances that overlap its
//! newest one (two instances of a tumbling window, `size / slide + 1` of a hopping one), each
//! at most `max_groups` plus `(other)`. The primary SQL stores keep every instance (history).

use hotlist_operators::time::Millis;

/// Whether a list of the instance ending at `end` is superseded in a window whose newest
/// instance starts at `newest_start`: it ended before that instance began.
pub fn superseded(end: Millis, newest_start: Millis) -> bool {
    end < newest_start
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Of a tumbling window, the newest instance and the one before it are kept; of a hopping
    /// one, every instance overlapping the newest.
    #[test]
    fn instances_overlapping_the_newest_are_kept() {
        let size = 60_000;
        let newest = Millis(10 * size);
        // tumbling: the previous instance ends where the newest starts
        assert!(!superseded(Millis(10 * size), newest));
        assert!(superseded(Millis(9 * size), newest));
        // hopping (slide 15 s): an instance starting 45 s before the newest still overlaps it
        assert!(!superseded(Millis(10 * size - 45_000 + size), newest));
        assert!(superseded(Millis(10 * size - 61_000 + size), newest));
    }
}

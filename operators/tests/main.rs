//! Properties of the algorithms, through the crate's public API: snapshots restore to the same
//! results and never panic on bytes from outside, sketches reproduce a published table, and
//! windows hold at the ends of the event time range.
//!
//! One binary: the tests of every module run on the threads of one process; they share no
//! files, ports or services.

// a deterministic Zipf stream (also included by examples/sketch_compare.rs)
#[path = "support/zipf.rs"]
mod zipf;

// events at years 0000 and 9999: counted in every covering instance or dead-lettered
mod event_time_extremes;
// sketch snapshots restore to the same sketch; mutated bytes never panic
mod sketch_restore;
// the seed test: a published count-min table, reproduced, and HeavyKeeper beside it
mod sketch_seed;
// mutated checkpoint snapshots: an error or a working restore, never a panic
mod snapshot_fuzz;
// a run snapshotted at any epoch and restored onto other worker counts = an uninterrupted run
mod snapshot_restore;

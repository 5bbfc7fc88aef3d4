//! What the crash tests share: the checkpointed job `crash` on random input files, its runs,
//! and its results in the SQLite store.

use hotlist_tests::inputs::{checkpointed_job_shape, write_partitions, Shape};
use hotlist_tests::model;
use std::path::Path;

pub(super) fn job_config() -> String {
    hotlist_tests::checkpointed_job_config("crash")
}

pub(super) fn shape() -> Shape {
    checkpointed_job_shape(12000)
}

pub(super) fn spawn(dir: &Path, workers: usize) -> std::process::Child {
    hotlist_tests::spawn_run(dir, workers)
}

/// The store's committed epoch of the test's job in `dir`.
pub(super) fn committed(dir: &Path) -> Option<u64> {
    hotlist_tests::sqlite_committed_epoch(&dir.join("out.db"), "crash")
}

/// The job's committed checkpoint directories in `dir`, oldest first.
pub(super) fn committed_checkpoints(dir: &Path) -> Vec<std::path::PathBuf> {
    hotlist_tests::committed_checkpoints(&dir.join("ckpt/crash"), committed(dir))
}

pub(super) fn results(db: &Path) -> (model::Lists, model::Dead) {
    (
        hotlist_tests::sqlite_sealed_lists(db, "crash"),
        hotlist_tests::sqlite_dead_letters(db, "crash").0,
    )
}

pub(super) fn setup(parts: &[Vec<Vec<u8>>]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    write_partitions(&dir.path().join("in"), parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), job_config()).expect("config");
    dir
}

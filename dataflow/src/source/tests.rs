//! Resuming partitions from a checkpoint: at the checkpoint's position, or not at all (a run
//! that cannot resume a partition fails, naming the partition and the position).

use super::state::SourceState;
use super::{file::FileReader, Reader};
use crate::checkpoint::Restored;
use crate::config::{parse, Overrides};
use crate::run_ctx::RunCtx;
use crate::stats::JobStats;
use hotlist_operators::record::{PartitionId, PartitionStatus};
use hotlist_operators::snapshot::{MergerSnapshot, PartitionState, SourceSnapshot};
use hotlist_operators::time::Millis;
use std::path::Path;
use std::sync::{Arc, Mutex};

fn two_lines(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("in.jsonl");
    std::fs::write(&path, "{\"item_id\":\"a\",\"ts\":1}\n{\"item_id\":\"b\",\"ts\":2}\n").expect("write input");
    path
}

fn at(position: u64) -> PartitionState {
    PartitionState {
        partition: PartitionId(0),
        position,
        max_ts: Millis(1),
        status: PartitionStatus::Active,
    }
}

fn restoring(position: u64) -> RunCtx {
    RunCtx {
        epoch_base: 8,
        restore: Some(Arc::new(Restored {
            epoch: 7,
            counters: Vec::new(),
            sketches: Vec::new(),
            merger: MergerSnapshot::default(),
            sources: SourceSnapshot {
                partitions: vec![at(position)],
            },
            hot_keys: None,
            replay: None,
            stored_dead_letters: Default::default(),
        })),
        checkpoint: None,
        job: "t".into(),
        fatal: Arc::new(Mutex::new(None)),
        partition_count: None,
        writes_sink: true,
    }
}

/// The source of a two-line file, resumed by `ctx`.
fn source_of(dir: &Path, ctx: &RunCtx) -> SourceState {
    let path = two_lines(dir);
    let config = format!("[source]\nkind = \"file\"\npath = {:?}\n", path.display().to_string());
    let plan = parse(&config, &Overrides::default()).expect("config");
    let reader = Reader::File(FileReader::open(&path, plan.max_record_bytes).expect("open"));
    SourceState::new(
        &plan,
        vec![(PartitionId(0), reader)],
        (0, 1),
        Arc::new(JobStats::new(1, 1)),
        ctx,
    )
}

/// A partition resumed at position 1 of a two-line file reads only the second line (position 2).
#[test]
fn a_partition_resumes_at_its_checkpointed_position() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = restoring(1);
    let mut source = source_of(dir.path(), &ctx);
    let mut batch = source.new_batch();
    assert!(source.read_batch(&mut batch));
    let got: Vec<(&str, u64)> = batch.events.iter().map(|e| (e.item.as_str(), e.position)).collect();
    assert_eq!(got, [("b", 2)]);
    assert!(!ctx.failed());
}

/// A file shorter than its checkpointed position fails the run through `RunCtx::fail` (as a
/// counter that cannot be restored does), naming the checkpoint, the partition and the
/// position, and the source is left with nothing to read.
#[test]
fn a_partition_that_cannot_resume_fails_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = restoring(5);
    let state = source_of(dir.path(), &ctx);
    assert!(!state.has_partitions());
    let fatal = ctx.fatal.lock().expect("lock").clone().expect("the run failed");
    assert!(
        fatal.starts_with("cannot restore checkpoint 7: partition 0 cannot resume at position 5: ")
            && fatal.contains("fewer than the checkpoint's 5"),
        "{fatal}"
    );
}

//! Resuming partitions from a checkpoint: at the checkpoint's position, or not at all (a run
//! that cannot resume a partition fails, naming the partition and the position).

use super::state::{EpochEnd, SourceState};
use super::{file::FileReader, Reader};
use crate::checkpoint::Restored;
use crate::config::{parse, Overrides};
use crate::run_ctx::RunCtx;
use crate::stats::JobStats;
use hotlist_operators::message::Control;
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
    let reader = Reader::File(Box::new(FileReader::open(&path, plan.max_record_bytes).expect("open")));
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
    let got: Vec<(&str, u64)> = batch.all_events().map(|e| (e.item(), e.position)).collect();
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

/// An epoch closes once it holds `run.max_epoch_records` records, before its timer (10 s here):
/// a 10-line file read 3 records per batch closes its first epoch after 6 records (two
/// batches); the next epoch starts the count again and holds the other 4 until the end of input.
#[test]
fn a_full_epoch_closes_before_its_timer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("in.jsonl");
    let lines: String = (0..10)
        .map(|i| format!("{{\"item_id\":\"i{i}\",\"ts\":{i}}}\n"))
        .collect();
    std::fs::write(&path, lines).expect("write input");
    let config = format!(
        "[run]\nepoch_interval = \"10s\"\nmax_epoch_records = 5\nbatch_size = 3\n[source]\nkind = \"file\"\npath = {:?}\n",
        path.display().to_string()
    );
    let plan = parse(&config, &Overrides::default()).expect("config");
    let reader = Reader::File(Box::new(FileReader::open(&path, plan.max_record_bytes).expect("open")));
    let ctx = RunCtx {
        restore: None,
        ..restoring(0)
    };
    let mut source = SourceState::new(
        &plan,
        vec![(PartitionId(0), reader)],
        (0, 1),
        Arc::new(JobStats::new(1, 1)),
        &ctx,
    );
    let mut ends = Vec::new();
    for _ in 0..6 {
        let mut batch = source.new_batch();
        source.read_batch(&mut batch);
        let end = source.epoch_end(false);
        ends.push((batch.all_events().count(), end));
        if let Some(e) = end {
            let controls = source.close_epoch(e, false);
            assert!(
                controls.iter().any(|c| matches!(c, Control::Clock(_))),
                "every epoch carries its source's clock"
            );
            source.next_epoch();
        }
    }
    assert_eq!(
        ends,
        vec![
            (3, None),
            (3, Some(EpochEnd::Full)),
            (3, None),
            (1, None), // 4 records: not full; the end of the file shows at the next read
            (0, Some(EpochEnd::Last)),
            (0, Some(EpochEnd::Last)),
        ]
    );
    let parsed = |v: &str| {
        parse(
            &format!("[run]\nmax_epoch_records = {v}\n[source]\nkind = \"generator\"\n"),
            &Overrides::default(),
        )
    };
    let err = format!("{:#}", parsed("0").expect_err("zero"));
    assert!(err.contains("run.max_epoch_records: must be positive"), "{err}");
    assert_eq!(parsed("7").expect("config").max_epoch_records, 7);
}

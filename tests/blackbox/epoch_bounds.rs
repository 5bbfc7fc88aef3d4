//! `run.max_epoch_records` on the binary: an epoch closes once it holds that many records, before
//! its timer, and where epochs end changes nothing that is sealed.

use hotlist_tests::model::{self, ModelWindow};

/// 1,000 lines in event-time disorder, with late events and bad lines, read 4 records per batch:
/// with `max_epoch_records = 10` and an epoch timer of an hour an epoch closes at the batch that
/// takes it to 10 records or more (12), so the job runs 83 epochs (its committed epoch says so);
/// with the default (65,536) one. Both store the model's sealed lists (a tumbling and a hopping
/// window) and dead letters.
#[test]
fn epochs_bounded_by_records_seal_the_models_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let lines: Vec<Vec<u8>> = (0u64..1000)
        .map(|i| {
            if i % 97 == 13 {
                return b"{\"item_id\":".to_vec(); // bad
            }
            // a step of 20 ms, jittered back by up to 600 ms: some events are late
            let ts = (i * 20).saturating_sub((i * 7919) % 13 * 50);
            format!("{{\"item_id\":\"i{}\",\"ts\":{ts}}}", (i * i) % 23).into_bytes()
        })
        .collect();
    let mut text = lines.join(&b'\n');
    text.push(b'\n');
    std::fs::write(dir.path().join("in/a.jsonl"), text).expect("write input");
    let config = |job: &str, extra: &str| {
        format!(
            "[job]\nid = \"{job}\"\n[run]\nepoch_interval = \"1h\"\nbatch_size = 4\n{extra}\n\
             [source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n\
             [time]\nmax_out_of_orderness = \"200ms\"\nallowed_lateness = \"100ms\"\n\
             [[window]]\nname = \"1s\"\nsize = \"1s\"\nk = 5\n\
             [[window]]\nname = \"3s\"\nsize = \"3s\"\nslide = \"1s\"\nk = 4\n\
             [sink]\npath = \"{job}.db\"\n"
        )
    };
    let (want_lists, want_dead) = model::run(
        std::slice::from_ref(&lines),
        &[
            ModelWindow::new("1s", 1000, 1000, 5),
            ModelWindow::new("3s", 3000, 1000, 4),
        ],
        200,
        100,
    );
    assert!(
        want_dead.iter().any(|d| d.2 == "late") && want_dead.iter().any(|d| d.2 == "bad"),
        "the input has late and bad records: {want_dead:?}"
    );
    let mut epochs = Vec::new();
    for (job, extra) in [("small", "max_epoch_records = 10"), ("default", "")] {
        std::fs::write(dir.path().join(format!("{job}.toml")), config(job, extra)).expect("write config");
        let toml = format!("{job}.toml");
        hotlist_tests::run_hotlist(dir.path(), &["run", "--config", &toml, "--progress", "never"], true);
        let db = dir.path().join(format!("{job}.db"));
        assert_eq!(
            hotlist_tests::sqlite_sealed_lists(&db, job),
            want_lists,
            "{job}: sealed lists"
        );
        assert_eq!(
            hotlist_tests::sqlite_dead_letters(&db, job).0,
            want_dead,
            "{job}: dead letters"
        );
        epochs.push(hotlist_tests::sqlite_committed_epoch(&db, job).expect("a commit"));
    }
    assert!(epochs[0] >= 1000 / 12, "1,000 records at 12 per epoch: {epochs:?}");
    assert!(
        epochs[1] <= 1,
        "one epoch of records (and the end of input): {epochs:?}"
    );
}

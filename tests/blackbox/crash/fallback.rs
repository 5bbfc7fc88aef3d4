//! A damaged checkpoint (a flipped byte, a missing or truncated file, a crafted snapshot, a
//! damaged shared pane file) or an input that cannot resume: refused, or the previous
//! checkpoint restored, with exact results.

use super::harness::{committed, committed_checkpoints, job_config, results, setup, shape, spawn};
use hotlist_tests::inputs::{random_partitions, write_partitions};
use hotlist_tests::model;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs the job on 2 workers until at least two checkpoints are committed, kills it, damages
/// the newest committed checkpoint with `damage` (which returns the text the problem must be
/// named by), and checks: `hotlist checkpoints verify` fails naming it; the restart (on 1
/// worker) logs the checkpoint unusable in one clear line, restores the previous one, and
/// ends with the model's sealed lists and every dead letter exactly once.
fn a_damaged_latest_checkpoint_falls_back(seed: u64, damage: &dyn Fn(&Path) -> String) {
    falls_back_after(seed, 2, &|checkpoints| {
        damage(checkpoints.last().expect("a committed checkpoint"))
    });
}

/// As [`a_damaged_latest_checkpoint_falls_back`], waiting for `needed` committed checkpoints
/// and giving `damage` all of them, oldest first.
fn falls_back_after(seed: u64, needed: usize, damage: &dyn Fn(&[PathBuf]) -> String) {
    let mut sh = shape();
    sh.lines = 6000;
    let parts = random_partitions(seed, &sh);
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts);
    let mut child = spawn(dir.path(), 2);
    let deadline = Instant::now() + Duration::from_secs(30);
    while committed_checkpoints(dir.path()).len() < needed {
        assert!(Instant::now() < deadline, "no {needed} checkpoints committed");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the run ended before {needed} checkpoints"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let checkpoints = committed_checkpoints(dir.path());
    let latest = checkpoints.last().expect("a committed checkpoint").clone();
    let named = damage(&checkpoints);
    let verify = hotlist_tests::run_hotlist(
        dir.path(),
        &["checkpoints", "verify", "--config", "hotlist.toml"],
        false,
    );
    let report = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(
        verify.status.code(),
        Some(1),
        "verify fails on the damaged checkpoint:\n{report}"
    );
    let epoch: u64 = latest
        .file_name()
        .and_then(|n| n.to_str()?.parse().ok())
        .expect("epoch");
    assert!(
        report.contains(&format!("{epoch}: BAD: ")) && report.contains(&named),
        "verify names {named:?}:\n{report}"
    );
    let out = spawn(dir.path(), 1).wait_with_output().expect("restart");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let unusable: Vec<&str> = err.lines().filter(|l| l.contains("is unusable")).collect();
    assert!(
        unusable.len() == 1 && unusable[0].contains(&named),
        "one clear line names {named:?}:\n{err}"
    );
    assert!(err.contains("restoring the older checkpoint"), "{err}");
    let got = results(&dir.path().join("out.db"));
    assert_eq!(got.0, want.0, "sealed lists exact after the fallback");
    // the replayed epochs' dead letters were committed already: not stored twice
    assert_eq!(got.1, want.1, "dead letters exactly once after the fallback");
}

/// Flips the last byte of the checkpoint's `counter-0000.snap` (its checksum no longer
/// matches); returns what the unusable line names.
fn flip_a_counter_byte(checkpoint: &Path) -> String {
    let file = checkpoint.join("counter-0000.snap");
    let mut bytes = std::fs::read(&file).expect("read snapshot");
    let at = bytes.len() - 1;
    bytes[at] ^= 0xff;
    std::fs::write(&file, bytes).expect("corrupt it");
    "counter-0000.snap: snapshot checksum mismatch".into()
}

/// A corrupt counter file (a flipped byte: its checksum no longer matches) is detected.
#[test]
fn corrupt_latest_checkpoint_falls_back_to_the_previous_one() {
    a_damaged_latest_checkpoint_falls_back(8, &flip_a_counter_byte);
}

/// A checkpoint below the committed one without a manifest was coalesced into a later commit
/// (a crash came before retention removed it): the fallback passes over it without calling it
/// unusable — on-call chases the one damaged checkpoint — and restores the one below.
#[test]
fn a_coalesced_checkpoint_is_passed_over_quietly() {
    falls_back_after(15, 3, &|checkpoints| {
        let [.., older, latest] = checkpoints else {
            panic!("3 committed checkpoints: {checkpoints:?}")
        };
        std::fs::remove_file(older.join("MANIFEST")).expect("make it a coalesced checkpoint");
        flip_a_counter_byte(latest)
    });
}

/// A checkpoint missing one worker's counter file is not restored without it (which would
/// lose that worker's counts): its manifest lists every counter part.
#[test]
fn a_missing_counter_file_makes_the_checkpoint_unusable() {
    a_damaged_latest_checkpoint_falls_back(12, &|latest| {
        std::fs::remove_file(latest.join("counter-0001.snap")).expect("delete counter-0001.snap");
        "counter-0001.snap: missing".into()
    });
}

/// A truncated pane file (a new, shorter file: the old one may be linked into another
/// checkpoint) is detected by its size against the manifest.
#[test]
fn a_truncated_pane_file_makes_the_checkpoint_unusable() {
    a_damaged_latest_checkpoint_falls_back(13, &|latest| {
        let pane = std::fs::read_dir(latest)
            .expect("read checkpoint")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("pane-"))
            .expect("a pane file");
        let path = latest.join(&pane);
        let bytes = std::fs::read(&path).expect("read pane");
        std::fs::remove_file(&path).expect("unlink");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write it truncated");
        format!("{pane}: {} bytes", bytes.len() / 2)
    });
}

/// A crafted counter file — decoded, given exclusions of a window the job does not have,
/// encoded again (a valid checksum) and entered in the manifest with its new size and
/// checksum — is refused by validation, naming the file and the window, and never panics.
#[test]
fn a_crafted_snapshot_with_a_valid_checksum_is_refused() {
    use hotlist_operators::snapshot::{self, CounterSnapshot, InstanceCounts, KeyGroupState};
    use hotlist_operators::time::Millis;
    use hotlist_operators::window::{InstanceKey, WindowId};
    a_damaged_latest_checkpoint_falls_back(14, &|latest| {
        let path = latest.join("counter-0001.snap");
        let mut counter: CounterSnapshot = snapshot::decode(&std::fs::read(&path).expect("read")).expect("decodes");
        let bogus = InstanceCounts {
            instance: InstanceKey {
                window: WindowId(99),
                start: Millis(0),
            },
            items: vec![],
        };
        match counter.key_groups.first_mut() {
            Some(kg) => kg.exclusions.push(bogus),
            // worker 1 of 2 owns the odd key groups: 1 is in no other counter file
            None => counter.key_groups.push(KeyGroupState {
                key_group: 1,
                panes: vec![],
                exclusions: vec![bogus],
            }),
        }
        let bytes = snapshot::encode(&counter);
        std::fs::write(&path, &bytes).expect("write the crafted file");
        let header = snapshot::read_header(&bytes).expect("header");
        let manifest_path = latest.join("MANIFEST");
        let mut manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&manifest_path).expect("manifest")).expect("json");
        for f in manifest["files"].as_array_mut().expect("files") {
            if f["name"] == "counter-0001.snap" {
                f["size"] = bytes.len().into();
                f["xxh3"] = format!("{:016x}", header.checksum).into();
            }
        }
        std::fs::write(&manifest_path, manifest.to_string()).expect("write the manifest");
        "counter-0001.snap: snapshot is invalid".into()
    });
}

/// A partition that cannot resume where the committed checkpoint left it (its file has shrunk
/// since) fails the restart like a counter that cannot be restored: exit code 1 and one error
/// line naming the partition and the position, instead of reading on from the wrong place.
#[test]
fn a_partition_that_cannot_resume_fails_the_restart() {
    let mut sh = shape();
    sh.lines = 600;
    let parts = random_partitions(9, &sh);
    let dir = setup(&parts);
    let first = spawn(dir.path(), 1).wait_with_output().expect("first run");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    // the finished run's checkpoint has partition 1 at its last line: cut the file in half
    let lines = parts[1].len();
    let kept: Vec<Vec<u8>> = parts[1][..lines / 2].to_vec();
    write_partitions(&dir.path().join("in"), &[parts[0].clone(), kept]).expect("shrink partition 1");
    let out = spawn(dir.path(), 2).wait_with_output().expect("restart");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    let want = format!("partition 1 cannot resume at position {lines}: ");
    assert!(
        errors[0].contains("cannot restore checkpoint") && errors[0].contains(&want),
        "{err}"
    );
}

/// Incremental checkpoints link unchanged pane files instead of writing them again, so one
/// file on disk can belong to several checkpoints. When the most widely shared pane file of the
/// latest checkpoint is damaged (in place, as bit rot would), the fallback still finds an older
/// checkpoint without it: a file is shared by at most `retain - 1` consecutive checkpoints. The
/// sealed lists and dead letters are exact.
#[test]
fn a_damaged_shared_pane_file_falls_back_to_a_checkpoint_without_it() {
    use std::os::unix::fs::MetadataExt;
    let mut sh = shape();
    sh.late_p = 0.0; // late events would touch old panes: fewer files to share
    let parts = random_partitions(9, &sh);
    let want = model::run(&parts, &model::crash_windows(), 2_000, 30_000);
    let dir = setup(&parts);
    // a checkpoint every epoch: little event time passes between two, so panes stay unchanged
    // over many checkpoints (and old ones would be shared by all the retained checkpoints)
    let config = job_config().replace("interval = \"10ms\"", "interval = \"2ms\"");
    assert_ne!(config, job_config());
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    // run until well past the first 3 checkpoints (the retained number), then kill it at a
    // moment its latest committed checkpoint shares a pane file: frozen (SIGSTOP) while we
    // look, so that no newer checkpoint commits meanwhile; thawed to go on when none does (a
    // loaded machine can make consecutive checkpoints touch every pane)
    let mut child = spawn(dir.path(), 1);
    let pid = child.id().to_string();
    let signal = |sig: &str| {
        Command::new("kill")
            .args([sig, pid.as_str()])
            .status()
            .expect("kill")
            .success()
    };
    let most_shared_pane = |checkpoint: &Path| {
        std::fs::read_dir(checkpoint)
            .expect("read checkpoint")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("pane-"))
            .filter_map(|e| Some((e.metadata().ok()?.nlink(), e.path())))
            .max()
            .filter(|(links, _)| *links >= 2)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (links, file) = loop {
        assert!(
            Instant::now() < deadline,
            "no committed checkpoint after 40 shared a pane file"
        );
        assert!(child.try_wait().expect("try_wait").is_none(), "the run ended too soon");
        if committed(dir.path()) >= Some(40) {
            assert!(signal("-STOP"), "freeze the run");
            let latest = committed_checkpoints(dir.path()).pop().expect("a committed checkpoint");
            if let Some(found) = most_shared_pane(&latest) {
                break found;
            }
            assert!(signal("-CONT"), "thaw the run");
        }
        std::thread::sleep(Duration::from_millis(2)); // polling the commits
    };
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert_eq!(
        links,
        2,
        "{}: a file is shared by at most retain - 1 = 2 checkpoints",
        file.display()
    );
    let mut bytes = std::fs::read(&file).expect("read pane file");
    let at = bytes.len() - 1;
    bytes[at] ^= 0xff;
    std::fs::write(&file, bytes).expect("damage it in place"); // every link sees it
    let out = spawn(dir.path(), 2).wait_with_output().expect("restart");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("is unusable"), "{links} links: {err}");
    assert!(
        err.contains("restoring the older checkpoint") && !err.contains("no usable checkpoint"),
        "an older checkpoint without the damaged file was restored ({links} links):\n{err}"
    );
    let got = results(&dir.path().join("out.db"));
    assert_eq!(got.0, want.0, "sealed lists exact after the fallback");
    assert_eq!(got.1, want.1, "dead letters exactly once after the fallback");
}

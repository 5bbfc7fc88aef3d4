//! Checkpoints on disk: incremental parts, manifests and what a load refuses.

use super::manifest::{self, counter_file};
use super::Manifest;
use super::*;
use hotlist_operators::counter::WindowedCounter;
use hotlist_operators::hash::item_hash;
use hotlist_operators::record::{EventText, PartitionId, TimedEvent};
use hotlist_operators::snapshot::{self, MergerSnapshot, PaneKey, PublishedState, SourceSnapshot};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::{InstanceKey, WindowId, WindowSpec};
use std::os::unix::fs::MetadataExt;

fn event(item: &str, ts: i64) -> TimedEvent {
    TimedEvent {
        hash: item_hash(item),
        text: EventText::item(item),
        ts: Millis(ts),
        wm_before: Millis::MIN,
        partition: PartitionId(0),
        position: 0,
    }
}

fn layout() -> JobLayout {
    JobLayout {
        windows: vec![WindowSpec::tumbling("10", Span::from_millis(10), 3)],
        counting: vec!["exact".into()],
        allowed_lateness: Span::from_millis(100),
        split: Vec::new(),
        split_turns: Vec::new(),
        udfs: Vec::new(),
        accept_udf_change: false,
    }
}

fn facts(workers: usize) -> RunFacts {
    RunFacts {
        job: "j".into(),
        workers,
        layout: layout(),
        owner: "test".into(),
        generation: 1,
    }
}

fn write_others(dir: &Path) {
    write_snapshot(dir, "merger.snap", &MergerSnapshot::default()).expect("merger");
    write_snapshot(dir, "sources.snap", &SourceSnapshot::default()).expect("sources");
}

/// A counter with events in four panes.
fn counter() -> WindowedCounter {
    let l = layout();
    let mut c = WindowedCounter::new(l.windows, l.allowed_lateness, 0);
    for (i, ts) in [1, 11, 21, 31].into_iter().enumerate() {
        let _ = c.apply(&event(&format!("i{i}"), ts));
    }
    let _ = c.advance(Millis(0), false);
    c
}

/// A complete checkpoint of one worker (the counter's whole state) in `dir`, with its manifest.
fn checkpoint(dir: &Path, c: &WindowedCounter) {
    let (b, panes) = c.snapshot_panes(None, |_| true);
    write_counter_part(dir, 0, b, panes, None).expect("part");
    write_others(dir);
    manifest::write(dir, &facts(1), 1, Millis(0)).expect("manifest");
}

/// `load`'s error text.
fn refused(dir: &Path) -> String {
    load(dir, 1, &layout()).expect_err("refused").to_string()
}

/// A second checkpoint writes only the pane that changed and links the others (same inode);
/// both load to the counter's whole snapshot; a damaged pane file makes the load fail naming it.
#[test]
fn incremental_parts_link_unchanged_panes_and_load_whole() {
    let base = tempfile::tempdir().expect("tempdir");
    let mut c = counter();
    let (d1, d2) = (base.path().join("1"), base.path().join("2"));
    let (b, panes) = c.snapshot_panes(None, |_| true);
    let since = c.sequence();
    let first = write_counter_part(&d1, 0, b, panes, None).expect("first part");
    assert_eq!(first.written, first.total);
    write_others(&d1);
    manifest::write(&d1, &facts(1), 1, Millis(0)).expect("manifest");
    let _ = c.apply(&event("i9", 22));
    let _ = c.advance(Millis(0), false);
    let (b, panes) = c.snapshot_panes(Some(since), |_| true);
    let second = write_counter_part(&d2, 0, b, panes, Some(&d1)).expect("second part");
    write_others(&d2);
    manifest::write(&d2, &facts(1), 2, Millis(0)).expect("manifest");
    assert!(second.written < second.total, "{second:?}");
    let inode = |d: &Path, start: i64| {
        let key = PaneKey {
            width: Span::from_millis(10),
            start: Millis(start),
        };
        std::fs::metadata(d.join(key.file_name(0))).expect("pane file").ino()
    };
    assert_eq!(inode(&d1, 0), inode(&d2, 0), "unchanged pane linked");
    assert_ne!(inode(&d1, 20), inode(&d2, 20), "changed pane written");
    let whole = c.snapshot();
    let loaded = load(&d2, 2, &layout()).expect("loads");
    assert_eq!(loaded.counters.len(), 1);
    let mut got = loaded.counters[0].clone();
    let mut want = whole.clone();
    for s in [&mut got, &mut want] {
        for g in &mut s.key_groups {
            g.panes.sort_by_key(|p| (p.width, p.start));
            for p in &mut g.panes {
                p.items.sort();
            }
        }
    }
    assert_eq!(got, want);
    // damage a pane file of the second checkpoint (same size): the load fails and names it
    let name = PaneKey {
        width: Span::from_millis(10),
        start: Millis(20),
    }
    .file_name(0);
    let path = d2.join(&name);
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).expect("write");
    let err = load(&d2, 2, &layout())
        .expect_err("a damaged pane fails the load")
        .to_string();
    assert!(err.contains(&name) && err.contains("checksum"), "{err}");
    // the first checkpoint is untouched by it
    assert!(load(&d1, 1, &layout()).is_ok());
}

/// The manifest lists every file with its size and checksum: a checkpoint missing a counter
/// part or a pane file, with a truncated or replaced file, or with no (or an old) manifest does
/// not load, and the error names the file.
#[test]
fn a_checkpoint_that_does_not_match_its_manifest_is_unusable() {
    let base = tempfile::tempdir().expect("tempdir");
    let c = counter();
    let fresh = |name: &str| {
        let dir = base.path().join(name);
        checkpoint(&dir, &c);
        assert!(load(&dir, 1, &layout()).is_ok());
        dir
    };
    let m = Manifest::read(&fresh("whole")).expect("manifest");
    assert_eq!(m.workers, 1);
    assert!(m.lists("counter-0000.snap") && m.lists("merger.snap") && m.files.len() > 4);

    let dir = fresh("no counter");
    std::fs::remove_file(dir.join(counter_file(0))).expect("rm");
    assert!(
        refused(&dir).contains("counter-0000.snap: missing"),
        "{}",
        refused(&dir)
    );

    let dir = fresh("truncated pane");
    let pane = m
        .files
        .iter()
        .find(|f| f.name.starts_with("pane-"))
        .expect("a pane")
        .name
        .clone();
    let bytes = std::fs::read(dir.join(&pane)).expect("read");
    std::fs::write(dir.join(&pane), &bytes[..bytes.len() - 1]).expect("truncate");
    assert!(refused(&dir).contains(&pane), "{}", refused(&dir));

    let dir = fresh("replaced");
    write_snapshot(&dir, "sources.snap", &SourceSnapshot { partitions: vec![] }).expect("same bytes");
    assert!(load(&dir, 1, &layout()).is_ok(), "the same contents again are fine");
    let other = SourceSnapshot {
        partitions: vec![hotlist_operators::snapshot::PartitionState {
            partition: PartitionId(0),
            position: 1,
            max_ts: Millis::MIN,
            status: hotlist_operators::record::PartitionStatus::Active,
        }],
    };
    write_snapshot(&dir, "sources.snap", &other).expect("other contents");
    assert!(refused(&dir).contains("sources.snap"), "{}", refused(&dir));

    let dir = fresh("manifest of two workers");
    manifest::write(&dir, &facts(2), 1, Millis(0)).expect_err("counter-0001.snap is missing");
    let mut two = Manifest::read(&dir).expect("manifest");
    two.workers = 2;
    std::fs::write(dir.join(MANIFEST), serde_json::to_vec(&two).expect("json")).expect("write");
    assert!(
        refused(&dir).contains("does not list counter-0001.snap"),
        "{}",
        refused(&dir)
    );

    let dir = fresh("no manifest");
    std::fs::remove_file(dir.join(MANIFEST)).expect("rm");
    assert!(refused(&dir).contains("no MANIFEST"), "{}", refused(&dir));
    std::fs::write(
        dir.join(MANIFEST),
        br#"{"job":"j","epoch":1,"workers":1,"watermark":0,"committed_at":0}"#,
    )
    .expect("an old manifest");
    assert!(refused(&dir).contains("older hotlist"), "{}", refused(&dir));

    let dir = fresh("other windows");
    let mut l = layout();
    l.allowed_lateness = Span::from_millis(7);
    assert!(matches!(load(&dir, 1, &l), Err(LoadError::Incompatible)));
}

/// A snapshot with a valid checksum but contents the job cannot have (an instance of a window
/// past the configured ones) is unusable, naming the file — never a panic later.
#[test]
fn valid_checksums_with_invalid_contents_are_unusable() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("crafted");
    checkpoint(&dir, &counter());
    let bad = MergerSnapshot {
        instances: vec![PublishedState {
            group: Default::default(),
            instance: InstanceKey {
                window: WindowId(7),
                start: Millis(0),
            },
            revision: 1,
            published: None,
        }],
    };
    let bytes = snapshot::encode(&bad);
    assert!(snapshot::decode::<MergerSnapshot>(&bytes).is_ok(), "checksum valid");
    write_snapshot(&dir, "merger.snap", &bad).expect("write");
    manifest::write(&dir, &facts(1), 1, Millis(0)).expect("a manifest that matches the files");
    let err = refused(&dir);
    assert!(err.contains("merger.snap") && err.contains("invalid"), "{err}");
}

/// Retention keeps the newest `retain` committed checkpoints that have a manifest, removes the
/// older ones and those without a manifest, and never touches newer ones.
#[test]
fn retention_keeps_the_newest_with_a_manifest() {
    let base = tempfile::tempdir().expect("tempdir");
    for e in 1..=6u64 {
        let dir = checkpoint_dir(base.path(), "j", e);
        std::fs::create_dir_all(&dir).expect("mkdir");
        if e != 4 {
            std::fs::write(dir.join(MANIFEST), b"{}").expect("manifest");
        }
    }
    retain(base.path(), "j", 5, 2);
    assert_eq!(list(base.path(), "j"), vec![6, 5, 3]);
}

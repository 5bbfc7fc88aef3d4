//! Validation against the job: the snapshots the job writes are valid, and every kind of
//! snapshot that decodes but makes no sense for the job is refused with an error naming it.

use super::*;
use crate::counter::WindowedCounter;
use crate::hash::item_hash;
use crate::merge::ListMerger;
use crate::message::LocalList;
use crate::record::EventText;
use crate::record::{ListState, PartitionId, PartitionStatus, TimedEvent};
use crate::snapshot::{PaneCounts, PartitionState};
use crate::window::WindowId;

const LATENESS: Span = Span::from_millis(5);

fn windows() -> Vec<WindowSpec> {
    vec![
        WindowSpec::tumbling("t10", Span::from_millis(10), 2),
        WindowSpec {
            rank: Default::default(),
            key: Default::default(),
            name: "h20".into(),
            size: Span::from_millis(20),
            slide: Span::from_millis(5),
            k: 2,
        },
    ]
}

fn kg_of(id: &str) -> u32 {
    key_group(item_hash(id))
}

/// A counter snapshot with panes of both widths and one exclusion of item "a".
fn counter_snapshot() -> CounterSnapshot {
    let mut c = WindowedCounter::new(windows(), LATENESS, 0);
    for (item, ts) in [("a", 1), ("b", 2), ("a", 13), ("c", 27)] {
        let ev = TimedEvent {
            hash: item_hash(item),
            text: EventText::item(item),
            ts: Millis(ts),
            wm_before: Millis::MIN,
            partition: PartitionId(0),
            position: 0,
        };
        assert!(c.apply(&ev).is_none());
    }
    let _ = c.advance(Millis(0), false);
    let mut s = c.snapshot();
    let a = s
        .key_groups
        .iter_mut()
        .find(|k| k.key_group == kg_of("a"))
        .expect("a's group");
    a.exclusions.push(InstanceCounts {
        instance: InstanceKey {
            window: WindowId(1),
            start: Millis(10),
        },
        items: vec![("a".into(), 1)],
    });
    s
}

fn instance(window: u16, start: i64) -> InstanceKey {
    InstanceKey {
        window: WindowId(window),
        start: Millis(start),
    }
}

fn a_group(s: &mut CounterSnapshot) -> &mut KeyGroupState {
    s.key_groups
        .iter_mut()
        .find(|k| k.key_group == kg_of("a"))
        .expect("a's group")
}

fn problem(r: Result<(), SnapshotError>) -> String {
    match r {
        Err(SnapshotError::Invalid(p)) => p,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn snapshots_the_job_writes_are_valid() {
    let s = counter_snapshot();
    assert_eq!(s.validate(&windows(), LATENESS), Ok(()));
    assert_eq!(s.validate(&windows(), Span::ZERO), Err(SnapshotError::Incompatible));
    assert_eq!(s.validate(&windows()[..1], LATENESS), Err(SnapshotError::Incompatible));
    let mut m = ListMerger::new(windows(), LATENESS);
    m.receive(LocalList {
        group: Default::default(),
        instance: InstanceKey {
            window: WindowId(1),
            start: Millis(-5),
        },
        worker: 0,
        items: vec![RankedItem {
            item_id: "a".into(),
            count: 2,
            trend: None,
        }],
        source: crate::record::ListSource::PaneCounter,
        share: None,
    });
    let _ = m.advance(Millis(0), Millis(0));
    assert_eq!(m.snapshot().validate(&windows()), Ok(()));
    assert_eq!(MergerSnapshot::default().validate(&windows()), Ok(()));
}

/// The case: an exclusion for a window the job does not have.
#[test]
fn a_window_id_past_the_windows_is_named() {
    let mut s = counter_snapshot();
    a_group(&mut s).exclusions[0].instance.window = WindowId(9);
    let p = problem(s.validate(&windows(), LATENESS));
    assert!(p.contains("window id 9, but the job has 2 windows"), "{p}");
    let restored = WindowedCounter::restore(windows(), LATENESS, 0, 1, &[s]).err();
    assert!(matches!(restored, Some(SnapshotError::Invalid(p)) if p.contains("window id 9")));

    let merger = MergerSnapshot {
        instances: vec![PublishedState {
            group: Default::default(),
            instance: InstanceKey {
                window: WindowId(2),
                start: Millis(0),
            },
            revision: 1,
            published: Some((ListState::Open, Vec::new())),
        }],
    };
    let p = problem(merger.validate(&windows()));
    assert!(p.contains("window id 2, but the job has 2 windows"), "{p}");
    assert!(ListMerger::try_restore(windows(), LATENESS, &merger).is_err());
    assert_eq!(ListMerger::restore(windows(), LATENESS, &merger).live_instances(), 0);
}

#[test]
fn counter_snapshot_problems_are_named() {
    type Mutation = fn(&mut CounterSnapshot);
    let cases: &[(Mutation, &str)] = &[
        (
            |s| s.key_groups[0].key_group = KEY_GROUPS,
            "not below the 4096 key groups",
        ),
        (|s| a_group(s).key_group ^= 1, "belongs to key group"),
        (|s| s.key_groups.push(s.key_groups[0].clone()), "listed twice"),
        (
            |s| a_group(s).panes[0].width = Span::from_millis(3),
            "none of the windows' pane widths",
        ),
        (|s| a_group(s).panes[0].start.0 += 1, "not a multiple of"),
        (
            |s| a_group(s).panes[0].start = Millis(9_000_000_000_000_000),
            "outside years 0000-9999",
        ),
        (
            |s| a_group(s).panes[0].start = Millis(-9_000_000_000_000_000),
            "outside years 0000-9999",
        ),
        (|s| a_group(s).panes[0].items[0].1 = 0, "count 0"),
        (|s| a_group(s).panes[0].items[0].0 = "".into(), "item_id is empty"),
        (
            |s| {
                let dup = a_group(s).panes[0].clone();
                a_group(s).panes.push(dup)
            },
            "listed twice",
        ),
        (
            |s| {
                let dup = a_group(s).panes[0].items[0].clone();
                a_group(s).panes[0].items.push(dup)
            },
            "item \"a\" is listed twice",
        ),
        (
            |s| {
                a_group(s).panes[0].items[0].1 = u64::MAX / 2;
                a_group(s).panes.push(PaneCounts {
                    width: Span::from_millis(5),
                    start: Millis(1000),
                    items: vec![("a".into(), u64::MAX / 2 + 2)],
                })
            },
            "counts sum to more than",
        ),
        (
            |s| a_group(s).exclusions[0].instance.start.0 += 1,
            "not a multiple of 5 ms",
        ),
        (
            |s| s.pane_files.push("../counter-0000.snap".into()),
            "not a plain pane-*.snap name",
        ),
        (
            |s| s.sealed_until = vec![Millis(10)],
            "sealed_until has 1 entries for 2 windows",
        ),
        (
            |s| s.sealed_until = vec![Millis(10), Millis(21)],
            "sealed_until of window 1: the instance ending at 21",
        ),
        (
            |s| s.sealed_until = vec![Millis(i64::MAX), Millis::MIN],
            "sealed_until of window 0: the instance ending at 9223372036854775807",
        ),
        (
            |s| s.groups_seen = vec![(instance(0, 10), vec![1, 2])],
            "groups of instance window id 0 at 10: the window has no by dims",
        ),
        (
            |s| s.groups_seen = vec![(instance(2, 10), vec![1])],
            "groups of instance window id 2 at 10: ",
        ),
    ];
    for (mutate, want) in cases {
        let mut s = counter_snapshot();
        mutate(&mut s);
        let p = problem(s.validate(&windows(), LATENESS));
        assert!(p.contains(want), "{p:?} should say {want:?}");
    }
    let s = counter_snapshot();
    let p = problem(validate_counters(&[s.clone(), s], &windows(), LATENESS));
    assert!(p.contains("in two counter snapshots"), "{p}");
}

#[test]
fn merger_and_source_problems_are_named() {
    let published = |revision, items: &[(&str, u64)]| MergerSnapshot {
        instances: vec![PublishedState {
            group: Default::default(),
            instance: InstanceKey {
                window: WindowId(0),
                start: Millis(10),
            },
            revision,
            published: (revision > 0).then(|| {
                let items = items.iter().map(|(i, c)| RankedItem {
                    item_id: (*i).into(),
                    count: *c,
                    trend: None,
                });
                (ListState::Closed, items.collect())
            }),
        }],
    };
    assert_eq!(published(3, &[("b", 5), ("a", 1)]).validate(&windows()), Ok(()));
    let cases = [
        (published(3, &[("a", 1), ("b", 5)]), "out of rank order"),
        (published(3, &[("a", 1), ("b", 1), ("c", 1)]), "K is 2"),
        (published(3, &[("a", 1), ("a", 1)]), "listed twice"),
        (published(3, &[("a", 0)]), "count 0"),
        (published(u32::MAX, &[]), "no room for the next"),
    ];
    for (m, want) in cases {
        let p = problem(m.validate(&windows()));
        assert!(p.contains(want), "{p:?} should say {want:?}");
    }
    let mut no_list = published(0, &[]);
    no_list.instances[0].revision = 2;
    assert!(problem(no_list.validate(&windows())).contains("revision 2 without a published list"));

    let partition = |p, max_ts| PartitionState {
        partition: PartitionId(p),
        position: 7,
        max_ts: Millis(max_ts),
        status: PartitionStatus::Active,
    };
    let ok = SourceSnapshot {
        partitions: vec![partition(0, i64::MIN), partition(1, i64::MAX), partition(2, 0)],
    };
    assert_eq!(ok.validate(), Ok(()));
    let far = SourceSnapshot {
        partitions: vec![partition(0, 9_000_000_000_000_000)],
    };
    assert!(problem(far.validate()).contains("partition 0: largest event time 9000000000000000 is outside"));
    let twice = SourceSnapshot {
        partitions: vec![partition(3, 0), partition(3, 1)],
    };
    assert!(problem(twice.validate()).contains("partition 3 is listed twice"));
}

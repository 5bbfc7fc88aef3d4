//! The counter's key model, differentially (docs/plans/counter-key-model.md, step 4): per-group
//! windows counting per (item record, group number), in the item's group block, give at every
//! tick the lists they gave per `group NUL item` key record, and the same snapshots; and a
//! snapshot of either restores into the other (checkpoints of one build are read by the next).

use super::shaped_fixtures::*;
use super::*;
use crate::snapshot::CounterSnapshot;
use proptest::prelude::*;

/// What a snapshot counts: (key group, pane or instance, key) → count. (The order of a pane's
/// keys is not part of the format, and the two counters list them in different orders.)
fn contents(s: &CounterSnapshot) -> BTreeMap<(u32, String, String), u64> {
    let mut all = BTreeMap::new();
    for kg in &s.key_groups {
        for p in &kg.panes {
            for (id, n) in &p.items {
                let at = format!("pane {} {}", p.width.as_i64(), p.start.0);
                prop_assert_absent(all.insert((kg.key_group, at, id.to_string()), *n));
            }
        }
        for x in &kg.exclusions {
            for (id, n) in &x.items {
                let at = format!("excluded {} {}", x.instance.window.0, x.instance.start.0);
                prop_assert_absent(all.insert((kg.key_group, at, id.to_string()), *n));
            }
        }
    }
    all
}

/// A key is written once per pane (or instance).
fn prop_assert_absent(had: Option<u64>) {
    assert_eq!(had, None, "a key written twice");
}

/// One tick of both counters: their lists, and their snapshots' counts, are the same.
fn tick_both(a: &mut WindowedCounter, b: &mut WindowedCounter, wm: Millis, last: bool) -> Result<(), TestCaseError> {
    let (mut got_a, mut got_b) = (BTreeMap::new(), BTreeMap::new());
    collect(a.advance(wm, !last), &mut got_a);
    collect(b.advance(wm, !last), &mut got_b);
    prop_assert_eq!(got_a, got_b);
    prop_assert_eq!(contents(&a.snapshot()), contents(&b.snapshot()));
    Ok(())
}

proptest! {
    /// The same stream on a counter that numbers groups and on one that counts key texts:
    /// every shape (global, per group over one and two dims, distinct users), up to 40
    /// countries (long ones, escaped ones), `max_groups` down to 1 (folds into `(other)`),
    /// six pane widths, late events; each snapshotted midway and restored into the other kind.
    #[test]
    fn numbered_groups_count_as_key_texts_do(
        raw in proptest::collection::vec(
            (0u8..6, proptest::option::weighted(0.3, 0u8..4), proptest::option::weighted(0.9, 0u8..40),
             0u8..2, 0i64..4, 0i64..20, proptest::bool::weighted(0.05)),
            0..300,
        ),
        kinds in proptest::collection::vec((0u8..5, 0usize..6, 1u32..64), 1..6),
        ooo in 0i64..6,
        lateness in 0i64..12,
        cut in 0usize..300,
        every in 1usize..40,
        own in any::<bool>(),
    ) {
        let windows = windows_sized(&kinds, [(10, 10), (20, 5), (7, 7), (9, 3), (4, 4), (6, 2)], 3);
        let dims = job_dims(&windows);
        let span = Span::from_millis(lateness as u64);
        let evs = events_of(raw, ooo);
        let mut on = WindowedCounter::counting_numbered(windows.clone(), &[], span, 0, true);
        let mut off = WindowedCounter::counting_numbered(windows.clone(), &[], span, 0, false);
        prop_assert!(on.numbered.iter().any(|n| *n) || !kinds.iter().any(|k| k.0 == 1 || k.0 == 2));
        if own {
            on.note_own_groups();
            off.note_own_groups();
        }
        let cut = cut.min(evs.len());
        let mut max_seen = i64::MIN;
        for (n, e) in evs.iter().enumerate() {
            if n == cut {
                // each restored into the other kind
                let (snap_on, snap_off) = (on.snapshot(), off.snapshot());
                prop_assert_eq!(contents(&snap_on), contents(&snap_off));
                let restore = |snap: &CounterSnapshot, number: bool| {
                    WindowedCounter::restore_numbered(windows.clone(), &[], span, 0, 1, std::slice::from_ref(snap), number)
                };
                on = restore(&snap_off, true).unwrap();
                off = restore(&snap_on, false).unwrap();
                if own {
                    on.note_own_groups();
                    off.note_own_groups();
                }
            }
            let t = timed(e, &dims);
            prop_assert_eq!(on.apply(&t).is_some(), off.apply(&t).is_some());
            max_seen = max_seen.max(e.ts);
            if n % every == every - 1 {
                tick_both(&mut on, &mut off, Millis(max_seen - ooo), false)?;
            }
        }
        tick_both(&mut on, &mut off, Millis::MAX, true)?;
        for c in [&on, &off] {
            let s = c.stats();
            prop_assert_eq!(
                (s.live_counters, s.live_items, s.live_panes, s.live_users, s.live_groups),
                (0, 0, 0, 0, 0)
            );
        }
    }
}

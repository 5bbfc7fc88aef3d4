//! Every older schema version, one table of cases and one test body: a schema of that version
//! (`old_schemas`: its DDL verbatim, or a new schema taken back to it) is migrated to
//! [`SCHEMA_VERSION`] by connecting under the migration lock (PostgreSQL readers connect like
//! the job, so they migrate too), after which what the version lacked commits and reads back,
//! and connecting again changes nothing.
//!
//! The versions: 1 → 2 replaces the `CHECK` on `dead_letters.reason` (every row kept); 2 → 3
//! adds the accuracy columns and their constraints (every old list exact); 3 → 4 only adds the
//! hot-key tables; 4 → 5 puts `group_key` in the list tables' primary keys (every old list
//! global) and adds `by_dims`; 5 → 6 adds the certificate's columns and check (no old list
//! certified); 6 → 7 adds dead-letter counts (every old row one whole letter); 7 → 8 adds the
//! trend columns and their checks (no old list is a trend list; a reader opened on the old
//! schema reads it as it is, and the trend lists the job writes once it migrated); 8 → 9
//! creates `instance_ranges` (no old instance has ranges; a reader opened on the old schema
//! reads none, and the ranges the job commits once it migrated); 9 → 10 replaces the reason
//! constraint with one that also takes `udf` (every row kept; a reader opened on the old schema
//! reads it as it is, and the `udf` letters the job commits once it migrated). A reader opened
//! on a version-6 schema reads its dead letters, each a whole letter, and the summaries the job
//! writes once it migrated. The tables a migration leaves are the tables a new schema gets,
//! and they refuse the same impossible rows.

use super::old_schemas::{
    downgrade_to_v4, downgrade_to_v5, downgrade_to_v6, downgrade_to_v7, downgrade_to_v8, downgrade_to_v9, v1_schema,
    v2_schema, v9_schema,
};
use super::tests::TestDb;
use super::*;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{
    approximate, batch, certified, hot_window, letter, list, sealed, sketch_check, summary, trending, unreadable,
    windows, JOB,
};
use crate::types::{SourcedDeadLetter, StoredList};
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::{HotState, HotWindow};
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::DeadReason;
use hotlist_operators::time::Millis;
use std::sync::Barrier;

/// What one step of a case saw, for a later step to compare with.
#[derive(Default)]
struct Seen {
    /// (id, reason, position) of every dead letter.
    letters: Vec<(i64, String, i64)>,
    /// A list.
    list: Option<StoredList>,
    /// The columns and primary keys of the list tables and `hotlist_windows` ([`key_shape`]).
    keys: Vec<KeyShape>,
    /// The columns and constraints of `topk_instances`, `dead_letters` or `topk`
    /// ([`table_shape`]).
    instances: Option<Shape>,
    /// A reader opened on the schema before it was migrated.
    reader: Option<PostgresStore>,
}

/// One migration case: a schema of an older version and what must hold of it after
/// connecting migrated it.
struct Case {
    /// What the case shows.
    name: &'static str,
    /// The version the schema is stamped.
    from: i64,
    /// Creates the schema in the test database.
    build: fn(&TestDb) -> Seen,
    /// What holds once connecting migrated it, through that connection.
    migrated: fn(&TestDb, &mut PostgresStore, Seen) -> Seen,
    /// What holds through a new connection, after the first one is gone.
    again: fn(&TestDb, &mut PostgresStore, Seen),
}

const CASES: [Case; 9] = [
    Case {
        name: "a version-1 schema is migrated on connect",
        from: 1,
        build: |db| {
            v1_schema(db);
            let before = letters(db);
            assert_eq!(before.len(), 3);
            Seen {
                letters: before,
                ..Seen::default()
            }
        },
        migrated: migrated_v1,
        again: |db, _, seen| {
            assert_eq!(
                letters(db),
                seen.letters,
                "connecting to a version-3 schema again changes nothing"
            );
        },
    },
    Case {
        name: "a version-2 schema is migrated on connect",
        from: 2,
        build: |db| {
            v2_schema(db);
            Seen::default()
        },
        migrated: migrated_v2,
        again: |_, again, seen| {
            assert_eq!(
                again.latest(JOB, "1m").unwrap(),
                seen.list,
                "connecting to a version-3 schema again changes nothing"
            );
        },
    },
    Case {
        name: "a version-3 schema is migrated on connect",
        from: 3,
        build: |db| {
            let mut w = db.store();
            assert!(w.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
            drop(w);
            downgrade_to_v4(db, 4);
            db.client()
                .batch_execute(
                    "DROP TABLE hot_keys; DROP TABLE hot_key_windows; UPDATE hotlist_schema SET version = 3;",
                )
                .unwrap();
            Seen::default()
        },
        migrated: migrated_v3,
        again: |_, again, _| assert_eq!(again.hot_keys(JOB).unwrap(), Some(v3_hot())),
    },
    Case {
        name: "a version-4 schema is migrated on connect",
        from: 4,
        build: |db| {
            let mut w = db.store();
            w.prepare(JOB, &windows()).unwrap();
            assert!(w.commit(&batch(1, vec![list(0, 1, 2), list(60_000, 1, 3)])).unwrap());
            let new: Vec<_> = KEYED_TABLES.map(|t| key_shape(db, t)).into();
            drop(w);
            downgrade_to_v4(db, 4);
            Seen {
                keys: new,
                ..Seen::default()
            }
        },
        migrated: migrated_v4,
        again: again_v4,
    },
    Case {
        name: "a version-5 schema is migrated on connect",
        from: 5,
        build: |db| {
            let mut w = db.store();
            w.prepare(JOB, &windows()).unwrap();
            assert!(w.commit(&batch(1, vec![list(0, 3, 2), v5_sketched()])).unwrap());
            let new = instances_shape(db);
            let names: Vec<&str> = new.1.iter().map(|(n, _)| n.as_str()).collect();
            assert!(names.contains(&"topk_instances_certificate_check"), "{names:?}");
            drop(w);
            downgrade_to_v5(db, 5);
            assert_eq!(version(db), 5);
            assert_ne!(instances_shape(db), new);
            Seen {
                instances: Some(new),
                ..Seen::default()
            }
        },
        migrated: migrated_v5,
        again: |_, again, _| {
            assert_eq!(
                again.latest(JOB, "1m").unwrap(),
                Some(StoredList::from(v5_proved())),
                "connecting to a version-6 schema again changes nothing"
            );
        },
    },
    Case {
        name: "a version-6 schema is migrated on connect",
        from: 6,
        build: |db| {
            let mut w = db.store();
            w.prepare(JOB, &windows()).unwrap();
            let mut b = batch(1, vec![]);
            b.dead_letters = vec![letter(7, DeadReason::Bad, b"x"), letter(8, DeadReason::Late, b"y")];
            assert!(w.commit(&b).unwrap());
            let new = table_shape(db, "dead_letters");
            drop(w);
            downgrade_to_v6(db, 6);
            assert_ne!(table_shape(db, "dead_letters"), new);
            // a reader (no DDL) reads the version-6 schema as it is: every row a whole letter
            let mut reader = PostgresStore::open_reader(&db.url, &db.schema, PgTimeouts::default())
                .unwrap_or_else(|e| panic!("a reader opens a version-6 schema: {e}"));
            let got = reader.dead_letters(JOB, 10).unwrap();
            assert_eq!(
                got,
                [letter(8, DeadReason::Late, b"y"), letter(7, DeadReason::Bad, b"x")]
            );
            assert_eq!(
                reader.dead_letter_counts(JOB).unwrap(),
                [("bad".to_string(), 1), ("late".to_string(), 1)]
            );
            assert_eq!(reader.latest(JOB, "1m").unwrap(), None);
            assert_eq!(version(db), 6, "a reader never migrates");
            Seen {
                letters: letters(db),
                instances: Some(new),
                reader: Some(reader),
                ..Seen::default()
            }
        },
        migrated: migrated_v6,
        again: |_, again, _| {
            assert_eq!(
                again.dead_letter_counts(JOB).unwrap(),
                vec![("bad".to_string(), 1 + 7), ("late".to_string(), 1)],
                "connecting to a version-7 schema again changes nothing"
            );
        },
    },
    Case {
        name: "a version-7 schema is read as it is, then migrated on connect",
        from: 7,
        build: |db| {
            let mut w = db.store();
            w.prepare(JOB, &windows()).unwrap();
            assert!(w.commit(&batch(1, vec![list(0, 3, 2)])).unwrap());
            let new = table_shape(db, "topk");
            let names: Vec<&str> = new.1.iter().map(|(n, _)| n.as_str()).collect();
            assert!(names.contains(&"topk_trend_check"), "{names:?}");
            drop(w);
            downgrade_to_v7(db, 7);
            assert_eq!(version(db), 7);
            assert_ne!(table_shape(db, "topk"), new);
            // a reader (no DDL) reads the version-7 schema as it is: count-ranked lists
            let mut reader = PostgresStore::open_reader(&db.url, &db.schema, PgTimeouts::default())
                .unwrap_or_else(|e| panic!("{e}"));
            let old = reader.latest(JOB, "1m").unwrap().expect("the list");
            assert_eq!(old, StoredList::from(list(0, 3, 2)));
            assert!(old.items.iter().all(|i| i.trend.is_none()), "count-ranked");
            assert_eq!(version(db), 7, "a reader never migrates");
            Seen {
                list: Some(old),
                instances: Some(new),
                reader: Some(reader),
                ..Seen::default()
            }
        },
        migrated: migrated_v7,
        again: |_, again, _| {
            assert_eq!(
                again.latest(JOB, "1m").unwrap(),
                Some(StoredList::from(trending(120_000, 3))),
                "connecting to a version-8 schema again changes nothing"
            );
        },
    },
    Case {
        name: "a version-8 schema is read as it is, then migrated on connect",
        from: 8,
        build: |db| {
            let mut w = db.store();
            w.prepare(JOB, &windows()).unwrap();
            assert!(w.commit(&batch(1, vec![list(0, 3, 2)])).unwrap());
            let new = table_shape(db, "instance_ranges");
            let names: Vec<&str> = new.1.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                names,
                [
                    "instance_ranges_end_check",
                    "instance_ranges_one_check",
                    "instance_ranges_pkey"
                ]
            );
            drop(w);
            downgrade_to_v8(db, 8);
            assert_eq!(version(db), 8);
            let gone: bool = db
                .client()
                .query_one("SELECT to_regclass('instance_ranges') IS NULL", &[])
                .unwrap()
                .get(0);
            assert!(gone, "a version-8 schema has no instance_ranges");
            // a reader (no DDL) reads the version-8 schema as it is: no ranges
            let mut reader = PostgresStore::open_reader(&db.url, &db.schema, PgTimeouts::default())
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(reader.sealed_ranges(JOB, "1m", Millis(0)).unwrap(), None);
            assert_eq!(
                reader.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(),
                Vec::<Millis>::new()
            );
            let old = reader.latest(JOB, "1m").unwrap().expect("the list");
            assert_eq!(old, StoredList::from(list(0, 3, 2)));
            assert_eq!(version(db), 8, "a reader never migrates");
            Seen {
                list: Some(old),
                instances: Some(new),
                reader: Some(reader),
                ..Seen::default()
            }
        },
        migrated: migrated_v8,
        again: |_, again, _| {
            assert_eq!(
                again.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
                Some(sealed("1m", 0)),
                "connecting to a version-9 schema again changes nothing"
            );
            assert_eq!(
                again.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(),
                [Millis(0), Millis(60_000)]
            );
        },
    },
    Case {
        name: "a version-9 schema is read as it is, then migrated on connect",
        from: 9,
        build: |db| {
            let new = {
                let fresh = TestDb::new();
                drop(fresh.store());
                table_shape(&fresh, "dead_letters")
            };
            v9_schema(db);
            assert_ne!(table_shape(db, "dead_letters"), new);
            // a reader (no DDL) reads the version-9 schema as it is
            let mut reader = PostgresStore::open_reader(&db.url, &db.schema, PgTimeouts::default())
                .unwrap_or_else(|e| panic!("a reader opens a version-9 schema: {e}"));
            assert_eq!(reader.dead_letters(JOB, 10).unwrap(), v9_letters());
            assert_eq!(reader.dead_letter_counts(JOB).unwrap(), v9_counts(0));
            assert_eq!(
                reader.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
                Some(unreadable("1m", 0, "gone"))
            );
            let old = reader.latest(JOB, "1m").unwrap().expect("the list");
            assert_eq!((old.start, old.revision, old.items.len()), (Millis(0), 3, 2));
            assert_eq!(version(db), 9, "a reader never migrates");
            Seen {
                letters: letters(db),
                list: Some(old),
                instances: Some(new),
                reader: Some(reader),
                ..Seen::default()
            }
        },
        migrated: migrated_v9,
        again: |db, again, seen| {
            assert_eq!(letters(db), seen.letters, "connecting again changes nothing");
            assert_eq!(again.dead_letter_counts(JOB).unwrap(), v9_counts(1 + 3));
        },
    },
];

/// Every case: build, connect (which migrates), check, connect again, check.
#[test]
fn every_older_version_is_migrated_on_connect() {
    assert_eq!(SCHEMA_VERSION, 10);
    for case in CASES {
        eprintln!("case: {}", case.name);
        let db = TestDb::new();
        let seen = (case.build)(&db);
        assert_eq!(version(&db), case.from, "{}", case.name);
        let mut store = db.store();
        assert_eq!(version(&db), SCHEMA_VERSION, "{}", case.name);
        let seen = (case.migrated)(&db, &mut store, seen);
        drop(store);
        let mut again = db.store();
        assert_eq!(version(&db), SCHEMA_VERSION, "{}", case.name);
        (case.again)(&db, &mut again, seen);
    }
}

/// Connecting (as the job or a reader does) migrated: every row kept, one reason constraint
/// that takes every reason; the new reasons commit and read back.
fn migrated_v1(db: &TestDb, store: &mut PostgresStore, seen: Seen) -> Seen {
    let before = seen.letters;
    assert_eq!(letters(db), before, "every dead letter kept, with its id");
    let checks: Vec<String> = db
        .client()
        .query(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint \
             WHERE conrelid = 'dead_letters'::regclass AND contype = 'c' AND conname <> 'dead_letters_count_check'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert!(
        checks[0].contains("future") && checks[0].contains("too_large"),
        "{checks:?}"
    );

    let mut b = batch(3, vec![]);
    b.dead_letters = vec![
        letter(4, DeadReason::Future, b"{}"),
        letter(5, DeadReason::TooLarge, b"x"),
    ];
    assert!(store.commit(&b).unwrap());
    let after = letters(db);
    assert_eq!(after[..3], before[..]);
    assert_eq!(
        after[3..].iter().map(|l| l.1.as_str()).collect::<Vec<_>>(),
        ["future", "too_large"]
    );
    let old = store.latest(JOB, "1m").unwrap().expect("the list");
    assert_eq!((old.revision, old.exact, old.error_bound), (2, true, 0));
    assert_eq!(store.dead_letter_counts(JOB).unwrap().len(), 5);
    Seen {
        letters: after,
        ..Seen::default()
    }
}

/// The old list kept and exact (`exact`, `error_bound = 0`, no sketch check, in the header and
/// in every row); an approximate list then commits and reads back.
fn migrated_v2(db: &TestDb, store: &mut PostgresStore, _: Seen) -> Seen {
    let old = store.latest(JOB, "1m").unwrap().expect("the list");
    assert_eq!((old.revision, old.items.len()), (2, 2));
    assert_eq!((old.exact, old.error_bound, old.sketch_check), (true, 0, None));
    let header = db
        .client()
        .query_one(
            "SELECT exact, error_bound, num_nulls(sketch_found, sketch_of, sketch_max_overcount, \
             sketch_total_overcount) FROM topk_instances",
            &[],
        )
        .unwrap();
    assert_eq!(
        (
            header.get::<_, bool>(0),
            header.get::<_, i64>(1),
            header.get::<_, i32>(2)
        ),
        (true, 0, 4)
    );
    let rows: Vec<(bool, i64)> = db
        .client()
        .query("SELECT exact, error_bound FROM topk ORDER BY rank", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows, [(true, 0), (true, 0)]);

    let sketched = approximate(list(60_000, 1, 2), 37, Some(sketch_check(1, 2)));
    assert!(store.commit(&batch(3, vec![sketched.clone()])).unwrap());
    assert_eq!(
        store.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(sketched.clone()))
    );
    assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap(), Some(old));
    Seen {
        list: Some(StoredList::from(sketched)),
        ..Seen::default()
    }
}

/// The hot-key window committed after migrating a version-3 schema.
fn v3_hot() -> HotWindow {
    hot_window(0, &[("a", 12.5, HotState::Hot), ("b", 7.25, HotState::Cooling)])
}

/// The lists written before stay; hot-key windows commit.
fn migrated_v3(_: &TestDb, w: &mut PostgresStore, _: Seen) -> Seen {
    assert_eq!(
        w.latest(JOB, "1m").unwrap().map(|l| l.items.len()),
        Some(2),
        "the old rows stay"
    );
    assert_eq!(w.hot_keys(JOB).unwrap(), None);
    let mut b = batch(2, vec![]);
    b.hot_keys = vec![v3_hot()];
    assert!(w.commit(&b).unwrap());
    Seen::default()
}

/// The tables whose columns and primary keys version 5 changed.
const KEYED_TABLES: [&str; 3] = ["topk", "topk_instances", "hotlist_windows"];

/// The migrated tables have the new tables' columns and keys, the lists written before stay,
/// and per-group lists commit.
fn migrated_v4(db: &TestDb, w: &mut PostgresStore, seen: Seen) -> Seen {
    let migrated: Vec<_> = KEYED_TABLES.map(|t| key_shape(db, t)).into();
    assert_eq!(
        migrated, seen.keys,
        "migrated tables have the new tables' columns and keys"
    );
    assert_eq!(
        w.latest(JOB, "1m").unwrap().map(|l| l.items.len()),
        Some(3),
        "the old rows stay"
    );
    assert_eq!(
        w.instance(JOB, "1m", Millis(0)).unwrap().map(|l| l.items.len()),
        Some(2)
    );
    assert!(w.windows(JOB).unwrap().iter().all(|w| w.by.is_empty()));
    let mut specs = windows();
    specs[1].key.by = vec!["country".into()];
    w.prepare(JOB, &specs).unwrap();
    let mut grouped = list(60_000, 1, 1);
    grouped.group = GroupKey::from_pairs([("country", "US")]);
    assert!(w.commit(&batch(2, vec![grouped])).unwrap());
    Seen::default()
}

/// A new connection reads the per-group list, the window's dims and its groups.
fn again_v4(_: &TestDb, r: &mut PostgresStore, _: Seen) {
    let us = GroupKey::from_pairs([("country", "US")]);
    assert_eq!(r.latest_of(JOB, "1m", &us).unwrap().map(|l| l.items.len()), Some(1));
    assert_eq!(r.windows(JOB).unwrap()[1].by, vec!["country".to_string()]);
    assert_eq!(
        r.groups(JOB, "1m").unwrap(),
        Some((Millis(60_000), vec![GroupKey::global(), us]))
    );
}

/// The approximate list at 60 000 a version-5 schema holds.
fn v5_sketched() -> PublishedList {
    approximate(list(60_000, 1, 3), 37, Some(sketch_check(2, 3)))
}

/// The certified list committed after migrating a version-5 schema.
fn v5_proved() -> PublishedList {
    certified(list(120_000, 3, 3), 40, 2)
}

/// The migrated table has the new table's columns and checks; the old lists stay, without a
/// certificate; a certified list commits.
fn migrated_v5(db: &TestDb, w: &mut PostgresStore, seen: Seen) -> Seen {
    assert_eq!(
        Some(instances_shape(db)),
        seen.instances,
        "the migrated table has the new table's columns, in order, and checks"
    );
    assert_eq!(
        w.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(v5_sketched())),
        "the old lists stay"
    );
    assert_eq!(
        w.instance(JOB, "1m", Millis(0)).unwrap(),
        Some(StoredList::from(list(0, 3, 2))),
        "no certificate"
    );
    assert!(w.commit(&batch(2, vec![v5_proved()])).unwrap());
    Seen::default()
}

/// The migrated table has the new table's columns and checks; the old letters stay, each one
/// whole; summaries of one block add up in one row.
fn migrated_v6(db: &TestDb, w: &mut PostgresStore, seen: Seen) -> Seen {
    assert_eq!(
        Some(table_shape(db, "dead_letters")),
        seen.instances,
        "the migrated table has the new table's columns, in order, and checks"
    );
    assert_eq!(letters(db), seen.letters, "the old letters stay");
    let mut b = batch(2, Vec::new());
    b.dead_letters = vec![summary(20, 30, 4, DeadReason::Bad)];
    assert!(w.commit(&b).unwrap());
    b.epoch = 3;
    b.dead_letters = vec![summary(12, 40, 3, DeadReason::Bad)];
    assert!(w.commit(&b).unwrap());
    assert_eq!(
        w.dead_letters(JOB, 1).unwrap(),
        vec![summary(12, 40, 7, DeadReason::Bad)],
        "one summary row for the block"
    );
    let mut reader = seen.reader.expect("the reader opened before");
    assert_eq!(
        reader.dead_letters(JOB, 1).unwrap(),
        vec![summary(12, 40, 7, DeadReason::Bad)],
        "the reader opened before sees it"
    );
    assert_eq!(
        reader.dead_letter_counts(JOB).unwrap(),
        [("bad".to_string(), 1 + 7), ("late".to_string(), 1)]
    );
    Seen::default()
}

/// The migrated table is the new table; the old list stays, without ranges; ranges commit and
/// read back, also through the reader opened on the version-8 schema.
fn migrated_v8(db: &TestDb, w: &mut PostgresStore, seen: Seen) -> Seen {
    assert_eq!(
        Some(table_shape(db, "instance_ranges")),
        seen.instances,
        "the migrated table has the new table's columns, in order, and checks"
    );
    assert_eq!(w.latest(JOB, "1m").unwrap(), seen.list, "the old list stays");
    assert_eq!(w.sealed_ranges(JOB, "1m", Millis(0)).unwrap(), None);
    let mut b = batch(2, vec![]);
    b.ranges = vec![sealed("1m", 0), unreadable("1m", 60_000, "gone")];
    assert!(w.commit(&b).unwrap());
    let mut reader = seen.reader.expect("the reader opened before");
    for r in [&mut *w, &mut reader] {
        assert_eq!(r.sealed_ranges(JOB, "1m", Millis(0)).unwrap(), Some(sealed("1m", 0)));
        assert_eq!(
            r.sealed_ranges(JOB, "1m", Millis(60_000)).unwrap(),
            Some(unreadable("1m", 60_000, "gone"))
        );
        assert_eq!(r.sealed_instances(JOB, "1m", Millis(1), 10).unwrap(), [Millis(60_000)]);
    }
    assert_eq!(reader.latest(JOB, "1m").unwrap(), seen.list);
    Seen::default()
}

/// The migrated table has the new table's columns and checks; the old list stays a
/// count-ranked one; a trend list commits and reads back whole, also through the reader opened
/// on the version-7 schema.
fn migrated_v7(db: &TestDb, w: &mut PostgresStore, seen: Seen) -> Seen {
    assert_eq!(
        Some(table_shape(db, "topk")),
        seen.instances,
        "the migrated table has the new table's columns, in order, and checks"
    );
    assert_eq!(w.latest(JOB, "1m").unwrap(), seen.list, "the old list stays");
    let trend = trending(120_000, 3);
    assert!(w.commit(&batch(2, vec![trend.clone()])).unwrap());
    assert_eq!(w.latest(JOB, "1m").unwrap(), Some(StoredList::from(trend.clone())));
    let mut reader = seen.reader.expect("the reader opened before");
    assert_eq!(
        reader.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(trend)),
        "the reader opened before sees it"
    );
    assert_eq!(reader.instance(JOB, "1m", Millis(0)).unwrap(), seen.list);
    Seen::default()
}

/// The dead letters [`v9_schema`] holds, as a reader returns them (newest first).
fn v9_letters() -> Vec<SourcedDeadLetter> {
    vec![
        summary(4, 9, 4, DeadReason::Late),
        letter(3, DeadReason::TooLarge, b"x"),
        letter(2, DeadReason::Future, b"{}"),
        letter(1, DeadReason::Bad, b"[]"),
    ]
}

/// The letters per reason of [`v9_schema`], with `udf` ones when there are any.
fn v9_counts(udf: u64) -> Vec<(String, u64)> {
    let mut counts = vec![
        ("bad".to_string(), 1),
        ("future".to_string(), 1),
        ("late".to_string(), 4),
        ("too_large".to_string(), 1),
    ];
    if udf > 0 {
        counts.push(("udf".to_string(), udf));
    }
    counts
}

/// The migrated table has the new table's columns and constraints (one reason check, which
/// takes `udf`); the old letters stay, with their ids, counts and last positions, and so do the
/// list and its ranges; `udf` letters, whole and summarised, commit and read back, also through
/// the reader opened on the version-9 schema; a reason no version knows is still refused.
fn migrated_v9(db: &TestDb, w: &mut PostgresStore, seen: Seen) -> Seen {
    assert_eq!(
        Some(table_shape(db, "dead_letters")),
        seen.instances,
        "the migrated table has the new table's columns, in order, and checks"
    );
    assert_eq!(letters(db), seen.letters, "every dead letter kept, with its id");
    assert_eq!(w.dead_letters(JOB, 10).unwrap(), v9_letters());
    assert_eq!(w.latest(JOB, "1m").unwrap(), seen.list, "the old list stays");
    assert_eq!(
        w.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
        Some(unreadable("1m", 0, "gone"))
    );
    let udf = letter(10, DeadReason::Udf, br#"{"item_id":"a"}"#);
    let mut b = batch(3, vec![]);
    b.dead_letters = vec![udf.clone(), summary(11, 20, 3, DeadReason::Udf)];
    assert!(w.commit(&b).unwrap());
    let want = vec![summary(11, 20, 3, DeadReason::Udf), udf];
    let mut reader = seen.reader.expect("the reader opened before");
    for r in [&mut *w, &mut reader] {
        assert_eq!(r.dead_letters(JOB, 2).unwrap(), want);
        assert_eq!(r.dead_letter_counts(JOB).unwrap(), v9_counts(1 + 3));
    }
    let after = letters(db);
    assert_eq!(after[..4], seen.letters[..]);
    assert_eq!(
        after[4..].iter().map(|l| l.1.as_str()).collect::<Vec<_>>(),
        ["udf", "udf"]
    );
    let other = "INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, \
                 recorded_at) VALUES ('hotlist', 's', 0, 30, 'other', 'd', '\\x', 4, now())";
    assert!(
        db.client().batch_execute(other).is_err(),
        "an unknown reason is refused"
    );
    Seen {
        letters: after,
        ..Seen::default()
    }
}

/// [`v9_schema`]'s DDL is what version 9 created: a schema of this build taken back to version
/// 9 has the same tables (columns, constraints) and indexes.
#[test]
fn the_version_9_ddl_is_what_version_9_created() {
    let verbatim = TestDb::new();
    v9_schema(&verbatim);
    let taken_back = TestDb::new();
    drop(taken_back.store());
    downgrade_to_v9(&taken_back, 9);
    assert_eq!(version(&verbatim), 9);
    assert_eq!(version(&taken_back), 9);
    assert_eq!(schema_shape(&taken_back), schema_shape(&verbatim));
}

/// Every table of the test schema with its [`table_shape`], and every index's definition
/// (without the schema's name), by name.
fn schema_shape(db: &TestDb) -> SchemaShape {
    let mut c = db.client();
    let tables: Vec<String> = c
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
            &[&db.schema],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let indexes = c
        .query(
            "SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY 1",
            &[&db.schema],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get::<_, String>(1).replace(&format!("{}.", db.schema), "")))
        .collect();
    let tables = tables.into_iter().map(|t| (t.clone(), table_shape(db, &t))).collect();
    (tables, indexes)
}

/// Processes connecting at once to a version-1 schema: one migrates, every connect succeeds.
#[test]
fn simultaneous_connects_migrate_once() {
    let db = TestDb::new();
    v1_schema(&db);
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        let connects: Vec<_> = (0..4)
            .map(|_| {
                let (db, start) = (&db, &start);
                s.spawn(move || {
                    start.wait();
                    PostgresStore::connect_with_schema(&db.url, &db.schema).map(|_| ())
                })
            })
            .collect();
        for c in connects {
            c.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
        }
    });
    assert_eq!(version(&db), SCHEMA_VERSION);
    assert_eq!(letters(&db).len(), 3);
}

/// A schema migrated from version 2 has the tables a new one gets: the same columns (types,
/// nullability, defaults) and the same constraints under the same names, so the same rows are
/// refused.
#[test]
fn migrated_tables_are_the_new_tables() {
    let new = TestDb::new();
    drop(new.store());
    let migrated = TestDb::new();
    v2_schema(&migrated);
    drop(migrated.store());
    let (new_shape, migrated_shape) = (list_tables_shape(&new), list_tables_shape(&migrated));
    assert_eq!(migrated_shape, new_shape);
    let names: Vec<&str> = new_shape.1.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "topk_error_bound_check",
        "topk_exact_check",
        "topk_instances_error_bound_check",
        "topk_instances_exact_check",
        "topk_instances_sketch_check",
        "topk_baseline_check",
        "topk_trend_check",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
}

/// Rows a version-3 table refuses: `error_bound` negative or non-zero on an exact list, a
/// partial sketch check, one that found more than it compared or has a negative over-count.
#[test]
fn the_constraints_refuse_impossible_accuracy() {
    let db = TestDb::new();
    drop(db.store());
    let header = "INSERT INTO topk_instances (job, window_name, window_start, window_end, revision, state, final, \
                  watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of, sketch_max_overcount, \
                  sketch_total_overcount) VALUES ('j', 'w', now(), now(), 1, 'open', false, now(), now(), 0, ";
    let row = "INSERT INTO topk (job, window_name, window_start, window_end, rank, item_id, count, revision, final, \
               state, as_of, exact, error_bound) VALUES ('j', 'w', now(), now(), 1, 'a', 1, 1, false, 'open', now(), ";
    let cases = [
        (header, "false, 37, 2, 3, 5, 9)", false),
        (header, "true, 0, NULL, NULL, NULL, NULL)", false),
        (header, "false, 0, 0, 0, 0, 0)", false),
        (header, "false, -1, NULL, NULL, NULL, NULL)", true),
        (header, "true, 5, NULL, NULL, NULL, NULL)", true),
        (header, "false, 1, 2, NULL, 5, 9)", true),
        (header, "false, 1, NULL, NULL, NULL, 9)", true),
        (header, "false, 1, 4, 3, 5, 9)", true),
        (header, "false, 1, -1, 3, 5, 9)", true),
        (header, "false, 1, 2, 3, -5, 9)", true),
        (header, "false, 1, 2, 3, 5, -9)", true),
        (row, "false, 37)", false),
        (row, "true, 0)", false),
        (row, "true, 5)", true),
        (row, "false, -1)", true),
    ];
    let mut c = db.client();
    for (insert, values, refused) in cases {
        let mut tx = c.transaction().unwrap();
        let got = tx.batch_execute(&format!("{insert}{values}")).is_err();
        tx.rollback().unwrap();
        assert_eq!(got, refused, "{insert}{values}");
    }
}

/// Headers a version-6 table refuses: a partial certificate, a threshold or passes below 1, a
/// negative count, a certificate on a list that is not exact or not final.
#[test]
fn the_check_refuses_impossible_certificates() {
    let db = TestDb::new();
    drop(db.store());
    let header = "INSERT INTO topk_instances (job, window_name, window_start, window_end, revision, state, final, \
                  watermark, as_of, item_count, exact, error_bound, certificate_threshold, certificate_counted, \
                  certificate_passes) VALUES ('j', 'w', now(), now(), 3, ";
    let cases = [
        ("'final', true, now(), now(), 0, true, 0, 40, 17, 2)", false),
        ("'final', true, now(), now(), 0, true, 0, NULL, NULL, NULL)", false),
        ("'open', false, now(), now(), 0, false, 37, NULL, NULL, NULL)", false),
        ("'final', true, now(), now(), 0, true, 0, 1, 0, 1)", false),
        ("'final', true, now(), now(), 0, false, 37, 40, 17, 2)", true),
        ("'closed', false, now(), now(), 0, true, 0, 40, 17, 2)", true),
        ("'final', true, now(), now(), 0, true, 0, 0, 17, 2)", true),
        ("'final', true, now(), now(), 0, true, 0, 40, -1, 2)", true),
        ("'final', true, now(), now(), 0, true, 0, 40, 17, 0)", true),
        ("'final', true, now(), now(), 0, true, 0, 40, NULL, 2)", true),
        ("'final', true, now(), now(), 0, true, 0, NULL, NULL, 2)", true),
        ("'final', true, now(), now(), 0, true, 0, 40, 17, NULL)", true),
    ];
    let mut c = db.client();
    for (values, refused) in cases {
        let mut tx = c.transaction().unwrap();
        let got = tx.batch_execute(&format!("{header}{values}")).is_err();
        tx.rollback().unwrap();
        assert_eq!(got, refused, "{header}{values}");
    }
}

/// Rows a version-8 `topk` refuses: a negative baseline, some of the trend columns without
/// the others.
#[test]
fn the_trend_checks_refuse_impossible_rows() {
    let db = TestDb::new();
    drop(db.store());
    let row = "INSERT INTO topk (job, window_name, window_start, window_end, rank, item_id, count, revision, final, \
               state, as_of, baseline, score, history) VALUES ('j', 'w', now(), now(), 1, 'a', 5, 1, false, 'open', \
               now(), ";
    let cases = [
        ("3, 1.5, '1,1,1')", false),
        ("0, 5.0, '0,0,0')", false),
        ("NULL, NULL, NULL)", false),
        ("-1, 1.5, '1,1,1')", true),
        ("3, NULL, '1,1,1')", true),
        ("NULL, 1.5, '1,1,1')", true),
        ("3, 1.5, NULL)", true),
        ("NULL, NULL, '1,1,1')", true),
    ];
    let mut c = db.client();
    for (values, refused) in cases {
        let mut tx = c.transaction().unwrap();
        let got = tx.batch_execute(&format!("{row}{values}")).is_err();
        tx.rollback().unwrap();
        assert_eq!(got, refused, "{row}{values}");
    }
}

/// (id, reason, position) of every dead letter.
fn letters(db: &TestDb) -> Vec<(i64, String, i64)> {
    let rows = db
        .client()
        .query("SELECT id, reason, position FROM dead_letters ORDER BY id", &[])
        .unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect()
}

fn version(db: &TestDb) -> i64 {
    db.client()
        .query_one("SELECT version FROM hotlist_schema", &[])
        .unwrap()
        .get(0)
}

/// A column: name (`table.name` in [`list_tables_shape`]), type, nullable, default.
type Column = (String, String, String, Option<String>);

/// Columns and constraints (name, definition), in a stable order.
type Shape = (Vec<Column>, Vec<(String, String)>);

/// Every table's [`Shape`] and every index's definition, by name.
type SchemaShape = (Vec<(String, Shape)>, Vec<(String, String)>);

/// A table's columns (name, type, default) and primary-key definition.
type KeyShape = (Vec<(String, String, Option<String>)>, String);

/// The columns of the lists' tables and their constraints (name, definition), in a stable
/// order.
fn list_tables_shape(db: &TestDb) -> Shape {
    let mut c = db.client();
    let columns = c
        .query(
            "SELECT table_name::text || '.' || column_name::text, data_type::text, is_nullable::text,
                    column_default::text
             FROM information_schema.columns
             WHERE table_schema = $1 AND table_name IN ('topk', 'topk_instances')
             ORDER BY table_name, column_name",
            &[&db.schema],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let constraints = c
        .query(
            "SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint
             WHERE conrelid IN ('topk'::regclass, 'topk_instances'::regclass) ORDER BY conname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    (columns, constraints)
}

/// The columns of `topk_instances` and its constraints (name, definition), in a stable order.
fn instances_shape(db: &TestDb) -> Shape {
    table_shape(db, "topk_instances")
}

/// The columns of `table` and its constraints (name, definition), in a stable order.
fn table_shape(db: &TestDb, table: &str) -> Shape {
    let mut c = db.client();
    let columns = c
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text, column_default::text
             FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
            &[&db.schema, &table],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let constraints = c
        .query(
            "SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint
             WHERE conrelid = $1::text::regclass ORDER BY conname",
            &[&table],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    (columns, constraints)
}

/// The columns and primary-key definition of `table`.
fn key_shape(db: &TestDb, table: &str) -> KeyShape {
    let mut c = db.client();
    let columns = c
        .query(
            "SELECT column_name::text, data_type::text, column_default::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY column_name",
            &[&table],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let key: String = c
        .query_one(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint
             WHERE conrelid = $1::text::regclass AND contype = 'p'",
            &[&table],
        )
        .unwrap()
        .get(0);
    (columns, key)
}

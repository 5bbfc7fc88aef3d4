//! Every older schema version, one table of cases and one test body: a database of that
//! version (`old_schemas`: its DDL verbatim, or a new database taken back to it) is read as it
//! is by a reader of this build, which never migrates it; the job's `open` migrates it to
//! [`SCHEMA_VERSION`], after which what the version lacked commits and reads back (also
//! through the reader opened before), and opening it again changes nothing.
//!
//! The versions: 1 → 2 rebuilds `dead_letters` with the reasons `future` and `too_large` (every
//! row and id kept, the index back); 2 → 3 adds the accuracy columns (every old row exact);
//! 3 → 4 only adds the hot-key tables; 4 → 5 rebuilds the list tables and `hotlist_windows` for
//! per-group lists (every old list global); 5 → 6 rebuilds `topk_instances` with the
//! certificate's columns (no old list certified); 6 → 7 adds dead-letter counts; 7 → 8 adds
//! the trend columns (no old list is a trend list); 8 → 9 creates `instance_ranges` (no
//! instance sealed before has ranges); 9 → 10 rebuilds `dead_letters` with the reason `udf`
//! (every row and id kept, whole letters and summaries, the indexes back). The tables a
//! migration leaves are the tables a new database gets, and they refuse the same impossible
//! rows.

use super::old_schemas::{
    downgrade_to_v8, downgrade_to_v9, v1_database, v2_database, v3_database, v4_database, v5_database, v5_sketched,
    v6_database, v7_database, v8_database, v9_database, V8_DDL, V9_DDL,
};
use super::*;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{
    approximate, batch, certified, hot_window, letter, list, sealed, sketch_check, summary, trending, unreadable,
    windows, JOB,
};
use crate::types::SourcedDeadLetter;
use hotlist_operators::hot_keys::HotState;
use hotlist_operators::record::DeadReason;

/// What one step of a case saw, for a later step to compare with.
#[derive(Default)]
struct Seen {
    /// (id, reason, position) of every dead letter.
    letters: Vec<(i64, String, i64)>,
    /// A list.
    list: Option<StoredList>,
}

/// One migration case: a database of an older version and what must hold of it before and
/// after the job's `open` migrated it.
struct Case {
    /// What the case shows.
    name: &'static str,
    /// The version the database is stamped.
    from: i64,
    /// Creates the database in a directory.
    build: fn(&Path) -> PathBuf,
    /// What a reader of this build reads in it before the migration.
    read: fn(&Path, &mut SqliteStore) -> Seen,
    /// What holds once the job's `open` migrated it: the writer, then the reader opened before.
    migrated: fn(&Path, &mut SqliteStore, &mut SqliteStore, Seen) -> Seen,
    /// What holds after opening the migrated database again.
    reopened: fn(&Path, &SqliteStore, Seen),
    /// Whether the migrated tables must be the new tables (same `CREATE` statements).
    same_tables: bool,
}

const CASES: [Case; 11] = [
    Case {
        name: "a version-1 database is read as it is",
        from: 1,
        build: v1_database,
        read: read_v1,
        migrated: |_, _, _, seen| seen,
        reopened: |_, _, _| {},
        same_tables: false,
    },
    Case {
        name: "a version-1 database is migrated by the writer",
        from: 1,
        build: v1_database,
        read: |path, _| Seen {
            letters: letters(path),
            list: None,
        },
        migrated: migrated_v1,
        reopened: |path, _, seen| {
            assert_eq!(
                letters(path),
                seen.letters,
                "opening a version-3 database again changes nothing"
            );
        },
        same_tables: false,
    },
    Case {
        name: "a version-2 database is read as it is and after its migration",
        from: 2,
        build: v2_database,
        read: read_v2,
        migrated: |_, w, r, seen| {
            let sketched = approximate(list(60_000, 1, 1), 37, Some(sketch_check(1, 1)));
            assert!(w.commit(&batch(3, vec![sketched.clone()])).unwrap());
            assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(sketched)));
            assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap(), seen.list);
            Seen::default()
        },
        reopened: |_, _, _| {},
        same_tables: false,
    },
    Case {
        name: "a version-2 database is migrated by the writer",
        from: 2,
        build: v2_database,
        read: read_v2,
        migrated: migrated_v2,
        reopened: |path, w, seen| {
            assert_eq!(user_version(path), SCHEMA_VERSION);
            assert_eq!(
                w.latest(JOB, "1m").unwrap(),
                seen.list,
                "opening a version-3 database again changes nothing"
            );
        },
        same_tables: false,
    },
    Case {
        name: "a version-3 database is read as it is, then migrated",
        from: 3,
        build: v3_database,
        read: |_, r| {
            assert_eq!(r.hot_keys(JOB).unwrap(), None, "no hot-key tables: no hot keys");
            assert_eq!(r.latest(JOB, "1m").unwrap().map(|l| l.items.len()), Some(2));
            Seen::default()
        },
        migrated: migrated_v3,
        reopened: |_, w, _| {
            assert_eq!(
                w.hot_keys(JOB).unwrap(),
                Some(v3_hot()),
                "opening again changes nothing"
            );
        },
        same_tables: false,
    },
    Case {
        name: "a version-4 database is read as it is, then migrated",
        from: 4,
        build: v4_database,
        read: read_v4,
        migrated: migrated_v4,
        reopened: |_, _, _| {},
        same_tables: true,
    },
    Case {
        name: "a version-5 database is read as it is, then migrated",
        from: 5,
        build: v5_database,
        read: |_, r| {
            assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(v5_sketched())));
            assert_eq!(
                r.instance(JOB, "1m", Millis(0)).unwrap(),
                Some(StoredList::from(list(0, 3, 2))),
                "no certificate"
            );
            Seen::default()
        },
        migrated: migrated_v5,
        reopened: |_, w, _| {
            assert_eq!(
                w.latest(JOB, "1m").unwrap(),
                Some(StoredList::from(v5_proved())),
                "opening again changes nothing"
            );
        },
        same_tables: true,
    },
    Case {
        name: "a version-6 database is read as it is, then migrated",
        from: 6,
        build: v6_database,
        read: |path, r| {
            let got = r.dead_letters(JOB, 10).unwrap();
            assert_eq!(got.len(), 3);
            assert!(got.iter().all(|d| d.count == 1 && !d.is_summary()), "{got:?}");
            assert_eq!(
                r.dead_letter_counts(JOB).unwrap(),
                [("bad".to_string(), 2), ("late".to_string(), 1)]
            );
            Seen {
                letters: letters(path),
                ..Seen::default()
            }
        },
        migrated: migrated_v6,
        reopened: |_, w, _| {
            assert_eq!(
                w.dead_letter_counts(JOB).unwrap(),
                [("bad".to_string(), 2 + 7), ("late".to_string(), 1)],
                "opening again changes nothing"
            );
        },
        same_tables: true,
    },
    Case {
        name: "a version-7 database is read as it is, then migrated",
        from: 7,
        build: v7_database,
        read: |_, r| {
            let got = r.latest(JOB, "1m").unwrap().expect("a list");
            assert!(got.items.iter().all(|i| i.trend.is_none()), "count-ranked lists");
            Seen {
                list: Some(got),
                ..Seen::default()
            }
        },
        migrated: migrated_v7,
        reopened: |_, w, _| {
            assert_eq!(
                w.latest(JOB, "1m").unwrap(),
                Some(StoredList::from(trending(120_000, 3))),
                "opening again changes nothing"
            );
        },
        same_tables: true,
    },
    Case {
        name: "a version-8 database is read as it is, then migrated",
        from: 8,
        build: v8_database,
        read: |_, r| {
            assert_eq!(
                r.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
                None,
                "no ranges table: no ranges"
            );
            assert_eq!(
                r.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(),
                Vec::<Millis>::new()
            );
            let got = r.latest(JOB, "1m").unwrap().expect("a list");
            assert_eq!((got.start, got.revision, got.items.len()), (Millis(0), 3, 2));
            Seen {
                list: Some(got),
                ..Seen::default()
            }
        },
        migrated: migrated_v8,
        reopened: |_, w, _| {
            assert_eq!(
                w.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
                Some(sealed("1m", 0)),
                "opening again changes nothing"
            );
            assert_eq!(
                w.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(),
                [Millis(0), Millis(60_000)]
            );
        },
        same_tables: true,
    },
    Case {
        name: "a version-9 database is read as it is, then migrated",
        from: 9,
        build: v9_database,
        read: |path, r| {
            assert_eq!(r.dead_letters(JOB, 10).unwrap(), v9_letters());
            assert_eq!(r.dead_letter_counts(JOB).unwrap(), v9_counts(0));
            assert_eq!(
                r.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
                Some(unreadable("1m", 0, "gone"))
            );
            let got = r.latest(JOB, "1m").unwrap().expect("a list");
            assert_eq!((got.start, got.revision, got.items.len()), (Millis(0), 3, 2));
            Seen {
                letters: letters(path),
                list: Some(got),
            }
        },
        migrated: migrated_v9,
        reopened: |path, w, seen| {
            assert_eq!(letters(path), seen.letters, "opening again changes nothing");
            assert_eq!(w.dead_letter_counts(JOB).unwrap(), v9_counts(1 + 3));
        },
        same_tables: true,
    },
];

/// Every case: build, read as it is (a reader never migrates), migrate by opening as the job,
/// check, open again, check; and where asked, the migrated tables are the new tables.
#[test]
fn every_older_version_is_read_as_it_is_then_migrated() {
    assert_eq!(SCHEMA_VERSION, 10);
    for case in CASES {
        eprintln!("case: {}", case.name);
        let dir = tempfile::tempdir().unwrap();
        let path = (case.build)(dir.path());
        let mut r = SqliteStore::open_read_only(&path).unwrap();
        let seen = (case.read)(&path, &mut r);
        assert_eq!(user_version(&path), case.from, "{}: a reader never migrates", case.name);
        let mut w = SqliteStore::open(&path).unwrap();
        assert_eq!(user_version(&path), SCHEMA_VERSION, "{}", case.name);
        let seen = (case.migrated)(&path, &mut w, &mut r, seen);
        drop(w);
        let w = SqliteStore::open(&path).unwrap();
        (case.reopened)(&path, &w, seen);
        if case.same_tables {
            let new = dir.path().join("new.db");
            SqliteStore::open(&new).unwrap();
            assert_eq!(
                tables(&path),
                tables(&new),
                "{}: migrated tables are the new tables",
                case.name
            );
        }
    }
}

/// A database migrated from version 2 (or 1) has the tables a new one gets: the same columns
/// with the same types, defaults and keys, and the same rows refused: `exact` other than 0 or
/// 1, a negative or an exact list's non-zero `error_bound`, a partial sketch check, one that
/// found more than it compared or has a negative over-count.
#[test]
fn migrated_tables_are_the_new_tables() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.db");
    SqliteStore::open(&new).unwrap();
    let migrated = v2_database(dir.path());
    SqliteStore::open(&migrated).unwrap();
    for table in ["topk", "topk_instances"] {
        assert_eq!(columns(&migrated, table), columns(&new, table), "{table}");
    }
    let header = "INSERT INTO topk_instances (job, window_name, window_start, window_end, revision, state, final, \
                  watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of, sketch_max_overcount, \
                  sketch_total_overcount) VALUES ('j', 'w', 0, 1, 1, 'open', 0, 0, 0, 0, ";
    let row = "INSERT INTO topk (job, window_name, window_start, window_end, rank, item_id, count, revision, final, \
               state, as_of, exact, error_bound) VALUES ('j', 'w', 0, 1, 1, 'a', 1, 1, 0, 'open', 0, ";
    let cases = [
        (header, "0, 37, 2, 3, 5, 9)", false),
        (header, "1, 0, NULL, NULL, NULL, NULL)", false),
        (header, "0, 0, 0, 0, 0, 0)", false),
        (header, "2, 0, NULL, NULL, NULL, NULL)", true),
        (header, "0, -1, NULL, NULL, NULL, NULL)", true),
        (header, "1, 5, NULL, NULL, NULL, NULL)", true),
        (header, "0, 1, 2, NULL, 5, 9)", true),
        (header, "0, 1, NULL, NULL, NULL, 9)", true),
        (header, "0, 1, 4, 3, 5, 9)", true),
        (header, "0, 1, -1, 3, 5, 9)", true),
        (header, "0, 1, 2, 3, -5, 9)", true),
        (header, "0, 1, 2, 3, 5, -9)", true),
        (row, "0, 37)", false),
        (row, "1, 0)", false),
        (row, "2, 0)", true),
        (row, "1, 5)", true),
        (row, "0, -1)", true),
    ];
    let statements: Vec<String> = cases
        .iter()
        .map(|(insert, values, _)| format!("{insert}{values}"))
        .collect();
    let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
    let want: Vec<bool> = cases.iter().map(|c| c.2).collect();
    assert_eq!(refused(&new, &statements), want, "a new database");
    assert_eq!(refused(&migrated, &statements), want, "a migrated database");
}

/// Headers a version-6 table refuses: a partial certificate, a threshold or passes below 1, a
/// negative count, a certificate on a list that is not exact or not final.
#[test]
fn the_checks_refuse_impossible_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hot.db");
    SqliteStore::open(&path).unwrap();
    let conn = Connection::open(&path).unwrap();
    let header = "INSERT INTO topk_instances (job, window_name, window_start, window_end, revision, state, final, \
                  watermark, as_of, item_count, exact, error_bound, certificate_threshold, certificate_counted, \
                  certificate_passes) VALUES ('j', 'w', 0, 1, 3, ";
    let cases = [
        ("'final', 1, 1, 1, 0, 1, 0, 40, 17, 2)", false),
        ("'final', 1, 1, 1, 0, 1, 0, NULL, NULL, NULL)", false),
        ("'open', 0, 1, 1, 0, 0, 37, NULL, NULL, NULL)", false),
        ("'final', 1, 1, 1, 0, 1, 0, 1, 0, 1)", false),
        ("'final', 1, 1, 1, 0, 0, 37, 40, 17, 2)", true),
        ("'closed', 0, 1, 1, 0, 1, 0, 40, 17, 2)", true),
        ("'final', 1, 1, 1, 0, 1, 0, 0, 17, 2)", true),
        ("'final', 1, 1, 1, 0, 1, 0, 40, -1, 2)", true),
        ("'final', 1, 1, 1, 0, 1, 0, 40, 17, 0)", true),
        ("'final', 1, 1, 1, 0, 1, 0, 40, NULL, 2)", true),
        ("'final', 1, 1, 1, 0, 1, 0, NULL, NULL, 2)", true),
        ("'final', 1, 1, 1, 0, 1, 0, 40, 17, NULL)", true),
    ];
    for (values, refused) in cases {
        conn.execute_batch("BEGIN").unwrap();
        let got = conn.execute_batch(&format!("{header}{values}")).is_err();
        conn.execute_batch("ROLLBACK").unwrap();
        assert_eq!(got, refused, "{header}{values}");
    }
}

/// `PRAGMA table_xinfo` of `table`: (name, type, not null, default, primary key) per column.
fn columns(path: &Path, table: &str) -> Vec<(String, String, i64, Option<String>, i64)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn.prepare(&format!("PRAGMA table_xinfo({table})")).unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// Which of these statements the database at `path` refuses (each in a transaction rolled
/// back, so they do not see each other's rows).
fn refused(path: &Path, statements: &[&str]) -> Vec<bool> {
    let mut conn = Connection::open(path).unwrap();
    statements
        .iter()
        .map(|sql| {
            let tx = conn.transaction().unwrap();
            let refused = tx.execute_batch(sql).is_err();
            tx.rollback().unwrap();
            refused
        })
        .collect()
}

/// A reader of this build reads what an older job wrote.
fn read_v1(path: &Path, r: &mut SqliteStore) -> Seen {
    assert_eq!(r.windows(JOB).unwrap().len(), 1);
    let list = r.latest(JOB, "1m").unwrap().expect("the list");
    assert_eq!((list.revision, list.items.len()), (2, 1));
    assert_eq!((list.exact, list.error_bound, list.sketch_check), (true, 0, None));
    assert_eq!(r.last_commit(JOB).unwrap(), Some((2, Millis(60_001))));
    assert_eq!(r.dead_letters(JOB, 10).unwrap().len(), 3);
    assert_eq!(r.dead_letter_counts(JOB).unwrap().len(), 3);
    assert_eq!(user_version(path), 1, "a reader never migrates");
    Seen::default()
}

/// The job's `open` migrated: the old rows and ids kept, the index back, the old list exact,
/// and the new reasons and an approximate list commit after them.
fn migrated_v1(path: &Path, w: &mut SqliteStore, _: &mut SqliteStore, seen: Seen) -> Seen {
    let before = seen.letters;
    assert_eq!(letters(path), before, "every dead letter kept, with its id");
    let conn = Connection::open(path).unwrap();
    let index: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'dead_letters_job_reason' \
             AND tbl_name = 'dead_letters'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(index, 1, "the index is back on the rebuilt table");
    let leftovers: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'dead_letters_v2'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(leftovers, 0);

    let mut b = batch(3, vec![]);
    b.dead_letters = vec![
        letter(4, DeadReason::Future, b"{}"),
        letter(5, DeadReason::TooLarge, b"x"),
    ];
    assert!(w.commit(&b).unwrap());
    let after = letters(path);
    assert_eq!(after[..3], before[..]);
    assert_eq!(
        after[3..].iter().map(|l| l.1.as_str()).collect::<Vec<_>>(),
        ["future", "too_large"]
    );
    assert!(after[3].0 > 7, "new ids follow the old ones");
    let old = w.latest(JOB, "1m").unwrap().expect("the list");
    assert_eq!((old.revision, old.exact, old.error_bound), (2, true, 0));
    let sketched = approximate(list(60_000, 1, 2), 37, Some(sketch_check(1, 2)));
    assert!(w.commit(&batch(4, vec![sketched.clone()])).unwrap());
    assert_eq!(w.latest(JOB, "1m").unwrap(), Some(StoredList::from(sketched)));
    Seen {
        letters: after,
        list: None,
    }
}

/// The list a version-2 database holds, as a reader returns it: exact.
fn read_v2(_: &Path, r: &mut SqliteStore) -> Seen {
    let old = v2_list(r);
    assert_eq!((old.exact, old.error_bound, old.sketch_check), (true, 0, None));
    Seen {
        letters: Vec::new(),
        list: Some(old),
    }
}

/// The list `V2_ROWS` holds, as a reader returns it.
fn v2_list(store: &SqliteStore) -> StoredList {
    let list = store.latest(JOB, "1m").unwrap().expect("the list");
    assert_eq!((list.revision, list.items.len()), (2, 2));
    list
}

/// The old rows kept and exact (`exact = 1`, `error_bound = 0`, no sketch check, in the header
/// and in every row); an approximate list then commits and reads back.
fn migrated_v2(path: &Path, w: &mut SqliteStore, _: &mut SqliteStore, seen: Seen) -> Seen {
    assert_eq!(Some(v2_list(w)), seen.list);
    let conn = Connection::open(path).unwrap();
    let header: (i64, i64, Option<i64>, Option<i64>, Option<i64>, Option<i64>) = conn
        .query_row(
            "SELECT exact, error_bound, sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount
             FROM topk_instances",
            [],
            |r| r.try_into(),
        )
        .unwrap();
    assert_eq!(header, (1, 0, None, None, None, None));
    let rows: Vec<(i64, i64)> = conn
        .prepare("SELECT exact, error_bound FROM topk ORDER BY rank")
        .unwrap()
        .query_map([], |r| r.try_into())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows, [(1, 0), (1, 0)]);

    let sketched = approximate(list(0, 3, 1), 37, Some(sketch_check(1, 1)));
    assert!(w.commit(&batch(3, vec![sketched.clone()])).unwrap());
    assert_eq!(w.latest(JOB, "1m").unwrap(), Some(StoredList::from(sketched.clone())));
    Seen {
        letters: Vec::new(),
        list: Some(StoredList::from(sketched)),
    }
}

/// The hot-key window committed after migrating a version-3 database.
fn v3_hot() -> hotlist_operators::hot_keys::HotWindow {
    hot_window(0, &[("a", 12.5, HotState::Hot)])
}

/// The old rows stay; hot-key windows commit and the reader opened before sees them.
fn migrated_v3(_: &Path, w: &mut SqliteStore, r: &mut SqliteStore, _: Seen) -> Seen {
    assert_eq!(
        w.latest(JOB, "1m").unwrap().map(|l| l.items.len()),
        Some(2),
        "the old rows stay"
    );
    let hot = v3_hot();
    let mut b = batch(2, vec![]);
    b.hot_keys = vec![hot.clone()];
    assert!(w.commit(&b).unwrap());
    assert_eq!(
        r.hot_keys(JOB).unwrap(),
        Some(hot),
        "the reader opened before sees them"
    );
    Seen::default()
}

/// A version-4 database read as it is: every list global, every window without `by`.
fn read_v4(_: &Path, r: &mut SqliteStore) -> Seen {
    assert_eq!(r.latest(JOB, "1m").unwrap().map(|l| l.items.len()), Some(3));
    assert_eq!(
        r.instance(JOB, "1m", Millis(0)).unwrap().map(|l| l.items.len()),
        Some(2)
    );
    let us = GroupKey::from_pairs([("country", "US")]);
    assert_eq!(r.latest_of(JOB, "1m", &us).unwrap(), None);
    let groups = StoreReader::groups(r, JOB, "1m").unwrap();
    assert_eq!(groups, Some((Millis(60_000), vec![GroupKey::global()])));
    assert!(r.windows(JOB).unwrap().iter().all(|w| w.by.is_empty()));
    Seen::default()
}

/// The old rows and windows stay; per-group lists commit and the reader opened before sees
/// them.
fn migrated_v4(_: &Path, w: &mut SqliteStore, r: &mut SqliteStore, _: Seen) -> Seen {
    assert_eq!(
        w.latest(JOB, "1m").unwrap().map(|l| l.items.len()),
        Some(3),
        "the old rows stay"
    );
    assert_eq!(w.windows(JOB).unwrap().len(), 2, "the windows stay");
    let mut specs = windows();
    specs[1].key.by = vec!["country".into()];
    w.prepare(JOB, &specs).unwrap();
    let us = GroupKey::from_pairs([("country", "US")]);
    let mut grouped = list(60_000, 1, 1);
    grouped.group = us.clone();
    assert!(w.commit(&batch(2, vec![grouped])).unwrap());
    assert_eq!(
        r.latest_of(JOB, "1m", &us).unwrap().map(|l| l.items.len()),
        Some(1),
        "the reader sees it"
    );
    assert_eq!(r.windows(JOB).unwrap()[1].by, vec!["country".to_string()]);
    let groups = StoreReader::groups(r, JOB, "1m").unwrap();
    assert_eq!(groups, Some((Millis(60_000), vec![GroupKey::global(), us])));
    Seen::default()
}

/// The certified list committed after migrating a version-5 database.
fn v5_proved() -> hotlist_operators::message::PublishedList {
    certified(list(120_000, 3, 3), 40, 2)
}

/// The old headers stay; certified lists commit and the reader opened before sees them.
fn migrated_v5(_: &Path, w: &mut SqliteStore, r: &mut SqliteStore, _: Seen) -> Seen {
    assert_eq!(
        w.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(v5_sketched())),
        "the old headers stay"
    );
    assert_eq!(
        w.instance(JOB, "1m", Millis(0)).unwrap(),
        Some(StoredList::from(list(0, 3, 2)))
    );
    let proved = v5_proved();
    assert!(w.commit(&batch(2, vec![proved.clone()])).unwrap());
    assert_eq!(
        r.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(proved)),
        "the reader opened before sees it"
    );
    Seen::default()
}

/// The old letters stay, each one whole; summaries of one block add up in one row, which the
/// reader opened before sees; the stored count per block counts both.
fn migrated_v6(path: &Path, w: &mut SqliteStore, r: &mut SqliteStore, seen: Seen) -> Seen {
    assert_eq!(letters(path), seen.letters, "the old letters stay");
    let mut b = batch(2, Vec::new());
    b.dead_letters = vec![summary(20, 30, 4, DeadReason::Bad)];
    assert!(w.commit(&b).unwrap());
    b.epoch = 3;
    b.dead_letters = vec![summary(12, 40, 3, DeadReason::Bad)];
    assert!(w.commit(&b).unwrap());
    let got = r.dead_letters(JOB, 1).unwrap();
    assert_eq!(
        got,
        vec![summary(12, 40, 7, DeadReason::Bad)],
        "one summary row for the block"
    );
    assert_eq!(
        w.dead_letter_blocks(JOB).unwrap(),
        vec![(("file:events/a.jsonl".to_string(), 0), 3 + 7)]
    );
    Seen::default()
}

/// The old list stays a count-ranked one; a trend list commits and reads back whole, also
/// through the reader opened before.
fn migrated_v7(_: &Path, w: &mut SqliteStore, r: &mut SqliteStore, seen: Seen) -> Seen {
    assert_eq!(w.latest(JOB, "1m").unwrap(), seen.list, "the old list stays");
    let trend = trending(120_000, 3);
    assert!(w.commit(&batch(2, vec![trend.clone()])).unwrap());
    assert_eq!(
        r.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(trend)),
        "the reader opened before sees it"
    );
    Seen::default()
}

/// The old list stays and has no ranges; ranges commit with a batch (an instance that can be
/// read again and one that cannot) and read back, also through the reader opened before.
fn migrated_v8(_: &Path, w: &mut SqliteStore, r: &mut SqliteStore, seen: Seen) -> Seen {
    assert_eq!(w.latest(JOB, "1m").unwrap(), seen.list, "the old list stays");
    assert_eq!(w.sealed_ranges(JOB, "1m", Millis(0)).unwrap(), None);
    let mut b = batch(3, vec![]);
    b.ranges = vec![sealed("1m", 0), unreadable("1m", 60_000, "too many future rejections")];
    assert!(w.commit(&b).unwrap());
    for store in [&*w, &*r] {
        assert_eq!(
            store.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
            Some(sealed("1m", 0))
        );
        assert_eq!(
            store.sealed_ranges(JOB, "1m", Millis(60_000)).unwrap(),
            Some(unreadable("1m", 60_000, "too many future rejections"))
        );
    }
    assert_eq!(
        r.sealed_instances(JOB, "1m", Millis(1), 10).unwrap(),
        [Millis(60_000)],
        "the reader opened before sees them"
    );
    Seen::default()
}

/// The dead letters [`v9_database`] holds, as a reader returns them (newest first).
fn v9_letters() -> Vec<SourcedDeadLetter> {
    vec![
        summary(4, 9, 4, DeadReason::Late),
        letter(3, DeadReason::TooLarge, b"x"),
        letter(2, DeadReason::Future, b"{}"),
        letter(1, DeadReason::Bad, b"[]"),
    ]
}

/// The letters per reason of [`v9_database`], with `udf` ones when there are any.
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

/// The old letters stay, with their ids, counts and last positions; nothing of the old table
/// is left (its indexes are the new table's); `udf` letters, whole and summarised, commit and
/// read back, also through the reader opened before; a reason no version knows is still
/// refused.
fn migrated_v9(path: &Path, w: &mut SqliteStore, r: &mut SqliteStore, seen: Seen) -> Seen {
    assert_eq!(letters(path), seen.letters, "every dead letter kept, with its id");
    assert_eq!(w.dead_letters(JOB, 10).unwrap(), v9_letters());
    assert_eq!(w.latest(JOB, "1m").unwrap(), seen.list, "the old list stays");
    let new = path.with_file_name("new-v10.db");
    SqliteStore::open(&new).unwrap();
    assert_eq!(
        schema_objects(path),
        schema_objects(&new),
        "the migrated tables and indexes are the new ones, and nothing is left aside"
    );
    let mut b = batch(3, vec![]);
    b.dead_letters = vec![
        letter(10, DeadReason::Udf, b"{\"item_id\":\"a\"}"),
        summary(11, 20, 3, DeadReason::Udf),
    ];
    assert!(w.commit(&b).unwrap());
    let want = vec![
        summary(11, 20, 3, DeadReason::Udf),
        letter(10, DeadReason::Udf, b"{\"item_id\":\"a\"}"),
    ];
    for store in [&*w, &*r] {
        assert_eq!(store.dead_letters(JOB, 2).unwrap(), want);
        assert_eq!(store.dead_letter_counts(JOB).unwrap(), v9_counts(1 + 3));
    }
    let after = letters(path);
    assert_eq!(after[..4], seen.letters[..]);
    assert!(after[4].0 > 8, "new ids follow the old ones");
    let other = "INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at) \
                 VALUES ('hotlist', 's', 0, 30, 'other', 'd', x'', 4, 4)";
    assert_eq!(refused(path, &[other]), [true]);
    Seen {
        letters: after,
        list: seen.list,
    }
}

/// [`V9_DDL`] is what version 9 created: a database of this build taken back to version 9 has
/// exactly its tables and indexes.
#[test]
fn the_version_9_ddl_is_what_version_9_created() {
    let dir = tempfile::tempdir().unwrap();
    let verbatim = dir.path().join("verbatim.db");
    Connection::open(&verbatim).unwrap().execute_batch(V9_DDL).unwrap();
    let taken_back = dir.path().join("taken-back.db");
    SqliteStore::open(&taken_back).unwrap();
    downgrade_to_v9(&taken_back, 9);
    assert_eq!(user_version(&verbatim), 9);
    assert_eq!(schema_objects(&taken_back), schema_objects(&verbatim));
}

/// [`V8_DDL`] is what version 8 created: a database of this build taken back to version 8
/// (the downgrade every older case starts with) has exactly its tables and indexes.
#[test]
fn the_version_8_ddl_is_what_version_8_created() {
    let dir = tempfile::tempdir().unwrap();
    let verbatim = dir.path().join("verbatim.db");
    Connection::open(&verbatim).unwrap().execute_batch(V8_DDL).unwrap();
    let taken_back = dir.path().join("taken-back.db");
    SqliteStore::open(&taken_back).unwrap();
    downgrade_to_v8(&taken_back, 8);
    assert_eq!(user_version(&verbatim), 8);
    assert_eq!(schema_objects(&taken_back), schema_objects(&verbatim));
}

/// Rows `instance_ranges` refuses: both or neither of `ranges` and `unreadable`, an instance
/// that does not end after it starts, a second row of one instance.
#[test]
fn the_checks_refuse_impossible_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ranges.db");
    SqliteStore::open(&path).unwrap();
    let insert = "INSERT INTO instance_ranges (job, window_name, window_start, window_end, ranges, unreadable) \
                  VALUES ('j', 'w', ";
    let cases = [
        ("0, 60000, '[]', NULL)", false),
        ("0, 60000, NULL, 'gone')", false),
        ("0, 60000, NULL, NULL)", true),
        ("0, 60000, '[]', 'gone')", true),
        ("0, 0, '[]', NULL)", true),
        ("0, -1, NULL, 'gone')", true),
    ];
    let statements: Vec<String> = cases.iter().map(|(v, _)| format!("{insert}{v}")).collect();
    let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
    let want: Vec<bool> = cases.iter().map(|c| c.1).collect();
    assert_eq!(refused(&path, &statements), want);
    let twice = format!("{}; {}", statements[0], statements[1]);
    assert_eq!(refused(&path, &[&twice]), [true], "one row per instance");
}

/// (id, reason, position) of every dead letter, read with a plain connection.
fn letters(path: &Path) -> Vec<(i64, String, i64)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT id, reason, position FROM dead_letters ORDER BY id")
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

fn user_version(path: &Path) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap()
}

/// The `CREATE` statements of the database's tables and indexes, by type and name.
fn schema_objects(path: &Path) -> Vec<(String, String, Option<String>)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// The `CREATE` statements of the database's tables, by name.
fn tables(path: &Path) -> Vec<(String, String)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

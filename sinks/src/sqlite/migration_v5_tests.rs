//! A version-5 database (lists without certificates): a reader reads it as it is (no list has
//! a certificate) without changing it; the job's `open` migrates it to version 6
//! (`topk_instances` rebuilt with the certificate's columns, every header kept, none
//! certified), after which certified lists commit and read back, also through a reader opened
//! before the migration, and the migrated tables equal new ones. The new table's checks refuse
//! a certificate that cannot be.

use super::*;
use crate::store::SinkStore;
use crate::test_fixtures::{approximate, batch, certified, list, sketch_check, windows, JOB};
use crate::types::StoredList;

/// The version-5 `topk_instances`, the one table version 6 changed, verbatim.
const V5_TOPK_INSTANCES: &str = "
CREATE TABLE IF NOT EXISTS topk_instances (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    group_key    TEXT    NOT NULL DEFAULT '',
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    revision     INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    final        INTEGER NOT NULL CHECK (final IN (0, 1)),
    watermark    INTEGER NOT NULL,
    as_of        INTEGER NOT NULL,
    item_count   INTEGER NOT NULL CHECK (item_count >= 0),
    exact        INTEGER NOT NULL DEFAULT 1 CHECK (exact IN (0, 1)),
    error_bound  INTEGER NOT NULL DEFAULT 0
                 CHECK (error_bound >= 0 AND (exact = 0 OR error_bound = 0)),
    sketch_found           INTEGER CHECK (sketch_found >= 0),
    sketch_of              INTEGER CHECK (sketch_of >= sketch_found),
    sketch_max_overcount   INTEGER CHECK (sketch_max_overcount >= 0),
    sketch_total_overcount INTEGER
        CHECK (sketch_total_overcount >= 0 AND (sketch_found IS NULL) = (sketch_of IS NULL)
               AND (sketch_found IS NULL) = (sketch_max_overcount IS NULL)
               AND (sketch_found IS NULL) = (sketch_total_overcount IS NULL)),
    PRIMARY KEY (job, window_name, group_key, window_start)
) WITHOUT ROWID;
";

/// Turns the database at `path` (this build's version) into a version-5 one stamped
/// `version`: `topk_instances` as version 5 created it, every header kept without its
/// certificate.
pub(super) fn downgrade_to_v5(path: &Path, version: i64) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "ALTER TABLE topk_instances RENAME TO topk_instances_v6; {V5_TOPK_INSTANCES}
         INSERT INTO topk_instances SELECT job, window_name, group_key, window_start, window_end, revision, state,
             final, watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of, sketch_max_overcount,
             sketch_total_overcount FROM topk_instances_v6;
         DROP TABLE topk_instances_v6;
         PRAGMA user_version = {version};"
    ))
    .unwrap();
}

fn user_version(path: &Path) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap()
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

#[test]
fn a_version_5_database_is_read_as_it_is_then_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    let mut w = SqliteStore::open(&path).unwrap();
    w.prepare(JOB, &windows()).unwrap();
    let sketched = approximate(list(60_000, 1, 3), 37, Some(sketch_check(2, 3)));
    assert!(w.commit(&batch(1, vec![list(0, 3, 2), sketched.clone()])).unwrap());
    drop(w);
    downgrade_to_v5(&path, 5);

    let r = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(sketched.clone())));
    assert_eq!(
        r.instance(JOB, "1m", Millis(0)).unwrap(),
        Some(StoredList::from(list(0, 3, 2))),
        "no certificate"
    );
    assert_eq!(user_version(&path), 5, "a reader never migrates");

    let mut w = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 6);
    assert_eq!(
        w.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(sketched)),
        "the old headers stay"
    );
    assert_eq!(
        w.instance(JOB, "1m", Millis(0)).unwrap(),
        Some(StoredList::from(list(0, 3, 2)))
    );
    let proved = certified(list(120_000, 3, 3), 40, 2);
    assert!(w.commit(&batch(2, vec![proved.clone()])).unwrap());
    assert_eq!(
        r.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(proved.clone())),
        "the reader opened before sees it"
    );
    drop(w);
    let w = SqliteStore::open(&path).unwrap();
    assert_eq!(
        w.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(proved)),
        "opening again changes nothing"
    );

    let new = dir.path().join("new.db");
    SqliteStore::open(&new).unwrap();
    assert_eq!(tables(&path), tables(&new), "migrated tables are the new tables");
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

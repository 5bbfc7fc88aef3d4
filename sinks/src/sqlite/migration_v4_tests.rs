//! A version-4 database (lists without groups): a reader reads it as it is (every list
//! global, every window without `by`; its groups are `""`) without changing it; the job's
//! `open` migrates it to version 5 (the list tables and `hotlist_windows` rebuilt, every row
//! kept as a global list), after which per-group lists commit and read back, also through a
//! reader opened before the migration, and the migrated tables equal new ones.

use super::*;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, list, windows, JOB};
use hotlist_operators::group::GroupKey;

/// The version-4 tables that version 5 changed, verbatim.
const V4_TABLES: &str = "
CREATE TABLE topk (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    rank         INTEGER NOT NULL CHECK (rank >= 1),
    item_id      TEXT    NOT NULL,
    count        INTEGER NOT NULL CHECK (count >= 0),
    revision     INTEGER NOT NULL,
    final        INTEGER NOT NULL CHECK (final IN (0, 1)),
    state        TEXT    NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    as_of        INTEGER NOT NULL,
    exact        INTEGER NOT NULL DEFAULT 1 CHECK (exact IN (0, 1)),
    error_bound  INTEGER NOT NULL DEFAULT 0
                 CHECK (error_bound >= 0 AND (exact = 0 OR error_bound = 0)),
    PRIMARY KEY (job, window_name, window_start, rank)
) WITHOUT ROWID;
CREATE TABLE topk_instances (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
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
    PRIMARY KEY (job, window_name, window_start)
) WITHOUT ROWID;
CREATE TABLE hotlist_windows (
    job      TEXT    NOT NULL,
    name     TEXT    NOT NULL,
    size_ms  INTEGER NOT NULL,
    slide_ms INTEGER NOT NULL,
    k        INTEGER NOT NULL,
    ord      INTEGER NOT NULL,
    PRIMARY KEY (job, name)
);
";

/// Turns the database at `path` (this build's version) into a version-4 one (through version 5:
/// its certificates dropped; keeping its global lists and windows) stamped `version`.
pub(super) fn downgrade_to_v4(path: &Path, version: i64) {
    super::migration_v5_tests::downgrade_to_v5(path, 5);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "ALTER TABLE topk RENAME TO topk_v5; ALTER TABLE topk_instances RENAME TO topk_instances_v5;
         ALTER TABLE hotlist_windows RENAME TO hotlist_windows_v5; {V4_TABLES}
         INSERT INTO topk SELECT job, window_name, window_start, window_end, rank, item_id, count, revision,
             final, state, as_of, exact, error_bound FROM topk_v5 WHERE group_key = '';
         INSERT INTO topk_instances SELECT job, window_name, window_start, window_end, revision, state, final,
             watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of, sketch_max_overcount,
             sketch_total_overcount FROM topk_instances_v5 WHERE group_key = '';
         INSERT INTO hotlist_windows SELECT job, name, size_ms, slide_ms, k, ord FROM hotlist_windows_v5;
         DROP TABLE topk_v5; DROP TABLE topk_instances_v5; DROP TABLE hotlist_windows_v5;
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
fn a_version_4_database_is_read_as_it_is_then_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v4.db");
    let mut w = SqliteStore::open(&path).unwrap();
    w.prepare(JOB, &windows()).unwrap();
    assert!(w.commit(&batch(1, vec![list(0, 1, 2), list(60_000, 1, 3)])).unwrap());
    drop(w);
    downgrade_to_v4(&path, 4);

    let mut r = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(r.latest(JOB, "1m").unwrap().map(|l| l.items.len()), Some(3));
    assert_eq!(
        r.instance(JOB, "1m", Millis(0)).unwrap().map(|l| l.items.len()),
        Some(2)
    );
    let us = GroupKey::from_pairs([("country", "US")]);
    assert_eq!(r.latest_of(JOB, "1m", &us).unwrap(), None);
    let groups = StoreReader::groups(&mut r, JOB, "1m").unwrap();
    assert_eq!(groups, Some((Millis(60_000), vec![GroupKey::global()])));
    assert!(r.windows(JOB).unwrap().iter().all(|w| w.by.is_empty()));
    assert_eq!(user_version(&path), 4, "a reader never migrates");

    let mut w = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 6);
    assert_eq!(
        w.latest(JOB, "1m").unwrap().map(|l| l.items.len()),
        Some(3),
        "the old rows stay"
    );
    assert_eq!(w.windows(JOB).unwrap().len(), 2, "the windows stay");
    let mut specs = windows();
    specs[1].key.by = vec!["country".into()];
    w.prepare(JOB, &specs).unwrap();
    let mut grouped = list(60_000, 1, 1);
    grouped.group = us.clone();
    assert!(w.commit(&batch(2, vec![grouped])).unwrap());
    assert_eq!(
        r.latest_of(JOB, "1m", &us).unwrap().map(|l| l.items.len()),
        Some(1),
        "the reader sees it"
    );
    assert_eq!(r.windows(JOB).unwrap()[1].by, vec!["country".to_string()]);
    let groups = StoreReader::groups(&mut r, JOB, "1m").unwrap();
    assert_eq!(groups, Some((Millis(60_000), vec![GroupKey::global(), us])));

    let new = dir.path().join("new.db");
    SqliteStore::open(&new).unwrap();
    assert_eq!(tables(&path), tables(&new), "migrated tables are the new tables");
}

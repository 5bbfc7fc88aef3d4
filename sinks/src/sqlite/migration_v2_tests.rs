//! A version-2 database, created here with the version-2 DDL (kept verbatim below, as the
//! release before lists said what they are wrote it): a reader reads its lists as exact without
//! changing the file; the job's `open` migrates it to version 3 (the accuracy columns added,
//! every old row exact), after which approximate lists commit and read back. The migrated
//! tables are the tables a new database gets: the same columns, the same constraints.

use super::*;
use crate::store::SinkStore;
use crate::test_fixtures::{approximate, batch, list, sketch_check, JOB};

/// The tables of schema version 2, verbatim.
const V2_DDL: &str = "
CREATE TABLE IF NOT EXISTS topk (
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
    PRIMARY KEY (job, window_name, window_start, rank)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS topk_instances (
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
    PRIMARY KEY (job, window_name, window_start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hotlist_windows (
    job      TEXT    NOT NULL,
    name     TEXT    NOT NULL,
    size_ms  INTEGER NOT NULL,
    slide_ms INTEGER NOT NULL,
    k        INTEGER NOT NULL,
    ord      INTEGER NOT NULL,
    PRIMARY KEY (job, name)
);
CREATE TABLE IF NOT EXISTS hotlist_commits (
    job          TEXT    NOT NULL PRIMARY KEY,
    epoch        INTEGER NOT NULL,
    watermark    INTEGER NOT NULL,
    committed_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS hotlist_jobs (
    job        TEXT    NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    owner      TEXT    NOT NULL,
    claimed_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id          INTEGER PRIMARY KEY,
    job         TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    position    INTEGER NOT NULL,
    reason      TEXT    NOT NULL CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large')),
    detail      TEXT    NOT NULL,
    raw         BLOB    NOT NULL,
    epoch       INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
PRAGMA user_version = 2;
";

/// What the previous release wrote: a window, one list of two items, a commit.
const V2_ROWS: &str = "
INSERT INTO hotlist_windows VALUES ('hotlist', '1m', 60000, 60000, 10, 0);
INSERT INTO topk_instances VALUES ('hotlist', '1m', 0, 60000, 2, 'final', 1, 60001, 1700000000000, 2);
INSERT INTO topk VALUES ('hotlist', '1m', 0, 60000, 1, 'a', 3, 2, 1, 'final', 1700000000000);
INSERT INTO topk VALUES ('hotlist', '1m', 0, 60000, 2, 'b', 1, 2, 1, 'final', 1700000000000);
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 60001, 1700000000000);
";

/// A version-2 database at `dir/v2.db` holding [`V2_ROWS`].
fn v2_database(dir: &Path) -> PathBuf {
    let path = dir.join("v2.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(V2_DDL).unwrap();
    conn.execute_batch(V2_ROWS).unwrap();
    path
}

fn user_version(path: &Path) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap()
}

/// The list [`V2_ROWS`] holds, as a reader returns it: exact.
fn v2_list(store: &SqliteStore) -> StoredList {
    let list = store.latest(JOB, "1m").unwrap().expect("the list");
    assert_eq!((list.revision, list.items.len()), (2, 2));
    list
}

/// A reader of this build reads what the previous release wrote, every list exact, without
/// changing the file; once a writer migrated it (while the reader is open), the same reader
/// reads what the writer commits, approximate lists included.
#[test]
fn a_version_2_database_is_read_as_it_is_and_after_its_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = v2_database(dir.path());
    let r = SqliteStore::open_read_only(&path).unwrap();
    let old = v2_list(&r);
    assert_eq!((old.exact, old.error_bound, old.sketch_check), (true, 0, None));
    assert_eq!(user_version(&path), 2, "a reader never migrates");

    let mut w = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let sketched = approximate(list(60_000, 1, 1), 37, Some(sketch_check(1, 1)));
    assert!(w.commit(&batch(3, vec![sketched.clone()])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(sketched)));
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap(), Some(old));
}

/// The job's `open` migrates: version 3, the old rows kept and exact (`exact = 1`,
/// `error_bound = 0`, no sketch check, in the header and in every row); an approximate list
/// then commits and reads back. Opening again changes nothing.
#[test]
fn a_version_2_database_is_migrated_by_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = v2_database(dir.path());
    let before = v2_list(&SqliteStore::open_read_only(&path).unwrap());
    let mut w = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(v2_list(&w), before);
    let conn = Connection::open(&path).unwrap();
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
    drop(w);
    let w = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(
        w.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(sketched)),
        "opening a version-3 database again changes nothing"
    );
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

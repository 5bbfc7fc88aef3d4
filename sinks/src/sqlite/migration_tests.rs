//! A version-1 database, created here with the version-1 DDL (kept verbatim below, as the first
//! release wrote it): a reader reads it as it is (every list exact); the job's `open` migrates
//! it through version 2 (`dead_letters` rebuilt with the reasons `future` and `too_large`,
//! every row and id kept, the index back) to version 3 (the accuracy columns, every old list
//! exact), after which the new reasons and approximate lists commit.

use super::*;
use crate::store::SinkStore;
use crate::test_fixtures::{approximate, batch, letter, list, sketch_check, JOB};
use hotlist_operators::record::DeadReason;

/// The tables of schema version 1, verbatim.
const V1_DDL: &str = "
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
CREATE TABLE IF NOT EXISTS dead_letters (
    id          INTEGER PRIMARY KEY,
    job         TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    position    INTEGER NOT NULL,
    reason      TEXT    NOT NULL CHECK (reason IN ('bad', 'late', 'sealed')),
    detail      TEXT    NOT NULL,
    raw         BLOB    NOT NULL,
    epoch       INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
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
PRAGMA user_version = 1;
";

/// What an older job wrote: a window, one list, three dead letters (ids 5, 6, 7), a commit.
const V1_ROWS: &str = "
INSERT INTO hotlist_windows VALUES ('hotlist', '1m', 60000, 60000, 10, 0);
INSERT INTO topk_instances VALUES ('hotlist', '1m', 0, 60000, 2, 'final', 1, 60001, 1700000000000, 1);
INSERT INTO topk VALUES ('hotlist', '1m', 0, 60000, 1, 'a', 3, 2, 1, 'final', 1700000000000);
INSERT INTO dead_letters VALUES (5, 'hotlist', 'file:a.jsonl', 0, 1, 'bad', 'not a JSON object', x'5b5d', 1, 1);
INSERT INTO dead_letters VALUES (6, 'hotlist', 'file:a.jsonl', 0, 2, 'late', 'late for window(s) 1m', x'7b7d', 1, 1);
INSERT INTO dead_letters VALUES (7, 'hotlist', 'file:a.jsonl', 0, 3, 'sealed', 'window already sealed', x'', 2, 2);
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 60001, 1700000000000);
";

/// A version-1 database at `dir/v1.db` holding [`V1_ROWS`].
fn v1_database(dir: &Path) -> PathBuf {
    let path = dir.join("v1.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(V1_DDL).unwrap();
    conn.execute_batch(V1_ROWS).unwrap();
    // the version-1 constraint is really there: the new reasons need the migration
    let future = "INSERT INTO dead_letters VALUES (8, 'hotlist', 's', 0, 4, 'future', 'd', x'', 3, 3)";
    assert!(conn.execute_batch(future).is_err());
    path
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

/// A reader of this build reads what an older job wrote, without changing the file.
#[test]
fn a_version_1_database_is_read_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_database(dir.path());
    let r = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(r.windows(JOB).unwrap().len(), 1);
    let list = r.latest(JOB, "1m").unwrap().expect("the list");
    assert_eq!((list.revision, list.items.len()), (2, 1));
    assert_eq!((list.exact, list.error_bound, list.sketch_check), (true, 0, None));
    assert_eq!(r.last_commit(JOB).unwrap(), Some((2, Millis(60_001))));
    assert_eq!(r.dead_letters(JOB, 10).unwrap().len(), 3);
    assert_eq!(r.dead_letter_counts(JOB).unwrap().len(), 3);
    drop(r);
    assert_eq!(user_version(&path), 1, "a reader never migrates");
}

/// The job's `open` migrates: version 3, the old rows and ids kept, the index back, the old
/// list exact, and the new reasons and an approximate list commit after them. Opening again
/// changes nothing.
#[test]
fn a_version_1_database_is_migrated_by_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_database(dir.path());
    let before = letters(&path);
    let mut w = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(letters(&path), before, "every dead letter kept, with its id");
    let conn = Connection::open(&path).unwrap();
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
    let after = letters(&path);
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
    drop(w);
    SqliteStore::open(&path).unwrap();
    assert_eq!(
        letters(&path),
        after,
        "opening a version-3 database again changes nothing"
    );
}

//! The databases of older schema versions the migration tests start from: the DDL of
//! versions 1, 2, 8 and 9 and the tables versions 5, 6 and 10 changed, verbatim (as those
//! releases created them), and the builders that make a database of each version (version 7
//! only added columns and an index, version 8 columns and version 9 a table, which a downgrade
//! drops; version 10 changed the reasons `dead_letters` takes, which a downgrade rebuilds).

use super::*;
use crate::store::SinkStore;
use crate::test_fixtures::{approximate, batch, letter, list, sketch_check, windows, JOB};
use hotlist_operators::message::PublishedList;
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

/// The tables of schema version 8, verbatim: what a version-8 database's `sqlite_master` holds
/// (the columns versions 7 and 8 added with `ALTER TABLE` where SQLite put them).
pub(super) const V8_DDL: &str = "
CREATE TABLE topk (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    group_key    TEXT    NOT NULL DEFAULT '',
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
                 CHECK (error_bound >= 0 AND (exact = 0 OR error_bound = 0)), baseline INTEGER CHECK (baseline >= 0), score REAL, history TEXT
    CHECK ((baseline IS NULL) = (history IS NULL) AND (baseline IS NULL) = (score IS NULL)),
    PRIMARY KEY (job, window_name, group_key, window_start, rank)
) WITHOUT ROWID;
CREATE TABLE topk_instances (
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
    certificate_threshold  INTEGER CHECK (certificate_threshold >= 1),
    certificate_counted    INTEGER CHECK (certificate_counted >= 0),
    certificate_passes     INTEGER
        CHECK (certificate_passes >= 1
               AND (certificate_threshold IS NULL) = (certificate_counted IS NULL)
               AND (certificate_threshold IS NULL) = (certificate_passes IS NULL)
               AND (certificate_threshold IS NULL OR (exact = 1 AND state = 'final'))),
    PRIMARY KEY (job, window_name, group_key, window_start)
) WITHOUT ROWID;
CREATE TABLE hot_key_windows (
    job          TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL CHECK (window_end > window_start),
    watermark    INTEGER NOT NULL,
    as_of        INTEGER NOT NULL,
    key_count    INTEGER NOT NULL CHECK (key_count >= 0),
    PRIMARY KEY (job, window_start)
) WITHOUT ROWID;
CREATE TABLE hot_keys (
    job          TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    item_id      TEXT    NOT NULL,
    rate         REAL    NOT NULL CHECK (rate >= 0),
    state        TEXT    NOT NULL CHECK (state IN ('hot', 'cooling')),
    as_of        INTEGER NOT NULL,
    PRIMARY KEY (job, window_start, item_id)
) WITHOUT ROWID;
CREATE TABLE hotlist_windows (
    job      TEXT    NOT NULL,
    name     TEXT    NOT NULL,
    size_ms  INTEGER NOT NULL,
    slide_ms INTEGER NOT NULL,
    k        INTEGER NOT NULL,
    ord      INTEGER NOT NULL,
    by_dims  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (job, name)
);
CREATE TABLE hotlist_commits (
    job          TEXT    NOT NULL PRIMARY KEY,
    epoch        INTEGER NOT NULL,
    watermark    INTEGER NOT NULL,
    committed_at INTEGER NOT NULL
);
CREATE TABLE hotlist_jobs (
    job        TEXT    NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    owner      TEXT    NOT NULL,
    claimed_at INTEGER NOT NULL
);
CREATE TABLE dead_letters (
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
, count INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1), last_position INTEGER
    CHECK ((last_position IS NOT NULL OR count = 1) AND last_position >= position));
CREATE INDEX dead_letters_job_reason ON dead_letters (job, reason);
CREATE INDEX dead_letters_job_source_position ON dead_letters (job, source, position);
PRAGMA user_version = 8;
";

/// The tables of schema version 9, verbatim: what a version-9 database's `sqlite_master` holds
/// (version 8's and `instance_ranges`).
pub(super) const V9_DDL: &str = "
CREATE TABLE topk (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    group_key    TEXT    NOT NULL DEFAULT '',
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
                 CHECK (error_bound >= 0 AND (exact = 0 OR error_bound = 0)), baseline INTEGER CHECK (baseline >= 0), score REAL, history TEXT
    CHECK ((baseline IS NULL) = (history IS NULL) AND (baseline IS NULL) = (score IS NULL)),
    PRIMARY KEY (job, window_name, group_key, window_start, rank)
) WITHOUT ROWID;
CREATE TABLE topk_instances (
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
    certificate_threshold  INTEGER CHECK (certificate_threshold >= 1),
    certificate_counted    INTEGER CHECK (certificate_counted >= 0),
    certificate_passes     INTEGER
        CHECK (certificate_passes >= 1
               AND (certificate_threshold IS NULL) = (certificate_counted IS NULL)
               AND (certificate_threshold IS NULL) = (certificate_passes IS NULL)
               AND (certificate_threshold IS NULL OR (exact = 1 AND state = 'final'))),
    PRIMARY KEY (job, window_name, group_key, window_start)
) WITHOUT ROWID;
CREATE TABLE hot_key_windows (
    job          TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL CHECK (window_end > window_start),
    watermark    INTEGER NOT NULL,
    as_of        INTEGER NOT NULL,
    key_count    INTEGER NOT NULL CHECK (key_count >= 0),
    PRIMARY KEY (job, window_start)
) WITHOUT ROWID;
CREATE TABLE hot_keys (
    job          TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    item_id      TEXT    NOT NULL,
    rate         REAL    NOT NULL CHECK (rate >= 0),
    state        TEXT    NOT NULL CHECK (state IN ('hot', 'cooling')),
    as_of        INTEGER NOT NULL,
    PRIMARY KEY (job, window_start, item_id)
) WITHOUT ROWID;
CREATE TABLE hotlist_windows (
    job      TEXT    NOT NULL,
    name     TEXT    NOT NULL,
    size_ms  INTEGER NOT NULL,
    slide_ms INTEGER NOT NULL,
    k        INTEGER NOT NULL,
    ord      INTEGER NOT NULL,
    by_dims  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (job, name)
);
CREATE TABLE hotlist_commits (
    job          TEXT    NOT NULL PRIMARY KEY,
    epoch        INTEGER NOT NULL,
    watermark    INTEGER NOT NULL,
    committed_at INTEGER NOT NULL
);
CREATE TABLE hotlist_jobs (
    job        TEXT    NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    owner      TEXT    NOT NULL,
    claimed_at INTEGER NOT NULL
);
CREATE TABLE dead_letters (
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
, count INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1), last_position INTEGER
    CHECK ((last_position IS NOT NULL OR count = 1) AND last_position >= position));
CREATE INDEX dead_letters_job_reason ON dead_letters (job, reason);
CREATE INDEX dead_letters_job_source_position ON dead_letters (job, source, position);
CREATE TABLE instance_ranges (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL CHECK (window_end > window_start),
    ranges       TEXT,
    unreadable   TEXT    CHECK ((ranges IS NULL) <> (unreadable IS NULL)),
    PRIMARY KEY (job, window_name, window_start)
);
PRAGMA user_version = 9;
";

/// The version-9 `dead_letters`, the one table version 10 changed, verbatim (as in
/// [`V9_DDL`]: version 2's reasons, version 7's columns where `ALTER TABLE` put them).
const V9_DEAD_LETTERS: &str = "
CREATE TABLE dead_letters (
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
, count INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1), last_position INTEGER
    CHECK ((last_position IS NOT NULL OR count = 1) AND last_position >= position));
";

/// What a version-9 job wrote: the fixtures' two windows, one final list of two items of the
/// `1m` instance at 0, its ranges (unreadable), three whole dead letters (ids 5 to 7, as
/// `test_fixtures::letter` makes them) and a summary of four `late` ones (id 8), a commit.
const V9_ROWS: &str = "
INSERT INTO hotlist_windows VALUES ('hotlist', '5m', 300000, 300000, 10, 0, '');
INSERT INTO hotlist_windows VALUES ('hotlist', '1m', 60000, 30000, 3, 1, '');
INSERT INTO topk_instances (job, window_name, group_key, window_start, window_end, revision, state, final,
                            watermark, as_of, item_count)
    VALUES ('hotlist', '1m', '', 0, 60000, 3, 'final', 1, 60001, 1700000000000, 2);
INSERT INTO topk (job, window_name, group_key, window_start, window_end, rank, item_id, count, revision, final,
                  state, as_of)
    VALUES ('hotlist', '1m', '', 0, 60000, 1, 'a', 3, 3, 1, 'final', 1700000000000),
           ('hotlist', '1m', '', 0, 60000, 2, 'b', 1, 3, 1, 'final', 1700000000000);
INSERT INTO instance_ranges VALUES ('hotlist', '1m', 0, 60000, NULL, 'gone');
INSERT INTO dead_letters (id, job, source, partition, position, reason, detail, raw, epoch, recorded_at, count,
                          last_position)
    VALUES (5, 'hotlist', 'file:events/a.jsonl', 3, 1, 'bad', 'detail 1', x'5b5d', 1, 1700000000000, 1, NULL),
           (6, 'hotlist', 'file:events/a.jsonl', 3, 2, 'future', 'detail 2', x'7b7d', 1, 1700000000000, 1, NULL),
           (7, 'hotlist', 'file:events/a.jsonl', 3, 3, 'too_large', 'detail 3', x'78', 2, 1700000000000, 1, NULL),
           (8, 'hotlist', 'file:events/a.jsonl', 3, 4, 'late', 'summary', x'', 2, 1700000000000, 4, 9);
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 60001, 1700000000000);
";

/// What a version-8 job wrote: the fixtures' two windows, one final list of two items of the
/// `1m` instance at 0, a commit.
const V8_ROWS: &str = "
INSERT INTO hotlist_windows VALUES ('hotlist', '5m', 300000, 300000, 10, 0, '');
INSERT INTO hotlist_windows VALUES ('hotlist', '1m', 60000, 30000, 3, 1, '');
INSERT INTO topk_instances (job, window_name, group_key, window_start, window_end, revision, state, final,
                            watermark, as_of, item_count)
    VALUES ('hotlist', '1m', '', 0, 60000, 3, 'final', 1, 60001, 1700000000000, 2);
INSERT INTO topk (job, window_name, group_key, window_start, window_end, rank, item_id, count, revision, final,
                  state, as_of)
    VALUES ('hotlist', '1m', '', 0, 60000, 1, 'a', 3, 3, 1, 'final', 1700000000000),
           ('hotlist', '1m', '', 0, 60000, 2, 'b', 1, 3, 1, 'final', 1700000000000);
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 60001, 1700000000000);
";

/// A version-1 database at `dir/v1.db` holding [`V1_ROWS`].
pub(super) fn v1_database(dir: &Path) -> PathBuf {
    let path = dir.join("v1.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(V1_DDL).unwrap();
    conn.execute_batch(V1_ROWS).unwrap();
    // the version-1 constraint is really there: the new reasons need the migration
    let future = "INSERT INTO dead_letters VALUES (8, 'hotlist', 's', 0, 4, 'future', 'd', x'', 3, 3)";
    assert!(conn.execute_batch(future).is_err());
    path
}

/// A version-2 database at `dir/v2.db` holding [`V2_ROWS`].
pub(super) fn v2_database(dir: &Path) -> PathBuf {
    let path = dir.join("v2.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(V2_DDL).unwrap();
    conn.execute_batch(V2_ROWS).unwrap();
    path
}

/// A version-3 database at `dir/v3.db` holding one list.
pub(super) fn v3_database(dir: &Path) -> PathBuf {
    let path = dir.join("v3.db");
    let mut w = SqliteStore::open(&path).unwrap();
    assert!(w.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
    drop(w);
    downgrade_to_v4(&path, 4);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("DROP TABLE hot_keys; DROP TABLE hot_key_windows; PRAGMA user_version = 3;")
        .unwrap();
    path
}

/// A version-4 database at `dir/v4.db` holding the two windows and two lists (at 0 and
/// 60 000).
pub(super) fn v4_database(dir: &Path) -> PathBuf {
    let path = dir.join("v4.db");
    let mut w = SqliteStore::open(&path).unwrap();
    w.prepare(JOB, &windows()).unwrap();
    assert!(w.commit(&batch(1, vec![list(0, 1, 2), list(60_000, 1, 3)])).unwrap());
    drop(w);
    downgrade_to_v4(&path, 4);
    path
}

/// The approximate list at 60 000 a version-5 database holds.
pub(super) fn v5_sketched() -> PublishedList {
    approximate(list(60_000, 1, 3), 37, Some(sketch_check(2, 3)))
}

/// A version-5 database at `dir/v5.db` holding the two windows, an exact list at 0 and
/// [`v5_sketched`].
pub(super) fn v5_database(dir: &Path) -> PathBuf {
    let path = dir.join("v5.db");
    let mut w = SqliteStore::open(&path).unwrap();
    w.prepare(JOB, &windows()).unwrap();
    assert!(w.commit(&batch(1, vec![list(0, 3, 2), v5_sketched()])).unwrap());
    drop(w);
    downgrade_to_v5(&path, 5);
    path
}

/// Turns the database at `path` (this build's version) into a version-4 one (through version 5:
/// its certificates dropped; keeping its global lists and windows) stamped `version`.
pub(super) fn downgrade_to_v4(path: &Path, version: i64) {
    downgrade_to_v5(path, 5);
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

/// Turns the database at `path` (this build's version) into a version-5 one stamped
/// `version`: `topk_instances` as version 5 created it, every header kept without its
/// certificate.
pub(super) fn downgrade_to_v5(path: &Path, version: i64) {
    downgrade_to_v6(path, 6);
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

/// A version-6 database at `dir/v6.db` holding the two windows, a list and three whole dead
/// letters.
pub(super) fn v6_database(dir: &Path) -> PathBuf {
    let path = dir.join("v6.db");
    let mut w = SqliteStore::open(&path).unwrap();
    w.prepare(JOB, &windows()).unwrap();
    let mut b = batch(1, vec![list(0, 3, 2)]);
    b.dead_letters = vec![
        letter(7, DeadReason::Bad, b"x"),
        letter(8, DeadReason::Late, b"y"),
        letter(9, DeadReason::Bad, b"z"),
    ];
    assert!(w.commit(&b).unwrap());
    drop(w);
    downgrade_to_v6(&path, 6);
    path
}

/// Turns the database at `path` (this build's version) into a version-6 one stamped `version`:
/// `dead_letters` without its counts (every row a whole letter) and their index.
pub(super) fn downgrade_to_v6(path: &Path, version: i64) {
    downgrade_to_v7(path, 7);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "DROP INDEX dead_letters_job_source_position;
         ALTER TABLE dead_letters DROP COLUMN last_position;
         ALTER TABLE dead_letters DROP COLUMN count;
         PRAGMA user_version = {version};"
    ))
    .unwrap();
}

/// A version-7 database at `dir/v7.db` holding the two windows and a list.
pub(super) fn v7_database(dir: &Path) -> PathBuf {
    let path = dir.join("v7.db");
    let mut w = SqliteStore::open(&path).unwrap();
    w.prepare(JOB, &windows()).unwrap();
    assert!(w.commit(&batch(1, vec![list(0, 3, 2)])).unwrap());
    drop(w);
    downgrade_to_v7(&path, 7);
    path
}

/// Turns the database at `path` (this build's version) into a version-7 one stamped `version`:
/// `topk` without the trend columns (the last first: its check names the others).
pub(super) fn downgrade_to_v7(path: &Path, version: i64) {
    downgrade_to_v8(path, 8);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "ALTER TABLE topk DROP COLUMN history;
         ALTER TABLE topk DROP COLUMN score;
         ALTER TABLE topk DROP COLUMN baseline;
         PRAGMA user_version = {version};"
    ))
    .unwrap();
}

/// A version-8 database at `dir/v8.db`, built from [`V8_DDL`] and holding [`V8_ROWS`].
pub(super) fn v8_database(dir: &Path) -> PathBuf {
    let path = dir.join("v8.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(V8_DDL).unwrap();
    conn.execute_batch(V8_ROWS).unwrap();
    path
}

/// Turns the database at `path` (this build's version) into a version-8 one stamped `version`:
/// without `instance_ranges`.
pub(super) fn downgrade_to_v8(path: &Path, version: i64) {
    downgrade_to_v9(path, 9);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "DROP TABLE instance_ranges;
         PRAGMA user_version = {version};"
    ))
    .unwrap();
}

/// A version-9 database at `dir/v9.db`, built from [`V9_DDL`] and holding [`V9_ROWS`].
pub(super) fn v9_database(dir: &Path) -> PathBuf {
    let path = dir.join("v9.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(V9_DDL).unwrap();
    conn.execute_batch(V9_ROWS).unwrap();
    // the version-9 constraint is really there: the new reason needs the migration
    let udf = "INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at) \
               VALUES ('hotlist', 's', 0, 10, 'udf', 'd', x'', 3, 3)";
    assert!(conn.execute_batch(udf).is_err());
    path
}

/// Turns the database at `path` (this build's version) into a version-9 one stamped `version`:
/// `dead_letters` rebuilt as version 9 created it (every row kept, with its id; none may be a
/// `udf` letter) and its indexes created again.
pub(super) fn downgrade_to_v9(path: &Path, version: i64) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "ALTER TABLE dead_letters RENAME TO dead_letters_v10; {V9_DEAD_LETTERS}
         INSERT INTO dead_letters SELECT * FROM dead_letters_v10;
         DROP TABLE dead_letters_v10;
         CREATE INDEX dead_letters_job_reason ON dead_letters (job, reason);
         CREATE INDEX dead_letters_job_source_position ON dead_letters (job, source, position);
         PRAGMA user_version = {version};"
    ))
    .unwrap();
}

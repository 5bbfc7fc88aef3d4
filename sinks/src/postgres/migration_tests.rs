//! A version-1 schema, created here with the version-1 DDL (kept verbatim below, as the first
//! release wrote it): connecting migrates it through version 2 (the `CHECK` on
//! `dead_letters.reason` replaced, every row kept) to version 3 (every old list exact) under the
//! migration lock, after which the new reasons commit. PostgreSQL readers connect like the job,
//! so they migrate too.

use super::tests::TestDb;
use super::*;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, letter, JOB};
use hotlist_operators::record::DeadReason;
use std::sync::Barrier;

/// The tables and version table of schema version 1, verbatim.
const V1_DDL: &str = "
CREATE TABLE IF NOT EXISTS topk (
    job          TEXT        NOT NULL,
    window_name  TEXT        NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    window_end   TIMESTAMPTZ NOT NULL,
    rank         BIGINT      NOT NULL CHECK (rank >= 1),
    item_id      TEXT        NOT NULL,
    count        BIGINT      NOT NULL CHECK (count >= 0),
    revision     BIGINT      NOT NULL,
    final        BOOLEAN     NOT NULL,
    state        TEXT        NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    as_of        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job, window_name, window_start, rank)
);
CREATE TABLE IF NOT EXISTS topk_instances (
    job          TEXT        NOT NULL,
    window_name  TEXT        NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    window_end   TIMESTAMPTZ NOT NULL,
    revision     BIGINT      NOT NULL,
    state        TEXT        NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    final        BOOLEAN     NOT NULL,
    watermark    TIMESTAMPTZ NOT NULL,
    as_of        TIMESTAMPTZ NOT NULL,
    item_count   BIGINT      NOT NULL CHECK (item_count >= 0),
    PRIMARY KEY (job, window_name, window_start)
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id          BIGSERIAL   PRIMARY KEY,
    job         TEXT        NOT NULL,
    source      TEXT        NOT NULL,
    partition   BIGINT      NOT NULL,
    position    BIGINT      NOT NULL,
    reason      TEXT        NOT NULL CHECK (reason IN ('bad', 'late', 'sealed')),
    detail      TEXT        NOT NULL,
    raw         BYTEA       NOT NULL,
    epoch       BIGINT      NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
CREATE TABLE IF NOT EXISTS hotlist_windows (
    job      TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    size_ms  BIGINT NOT NULL,
    slide_ms BIGINT NOT NULL,
    k        BIGINT NOT NULL,
    ord      BIGINT NOT NULL,
    PRIMARY KEY (job, name)
);
CREATE TABLE IF NOT EXISTS hotlist_commits (
    job          TEXT        NOT NULL PRIMARY KEY,
    epoch        BIGINT      NOT NULL,
    watermark    TIMESTAMPTZ NOT NULL,
    committed_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS hotlist_schema (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT  NOT NULL
);
INSERT INTO hotlist_schema (one, version) VALUES (TRUE, 1);
";

/// What an older job wrote: a window, one list, three dead letters, a commit.
const V1_ROWS: &str = "
INSERT INTO hotlist_windows VALUES ('hotlist', '1m', 60000, 60000, 10, 0);
INSERT INTO topk_instances VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 2,
    'final', TRUE, 'epoch'::timestamptz + interval '60001 milliseconds', now(), 1);
INSERT INTO topk VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 1, 'a', 3, 2,
    TRUE, 'final', now());
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at) VALUES
    ('hotlist', 'file:a.jsonl', 0, 1, 'bad', 'not a JSON object', '\\x5b5d', 1, now()),
    ('hotlist', 'file:a.jsonl', 0, 2, 'late', 'late for window(s) 1m', '\\x7b7d', 1, now()),
    ('hotlist', 'file:a.jsonl', 0, 3, 'sealed', 'window already sealed', '\\x', 2, now());
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 'epoch'::timestamptz + interval '60001 milliseconds', now());
";

/// `db`'s schema as an older job left it: version 1 with [`V1_ROWS`].
fn v1_schema(db: &TestDb) {
    let mut c = db.client();
    c.batch_execute(&format!("CREATE SCHEMA {}", ident::quote_ident(&db.schema)))
        .unwrap();
    c.batch_execute(V1_DDL).unwrap();
    c.batch_execute(V1_ROWS).unwrap();
    // the version-1 constraint is really there: the new reasons need the migration
    let future = "INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, \
                  recorded_at) VALUES ('hotlist', 's', 0, 4, 'future', 'd', '\\x', 3, now())";
    assert!(c.batch_execute(future).is_err());
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

/// Connecting (as the job or a reader does) migrates: version 3, every row kept, one reason
/// constraint that takes every reason; the new reasons commit and read back. Connecting again
/// changes nothing.
#[test]
fn a_version_1_schema_is_migrated_on_connect() {
    let db = TestDb::new();
    v1_schema(&db);
    let before = letters(&db);
    assert_eq!(before.len(), 3);
    let mut store = db.store();
    assert_eq!(version(&db), SCHEMA_VERSION);
    assert_eq!(letters(&db), before, "every dead letter kept, with its id");
    let checks: Vec<String> = db
        .client()
        .query(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint \
             WHERE conrelid = 'dead_letters'::regclass AND contype = 'c'",
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
    let after = letters(&db);
    assert_eq!(after[..3], before[..]);
    assert_eq!(
        after[3..].iter().map(|l| l.1.as_str()).collect::<Vec<_>>(),
        ["future", "too_large"]
    );
    let old = store.latest(JOB, "1m").unwrap().expect("the list");
    assert_eq!((old.revision, old.exact, old.error_bound), (2, true, 0));
    assert_eq!(store.dead_letter_counts(JOB).unwrap().len(), 5);
    drop(store);
    db.store();
    assert_eq!(
        letters(&db),
        after,
        "connecting to a version-3 schema again changes nothing"
    );
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

//! A version-2 schema, created here with the version-2 DDL (kept verbatim below, as the release
//! before lists said what they are wrote it): connecting migrates it to version 3 under the
//! migration lock (the accuracy columns and their constraints added, every old row exact),
//! after which approximate lists commit and read back. The migrated tables are the tables a new
//! schema gets: the same columns, the same constraints.

use super::tests::TestDb;
use super::*;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{approximate, batch, list, sketch_check, JOB};
use crate::types::StoredList;
use hotlist_operators::time::Millis;

/// The tables and version table of schema version 2, verbatim.
const V2_DDL: &str = "
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
    reason      TEXT        NOT NULL CONSTRAINT dead_letters_reason_check
                            CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large')),
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
CREATE TABLE IF NOT EXISTS hotlist_jobs (
    job        TEXT        NOT NULL PRIMARY KEY,
    generation BIGINT      NOT NULL CHECK (generation >= 1),
    owner      TEXT        NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS hotlist_schema (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT  NOT NULL
);
INSERT INTO hotlist_schema (one, version) VALUES (TRUE, 2);
";

/// What the previous release wrote: a window, one list of two items, a commit.
const V2_ROWS: &str = "
INSERT INTO hotlist_windows VALUES ('hotlist', '1m', 60000, 60000, 10, 0);
INSERT INTO topk_instances VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 2,
    'final', TRUE, 'epoch'::timestamptz + interval '60001 milliseconds', now(), 2);
INSERT INTO topk VALUES
    ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 1, 'a', 3, 2, TRUE, 'final', now()),
    ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 2, 'b', 1, 2, TRUE, 'final', now());
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 'epoch'::timestamptz + interval '60001 milliseconds', now());
";

/// `db`'s schema as the previous release left it: version 2 with [`V2_ROWS`].
fn v2_schema(db: &TestDb) {
    let mut c = db.client();
    c.batch_execute(&format!("CREATE SCHEMA {}", ident::quote_ident(&db.schema)))
        .unwrap();
    c.batch_execute(V2_DDL).unwrap();
    c.batch_execute(V2_ROWS).unwrap();
}

fn version(db: &TestDb) -> i64 {
    db.client()
        .query_one("SELECT version FROM hotlist_schema", &[])
        .unwrap()
        .get(0)
}

/// Connecting (as the job or a reader does) migrates: version 3, the old list kept and exact
/// (`exact`, `error_bound = 0`, no sketch check, in the header and in every row); an
/// approximate list then commits and reads back. Connecting again changes nothing.
#[test]
fn a_version_2_schema_is_migrated_on_connect() {
    let db = TestDb::new();
    v2_schema(&db);
    let mut store = db.store();
    assert_eq!(version(&db), SCHEMA_VERSION);
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
    drop(store);
    let mut again = db.store();
    assert_eq!(version(&db), SCHEMA_VERSION);
    assert_eq!(
        again.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(sketched)),
        "connecting to a version-3 schema again changes nothing"
    );
}

/// A column: `table.name`, type, nullable, default.
type Column = (String, String, String, Option<String>);

/// The columns of the lists' tables and their constraints (name, definition), in a stable
/// order.
fn shape(db: &TestDb) -> (Vec<Column>, Vec<(String, String)>) {
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
    let (new_shape, migrated_shape) = (shape(&new), shape(&migrated));
    assert_eq!(migrated_shape, new_shape);
    let names: Vec<&str> = new_shape.1.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "topk_error_bound_check",
        "topk_exact_check",
        "topk_instances_error_bound_check",
        "topk_instances_exact_check",
        "topk_instances_sketch_check",
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

//! A version-5 schema (lists without certificates), its `topk_instances` created with the
//! version-5 DDL (kept verbatim below): connecting migrates it to version 6 under the
//! migration lock (the certificate's columns and their check added, no old list certified),
//! after which certified lists commit and read back, the lists written before stay, and the
//! migrated table is the table a new schema gets. Its check refuses a certificate that cannot
//! be.

use super::tests::TestDb;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{approximate, batch, certified, list, sketch_check, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::time::Millis;

/// The version-5 `topk_instances`, the one table version 6 changed, verbatim.
const V5_TOPK_INSTANCES: &str = "
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
    exact        BOOLEAN     NOT NULL DEFAULT TRUE,
    error_bound  BIGINT      NOT NULL DEFAULT 0 CONSTRAINT topk_instances_error_bound_check CHECK (error_bound >= 0),
    sketch_found           BIGINT,
    sketch_of              BIGINT,
    sketch_max_overcount   BIGINT,
    sketch_total_overcount BIGINT,
    group_key    TEXT        NOT NULL DEFAULT '',
    CONSTRAINT topk_instances_pkey PRIMARY KEY (job, window_name, group_key, window_start),
    CONSTRAINT topk_instances_exact_check CHECK (NOT exact OR error_bound = 0),
    CONSTRAINT topk_instances_sketch_check CHECK (
        num_nulls(sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount) IN (0, 4)
        AND sketch_found >= 0 AND sketch_of >= sketch_found AND sketch_max_overcount >= 0
        AND sketch_total_overcount >= 0)
);
";

/// Turns a schema of this build's version into a version-5 one stamped `version`:
/// `topk_instances` as version 5 created it, every header kept without its certificate.
pub(super) fn downgrade_to_v5(db: &TestDb, version: i64) {
    db.client()
        .batch_execute(&format!(
            "CREATE TEMP TABLE headers_v6 AS SELECT * FROM topk_instances;
             DROP TABLE topk_instances; {V5_TOPK_INSTANCES}
             INSERT INTO topk_instances SELECT job, window_name, window_start, window_end, revision, state, final,
                 watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of, sketch_max_overcount,
                 sketch_total_overcount, group_key FROM headers_v6;
             DROP TABLE headers_v6;
             UPDATE hotlist_schema SET version = {version};"
        ))
        .unwrap();
}

fn version(db: &TestDb) -> i64 {
    db.client()
        .query_one("SELECT version FROM hotlist_schema", &[])
        .unwrap()
        .get(0)
}

/// A column: name, type, nullable, default.
type Column = (String, String, String, Option<String>);

/// The columns of `topk_instances` and its constraints (name, definition), in a stable order.
fn shape(db: &TestDb) -> (Vec<Column>, Vec<(String, String)>) {
    let mut c = db.client();
    let columns = c
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text, column_default::text
             FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = 'topk_instances' ORDER BY ordinal_position",
            &[&db.schema],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let constraints = c
        .query(
            "SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint
             WHERE conrelid = 'topk_instances'::regclass ORDER BY conname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    (columns, constraints)
}

#[test]
fn a_version_5_schema_is_migrated_on_connect() {
    let db = TestDb::new();
    let mut w = db.store();
    w.prepare(JOB, &windows()).unwrap();
    let sketched = approximate(list(60_000, 1, 3), 37, Some(sketch_check(2, 3)));
    assert!(w.commit(&batch(1, vec![list(0, 3, 2), sketched.clone()])).unwrap());
    let new = shape(&db);
    let names: Vec<&str> = new.1.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"topk_instances_certificate_check"), "{names:?}");
    drop(w);
    downgrade_to_v5(&db, 5);
    assert_eq!(version(&db), 5);
    assert_ne!(shape(&db), new);

    let mut w = db.store();
    assert_eq!(version(&db), super::SCHEMA_VERSION);
    assert_eq!(super::SCHEMA_VERSION, 6);
    assert_eq!(
        shape(&db),
        new,
        "the migrated table has the new table's columns, in order, and checks"
    );
    assert_eq!(
        w.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(sketched)),
        "the old lists stay"
    );
    assert_eq!(
        w.instance(JOB, "1m", Millis(0)).unwrap(),
        Some(StoredList::from(list(0, 3, 2))),
        "no certificate"
    );
    let proved = certified(list(120_000, 3, 3), 40, 2);
    assert!(w.commit(&batch(2, vec![proved.clone()])).unwrap());
    drop(w);
    let mut again = db.store();
    assert_eq!(version(&db), super::SCHEMA_VERSION);
    assert_eq!(
        again.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(proved)),
        "connecting to a version-6 schema again changes nothing"
    );
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

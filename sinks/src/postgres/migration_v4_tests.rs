//! A version-4 schema (lists without groups): connecting a writer migrates it to version 5
//! (`group_key` joins the list tables' primary keys, every old list global; `by_dims`), after
//! which per-group lists commit and read back, the lists written before stay, and the migrated
//! tables have the new tables' columns and keys.

use super::tests::TestDb;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, list, windows, JOB};
use hotlist_operators::group::GroupKey;
use hotlist_operators::time::Millis;

/// Turns a schema of this build's version into a version-4 one (through version 5: its
/// certificates dropped; its per-group lists dropped) stamped `version`.
pub(super) fn downgrade_to_v4(db: &TestDb, version: i64) {
    super::migration_v5_tests::downgrade_to_v5(db, 5);
    db.client()
        .batch_execute(&format!(
            "DELETE FROM topk WHERE group_key <> ''; DELETE FROM topk_instances WHERE group_key <> '';
             ALTER TABLE topk DROP CONSTRAINT topk_pkey, DROP COLUMN group_key,
                 ADD PRIMARY KEY (job, window_name, window_start, rank);
             ALTER TABLE topk_instances DROP CONSTRAINT topk_instances_pkey, DROP COLUMN group_key,
                 ADD PRIMARY KEY (job, window_name, window_start);
             ALTER TABLE hotlist_windows DROP COLUMN by_dims;
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

/// The columns and primary-key definition of `table`.
fn shape(db: &TestDb, table: &str) -> (Vec<(String, String, Option<String>)>, String) {
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

#[test]
fn a_version_4_schema_is_migrated_on_connect() {
    let db = TestDb::new();
    let mut w = db.store();
    w.prepare(JOB, &windows()).unwrap();
    assert!(w.commit(&batch(1, vec![list(0, 1, 2), list(60_000, 1, 3)])).unwrap());
    let new: Vec<_> = ["topk", "topk_instances", "hotlist_windows"]
        .map(|t| shape(&db, t))
        .into();
    drop(w);
    downgrade_to_v4(&db, 4);
    assert_eq!(version(&db), 4);
    let mut w = db.store();
    assert_eq!(version(&db), super::SCHEMA_VERSION);
    assert_eq!(super::SCHEMA_VERSION, 6);
    let migrated: Vec<_> = ["topk", "topk_instances", "hotlist_windows"]
        .map(|t| shape(&db, t))
        .into();
    assert_eq!(migrated, new, "migrated tables have the new tables' columns and keys");
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
    let us = GroupKey::from_pairs([("country", "US")]);
    let mut grouped = list(60_000, 1, 1);
    grouped.group = us.clone();
    assert!(w.commit(&batch(2, vec![grouped])).unwrap());
    let mut r = db.store();
    assert_eq!(r.latest_of(JOB, "1m", &us).unwrap().map(|l| l.items.len()), Some(1));
    assert_eq!(r.windows(JOB).unwrap()[1].by, vec!["country".to_string()]);
    assert_eq!(
        r.groups(JOB, "1m").unwrap(),
        Some((Millis(60_000), vec![GroupKey::global(), us]))
    );
}

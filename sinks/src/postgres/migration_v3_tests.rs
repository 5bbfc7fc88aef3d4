//! A version-3 schema: version 4 only adds the hot-key tables (`hot_key_windows`, `hot_keys`),
//! so a version-3 schema is a version-4 one (`migration_v4_tests`) without them, stamped 3. Reading it gives no hot
//! keys; connecting a writer migrates it to version 4, after which hot-key windows commit and
//! read back, and the lists written before stay.

use super::tests::TestDb;
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, hot_window, list, JOB};
use hotlist_operators::hot_keys::HotState;

fn version(db: &TestDb) -> i64 {
    db.client()
        .query_one("SELECT version FROM hotlist_schema", &[])
        .unwrap()
        .get(0)
}

#[test]
fn a_version_3_schema_is_migrated_on_connect() {
    let db = TestDb::new();
    let mut w = db.store();
    assert!(w.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
    drop(w);
    super::migration_v4_tests::downgrade_to_v4(&db, 4);
    db.client()
        .batch_execute("DROP TABLE hot_keys; DROP TABLE hot_key_windows; UPDATE hotlist_schema SET version = 3;")
        .unwrap();
    assert_eq!(version(&db), 3);
    let mut w = db.store();
    assert_eq!(version(&db), super::SCHEMA_VERSION);
    assert_eq!(super::SCHEMA_VERSION, 6);
    assert_eq!(
        w.latest(JOB, "1m").unwrap().map(|l| l.items.len()),
        Some(2),
        "the old rows stay"
    );
    assert_eq!(w.hot_keys(JOB).unwrap(), None);
    let hot = hot_window(0, &[("a", 12.5, HotState::Hot), ("b", 7.25, HotState::Cooling)]);
    let mut b = batch(2, vec![]);
    b.hot_keys = vec![hot.clone()];
    assert!(w.commit(&b).unwrap());
    assert_eq!(db.store().hot_keys(JOB).unwrap(), Some(hot));
}

//! A version-3 database: version 4 only adds the hot-key tables (`hot_key_windows`,
//! `hot_keys`), so a version-3 database is a version-4 one (`migration_v4_tests`) without them,
//! stamped 3. A reader
//! reads it as it is (no hot keys, its lists as before) without changing it; the job's `open`
//! migrates it to version 4, after which hot-key windows commit and read back, also through a
//! reader opened before the migration.

use super::*;
use crate::store::SinkStore;
use crate::test_fixtures::{batch, hot_window, list, JOB};
use hotlist_operators::hot_keys::HotState;

/// A version-3 database at `dir/v3.db` holding one list.
fn v3_database(dir: &Path) -> PathBuf {
    let path = dir.join("v3.db");
    let mut w = SqliteStore::open(&path).unwrap();
    assert!(w.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
    drop(w);
    super::migration_v4_tests::downgrade_to_v4(&path, 4);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("DROP TABLE hot_keys; DROP TABLE hot_key_windows; PRAGMA user_version = 3;")
        .unwrap();
    path
}

fn user_version(path: &Path) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap()
}

#[test]
fn a_version_3_database_is_read_as_it_is_then_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = v3_database(dir.path());
    let r = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(r.hot_keys(JOB).unwrap(), None, "no hot-key tables: no hot keys");
    assert_eq!(r.latest(JOB, "1m").unwrap().map(|l| l.items.len()), Some(2));
    assert_eq!(user_version(&path), 3, "a reader never migrates");

    let mut w = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 6);
    assert_eq!(
        w.latest(JOB, "1m").unwrap().map(|l| l.items.len()),
        Some(2),
        "the old rows stay"
    );
    let hot = hot_window(0, &[("a", 12.5, HotState::Hot)]);
    let mut b = batch(2, vec![]);
    b.hot_keys = vec![hot.clone()];
    assert!(w.commit(&b).unwrap());
    assert_eq!(
        r.hot_keys(JOB).unwrap(),
        Some(hot.clone()),
        "the reader opened before sees them"
    );
    drop(w);
    let w = SqliteStore::open(&path).unwrap();
    assert_eq!(w.hot_keys(JOB).unwrap(), Some(hot), "opening again changes nothing");
}

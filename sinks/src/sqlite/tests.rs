//! SQLite-only tests (opening, read-only handles, error classification), and the store
//! conformance suite on a temporary database file.

use super::*;
use crate::conformance::{sql_certificate_columns, sql_sketch_columns, Damage, Subject};
use crate::store::SinkStore;
use crate::test_fixtures::{batch, list, JOB};

/// A new database in a temporary directory (removed with the subject): writers open it with
/// `open`, readers with `open_read_only`.
fn subject() -> Subject {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hot.db");
    SqliteStore::open(&path).unwrap(); // creates it, so that readers can open it
    let (w, r, h, rows, d) = (path.clone(), path.clone(), path.clone(), path.clone(), path);
    Subject {
        writer: Box::new(move || Box::new(SqliteStore::open(&w).unwrap())),
        reader: Box::new(move || Box::new(SqliteStore::open_read_only(&r).unwrap())),
        history: Some(Box::new(move || Box::new(SqliteStore::open_read_only(&h).unwrap()))),
        stored_rows: Some(Box::new(move |start| stored_rows(&rows, start))),
        damage: Some(Box::new(move |what| damage(&d, what))),
        locks: true,
        place: Box::new(dir),
    }
}

/// Writes a [`Damage`] with plain SQL, on a connection of its own (ignoring the tables'
/// `CHECK` constraints, as a damaged file would).
fn damage(path: &Path, what: Damage) {
    let instance = "WHERE window_name = '1m' AND window_start = 0";
    let sql = match what {
        Damage::ItemCount(n) => format!("UPDATE topk_instances SET item_count = {n} WHERE window_name = '1m'"),
        Damage::WindowK(k) => format!("UPDATE hotlist_windows SET k = {k} WHERE name = '1m'"),
        Damage::CommitWatermark(ms) => format!("UPDATE hotlist_commits SET watermark = {ms}"),
        Damage::Accuracy { exact, error_bound } => {
            let exact = i64::from(exact);
            format!("UPDATE topk_instances SET exact = {exact}, error_bound = {error_bound} {instance}")
        }
        Damage::SketchCheck(values) => {
            format!("UPDATE topk_instances SET {} {instance}", sql_sketch_columns(values))
        }
        Damage::Certificate(values) => {
            format!(
                "UPDATE topk_instances SET {} {instance}",
                sql_certificate_columns(values)
            )
        }
        Damage::State(state) => {
            let is_final = i64::from(state == hotlist_operators::record::ListState::Final);
            format!(
                "UPDATE topk_instances SET state = '{}', final = {is_final} {instance}",
                state.as_str()
            )
        }
        Damage::RowAccuracy { exact, error_bound } => {
            let exact = i64::from(exact);
            format!("UPDATE topk SET exact = {exact}, error_bound = {error_bound} {instance}")
        }
        Damage::HotKeyCount(n) => format!("UPDATE hot_key_windows SET key_count = {n}"),
        Damage::RangesText(text) => format!(
            "UPDATE instance_ranges SET ranges = '{}', unreadable = NULL {instance}",
            text.replace('\'', "''")
        ),
        Damage::RangesEnd(ms) => format!("UPDATE instance_ranges SET window_end = {ms} {instance}"),
    };
    let conn = Connection::open(path).unwrap();
    conn.pragma_update(None, "ignore_check_constraints", true).unwrap();
    conn.execute_batch(&sql).unwrap();
}

crate::conformance::suite!(subject);
crate::conformance::trend_suite!(subject);

/// (rank, revision) of the `topk` rows at `start`, read with a connection of its own.
fn stored_rows(path: &Path, start: i64) -> Vec<(i64, i64)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT rank, revision FROM topk WHERE window_start = ?1 ORDER BY rank")
        .unwrap();
    let rows = stmt.query_map([start], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// The processes of a cluster open (and create) the database at the same moment: every
/// open succeeds (found by the 2-process crash test: the switch to WAL mode was "locked").
#[test]
fn concurrent_opens_of_a_new_database_all_succeed() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let barrier = std::sync::Barrier::new(4);
        let errors: Vec<String> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        SqliteStore::open(&path).err().map(|e| e.to_string())
                    })
                })
                .collect();
            threads.into_iter().filter_map(|t| t.join().unwrap()).collect()
        });
        assert!(errors.is_empty(), "round {round}: {errors:?}");
    }
}

#[test]
fn open_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    let err = SqliteStore::open_read_only(&missing).unwrap_err();
    assert!(matches!(err, SinkError::NoDatabase { .. }));
    assert_eq!(
        err.to_string(),
        format!("no hotlist database at {} (run the job first)", missing.display())
    );
    assert!(!err.retryable());
    assert!(!missing.exists(), "a reader must not create the file");

    let nested = dir.path().join("no/such/dir/hot.db");
    let err = SqliteStore::open(&nested).unwrap_err();
    assert!(matches!(err, SinkError::MissingParent { .. }), "{err}");
    assert!(err.to_string().contains(&nested.display().to_string()));

    // An SQLite file without the hotlist tables.
    let foreign = dir.path().join("foreign.db");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let err = SqliteStore::open_read_only(&foreign).unwrap_err();
    assert!(matches!(err, SinkError::Schema { .. }), "{err}");
}

#[test]
fn read_only_handles_refuse_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hot.db");
    let mut writer = SqliteStore::open(&path).unwrap();
    assert!(writer.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
    let mut reader = SqliteStore::open_read_only(&path).unwrap();
    let err = reader.commit(&batch(2, vec![])).unwrap_err();
    assert!(matches!(err, SinkError::ReadOnly { .. }), "{err}");
    assert!(reader.prepare(JOB, &[]).is_err());
    assert_eq!(reader.committed_epoch(JOB).unwrap(), Some(1));
    // The reader sees later commits.
    assert!(writer.commit(&batch(2, vec![list(0, 2, 1)])).unwrap());
    let got = reader.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
    assert_eq!(got.revision, 2);
}

/// Busy, locked and I/O errors are transient; constraint violations and corruption are not.
#[test]
fn errors_are_classified_by_their_code() {
    let sqlite = |code: i32| {
        let source = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None);
        sql_err(Path::new("x.db"), "commit")(source)
    };
    assert!(sqlite(rusqlite::ffi::SQLITE_BUSY).retryable());
    assert!(sqlite(rusqlite::ffi::SQLITE_LOCKED).retryable());
    assert!(sqlite(rusqlite::ffi::SQLITE_IOERR).retryable());
    assert!(!sqlite(rusqlite::ffi::SQLITE_CONSTRAINT).retryable());
    assert!(!sqlite(rusqlite::ffi::SQLITE_CORRUPT).retryable());
    let msg = sqlite(rusqlite::ffi::SQLITE_BUSY).to_string();
    assert!(msg.starts_with("commit on x.db failed: "), "{msg}");
}

/// Rows past the window's `k` are not read (the statement stops at `k + 1`), and are reported
/// with the header they disagree with; a negative or non-integer stored count is an error, not
/// a panic.
#[test]
fn rows_past_k_are_reported_without_reading_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hot.db");
    let mut writer = SqliteStore::open(&path).unwrap();
    writer.prepare(JOB, &crate::test_fixtures::windows()).unwrap(); // 1m: k = 3
    assert!(writer.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(r) AS (SELECT 4 UNION ALL SELECT r + 1 FROM n WHERE r < 100000)
         INSERT INTO topk SELECT job, window_name, group_key, window_start, window_end, r, 'x' || r, 0, revision,
                                 final, state, as_of, exact, error_bound, NULL, NULL, NULL FROM n, topk WHERE rank = 1",
    )
    .unwrap();
    let reader = SqliteStore::open_read_only(&path).unwrap();
    let err = reader.latest(JOB, "1m").unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(
        err.to_string().ends_with("header item_count 3 but at least 4 rows"),
        "{err}"
    );
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON;
         DELETE FROM topk WHERE rank > 3; UPDATE topk SET count = -5 WHERE rank = 3",
    )
    .unwrap();
    let err = reader.latest(JOB, "1m").unwrap_err();
    assert!(err.to_string().ends_with("count -5 at rank 3 is negative"), "{err}");
    conn.execute_batch("UPDATE topk SET count = 'many' WHERE rank = 3")
        .unwrap();
    let err = reader.latest(JOB, "1m").unwrap_err();
    assert!(!err.retryable(), "{err}");
    assert!(err.to_string().contains("reading the latest list of job"), "{err}");
}

/// A trend list's rows keep its baseline, score and history; rows whose trend columns do not
/// agree (a baseline that is not the history's sum, a score its counts do not give, a history
/// that is not counts, some columns without the others) read as corrupt, naming the row.
#[test]
fn trend_lists_round_trip_and_damaged_trend_columns_are_corrupt() {
    use crate::test_fixtures::trending;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut w = SqliteStore::open(&path).unwrap();
    let l = trending(0, 3);
    assert!(w.commit(&batch(1, vec![l.clone()])).unwrap());
    assert_eq!(w.latest(JOB, "1m").unwrap(), Some(StoredList::from(l)));
    drop(w);
    let damages = [
        (
            "UPDATE topk SET baseline = baseline + 1 WHERE rank = 2",
            "row 2 has baseline",
        ),
        ("UPDATE topk SET score = score * 2 WHERE rank = 1", "row 1 has score"),
        ("UPDATE topk SET history = '1,x,2' WHERE rank = 3", "row 3 has history"),
        (
            "UPDATE topk SET baseline = NULL, score = NULL, history = NULL WHERE rank = 2",
            "row 2 is not the same kind",
        ),
        ("UPDATE topk SET count = 1000 WHERE rank = 3", "row 3 has score"),
    ];
    for (n, (sql, want)) in damages.into_iter().enumerate() {
        let damaged = dir.path().join(format!("damaged-{n}.db"));
        std::fs::copy(&path, &damaged).unwrap();
        Connection::open(&damaged).unwrap().execute_batch(sql).unwrap();
        let err = SqliteStore::open_read_only(&damaged)
            .unwrap()
            .latest(JOB, "1m")
            .unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{sql}: {err}");
        assert!(err.to_string().contains(want), "{sql}: {err}");
    }
}

/// Rows of `instance_ranges` a damaged file may hold (its checks ignored) read as corrupt,
/// naming the instance and the field: both or neither of `ranges` and `unreadable`, a column
/// that is not text, JSON that is not the stored shape; the database's ranges are written in
/// the documented JSON.
#[test]
fn damaged_instance_ranges_rows_are_corrupt() {
    use crate::test_fixtures::{sealed, unreadable};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut w = SqliteStore::open(&path).unwrap();
    let mut b = batch(1, vec![]);
    b.ranges = vec![sealed("1m", 0), unreadable("1m", 60_000, "gone")];
    assert!(w.commit(&b).unwrap());
    let conn = Connection::open(&path).unwrap();
    let stored: Vec<(i64, i64, Option<String>, Option<String>)> = conn
        .prepare("SELECT window_start, window_end, ranges, unreadable FROM instance_ranges ORDER BY window_start")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let Ok(ranges) = &sealed("1m", 0).ranges else {
        unreachable!()
    };
    assert_eq!(
        stored,
        [
            (0, 60_000, Some(crate::ranges::ranges_json(ranges)), None),
            (60_000, 120_000, None, Some("gone".into())),
        ]
    );
    assert!(stored[0]
        .2
        .as_deref()
        .is_some_and(|j| j.contains(r#""check":16045690984503111695"#)));
    conn.pragma_update(None, "ignore_check_constraints", true).unwrap();
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let damages = [
        ("SET unreadable = 'x'", "both ranges and unreadable are set"),
        ("SET ranges = NULL", "neither ranges nor unreadable is set"),
        // the column's text affinity stores a number as its text
        (
            "SET ranges = 42",
            "ranges: not the stored JSON of partition ranges: invalid type: integer `42`",
        ),
        ("SET ranges = x'5b5d'", "ranges is a blob, not text"),
        (
            "SET ranges = NULL, unreadable = x'00'",
            "unreadable is a blob, not text",
        ),
        (
            "SET ranges = '[{\"partition\":0}]'",
            "ranges: not the stored JSON of partition ranges: missing field",
        ),
    ];
    for (set, want) in damages {
        conn.execute_batch(&format!("UPDATE instance_ranges {set} WHERE window_start = 0"))
            .unwrap();
        let err = w.sealed_ranges(JOB, "1m", Millis(0)).unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{set}: {err}");
        assert!(!err.retryable());
        assert!(err.to_string().contains(&format!("{at}: {want}")), "{set}: {err}");
        assert_eq!(
            w.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(),
            [Millis(0), Millis(60_000)]
        );
        conn.execute(
            "UPDATE instance_ranges SET ranges = ?1, unreadable = NULL WHERE window_start = 0",
            [&stored[0].2],
        )
        .unwrap();
        assert_eq!(w.sealed_ranges(JOB, "1m", Millis(0)).unwrap(), Some(sealed("1m", 0)));
    }
}

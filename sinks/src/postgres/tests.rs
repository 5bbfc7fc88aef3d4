//! PostgreSQL-only tests (timestamptz and text encoding, column types, query plans, corrupt
//! rows, credentials in messages, reconnecting, racing starts and committers), and the store
//! conformance suite on a schema of its own.
//!
//! These tests need a real server (default `postgresql://postgres@127.0.0.1:5432/test`, or
//! `HOTLIST_TEST_POSTGRES_URL`); they fail, never skip, when it is unreachable.

use super::client::Queries;
use super::encode::{to_pg, PG_END_MS, PG_MIN_MS};
use super::error::{describe, pg_err, retry_class};
use super::ident::{quote_ident, redact};
use super::statements::{SELECT_HEADER_AT, SELECT_LATEST_HEADER, SELECT_ROWS};
use super::*;
use crate::conformance::{sql_certificate_columns, sql_sketch_columns, Damage, Subject};
use crate::error::{Retry, SinkError};
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{batch, letter, list, server_url, trending, windows, JOB};
use crate::types::StoredList;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::DeadReason;
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use postgres::{Client, NoTls};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Barrier;

/// The test server: `HOTLIST_TEST_POSTGRES_URL`, or the local one.
fn test_url() -> String {
    server_url("HOTLIST_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
}

/// A schema of its own for one test, dropped with everything in it when the test ends.
pub(super) struct TestDb {
    pub(super) url: String,
    pub(super) schema: String,
}

impl TestDb {
    pub(super) fn new() -> TestDb {
        let url = test_url();
        if let Err(e) = Client::connect(&url, NoTls) {
            panic!(
                "PostgreSQL is not reachable at {} ({}). These tests need a real server: start it \
                 (`sudo service postgresql start` or `pg_ctlcluster 15 main start`), create the database \
                 (`createdb -h 127.0.0.1 -U postgres test`) with trust auth for user postgres on 127.0.0.1, \
                 or set HOTLIST_TEST_POSTGRES_URL to another server.",
                redact(&url),
                describe(&e)
            );
        }
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let schema = format!("hotlist_test_{:016x}", h.finish());
        TestDb { url, schema }
    }

    pub(super) fn store(&self) -> PostgresStore {
        connect(&self.url, &self.schema)
    }

    /// A plain connection on the test schema, for looking at the tables directly.
    pub(super) fn client(&self) -> Client {
        client(&self.url, &self.schema)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Err(e) = drop_schema(&self.url, &self.schema) {
            eprintln!("could not drop test schema {}: {e}", self.schema);
        }
    }
}

fn connect(url: &str, schema: &str) -> PostgresStore {
    PostgresStore::connect_with_schema(url, schema).unwrap_or_else(|e| panic!("{e}"))
}

/// A plain connection on `schema`, in UTC.
fn client(url: &str, schema: &str) -> Client {
    let mut c = Client::connect(url, NoTls).unwrap();
    c.batch_execute(&format!(
        "SET search_path TO {}; SET TimeZone = 'UTC'",
        quote_ident(schema)
    ))
    .unwrap();
    c
}

/// A schema of its own (dropped with the subject); every handle is a connection of its own.
fn subject() -> Subject {
    let db = TestDb::new();
    let (url, schema) = (db.url.clone(), db.schema.clone());
    let (w, r, h, d) = (
        (url.clone(), schema.clone()),
        (url.clone(), schema.clone()),
        (url.clone(), schema.clone()),
        (url.clone(), schema.clone()),
    );
    Subject {
        writer: Box::new(move || Box::new(connect(&w.0, &w.1))),
        reader: Box::new(move || Box::new(connect(&r.0, &r.1))),
        history: Some(Box::new(move || Box::new(connect(&h.0, &h.1)))),
        stored_rows: Some(Box::new(move |start| stored_rows(&mut client(&url, &schema), start))),
        damage: Some(Box::new(move |what| damage(&mut client(&d.0, &d.1), what))),
        locks: true,
        place: Box::new(db),
    }
}

/// Writes a [`Damage`] with plain SQL; damage to a list's accuracy first drops the
/// constraints that keep it out (the subject's schema is its own).
fn damage(c: &mut Client, what: Damage) {
    let instance = "WHERE window_name = '1m' AND window_start = 'epoch'";
    let sql = match what {
        Damage::ItemCount(n) => format!("UPDATE topk_instances SET item_count = {n} WHERE window_name = '1m'"),
        Damage::WindowK(k) => format!("UPDATE hotlist_windows SET k = {k} WHERE name = '1m'"),
        Damage::CommitWatermark(ms) => {
            format!("UPDATE hotlist_commits SET watermark = to_timestamp({ms}::float8 / 1000)")
        }
        Damage::Accuracy { exact, error_bound } => {
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
            let is_final = state == hotlist_operators::record::ListState::Final;
            format!(
                "UPDATE topk_instances SET state = '{}', final = {is_final} {instance}",
                state.as_str()
            )
        }
        Damage::RowAccuracy { exact, error_bound } => {
            format!("UPDATE topk SET exact = {exact}, error_bound = {error_bound} {instance}")
        }
        Damage::HotKeyCount(n) => format!("UPDATE hot_key_windows SET key_count = {n}"),
        Damage::RangesText(text) => format!(
            "UPDATE instance_ranges SET ranges = '{}', unreadable = NULL {instance}",
            text.replace('\'', "''")
        ),
        Damage::RangesEnd(ms) => {
            format!("UPDATE instance_ranges SET window_end = to_timestamp({ms}::float8 / 1000) {instance}")
        }
    };
    c.batch_execute(
        "ALTER TABLE topk DROP CONSTRAINT IF EXISTS topk_exact_check,
             DROP CONSTRAINT IF EXISTS topk_error_bound_check;
         ALTER TABLE topk_instances DROP CONSTRAINT IF EXISTS topk_instances_exact_check,
             DROP CONSTRAINT IF EXISTS topk_instances_error_bound_check,
             DROP CONSTRAINT IF EXISTS topk_instances_sketch_check,
             DROP CONSTRAINT IF EXISTS topk_instances_certificate_check;
         ALTER TABLE hot_key_windows DROP CONSTRAINT IF EXISTS hot_key_windows_key_count_check;
         ALTER TABLE instance_ranges DROP CONSTRAINT IF EXISTS instance_ranges_end_check;",
    )
    .unwrap();
    c.batch_execute(&sql).unwrap();
}

crate::conformance::suite!(subject);
crate::conformance::trend_suite!(subject);

/// (rank, revision) of the rows of the `1m` instance at `start`.
fn stored_rows(c: &mut Client, start: i64) -> Vec<(i64, i64)> {
    let t = to_pg(Millis(start)).unwrap();
    c.query(
        "SELECT rank, revision FROM topk WHERE window_name = '1m' AND window_start = $1 ORDER BY rank",
        &[&t],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// The `final` column of rows and headers says whether the state is final.
#[test]
fn the_final_columns_follow_the_state() {
    let db = TestDb::new();
    let mut store = db.store();
    assert!(store.commit(&batch(1, vec![list(0, 1, 137)])).unwrap());
    assert!(store.commit(&batch(2, vec![list(0, 3, 2), list(0, 2, 7)])).unwrap());
    let finals: Vec<bool> = db
        .client()
        .query("SELECT final FROM topk UNION ALL SELECT final FROM topk_instances", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(finals, vec![true; 3]);
}

/// U+0000 cannot be stored in text: a dead letter's detail keeps the rest, with U+FFFD in its
/// place, while its raw bytes stay exact; positions and raw bytes have their own column types.
#[test]
fn dead_letter_details_replace_u0000_and_raw_bytes_are_bytea() {
    let db = TestDb::new();
    let mut store = db.store();
    let mut b = batch(1, vec![]);
    let mut l = letter(9, DeadReason::Bad, b"\0\x01");
    l.letter.detail = "ts: \"\0\" is not a time".into();
    b.dead_letters = vec![l];
    assert!(store.commit(&b).unwrap());
    let got = store.dead_letters(JOB, 1).unwrap().remove(0);
    assert_eq!(got.letter.detail, "ts: \"\u{FFFD}\" is not a time");
    assert_eq!(got.letter.raw, b"\0\x01");
    // Position and ids are stored as BIGINT, raw as bytea.
    let types: Vec<String> = db
        .client()
        .query(
            "SELECT data_type FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = 'dead_letters'
               AND column_name IN ('position', 'raw', 'recorded_at') ORDER BY column_name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(types, ["bigint", "bytea", "timestamp with time zone"]);
}

#[test]
fn times_round_trip_as_timestamptz_including_negative_and_infinite() {
    let db = TestDb::new();
    let mut store = db.store();
    let mut a = list(-1, 1, 2); // one millisecond before the epoch
    a.watermark = Millis::MIN;
    a.as_of = Millis::MAX;
    let mut b = list(PG_MIN_MS, 1, 1); // the earliest instant PostgreSQL holds
    b.end = Millis(PG_END_MS - 1); // and the last
    let mut c = list(-62_135_596_800_001, 2, 1); // 0000-12-31T23:59:59.999Z (1 BC)
    c.end = Millis::MAX;
    let mut bt = batch(1, vec![a.clone(), b.clone(), c.clone()]);
    bt.watermark = Millis::MIN;
    assert!(store.commit(&bt).unwrap());
    assert_eq!(store.last_commit(JOB).unwrap(), Some((1, Millis::MIN)));
    for l in [&a, &b, &c] {
        let got = store.instance(JOB, "1m", l.start).unwrap().unwrap();
        assert_eq!(got, StoredList::from(l.clone()));
    }
    // The columns are real timestamptz values, not integers in disguise.
    let text: Vec<(String, String, String, String)> = db
        .client()
        .query(
            "SELECT window_start::text, window_end::text, watermark::text, as_of::text
             FROM topk_instances t ORDER BY t.window_start",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        text,
        vec![
            (
                s("4714-11-24 00:00:00+00 BC"),
                s("294276-12-31 23:59:59.999+00"),
                s("4714-11-24 00:00:00.001+00 BC"),
                s("2023-11-14 22:13:20+00")
            ),
            (
                s("0001-12-31 23:59:59.999+00 BC"),
                s("infinity"),
                s("0001-01-01 00:00:00+00"),
                s("2023-11-14 22:13:20+00")
            ),
            (
                s("1969-12-31 23:59:59.999+00"),
                s("1970-01-01 00:00:59.999+00"),
                s("-infinity"),
                s("infinity")
            ),
        ]
    );
    let mut bt = batch(2, vec![]);
    bt.watermark = Millis::MAX;
    assert!(store.commit(&bt).unwrap());
    assert_eq!(store.last_commit(JOB).unwrap(), Some((2, Millis::MAX)));

    // Instants PostgreSQL cannot hold are refused before anything is written (but for
    // watermarks before its range: they precede every event time and are stored as -infinity).
    for bad in [Millis(PG_MIN_MS - 1), Millis(PG_END_MS), Millis(i64::MIN + 1)] {
        let mut l = list(0, 5, 3);
        l.as_of = bad;
        let err = store.commit(&batch(3, vec![l])).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(!err.retryable());
        assert!(err.to_string().contains("timestamptz range"), "{err}");
    }
    assert_eq!(store.committed_epoch(JOB).unwrap(), Some(2));
    assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap(), None);
    // An instant PostgreSQL cannot hold is simply not there.
    assert_eq!(store.instance(JOB, "1m", Millis(PG_END_MS)).unwrap(), None);
    let mut l = list(0, 5, 3);
    l.watermark = Millis(PG_MIN_MS - 1);
    let mut early = batch(3, vec![l]);
    early.watermark = Millis(i64::MIN + 1);
    assert!(store.commit(&early).unwrap());
    assert_eq!(
        store.instance(JOB, "1m", Millis(0)).unwrap().unwrap().watermark,
        Millis::MIN
    );
    assert_eq!(store.last_commit(JOB).unwrap(), Some((3, Millis::MIN)));
}

/// Dead letters of more than 64 MiB in one batch are inserted in several statements, in order,
/// in the one commit transaction (one array parameter near PostgreSQL's 1 GB limit would fail
/// every retry).
#[test]
fn large_dead_letters_are_inserted_in_chunks_in_order() {
    let db = TestDb::new();
    let mut store = db.store();
    let big = vec![0xab_u8; 30 << 20];
    let mut b = batch(1, vec![]);
    b.dead_letters = (1..=4).map(|pos| letter(pos, DeadReason::Bad, &big)).collect();
    b.dead_letters.push(letter(5, DeadReason::TooLarge, b"x"));
    assert!(store.commit(&b).unwrap());
    let rows = db
        .client()
        .query("SELECT position, length(raw) FROM dead_letters ORDER BY id", &[])
        .unwrap();
    let got: Vec<(i64, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        [(1, 30 << 20), (2, 30 << 20), (3, 30 << 20), (4, 30 << 20), (5, 1)]
    );
}

#[test]
fn text_postgres_cannot_hold_is_refused() {
    let db = TestDb::new();
    let mut store = db.store();
    let mut l = list(0, 1, 2);
    l.items[1].item_id = "a\0b".into();
    let err = store.commit(&batch(1, vec![l])).unwrap_err();
    assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("U+0000"), "{err}");
    assert_eq!(store.committed_epoch(JOB).unwrap(), None);
    let err = store
        .prepare(JOB, &[WindowSpec::tumbling("a\0", Span::from_millis(60_000), 3)])
        .unwrap_err();
    assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
}

/// The processes of a cluster all prepare the sink at start, at the same moment: none
/// fails (found by the 2-process Kafka crash test: delete + insert raced on the key).
#[test]
fn concurrent_prepares_of_one_job_all_succeed() {
    let db = TestDb::new();
    db.store().prepare(JOB, &windows()).unwrap();
    let barrier = std::sync::Barrier::new(4);
    let errors: Vec<String> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut store = db.store();
                    (0..25)
                        .filter_map(|_| {
                            barrier.wait();
                            store.prepare(JOB, &windows()).err().map(|e| e.to_string())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
    });
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(db.store().windows(JOB).unwrap().len(), windows().len());
}

/// "Latest list of window W" and "list of window W at start D" (header and rows) are index
/// lookups in the primary keys, not scans.
#[test]
fn list_reads_use_the_primary_keys() {
    let db = TestDb::new();
    let mut store = db.store();
    // Enough instances and rows that a sequential scan would be the planner's choice if the
    // keys did not serve the queries.
    let lists: Vec<PublishedList> = (0..3000).map(|i| list(i * 60_000, 1, 5)).collect();
    assert!(store.commit(&batch(1, lists)).unwrap());
    let mut c = db.client();
    c.batch_execute("ANALYZE topk; ANALYZE topk_instances").unwrap();
    let plan = |c: &mut Client, sql: &str| -> String {
        c.query(&format!("EXPLAIN {sql}"), &[])
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let at = "'1970-01-01T01:00:00Z'::timestamptz";
    for (sql, index) in [
        (
            SELECT_LATEST_HEADER
                .replace("$1", "'hotlist'")
                .replace("$2", "'1m'")
                .replace("$3", "''"),
            "topk_instances_pkey",
        ),
        (
            SELECT_HEADER_AT
                .replace("$1", "'hotlist'")
                .replace("$2", "'1m'")
                .replace("$3", at)
                .replace("$4", "''"),
            "topk_instances_pkey",
        ),
        (
            SELECT_ROWS
                .replace("$1", "'hotlist'")
                .replace("$2", "'1m'")
                .replace("$3", at)
                .replace("$4", "101")
                .replace("$5", "''"),
            "topk_pkey",
        ),
    ] {
        let p = plan(&mut c, &sql);
        assert!(p.contains("Index") && p.contains(index), "{sql}\n{p}");
        assert!(!p.contains("Seq Scan") && !p.contains("Sort"), "{sql}\n{p}");
    }
    assert_eq!(store.latest(JOB, "1m").unwrap().unwrap().start, Millis(2999 * 60_000));
}

/// A trend list's rows keep its baseline (`bigint`), score (`double precision`, the very value
/// written) and history (`text`), NULL on a count-ranked list's rows; rows whose trend columns
/// do not agree (a baseline that is not the history's sum, a score its counts do not give, a
/// history that is not counts, some columns without the others, a list of both kinds) read as
/// corrupt, naming the row, through the job's handle and a reader's.
#[test]
fn trend_lists_round_trip_and_damaged_trend_columns_are_corrupt() {
    let db = TestDb::new();
    let mut w = db.store();
    let l = trending(0, 3);
    assert!(w.commit(&batch(1, vec![l.clone(), list(60_000, 1, 2)])).unwrap());
    let good = Some(StoredList::from(l.clone()));
    assert_eq!(w.instance(JOB, "1m", Millis(0)).unwrap(), good);
    assert_eq!(w.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(60_000, 1, 2))));
    let mut c = db.client();
    let stored: Vec<(Option<i64>, Option<f64>, Option<String>)> = c
        .query(
            "SELECT baseline, score, history FROM topk ORDER BY window_start, rank",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let mut want: Vec<_> = l
        .items
        .iter()
        .map(|i| {
            let (b, s, h) = crate::sql_rows::trend_columns(i).expect("a trend item");
            (Some(b), Some(s), Some(h))
        })
        .collect();
    want.extend([(None, None, None), (None, None, None)]);
    assert_eq!(stored, want);
    let types: Vec<String> = c
        .query(
            "SELECT data_type FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = 'topk'
               AND column_name IN ('baseline', 'score', 'history') ORDER BY column_name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(types, ["bigint", "text", "double precision"]);

    // damage the instance at 0 (the checks that keep some of it out dropped), then restore it
    c.batch_execute(
        "ALTER TABLE topk DROP CONSTRAINT topk_trend_check;
         CREATE TEMP TABLE good AS SELECT * FROM topk",
    )
    .unwrap();
    let mut reader =
        PostgresStore::open_reader(&db.url, &db.schema, PgTimeouts::default()).unwrap_or_else(|e| panic!("{e}"));
    let instance = "window_start = 'epoch'";
    let damages = [
        ("SET baseline = baseline + 1 WHERE rank = 2", "row 2 has baseline"),
        ("SET score = score * 2 WHERE rank = 1", "row 1 has score"),
        ("SET history = '1,x,2' WHERE rank = 3", "row 3 has history"),
        ("SET history = '' WHERE rank = 3", "row 3 has history"),
        (
            "SET baseline = NULL, score = NULL, history = NULL WHERE rank = 2",
            "row 2 is not the same kind",
        ),
        (
            "SET score = NULL WHERE rank = 1",
            "row 1 has some of baseline, score and history but not all",
        ),
        ("SET count = 1000 WHERE rank = 3", "row 3 has score"),
    ];
    for (sql, want) in damages {
        c.batch_execute(&format!("UPDATE topk {sql} AND {instance}")).unwrap();
        for r in [&mut w, &mut reader] {
            let err = r.instance(JOB, "1m", Millis(0)).unwrap_err();
            assert!(matches!(err, SinkError::Corrupt { .. }), "{sql}: {err}");
            assert!(!err.retryable(), "{sql}: {err}");
            assert!(err.to_string().contains(want), "{sql}: {err} (want {want:?})");
        }
        c.batch_execute("DELETE FROM topk; INSERT INTO topk SELECT * FROM good")
            .unwrap();
        assert_eq!(
            reader.instance(JOB, "1m", Millis(0)).unwrap(),
            good,
            "repaired after {sql}"
        );
    }
}

/// An instance's ranges are stored as documented (one row, `timestamptz` instants, the JSON
/// text or the reason; U+0000 in a reason as U+FFFD); rows the constraints keep out (both or
/// neither of `ranges` and `unreadable`) and JSON that is not the stored shape read as corrupt,
/// naming the instance and the field, through the job's handle and a reader's.
#[test]
fn instance_ranges_are_stored_as_documented_and_damaged_rows_are_corrupt() {
    use crate::test_fixtures::{sealed, unreadable};
    let db = TestDb::new();
    let mut w = db.store();
    let mut b = batch(1, vec![]);
    b.ranges = vec![sealed("1m", 0), unreadable("1m", 60_000, "a\0b")];
    assert!(w.commit(&b).unwrap());
    let mut c = db.client();
    let stored: Vec<(String, String, Option<String>, Option<String>)> = c
        .query(
            "SELECT window_start::text, window_end::text, ranges, unreadable FROM instance_ranges ORDER BY window_start",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let Ok(ranges) = &sealed("1m", 0).ranges else {
        unreachable!()
    };
    let json = crate::ranges::ranges_json(ranges);
    assert_eq!(
        stored,
        [
            (
                "1970-01-01 00:00:00+00".into(),
                "1970-01-01 00:01:00+00".into(),
                Some(json.clone()),
                None
            ),
            (
                "1970-01-01 00:01:00+00".into(),
                "1970-01-01 00:02:00+00".into(),
                None,
                Some("a\u{FFFD}b".into())
            ),
        ]
    );
    assert_eq!(
        w.sealed_ranges(JOB, "1m", Millis(60_000)).unwrap(),
        Some(unreadable("1m", 60_000, "a\u{FFFD}b"))
    );

    c.batch_execute("ALTER TABLE instance_ranges DROP CONSTRAINT instance_ranges_one_check")
        .unwrap();
    let mut reader =
        PostgresStore::open_reader(&db.url, &db.schema, PgTimeouts::default()).unwrap_or_else(|e| panic!("{e}"));
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let damages = [
        ("SET unreadable = 'x'", "both ranges and unreadable are set"),
        ("SET ranges = NULL", "neither ranges nor unreadable is set"),
        (
            "SET ranges = '[1, 2]'",
            "ranges: not the stored JSON of partition ranges: invalid type",
        ),
        (
            "SET ranges = ''",
            "ranges: not the stored JSON of partition ranges: EOF",
        ),
    ];
    for (set, want) in damages {
        c.batch_execute(&format!("UPDATE instance_ranges {set} WHERE window_start = 'epoch'"))
            .unwrap();
        for r in [&mut w, &mut reader] {
            let err = r.sealed_ranges(JOB, "1m", Millis(0)).unwrap_err();
            assert!(matches!(err, SinkError::Corrupt { .. }), "{set}: {err}");
            assert!(!err.retryable(), "{set}: {err}");
            assert!(err.to_string().contains(&format!("{at}: {want}")), "{set}: {err}");
            assert_eq!(
                r.sealed_instances(JOB, "1m", Millis::MIN, 10).unwrap(),
                [Millis(0), Millis(60_000)]
            );
        }
        c.execute(
            "UPDATE instance_ranges SET ranges = $1, unreadable = NULL WHERE window_start = 'epoch'",
            &[&json],
        )
        .unwrap();
        assert_eq!(
            reader.sealed_ranges(JOB, "1m", Millis(0)).unwrap(),
            Some(sealed("1m", 0))
        );
    }
}

#[test]
fn inconsistent_rows_are_reported_as_corrupt() {
    let db = TestDb::new();
    let mut store = db.store();
    assert!(store.commit(&batch(1, vec![list(0, 1, 4)])).unwrap());
    let mut c = db.client();
    c.batch_execute("DELETE FROM topk WHERE rank = 4").unwrap();
    let err = store.latest(JOB, "1m").unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("header item_count 4 but 3 rows"), "{err}");
    assert!(err.to_string().contains(&db.schema), "{err}");
    c.batch_execute("UPDATE topk_instances SET item_count = 3; UPDATE topk SET revision = 2 WHERE rank = 2")
        .unwrap();
    let err = store.instance(JOB, "1m", Millis(0)).unwrap_err();
    assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
    assert!(!err.retryable());
    c.batch_execute("UPDATE topk SET revision = 1; UPDATE topk SET rank = 7 WHERE rank = 3")
        .unwrap();
    let err = store.instance(JOB, "1m", Millis(0)).unwrap_err();
    assert!(err.to_string().contains("rank 7"), "{err}");
}

#[test]
fn errors_name_the_server_without_credentials() {
    let url = "postgresql://postgres:s3cret@127.0.0.1:1/test?connect_timeout=5&password=s3cret";
    let err = PostgresStore::connect(url).unwrap_err();
    let msg = err.to_string();
    assert!(!msg.contains("s3cret"), "{msg}");
    assert!(
        msg.starts_with("connecting on postgresql://127.0.0.1:1/test?connect_timeout=5 schema public failed: "),
        "{msg}"
    );
    assert!(err.retryable(), "a refused connection may succeed later: {msg}");
    assert!(msg.contains("Connection refused"), "{msg}");
    assert!(!format!("{err:?}").contains("s3cret"));

    assert_eq!(
        redact("postgresql://u:p@ss/w?rd@host:5432/db"),
        "postgresql://host:5432/db"
    );
    assert_eq!(
        redact("postgres://host/db?user=u&password=x&sslmode=disable"),
        "postgres://host/db?sslmode=disable"
    );
    assert_eq!(
        redact("host=h  password = 'a \\' b' user=u dbname=d"),
        "host=h dbname=d"
    );
    assert_eq!(
        redact("host=h password='unterminated"),
        "<unparsable connection string>"
    );

    // A bad query is permanent, and says where it failed.
    let db = TestDb::new();
    let mut store = db.store();
    let e = store.client.execute("SELECT * FROM no_such_table", &[]).unwrap_err();
    assert_eq!(retry_class(&e), Retry::Permanent);
    let err = pg_err(store.location(), "probing")(e);
    assert_eq!(
        err.to_string(),
        format!(
            "probing on {} schema {} failed: db error: ERROR: relation \"no_such_table\" does not exist \
             (SQLSTATE 42P01)",
            redact(&db.url),
            db.schema
        )
    );
    let e = store.client.execute("SELECT 1/0", &[]).unwrap_err();
    assert_eq!(retry_class(&e), Retry::Permanent);
    assert!(format!("{store:?}").contains(&db.schema));
}

#[test]
fn a_lost_connection_is_retryable_and_the_next_call_reconnects() {
    let db = TestDb::new();
    let mut store = db.store();
    assert!(store.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    let pid: i32 = store.client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let killed: bool = db
        .client()
        .query_one("SELECT pg_terminate_backend($1, 10000)", &[&pid])
        .unwrap()
        .get(0);
    assert!(killed);
    // The first call may notice the loss (a retryable error) or find the connection already
    // closed and reconnect; retrying succeeds either way.
    let b = batch(2, vec![list(0, 2, 5)]);
    match store.commit(&b) {
        Ok(committed) => assert!(committed),
        Err(e) => {
            eprintln!("after the backend was terminated: {e}");
            assert!(e.retryable(), "{e}");
            assert!(e.to_string().contains("commit of job \"hotlist\" epoch 2"), "{e}");
            assert!(store.commit(&b).unwrap());
        }
    }
    let new_pid: i32 = store.client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    assert_ne!(pid, new_pid);
    assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap().unwrap().revision, 2);
}

/// Ends the session of `store`'s connection from another one (a network partition, or an
/// administrator), waiting up to 10 s for it to be gone.
fn terminate_session(db: &TestDb, store: &mut PostgresStore) {
    let pid: i32 = store.client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let killed: bool = db
        .client()
        .query_one("SELECT pg_terminate_backend($1, 10000)", &[&pid])
        .unwrap()
        .get(0);
    assert!(killed);
}

/// The job's session lock goes with a lost connection and is taken again by the reconnect; a
/// handle whose session ended while another run locked and claimed the job is a stale writer:
/// its next commit fails with `TakenOver`, never writing.
#[test]
fn a_reconnect_takes_the_lock_again_and_a_stale_writer_is_fenced() {
    let db = TestDb::new();
    let mut a = db.store();
    a.lock(JOB).unwrap();
    a.claim(JOB, "a").unwrap();
    assert!(a.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    terminate_session(&db, &mut a);
    // the first call may see the loss; the retry reconnects and locks again
    let b2 = batch(2, vec![list(0, 2, 3)]);
    if let Err(e) = a.commit(&b2) {
        assert!(e.retryable(), "{e}");
        assert!(a.commit(&b2).unwrap());
    }
    let mut b = db.store();
    assert!(matches!(b.lock(JOB), Err(SinkError::JobLocked { .. })), "locked again");
    // now `a` loses its session for good while `b` takes the job over
    terminate_session(&db, &mut a);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Err(e) = b.lock(JOB) {
        assert!(std::time::Instant::now() < deadline, "{e}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(b.claim(JOB, "b").unwrap().generation, 2);
    let stale = batch(3, vec![list(0, 3, 1)]);
    let err = match a.commit(&stale) {
        Err(e) if e.retryable() => a.commit(&stale).unwrap_err(),
        other => other.unwrap_err(),
    };
    assert!(
        matches!(
            err,
            SinkError::TakenOver {
                ours: 1,
                current: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(b.committed_epoch(JOB).unwrap(), Some(2));
    assert!(b.commit(&stale).unwrap());
}

#[test]
fn simultaneous_first_starts_do_not_race() {
    let db = TestDb::new();
    let start = Barrier::new(6);
    std::thread::scope(|s| {
        let starts: Vec<_> = (0..6)
            .map(|_| {
                let (db, start) = (&db, &start);
                s.spawn(move || {
                    start.wait();
                    // Each creates the schema and tables if missing: exactly one of them does.
                    PostgresStore::connect_with_schema(&db.url, &db.schema).map(|_| ())
                })
            })
            .collect();
        for st in starts {
            st.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
        }
    });
    let version: i64 = db
        .client()
        .query_one("SELECT version FROM hotlist_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION);
    // A newer schema is refused rather than written to.
    db.client()
        .batch_execute("UPDATE hotlist_schema SET version = 99")
        .unwrap();
    let err = PostgresStore::connect_with_schema(&db.url, &db.schema).unwrap_err();
    assert!(matches!(err, SinkError::Schema { .. }), "{err}");
    assert!(!err.retryable());
}

#[test]
fn concurrent_committers_serialize() {
    let db = TestDb::new();
    db.store(); // create the tables before the race
    let start = Barrier::new(2);
    let committed: Vec<Vec<u64>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (db, start) = (&db, &start);
                s.spawn(move || {
                    let mut store = db.store();
                    start.wait();
                    let mut mine = vec![];
                    for epoch in 1..=40u64 {
                        let mut b = batch(epoch, vec![list(0, epoch as u32, 3 + w)]);
                        b.dead_letters = vec![letter(epoch, DeadReason::Bad, b"x")];
                        if store.commit(&b).unwrap() {
                            mine.push(epoch);
                        }
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = committed.concat();
    all.sort_unstable();
    let n = all.len();
    all.dedup();
    assert_eq!(all.len(), n, "an epoch was committed twice: {committed:?}");
    let mut store = db.store();
    assert_eq!(store.committed_epoch(JOB).unwrap(), Some(40));
    assert_eq!(store.dead_letters(JOB, 1000).unwrap().len(), n);
    assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap().unwrap().revision, 40);
}

//! The store conformance suite: the contract of [`SinkStore`] and [`StoreReader`], checked the
//! same way on every backend (memory, SQLite, PostgreSQL, Redis).
//!
//! A backend joins with one line in its test module, `crate::conformance::suite!(subject);`,
//! where `subject()` returns a [`Subject`]: a fresh, isolated store (a temporary file, a schema
//! or a key prefix of its own, removed when the subject is dropped) and the ways to open
//! writers and readers on it. The macro makes one `#[test]` per case, named after the case, in
//! `<backend>::tests::conformance`.
//!
//! Backends differ in what they keep, and that is data in the subject, not a copied test:
//! [`Subject::history`] is `None` for a store that keeps only each window's latest list and no
//! dead letters (Redis), [`Subject::stored_rows`] is `Some` where the rows can be looked at
//! around the store (the SQL stores), [`Subject::damage`] is `Some` where stored data can be
//! damaged around the store (every backend but memory), and [`Subject::locks`] says whether the
//! store has a liveness lock (the SQL stores; every store fences stale writers by the
//! generation). What only one backend does (its encoding, key layout, error texts, connection
//! handling) is tested in that backend's `tests.rs`.

use crate::error::SinkError;
use crate::ownership::{Claim, Owner};
use crate::store::{SinkStore, StoreReader};
use crate::test_fixtures::{approximate, batch, certified, hot_window, letter, list, sketch_check, windows, JOB};
use crate::types::{SourcedDeadLetter, StoredList, StoredWindow};
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::HotState;
use hotlist_operators::record::{DeadReason, ListState};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

/// Opens a new handle (connection) on a subject's data.
type Opener<T> = Box<dyn Fn() -> Box<T>>;

/// `(rank, revision)` of the stored rows of the `1m` instance at a start.
type RowsAt = Box<dyn Fn(i64) -> Vec<(i64, i64)>>;

/// One backend's store under test, fresh and isolated.
pub(crate) struct Subject {
    /// Opens a writer on the subject's data; every call is a new handle (connection).
    pub writer: Opener<dyn SinkStore>,
    /// Opens a reader on the same data.
    pub reader: Opener<dyn StoreReader>,
    /// Opens the read API of a store that keeps every instance and the dead letters; `None`
    /// where only each window's latest list is kept and dead letters are dropped (Redis).
    pub history: Option<Opener<dyn History>>,
    /// `(rank, revision)` of the stored rows of the `1m` instance at a start, read around the
    /// store; `None` where there are no rows to look at.
    pub stored_rows: Option<RowsAt>,
    /// Damages the stored data around the store (raw SQL, raw Redis commands); `None` where
    /// nothing but the store can reach the data (memory).
    pub damage: Option<Box<dyn Fn(Damage)>>,
    /// Whether [`SinkStore::lock`] keeps a second live handle out (SQLite, PostgreSQL) or does
    /// nothing (Redis, memory).
    pub locks: bool,
    /// Holds the subject's data (a directory, a schema, a key prefix) and removes it when
    /// dropped, after the handles a case opened.
    #[expect(dead_code, reason = "held only for its Drop")]
    pub place: Box<dyn Any>,
}

impl Subject {
    /// Checks the stored rows of the `1m` instance at `start`, where they can be looked at.
    fn assert_stored_rows(&self, start: i64, want: &[(i64, i64)]) {
        if let Some(rows) = &self.stored_rows {
            assert_eq!(rows(start), want, "stored rows of the instance at {start}");
        }
    }
}

/// A damage done to a store's data around the store, as a bad disk, an operator's typo or
/// another program would do it. Each backend writes it its own way.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Damage {
    /// Sets the item count in the header (meta hash) of the `1m` list at start 0.
    ItemCount(i64),
    /// Sets the stored `k` of window `1m` (the job's windows are the fixtures' `windows()`).
    WindowK(i64),
    /// Sets the job's committed watermark, in milliseconds.
    CommitWatermark(i64),
    /// Sets `exact` and `error_bound` in the header (meta hash) of the `1m` list at start 0,
    /// around the store's own constraints.
    Accuracy {
        /// `exact`.
        exact: bool,
        /// `error_bound`.
        error_bound: i64,
    },
    /// Sets the sketch check's numbers (`sketch_found`, `sketch_of`, `sketch_max_overcount`,
    /// `sketch_total_overcount`; `None`: NULL or no field) in the header (meta hash) of the
    /// `1m` list at start 0, around the store's own constraints.
    SketchCheck([Option<i64>; 4]),
    /// Sets the certificate's numbers (`certificate_threshold`, `certificate_counted`,
    /// `certificate_passes`; `None`: NULL or no field) in the header (meta hash) of the `1m`
    /// list at start 0, around the store's own constraints.
    Certificate([Option<i64>; 3]),
    /// Sets the state (and `final`) in the header (meta hash) of the `1m` list at start 0.
    State(ListState),
    /// Sets `exact` and `error_bound` in every row of the `1m` list at start 0 (only where
    /// there are rows: [`Subject::stored_rows`] is `Some`).
    RowAccuracy {
        /// `exact`.
        exact: bool,
        /// `error_bound`.
        error_bound: i64,
    },
    /// Sets the key count in the header (hash) of the job's hot-key window(s).
    HotKeyCount(i64),
}

/// The SQL `SET` list of a [`Damage::SketchCheck`]: `sketch_found = 2, sketch_of = NULL, …`.
pub(crate) fn sql_sketch_columns(values: [Option<i64>; 4]) -> String {
    let names = [
        "sketch_found",
        "sketch_of",
        "sketch_max_overcount",
        "sketch_total_overcount",
    ];
    let value = |v: Option<i64>| v.map_or("NULL".to_string(), |v| v.to_string());
    let set: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n} = {}", value(v)))
        .collect();
    set.join(", ")
}

/// The SQL `SET` list of a [`Damage::Certificate`]: `certificate_threshold = 40, …`.
pub(crate) fn sql_certificate_columns(values: [Option<i64>; 3]) -> String {
    let names = crate::read_checks::CERTIFICATE_FIELDS;
    let value = |v: Option<i64>| v.map_or("NULL".to_string(), |v| v.to_string());
    let set: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n} = {}", value(v)))
        .collect();
    set.join(", ")
}

/// What the stores that keep history (SQLite, PostgreSQL, memory) can be asked beyond
/// [`StoreReader`].
pub(crate) trait History {
    /// Every stored instance of the window as (start, revision, state), earliest first.
    fn instances(&mut self, job: &str, window: &str) -> Result<Vec<(Millis, u32, ListState)>, SinkError>;
    /// The job's most recent dead letters, newest first, at most `limit`.
    fn dead_letters(&mut self, job: &str, limit: usize) -> Result<Vec<SourcedDeadLetter>, SinkError>;
    /// How many dead letters the job has per reason name, by name; reasons without letters
    /// left out.
    fn dead_letter_counts(&mut self, job: &str) -> Result<Vec<(String, u64)>, SinkError>;
}

/// [`History`] through the SQL stores' inherent methods of the same names.
macro_rules! history_by_inherent_methods {
    ($($store:ty),*) => {$(
        impl History for $store {
            fn instances(&mut self, job: &str, window: &str) -> Result<Vec<(Millis, u32, ListState)>, SinkError> {
                <$store>::instances(self, job, window)
            }
            fn dead_letters(&mut self, job: &str, limit: usize) -> Result<Vec<SourcedDeadLetter>, SinkError> {
                <$store>::dead_letters(self, job, limit)
            }
            fn dead_letter_counts(&mut self, job: &str) -> Result<Vec<(String, u64)>, SinkError> {
                <$store>::dead_letter_counts(self, job)
            }
        }
    )*};
}
history_by_inherent_methods!(crate::sqlite::SqliteStore, crate::postgres::PostgresStore);

/// Runs every case of the suite on the backend whose subject `$subject()` opens: one
/// `#[test]` per case, named after it, in a module `conformance`. A new case is a function
/// below and its name in the list.
macro_rules! suite {
    ($subject:path) => {
        $crate::conformance::suite!(
            @cases $subject;
            highest_revision_replaces_rows,
            epochs_at_or_below_the_committed_one_are_skipped,
            dead_letters_round_trip_raw_bytes,
            latest_instances_and_windows,
            invalid_input_changes_nothing,
            concurrent_reader_never_sees_a_mix_of_revisions,
            a_list_longer_than_its_windows_k_is_corrupt,
            damaged_rows_are_reported_never_trusted,
            lists_say_what_they_are,
            damaged_accuracy_is_reported,
            certified_lists_round_trip,
            damaged_certificates_are_reported,
            a_claim_fences_the_previous_owner,
            the_lock_keeps_a_second_run_out,
            reset_forgets_the_job_and_nothing_else,
            hot_keys_round_trip,
            damaged_hot_keys_are_reported,
            groups_are_lists_of_their_own,
        );
    };
    (@cases $subject:path; $($case:ident,)*) => {
        /// The store conformance suite ([`crate::conformance`]) on this backend.
        mod conformance {
            use super::*;

            $(
                #[test]
                fn $case() {
                    $crate::conformance::$case($subject());
                }
            )*

            /// `cargo test -p hotlist-sinks --release -- --ignored --nocapture throughput`
            #[test]
            #[ignore = "benchmark"]
            fn throughput() {
                $crate::conformance::throughput($subject());
            }
        }
    };
}
pub(crate) use suite;

/// Within a batch the highest revision of an instance wins, and its rows replace the
/// instance's previous rows entirely (no stale ranks), even when there are fewer or none.
pub(crate) fn highest_revision_replaces_rows(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    // 137 rows: SQLite writes them as two chunks of 64, one of 8 and a single row.
    assert!(w.commit(&batch(1, vec![list(0, 1, 137)])).unwrap());
    let got = r.instance(JOB, "1m", Millis(0)).unwrap();
    assert_eq!(got, Some(StoredList::from(list(0, 1, 137))));
    // Two revisions in one batch: the highest wins, regardless of order.
    assert!(w.commit(&batch(2, vec![list(0, 3, 2), list(0, 2, 7)])).unwrap());
    let got = r.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
    assert_eq!(got, StoredList::from(list(0, 3, 2)));
    assert_eq!(got.state, ListState::Final);
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(got));
    s.assert_stored_rows(0, &[(1, 3), (2, 3)]);
    // An empty list still has a header.
    assert!(w.commit(&batch(3, vec![list(0, 4, 0)])).unwrap());
    let got = r.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
    assert_eq!((got.revision, got.state, got.items.len()), (4, ListState::Final, 0));
    s.assert_stored_rows(0, &[]);
    assert_eq!(r.instance(JOB, "1m", Millis(60_000)).unwrap(), None);
    assert_eq!(r.instance("other", "1m", Millis(0)).unwrap(), None);
}

/// A batch at or below the job's committed epoch changes nothing and reports `false`; epochs
/// are per job, compared as numbers, and survive reopening the store.
pub(crate) fn epochs_at_or_below_the_committed_one_are_skipped(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    assert_eq!(w.committed_epoch(JOB).unwrap(), None);
    assert_eq!(r.last_commit(JOB).unwrap(), None);
    assert!(w.commit(&batch(5, vec![list(0, 1, 3)])).unwrap());
    for epoch in [5, 4, 0] {
        let mut b = batch(epoch, vec![list(0, 9, 1), list(60_000, 9, 1)]);
        b.dead_letters = vec![letter(1, DeadReason::Bad, b"x")];
        assert!(!w.commit(&b).unwrap());
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(5));
    assert_eq!(r.last_commit(JOB).unwrap(), Some((5, Millis(5000))));
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap().map(|l| l.revision), Some(1));
    if let Some(history) = &s.history {
        assert!(history().dead_letters(JOB, 10).unwrap().is_empty());
    }
    // Epochs are per job, and compared as numbers: 10 > 9 although "10" < "9" as strings.
    let mut other = batch(1, vec![]);
    other.job = "other".into();
    assert!(w.commit(&other).unwrap());
    assert_eq!(w.committed_epoch("other").unwrap(), Some(1));
    for (epoch, committed) in [(9, true), (10, true), (9, false)] {
        other.epoch = epoch;
        assert_eq!(w.commit(&other).unwrap(), committed, "epoch {epoch}");
    }
    assert_eq!(w.committed_epoch("other").unwrap(), Some(10));
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(5));
    // Survives reopening (for the SQL stores: and re-running the migrations).
    drop(w);
    let mut w = (s.writer)();
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(5));
    assert!(w.commit(&batch(6, vec![])).unwrap());
    assert_eq!(r.last_commit(JOB).unwrap(), Some((6, Millis(6000))));
    assert_eq!(r.last_commit("nobody").unwrap(), None);
}

/// Dead letters are appended in order and read back newest first, per job, with their raw
/// bytes exact (not UTF-8, empty, long) and positions up to `i64::MAX`, and counted per reason
/// (every reason, `future` and `too_large` included). A store that keeps none (Redis) only has
/// to accept them.
pub(crate) fn dead_letters_round_trip_raw_bytes(s: Subject) {
    let letters = [
        letter(1, DeadReason::Bad, &[0xff, 0x00, 0xc3, 0x28, b'{']),
        letter(2, DeadReason::Late, b"{\"item\":\"a\",\"ts\":1}"),
        letter(3, DeadReason::Bad, &[]),
        letter(u64::from(u32::MAX) + 7, DeadReason::Sealed, &[0x80; 300]),
        letter(i64::MAX as u64, DeadReason::Bad, b"\0"),
        letter(9, DeadReason::Future, b"{\"item_id\":\"a\",\"ts\":253402300799999}"),
        letter(10, DeadReason::TooLarge, &[b'x'; 4096]),
    ];
    let mut w = (s.writer)();
    let mut b = batch(1, vec![]);
    b.dead_letters = letters[..2].to_vec();
    assert!(w.commit(&b).unwrap());
    let mut b = batch(2, vec![]);
    b.dead_letters = letters[2..].to_vec();
    assert!(w.commit(&b).unwrap());
    drop(w);
    let Some(history) = &s.history else {
        return;
    };
    let mut h = history();
    let newest_first: Vec<_> = letters.iter().rev().cloned().collect();
    assert_eq!(h.dead_letters(JOB, 100).unwrap(), newest_first);
    assert_eq!(h.dead_letters(JOB, 2).unwrap(), newest_first[..2]);
    assert_eq!(h.dead_letters(JOB, usize::MAX).unwrap().len(), letters.len());
    assert!(h.dead_letters("other", 10).unwrap().is_empty());
    assert_eq!(
        h.dead_letter_counts(JOB).unwrap(),
        vec![
            ("bad".to_string(), 3),
            ("future".to_string(), 1),
            ("late".to_string(), 1),
            ("sealed".to_string(), 1),
            ("too_large".to_string(), 1)
        ]
    );
}

/// `prepare` records the job's windows in order, replaces them on the next call and refuses
/// invalid ones; `latest` is the instance with the greatest start; a reader sees the last
/// commit. A store that keeps history also has the other instances.
pub(crate) fn latest_instances_and_windows(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    let m = Span::from_millis;
    let windows = windows();
    assert!(r.windows(JOB).unwrap().is_empty());
    w.prepare(JOB, &windows).unwrap();
    let stored = r.windows(JOB).unwrap();
    assert_eq!(stored, windows.iter().map(StoredWindow::from).collect::<Vec<_>>());
    // Re-preparing replaces the definition; invalid definitions change nothing.
    w.prepare(JOB, &windows[1..]).unwrap();
    assert_eq!(r.windows(JOB).unwrap(), vec![StoredWindow::from(&windows[1])]);
    assert_eq!(r.windows(JOB).unwrap()[0].slide, m(30_000));
    assert!(w.prepare(JOB, &[WindowSpec::tumbling("x", m(0), 1)]).is_err());
    assert!(w.prepare("", &windows).is_err());
    assert_eq!(r.windows(JOB).unwrap().len(), 1);

    assert_eq!(r.latest(JOB, "1m").unwrap(), None);
    let b = batch(1, vec![list(120_000, 1, 2), list(-60_000, 2, 1), list(60_000, 1, 3)]);
    assert!(w.commit(&b).unwrap());
    assert_eq!(
        r.latest(JOB, "1m").unwrap(),
        Some(StoredList::from(list(120_000, 1, 2)))
    );
    assert_eq!(r.latest(JOB, "5m").unwrap(), None);
    assert_eq!(r.last_commit(JOB).unwrap(), Some((1, Millis(1000))));
    let Some(history) = &s.history else {
        // Only the latest instance is kept.
        assert_eq!(r.instance(JOB, "1m", Millis(60_000)).unwrap(), None);
        return;
    };
    assert_eq!(r.instance(JOB, "1m", Millis(60_000)).unwrap().unwrap().items.len(), 3);
    let earliest = r.instance(JOB, "1m", Millis(-60_000)).unwrap();
    assert_eq!(earliest, Some(StoredList::from(list(-60_000, 2, 1))));
    let mut h = history();
    assert_eq!(
        h.instances(JOB, "1m").unwrap(),
        vec![
            (Millis(-60_000), 2, ListState::Open),
            (Millis(60_000), 1, ListState::Open),
            (Millis(120_000), 1, ListState::Open),
        ]
    );
    assert!(h.instances(JOB, "5m").unwrap().is_empty());
}

/// A batch with invalid contents is refused as a permanent [`SinkError::Invalid`] before
/// anything of it is written.
pub(crate) fn invalid_input_changes_nothing(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    let mut too_large = list(0, 2, 1);
    too_large.items[0].count = u64::MAX;
    let mut backwards = list(0, 2, 1);
    backwards.end = Millis(-1);
    let mut no_job = batch(1, vec![]);
    no_job.job.clear();
    let refused = [batch(1, vec![too_large]), batch(1, vec![backwards]), no_job];
    for b in &refused {
        let err = w.commit(b).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(!err.retryable());
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), None);
    assert_eq!(r.latest(JOB, "1m").unwrap(), None);
    // After a good commit, the refused ones leave it as it is.
    assert!(w.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    for mut b in refused {
        b.epoch = 2;
        assert!(w.commit(&b).is_err());
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(1));
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
}

/// A list longer than its window's `k` (which the job never writes) reads back as a permanent
/// [`SinkError::Corrupt`] naming the instance and the `k`, not as a list; within `k` it reads
/// back, and a window that is not recorded bounds its lists by the largest `k` only.
pub(crate) fn a_list_longer_than_its_windows_k_is_corrupt(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    assert!(w.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
    assert!(w.commit(&batch(2, vec![list(60_000, 1, 4)])).unwrap());
    for err in [
        r.latest(JOB, "1m").unwrap_err(),
        r.instance(JOB, "1m", Millis(60_000)).unwrap_err(),
    ] {
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        let want = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:01:00.000Z";
        assert!(err.to_string().contains(want), "{err}");
        assert!(
            err.to_string()
                .contains("header item_count 4 exceeds the window's k (3)"),
            "{err}"
        );
    }
    let mut other = list(0, 1, 20);
    other.window = "gone".into();
    assert!(w.commit(&batch(3, vec![other.clone()])).unwrap());
    assert_eq!(r.latest(JOB, "gone").unwrap(), Some(StoredList::from(other)));
    // The largest k is the configuration's bound too.
    let mut huge = windows();
    huge[1].k = hotlist_operators::window::MAX_K + 1;
    assert!(matches!(w.prepare(JOB, &huge), Err(SinkError::Invalid { .. })));
}

/// Damaged stored data (a header's item count of 2^40 or 2^62, a window's `k` out of range, a
/// watermark past year 9999) is a permanent [`SinkError::Corrupt`] naming the job, window,
/// instance and field, never an allocation sized by it or a panic; once repaired, the same
/// reader reads the list again.
pub(crate) fn damaged_rows_are_reported_never_trusted(s: Subject) {
    let Some(damage) = &s.damage else {
        return;
    };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    assert!(w.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    let good = r.latest(JOB, "1m").unwrap();
    assert_eq!(good, Some(StoredList::from(list(0, 1, 3))));
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let corrupt = |err: SinkError, want: &str| {
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        assert!(err.to_string().contains(want), "{err} (want {want:?})");
    };
    for n in [1i64 << 40, 1 << 62, i64::MAX, 4] {
        damage(Damage::ItemCount(n));
        let want = format!("{at}: header item_count {n} exceeds the window's k (3)");
        corrupt(r.latest(JOB, "1m").unwrap_err(), &want);
        corrupt(r.instance(JOB, "1m", Millis(0)).unwrap_err(), &want);
    }
    damage(Damage::ItemCount(2));
    corrupt(r.latest(JOB, "1m").unwrap_err(), at);
    damage(Damage::ItemCount(3));
    assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    for k in [0i64, 1 << 40, 1 << 62] {
        damage(Damage::WindowK(k));
        let want = format!("job \"hotlist\" window \"1m\": k {k} is out of range (1 to 1000000)");
        corrupt(r.windows(JOB).unwrap_err(), &want);
        corrupt(r.latest(JOB, "1m").unwrap_err(), &want);
    }
    damage(Damage::WindowK(2));
    corrupt(
        r.latest(JOB, "1m").unwrap_err(),
        "header item_count 3 exceeds the window's k (2)",
    );
    damage(Damage::WindowK(3));
    assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    damage(Damage::CommitWatermark(1_000_000_000_000_000));
    let want = "job \"hotlist\": commit watermark 1000000000000000 ms is past year 9999";
    corrupt(r.last_commit(JOB).unwrap_err(), want);
    damage(Damage::CommitWatermark(1000));
    assert_eq!(r.last_commit(JOB).unwrap(), Some((1, Millis(1000))));
}

/// Every list says what it is, and reads back saying it: an approximate list (`exact` false,
/// `error_bound` 37, a sketch check) and an exact one with a sketch check (`mode = "both"`)
/// read back equal; a new revision replaces the accuracy entirely (an exact revision without a
/// check leaves no check behind). Lists that claim what cannot be are refused as a permanent
/// [`SinkError::Invalid`] before anything of them is written.
pub(crate) fn lists_say_what_they_are(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3, 5m: k = 10
    let sketched = approximate(list(0, 1, 3), 37, Some(sketch_check(2, 3)));
    let mut checked = list(0, 1, 10);
    checked.window = "5m".into();
    checked.end = Millis(300_000);
    checked.sketch_check = Some(sketch_check(9, 10));
    assert!(w.commit(&batch(1, vec![sketched.clone(), checked.clone()])).unwrap());
    let got = r.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!((got.exact, got.error_bound), (false, 37));
    assert_eq!(got, StoredList::from(sketched.clone()));
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap(), Some(got));
    assert_eq!(r.latest(JOB, "5m").unwrap(), Some(StoredList::from(checked)));

    // Each revision says it all again: approximate without a check, then exact.
    let unchecked = approximate(list(0, 2, 3), u64::from(u32::MAX) + 1, None);
    assert!(w.commit(&batch(2, vec![unchecked.clone()])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(unchecked)));
    assert!(w.commit(&batch(3, vec![list(0, 3, 3)])).unwrap());
    let exact = r.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!((exact.exact, exact.error_bound, exact.sketch_check), (true, 0, None));
    assert_eq!(exact, StoredList::from(list(0, 3, 3)));

    let with = |error_bound: u64, found: u32, of: u32, max_overcount: u64| {
        let mut l = approximate(list(0, 4, 3), error_bound, Some(sketch_check(found, of)));
        l.sketch_check = l
            .sketch_check
            .map(|c| hotlist_operators::record::SketchCheck { max_overcount, ..c });
        l
    };
    let mut exact_with_bound = list(0, 4, 3);
    exact_with_bound.error_bound = 5;
    let refused = [
        (exact_with_bound, "an exact list has error_bound 5 (must be 0)"),
        (with(1, 4, 3, 0), "sketch_found 4 exceeds sketch_of 3"),
        (with(u64::MAX, 1, 3, 0), "error_bound 18446744073709551615 is too large"),
        (
            with(1, 1, 3, u64::MAX),
            "sketch_max_overcount 18446744073709551615 is too large",
        ),
        (
            with(1, 1, 2_000_000, 0),
            "sketch_of 2000000 exceeds the largest k (1000000)",
        ),
    ];
    for (l, want) in refused {
        let err = w.commit(&batch(4, vec![l])).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(!err.retryable());
        assert!(err.to_string().contains(want), "{err} (want {want:?})");
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(3));
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(exact));
}

/// Damaged accuracy (an exact list with an error bound, a negative bound, a sketch check that
/// found more than it compared, compared more than `k`, is partial or negative; rows that
/// disagree with their header) is a permanent [`SinkError::Corrupt`] naming the instance and
/// the field; once repaired, the same reader reads the list again.
pub(crate) fn damaged_accuracy_is_reported(s: Subject) {
    let Some(damage) = &s.damage else {
        return;
    };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    let sketched = approximate(list(0, 1, 3), 37, Some(sketch_check(2, 3)));
    assert!(w.commit(&batch(1, vec![sketched.clone()])).unwrap());
    let good = Some(StoredList::from(sketched));
    assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let corrupt = |r: &mut Box<dyn StoreReader>, want: &str| {
        let err = r.latest(JOB, "1m").unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        assert!(
            err.to_string().contains(&format!("{at}: {want}")),
            "{err} (want {want:?})"
        );
    };
    let sketch = |found, of, max, total| Damage::SketchCheck([found, of, max, total]);
    let cases = [
        (
            Damage::Accuracy {
                exact: true,
                error_bound: 37,
            },
            "an exact list has error_bound 37 (must be 0)",
        ),
        (
            Damage::Accuracy {
                exact: false,
                error_bound: -1,
            },
            "error_bound -1 is negative",
        ),
        (
            sketch(Some(4), Some(3), Some(5), Some(9)),
            "sketch_found 4 exceeds sketch_of 3",
        ),
        (
            sketch(Some(2), Some(4), Some(5), Some(9)),
            "sketch_of 4 exceeds the window's k (3)",
        ),
        (
            sketch(Some(2), None, Some(5), Some(9)),
            "the sketch check lacks sketch_of",
        ),
        (
            sketch(Some(2), Some(3), Some(-1), Some(9)),
            "sketch_max_overcount -1 is negative",
        ),
    ];
    for (what, want) in cases {
        damage(what);
        corrupt(&mut r, want);
        damage(Damage::Accuracy {
            exact: false,
            error_bound: 37,
        });
        damage(sketch(Some(2), Some(3), Some(5), Some(9)));
        assert_eq!(r.latest(JOB, "1m").unwrap(), good, "repaired after {what:?}");
    }
    if s.stored_rows.is_some() {
        damage(Damage::RowAccuracy {
            exact: true,
            error_bound: 0,
        });
        corrupt(
            &mut r,
            "row 1 has exact 1 and error_bound 0, header exact 0 and error_bound 37",
        );
        damage(Damage::RowAccuracy {
            exact: false,
            error_bound: 37,
        });
        assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    }
}

/// A sketch window's final list that a replay proved exact reads back with its certificate,
/// on every store; a new revision without one leaves none behind. A certificate on a list that
/// is not exact, not final, or with a threshold or passes of 0 (or numbers the stores cannot
/// hold) is refused as a permanent [`SinkError::Invalid`] before anything of it is written.
pub(crate) fn certified_lists_round_trip(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    let proved = certified(list(0, 3, 3), 40, 2);
    assert!(w.commit(&batch(1, vec![proved.clone()])).unwrap());
    let got = r.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!((got.exact, got.error_bound, got.state), (true, 0, ListState::Final));
    assert_eq!(
        got.certificate.map(|c| (c.threshold, c.counted, c.passes)),
        Some((40, 17, 2))
    );
    assert_eq!(got, StoredList::from(proved.clone()));
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap(), Some(got));
    // The largest numbers the stores hold.
    let mut largest = certified(list(60_000, 3, 3), i64::MAX as u64, u32::MAX);
    largest.certificate = largest.certificate.map(|c| hotlist_operators::certify::Certificate {
        counted: i64::MAX as u64,
        ..c
    });
    assert!(w.commit(&batch(2, vec![largest.clone()])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(largest)));
    // A new revision says it all again: no certificate left behind.
    assert!(w.commit(&batch(3, vec![list(60_000, 4, 2)])).unwrap());
    let plain = r.latest(JOB, "1m").unwrap().unwrap();
    assert_eq!(plain.certificate, None);
    assert_eq!(plain, StoredList::from(list(60_000, 4, 2)));

    let with = |l, threshold, counted, passes| {
        let mut l = certified(l, threshold, passes);
        l.certificate = l
            .certificate
            .map(|c| hotlist_operators::certify::Certificate { counted, ..c });
        l
    };
    let refused = [
        (
            hotlist_operators::message::PublishedList {
                exact: false,
                error_bound: 37,
                ..with(list(0, 5, 3), 40, 17, 1)
            },
            "an approximate list has a certificate (only an exact list can)",
        ),
        (
            with(list(0, 2, 3), 40, 17, 1),
            "a list in state open has a certificate (only a final list can)",
        ),
        (with(list(0, 5, 3), 0, 17, 1), "certificate_threshold 0 is not positive"),
        (
            with(list(0, 5, 3), 40, 17, 0),
            "certificate_passes 0 is out of range (1 to 4294967295)",
        ),
        (
            with(list(0, 5, 3), 40, u64::MAX, 1),
            "certificate_counted 18446744073709551615 is too large",
        ),
    ];
    for (l, want) in refused {
        let err = w.commit(&batch(4, vec![l])).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert!(!err.retryable());
        assert!(err.to_string().contains(want), "{err} (want {want:?})");
    }
    assert_eq!(w.committed_epoch(JOB).unwrap(), Some(3));
    assert_eq!(r.instance(JOB, "1m", Millis(60_000)).unwrap(), Some(plain));
    if s.history.is_some() {
        assert_eq!(
            r.instance(JOB, "1m", Millis(0)).unwrap(),
            Some(StoredList::from(proved))
        );
    }
}

/// A damaged certificate (partial, a threshold or passes of 0, a negative count; on a list
/// that is not exact or not final) is a permanent [`SinkError::Corrupt`] naming the instance
/// and the field; once repaired, the same reader reads the list again.
pub(crate) fn damaged_certificates_are_reported(s: Subject) {
    let Some(damage) = &s.damage else {
        return;
    };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap(); // 1m: k = 3
    let proved = certified(list(0, 3, 3), 40, 2);
    assert!(w.commit(&batch(1, vec![proved.clone()])).unwrap());
    let good = Some(StoredList::from(proved));
    assert_eq!(r.latest(JOB, "1m").unwrap(), good);
    let at = "job \"hotlist\" window \"1m\" instance 1970-01-01T00:00:00.000Z";
    let corrupt = |r: &mut Box<dyn StoreReader>, want: &str| {
        let err = r.latest(JOB, "1m").unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(!err.retryable());
        assert!(
            err.to_string().contains(&format!("{at}: {want}")),
            "{err} (want {want:?})"
        );
    };
    let certificate = |threshold, counted, passes| Damage::Certificate([threshold, counted, passes]);
    let cases = [
        (
            certificate(Some(40), None, Some(2)),
            "the certificate lacks certificate_counted",
        ),
        (
            certificate(Some(0), Some(17), Some(2)),
            "certificate_threshold 0 is not positive",
        ),
        (
            certificate(Some(40), Some(-1), Some(2)),
            "certificate_counted -1 is negative",
        ),
        (
            certificate(Some(40), Some(17), Some(0)),
            "certificate_passes 0 is out of range (1 to 4294967295)",
        ),
        (
            Damage::Accuracy {
                exact: false,
                error_bound: 37,
            },
            "an approximate list has a certificate (only an exact list can)",
        ),
        (
            Damage::State(ListState::Closed),
            "a list in state closed has a certificate (only a final list can)",
        ),
    ];
    for (what, want) in cases {
        damage(what);
        corrupt(&mut r, want);
        damage(Damage::Accuracy {
            exact: true,
            error_bound: 0,
        });
        damage(Damage::State(ListState::Final));
        damage(certificate(Some(40), Some(17), Some(2)));
        assert_eq!(r.latest(JOB, "1m").unwrap(), good, "repaired after {what:?}");
    }
}

/// A claim makes the handle the job's owner: the generation goes up by one per claim and the
/// store returns the previous owner. Once another handle has claimed the job, the first one's
/// commits of it fail with a permanent [`SinkError::TakenOver`] naming both generations — even
/// a batch that would be skipped — and write nothing; its other jobs are not fenced.
pub(crate) fn a_claim_fences_the_previous_owner(s: Subject) {
    let (mut a, mut b, mut r) = ((s.writer)(), (s.writer)(), (s.reader)());
    assert_eq!(
        a.claim(JOB, "run-a").unwrap(),
        Claim {
            generation: 1,
            previous: None
        }
    );
    assert!(a.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
    let second = b.claim(JOB, "run-b").unwrap();
    let previous = Some(Owner {
        generation: 1,
        owner: "run-a".into(),
    });
    assert_eq!(
        second,
        Claim {
            generation: 2,
            previous
        }
    );
    let mut stale = batch(2, vec![list(0, 2, 5)]);
    stale.dead_letters = vec![letter(9, DeadReason::Bad, b"x")];
    for b in [&stale, &batch(1, vec![])] {
        let err = a.commit(b).unwrap_err();
        assert!(
            matches!(&err, SinkError::TakenOver { ours: 1, current: 2, job } if job == JOB),
            "{err}"
        );
        assert!(!err.retryable());
    }
    assert_eq!(r.last_commit(JOB).unwrap(), Some((1, Millis(1000))));
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
    if let Some(history) = &s.history {
        assert!(history().dead_letters(JOB, 10).unwrap().is_empty());
    }
    // the new owner commits; the old one's other jobs are not fenced
    assert!(b.commit(&stale).unwrap());
    let mut other = batch(1, vec![]);
    other.job = "other".into();
    assert!(a.commit(&other).unwrap());
    // generations survive reopening
    drop(b);
    assert_eq!((s.writer)().claim(JOB, "run-c").unwrap().generation, 3);
}

/// The liveness lock keeps a second live handle out of the job (a permanent
/// [`SinkError::JobLocked`]) until the first handle is gone; other jobs are not affected. A
/// store without a lock accepts both.
pub(crate) fn the_lock_keeps_a_second_run_out(s: Subject) {
    let (mut a, mut b) = ((s.writer)(), (s.writer)());
    a.lock(JOB).unwrap();
    a.lock(JOB).unwrap(); // taking it again is no error
    let second = b.lock(JOB);
    if !s.locks {
        assert!(second.is_ok());
        return;
    }
    let err = second.unwrap_err();
    assert!(matches!(&err, SinkError::JobLocked { job, .. } if job == JOB), "{err}");
    assert!(!err.retryable());
    assert!(err.to_string().contains("already running"), "{err}");
    b.lock("other").unwrap();
    drop(a);
    // released with the handle (PostgreSQL: once the server has ended its session)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Err(e) = b.lock(JOB) {
        assert!(std::time::Instant::now() < deadline, "still locked: {e}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `reset` forgets the job's results — lists, dead letters, committed epoch — and nothing
/// else: its windows and owner stay, other jobs keep theirs, and the job commits from epoch 0
/// again.
pub(crate) fn reset_forgets_the_job_and_nothing_else(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap();
    w.claim(JOB, "run").unwrap();
    let mut b = batch(3, vec![list(0, 1, 3), list(60_000, 1, 2)]);
    b.dead_letters = vec![letter(1, DeadReason::Bad, b"x")];
    assert!(w.commit(&b).unwrap());
    let mut other = batch(1, vec![list(0, 1, 2)]);
    other.job = "other".into();
    assert!(w.commit(&other).unwrap());
    w.reset(JOB).unwrap();
    assert_eq!(w.committed_epoch(JOB).unwrap(), None);
    assert_eq!(r.last_commit(JOB).unwrap(), None);
    assert_eq!(r.latest(JOB, "1m").unwrap(), None);
    assert_eq!(r.instance(JOB, "1m", Millis(0)).unwrap(), None);
    assert_eq!(r.windows(JOB).unwrap().len(), 2, "the windows stay");
    if let Some(history) = &s.history {
        let mut h = history();
        assert!(h.dead_letters(JOB, 10).unwrap().is_empty());
        assert!(h.dead_letter_counts(JOB).unwrap().is_empty());
        assert!(h.instances(JOB, "1m").unwrap().is_empty());
    }
    assert_eq!(w.committed_epoch("other").unwrap(), Some(1));
    assert_eq!(r.latest("other", "1m").unwrap(), Some(StoredList::from(list(0, 1, 2))));
    // the owner stays: the same handle commits again, from epoch 0
    assert!(w.commit(&batch(0, vec![list(0, 1, 1)])).unwrap());
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 1))));
}

/// How many items revision `revision` has in the concurrent-reader race: 120 and 7 in turn,
/// so a read mixing two revisions shows in its length.
fn rows_for(revision: u32) -> usize {
    match revision % 2 {
        0 => 7,
        _ => 120,
    }
}

/// A reader racing a writer sees whole revisions only: never a mix of two, never going
/// backwards, and in the end the last one.
pub(crate) fn concurrent_reader_never_sees_a_mix_of_revisions(s: Subject) {
    const REVISIONS: u32 = 200;
    let mut w = (s.writer)();
    assert!(w.commit(&batch(1, vec![list(0, 1, rows_for(1))])).unwrap());
    let mut r = (s.reader)();
    let (reads, last) = race_commits_and_reads(REVISIONS, w, move |last| {
        let l = r.instance(JOB, "1m", Millis(0)).unwrap().unwrap();
        assert!(l.revision >= last, "revisions went backwards");
        assert_eq!(l.items.len(), rows_for(l.revision));
        let prefix = format!("r{}-", l.revision);
        for item in &l.items {
            assert!(item.item_id.starts_with(&prefix), "{item:?}");
            assert_eq!(item.count / 1000, u64::from(l.revision), "{item:?}");
        }
        assert_eq!(l, StoredList::from(list(0, l.revision, rows_for(l.revision))));
        let latest = r.latest(JOB, "1m").unwrap().unwrap();
        assert!(latest.revision >= l.revision);
        assert_eq!(latest.items.len(), rows_for(latest.revision));
        latest.revision
    });
    assert_eq!(last, REVISIONS);
    assert!(reads >= 1);
    eprintln!("{reads} consistent reads during {REVISIONS} commits");
    if let Some(rows) = &s.stored_rows {
        assert_eq!(rows(0).len(), rows_for(REVISIONS));
    }
}

/// Races a writer against a reader on the `1m` instance at 0: one thread commits
/// `list(0, r, rows_for(r))` through `writer` as epoch `r`, for revisions `r` from 2 to
/// `revisions` in order, while another calls `read(last)` over and over, until a read that
/// started after the last commit. `read` gets what the previous read returned (0 at first) and
/// returns the revision it saw. Returns how many reads there were and what the last returned.
fn race_commits_and_reads(
    revisions: u32,
    mut writer: Box<dyn SinkStore>,
    mut read: impl FnMut(u32) -> u32 + Send,
) -> (u32, u32) {
    let done = AtomicBool::new(false);
    let start = Barrier::new(2);
    let (done, start) = (&done, &start);
    std::thread::scope(|s| {
        s.spawn(move || {
            start.wait();
            for revision in 2..=revisions {
                let l = list(0, revision, rows_for(revision));
                assert!(writer.commit(&batch(u64::from(revision), vec![l])).unwrap());
            }
            done.store(true, Ordering::Release);
        });
        let r = s.spawn(move || {
            start.wait();
            let (mut reads, mut last) = (0u32, 0u32);
            loop {
                // Read `done` first: a read that starts after it is set sees the last commit.
                let finished = done.load(Ordering::Acquire);
                (reads, last) = (reads + 1, read(last));
                if finished {
                    return (reads, last);
                }
            }
        });
        r.join().unwrap()
    })
}

/// Commits 20 epochs of 200 lists of K=100, then 20 of 20 lists of K=10,000, and prints the
/// lists and rows per second of each (a benchmark, not a check).
pub(crate) fn throughput(s: Subject) {
    let mut store = (s.writer)();
    for (lists, k) in [(200usize, 100usize), (20, 10_000)] {
        let t = std::time::Instant::now();
        let epochs = 20u64;
        for e in 1..=epochs {
            let b = batch(
                e + store.committed_epoch(JOB).unwrap().unwrap_or(0),
                (0..lists).map(|i| list(i as i64 * 60_000, e as u32, k)).collect(),
            );
            assert!(store.commit(&b).unwrap());
        }
        let secs = t.elapsed().as_secs_f64();
        let rows = epochs as f64 * (lists * k) as f64;
        eprintln!(
            "{lists} lists x K={k}: {:.0} lists/s, {:.0} rows/s",
            epochs as f64 * lists as f64 / secs,
            rows / secs
        );
    }
}

/// Hot-key windows: the latest one is read back whole (keys in report order, rates exact, an
/// empty window too), a replay writes the same window again, an older window never hides a
/// newer one, another job's windows stay apart, and `reset` forgets them.
pub(crate) fn hot_keys_round_trip(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap();
    assert_eq!(r.hot_keys(JOB).unwrap(), None);
    let first = hot_window(0, &[("a", 1250.5, HotState::Hot), ("b", 0.1 + 0.2, HotState::Cooling)]);
    let second = hot_window(10_000, &[("b", 3000.0, HotState::Hot), ("c", 3000.0, HotState::Hot)]);
    let mut b = batch(1, vec![]);
    b.hot_keys = vec![first.clone(), second.clone()];
    assert!(w.commit(&b).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap(), Some(second.clone()));
    // a replay at a later epoch (a restart from a checkpoint) writes the same rows again
    b.epoch = 2;
    assert!(w.commit(&b).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap(), Some(second.clone()));
    // an older window arriving later does not hide the newer one
    let mut old = batch(3, vec![]);
    old.hot_keys = vec![first];
    assert!(w.commit(&old).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap(), Some(second));
    // a window without keys is the latest all the same
    let empty = hot_window(20_000, &[]);
    let mut e = batch(4, vec![]);
    e.hot_keys = vec![empty.clone()];
    assert!(w.commit(&e).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap(), Some(empty));
    let mut other = batch(1, vec![]);
    other.job = "other".into();
    other.hot_keys = vec![hot_window(0, &[("z", 5.0, HotState::Hot)])];
    assert!(w.commit(&other).unwrap());
    assert_eq!(r.hot_keys(JOB).unwrap().map(|h| h.start), Some(Millis(20_000)));
    w.claim(JOB, "run").unwrap();
    w.reset(JOB).unwrap();
    assert_eq!(r.hot_keys(JOB).unwrap(), None);
    assert_eq!(r.hot_keys("other").unwrap().map(|h| h.keys.len()), Some(1));
    // a rate that is not a finite number is refused before anything is written
    let mut bad = batch(9, vec![]);
    bad.hot_keys = vec![hot_window(30_000, &[("a", f64::INFINITY, HotState::Hot)])];
    let e = w.commit(&bad).unwrap_err();
    assert!(
        matches!(e, SinkError::Invalid { .. }) && e.to_string().contains("rate inf"),
        "{e}"
    );
    assert_eq!(w.committed_epoch(JOB).unwrap(), None);
}

/// A damaged hot-key header is a clear `Corrupt` naming the window and the field, never a read
/// sized by it.
pub(crate) fn damaged_hot_keys_are_reported(s: Subject) {
    let Some(damage) = &s.damage else { return };
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    w.prepare(JOB, &windows()).unwrap();
    let mut b = batch(1, vec![]);
    b.hot_keys = vec![hot_window(
        0,
        &[("a", 10.0, HotState::Hot), ("b", 9.0, HotState::Cooling)],
    )];
    assert!(w.commit(&b).unwrap());
    for (count, want) in [
        (-1, "key_count -1 is out of range"),
        (1 << 40, "key_count 1099511627776 is out of range"),
        (5, "2 key rows, the header says 5"),
    ] {
        damage(Damage::HotKeyCount(count));
        let e = r.hot_keys(JOB).unwrap_err();
        assert!(matches!(e, SinkError::Corrupt { .. }), "{e}");
        assert!(
            e.to_string().contains("hot-key window 1970-01-01T00:00:00.000Z") && e.to_string().contains(want),
            "{e}"
        );
    }
}

/// `list` in group `group` (a canonical key).
fn in_group(
    mut l: hotlist_operators::message::PublishedList,
    group: &str,
) -> hotlist_operators::message::PublishedList {
    l.group = GroupKey::from_stored(group.to_string());
    l
}

/// Per-group lists: a window with `by` keeps its dims; the global list and each group of one
/// instance are lists of their own (written, revised and read by (window, group, start)); the
/// groups of the latest instance are listed, `(other)` among them; reset forgets them.
pub(crate) fn groups_are_lists_of_their_own(s: Subject) {
    let (mut w, mut r) = ((s.writer)(), (s.reader)());
    let mut specs = windows();
    specs[1].key.by = vec!["country".into()];
    w.prepare(JOB, &specs).unwrap();
    assert_eq!(r.windows(JOB).unwrap()[1].by, vec!["country".to_string()]);
    assert_eq!(r.windows(JOB).unwrap()[0].by, Vec::<String>::new());
    let (us, de) = (
        GroupKey::from_pairs([("country", "US")]),
        GroupKey::from_pairs([("country", "DE")]),
    );
    assert_eq!(r.groups(JOB, "1m").unwrap(), None);
    let b = batch(
        1,
        vec![
            list(0, 1, 1),
            in_group(list(0, 1, 2), us.as_str()),
            in_group(list(0, 2, 3), us.as_str()),
            in_group(list(0, 1, 3), de.as_str()),
            in_group(list(0, 1, 1), "(other)"),
        ],
    );
    assert!(w.commit(&b).unwrap());
    // each group's highest revision, its own rows; the global list untouched by the groups'
    assert_eq!(r.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 1))));
    let got = r.latest_of(JOB, "1m", &us).unwrap();
    assert_eq!(got, Some(StoredList::from(in_group(list(0, 2, 3), us.as_str()))));
    let got = r.instance_of(JOB, "1m", &de, Millis(0)).unwrap();
    assert_eq!(got, Some(StoredList::from(in_group(list(0, 1, 3), de.as_str()))));
    assert_eq!(
        r.latest_of(JOB, "1m", &GroupKey::other()).unwrap().unwrap().items.len(),
        1
    );
    let fr = GroupKey::from_pairs([("country", "FR")]);
    assert_eq!(r.latest_of(JOB, "1m", &fr).unwrap(), None);
    let all = |g: &[&GroupKey]| g.iter().map(|g| (*g).clone()).collect::<Vec<_>>();
    let want = all(&[&GroupKey::global(), &GroupKey::other(), &de, &us]);
    assert_eq!(r.groups(JOB, "1m").unwrap(), Some((Millis(0), want)));
    // a later instance of one group: the groups listed are the latest instance's; a revision of
    // US replaces US's rows only
    let b = batch(
        2,
        vec![
            in_group(list(30_000, 1, 2), us.as_str()),
            in_group(list(0, 3, 1), us.as_str()),
        ],
    );
    assert!(w.commit(&b).unwrap());
    assert_eq!(r.groups(JOB, "1m").unwrap(), Some((Millis(30_000), vec![us.clone()])));
    assert_eq!(r.latest_of(JOB, "1m", &us).unwrap().unwrap().start, Millis(30_000));
    assert_eq!(r.latest_of(JOB, "1m", &de).unwrap().unwrap().items.len(), 3);
    if s.history.is_some() {
        let got = r.instance_of(JOB, "1m", &us, Millis(0)).unwrap();
        assert_eq!(got, Some(StoredList::from(in_group(list(0, 3, 1), us.as_str()))));
    }
    // a group key that is not canonical is invalid input
    let bad = batch(3, vec![in_group(list(0, 1, 1), "country")]);
    let e = w.commit(&bad).map(|_| ()).unwrap_err();
    assert!(matches!(e, SinkError::Invalid { .. }), "{e}");
    w.reset(JOB).unwrap();
    assert_eq!(r.groups(JOB, "1m").unwrap(), None);
    assert_eq!(r.latest_of(JOB, "1m", &de).unwrap(), None);
}

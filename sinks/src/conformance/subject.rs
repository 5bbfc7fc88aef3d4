//! The subject of the suite: one backend's store under test, the damages done to its data
//! around it, and the history a store may keep.

use crate::error::SinkError;
use crate::store::{SinkStore, StoreReader};
use crate::types::SourcedDeadLetter;
use hotlist_operators::record::ListState;
use hotlist_operators::time::Millis;
use std::any::Any;

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
    pub(super) fn assert_stored_rows(&self, start: i64, want: &[(i64, i64)]) {
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
    /// Sets the stored ranges of the `1m` instance at start 0 to this text (the SQL stores'
    /// `ranges` column, `unreadable` NULL; Redis: the value `{"end":60000,"ranges":<text>}`).
    RangesText(&'static str),
    /// Sets the stored end of the `1m` instance at start 0 whose ranges are recorded, in
    /// milliseconds, around the store's own constraints.
    RangesEnd(i64),
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

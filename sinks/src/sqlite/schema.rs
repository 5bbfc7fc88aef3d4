//! The SQLite tables and their version (`PRAGMA user_version`), created if missing, and the
//! migrations from older versions (run in the same transaction).
//!
//! Versions: 1 the first; 2 `dead_letters.reason` also takes `future` and `too_large`; 3 lists
//! say what they are: `topk` and `topk_instances` gain `exact` and `error_bound`,
//! `topk_instances` the sketch check (`sketch_found`, `sketch_of`, `sketch_max_overcount`,
//! `sketch_total_overcount`, all NULL when there is none); 4 the hot-key detector's tables
//! `hot_key_windows` (one header per closed window) and `hot_keys` (one row per reported key).
//! A version 1 database migrates through 2 and 3 to 4; migrated rows are exact (`exact = 1`,
//! `error_bound = 0`, no check); 3 → 4 only creates the two new tables; 5 per-group lists:
//! `topk` and `topk_instances` gain `group_key` (`''` for a global list) as part of their
//! primary keys, `hotlist_windows` gains `by_dims` (the window's `by` dims joined by `,`).
//! 4 → 5 rebuilds the three tables (SQLite cannot change a primary key); every existing
//! list is a global one (`group_key = ''`), every window one without `by`; 6 certified lists:
//! `topk_instances` gains the certificate of a sketch window's list a replay proved exact
//! (`certificate_threshold`, `certificate_counted`, `certificate_passes`, all NULL when there
//! is none; a certificate only on an exact, final list). 5 → 6 rebuilds `topk_instances` (so
//! that its checks are the new table's, see `MIGRATE_5_TO_6`); no existing list has a
//! certificate. A version 1 to 4 database gets the new `topk_instances` from 4 → 5's rebuild;
//! 7 bounded dead letters: `dead_letters` gains `count` (how many letters a row stands for: 1,
//! or more for a summary of those beyond a block's cap) and `last_position` (a summary's last
//! position, NULL for a whole letter), and the index `dead_letters_job_source_position` that
//! finds a block's rows. 6 → 7 (and 1 → 2's rebuild) adds the columns with `ALTER TABLE`: every
//! existing row is one whole letter. 8 trend lists: `topk` gains `baseline` (the item's
//! baseline sum *S*), `score` (*z*) and `history` (its counts in the *W* instances before,
//! oldest first, comma-separated), all NULL on a count-ranked list's rows. 7 → 8 (and a new
//! `topk`) adds them with `ALTER TABLE`: no existing list is a trend list. 9 sealed instances'
//! input ranges: the table `instance_ranges`, one row per sealed instance of every window
//! (`window_end`, and its partition ranges as JSON in `ranges` or why it cannot be read again in
//! `unreadable`, exactly one of the two; see `crate::ranges`). 8 → 9 only creates the table
//! (`INSTANCE_RANGES`, as for a new database): no instance sealed before has ranges, and a
//! reader of an older database reads none. 10 `dead_letters.reason` also takes `udf` (a
//! `[[udf]]` function panicked or failed on the record). 9 → 10 (and every version from 2, whose
//! table has version 2's reasons) rebuilds `dead_letters`, as 1 → 2 did, but moving the old
//! table aside (as 4 → 5 does), so the new one is created as a new database's is: every row and
//! id kept, the indexes created again; a reader of an older database reads it as it is (no
//! letter of an older database has the reason `udf`).

use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use rusqlite::TransactionBehavior;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 10;

/// The oldest schema version this build reads (`open_read_only`) and migrates (`open`): the
/// tables of versions 1 and 2 have the same columns (only the `CHECK` on `dead_letters.reason`
/// differs, which reads do not depend on); a reader of either reads every list as exact, which
/// is all those versions hold.
pub const OLDEST_READABLE_VERSION: i64 = 1;

/// The first version whose lists say what they are (`exact`, `error_bound`, the sketch check):
/// a reader of an older database reads them as exact.
pub(super) const ACCURACY_VERSION: i64 = 3;

/// The first version with the hot-key tables: a reader of an older database reads no hot keys.
pub(super) const HOT_KEYS_VERSION: i64 = 4;

/// The first version with per-group lists: a reader of an older database reads only global
/// lists (and windows without `by`).
pub(super) const GROUPS_VERSION: i64 = 5;

/// The first version with certificates: a reader of an older database reads no certificate.
pub(super) const CERTIFICATE_VERSION: i64 = 6;

/// The first version with dead-letter counts: a reader of an older database reads every row
/// as one whole letter.
pub(super) const BOUNDED_DEAD_LETTERS_VERSION: i64 = 7;

/// The first version with trend lists: a reader of an older database reads every list as a
/// count-ranked one.
pub(super) const TREND_VERSION: i64 = 8;

/// The first version with sealed instances' ranges (`instance_ranges`): a reader of an older
/// database reads none.
pub(super) const RANGES_VERSION: i64 = 9;

/// The first version whose `dead_letters` takes the reason `udf`: an older database's table
/// (from version 2 on; 1 → 2's rebuild creates the new one) is rebuilt by 9 → 10.
pub(super) const UDF_VERSION: i64 = 10;

/// Version 8 → 9 (and a new database): the sealed instances' ranges, one row per instance,
/// replaced when the instance's ranges are committed again. A plain rowid table: a row holds
/// every partition's range, often more than the small rows `WITHOUT ROWID` suits.
const INSTANCE_RANGES: &str = "
CREATE TABLE IF NOT EXISTS instance_ranges (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL CHECK (window_end > window_start),
    ranges       TEXT,
    unreadable   TEXT    CHECK ((ranges IS NULL) <> (unreadable IS NULL)),
    PRIMARY KEY (job, window_name, window_start)
);
";

/// Version 7 → 8: a trend list's columns, added to a new `topk` too (as `MIGRATE_6_TO_7` does
/// to `dead_letters`), so that new and migrated tables are the same (a test compares them).
/// SQLite cannot add a table constraint: the check that they are all NULL or none is a column
/// check of the last.
const MIGRATE_7_TO_8: &str = "
ALTER TABLE topk ADD COLUMN baseline INTEGER CHECK (baseline >= 0);
ALTER TABLE topk ADD COLUMN score REAL;
ALTER TABLE topk ADD COLUMN history TEXT
    CHECK ((baseline IS NULL) = (history IS NULL) AND (baseline IS NULL) = (score IS NULL));
";

/// Version 6 → 7 (and the table 1 → 2 built): a row's count and a summary's last position,
/// added with the definitions a new table has (`DEAD_LETTERS`; a test compares them); SQLite
/// cannot add a table constraint, so the check is a column check of `last_position`.
const MIGRATE_6_TO_7: &str = "
ALTER TABLE dead_letters ADD COLUMN count INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1);
ALTER TABLE dead_letters ADD COLUMN last_position INTEGER
    CHECK ((last_position IS NOT NULL OR count = 1) AND last_position >= position);
";

/// Version 5 → 6: `topk_instances` is moved aside, created again by `SCHEMA` (with the
/// certificate's columns and their checks), refilled and dropped (`FINISH_5_TO_6`), so a
/// migrated table is the same as a new one (`ALTER TABLE … ADD COLUMN` would leave a table
/// whose `CREATE` differs from a new one's). Only the headers are copied: `topk` is unchanged.
const MIGRATE_5_TO_6: &str = "
ALTER TABLE topk_instances RENAME TO topk_instances_v5;
";

/// The second half of 5 → 6, after `SCHEMA` created the new `topk_instances`: no list has a
/// certificate.
const FINISH_5_TO_6: &str = "
INSERT INTO topk_instances (job, window_name, group_key, window_start, window_end, revision, state, final,
                            watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of,
                            sketch_max_overcount, sketch_total_overcount)
    SELECT job, window_name, group_key, window_start, window_end, revision, state, final,
           watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of,
           sketch_max_overcount, sketch_total_overcount FROM topk_instances_v5;
DROP TABLE topk_instances_v5;
";

/// Version 4 → 5: the list tables and `hotlist_windows` are moved aside, created again by
/// `SCHEMA` (with `group_key` in the lists' primary keys, `by_dims`), refilled and dropped
/// (`FINISH_4_TO_5`), so a migrated table is the same as a new one.
const MIGRATE_4_TO_5: &str = "
ALTER TABLE topk RENAME TO topk_v4;
ALTER TABLE topk_instances RENAME TO topk_instances_v4;
ALTER TABLE hotlist_windows RENAME TO hotlist_windows_v4;
";

/// The second half of 4 → 5, after `SCHEMA` created the new list tables.
const FINISH_4_TO_5: &str = "
INSERT INTO topk (job, window_name, group_key, window_start, window_end, rank, item_id, count, revision,
                  final, state, as_of, exact, error_bound)
    SELECT job, window_name, '', window_start, window_end, rank, item_id, count, revision,
           final, state, as_of, exact, error_bound FROM topk_v4;
INSERT INTO topk_instances (job, window_name, group_key, window_start, window_end, revision, state, final,
                            watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of,
                            sketch_max_overcount, sketch_total_overcount)
    SELECT job, window_name, '', window_start, window_end, revision, state, final,
           watermark, as_of, item_count, exact, error_bound, sketch_found, sketch_of,
           sketch_max_overcount, sketch_total_overcount FROM topk_instances_v4;
INSERT INTO hotlist_windows (job, name, size_ms, slide_ms, k, ord, by_dims)
    SELECT job, name, size_ms, slide_ms, k, ord, '' FROM hotlist_windows_v4;
DROP TABLE topk_v4;
DROP TABLE topk_instances_v4;
DROP TABLE hotlist_windows_v4;
";

/// `dead_letters` as of version 2 with version 10's reasons, under the name `{table}` (1 → 2
/// builds it aside); version 7's columns are added by `MIGRATE_6_TO_7`, to a new table too (and
/// to the one 9 → 10 rebuilds), so that new and migrated tables are the same. The reasons are
/// `DeadReason::as_str`'s (a test keeps them equal).
const DEAD_LETTERS: &str = "
CREATE TABLE IF NOT EXISTS {table} (
    id          INTEGER PRIMARY KEY,
    job         TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    position    INTEGER NOT NULL,
    reason      TEXT    NOT NULL CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large', 'udf')),
    detail      TEXT    NOT NULL,
    raw         BLOB    NOT NULL,
    epoch       INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL
);
";

/// Version 9 → 10 (from any version 2 to 9): SQLite cannot change a `CHECK` constraint in
/// place, so `dead_letters` is moved aside (its indexes go with it), created again by
/// `DEAD_LETTERS` (with the reason `udf`) and `MIGRATE_6_TO_7`, exactly as a new database's
/// (renaming the new table instead, as 1 → 2 does, would leave SQLite's `CREATE TABLE
/// "dead_letters"`), refilled and dropped with the old indexes (`FINISH_9_TO_10`); the indexes
/// are then created again.
const MIGRATE_9_TO_10: &str = "
ALTER TABLE dead_letters RENAME TO dead_letters_v9;
";

/// The second half of 9 → 10, after the new `dead_letters` was created with its counts: every
/// row copied, ids kept, before the indexes are created. `{counts}` is `, count,
/// last_position` for a version-7 to 9 table, empty for an older one (every row one whole
/// letter: the defaults).
const FINISH_9_TO_10: &str = "
INSERT INTO dead_letters (id, job, source, partition, position, reason, detail, raw, epoch, recorded_at{counts})
    SELECT id, job, source, partition, position, reason, detail, raw, epoch, recorded_at{counts} FROM dead_letters_v9;
DROP TABLE dead_letters_v9;
";

/// The index of `dead_letters` (dropped with the table by the migration, so created after it).
const DEAD_LETTERS_INDEX: &str = "
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
CREATE INDEX IF NOT EXISTS dead_letters_job_source_position ON dead_letters (job, source, position);
";

/// Version 1 → 2: SQLite cannot change a `CHECK` constraint in place, so `dead_letters` is
/// rebuilt: created aside with the new constraint, every row copied (ids kept), the old table
/// dropped (with its index) and the new one renamed; the index is then created again.
const MIGRATE_1_TO_2: &str = "
INSERT INTO dead_letters_v2 (id, job, source, partition, position, reason, detail, raw, epoch, recorded_at)
    SELECT id, job, source, partition, position, reason, detail, raw, epoch, recorded_at FROM dead_letters;
DROP TABLE dead_letters;
ALTER TABLE dead_letters_v2 RENAME TO dead_letters;
";

/// Version 2 → 3: the accuracy columns, added with the same definitions the version-3 tables
/// are created with (a test compares them); existing rows get the defaults: exact, no check.
/// SQLite cannot add a table constraint, so the checks that span columns are column checks of
/// the last column they involve (SQLite lets a column check name other columns).
const MIGRATE_2_TO_3: &str = "
ALTER TABLE topk ADD COLUMN exact INTEGER NOT NULL DEFAULT 1 CHECK (exact IN (0, 1));
ALTER TABLE topk ADD COLUMN error_bound INTEGER NOT NULL DEFAULT 0
    CHECK (error_bound >= 0 AND (exact = 0 OR error_bound = 0));
ALTER TABLE topk_instances ADD COLUMN exact INTEGER NOT NULL DEFAULT 1 CHECK (exact IN (0, 1));
ALTER TABLE topk_instances ADD COLUMN error_bound INTEGER NOT NULL DEFAULT 0
    CHECK (error_bound >= 0 AND (exact = 0 OR error_bound = 0));
ALTER TABLE topk_instances ADD COLUMN sketch_found INTEGER CHECK (sketch_found >= 0);
ALTER TABLE topk_instances ADD COLUMN sketch_of INTEGER CHECK (sketch_of >= sketch_found);
ALTER TABLE topk_instances ADD COLUMN sketch_max_overcount INTEGER CHECK (sketch_max_overcount >= 0);
ALTER TABLE topk_instances ADD COLUMN sketch_total_overcount INTEGER
    CHECK (sketch_total_overcount >= 0 AND (sketch_found IS NULL) = (sketch_of IS NULL)
           AND (sketch_found IS NULL) = (sketch_max_overcount IS NULL)
           AND (sketch_found IS NULL) = (sketch_total_overcount IS NULL));
";

/// The other tables; every statement is idempotent.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS topk (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    group_key    TEXT    NOT NULL DEFAULT '',
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    rank         INTEGER NOT NULL CHECK (rank >= 1),
    item_id      TEXT    NOT NULL,
    count        INTEGER NOT NULL CHECK (count >= 0),
    revision     INTEGER NOT NULL,
    final        INTEGER NOT NULL CHECK (final IN (0, 1)),
    state        TEXT    NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    as_of        INTEGER NOT NULL,
    exact        INTEGER NOT NULL DEFAULT 1 CHECK (exact IN (0, 1)),
    error_bound  INTEGER NOT NULL DEFAULT 0
                 CHECK (error_bound >= 0 AND (exact = 0 OR error_bound = 0)),
    PRIMARY KEY (job, window_name, group_key, window_start, rank)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS topk_instances (
    job          TEXT    NOT NULL,
    window_name  TEXT    NOT NULL,
    group_key    TEXT    NOT NULL DEFAULT '',
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    revision     INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('open', 'closed', 'final')),
    final        INTEGER NOT NULL CHECK (final IN (0, 1)),
    watermark    INTEGER NOT NULL,
    as_of        INTEGER NOT NULL,
    item_count   INTEGER NOT NULL CHECK (item_count >= 0),
    exact        INTEGER NOT NULL DEFAULT 1 CHECK (exact IN (0, 1)),
    error_bound  INTEGER NOT NULL DEFAULT 0
                 CHECK (error_bound >= 0 AND (exact = 0 OR error_bound = 0)),
    sketch_found           INTEGER CHECK (sketch_found >= 0),
    sketch_of              INTEGER CHECK (sketch_of >= sketch_found),
    sketch_max_overcount   INTEGER CHECK (sketch_max_overcount >= 0),
    sketch_total_overcount INTEGER
        CHECK (sketch_total_overcount >= 0 AND (sketch_found IS NULL) = (sketch_of IS NULL)
               AND (sketch_found IS NULL) = (sketch_max_overcount IS NULL)
               AND (sketch_found IS NULL) = (sketch_total_overcount IS NULL)),
    certificate_threshold  INTEGER CHECK (certificate_threshold >= 1),
    certificate_counted    INTEGER CHECK (certificate_counted >= 0),
    certificate_passes     INTEGER
        CHECK (certificate_passes >= 1
               AND (certificate_threshold IS NULL) = (certificate_counted IS NULL)
               AND (certificate_threshold IS NULL) = (certificate_passes IS NULL)
               AND (certificate_threshold IS NULL OR (exact = 1 AND state = 'final'))),
    PRIMARY KEY (job, window_name, group_key, window_start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hot_key_windows (
    job          TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL CHECK (window_end > window_start),
    watermark    INTEGER NOT NULL,
    as_of        INTEGER NOT NULL,
    key_count    INTEGER NOT NULL CHECK (key_count >= 0),
    PRIMARY KEY (job, window_start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hot_keys (
    job          TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    item_id      TEXT    NOT NULL,
    rate         REAL    NOT NULL CHECK (rate >= 0),
    state        TEXT    NOT NULL CHECK (state IN ('hot', 'cooling')),
    as_of        INTEGER NOT NULL,
    PRIMARY KEY (job, window_start, item_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hotlist_windows (
    job      TEXT    NOT NULL,
    name     TEXT    NOT NULL,
    size_ms  INTEGER NOT NULL,
    slide_ms INTEGER NOT NULL,
    k        INTEGER NOT NULL,
    ord      INTEGER NOT NULL,
    by_dims  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (job, name)
);
CREATE TABLE IF NOT EXISTS hotlist_commits (
    job          TEXT    NOT NULL PRIMARY KEY,
    epoch        INTEGER NOT NULL,
    watermark    INTEGER NOT NULL,
    committed_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS hotlist_jobs (
    job        TEXT    NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    owner      TEXT    NOT NULL,
    claimed_at INTEGER NOT NULL
);
";

impl SqliteStore {
    /// Creates the tables if missing and stamps the schema version, in one transaction.
    pub(super) fn ensure_schema(&mut self) -> Result<(), SinkError> {
        let path = self.path.as_path();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, "starting the schema transaction"))?;
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql_err(path, "reading the schema version"))?;
        if version > SCHEMA_VERSION {
            return Err(SinkError::Schema {
                path: path.to_path_buf(),
                detail: format!("schema version {version} is newer than this build's ({SCHEMA_VERSION})"),
            });
        }
        if version == 1 {
            let aside = DEAD_LETTERS.replace("{table}", "dead_letters_v2");
            tx.execute_batch(&format!("{aside}{MIGRATE_1_TO_2}"))
                .map_err(sql_err(path, "migrating the schema from version 1 to 2"))?;
        }
        if (1..ACCURACY_VERSION).contains(&version) {
            tx.execute_batch(MIGRATE_2_TO_3)
                .map_err(sql_err(path, "migrating the schema from version 2 to 3"))?;
        }
        let regroup = (1..GROUPS_VERSION).contains(&version);
        if regroup {
            tx.execute_batch(MIGRATE_4_TO_5)
                .map_err(sql_err(path, "migrating the schema to version 5"))?;
        }
        // 1 to 4: 4 → 5 rebuilt `topk_instances` already (`SCHEMA` creates it with certificates)
        let recertify = version == GROUPS_VERSION;
        if recertify {
            tx.execute_batch(MIGRATE_5_TO_6)
                .map_err(sql_err(path, "migrating the schema from version 5 to 6"))?;
        }
        // 2 to 9: the old `dead_letters` aside (1 → 2 built it with this version's reasons)
        let relabel = (2..UDF_VERSION).contains(&version);
        if relabel {
            tx.execute_batch(MIGRATE_9_TO_10)
                .map_err(sql_err(path, "migrating the schema from version 9 to 10"))?;
        }
        let dead_letters = DEAD_LETTERS.replace("{table}", "dead_letters");
        tx.execute_batch(&format!("{SCHEMA}{dead_letters}"))
            .map_err(sql_err(path, "creating the tables"))?;
        // 8 → 9, and a new database (idempotent, as `SCHEMA`)
        tx.execute_batch(INSTANCE_RANGES)
            .map_err(sql_err(path, "creating the instance ranges table (schema version 9)"))?;
        // a new table (version 0), every older one and a rebuilt one gain the counts
        if version < BOUNDED_DEAD_LETTERS_VERSION || relabel {
            tx.execute_batch(MIGRATE_6_TO_7)
                .map_err(sql_err(path, "migrating the schema to version 7"))?;
        }
        // a new table (version 0) and every older one gain the trend columns
        if version < TREND_VERSION {
            tx.execute_batch(MIGRATE_7_TO_8)
                .map_err(sql_err(path, "migrating the schema to version 8"))?;
        }
        if relabel {
            let counts = if version >= BOUNDED_DEAD_LETTERS_VERSION {
                ", count, last_position"
            } else {
                ""
            };
            tx.execute_batch(&FINISH_9_TO_10.replace("{counts}", counts))
                .map_err(sql_err(path, "migrating the dead letters to version 10"))?;
        }
        tx.execute_batch(DEAD_LETTERS_INDEX)
            .map_err(sql_err(path, "creating the dead letters' indexes"))?;
        if regroup {
            tx.execute_batch(FINISH_4_TO_5)
                .map_err(sql_err(path, "migrating the lists to version 5"))?;
        }
        if recertify {
            tx.execute_batch(FINISH_5_TO_6)
                .map_err(sql_err(path, "migrating the lists to version 6"))?;
        }
        if version < SCHEMA_VERSION {
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(sql_err(path, "setting the schema version"))?;
        }
        tx.commit().map_err(sql_err(path, "committing the schema"))
    }
}

#[cfg(test)]
mod tests {
    use super::DEAD_LETTERS;
    use hotlist_operators::record::DeadReason;

    /// The `CHECK` on `dead_letters.reason` lists exactly the reasons the job writes.
    #[test]
    fn the_reason_check_lists_every_reason() {
        let quoted: Vec<String> = DeadReason::ALL.iter().map(|r| format!("'{}'", r.as_str())).collect();
        assert!(
            DEAD_LETTERS.contains(&format!("CHECK (reason IN ({}))", quoted.join(", "))),
            "{DEAD_LETTERS}"
        );
    }
}

//! The PostgreSQL tables and their version (the `hotlist_schema` table), created if missing
//! and migrated from older versions under an advisory lock so processes starting at once do not
//! race; and dropping a schema.
//!
//! Versions: 1 the first; 2 `dead_letters.reason` also takes `future` and `too_large`; 3 lists
//! say what they are: `topk` and `topk_instances` gain `exact` and `error_bound`,
//! `topk_instances` the sketch check (`sketch_found`, `sketch_of`, `sketch_max_overcount`,
//! `sketch_total_overcount`, all NULL when there is none); 4 the hot-key detector's tables
//! `hot_key_windows` and `hot_keys`. A version 1 schema migrates through 2 and 3 to 4; migrated
//! rows are exact (`exact = TRUE`, `error_bound = 0`, no check); 3 → 4 only creates the two
//! new tables; 5 per-group lists: `topk` and `topk_instances` gain `group_key` (`''` for a
//! global list) in their primary keys, `hotlist_windows` gains `by_dims` (the `by` dims joined
//! by `,`); 4 → 5 adds the columns (existing lists are global) and rebuilds the primary keys;
//! 6 certified lists: `topk_instances` gains the certificate of a sketch window's list a replay
//! proved exact (`certificate_threshold`, `certificate_counted`, `certificate_passes`, all NULL
//! when there is none; a certificate only on an exact, final list); 5 → 6 adds the columns
//! and their check (no existing list has a certificate); 7 bounded dead letters: `dead_letters`
//! gains `count` (how many letters a row stands for: 1, or more for a summary of those beyond
//! a block's cap) and `last_position` (a summary's last position, NULL for a whole letter),
//! with their check, and the index `dead_letters_job_source_position` that finds a block's
//! rows; 6 → 7 adds them (every existing row is one whole letter); 8 trend lists: `topk` gains
//! `baseline` (the item's baseline sum *S*, `>= 0`), `score` (*z*) and `history` (its counts in
//! the *W* instances before, oldest first, comma-separated), all NULL on a count-ranked list's
//! rows, all three or none (`topk_trend_check`); 7 → 8 adds them (no existing list is a trend
//! list). Readers of a version-7 schema read every list as a count-ranked one. 9 sealed
//! instances' input ranges: the table `instance_ranges`, one row per sealed instance of every
//! window (`window_end`, and its partition ranges as JSON in `ranges` or why it cannot be read
//! again in `unreadable`: exactly one of the two, `instance_ranges_one_check`; the end after the
//! start, `instance_ranges_end_check`; see `crate::ranges`); 8 → 9 only creates the table (as
//! 3 → 4 did, by `SCHEMA`): no instance sealed before has ranges, and a reader of a version-6
//! to 8 schema reads none. 10 `dead_letters.reason` also takes `udf` (a `[[udf]]` function
//! panicked or failed on the record); 9 → 10 replaces the reason constraint as 1 → 2 did (every
//! row kept); a reader of a version-6 to 9 schema reads it as it is (no letter has the reason
//! `udf`).

use super::client::{Client, Queries};
use super::error::pg_err;
use super::ident::{quote_ident, redact};
use crate::error::SinkError;
use postgres::error::SqlState;
use postgres::{IsolationLevel, NoTls};
use std::path::PathBuf;

/// The schema version this build writes (the `hotlist_schema` table).
pub const SCHEMA_VERSION: i64 = 10;

/// The oldest schema version readers (`serve`, `query`) read: version 6's certificate columns
/// are in every list read (a version-6 or 7 schema's lists are read without trend columns,
/// every one count-ranked; a version-6 schema's dead letters are each one whole letter; a
/// schema older than 9 has no instance ranges).
pub const READ_SCHEMA_VERSION: i64 = 6;

/// The first version with trend lists (`topk.baseline`, `score`, `history`): a reader of an
/// older schema reads every list as a count-ranked one.
pub(super) const TREND_VERSION: i64 = 8;

/// The first version with dead-letter counts (`dead_letters.count`, `last_position`): a reader
/// of an older schema reads every row as one whole letter.
pub(super) const BOUNDED_DEAD_LETTERS_VERSION: i64 = 7;

/// The first version with sealed instances' ranges (`instance_ranges`): a reader of an older
/// schema reads none.
pub(super) const RANGES_VERSION: i64 = 9;

/// Advisory lock (single 64-bit key space) held while creating the schema and tables.
const MIGRATION_LOCK: i64 = 0x686f_746c_6973_7401; // "hotlist" + 1

/// The tables; every statement is idempotent.
const SCHEMA: &str = "
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
    exact        BOOLEAN     NOT NULL DEFAULT TRUE,
    error_bound  BIGINT      NOT NULL DEFAULT 0 CONSTRAINT topk_error_bound_check CHECK (error_bound >= 0),
    group_key    TEXT        NOT NULL DEFAULT '',
    baseline     BIGINT      CONSTRAINT topk_baseline_check CHECK (baseline >= 0),
    score        DOUBLE PRECISION,
    history      TEXT,
    CONSTRAINT topk_pkey PRIMARY KEY (job, window_name, group_key, window_start, rank),
    CONSTRAINT topk_exact_check CHECK (NOT exact OR error_bound = 0),
    CONSTRAINT topk_trend_check CHECK (num_nulls(baseline, score, history) IN (0, 3))
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
    exact        BOOLEAN     NOT NULL DEFAULT TRUE,
    error_bound  BIGINT      NOT NULL DEFAULT 0 CONSTRAINT topk_instances_error_bound_check CHECK (error_bound >= 0),
    sketch_found           BIGINT,
    sketch_of              BIGINT,
    sketch_max_overcount   BIGINT,
    sketch_total_overcount BIGINT,
    group_key    TEXT        NOT NULL DEFAULT '',
    certificate_threshold BIGINT,
    certificate_counted   BIGINT,
    certificate_passes    BIGINT,
    CONSTRAINT topk_instances_pkey PRIMARY KEY (job, window_name, group_key, window_start),
    CONSTRAINT topk_instances_exact_check CHECK (NOT exact OR error_bound = 0),
    CONSTRAINT topk_instances_sketch_check CHECK (
        num_nulls(sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount) IN (0, 4)
        AND sketch_found >= 0 AND sketch_of >= sketch_found AND sketch_max_overcount >= 0
        AND sketch_total_overcount >= 0),
    CONSTRAINT topk_instances_certificate_check CHECK (
        num_nulls(certificate_threshold, certificate_counted, certificate_passes) IN (0, 3)
        AND certificate_threshold >= 1 AND certificate_counted >= 0 AND certificate_passes >= 1
        AND (certificate_threshold IS NULL OR (exact AND state = 'final')))
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id          BIGSERIAL   PRIMARY KEY,
    job         TEXT        NOT NULL,
    source      TEXT        NOT NULL,
    partition   BIGINT      NOT NULL,
    position    BIGINT      NOT NULL,
    reason      TEXT        NOT NULL CONSTRAINT dead_letters_reason_check
                            CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large', 'udf')),
    detail      TEXT        NOT NULL,
    raw         BYTEA       NOT NULL,
    epoch       BIGINT      NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    count         BIGINT    NOT NULL DEFAULT 1,
    last_position BIGINT,
    CONSTRAINT dead_letters_count_check CHECK (
        count >= 1 AND (last_position IS NOT NULL OR count = 1) AND last_position >= position)
);
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
CREATE INDEX IF NOT EXISTS dead_letters_job_source_position ON dead_letters (job, source, position);
CREATE TABLE IF NOT EXISTS hot_key_windows (
    job          TEXT        NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    window_end   TIMESTAMPTZ NOT NULL CHECK (window_end > window_start),
    watermark    TIMESTAMPTZ NOT NULL,
    as_of        TIMESTAMPTZ NOT NULL,
    key_count    BIGINT      NOT NULL CHECK (key_count >= 0),
    PRIMARY KEY (job, window_start)
);
CREATE TABLE IF NOT EXISTS hot_keys (
    job          TEXT             NOT NULL,
    window_start TIMESTAMPTZ      NOT NULL,
    window_end   TIMESTAMPTZ      NOT NULL,
    item_id      TEXT             NOT NULL,
    rate         DOUBLE PRECISION NOT NULL CHECK (rate >= 0),
    state        TEXT             NOT NULL CHECK (state IN ('hot', 'cooling')),
    as_of        TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (job, window_start, item_id)
);
CREATE TABLE IF NOT EXISTS hotlist_windows (
    job      TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    size_ms  BIGINT NOT NULL,
    slide_ms BIGINT NOT NULL,
    k        BIGINT NOT NULL,
    ord      BIGINT NOT NULL,
    by_dims  TEXT   NOT NULL DEFAULT '',
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
CREATE TABLE IF NOT EXISTS instance_ranges (
    job          TEXT        NOT NULL,
    window_name  TEXT        NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    window_end   TIMESTAMPTZ NOT NULL,
    ranges       TEXT,
    unreadable   TEXT,
    CONSTRAINT instance_ranges_pkey PRIMARY KEY (job, window_name, window_start),
    CONSTRAINT instance_ranges_end_check CHECK (window_end > window_start),
    CONSTRAINT instance_ranges_one_check CHECK (num_nulls(ranges, unreadable) = 1)
);
";

/// Version 1 → 2: the `CHECK` on `dead_letters.reason` (PostgreSQL named it
/// `dead_letters_reason_check`; any check constraint of the table on `reason` is replaced, so a
/// differently named one cannot survive) takes the new reasons. Run under the migration lock.
const MIGRATE_1_TO_2: &str = "
DO $$
DECLARE c name;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'dead_letters'::regclass AND contype = 'c'
               AND pg_get_constraintdef(oid) LIKE '%reason%'
    LOOP
        EXECUTE format('ALTER TABLE dead_letters DROP CONSTRAINT %I', c);
    END LOOP;
END $$;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_reason_check
    CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large'));
";

/// Version 9 → 10: the `CHECK` on `dead_letters.reason` takes `udf` too, replaced as 1 → 2
/// replaced it (any check constraint of the table on `reason`), with the definition and name a
/// new table's has (a test compares them). Run under the migration lock, for every version
/// from 1 (1 → 2 installs version 2's reasons).
const MIGRATE_9_TO_10: &str = "
DO $$
DECLARE c name;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'dead_letters'::regclass AND contype = 'c'
               AND pg_get_constraintdef(oid) LIKE '%reason%'
    LOOP
        EXECUTE format('ALTER TABLE dead_letters DROP CONSTRAINT %I', c);
    END LOOP;
END $$;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_reason_check
    CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large', 'udf'));
";

/// Version 2 → 3: the accuracy columns and their checks, added with the same definitions (and
/// constraint names) the version-3 tables are created with (a test compares them); existing
/// rows get the defaults: exact, no check. Run under the migration lock.
const MIGRATE_2_TO_3: &str = "
ALTER TABLE topk
    ADD COLUMN exact       BOOLEAN NOT NULL DEFAULT TRUE,
    ADD COLUMN error_bound BIGINT  NOT NULL DEFAULT 0 CONSTRAINT topk_error_bound_check CHECK (error_bound >= 0),
    ADD CONSTRAINT topk_exact_check CHECK (NOT exact OR error_bound = 0);
ALTER TABLE topk_instances
    ADD COLUMN exact       BOOLEAN NOT NULL DEFAULT TRUE,
    ADD COLUMN error_bound BIGINT  NOT NULL DEFAULT 0
        CONSTRAINT topk_instances_error_bound_check CHECK (error_bound >= 0),
    ADD COLUMN sketch_found           BIGINT,
    ADD COLUMN sketch_of              BIGINT,
    ADD COLUMN sketch_max_overcount   BIGINT,
    ADD COLUMN sketch_total_overcount BIGINT,
    ADD CONSTRAINT topk_instances_exact_check CHECK (NOT exact OR error_bound = 0),
    ADD CONSTRAINT topk_instances_sketch_check CHECK (
        num_nulls(sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount) IN (0, 4)
        AND sketch_found >= 0 AND sketch_of >= sketch_found AND sketch_max_overcount >= 0
        AND sketch_total_overcount >= 0);
";

/// Version 4 → 5: `group_key` (existing lists are global) joins the list tables' primary keys,
/// under the names PostgreSQL gives a table's primary key (as the version-5 tables are
/// created); `by_dims` (no window had `by`). Run under the migration lock.
const MIGRATE_4_TO_5: &str = "
ALTER TABLE topk ADD COLUMN group_key TEXT NOT NULL DEFAULT '',
    DROP CONSTRAINT topk_pkey,
    ADD CONSTRAINT topk_pkey PRIMARY KEY (job, window_name, group_key, window_start, rank);
ALTER TABLE topk_instances ADD COLUMN group_key TEXT NOT NULL DEFAULT '',
    DROP CONSTRAINT topk_instances_pkey,
    ADD CONSTRAINT topk_instances_pkey PRIMARY KEY (job, window_name, group_key, window_start);
ALTER TABLE hotlist_windows ADD COLUMN by_dims TEXT NOT NULL DEFAULT '';
";

/// Version 5 → 6: the certificate's columns and their check, added with the same definitions
/// (and constraint name) the version-6 table is created with (a test compares them); no
/// existing list has a certificate. Run under the migration lock.
const MIGRATE_5_TO_6: &str = "
ALTER TABLE topk_instances
    ADD COLUMN certificate_threshold BIGINT,
    ADD COLUMN certificate_counted   BIGINT,
    ADD COLUMN certificate_passes    BIGINT,
    ADD CONSTRAINT topk_instances_certificate_check CHECK (
        num_nulls(certificate_threshold, certificate_counted, certificate_passes) IN (0, 3)
        AND certificate_threshold >= 1 AND certificate_counted >= 0 AND certificate_passes >= 1
        AND (certificate_threshold IS NULL OR (exact AND state = 'final')));
";

/// Version 6 → 7: a dead-letter row's count and a summary's last position, with the same
/// definitions (and constraint name) the version-7 table is created with; every existing row is
/// one whole letter. (`SCHEMA` then creates the new index.) Run under the migration lock.
const MIGRATE_6_TO_7: &str = "
ALTER TABLE dead_letters
    ADD COLUMN count         BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN last_position BIGINT,
    ADD CONSTRAINT dead_letters_count_check CHECK (
        count >= 1 AND (last_position IS NOT NULL OR count = 1) AND last_position >= position);
";

/// Version 7 → 8: a trend list's columns and their checks, with the same definitions (and
/// constraint names) the version-8 table is created with (a test compares them); no existing
/// list is a trend list. Run under the migration lock.
const MIGRATE_7_TO_8: &str = "
ALTER TABLE topk
    ADD COLUMN baseline BIGINT CONSTRAINT topk_baseline_check CHECK (baseline >= 0),
    ADD COLUMN score    DOUBLE PRECISION,
    ADD COLUMN history  TEXT,
    ADD CONSTRAINT topk_trend_check CHECK (num_nulls(baseline, score, history) IN (0, 3));
";

/// The schema version table (PostgreSQL has no `PRAGMA user_version`): at most one row.
const VERSION_TABLE: &str = "
CREATE TABLE IF NOT EXISTS hotlist_schema (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT  NOT NULL
)";

/// Drops the schema `schema` of the database at `url` with everything in it (for throwaway
/// schemas: benchmarks, tests). A schema that does not exist is no error.
pub fn drop_schema(url: &str, schema: &str) -> Result<(), SinkError> {
    let location = format!("{} schema {schema}", redact(url));
    let mut client = postgres::Client::connect(url, NoTls).map_err(pg_err(&location, "connecting"))?;
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", quote_ident(schema)))
        .map_err(pg_err(&location, "dropping the schema"))
}

/// Creates the schema (if missing) and the tables (if missing), migrates tables of an older
/// version and stamps the schema version, in one transaction under an advisory lock; the
/// session's `search_path` already names `schema`.
pub(super) fn ensure_schema(client: &mut Client, schema: &str, location: &str) -> Result<(), SinkError> {
    let op = "creating the tables";
    let err = |e| pg_err(location, op)(e);
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(err)?;
    // Only try to create a missing schema: creating needs a privilege using one does not.
    let exists = tx
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .map_err(err)?
        .is_some();
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema)))
            .map_err(err)?;
    }
    tx.batch_execute(VERSION_TABLE).map_err(err)?;
    let version: Option<i64> = match tx.query_opt("SELECT version FROM hotlist_schema", &[]).map_err(err)? {
        Some(r) => Some(r.try_get(0).map_err(err)?),
        None => None,
    };
    if let Some(v) = version.filter(|v| *v > SCHEMA_VERSION) {
        return Err(SinkError::Schema {
            path: PathBuf::from(location),
            detail: format!("schema version {v} is newer than this build's ({SCHEMA_VERSION})"),
        });
    }
    if version == Some(1) {
        tx.batch_execute(MIGRATE_1_TO_2)
            .map_err(pg_err(location, "migrating the schema from version 1 to 2"))?;
    }
    if matches!(version, Some(1 | 2)) {
        tx.batch_execute(MIGRATE_2_TO_3)
            .map_err(pg_err(location, "migrating the schema from version 2 to 3"))?;
    }
    if matches!(version, Some(1..=4)) {
        tx.batch_execute(MIGRATE_4_TO_5)
            .map_err(pg_err(location, "migrating the schema from version 4 to 5"))?;
    }
    if matches!(version, Some(1..=5)) {
        tx.batch_execute(MIGRATE_5_TO_6)
            .map_err(pg_err(location, "migrating the schema from version 5 to 6"))?;
    }
    if matches!(version, Some(1..=6)) {
        tx.batch_execute(MIGRATE_6_TO_7)
            .map_err(pg_err(location, "migrating the schema from version 6 to 7"))?;
    }
    if matches!(version, Some(1..=7)) {
        tx.batch_execute(MIGRATE_7_TO_8)
            .map_err(pg_err(location, "migrating the schema from version 7 to 8"))?;
    }
    if matches!(version, Some(1..=9)) {
        tx.batch_execute(MIGRATE_9_TO_10)
            .map_err(pg_err(location, "migrating the schema from version 9 to 10"))?;
    }
    tx.batch_execute(SCHEMA).map_err(err)?;
    if version != Some(SCHEMA_VERSION) {
        tx.execute(
            "INSERT INTO hotlist_schema (one, version) VALUES (TRUE, $1)
             ON CONFLICT (one) DO UPDATE SET version = excluded.version",
            &[&SCHEMA_VERSION],
        )
        .map_err(err)?;
    }
    tx.commit().map_err(err)
}

/// A reader's check of the tables (no DDL: a read-only role cannot run it, and readers must
/// not race the job's migrations): the schema version must be one this build reads; it is
/// returned.
pub(super) fn check_readable(client: &mut Client, location: &str) -> Result<i64, SinkError> {
    let schema_err = |detail: String| SinkError::Schema {
        path: PathBuf::from(location),
        detail,
    };
    let version =
        match client.query_opt("SELECT version FROM hotlist_schema", &[]) {
            Ok(Some(r)) => r
                .try_get::<_, i64>(0)
                .map_err(pg_err(location, "reading the schema version"))?,
            Ok(None) => return Err(schema_err("the schema version table hotlist_schema is empty".into())),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => return Err(schema_err(
                "it has no hotlist tables (no hotlist_schema table): run the job first (readers never create tables)"
                    .into(),
            )),
            Err(e) => return Err(pg_err(location, "reading the schema version")(e)),
        };
    if version < READ_SCHEMA_VERSION {
        return Err(schema_err(format!(
            "schema version {version} is older than this build reads ({READ_SCHEMA_VERSION}..={SCHEMA_VERSION}): \
             run the job with this build once to migrate it (readers never change the schema)"
        )));
    }
    if version > SCHEMA_VERSION {
        return Err(schema_err(format!(
            "schema version {version} is newer than this build reads ({READ_SCHEMA_VERSION}..={SCHEMA_VERSION}): \
             upgrade hotlist"
        )));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::{MIGRATE_9_TO_10, SCHEMA};
    use hotlist_operators::record::DeadReason;

    /// The `CHECK` on `dead_letters.reason`, new and migrated, lists exactly the reasons the
    /// job writes.
    #[test]
    fn the_reason_check_lists_every_reason() {
        let quoted: Vec<String> = DeadReason::ALL.iter().map(|r| format!("'{}'", r.as_str())).collect();
        let check = format!("CHECK (reason IN ({}))", quoted.join(", "));
        assert!(SCHEMA.contains(&check), "{SCHEMA}");
        assert!(MIGRATE_9_TO_10.contains(&check), "{MIGRATE_9_TO_10}");
    }
}

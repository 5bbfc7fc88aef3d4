//! The schemas of older versions the migration tests start from: the DDL of versions 1, 2 and
//! 9 and the table version 6 changed, verbatim (as those releases created them), and the
//! builders that take a schema back to versions 4 to 9 (version 9 only added a table, which a
//! downgrade drops; version 10 only replaced the reason constraint, which a downgrade puts
//! back).

use super::tests::TestDb;
use super::*;

/// The tables and version table of schema version 1, verbatim.
const V1_DDL: &str = "
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
    PRIMARY KEY (job, window_name, window_start, rank)
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
    PRIMARY KEY (job, window_name, window_start)
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id          BIGSERIAL   PRIMARY KEY,
    job         TEXT        NOT NULL,
    source      TEXT        NOT NULL,
    partition   BIGINT      NOT NULL,
    position    BIGINT      NOT NULL,
    reason      TEXT        NOT NULL CHECK (reason IN ('bad', 'late', 'sealed')),
    detail      TEXT        NOT NULL,
    raw         BYTEA       NOT NULL,
    epoch       BIGINT      NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
CREATE TABLE IF NOT EXISTS hotlist_windows (
    job      TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    size_ms  BIGINT NOT NULL,
    slide_ms BIGINT NOT NULL,
    k        BIGINT NOT NULL,
    ord      BIGINT NOT NULL,
    PRIMARY KEY (job, name)
);
CREATE TABLE IF NOT EXISTS hotlist_commits (
    job          TEXT        NOT NULL PRIMARY KEY,
    epoch        BIGINT      NOT NULL,
    watermark    TIMESTAMPTZ NOT NULL,
    committed_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS hotlist_schema (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT  NOT NULL
);
INSERT INTO hotlist_schema (one, version) VALUES (TRUE, 1);
";

/// What an older job wrote: a window, one list, three dead letters, a commit.
const V1_ROWS: &str = "
INSERT INTO hotlist_windows VALUES ('hotlist', '1m', 60000, 60000, 10, 0);
INSERT INTO topk_instances VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 2,
    'final', TRUE, 'epoch'::timestamptz + interval '60001 milliseconds', now(), 1);
INSERT INTO topk VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 1, 'a', 3, 2,
    TRUE, 'final', now());
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at) VALUES
    ('hotlist', 'file:a.jsonl', 0, 1, 'bad', 'not a JSON object', '\\x5b5d', 1, now()),
    ('hotlist', 'file:a.jsonl', 0, 2, 'late', 'late for window(s) 1m', '\\x7b7d', 1, now()),
    ('hotlist', 'file:a.jsonl', 0, 3, 'sealed', 'window already sealed', '\\x', 2, now());
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 'epoch'::timestamptz + interval '60001 milliseconds', now());
";

/// The tables and version table of schema version 2, verbatim.
const V2_DDL: &str = "
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
    PRIMARY KEY (job, window_name, window_start, rank)
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
    PRIMARY KEY (job, window_name, window_start)
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id          BIGSERIAL   PRIMARY KEY,
    job         TEXT        NOT NULL,
    source      TEXT        NOT NULL,
    partition   BIGINT      NOT NULL,
    position    BIGINT      NOT NULL,
    reason      TEXT        NOT NULL CONSTRAINT dead_letters_reason_check
                            CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large')),
    detail      TEXT        NOT NULL,
    raw         BYTEA       NOT NULL,
    epoch       BIGINT      NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_job_reason ON dead_letters (job, reason);
CREATE TABLE IF NOT EXISTS hotlist_windows (
    job      TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    size_ms  BIGINT NOT NULL,
    slide_ms BIGINT NOT NULL,
    k        BIGINT NOT NULL,
    ord      BIGINT NOT NULL,
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
CREATE TABLE IF NOT EXISTS hotlist_schema (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT  NOT NULL
);
INSERT INTO hotlist_schema (one, version) VALUES (TRUE, 2);
";

/// What the previous release wrote: a window, one list of two items, a commit.
const V2_ROWS: &str = "
INSERT INTO hotlist_windows VALUES ('hotlist', '1m', 60000, 60000, 10, 0);
INSERT INTO topk_instances VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 2,
    'final', TRUE, 'epoch'::timestamptz + interval '60001 milliseconds', now(), 2);
INSERT INTO topk VALUES
    ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 1, 'a', 3, 2, TRUE, 'final', now()),
    ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 2, 'b', 1, 2, TRUE, 'final', now());
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 'epoch'::timestamptz + interval '60001 milliseconds', now());
";

/// The tables and version table of schema version 9, verbatim.
const V9_DDL: &str = "
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
                            CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large')),
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
CREATE TABLE IF NOT EXISTS hotlist_schema (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT  NOT NULL
);
INSERT INTO hotlist_schema (one, version) VALUES (TRUE, 9);
";

/// What a version-9 job wrote: the fixtures' two windows, one final list of two items of the
/// `1m` instance at 0, its ranges (unreadable), three whole dead letters (as
/// `test_fixtures::letter` makes them) and a summary of four `late` ones, a commit.
const V9_ROWS: &str = "
INSERT INTO hotlist_windows (job, name, size_ms, slide_ms, k, ord, by_dims) VALUES
    ('hotlist', '5m', 300000, 300000, 10, 0, ''),
    ('hotlist', '1m', 60000, 30000, 3, 1, '');
INSERT INTO topk_instances (job, window_name, window_start, window_end, revision, state, final, watermark, as_of,
                            item_count)
    VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 3, 'final', TRUE,
            'epoch'::timestamptz + interval '60001 milliseconds', now(), 2);
INSERT INTO topk (job, window_name, window_start, window_end, rank, item_id, count, revision, final, state, as_of)
    VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 1, 'a', 3, 3, TRUE, 'final', now()),
           ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', 2, 'b', 1, 3, TRUE, 'final', now());
INSERT INTO instance_ranges (job, window_name, window_start, window_end, ranges, unreadable)
    VALUES ('hotlist', '1m', 'epoch', 'epoch'::timestamptz + interval '1 minute', NULL, 'gone');
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at, count,
                          last_position) VALUES
    ('hotlist', 'file:events/a.jsonl', 3, 1, 'bad', 'detail 1', '\\x5b5d', 1, now(), 1, NULL),
    ('hotlist', 'file:events/a.jsonl', 3, 2, 'future', 'detail 2', '\\x7b7d', 1, now(), 1, NULL),
    ('hotlist', 'file:events/a.jsonl', 3, 3, 'too_large', 'detail 3', '\\x78', 2, now(), 1, NULL),
    ('hotlist', 'file:events/a.jsonl', 3, 4, 'late', 'summary', '\\x', 2, now(), 4, 9);
INSERT INTO hotlist_commits VALUES ('hotlist', 2, 'epoch'::timestamptz + interval '60001 milliseconds', now());
";

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

/// `db`'s schema as an older job left it: version 1 with [`V1_ROWS`].
pub(super) fn v1_schema(db: &TestDb) {
    let mut c = db.client();
    c.batch_execute(&format!("CREATE SCHEMA {}", ident::quote_ident(&db.schema)))
        .unwrap();
    c.batch_execute(V1_DDL).unwrap();
    c.batch_execute(V1_ROWS).unwrap();
    // the version-1 constraint is really there: the new reasons need the migration
    let future = "INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, \
                  recorded_at) VALUES ('hotlist', 's', 0, 4, 'future', 'd', '\\x', 3, now())";
    assert!(c.batch_execute(future).is_err());
}

/// `db`'s schema as the previous release left it: version 2 with [`V2_ROWS`].
pub(super) fn v2_schema(db: &TestDb) {
    let mut c = db.client();
    c.batch_execute(&format!("CREATE SCHEMA {}", ident::quote_ident(&db.schema)))
        .unwrap();
    c.batch_execute(V2_DDL).unwrap();
    c.batch_execute(V2_ROWS).unwrap();
}

/// `db`'s schema as a version-9 job left it: [`V9_DDL`] with [`V9_ROWS`].
pub(super) fn v9_schema(db: &TestDb) {
    let mut c = db.client();
    c.batch_execute(&format!("CREATE SCHEMA {}", ident::quote_ident(&db.schema)))
        .unwrap();
    c.batch_execute(V9_DDL).unwrap();
    c.batch_execute(V9_ROWS).unwrap();
    // the version-9 constraint is really there: the new reason needs the migration
    let udf = "INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, \
               recorded_at) VALUES ('hotlist', 's', 0, 10, 'udf', 'd', '\\x', 3, now())";
    assert!(c.batch_execute(udf).is_err());
}

/// Turns a schema of this build's version into a version-4 one (through version 5: its
/// certificates dropped; its per-group lists dropped) stamped `version`.
pub(super) fn downgrade_to_v4(db: &TestDb, version: i64) {
    downgrade_to_v5(db, 5);
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

/// Turns a schema of this build's version into a version-5 one stamped `version`:
/// `topk_instances` as version 5 created it, every header kept without its certificate.
pub(super) fn downgrade_to_v5(db: &TestDb, version: i64) {
    downgrade_to_v6(db, 6);
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

/// Turns a schema of this build's version into a version-6 one stamped `version`:
/// `dead_letters` without its counts (every row a whole letter), their check and index.
pub(super) fn downgrade_to_v6(db: &TestDb, version: i64) {
    downgrade_to_v7(db, 7);
    db.client()
        .batch_execute(&format!(
            "DROP INDEX dead_letters_job_source_position;
             ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_count_check, DROP COLUMN last_position,
                 DROP COLUMN count;
             UPDATE hotlist_schema SET version = {version};"
        ))
        .unwrap();
}

/// Turns a schema of this build's version into a version-7 one stamped `version`: `topk`
/// without the trend columns and their checks (its lists must be count-ranked ones).
pub(super) fn downgrade_to_v7(db: &TestDb, version: i64) {
    downgrade_to_v8(db, 8);
    db.client()
        .batch_execute(&format!(
            "ALTER TABLE topk DROP CONSTRAINT topk_trend_check, DROP COLUMN history, DROP COLUMN score,
                 DROP COLUMN baseline;
             UPDATE hotlist_schema SET version = {version};"
        ))
        .unwrap();
}

/// Turns a schema of this build's version into a version-8 one stamped `version`: without
/// `instance_ranges`.
pub(super) fn downgrade_to_v8(db: &TestDb, version: i64) {
    downgrade_to_v9(db, 9);
    db.client()
        .batch_execute(&format!(
            "DROP TABLE instance_ranges;
             UPDATE hotlist_schema SET version = {version};"
        ))
        .unwrap();
}

/// Turns a schema of this build's version into a version-9 one stamped `version`: the reason
/// constraint as version 9 created it (no dead letter may be a `udf` one).
pub(super) fn downgrade_to_v9(db: &TestDb, version: i64) {
    db.client()
        .batch_execute(&format!(
            "ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_reason_check,
                 ADD CONSTRAINT dead_letters_reason_check
                 CHECK (reason IN ('bad', 'late', 'sealed', 'future', 'too_large'));
             UPDATE hotlist_schema SET version = {version};"
        ))
        .unwrap();
}

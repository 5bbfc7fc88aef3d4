//! The SQL the PostgreSQL store runs, prepared once per connection (the list reads are
//! `pub(super)` so a test can check their plans), and the commit lock and owner query that
//! `ownership` runs unprepared.

use super::client::Client;
use super::schema::{BOUNDED_DEAD_LETTERS_VERSION, TREND_VERSION};
use postgres::Statement;

/// First key of the advisory lock (two 32-bit key space) a commit holds on its job.
pub(super) const COMMIT_LOCK_CLASS: i32 = 0x686f_746c; // "hotl"

/// The job's commit lock ([`COMMIT_LOCK_CLASS`], the job), held until the transaction ends.
pub(super) const LOCK_JOB: &str = "SELECT pg_advisory_xact_lock($1::int4, hashtext($2::text))";

/// The job's owner (`hotlist_jobs`): its generation and owner.
pub(super) const SELECT_OWNER: &str = "SELECT generation, owner FROM hotlist_jobs WHERE job = $1";

const SELECT_EPOCH: &str = "SELECT epoch FROM hotlist_commits WHERE job = $1";

const SELECT_EPOCH_FOR_UPDATE: &str = "SELECT epoch FROM hotlist_commits WHERE job = $1 FOR UPDATE";

/// Deletes the rows of every list given as (window_name, window_start, group_key) arrays.
const DELETE_ROWS: &str = "
DELETE FROM topk t
USING unnest($2::text[], $3::timestamptz[], $4::text[]) AS d(window_name, window_start, group_key)
WHERE t.job = $1::text AND t.window_name = d.window_name AND t.window_start = d.window_start
  AND t.group_key = d.group_key";

const UPSERT_INSTANCES: &str = "
INSERT INTO topk_instances
    (job, window_name, window_start, window_end, revision, state, final, watermark, as_of, item_count,
     exact, error_bound, sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount, group_key,
     certificate_threshold, certificate_counted, certificate_passes)
SELECT $1::text, * FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[], $5::int8[], $6::text[],
                               $7::bool[], $8::timestamptz[], $9::timestamptz[], $10::int8[],
                               $11::bool[], $12::int8[], $13::int8[], $14::int8[], $15::int8[], $16::int8[],
                               $17::text[], $18::int8[], $19::int8[], $20::int8[])
ON CONFLICT (job, window_name, group_key, window_start) DO UPDATE SET
    window_end = excluded.window_end, revision = excluded.revision, state = excluded.state,
    final = excluded.final, watermark = excluded.watermark, as_of = excluded.as_of,
    item_count = excluded.item_count, exact = excluded.exact, error_bound = excluded.error_bound,
    sketch_found = excluded.sketch_found, sketch_of = excluded.sketch_of,
    sketch_max_overcount = excluded.sketch_max_overcount, sketch_total_overcount = excluded.sketch_total_overcount,
    certificate_threshold = excluded.certificate_threshold, certificate_counted = excluded.certificate_counted,
    certificate_passes = excluded.certificate_passes";

/// Inserts the rows of every list given as arrays (the trend columns NULL on a count-ranked
/// list's rows).
pub(super) const INSERT_ROWS: &str = "
INSERT INTO topk
    (job, window_name, window_start, window_end, revision, final, state, as_of, exact, error_bound,
     rank, item_id, count, group_key, baseline, score, history)
SELECT $1::text, * FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[], $5::int8[], $6::bool[],
                               $7::text[], $8::timestamptz[], $9::bool[], $10::int8[], $11::int8[],
                               $12::text[], $13::int8[], $14::text[], $15::int8[], $16::float8[], $17::text[])";

/// Appends dead letters in array order (ids are assigned in that order).
const INSERT_DEAD_LETTERS: &str = "
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at)
SELECT $1::text, d.source, d.partition, d.position, d.reason, d.detail, d.raw, $2::int8, $3::timestamptz
FROM unnest($4::text[], $5::int8[], $6::int8[], $7::text[], $8::text[], $9::bytea[])
     WITH ORDINALITY AS d(source, partition, position, reason, detail, raw, ord)
ORDER BY d.ord";

const UPSERT_COMMIT: &str = "
INSERT INTO hotlist_commits (job, epoch, watermark, committed_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (job) DO UPDATE SET
    epoch = excluded.epoch, watermark = excluded.watermark, committed_at = excluded.committed_at";

const DELETE_WINDOWS: &str = "DELETE FROM hotlist_windows WHERE job = $1";

const INSERT_WINDOW: &str =
    "INSERT INTO hotlist_windows (job, name, size_ms, slide_ms, k, ord, by_dims) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// At most `$2` window rows (one more than a job may have).
const SELECT_WINDOWS: &str =
    "SELECT name, size_ms, slide_ms, k, by_dims FROM hotlist_windows WHERE job = $1 ORDER BY ord LIMIT $2";

/// The `k` of one window.
const SELECT_WINDOW_K: &str = "SELECT k FROM hotlist_windows WHERE job = $1 AND name = $2";

/// The header of group `$3`'s list with the greatest start: one backward scan of the
/// `topk_instances` primary key.
pub(super) const SELECT_LATEST_HEADER: &str = "
SELECT window_start, window_end, revision, state, watermark, as_of, item_count,
       exact, error_bound, sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount,
       certificate_threshold, certificate_counted, certificate_passes
FROM topk_instances
WHERE job = $1 AND window_name = $2 AND group_key = $3 ORDER BY window_start DESC LIMIT 1";

/// The header of group `$4`'s list starting at `$3`: one lookup in the `topk_instances`
/// primary key.
pub(super) const SELECT_HEADER_AT: &str = "
SELECT window_start, window_end, revision, state, watermark, as_of, item_count,
       exact, error_bound, sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount,
       certificate_threshold, certificate_counted, certificate_passes
FROM topk_instances
WHERE job = $1 AND window_name = $2 AND window_start = $3 AND group_key = $4";

/// At most `$4` of a list's rows (group `$5`) with their trend columns: one range scan of the
/// `topk` primary key.
pub(super) const SELECT_ROWS: &str = "
SELECT rank, item_id, count, revision, exact, error_bound, baseline, score, history FROM topk
WHERE job = $1 AND window_name = $2 AND group_key = $5 AND window_start = $3 ORDER BY rank LIMIT $4";

/// [`SELECT_ROWS`] on a schema older than `TREND_VERSION` (no trend columns: every list
/// count-ranked), run unprepared by a reader of such a schema.
pub(super) const SELECT_ROWS_BEFORE_TRENDS: &str = "
SELECT rank, item_id, count, revision, exact, error_bound, NULL::int8, NULL::float8, NULL::text FROM topk
WHERE job = $1 AND window_name = $2 AND group_key = $5 AND window_start = $3 ORDER BY rank LIMIT $4";

/// The greatest start of the window's lists.
const SELECT_LATEST_START: &str = "SELECT MAX(window_start) FROM topk_instances WHERE job = $1 AND window_name = $2";

/// At most `$4` groups of the window's instance starting at `$3`, in key order.
const SELECT_GROUPS: &str = "
SELECT group_key FROM topk_instances
WHERE job = $1 AND window_name = $2 AND window_start = $3 ORDER BY group_key LIMIT $4";

const SELECT_INSTANCES: &str = "
SELECT window_start, revision, state FROM topk_instances
WHERE job = $1 AND window_name = $2 ORDER BY window_start";

pub(super) const SELECT_DEAD_LETTERS: &str = "
SELECT source, partition, position, reason, detail, raw, count, last_position FROM dead_letters
WHERE job = $1 ORDER BY id DESC LIMIT $2";

/// [`SELECT_DEAD_LETTERS`] on a schema older than `BOUNDED_DEAD_LETTERS_VERSION` (no counts:
/// every row one whole letter), run unprepared by a reader of such a schema.
pub(super) const SELECT_DEAD_LETTERS_BEFORE_COUNTS: &str = "
SELECT source, partition, position, reason, detail, raw, 1::int8, NULL::int8 FROM dead_letters
WHERE job = $1 ORDER BY id DESC LIMIT $2";

pub(super) const SELECT_DEAD_LETTER_COUNTS: &str =
    "SELECT reason, SUM(count)::int8 FROM dead_letters WHERE job = $1 GROUP BY reason ORDER BY reason";

/// [`SELECT_DEAD_LETTER_COUNTS`] on a schema older than `BOUNDED_DEAD_LETTERS_VERSION`.
pub(super) const SELECT_DEAD_LETTER_COUNTS_BEFORE_COUNTS: &str =
    "SELECT reason, COUNT(*)::int8 FROM dead_letters WHERE job = $1 GROUP BY reason ORDER BY reason";

/// Per (source, block), the dead letters stored; `$2` is the block size.
pub(super) const SELECT_DEAD_LETTER_BLOCKS: &str = "
SELECT source, position / $2::int8, SUM(count)::int8 FROM dead_letters WHERE job = $1 GROUP BY 1, 2";

/// Adds to the summary row of a (source, reason, block): `$6..=$7` are the block's positions.
pub(super) const UPDATE_SUMMARY: &str = "
UPDATE dead_letters SET count = count + $4, position = LEAST(position, $5), last_position = GREATEST(last_position, $8),
    epoch = $9, recorded_at = $10
WHERE job = $1 AND source = $2 AND reason = $3 AND last_position IS NOT NULL AND position BETWEEN $6 AND $7";

/// A block's first summary row.
pub(super) const INSERT_SUMMARY: &str = "
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at, count, last_position)
VALUES ($1, $2, $3, $4, $5, $6, ''::bytea, $7, $8, $9, $10)";

const SELECT_LAST_COMMIT: &str = "SELECT epoch, watermark FROM hotlist_commits WHERE job = $1";

/// The connection's prepared statements.
pub(super) struct Statements {
    pub(super) lock_job: Statement,
    pub(super) select_epoch: Statement,
    pub(super) select_epoch_for_update: Statement,
    pub(super) delete_rows: Statement,
    pub(super) upsert_instances: Statement,
    /// [`INSERT_ROWS`], prepared on a schema that has the trend columns (`None` for a reader
    /// of an older one, which cannot prepare it: such a handle runs the text, should it commit).
    pub(super) insert_rows: Option<Statement>,
    pub(super) insert_dead_letters: Statement,
    /// [`UPDATE_SUMMARY`], [`INSERT_SUMMARY`] and [`SELECT_DEAD_LETTER_BLOCKS`], prepared on a
    /// schema that has the dead-letter counts (`None` for a reader of an older one, which
    /// cannot prepare them: such a handle runs the text, should it commit).
    pub(super) update_summary: Option<Statement>,
    pub(super) insert_summary: Option<Statement>,
    pub(super) select_dead_letter_blocks: Option<Statement>,
    pub(super) upsert_commit: Statement,
    pub(super) delete_windows: Statement,
    pub(super) insert_window: Statement,
    pub(super) select_windows: Statement,
    pub(super) select_window_k: Statement,
    pub(super) select_latest_header: Statement,
    pub(super) select_header_at: Statement,
    /// [`SELECT_ROWS`], prepared on a schema that has the trend columns (`None` for a reader
    /// of an older one: it reads the version with each list and runs the matching text).
    pub(super) select_rows: Option<Statement>,
    pub(super) select_latest_start: Statement,
    pub(super) select_groups: Statement,
    pub(super) select_instances: Statement,
    /// [`SELECT_DEAD_LETTERS`] and [`SELECT_DEAD_LETTER_COUNTS`], prepared on a schema that has
    /// the dead-letter counts (`None` for a reader of an older one: it reads the version and
    /// runs the matching text).
    pub(super) select_dead_letters: Option<Statement>,
    pub(super) select_dead_letter_counts: Option<Statement>,
    pub(super) select_last_commit: Statement,
    pub(super) select_owner: Statement,
}

impl Statements {
    /// Prepares the statements on a schema of version `version` (this build's for the job; a
    /// reader's may be older).
    pub(super) fn prepare(client: &mut Client, version: i64) -> Result<Statements, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        let (insert_rows, select_rows) = if version >= TREND_VERSION {
            (Some(p(INSERT_ROWS)?), Some(p(SELECT_ROWS)?))
        } else {
            (None, None)
        };
        let counted = [
            UPDATE_SUMMARY,
            INSERT_SUMMARY,
            SELECT_DEAD_LETTER_BLOCKS,
            SELECT_DEAD_LETTERS,
            SELECT_DEAD_LETTER_COUNTS,
        ];
        let [update_summary, insert_summary, select_dead_letter_blocks, select_dead_letters, select_dead_letter_counts] =
            match version >= BOUNDED_DEAD_LETTERS_VERSION {
                true => counted.map(|sql| p(sql).map(Some)),
                false => counted.map(|_| Ok(None)),
            };
        Ok(Statements {
            lock_job: p(LOCK_JOB)?,
            select_epoch: p(SELECT_EPOCH)?,
            select_epoch_for_update: p(SELECT_EPOCH_FOR_UPDATE)?,
            delete_rows: p(DELETE_ROWS)?,
            upsert_instances: p(UPSERT_INSTANCES)?,
            insert_rows,
            insert_dead_letters: p(INSERT_DEAD_LETTERS)?,
            update_summary: update_summary?,
            insert_summary: insert_summary?,
            select_dead_letter_blocks: select_dead_letter_blocks?,
            upsert_commit: p(UPSERT_COMMIT)?,
            delete_windows: p(DELETE_WINDOWS)?,
            insert_window: p(INSERT_WINDOW)?,
            select_windows: p(SELECT_WINDOWS)?,
            select_window_k: p(SELECT_WINDOW_K)?,
            select_latest_header: p(SELECT_LATEST_HEADER)?,
            select_header_at: p(SELECT_HEADER_AT)?,
            select_rows,
            select_latest_start: p(SELECT_LATEST_START)?,
            select_groups: p(SELECT_GROUPS)?,
            select_instances: p(SELECT_INSTANCES)?,
            select_dead_letters: select_dead_letters?,
            select_dead_letter_counts: select_dead_letter_counts?,
            select_last_commit: p(SELECT_LAST_COMMIT)?,
            select_owner: p(SELECT_OWNER)?,
        })
    }
}

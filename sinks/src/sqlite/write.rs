//! Writing to SQLite: `prepare` records a job's windows, `commit` writes a batch in one
//! `IMMEDIATE` transaction (skipped when its epoch is already committed).

use super::ownership::read_owner;
use super::{sql_err, SqliteStore};
use crate::error::SinkError;
use crate::ownership::Claim;
use crate::sql_rows::non_negative;
use crate::store::{DeadLetterBlocks, SinkStore};
use crate::types::{latest_revisions, CommitBatch};
use crate::write_checks::{check_batch, check_prepare};
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::sync::LazyLock;

const UPSERT_INSTANCE: &str = "
INSERT INTO topk_instances
    (job, window_name, window_start, window_end, revision, state, final, watermark, as_of, item_count,
     exact, error_bound, sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount, group_key,
     certificate_threshold, certificate_counted, certificate_passes)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
ON CONFLICT (job, window_name, group_key, window_start) DO UPDATE SET
    window_end = excluded.window_end, revision = excluded.revision, state = excluded.state,
    final = excluded.final, watermark = excluded.watermark, as_of = excluded.as_of,
    item_count = excluded.item_count, exact = excluded.exact, error_bound = excluded.error_bound,
    sketch_found = excluded.sketch_found, sketch_of = excluded.sketch_of,
    sketch_max_overcount = excluded.sketch_max_overcount, sketch_total_overcount = excluded.sketch_total_overcount,
    certificate_threshold = excluded.certificate_threshold, certificate_counted = excluded.certificate_counted,
    certificate_passes = excluded.certificate_passes";

/// Rows per multi-row insert statement: binding 6 values per row instead of 16 and stepping
/// one statement per chunk roughly doubles the write rate for large lists.
const ROWS_PER_INSERT: usize = 64;

/// The list's columns every row of an `INSERT INTO topk` binds first, as ?1..?11.
const ROW_INSTANCE_COLUMNS: usize = 11;

/// The columns each row binds: rank, item_id, count, baseline, score, history.
const ROW_COLUMNS: usize = 6;

/// `INSERT INTO topk` of `n` ranks of one list: ?1..?11 are the list's columns, then
/// (rank, item_id, count, baseline, score, history) per row.
fn insert_rows_sql(n: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO topk (job, window_name, window_start, window_end, revision, final, state,
                           as_of, exact, error_bound, group_key, rank, item_id, count, baseline, score, history)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, column1, column2, column3, column4, column5, column6
         FROM (VALUES ",
    );
    for i in 0..n {
        let b = ROW_INSTANCE_COLUMNS + 1 + ROW_COLUMNS * i;
        if i > 0 {
            sql.push_str(", ");
        }
        let params: Vec<String> = (b..b + ROW_COLUMNS).map(|p| format!("?{p}")).collect();
        sql.push_str(&format!("({})", params.join(", ")));
    }
    sql.push(')');
    sql
}

/// Chunk sizes, largest first: a list is written in as few statements as possible.
const CHUNKS: [usize; 3] = [ROWS_PER_INSERT, 8, 1];

static INSERT_ROWS_SQL: LazyLock<[String; 3]> = LazyLock::new(|| CHUNKS.map(insert_rows_sql));

const DELETE_ROWS: &str =
    "DELETE FROM topk WHERE job = ?1 AND window_name = ?2 AND window_start = ?3 AND group_key = ?4";

const INSERT_DEAD_LETTER: &str = "
INSERT INTO dead_letters (job, source, partition, position, reason, detail, raw, epoch, recorded_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

const UPSERT_COMMIT: &str = "
INSERT INTO hotlist_commits (job, epoch, watermark, committed_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (job) DO UPDATE SET
    epoch = excluded.epoch, watermark = excluded.watermark, committed_at = excluded.committed_at";

const SELECT_EPOCH: &str = "SELECT epoch FROM hotlist_commits WHERE job = ?1";

/// Binds (rank, item_id, count, baseline, score, history) at parameters `first` to
/// `first + 5` (the last three NULL on a count-ranked list's row).
fn bind_row(stmt: &mut rusqlite::Statement<'_>, first: usize, rank: i64, item: &RankedItem) -> rusqlite::Result<()> {
    stmt.raw_bind_parameter(first, rank)?;
    stmt.raw_bind_parameter(first + 1, item.item_id.as_str())?;
    // `check_batch` has verified the count and the baseline fit an i64.
    stmt.raw_bind_parameter(first + 2, item.count as i64)?;
    let trend = crate::sql_rows::trend_columns(item);
    stmt.raw_bind_parameter(first + 3, trend.as_ref().map(|t| t.0))?;
    stmt.raw_bind_parameter(first + 4, trend.as_ref().map(|t| t.1))?;
    stmt.raw_bind_parameter(first + 5, trend.map(|t| t.2))
}

/// Writes a checked batch inside the commit transaction.
fn write_batch(tx: &Connection, batch: &CommitBatch, now: Millis) -> rusqlite::Result<()> {
    let job = batch.job.as_str();
    // `check_batch` has verified the epoch fits an i64.
    let epoch = batch.epoch as i64;
    for l in latest_revisions(&batch.lists) {
        write_list(tx, job, l)?;
    }
    for w in &batch.hot_keys {
        super::hot_keys::write_hot_window(tx, job, w)?;
    }
    super::ranges::write_ranges(tx, job, &batch.ranges)?;
    let mut dead = tx.prepare_cached(INSERT_DEAD_LETTER)?;
    for d in &batch.dead_letters {
        if d.is_summary() {
            super::summaries::write_summary(tx, job, d, epoch, now)?;
            continue;
        }
        dead.execute(params![
            job,
            d.source,
            d.letter.partition.0,
            d.letter.position as i64,
            d.letter.reason.as_str(),
            d.letter.detail,
            d.letter.raw,
            epoch,
            now.0
        ])?;
    }
    tx.prepare_cached(UPSERT_COMMIT)?
        .execute(params![job, epoch, batch.watermark.0, now.0])?;
    Ok(())
}

/// Writes one instance's list: upserts its header and replaces its rows (the previous
/// revision's rows go, all of this revision's rows come in).
fn write_list(tx: &Connection, job: &str, l: &PublishedList) -> rusqlite::Result<()> {
    let state = l.state.as_str();
    let is_final = i64::from(l.state == ListState::Final);
    // `check_batch` has verified every u64 below fits an i64 (error bounds, over-counts, the
    // certificate's threshold and count).
    let (exact, error_bound) = (i64::from(l.exact), l.error_bound as i64);
    let check = l.sketch_check;
    let certificate = l.certificate;
    tx.prepare_cached(UPSERT_INSTANCE)?.execute(params![
        job,
        l.window,
        l.start.0,
        l.end.0,
        l.revision,
        state,
        is_final,
        l.watermark.0,
        l.as_of.0,
        l.items.len() as i64,
        exact,
        error_bound,
        check.map(|c| c.found),
        check.map(|c| c.of),
        check.map(|c| c.max_overcount as i64),
        check.map(|c| c.total_overcount as i64),
        l.group.as_str(),
        certificate.map(|c| c.threshold as i64),
        certificate.map(|c| c.counted as i64),
        certificate.map(|c| c.passes)
    ])?;
    tx.prepare_cached(DELETE_ROWS)?
        .execute(params![job, l.window, l.start.0, l.group.as_str()])?;
    let mut rest = l.items.as_slice();
    let mut rank = 0i64;
    for (size, sql) in CHUNKS.iter().zip(INSERT_ROWS_SQL.iter()) {
        if rest.len() < *size {
            continue;
        }
        let mut stmt = tx.prepare_cached(sql)?;
        stmt.raw_bind_parameter(1, job)?;
        stmt.raw_bind_parameter(2, &l.window)?;
        stmt.raw_bind_parameter(3, l.start.0)?;
        stmt.raw_bind_parameter(4, l.end.0)?;
        stmt.raw_bind_parameter(5, l.revision)?;
        stmt.raw_bind_parameter(6, is_final)?;
        stmt.raw_bind_parameter(7, state)?;
        stmt.raw_bind_parameter(8, l.as_of.0)?;
        stmt.raw_bind_parameter(9, exact)?;
        stmt.raw_bind_parameter(10, error_bound)?;
        stmt.raw_bind_parameter(11, l.group.as_str())?;
        while rest.len() >= *size {
            let (chunk, tail) = rest.split_at(*size);
            for (i, item) in chunk.iter().enumerate() {
                rank += 1;
                bind_row(&mut stmt, ROW_INSTANCE_COLUMNS + 1 + ROW_COLUMNS * i, rank, item)?;
            }
            stmt.raw_execute()?;
            rest = tail;
        }
    }
    Ok(())
}

impl SinkStore for SqliteStore {
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
        self.writable("prepare a job")?;
        check_prepare(job, windows)?;
        self.ensure_schema()?;
        let path = self.path.as_path();
        let op = || format!("recording the windows of job {job:?}");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, op()))?;
        (|| -> rusqlite::Result<()> {
            tx.prepare_cached("DELETE FROM hotlist_windows WHERE job = ?1")?
                .execute(params![job])?;
            let mut insert = tx.prepare_cached(
                "INSERT INTO hotlist_windows (job, name, size_ms, slide_ms, k, ord, by_dims)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for (ord, w) in windows.iter().enumerate() {
                // `check_prepare` has verified k fits; spans are at most i64::MAX.
                insert.execute(params![
                    job,
                    w.name,
                    w.size.as_i64(),
                    w.slide.as_i64(),
                    w.k as i64,
                    ord as i64,
                    crate::sql_rows::join_dims(&w.key.by)
                ])?;
            }
            Ok(())
        })()
        .map_err(sql_err(path, op()))?;
        tx.commit().map_err(sql_err(path, op()))
    }

    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError> {
        self.writable("commit a batch")?;
        check_batch(batch)?;
        let path = self.path.as_path();
        let op = || format!("commit of job {:?} epoch {}", batch.job, batch.epoch);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(path, op()))?;
        // a stale writer (another run claimed the job since) writes nothing
        self.claims
            .check(&batch.job, read_owner(&tx, path, &batch.job)?.map(|o| o.generation))?;
        let committed: Option<i64> = tx
            .prepare_cached(SELECT_EPOCH)
            .and_then(|mut s| s.query_row(params![batch.job], |r| r.get(0)).optional())
            .map_err(sql_err(path, op()))?;
        if let Some(c) = committed {
            if non_negative(path, c, "committed epoch")? >= batch.epoch {
                return Ok(false); // dropping `tx` rolls back the (empty) transaction
            }
        }
        write_batch(&tx, batch, Millis::now()).map_err(sql_err(path, op()))?;
        crate::crash_point::crash_point("sink.commit");
        tx.commit().map_err(sql_err(path, op()))?;
        Ok(true)
    }

    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError> {
        let path = self.path.as_path();
        let epoch: Option<i64> = self
            .conn
            .prepare_cached(SELECT_EPOCH)
            .and_then(|mut s| s.query_row(params![job], |r| r.get(0)).optional())
            .map_err(sql_err(path, format!("reading the committed epoch of job {job:?}")))?;
        epoch.map(|e| non_negative(path, e, "committed epoch")).transpose()
    }

    fn lock(&mut self, job: &str) -> Result<(), SinkError> {
        self.lock_job(job)
    }

    fn claim(&mut self, job: &str, owner: &str) -> Result<Claim, SinkError> {
        self.claim_job(job, owner)
    }

    fn reset(&mut self, job: &str) -> Result<(), SinkError> {
        self.reset_job(job)
    }

    fn dead_letter_blocks(&mut self, job: &str) -> Result<DeadLetterBlocks, SinkError> {
        self.stored_dead_letter_blocks(job)
    }
}

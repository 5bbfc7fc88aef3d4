//! Writing to Redis: `prepare` stores the windows document, `commit` runs the commit script
//! (`commit.lua`) once per batch with each window's latest list.

use super::encode::{check_list, windows_json};
use super::error::TAKEN_OVER_CODE;
use super::keys::check_key_part;
use super::trend::{self, RANK_BY_TREND};
use super::RedisStore;
use crate::error::{Retry, SinkError};
use crate::ownership::Claim;
use crate::store::{SinkStore, StoreReader};
use crate::types::{latest_revisions, CommitBatch};
use crate::write_checks::{check_batch, check_prepare};
use ::redis::Script;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::ListState;
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use std::collections::HashMap;
use std::sync::LazyLock;

/// The commit script; see the module documentation for what it does and `commit.lua` for its
/// keys and arguments.
pub(super) static COMMIT_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    let script = include_str!("commit.lua").replace(
        "local RANGES_KEPT = 10000",
        &format!("local RANGES_KEPT = {}", super::ranges::RANGES_KEPT),
    );
    Script::new(&script)
});

impl SinkStore for RedisStore {
    /// Records the job's windows in `{prefix}:{job}:windows` (replacing a previous definition).
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
        check_prepare(job, windows)?;
        check_key_part(job, "job id", job)?;
        for w in windows {
            check_key_part(job, "window name", &w.name)?;
        }
        let key = self.windows_key(job);
        let json = windows_json(windows);
        self.run(
            || format!("recording the windows of job {job:?}"),
            |c| ::redis::cmd("SET").arg(&key).arg(&json).exec(c),
        )
    }

    /// Commits the batch with one Lua script: see the module documentation.
    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError> {
        check_batch(batch)?;
        let job = batch.job.as_str();
        check_key_part(job, "job id", job)?;
        for l in &batch.lists {
            check_list(job, l)?;
        }
        let chosen = latest_per_window(&batch.lists);
        let ranges = RedisStore::ranges_args(job, &batch.ranges)?;
        let ours = self.claims.of(job);
        let mut call = COMMIT_SCRIPT.prepare_invoke();
        call.key(self.commit_key(job))
            .key(self.owner_key(job))
            .arg(batch.epoch)
            .arg(batch.watermark.0)
            .arg(Millis::now().0)
            .arg(chosen.len() as u64)
            .arg(ours.map(|g| g.to_string()).unwrap_or_default());
        for l in &chosen {
            call.key(self.group_list_key(job, &l.window, &l.group))
                .key(self.group_meta_key(job, &l.window, &l.group))
                .key(self.groups_key(job, &l.window))
                .key(self.group_trend_key(job, &l.window, &l.group))
                .arg(l.window.as_str())
                .arg(l.start.0)
                .arg(l.end.0)
                .arg(l.revision)
                .arg(l.state.as_str())
                .arg(i64::from(l.state == ListState::Final))
                .arg(l.as_of.0)
                .arg(l.watermark.0)
                .arg(i64::from(l.exact))
                .arg(l.error_bound);
            match l.sketch_check {
                Some(c) => call.arg(c.found).arg(c.of).arg(c.max_overcount).arg(c.total_overcount),
                None => call.arg("").arg("").arg("").arg(""),
            };
            call.arg(l.items.len() as u64).arg(l.group.as_str());
            match l.certificate {
                Some(c) => call.arg(c.threshold).arg(c.counted).arg(c.passes),
                None => call.arg("").arg("").arg(""),
            };
            // `check_list` has verified the list is all of one kind.
            let records: Vec<String> = l.items.iter().filter_map(trend::record).collect();
            call.arg(if records.is_empty() { "" } else { RANK_BY_TREND });
            for item in &l.items {
                call.arg(item.count).arg(item.item_id.as_str());
            }
            for r in &records {
                call.arg(r.as_str());
            }
        }
        call.key(self.hot_key(job));
        for a in RedisStore::hot_args(&batch.hot_keys) {
            call.arg(a);
        }
        self.ranges_call(&mut call, job, &ranges);
        let op = || format!("commit of job {job:?} epoch {}", batch.epoch);
        // Ok(Err(generation)): the script found the job claimed by another run
        let done: Result<i64, u64> = self.run(op, |c| match call.invoke::<i64>(c) {
            Err(e) if e.code() == Some(TAKEN_OVER_CODE) => {
                Ok(Err(e.detail().and_then(|d| d.trim().parse().ok()).unwrap_or(0)))
            }
            other => other.map(Ok),
        })?;
        match done {
            Err(current) => Err(SinkError::TakenOver {
                job: job.to_string(),
                ours: ours.unwrap_or(0),
                current,
            }),
            Ok(1) => Ok(true),
            Ok(0) => Ok(false),
            Ok(other) => Err(SinkError::Redis {
                url: self.url.clone(),
                op: op(),
                cause: format!("CLIENT the commit script returned {other}, expected 0 or 1"),
                retry: Retry::Permanent,
            }),
        }
    }

    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError> {
        Ok(self.last_commit(job)?.map(|(epoch, _)| epoch))
    }

    /// Redis has no liveness lock: the generation alone fences a second run.
    fn lock(&mut self, job: &str) -> Result<(), SinkError> {
        check_key_part(job, "job id", job)
    }

    fn claim(&mut self, job: &str, owner: &str) -> Result<Claim, SinkError> {
        self.claim_job(job, owner)
    }

    fn reset(&mut self, job: &str) -> Result<(), SinkError> {
        self.reset_job(job)
    }
}

/// Per window and group, the highest revision of the instance with the greatest start (in
/// order of first appearance): the lists the commit may write.
fn latest_per_window(lists: &[PublishedList]) -> Vec<&PublishedList> {
    let mut chosen: Vec<&PublishedList> = Vec::new();
    let mut slot: HashMap<(&str, &str), usize> = HashMap::new();
    for l in latest_revisions(lists) {
        match slot.get(&(l.window.as_str(), l.group.as_str())) {
            Some(&i) => {
                if l.start > chosen[i].start {
                    chosen[i] = l;
                }
            }
            None => {
                slot.insert((l.window.as_str(), l.group.as_str()), chosen.len());
                chosen.push(l);
            }
        }
    }
    chosen
}

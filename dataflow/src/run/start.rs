//! Starting a run: who owns the job, where the run resumes, and when it refuses to start
//! (docs/exactly-once.md, "Restore"; docs/operations.md, "Restart after a crash").
//!
//! The process that writes the sink (process 0, or the only one) **owns the job** for the run's
//! lifetime: it locks the job's checkpoint directory (`LOCK`) and the store
//! (`SinkStore::lock`), so a second live run of the job refuses to start, and claims the job
//! (`SinkStore::claim`: a new generation, which every commit checks, so a stale writer stops).
//! With `--from-scratch` it then moves the job's checkpoints aside and deletes its stored
//! results, and the run reads its input from the beginning.
//!
//! Otherwise it resumes from the store's committed epoch `C` and the checkpoints on disk, and
//! never deletes a checkpoint because the store looks empty:
//!
//! | store | checkpoints | the run |
//! | --- | --- | --- |
//! | commit `C` | a usable one at or below `C` | removes those above `C` (never committed), restores the newest usable one |
//! | commit `C` | none usable | refuses: restore the directory, or `--from-scratch` |
//! | no commit | none, or only ones this store's last owner wrote and never committed | removes those, starts from the beginning |
//! | no commit | others (committed elsewhere: another store?) | refuses, touching nothing: fix the sink, or `--from-scratch` |
//!
//! Other processes of a cluster only read: the same restore, removing nothing (with no commit
//! they start from the beginning; if process 0 refuses, the cluster does not form).

use super::open_store;
use crate::checkpoint::{self, JobLayout, PositionKind, Restored, RunFacts};
use crate::config::{JobPlan, SourcePlan};
use anyhow::{bail, Context, Result};
use hotlist_sinks::file_lock::FileLock;
use hotlist_sinks::{Owner, SinkStore};

/// A run ready to start.
pub struct Start {
    /// The store, prepared (and on process 0 locked and claimed).
    pub store: Box<dyn SinkStore>,
    /// Added to timely epochs: the store's committed epoch + 1 (0 without a commit).
    pub epoch_base: u64,
    /// The checkpoint to resume from.
    pub restore: Option<Restored>,
    /// What the writer records in each checkpoint's manifest (process 0, with checkpoints).
    pub facts: Option<RunFacts>,
    /// The job directory's lock, held for the run's lifetime (process 0, with checkpoints).
    pub dir_lock: Option<FileLock>,
    /// Per (source, block of positions), the dead letters the store has: where the cap on
    /// whole dead letters per block resumes (empty unless this process writes the sink).
    pub dead_letter_blocks: hotlist_sinks::DeadLetterBlocks,
}

/// Opens the store and decides where the run starts (see the module documentation).
pub fn start(plan: &JobPlan) -> Result<Start> {
    let owns = plan.writes_the_sink();
    let job = plan.job_id.as_str();
    let dir_lock = match (&plan.checkpoint, owns) {
        (Some(cp), true) => Some(checkpoint::lock_job_dir(&cp.dir, job)?),
        _ => None,
    };
    let mut store = open_store(&plan.sink)?;
    let mut previous = None;
    let mut facts = None;
    if owns {
        store.lock(job)?;
        let owner = format!("run-{:016x}-pid{}", rand::random::<u64>(), std::process::id());
        let claim = store.claim(job, &owner).context("cannot claim the job in the sink")?;
        previous = claim.previous;
        facts = plan.checkpoint.as_ref().map(|_| RunFacts {
            job: job.to_string(),
            workers: plan.total_workers(),
            layout: JobLayout::of(plan),
            owner,
            generation: claim.generation,
        });
        if plan.from_scratch {
            start_over(plan, store.as_mut())?;
        }
    }
    store
        .prepare(job, &plan.window_specs())
        .context("cannot prepare the sink")?;
    let committed = store
        .committed_epoch(job)
        .context("cannot read the sink's committed epoch")?;
    // the store is the truth: what it holds per block (after a reset: nothing) is what the
    // commits so far, of this run's checkpoint and before, have counted
    let dead_letter_blocks = if owns {
        store
            .dead_letter_blocks(job)
            .context("cannot read the sink's dead letters per block")?
    } else {
        Vec::new()
    };
    // checkpoints in object storage: the bucket's committed ones join the local directory
    // (every process: each needs them whole before it decides where to resume)
    if let (Some(cp), Some(c), false) = (&plan.checkpoint, committed, plan.from_scratch) {
        download_remote(cp, job, c)?;
    }
    let restore = if plan.from_scratch {
        None // (the other processes may read the commit before process 0 deleted it)
    } else {
        resume_point(plan, committed, previous.as_ref(), owns)?
    };
    Ok(Start {
        store,
        epoch_base: if plan.from_scratch {
            0
        } else {
            committed.map_or(0, |e| e + 1)
        },
        restore,
        facts,
        dir_lock,
        dead_letter_blocks,
    })
}

/// With `checkpoint.dir = "s3://…"`: downloads the job's checkpoints up to the committed one
/// that the local directory lacks (a fresh machine restores from the bucket).
fn download_remote(cp: &crate::config::CheckpointPlan, job: &str, committed: u64) -> Result<()> {
    let Some(target) = &cp.remote else { return Ok(()) };
    let remote = checkpoint::remote::Remote::connect(target)?;
    let got = remote.download(&cp.dir, job, committed)?;
    if !got.is_empty() {
        tracing::info!(
            "downloaded {} checkpoint(s) of job {job:?} from {} into {} (newest {})",
            got.len(),
            remote.url(),
            checkpoint::job_dir(&cp.dir, job).display(),
            got.iter().max().copied().unwrap_or_default()
        );
    }
    Ok(())
}

/// `--from-scratch`: moves the job's checkpoints aside and deletes its stored results, and
/// says so.
fn start_over(plan: &JobPlan, store: &mut dyn SinkStore) -> Result<()> {
    let job = plan.job_id.as_str();
    let moved = match &plan.checkpoint {
        Some(cp) => checkpoint::move_aside(&cp.dir, job)?.map(|to| to.display().to_string()),
        None => None,
    };
    let moved_remote = match plan.checkpoint.as_ref().and_then(|cp| cp.remote.as_ref()) {
        Some(t) => checkpoint::remote::Remote::connect(t)?.move_aside(job)?,
        None => None,
    };
    store.reset(job).context("cannot delete the job's stored results")?;
    let checkpoints = match moved.into_iter().chain(moved_remote).collect::<Vec<_>>() {
        to if to.is_empty() => String::new(),
        to => format!("; its checkpoints were moved to {}", to.join(" and ")),
    };
    tracing::warn!(
        "starting job {job:?} from scratch (--from-scratch): its stored lists, dead letters and commit were \
         deleted{checkpoints}; the input is read from its beginning"
    );
    Ok(())
}

/// How the plan's source positions relate to its dead letters' positions.
fn position_kind(plan: &JobPlan) -> PositionKind {
    match plan.source {
        SourcePlan::Kafka { .. } => PositionKind::NextOffset,
        _ => PositionKind::RecordsRead,
    }
}

/// The checkpoint to resume from (see the table in the module documentation); `owns`: this
/// process may remove never-committed checkpoints.
fn resume_point(
    plan: &JobPlan,
    committed: Option<u64>,
    previous: Option<&Owner>,
    owns: bool,
) -> Result<Option<Restored>> {
    let Some(cp) = &plan.checkpoint else { return Ok(None) };
    let job = plan.job_id.as_str();
    let Some(c) = committed else {
        if plan.from_checkpoint.is_some() {
            bail!("--from-checkpoint: job {job:?} has no committed checkpoint");
        }
        if owns {
            without_a_commit(plan, previous)?;
        }
        return Ok(None);
    };
    if owns {
        let never: Vec<u64> = checkpoint::list(&cp.dir, job).into_iter().filter(|e| *e > c).collect();
        checkpoint::remove_never_committed(&cp.dir, job, &never);
    }
    let layout = JobLayout::of(plan);
    let restored = checkpoint::restore(&cp.dir, job, c, plan.from_checkpoint, &layout, position_kind(plan))?;
    match restored {
        Some(r) => {
            tracing::info!(
                "restoring checkpoint {} ({} counter file(s)) for job {job:?}",
                r.epoch,
                r.counters.len()
            );
            Ok(Some(r))
        }
        None => bail!(
            "job {job:?} has committed epoch {c} in the store, but no usable checkpoint in {} (see the lines above): \
             restore the checkpoint directory, or start the job over with --from-scratch (deletes its stored \
             results and reads the input from its beginning)",
            checkpoint::job_dir(&cp.dir, job).display()
        ),
    }
}

/// The store has no commit for the job: removes the checkpoints that were certainly never
/// committed (no manifest, or one written by the store's last owner of the job), and refuses
/// if any other is left (committed in another store, most likely: a wrong sink setting).
fn without_a_commit(plan: &JobPlan, previous: Option<&Owner>) -> Result<()> {
    let Some(cp) = &plan.checkpoint else { return Ok(()) };
    let job = plan.job_id.as_str();
    let (mut never, mut foreign) = (Vec::new(), Vec::new());
    for e in checkpoint::list(&cp.dir, job) {
        let dir = checkpoint::checkpoint_dir(&cp.dir, job, e);
        let uncommitted = match checkpoint::Manifest::read(&dir) {
            Ok(m) => previous.is_some_and(|p| p.owner == m.owner),
            Err(_) => !dir.join(checkpoint::MANIFEST).exists(),
        };
        if uncommitted {
            never.push(e);
        } else {
            foreign.push(e);
        }
    }
    if let Some(newest) = foreign.first() {
        bail!(
            "the store has no commit for job {job:?}, but {} holds {} of its checkpoints (newest: {newest}) that were \
             committed elsewhere: is the sink setting (sink.path / sink.url / sink.schema) the job's store? Point it \
             at the right store, or start the job over with --from-scratch (moves the checkpoints aside and reads \
             the input from its beginning)",
            checkpoint::job_dir(&cp.dir, job).display(),
            foreign.len()
        );
    }
    checkpoint::remove_never_committed(&cp.dir, job, &never);
    Ok(())
}

//! `hotlist verify --restore`: the restore drill. A checkpoint that cannot restore, or restores
//! to other results, should be found on a schedule, not on the day it is needed.
//!
//! 1. Copies a committed checkpoint (default: the oldest retained one at or below the store's
//!    committed epoch — the one a fallback would use, and the one with the most results after
//!    it to compare; `--checkpoint EPOCH` picks another) into a scratch directory; from a
//!    bucket (`s3://`) it is downloaded there.
//! 2. Makes a scratch SQLite store whose committed epoch is that checkpoint's, and a scratch
//!    config: the job's, with that store, that checkpoint directory, in one process.
//! 3. Runs the job from it (`hotlist run --bounded`, a child process) to the current end of
//!    the input.
//! 4. Compares every list the run sealed with the live store's final list of the same
//!    instance and group (items, counts, order; whether it is exact): a list the live store
//!    has not sealed yet is left out.
//!
//! Read only on the live store and checkpoints: safe beside the running job.

use anyhow::{anyhow, bail, Context, Result};
use hotlist_dataflow::checkpoint::{self, checkpoint_dir};
use hotlist_dataflow::config::JobPlan;
use hotlist_operators::time::Millis;
use hotlist_sinks::{CommitBatch, SinkStore, SqliteStore, StoreReader, StoredList};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the drill found: lists compared, and the first differing rank of each that differs.
pub(crate) struct Drill {
    /// The checkpoint restored.
    pub(crate) epoch: u64,
    /// Lists the run sealed that the live store has sealed too, compared.
    pub(crate) compared: u64,
    /// (window, start, group, the first difference) of each list that differs.
    pub(crate) differing: Vec<(String, Millis, String, String)>,
}

/// Runs the drill for `plan` (read from `config`) in `scratch`, restoring `epoch` (default:
/// the oldest retained committed checkpoint). `Err`: the checkpoint could not be had or did not
/// restore and run (the drill failed).
pub(crate) fn drill(plan: &JobPlan, config: &Path, scratch: &Path, epoch: Option<u64>) -> Result<Drill> {
    if plan.checkpoint.is_none() {
        bail!("--restore: the config has no [checkpoint] section");
    }
    let job = plan.job_id.as_str();
    let mut live = crate::serve::opener(&plan.sink)?()?;
    let (committed, _) = live
        .last_commit(job)?
        .ok_or_else(|| anyhow!("--restore: job {job:?} has committed nothing yet"))?;
    let ckpt = scratch.join("checkpoints");
    let epoch = copy_checkpoint(plan, &ckpt, committed, epoch)?;
    let db = scratch.join("drill.db");
    scratch_store(&db, plan, epoch)?;
    let drill_config = scratch.join("drill.toml");
    write_config(config, &drill_config, &db, &ckpt)?;
    run_from(&drill_config, plan.workers)?;
    compare(live.as_mut(), &db, plan, epoch)
}

/// Copies (or downloads) checkpoint `epoch` — by default the oldest usable one at or below
/// `committed` — into `into`; returns its epoch.
fn copy_checkpoint(plan: &JobPlan, into: &Path, committed: u64, epoch: Option<u64>) -> Result<u64> {
    let cp = plan
        .checkpoint
        .as_ref()
        .ok_or_else(|| anyhow!("no [checkpoint] section"))?;
    let job = plan.job_id.as_str();
    if let Some(remote) = &cp.remote {
        let remote = hotlist_dataflow::checkpoint::remote::Remote::connect(remote)?;
        remote.download(into, job, committed)?;
        let epochs = checkpoint::list(into, job);
        return pick(&epochs, committed, epoch);
    }
    let epochs = checkpoint::list(&cp.dir, job);
    let e = pick(&epochs, committed, epoch)?;
    let from = checkpoint_dir(&cp.dir, job, e);
    let to = checkpoint_dir(into, job, e);
    std::fs::create_dir_all(&to).with_context(|| format!("cannot create {}", to.display()))?;
    for f in std::fs::read_dir(&from).with_context(|| format!("cannot read {}", from.display()))? {
        let f = f.with_context(|| format!("cannot read {}", from.display()))?;
        if f.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::copy(f.path(), to.join(f.file_name()))
                .with_context(|| format!("cannot copy {}", f.path().display()))?;
        }
    }
    Ok(e)
}

/// The checkpoint to restore among `epochs`: `wanted`, or the oldest at or below `committed`.
fn pick(epochs: &[u64], committed: u64, wanted: Option<u64>) -> Result<u64> {
    let committed_ones: Vec<u64> = epochs.iter().copied().filter(|e| *e <= committed).collect();
    match wanted {
        Some(e) if committed_ones.contains(&e) => Ok(e),
        Some(e) => bail!("--checkpoint {e}: no committed checkpoint {e} (committed ones: {committed_ones:?})"),
        None => committed_ones
            .iter()
            .min()
            .copied()
            .ok_or_else(|| anyhow!("--restore: no committed checkpoint at or below epoch {committed}")),
    }
}

/// A scratch SQLite store for the job whose committed epoch is `epoch`: the run restores that
/// checkpoint and goes on from it.
fn scratch_store(db: &Path, plan: &JobPlan, epoch: u64) -> Result<()> {
    let job = plan.job_id.as_str();
    let mut s = SqliteStore::open(db)?;
    s.lock(job)?;
    s.claim(job, "hotlist-verify-restore")?;
    s.prepare(job, &plan.window_specs())?;
    s.commit(&CommitBatch {
        job: job.to_string(),
        epoch,
        watermark: Millis::MIN,
        ..CommitBatch::default()
    })?;
    Ok(())
}

/// The job's config with the scratch store (no Redis fan-out) and checkpoint directory, in one
/// process.
fn write_config(config: &Path, to: &Path, db: &Path, ckpt: &Path) -> Result<()> {
    let text = std::fs::read_to_string(config).with_context(|| format!("cannot read {}", config.display()))?;
    let mut t: toml::Table = text.parse().with_context(|| format!("{}", config.display()))?;
    let path_of = |p: &Path| toml::Value::String(p.display().to_string());
    let mut sink = toml::Table::new();
    sink.insert("kind".into(), "sqlite".into());
    sink.insert("path".into(), path_of(db));
    t.insert("sink".into(), sink.into());
    let mut checkpoint = match t.remove("checkpoint") {
        Some(toml::Value::Table(c)) => c,
        _ => toml::Table::new(),
    };
    checkpoint.insert("dir".into(), path_of(ckpt));
    // the run's own checkpoints are scratch too: only keep what the drill needs
    checkpoint.remove("s3");
    checkpoint.remove("local_dir");
    t.insert("checkpoint".into(), checkpoint.into());
    // one process: the drill restores onto any worker count
    if let Some(toml::Value::Table(run)) = t.get_mut("run") {
        for key in ["processes", "process", "hostfile", "connect_timeout"] {
            run.remove(key);
        }
    }
    std::fs::write(to, toml::to_string(&t)?).with_context(|| format!("cannot write {}", to.display()))
}

/// Runs the job from the scratch config to the end of its input; `Err` with the run's last
/// error line.
fn run_from(config: &Path, workers: usize) -> Result<()> {
    let me = std::env::current_exe().context("cannot find the hotlist binary")?;
    let out = Command::new(me)
        .args(["run", "--config"])
        .arg(config)
        .args(["--bounded", "--progress", "never", "--workers"])
        .arg(workers.to_string())
        .output()
        .context("cannot start the drill's run")?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = stderr
        .lines()
        .rev()
        .find(|l| l.contains("error"))
        .unwrap_or("")
        .trim()
        .to_string();
    bail!("the run from the checkpoint failed: {why}")
}

/// Compares the drill's final lists with the live store's.
fn compare(live: &mut dyn StoreReader, db: &Path, plan: &JobPlan, epoch: u64) -> Result<Drill> {
    let job = plan.job_id.as_str();
    let drilled = SqliteStore::open_read_only(db)?;
    let mut out = Drill {
        epoch,
        compared: 0,
        differing: Vec::new(),
    };
    for spec in plan.window_specs() {
        for (start, group) in drilled.final_lists(job, &spec.name)? {
            let Some(theirs) = live.instance_of(job, &spec.name, &group, start)? else {
                continue;
            };
            if theirs.state != hotlist_operators::record::ListState::Final {
                continue;
            }
            let ours = drilled
                .instance_of(job, &spec.name, &group, start)?
                .ok_or_else(|| anyhow!("the drill's store lost window {} instance {start}", spec.name))?;
            out.compared += 1;
            if let Some(why) = differs(&theirs, &ours) {
                out.differing
                    .push((spec.name.clone(), start, group.as_str().to_string(), why));
            }
        }
    }
    Ok(out)
}

/// How the live list differs from the drill's, if it does.
fn differs(live: &StoredList, drilled: &StoredList) -> Option<String> {
    let rows = |l: &StoredList| -> Vec<(String, u64)> {
        l.items
            .iter()
            .map(|r| (r.item_id.as_str().to_string(), r.count))
            .collect()
    };
    if let Some(d) = hotlist_operators::verify::first_difference(&rows(live), &rows(drilled)) {
        let entry = |e: &Option<(String, u64)>| e.as_ref().map_or("nothing".into(), |(i, c)| format!("{i} ({c})"));
        return Some(format!(
            "rank {} is {} in the store, {} after the restore",
            d.rank,
            entry(&d.stored),
            entry(&d.recounted)
        ));
    }
    (live.exact != drilled.exact || live.error_bound != drilled.error_bound).then(|| {
        format!(
            "exact {} (error bound {}) in the store, exact {} (error bound {}) after the restore",
            live.exact, live.error_bound, drilled.exact, drilled.error_bound
        )
    })
}

/// Where the drill works: `--scratch DIR`, or a temporary directory removed afterwards.
pub(crate) fn scratch_dir(given: Option<&PathBuf>) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    match given {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            if std::fs::read_dir(d)?.next().is_some() {
                bail!(
                    "--scratch {}: not empty (the drill needs a directory of its own)",
                    d.display()
                );
            }
            Ok((d.clone(), None))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("hotlist-restore-drill-")
                .tempdir()
                .context("cannot create a scratch directory")?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

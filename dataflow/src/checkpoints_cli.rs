//! `hotlist checkpoints list | show EPOCH | verify [EPOCH]`: the on-call engineer's view of a
//! job's checkpoints (which exist, what they hold, whether they restore).

use crate::checkpoint::{self, checkpoint_dir};
use crate::config;
use anyhow::{anyhow, bail, Result};
use hotlist_operators::snapshot::CounterSnapshot;
use std::path::PathBuf;

/// Arguments of `hotlist checkpoints`.
#[derive(clap::Args, Debug)]
pub struct CheckpointsArgs {
    #[command(subcommand)]
    command: Sub,
    /// The job's config (its [checkpoint] dir and job id).
    #[arg(long, short, global = true, default_value = "configs/local.toml")]
    config: PathBuf,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Checkpoints on disk, newest first, with their manifests.
    List,
    /// One checkpoint's manifest, files and state size.
    Show {
        /// The checkpoint (its epoch, as `list` shows).
        epoch: u64,
    },
    /// Decode and checksum every file of one checkpoint (default: all); exit 1 if any is bad.
    Verify {
        /// The checkpoint to verify.
        epoch: Option<u64>,
    },
}

/// Runs the subcommand.
pub fn checkpoints(args: &CheckpointsArgs) -> Result<()> {
    let plan = config::load(&args.config, &config::Overrides::default())?;
    let cp = plan
        .checkpoint
        .ok_or_else(|| anyhow!("the config has no [checkpoint] section"))?;
    let job = plan.job_id;
    match &args.command {
        Sub::List => {
            let epochs = checkpoint::list(&cp.dir, &job);
            if epochs.is_empty() {
                println!("no checkpoints for job {job:?} in {}", cp.dir.display());
            }
            for e in epochs {
                let dir = checkpoint_dir(&cp.dir, &job, e);
                let manifest = std::fs::read(dir.join("MANIFEST")).ok();
                let size: u64 = std::fs::read_dir(&dir)
                    .map(|rd| rd.filter_map(|f| f.ok()?.metadata().ok()).map(|m| m.len()).sum())
                    .unwrap_or(0);
                let note = match manifest.and_then(|m| serde_json::from_slice::<serde_json::Value>(&m).ok()) {
                    Some(m) => format!(
                        "committed at {}",
                        hotlist_operators::time::Millis(m["committed_at"].as_i64().unwrap_or(0))
                    ),
                    None => "no manifest (not committed, or crashed before the manifest)".into(),
                };
                println!("{e:>10}  {:>10} bytes  {note}", size);
            }
        }
        Sub::Show { epoch } => {
            let dir = checkpoint_dir(&cp.dir, &job, *epoch);
            if !dir.exists() {
                bail!("no checkpoint {epoch} in {}", cp.dir.display());
            }
            if let Ok(m) = std::fs::read_to_string(dir.join("MANIFEST")) {
                println!("{m}");
            }
            let r = checkpoint::load(&dir, *epoch)?;
            let summary = |c: &CounterSnapshot| {
                let counters: usize = c.key_groups.iter().flat_map(|k| &k.panes).map(|p| p.items.len()).sum();
                (c.key_groups.len(), counters)
            };
            for (i, c) in r.counters.iter().enumerate() {
                let (groups, counters) = summary(c);
                println!(
                    "counter file {i}: watermark {}, {groups} key groups, {counters} (item, pane) counters",
                    c.watermark
                );
            }
            println!("merger: {} live window instances", r.merger.instances.len());
            for p in &r.sources.partitions {
                println!(
                    "partition {}: position {}, max event time {}, {:?}",
                    p.partition.0, p.position, p.max_ts, p.status
                );
            }
        }
        Sub::Verify { epoch } => {
            let epochs = match epoch {
                Some(e) => vec![*e],
                None => checkpoint::list(&cp.dir, &job),
            };
            let mut bad = 0;
            for e in epochs {
                match checkpoint::load(&checkpoint_dir(&cp.dir, &job, e), e) {
                    Ok(_) => println!("{e}: ok"),
                    Err(err) => {
                        bad += 1;
                        println!("{e}: BAD: {err:#}");
                    }
                }
            }
            if bad > 0 {
                bail!("{bad} checkpoint(s) failed verification");
            }
        }
    }
    Ok(())
}

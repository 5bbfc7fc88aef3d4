//! `hotlist checkpoints list | show EPOCH | verify [EPOCH]`: the on-call engineer's view of a
//! job's checkpoints (which exist, what they hold, whether they restore into the config's job:
//! `verify` runs the same checks as a restore — manifest, checksums, validation).

use anyhow::{anyhow, bail, Result};
use hotlist_dataflow::checkpoint::{self, checkpoint_dir, JobLayout, Manifest};
use hotlist_dataflow::config;
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
    /// Check one checkpoint (default: all) as a restore would: its manifest, every file's size
    /// and checksum, its contents against the config's windows; exit 1 if any is bad.
    Verify {
        /// The checkpoint to verify.
        epoch: Option<u64>,
    },
}

/// The job's checkpoints as the config names them.
struct Checkpoints {
    base: PathBuf,
    job: String,
    layout: JobLayout,
}

/// Runs the subcommand.
pub fn checkpoints(args: &CheckpointsArgs) -> Result<()> {
    let plan = config::load(&args.config, &config::Overrides::default())?;
    let layout = JobLayout::of(&plan);
    let cp = plan
        .checkpoint
        .ok_or_else(|| anyhow!("the config has no [checkpoint] section"))?;
    if let Some(t) = &cp.remote {
        // the bucket's checkpoints, read through the local directory
        let remote = hotlist_dataflow::checkpoint::remote::Remote::connect(t)?;
        let got = remote.download(&cp.dir, &plan.job_id, u64::MAX)?;
        println!(
            "checkpoints in {} (downloaded {} into {})",
            remote.url(),
            got.len(),
            checkpoint::job_dir(&cp.dir, &plan.job_id).display()
        );
    }
    let c = Checkpoints {
        base: cp.dir,
        job: plan.job_id,
        layout,
    };
    match &args.command {
        Sub::List => c.list(),
        Sub::Show { epoch } => c.show(*epoch)?,
        Sub::Verify { epoch } => c.verify(*epoch)?,
    }
    Ok(())
}

impl Checkpoints {
    /// `list`: every checkpoint directory, newest first, with its size and manifest.
    fn list(&self) {
        let epochs = checkpoint::list(&self.base, &self.job);
        if epochs.is_empty() {
            println!("no checkpoints for job {:?} in {}", self.job, self.base.display());
        }
        for e in epochs {
            let dir = checkpoint_dir(&self.base, &self.job, e);
            let size: u64 = std::fs::read_dir(&dir)
                .map(|rd| rd.filter_map(|f| f.ok()?.metadata().ok()).map(|m| m.len()).sum())
                .unwrap_or(0);
            let note = match Manifest::read(&dir) {
                Ok(m) => format!(
                    "{} files, manifest written at {} (generation {})",
                    m.files.len(),
                    m.written_at,
                    m.generation
                ),
                Err(why) => format!("{why:#}"),
            };
            println!("{e:>10}  {size:>10} bytes  {note}");
        }
    }

    /// `show EPOCH`: its manifest, counters, merger and partition positions.
    fn show(&self, epoch: u64) -> Result<()> {
        let dir = checkpoint_dir(&self.base, &self.job, epoch);
        if !dir.exists() {
            bail!("no checkpoint {epoch} in {}", self.base.display());
        }
        let m = Manifest::read(&dir).map_err(|e| anyhow!("checkpoint {epoch}: {e:#}"))?;
        println!(
            "manifest: job {:?}, epoch {}, {} workers, {} files, watermark {}, written at {} by {} (generation {})",
            m.job,
            m.epoch,
            m.workers,
            m.files.len(),
            m.watermark,
            m.written_at,
            m.owner,
            m.generation
        );
        let r = checkpoint::load(&dir, epoch, &self.layout).map_err(|e| anyhow!("checkpoint {epoch}: {e}"))?;
        for (i, c) in r.counters.iter().enumerate() {
            let counters: usize = c.key_groups.iter().flat_map(|k| &k.panes).map(|p| p.items.len()).sum();
            println!(
                "counter file {i}: watermark {}, {} key groups, {counters} (item, pane) counters",
                c.watermark,
                c.key_groups.len()
            );
        }
        println!("merger: {} live window instances", r.merger.instances.len());
        for p in &r.sources.partitions {
            println!(
                "partition {}: position {}, max event time {}, {:?}",
                p.partition.0, p.position, p.max_ts, p.status
            );
        }
        Ok(())
    }

    /// `verify [EPOCH]`: each checkpoint checked as a restore would check it (all of them: those
    /// without a manifest, being written or never committed, are skipped).
    fn verify(&self, epoch: Option<u64>) -> Result<()> {
        let epochs = match epoch {
            Some(e) => vec![e],
            None => checkpoint::list(&self.base, &self.job),
        };
        let mut bad = 0;
        for e in epochs {
            let dir = checkpoint_dir(&self.base, &self.job, e);
            if epoch.is_none() && !dir.join(checkpoint::MANIFEST).exists() {
                println!("{e}: skipped: no MANIFEST (being written now, or never committed)");
                continue;
            }
            match checkpoint::load(&dir, e, &self.layout) {
                Ok(_) => println!("{e}: ok"),
                Err(err) => {
                    bad += 1;
                    println!("{e}: BAD: {err}");
                }
            }
        }
        if bad > 0 {
            bail!("{bad} checkpoint(s) failed verification");
        }
        Ok(())
    }
}

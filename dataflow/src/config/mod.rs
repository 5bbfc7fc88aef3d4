//! Configuration: raw TOML (with `--set` overrides) validated once into a trusted [`JobPlan`].
//!
//! Precedence: built-in defaults < the config file < `--set key=value` < dedicated flags
//! (`--workers`). Every key is checked (unknown keys are errors) and all problems carry the key
//! name, so a typo fails at start-up with one clear line instead of running with a default.
//!
//! Files: `raw` the file as written (serde structs, one per `[source]` kind); `validate` raw →
//! plan, a function per section (a window's counting mode and sketch: `counting`; its `by`,
//! `max_groups` and `count`: `keys`; its `rank_by`: `rank`; `[source.format]`: `format`; `job.id` and window names,
//! which become paths and keys: `names`; `[[udf]]` and the UDF uses: `udf`); `plan` the validated [`JobPlan`] the rest of the job
//! uses.

mod counting;
mod format;
mod keys;
mod names;
mod plan;
mod rank;
mod raw;
#[cfg(test)]
mod tests;
mod udf;
mod validate;

pub use counting::{DEFAULT_DELTA, DEFAULT_EPSILON, DEFAULT_MAX_ITEMS};
pub use format::{DimsAt, InputFormat};
pub use names::{check_name, MAX_NAME_LEN};
pub use plan::{
    split_turns, CheckpointPlan, ClusterPlan, FileRange, FileSplit, JobPlan, KafkaSpec, OnDataLoss, RedisTarget,
    S3Target, SinkPlan, SourcePlan, TimePlan, WindowPlan, DEFAULT_MAX_DEAD_LETTERS_PER_BLOCK,
    DEFAULT_MAX_EPOCH_RECORDS, DEFAULT_MAX_RECORD_BYTES, MAX_RECORD_BYTES_LIMIT, SPLIT_STRIPE_BYTES,
};
pub use validate::check_against_clock;

use anyhow::{anyhow, bail, Context, Result};
use raw::RawConfig;
use std::path::{Path, PathBuf};

/// Command-line overrides.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--set key=value` pairs, applied in order.
    pub set: Vec<String>,
    /// `--workers N`.
    pub workers: Option<usize>,
    /// `--processes N`.
    pub processes: Option<usize>,
    /// `--process I`.
    pub process: Option<usize>,
    /// `--hostfile F`.
    pub hostfile: Option<PathBuf>,
    /// `--from-checkpoint EPOCH`.
    pub from_checkpoint: Option<u64>,
    /// `--from-scratch`.
    pub from_scratch: bool,
    /// `--accept-udf-change`: restore a checkpoint although a UDF library changed since.
    pub accept_udf_change: bool,
}

impl Overrides {
    /// Only `--set` pairs (the subcommands that read a job's config without running it).
    pub fn with_set(set: &[String]) -> Overrides {
        Overrides {
            set: set.to_vec(),
            ..Overrides::default()
        }
    }
}

/// Reads, overrides and validates a config file.
pub fn load(path: &Path, overrides: &Overrides) -> Result<JobPlan> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    parse(&text, overrides).with_context(|| format!("config {}", path.display()))
}

/// Parses config text; relative paths in it are taken relative to the current directory
/// (like every other path a user types).
pub fn parse(text: &str, overrides: &Overrides) -> Result<JobPlan> {
    let mut table: toml::Table = toml::from_str(text).context("invalid TOML")?;
    for item in &overrides.set {
        apply_override(&mut table, item)?;
    }
    let raw: RawConfig = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| anyhow!("{}", e.message()))?;
    validate::validate(raw, overrides)
}

/// Sets `key.path = value` in the parsed file (a TOML value, or else the text as a string).
fn apply_override(table: &mut toml::Table, item: &str) -> Result<()> {
    let (key, value) = item
        .split_once('=')
        .ok_or_else(|| anyhow!("--set {item:?}: expected key=value"))?;
    let value = value.trim();
    let parsed: toml::Value = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(value.to_string())),
        Err(_) => toml::Value::String(value.to_string()),
    };
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        bail!("--set {item:?}: bad key");
    }
    let mut cur = table;
    for p in &parts[..parts.len() - 1] {
        let entry = cur
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = entry
            .as_table_mut()
            .ok_or_else(|| anyhow!("--set {item:?}: {p} is not a table"))?;
    }
    cur.insert(parts[parts.len() - 1].to_string(), parsed);
    Ok(())
}

//! A checkpoint's `MANIFEST`: every file of the checkpoint with its size and checksum, the
//! worker count and the job's window layout, and who wrote it.
//!
//! The writer thread writes it, atomically, **before** the sink commit of its epoch, once the
//! epoch's files are all durable (the sink hands a checkpoint over only after every worker's
//! write finished). So a committed checkpoint always has a complete manifest, and a checkpoint
//! that does not match its manifest — a file missing, truncated, replaced, or a counter part
//! absent — is unusable. Checksums come from each snapshot file's header (the envelope carries
//! the XXH3-64 of its payload, `operators/src/snapshot.rs`): writing and checking a manifest
//! reads 24 bytes per file, not the files (a checkpoint can be thousands of pane files).
//!
//! A manifest also records the run that wrote it (`owner`, `generation`: its claim in the store,
//! see `hotlist_sinks::ownership`), which tells a checkpoint the store's last owner wrote but
//! never committed from one committed elsewhere.

use super::write::write_atomic;
use super::JobLayout;
use anyhow::{anyhow, bail, Context, Result};
use hotlist_operators::snapshot::{read_header, HEADER_LEN};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

/// The manifest's file name in a checkpoint directory.
pub const MANIFEST: &str = "MANIFEST";

/// The manifest format this build writes and reads. (Format 1, written by earlier builds after
/// the commit, had no file list: such checkpoints are unusable.)
pub const MANIFEST_FORMAT: u32 = 2;

/// One checkpoint's manifest (JSON on disk).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`].
    pub format: u32,
    /// The job id.
    pub job: String,
    /// The checkpoint's (sink) epoch.
    pub epoch: u64,
    /// Workers over all processes: the checkpoint has `counter-0000.snap` up to this minus one.
    pub workers: usize,
    /// The windows the state was counted with.
    pub windows: Vec<WindowSpec>,
    /// How each window counted (absent in manifests of builds without sketch windows: all exact).
    #[serde(default)]
    pub counting: Vec<String>,
    /// The allowed lateness it was counted with.
    pub allowed_lateness: Span,
    /// The global watermark of the commit.
    pub watermark: Millis,
    /// The token of the run that wrote it (its claim in the store).
    pub owner: String,
    /// That claim's generation.
    pub generation: u64,
    /// When it was written (just before the commit).
    pub written_at: Millis,
    /// Every file of the checkpoint, by name.
    pub files: Vec<ManifestFile>,
    /// With `source.split`: each file and the size its ranges were cut from (absent: no split).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<(String, u64)>,
    /// With `source.split` of a file larger than its ranges' stripes: per file, the stripes
    /// each range reads in turns (absent: one each, contiguous ranges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split_turns: Vec<u64>,
    /// With `[[udf]]`: each UDF's name and its library's SHA-256 (absent: no UDF).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udfs: Vec<(String, String)>,
}

/// One file of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Its name in the checkpoint directory.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// The XXH3-64 of its payload (from its header), 16 hex digits.
    pub xxh3: String,
}

/// What the writer knows of its run for every manifest it writes.
#[derive(Clone, Debug)]
pub struct RunFacts {
    /// The job id.
    pub job: String,
    /// Workers over all processes.
    pub workers: usize,
    /// The job's windows and allowed lateness.
    pub layout: JobLayout,
    /// The run's token (its claim in the store).
    pub owner: String,
    /// The run's generation.
    pub generation: u64,
}

/// The name of worker `w`'s counter file.
pub fn counter_file(w: usize) -> String {
    format!("counter-{w:04}.snap")
}

/// Whether `name` is a snapshot file of a checkpoint (not a temp file, not the manifest, no
/// path).
fn is_snapshot_file(name: &str) -> bool {
    !name.contains(['/', '\\'])
        && name.ends_with(".snap")
        && (name.starts_with("counter-")
            || name.starts_with("pane-")
            || name.starts_with("sketch-")
            || name == "merger.snap"
            || name == "sources.snap"
            || name == "hotkeys.snap"
            || name == "replay.snap")
}

/// The size and header checksum of one file of a checkpoint.
fn describe(dir: &Path, name: &str) -> Result<ManifestFile> {
    let path = dir.join(name);
    let mut f = std::fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    let size = f
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len();
    let mut head = [0u8; HEADER_LEN];
    f.read_exact(&mut head)
        .map_err(|e| anyhow!("{name}: cannot read its header ({size} bytes): {e}"))?;
    let header = read_header(&head).map_err(|e| anyhow!("{name}: {e}"))?;
    if header.file_len() != size {
        bail!("{name}: {size} bytes, its header says {}", header.file_len());
    }
    Ok(ManifestFile {
        name: name.to_string(),
        size,
        xxh3: format!("{:016x}", header.checksum),
    })
}

/// Writes the manifest of the checkpoint in `dir` (epoch `epoch`, all its files durable):
/// lists its snapshot files, checks that every counter part, `merger.snap` and `sources.snap`
/// is there, and writes `MANIFEST` atomically.
pub fn write(dir: &Path, facts: &RunFacts, epoch: u64, watermark: Millis) -> Result<Manifest> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| is_snapshot_file(n))
        .collect();
    names.sort();
    let listed: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let sketches = if facts.layout.has_sketches() { facts.workers } else { 0 };
    let required = (0..facts.workers)
        .map(counter_file)
        .chain((0..sketches).map(super::sketch_file))
        .chain(["merger.snap".to_string(), "sources.snap".to_string()]);
    for name in required {
        if !listed.contains(name.as_str()) {
            bail!("checkpoint {} is incomplete: {name} is missing", dir.display());
        }
    }
    let files = names
        .iter()
        .map(|n| describe(dir, n))
        .collect::<Result<Vec<_>>>()
        .with_context(|| format!("checkpoint {}", dir.display()))?;
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        job: facts.job.clone(),
        epoch,
        workers: facts.workers,
        windows: facts.layout.windows.clone(),
        counting: facts.layout.counting.clone(),
        allowed_lateness: facts.layout.allowed_lateness,
        watermark,
        owner: facts.owner.clone(),
        generation: facts.generation,
        written_at: Millis::now(),
        files,
        split: facts.layout.split.clone(),
        split_turns: facts.layout.split_turns.clone(),
        udfs: facts.layout.udfs.clone(),
    };
    let mut text = serde_json::to_vec(&manifest).context("manifest")?;
    text.push(b'\n');
    write_atomic(&dir.join(MANIFEST), &text)?;
    Ok(manifest)
}

impl Manifest {
    /// Reads the manifest of the checkpoint in `dir`; an error says why there is none to use.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("it has no MANIFEST (it was never committed)")
            }
            Err(e) => return Err(anyhow!("cannot read {}: {e}", path.display())),
        };
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| anyhow!("MANIFEST is not JSON: {e}"))?;
        match value.get("format").and_then(serde_json::Value::as_u64) {
            None => bail!("its MANIFEST was written by an older hotlist (no file list)"),
            Some(f) if f != u64::from(MANIFEST_FORMAT) => {
                bail!("its MANIFEST has format {f}; this build reads format {MANIFEST_FORMAT}")
            }
            Some(_) => {}
        }
        serde_json::from_value(value).map_err(|e| anyhow!("MANIFEST does not parse: {e}"))
    }

    /// Checks the manifest against its directory `dir` (checkpoint `epoch`): the epoch, every
    /// counter part listed, every listed file present with its size and header checksum.
    /// Reads 24 bytes per file.
    pub fn check_files(&self, dir: &Path, epoch: u64) -> Result<()> {
        if self.epoch != epoch {
            bail!("its MANIFEST is for checkpoint {}", self.epoch);
        }
        let listed: BTreeSet<&str> = self.files.iter().map(|f| f.name.as_str()).collect();
        if listed.len() != self.files.len() {
            bail!("its MANIFEST lists a file twice");
        }
        for name in (0..self.workers).map(counter_file) {
            if !listed.contains(name.as_str()) {
                bail!("its MANIFEST does not list {name} (of {} workers)", self.workers);
            }
        }
        for want in &self.files {
            if !is_snapshot_file(&want.name) {
                bail!("its MANIFEST lists {:?}, not a checkpoint file", want.name);
            }
            let path = dir.join(&want.name);
            if !path.exists() {
                bail!("{}: missing (the MANIFEST lists it)", want.name);
            }
            let got = describe(dir, &want.name)?;
            if got.size != want.size {
                bail!("{}: {} bytes, the MANIFEST says {}", want.name, got.size, want.size);
            }
            if got.xxh3 != want.xxh3 {
                bail!("{}: checksum {}, the MANIFEST says {}", want.name, got.xxh3, want.xxh3);
            }
        }
        Ok(())
    }

    /// Whether the state was counted with this job's windows, counting and allowed lateness.
    pub fn fits(&self, layout: &JobLayout) -> bool {
        let counting_fits = match self.counting.is_empty() {
            true => !layout.has_sketches(),
            false => self.counting == layout.counting,
        };
        self.windows == layout.windows && counting_fits && self.allowed_lateness == layout.allowed_lateness
    }

    /// Whether the manifest lists `name`.
    pub fn lists(&self, name: &str) -> bool {
        self.files.iter().any(|f| f.name == name)
    }
}

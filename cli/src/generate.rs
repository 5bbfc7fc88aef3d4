//! `hotlist generate`: the configured generator's records as JSON-lines files.

use anyhow::{bail, Context, Result};
use hotlist_dataflow::config::{self, SourcePlan};
use hotlist_dataflow::generator::{GeneratorSpec, GeneratorTables, PartitionStream};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Arguments of `hotlist generate`.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// A config whose [source] is a generator (its seed, items, zipf, partitions, rate, …).
    #[arg(long, short, default_value = "configs/local.toml")]
    pub config: PathBuf,
    /// Override a config key, e.g. --set source.events=100000 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Directory to write part-NNNN.jsonl files into (created if missing).
    #[arg(long, short)]
    pub out: PathBuf,
}

/// Writes one JSON-lines file per generator partition.
pub fn generate(args: &GenerateArgs) -> Result<()> {
    let plan = config::load(&args.config, &config::Overrides::with_set(&args.set))?;
    let SourcePlan::Generator { spec, .. } = &plan.source else {
        bail!("generate needs [source] kind = \"generator\"");
    };
    if spec.events.is_none() {
        bail!("generate needs a bounded generator: set source.events (e.g. --set source.events=100000)");
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let written = write_partitions(spec, &args.out, "part")?;
    let total = written.records;
    println!(
        "wrote {total} records in {} file(s) to {}",
        spec.partitions,
        args.out.display()
    );
    Ok(())
}

/// What [`write_partitions`] wrote.
pub struct Written {
    /// The files, one per partition, in partition order.
    pub paths: Vec<PathBuf>,
    /// Records (lines) over all files.
    pub records: u64,
    /// Bytes over all files.
    pub bytes: u64,
}

/// Writes each generator partition of `spec` as `<prefix>-NNNN.jsonl` in `dir` (which exists).
pub fn write_partitions(spec: &GeneratorSpec, dir: &Path, prefix: &str) -> Result<Written> {
    let tables = Arc::new(GeneratorTables::new(spec).map_err(anyhow::Error::msg)?);
    let mut out = Written {
        paths: Vec::new(),
        records: 0,
        bytes: 0,
    };
    for p in 0..spec.partitions {
        let path = dir.join(format!("{prefix}-{p:04}.jsonl"));
        let file = std::fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let mut stream = PartitionStream::new(spec, tables.clone(), p);
        let mut line = Vec::new();
        while {
            line.clear();
            stream.next_line(&mut line)
        } {
            line.push(b'\n');
            w.write_all(&line)
                .with_context(|| format!("writing {}", path.display()))?;
            out.records += 1;
            out.bytes += line.len() as u64;
        }
        w.flush().with_context(|| format!("writing {}", path.display()))?;
        out.paths.push(path);
    }
    Ok(out)
}

//! Configuration: raw TOML (with `--set` overrides) validated once into a trusted [`JobPlan`].
//!
//! Precedence: built-in defaults < the config file < `--set key=value` < dedicated flags
//! (`--workers`). Every key is checked (unknown keys are errors) and all problems carry the key
//! name, so a typo fails at start-up with one clear line instead of running with a default.

use crate::source::generator_model::GeneratorSpec;
use anyhow::{anyhow, bail, Context, Result};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::{default_windows, validate_all, WindowSpec};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The whole file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    job: RawJob,
    source: Option<RawSource>,
    #[serde(default)]
    time: RawTime,
    #[serde(default)]
    window: Vec<RawWindow>,
    #[serde(default)]
    sink: RawSink,
    checkpoint: Option<RawCheckpoint>,
    #[serde(default)]
    run: RawRun,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    /// Job id: results are stored under it, so two jobs can share a store.
    id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    /// "file" | "generator" | "kafka".
    kind: String,
    /// file: a path or a glob; each file is one partition; "-" = stdin.
    path: Option<String>,
    // generator knobs
    seed: Option<u64>,
    items: Option<u32>,
    zipf: Option<f64>,
    partitions: Option<u32>,
    events: Option<u64>,
    rate: Option<u64>,
    /// "now" (default) or an RFC 3339 time / integer milliseconds.
    start: Option<toml::Value>,
    jitter: Option<String>,
    late_fraction: Option<f64>,
    late_by: Option<String>,
    bad_fraction: Option<f64>,
    /// Pace the generator to the wall clock (event time advances `rate` events/s per partition).
    pace: Option<bool>,
    // kafka keys (issue 3): accepted so the stable keys parse, rejected at validation.
    brokers: Option<String>,
    topic: Option<String>,
    group_id: Option<String>,
    bounded: Option<bool>,
    /// kafka: start at the first message (per partition) whose timestamp is at or after this
    /// time (RFC 3339 or milliseconds); default: the earliest offset.
    start_time: Option<toml::Value>,
    options: Option<toml::Table>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTime {
    max_out_of_orderness: Option<String>,
    allowed_lateness: Option<String>,
    idle_timeout: Option<String>,
    emit_interval: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWindow {
    name: String,
    size: String,
    slide: Option<String>,
    k: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    /// "sqlite" | "postgres" | "redis".
    kind: Option<String>,
    /// sqlite: the database file.
    path: Option<String>,
    /// postgres / redis: the server URL.
    url: Option<String>,
    /// postgres: the schema to use (default "public").
    schema: Option<String>,
    /// redis: key prefix (default "hotlist").
    prefix: Option<String>,
    /// Also write each window's latest list to this Redis (serving fan-out).
    redis_url: Option<String>,
    /// Key prefix for the fan-out (default "hotlist").
    redis_prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheckpoint {
    /// Where checkpoint directories go (one per committed checkpoint, under the job id).
    dir: Option<String>,
    /// How often to checkpoint (rounded to whole epochs). Results are committed at checkpoints.
    interval: Option<String>,
    /// How many checkpoints to keep.
    retain: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    /// Timely worker threads.
    workers: Option<usize>,
    /// How often sources close an epoch (the unit of progress, watermarks and commits).
    epoch_interval: Option<String>,
    /// Sources wait when more than this many epochs are in flight (backpressure).
    max_epochs_in_flight: Option<u64>,
    /// Records a source reads per activation (over all its partitions).
    batch_size: Option<usize>,
    /// Processes in the cluster (default 1). Each runs `workers` threads.
    processes: Option<usize>,
    /// This process's index, 0-based.
    process: Option<usize>,
    /// File with one `host:port` per line, in process order (required with processes > 1).
    hostfile: Option<String>,
    /// How long a cluster process waits for all its peers to connect before it gives up.
    connect_timeout: Option<String>,
}

/// Where events come from.
#[derive(Clone, Debug)]
pub enum SourcePlan {
    /// JSON-lines files, one partition each (sorted by path).
    Files(Vec<PathBuf>),
    /// JSON lines on standard input: one partition.
    Stdin,
    /// A Kafka topic: partition `p` is input partition `p`.
    Kafka {
        /// Connection settings.
        spec: crate::source::kafka::KafkaSpec,
        /// The topic's partition count (asked from the broker when the run starts).
        partitions: u32,
    },
    /// The deterministic generator.
    Generator {
        /// Its settings.
        spec: GeneratorSpec,
        /// Pace to the wall clock instead of running as fast as possible.
        pace: bool,
    },
}

impl SourcePlan {
    /// Number of input partitions.
    pub fn partitions(&self) -> u32 {
        match self {
            SourcePlan::Files(paths) => paths.len() as u32,
            SourcePlan::Stdin => 1,
            SourcePlan::Generator { spec, .. } => spec.partitions,
            SourcePlan::Kafka { partitions, .. } => *partitions,
        }
    }

    /// A short description of a partition, stored with its dead letters.
    pub fn partition_name(&self, p: u32) -> String {
        match self {
            SourcePlan::Files(paths) => format!("file:{}", paths[p as usize].display()),
            SourcePlan::Stdin => "stdin".to_string(),
            SourcePlan::Generator { .. } => format!("generator:{p}"),
            SourcePlan::Kafka { spec, .. } => format!("kafka:{}/{p}", spec.topic),
        }
    }
}

/// Where results go.
#[derive(Clone, Debug)]
pub enum SinkPlan {
    /// The embedded SQLite file.
    Sqlite(PathBuf),
    /// PostgreSQL.
    Postgres {
        /// Connection URL.
        url: String,
        /// Schema (default "public").
        schema: String,
    },
    /// Redis (latest lists only: no history, no dead letters).
    Redis(RedisTarget),
    /// An in-memory store (tests and benchmarks).
    Memory(hotlist_sinks::MemoryStore),
}

/// Checkpoint settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointPlan {
    /// Base directory; checkpoints live in `dir/<job>/<epoch>/`.
    pub dir: PathBuf,
    /// Checkpoint every this many epochs.
    pub every_epochs: u64,
    /// Checkpoints kept.
    pub retain: usize,
}

/// A Redis server and key prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisTarget {
    /// Connection URL.
    pub url: String,
    /// Key prefix.
    pub prefix: String,
}

/// Event-time settings.
#[derive(Clone, Copy, Debug)]
pub struct TimePlan {
    /// Partition watermark = max event time − this.
    pub max_out_of_orderness: Span,
    /// How long after a window's end late events are still accepted.
    pub allowed_lateness: Span,
    /// A partition without events for this long (wall clock) stops holding the watermark back.
    pub idle_timeout: Span,
    /// How often provisional lists of open windows are published (wall clock).
    pub emit_interval: Span,
}

/// A validated job.
#[derive(Clone, Debug)]
pub struct JobPlan {
    /// Job id.
    pub job_id: String,
    /// Input.
    pub source: SourcePlan,
    /// Windows, in configured order.
    pub windows: Vec<WindowSpec>,
    /// Event-time settings.
    pub time: TimePlan,
    /// Output.
    pub sink: SinkPlan,
    /// Also write latest lists to Redis (serving fan-out).
    pub fanout: Option<RedisTarget>,
    /// Checkpointing (exactly-once restarts), if configured.
    pub checkpoint: Option<CheckpointPlan>,
    /// Restore this checkpoint instead of the latest (`--from-checkpoint`).
    pub from_checkpoint: Option<u64>,
    /// Timely worker threads.
    pub workers: usize,
    /// Epoch length (wall clock).
    pub epoch_interval: Span,
    /// Backpressure bound.
    pub max_epochs_in_flight: u64,
    /// Records a source reads per activation.
    pub batch_size: usize,
    /// Multi-process settings (None: one process).
    pub cluster: Option<ClusterPlan>,
}

/// A cluster of processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterPlan {
    /// This process's index.
    pub process: usize,
    /// `host:port` of every process, in process order.
    pub addresses: Vec<String>,
    /// Give up (exit with an error) when the peers have not all connected within this.
    pub connect_timeout: Span,
}

impl JobPlan {
    /// Workers over all processes.
    pub fn total_workers(&self) -> usize {
        self.workers * self.cluster.as_ref().map_or(1, |c| c.addresses.len())
    }
}

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
    validate(raw, overrides)
}

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

fn span(key: &str, v: &Option<String>, default: &str) -> Result<Span> {
    Span::parse(v.as_deref().unwrap_or(default)).map_err(|e| anyhow!("{key}: {e}"))
}

fn fraction(key: &str, v: Option<f64>) -> Result<f64> {
    let f = v.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&f) {
        bail!("{key}: must be between 0 and 1, got {f}");
    }
    Ok(f)
}

fn validate(raw: RawConfig, overrides: &Overrides) -> Result<JobPlan> {
    let job_id = raw.job.id.unwrap_or_else(|| "hotlist".to_string());
    if job_id.is_empty() || job_id.len() > 128 {
        bail!("job.id: must be 1 to 128 characters");
    }
    let source = raw.source.ok_or_else(|| anyhow!("missing [source] section"))?;
    let source = validate_source(source)?;
    let time = TimePlan {
        max_out_of_orderness: span("time.max_out_of_orderness", &raw.time.max_out_of_orderness, "5s")?,
        allowed_lateness: span("time.allowed_lateness", &raw.time.allowed_lateness, "1m")?,
        idle_timeout: span("time.idle_timeout", &raw.time.idle_timeout, "30s")?,
        emit_interval: span("time.emit_interval", &raw.time.emit_interval, "1s")?,
    };
    if time.emit_interval == Span::ZERO {
        bail!("time.emit_interval: must be positive");
    }
    let windows = if raw.window.is_empty() {
        default_windows()
    } else {
        raw.window
            .iter()
            .map(|w| {
                let size = span(&format!("window {:?}: size", w.name), &Some(w.size.clone()), "")?;
                let slide = match &w.slide {
                    Some(s) => span(&format!("window {:?}: slide", w.name), &Some(s.clone()), "")?,
                    None => size,
                };
                Ok(WindowSpec {
                    name: w.name.clone(),
                    size,
                    slide,
                    k: w.k.unwrap_or(100),
                })
            })
            .collect::<Result<Vec<_>>>()?
    };
    validate_all(&windows).map_err(|e| anyhow!("{e}"))?;
    let sink = match raw.sink.kind.as_deref().unwrap_or("sqlite") {
        "sqlite" => SinkPlan::Sqlite(PathBuf::from(raw.sink.path.as_deref().unwrap_or("hotlist.db"))),
        "postgres" => SinkPlan::Postgres {
            url: raw
                .sink
                .url
                .clone()
                .ok_or_else(|| anyhow!("sink.url: required for kind = \"postgres\""))?,
            schema: raw.sink.schema.clone().unwrap_or_else(|| "public".into()),
        },
        "redis" => SinkPlan::Redis(RedisTarget {
            url: raw
                .sink
                .url
                .clone()
                .ok_or_else(|| anyhow!("sink.url: required for kind = \"redis\""))?,
            prefix: raw.sink.prefix.clone().unwrap_or_else(|| "hotlist".into()),
        }),
        "kafka" => bail!("sink.kind \"kafka\" is not available in this version"),
        other => bail!("sink.kind: unknown kind {other:?} (expected \"sqlite\", \"postgres\" or \"redis\")"),
    };
    let fanout = raw.sink.redis_url.clone().map(|url| RedisTarget {
        url,
        prefix: raw.sink.redis_prefix.clone().unwrap_or_else(|| "hotlist".into()),
    });
    if fanout.is_some() && matches!(sink, SinkPlan::Redis(_)) {
        bail!("sink.redis_url: the sink is Redis already");
    }
    let workers = overrides.workers.or(raw.run.workers).unwrap_or(1);
    if workers == 0 || workers > 256 {
        bail!("run.workers: must be between 1 and 256, got {workers}");
    }
    let epoch_interval = span("run.epoch_interval", &raw.run.epoch_interval, "100ms")?;
    if epoch_interval == Span::ZERO {
        bail!("run.epoch_interval: must be positive");
    }
    let max_epochs_in_flight = raw.run.max_epochs_in_flight.unwrap_or(4).max(1);
    let checkpoint = match &raw.checkpoint {
        None => None,
        Some(cp) => {
            let interval = span("checkpoint.interval", &cp.interval, "5s")?;
            if matches!(source, SourcePlan::Stdin) {
                bail!("[checkpoint]: standard input cannot be replayed, so it cannot be checkpointed");
            }
            if matches!(sink, SinkPlan::Redis(_)) {
                bail!("[checkpoint]: Redis keeps only latest lists; checkpoint into SQLite or PostgreSQL");
            }
            let retain = cp.retain.unwrap_or(5);
            if retain == 0 {
                bail!("checkpoint.retain: must be at least 1");
            }
            Some(CheckpointPlan {
                dir: PathBuf::from(cp.dir.as_deref().unwrap_or("checkpoints")),
                every_epochs: (interval.as_millis() / epoch_interval.as_millis().max(1)).max(1),
                retain,
            })
        }
    };
    let batch_size = raw.run.batch_size.unwrap_or(8192);
    let processes = overrides.processes.or(raw.run.processes).unwrap_or(1);
    let cluster = if processes <= 1 {
        None
    } else {
        let process = overrides
            .process
            .or(raw.run.process)
            .ok_or_else(|| anyhow!("run.process: required with {processes} processes (--process I)"))?;
        if process >= processes {
            bail!("run.process: {process} is not below run.processes ({processes})");
        }
        let hostfile = overrides
            .hostfile
            .clone()
            .or(raw.run.hostfile.as_ref().map(PathBuf::from))
            .ok_or_else(|| anyhow!("run.hostfile: required with {processes} processes (--hostfile F)"))?;
        let text = std::fs::read_to_string(&hostfile)
            .with_context(|| format!("run.hostfile: cannot read {}", hostfile.display()))?;
        let addresses: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(String::from)
            .collect();
        if addresses.len() != processes {
            bail!(
                "run.hostfile: {} lists {} addresses for {processes} processes",
                hostfile.display(),
                addresses.len()
            );
        }
        let connect_timeout = span("run.connect_timeout", &raw.run.connect_timeout, "60s")?;
        if connect_timeout == Span::ZERO {
            bail!("run.connect_timeout: must be positive");
        }
        Some(ClusterPlan {
            process,
            addresses,
            connect_timeout,
        })
    };
    if batch_size == 0 {
        bail!("run.batch_size: must be positive");
    }
    if overrides.from_checkpoint.is_some() && checkpoint.is_none() {
        bail!("--from-checkpoint needs a [checkpoint] section");
    }
    Ok(JobPlan {
        job_id,
        source,
        windows,
        time,
        sink,
        fanout,
        checkpoint,
        from_checkpoint: overrides.from_checkpoint,
        workers,
        epoch_interval,
        max_epochs_in_flight,
        batch_size,
        cluster,
    })
}

fn validate_source(s: RawSource) -> Result<SourcePlan> {
    let generator_keys = s.seed.is_some()
        || s.items.is_some()
        || s.zipf.is_some()
        || s.partitions.is_some()
        || s.events.is_some()
        || s.rate.is_some()
        || s.start.is_some()
        || s.jitter.is_some()
        || s.late_fraction.is_some()
        || s.late_by.is_some()
        || s.bad_fraction.is_some()
        || s.pace.is_some();
    let kafka_keys = s.brokers.is_some()
        || s.topic.is_some()
        || s.group_id.is_some()
        || s.options.is_some()
        || s.start_time.is_some();
    match s.kind.as_str() {
        "file" => {
            if generator_keys || kafka_keys {
                bail!("source: generator/kafka keys given for kind = \"file\"");
            }
            let _ = s.bounded;
            let path = s
                .path
                .ok_or_else(|| anyhow!("source.path: required for kind = \"file\""))?;
            if path == "-" {
                return Ok(SourcePlan::Stdin);
            }
            let mut paths: Vec<PathBuf> = glob::glob(&path)
                .with_context(|| format!("source.path: bad glob {path:?}"))?
                .collect::<std::result::Result<_, _>>()
                .with_context(|| format!("source.path: cannot list {path:?}"))?;
            paths.retain(|p| p.is_file());
            paths.sort();
            if paths.is_empty() {
                bail!("source.path: no file matches {path:?}");
            }
            Ok(SourcePlan::Files(paths))
        }
        "generator" => {
            if s.path.is_some() || kafka_keys {
                bail!("source: file/kafka keys given for kind = \"generator\"");
            }
            if s.bounded == Some(true) && s.events.is_none() {
                bail!("source.bounded: a generator ends after source.events events; set that");
            }
            let d = GeneratorSpec::default();
            let start = match &s.start {
                None => Millis::now(),
                Some(toml::Value::String(v)) if v == "now" => Millis::now(),
                Some(toml::Value::String(v)) => Millis::parse_user(v)
                    .ok_or_else(|| anyhow!("source.start: {v:?} is not \"now\", RFC 3339 or milliseconds"))?,
                Some(toml::Value::Integer(ms)) => Millis(*ms),
                Some(other) => bail!("source.start: expected a string or integer, got {other}"),
            };
            let spec = GeneratorSpec {
                seed: s.seed.unwrap_or(d.seed),
                items: s.items.unwrap_or(d.items),
                zipf: s.zipf.unwrap_or(d.zipf),
                partitions: s.partitions.unwrap_or(d.partitions),
                events: s.events,
                rate: s.rate.unwrap_or(d.rate),
                start,
                jitter: span("source.jitter", &s.jitter, "0ms")?,
                late_fraction: fraction("source.late_fraction", s.late_fraction)?,
                late_by: span("source.late_by", &s.late_by, "10m")?,
                bad_fraction: fraction("source.bad_fraction", s.bad_fraction)?,
            };
            spec.validate().map_err(|e| anyhow!("source: {e}"))?;
            Ok(SourcePlan::Generator {
                spec,
                pace: s.pace.unwrap_or(false),
            })
        }
        "kafka" => {
            if generator_keys || s.path.is_some() {
                bail!("source: file/generator keys given for kind = \"kafka\"");
            }
            let mut options = BTreeMap::new();
            for (k, v) in s.options.unwrap_or_default() {
                let v = match v {
                    toml::Value::String(s) => s,
                    other => other.to_string(),
                };
                options.insert(k, v);
            }
            let spec =
                crate::source::kafka::KafkaSpec {
                    brokers: s
                        .brokers
                        .ok_or_else(|| anyhow!("source.brokers: required for kind = \"kafka\""))?,
                    topic: s
                        .topic
                        .ok_or_else(|| anyhow!("source.topic: required for kind = \"kafka\""))?,
                    group_id: s.group_id.unwrap_or_else(|| "hotlist".into()),
                    bounded: s.bounded.unwrap_or(false),
                    start_time: match &s.start_time {
                        None => None,
                        Some(toml::Value::String(v)) => Some(Millis::parse_user(v).ok_or_else(|| {
                            anyhow!("source.start_time: {v:?} is not an RFC 3339 time or milliseconds")
                        })?),
                        Some(toml::Value::Integer(ms)) => Some(Millis(*ms)),
                        Some(other) => bail!("source.start_time: expected a string or integer, got {other}"),
                    },
                    options,
                };
            Ok(SourcePlan::Kafka { spec, partitions: 0 })
        }
        other => bail!("source.kind: unknown kind {other:?} (expected \"file\", \"generator\" or \"kafka\")"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str, set: &[&str]) -> Result<JobPlan> {
        let o = Overrides {
            set: set.iter().map(|s| s.to_string()).collect(),
            workers: None,
            ..Default::default()
        };
        parse(text, &o)
    }

    const GEN: &str = "[source]\nkind = \"generator\"\nevents = 10\nstart = 0\n";

    /// Kafka start times parse as RFC 3339 or milliseconds; anything else is a clear error, as
    /// is a bounded generator without an event count.
    #[test]
    fn kafka_start_time_and_bounded_generator() {
        let kafka = "[source]\nkind = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\n";
        let start = |set: &str| -> Result<Option<Millis>> {
            match plan(kafka, &[set])?.source {
                SourcePlan::Kafka { spec, .. } => Ok(spec.start_time),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(
            start("source.start_time=\"1970-01-01T00:00:01Z\"").unwrap(),
            Some(Millis(1000))
        );
        assert_eq!(start("source.start_time=42").unwrap(), Some(Millis(42)));
        assert_eq!(start("job.id=\"x\"").unwrap(), None);
        let err = format!("{:#}", start("source.start_time=\"yesterday\"").unwrap_err());
        assert!(err.contains("source.start_time") && err.contains("yesterday"), "{err}");
        assert!(
            plan(GEN, &["source.bounded=true"]).is_ok(),
            "a bounded generator with events is fine"
        );
        let endless = "[source]\nkind = \"generator\"\nbounded = true\n";
        let err = plan(endless, &[]).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("source.events"), "{err}");
    }

    /// The shipped configs (`configs/*.toml`) parse: the examples stay true to the code.
    #[test]
    fn shipped_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            seen += 1;
            load(&path, &Overrides::default()).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        }
        assert!(seen >= 2, "configs found in {}", dir.display());
    }

    /// A cluster's connect timeout defaults to 60 s, takes a duration, and must be positive.
    #[test]
    fn cluster_connect_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = dir.path().join("hosts.txt");
        std::fs::write(&hosts, "127.0.0.1:7001\n127.0.0.1:7002\n").unwrap();
        let cluster = |set: &[&str]| -> Result<ClusterPlan> {
            let o = Overrides {
                set: set.iter().map(|s| s.to_string()).collect(),
                processes: Some(2),
                process: Some(1),
                hostfile: Some(hosts.clone()),
                ..Default::default()
            };
            Ok(parse(GEN, &o)?.cluster.expect("a cluster"))
        };
        let c = cluster(&[]).unwrap();
        assert_eq!((c.process, c.addresses.len()), (1, 2));
        assert_eq!(c.connect_timeout, Span::from_millis(60_000));
        let c = cluster(&["run.connect_timeout=\"5s\""]).unwrap();
        assert_eq!(c.connect_timeout, Span::from_millis(5_000));
        for bad in ["run.connect_timeout=\"0s\"", "run.connect_timeout=\"soon\""] {
            let err = format!("{:#}", cluster(&[bad]).unwrap_err());
            assert!(err.contains("run.connect_timeout"), "{bad}: {err}");
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let p = plan(GEN, &["time.allowed_lateness=2m", "run.workers=3", "job.id=x"]).unwrap();
        assert_eq!(p.windows.len(), 4);
        assert_eq!(p.time.allowed_lateness.as_millis(), 120_000);
        assert_eq!(p.time.max_out_of_orderness.as_millis(), 5_000);
        assert_eq!(p.workers, 3);
        assert_eq!(p.job_id, "x");
        match p.source {
            SourcePlan::Generator { spec, .. } => assert_eq!((spec.events, spec.start), (Some(10), Millis(0))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_key() {
        let cases: &[(&str, &[&str], &str)] = &[
            (GEN, &["time.allowed_lateness=soon"], "time.allowed_lateness"),
            (GEN, &["source.late_fraction=2"], "source.late_fraction"),
            (GEN, &["sink.kind=\"mysql\""], "sink.kind"),
            (GEN, &["sink.kind=\"postgres\""], "sink.url"),
            (
                GEN,
                &[
                    "sink.kind=\"redis\"",
                    "sink.url=\"redis://x\"",
                    "sink.redis_url=\"redis://y\"",
                ],
                "sink.redis_url",
            ),
            (GEN, &["run.workers=0"], "run.workers"),
            (GEN, &["time.bogus=1"], "bogus"),
            ("[source]\nkind = \"file\"\n", &[], "source.path"),
            (
                "[source]\nkind = \"file\"\npath = \"/nonexistent/*.jsonl\"\n",
                &[],
                "no file matches",
            ),
            ("", &[], "[source]"),
            (
                &format!("{GEN}[[window]]\nname = \"w\"\nsize = \"1m\"\nslide = \"2m\"\n"),
                &[],
                "slide",
            ),
        ];
        for (text, set, want) in cases {
            let err = format!("{:#}", plan(text, set).unwrap_err());
            assert!(err.contains(want), "{err:?} should mention {want:?}");
        }
    }
}

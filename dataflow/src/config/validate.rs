//! Raw config → [`JobPlan`]: every value checked once, each section by its own function, every
//! message naming its key (`source.late_fraction: must be between 0 and 1, got 2`).
//!
//! The order of the checks is the order the sections are listed in the plan, so a config with
//! several problems always reports the same one first.

use super::plan::{
    CheckpointPlan, ClusterPlan, FileSplit, JobPlan, KafkaSpec, OnDataLoss, RedisTarget, S3Target, SinkPlan,
    SourcePlan, TimePlan, WindowPlan, DEFAULT_MAX_DEAD_LETTERS_PER_BLOCK, DEFAULT_MAX_EPOCH_RECORDS,
    DEFAULT_MAX_RECORD_BYTES, MAX_RECORD_BYTES_LIMIT, SPLIT_STRIPE_BYTES,
};
use super::raw::{
    RawCheckpoint, RawConfig, RawFileSource, RawGeneratorSource, RawHotKeys, RawKafkaSource, RawRun, RawS3, RawSink,
    RawSource, RawTime, RawWindow,
};
use super::Overrides;
use crate::generator::GeneratorSpec;
use anyhow::{anyhow, bail, Context, Result};
use hotlist_operators::dead_letter_cap::BLOCK;
use hotlist_operators::hot_keys::{HotKeySpec, MAX_SAMPLE};
use hotlist_operators::sketch::{CmsShape, MAX_CANDIDATES};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::trend::Rank;
use hotlist_operators::window::{default_windows, validate_all, WindowSpec};
use hotlist_sinks::postgres::PgTimeouts;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Largest `run.batch_size`: a source allocates room for a batch up front, so a huge value
/// aborted on allocation; a batch of 2^20 records is far past where larger batches pay.
pub const MAX_BATCH_SIZE: usize = 1 << 20;

/// Validates a whole config; `overrides` supplies the flags that win over the file.
pub fn validate(raw: RawConfig, overrides: &Overrides) -> Result<JobPlan> {
    let job_id = raw.job.id.unwrap_or_else(|| "hotlist".to_string());
    super::names::check_name("job.id", &job_id)?;
    let source = raw.source.ok_or_else(|| anyhow!("missing [source] section"))?;
    let max_record_bytes = validate_max_record_bytes(source.max_record_bytes())?;
    let mut input = super::format::validate_format(source.format().unwrap_or(&Default::default()))?;
    let source = validate_source(source)?;
    let time = validate_time(&raw.time)?;
    let windows = validate_windows(&raw.window)?;
    // what the windows need of each record: their `by` dims and, for distinct users, a user
    (input.format, input.sites) = input.compile_for(&windows)?;
    input.user_required = windows.iter().all(|w| w.key.distinct_users);
    let (udfs, udf_runner) = super::udf::validate(&raw.udf, &input)?;
    let counting = super::counting::validate_counting(&raw.window, &windows)?;
    let exact_at_seal = super::counting::validate_replay_budget(raw.exact_at_seal.as_ref())?;
    check_replayable(&counting, &windows, &source)?;
    let (sink, fanout) = validate_sink(&raw.sink)?;
    let workers = overrides.workers.or(raw.run.workers).unwrap_or(1);
    if workers == 0 || workers > 256 {
        bail!("run.workers: must be between 1 and 256, got {workers}");
    }
    let epoch_interval = span("run.epoch_interval", &raw.run.epoch_interval, "100ms")?;
    if epoch_interval == Span::ZERO {
        bail!("run.epoch_interval: must be positive");
    }
    let max_epochs_in_flight = raw.run.max_epochs_in_flight.unwrap_or(4).max(1);
    let max_epoch_records = raw.run.max_epoch_records.unwrap_or(DEFAULT_MAX_EPOCH_RECORDS);
    if max_epoch_records == 0 {
        bail!("run.max_epoch_records: must be positive");
    }
    let checkpoint = match &raw.checkpoint {
        None => None,
        Some(cp) => Some(validate_checkpoint(cp, &source, &sink)?),
    };
    let batch_size = raw.run.batch_size.unwrap_or(8192);
    let cluster = validate_cluster(&raw.run, overrides)?;
    let checkpoint = checkpoint.map(|mut cp| {
        // `checkpoint.local_dir = "…{process}…"`: one local directory per process of a cluster
        // on one machine (as on separate machines)
        let process = cluster.as_ref().map_or(0, |c| c.process);
        if let Some(d) = cp.dir.to_str().filter(|d| d.contains("{process}")) {
            cp.dir = PathBuf::from(d.replace("{process}", &process.to_string()));
        }
        cp
    });
    let hot_keys = raw.hot_keys.as_ref().map(validate_hot_keys).transpose()?;
    if !(1..=MAX_BATCH_SIZE).contains(&batch_size) {
        bail!("run.batch_size: must be between 1 and {MAX_BATCH_SIZE}, got {batch_size}");
    }
    let max_dead_letters_per_block = dead_letter_cap(&raw.run)?;
    if overrides.from_checkpoint.is_some() && checkpoint.is_none() {
        bail!("--from-checkpoint needs a [checkpoint] section");
    }
    if overrides.from_checkpoint.is_some() && overrides.from_scratch {
        bail!("--from-scratch and --from-checkpoint exclude each other");
    }
    Ok(JobPlan {
        job_id,
        source,
        max_record_bytes,
        input,
        windows: WindowPlan::zip(windows, counting),
        time,
        sink,
        fanout,
        checkpoint,
        from_checkpoint: overrides.from_checkpoint,
        from_scratch: overrides.from_scratch,
        workers,
        epoch_interval,
        max_epochs_in_flight,
        max_epoch_records,
        batch_size,
        max_dead_letters_per_block,
        cluster,
        hot_keys,
        exact_at_seal,
        udfs,
        udf_runner,
        accept_udf_change: overrides.accept_udf_change,
    })
}

/// `exact_at_seal` replays each sealed instance's input: not from standard input.
fn check_replayable(
    counting: &[hotlist_operators::counting::Counting],
    windows: &[WindowSpec],
    source: &SourcePlan,
) -> Result<()> {
    if let Some(w) = counting.iter().position(|c| c.exact_at_seal()) {
        if matches!(source, SourcePlan::Stdin) {
            bail!(
                "window {:?}: exact_at_seal replays each sealed instance's input, and standard input cannot be replayed (read a file, the generator or Kafka)",
                windows[w].name
            );
        }
    }
    Ok(())
}

/// `run.max_dead_letters_per_block`, or its default: at most a block's positions.
fn dead_letter_cap(run: &RawRun) -> Result<usize> {
    let cap = run
        .max_dead_letters_per_block
        .unwrap_or(DEFAULT_MAX_DEAD_LETTERS_PER_BLOCK);
    if cap > BLOCK as usize {
        bail!("run.max_dead_letters_per_block: must be at most {BLOCK} (the positions of a block), got {cap}");
    }
    Ok(cap)
}

/// A duration key, or its default.
fn span(key: &str, v: &Option<String>, default: &str) -> Result<Span> {
    Span::parse(v.as_deref().unwrap_or(default)).map_err(|e| anyhow!("{key}: {e}"))
}

/// A fraction key in `[0, 1]` (default 0).
fn fraction(key: &str, v: Option<f64>) -> Result<f64> {
    let f = v.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&f) {
        bail!("{key}: must be between 0 and 1, got {f}");
    }
    Ok(f)
}

/// A time key: an RFC 3339 string, a TOML datetime with a date, a time and an offset (an
/// unquoted `2026-11-29T10:00:00Z` in the file or in `--set` is one), or integer milliseconds.
/// (The `[source]` keys reach here through `RawSource`'s deserializer, whose round trip turns
/// a TOML datetime into its text today; the datetime arm keeps it a time if that changes.)
pub(super) fn instant(key: &str, v: &toml::Value) -> Result<Millis> {
    match v {
        toml::Value::String(s) => {
            Millis::parse_user(s).ok_or_else(|| anyhow!("{key}: {s:?} is not an RFC 3339 time or milliseconds"))
        }
        toml::Value::Integer(ms) => Ok(Millis(*ms)),
        toml::Value::Datetime(dt) if dt.date.is_some() && dt.time.is_some() && dt.offset.is_some() => {
            Millis::parse_rfc3339(&dt.to_string()).ok_or_else(|| anyhow!("{key}: {dt} is not an RFC 3339 time"))
        }
        toml::Value::Datetime(dt) => {
            bail!("{key}: {dt} is not a time with an offset (e.g. 2026-11-29T10:00:00Z)")
        }
        other => bail!("{key}: expected an RFC 3339 time or milliseconds, got {other}"),
    }
}

/// `source.max_record_bytes`: 1 MiB unless set; 0 and more than 64 MiB are refused.
fn validate_max_record_bytes(v: Option<i64>) -> Result<usize> {
    let Some(n) = v else {
        return Ok(DEFAULT_MAX_RECORD_BYTES);
    };
    match usize::try_from(n) {
        Ok(n) if (1..=MAX_RECORD_BYTES_LIMIT).contains(&n) => Ok(n),
        _ => bail!("source.max_record_bytes: must be between 1 and {MAX_RECORD_BYTES_LIMIT} (64 MiB), got {n}"),
    }
}

fn validate_source(source: RawSource) -> Result<SourcePlan> {
    match source {
        RawSource::File(s) => validate_file_source(s),
        RawSource::Generator(s) => validate_generator_source(s),
        RawSource::Kafka(s) => validate_kafka_source(s),
    }
}

/// The most byte ranges `source.split` cuts a file into.
pub const MAX_SPLIT: u32 = 1024;

/// The bounds of `source.split_stripe_bytes`.
const MIN_SPLIT_STRIPE: i64 = 1 << 10;
const MAX_SPLIT_STRIPE: i64 = 1 << 30;

/// `kind = "file"`: the glob's files, sorted (each a partition, or `source.split` of them), or
/// stdin for "-".
fn validate_file_source(s: RawFileSource) -> Result<SourcePlan> {
    let _ = s.bounded; // files always end
    let path = s
        .path
        .ok_or_else(|| anyhow!("source.path: required for kind = \"file\""))?;
    let split = match s.split {
        None => 1,
        Some(n) if (1..=i64::from(MAX_SPLIT)).contains(&n) => n as u32,
        Some(n) => bail!("source.split: {n} is not between 1 and {MAX_SPLIT} (byte ranges per file)"),
    };
    let stripe = match s.split_stripe_bytes {
        None => SPLIT_STRIPE_BYTES,
        Some(n) if (MIN_SPLIT_STRIPE..=MAX_SPLIT_STRIPE).contains(&n) => n as u64,
        Some(n) => bail!(
            "source.split_stripe_bytes: {n} is not between {MIN_SPLIT_STRIPE} (1 KiB) and {MAX_SPLIT_STRIPE} (1 GiB)"
        ),
    };
    if path == "-" {
        if split > 1 {
            bail!("source.split: standard input cannot be split (it is read once, in order)");
        }
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
    let sizes = match split {
        1 => Vec::new(),
        _ => paths
            .iter()
            .map(|p| {
                std::fs::metadata(p)
                    .map(|m| m.len())
                    .with_context(|| format!("source.path: cannot read the size of {}", p.display()))
            })
            .collect::<Result<_>>()?,
    };
    Ok(SourcePlan::Files(FileSplit {
        paths,
        split,
        sizes,
        stripe,
    }))
}

/// `kind = "generator"`: a [`GeneratorSpec`], defaults filled in and checked.
fn validate_generator_source(s: RawGeneratorSource) -> Result<SourcePlan> {
    if s.bounded == Some(true) && s.events.is_none() {
        bail!("source.bounded: a generator ends after source.events events; set that");
    }
    let d = GeneratorSpec::default();
    let start = match &s.start {
        None => Millis::now(),
        Some(toml::Value::String(v)) if v == "now" => Millis::now(),
        Some(v) => instant("source.start", v).context("source.start: expected \"now\", RFC 3339 or milliseconds")?,
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

/// `kind = "kafka"`: a [`KafkaSpec`]; the partition count is asked from the broker at run time.
fn validate_kafka_source(s: RawKafkaSource) -> Result<SourcePlan> {
    let mut options = BTreeMap::new();
    for (k, v) in s.options.unwrap_or_default() {
        let v = match v {
            toml::Value::String(s) => s,
            other => other.to_string(),
        };
        if k == "auto.offset.reset" {
            bail!("source.options.auto.offset.reset: hotlist handles offsets out of range itself (see source.on_data_loss)");
        }
        options.insert(k, v);
    }
    let bounded = s.bounded.unwrap_or(false);
    let discovery = span("source.partition_discovery", &s.partition_discovery, "10s")?;
    let spec = KafkaSpec {
        brokers: s
            .brokers
            .ok_or_else(|| anyhow!("source.brokers: required for kind = \"kafka\""))?,
        topic: s
            .topic
            .ok_or_else(|| anyhow!("source.topic: required for kind = \"kafka\""))?,
        group_id: s.group_id.unwrap_or_else(|| "hotlist".into()),
        bounded,
        start_time: s
            .start_time
            .as_ref()
            .map(|v| instant("source.start_time", v))
            .transpose()?,
        options,
        on_data_loss: on_data_loss(s.on_data_loss.as_deref())?,
        // a bounded run reads the partitions the topic had at start; "0s" turns discovery off
        partition_discovery: (!bounded && discovery > Span::ZERO).then_some(discovery),
    };
    Ok(SourcePlan::Kafka { spec, partitions: 0 })
}

/// `source.on_data_loss`: "fail" (default) or "continue".
fn on_data_loss(v: Option<&str>) -> Result<OnDataLoss> {
    match v {
        None | Some("fail") => Ok(OnDataLoss::Fail),
        Some("continue") => Ok(OnDataLoss::Continue),
        Some(other) => bail!("source.on_data_loss: expected \"fail\" or \"continue\", got {other:?}"),
    }
}

fn validate_time(t: &RawTime) -> Result<TimePlan> {
    let time = TimePlan {
        max_out_of_orderness: span("time.max_out_of_orderness", &t.max_out_of_orderness, "5s")?,
        allowed_lateness: span("time.allowed_lateness", &t.allowed_lateness, "1m")?,
        idle_timeout: span("time.idle_timeout", &t.idle_timeout, "30s")?,
        emit_interval: span("time.emit_interval", &t.emit_interval, "1s")?,
        max_future: span("time.max_future", &t.max_future, "1h")?,
    };
    if time.emit_interval == Span::ZERO {
        bail!("time.emit_interval: must be positive");
    }
    if time.max_future == Span::ZERO {
        bail!("time.max_future: must be positive");
    }
    Ok(time)
}

/// The configured windows (none: the default four), each checked and all checked together.
fn validate_windows(raw: &[RawWindow]) -> Result<Vec<WindowSpec>> {
    let windows = if raw.is_empty() {
        default_windows()
    } else {
        raw.iter()
            .map(|w| {
                let size = span(&format!("window {:?}: size", w.name), &Some(w.size.clone()), "")?;
                let slide = match &w.slide {
                    Some(s) => span(&format!("window {:?}: slide", w.name), &Some(s.clone()), "")?,
                    None => size,
                };
                let mut spec = WindowSpec {
                    rank: Rank::Count,
                    key: super::keys::key_shape(w)?,
                    name: w.name.clone(),
                    size,
                    slide,
                    k: w.k.unwrap_or(100),
                };
                spec.rank = super::rank::rank(w, &spec)?;
                Ok(spec)
            })
            .collect::<Result<Vec<_>>>()?
    };
    for w in &windows {
        super::names::check_name(&format!("window {:?}: name", w.name), &w.name)?;
    }
    validate_all(&windows).map_err(|e| anyhow!("{e}"))?;
    Ok(windows)
}

/// The PostgreSQL client's timeouts (`sink.connect_timeout`, `sink.statement_timeout`,
/// `sink.keepalives_idle`), each more than 0.
fn pg_timeouts(s: &RawSink) -> Result<PgTimeouts> {
    let d = PgTimeouts::default();
    let positive = |key: &str, v: &Option<String>, default: std::time::Duration| -> Result<std::time::Duration> {
        let default = format!("{}ms", default.as_millis());
        match span(key, v, &default)?.as_std() {
            t if t.is_zero() => bail!("{key}: must be more than 0"),
            t => Ok(t),
        }
    };
    Ok(PgTimeouts {
        connect: positive("sink.connect_timeout", &s.connect_timeout, d.connect)?,
        statement: positive("sink.statement_timeout", &s.statement_timeout, d.statement)?,
        keepalives_idle: positive("sink.keepalives_idle", &s.keepalives_idle, d.keepalives_idle)?,
    })
}

/// The sink and its optional Redis fan-out.
fn validate_sink(s: &RawSink) -> Result<(SinkPlan, Option<RedisTarget>)> {
    let sink = match s.kind.as_deref().unwrap_or("sqlite") {
        "sqlite" => SinkPlan::Sqlite(PathBuf::from(s.path.as_deref().unwrap_or("hotlist.db"))),
        "postgres" => SinkPlan::Postgres {
            url: s
                .url
                .clone()
                .ok_or_else(|| anyhow!("sink.url: required for kind = \"postgres\""))?,
            schema: s.schema.clone().unwrap_or_else(|| "public".into()),
            timeouts: pg_timeouts(s)?,
        },
        "redis" => SinkPlan::Redis(RedisTarget {
            url: s
                .url
                .clone()
                .ok_or_else(|| anyhow!("sink.url: required for kind = \"redis\""))?,
            prefix: s.prefix.clone().unwrap_or_else(|| "hotlist".into()),
        }),
        "kafka" => bail!("sink.kind \"kafka\" is not available in this version"),
        other => bail!("sink.kind: unknown kind {other:?} (expected \"sqlite\", \"postgres\" or \"redis\")"),
    };
    let fanout = s.redis_url.clone().map(|url| RedisTarget {
        url,
        prefix: s.redis_prefix.clone().unwrap_or_else(|| "hotlist".into()),
    });
    if fanout.is_some() && matches!(sink, SinkPlan::Redis(_)) {
        bail!("sink.redis_url: the sink is Redis already");
    }
    Ok((sink, fanout))
}

/// `[checkpoint]`: only for a replayable source and a sink that keeps history.
fn validate_checkpoint(cp: &RawCheckpoint, source: &SourcePlan, sink: &SinkPlan) -> Result<CheckpointPlan> {
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
    let dir = cp.dir.as_deref().unwrap_or("checkpoints");
    let remote = s3_target(dir, cp.s3.as_ref())?;
    if remote.is_none() && (cp.local_dir.is_some() || cp.s3.is_some()) {
        bail!("checkpoint.local_dir, [checkpoint.s3]: only with checkpoint.dir = \"s3://bucket/prefix\"");
    }
    let local = match &remote {
        Some(_) => cp.local_dir.as_deref().unwrap_or("checkpoints"),
        None => dir.strip_prefix("file://").unwrap_or(dir),
    };
    Ok(CheckpointPlan {
        dir: PathBuf::from(local),
        every: interval,
        retain,
        remote,
    })
}

/// `checkpoint.dir = "s3://bucket/prefix"` with its `[checkpoint.s3]` settings (None for a
/// path or `file://` URL).
fn s3_target(dir: &str, s3: Option<&RawS3>) -> Result<Option<S3Target>> {
    let Some(rest) = dir.strip_prefix("s3://") else {
        if let Some((scheme, _)) = dir.split_once("://").filter(|(s, _)| *s != "file") {
            bail!("checkpoint.dir: {scheme}:// is not supported (a path, file://… or s3://bucket/prefix)");
        }
        return Ok(None);
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        bail!("checkpoint.dir: {dir:?} names no bucket (s3://bucket/prefix)");
    }
    let s3 = s3.map_or_else(RawS3::default, |s| RawS3 {
        endpoint: s.endpoint.clone(),
        region: s.region.clone(),
        allow_http: s.allow_http,
    });
    Ok(Some(S3Target {
        bucket: bucket.to_string(),
        prefix: prefix.trim_matches('/').to_string(),
        endpoint: s3.endpoint,
        region: s3.region,
        allow_http: s3.allow_http.unwrap_or(false),
    }))
}

/// A number key written as an integer or a float, or its default.
fn number(key: &str, v: &Option<toml::Value>, default: Option<f64>) -> Result<f64> {
    match v {
        None => default.ok_or_else(|| anyhow!("{key}: required")),
        Some(toml::Value::Float(f)) => Ok(*f),
        Some(toml::Value::Integer(i)) => Ok(*i as f64),
        Some(other) => bail!("{key}: expected a number, got {other}"),
    }
}

/// `[hot_keys]`: the detector's spec, defaults filled in, every value checked
/// (`HotKeySpec::validate`) and the sketch shape built from ε and δ.
fn validate_hot_keys(h: &RawHotKeys) -> Result<HotKeySpec> {
    let sample = h.sample.unwrap_or(1);
    let sample = u32::try_from(sample)
        .ok()
        .filter(|s| (1..=MAX_SAMPLE).contains(s))
        .ok_or_else(|| anyhow!("hot_keys.sample: must be between 1 and {MAX_SAMPLE}, got {sample}"))?;
    let epsilon = number("hot_keys.epsilon", &h.epsilon, Some(0.001))?;
    let delta = number("hot_keys.delta", &h.delta, Some(0.001))?;
    let shape = CmsShape::from_error(epsilon, delta).map_err(|e| anyhow!("hot_keys: {e}"))?;
    let candidates = h.candidates.unwrap_or(64);
    let spec = HotKeySpec {
        sample,
        window: span("hot_keys.window", &h.window, "10s")?,
        threshold: number("hot_keys.threshold", &h.threshold, None)?,
        hysteresis: number("hot_keys.hysteresis", &h.hysteresis, Some(0.2))?,
        shape,
        candidates: usize::try_from(candidates).unwrap_or(0),
    };
    spec.validate().map_err(|e| match candidates < 0 {
        true => anyhow!("hot_keys.candidates: must be between 1 and {MAX_CANDIDATES}, got {candidates}"),
        false => anyhow!("{e}"),
    })?;
    Ok(spec)
}

/// The cluster (None for one process): this process's index and every process's address.
fn validate_cluster(run: &RawRun, overrides: &Overrides) -> Result<Option<ClusterPlan>> {
    let processes = overrides.processes.or(run.processes).unwrap_or(1);
    if processes <= 1 {
        return Ok(None);
    }
    let process = overrides
        .process
        .or(run.process)
        .ok_or_else(|| anyhow!("run.process: required with {processes} processes (--process I)"))?;
    if process >= processes {
        bail!("run.process: {process} is not below run.processes ({processes})");
    }
    let hostfile = overrides
        .hostfile
        .clone()
        .or(run.hostfile.as_ref().map(PathBuf::from))
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
    let connect_timeout = span("run.connect_timeout", &run.connect_timeout, "60s")?;
    if connect_timeout == Span::ZERO {
        bail!("run.connect_timeout: must be positive");
    }
    Ok(Some(ClusterPlan {
        process,
        addresses,
        connect_timeout,
    }))
}

/// Checks a plan against the wall clock `now`, when a run starts: a generator's events are
/// judged against the wall clock (`time.max_future`), so a generator that starts, or (unpaced
/// and bounded) ends, further ahead of now than `max_future` would dead-letter those events as
/// `future`. That is a configuration mistake, refused with the way out. (`generate` and
/// `produce` do not judge events and are not checked.) A paced generator that starts by now
/// stays behind the wall clock; an endless unpaced one outruns it eventually (see docs/configuration.md, `source.start`).
pub fn check_against_clock(plan: &JobPlan, now: Millis) -> Result<()> {
    let SourcePlan::Generator { spec, pace } = &plan.source else {
        return Ok(());
    };
    let max_future = plan.time.max_future;
    let horizon = now.plus(max_future);
    if spec.start > horizon {
        bail!(
            "source.start: {} is more than time.max_future ({max_future}) ahead of now ({now}): every event \
             would be a `future` dead letter; start earlier or raise time.max_future",
            spec.start
        );
    }
    if let Some(last) = spec.last_base_time().filter(|t| !pace && *t > horizon) {
        bail!(
            "source.events: this unpaced generator's events reach {last}, more than time.max_future \
             ({max_future}) ahead of now ({now}): the later ones would be `future` dead letters; start \
             earlier, set source.pace = true, or raise time.max_future"
        );
    }
    Ok(())
}

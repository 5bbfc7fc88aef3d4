//! The config file as written: serde structs, every key optional where it has a default, every
//! unknown key an error (`deny_unknown_fields`).
//!
//! `[source]` is one struct per kind, chosen by its `kind` key, so a key that belongs to
//! another kind is rejected by serde like a typo. Nothing here checks values (ranges, paths,
//! durations): that is [`super::validate`]'s job, which turns this into a
//! [`JobPlan`](super::JobPlan).

use serde::de::{Deserializer, Error as _};
use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// `[job]`.
    #[serde(default)]
    pub job: RawJob,
    /// `[source]` (required).
    pub source: Option<RawSource>,
    /// `[time]`.
    #[serde(default)]
    pub time: RawTime,
    /// `[[window]]`, in order (none: the default windows).
    #[serde(default)]
    pub window: Vec<RawWindow>,
    /// `[sink]`.
    #[serde(default)]
    pub sink: RawSink,
    /// `[checkpoint]` (none: no checkpoints).
    pub checkpoint: Option<RawCheckpoint>,
    /// `[run]`.
    #[serde(default)]
    pub run: RawRun,
    /// `[hot_keys]` (none: no hot-key detector).
    pub hot_keys: Option<RawHotKeys>,
    /// `[exact_at_seal]`: the replays' memory budget (none: the defaults).
    pub exact_at_seal: Option<RawExactAtSeal>,
    /// `[[udf]]`: user-defined functions (none: no UDF).
    #[serde(default)]
    pub udf: Vec<super::udf::RawUdf>,
}

/// `[job]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJob {
    /// Job id: results are stored under it, so two jobs can share a store.
    pub id: Option<String>,
}

/// `[source]`: one kind of input, chosen by `kind = "file" | "generator" | "kafka"`.
#[derive(Debug)]
pub enum RawSource {
    /// `kind = "file"`.
    File(RawFileSource),
    /// `kind = "generator"`.
    Generator(RawGeneratorSource),
    /// `kind = "kafka"`.
    Kafka(RawKafkaSource),
}

/// `[source] kind = "file"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFileSource {
    /// A path or a glob; each file is one partition; "-" = stdin.
    pub path: Option<String>,
    /// Accepted for symmetry with the other kinds (files always end).
    pub bounded: Option<bool>,
    /// Longest line in bytes; a longer one is a `too_large` dead letter.
    pub max_record_bytes: Option<i64>,
    /// Read each file as this many byte ranges, each a partition (default 1).
    pub split: Option<i64>,
    /// With `split`: the stripe, in bytes, the ranges take turns in (default 4 MiB).
    pub split_stripe_bytes: Option<i64>,
    /// `[source.format]`: where the fields are (JSON Pointers).
    pub format: Option<super::format::RawFormat>,
}

/// `[source] kind = "generator"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGeneratorSource {
    /// Seed of every partition's random stream.
    pub seed: Option<u64>,
    /// Number of distinct items.
    pub items: Option<u32>,
    /// Zipf exponent of the item popularity (0 = uniform).
    pub zipf: Option<f64>,
    /// Number of partitions.
    pub partitions: Option<u32>,
    /// Total records over all partitions (none: endless).
    pub events: Option<u64>,
    /// Records per second of event time, per partition.
    pub rate: Option<u64>,
    /// "now" (default), an RFC 3339 time (a string, or a TOML datetime with an offset) or
    /// integer milliseconds.
    pub start: Option<toml::Value>,
    /// On-time events are up to this much older than their base time.
    pub jitter: Option<String>,
    /// Fraction of events made late by `late_by`.
    pub late_fraction: Option<f64>,
    /// How late the late events are.
    pub late_by: Option<String>,
    /// Fraction of records that are bad lines.
    pub bad_fraction: Option<f64>,
    /// Pace the generator to the wall clock (event time advances `rate` events/s per partition).
    pub pace: Option<bool>,
    /// End after `events` (which must then be set).
    pub bounded: Option<bool>,
    /// Accepted for symmetry with the other kinds (generated records are far shorter).
    pub max_record_bytes: Option<i64>,
}

/// `[source] kind = "kafka"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKafkaSource {
    /// `bootstrap.servers`.
    pub brokers: Option<String>,
    /// The topic.
    pub topic: Option<String>,
    /// `group.id` (default "hotlist"; offsets are never committed).
    pub group_id: Option<String>,
    /// Read up to the end offsets at start, then end.
    pub bounded: Option<bool>,
    /// Start at the first message (per partition) whose timestamp is at or after this time
    /// (RFC 3339, as a string or a TOML datetime with an offset, or milliseconds); default: the
    /// earliest offset.
    pub start_time: Option<toml::Value>,
    /// Extra librdkafka properties.
    pub options: Option<toml::Table>,
    /// "fail" (default) or "continue": messages lost before they were read (a re-created
    /// topic, retention) stop the run, or are counted and skipped.
    pub on_data_loss: Option<String>,
    /// How often a live run looks for partitions added to the topic (default "10s"; "0s": never).
    pub partition_discovery: Option<String>,
    /// Longest message in bytes; a longer one is a `too_large` dead letter.
    pub max_record_bytes: Option<i64>,
    /// `[source.format]`: where the fields are (JSON Pointers).
    pub format: Option<super::format::RawFormat>,
}

impl RawSource {
    /// `[source.format]` (the generator writes the event contract and has none).
    pub fn format(&self) -> Option<&super::format::RawFormat> {
        match self {
            RawSource::File(s) => s.format.as_ref(),
            RawSource::Generator(_) => None,
            RawSource::Kafka(s) => s.format.as_ref(),
        }
    }

    /// `source.max_record_bytes`, whatever the kind.
    pub fn max_record_bytes(&self) -> Option<i64> {
        match self {
            RawSource::File(s) => s.max_record_bytes,
            RawSource::Generator(s) => s.max_record_bytes,
            RawSource::Kafka(s) => s.max_record_bytes,
        }
    }
}

/// The dispatch on `kind` is written out rather than derived (`#[serde(tag = "kind")]`): the
/// derive's messages say neither which section nor which kind a bad key was checked against
/// ("unknown field `seed`"), and these name both (`source: unknown field `seed`, expected
/// `path` or `bounded` for kind = "file"`). Each kind's own struct still rejects the keys.
impl<'de> Deserialize<'de> for RawSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut table = toml::Table::deserialize(deserializer)?;
        let kind = match table.remove("kind") {
            Some(toml::Value::String(kind)) => kind,
            Some(other) => return Err(D::Error::custom(format!("source.kind: expected a string, got {other}"))),
            None => return Err(D::Error::missing_field("kind")),
        };
        let keys = toml::Value::Table(table);
        let in_kind = |e: toml::de::Error| D::Error::custom(format!("source: {} for kind = {kind:?}", e.message()));
        match kind.as_str() {
            "file" => keys.try_into().map(RawSource::File).map_err(in_kind),
            "generator" => keys.try_into().map(RawSource::Generator).map_err(in_kind),
            "kafka" => keys.try_into().map(RawSource::Kafka).map_err(in_kind),
            other => Err(D::Error::custom(format!(
                "source.kind: unknown kind {other:?} (expected \"file\", \"generator\" or \"kafka\")"
            ))),
        }
    }
}

/// `[time]`: event-time settings (durations such as "5s").
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTime {
    /// Partition watermark = max event time − this (default 5s).
    pub max_out_of_orderness: Option<String>,
    /// How long after a window's end late events still count (default 1m).
    pub allowed_lateness: Option<String>,
    /// A partition without events for this long (wall clock) goes idle (default 30s).
    pub idle_timeout: Option<String>,
    /// How often provisional lists of open windows are published (default 1s).
    pub emit_interval: Option<String>,
    /// An event further ahead of its reference time than this is a `future` dead letter
    /// (default 1h).
    pub max_future: Option<String>,
}

/// One `[[window]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWindow {
    /// Its name (the query key).
    pub name: String,
    /// Its length.
    pub size: String,
    /// How far consecutive instances are apart (default: `size`, tumbling).
    pub slide: Option<String>,
    /// List length (default 100).
    pub k: Option<usize>,
    /// How it counts: `exact` (default), `sketch`, `auto` or `both`.
    pub mode: Option<String>,
    /// `auto`: distinct items per instance (summed over workers) before it folds into a sketch.
    pub max_items: Option<u64>,
    /// `[window.sketch]`: the sketch of a `sketch`, `auto` or `both` window.
    pub sketch: Option<RawSketch>,
    /// `sketch` / `auto` count-min windows: replay each sealed instance's input to publish its
    /// final list exact, with a certificate (default false).
    pub exact_at_seal: Option<bool>,
    /// Dims to keep one list per combination of values of (none: one global list).
    pub by: Option<Vec<String>>,
    /// Most groups per instance (default 10,000); further groups count in `(other)`.
    pub max_groups: Option<u32>,
    /// What an item's count is: `events` (default) or `distinct_users`.
    pub count: Option<String>,
    /// How lists are ordered: `count` (default) or `trend` (surge over the item's baseline).
    pub rank_by: Option<String>,
    /// Trend windows: how many previous instances make the baseline (default 12).
    pub baseline: Option<u32>,
    /// Trend windows: least count in the instance for an item to rank (default 5).
    pub min_count: Option<u64>,
}

/// `[window.sketch]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSketch {
    /// Over-count bound as a fraction of the instance's events (default 0.0001).
    pub epsilon: Option<f64>,
    /// Probability that one count exceeds its bound (default 0.001).
    pub delta: Option<f64>,
    /// Candidates kept per instance (default 4·k).
    pub candidates: Option<usize>,
    /// `cms` (default) or `heavykeeper`.
    pub algorithm: Option<String>,
    /// Count-min conservative update (default false).
    pub conservative: Option<bool>,
}

/// `[sink]`. One flat struct, unlike `[source]`: its keys have always been accepted whatever
/// the kind (a `path` left over when `--set sink.kind=...` switches to PostgreSQL is ignored),
/// and rejecting them now would break configs that work.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSink {
    /// "sqlite" (default) | "postgres" | "redis".
    pub kind: Option<String>,
    /// sqlite: the database file.
    pub path: Option<String>,
    /// postgres / redis: the server URL.
    pub url: Option<String>,
    /// postgres: the schema to use (default "public").
    pub schema: Option<String>,
    /// postgres: how long connecting (TCP and handshake) may take (default "10s").
    pub connect_timeout: Option<String>,
    /// postgres: the session's statement_timeout; the client waits for a reply this plus 5 s
    /// (default "60s").
    pub statement_timeout: Option<String>,
    /// postgres: idle time before TCP keepalive probes (default "30s").
    pub keepalives_idle: Option<String>,
    /// redis: key prefix (default "hotlist").
    pub prefix: Option<String>,
    /// Also write each window's latest list to this Redis (serving fan-out).
    pub redis_url: Option<String>,
    /// Key prefix for the fan-out (default "hotlist").
    pub redis_prefix: Option<String>,
}

/// `[checkpoint]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCheckpoint {
    /// Where checkpoint directories go (one per committed checkpoint, under the job id).
    pub dir: Option<String>,
    /// How often to checkpoint (rounded to whole epochs). Results are committed at checkpoints.
    pub interval: Option<String>,
    /// How many checkpoints to keep.
    pub retain: Option<usize>,
    /// With `dir = "s3://…"`: the local directory checkpoints are written to (and restored
    /// from) before they are uploaded (default `checkpoints`).
    pub local_dir: Option<String>,
    /// `[checkpoint.s3]`: the S3 endpoint of an `s3://` dir.
    pub s3: Option<RawS3>,
}

/// `[checkpoint.s3]`: where an `s3://` checkpoint dir lives (credentials come from the usual
/// `AWS_*` environment variables).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawS3 {
    /// The endpoint URL (default: AWS, or `AWS_ENDPOINT_URL`).
    pub endpoint: Option<String>,
    /// The region (default `AWS_REGION`, else `us-east-1`).
    pub region: Option<String>,
    /// Allow a plain-HTTP endpoint (a local server).
    pub allow_http: Option<bool>,
}

/// `[run]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    /// Timely worker threads.
    pub workers: Option<usize>,
    /// How often sources close an epoch (the unit of progress, watermarks and commits).
    pub epoch_interval: Option<String>,
    /// Sources wait when more than this many epochs are in flight (backpressure).
    pub max_epochs_in_flight: Option<u64>,
    /// A source closes its epoch once it has read this many records in it (default 65,536).
    pub max_epoch_records: Option<u64>,
    /// Records a source reads per activation (over all its partitions).
    pub batch_size: Option<usize>,
    /// Dead letters kept whole per source and block of 1,000,000 positions (default 1000);
    /// the rest are counted per reason in one summary row per block.
    pub max_dead_letters_per_block: Option<usize>,
    /// Processes in the cluster (default 1). Each runs `workers` threads.
    pub processes: Option<usize>,
    /// This process's index, 0-based.
    pub process: Option<usize>,
    /// File with one `host:port` per line, in process order (required with processes > 1).
    pub hostfile: Option<String>,
    /// How long a cluster process waits for all its peers to connect before it gives up.
    pub connect_timeout: Option<String>,
}

/// `[hot_keys]`: the sampled hot-key detector. Numbers may be written as integers or floats.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHotKeys {
    /// Count 1 in this many events (default 1: every event).
    pub sample: Option<i64>,
    /// The tumbling window (default "10s").
    pub window: Option<String>,
    /// Events per second at which a key is hot (required).
    pub threshold: Option<toml::Value>,
    /// In [0, 1): a reported key stays, cooling, while its rate ≥ threshold × (1 − this)
    /// (default 0.2).
    pub hysteresis: Option<toml::Value>,
    /// The count-min sketch's ε (default 0.001).
    pub epsilon: Option<toml::Value>,
    /// The count-min sketch's δ (default 0.001).
    pub delta: Option<toml::Value>,
    /// Candidates kept beside each window's sketch (default 64).
    pub candidates: Option<i64>,
}

/// `[exact_at_seal]`: how much a replay of a sealed sketch instance may count exactly at once.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExactAtSeal {
    /// Most items one replay map holds (default 250,000).
    pub max_replay_keys: Option<i64>,
    /// Most item-hash ranges a pass is split into when a map would hold more (default 16).
    pub max_key_ranges: Option<i64>,
}

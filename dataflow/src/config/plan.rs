//! The validated job: what [`super::load`] returns and everything downstream trusts. Every value
//! here has been checked (ranges, paths, durations); the types admit only meaningful
//! combinations (a source or sink is one enum variant with just its own settings).

use crate::generator::GeneratorSpec;
use hotlist_operators::counting::Counting;
use hotlist_operators::hot_keys::HotKeySpec;
use hotlist_operators::replay_budget::ReplayBudget;
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The default of `source.max_record_bytes`: 1 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 1 << 20;

/// Default `run.max_dead_letters_per_block`: dead letters kept whole per source and block of
/// 1,000,000 positions; the rest of a block's are counted per reason in one summary row.
pub const DEFAULT_MAX_DEAD_LETTERS_PER_BLOCK: usize = 1_000;
/// Default records a source reads in one epoch before it closes it (`run.max_epoch_records`).
pub const DEFAULT_MAX_EPOCH_RECORDS: u64 = 65_536;

/// The largest `source.max_record_bytes` accepted: 64 MiB. A source holds one record of up
/// to this size per partition, and a dead letter keeps a bad record of up to this size whole.
pub const MAX_RECORD_BYTES_LIMIT: usize = 64 << 20;

/// A validated job.
#[derive(Clone, Debug)]
pub struct JobPlan {
    /// Job id.
    pub job_id: String,
    /// Input.
    pub source: SourcePlan,
    /// Longest record a source takes, in bytes (a line of a file or stdin, a Kafka message): a
    /// longer one is a `too_large` dead letter. Between 1 and [`MAX_RECORD_BYTES_LIMIT`].
    pub max_record_bytes: usize,
    /// `[source.format]`: where the fields are, the parser's format, whether a user is required.
    pub input: super::format::InputFormat,
    /// Windows, in configured order (a window's id is its index here).
    pub windows: Vec<WindowPlan>,
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
    /// Start a new run of the job: forget its stored results and move its checkpoints aside
    /// (`--from-scratch`; never with `from_checkpoint`).
    pub from_scratch: bool,
    /// Timely worker threads.
    pub workers: usize,
    /// Epoch length (wall clock).
    pub epoch_interval: Span,
    /// Backpressure bound.
    pub max_epochs_in_flight: u64,
    /// A source closes its epoch early once it has read this many records in it, so an
    /// epoch's buffers are bounded by records at any input rate.
    pub max_epoch_records: u64,
    /// Records a source reads per activation.
    pub batch_size: usize,
    /// Dead letters kept whole per source and block of positions (`dead_letter_cap`).
    pub max_dead_letters_per_block: usize,
    /// Multi-process settings (None: one process).
    pub cluster: Option<ClusterPlan>,
    /// The sampled hot-key detector (`[hot_keys]`), if on.
    pub hot_keys: Option<HotKeySpec>,
    /// `[exact_at_seal]`: how much a replay may count exactly at once.
    pub exact_at_seal: ReplayBudget,
    /// `[[udf]]`: the job's UDFs, loaded.
    pub udfs: crate::udf::Udfs,
    /// The UDF uses the source runs on each batch (empty: none).
    pub udf_runner: std::sync::Arc<crate::udf::UdfRunner>,
    /// `--accept-udf-change`: a checkpoint written with other UDF libraries may be restored.
    pub accept_udf_change: bool,
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
    /// Whether this process writes the sink (process 0 of a cluster, or the only one): the
    /// one that owns the job (locks, claims, removes checkpoints).
    pub fn writes_the_sink(&self) -> bool {
        self.cluster.as_ref().is_none_or(|c| c.process == 0)
    }

    /// Workers over all processes.
    pub fn total_workers(&self) -> usize {
        self.workers * self.cluster.as_ref().map_or(1, |c| c.addresses.len())
    }

    /// Every window's spec, in configured order (what the counters, the merger and the stores
    /// take).
    pub fn window_specs(&self) -> Vec<WindowSpec> {
        self.windows.iter().map(|w| w.spec.clone()).collect()
    }

    /// Every window's counting, in configured order.
    pub fn countings(&self) -> Vec<Counting> {
        self.windows.iter().map(|w| w.counting).collect()
    }

    /// Whether the sources announce the groups of their events to every counter
    /// (`group::admission`): not when one worker counts every event and every window with
    /// `by` dims counts exactly, for that counter then notes its keys' groups itself
    /// (`WindowedCounter::note_own_groups`).
    pub fn announces_groups(&self) -> bool {
        self.total_workers() > 1
            || self
                .windows
                .iter()
                .any(|w| !w.spec.key.by.is_empty() && w.counting.sketch().is_some())
    }

    /// Whether some window has `exact_at_seal` (worker 0 replays its sealed instances).
    pub fn any_exact_at_seal(&self) -> bool {
        self.windows.iter().any(|w| w.counting.exact_at_seal())
    }
}

/// One configured window: what it counts (`[[window]]`: size, slide, key, `k`) and how.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowPlan {
    /// Its name, size, slide, key and `k`.
    pub spec: WindowSpec,
    /// How it counts (`mode` and the sketch settings).
    pub counting: Counting,
}

impl WindowPlan {
    /// Pairs each window with its counting (both in configured order).
    pub fn zip(specs: Vec<WindowSpec>, counting: Vec<Counting>) -> Vec<WindowPlan> {
        specs
            .into_iter()
            .zip(counting)
            .map(|(spec, counting)| WindowPlan { spec, counting })
            .collect()
    }
}

/// Where events come from.
#[derive(Clone, Debug)]
pub enum SourcePlan {
    /// JSON-lines files (sorted by path), each read as `split` byte ranges: partition `p` is
    /// range `p % split` of file `p / split`.
    Files(FileSplit),
    /// JSON lines on standard input: one partition.
    Stdin,
    /// A Kafka topic: partition `p` is input partition `p`.
    Kafka {
        /// Connection settings.
        spec: KafkaSpec,
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
            SourcePlan::Files(files) => files.partitions(),
            SourcePlan::Stdin => 1,
            SourcePlan::Generator { spec, .. } => spec.partitions,
            SourcePlan::Kafka { partitions, .. } => *partitions,
        }
    }

    /// A short description of a partition, stored with its dead letters.
    pub fn partition_name(&self, p: u32) -> String {
        match self {
            SourcePlan::Files(files) => files.partition_name(p),
            SourcePlan::Stdin => "stdin".to_string(),
            SourcePlan::Generator { .. } => format!("generator:{p}"),
            SourcePlan::Kafka { spec, .. } => format!("kafka:{}/{p}", spec.topic),
        }
    }
}

/// The files of a file source and how each is split into partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSplit {
    /// The files, sorted.
    pub paths: Vec<PathBuf>,
    /// Byte ranges per file (`source.split`, 1: the whole file).
    pub split: u32,
    /// With `split` > 1, each file's size when the job was planned: the ranges are cut from it
    /// (checkpoints record them, so a restore onto a file of another size is refused rather
    /// than reading ranges that moved).
    pub sizes: Vec<u64>,
    /// With `split` > 1, the stripe the ranges take turns in (`source.split_stripe_bytes`): a
    /// file larger than `split` stripes is read as interleaved stripes, not `split` halves.
    pub stripe: u64,
}

/// The default `source.split_stripe_bytes`: 4 MiB, about 16 k lines of 250 bytes (a few
/// seconds of event time at a few thousand events per second), read in one go.
pub const SPLIT_STRIPE_BYTES: u64 = 4 << 20;

/// How many stripes each of `count` ranges of a `size`-byte file reads, in turns (see
/// [`FileRange`]): enough that no stripe is longer than `stripe` bytes, at least 1.
pub fn split_turns(size: u64, count: u32, stripe: u64) -> u64 {
    size.div_ceil(u64::from(count.max(1)).saturating_mul(stripe.max(1)))
        .max(1)
}

impl FileSplit {
    /// Whole files, one partition each.
    pub fn whole(paths: Vec<PathBuf>) -> FileSplit {
        FileSplit {
            paths,
            split: 1,
            sizes: Vec::new(),
            stripe: SPLIT_STRIPE_BYTES,
        }
    }

    /// Number of partitions.
    pub fn partitions(&self) -> u32 {
        (self.paths.len() as u32).saturating_mul(self.split)
    }

    /// Partition `p`: its file, and its range as (index, count, the file's planned size);
    /// `None` when the job has no such partition.
    pub fn part(&self, p: u32) -> Option<(&Path, Option<FileRange>)> {
        let path = self.paths.get((p / self.split) as usize)?;
        let range = (self.split > 1).then(|| {
            let size = self.sizes.get((p / self.split) as usize).copied().unwrap_or(0);
            FileRange {
                index: p % self.split,
                count: self.split,
                size,
                turns: split_turns(size, self.split, self.stripe),
            }
        });
        Some((path, range))
    }

    /// The name of partition `p` in dead letters and logs: `file:PATH`, or with ranges
    /// `file:PATH#R/N` (R counted from 1).
    pub fn partition_name(&self, p: u32) -> String {
        match self.part(p) {
            Some((path, None)) => format!("file:{}", path.display()),
            Some((path, Some(r))) => format!("file:{}#{}/{}", path.display(), r.index + 1, r.count),
            None => format!("file:#{p}"),
        }
    }

    /// (path, planned size) of every split file, as checkpoints record them (empty unsplit).
    pub fn split_sizes(&self) -> Vec<(String, u64)> {
        if self.split <= 1 {
            return Vec::new();
        }
        self.paths
            .iter()
            .zip(&self.sizes)
            .map(|(p, s)| (p.display().to_string(), *s))
            .collect()
    }

    /// Per split file, its [`split_turns`], as checkpoints record them; empty when every file
    /// is read in one turn (contiguous ranges, as before stripes: such a checkpoint's manifest
    /// is the same as an older hotlist's).
    pub fn split_turns(&self) -> Vec<u64> {
        let turns: Vec<u64> = match self.split {
            0 | 1 => Vec::new(),
            n => self.sizes.iter().map(|s| split_turns(*s, n, self.stripe)).collect(),
        };
        if turns.iter().all(|t| *t == 1) {
            return Vec::new();
        }
        turns
    }
}

/// One range of a split file. The file is cut into `M = count · turns` stripes: stripe `j`
/// holds the lines that start in `[line_start(size·j/M), line_start(size·(j+1)/M))`, the last
/// stripe reading on to the end, and the ranges take them in turns: range `index` reads stripes
/// `index`, `index + count`, `index + 2·count`, … (see `source/file.rs`). With one turn, range
/// `i` is the `i`-th of `count` contiguous byte ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRange {
    /// Which range (from 0).
    pub index: u32,
    /// How many ranges the file is cut into.
    pub count: u32,
    /// The file's size the ranges are cut from.
    pub size: u64,
    /// How many stripes each range reads (at least 1; see [`split_turns`]).
    pub turns: u64,
}

impl FileRange {
    /// How many stripes the file is cut into.
    pub fn stripes(&self) -> u64 {
        u64::from(self.count.max(1)).saturating_mul(self.turns.max(1))
    }

    /// Where stripe `j` is cut: `size·j/M`, before moving on to a line start.
    pub fn hint(&self, j: u64) -> u64 {
        (u128::from(self.size) * u128::from(j) / u128::from(self.stripes())) as u64
    }
}

/// Connection settings of the Kafka source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSpec {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// The topic.
    pub topic: String,
    /// `group.id` (used only for lag monitoring tools; offsets are not committed).
    pub group_id: String,
    /// Read up to the end offsets at start, then end.
    pub bounded: bool,
    /// Start at the first message whose timestamp is at or after this (reprocessing from a
    /// point in time); `None`: the earliest offset.
    pub start_time: Option<Millis>,
    /// Extra librdkafka properties (security settings and the like).
    pub options: BTreeMap<String, String>,
    /// What to do when messages were lost before they were read (the topic was deleted and
    /// re-created, or retention deleted them).
    pub on_data_loss: OnDataLoss,
    /// How often a live run looks for partitions added to the topic (`None`: never; bounded
    /// runs read the partitions the topic had at start).
    pub partition_discovery: Option<Span>,
}

/// `source.on_data_loss`: what a Kafka partition does when the offset it must read next is no
/// longer in the partition (like Spark's `failOnDataLoss`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDataLoss {
    /// Stop the run with one line naming the partition and the gap (the default).
    Fail,
    /// Log the gap, count it in the metrics, and read on from the partition's first offset.
    Continue,
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
        /// The client's timeouts.
        timeouts: hotlist_sinks::postgres::PgTimeouts,
    },
    /// Redis (latest lists only: no history, no dead letters).
    Redis(RedisTarget),
    /// An in-memory store (tests and benchmarks).
    Memory(hotlist_sinks::MemoryStore),
}

/// Checkpoint settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointPlan {
    /// Base directory; checkpoints live in `dir/<job>/<epoch>/` (with `remote`: the local
    /// copy, written first and uploaded before each commit).
    pub dir: PathBuf,
    /// Checkpoint this often (`checkpoint.interval`, on the sources' clocks).
    pub every: Span,
    /// Checkpoints kept.
    pub retain: usize,
    /// `checkpoint.dir = "s3://bucket/prefix"`: the object store checkpoints are kept in.
    pub remote: Option<S3Target>,
}

/// An S3 bucket and prefix for checkpoints (`checkpoint.dir = "s3://bucket/prefix"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Target {
    /// The bucket.
    pub bucket: String,
    /// The key prefix (may be empty); checkpoints live under `prefix/<job>/<epoch>/`.
    pub prefix: String,
    /// The endpoint URL, if not AWS's.
    pub endpoint: Option<String>,
    /// The region.
    pub region: Option<String>,
    /// Whether a plain-HTTP endpoint is allowed.
    pub allow_http: bool,
}

impl S3Target {
    /// `s3://bucket/prefix` as written in the config.
    pub fn url(&self) -> String {
        match self.prefix.is_empty() {
            true => format!("s3://{}", self.bucket),
            false => format!("s3://{}/{}", self.bucket, self.prefix),
        }
    }
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
    /// An event whose `ts` is more than this ahead of its reference time (the Kafka message's
    /// timestamp; else the wall clock when its batch was read) is a `future` dead letter.
    pub max_future: Span,
}

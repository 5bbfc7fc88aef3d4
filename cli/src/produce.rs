//! `hotlist produce`: the generator writing to a Kafka topic, so a user can try the whole
//! pipeline (and tests can feed a real broker).
//!
//! Generator partition `p` goes to Kafka partition `p`, in order (partitions take turns, one
//! message each), so the same config written with `hotlist generate` gives exactly the files
//! that were produced. `--rate` paces it, for a producer writing while the job runs.
//! Single-event messages are keyed by item id; with `--batch N`, N newline-terminated events share one message (the
//! Kafka source reads a final newline as a terminator, not as an empty event).

use anyhow::{bail, Context, Result};
use hotlist_dataflow::config::{self, SourcePlan};
use hotlist_dataflow::generator::{GeneratorTables, PartitionStream};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arguments of `hotlist produce`.
#[derive(clap::Args, Debug)]
pub struct ProduceArgs {
    /// A config whose [source] is a bounded generator (source.events set).
    #[arg(long, short, default_value = "configs/local.toml")]
    pub config: PathBuf,
    /// Override a config key, e.g. --set source.events=100000 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Kafka bootstrap servers.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// The topic.
    #[arg(long, default_value = "events")]
    pub topic: String,
    /// Events per message (newline-separated).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Create the topic first with as many partitions as the generator has.
    #[arg(long)]
    pub create: bool,
    /// Pace to this many events per second (all partitions together); default: as fast as
    /// the broker takes them.
    #[arg(long, value_name = "EVENTS_PER_SEC", value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: Option<u64>,
}

/// Produces the generator's records.
pub fn produce(args: &ProduceArgs) -> Result<()> {
    let plan = config::load(
        &args.config,
        &config::Overrides {
            set: args.set.clone(),
            ..Default::default()
        },
    )?;
    let SourcePlan::Generator { spec, .. } = &plan.source else {
        bail!("produce needs [source] kind = \"generator\" (or --set source.kind=\"generator\")");
    };
    if spec.events.is_none() {
        bail!("produce needs a bounded generator: set source.events");
    }
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &args.brokers)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000");
    if args.create {
        create_topic(&cfg, &args.topic, spec.partitions)?;
    }
    let producer: BaseProducer = cfg.create().context("cannot create a Kafka producer")?;
    let tables = Arc::new(GeneratorTables::new(spec).map_err(anyhow::Error::msg)?);
    let streams: Vec<PartitionStream> = (0..spec.partitions)
        .map(|p| PartitionStream::new(spec, tables.clone(), p))
        .collect();
    let (messages, records) = produce_streams(&producer, args, streams)?;
    producer
        .flush(Duration::from_secs(60))
        .context("cannot flush the producer")?;
    println!(
        "produced {records} records in {messages} messages to {} on {}",
        args.topic, args.brokers
    );
    Ok(())
}

/// Creates `topic` with `partitions` partitions (one already there is fine).
fn create_topic(cfg: &ClientConfig, topic: &str, partitions: u32) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = cfg.create().context("cannot create a Kafka admin client")?;
    let topic = NewTopic::new(topic, partitions as i32, TopicReplication::Fixed(1));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("runtime")?;
    let results = rt
        .block_on(admin.create_topics(
            [&topic],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        ))
        .context("cannot create the topic")?;
    for r in results {
        if let Err((t, e)) = r {
            if e != rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists {
                bail!("cannot create topic {t}: {e}");
            }
        }
    }
    Ok(())
}

/// Sends every stream's records, one message per partition in turn, paced by `--rate`;
/// returns (messages, records).
fn produce_streams(producer: &BaseProducer, args: &ProduceArgs, streams: Vec<PartitionStream>) -> Result<(u64, u64)> {
    let mut streams: Vec<Option<PartitionStream>> = streams.into_iter().map(Some).collect();
    let (mut messages, mut records) = (0u64, 0u64);
    let (mut line, mut payload) = (Vec::new(), Vec::new());
    let started = Instant::now();
    // One message per partition in turn, so every partition's event time advances together
    // (a partition produced long after the others would look idle, then late).
    while streams.iter().any(Option::is_some) {
        for (p, slot) in streams.iter_mut().enumerate() {
            let Some(stream) = slot else { continue };
            payload.clear();
            let (in_payload, key) = next_message(stream, args.batch, &mut line, &mut payload);
            if in_payload < args.batch {
                *slot = None; // exhausted
            }
            if in_payload == 0 {
                continue;
            }
            send(producer, &args.topic, p as i32, key.as_deref(), &payload)?;
            messages += 1;
            records += in_payload as u64;
            producer.poll(Duration::ZERO);
            if let Some(rate) = args.rate {
                // paced: wait until the wall clock has caught up with the records sent so far
                let due = Duration::from_secs_f64(records as f64 / rate as f64);
                // (read the clock once per turn: it may pass `due` between two readings)
                while let Some(left) = due.checked_sub(started.elapsed()).filter(|d| !d.is_zero()) {
                    producer.poll(left);
                }
            }
        }
    }
    Ok((messages, records))
}

/// Fills `payload` with up to `batch` lines of `stream` (newline-terminated when `batch` > 1);
/// returns how many, and the key of a single-event message (its item id). Fewer than `batch`
/// means the stream is exhausted.
fn next_message(
    stream: &mut PartitionStream,
    batch: usize,
    line: &mut Vec<u8>,
    payload: &mut Vec<u8>,
) -> (usize, Option<String>) {
    let (mut in_payload, mut key) = (0, None);
    while in_payload < batch {
        line.clear();
        if !stream.next_line(line) {
            break;
        }
        payload.extend_from_slice(line);
        if batch > 1 {
            // every line ends with a newline: an empty last line stays an (empty) event
            payload.push(b'\n');
        } else {
            key = serde_json::from_slice::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["item_id"].as_str().map(String::from));
        }
        in_payload += 1;
    }
    (in_payload, key)
}

/// Queues one message, waiting while librdkafka's queue is full.
fn send(producer: &BaseProducer, topic: &str, partition: i32, key: Option<&str>, payload: &[u8]) -> Result<()> {
    loop {
        let mut rec = BaseRecord::<str, [u8]>::to(topic).partition(partition).payload(payload);
        if let Some(k) = key {
            rec = rec.key(k);
        }
        match producer.send(rec) {
            Ok(()) => return Ok(()),
            Err((e, _)) if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) => {
                producer.poll(Duration::from_millis(50));
            }
            Err((e, _)) => bail!("cannot produce to {topic}/{partition}: {e}"),
        }
    }
}

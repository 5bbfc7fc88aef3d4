//! Partitions added to a Kafka topic while a live job runs.
//!
//! One thread per process ([`PartitionWatch::start`]) asks the broker for the topic's partition
//! count every `source.partition_discovery` (default 10 s) and publishes it in an atomic. Each
//! worker's source ([`Growth`]) compares it with the partitions it knows at every activation
//! (one relaxed load) and opens readers for the new partitions it owns, by the same rule as at
//! start (partition `p` belongs to global worker `p % workers`), from their earliest offset: a
//! partition that did not exist at the last checkpoint has every message still to read. Only
//! then, and on the worker's thread, does opening cost a round trip to the broker.
//!
//! A partition count only grows (Kafka cannot remove partitions; a topic deleted and re-created
//! with fewer is the data-loss case of `kafka/data_loss.rs`). Bounded runs do not discover: they
//! read the partitions and offsets the topic had at start.

use super::{client_config, KafkaReader};
use crate::config::KafkaSpec;
use crate::source::{owns, Reader};
use hotlist_operators::record::PartitionId;
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The topic's partition count as the watch thread last saw it. The thread ends when this is
/// dropped (the end of the run).
pub struct PartitionWatch {
    count: Arc<AtomicU32>,
    _stop: crossbeam_channel::Sender<()>,
}

impl PartitionWatch {
    /// Starts watching `spec.topic`, which has `partitions` partitions now, every `every`.
    pub fn start(spec: &KafkaSpec, partitions: u32, every: Duration) -> PartitionWatch {
        let count = Arc::new(AtomicU32::new(partitions));
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let (shared, spec) = (count.clone(), spec.clone());
        let watch = move || {
            let consumer: BaseConsumer = match client_config(&spec).create() {
                Ok(c) => c,
                Err(e) => return tracing::warn!("kafka {}: cannot watch for new partitions: {e}", spec.topic),
            };
            // a message or a disconnected sender ends the watch; a timeout is the next look
            while let Err(crossbeam_channel::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let Some(n) = partition_count(&consumer, &spec.topic) else {
                    continue;
                };
                let before = shared.fetch_max(n, Relaxed);
                if n > before {
                    tracing::info!("kafka {}: the topic has {n} partitions now (was {before})", spec.topic);
                }
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("hotlist-partitions".into())
            .spawn(watch)
        {
            tracing::warn!("cannot start watching for new partitions: {e}");
        }
        PartitionWatch { count, _stop: stop }
    }

    /// The count, for the workers' sources.
    pub fn count(&self) -> Arc<AtomicU32> {
        self.count.clone()
    }
}

/// The topic's partition count now (`None`: no answer, or no such topic right now).
fn partition_count(consumer: &BaseConsumer, topic: &str) -> Option<u32> {
    let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)).ok()?;
    let t = md.topics().iter().find(|t| t.name() == topic && t.error().is_none())?;
    (!t.partitions().is_empty()).then_some(t.partitions().len() as u32)
}

/// One worker's side: the partitions it knows of, and opening the new ones it owns.
pub(in crate::source) struct Growth {
    /// The watch's count.
    count: Arc<AtomicU32>,
    /// Partitions `0..known` have been considered (opened here if this worker owns them).
    known: u32,
    worker: usize,
    workers: usize,
    spec: KafkaSpec,
    /// `source.max_record_bytes`, for the readers it opens.
    max_record_bytes: usize,
    /// After a failed open: not before this.
    retry_at: Option<Instant>,
}

impl Growth {
    /// Worker `worker` of `workers`, which knows the topic's first `known` partitions.
    pub(in crate::source) fn new(
        count: Arc<AtomicU32>,
        known: u32,
        (worker, workers): (usize, usize),
        spec: KafkaSpec,
        max_record_bytes: usize,
    ) -> Growth {
        Growth {
            count,
            known,
            worker,
            workers,
            spec,
            max_record_bytes,
            retry_at: None,
        }
    }

    /// Readers of the partitions added since the last call that this worker owns, at their
    /// earliest offsets. A partition that cannot be opened yet (the broker is away) is tried
    /// again 5 s later, and those after it wait for it.
    pub(in crate::source) fn new_readers(&mut self) -> Vec<(PartitionId, Reader)> {
        let n = self.count.load(Relaxed);
        if n <= self.known || self.retry_at.is_some_and(|t| Instant::now() < t) {
            return Vec::new();
        }
        let mut opened = Vec::new();
        while self.known < n {
            let p = self.known;
            if owns(p, self.worker, self.workers) {
                match KafkaReader::open(&self.spec, p, None, self.max_record_bytes) {
                    Ok(r) => {
                        tracing::info!(
                            "kafka {}/{p}: a new partition; reading it from offset {}",
                            self.spec.topic,
                            r.position()
                        );
                        opened.push((PartitionId(p), Reader::Kafka(Box::new(r))));
                    }
                    Err(e) => {
                        tracing::warn!(
                            "kafka {}/{p}: cannot open the new partition: {e:#} (retrying)",
                            self.spec.topic
                        );
                        self.retry_at = Some(Instant::now() + Duration::from_secs(5));
                        return opened;
                    }
                }
            }
            self.known += 1;
        }
        self.retry_at = None;
        opened
    }
}

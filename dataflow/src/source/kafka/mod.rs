//! The Kafka source: one partition of a topic per reader, assigned deterministically.
//!
//! Partition `p` of the topic is input partition `p`, read by global worker `p % workers`, with
//! manual assignment (no consumer-group rebalancing: ownership must not move under the
//! checkpoints). A message holds one event or several newline-separated ones; partition order
//! is message order, then line order. Positions are Kafka offsets: a checkpoint stores the next
//! offset to read, and a restore seeks there. Offsets are never committed to the broker
//! (the checkpoint is the truth). When the broker goes away, librdkafka reconnects by itself;
//! poll errors are logged (at most every 5 s) and the partition waits.
//!
//! Bounded runs read up to the end offsets the partitions had at start, then end.
//!
//! A message longer than `source.max_record_bytes` is one `too_large` record (its first 4 KiB
//! kept); librdkafka fetches it whole first (a message above `fetch.message.max.bytes` is still
//! fetched; one whose fetch response would exceed `receive.message.max.bytes`, 100 MB by
//! default, cannot be, and the partition waits with WARN lines; brokers refuse messages above
//! their `message.max.bytes`, 1 MB by default, anyway). Each record carries its message's
//! timestamp, the reference of the `time.max_future` rule.
//!
//! With a start time, a partition starts at the first message whose timestamp is at or after
//! it (Kafka's own definition of `offsetsForTimes`). The broker's answer is only used as the
//! place to start reading: messages before the first one at or after the start time are
//! skipped by timestamp, so the result is the same on brokers that answer imprecisely (tansu
//! answers offset 0) and after a restore from a checkpoint taken while still skipping.
//!
//! Messages that can no longer be read — the topic was deleted and re-created, or retention
//! deleted them before they were read — are found by `data_loss` (at a restore, and while
//! reading) and handled as `source.on_data_loss` says.
//!
//! Everything Kafka of the source lives in this folder: the reader (here), `data_loss`,
//! `discovery` (partitions added while the job runs), `resume` (a partition a bounded run
//! finished reads on in the next run) and `replay` (reading a range again by offset, for
//! `exact_at_seal`). Its settings are validated with the rest of the config
//! (`config/validate.rs`, into `config::KafkaSpec`).

mod data_loss;
pub mod discovery;
pub mod replay;
pub mod resume;

pub use data_loss::Lost;

use super::lines::RAW_HEAD_BYTES;
use super::{AfterRead, InMessage, PartitionReader, ReadStatus, Record};
use crate::config::KafkaSpec;
use anyhow::{anyhow, Context, Result};
use hotlist_operators::time::Millis;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

/// The client settings of every consumer of `spec`'s topic.
pub(super) fn client_config(spec: &KafkaSpec) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &spec.brokers)
        .set("group.id", &spec.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        // an offset out of range is reported to `read`, never skipped over by librdkafka
        .set("auto.offset.reset", "error");
    for (k, v) in &spec.options {
        c.set(k, v);
    }
    c
}

/// The number of partitions of the topic (asks the broker; retries for up to `timeout`).
pub fn partition_count(spec: &KafkaSpec, timeout: Duration) -> Result<u32> {
    let consumer: BaseConsumer = client_config(spec).create().context("cannot create a Kafka client")?;
    let deadline = Instant::now() + timeout;
    loop {
        let md = consumer.fetch_metadata(Some(&spec.topic), Duration::from_secs(5));
        match md {
            Ok(md) => {
                if let Some(t) = md.topics().iter().find(|t| t.name() == spec.topic) {
                    if !t.partitions().is_empty() {
                        return Ok(t.partitions().len() as u32);
                    }
                }
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(anyhow!(
                    "cannot read the metadata of topic {:?} from {}: {e}",
                    spec.topic,
                    spec.brokers
                ))
            }
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(anyhow!(
                "topic {:?} has no partitions on {} (does it exist?)",
                spec.topic,
                spec.brokers
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Where a partition starts for a start time: the broker's `offsetsForTimes` answer, clamped
/// to the partition's offsets (the end when no message is that new).
fn start_offset(consumer: &BaseConsumer, spec: &KafkaSpec, p: i32, t: Millis, low: i64, high: i64) -> Result<i64> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&spec.topic, p, Offset::Offset(t.0))
        .with_context(|| format!("cannot ask for the offset of {}/{p} at {t:?}", spec.topic))?;
    let found = consumer
        .offsets_for_times(tpl, Duration::from_secs(10))
        .with_context(|| format!("cannot look up the offset of {}/{p} at {t:?}", spec.topic))?;
    let offset = found
        .find_partition(&spec.topic, p)
        .map(|e| e.offset())
        .ok_or_else(|| anyhow!("the broker did not answer for {}/{p}", spec.topic))?;
    Ok(match offset {
        Offset::Offset(o) => o.clamp(low, high),
        Offset::End => high,
        _ => low,
    })
}

/// Reads one partition.
pub struct KafkaReader {
    consumer: BaseConsumer,
    topic: String,
    partition: i32,
    /// Next offset to read.
    next: i64,
    /// End offset for bounded runs.
    end: Option<i64>,
    last_error_log: Option<Instant>,
    /// Last known high watermark, and when it was last asked for.
    high: Option<i64>,
    high_checked: Option<Instant>,
    /// Skip messages older than this (ms) until the first one that is not.
    skip_before: Option<i64>,
    /// Messages skipped that way.
    skipped: u64,
    /// `source.max_record_bytes`: a longer message is one too-large record.
    max_record_bytes: usize,
    /// Messages lost before they were read: `source.on_data_loss` and what was found.
    loss: data_loss::LossWatch,
}

impl KafkaReader {
    /// Opens partition `partition`, starting at `from` (an offset) or the earliest offset;
    /// messages may be up to `max_record_bytes` long.
    pub fn open(spec: &KafkaSpec, partition: u32, from: Option<u64>, max_record_bytes: usize) -> Result<KafkaReader> {
        let consumer: BaseConsumer = client_config(spec).create().context("cannot create a Kafka consumer")?;
        let p = partition as i32;
        let (low, high) = consumer
            .fetch_watermarks(&spec.topic, p, Duration::from_secs(10))
            .with_context(|| format!("cannot read the offsets of {}/{p}", spec.topic))?;
        let next = match (from, spec.start_time) {
            (Some(o), _) => o as i64,
            (None, None) => low,
            (None, Some(t)) => start_offset(&consumer, spec, p, t, low, high)?,
        };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&spec.topic, p, Offset::Offset(next))
            .with_context(|| format!("cannot seek {}/{p} to {next}", spec.topic))?;
        consumer
            .assign(&tpl)
            .with_context(|| format!("cannot assign {}/{p}", spec.topic))?;
        Ok(KafkaReader {
            consumer,
            topic: spec.topic.clone(),
            partition: p,
            next,
            end: spec.bounded.then_some(high),
            last_error_log: None,
            high: Some(high),
            high_checked: Some(Instant::now()),
            skip_before: spec.start_time.map(|t| t.0),
            skipped: 0,
            max_record_bytes,
            loss: data_loss::LossWatch::new(spec.on_data_loss),
        })
    }

    /// Moves to a checkpoint's `offset`, or, when the partition no longer holds it (data loss
    /// that `source.on_data_loss` accepts), to the partition's first offset. Returns the offset
    /// it moved to; a loss that is not accepted is the error.
    pub fn seek(&mut self, offset: u64) -> Result<u64> {
        let offset = self.checked_resume_offset(offset as i64)?;
        self.assign_at(offset)?;
        Ok(offset as u64)
    }

    /// Reads on from `offset`.
    fn assign_at(&mut self, offset: i64) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, self.partition, Offset::Offset(offset))
            .with_context(|| format!("cannot seek {}/{} to {offset}", self.topic, self.partition))?;
        self.consumer
            .assign(&tpl)
            .with_context(|| format!("cannot assign {}/{}", self.topic, self.partition))?;
        self.next = offset;
        Ok(())
    }

    /// Consumer lag: the partition's high watermark minus the next offset to read. The high
    /// watermark comes from librdkafka's cache when it has one (no I/O), else from a short
    /// request (≤ 100 ms) made at most every 5 s; `None` until one succeeded.
    pub fn lag(&mut self) -> Option<u64> {
        if let Some((_, high)) = self.cached_watermarks() {
            self.high = Some(high);
            if high < self.next {
                self.check_end(); // the partition ends before the next offset: re-created?
            }
        } else if self.high_checked.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
            self.high_checked = Some(Instant::now());
            if let Ok((_, h)) = self
                .consumer
                .fetch_watermarks(&self.topic, self.partition, Duration::from_millis(100))
            {
                self.high = Some(h);
            }
        }
        self.high.map(|h| (h - self.next).max(0) as u64)
    }

    /// The next offset to read.
    pub fn position(&self) -> u64 {
        self.next.max(0) as u64
    }

    /// Reads up to `budget` messages; each line of a message is one record at the message's
    /// offset (with its line number in the message).
    pub fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        if self.loss.failed() {
            return ReadStatus::Waiting; // the run is failing: read nothing past the gap
        }
        if self.end.is_some_and(|e| self.next >= e) {
            return ReadStatus::Ended;
        }
        let mut n = 0;
        while n < budget {
            match self.consumer.poll(Duration::ZERO) {
                None => break,
                Some(Ok(msg)) => {
                    let offset = msg.offset();
                    if offset < self.next {
                        continue; // a duplicate delivery after a seek: already read
                    }
                    let jump = (self.next, offset);
                    if offset > self.next
                        && !data_loss::check_jump(&self.consumer, &self.topic, self.partition, jump, &mut self.loss)
                    {
                        break; // messages were lost before they were read: the run fails
                    }
                    if let Some(end) = self.end {
                        if offset >= end {
                            self.next = end;
                            break;
                        }
                    }
                    if let Some(t) = self.skip_before {
                        if msg.timestamp().to_millis().is_some_and(|ts| ts < t) {
                            self.skipped += 1;
                            self.next = offset + 1;
                            continue;
                        }
                        // the first message at or after the start time
                        self.skip_before = None;
                        tracing::info!(
                            "kafka {}/{}: starting at offset {offset} ({} older messages skipped)",
                            self.topic,
                            self.partition,
                            self.skipped
                        );
                    }
                    n += records_of(&msg, self.max_record_bytes, f);
                    self.next = offset + 1;
                }
                Some(Err(e)) if data_loss::is_offset_out_of_range(&e) => {
                    self.check_out_of_range();
                    break;
                }
                Some(Err(e)) => {
                    if self.last_error_log.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                        tracing::warn!("kafka {}/{}: {e} (retrying)", self.topic, self.partition);
                        self.last_error_log = Some(Instant::now());
                    }
                    break;
                }
            }
        }
        if n > 0 {
            ReadStatus::Read(n)
        } else if self.end.is_some_and(|e| self.next >= e) {
            ReadStatus::Ended
        } else {
            ReadStatus::Waiting
        }
    }
}

/// Hands the records of one message to `f`: each line of it (a message may hold several
/// events), or the whole message as one too-large record. Returns how many.
fn records_of<M: Message>(msg: &M, max_record_bytes: usize, f: &mut impl FnMut(Record<'_>)) -> usize {
    let payload = msg.payload().unwrap_or_default();
    let at = |line| InMessage {
        offset: msg.offset() as u64,
        timestamp: msg.timestamp().to_millis().map(Millis),
        line,
    };
    if payload.len() > max_record_bytes {
        let head = &payload[..payload.len().min(RAW_HEAD_BYTES)];
        f(Record::TooLarge {
            head,
            len: payload.len() as u64,
            at: Some(at(0)),
        });
        return 1;
    }
    let mut lines = payload.split(|b| *b == b'\n').peekable();
    let mut number = 0u32;
    while let Some(line) = lines.next() {
        // a trailing newline ends the last event; it is not an empty event
        if line.is_empty() && lines.peek().is_none() && !payload.is_empty() {
            break;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        number = number.saturating_add(1);
        f(Record::LineAt(line, at(number)));
    }
    number as usize
}

impl PartitionReader for KafkaReader {
    #[inline]
    fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        KafkaReader::read(self, budget, f)
    }

    fn resume_at(&mut self, position: u64) -> Result<u64> {
        self.seek(position)
    }

    fn can_idle(&self) -> bool {
        true
    }

    fn positions_are_offsets(&self) -> bool {
        true
    }

    /// Its position is the next offset to read; its consumer lag, and any data loss it found.
    fn after_read(&mut self) -> Option<AfterRead> {
        Some(AfterRead {
            position: self.position(),
            lag: self.lag(),
            lost: self.take_lost(),
            failure: self.take_failure(),
        })
    }
}

//! Messages a Kafka partition lost before they were read, and `source.on_data_loss`.
//!
//! A partition holds the offsets from its low watermark (the first offset the broker still
//! has; retention moves it up) to its high watermark (the next offset to be written). When the
//! offset to read next is outside that range, messages were lost:
//! - **below the low watermark**: retention (or a `DeleteRecords`) removed them before they were
//!   read — how many is known;
//! - **beyond the high watermark**: the partition's offsets started again — the topic was
//!   deleted and re-created (or its log truncated) — and how many messages the new partition
//!   had before reaching the old offset is unknown.
//!
//! Where it is found: at a restore (the checkpoint's offset against the partition's watermarks,
//! [`KafkaReader::seek`]); while reading, when librdkafka reports the fetch offset out of range
//! (`auto.offset.reset = error`), when a fetch jumps forward past the low watermark (brokers that
//! answer an out-of-range fetch with later messages), and when the partition's end falls below
//! the next offset (brokers that answer it with nothing). A forward jump within the partition is
//! not a loss: compaction and transaction markers leave such gaps in the offsets.
//!
//! What then ([`OnDataLoss`]): `fail` (the default) stops the run with one line naming the
//! partition and the gap; `continue` logs the same line, counts the gap in the partition's
//! metrics and reads on from the partition's first offset. [`gap`] is the decision, a pure
//! function of the offsets.

use super::KafkaReader;
use crate::config::OnDataLoss;
use anyhow::{anyhow, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::time::{Duration, Instant};

/// Messages that can no longer be read at some position of a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gap {
    /// The partition's offsets start again below `position`: it ends at `end`.
    Restarted {
        /// The offset that was to be read next.
        position: i64,
        /// The partition's high watermark.
        end: i64,
    },
    /// Offsets `from..to` were deleted before they were read: the partition starts at `to`.
    Deleted {
        /// The offset that was to be read next.
        from: i64,
        /// The partition's low watermark.
        to: i64,
    },
}

/// Whether reading at `position` of a partition whose offsets are `low..high` lost messages.
pub fn gap(position: i64, low: i64, high: i64) -> Option<Gap> {
    if position > high {
        Some(Gap::Restarted { position, end: high })
    } else if position < low {
        Some(Gap::Deleted {
            from: position,
            to: low,
        })
    } else {
        None
    }
}

/// Where a gap was found (for its line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// At a restore: the position is the checkpoint's.
    Restore,
    /// While reading.
    Reading,
}

impl Gap {
    /// Messages lost, where known (a re-created partition's are not).
    pub fn messages(&self) -> Option<u64> {
        match *self {
            Gap::Restarted { .. } => None,
            Gap::Deleted { from, to } => Some((to - from) as u64),
        }
    }

    /// What happened, naming the partition and the gap (no trailing period).
    pub fn describe(&self, name: &str, found: Found) -> String {
        match (*self, found) {
            (Gap::Restarted { position, end }, Found::Restore) => format!(
                "{name}: the checkpoint's offset {position} is beyond the partition's end {end} (the topic was deleted and re-created?)"
            ),
            (Gap::Restarted { position, end }, Found::Reading) => format!(
                "{name}: the next offset to read, {position}, is beyond the partition's end {end} (the topic was deleted and re-created?)"
            ),
            (Gap::Deleted { from, to }, _) => format!(
                "{name}: messages {from}..{} were deleted by retention before they were read (the partition now starts at {to})",
                to - 1
            ),
        }
    }
}

/// Lost messages accepted with `on_data_loss = "continue"`, for the partition's metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Gaps.
    pub gaps: u64,
    /// Messages known to be lost in them.
    pub messages: u64,
}

/// A reader's policy and what it found.
#[derive(Debug)]
pub(super) struct LossWatch {
    policy: OnDataLoss,
    /// Accepted, not yet taken into the metrics.
    lost: Lost,
    /// A loss that fails the run: set once found (the reader then reads nothing more).
    failed: bool,
    /// Its line, until the source takes it to fail the run.
    failure: Option<String>,
    /// When the partition's end was last confirmed to lie below the next offset (at most every 5 s).
    end_checked: Option<Instant>,
}

impl LossWatch {
    pub(super) fn new(policy: OnDataLoss) -> LossWatch {
        LossWatch {
            policy,
            lost: Lost::default(),
            failed: false,
            failure: None,
            end_checked: None,
        }
    }

    /// Whether a loss failed the run (the reader reads nothing more).
    pub(super) fn failed(&self) -> bool {
        self.failed
    }

    /// Records a loss that fails the run.
    fn fail(&mut self, line: String) {
        self.failed = true;
        self.failure = Some(line);
    }

    /// Applies the policy to `gap`: `Ok` with the offset to read on from (`low`, logged and
    /// counted), or `Err` with the line that fails the run.
    fn apply(&mut self, gap: Gap, name: &str, found: Found, low: i64) -> Result<i64, String> {
        let what = gap.describe(name, found);
        match self.policy {
            OnDataLoss::Fail => Err(format!(
                "{what}; stopping (set source.on_data_loss = \"continue\" to accept the loss and read on from offset {low})"
            )),
            OnDataLoss::Continue => {
                tracing::warn!("{what}; reading on from offset {low} (source.on_data_loss = \"continue\")");
                self.lost.gaps += 1;
                self.lost.messages += gap.messages().unwrap_or(0);
                Ok(low)
            }
        }
    }
}

/// Whether a consumer error says the fetch offset is out of range.
pub(super) fn is_offset_out_of_range(e: &KafkaError) -> bool {
    matches!(
        e,
        KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange)
    )
}

/// A message at `offset` of `topic`/`partition` came after `next`, the offset expected: whether
/// to read it (no loss, or one `loss` accepts). A free function, as the message still borrows
/// the reader's consumer.
pub(super) fn check_jump(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
    (next, offset): (i64, i64),
    loss: &mut LossWatch,
) -> bool {
    Partition {
        consumer,
        topic,
        partition,
    }
    .check_jump(next, offset, loss)
}

/// One partition of a topic, as the checks below ask the broker about it.
struct Partition<'a> {
    consumer: &'a BaseConsumer,
    topic: &'a str,
    partition: i32,
}

impl Partition<'_> {
    /// `kafka:T/P`, as dead letters name the partition.
    fn name(&self) -> String {
        format!("kafka:{}/{}", self.topic, self.partition)
    }

    /// The partition's low and high watermarks, asked from the broker.
    fn watermarks(&self, timeout: Duration) -> Result<(i64, i64)> {
        self.consumer
            .fetch_watermarks(self.topic, self.partition, timeout)
            .map_err(|e| anyhow!("cannot read the offsets of {}/{}: {e}", self.topic, self.partition))
    }

    /// librdkafka's cached watermarks (from fetch responses; no I/O): `None` without a high
    /// watermark; the low one is negative when the broker did not send it.
    fn cached_watermarks(&self) -> Option<(i64, i64)> {
        let topic = std::ffi::CString::new(self.topic).ok()?;
        let (mut low, mut high) = (-1i64, -1i64);
        // SAFETY: the client pointer is valid for the consumer's lifetime; the topic is a valid
        // C string; librdkafka only writes the two out-parameters (from its cache, no I/O).
        let err = unsafe {
            rdkafka::bindings::rd_kafka_get_watermark_offsets(
                self.consumer.client().native_ptr(),
                topic.as_ptr(),
                self.partition,
                &mut low,
                &mut high,
            )
        };
        (err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some((low, high))
    }

    /// A message at `offset` after `next`: a gap only if the partition now starts after `next`
    /// (by librdkafka's cached low watermark, else the broker's). Returns whether to read it.
    fn check_jump(&self, next: i64, offset: i64, loss: &mut LossWatch) -> bool {
        let low = match self.cached_watermarks() {
            Some((low, _)) if low >= 0 => low,
            _ => match self.watermarks(Duration::from_secs(1)) {
                Ok((low, _)) => low,
                Err(_) => return true, // cannot tell: a gap in the offsets, as compaction leaves
            },
        };
        let Some(g) = gap(next, low.min(offset), i64::MAX) else {
            return true;
        };
        match loss.apply(g, &self.name(), Found::Reading, low) {
            Ok(_) => true,
            Err(line) => {
                loss.fail(line);
                false
            }
        }
    }
}

impl KafkaReader {
    fn at(&self) -> Partition<'_> {
        Partition {
            consumer: &self.consumer,
            topic: &self.topic,
            partition: self.partition,
        }
    }

    /// Where to resume a checkpoint's `offset`: there, or (a loss the policy accepts) at the
    /// partition's first offset; a loss it does not accept is the error.
    pub(super) fn checked_resume_offset(&mut self, offset: i64) -> Result<i64> {
        let at = self.at();
        let (low, high) = at.watermarks(Duration::from_secs(10))?;
        let Some(g) = gap(offset, low, high) else {
            return Ok(offset);
        };
        let name = at.name();
        self.loss
            .apply(g, &name, Found::Restore, low)
            .map_err(|line| anyhow!(line))
    }

    /// While reading: the next offset is not in the partition's `low..high`. Accepted: reads on
    /// from `low`; refused: the run fails.
    fn on_gap(&mut self, g: Gap, low: i64) {
        let name = self.at().name();
        match self.loss.apply(g, &name, Found::Reading, low) {
            Ok(at) => {
                if let Err(e) = self.assign_at(at) {
                    tracing::warn!("{name}: {e:#} (retrying)");
                }
            }
            Err(line) => self.loss.fail(line),
        }
    }

    /// librdkafka says the next offset is out of range: ask the broker where the partition is
    /// now and treat the gap (fetch again if the offset is in range after all).
    pub(super) fn check_out_of_range(&mut self) {
        match self.at().watermarks(Duration::from_secs(1)) {
            Ok((low, high)) => match gap(self.next, low, high) {
                Some(g) => self.on_gap(g, low),
                None => {
                    let _ = self.assign_at(self.next);
                }
            },
            Err(e) => tracing::warn!("{e:#} (retrying)"),
        }
    }

    /// The partition's high watermark (from librdkafka's cache) is below the next offset:
    /// confirmed by the broker (at most every 5 s), the partition started again.
    pub(super) fn check_end(&mut self) {
        if self
            .loss
            .end_checked
            .is_some_and(|t| t.elapsed() < Duration::from_secs(5))
        {
            return;
        }
        self.loss.end_checked = Some(Instant::now());
        if let Ok((low, high)) = self.at().watermarks(Duration::from_secs(1)) {
            if let Some(g @ Gap::Restarted { .. }) = gap(self.next, low, high) {
                self.on_gap(g, low);
            }
        }
    }

    /// librdkafka's cached watermarks of the partition (no I/O; see `Partition`).
    pub(super) fn cached_watermarks(&self) -> Option<(i64, i64)> {
        self.at().cached_watermarks()
    }

    /// Lost messages accepted since the last call (for the partition's metrics).
    pub fn take_lost(&mut self) -> Lost {
        std::mem::take(&mut self.loss.lost)
    }

    /// The line of a loss that fails the run, once (the reader reads nothing more).
    pub fn take_failure(&mut self) -> Option<String> {
        self.loss.failure.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checkpoint's offset against the partition's watermarks: inside (the ends included)
    /// nothing is lost; beyond the end the topic started again; below the start retention
    /// deleted what was not read.
    #[test]
    fn the_offset_against_the_watermarks() {
        assert_eq!(gap(5, 0, 10), None);
        assert_eq!(gap(0, 0, 10), None);
        assert_eq!(gap(10, 0, 10), None, "at the end: nothing new yet");
        assert_eq!(gap(10, 10, 10), None, "an empty partition after retention");
        assert_eq!(gap(667, 0, 34), Some(Gap::Restarted { position: 667, end: 34 }));
        assert_eq!(gap(1, 0, 0), Some(Gap::Restarted { position: 1, end: 0 }));
        assert_eq!(gap(667, 700, 1000), Some(Gap::Deleted { from: 667, to: 700 }));
        assert_eq!(gap(0, 5, 5), Some(Gap::Deleted { from: 0, to: 5 }));
        assert_eq!(Gap::Deleted { from: 667, to: 700 }.messages(), Some(33));
        assert_eq!(Gap::Restarted { position: 667, end: 34 }.messages(), None);
    }

    #[test]
    fn lines_name_the_partition_and_the_gap() {
        let restarted = Gap::Restarted { position: 667, end: 34 };
        assert_eq!(
            restarted.describe("kafka:events/0", Found::Restore),
            "kafka:events/0: the checkpoint's offset 667 is beyond the partition's end 34 (the topic was deleted and re-created?)"
        );
        assert!(restarted
            .describe("kafka:events/0", Found::Reading)
            .starts_with("kafka:events/0: the next offset to read, 667, is beyond the partition's end 34"));
        assert_eq!(
            Gap::Deleted { from: 667, to: 700 }.describe("kafka:t/2", Found::Reading),
            "kafka:t/2: messages 667..699 were deleted by retention before they were read (the partition now starts at 700)"
        );
    }

    /// `fail` refuses with the line; `continue` reads on from the first offset and counts.
    #[test]
    fn the_policy_fails_or_counts() {
        let g = Gap::Deleted { from: 3, to: 10 };
        let mut fail = LossWatch::new(OnDataLoss::Fail);
        let line = fail.apply(g, "kafka:t/0", Found::Restore, 10).unwrap_err();
        assert!(
            line.contains("messages 3..9") && line.contains("source.on_data_loss = \"continue\""),
            "{line}"
        );
        assert_eq!(fail.lost, Lost::default());
        let mut cont = LossWatch::new(OnDataLoss::Continue);
        assert_eq!(cont.apply(g, "kafka:t/0", Found::Reading, 10), Ok(10));
        let restarted = Gap::Restarted { position: 50, end: 4 };
        assert_eq!(cont.apply(restarted, "kafka:t/0", Found::Restore, 0), Ok(0));
        assert_eq!(cont.lost, Lost { gaps: 2, messages: 7 });
    }
}

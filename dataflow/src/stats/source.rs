//! The source's counters: records read, valid, bad and late events, blank lines, per input partition and
//! in all, and each partition's watermark, status and Kafka lag and data loss.

use crate::metrics::{self, Metrics};
use hotlist_operators::time::Millis;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

/// Counters of the source (and of the dead letters the window count finds).
#[derive(Debug)]
pub struct SourceStats {
    /// Records read (events and bad records).
    pub records_in: AtomicU64,
    /// Valid events read.
    pub events_in: AtomicU64,
    /// Bad records (dead-lettered).
    pub bad: AtomicU64,
    /// Blank lines (empty or whitespace only): skipped, not dead-lettered.
    pub blank: AtomicU64,
    /// Records the UDF filter dropped: counted, not dead-lettered.
    pub filtered: AtomicU64,
    /// Events late for at least one window (dead-lettered with reason `late`).
    pub late: AtomicU64,
    /// Events late for every window they belong to (counted nowhere).
    pub late_dropped: AtomicU64,
    /// Per input partition: records, events, bad, late, watermark (ms), lag, data loss.
    pub partitions: PartitionTable,
}

impl SourceStats {
    /// Zeroed counters for `partitions` input partitions.
    pub fn new(partitions: usize) -> SourceStats {
        SourceStats {
            records_in: AtomicU64::new(0),
            events_in: AtomicU64::new(0),
            bad: AtomicU64::new(0),
            blank: AtomicU64::new(0),
            filtered: AtomicU64::new(0),
            late: AtomicU64::new(0),
            late_dropped: AtomicU64::new(0),
            partitions: PartitionTable::new(partitions),
        }
    }

    /// Registers the per-partition series (`names[p]` names partition `p`) and the late drops.
    pub fn register(&self, m: &Metrics, names: &[String]) {
        self.register_partition_counters(m, names);
        self.register_partition_gauges(m);
        m.scalar(
            "hotlist_late_dropped_total",
            "events late for every window they belong to",
            self.late_dropped.load(Relaxed) as i64,
        );
    }

    /// Records, events, bad and late counts per partition, labelled with the partition's source.
    fn register_partition_counters(&self, m: &Metrics, names: &[String]) {
        type Field = fn(&PartitionStats) -> &AtomicU64;
        let per_part: [(&str, &str, Field); 8] = [
            ("hotlist_records_total", "records read per partition", |ps| &ps.records),
            ("hotlist_events_total", "valid events per partition", |ps| &ps.events),
            (
                "hotlist_bad_records_total",
                "bad records per partition (dead-lettered)",
                |ps| &ps.bad,
            ),
            (
                "hotlist_blank_lines_total",
                "blank lines (empty or whitespace only) per partition: skipped, not dead-lettered",
                |ps| &ps.blank,
            ),
            (
                "hotlist_filtered_total",
                "records the UDF filter (source.format.filter) dropped, per partition: counted, not dead-lettered",
                |ps| &ps.filtered,
            ),
            (
                "hotlist_late_events_total",
                "events late for some window, per partition (dead-lettered)",
                |ps| &ps.late,
            ),
            (
                "hotlist_data_loss_total",
                "Kafka: data loss accepted with source.on_data_loss = \"continue\" (re-created topic, retention), per partition",
                |ps| &ps.data_loss,
            ),
            (
                "hotlist_data_loss_messages_total",
                "Kafka: messages known to be lost in those gaps, per partition",
                |ps| &ps.data_loss_messages,
            ),
        ];
        for (name, help, field) in per_part {
            let c = metrics::int_counter_vec(name, help, &["partition", "source"]);
            m.add(c.clone());
            for (p, ps) in self.partitions.all().iter().enumerate() {
                c.with_label_values(&[&p.to_string(), names.get(p).map(String::as_str).unwrap_or("")])
                    .inc_by(field(ps).load(Relaxed));
            }
        }
    }

    /// Per partition: watermark and its lag behind the wall clock (once it has one), status, and
    /// the Kafka consumer lag (where known).
    fn register_partition_gauges(&self, m: &Metrics) {
        let wm = metrics::gauge_vec(
            "hotlist_partition_watermark_seconds",
            "partition watermark",
            &["partition"],
        );
        let lag = metrics::gauge_vec(
            "hotlist_partition_watermark_lag_seconds",
            "wall clock minus partition watermark",
            &["partition"],
        );
        let status = metrics::int_gauge_vec(
            "hotlist_partition_status",
            "0 active, 1 idle, 2 finished",
            &["partition"],
        );
        let consumer_lag = metrics::int_gauge_vec(
            "hotlist_partition_consumer_lag",
            "Kafka: high watermark minus the next offset to read",
            &["partition"],
        );
        let now = Millis::now().0 as f64 / 1000.0;
        for (p, ps) in self.partitions.all().iter().enumerate() {
            let w = ps.watermark.load(Relaxed);
            let label = p.to_string();
            status.with_label_values(&[&label]).set(ps.status.load(Relaxed) as i64);
            if w != i64::MIN && w != i64::MAX {
                wm.with_label_values(&[&label]).set(w as f64 / 1000.0);
                lag.with_label_values(&[&label]).set(now - w as f64 / 1000.0);
            }
            let l = ps.lag.load(Relaxed);
            if l >= 0 {
                consumer_lag.with_label_values(&[&label]).set(l);
            }
        }
        m.add(wm);
        m.add(lag);
        m.add(status);
        m.add(consumer_lag);
    }
}
/// Counters of one input partition.
#[derive(Debug, Default)]
pub struct PartitionStats {
    /// Records read.
    pub records: AtomicU64,
    /// Valid events.
    pub events: AtomicU64,
    /// Bad records.
    pub bad: AtomicU64,
    /// Blank lines.
    pub blank: AtomicU64,
    /// Records the UDF filter dropped.
    pub filtered: AtomicU64,
    /// Events late for some window.
    pub late: AtomicU64,
    /// Partition watermark (ms; `i64::MIN` before any event), as the merger last saw it.
    pub watermark: AtomicI64,
    /// Idle (1) or not (0), finished (2).
    pub status: AtomicU64,
    /// Kafka consumer lag in messages (-1: unknown or not Kafka).
    pub lag: AtomicI64,
    /// Kafka: gaps accepted with `source.on_data_loss = "continue"` (a re-created topic,
    /// messages deleted by retention before they were read).
    pub data_loss: AtomicU64,
    /// Kafka: messages known to be lost in those gaps (a re-created topic's are unknown).
    pub data_loss_messages: AtomicU64,
}

impl PartitionStats {
    fn new() -> PartitionStats {
        PartitionStats {
            watermark: AtomicI64::new(i64::MIN),
            lag: AtomicI64::new(-1),
            ..Default::default()
        }
    }
}

/// The counters of every input partition, by partition id. It grows when partitions are added
/// to a Kafka topic while the job runs; a partition's counters, once there, stay at their place.
#[derive(Debug, Default)]
pub struct PartitionTable(RwLock<Vec<Arc<PartitionStats>>>);

impl PartitionTable {
    /// Counters for partitions `0..n`.
    pub fn new(n: usize) -> PartitionTable {
        PartitionTable(RwLock::new((0..n).map(|_| Arc::new(PartitionStats::new())).collect()))
    }

    /// Partition `p`'s counters, if it is known.
    pub fn get(&self, p: u32) -> Option<Arc<PartitionStats>> {
        self.0.read().ok()?.get(p as usize).cloned()
    }

    /// Partition `p`'s counters, adding them (and those of any partition below it) if needed.
    pub fn get_or_add(&self, p: u32) -> Option<Arc<PartitionStats>> {
        if let Some(ps) = self.get(p) {
            return Some(ps);
        }
        let mut all = self.0.write().ok()?;
        while all.len() <= p as usize {
            all.push(Arc::new(PartitionStats::new()));
        }
        all.get(p as usize).cloned()
    }

    /// How many partitions have counters.
    pub fn len(&self) -> usize {
        self.0.read().map_or(0, |all| all.len())
    }

    /// Whether no partition has counters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every partition's counters, by partition id.
    pub fn all(&self) -> Vec<Arc<PartitionStats>> {
        self.0.read().map(|all| all.clone()).unwrap_or_default()
    }
}

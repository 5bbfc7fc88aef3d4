//! Plain records that travel between the operators of the job and into the sinks: ids, events,
//! partition and list states, ranked items, dead letters.
//!
//! A leaf: it imports no feature module. The records that carry a feature's payload (control
//! records, per-worker and published lists) are in `message`.

use crate::time::Millis;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// An item id. Ids of up to 24 bytes are stored inline (no allocation per event).
pub type ItemId = CompactString;

/// One input partition (a file, a generator stream, a Kafka partition), numbered densely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionId(pub u32);

mod event_text;
pub use event_text::{EventText, KeyedText, TextParts};

/// An accepted event on its way to the window counter (64 bytes: one cache line).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedEvent {
    /// The item id, and the user and dim values for jobs with per-group or distinct-user
    /// windows (in one string: see `EventText`).
    pub text: EventText,
    /// Event time.
    pub ts: Millis,
    /// The partition watermark as it was *before* this event was read: the only input to the
    /// lateness rule, which is why results do not depend on timing.
    pub wm_before: Millis,
    /// `hash::item_hash(item)`, computed once at the source.
    pub hash: u64,
    /// Where the event came from (for dead letters raised after the exchange).
    pub partition: PartitionId,
    /// Position within the partition (line number, sequence number or offset).
    pub position: u64,
}

const _: () = assert!(std::mem::size_of::<TimedEvent>() == 64, "an event is one cache line");

impl TimedEvent {
    /// The item id.
    #[inline(always)]
    pub fn item(&self) -> &str {
        self.text.item_id()
    }
}

/// The state of a partition as its source reports it at the end of an epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionStatus {
    /// Producing events; holds the global watermark back.
    Active,
    /// No events for longer than `idle_timeout`; does not hold the global watermark back.
    Idle,
    /// Ended (bounded input); its watermark is +∞.
    Finished,
}

/// A ranked entry of a top-K list.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RankedItem {
    /// The item id.
    pub item_id: ItemId,
    /// Its exact count in the window instance.
    pub count: u64,
    /// A trend window's list: the item's counts before (see `trend`); `None` in count-ranked
    /// lists.
    pub trend: Option<TrendFacts>,
}

impl RankedItem {
    /// An item of a count-ranked list.
    pub fn counted(item_id: impl Into<ItemId>, count: u64) -> RankedItem {
        RankedItem {
            item_id: item_id.into(),
            count,
            trend: None,
        }
    }

    /// `S`, the item's baseline sum, in a trend list.
    pub fn baseline(&self) -> Option<u64> {
        self.trend.as_ref().map(TrendFacts::baseline)
    }
}

/// `#[serde(with = "counted_items")]`: a list stored as (item, count) pairs, the layout
/// [`RankedItem`] had before trend lists, for the snapshots that never hold a trend list
/// (sketch candidates): their files keep one layout across format versions.
pub mod counted_items {
    use super::{ItemId, RankedItem};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes `(item, count)` pairs.
    pub fn serialize<S: Serializer>(items: &[RankedItem], s: S) -> Result<S::Ok, S::Error> {
        let pairs: Vec<(&ItemId, u64)> = items.iter().map(|r| (&r.item_id, r.count)).collect();
        pairs.serialize(s)
    }

    /// Reads `(item, count)` pairs.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RankedItem>, D::Error> {
        let pairs: Vec<(ItemId, u64)> = Vec::deserialize(d)?;
        Ok(pairs
            .into_iter()
            .map(|(id, count)| RankedItem::counted(id, count))
            .collect())
    }
}

/// What a trend list says of one item beyond its count: its counts in the `W` instances
/// before the listed one, oldest first (`W` = the history's length). See `trend`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrendFacts {
    /// Its counts in instances *i−W … i−1*, oldest first.
    pub history: Vec<u64>,
}

impl TrendFacts {
    /// `S`: the sum of the history.
    pub fn baseline(&self) -> u64 {
        self.history.iter().fold(0u64, |s, c| s.saturating_add(*c))
    }
}

/// Which of a worker's counters computed a `message::LocalList` (a `both` window gets one of each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListSource {
    /// The exact pane counter.
    PaneCounter,
    /// The sketch counter.
    SketchCounter {
        /// The events this worker counted in the instance.
        events: u64,
        /// Whether its counts are exact (an `auto` instance that has not folded).
        exact: bool,
    },
}

/// Where a window instance stands relative to the global watermark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ListState {
    /// The watermark has not reached the window end: a provisional list.
    Open,
    /// The watermark passed the end; late events may still correct it.
    Closed,
    /// The watermark passed end + allowed_lateness: sealed, never changes again.
    Final,
}

impl ListState {
    /// Lower-case name, as stored in sinks.
    pub fn as_str(self) -> &'static str {
        match self {
            ListState::Open => "open",
            ListState::Closed => "closed",
            ListState::Final => "final",
        }
    }

    /// Parses `as_str` output.
    pub fn parse(s: &str) -> Option<ListState> {
        match s {
            "open" => Some(ListState::Open),
            "closed" => Some(ListState::Closed),
            "final" => Some(ListState::Final),
            _ => None,
        }
    }
}

/// How a sketch's top-K list compared with the exact one for the same instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SketchCheck {
    /// Items of the exact top-K that are also in the sketch's top-K.
    pub found: u32,
    /// Items in the exact top-K (recall@K = `found / of`).
    pub of: u32,
    /// The largest (sketch count − exact count) over the sketch's list.
    pub max_overcount: u64,
    /// The sum of (sketch count − exact count) over the sketch's list (mean = `/ of`).
    pub total_overcount: u64,
}

impl SketchCheck {
    /// recall@K: the share of the exact top-K the sketch found (1 for an empty list).
    pub fn recall(&self) -> f64 {
        if self.of == 0 {
            1.0
        } else {
            f64::from(self.found) / f64::from(self.of)
        }
    }

    /// The mean over-count over the compared items (0 for an empty list).
    pub fn mean_overcount(&self) -> f64 {
        if self.of == 0 {
            0.0
        } else {
            self.total_overcount as f64 / f64::from(self.of)
        }
    }
}

/// Why a record went to the dead-letter output.
///
/// `Bad`, `Future` and `TooLarge` are bad records (counted in `hotlist_bad_records_total`);
/// `Late` and `Sealed` are valid events that were not (fully) counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DeadReason {
    /// Not a valid event (see the detail for which rule).
    Bad,
    /// Behind its partition's watermark by more than the allowed lateness, for some window.
    Late,
    /// Its window was already sealed (its partition had been excluded as idle).
    Sealed,
    /// A valid event whose `ts` is more than `time.max_future` ahead of its reference time (the
    /// Kafka message's timestamp, else the wall clock when it was read).
    Future,
    /// A record longer than `source.max_record_bytes` (its raw bytes are cut to the first 4 KiB).
    TooLarge,
    /// A user-defined function (`[[udf]]`) panicked or failed on this record; the detail names
    /// the UDF.
    Udf,
}

impl DeadReason {
    /// Every reason, in `as_str` order of the stores' `CHECK` constraint.
    pub const ALL: [DeadReason; 6] = [
        DeadReason::Bad,
        DeadReason::Late,
        DeadReason::Sealed,
        DeadReason::Future,
        DeadReason::TooLarge,
        DeadReason::Udf,
    ];

    /// Lower-case name, as stored in sinks.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadReason::Bad => "bad",
            DeadReason::Late => "late",
            DeadReason::Sealed => "sealed",
            DeadReason::Future => "future",
            DeadReason::TooLarge => "too_large",
            DeadReason::Udf => "udf",
        }
    }

    /// Parses `as_str` output.
    pub fn parse(s: &str) -> Option<DeadReason> {
        DeadReason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// A record that was not (fully) counted, with everything needed to find and replay it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// Source partition.
    pub partition: PartitionId,
    /// Position within the partition (a line number for files: 1-based).
    pub position: u64,
    /// The raw bytes as read (for `late`/`sealed` generator events: their JSON rendering).
    pub raw: Vec<u8>,
    /// Coarse reason.
    pub reason: DeadReason,
    /// Human-readable detail (`"ts: float is not allowed"`, `"late for windows 1m,5m"`).
    pub detail: String,
}

//! Older format versions: the payloads formats 2 to 7 wrote, and how each is read into the
//! current types ([`Snapshot::from_payload`] of the types whose payload changed).

use super::{deserialize, CounterSnapshot, KeyGroupState, MergerSnapshot, PublishedState, Snapshot, SnapshotError};
use crate::group::{GroupKey, KeyShape};
use crate::record::{ItemId, ListState, RankedItem};
use crate::time::{Millis, Span};
use crate::trend::Rank;
use crate::window::{InstanceKey, WindowSpec};
use serde::Deserialize;

impl Snapshot for MergerSnapshot {
    fn from_payload(version: u16, payload: &[u8]) -> Result<Self, SnapshotError> {
        if version < 4 {
            deserialize::<MergerSnapshotV3>(payload).map(MergerSnapshot::from)
        } else if version < 8 {
            deserialize::<MergerSnapshotV7>(payload).map(MergerSnapshot::from)
        } else {
            deserialize(payload)
        }
    }
}

impl Snapshot for CounterSnapshot {
    fn from_payload(version: u16, payload: &[u8]) -> Result<Self, SnapshotError> {
        if version < 3 {
            deserialize::<CounterSnapshotV2>(payload).map(CounterSnapshot::from)
        } else if version < 4 {
            deserialize::<CounterSnapshotV3>(payload).map(CounterSnapshot::from)
        } else if version < 5 {
            deserialize::<CounterSnapshotV4>(payload).map(CounterSnapshot::from)
        } else if version < 8 {
            deserialize::<CounterSnapshotV7>(payload).map(CounterSnapshot::from)
        } else {
            deserialize(payload)
        }
    }
}

/// A [`WindowSpec`] as formats 4 to 7 wrote it (before `rank`: a window ranked by count).
#[derive(Deserialize)]
struct WindowSpecV7 {
    name: String,
    size: Span,
    slide: Span,
    k: usize,
    key: KeyShape,
}

impl From<WindowSpecV7> for WindowSpec {
    fn from(w: WindowSpecV7) -> WindowSpec {
        WindowSpec {
            name: w.name,
            size: w.size,
            slide: w.slide,
            k: w.k,
            key: w.key,
            rank: Rank::Count,
        }
    }
}

/// [`CounterSnapshot`] as formats 5 to 7 wrote it (windows before `rank`).
#[derive(Deserialize)]
struct CounterSnapshotV7 {
    windows: Vec<WindowSpecV7>,
    allowed_lateness: Span,
    watermark: Millis,
    key_groups: Vec<KeyGroupState>,
    pane_files: Vec<String>,
    sealed_until: Vec<Millis>,
    groups_seen: Vec<(InstanceKey, Vec<u64>)>,
}

impl From<CounterSnapshotV7> for CounterSnapshot {
    fn from(v7: CounterSnapshotV7) -> CounterSnapshot {
        CounterSnapshot {
            windows: v7.windows.into_iter().map(WindowSpec::from).collect(),
            allowed_lateness: v7.allowed_lateness,
            watermark: v7.watermark,
            key_groups: v7.key_groups,
            pane_files: v7.pane_files,
            sealed_until: v7.sealed_until,
            groups_seen: v7.groups_seen,
        }
    }
}

/// A [`RankedItem`] as formats 2 to 7 wrote it (before trend lists).
#[derive(Deserialize)]
struct RankedItemV7 {
    item_id: ItemId,
    count: u64,
}

/// A published list as formats 2 to 7 wrote it.
type PublishedV7 = Option<(ListState, Vec<RankedItemV7>)>;

fn published_from_v7(p: PublishedV7) -> Option<(ListState, Vec<RankedItem>)> {
    p.map(|(state, items)| {
        let items = items
            .into_iter()
            .map(|r| RankedItem::counted(r.item_id, r.count))
            .collect();
        (state, items)
    })
}

/// [`MergerSnapshot`] as formats 4 to 7 wrote it (lists before trend facts).
#[derive(Deserialize)]
struct MergerSnapshotV7 {
    instances: Vec<PublishedStateV7>,
}

#[derive(Deserialize)]
struct PublishedStateV7 {
    instance: InstanceKey,
    group: GroupKey,
    revision: u32,
    published: PublishedV7,
}

impl From<MergerSnapshotV7> for MergerSnapshot {
    fn from(v7: MergerSnapshotV7) -> MergerSnapshot {
        let instances = v7
            .instances
            .into_iter()
            .map(|p| PublishedState {
                instance: p.instance,
                group: p.group,
                revision: p.revision,
                published: published_from_v7(p.published),
            })
            .collect();
        MergerSnapshot { instances }
    }
}

/// [`CounterSnapshot`] as format 4 wrote it (before `groups_seen`).
#[derive(Deserialize)]
struct CounterSnapshotV4 {
    windows: Vec<WindowSpecV7>,
    allowed_lateness: Span,
    watermark: Millis,
    key_groups: Vec<KeyGroupState>,
    pane_files: Vec<String>,
    sealed_until: Vec<Millis>,
}

impl From<CounterSnapshotV4> for CounterSnapshot {
    fn from(v4: CounterSnapshotV4) -> CounterSnapshot {
        CounterSnapshot {
            windows: v4.windows.into_iter().map(WindowSpec::from).collect(),
            allowed_lateness: v4.allowed_lateness,
            watermark: v4.watermark,
            key_groups: v4.key_groups,
            pane_files: v4.pane_files,
            sealed_until: v4.sealed_until,
            groups_seen: Vec::new(),
        }
    }
}

/// A [`WindowSpec`] as formats 2 and 3 wrote it (before key shapes: a global window counting
/// events).
#[derive(Deserialize)]
struct WindowSpecV3 {
    name: String,
    size: Span,
    slide: Span,
    k: usize,
}

impl From<WindowSpecV3> for WindowSpec {
    fn from(w: WindowSpecV3) -> WindowSpec {
        WindowSpec {
            rank: Rank::Count,
            name: w.name,
            size: w.size,
            slide: w.slide,
            k: w.k,
            key: KeyShape::default(),
        }
    }
}

/// [`CounterSnapshot`] as format 3 wrote it.
#[derive(Deserialize)]
struct CounterSnapshotV3 {
    windows: Vec<WindowSpecV3>,
    allowed_lateness: Span,
    watermark: Millis,
    key_groups: Vec<KeyGroupState>,
    pane_files: Vec<String>,
    sealed_until: Vec<Millis>,
}

impl From<CounterSnapshotV3> for CounterSnapshot {
    fn from(v3: CounterSnapshotV3) -> CounterSnapshot {
        CounterSnapshot {
            windows: v3.windows.into_iter().map(WindowSpec::from).collect(),
            allowed_lateness: v3.allowed_lateness,
            watermark: v3.watermark,
            key_groups: v3.key_groups,
            pane_files: v3.pane_files,
            sealed_until: v3.sealed_until,
            groups_seen: Vec::new(),
        }
    }
}

/// [`MergerSnapshot`] as formats 2 and 3 wrote it (global lists only).
#[derive(Deserialize)]
struct MergerSnapshotV3 {
    instances: Vec<PublishedStateV3>,
}

#[derive(Deserialize)]
struct PublishedStateV3 {
    instance: InstanceKey,
    revision: u32,
    published: PublishedV7,
}

impl From<MergerSnapshotV3> for MergerSnapshot {
    fn from(v3: MergerSnapshotV3) -> MergerSnapshot {
        let instances = v3
            .instances
            .into_iter()
            .map(|p| PublishedState {
                instance: p.instance,
                group: GroupKey::global(),
                revision: p.revision,
                published: published_from_v7(p.published),
            })
            .collect();
        MergerSnapshot { instances }
    }
}

/// [`CounterSnapshot`] as format 2 wrote it (before `sealed_until`).
#[derive(Deserialize)]
struct CounterSnapshotV2 {
    windows: Vec<WindowSpecV3>,
    allowed_lateness: Span,
    watermark: Millis,
    key_groups: Vec<KeyGroupState>,
    pane_files: Vec<String>,
}

impl From<CounterSnapshotV2> for CounterSnapshot {
    fn from(v2: CounterSnapshotV2) -> CounterSnapshot {
        CounterSnapshot {
            windows: v2.windows.into_iter().map(WindowSpec::from).collect(),
            allowed_lateness: v2.allowed_lateness,
            watermark: v2.watermark,
            key_groups: v2.key_groups,
            pane_files: v2.pane_files,
            sealed_until: Vec::new(),
            groups_seen: Vec::new(),
        }
    }
}

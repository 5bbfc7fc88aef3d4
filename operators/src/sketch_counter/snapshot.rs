//! A sketch counter's checkpoint: its state as plain data (`sketch-<worker>.snap`), and the
//! snapshot of a live counter; the way back is `restore`.

use super::{Counts, Instance, SketchCounter};
use crate::counting::AnySketch;
use crate::group::GroupKey;
use crate::record::{ItemId, RankedItem};
use crate::sketch::{CountMinSketch, CountMinTopK, CountMinTopKSnapshot, HeavyKeeperSnapshot, Hll};
use crate::snapshot::Snapshot;
use crate::window::InstanceKey;
use serde::{Deserialize, Serialize};

/// One worker's sketch counter state, for checkpoints (`sketch-<worker>.snap`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SketchCounterSnapshot {
    /// The worker that wrote it.
    pub worker: u32,
    /// Every live instance.
    pub instances: Vec<SketchInstanceSnapshot>,
    /// Per live instance of a per-group window: the hashes of the groups it knows (every
    /// worker knows the same ones between epochs; a restore takes the union).
    pub groups_seen: Vec<(InstanceKey, Vec<u64>)>,
}

/// One instance of a [`SketchCounterSnapshot`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SketchInstanceSnapshot {
    /// Which instance.
    pub instance: InstanceKey,
    /// Events the worker counted in it.
    pub events: u64,
    /// Its counts.
    pub counts: SketchCountsSnapshot,
}

/// An instance's counts, as plain data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SketchCountsSnapshot {
    /// Exact counts, by item id (this worker's items).
    Exact(Vec<(ItemId, u64)>),
    /// Count-min: this worker's share of the instance's table — what it added since it was
    /// restored (worker 0: and the table it was restored with), so that the shares of all
    /// workers add up to the table of all the instance's events (its candidate list inside is
    /// empty) — and the ids of its candidates.
    CountMin {
        /// The share of the table.
        share: CountMinTopKSnapshot,
        /// The worker's candidates with their counts, in ranking order.
        #[serde(with = "crate::record::counted_items")]
        candidates: Vec<RankedItem>,
    },
    /// HeavyKeeper: the worker's whole state (it restores onto the same worker count only).
    HeavyKeeper(HeavyKeeperSnapshot),
    /// A per-group window's places (see `grouped`).
    Grouped(GroupedSnapshot),
    /// A distinct-user place's exact counts: per item (this worker's), its events and users.
    Users(Vec<(ItemId, u64, Vec<ItemId>)>),
    /// A distinct-user place folded: the worker's share of its events table (as for
    /// `CountMin`) and its candidates' users.
    UserSketch {
        /// The share of the events table.
        share: CountMinSketch,
        /// The candidates with their users.
        candidates: Vec<(ItemId, Hll)>,
    },
}

/// A per-group instance's places on one worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupedSnapshot {
    /// Whether its places fold into tables (see `grouped`).
    pub folding: bool,
    /// Every place: `Exact` or `CountMin` counts (a share, as for a whole instance).
    pub places: Vec<GroupPlaceSnapshot>,
}

/// One place of a [`GroupedSnapshot`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPlaceSnapshot {
    /// The group (`(other)` for the folded groups' place).
    pub group: GroupKey,
    /// Events the worker counted in it.
    pub events: u64,
    /// Its counts.
    pub counts: SketchCountsSnapshot,
}

// new in snapshot format 3's successor files; format 7 added `groups_seen`
impl Snapshot for SketchCounterSnapshot {
    fn from_payload(version: u16, payload: &[u8]) -> Result<Self, crate::snapshot::SnapshotError> {
        if version < 7 {
            crate::snapshot::deserialize::<SketchCounterSnapshotV6>(payload).map(|v6| SketchCounterSnapshot {
                worker: v6.worker,
                instances: v6.instances,
                groups_seen: Vec::new(),
            })
        } else {
            crate::snapshot::deserialize(payload)
        }
    }
}

/// [`SketchCounterSnapshot`] before format 7 (no per-group sketch windows).
#[derive(Serialize, Deserialize)]
pub(crate) struct SketchCounterSnapshotV6 {
    pub worker: u32,
    pub instances: Vec<SketchInstanceSnapshot>,
}

impl SketchCounter {
    /// The state as of the last `advance` (call between epochs).
    pub fn snapshot(&self) -> SketchCounterSnapshot {
        let instances = self
            .instances
            .iter()
            .map(|(key, inst)| SketchInstanceSnapshot {
                instance: *key,
                events: inst.events,
                counts: self.counts_snapshot(inst),
            })
            .collect();
        SketchCounterSnapshot {
            worker: self.worker,
            instances,
            groups_seen: self.admission.iter().map(|(k, g)| (*k, g.hashes())).collect(),
        }
    }

    fn counts_snapshot(&self, inst: &Instance) -> SketchCountsSnapshot {
        match &inst.counts {
            Counts::Users(map) => {
                let mut items: Vec<(ItemId, u64, Vec<ItemId>)> = map
                    .iter()
                    .map(|(i, (events, users))| {
                        let mut users: Vec<ItemId> = users.iter().cloned().collect();
                        users.sort_unstable();
                        (i.clone(), *events, users)
                    })
                    .collect();
                items.sort_unstable();
                SketchCountsSnapshot::Users(items)
            }
            Counts::UserSketch(s) => SketchCountsSnapshot::UserSketch {
                share: match (&inst.base, self.worker) {
                    (Some(base), w) if w != 0 => s.sketch().minus(base).unwrap_or_else(|_| s.sketch().clone()),
                    _ => s.sketch().clone(),
                },
                candidates: s.candidates(),
            },
            Counts::Grouped(g) => SketchCountsSnapshot::Grouped(GroupedSnapshot {
                folding: g.folding,
                places: g
                    .iter()
                    .map(|(group, place)| GroupPlaceSnapshot {
                        group: group.map_or_else(GroupKey::other, |g| GroupKey::from_stored(g.to_string())),
                        events: place.events,
                        counts: self.counts_snapshot(place),
                    })
                    .collect(),
            }),
            Counts::Exact(map) => {
                let mut items: Vec<(ItemId, u64)> = map.iter().map(|(i, c)| (i.clone(), *c)).collect();
                items.sort_unstable();
                SketchCountsSnapshot::Exact(items)
            }
            Counts::Sketch(s) => match s.as_ref() {
                AnySketch::Hk(hk) => SketchCountsSnapshot::HeavyKeeper(hk.snapshot()),
                AnySketch::Cms(cms) => {
                    let table = match (&inst.base, self.worker) {
                        (Some(base), w) if w != 0 => cms.sketch().minus(base).unwrap_or_else(|_| cms.sketch().clone()),
                        _ => cms.sketch().clone(),
                    };
                    let capacity = cms.candidates().capacity();
                    let share = CountMinTopK::with_candidates(table, capacity, [])
                        .map(|s| s.snapshot())
                        .unwrap_or_else(|_| cms.snapshot());
                    let candidates = cms.candidates().top(usize::MAX);
                    SketchCountsSnapshot::CountMin { share, candidates }
                }
            },
        }
    }
}

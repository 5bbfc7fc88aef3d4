//! `MergeLists`: per-worker lists in (all routed to worker 0), published revisions out.
//!
//! Stashes lists and the broadcast control records by epoch; once the frontier passes an epoch
//! it computes the same global watermark the counters computed for that epoch and lets
//! `hotlist_operators::merge::ListMerger` decide what to publish.

use super::epoch_stash::{Epoch, EpochStash};
use crate::checkpoint;
use crate::config::TimePlan;
use crate::stats::JobStats;
use hotlist_operators::merge::ListMerger;
use hotlist_operators::record::PartitionId;
use hotlist_operators::record::{Control, ListState, LocalList, PublishedList};
use hotlist_operators::snapshot::{PartitionState, SourceSnapshot};
use hotlist_operators::time::Millis;
use hotlist_operators::watermark::GlobalWatermark;
use hotlist_operators::window::WindowSpec;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::Stream;

/// Merges local lists into published revisions on worker 0.
pub fn merge_lists<'scope>(
    lists: Stream<'scope, u64, Vec<LocalList>>,
    control: Stream<'scope, u64, Vec<Control>>,
    windows: Vec<WindowSpec>,
    time: TimePlan,
    stats: Arc<JobStats>,
    ctx: super::RunCtx,
    checkpoints: Rc<RefCell<BTreeSet<u64>>>,
) -> Stream<'scope, u64, Vec<PublishedList>> {
    let allowed_lateness = time.allowed_lateness;
    let is_leader = lists.scope().index() == 0;
    lists.binary_frontier(
        control,
        Exchange::new(|_: &LocalList| 0u64),
        Pipeline,
        "MergeLists",
        move |_cap, _info| {
            let mut merger = match &ctx.restore {
                Some(r) if is_leader => ListMerger::restore(windows, allowed_lateness, &r.merger),
                _ => ListMerger::new(windows, allowed_lateness),
            };
            let mut global = GlobalWatermark::new();
            if let Some(r) = &ctx.restore {
                global.restore(r.counters.iter().map(|c| c.watermark).max().unwrap_or(Millis::MIN));
            }
            // each partition's last control record: the sources' state for checkpoints
            let mut partitions: BTreeMap<PartitionId, PartitionState> = BTreeMap::new();
            let mut stash: EpochStash<LocalList, Control> = EpochStash::new(&[0]);
            move |(in_lists, f1), (in_control, f2), output| {
                in_lists.for_each_stamp(|cap, data| stash.first(&cap, data));
                in_control.for_each_stamp(|cap, data| stash.second(&cap, data));
                while let Some((
                    t,
                    Epoch {
                        caps,
                        first: lists,
                        second: controls,
                    },
                )) = stash.pop_complete(|t| f1.less_equal(t) || f2.less_equal(t))
                {
                    for l in lists {
                        merger.receive(l);
                    }
                    let requested = controls.contains(&Control::Checkpoint);
                    for c in controls {
                        if let Control::Partition {
                            partition,
                            watermark,
                            status,
                            position,
                        } = c
                        {
                            global.update(partition, watermark, status);
                            let max_ts = if watermark == Millis::MIN || watermark == Millis::MAX {
                                watermark
                            } else {
                                watermark.plus(time.max_out_of_orderness)
                            };
                            partitions.insert(
                                partition,
                                PartitionState {
                                    partition,
                                    position,
                                    max_ts,
                                    status,
                                },
                            );
                        }
                    }
                    let wm = global.advance();
                    let mut published = merger.advance(wm, Millis::now());
                    if is_leader && ctx.is_checkpoint(t, wm, requested) {
                        if let Some(dir) = ctx.checkpoint_dir(t) {
                            let sources = SourceSnapshot {
                                partitions: partitions.values().cloned().collect(),
                            };
                            let written = checkpoint::write_snapshot(&dir, "merger.snap", &merger.snapshot())
                                .and_then(|_| checkpoint::write_snapshot(&dir, "sources.snap", &sources))
                                .map(|_| ());
                            match written {
                                Ok(()) => {
                                    checkpoints.borrow_mut().insert(t);
                                }
                                Err(e) => ctx.fail(format!("checkpoint write failed: {e:#}")),
                            }
                        }
                    }
                    if is_leader {
                        stats.watermark.store(wm.0, Relaxed);
                        for (p, pwm, status) in global.partitions() {
                            if let Some(ps) = stats.partitions.get(p.0 as usize) {
                                ps.watermark.store(pwm.0, Relaxed);
                                ps.status.store(status as u64, Relaxed);
                            }
                        }
                        stats.revisions.fetch_add(published.len() as u64, Relaxed);
                        for p in &published {
                            match p.state {
                                ListState::Closed => stats.windows_closed.fetch_add(1, Relaxed),
                                ListState::Final => stats.windows_sealed.fetch_add(1, Relaxed),
                                ListState::Open => 0,
                            };
                        }
                    }
                    if !published.is_empty() {
                        output.session(&caps[0]).give_container(&mut published);
                    }
                }
            }
        },
    )
}

//! The job's dataflow graph:
//!
//! ```text
//! Source ──events──▶ (exchange by item hash) ─┐
//!        ──control─▶ (broadcast) ─────────────┼─▶ WindowCount ──lists──▶ (to worker 0) MergeLists ──▶ Sink ──▶ probe
//!        ──dead────▶ ─────────────────────────┼──────────────────────────────────────────────────────▲
//!                                             └──────────── control ──▶ MergeLists                    │
//!                         WindowCount ──sealed dead letters───────────────────────────────────────────┘
//!        ──sampled─▶ (1 in N copies) ──▶ (to worker 0) HotKeys ──closed hot-key windows──▶ Sink
//! ```
//!
//! `MergeLists` records where each sealed instance's events lie in the input
//! (`sealed_ranges`); the sink commits those ranges with the epoch that sealed it.
//!
//! With `exact_at_seal` windows in a cluster, three small streams beside the graph carry the
//! replays' passes to every process and their shares back (`replay_peers`).
//!
//! `HotKeys` exists only with `[hot_keys]`; its windows travel to the sink with the dead
//! letters (`sink::SinkInput`). With per-group windows the control records also carry the
//! groups each epoch's events count in (`Control::Groups`), so that every worker's
//! `WindowCount` picks the same `max_groups` groups per instance (`group::admission`).
//!
//! `WindowCount`, `MergeLists` and `HotKeys` are epoch operators: each implements
//! [`lifecycle::EpochOperator`] (restore its state, fresh or from the checkpoint, and the
//! watermark it resumes at; apply an epoch with its control frame, snapshot, report) and runs
//! under one [`lifecycle::EpochDriver`] (which restores it from its setup, then stashes by
//! epoch, reads the control frame, keeps the global watermark, decides checkpoints).

pub mod epoch_stash;
pub mod hot_keys;
pub mod lifecycle;
pub mod merge_lists;
pub mod replay_peers;
pub mod replays;
pub mod route_events;
pub mod sealed_ranges;
pub mod sink;
pub mod window_count;

use crate::config::JobPlan;
use crate::run_ctx::RunCtx;
use crate::source::{source, Reader};
use crate::stats::JobStats;
use hotlist_operators::record::PartitionId;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use timely::dataflow::operators::core::Concat;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::operators::vec::{Broadcast, Map};
use timely::dataflow::operators::Probe;
use timely::dataflow::Scope;

/// Builds the job's graph in `scope`; returns the probe at its end.
pub fn build<'scope>(
    scope: Scope<'scope, u64>,
    plan: &JobPlan,
    readers: Vec<(PartitionId, Reader)>,
    handoff: Option<sink::SinkHandoff>,
    stats: Arc<JobStats>,
    shutdown: Arc<AtomicBool>,
    ctx: RunCtx,
) -> ProbeHandle<u64> {
    let probe = ProbeHandle::new();
    let src = source(scope, plan, readers, probe.clone(), stats.clone(), shutdown, &ctx);
    let control = src.control.broadcast();
    let hot = plan.hot_keys.map(|spec| {
        hot_keys::hot_keys(
            src.sampled,
            control.clone(),
            spec,
            plan.time.allowed_lateness,
            stats.clone(),
            ctx.clone(),
        )
    });
    let (lists, sealed) = window_count::window_count(src.events, control.clone(), plan, stats.clone(), ctx.clone());
    // checkpoint epochs the merger (worker 0) decided and the sealed instances' input ranges,
    // for the sink on the same worker thread
    let notes = sink::MergerNotes::default();
    // a cluster's replays: every process counts its partitions' share of each pass
    let peers = replay_peers::build(scope, plan);
    let published = merge_lists::merge_lists(lists, control, plan, stats, ctx.clone(), notes.clone(), peers);
    let mut dead = src.dead.concat(sealed).map(sink::SinkInput::Dead);
    if let Some(hot) = hot {
        dead = dead.concat(hot.map(sink::SinkInput::Hot));
    }
    sink::sink(published, dead, handoff, ctx, notes).probe_with(&probe);
    probe
}

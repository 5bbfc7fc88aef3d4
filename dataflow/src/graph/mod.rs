//! The job's dataflow graph:
//!
//! ```text
//! Source ──events──▶ (exchange by item hash) ─┐
//!        ──control─▶ (broadcast) ─────────────┼─▶ WindowCount ──lists──▶ (to worker 0) MergeLists ──▶ Sink ──▶ probe
//!        ──dead────▶ ─────────────────────────┼──────────────────────────────────────────────────────▲
//!                                             └──────────── control ──▶ MergeLists                    │
//!                         WindowCount ──sealed dead letters───────────────────────────────────────────┘
//! ```

pub mod epoch_stash;
pub mod merge_lists;
pub mod sink;
pub mod window_count;

use crate::config::JobPlan;
use crate::source::{source, Reader};
use crate::stats::JobStats;
use hotlist_operators::record::PartitionId;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use timely::dataflow::operators::core::Concat;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::operators::vec::Broadcast;
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
) -> ProbeHandle<u64> {
    let probe = ProbeHandle::new();
    let src = source(scope, plan, readers, probe.clone(), stats.clone(), shutdown);
    let control = src.control.broadcast();
    let (lists, sealed) = window_count::window_count(
        src.events,
        control.clone(),
        plan.windows.clone(),
        plan.time.allowed_lateness,
        stats.clone(),
    );
    let published = merge_lists::merge_lists(lists, control, plan.windows.clone(), plan.time.allowed_lateness, stats);
    let dead = src.dead.concat(sealed);
    sink::sink(published, dead, handoff).probe_with(&probe);
    probe
}

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
//! `HotKeys` exists only with `[hot_keys]`; its windows travel to the sink with the dead
//! letters (`sink::SinkInput`). With per-group windows the control records also carry the
//! groups each epoch's events count in (`Control::Groups`), so that every worker's
//! `WindowCount` picks the same `max_groups` groups per instance (`group::admission`).

pub mod epoch_stash;
pub mod hot_keys;
pub mod merge_lists;
pub mod replays;
pub mod sink;
pub mod window_count;

use crate::checkpoint::Restored;
use crate::config::{CheckpointPlan, JobPlan};
use crate::source::{source, Reader};
use crate::stats::JobStats;
use hotlist_operators::record::PartitionId;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::sync::Mutex;
use timely::dataflow::operators::core::Concat;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::operators::vec::{Broadcast, Map};
use timely::dataflow::operators::Probe;
use timely::dataflow::Scope;

/// What a run shares with its operators beyond the plan.
#[derive(Clone)]
pub struct RunCtx {
    /// Added to timely epochs to get sink epochs (the store's committed epoch + 1).
    pub epoch_base: u64,
    /// State to resume from.
    pub restore: Option<Arc<Restored>>,
    /// Checkpointing, if on.
    pub checkpoint: Option<CheckpointPlan>,
    /// The job id.
    pub job: String,
    /// The first fatal error of any operator (the run fails with it; nothing more commits).
    pub fatal: Arc<Mutex<Option<String>>>,
    /// A live Kafka run: the topic's partition count as last seen, for the sources to open
    /// partitions added while the job runs (`source::discovery`).
    pub partition_count: Option<Arc<std::sync::atomic::AtomicU32>>,
    /// Whether this process writes the sink (and so the checkpoints' manifests and retention).
    pub writes_sink: bool,
}

impl RunCtx {
    /// Records a fatal error (the first one wins).
    pub fn fail(&self, message: String) {
        if let Ok(mut f) = self.fatal.lock() {
            if f.is_none() {
                tracing::error!("{message}");
                *f = Some(message);
            }
        }
    }

    /// Whether an operator failed.
    pub fn failed(&self) -> bool {
        self.fatal.lock().map(|f| f.is_some()).unwrap_or(true)
    }

    /// The directory of the checkpoint at timely epoch `t`, if checkpointing.
    pub fn checkpoint_dir(&self, t: u64) -> Option<std::path::PathBuf> {
        self.checkpoint
            .as_ref()
            .map(|c| crate::checkpoint::checkpoint_dir(&c.dir, &self.job, self.epoch_base + t))
    }

    /// Whether timely epoch `t` is a checkpoint epoch, given the global watermark after it and
    /// whether a source asked for one (it is stopping): every `every_epochs` epochs, when all
    /// input has ended, and on a graceful stop. Every worker decides alike from the same data.
    pub fn is_checkpoint(&self, t: u64, global: hotlist_operators::time::Millis, requested: bool) -> bool {
        self.checkpoint.as_ref().is_some_and(|c| {
            requested || t.is_multiple_of(c.every_epochs) || global == hotlist_operators::time::Millis::MAX
        })
    }
}

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
    let (lists, sealed) = window_count::window_count(
        src.events,
        control.clone(),
        plan.windows.clone(),
        plan.counting.clone(),
        plan.time.allowed_lateness,
        stats.clone(),
        ctx.clone(),
    );
    // checkpoint epochs the merger (worker 0) decided, for the sink on the same worker thread
    let checkpoints: Rc<RefCell<BTreeSet<u64>>> = Rc::new(RefCell::new(BTreeSet::new()));
    let published = merge_lists::merge_lists(lists, control, plan, stats, ctx.clone(), checkpoints.clone());
    let mut dead = src.dead.concat(sealed).map(sink::SinkInput::Dead);
    if let Some(hot) = hot {
        dead = dead.concat(hot.map(sink::SinkInput::Hot));
    }
    sink::sink(published, dead, handoff, ctx, checkpoints).probe_with(&probe);
    probe
}

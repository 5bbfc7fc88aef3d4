//! The lifecycle every epoch operator shares (`WindowCount`, `MergeLists`, `HotKeys`).
//!
//! An [`EpochOperator`] holds only its own state: it is restored from the run's checkpoint
//! (fresh without one), applies one epoch's records together with the epoch's
//! [`ControlFrame`], writes its part of a checkpoint, and reports to the shared stats. The
//! [`EpochDriver`] owns the whole lifecycle and does the rest alike for all of them:
//!
//! 0. `restore` the operator from its setup (or learn that this worker runs none), and the
//!    global watermark at the one it resumes at (`restored_watermark`);
//! 1. stash each input by epoch (`epoch_stash`) until the frontier has passed the epoch;
//! 2. read the epoch's control records once into a [`ControlFrame`], advancing the global
//!    watermark (restored from the checkpoint, so every operator on every worker computes the
//!    same one for the same epoch);
//! 3. decide whether the epoch is a checkpoint ([`RunCtx::is_checkpoint`]);
//! 4. call the operator: `apply`, then `snapshot` at a checkpoint epoch (with the epoch's
//!    first capability, which an operator writing off-thread holds until its files are
//!    durable), then `report`.

use super::epoch_stash::{Epoch, EpochStash};
use crate::run_ctx::RunCtx;
use hotlist_operators::group::GroupNote;
use hotlist_operators::message::Control;
use hotlist_operators::replay::ReplayNote;
use hotlist_operators::snapshot::PartitionState;
use hotlist_operators::time::Millis;
use hotlist_operators::watermark::GlobalWatermark;
use std::path::PathBuf;
use timely::dataflow::operators::{Capability, InputCapability};

/// An epoch's control records (broadcast from every source), read once.
#[derive(Debug, Default)]
pub struct ControlFrame {
    /// The global watermark after the epoch.
    pub watermark: Millis,
    /// Whether provisional lists of open windows are due (`Control::EmitTick`).
    pub tick: bool,
    /// Whether a source asked for a checkpoint (`Control::Checkpoint`: it is stopping).
    pub stopping: bool,
    /// The largest of the sources' wall clocks at the epoch's end (`Control::Clock`).
    pub clock: Option<Millis>,
    /// Whether the epoch is a checkpoint (decided alike on every worker).
    pub checkpoint: bool,
    /// Each partition's state at the end of the epoch, in arrival order.
    pub partitions: Vec<PartitionState>,
    /// The groups the epoch's events count in (per-group windows).
    pub groups: Vec<GroupNote>,
    /// Where the epoch's events of `exact_at_seal` instances lie (for the merger's replays).
    pub replays: Vec<ReplayNote>,
}

impl ControlFrame {
    /// Reads epoch `t`'s control records: feeds the partitions' watermarks to `global` and
    /// advances it, and decides whether `t` is a checkpoint (`last_checkpoint`: the clock of
    /// the last one this reader decided, updated).
    pub fn read(
        controls: Vec<Control>,
        global: &mut GlobalWatermark,
        last_checkpoint: &mut Option<Millis>,
        ctx: &RunCtx,
    ) -> ControlFrame {
        let mut frame = ControlFrame::default();
        for c in controls {
            match c {
                Control::Partition {
                    partition,
                    watermark,
                    max_ts,
                    status,
                    position,
                } => {
                    global.update(partition, watermark, status);
                    frame.partitions.push(PartitionState {
                        partition,
                        position,
                        max_ts,
                        status,
                    });
                }
                Control::EmitTick => frame.tick = true,
                Control::Checkpoint => frame.stopping = true,
                Control::Clock(at) => frame.clock = frame.clock.max(Some(at)),
                Control::Groups(notes) => frame.groups.extend(notes),
                Control::Replay(notes) => frame.replays.extend(notes),
            }
        }
        frame.watermark = global.advance();
        frame.checkpoint = ctx.is_checkpoint(frame.watermark, frame.stopping, frame.clock, last_checkpoint);
        frame
    }
}

/// An operator that applies whole epochs (see the module doc for the calling order).
pub trait EpochOperator {
    /// One stashed record of its data input.
    type Record;
    /// What it emits at an epoch.
    type Output;
    /// What it is built from, fresh or restored (its part of the plan, worker and peer
    /// counts, the shared stats…).
    type Setup;

    /// The operator of this worker: fresh, or restored from `ctx.restore` (a state that cannot
    /// be restored fails the run, `RunCtx::fail`). `None`: this worker runs no instance of it.
    fn restore(setup: Self::Setup, ctx: &RunCtx) -> Option<Self>
    where
        Self: Sized;

    /// The global watermark it resumes at. By default that of the restored checkpoint (the
    /// largest of its counters'; `Millis::MIN`: none).
    fn restored_watermark(&self, ctx: &RunCtx) -> Millis {
        ctx.restore
            .as_ref()
            .and_then(|r| r.counters.iter().map(|c| c.watermark).max())
            .unwrap_or(Millis::MIN)
    }

    /// Applies epoch `t`: its records, then its control frame.
    fn apply(&mut self, t: u64, records: Vec<Self::Record>, frame: &ControlFrame) -> Self::Output;

    /// Writes its part of checkpoint `t` into `dir`; `hold` is the epoch's capability (the
    /// sink commits the epoch only once every copy of it is dropped). A failed write fails the
    /// run (`RunCtx::fail`).
    fn snapshot(&mut self, t: u64, dir: PathBuf, frame: &ControlFrame, hold: &Capability<u64>);

    /// Reports the epoch to the shared stats (`global`: each partition's watermark and status);
    /// by default nothing.
    fn report(&mut self, _output: &Self::Output, _frame: &ControlFrame, _global: &GlobalWatermark) {}
}

/// Drives an [`EpochOperator`]: stashes its inputs by epoch and applies each epoch once the
/// frontier has passed it.
pub struct EpochDriver<O: EpochOperator> {
    /// The operator (`None`: it does nothing on this worker, e.g. the detector off worker 0,
    /// whose epochs are released as they complete).
    op: Option<O>,
    stash: EpochStash<O::Record, Control>,
    global: GlobalWatermark,
    /// The sources' clock at the last checkpoint (`None`: none since the start).
    last_checkpoint: Option<Millis>,
    ctx: RunCtx,
}

impl<O: EpochOperator> EpochDriver<O> {
    /// Restores the operator from `setup` ([`EpochOperator::restore`]) and drives it; its
    /// epochs hold a capability for each output port in `ports`.
    pub fn new(setup: O::Setup, ports: &[usize], ctx: RunCtx) -> Self {
        let op = O::restore(setup, &ctx);
        let mut global = GlobalWatermark::new();
        if let Some(op) = &op {
            global.restore(op.restored_watermark(&ctx));
        }
        EpochDriver {
            op,
            stash: EpochStash::new(ports),
            global,
            last_checkpoint: None,
            ctx,
        }
    }

    /// The operator, between epochs.
    pub fn operator(&mut self) -> Option<&mut O> {
        self.op.as_mut()
    }

    /// Stashes a message of the data input.
    pub fn records<'a>(&mut self, cap: &InputCapability<u64>, data: impl Iterator<Item = &'a mut Vec<O::Record>>)
    where
        O::Record: 'a,
    {
        self.stash.first(cap, data);
    }

    /// The data input's records of the epoch of `cap`, to add to as the caller likes (e.g.
    /// whole batches, without copying their records).
    pub fn records_mut(&mut self, cap: &InputCapability<u64>) -> Option<&mut Vec<O::Record>> {
        self.stash.first_mut(cap)
    }

    /// Stashes a message of the control input.
    pub fn controls<'a>(&mut self, cap: &InputCapability<u64>, data: impl Iterator<Item = &'a mut Vec<Control>>) {
        self.stash.second(cap, data);
    }

    /// Applies the earliest epoch if `pending_at(epoch)` says no input can still deliver to
    /// it.
    pub fn step(&mut self, pending_at: impl Fn(&u64) -> bool) -> Option<Applied<O::Output>> {
        let (t, Epoch { caps, first, second }) = self.stash.pop_complete(pending_at)?;
        let Some(op) = self.op.as_mut() else {
            return Some(Applied { caps, output: None });
        };
        let frame = ControlFrame::read(second, &mut self.global, &mut self.last_checkpoint, &self.ctx);
        let output = op.apply(t, first, &frame);
        if frame.checkpoint {
            if let (Some(dir), Some(hold)) = (self.ctx.checkpoint_dir(t), caps.first()) {
                op.snapshot(t, dir, &frame, hold);
            }
        }
        op.report(&output, &frame, &self.global);
        Some(Applied {
            caps,
            output: Some(output),
        })
    }
}

/// An epoch the driver applied.
pub struct Applied<T> {
    /// Its capabilities, one per output port asked for.
    pub caps: Vec<Capability<u64>>,
    /// What the operator emits at it (`None`: no operator on this worker).
    pub output: Option<T>,
}

//! `Source`: the timely operator around [`SourceState`]. Each activation reads a batch, hands
//! it to the outputs (with the announcements of the groups its events count in, for per-group
//! windows), flushes the tallies and, when the epoch is over, sends the control records and
//! downgrades the capabilities (or drops them after the last epoch).

use super::state::{EpochEnd, SourceState};
use super::{Reader, SourceStreams};
use crate::config::JobPlan;
use crate::run_ctx::RunCtx;
use crate::stats::JobStats;
use hotlist_operators::group::{GroupNote, GroupNoter};
use hotlist_operators::hot_keys::Sampler;
use hotlist_operators::message::Control;
use hotlist_operators::record::{DeadLetter, PartitionId, TimedEvent};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::operators::Capability;
use timely::dataflow::Scope;

/// Builds the source operator over `readers` (resumed from `ctx.restore`, if any). It stops
/// reading and ends after closing its current epoch once `shutdown` is set.
pub fn source<'scope>(
    scope: Scope<'scope, u64>,
    plan: &JobPlan,
    readers: Vec<(PartitionId, Reader)>,
    probe: ProbeHandle<u64>,
    stats: Arc<JobStats>,
    shutdown: Arc<AtomicBool>,
    ctx: &RunCtx,
) -> SourceStreams<'scope> {
    let mut builder = OperatorBuilder::new("Source".to_string(), scope);
    let activator = scope.activator_for(builder.operator_info().address);
    let (out_events, events) = builder.new_output::<Vec<TimedEvent>>();
    let (out_control, control) = builder.new_output::<Vec<Control>>();
    let (out_dead, dead) = builder.new_output::<Vec<DeadLetter>>();
    let (out_sampled, sampled) = builder.new_output::<Vec<TimedEvent>>();
    let mut out_events: OutputBuilder<u64, CapacityContainerBuilder<Vec<TimedEvent>>> = OutputBuilder::from(out_events);
    let mut out_control: OutputBuilder<u64, CapacityContainerBuilder<Vec<Control>>> = OutputBuilder::from(out_control);
    let mut out_dead: OutputBuilder<u64, CapacityContainerBuilder<Vec<DeadLetter>>> = OutputBuilder::from(out_dead);
    let mut out_sampled: OutputBuilder<u64, CapacityContainerBuilder<Vec<TimedEvent>>> =
        OutputBuilder::from(out_sampled);
    // with [hot_keys]: copies of the 1 in N events the detector counts (the rest is not copied)
    let sampler = plan.hot_keys.map(|h| Sampler::new(h.sample));
    // with per-group windows: the groups the events count in, for every worker's counter
    // (`group::admission`), sent with the control records of the events' epoch; none when
    // one counter counts every event and notes them itself
    let mut noter = plan
        .announces_groups()
        .then(|| GroupNoter::new(&plan.window_specs(), plan.time.allowed_lateness))
        .flatten();
    let mut notes: Vec<GroupNote> = Vec::new();
    let mut picked: Vec<TimedEvent> = Vec::new();
    let mut state = SourceState::new(plan, readers, (scope.index(), scope.peers()), stats, ctx);

    builder.build(move |caps| {
        // none at all for a source without partitions
        let mut caps = state.has_partitions().then(|| OutputCaps::new(caps)).flatten();
        let mut batch = state.new_batch();
        move |_frontiers| {
            let Some(c) = caps.as_mut() else { return };
            let stopping = shutdown.load(Relaxed);
            if !stopping && state.held_back(&probe) {
                activator.activate_after(Duration::from_millis(1));
                return;
            }
            // read a batch (from the partitions added to the topic too) and hand it on
            let produced = !stopping && (state.discover_partitions() | state.read_batch(&mut batch));
            if let Some(s) = sampler {
                let chosen = batch.all_events().filter(|e| s.picks(e.partition, e.position));
                picked.extend(chosen.cloned());
                if !picked.is_empty() {
                    out_sampled.activate().session(&c.sampled).give_container(&mut picked);
                }
            }
            if let Some(n) = noter.as_mut() {
                for e in batch.all_events() {
                    n.note(e, &mut notes);
                }
                if !notes.is_empty() {
                    let mut control = vec![Control::Groups(std::mem::take(&mut notes))];
                    out_control.activate().session(&c.control).give_container(&mut control);
                }
            }
            if !batch.no_events() {
                // (one container per worker's list: see `Batch`)
                let lists = batch.lists_mut().iter_mut().filter(|e| !e.is_empty());
                out_events.activate().session(&c.events).give_containers(lists);
                batch.make_room(state.batch_size());
            }
            if !batch.dead.is_empty() {
                out_dead.activate().session(&c.dead).give_container(&mut batch.dead);
            }
            state.flush_tallies();
            // close the epoch on the timer, at the end of input, or when stopping
            if let Some(end) = state.epoch_end(stopping) {
                let mut controls = state.close_epoch(end, stopping);
                out_control.activate().session(&c.control).give_container(&mut controls);
                if end == EpochEnd::Last {
                    caps = None;
                    return;
                }
                c.downgrade(&state.next_epoch());
            }
            if produced {
                activator.activate();
            } else {
                activator.activate_after(state.idle_wait());
            }
        }
    });
    SourceStreams {
        events,
        control,
        dead,
        sampled,
    }
}

/// The source's capabilities, one per output, in the order the outputs are built.
struct OutputCaps {
    events: Capability<u64>,
    control: Capability<u64>,
    dead: Capability<u64>,
    sampled: Capability<u64>,
}

impl OutputCaps {
    /// Names the capabilities timely hands the operator (one per output, in output order).
    fn new(caps: Vec<Capability<u64>>) -> Option<OutputCaps> {
        let [events, control, dead, sampled] = <[_; 4]>::try_from(caps).ok()?;
        Some(OutputCaps {
            events,
            control,
            dead,
            sampled,
        })
    }

    /// Moves every output on to `epoch`.
    fn downgrade(&mut self, epoch: &u64) {
        for cap in [&mut self.events, &mut self.control, &mut self.dead, &mut self.sampled] {
            cap.downgrade(epoch);
        }
    }
}

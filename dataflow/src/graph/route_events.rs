//! The exchange of events to the workers that own their items ([`owner`]): timely's exchange
//! pact with a distributor made for events.
//!
//! timely's own distributor moves each event through a generic container builder that
//! checks for a full container after every push and sends containers of 8 KiB (113 events).
//! Its per-event copy also went through the stack in overlapping pieces that the CPU could not
//! forward, a stall per event. With two workers that exchange was a tenth of the job's CPU
//! time. This one moves each event once into its owner's container, checks fullness only
//! against a fixed length and sends containers of [`CONTAINER`] events.
//!
//! A container whose events all go to one worker, as a source's are (one per worker: see
//! `source::accept::Batch`), is sent on whole instead (that move was still 7 % of a 2-worker
//! job's samples).
//!
//! The owners are the same as before ([`owner`]: key group modulo workers), so checkpoints
//! and replays, which rely on them, do not change. Memory: below [`CONTAINER`] events per
//! worker are held between pushes, and they are sent at every flush (timely flushes at the
//! end of each activation of the source and when the timestamp changes).

use hotlist_operators::hash::Owners;
use hotlist_operators::record::TimedEvent;
use timely::communication::Push;
use timely::dataflow::channels::pact::DistributorPact;
use timely::dataflow::channels::pushers::exchange::Distributor;
use timely::dataflow::channels::{Message, Stamp};

/// Events per container sent to a worker: large enough that sending one is rare, small
/// enough that a container stays in cache while it fills.
const CONTAINER: usize = 1024;

/// The pact that sends each event to the worker that owns its item.
pub type ByOwner = DistributorPact<Box<dyn FnOnce(usize) -> EventRouter>>;

/// The exchange pact of events to their owners.
pub fn by_owner() -> ByOwner {
    DistributorPact(Box::new(EventRouter::new))
}

/// Per worker, the events on their way to it.
pub struct EventRouter {
    outs: Vec<Vec<TimedEvent>>,
    /// The owner of an event's item, among the peers.
    owners: Owners,
}

impl EventRouter {
    fn new(peers: usize) -> EventRouter {
        EventRouter {
            outs: (0..peers).map(|_| Vec::new()).collect(),
            owners: Owners::new(peers),
        }
    }
}

impl Distributor<Vec<TimedEvent>> for EventRouter {
    fn partition<T: Clone, P: Push<Message<T, Vec<TimedEvent>>>>(
        &mut self,
        container: &mut Vec<TimedEvent>,
        stamp: &Stamp<T>,
        pushers: &mut [P],
    ) {
        debug_assert_eq!(pushers.len(), self.outs.len(), "the peers the router was made for");
        let owners = self.owners;
        // A source's container holds one worker's events (see `source::accept::Batch`): sent
        // on whole, after what was held for that worker (so each worker's events keep their
        // order). Checked, not assumed: a look at each event's hash, not a move of it.
        if let Some(to) = container.first().map(|ev| owners.of(ev.hash)) {
            if container.iter().all(|ev| owners.of(ev.hash) == to) {
                let out = &mut self.outs[to];
                if !out.is_empty() {
                    Message::push_at(out, stamp.clone(), &mut pushers[to]);
                    out.clear();
                }
                Message::push_at(container, stamp.clone(), &mut pushers[to]);
                container.clear(); // what came back, if anything, is an allocation to reuse
                return;
            }
        }
        for ev in container.drain(..) {
            let to = owners.of(ev.hash);
            let out = &mut self.outs[to];
            if out.capacity() == 0 {
                out.reserve_exact(CONTAINER);
            }
            out.push(ev);
            if out.len() >= CONTAINER {
                Message::push_at(out, stamp.clone(), &mut pushers[to]);
                out.clear(); // what came back, if anything, is an allocation to reuse
            }
        }
    }

    fn flush<T: Clone, P: Push<Message<T, Vec<TimedEvent>>>>(&mut self, stamp: &Stamp<T>, pushers: &mut [P]) {
        for (out, pusher) in self.outs.iter_mut().zip(pushers.iter_mut()) {
            if !out.is_empty() {
                Message::push_at(out, stamp.clone(), pusher);
                out.clear();
            }
        }
    }

    fn relax(&mut self) {
        for out in &mut self.outs {
            if out.is_empty() {
                *out = Vec::new();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::hash::owner;
    use hotlist_operators::record::{EventText, PartitionId};
    use hotlist_operators::time::Millis;
    use proptest::prelude::*;

    /// A worker's end of the exchange: keeps what it is sent.
    #[derive(Default)]
    struct Received(Vec<Vec<TimedEvent>>);

    impl Push<Message<u64, Vec<TimedEvent>>> for Received {
        fn push(&mut self, message: &mut Option<Message<u64, Vec<TimedEvent>>>) {
            if let Some(m) = message.take() {
                self.0.push(m.data);
            }
        }
    }

    fn event(hash: u64, position: u64) -> TimedEvent {
        TimedEvent {
            text: EventText::item("i"),
            ts: Millis(0),
            wm_before: Millis::MIN,
            hash,
            partition: PartitionId(0),
            position,
        }
    }

    /// A hash that worker `w` of `peers` owns.
    fn owned_by(w: usize, peers: usize) -> u64 {
        (0u64..)
            .map(|i| i << 52)
            .find(|&h| owner(h, peers) == w)
            .expect("some key group")
    }

    /// A source's container of one worker's events reaches it whole (not cut into
    /// `CONTAINER`s: not moved event by event), after the events held for it from before.
    #[test]
    fn one_workers_container_goes_on_whole_after_what_was_held() {
        let (peers, stamp) = (2, Stamp::new());
        let mut router = EventRouter::new(peers);
        let mut workers: Vec<Received> = (0..peers).map(|_| Received::default()).collect();
        let mut mixed: Vec<TimedEvent> = (0..10).map(|i| event(owned_by(i as usize % 2, peers), i)).collect();
        router.partition(&mut mixed, &stamp, &mut workers);
        assert!(workers.iter().all(|w| w.0.is_empty()), "held, not yet sent");
        let long = 3 * CONTAINER as u64;
        let mut ones: Vec<TimedEvent> = (10..10 + long).map(|i| event(owned_by(1, peers), i)).collect();
        router.partition(&mut ones, &stamp, &mut workers);
        assert!(ones.is_empty());
        let sizes: Vec<usize> = workers[1].0.iter().map(Vec::len).collect();
        assert_eq!(sizes, [5, long as usize], "what was held, then the container whole");
        let order: Vec<u64> = workers[1].0.iter().flatten().map(|e| e.position).collect();
        let want: Vec<u64> = (1..10).step_by(2).chain(10..10 + long).collect();
        assert_eq!(order, want);
        assert!(workers[0].0.is_empty(), "worker 0's events still held");
        router.flush(&stamp, &mut workers);
        let zeros: Vec<u64> = workers[0].0.iter().flatten().map(|e| e.position).collect();
        assert_eq!(zeros, [0, 2, 4, 6, 8]);
    }

    proptest! {
        /// Every event reaches its owner, once, in the order it was pushed, in containers of
        /// at most `CONTAINER` events, whatever the batches it came in.
        #[test]
        fn every_event_reaches_its_owner_in_order(
            hashes in proptest::collection::vec(any::<u64>(), 0..3000),
            peers in 1usize..5,
            cuts in proptest::collection::vec(0usize..3000, 0..6),
        ) {
            let mut router = EventRouter::new(peers);
            let mut workers: Vec<Received> = (0..peers).map(|_| Received::default()).collect();
            let stamp = Stamp::new();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(hashes.len())).collect();
            cuts.push(0);
            cuts.push(hashes.len());
            cuts.sort();
            for w in cuts.windows(2) {
                let mut batch: Vec<TimedEvent> = (w[0]..w[1]).map(|i| event(hashes[i], i as u64)).collect();
                router.partition(&mut batch, &stamp, &mut workers);
                prop_assert!(batch.is_empty());
            }
            router.flush(&stamp, &mut workers);
            // (a batch of one worker's events goes on whole, however long)
            let longest = cuts.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
            for (w, Received(got)) in workers.iter().enumerate() {
                prop_assert!(got.iter().all(|c| !c.is_empty() && c.len() <= CONTAINER.max(longest)));
                let got: Vec<u64> = got.iter().flatten().map(|e| e.position).collect();
                let want: Vec<u64> = (0..hashes.len() as u64).filter(|&i| owner(hashes[i as usize], peers) == w).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}

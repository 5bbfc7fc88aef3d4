//! Holding two inputs by epoch until the frontier has passed the epoch.
//!
//! Every stateful operator of the job applies an epoch only once no input can still deliver
//! data for it: then its state is exactly "all records of epochs ≤ e", the same on every run
//! (and the consistent cut checkpoints need). This is that stash, shared by the operators.

use std::collections::BTreeMap;
use timely::dataflow::operators::{Capability, InputCapability};

/// One epoch's data from two inputs, with capabilities to emit at that epoch.
pub struct Epoch<A, B> {
    /// One capability per output port asked for (see [`EpochStash::first`]).
    pub caps: Vec<Capability<u64>>,
    /// Data of the first input.
    pub first: Vec<A>,
    /// Data of the second input.
    pub second: Vec<B>,
}

/// Epochs waiting for the frontier.
pub struct EpochStash<A, B> {
    pending: BTreeMap<u64, Epoch<A, B>>,
    ports: Vec<usize>,
}

impl<A, B> EpochStash<A, B> {
    /// A stash whose epochs hold a capability for each output port in `ports`.
    pub fn new(ports: &[usize]) -> Self {
        EpochStash {
            pending: BTreeMap::new(),
            ports: ports.to_vec(),
        }
    }

    fn entry(&mut self, cap: &InputCapability<u64>) -> Option<&mut Epoch<A, B>> {
        let &t = cap.least()?;
        let ports = &self.ports;
        Some(self.pending.entry(t).or_insert_with(|| Epoch {
            caps: ports.iter().filter_map(|p| cap.retain_least(*p)).collect(),
            first: Vec::new(),
            second: Vec::new(),
        }))
    }

    /// Stashes a message of the first input.
    pub fn first<'a>(&mut self, cap: &InputCapability<u64>, data: impl Iterator<Item = &'a mut Vec<A>>)
    where
        A: 'a,
    {
        if let Some(e) = self.entry(cap) {
            for d in data {
                e.first.append(d);
            }
        }
    }

    /// The first input's data of the epoch of `cap`, to add to as the caller likes (e.g. whole
    /// batches, without copying their records).
    pub fn first_mut(&mut self, cap: &InputCapability<u64>) -> Option<&mut Vec<A>> {
        self.entry(cap).map(|e| &mut e.first)
    }

    /// Stashes a message of the second input.
    pub fn second<'a>(&mut self, cap: &InputCapability<u64>, data: impl Iterator<Item = &'a mut Vec<B>>)
    where
        B: 'a,
    {
        if let Some(e) = self.entry(cap) {
            for d in data {
                e.second.append(d);
            }
        }
    }

    /// Removes the earliest epoch if `pending_at(epoch)` says no input can still deliver to it.
    pub fn pop_complete(&mut self, pending_at: impl Fn(&u64) -> bool) -> Option<(u64, Epoch<A, B>)> {
        let (&t, _) = self.pending.first_key_value()?;
        if pending_at(&t) {
            return None;
        }
        self.pending.pop_first()
    }
}

//! Replays spread over a cluster's processes: process 0 runs every replay's search (its
//! `hotlist-replay` thread, `graph::replays`), and each pass is counted by every process over
//! the partitions it owns (the ones its workers read live), the shares summed on process 0 by
//! `hotlist_operators::replay_pass::sum_shares` under the merged map's budget — so the lists,
//! certificates and stats are those of one process reading everything.
//!
//! The messages travel on three small streams of the job's graph, beside it (no other operator
//! reads them, so the capabilities they hold do not hold anything else back):
//!
//! ```text
//! ReplayTasks (worker 0) ──tasks──▶ (to each process's first worker) ReplayPeer ──shares──▶ (to worker 0) collector
//!     ▲ PeerLink (the replay thread)                                     │ a thread per process          │
//!     └──────────────────────────────────────────────────────────────── shares ◀───────────────────────────┘
//! ```
//!
//! A task is a job (sent once per replay, with the sketches its rules need), a pass (its rule
//! and budget) or the end of a job. The task source holds its capability while the replay
//! thread holds the [`PeerLink`]; each peer holds its own while tasks may still come or a pass
//! is being counted, so the job ends only once every replay is done or stopped (a stopping job
//! stops the peers' reads: their task streams end).

use crate::config::JobPlan;
use crate::source::file::Scanned;
use crate::source::replay::JobReader;
use hotlist_operators::record::PartitionId;
use hotlist_operators::replay::ReplayJob;
use hotlist_operators::replay_count::Counted;
use hotlist_operators::replay_lists::ListKey;
use hotlist_operators::replay_pass::{PassRule, ProcessShare};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::core::{Exchange, Inspect};
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::{Scope, Stream};
use timely::scheduling::SyncActivator;

/// What process 0 asks of another process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PeerWork {
    /// A replay begins: its job (ranges, tables), kept until [`PeerWork::Done`].
    Job {
        /// The job's number.
        seq: u64,
        /// The job.
        job: ReplayJob,
    },
    /// Count one pass of job `seq` over the partitions the process owns.
    Pass {
        /// The job's number.
        seq: u64,
        /// The pass's number.
        pass: u64,
        /// What it counts.
        rule: PassRule,
        /// The merged map's budget.
        max_keys: usize,
    },
    /// Job `seq` is over.
    Done {
        /// The job's number.
        seq: u64,
    },
}

/// A task for process `process`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeerTask {
    /// The process (≥ 1).
    pub process: usize,
    /// What to do.
    pub work: PeerWork,
}

/// One process's share of a pass, as it travels.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ShareBody {
    /// Every admitted key with its count over the process's parts.
    Fits(Vec<(ListKey, u64)>),
    /// The process's own map passed the budget.
    Over,
    /// A part failed (its index in the job's ranges), with why.
    Failed(usize, String),
}

/// A share, back to process 0.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeerShare {
    /// The job's number.
    pub seq: u64,
    /// The pass's number.
    pub pass: u64,
    /// The process that counted it.
    pub process: usize,
    /// What it counted.
    pub body: ShareBody,
    /// What its file readers went through.
    pub scanned: Scanned,
}

/// A process's share of a pass (`replay_pass`).
type Share = ProcessShare<ListKey, String>;

/// How long process 0 waits for a share before it checks whether the job is stopping.
const POLL: Duration = Duration::from_millis(50);

/// Which process owns partition `p`: the one whose worker reads it live (`source::owns`).
pub fn owner(p: PartitionId, workers: usize, processes: usize) -> usize {
    let peers = (workers * processes).max(1);
    (p.0 as usize % peers) / workers.max(1)
}

/// Process 0's end of the streams, for the replay thread: sends tasks, receives shares.
pub struct PeerLink {
    tasks: Option<Sender<PeerTask>>,
    activator: SyncActivator,
    shares: Receiver<PeerShare>,
    workers: usize,
    processes: usize,
    next_seq: u64,
    next_pass: u64,
    /// The other processes with parts in each running job.
    jobs: BTreeMap<u64, Vec<usize>>,
}

/// The parts of `job` (indices into its ranges) process `process` reads.
fn parts_of(job: &ReplayJob, process: usize, workers: usize, processes: usize) -> Vec<usize> {
    (0..job.ranges.len())
        .filter(|&i| owner(job.ranges[i].partition, workers, processes) == process)
        .collect()
}

impl PeerLink {
    /// The parts (indices into the job's ranges) process 0 reads.
    pub fn own_parts(&self, job: &ReplayJob) -> Vec<usize> {
        parts_of(job, 0, self.workers, self.processes)
    }

    /// How many processes read a part of `job` (this one always takes part).
    pub fn processes_of(&self, job: &ReplayJob) -> usize {
        1 + self.others(job).len()
    }

    /// The other processes that own some of `job`'s parts, in order.
    fn others(&self, job: &ReplayJob) -> Vec<usize> {
        let mut others: Vec<usize> = job
            .ranges
            .iter()
            .map(|r| owner(r.partition, self.workers, self.processes))
            .filter(|&p| p != 0)
            .collect();
        others.sort_unstable();
        others.dedup();
        others
    }

    /// Sends `job` to every other process that owns some of its parts; returns its number.
    pub fn start(&mut self, job: &ReplayJob) -> Result<u64, String> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let others = self.others(job);
        for &process in &others {
            let work = PeerWork::Job { seq, job: job.clone() };
            self.send(PeerTask { process, work })?;
        }
        self.jobs.insert(seq, others);
        Ok(seq)
    }

    /// Asks every other process of job `seq` to count a pass; returns its number.
    pub fn pass(&mut self, seq: u64, rule: &PassRule, max_keys: usize) -> Result<u64, String> {
        let pass = self.next_pass;
        self.next_pass += 1;
        for process in self.jobs.get(&seq).cloned().unwrap_or_default() {
            let work = PeerWork::Pass {
                seq,
                pass,
                rule: rule.clone(),
                max_keys,
            };
            self.send(PeerTask { process, work })?;
        }
        Ok(pass)
    }

    /// The other processes' shares of pass `pass` of job `seq`, each with what its readers went
    /// through; `Err` once `stop` is set or the streams are gone.
    pub fn wait(&mut self, seq: u64, pass: u64, stop: &AtomicBool) -> Result<Vec<(Share, Scanned)>, String> {
        let expected = self.jobs.get(&seq).map_or(0, Vec::len);
        let mut got: BTreeMap<usize, (Share, Scanned)> = BTreeMap::new();
        while got.len() < expected {
            if stop.load(Relaxed) {
                return Err("the job is stopping".into());
            }
            match self.shares.recv_timeout(POLL) {
                // (a stopped pass's late share is dropped)
                Ok(s) if s.seq == seq && s.pass == pass => {
                    got.insert(s.process, (s.body.into_share(), s.scanned));
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("the other processes' replay shares stopped coming".into())
                }
            }
        }
        Ok(got.into_values().collect())
    }

    /// Job `seq` is over: the other processes forget it.
    pub fn done(&mut self, seq: u64) {
        for process in self.jobs.remove(&seq).unwrap_or_default() {
            let _ = self.send(PeerTask {
                process,
                work: PeerWork::Done { seq },
            });
        }
    }

    fn send(&self, task: PeerTask) -> Result<(), String> {
        let sent = self.tasks.as_ref().is_some_and(|tx| tx.send(task).is_ok());
        let _ = self.activator.activate();
        if sent {
            Ok(())
        } else {
            Err("the replay's task stream is gone".into())
        }
    }
}

impl Drop for PeerLink {
    /// The task source sees the channel closed and drops its capability: the peers end.
    fn drop(&mut self) {
        self.tasks = None;
        let _ = self.activator.activate();
    }
}

impl ShareBody {
    fn from_share(share: Share) -> ShareBody {
        match share {
            Ok(Counted::Fits(counts)) => ShareBody::Fits(counts.into_iter().collect()),
            Ok(Counted::Over) => ShareBody::Over,
            Err((part, why)) => ShareBody::Failed(part, why),
        }
    }

    fn into_share(self) -> Share {
        match self {
            ShareBody::Fits(counts) => Ok(Counted::Fits(counts.into_iter().collect())),
            ShareBody::Over => Ok(Counted::Over),
            ShareBody::Failed(part, why) => Err((part, why)),
        }
    }
}

/// Builds the three streams in a cluster whose job has `exact_at_seal` windows; returns
/// worker 0's [`PeerLink`] (`None` elsewhere, and without a cluster or such windows).
pub fn build<'scope>(scope: Scope<'scope, u64>, plan: &JobPlan) -> Option<PeerLink> {
    let processes = plan.cluster.as_ref().map_or(1, |c| c.addresses.len());
    if processes < 2 || !plan.any_exact_at_seal() {
        return None;
    }
    let (workers, index) = (plan.workers.max(1), scope.index());
    let (task_tx, task_rx) = channel::<PeerTask>();
    let (share_tx, share_rx) = channel::<PeerShare>();
    let link: Arc<Mutex<Option<SyncActivator>>> = Arc::new(Mutex::new(None));
    let tasks: Stream<'scope, u64, Vec<PeerTask>> = {
        let link = link.clone();
        source(scope, "ReplayTasks", move |cap, info| {
            let activator = scope.worker().sync_activator_for(info.address.to_vec());
            *link.lock().unwrap_or_else(|p| p.into_inner()) = Some(activator);
            // only worker 0 sends tasks
            let mut cap = (index == 0).then_some(cap);
            move |output| {
                let Some(c) = cap.as_ref() else { return };
                let mut batch = Vec::new();
                let closed = loop {
                    match task_rx.try_recv() {
                        Ok(t) => batch.push(t),
                        Err(TryRecvError::Empty) => break false,
                        Err(TryRecvError::Disconnected) => break true,
                    }
                };
                if !batch.is_empty() {
                    output.session(c).give_container(&mut batch);
                }
                if closed {
                    cap = None;
                }
            }
        })
    };
    let peer_plan = Arc::new(plan.clone());
    let shares = tasks
        .exchange(move |t: &PeerTask| (t.process * workers) as u64)
        .unary_frontier(Pipeline, "ReplayPeer", move |cap, info| {
            let activator = scope.worker().sync_activator_for(info.address.to_vec());
            let process = index / workers;
            let mut peer = (process != 0 && index % workers == 0).then(|| Peer::new(cap, process, activator));
            move |(input, frontier), output| {
                let Some(p) = peer.as_mut() else { return };
                input.for_each(|_, data| {
                    for task in data.drain(..) {
                        p.take(task.work, &peer_plan);
                    }
                });
                let mut done = p.finished();
                if !done.is_empty() {
                    if let Some(c) = p.cap.as_ref() {
                        output.session(c).give_container(&mut done);
                    }
                }
                if frontier.is_empty() && p.end() {
                    peer = None;
                }
            }
        });
    shares.exchange(|_: &PeerShare| 0).inspect(move |s: &PeerShare| {
        let _ = share_tx.send(s.clone());
    });
    if index != 0 {
        return None;
    }
    let activator = link.lock().unwrap_or_else(|p| p.into_inner()).take()?;
    Some(PeerLink {
        tasks: Some(task_tx),
        activator,
        shares: share_rx,
        workers,
        processes,
        next_seq: 0,
        next_pass: 0,
        jobs: BTreeMap::new(),
    })
}

/// The first worker of process ≥ 1: a thread counting its passes, and the capability its shares
/// go out at.
struct Peer {
    cap: Option<Capability<u64>>,
    process: usize,
    activator: Option<SyncActivator>,
    inbox: Option<Sender<PeerWork>>,
    outbox: Option<Receiver<PeerShare>>,
    /// Passes handed to the thread and not answered yet.
    in_flight: usize,
    stop: Arc<AtomicBool>,
}

impl Peer {
    fn new(cap: Capability<u64>, process: usize, activator: SyncActivator) -> Peer {
        Peer {
            cap: Some(cap),
            process,
            activator: Some(activator),
            inbox: None,
            outbox: None,
            in_flight: 0,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Hands a task to the thread (started at the first).
    fn take(&mut self, work: PeerWork, plan: &Arc<JobPlan>) {
        if self.inbox.is_none() {
            let (tx, rx) = channel::<PeerWork>();
            let (out_tx, out_rx) = channel::<PeerShare>();
            let (plan, process, stop) = (plan.clone(), self.process, self.stop.clone());
            let activator = self.activator.take();
            let spawned = std::thread::Builder::new()
                .name("hotlist-replay-peer".into())
                .spawn(move || peer_thread(&plan, process, &rx, &out_tx, activator, &stop));
            if let Err(e) = spawned {
                tracing::warn!("process {}: cannot start the replay peer thread: {e}", self.process);
            }
            self.inbox = Some(tx);
            self.outbox = Some(out_rx);
        }
        if matches!(work, PeerWork::Pass { .. }) {
            self.in_flight += 1;
        }
        if self.inbox.as_ref().is_some_and(|tx| tx.send(work).is_err()) {
            // the thread is gone: process 0 sees its shares stop coming
            self.in_flight = 0;
        }
    }

    /// The shares the thread finished since the last call.
    fn finished(&mut self) -> Vec<PeerShare> {
        let mut out = Vec::new();
        if let Some(rx) = self.outbox.as_ref() {
            while let Ok(s) = rx.try_recv() {
                self.in_flight = self.in_flight.saturating_sub(1);
                out.push(s);
            }
        }
        out
    }

    /// No task can come any more: stops the thread's read; whether nothing is in flight (then
    /// the capability and the thread are let go).
    fn end(&mut self) -> bool {
        self.stop.store(true, Relaxed);
        if self.in_flight > 0 && self.outbox.is_some() {
            return false;
        }
        self.inbox = None;
        self.cap = None;
        true
    }
}

/// A peer's thread: keeps the jobs, counts each pass over the process's parts.
fn peer_thread(
    plan: &JobPlan,
    process: usize,
    inbox: &Receiver<PeerWork>,
    outbox: &Sender<PeerShare>,
    activator: Option<SyncActivator>,
    stop: &AtomicBool,
) {
    let processes = plan.cluster.as_ref().map_or(1, |c| c.addresses.len());
    let mut jobs: BTreeMap<u64, ReplayJob> = BTreeMap::new();
    for work in inbox {
        match work {
            PeerWork::Job { seq, job } => {
                jobs.insert(seq, job);
            }
            PeerWork::Done { seq } => {
                jobs.remove(&seq);
            }
            PeerWork::Pass {
                seq,
                pass,
                rule,
                max_keys,
            } => {
                let tally = Mutex::new(Scanned::default());
                let share = match jobs.get(&seq) {
                    None => Err((0, format!("process {process}: no replay job {seq}"))),
                    Some(job) => match JobReader::new(plan, job) {
                        Err(e) => Err((0, e)),
                        Ok(reader) => {
                            let own = parts_of(job, process, plan.workers, processes);
                            reader.count(&own, plan.workers, &rule, max_keys, stop, &tally)
                        }
                    },
                };
                let share = PeerShare {
                    seq,
                    pass,
                    process,
                    body: ShareBody::from_share(share),
                    scanned: tally.into_inner().unwrap_or_else(|p| p.into_inner()),
                };
                if outbox.send(share).is_err() {
                    return;
                }
                if let Some(a) = &activator {
                    let _ = a.activate();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Partition p is read by global worker p mod (processes × workers), process = worker / workers.
    #[test]
    fn a_partition_belongs_to_the_process_of_the_worker_that_reads_it() {
        let owners: Vec<usize> = (0..8).map(|p| owner(PartitionId(p), 2, 2)).collect();
        assert_eq!(owners, vec![0, 0, 1, 1, 0, 0, 1, 1]);
        let owners: Vec<usize> = (0..4).map(|p| owner(PartitionId(p), 1, 3)).collect();
        assert_eq!(owners, vec![0, 1, 2, 0]);
        assert!((0..5).all(|p| owner(PartitionId(p), 4, 1) == 0));
    }
}

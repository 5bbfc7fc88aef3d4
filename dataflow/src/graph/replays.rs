//! The replays of `exact_at_seal` instances, on their own thread beside the live job (worker 0,
//! owned by `MergeLists`). The merger hands over each sealed instance whose final list is
//! approximate; the thread reads its ranges again (`source::replay`: each pass on up to
//! `run.workers` threads of its own, one map each; in a cluster every process counts the
//! partitions it owns, `replay_peers`) and sends back the exact list with its certificate, which
//! the merger publishes as the instance's next revision. Replays run one at a time; the worker
//! never waits for one (the merger polls for results, also after the end of the input).
//!
//! Until then the job is pending: it is in every checkpoint (`replay.snap`, with the sources'
//! notes), so a crash or a stop replays it again after the restore; its exact revision is a
//! function of the input only, so publishing it twice is harmless (the same revision number
//! and list).

use super::replay_peers::PeerLink;
use crate::config::JobPlan;
use crate::source::file::Scanned;
use crate::source::replay::replay;
use crate::stats::MergeStats;
use hotlist_operators::certify::Certificate;
use hotlist_operators::merge::SealedSketch;
use hotlist_operators::message::PublishedList;
use hotlist_operators::record::{ListState, RankedItem};
use hotlist_operators::replay::{ListReplay, ReplayJob, SealedRanges};
use hotlist_operators::replay_budget::{ReplayBudget, ReplayStats, Replayed};
use hotlist_operators::time::Millis;
use hotlist_operators::window::InstanceKey;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A finished replay: its job, its result, how long it took, what its file readers went
/// through and how many processes read its partitions.
type Outcome = (ReplayJob, Result<Vec<Replayed>, String>, Duration, Scanned, usize);

/// The replays of one run.
pub struct Replays {
    pending: BTreeMap<InstanceKey, ReplayJob>,
    jobs: Option<Sender<ReplayJob>>,
    results: Receiver<Outcome>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Instances whose list stayed approximate, with the reason (for the log and metrics).
    pub failed: u64,
    /// Of those, the ones no pass proving the list fitted the budget.
    pub over_budget: u64,
    /// The most items one replay map held in this run.
    pub peak_keys: usize,
    budget: ReplayBudget,
    /// The job is stopping (see [`Replays::stop`]).
    stopping: bool,
}

impl Replays {
    /// The replays of a job, continuing the restored checkpoint's pending ones (`restored`).
    pub fn start(plan: Arc<JobPlan>, restored: Vec<ReplayJob>, peers: Option<PeerLink>) -> Replays {
        let budget = plan.exact_at_seal;
        let (jobs, inbox) = channel::<ReplayJob>();
        let (outbox, results) = channel::<Outcome>();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("hotlist-replay".into())
                .spawn(move || {
                    let peers = peers.map(Mutex::new);
                    for job in inbox {
                        let started = Instant::now();
                        let mut scanned = Scanned::default();
                        let outcome = replay(&plan, &job, &stop, &mut scanned, peers.as_ref());
                        let processes = peers
                            .as_ref()
                            .and_then(|p| p.lock().ok().map(|p| p.processes_of(&job)))
                            .unwrap_or(1);
                        let done = (job, outcome, started.elapsed(), scanned, processes);
                        if outbox.send(done).is_err() {
                            break;
                        }
                    }
                })
                .ok()
        };
        let mut me = Replays {
            pending: BTreeMap::new(),
            jobs: Some(jobs),
            results,
            stop,
            thread,
            failed: 0,
            over_budget: 0,
            peak_keys: 0,
            budget,
            stopping: false,
        };
        for job in restored {
            me.submit(job);
        }
        me
    }

    /// Starts the replays of instances the merger sealed approximate, given where each
    /// instance sealed in this epoch lies in the input (`ranges`).
    pub fn sealed(&mut self, sealed: Vec<SealedSketch>, ranges: &[SealedRanges]) {
        // one job per instance, with every approximate list of it (a per-group window's groups)
        let mut by_instance: BTreeMap<InstanceKey, Vec<SealedSketch>> = BTreeMap::new();
        for s in sealed {
            by_instance.entry(s.instance).or_default().push(s);
        }
        for (instance, lists) in by_instance {
            let Some(first) = lists.first() else { continue };
            let (window, start, end, k, watermark, admit_up_to) = (
                first.window.clone(),
                first.start,
                first.end,
                first.k,
                first.watermark,
                first.admit_up_to,
            );
            let found = ranges.iter().find(|r| r.window == window && r.start == start);
            let ranges = match found.map(|r| r.ranges.clone()) {
                Some(Ok(ranges)) => ranges,
                None => {
                    for _ in &lists {
                        self.give_up(&window, start, "no ranges were recorded for it");
                    }
                    continue;
                }
                Some(Err(why)) => {
                    for _ in &lists {
                        self.give_up(&window, start, &why);
                    }
                    continue;
                }
            };
            let mut replays = Vec::new();
            for s in lists {
                match s.sketch {
                    Some(sketch) => replays.push(ListReplay {
                        group: s.group,
                        revision: s.revision.saturating_add(1),
                        threshold: s.threshold,
                        sketch,
                    }),
                    None => self.give_up(&window, start, "no worker sent its share of the sketch"),
                }
            }
            if replays.is_empty() {
                continue;
            }
            self.submit(ReplayJob {
                instance,
                window,
                start,
                end,
                k,
                watermark,
                lists: replays,
                admit_up_to,
                ranges,
            });
        }
    }

    /// Queues a replay. Once the job is stopping it is only kept for the checkpoints (the next
    /// run replays it); without a thread to run it otherwise (it could not start) the list
    /// stays approximate.
    fn submit(&mut self, job: ReplayJob) {
        if self.stopping {
            self.pending.insert(job.instance, job);
            return;
        }
        if self.jobs.as_ref().is_some_and(|tx| tx.send(job.clone()).is_ok()) {
            self.pending.insert(job.instance, job);
        } else {
            self.jobs = None;
            for _ in &job.lists {
                self.give_up(&job.window, job.start, "the replay thread is not running");
            }
        }
    }

    fn give_up(&mut self, window: &str, start: Millis, why: &str) {
        self.failed += 1;
        tracing::warn!("window {window} instance {start}: the sealed list stays approximate: {why}");
    }

    /// Stores its counters in the merge's stats.
    pub fn report(&self, m: &MergeStats) {
        m.replays_failed.store(self.failed, Relaxed);
        m.replays_over_budget.store(self.over_budget, Relaxed);
        m.replay_keys_peak.store(self.peak_keys as u64, Relaxed);
        m.replays_pending.store(self.pending() as u64, Relaxed);
    }

    /// A replay's memory, for the log.
    fn memory(&self, stats: &ReplayStats) -> String {
        format!(
            "peak {} keys of {} (max_replay_keys), {} item-hash range(s), {} read(s)",
            stats.peak_keys,
            self.budget.max_keys(),
            stats.ranges,
            stats.reads
        )
    }

    /// Replays running or queued.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Whether replays are pending and running (a stopping job waits for none).
    pub fn busy(&self) -> bool {
        !self.stopping && !self.pending.is_empty()
    }

    /// The exact revisions of the replays finished since the last call.
    pub fn finished(&mut self, as_of: Millis) -> Vec<PublishedList> {
        let mut out = Vec::new();
        while self.busy() {
            let (job, outcome, took, scanned, processes) = match self.results.try_recv() {
                Ok(done) => done,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    // the thread is gone: what is left stays approximate
                    for job in std::mem::take(&mut self.pending).into_values() {
                        for _ in &job.lists {
                            self.give_up(&job.window, job.start, "the replay thread stopped");
                        }
                    }
                    break;
                }
            };
            if self.pending.remove(&job.instance).is_none() {
                continue;
            }
            let outcomes = match outcome {
                Ok(outcomes) => outcomes,
                Err(why) => {
                    for _ in &job.lists {
                        self.give_up(&job.window, job.start, &why);
                    }
                    continue;
                }
            };
            for (list, outcome) in job.lists.iter().zip(outcomes) {
                let of = if list.group.is_global() {
                    String::new()
                } else {
                    format!(" group {}", list.group.as_str())
                };
                match outcome {
                    Replayed::Exact(items, certificate, stats) => {
                        self.peak_keys = self.peak_keys.max(stats.peak_keys);
                        tracing::info!(
                            "window {} instance {}{of}: sealed list exact after {} pass(es) over {} partition range(s) read by {} process(es) in {:.3}s (files: {} bytes read, {} lines read only to reach the ranges); {} items counted exactly from threshold {}; {}",
                            job.window,
                            job.start,
                            certificate.passes,
                            job.ranges.len(),
                            processes,
                            took.as_secs_f64(),
                            scanned.bytes,
                            scanned.skipped_lines,
                            certificate.counted,
                            certificate.threshold,
                            self.memory(&stats)
                        );
                        out.push(exact_revision(&job, list, items, certificate, as_of));
                    }
                    Replayed::OverBudget(stats) => {
                        self.peak_keys = self.peak_keys.max(stats.peak_keys);
                        self.over_budget += 1;
                        let why = format!(
                            "{of}over the replay budget: a pass that proves the list needs more than {} items (exact_at_seal.max_replay_keys) in one of {} item-hash ranges (exact_at_seal.max_key_ranges); {} pass(es), {}",
                            self.budget.max_keys(),
                            self.budget.max_ranges(),
                            stats.passes,
                            self.memory(&stats)
                        );
                        self.give_up(&job.window, job.start, why.trim_start());
                    }
                }
            }
        }
        out
    }

    /// What a checkpoint keeps of them: the replays still pending.
    pub fn pending_jobs(&self) -> Vec<ReplayJob> {
        self.pending.values().cloned().collect()
    }

    /// The job is stopping: the thread stops, and what is pending — also what seals in the
    /// epochs still to come (each worker's source stops in an epoch of its own) — stays in
    /// every checkpoint for the next run, which replays it.
    pub fn stop(&mut self) {
        self.stop.store(true, Relaxed);
        self.stopping = true;
        self.jobs = None;
    }
}

/// The exact final revision a finished replay publishes.
fn exact_revision(
    job: &ReplayJob,
    list: &ListReplay,
    items: Vec<RankedItem>,
    certificate: Certificate,
    as_of: Millis,
) -> PublishedList {
    PublishedList {
        window: job.window.clone(),
        start: job.start,
        end: job.end,
        group: list.group.clone(),
        revision: list.revision,
        state: ListState::Final,
        watermark: job.watermark,
        as_of,
        items,
        exact: true,
        error_bound: 0,
        sketch_check: None,
        certificate: Some(certificate),
    }
}

impl Drop for Replays {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

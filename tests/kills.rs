//! The crash tests' loop: start the job, wait until this run has committed checkpoints of its
//! own, SIGKILL it (a random few milliseconds later: mid-epoch, mid-checkpoint-write or
//! mid-commit alike), start it again, until it ends by itself or has been killed enough times
//! (then one last run to the end).

use rand::{Rng, SeedableRng};
use std::process::Child;
use std::time::{Duration, Instant};

/// How the job is killed.
pub struct KillPlan {
    /// Most runs before giving up killing.
    pub attempts: usize,
    /// After this many kills, one run to the end.
    pub kills: usize,
    /// Commits of its own a run makes before it is killed: on the first attempt, and after.
    pub commits_before_kill: (usize, usize),
    /// A random wait of 0 to this many milliseconds after those commits (0: kill at once).
    pub jitter_ms: u64,
    /// The random waits' seed.
    pub seed: u64,
}

/// What happened.
pub struct KillReport {
    /// Runs killed.
    pub kills: usize,
    /// Runs that restored a checkpoint (their log says `restoring checkpoint`).
    pub restored: usize,
    /// Every run's stderr, for assertion messages.
    pub logs: String,
}

/// Runs the job by `spawn(attempt)` (and `spawn(usize::MAX)` for the last run to the end) until
/// it ends, killing it as `plan` says; `committed` reads the store's committed epoch. Every run
/// that ends by itself must succeed.
pub fn kill_and_restart(
    plan: &KillPlan,
    spawn: impl Fn(usize) -> Child,
    committed: impl Fn() -> Option<u64>,
) -> KillReport {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(plan.seed);
    let mut report = KillReport {
        kills: 0,
        restored: 0,
        logs: String::new(),
    };
    for attempt in 0..plan.attempts {
        let mut child = spawn(attempt);
        let wanted = if attempt == 0 {
            plan.commits_before_kill.0
        } else {
            plan.commits_before_kill.1
        };
        let mut finished = !awaits_commits(&mut child, wanted, &committed, &report.logs);
        if !finished && plan.jitter_ms > 0 {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..plan.jitter_ms))); // fault injection timing
            finished = child.try_wait().expect("try_wait").is_some();
        }
        if !finished {
            child.kill().expect("SIGKILL");
            report.kills += 1;
        }
        report.note(child, &format!("attempt {attempt} (killed: {})", !finished), finished);
        if finished {
            break;
        }
        if report.kills >= plan.kills {
            report.note(spawn(usize::MAX), "final run", true);
            break;
        }
    }
    report
}

/// Waits until the store's committed epoch moved `wanted` times while `child` runs, then
/// SIGKILLs it; false when the child ended first (nothing killed).
pub fn kill_after_commits(mut child: Child, wanted: usize, committed: impl Fn() -> Option<u64>) -> bool {
    let killed = awaits_commits(&mut child, wanted, &committed, "");
    if killed {
        child.kill().expect("SIGKILL");
    }
    let _ = child.wait();
    killed
}

/// Waits until the store's committed epoch moved `wanted` times while `child` runs; false when
/// the child ended first.
fn awaits_commits(child: &mut Child, wanted: usize, committed: &impl Fn() -> Option<u64>, logs: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut seen, mut last) = (0, committed());
    while seen < wanted {
        if child.try_wait().expect("try_wait").is_some() {
            return false;
        }
        let now = committed();
        if now > last {
            seen += 1;
            last = now;
        }
        assert!(Instant::now() < deadline, "no progress:\n{logs}");
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

impl KillReport {
    /// Waits for `child`, keeps its log; one that `must_succeed` must have exited 0.
    fn note(&mut self, child: Child, what: &str, must_succeed: bool) {
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        self.restored += err.contains("restoring checkpoint") as usize;
        self.logs.push_str(&format!("--- {what}:\n{err}\n"));
        if must_succeed {
            assert!(out.status.success(), "{}", self.logs);
        }
    }
}

//! Crash tests: the real binary killed with SIGKILL at random moments and restarted (it
//! restores the latest committed checkpoint by itself) ends with exactly the sealed lists and
//! dead letters of an uninterrupted run and of the model: nothing lost, nothing twice.

// the checkpointed job, its runs and results: what the tests below share
mod harness;

// SIGKILL at random moments, SIGTERM, a replay from an older checkpoint: restored exactly
mod restore;
// damaged checkpoints: refused, or a fallback to the previous one
mod fallback;
// clusters of processes: fate-sharing, a missing peer, `scripts/cluster`
mod cluster;

//! The hotlist engine: the job on Timely Dataflow. The `hotlist` binary (crate `hotlist`, in
//! `cli/`) is the command line over it.
//!
//! Module map:
//! - [`config`]: TOML + `--set` overrides validated into a [`config::JobPlan`] (raw file,
//!   validation, plan);
//! - [`generator`]: the deterministic event generator (spec, alias table, record streams);
//! - [`source`]: the source operator and its partition readers (files, stdin, generator, Kafka);
//! - [`graph`]: the dataflow (window count, merge, sink hand-off) and what operators share;
//! - [`run_ctx`]: what a run shares with the source and the graph's operators ([`run_ctx::RunCtx`]);
//! - [`checkpoint`]: checkpoints on disk (layout, atomic writes, manifests, restore with
//!   validation and fallback, retention, the job directory's lock);
//! - [`run`]: running a job: who owns it and where it resumes, workers, the sink writer thread,
//!   progress display, summary;
//! - [`stats`]: the job's shared counters, one struct per subsystem, each naming its own
//!   Prometheus series; [`metrics`]: the registry they render into;
//! - [`udf`]: user-defined functions in Arroyo's plugin format: the libraries loaded once,
//!   called per batch through the Arrow C Data Interface, a failing record isolated;
//! - [`connect_watchdog`], [`peer_loss`]: a cluster that fails to connect or loses a peer
//!   stops with one clear line.
#![deny(missing_docs)]
// No product function over 80 lines (the threshold is in clippy.toml); tests may be longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod checkpoint;
pub mod config;
pub mod connect_watchdog;
pub mod generator;
pub mod graph;
pub mod metrics;
pub mod peer_loss;
pub mod run;
pub mod run_ctx;
pub mod source;
pub mod stats;
pub mod udf;

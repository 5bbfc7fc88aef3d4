//! The hotlist job on Timely Dataflow, and the pieces of the `hotlist` binary.
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
//! - [`stats`]: the job's shared counters; [`metrics`]: them in the Prometheus format;
//! - [`connect_watchdog`], [`peer_loss`]: a cluster that fails to connect or loses a peer
//!   stops with one clear line;
//! - the other subcommands: [`query`], [`serve`], [`checkpoints_cli`] (`hotlist checkpoints`),
//!   [`bench`](mod@bench), [`produce`] (generator → Kafka), [`generate`] (generator → files).
#![deny(missing_docs)]
// No product function over 80 lines (the threshold is in clippy.toml); tests may be longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod bench;
pub mod checkpoint;
pub mod checkpoints_cli;
pub mod config;
pub mod connect_watchdog;
pub mod generate;
pub mod generator;
pub mod graph;
pub mod metrics;
pub mod peer_loss;
pub mod produce;
pub mod query;
pub mod run;
pub mod run_ctx;
pub mod serve;
pub mod source;
pub mod stats;

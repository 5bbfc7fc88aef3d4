//! The hotlist job on Timely Dataflow, and the pieces of the `hotlist` binary.
//!
//! Module map:
//! - [`config`]: TOML + `--set` overrides validated into a [`config::JobPlan`];
//! - [`source`]: the source operator and its partition readers (files, stdin, generator);
//! - [`graph`]: the dataflow (window count, merge, sink hand-off);
//! - [`checkpoint`]: checkpoints on disk (layout, atomic writes, restore, retention);
//! - [`run`]: workers, the sink writer thread, progress display;
//! - [`query`], [`serve`], [`bench`], [`generate`]: the other subcommands.
#![deny(missing_docs)]

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
pub mod serve;
pub mod source;
pub mod stats;

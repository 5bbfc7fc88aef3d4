//! The `hotlist` command line: each subcommand's flags and what it does, over the engine in
//! `hotlist-dataflow`. The binary (`main.rs`) only parses the flags, dispatches and owns the
//! exit codes.
//!
//! Module map:
//! - [`run`]: `hotlist run`: loads the config, stops on Ctrl-C / SIGTERM, serves the job's
//!   metrics, runs the job, prints the lists and the summary;
//! - [`query`]: `hotlist query`: a window's list from the sink store;
//! - [`serve`]: `hotlist serve`: the read API and live page over the sink store (or its
//!   Redis fan-out);
//! - [`checkpoints`]: `hotlist checkpoints list | show | verify`;
//! - [`bench`](mod@bench): `hotlist bench`, the throughput, hot-key, Kafka and freshness
//!   benchmarks;
//! - [`produce`]: `hotlist produce`, the generator into a Kafka topic;
//! - [`generate`]: `hotlist generate`, the generator into JSON-lines files.
#![deny(missing_docs)]
// No product function over 80 lines (the threshold is in clippy.toml); tests may be longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod bench;
pub mod checkpoints;
pub mod generate;
pub mod produce;
pub mod query;
pub mod run;
pub mod serve;

//! The `hotlist` command line: each subcommand's flags and what it does, over the engine in
//! `hotlist-dataflow`. The binary (`main.rs`) only parses the flags, dispatches and owns the
//! exit codes.
//!
//! Module map:
//! - [`run`]: `hotlist run`: loads the config, stops on Ctrl-C / SIGTERM, serves the job's
//!   metrics, runs the job, prints the lists and the summary;
//! - [`query`]: `hotlist query`: a window's list from the sink store;
//! - [`explain`]: `hotlist explain`: one item's count in a sealed instance taken apart, from
//!   the instance's input read again, beside what the store holds;
//! - [`verify`]: `hotlist verify`: every sealed instance counted again from its input and
//!   compared with the store's lists;
//! - `instance_input` (private): a sealed instance's input read again, each event with its
//!   group, for `explain` and `verify`;
//! - `restore_drill` (private): `verify --restore`: a checkpoint restored into a scratch
//!   directory and run to the end of the input, its lists compared with the store's;
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
pub mod explain;
pub mod generate;
mod instance_input;
pub mod produce;
pub mod query;
mod restore_drill;
pub mod run;
pub mod serve;
pub mod verify;

//! The deterministic event generator, free of any engine or I/O (the source's partition reader
//! is `source::generator`; `hotlist generate`, `produce` and `bench` use it directly).
//!
//! A [`GeneratorSpec`] describes a synthetic input of `partitions` independent streams of item
//! events whose popularity follows a Zipf law (`item-0` is the most popular). One
//! [`GeneratorTables`] (the alias table and the pre-rendered item ids) is built per generator and
//! shared by the [`PartitionStream`]s of all partitions through an `Arc`.
//!
//! # Contract
//!
//! - **Deterministic.** The records of a partition are a pure function of the spec and the
//!   partition number: the same spec gives the same sequence, byte for byte, on every run and
//!   every machine. Each partition has its own ChaCha8 stream seeded with
//!   `seed ^ partition * 0x9E3779B97F4A7C15`; the Zipf weights are computed with basic IEEE-754
//!   operations only (no platform `pow`/`exp`/`ln`), so the alias table is bit-identical
//!   everywhere too.
//! - **Fixed draws per record.** Every record consumes exactly
//!   [`GeneratorSpec::words_per_record`] 64-bit words of its partition's ChaCha stream (one for
//!   the item, plus one each for the bad, late and jitter decisions when those are enabled).
//!   That is what makes [`PartitionStream::skip_to`] O(1): it seeks the ChaCha stream instead of
//!   generating and dropping, and gives exactly the records that generating and dropping would.
//! - **Rate is event time, not wall-clock pacing.** Record `i` of a partition (bad records
//!   included: they consume a position and a time slot) has the base time
//!   `start + floor(i * 1000 / rate)` ms, computed exactly (no drift) and saturating at
//!   `Millis::MAX`. Nothing here sleeps: pacing to the wall clock is the source operator's job.
//! - **Disorder.** A late event (probability `late_fraction`) has `ts = base - late_by`; any other
//!   event has `ts = base - u` with `u` uniform in `[0, jitter]`.
//! - **Bad records.** With probability `bad_fraction` a record is a bad line instead of an event:
//!   truncated JSON, a float `ts`, a missing `item_id`, an empty `item_id`, not an object,
//!   invalid UTF-8, trailing garbage or a digit-string `ts` (not an empty line: that is a blank
//!   line, skipped and counted, not a bad record), chosen from the ChaCha stream. Every
//!   one is rejected by `hotlist_operators::event::parse_event`.
//! - **Volume.** `events` (if set) is split over the partitions as evenly as possible, lower
//!   partitions taking the remainder; `None` makes every partition endless.
//!
//! Files: `spec` the settings; `tables` the alias table and item ids;
//! `det_math` the platform-independent `ln`/`exp`/weights; `stream` the per-partition record
//! stream and its seeking; `bad` the bad-line kinds; `render` the JSON rendering.

mod bad;
mod det_math;
mod render;
mod spec;
mod stream;
mod tables;
#[cfg(test)]
mod testing;

pub use render::render_json;
pub use spec::{GeneratorSpec, MAX_ITEMS};
pub use stream::{Generated, PartitionStream};
pub use tables::GeneratorTables;

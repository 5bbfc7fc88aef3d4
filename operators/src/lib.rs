//! The algorithms of hotlist, free of any engine or I/O.
//!
//! Module map:
//! - [`time`]: event-time instants and spans (`Millis`, `Span`), the event time range (years
//!   0000–9999), RFC 3339 and humantime parsing;
//! - [`window`]: window specifications, instances and panes (epoch-aligned, UTC);
//! - [`hash`]: the pinned item hash and key groups (routing and checkpoint shards);
//! - [`hot_keys`]: the sampled hot-key detector (deterministic 1-in-N sampling, a count-min
//!   sketch per tumbling window, hot/cooling with hysteresis);
//! - [`event`]: the event contract: parse one JSON line into an event or a typed bad-record reason;
//! - [`format`]: field mapping: where a producer's record keeps the item, time, user and dims;
//! - [`group`]: per-dimension lists: group keys, the counter keys of per-group and
//!   distinct-user windows, and which groups of an instance keep a list (`max_groups`);
//! - [`watermark`]: per-partition clocks and the global watermark over partitions;
//! - [`lateness`]: the per-partition lateness rule sources apply to each event;
//! - [`interner`]: item ids interned once per worker, reference counted by live counters;
//! - [`counter`]: the exact windowed counter state of one worker (panes, lateness, emission);
//! - [`counting`]: how a window counts (`exact`, `sketch`, `auto`, `both`) and which sketch;
//! - [`sketch_counter`]: the sketch counter of one worker (sketch windows, `auto` folding);
//! - [`trend`]: trend ranking: an item's surge over its own baseline (the score, compared
//!   exactly, and an instance's trend lists);
//! - [`topk`]: the ranking order, top-K selection and merging of per-worker lists;
//! - [`merge`]: the global list merger that turns per-worker lists into published revisions;
//! - [`certify`]: the threshold and the check that make a sketch window's sealed list provably
//!   exact after a sketch-guided replay;
//! - [`replay`]: that replay minus the reading: the sources' notes of where an instance's
//!   events lie per partition, the ranges and job of a sealed instance, and the ranges every
//!   window's sealed instances keep in the store;
//! - [`explain`]: one item's count in one sealed instance, taken apart (per partition, late,
//!   users) from the instance's events read again (`hotlist explain`);
//! - [`verify`]: a sealed instance's lists counted again from its events, and where a stored
//!   list first differs (`hotlist verify`);
//! - [`replay_budget`]: the replay's passes within a bound on the items counted at once
//!   (split by item-hash ranges, or over budget);
//! - [`replay_count`]: one read of a replay pass, its parts counted on parallel threads and
//!   summed per key, within the budget of the merged map;
//! - [`replay_lists`]: every approximate list of one instance (a per-group window's groups)
//!   replayed with one shared first pass;
//! - [`replay_pass`]: a replay pass's rule as data, counted in this process or summed over a
//!   cluster's processes;
//! - [`sketch`]: bounded-memory counting with a stated error: a count-min sketch with a
//!   candidate list and HeavyKeeper, behind one `TopKSketch` trait, and their snapshots;
//! - [`snapshot`]: checkpoint snapshots (versioned, checksummed, keyed by key group) and their
//!   validation against the job before a restore;
//! - [`pane_sharing`]: how long an incremental checkpoint may keep sharing a pane file;
//! - [`swar`]: JSON strings searched sixteen bytes a step (SSE2; eight with a `u64`
//!   elsewhere) and digits eight at a time, for the plain line's id and the field mapping's
//!   scan, and the newlines of 64 bytes as one mask, for the line reader;
//! - [`short_copy`]: short strings (ids, users, dim values) copied as a few word moves, without
//!   a `memcpy` call, for the event text and the counter and group keys, and compared as words,
//!   without a `memcmp` call, for dim names and a record shape's last bytes;
//! - [`message`]: the records that carry the features' payloads: control records (group
//!   announcements, replay notes), per-worker lists (sketch shares), published lists
//!   (certificates);
//! - [`dead_letter_cap`]: the bound on dead letters: per source and block of positions, the
//!   first `cap` whole, the rest counted per reason into one summary;
//! - [`udf`]: user-defined functions in Arroyo's plugin format: a UDF's signature read from its
//!   `#[udf]` source, the uses it fits, a record's JSON values as its arguments;
//! - [`record`]: the plain records that travel between operators and into sinks (a leaf: ids,
//!   events, partition and list states, dead letters).
//!
//! Everything here is deterministic: the same inputs in the same order give the same outputs.
#![deny(missing_docs)]
// No product function over 80 lines (the threshold is in clippy.toml); tests may be longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod certify;
pub mod counter;
pub mod counting;
pub mod dead_letter_cap;
pub mod event;
pub mod explain;
pub mod format;
pub mod group;
pub mod hash;
pub mod hot_keys;
pub mod interner;
pub mod lateness;
pub mod merge;
pub mod message;
pub mod pane_sharing;
pub mod record;
pub mod replay;
pub mod replay_budget;
pub mod replay_count;
pub mod replay_lists;
pub mod replay_pass;
pub mod short_copy;
pub mod sketch;
pub mod sketch_counter;
pub mod snapshot;
pub mod swar;
pub mod time;
pub mod topk;
pub mod trend;
pub mod udf;
pub mod verify;
pub mod watermark;
pub mod window;

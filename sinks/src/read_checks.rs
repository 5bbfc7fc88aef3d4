//! What every store checks in what it reads back, before handing it out.
//!
//! A store's rows may have been written by something else, or damaged, so nothing read is
//! trusted. Counts are bounded by what the job's configuration allows: a list holds at most its
//! window's `k` items, and a `k` is at most
//! [`MAX_K`](hotlist_operators::window::MAX_K). A reader reads at most one row more than
//! that bound ([`row_limit`]), never sizes anything from a stored count, and compares the rows
//! it got with the header afterwards ([`rows_match`]). Revisions, epochs and watermarks must
//! lie in the ranges the job writes. A list's accuracy ([`accuracy`]) must be one the job can
//! write: an exact list over-counts by nothing (`error_bound` 0), a sketch check compares at
//! most `k` items, finding at most as many as it compares, and a certificate (what proved a
//! sketch window's sealed list exact) is whole, on an exact final list only.
//!
//! Each check returns `Err(detail)`: one sentence naming the job, the window, the instance (as
//! RFC 3339) and the field, e.g. `job "hotlist" window "5m" instance 2026-11-30T10:00:00.000Z:
//! header item_count 1099511627776 exceeds the window's k (100)`. The backend wraps it in
//! [`SinkError::Corrupt`](crate::SinkError::Corrupt) with its location.
//!
//! A list longer than its window's *current* `k` is corrupt too: the job never writes one. (It
//! is also what a store holds after a window's `k` was lowered under the same `job.id`; such a
//! change needs a new `job.id`, as every window change with checkpoints does.)
//!
//! Files: `list` (a list's header, rows and ranking order), `accuracy` (what a list says it
//! is), `job` (the job's windows and last commit), `hot_keys` (hot-key windows).

mod accuracy;
mod hot_keys;
mod job;
mod list;

pub(crate) use accuracy::{accuracy, RawAccuracy, CERTIFICATE_FIELDS, SKETCH_FIELDS};
pub(crate) use hot_keys::{hot_header, hot_window, hot_window_to_write, RawHotHeader};
pub(crate) use job::{commit, window_k, windows};
pub(crate) use list::{header, ranked_items, row_limit, rows_match, Header, ListAt};

//! Sealed instances' input ranges in Redis, kept for the newest [`RANGES_KEPT`] sealed
//! instances of each window (Redis keeps no older lists; memory stays bounded), which
//! `hotlist explain` and `verify` read:
//!
//! - `{prefix}:{job}:{window}:ranges` — hash: field = the instance's start (decimal ms), value =
//!   JSON `{"end":…,"ranges":[…]}` (the partition ranges, `crate::ranges`) or
//!   `{"end":…,"unreadable":"…"}` (why it cannot be read again);
//! - `{prefix}:{job}:{window}:ranges:starts` — sorted set: member = score = the start of every
//!   instance in the hash, so `sealed_instances` reads the starts in order, at most `limit` of
//!   them, without reading the hash;
//! - `{prefix}:{job}:ranges` — set: the windows with ranges (what `reset` deletes).
//!
//! The commit script writes them in the same `EVALSHA` as the lists (an instance's value and
//! start replaced, so a later commit's ranges replace the earlier ones); a skipped epoch writes
//! none. Starts are sorted-set scores (doubles), so a start beyond ±2^53 ms is refused as
//! invalid input, as counts are; no instance of an event in years 0000–9999 is near that.
//!
//! A read of an instance first takes the value's length (a damaged value is never read whole
//! beyond [`MAX_RANGES_BYTES`]), then the value, and checks it.

use super::keys::check_key_part;
use super::{RedisStore, MAX_EXACT_COUNT};
use crate::error::SinkError;
use crate::ranges::{from_instance_json, instance_json, latest_ranges};
use crate::read_checks::ListAt;
use ::redis::ScriptInvocation;
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::time::Millis;

/// How many sealed instances' ranges a window keeps, the newest (the commit script's
/// `RANGES_KEPT`): a `1m` window's week.
pub const RANGES_KEPT: usize = 10_000;

/// The longest value of an instance a read takes: far beyond every partition's range of the
/// largest job with [`hotlist_operators::replay::MAX_SKIPS`] skipped records.
pub(super) const MAX_RANGES_BYTES: usize = 64 << 20;

/// One window's ranges in a commit: the window, and (start, value) per instance.
pub(super) type WindowRanges = (String, Vec<(i64, String)>);

impl RedisStore {
    /// The window's ranges hash: start → the instance's JSON.
    pub(super) fn ranges_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:ranges", self.prefix)
    }

    /// The window's sorted set of the starts in its ranges hash.
    pub(super) fn range_starts_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:ranges:starts", self.prefix)
    }

    /// The job's set of the windows with ranges.
    pub(super) fn ranged_windows_key(&self, job: &str) -> String {
        format!("{}:{job}:ranges", self.prefix)
    }

    /// The commit script's ranges, per window in order of first appearance (the last ranges of
    /// an instance in the batch win), after the checks `check_batch` does not do: window names
    /// fit the key layout, starts are exact as scores.
    pub(super) fn ranges_args(job: &str, ranges: &[SealedRanges]) -> Result<Vec<WindowRanges>, SinkError> {
        let mut out: Vec<WindowRanges> = Vec::new();
        for r in latest_ranges(ranges) {
            check_key_part(job, "window name", &r.window)?;
            if r.start.0.unsigned_abs() > MAX_EXACT_COUNT {
                return Err(SinkError::invalid(
                    job,
                    format!(
                        "ranges {:?}@{}: a start beyond ±2^53 ms, which Redis scores cannot hold exactly",
                        r.window, r.start.0
                    ),
                ));
            }
            let entry = (r.start.0, instance_json(r));
            match out.iter_mut().find(|(w, _)| *w == r.window) {
                Some((_, entries)) => entries.push(entry),
                None => out.push((r.window.clone(), vec![entry])),
            }
        }
        Ok(out)
    }

    /// Adds the commit script's keys and arguments of `ranges` (see `commit.lua`): the job's set
    /// of windows with ranges, then per window its hash and sorted set, its name, its number
    /// of instances and their (start, value) pairs.
    pub(super) fn ranges_call(&self, call: &mut ScriptInvocation<'_>, job: &str, ranges: &[WindowRanges]) {
        call.key(self.ranged_windows_key(job)).arg(ranges.len() as u64);
        for (window, entries) in ranges {
            call.key(self.ranges_key(job, window))
                .key(self.range_starts_key(job, window))
                .arg(window.as_str())
                .arg(entries.len() as u64);
            for (start, value) in entries {
                call.arg(*start).arg(value.as_str());
            }
        }
    }

    /// The instance's ranges (see `StoreReader::sealed_ranges`).
    pub(super) fn read_sealed_ranges(
        &mut self,
        job: &str,
        window: &str,
        start: Millis,
    ) -> Result<Option<SealedRanges>, SinkError> {
        check_key_part(job, "job id", job)?;
        check_key_part(job, "window name", window)?;
        let key = self.ranges_key(job, window);
        let field = start.0.to_string();
        let op = || {
            format!(
                "reading the ranges of job {job:?} window {window:?} instance {}",
                start.0
            )
        };
        let (exists, len): (bool, usize) = self.run(op, |c| {
            ::redis::pipe()
                .atomic()
                .cmd("HEXISTS")
                .arg(&key)
                .arg(&field)
                .cmd("HSTRLEN")
                .arg(&key)
                .arg(&field)
                .query(c)
        })?;
        if !exists {
            return Ok(None);
        }
        if len > MAX_RANGES_BYTES {
            return Err(self.corrupt(format!(
                "{key} field {field}: {len} bytes, more than the {MAX_RANGES_BYTES} an instance's ranges take"
            )));
        }
        let value: Option<Vec<u8>> = self.run(op, |c| ::redis::cmd("HGET").arg(&key).arg(&field).query(c))?;
        // deleted (by `reset`) in between: as if read after
        let Some(value) = value else { return Ok(None) };
        let at = ListAt { job, window, start };
        let text = std::str::from_utf8(&value)
            .map_err(|e| self.corrupt(format!("{key} field {field}: {at}: ranges: not UTF-8: {e}")))?;
        from_instance_json(&at, text)
            .map(Some)
            .map_err(|d| self.corrupt(format!("{key} field {field}: {d}")))
    }

    /// The starts of the window's instances with ranges (see `StoreReader::sealed_instances`):
    /// from the sorted set, checked and in order whatever it holds.
    pub(super) fn read_sealed_instances(
        &mut self,
        job: &str,
        window: &str,
        since: Millis,
        limit: usize,
    ) -> Result<Vec<Millis>, SinkError> {
        check_key_part(job, "job id", job)?;
        check_key_part(job, "window name", window)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let key = self.range_starts_key(job, window);
        // below every start a score can hold exactly: all of them
        let min = match since.0 {
            s if s < -(MAX_EXACT_COUNT as i64) => "-inf".to_string(),
            s => s.to_string(),
        };
        let count = i64::try_from(limit).unwrap_or(i64::MAX);
        let members: Vec<Vec<u8>> = self.run(
            || format!("listing the sealed instances of job {job:?} window {window:?}"),
            |c| {
                ::redis::cmd("ZRANGEBYSCORE")
                    .arg(&key)
                    .arg(&min)
                    .arg("+inf")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(count)
                    .query(c)
            },
        )?;
        let mut starts = members
            .iter()
            .map(|m| {
                std::str::from_utf8(m)
                    .ok()
                    .and_then(|m| m.parse::<i64>().ok())
                    .map(Millis)
                    .ok_or_else(|| {
                        let shown = String::from_utf8_lossy(m);
                        self.corrupt(format!("{key} has member {shown:?}, not an instance start"))
                    })
            })
            .collect::<Result<Vec<Millis>, SinkError>>()?;
        starts.retain(|s| *s >= since);
        starts.sort_unstable();
        starts.dedup();
        Ok(starts)
    }
}

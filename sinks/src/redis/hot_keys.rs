//! Hot-key windows in Redis: the latest closed window of a job in one hash,
//! `{prefix}:{job}:hot`, written by the commit script in the same `EVALSHA` as the lists (a
//! window replaces the hash only if it starts at or after the stored one) with the fields
//! `window_start`, `window_end`, `watermark`, `as_of`, `key_count` and `keys` (a JSON array of
//! `[item_id, rate, state]`, highest rate first).
//!
//! A read takes the header fields and the length of `keys` in one MULTI/EXEC, bounds that length
//! by the key count before reading it (a damaged hash is never read whole), then reads `keys`
//! with `window_start` again and retries once if a commit replaced the window in between.

use super::keys::check_key_part;
use super::RedisStore;
use crate::error::SinkError;
use crate::read_checks::{hot_header, hot_window, RawHotHeader};
use hotlist_operators::event::MAX_ITEM_ID_BYTES;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::time::Millis;

/// The header fields a read asks for, in this order.
const FIELDS: [&str; 5] = ["window_start", "window_end", "watermark", "as_of", "key_count"];

/// The longest JSON a key may take: its id with every byte escaped (`\u00XX`), a rate and a state.
const BYTES_PER_KEY: usize = 6 * MAX_ITEM_ID_BYTES + 64;

impl RedisStore {
    /// The job's hot-key hash.
    pub(super) fn hot_key(&self, job: &str) -> String {
        format!("{}:{job}:hot", self.prefix)
    }

    /// The commit script's arguments for the batch's latest window (`[""]` when it has none):
    /// window_start, window_end, watermark, as_of, key_count, keys.
    pub(super) fn hot_args(windows: &[HotWindow]) -> Vec<String> {
        let Some(w) = windows.iter().max_by_key(|w| w.start) else {
            return vec![String::new()];
        };
        let keys: Vec<(&str, f64, &str)> = w
            .keys
            .iter()
            .map(|k| (k.item_id.as_str(), k.rate, k.state.as_str()))
            .collect();
        let json = serde_json::to_string(&keys).unwrap_or_else(|_| "[]".into()); // rates are finite
        vec![
            w.start.0.to_string(),
            w.end.0.to_string(),
            w.watermark.0.to_string(),
            w.as_of.0.to_string(),
            w.keys.len().to_string(),
            json,
        ]
    }

    /// The latest closed hot-key window of the job (see `StoreReader::hot_keys`).
    pub(super) fn read_hot_keys(&mut self, job: &str) -> Result<Option<HotWindow>, SinkError> {
        check_key_part(job, "job id", job)?;
        for _ in 0..2 {
            if let Attempt::Done(w) = self.read_hot_once(job)? {
                return Ok(w);
            }
        }
        Err(self.corrupt(format!("{} changed under two reads in a row", self.hot_key(job))))
    }

    /// One try: `Retry` when a commit replaced the window between the two round trips.
    fn read_hot_once(&mut self, job: &str) -> Result<Attempt, SinkError> {
        let key = self.hot_key(job);
        let op = || format!("reading the hot keys of job {job:?}");
        let (fields, len): (Vec<Option<String>>, usize) = self.run(op, |c| {
            let mut hmget = ::redis::cmd("HMGET");
            hmget.arg(&key).arg(&FIELDS[..]);
            ::redis::pipe()
                .atomic()
                .add_command(hmget)
                .cmd("HSTRLEN")
                .arg(&key)
                .arg("keys")
                .query(c)
        })?;
        if fields.iter().all(Option::is_none) {
            return Ok(Attempt::Done(None));
        }
        let int = |i: usize| -> Result<i64, SinkError> {
            let v = fields[i]
                .as_deref()
                .ok_or_else(|| self.corrupt(format!("{key} has no field {}", FIELDS[i])))?;
            v.parse()
                .map_err(|_| self.corrupt(format!("{key} field {} is not an integer: {v:?}", FIELDS[i])))
        };
        let header = RawHotHeader {
            start: Millis(int(0)?),
            end: Millis(int(1)?),
            watermark: Millis(int(2)?),
            as_of: Millis(int(3)?),
            key_count: int(4)?,
        };
        let count = hot_header(job, &header).map_err(|d| self.corrupt(format!("{key}: {d}")))?;
        if len > 2 + count.saturating_mul(BYTES_PER_KEY) {
            return Err(self.corrupt(format!("{key}: keys is {len} bytes, too long for {count} keys")));
        }
        let (start, keys): (Option<String>, Option<String>) = self.run(op, |c| {
            ::redis::cmd("HMGET").arg(&key).arg("window_start").arg("keys").query(c)
        })?;
        if start.as_deref() != fields[0].as_deref() {
            return Ok(Attempt::Retry);
        }
        let keys = keys.ok_or_else(|| self.corrupt(format!("{key} has no field keys")))?;
        let rows: Vec<(String, f64, String)> =
            serde_json::from_str(&keys).map_err(|e| self.corrupt(format!("{key} field keys: {e}")))?;
        let w = hot_window(job, &header, count, rows).map_err(|d| self.corrupt(format!("{key}: {d}")))?;
        Ok(Attempt::Done(Some(w)))
    }
}

/// What one read of the hash gave.
enum Attempt {
    /// The window (or none).
    Done(Option<HotWindow>),
    /// A commit replaced it between the round trips: read again.
    Retry,
}

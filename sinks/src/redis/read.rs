//! The Redis read API: the windows document, the latest list (meta hash and sorted set read in
//! one MULTI/EXEC, checked against each other and put in ranking order) and the last commit.

use super::encode::parse_windows;
use super::keys::check_key_part;
use super::{RedisStore, MAX_EXACT_COUNT};
use crate::error::SinkError;
use crate::store::StoreReader;
use crate::types::{StoredList, StoredWindow};
use hotlist_operators::record::{ItemId, ListState, RankedItem};
use hotlist_operators::time::Millis;
use std::collections::HashMap;

impl StoreReader for RedisStore {
    /// The windows `prepare` recorded, from the JSON in `{prefix}:{job}:windows`.
    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        check_key_part(job, "job id", job)?;
        let key = self.windows_key(job);
        let json: Option<String> = self.run(
            || format!("reading the windows of job {job:?}"),
            |c| ::redis::cmd("GET").arg(&key).query(c),
        )?;
        match json {
            None => Ok(Vec::new()),
            Some(json) => parse_windows(&json).map_err(|e| self.corrupt(format!("{key}: {e}"))),
        }
    }

    /// The window's latest list, read atomically (meta and members of one revision).
    fn latest(&mut self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        self.read_latest(job, window)
    }

    /// The list of the instance starting at `start`, if it is the latest one: Redis holds only
    /// the latest instance of each window, so an older instance is `None` even if the primary
    /// store has it.
    fn instance(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, SinkError> {
        Ok(self.read_latest(job, window)?.filter(|l| l.start == start))
    }

    fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        check_key_part(job, "job id", job)?;
        let key = self.commit_key(job);
        let (epoch, watermark): (Option<String>, Option<String>) = self.run(
            || format!("reading the last commit of job {job:?}"),
            |c| ::redis::cmd("HMGET").arg(&key).arg("epoch").arg("watermark").query(c),
        )?;
        match (epoch, watermark) {
            (None, None) => Ok(None),
            (Some(epoch), Some(watermark)) => {
                let epoch = epoch
                    .parse::<u64>()
                    .map_err(|_| self.corrupt(format!("{key} field epoch is not an epoch: {epoch:?}")))?;
                let watermark = watermark
                    .parse::<i64>()
                    .map_err(|_| self.corrupt(format!("{key} field watermark is not an integer: {watermark:?}")))?;
                Ok(Some((epoch, Millis(watermark))))
            }
            _ => Err(self.corrupt(format!("{key} lacks epoch or watermark"))),
        }
    }
}

/// A meta hash as read, with the server and key it was read from (for messages).
struct Meta<'a> {
    url: &'a str,
    key: &'a str,
    fields: HashMap<String, String>,
}

impl RedisStore {
    /// Reads the latest list of a window: meta hash and sorted set in one transaction.
    fn read_latest(&mut self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        check_key_part(job, "job id", job)?;
        check_key_part(job, "window name", window)?;
        let (zkey, mkey) = (self.list_key(job, window), self.meta_key(job, window));
        type Reply = (HashMap<String, String>, Vec<(Vec<u8>, f64)>);
        let (fields, members): Reply = self.run(
            || format!("reading the latest list of job {job:?} window {window:?}"),
            |c| {
                ::redis::pipe()
                    .atomic()
                    .cmd("HGETALL")
                    .arg(&mkey)
                    .cmd("ZRANGE")
                    .arg(&zkey)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(c)
            },
        )?;
        if fields.is_empty() {
            if members.is_empty() {
                return Ok(None);
            }
            return Err(self.corrupt(format!("{zkey} has {} members but {mkey} is missing", members.len())));
        }
        let meta = Meta {
            url: &self.url,
            key: &mkey,
            fields,
        };
        if meta.field("window")? != window {
            return Err(self.corrupt(format!("{mkey} names window {:?}", meta.field("window")?)));
        }
        let revision = meta.int("revision")?;
        let revision =
            u32::try_from(revision).map_err(|_| self.corrupt(format!("{mkey} revision {revision} out of range")))?;
        let state = meta.field("state")?;
        let state =
            ListState::parse(state).ok_or_else(|| self.corrupt(format!("{mkey} has unknown state {state:?}")))?;
        let is_final = meta.field("final")?;
        if is_final != if state == ListState::Final { "1" } else { "0" } {
            return Err(self.corrupt(format!(
                "{mkey} final {is_final:?} disagrees with state {}",
                state.as_str()
            )));
        }
        let item_count = meta.int("item_count")?;
        if usize::try_from(item_count).ok() != Some(members.len()) {
            return Err(self.corrupt(format!(
                "{zkey} has {} members but {mkey} item_count is {item_count}",
                members.len()
            )));
        }
        let items = self.ranked_items(&zkey, members)?;
        Ok(Some(StoredList {
            window: window.to_string(),
            start: Millis(meta.int("window_start")?),
            end: Millis(meta.int("window_end")?),
            revision,
            state,
            watermark: Millis(meta.int("watermark")?),
            as_of: Millis(meta.int("as_of")?),
            items,
        }))
    }

    /// The members of the sorted set `zkey` as items in ranking order; each score must be a
    /// count.
    fn ranked_items(&self, zkey: &str, members: Vec<(Vec<u8>, f64)>) -> Result<Vec<RankedItem>, SinkError> {
        let mut items = Vec::with_capacity(members.len());
        for (member, score) in members {
            let item_id = String::from_utf8(member)
                .map_err(|e| self.corrupt(format!("{zkey} has a member that is not UTF-8: {e}")))?;
            if !(score >= 0.0 && score.fract() == 0.0 && score <= MAX_EXACT_COUNT as f64) {
                return Err(self.corrupt(format!("{zkey} member {item_id:?} has score {score}, not a count")));
            }
            items.push(RankedItem {
                item_id: ItemId::from(item_id),
                count: score as u64,
            });
        }
        sort_by_rank(&mut items);
        Ok(items)
    }
}

impl Meta<'_> {
    /// The field `name`; missing is corrupt.
    fn field(&self, name: &str) -> Result<&str, SinkError> {
        let key = self.key;
        self.fields
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| SinkError::corrupt(self.url, format!("{key} has no field {name}")))
    }

    /// The field `name` as an integer; missing or not an integer is corrupt.
    fn int(&self, name: &str) -> Result<i64, SinkError> {
        let v = self.field(name)?;
        v.parse()
            .map_err(|_| SinkError::corrupt(self.url, format!("{} field {name} is not an integer: {v:?}", self.key)))
    }
}

/// Orders items by the ranking: count descending, then item id ascending bytewise.
pub(super) fn sort_by_rank(items: &mut [RankedItem]) {
    items.sort_unstable_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.item_id.as_bytes().cmp(b.item_id.as_bytes()))
    });
}

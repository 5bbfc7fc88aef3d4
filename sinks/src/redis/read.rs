//! The Redis read API: the windows document, the latest list and the last commit.
//!
//! Nothing read is trusted ([`crate::read_checks`]): the windows document is read with
//! `GETRANGE` up to [`WINDOWS_DOC_LIMIT`] bytes; a list is read in one MULTI/EXEC as its meta
//! fields (`HMGET`), its member count (`ZCARD`), at most `k + 1` members (`ZRANGE 0 k`, with
//! `k` the window's, from the windows document read in the same transaction) and that document
//! again, so the bound and the list are of one moment. The members are put in ranking order and
//! checked against the meta.
//!
//! The same transaction reads the meta hash's `rank_by` and how many fields the list's trend
//! hash has (`HLEN`): a trend list (`redis/trend.rs`) is read once more with its trend records
//! (`HMGET` of ranks 1 to `k + 1`), so a count-ranked list costs no trend read. A trend list's
//! order is its ranks'; each record is checked against its member's count and the whole order
//! against the trend order.

use super::encode::parse_windows;
use super::keys::check_key_part;
use super::trend::{self, RANK_BY_FIELD, RANK_BY_TREND};
use super::{RedisStore, MAX_EXACT_COUNT};
use crate::error::SinkError;
use crate::read_checks::{self, ListAt, RawAccuracy, CERTIFICATE_FIELDS, SKETCH_FIELDS};
use crate::store::{StoreReader, MAX_GROUPS_READ};
use crate::types::{StoredList, StoredWindow};
use hotlist_operators::group::GroupKey;
use hotlist_operators::record::{ItemId, ListState, RankedItem};
use hotlist_operators::time::Millis;
use std::collections::HashMap;

/// The longest windows document read: 64 windows with long names fit many times over.
pub(super) const WINDOWS_DOC_LIMIT: usize = 1 << 20;

/// The meta hash fields a list read asks for, in this order: the header, then its accuracy
/// (`exact`, `error_bound`, the sketch check's [`SKETCH_FIELDS`] and the certificate's
/// [`CERTIFICATE_FIELDS`]).
const META_FIELDS: [&str; 18] = [
    "window",
    "window_start",
    "window_end",
    "revision",
    "state",
    "final",
    "as_of",
    "watermark",
    "item_count",
    "exact",
    "error_bound",
    SKETCH_FIELDS[0],
    SKETCH_FIELDS[1],
    SKETCH_FIELDS[2],
    SKETCH_FIELDS[3],
    CERTIFICATE_FIELDS[0],
    CERTIFICATE_FIELDS[1],
    CERTIFICATE_FIELDS[2],
];

/// Where the accuracy fields start in [`META_FIELDS`].
const ACCURACY_FIELDS: usize = 9;

impl StoreReader for RedisStore {
    /// The windows `prepare` recorded, from the JSON in `{prefix}:{job}:windows`.
    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        check_key_part(job, "job id", job)?;
        let key = self.windows_key(job);
        let doc: Vec<u8> = self.run(
            || format!("reading the windows of job {job:?}"),
            |c| windows_doc_cmd(&key).query(c),
        )?;
        self.parse_windows_doc(job, &key, &doc)
    }

    /// The group's latest list, read atomically (meta and members of one revision).
    fn latest_of(&mut self, job: &str, window: &str, group: &GroupKey) -> Result<Option<StoredList>, SinkError> {
        self.read_latest(job, window, group)
    }

    /// The group's list of the instance starting at `start`, if it is the latest one: Redis
    /// holds only the latest instance of each window and group, so an older instance is `None`
    /// even if the primary store has it.
    fn instance_of(
        &mut self,
        job: &str,
        window: &str,
        group: &GroupKey,
        start: Millis,
    ) -> Result<Option<StoredList>, SinkError> {
        Ok(self.read_latest(job, window, group)?.filter(|l| l.start == start))
    }

    /// The groups whose latest list starts at the greatest start, from the window's groups set.
    fn groups(&mut self, job: &str, window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, SinkError> {
        check_key_part(job, "job id", job)?;
        check_key_part(job, "window name", window)?;
        let gkey = self.groups_key(job, window);
        let op = || format!("listing the groups of job {job:?} window {window:?}");
        let top: Vec<(String, f64)> = self.run(op, |c| {
            ::redis::cmd("ZRANGE")
                .arg(&gkey)
                .arg(-1)
                .arg(-1)
                .arg("WITHSCORES")
                .query(c)
        })?;
        let Some((_, score)) = top.first() else {
            return Ok(None);
        };
        if score.fract() != 0.0 || score.abs() > MAX_EXACT_COUNT as f64 {
            return Err(self.corrupt(format!("{gkey} has score {score}, not an instance start")));
        }
        let groups: Vec<String> = self.run(op, |c| {
            ::redis::cmd("ZRANGEBYSCORE")
                .arg(&gkey)
                .arg(*score)
                .arg(*score)
                .arg("LIMIT")
                .arg(0)
                .arg(MAX_GROUPS_READ)
                .query(c)
        })?;
        Ok(Some((
            Millis(*score as i64),
            groups.into_iter().map(GroupKey::from_stored).collect(),
        )))
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
                    .parse::<i64>()
                    .map_err(|_| self.corrupt(format!("{key} field epoch is not an integer: {epoch:?}")))?;
                let watermark = watermark
                    .parse::<i64>()
                    .map_err(|_| self.corrupt(format!("{key} field watermark is not an integer: {watermark:?}")))?;
                let commit = read_checks::commit(job, epoch, Millis(watermark)).map_err(|d| self.corrupt(d))?;
                Ok(Some(commit))
            }
            _ => Err(self.corrupt(format!("{key} lacks epoch or watermark"))),
        }
    }

    /// The job's latest hot-key window (`redis/hot_keys.rs`).
    fn hot_keys(&mut self, job: &str) -> Result<Option<hotlist_operators::hot_keys::HotWindow>, SinkError> {
        self.read_hot_keys(job)
    }

    /// The instance's ranges from the window's ranges hash (`redis/ranges.rs`).
    fn sealed_ranges(
        &mut self,
        job: &str,
        window: &str,
        start: Millis,
    ) -> Result<Option<hotlist_operators::replay::SealedRanges>, SinkError> {
        self.read_sealed_ranges(job, window, start)
    }

    /// The starts from the window's sorted set of starts (`redis/ranges.rs`).
    fn sealed_instances(
        &mut self,
        job: &str,
        window: &str,
        since: Millis,
        limit: usize,
    ) -> Result<Vec<Millis>, SinkError> {
        self.read_sealed_instances(job, window, since, limit)
    }
}

/// `GETRANGE` of the windows document: at most one byte more than [`WINDOWS_DOC_LIMIT`], so a
/// longer one shows; a missing key reads as empty.
fn windows_doc_cmd(key: &str) -> ::redis::Cmd {
    let mut cmd = ::redis::cmd("GETRANGE");
    cmd.arg(key).arg(0).arg(WINDOWS_DOC_LIMIT);
    cmd
}

/// One list read, all of one moment (one MULTI/EXEC).
struct ListRead {
    /// The windows document.
    doc: Vec<u8>,
    /// The meta fields, in [`META_FIELDS`] order.
    meta: Vec<Option<String>>,
    /// How many members the sorted set has.
    card: u64,
    /// The member limit this read used.
    limit: usize,
    /// Its items as read.
    items: ItemsRead,
}

/// What one list read holds of its items.
struct ItemsRead {
    /// At most `limit` members, with their scores.
    members: Vec<(Vec<u8>, f64)>,
    /// The meta hash's `rank_by` (`trend` for a trend list, none for a count-ranked one).
    rank_by: Option<String>,
    /// How many fields the list's trend hash has.
    trend_fields: u64,
    /// Its fields `1` to `limit` when this read asked for them (empty otherwise).
    trend: Vec<Option<String>>,
}

impl ItemsRead {
    /// Whether the list read has any trend data (its trend records are needed to read it).
    fn has_trend(&self) -> bool {
        self.rank_by.is_some() || self.trend_fields > 0
    }
}

impl RedisStore {
    /// The windows document's windows, checked; an empty document is no windows.
    fn parse_windows_doc(&self, job: &str, key: &str, doc: &[u8]) -> Result<Vec<StoredWindow>, SinkError> {
        if doc.is_empty() {
            return Ok(Vec::new());
        }
        if doc.len() > WINDOWS_DOC_LIMIT {
            return Err(self.corrupt(format!("{key} is longer than {WINDOWS_DOC_LIMIT} bytes")));
        }
        let text = std::str::from_utf8(doc).map_err(|e| self.corrupt(format!("{key}: {e}")))?;
        let windows = parse_windows(text).map_err(|e| self.corrupt(format!("{key}: {e}")))?;
        read_checks::windows(job, windows).map_err(|d| self.corrupt(format!("{key}: {d}")))
    }

    /// The `k` of `window` in a windows document (`None`: not recorded).
    fn k_in(&self, job: &str, window: &str, doc: &[u8]) -> Result<Option<usize>, SinkError> {
        let windows = self.parse_windows_doc(job, &self.windows_key(job), doc)?;
        Ok(windows.iter().find(|w| w.name == window).map(|w| w.k))
    }

    /// Reads the latest list of a window: the window's `k` first, then the list in one
    /// transaction bounded by it; read once more if the `k` grew in between and the read was
    /// cut short, or with its trend records if it is a trend list.
    fn read_latest(&mut self, job: &str, window: &str, group: &GroupKey) -> Result<Option<StoredList>, SinkError> {
        check_key_part(job, "job id", job)?;
        check_key_part(job, "window name", window)?;
        check_key_part(job, "group", group.as_str())?;
        let key = self.windows_key(job);
        let doc: Vec<u8> = self.run(
            || format!("reading the latest list of job {job:?} window {window:?}"),
            |c| windows_doc_cmd(&key).query(c),
        )?;
        let k = self.k_in(job, window, &doc)?;
        let mut read = self.read_list_once(job, (window, group), read_checks::row_limit(k), false)?;
        let k_now = self.k_in(job, window, &read.doc)?;
        // A trend list is read again with its trend records, and this read is the one checked:
        // it has them whatever it finds.
        if (k_now != k && read.items.members.len() >= read.limit) || read.items.has_trend() {
            read = self.read_list_once(job, (window, group), read_checks::row_limit(k_now), true)?;
        }
        let k = self.k_in(job, window, &read.doc)?;
        self.checked_list(job, (window, group), read, k)
    }

    /// One MULTI/EXEC: the windows document, the meta fields, the member count, at most
    /// `limit` members, the meta hash's `rank_by`, the trend hash's field count and, if
    /// `with_trend`, its fields `1` to `limit`.
    fn read_list_once(
        &mut self,
        job: &str,
        (window, group): (&str, &GroupKey),
        limit: usize,
        with_trend: bool,
    ) -> Result<ListRead, SinkError> {
        let (zkey, mkey, tkey, wkey) = (
            self.group_list_key(job, window, group),
            self.group_meta_key(job, window, group),
            self.group_trend_key(job, window, group),
            self.windows_key(job),
        );
        let mut hmget = ::redis::cmd("HMGET");
        hmget.arg(&mkey).arg(&META_FIELDS[..]);
        let mut pipe = ::redis::pipe();
        pipe.atomic()
            .add_command(windows_doc_cmd(&wkey))
            .add_command(hmget)
            .cmd("ZCARD")
            .arg(&zkey)
            .cmd("ZRANGE")
            .arg(&zkey)
            .arg(0)
            .arg(limit.saturating_sub(1))
            .arg("WITHSCORES")
            .cmd("HGET")
            .arg(&mkey)
            .arg(RANK_BY_FIELD)
            .cmd("HLEN")
            .arg(&tkey);
        if with_trend {
            let mut ranks = ::redis::cmd("HMGET");
            ranks.arg(&tkey).arg((1..=limit.max(1)).collect::<Vec<usize>>());
            pipe.add_command(ranks);
        }
        let op = || format!("reading the latest list of job {job:?} window {window:?}");
        type Reply = (
            Vec<u8>,
            Vec<Option<String>>,
            u64,
            Vec<(Vec<u8>, f64)>,
            Option<String>,
            u64,
        );
        let ((doc, meta, card, members, rank_by, trend_fields), trend) = if with_trend {
            type WithTrend = (
                Vec<u8>,
                Vec<Option<String>>,
                u64,
                Vec<(Vec<u8>, f64)>,
                Option<String>,
                u64,
                Vec<Option<String>>,
            );
            let (a, b, c, d, e, f, trend): WithTrend = self.run(op, |c| pipe.query(c))?;
            ((a, b, c, d, e, f), trend)
        } else {
            let reply: Reply = self.run(op, |c| pipe.query(c))?;
            (reply, Vec::new())
        };
        Ok(ListRead {
            doc,
            meta,
            card,
            limit,
            items: ItemsRead {
                members,
                rank_by,
                trend_fields,
                trend,
            },
        })
    }

    /// Checks one list read against the window's `k` and builds the list.
    fn checked_list(
        &self,
        job: &str,
        (window, group): (&str, &GroupKey),
        read: ListRead,
        k: Option<usize>,
    ) -> Result<Option<StoredList>, SinkError> {
        let (zkey, mkey) = (
            self.group_list_key(job, window, group),
            self.group_meta_key(job, window, group),
        );
        if read.meta.iter().all(Option::is_none) {
            if read.card == 0 {
                return Ok(None);
            }
            return Err(self.corrupt(format!("{zkey} has {} members but {mkey} is missing", read.card)));
        }
        let field = |i: usize| -> Result<&str, SinkError> {
            read.meta[i]
                .as_deref()
                .ok_or_else(|| self.corrupt(format!("{mkey} has no field {}", META_FIELDS[i])))
        };
        let int = |i: usize| -> Result<i64, SinkError> {
            let v = field(i)?;
            v.parse()
                .map_err(|_| self.corrupt(format!("{mkey} field {} is not an integer: {v:?}", META_FIELDS[i])))
        };
        if field(0)? != window {
            return Err(self.corrupt(format!("{mkey} names window {:?}", field(0)?)));
        }
        let h = read_checks::Header {
            start: Millis(int(1)?),
            end: Millis(int(2)?),
            revision: int(3)?,
            state: field(4)?,
            as_of: Millis(int(6)?),
            watermark: Millis(int(7)?),
            item_count: int(8)?,
        };
        let at = ListAt {
            job,
            window,
            start: h.start,
        };
        let checked = read_checks::header(&at, &h, k).map_err(|d| self.corrupt(format!("{mkey}: {d}")))?;
        let raw = self.raw_accuracy(&mkey, &read.meta)?;
        let accuracy =
            read_checks::accuracy(&at, &raw, k, checked.state).map_err(|d| self.corrupt(format!("{mkey}: {d}")))?;
        let is_final = field(5)?;
        if is_final != if checked.state == ListState::Final { "1" } else { "0" } {
            return Err(self.corrupt(format!(
                "{mkey} final {is_final:?} disagrees with state {}",
                checked.state.as_str()
            )));
        }
        if usize::try_from(read.card).ok() != Some(checked.item_count) {
            return Err(self.corrupt(format!(
                "{at}: {zkey} has {} members but {mkey} item_count is {}",
                read.card, checked.item_count
            )));
        }
        let items = self.items(&at, (window, group), read.items)?;
        read_checks::ranked_items(&at, &items).map_err(|d| self.corrupt(format!("{zkey}: {d}")))?;
        Ok(Some(StoredList {
            window: window.to_string(),
            group: group.clone(),
            start: h.start,
            end: h.end,
            revision: checked.revision,
            state: checked.state,
            watermark: h.watermark,
            as_of: h.as_of,
            items,
            exact: accuracy.exact,
            error_bound: accuracy.error_bound,
            sketch_check: accuracy.sketch_check,
            certificate: accuracy.certificate,
        }))
    }

    /// The items of a list read, in their ranking order: a count-ranked list's members sorted,
    /// a trend list's in the order of its ranks (see [`RedisStore::trend_items`]); a count-ranked
    /// list with trend records, or an unknown `rank_by`, is corrupt.
    fn items(
        &self,
        at: &ListAt<'_>,
        (window, group): (&str, &GroupKey),
        read: ItemsRead,
    ) -> Result<Vec<RankedItem>, SinkError> {
        let (zkey, mkey, tkey) = (
            self.group_list_key(at.job, window, group),
            self.group_meta_key(at.job, window, group),
            self.group_trend_key(at.job, window, group),
        );
        match read.rank_by.as_deref() {
            None if read.trend_fields == 0 => self.ranked_items(&zkey, read.members),
            None => Err(self.corrupt(format!(
                "{at}: {tkey} has {} fields but {mkey} has no field {RANK_BY_FIELD}: a count-ranked list has no trend \
                 records",
                read.trend_fields
            ))),
            Some(RANK_BY_TREND) => self.trend_items(at, (&zkey, &tkey), read),
            Some(other) => Err(self.corrupt(format!(
                "{mkey} field {RANK_BY_FIELD} is {other:?}, not {RANK_BY_TREND:?}"
            ))),
        }
    }

    /// The accuracy fields of a meta hash read (in [`META_FIELDS`] order). A meta hash written
    /// before lists said what they are has none of them: its list is exact. One with `exact`
    /// has `error_bound`; the sketch check's fields are all there or none, and so are the
    /// certificate's.
    fn raw_accuracy(&self, mkey: &str, meta: &[Option<String>]) -> Result<RawAccuracy, SinkError> {
        let fields = &meta[ACCURACY_FIELDS..];
        let names = &META_FIELDS[ACCURACY_FIELDS..];
        let int = |i: usize| -> Result<Option<i64>, SinkError> {
            fields[i]
                .as_deref()
                .map(|v| {
                    v.parse()
                        .map_err(|_| self.corrupt(format!("{mkey} field {} is not an integer: {v:?}", names[i])))
                })
                .transpose()
        };
        let Some(exact) = int(0)? else {
            return match fields.iter().position(Option::is_some) {
                None => Ok(RawAccuracy::EXACT),
                Some(i) => Err(self.corrupt(format!("{mkey} has field {} but no field exact", names[i]))),
            };
        };
        let error_bound =
            int(1)?.ok_or_else(|| self.corrupt(format!("{mkey} has field exact but no field error_bound")))?;
        Ok(RawAccuracy {
            exact,
            error_bound,
            sketch: [int(2)?, int(3)?, int(4)?, int(5)?],
            certificate: [int(6)?, int(7)?, int(8)?],
        })
    }

    /// The members of the sorted set `zkey` as items of a count-ranked list, in ranking order;
    /// each score must be a count.
    fn ranked_items(&self, zkey: &str, members: Vec<(Vec<u8>, f64)>) -> Result<Vec<RankedItem>, SinkError> {
        let mut items = self.member_items(zkey, members)?;
        sort_by_rank(&mut items);
        Ok(items)
    }

    /// The items of a trend list in the order of their ranks, from the members of `zkey` (all
    /// of them: the caller checked their number) and the fields `1`, `2`, … of the trend hash
    /// `tkey` (`read.trend_fields` of them): one record per member, of rank 1 to the member
    /// count, each naming a member and checked against its count (`redis/trend.rs`), and no
    /// other field.
    fn trend_items(
        &self,
        at: &ListAt<'_>,
        (zkey, tkey): (&str, &str),
        read: ItemsRead,
    ) -> Result<Vec<RankedItem>, SinkError> {
        let ItemsRead {
            members,
            trend_fields: fields,
            trend: mut records,
            ..
        } = read;
        let corrupt = |detail: String| self.corrupt(format!("{at}: {tkey} {detail}"));
        let n = members.len();
        let mut counts: HashMap<ItemId, u64> = self
            .member_items(zkey, members)?
            .into_iter()
            .map(|i| (i.item_id, i.count))
            .collect();
        let mut items = Vec::with_capacity(n);
        for rank in 1..=n {
            let text = records.get_mut(rank - 1).and_then(Option::take).ok_or_else(|| {
                corrupt(format!(
                    "has no field {rank}: rank {rank} is not the same kind (trend or count) as the list"
                ))
            })?;
            let record = trend::parse(&text)
                .map_err(|e| corrupt(format!("field {rank} is not a trend record ({e}): {text:?}")))?;
            let item_id = ItemId::from(record.item_id.as_str());
            let count = counts.remove(&item_id).ok_or_else(|| {
                corrupt(format!(
                    "rank {rank} names {item_id:?}, which is not a member of {zkey} or is at another rank too"
                ))
            })?;
            let facts = record
                .facts(count)
                .map_err(|e| corrupt(format!("rank {rank} ({item_id:?}) {e}")))?;
            items.push(RankedItem {
                item_id,
                count,
                trend: Some(facts),
            });
        }
        // (fields 1 to n are there: any other is one too many)
        if usize::try_from(fields).ok() != Some(n) {
            return Err(corrupt(format!("has {fields} fields but {zkey} has {n} members")));
        }
        Ok(items)
    }

    /// The members of the sorted set `zkey` as items (in the order read); each score must be a
    /// count.
    fn member_items(&self, zkey: &str, members: Vec<(Vec<u8>, f64)>) -> Result<Vec<RankedItem>, SinkError> {
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
                trend: None,
            });
        }
        Ok(items)
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

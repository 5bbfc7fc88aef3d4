//! The brute-force model and the fixtures of the per-group and distinct-user tests
//! (`shaped_tests`): events drawn as small numbers, their texts as a source writes them, windows
//! of every key shape, and the sealed lists the model counts for them.

use super::*;
use crate::group::{GroupKey, KeyShape};
use crate::message::LocalList;
use crate::record::{EventText, PartitionId, TimedEvent};
use std::collections::{BTreeMap, BTreeSet};

/// (window, start, group) → its list.
pub(super) type Lists = BTreeMap<(u16, i64, String), Vec<(String, u64)>>;
/// (window, start, group) → per worker, its latest list.
pub(super) type PerWorker = BTreeMap<(u16, i64, String), BTreeMap<u32, Vec<(String, u64)>>>;
/// (window, start, group) → per item, who counted (users, or event numbers).
pub(super) type Who = BTreeMap<(u16, i64, String), BTreeMap<String, BTreeSet<Option<String>>>>;

pub(super) fn shape(kind: u8, max_groups: u32) -> KeyShape {
    KeyShape {
        max_groups,
        ..shape_of(kind)
    }
}

pub(super) fn shape_of(kind: u8) -> KeyShape {
    let by = |d: &[&str]| d.iter().map(|s| s.to_string()).collect();
    match kind {
        0 => KeyShape::default(),
        1 => KeyShape {
            by: by(&["country"]),
            ..KeyShape::default()
        },
        2 => KeyShape {
            by: by(&["country", "device"]),
            ..KeyShape::default()
        },
        3 => KeyShape {
            distinct_users: true,
            ..KeyShape::default()
        },
        _ => KeyShape {
            by: by(&["country"]),
            distinct_users: true,
            ..KeyShape::default()
        },
    }
}

#[derive(Clone, Debug)]
pub(super) struct Ev {
    pub(super) item: u8,
    pub(super) user: Option<u8>,
    pub(super) country: Option<u8>,
    pub(super) device: u8,
    pub(super) ts: i64,
    pub(super) wm_before: i64,
}

/// An event as the strategies draw it: item, user, country, device, step, back, late.
pub(super) type RawEv = (u8, Option<u8>, Option<u8>, u8, i64, i64, bool);

/// The events of drawn `raw`: each one `step` after the one before, `back` before that (40 more
/// when `late`), behind a watermark `ooo` before the latest time so far.
pub(super) fn events_of(raw: Vec<RawEv>, ooo: i64) -> Vec<Ev> {
    let mut evs = Vec::new();
    let (mut t, mut max_ts) = (0i64, i64::MIN);
    for (item, user, country, device, step, back, late) in raw {
        t += step;
        let ts = t - back - if late { 40 } else { 0 };
        let wm_before = if max_ts == i64::MIN { i64::MIN } else { max_ts - ooo };
        evs.push(Ev {
            item,
            user,
            country,
            device,
            ts,
            wm_before,
        });
        max_ts = max_ts.max(ts);
    }
    evs
}

pub(super) fn timed(e: &Ev, dims: &[String]) -> TimedEvent {
    // every fourth item's id (and key) is too long for a record: it lives in the arena
    let item = if e.item.is_multiple_of(4) {
        format!("i{}-long-enough-for-the-arena", e.item)
    } else {
        format!("i{}", e.item)
    };
    let values: Vec<String> = dims
        .iter()
        .map(|d| match d.as_str() {
            "country" => e.country.map_or(String::new(), country),
            _ => format!("d{}", e.device),
        })
        .collect();
    // (one dim and no user: the text is the event's key, as a source writes it for a job
    // counting per that dim, whatever the windows here; the counter reads both forms)
    let keyed = match (dims, e.user) {
        ([d], None) => EventText::keyed(&format!("{d}="), &values[0], &item),
        _ => None,
    };
    TimedEvent {
        hash: crate::hash::item_hash(&item),
        text: keyed.unwrap_or_else(|| EventText::new(&item, e.user.map(|u| format!("u{u}")).as_deref(), &values)),
        ts: Millis(e.ts),
        wm_before: Millis(e.wm_before),
        partition: PartitionId(0),
        position: 0,
    }
}

/// The country of value `c`: three short ones (values 0–2, which most tests draw), then, for
/// the tests of many groups, short ones, ones past 16 bytes (not one number to a map keyed by
/// a value's bytes) and ones that need an escape in a group key (not written as a keyed text).
pub(super) fn country(c: u8) -> String {
    match c {
        0..=2 => ["US", "a b", "é"][c as usize].to_string(),
        _ => match c % 4 {
            0 => format!("a-country-name-longer-than-sixteen-{c}"),
            1 => format!("x&y={c}"),
            _ => format!("C{c}"),
        },
    }
}

/// Windows of K 3 from (key shape kind, size: 10, 20/5 hopping or 7, max groups).
pub(super) fn windows_of(kinds: &[(u8, usize, u32)]) -> Vec<WindowSpec> {
    windows_sized(kinds, [(10, 10), (20, 5), (7, 7)], 3)
}

/// Windows of K 2 from (key shape kind, size: 10, 20/5 or 30/10 hopping, max groups), for
/// the tests that tick between epochs.
pub(super) fn ticked_windows(kinds: &[(u8, usize, u32)]) -> Vec<WindowSpec> {
    windows_sized(kinds, [(10, 10), (20, 5), (30, 10)], 2)
}

/// Windows of K `k` from (key shape kind, index of its (size, slide) in `sizes`, max groups).
pub(super) fn windows_sized(kinds: &[(u8, usize, u32)], sizes: impl AsRef<[(u64, u64)]>, k: usize) -> Vec<WindowSpec> {
    let sizes = sizes.as_ref();
    kinds
        .iter()
        .enumerate()
        .map(|(i, &(kind, size, max_groups))| WindowSpec {
            rank: Default::default(),
            name: format!("w{i}"),
            size: Span::from_millis(sizes[size].0),
            slide: Span::from_millis(sizes[size].1),
            k,
            key: shape(kind, max_groups),
        })
        .collect()
}

/// The model: per (window, instance, group), per item, its events or its distinct users.
pub(super) fn model(windows: &[WindowSpec], evs: &[Ev], lateness: i64, dims: &[String]) -> Lists {
    let mut counts: Who = BTreeMap::new();
    let mut events: BTreeMap<(u16, i64, String, String), u64> = BTreeMap::new();
    for (n, e) in evs.iter().enumerate() {
        let t = timed(e, dims);
        for (wi, w) in windows.iter().enumerate() {
            if w.key.distinct_users && e.user.is_none() {
                continue;
            }
            let pairs: Vec<(&str, String)> = w
                .key
                .by
                .iter()
                .map(|d| {
                    let p = dims.iter().position(|x| x == d).unwrap();
                    (d.as_str(), t.text.dim(p).to_string())
                })
                .collect();
            let group = GroupKey::from_pairs(pairs.iter().map(|(d, v)| (*d, v.as_str()))).to_string();
            for start in w.starts_covering(Millis(e.ts)) {
                if e.wm_before != i64::MIN && e.wm_before >= w.end_of(start).0 + lateness {
                    continue;
                }
                let key = (wi as u16, start.0, group.clone());
                let who = if w.key.distinct_users {
                    e.user.map(|u| format!("u{u}"))
                } else {
                    Some(n.to_string())
                };
                counts
                    .entry(key.clone())
                    .or_default()
                    .entry(t.item().to_string())
                    .or_default()
                    .insert(who);
                *events.entry((key.0, key.1, key.2, t.item().to_string())).or_default() += 1;
            }
        }
    }
    // per instance, the groups beyond max_groups (the highest key hashes) count in (other)
    let mut instance_groups: BTreeMap<(u16, i64), Vec<String>> = BTreeMap::new();
    for (w, start, group) in counts.keys() {
        instance_groups.entry((*w, *start)).or_default().push(group.clone());
    }
    let mut folded: Who = BTreeMap::new();
    for ((w, start, group), items) in counts {
        let spec = &windows[w as usize];
        let mut groups = instance_groups[&(w, start)].clone();
        groups.sort_by_key(|g| crate::hash::item_hash(g));
        let kept =
            spec.key.by.is_empty() || groups.iter().position(|g| *g == group).unwrap() < spec.key.max_groups as usize;
        let group = if kept { group } else { "(other)".to_string() };
        let into = folded.entry((w, start, group)).or_default();
        for (item, who) in items {
            into.entry(item).or_default().extend(who);
        }
    }
    folded
        .into_iter()
        .map(|(key, items)| {
            let mut v: Vec<(String, u64)> = items.into_iter().map(|(i, who)| (i, who.len() as u64)).collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            v.truncate(windows[key.0 as usize].k);
            (key, v)
        })
        .collect()
}

/// The lists of a single counter (worker 0), empty ones left out.
pub(super) fn one_worker(got: PerWorker) -> Lists {
    got.into_iter()
        .map(|(key, mut per_worker)| (key, per_worker.remove(&0).unwrap_or_default()))
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

pub(super) fn collect(lists: Vec<LocalList>, into: &mut PerWorker) {
    for l in lists {
        let items = l.items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
        into.entry((l.instance.window.0, l.instance.start.0, l.group.to_string()))
            .or_default()
            .insert(l.worker, items);
    }
}

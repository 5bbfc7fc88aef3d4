//! A brute-force model of the rules in docs/time.md and docs/input.md's event contract: independent of the job's code on purpose (its own
//! parsing through `serde_json::Value`, its own window enumeration by scanning, a full sort).

use std::collections::BTreeMap;

/// A window as the model sees it.
#[derive(Clone, Debug)]
pub struct ModelWindow {
    /// Name.
    pub name: String,
    /// Size in ms.
    pub size: i64,
    /// Slide in ms.
    pub slide: i64,
    /// K.
    pub k: usize,
    /// Dims it keeps one list per combination of (empty: one global list).
    pub by: Vec<String>,
    /// Whether an item's count is its number of distinct users (the record's `user` field).
    pub distinct_users: bool,
    /// With `by`: most groups per instance; the others (the highest hashes of their keys)
    /// count together in the group `(other)`.
    pub max_groups: usize,
}

impl ModelWindow {
    /// A window of `size` ms every `slide` ms (tumbling when they are equal), keeping `k`.
    pub fn new(name: &str, size: i64, slide: i64, k: usize) -> ModelWindow {
        ModelWindow {
            name: name.into(),
            size,
            slide,
            k,
            by: Vec::new(),
            distinct_users: false,
            max_groups: 10_000,
        }
    }

    /// This window, keeping one list per combination of `dims`.
    pub fn by(mut self, dims: &[&str]) -> ModelWindow {
        self.by = dims.iter().map(|d| d.to_string()).collect();
        self
    }

    /// This window, counting distinct users.
    pub fn distinct_users(mut self) -> ModelWindow {
        self.distinct_users = true;
        self
    }
}

/// Sealed lists per group: (window, start, end, group key) -> ranked (item, count).
pub type GroupLists = BTreeMap<(String, i64, i64, String), Vec<(String, u64)>>;

/// A group's key, written independently of the job: `dim=value` pairs by dim name, joined by
/// `&`, every byte of a value outside `A-Z a-z 0-9 - . _ ~` written `%XX`.
pub fn group_key(by: &[String], dims: &BTreeMap<String, String>) -> String {
    let mut names: Vec<&String> = by.iter().collect();
    names.sort();
    names
        .iter()
        .map(|d| {
            let value = dims.get(*d).map_or("", |v| v.as_str());
            let enc: String = value
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            format!("{d}={enc}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The record's dims (an absent or null `dims`: none) and its `user` (a string, if any).
fn extras(line: &[u8]) -> (BTreeMap<String, String>, Option<String>) {
    let v: serde_json::Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(_) => return (BTreeMap::new(), None),
    };
    let dims = v
        .get("dims")
        .and_then(|d| d.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let user = v.get("user").and_then(|u| u.as_str()).map(str::to_string);
    (dims, user)
}

/// One sealed list: (window, start, end) -> ranked (item, count).
pub type Lists = BTreeMap<(String, i64, i64), Vec<(String, u64)>>;

/// A dead letter: (partition, 1-based position, reason).
pub type Dead = Vec<(u32, u64, String)>;

/// The event time range: RFC 3339's years 0000-9999, in ms since 1970. 0000-01-01 is 719528
/// days before 1970-01-01 (1970 proleptic Gregorian years, 478 of them leap); 10000-01-01 is
/// 2932897 days after it (8030 years, 1947 leap).
const EVENT_TIMES: std::ops::RangeInclusive<i64> = -719_528 * 86_400_000..=2_932_897 * 86_400_000 - 1;

/// The contract's parse, written independently: returns (item, ts) or None for a bad record.
pub fn parse(line: &[u8]) -> Option<(String, i64)> {
    let text = std::str::from_utf8(line).ok()?;
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let obj = v.as_object()?;
    let item = obj.get("item_id")?.as_str()?;
    if item.is_empty() || item.len() > 256 || item.contains('\0') {
        return None;
    }
    let ts = match obj.get("ts")? {
        serde_json::Value::Number(n) => n.as_i64()?,
        serde_json::Value::String(s) => {
            let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
            (t.unix_timestamp_nanos().div_euclid(1_000_000)) as i64
        }
        _ => return None,
    };
    if !EVENT_TIMES.contains(&ts) {
        return None;
    }
    match obj.get("dims") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(m)) if m.values().all(|v| v.is_string()) => {}
        _ => return None,
    }
    Some((item.to_string(), ts))
}

/// Runs the model over partitions of lines.
pub fn run(partitions: &[Vec<Vec<u8>>], windows: &[ModelWindow], ooo: i64, lateness: i64) -> (Lists, Dead) {
    let (lists, dead) = run_grouped(partitions, windows, ooo, lateness);
    (global(lists), dead)
}

/// Runs the model over partitions of lines, with per-group and distinct-user windows (a record
/// without a user counts nowhere in a distinct-user window; when every window counts distinct
/// users it is a bad record).
pub fn run_grouped(
    partitions: &[Vec<Vec<u8>>],
    windows: &[ModelWindow],
    ooo: i64,
    lateness: i64,
) -> (GroupLists, Dead) {
    run_sealing(partitions, windows, ooo, lateness, |_, _, _, _| false)
}

/// The global lists of `lists` (group `""`).
fn global(lists: GroupLists) -> Lists {
    lists
        .into_iter()
        .filter(|(k, _)| k.3.is_empty())
        .map(|((w, s, e, _), v)| ((w, s, e), v))
        .collect()
}

/// The model of a bounded run over `first` followed by a run that reads on (each partition's
/// records of `then` after its records of `first`), by docs/time.md's "After the end of input":
/// the end sealed every instance; reading on, each window's instances up to the last one
/// covering the largest event time of `first` stay sealed — an event of `then` counts nowhere
/// there and is a `sealed` dead letter (once) — and the rest count as in one uninterrupted run.
/// (Exact while no partition goes idle: the global watermark then never seals an instance
/// before a partition's own rule calls its events late.)
pub fn run_after_end(
    first: &[Vec<Vec<u8>>],
    then: &[Vec<Vec<u8>>],
    windows: &[ModelWindow],
    ooo: i64,
    lateness: i64,
) -> (Lists, Dead) {
    let last = first
        .iter()
        .flatten()
        .filter_map(|line| parse(line).map(|(_, ts)| ts))
        .max();
    // per window: the end of the last instance covering `last`
    let sealed_until: Vec<i64> = windows
        .iter()
        .map(|w| last.map_or(i64::MIN, |t| t.div_euclid(w.slide) * w.slide + w.size))
        .collect();
    let both: Vec<Vec<Vec<u8>>> = first
        .iter()
        .zip(then)
        .map(|(a, b)| [a.clone(), b.clone()].concat())
        .collect();
    let first_len: Vec<u64> = first.iter().map(|lines| lines.len() as u64).collect();
    let (lists, dead) = run_sealing(&both, windows, ooo, lateness, |p, pos, w, end| {
        pos > first_len[p as usize] && end <= sealed_until[w]
    });
    (global(lists), dead)
}

/// [`run`], where `sealed(partition, position, window, end)` says the event at that position
/// cannot count in the window's instance ending at `end` any more (a `sealed` dead letter).
fn run_sealing(
    partitions: &[Vec<Vec<u8>>],
    windows: &[ModelWindow],
    ooo: i64,
    lateness: i64,
    sealed: impl Fn(u32, u64, usize, i64) -> bool,
) -> (GroupLists, Dead) {
    let (counts, dead) = tally(partitions, windows, ooo, lateness, sealed);
    (rank(counts, windows), dead)
}

/// Per item: its events and its users.
type Tally = BTreeMap<String, (u64, std::collections::BTreeSet<String>)>;

/// Per (window, start, group): what counts there.
type Counts = BTreeMap<(usize, i64, String), Tally>;

/// The counting half of [`run_sealing`]: every accepted event in each of its instances' groups,
/// and the dead letters.
fn tally(
    partitions: &[Vec<Vec<u8>>],
    windows: &[ModelWindow],
    ooo: i64,
    lateness: i64,
    sealed: impl Fn(u32, u64, usize, i64) -> bool,
) -> (Counts, Dead) {
    let mut counts = Counts::new();
    let every_window_needs_a_user = !windows.is_empty() && windows.iter().all(|w| w.distinct_users);
    let mut dead = Vec::new();
    for (p, lines) in partitions.iter().enumerate() {
        let mut max_ts: Option<i64> = None;
        for (i, line) in lines.iter().enumerate() {
            let pos = i as u64 + 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue; // a blank line: skipped and counted, no dead letter
            }
            let Some((item, ts)) = parse(line) else {
                dead.push((p as u32, pos, "bad".to_string()));
                continue;
            };
            let (dims, user) = extras(line);
            if every_window_needs_a_user && user.is_none() {
                dead.push((p as u32, pos, "bad".to_string()));
                continue;
            }
            let wm_before = max_ts.map(|m| m - ooo);
            let (mut late_any, mut sealed_any) = (false, false);
            for (w, spec) in windows.iter().enumerate() {
                // scan every instance start n*slide near ts
                let lo = (ts - spec.size).div_euclid(spec.slide) - 1;
                let hi = ts.div_euclid(spec.slide) + 1;
                for n in lo..=hi {
                    let start = n * spec.slide;
                    let end = start + spec.size;
                    if !(start <= ts && ts < end) {
                        continue;
                    }
                    if wm_before.is_some_and(|wm| wm >= end + lateness) {
                        late_any = true;
                    } else if sealed(p as u32, pos, w, end) {
                        sealed_any = true;
                    } else if !(spec.distinct_users && user.is_none()) {
                        let group = group_key(&spec.by, &dims);
                        let tally = counts
                            .entry((w, start, group))
                            .or_default()
                            .entry(item.clone())
                            .or_default();
                        tally.0 += 1;
                        tally.1.extend(user.clone());
                    }
                }
            }
            if late_any {
                dead.push((p as u32, pos, "late".to_string()));
            }
            if sealed_any {
                dead.push((p as u32, pos, "sealed".to_string()));
            }
            max_ts = Some(max_ts.map_or(ts, |m| m.max(ts)));
        }
    }
    dead.sort();
    (counts, dead)
}

/// The list group each (window, start, group) of `counts` counts in: itself, or `(other)` when
/// it is beyond its window's `max_groups` in that instance (the highest key hashes).
fn list_groups(counts: &Counts, windows: &[ModelWindow]) -> BTreeMap<(usize, i64, String), String> {
    let mut instance_groups: BTreeMap<(usize, i64), Vec<String>> = BTreeMap::new();
    for (w, start, group) in counts.keys() {
        instance_groups.entry((*w, *start)).or_default().push(group.clone());
    }
    let mut out = BTreeMap::new();
    for (w, start, group) in counts.keys() {
        let spec = &windows[*w];
        let mut groups = instance_groups[&(*w, *start)].clone();
        groups.sort_by_key(|g| hotlist_operators::hash::item_hash(g));
        let rank = groups.iter().position(|g| g == group).unwrap_or(0);
        let to = if spec.by.is_empty() || rank < spec.max_groups {
            group.clone()
        } else {
            "(other)".to_string()
        };
        out.insert((*w, *start, group.clone()), to);
    }
    out
}

/// The ranking half of [`run_sealing`]: per instance of a window with `by`, the groups beyond
/// `max_groups` count in `(other)` (their events summed, their users joined); each list sorted
/// by count, then id, and cut to `k`.
fn rank(counts: Counts, windows: &[ModelWindow]) -> GroupLists {
    let to = list_groups(&counts, windows);
    let mut folded: BTreeMap<(usize, i64, String), Tally> = BTreeMap::new();
    for ((w, start, group), items) in counts {
        let group = to[&(w, start, group)].clone();
        let into = folded.entry((w, start, group)).or_default();
        for (item, (events, users)) in items {
            let t = into.entry(item).or_default();
            t.0 += events;
            t.1.extend(users);
        }
    }
    let mut lists = GroupLists::new();
    for ((w, start, group), items) in folded {
        let spec = &windows[w];
        let mut ranked: Vec<(String, u64)> = items
            .into_iter()
            .map(|(item, (events, users))| {
                (
                    item,
                    if spec.distinct_users {
                        users.len() as u64
                    } else {
                        events
                    },
                )
            })
            .collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
        ranked.truncate(spec.k);
        lists.insert((spec.name.clone(), start, start + spec.size, group), ranked);
    }
    lists
}

/// Sealed trend lists per group: (window, start, end, group key) -> ranked (item, count,
/// history oldest first).
pub type TrendLists = BTreeMap<(String, i64, i64, String), Vec<(String, u64, Vec<u64>)>>;

/// Runs the model over partitions of lines and ranks window `w` by trend (docs/trends.md),
/// with baseline `baseline` and `min_count`: per instance and list group, an item's count `c`
/// and history (its counts in the `baseline` instances before, in the groups that count in
/// this list group now), ranked by `z² = (W·c − S)² / (W·(S + W))` descending (compared as
/// exact fractions), then id; only `c ≥ min_count` and `W·c > S` rank. Lists with nothing that
/// ranks are left out.
pub fn run_trend(
    partitions: &[Vec<Vec<u8>>],
    windows: &[ModelWindow],
    ooo: i64,
    lateness: i64,
    (w, baseline, min_count): (usize, u64, u64),
) -> TrendLists {
    let (counts, _) = tally(partitions, windows, ooo, lateness, |_, _, _, _| false);
    let to = list_groups(&counts, windows);
    let spec = &windows[w];
    let count_of = |start: i64, group: &str, item: &str| -> u64 {
        counts
            .get(&(w, start, group.to_string()))
            .and_then(|t| t.get(item))
            .map_or(0, |t| t.0)
    };
    // per (start, list group, item): count and history over its member groups
    let mut per: BTreeMap<(i64, String, String), (u64, Vec<u64>)> = BTreeMap::new();
    for ((cw, start, group), items) in &counts {
        if *cw != w {
            continue;
        }
        let list_group = to[&(w, *start, group.clone())].clone();
        for (item, (events, _)) in items {
            let e = per
                .entry((*start, list_group.clone(), item.clone()))
                .or_insert_with(|| (0, vec![0; baseline as usize]));
            e.0 += events;
            for (j, h) in e.1.iter_mut().enumerate() {
                *h += count_of(start - (baseline as i64 - j as i64) * spec.size, group, item);
            }
        }
    }
    let mut lists = TrendLists::new();
    for ((start, group, item), (c, history)) in per {
        let s: u64 = history.iter().sum();
        if c >= min_count && baseline * c > s {
            lists
                .entry((spec.name.clone(), start, start + spec.size, group))
                .or_default()
                .push((item, c, history));
        }
    }
    let b = baseline as i128;
    for list in lists.values_mut() {
        list.sort_by(|x, y| {
            let (sx, sy) = (x.2.iter().sum::<u64>() as i128, y.2.iter().sum::<u64>() as i128);
            let (nx, ny) = (b * x.1 as i128 - sx, b * y.1 as i128 - sy);
            (ny * ny * (sx + b))
                .cmp(&(nx * nx * (sy + b)))
                .then_with(|| x.0.as_bytes().cmp(y.0.as_bytes()))
        });
        list.truncate(spec.k);
    }
    lists
}

/// The windows of the crash and Kafka tests' configs: `10s` tumbling (K = 5) and `30s-hop`
/// (30 s every 10 s, K = 4).
pub fn crash_windows() -> Vec<ModelWindow> {
    vec![
        ModelWindow::new("10s", 10_000, 10_000, 5),
        ModelWindow::new("30s-hop", 30_000, 10_000, 4),
    ]
}

#[cfg(test)]
mod tests {
    use super::parse;
    use hotlist_operators::event::parse_event;

    /// The model and the job agree on the ends of the event time range.
    #[test]
    fn the_event_time_range_agrees_with_the_job() {
        let ts = [
            "-62167219200000",
            "-62167219200001",
            "253402300799999",
            "253402300800000",
            "9000000000000000",
            "-9223372036854775808",
            "9223372036854775807",
            "18446744073709551615",
            r#""0000-01-01T00:00:00Z""#,
            r#""0000-01-01T00:00:00+00:01""#,
            r#""0000-01-01T00:00:00-00:01""#,
            r#""9999-12-31T23:59:59.999Z""#,
            r#""9999-12-31T23:59:59.999-00:01""#,
            r#""9999-12-31T23:59:59.999+00:01""#,
        ];
        for t in ts {
            let line = format!(r#"{{"item_id":"a","ts":{t}}}"#);
            let job = parse_event(line.as_bytes()).ok().map(|e| e.ts.0);
            assert_eq!(parse(line.as_bytes()).map(|(_, ts)| ts), job, "{line}");
        }
        assert_eq!(
            parse(br#"{"item_id":"a","ts":-62167219200000}"#),
            Some(("a".into(), -62_167_219_200_000))
        );
        assert_eq!(parse(br#"{"item_id":"a","ts":253402300800000}"#), None);
    }
}

//! Trend windows against a brute-force model: final lists from naive per-instance counts,
//! with disorder, late events, a hopping window sharing the trend window's panes (exclusions),
//! several workers, and a snapshot restored onto another worker count mid-stream.

use super::*;
use crate::group::KeyShape;
use crate::hash::{item_hash, key_group};
use crate::message::LocalList;
use crate::record::{EventText, PartitionId, RankedItem, TimedEvent};
use crate::topk::{merge_top_k, ranked_cmp};
use crate::trend::{Rank, TrendRule};
use proptest::prop_assert_eq;
use std::cmp::Ordering;

fn ev(item: &str, ts: i64, wm_before: i64) -> TimedEvent {
    TimedEvent {
        text: EventText::item(item),
        ts: Millis(ts),
        wm_before: Millis(wm_before),
        hash: item_hash(item),
        partition: PartitionId(0),
        position: 0,
    }
}

fn trend_window(baseline: u32, min_count: u64) -> WindowSpec {
    WindowSpec {
        rank: Rank::Trend(TrendRule { baseline, min_count }),
        ..WindowSpec::tumbling("trend", Span::from_millis(10), 3)
    }
}

/// The model's order: z² compared as fractions of i128s, then id.
fn model_cmp(a: &(String, u64, u64), b: &(String, u64, u64), w: u64) -> Ordering {
    let (w, n) = (w as i128, |c: u64, s: u64| w as i128 * c as i128 - s as i128);
    let (na, nb) = (n(a.1, a.2), n(b.1, b.2));
    (nb * nb * (a.2 as i128 + w))
        .cmp(&(na * na * (b.2 as i128 + w)))
        .then(a.0.cmp(&b.0))
}

/// The model's final trend list of every instance with a listed item: (item, count, history).
fn model_lists(
    counts: &BTreeMap<i64, BTreeMap<String, u64>>,
    rule: TrendRule,
    size: i64,
    k: usize,
) -> BTreeMap<i64, Vec<(String, u64, Vec<u64>)>> {
    let w = rule.baseline as i64;
    let mut out = BTreeMap::new();
    for (&start, items) in counts {
        let mut ranked: Vec<(String, u64, u64)> = Vec::new();
        for (item, &c) in items {
            let s: u64 = (1..=w)
                .map(|j| {
                    counts
                        .get(&(start - j * size))
                        .and_then(|m| m.get(item))
                        .copied()
                        .unwrap_or(0)
                })
                .sum();
            if c >= rule.min_count && (w as u64) * c > s {
                ranked.push((item.clone(), c, s));
            }
        }
        ranked.sort_by(|a, b| model_cmp(a, b, w as u64));
        ranked.truncate(k);
        let list: Vec<(String, u64, Vec<u64>)> = ranked
            .into_iter()
            .map(|(item, c, _)| {
                let history = (1..=w)
                    .rev()
                    .map(|j| {
                        counts
                            .get(&(start - j * size))
                            .and_then(|m| m.get(&item))
                            .copied()
                            .unwrap_or(0)
                    })
                    .collect();
                (item, c, history)
            })
            .collect();
        if !list.is_empty() {
            out.insert(start, list);
        }
    }
    out
}

/// A list as the model writes it: (item, count, history) each.
type Facts = Vec<(String, u64, Vec<u64>)>;

fn facts(items: &[RankedItem]) -> Facts {
    items
        .iter()
        .map(|r| {
            let history = r.trend.as_ref().map(|t| t.history.clone()).unwrap_or_default();
            (r.item_id.to_string(), r.count, history)
        })
        .collect()
}

/// Per-worker counters with items routed by key group, as the dataflow routes them.
struct Workers {
    counters: Vec<WindowedCounter>,
    /// Per (window, instance start, group), each worker's latest list.
    latest: BTreeMap<(u16, i64, String), BTreeMap<u32, Vec<RankedItem>>>,
}

impl Workers {
    fn worker_of(&self, item: &str) -> usize {
        key_group(item_hash(item)) as usize % self.counters.len()
    }

    fn keep(&mut self, lists: Vec<LocalList>) {
        for l in lists {
            let per = self
                .latest
                .entry((l.instance.window.0, l.instance.start.0, l.group.as_str().to_string()))
                .or_default();
            per.insert(l.worker, l.items);
        }
    }

    fn advance(&mut self, wm: Millis, tick: bool) {
        let lists: Vec<LocalList> = self.counters.iter_mut().flat_map(|c| c.advance(wm, tick)).collect();
        self.keep(lists);
    }

    /// Snapshots every worker and restores the state onto `n` workers: the lists of instances
    /// still open are forgotten (the restored workers publish them all again).
    fn rescale(&mut self, windows: &[WindowSpec], lateness: Span, n: usize) {
        let snaps: Vec<_> = self.counters.iter().map(|c| c.snapshot()).collect();
        let wm = self.counters[0].watermark();
        self.counters = (0..n)
            .map(|w| WindowedCounter::restore(windows.to_vec(), lateness, w as u32, n, &snaps).expect("restores"))
            .collect();
        self.latest
            .retain(|(w, start, _), _| windows[*w as usize].end_of(Millis(*start)) <= wm.minus(lateness));
    }

    /// The merged final list of each (instance start, group) of window `w`.
    fn merged(&self, w: u16, k: usize) -> BTreeMap<(i64, String), Vec<RankedItem>> {
        self.latest
            .iter()
            .filter(|((win, _, _), _)| *win == w)
            .map(|((_, start, group), per)| {
                (
                    (*start, group.clone()),
                    merge_top_k(per.values().map(|v| v.as_slice()), k),
                )
            })
            .filter(|(_, l)| !l.is_empty())
            .collect()
    }
}

proptest::proptest! {
    /// Sealed trend lists equal the model's on any stream, worker count and restore; per group
    /// (`by = ["country"]`), each group's lists are the model's over its events alone (its
    /// baselines its own).
    #[test]
    fn final_trend_lists_equal_the_model(
        events in proptest::collection::vec((0u8..6, 0usize..3, 0i64..4, 0i64..12, proptest::bool::weighted(0.05)), 0..300),
        baseline in 1u32..5,
        min_count in 1u64..4,
        with_hopping in proptest::bool::ANY,
        per_group in proptest::bool::ANY,
        ooo in 0i64..8,
        lateness in 0u64..15,
        advance_every in 1usize..30,
        workers in 1usize..4,
        restore_at in proptest::option::of((0usize..300, 1usize..4)),
    ) {
        let mut windows = vec![trend_window(baseline, min_count)];
        if per_group {
            windows[0].key = KeyShape { by: vec!["country".to_string()], distinct_users: false, max_groups: 100 };
        }
        if with_hopping {
            // same pane width: shares the trend window's panes, and its exclusions
            windows.push(WindowSpec { rank: Rank::Count, slide: Span::from_millis(10), ..WindowSpec::tumbling("hop", Span::from_millis(30), 3) });
        }
        let lateness = Span::from_millis(lateness);
        let mut ws = Workers {
            counters: (0..workers).map(|w| WindowedCounter::new(windows.clone(), lateness, w as u32)).collect(),
            latest: BTreeMap::new(),
        };
        // per group, per instance start, per item: its count
        let mut naive: BTreeMap<String, BTreeMap<i64, BTreeMap<String, u64>>> = BTreeMap::new();
        let mut t = 0i64;
        let mut max_ts: Option<i64> = None;
        for (n, (item, country, step, back, late)) in events.iter().enumerate() {
            t += step;
            let ts = t - back - if *late { 60 } else { 0 };
            let wm_before = max_ts.map_or(i64::MIN, |m| m - ooo);
            let (item, country) = (format!("i{item}"), ["US", "FR", "JP"][*country]);
            let w = ws.worker_of(&item);
            let text = EventText::new(&item, None, &[country]);
            ws.counters[w].apply(&TimedEvent { text, ..ev(&item, ts, wm_before) });
            let start = ts.div_euclid(10) * 10;
            if wm_before == i64::MIN || wm_before < start + 10 + lateness.as_i64() {
                let group = if per_group { format!("country={country}") } else { String::new() };
                *naive.entry(group).or_default().entry(start).or_default().entry(item).or_insert(0) += 1;
            }
            max_ts = Some(max_ts.map_or(ts, |m| m.max(ts)));
            if n % advance_every == 0 {
                ws.advance(Millis(max_ts.unwrap_or(i64::MIN) - ooo), n % 3 == 0);
            }
            if restore_at.is_some_and(|(at, _)| at == n) {
                let to = restore_at.map_or(1, |(_, to)| to);
                ws.rescale(&windows, lateness, to);
            }
        }
        ws.advance(Millis::MAX, false);
        let rule = windows[0].rank.trend().expect("a trend window");
        let got: BTreeMap<(i64, String), Facts> = ws.merged(0, 3).into_iter().map(|(key, l)| (key, facts(&l))).collect();
        let want: BTreeMap<(i64, String), Facts> = naive
            .iter()
            .flat_map(|(group, counts)| {
                model_lists(counts, rule, 10, 3).into_iter().map(move |(start, list)| ((start, group.clone()), list))
            })
            .collect();
        prop_assert_eq!(got, want);
        for c in &ws.counters {
            let s = c.stats();
            prop_assert_eq!(
                (s.live_counters, s.live_items, s.live_panes, s.live_instances, s.live_groups),
                (0, 0, 0, 0, 0)
            );
            prop_assert_eq!(c.trend_exclusions.len(), 0);
        }
    }
}

#[test]
fn lists_are_in_trend_order_and_carry_their_history() {
    let mut c = WindowedCounter::new(vec![trend_window(2, 1)], Span::ZERO, 0);
    // instance [0, 10): steady 3 a; [10, 20): steady 3 a; [20, 30): 3 a, 2 new b
    for ts in [0, 1, 2, 10, 11, 12, 20, 21, 22] {
        c.apply(&ev("a", ts, i64::MIN));
    }
    for ts in [23, 24] {
        c.apply(&ev("b", ts, i64::MIN));
    }
    let lists = c.advance(Millis(30), false);
    let last = lists
        .iter()
        .find(|l| l.instance.start == Millis(20))
        .expect("a list for [20, 30)");
    // a: c 3, S 6: W·c = S, it does not rise. b: c 2, S 0: z = 4 / √(2·2) = 2
    assert_eq!(facts(&last.items), vec![("b".to_string(), 2, vec![0, 0])]);
    assert!(last
        .items
        .windows(2)
        .all(|p| ranked_cmp(&p[0], &p[1]) == Ordering::Less));
}

#[test]
fn a_late_event_in_the_baseline_revises_the_open_list() {
    let w = trend_window(1, 1);
    let mut c = WindowedCounter::new(vec![w], Span::from_millis(100), 0);
    c.apply(&ev("a", 15, i64::MIN));
    c.apply(&ev("a", 16, i64::MIN));
    let first = c.advance(Millis(15), true);
    let open = first
        .iter()
        .find(|l| l.instance.start == Millis(10))
        .expect("a provisional list");
    assert_eq!(facts(&open.items), vec![("a".to_string(), 2, vec![0])]);
    // two late events for [0, 10) raise a's baseline: the open list of [10, 20) is revised
    c.apply(&ev("a", 5, 15));
    c.apply(&ev("a", 6, 15));
    let revised = c.advance(Millis(15), true);
    let open = revised
        .iter()
        .find(|l| l.instance.start == Millis(10))
        .expect("a revised list");
    assert_eq!(facts(&open.items), Vec::<(String, u64, Vec<u64>)>::new());
}

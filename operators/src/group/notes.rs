//! The announcements of the groups events count in (see `admission`): made where events are
//! read, before they are routed by item, and sent to every worker.
//!
//! An event announces its group to each instance of a per-group window that accepts it by the
//! lateness rule (the rule the counter applies: instance end > the event's partition watermark
//! before it − allowed lateness) — and, for a distinct-user window, only when it has a user.
//! Announcements are idempotent, so a small cache of recent ones only saves traffic: it is
//! direct-mapped (a note takes the slot its hashes pick, and a collision only means the next
//! note of the displaced group is sent again), and a replay or a restore announcing again
//! changes nothing.
//!
//! The cache is keyed by the dim's value as the event carries it, not by the group's key: a
//! window with one `by` dim (the usual case) finds an event's group in the cache from its
//! value alone, and composes and hashes the key (`country=C12`) only to announce a new one;
//! the instances covering an event are kept for the rest of its pane. The announcements cost
//! 10 % of a per-group job's instructions and 12 % of its wall time (measured by announcing
//! nothing), most of it composing and hashing the key and working out the instances for every
//! event; they now cost about 4 % of the instructions (docs/benchmarks.md). A job of one worker
//! in all makes none: its counter notes its keys' groups itself (`counter::groups`).

use super::admission::GroupNote;
use crate::counter::Shapes;
use crate::hash::item_hash;
use crate::record::TimedEvent;
use crate::short_copy::le_word;
use crate::time::{Millis, Span};
use crate::window::{InstanceKey, WindowId, WindowSpec};

/// Slots of the cache of recent announcements (a power of two; 48 bytes each).
const RECENT: usize = 1 << 12;

/// Makes the [`GroupNote`]s of events, per worker.
pub struct GroupNoter {
    shapes: Shapes,
    /// The windows with `by` dims: (id, spec, shape).
    windows: Vec<(WindowId, WindowSpec, u8)>,
    allowed_lateness: Span,
    /// Recent announcements, direct-mapped by [`slot`].
    recent: Vec<Option<Seen>>,
    group: String,
    /// Per window (as `windows`), the instances covering the last event's pane.
    covering: Vec<Covering>,
}

/// The starts of the instances covering every time of one pane (`from..to`, the window's
/// pane width: instances start and end on pane boundaries, so every time of a pane is
/// covered by the same ones). Kept because consecutive events are mostly in one pane, and
/// working the starts out takes three divisions.
#[derive(Default)]
struct Covering {
    from: Millis,
    to: Millis,
    starts: Vec<Millis>,
}

impl Covering {
    /// The starts of the instances of `spec` covering `ts`, earliest first.
    #[inline]
    fn of(&mut self, spec: &WindowSpec, ts: Millis) -> &[Millis] {
        if ts < self.from || ts >= self.to {
            let w = spec.pane_width().as_i64();
            self.from = Millis(ts.0.div_euclid(w).saturating_mul(w));
            self.to = Millis(self.from.0.saturating_add(w));
            self.starts.clear();
            self.starts.extend(spec.starts_covering(ts));
        }
        &self.starts
    }
}

/// An announcement made recently: its instance and its group, as [`Value`].
#[derive(Clone, Copy, PartialEq, Eq)]
struct Seen {
    instance: InstanceKey,
    group: Value,
}

/// A group as a cache of recent notes knows it (this one's, and a counter's own notes, see
/// `counter::groups`): a value (of a window's one dim here, of the group's key there) when it
/// is at most 16 bytes long (its length and its bytes as a little-endian number, in two
/// words), else the hash of its composed key (tagged by a length no value has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Value(usize, u64, u64);

impl Value {
    /// The short form of `v`, if it has one.
    #[inline]
    pub(crate) fn short(v: &[u8]) -> Option<Value> {
        let w = (v.len() <= 16).then(|| le_word(v))?;
        Some(Value(v.len(), w as u64, (w >> 64) as u64))
    }

    /// A group known by its key's hash.
    pub(crate) fn hashed(hash: u64) -> Value {
        Value(usize::MAX, hash, 0)
    }

    /// The slot of a cache of `2^bits` slots of this group noted at `start` under `tag` (the
    /// window, or the pane group and shape): every bit mixed in (a short value's words are its
    /// raw bytes; splitmix64's finalizer, two multiplies).
    #[inline]
    pub(crate) fn slot(&self, start: Millis, tag: u64, bits: u32) -> usize {
        let Value(n, a, b) = *self;
        let at = start.0 as u64 ^ tag.rotate_left(48);
        let mut x = a ^ b.rotate_left(21) ^ (n as u64).rotate_left(42) ^ at.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (x >> (64 - bits)) as usize
    }
}

impl GroupNoter {
    /// A noter for the job's windows; `None` when no window has `by` dims.
    pub fn new(windows: &[WindowSpec], allowed_lateness: Span) -> Option<GroupNoter> {
        let shapes = Shapes::new(windows);
        let grouped: Vec<(WindowId, WindowSpec, u8)> = windows
            .iter()
            .enumerate()
            .filter(|(_, w)| !w.key.by.is_empty())
            .map(|(i, w)| (WindowId(i as u16), w.clone(), shapes.of_window(i)))
            .collect();
        let n = grouped.len();
        (!grouped.is_empty()).then(|| GroupNoter {
            shapes,
            windows: grouped,
            allowed_lateness,
            recent: vec![None; RECENT],
            group: String::new(),
            covering: std::iter::repeat_with(Covering::default).take(n).collect(),
        })
    }

    /// Appends the announcements of `ev` not made recently to `out`.
    pub fn note(&mut self, ev: &TimedEvent, out: &mut Vec<GroupNote>) {
        let late_h = ev.wm_before.minus(self.allowed_lateness);
        // per shape in turn (windows of one shape are often next to each other): the group as
        // the cache knows it, and its key's hash once composed
        let mut last: Option<(u8, Value, Option<u64>)> = None;
        for ((id, spec, shape), covering) in self.windows.iter().zip(&mut self.covering) {
            let (group, mut hash) = match last {
                Some((s, group, hash)) if s == *shape => (group, hash),
                _ => {
                    if self.shapes.distinct_users(*shape) && ev.text.user().is_none() {
                        continue; // a distinct-user window, an event without a user
                    }
                    let short = self
                        .shapes
                        .one_dim(*shape)
                        .and_then(|p| Value::short(ev.text.dim(p).as_bytes()));
                    match short {
                        Some(v) => (v, None),
                        None => {
                            let h = group_hash(&self.shapes, *shape, ev, &mut self.group);
                            (Value::hashed(h), Some(h))
                        }
                    }
                }
            };
            for &start in covering.of(spec, ev.ts) {
                if spec.end_of(start) <= late_h {
                    continue; // late for this instance: not counted in it
                }
                let seen = Seen {
                    instance: InstanceKey { window: *id, start },
                    group,
                };
                let at = &mut self.recent[slot(&seen)];
                if *at != Some(seen) {
                    *at = Some(seen);
                    let h = *hash.get_or_insert_with(|| group_hash(&self.shapes, *shape, ev, &mut self.group));
                    out.push(GroupNote {
                        instance: seen.instance,
                        hash: h,
                    });
                }
            }
            last = Some((*shape, group, hash));
        }
    }
}

/// `item_hash` of the key of `ev`'s group in shape `shape` (composed in `buf`).
fn group_hash(shapes: &Shapes, shape: u8, ev: &TimedEvent, buf: &mut String) -> u64 {
    shapes.group(shape, ev, buf);
    item_hash(buf)
}

/// The cache slot of an announcement.
#[inline]
fn slot(seen: &Seen) -> usize {
    seen.group.slot(
        seen.instance.start,
        u64::from(seen.instance.window.0),
        RECENT.trailing_zeros(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{GroupKey, KeyShape};
    use crate::record::{EventText, PartitionId};
    use crate::time::Millis;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn event(country: &str, ts: i64) -> TimedEvent {
        TimedEvent {
            text: EventText::new("i", None, &[country]),
            ts: Millis(ts),
            wm_before: Millis::MIN,
            hash: item_hash("i"),
            partition: PartitionId(0),
            position: 0,
        }
    }

    /// Every (instance, group) an event counts in is announced at least once, also with more
    /// groups than cache slots (so that notes displace each other), and a repeat right after
    /// its first announcement is not sent again.
    #[test]
    fn every_group_of_every_instance_is_announced() {
        let mut w = WindowSpec::tumbling("1m", Span::from_millis(60_000), 5);
        w.key = KeyShape {
            by: vec!["country".into()],
            ..KeyShape::default()
        };
        let mut noter = GroupNoter::new(&[w], Span::ZERO).expect("a per-group window");
        let mut out = Vec::new();
        let mut want = BTreeSet::new();
        for n in 0..3 * RECENT as i64 {
            // 2 instances, 2 * RECENT groups, each group seen several times
            let (country, ts) = (format!("C{}", (n * 7919) % (2 * RECENT as i64)), (n % 2) * 60_000);
            let group = GroupKey::from_pairs([("country", country.as_str())]);
            want.insert((ts, item_hash(group.as_str())));
            let e = event(&country, ts);
            noter.note(&e, &mut out);
            let sent = out.len();
            noter.note(&e, &mut out);
            assert_eq!(out.len(), sent, "a repeat is not announced again");
        }
        let got: BTreeSet<(i64, u64)> = out.iter().map(|n| (n.instance.start.0, n.hash)).collect();
        assert_eq!(got, want);
    }

    fn window(name: &str, size: u64, slide: u64, by: &[&str], distinct_users: bool) -> WindowSpec {
        let mut w = WindowSpec::tumbling(name, Span::from_millis(size), 5);
        w.slide = Span::from_millis(slide);
        w.key = KeyShape {
            by: by.iter().map(|d| d.to_string()).collect(),
            distinct_users,
            ..KeyShape::default()
        };
        w
    }

    proptest! {
        /// Against a model that announces every (instance, group) of every event: the noter
        /// announces exactly those pairs (each with the hash of the group's composed key), late
        /// instances are not announced, and an event noted twice in a row is announced again
        /// only where two of its own notes take one slot (a rare collision, which an earlier
        /// bound on how often it may happen failed on by chance). Windows: one dim (tumbling and sliding, sharing a shape), two
        /// dims, one dim counting distinct users; values of 0 to 24 bytes (every short form
        /// and longer ones), some that need escapes, events with and without a user; more
        /// groups than cache slots in some runs.
        #[test]
        fn announces_what_the_model_announces(
            events in prop::collection::vec(
                (
                    prop::sample::select(vec!["", "ab", "abcd", "abcdefgh", "abcdefghijklmnop"]),
                    0u16..6000,
                    prop::sample::select(vec!["", "x", "a b/%"]),
                    any::<bool>(),
                    0i64..400_000,
                    0i64..3,
                ),
                1..300,
            )
        ) {
            let windows = [
                window("t", 60_000, 60_000, &["country"], false),
                window("s", 120_000, 60_000, &["country"], false),
                window("two", 60_000, 60_000, &["country", "device"], false),
                window("users", 60_000, 60_000, &["country"], true),
            ];
            let shapes = Shapes::new(&windows);
            let lateness = Span::from_millis(30_000);
            let mut noter = GroupNoter::new(&windows, lateness).expect("per-group windows");
            let (mut got, mut want) = (BTreeSet::new(), BTreeSet::new());
            let mut out = Vec::new();
            let mut group = String::new();
            for (prefix, n, suffix, has_user, ts, behind) in events {
                let dims = [format!("{prefix}{n}{suffix}"), format!("{suffix}{}", n % 7)];
                let text = EventText::new("i", has_user.then_some("u"), &dims);
                // a watermark some minutes behind the event, so that some instances are late
                let ev = TimedEvent {
                    text,
                    ts: Millis(ts),
                    wm_before: Millis(ts - behind * 60_000),
                    hash: item_hash("i"),
                    partition: PartitionId(0),
                    position: 0,
                };
                // the event's notes, each with the cache slot it takes
                let mut notes = Vec::new();
                for (w, spec) in windows.iter().enumerate() {
                    let shape = shapes.of_window(w);
                    if !shapes.group(shape, &ev, &mut group) {
                        continue;
                    }
                    let value = shapes
                        .one_dim(shape)
                        .and_then(|p| Value::short(ev.text.dim(p).as_bytes()))
                        .unwrap_or_else(|| Value::hashed(item_hash(&group)));
                    for start in spec.starts_covering(ev.ts) {
                        if spec.end_of(start) > ev.wm_before.minus(lateness) {
                            want.insert((w, start.0, item_hash(&group)));
                            let instance = InstanceKey { window: WindowId(w as u16), start };
                            let at = slot(&Seen { instance, group: value });
                            notes.push(((w, start.0, item_hash(&group)), at));
                        }
                    }
                }
                out.clear();
                noter.note(&ev, &mut out);
                got.extend(out.iter().map(|n| (n.instance.window.0 as usize, n.instance.start.0, n.hash)));
                out.clear();
                noter.note(&ev, &mut out);
                for note in &out {
                    let key = (note.instance.window.0 as usize, note.instance.start.0, note.hash);
                    let at = notes.iter().find(|(k, _)| *k == key).map(|&(_, at)| at);
                    let shared = at.is_some_and(|at| notes.iter().filter(|&&(_, a)| a == at).count() > 1);
                    prop_assert!(shared, "{key:?} announced again, its slot not shared by another of its notes");
                }
            }
            prop_assert_eq!(got, want);
        }
    }
}

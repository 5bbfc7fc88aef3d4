//! The key shapes one counter counts: which key each window counts an event under, and how an
//! instance's key counts become per-group lists.
//!
//! Shape 0 is always the bare item id (global windows counting events). Every other shape is a
//! distinct [`KeyShape`] of the job's windows: its events are counted under counter keys
//! (`group NUL item`, or `group NUL item NUL user` for distinct users; see `group`). Windows of
//! different shapes still share panes when their pane widths are equal: a pane simply holds
//! keys of several shapes, and each window reads only its own shape's keys.

use crate::group::{encode_value, split_key, GroupKey, KeyShape, OTHER_GROUP};
use crate::record::{RankedItem, TextParts, TimedEvent};
use crate::short_copy::push_str;
use crate::topk::select_top_counted;
use crate::window::WindowSpec;
use rustc_hash::{FxHashMap, FxHashSet};

/// The shapes of a job's windows.
#[derive(Clone, Debug)]
pub struct Shapes {
    /// Distinct shapes; index 0 is the plain shape.
    shapes: Vec<KeyShape>,
    /// Per shape, its `by` dims: each one's position in the job's dims (`EventText::dim`
    /// order) and the group key's text before its value (`name=`, `&name=` after the first),
    /// so that a key is written as one copy per dim and its value.
    by_dims: Vec<Vec<(usize, String)>>,
    /// Per window (by id), its shape.
    window_shape: Vec<u8>,
    /// The shape of a job's events written as its keys (see [`keyed_prefix`]).
    keyed: Option<u8>,
}

/// The dims a job's events carry, in `EventText::dim` order: the sorted union of its
/// windows' `by` dims.
pub fn job_dims(windows: &[WindowSpec]) -> Vec<String> {
    let mut dims: Vec<String> = windows.iter().flat_map(|w| w.key.by.iter().cloned()).collect();
    dims.sort_unstable();
    dims.dedup();
    dims
}

/// The group key's text before the value (`name=`) of the one dim every window of the job
/// counts events per, when there is one: the source then writes each event as the key its
/// windows count it under (`EventText::keyed`). `None` for any other job: one with a global
/// window, distinct users, two dims, or windows of several shapes.
pub fn keyed_prefix(windows: &[WindowSpec]) -> Option<String> {
    let first = &windows.first()?.key;
    let one_dim = |w: &WindowSpec| w.key.by == first.by && !w.key.distinct_users;
    match first.by.as_slice() {
        [dim] if windows.iter().all(one_dim) => Some(format!("{dim}=")),
        _ => None,
    }
}

/// Whether some window of the job counts distinct users (events then need a user).
pub fn needs_user(windows: &[WindowSpec]) -> bool {
    windows.iter().any(|w| w.key.distinct_users)
}

impl Shapes {
    /// The shapes of `windows`.
    pub fn new(windows: &[WindowSpec]) -> Shapes {
        let dims = job_dims(windows);
        let mut shapes = vec![KeyShape::default()];
        let mut window_shape = Vec::with_capacity(windows.len());
        for w in windows {
            let shape = KeyShape {
                max_groups: 0,
                ..w.key.clone()
            };
            let i = if shape.is_plain() {
                0
            } else {
                match shapes.iter().position(|s| *s == shape) {
                    Some(i) => i,
                    None => {
                        shapes.push(shape);
                        shapes.len() - 1
                    }
                }
            };
            window_shape.push(u8::try_from(i).expect("at most MAX_WINDOWS (64) windows"));
        }
        shapes[0].max_groups = 0;
        let by_dims = shapes
            .iter()
            .map(|s| {
                s.by.iter()
                    .enumerate()
                    .map(|(n, d)| {
                        let p = dims.iter().position(|x| x == d).expect("a job dim");
                        (p, format!("{}{d}=", if n > 0 { "&" } else { "" }))
                    })
                    .collect()
            })
            .collect();
        Shapes {
            keyed: keyed_prefix(windows).map(|_| 1),
            shapes,
            by_dims,
            window_shape,
        }
    }

    /// The shape whose keys a keyed event's text holds (see [`keyed_prefix`]; `None`: the
    /// windows count events otherwise, and no event's text is a key of theirs).
    #[inline(always)]
    pub fn keyed(&self) -> Option<u8> {
        self.keyed
    }

    /// The shape window `w` (by id) counts.
    #[inline]
    pub fn of_window(&self, w: usize) -> u8 {
        self.window_shape[w]
    }

    /// How many shapes (shape 0 included).
    #[allow(clippy::len_without_is_empty)] // never empty: shape 0 is always there
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// Whether every window counts bare item ids.
    pub fn all_plain(&self) -> bool {
        self.shapes.len() == 1
    }

    /// Writes the key `ev` is counted under in shape `s` (> 0) into `out`; false when the shape
    /// counts distinct users and the event has none (it is not counted in such windows).
    pub fn key(&self, s: u8, ev: &TimedEvent, out: &mut String) -> bool {
        out.clear();
        self.append_key(s, ev, out)
    }

    /// [`Shapes::key`] appended to `out` (false: nothing appended). (In line: a call's
    /// set-up and its callee's were a fifth of writing a key, `cachegrind`.)
    #[inline(always)]
    pub fn append_key(&self, s: u8, ev: &TimedEvent, out: &mut String) -> bool {
        // the group is written in place: the key is `group::compose_key(group, item, user)`,
        // from the event's text read once
        let parts = ev.text.parts();
        if !self.append_group_of(s, &parts, out) {
            return false;
        }
        out.push('\0');
        push_str(out, parts.item);
        if self.shapes[s as usize].distinct_users {
            if let Some(user) = parts.user {
                out.push('\0');
                push_str(out, user);
            }
        }
        true
    }

    /// The key `ev` counts under in paired shape `s` (`group NUL item NUL`: see
    /// `counter::pairs`) appended to `out`, and the event's user; `None` (nothing appended)
    /// when it has none.
    #[inline(always)]
    pub(super) fn append_paired_key<'e>(&self, s: u8, ev: &'e TimedEvent, out: &mut String) -> Option<&'e str> {
        let parts = ev.text.parts();
        let user = parts.user?;
        self.append_group_of(s, &parts, out);
        out.push('\0');
        push_str(out, parts.item);
        out.push('\0');
        Some(user)
    }

    /// Writes the key of the group `ev` counts in under shape `s` (> 0) into `group`; false
    /// when the shape counts distinct users and the event has none.
    pub fn group(&self, s: u8, ev: &TimedEvent, group: &mut String) -> bool {
        group.clear();
        self.append_group_of(s, &ev.text.parts(), group)
    }

    /// The group `ev` counts in under shape `s` (> 0) appended to `out` (false: nothing
    /// appended: the shape counts distinct users and the event has none).
    #[inline(always)]
    pub(super) fn append_group(&self, s: u8, ev: &TimedEvent, out: &mut String) -> bool {
        self.append_group_of(s, &ev.text.parts(), out)
    }

    /// The group of an event's text `parts` under shape `s` (> 0) appended to `out` (false:
    /// nothing appended).
    #[inline(always)]
    fn append_group_of(&self, s: u8, parts: &TextParts<'_>, out: &mut String) -> bool {
        let shape = &self.shapes[s as usize];
        if shape.distinct_users && parts.user.is_none() {
            return false;
        }
        for (p, before) in &self.by_dims[s as usize] {
            push_str(out, before);
            encode_value(parts.dim(*p), out);
        }
        true
    }

    /// The shape of a counter key read back from a snapshot (`None`: no window counts it).
    pub fn of_key(&self, key: &str) -> Option<u8> {
        if !key.contains('\0') {
            return Some(0);
        }
        let (group, _, user) = split_key(key);
        let by: Vec<String> = match GroupKey::parse(group) {
            Ok(Some(pairs)) => pairs.into_iter().map(|(d, _)| d).collect(),
            _ => return None,
        };
        let i = self
            .shapes
            .iter()
            .position(|s| s.by == by && s.distinct_users == user.is_some() && !s.is_plain())?;
        u8::try_from(i).ok()
    }

    /// The position of shape `s`'s dim in the job's dims (`EventText::dim`) when it has
    /// exactly one.
    #[inline]
    pub fn one_dim(&self, s: u8) -> Option<usize> {
        match self.by_dims[s as usize].as_slice() {
            [(p, _)] => Some(*p),
            _ => None,
        }
    }

    /// Whether shape `s` has `by` dims.
    #[inline]
    pub fn has_by(&self, s: u8) -> bool {
        !self.by_dims[s as usize].is_empty()
    }

    /// Whether shape `s` counts distinct users.
    pub fn distinct_users(&self, s: u8) -> bool {
        self.shapes[s as usize].distinct_users
    }
}

/// (count, item) pairs of one group.
type Counted<'a> = Vec<(u64, &'a str)>;

/// The per-group top-`k` lists of counter keys of one shape and their counts in an instance:
/// per (group, item), the sum of the counts (events) or the number of keys with a positive
/// count (distinct users). A group `admits` refuses counts in `(other)` instead: the sum of its
/// counts over those groups, or its number of distinct users over them. Groups are returned in
/// key order, each list best first.
pub fn group_lists<'a>(
    keys: impl Iterator<Item = (&'a str, u64)>,
    distinct_users: bool,
    k: usize,
    mut admits: impl FnMut(&str) -> bool,
) -> Vec<(GroupKey, Vec<RankedItem>)> {
    // per group: whether it keeps its own list (decided once per group) and its (count, item)
    // pairs. A key of an admitted group of an events window is already one (group, item);
    // distinct-user windows and (other) sum per (group, item) first.
    // (the maps are keyed by one slice of the key, `group NUL item` or `item NUL user`, not by
    // a pair of its parts: one hash and one compare instead of two, on every key of a
    // distinct-user recount)
    let mut groups: FxHashMap<&'a str, (bool, Counted<'a>)> = FxHashMap::default();
    // per `group NUL item` of an admitted group, its number of users
    let mut per: FxHashMap<&'a str, u64> = FxHashMap::default();
    // per item, its count in (other)
    let mut other: FxHashMap<&'a str, u64> = FxHashMap::default();
    // distinct users of (other): `item NUL user` over the folded groups
    let mut other_users: FxHashSet<&'a str> = FxHashSet::default();
    for (key, count) in keys {
        if count == 0 {
            continue;
        }
        let (group, item, user) = split_key(key);
        let (kept, items) = groups.entry(group).or_insert_with(|| (admits(group), Vec::new()));
        match (*kept, distinct_users, user) {
            (true, false, _) => items.push((count, item)),
            (true, true, _) => {
                let group_item = match user {
                    Some(user) => &key[..key.len() - user.len() - 1],
                    None => key,
                };
                *per.entry(group_item).or_insert(0) += 1;
            }
            (false, true, Some(_)) => {
                // (a key with a user is `group NUL item NUL user`)
                if other_users.insert(&key[group.len() + 1..]) {
                    *other.entry(item).or_insert(0) += 1;
                }
            }
            (false, _, _) => *other.entry(item).or_insert(0) += count,
        }
    }
    for (group_item, count) in per {
        let (group, item, _) = split_key(group_item);
        groups.entry(group).or_insert((true, Vec::new())).1.push((count, item));
    }
    for (item, count) in other {
        groups
            .entry(OTHER_GROUP)
            .or_insert((true, Vec::new()))
            .1
            .push((count, item));
    }
    let mut groups: Vec<(&str, Vec<(u64, &str)>)> = groups
        .into_iter()
        .filter(|(_, (_, items))| !items.is_empty())
        .map(|(group, (_, items))| (group, items))
        .collect();
    groups.sort_unstable_by(|a, b| a.0.cmp(b.0));
    groups
        .into_iter()
        .map(|(group, items)| (GroupKey::from_stored(group.to_string()), top_list(items, k)))
        .collect()
}

/// The top `k` of a group's (count, item) pairs, as its list.
fn top_list(mut items: Vec<(u64, &str)>, k: usize) -> Vec<RankedItem> {
    // (ids compared only among the pairs tied at the K-th count: most of a group's tail is ties)
    select_top_counted(&mut items, k, |item| item);
    items
        .into_iter()
        .map(|(count, item)| RankedItem {
            item_id: item.into(),
            count,
            trend: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Span;

    fn window(by: &[&str], distinct_users: bool) -> WindowSpec {
        let mut w = WindowSpec::tumbling("w", Span::from_millis(60_000), 10);
        w.key = KeyShape {
            by: by.iter().map(|d| d.to_string()).collect(),
            distinct_users,
            ..KeyShape::default()
        };
        w
    }

    /// Only a job whose every window counts events per the same one dim is keyed.
    #[test]
    fn a_job_is_keyed_when_every_window_counts_events_per_one_dim() {
        let by = |d: &[&str]| window(d, false);
        let keyed = |ws: &[WindowSpec]| (keyed_prefix(ws), Shapes::new(ws).keyed());
        assert_eq!(keyed(&[by(&["country"])]), (Some("country=".into()), Some(1)));
        assert_eq!(
            keyed(&[by(&["country"]), by(&["country"])]),
            (Some("country=".into()), Some(1))
        );
        for not in [
            vec![],
            vec![by(&[])],
            vec![by(&["country"]), by(&[])],
            vec![by(&[]), by(&["country"])],
            vec![by(&["country"]), by(&["device"])],
            vec![by(&["country", "device"])],
            vec![window(&["country"], true)],
            vec![by(&["country"]), window(&["country"], true)],
            vec![window(&[], true)],
        ] {
            assert_eq!(keyed(&not), (None, None), "{not:?}");
        }
    }
}

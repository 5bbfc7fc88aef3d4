//! Per-dimension lists: group keys and the keys a per-group or distinct-user window counts.
//!
//! A window with `by = ["country"]` keeps one top-K per combination of the dims' values: its
//! **group**. A group is named by its canonical [`GroupKey`]: the `dim=value` pairs in dim-name
//! order joined by `&`, values percent-encoded (`country=US&device=mobile`); a global list's
//! key is `""`. Only the characters `A-Z a-z 0-9 - . _ ~ = & %` can appear in a key (dim names
//! are checked to be made of the first six), so it is safe in URLs, SQL text and Redis keys.
//!
//! Such windows count **counter keys** instead of bare item ids: `group NUL item` for a
//! per-group window, `group NUL item NUL user` for a `distinct_users` window (whose count of an
//! item is then the number of its keys with a positive count). Item ids and users never hold
//! NUL (see `event::check_item_id`) and group keys never do, so the split is unambiguous.
//! Keys are routed and checkpointed by the hash of their item id, like bare ids: each worker
//! still owns whole items, so merging per-worker lists stays exact per group.

mod admission;
mod bounds;
mod notes;

pub use admission::{most_folded, Admitted, GroupNote, InstanceGroups};
pub use bounds::{
    encoded_len, longest_key, DimBounds, DEFAULT_MAX_DIM_BYTES, DEFAULT_MAX_GROUP_KEY_BYTES, GROUP_KEY_LIMIT,
};
pub use notes::GroupNoter;
pub(crate) use notes::Value;

use crate::hash::item_hash;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The canonical key of a group (`""` for a global list).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupKey(String);

/// The group of the events beyond a window's `max_groups`.
pub const OTHER_GROUP: &str = "(other)";

impl GroupKey {
    /// The key of a global list.
    pub fn global() -> GroupKey {
        GroupKey(String::new())
    }

    /// The overflow group `(other)`.
    pub fn other() -> GroupKey {
        GroupKey(OTHER_GROUP.to_string())
    }

    /// The key of `pairs` (dim name, value), in any order.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> GroupKey {
        let mut pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        pairs.sort_unstable();
        let mut key = String::new();
        for (i, (name, value)) in pairs.into_iter().enumerate() {
            if i > 0 {
                key.push('&');
            }
            key.push_str(name);
            key.push('=');
            encode_value(value, &mut key);
        }
        GroupKey(key)
    }

    /// Takes a stored key as it is (read back from a sink or a snapshot); see [`GroupKey::parse`]
    /// to check one.
    pub fn from_stored(key: String) -> GroupKey {
        GroupKey(key)
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is `(other)`'s key.
    pub fn is_other(&self) -> bool {
        self.0 == OTHER_GROUP
    }

    /// Whether this is the key of a global list (`""`).
    pub fn is_global(&self) -> bool {
        self.0.is_empty()
    }

    /// The (dim, value) pairs of a canonical key, values decoded; `None` for `(other)`, an
    /// error for text that is not a canonical key.
    pub fn parse(text: &str) -> Result<Option<Vec<(String, String)>>, String> {
        if text == OTHER_GROUP {
            return Ok(None);
        }
        if text.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let mut pairs = Vec::new();
        for part in text.split('&') {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("group key part {part:?} is not dim=value"))?;
            check_dim_name(name)?;
            pairs.push((name.to_string(), decode_value(value)?));
        }
        let canonical = GroupKey::from_pairs(pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        if canonical.0 != text {
            return Err(format!(
                "group key {text:?} is not canonical (expected {:?})",
                canonical.0
            ));
        }
        Ok(Some(pairs))
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The read API's query parameters (`/v1/top`, `/v1/groups`): a dim of one of these names could
/// not be selected by `dim=value`, so `by` refuses them ([`check_by_dim`]).
pub const RESERVED_DIM_NAMES: [&str; 5] = ["window", "k", "date", "at", "group"];

/// A dim name a window may group by: a valid dim name ([`check_dim_name`]) that is not one of
/// the read API's query parameters ([`RESERVED_DIM_NAMES`]).
pub fn check_by_dim(name: &str) -> Result<(), String> {
    check_dim_name(name)?;
    if RESERVED_DIM_NAMES.contains(&name) {
        return Err(format!(
            "dim name {name:?} is a query parameter of the read API ({}); name the dim otherwise \
             (map it under another name in [source.format] dims)",
            RESERVED_DIM_NAMES.join(", ")
        ));
    }
    Ok(())
}

/// The longest dim name.
pub const MAX_DIM_NAME: usize = 64;

/// A dim name usable in `by` and in group keys: 1–64 of `A-Z a-z 0-9 - . _ ~`.
pub fn check_dim_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_DIM_NAME || !name.bytes().all(unreserved) {
        return Err(format!(
            "dim name {name:?} must be 1-64 characters of A-Z a-z 0-9 - . _ ~"
        ));
    }
    Ok(())
}

/// Whether a dim value is written in a group key as it is (no byte of it needs an escape).
#[inline(always)]
pub fn needs_no_escape(value: &str) -> bool {
    value.bytes().all(unreserved)
}

fn unreserved(b: u8) -> bool {
    UNRESERVED[usize::from(b)]
}

/// Per byte, whether it is one of `A-Z a-z 0-9 - . _ ~` (a look-up per byte of every event's
/// dim values, where the test by ranges took several compares).
static UNRESERVED: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~');
        b += 1;
    }
    t
};

/// Appends `value` percent-encoded (everything but `A-Z a-z 0-9 - . _ ~`).
#[inline(always)]
pub fn encode_value(value: &str, out: &mut String) {
    // most values need no escape: one copy instead of a push per byte (per event, per dim),
    // in line (the call's set-up was a third of it)
    if needs_no_escape(value) {
        crate::short_copy::push_str(out, value);
    } else {
        encode_escaped(value, out);
    }
}

/// [`encode_value`] of a value with a byte to escape.
#[inline(never)]
fn encode_escaped(value: &str, out: &mut String) {
    for b in value.bytes() {
        if unreserved(b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
        }
    }
}

fn decode_value(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = value
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad percent-escape in group value {value:?}"))?;
                out.push(hex);
                i += 3;
            }
            b if unreserved(b) => {
                out.push(b);
                i += 1;
            }
            _ => return Err(format!("group value {value:?} is not percent-encoded")),
        }
    }
    String::from_utf8(out).map_err(|_| format!("group value {value:?} is not UTF-8 once decoded"))
}

/// What a window counts per event: bare item ids (a global window counting events), or
/// counter keys naming its group and, for `distinct_users`, the user.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyShape {
    /// The `by` dims, sorted (empty: a global list).
    pub by: Vec<String>,
    /// Whether an item's count is its number of distinct users.
    pub distinct_users: bool,
    /// Most groups per instance; events of further groups count in `(other)`.
    pub max_groups: u32,
}

/// The default `max_groups`.
pub const DEFAULT_MAX_GROUPS: u32 = 10_000;

impl Default for KeyShape {
    /// A global window counting events.
    fn default() -> KeyShape {
        KeyShape {
            by: Vec::new(),
            distinct_users: false,
            max_groups: DEFAULT_MAX_GROUPS,
        }
    }
}

impl KeyShape {
    /// Whether keys are bare item ids (a global window counting events).
    pub fn is_plain(&self) -> bool {
        self.by.is_empty() && !self.distinct_users
    }
}

/// Writes the counter key of (`group`, `item`, `user`) into `out` (cleared first).
pub fn compose_key(group: &str, item: &str, user: Option<&str>, out: &mut String) {
    out.clear();
    out.push_str(group);
    out.push('\0');
    out.push_str(item);
    if let Some(user) = user {
        out.push('\0');
        out.push_str(user);
    }
}

/// The parts of a counter key: (group, item, user).
pub fn split_key(key: &str) -> (&str, &str, Option<&str>) {
    // (a byte search: `str::split_once` on a char costs more than the rest of a look-up; NUL is
    // ASCII, so every cut is on a char boundary; eight bytes a step: a byte at a time, it was
    // most of this function, run on every key of every emission)
    let nul = |s: &str| crate::swar::nul_at(s.as_bytes());
    let Some(g) = nul(key) else {
        return ("", key, None);
    };
    let (group, rest) = (&key[..g], &key[g + 1..]);
    match nul(rest) {
        Some(i) => (group, &rest[..i], Some(&rest[i + 1..])),
        None => (group, rest, None),
    }
}

/// The group of a counter key (`""` for a bare id): [`split_key`]'s first part, found alone.
#[inline]
pub fn group_of_key(key: &str) -> &str {
    match crate::swar::nul_at(key.as_bytes()) {
        Some(g) => &key[..g],
        None => "",
    }
}

/// The rules of a counter key (or bare id) read back from a snapshot: a canonical group key,
/// an item id and a user by the item-id rules.
pub fn check_counter_key(key: &str) -> Result<(), String> {
    if !key.contains('\0') {
        return crate::event::check_item_id(key).map_err(|e| e.to_string());
    }
    let (group, item, user) = split_key(key);
    match GroupKey::parse(group)? {
        Some(_) => {}
        None => return Err("the (other) group is not a counter key".to_string()),
    }
    crate::event::check_item_id(item).map_err(|e| e.to_string())?;
    if let Some(user) = user {
        crate::event::check_item_id(user).map_err(|e| format!("user: {e}"))?;
    }
    Ok(())
}

/// The routing hash of a counter key (or bare id): its item id's pinned hash.
///
/// # Examples
///
/// Every key of an item routes with the item, whatever its group and user:
///
/// ```
/// use hotlist_operators::group::{compose_key, route_hash};
/// use hotlist_operators::hash::item_hash;
///
/// let mut key = String::new();
/// compose_key("country=US", "video-1", Some("user-9"), &mut key);
/// assert_eq!(key, "country=US\0video-1\0user-9");
/// assert_eq!(route_hash(&key), item_hash("video-1"));
/// assert_eq!(route_hash("video-1"), item_hash("video-1"));
/// ```
pub fn route_hash(key: &str) -> u64 {
    item_hash(split_key(key).1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_are_canonical_and_encoded() {
        let k = GroupKey::from_pairs([("device", "mobile"), ("country", "US")]);
        assert_eq!(k.as_str(), "country=US&device=mobile");
        let k = GroupKey::from_pairs([("city", "São Paulo&x=1"), ("c", "")]);
        assert_eq!(k.as_str(), "c=&city=S%C3%A3o%20Paulo%26x%3D1");
        assert_eq!(
            GroupKey::parse(k.as_str()).unwrap(),
            Some(vec![
                ("c".to_string(), String::new()),
                ("city".to_string(), "São Paulo&x=1".to_string())
            ])
        );
        assert!(GroupKey::global().is_global());
        assert_eq!(GroupKey::parse("(other)").unwrap(), None);
        for bad in ["country", "b=1&a=2", "a=%zz", "a=x y", "a=%FF", "a b=1"] {
            assert!(GroupKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counter_keys_split_back() {
        let g = GroupKey::from_pairs([("country", "US")]);
        let mut key = String::new();
        compose_key(g.as_str(), "video-1", Some("u7"), &mut key);
        assert_eq!(split_key(&key), ("country=US", "video-1", Some("u7")));
        compose_key(g.as_str(), "video-1", None, &mut key);
        assert_eq!(split_key(&key), ("country=US", "video-1", None));
        assert_eq!(route_hash(&key), item_hash("video-1"));
        assert_eq!(split_key("plain"), ("", "plain", None));
        for key in ["plain", "country=US\0video-1", "country=US\0video-1\0u7", "\0x\0"] {
            assert_eq!(group_of_key(key), split_key(key).0, "{key:?}");
        }
        compose_key("", "x", Some(""), &mut key);
        assert_eq!(split_key(&key), ("", "x", Some("")));
    }

    proptest! {
        /// Any values survive encoding; the key is made of the safe characters only.
        #[test]
        fn values_round_trip(a in ".{0,12}", b in ".{0,12}") {
            let k = GroupKey::from_pairs([("b", b.as_str()), ("a", a.as_str())]);
            prop_assert!(k.as_str().bytes().all(|c| unreserved(c) || matches!(c, b'=' | b'&' | b'%')));
            prop_assert_eq!(GroupKey::parse(k.as_str()).unwrap(), Some(vec![("a".to_string(), a), ("b".to_string(), b)]));
        }
    }
}

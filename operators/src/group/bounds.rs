//! How long dim values and group keys may be: checked at the source, so that no accepted
//! event can make a store refuse a commit.
//!
//! A group key is stored in the list tables' primary keys (`topk`, `topk_instances`), and
//! PostgreSQL refuses a B-tree index row over ~2.7 KB: one event with a long dim value used to
//! make every commit of its epoch fail, on every restart. A dim value longer than
//! `max_dim_bytes`, or a value that makes some window's group key (percent-encoded, so up to 3×
//! longer) longer than `max_group_key_bytes`, is a bad record whose detail names the dim. The
//! number of dims is bounded by the configuration (`by` names at most 8 per window).

use super::{unreserved, MAX_DIM_NAME};
use crate::event::BadRecord;

/// The default longest dim value, in bytes of UTF-8 (like an item id).
pub const DEFAULT_MAX_DIM_BYTES: usize = 256;
/// The default longest group key, in bytes (percent-encoded).
pub const DEFAULT_MAX_GROUP_KEY_BYTES: usize = 1024;
/// The largest either bound may be set to: with `job.id` and a window name (128 bytes each), a
/// time and a rank, a `topk` index row stays under 2,400 bytes, well below PostgreSQL's 2,704.
pub const GROUP_KEY_LIMIT: usize = 2048;

/// One window with `by`: its name, its dims (indices into the format's dims) and the bytes of
/// its key that do not depend on the values (`name=` per dim, `&` between them).
#[derive(Clone, Debug, PartialEq, Eq)]
struct KeyShapeBound {
    window: String,
    dims: Vec<usize>,
    fixed: usize,
}

/// The bounds of the dims a format reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimBounds {
    /// The longest dim value, in bytes.
    pub max_dim_bytes: usize,
    /// The longest group key, in bytes.
    pub max_group_key_bytes: usize,
    /// The dims' names, in the format's order.
    names: Vec<String>,
    windows: Vec<KeyShapeBound>,
    /// The most bytes of a window's key that do not depend on the values.
    most_fixed: usize,
}

impl Default for DimBounds {
    fn default() -> DimBounds {
        DimBounds {
            max_dim_bytes: DEFAULT_MAX_DIM_BYTES,
            max_group_key_bytes: DEFAULT_MAX_GROUP_KEY_BYTES,
            names: Vec::new(),
            windows: Vec::new(),
            most_fixed: 0,
        }
    }
}

impl DimBounds {
    /// The bounds for a format reading `names` (in its order), for windows given as (name, `by`
    /// dims); a `by` dim missing from `names` is ignored (the format reads every `by` dim).
    pub fn new<'a>(
        max_dim_bytes: usize,
        max_group_key_bytes: usize,
        names: &[String],
        windows: impl IntoIterator<Item = (&'a str, &'a [String])>,
    ) -> DimBounds {
        let windows = windows
            .into_iter()
            .filter(|(_, by)| !by.is_empty())
            .map(|(window, by)| KeyShapeBound {
                window: window.to_string(),
                dims: by.iter().filter_map(|d| names.iter().position(|n| n == d)).collect(),
                fixed: by.iter().map(|d| d.len() + 1).sum::<usize>() + by.len() - 1,
            })
            .collect::<Vec<KeyShapeBound>>();
        DimBounds {
            max_dim_bytes,
            max_group_key_bytes,
            names: names.to_vec(),
            most_fixed: windows.iter().map(|w| w.fixed).max().unwrap_or(0),
            windows,
        }
    }

    /// Checks the dim values of one record (in the format's order).
    #[inline(always)]
    pub fn check<V: AsRef<str>>(&self, values: &[V]) -> Result<(), BadRecord> {
        // The usual record passes on one sum: values no longer together than any value may be
        // and short enough that every key fits at 3 bytes a byte cannot reach either bound.
        // (Checked per value and per window, this was 84 instructions of every event of a
        // per-group job, `cachegrind`.)
        if let Some(room) = self.max_group_key_bytes.checked_sub(self.most_fixed) {
            let total: usize = values.iter().map(|v| v.as_ref().len()).sum();
            if total <= self.max_dim_bytes.min(room / 3) {
                return Ok(());
            }
        }
        self.check_each(values)
    }

    /// [`DimBounds::check`] value by value and window by window.
    #[inline(never)]
    fn check_each<V: AsRef<str>>(&self, values: &[V]) -> Result<(), BadRecord> {
        for (name, value) in self.names.iter().zip(values) {
            let value = value.as_ref();
            if value.len() > self.max_dim_bytes {
                return Err(BadRecord::DimTooLong {
                    dim: name.clone(),
                    len: value.len(),
                    max: self.max_dim_bytes,
                });
            }
        }
        for w in &self.windows {
            // a byte encodes to at most 3: measured only when that bound does not fit (most
            // events' values are a few plain bytes, far below it)
            let raw: usize = w
                .dims
                .iter()
                .map(|&i| values.get(i).map_or(0, |v| v.as_ref().len()))
                .sum();
            if w.fixed.saturating_add(raw.saturating_mul(3)) <= self.max_group_key_bytes {
                continue;
            }
            let encoded = |i: usize| values.get(i).map_or(0, |v| encoded_len(v.as_ref()));
            let len = w.fixed + w.dims.iter().map(|&i| encoded(i)).sum::<usize>();
            if len > self.max_group_key_bytes {
                let longest = w
                    .dims
                    .iter()
                    .copied()
                    .max_by_key(|&i| (encoded(i), std::cmp::Reverse(i)));
                let dim = longest.map_or("", |i| self.names[i].as_str());
                return Err(BadRecord::GroupKeyTooLong {
                    window: w.window.clone(),
                    len,
                    max: self.max_group_key_bytes,
                    dim: dim.to_string(),
                });
            }
        }
        Ok(())
    }
}

/// The length of `value` percent-encoded (see `encode_value`).
pub fn encoded_len(value: &str) -> usize {
    value.bytes().map(|b| if unreserved(b) { 1 } else { 3 }).sum()
}

/// The longest group key a window of `by` dims with names of at most [`MAX_DIM_NAME`] bytes
/// can have when every value is at most `max_dim_bytes` (for the docs' bound table).
pub fn longest_key(by_dims: usize, max_dim_bytes: usize) -> usize {
    by_dims * (MAX_DIM_NAME + 1 + 3 * max_dim_bytes) + by_dims.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::GroupKey;

    fn bounds(dim: usize, key: usize) -> DimBounds {
        let names = vec!["city".to_string(), "country".to_string()];
        let by = ["city".to_string(), "country".to_string()];
        let only = ["country".to_string()];
        DimBounds::new(
            dim,
            key,
            &names,
            [("by2", &by[..]), ("by1", &only[..]), ("all", &[][..])],
        )
    }

    fn check(b: &DimBounds, city: &str, country: &str) -> Result<(), BadRecord> {
        b.check(&[city, country])
    }

    /// A value of exactly the bound passes, one byte more is bad naming the dim; the group key
    /// is measured as stored (percent-encoded), and its detail names the window and the dim
    /// that weighs most.
    #[test]
    fn values_and_keys_are_bounded() {
        let b = bounds(10, 1000);
        assert_eq!(check(&b, &"x".repeat(10), "US"), Ok(()));
        let err = check(&b, "x", &"y".repeat(11)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "dims.country is 11 bytes long (at most 10, source.format.max_dim_bytes)"
        );
        // measured exactly as `GroupKey::from_pairs` writes it
        let b = bounds(100, 0);
        let city = "é ü ö".to_string();
        let key = GroupKey::from_pairs([("city", city.as_str()), ("country", "US")]);
        assert_eq!(key.as_str().len(), 5 + encoded_len(&city) + 9 + 2);
        assert_eq!(encoded_len(&city), 3 * city.len());
        let b = DimBounds {
            max_group_key_bytes: key.as_str().len(),
            ..b
        };
        assert_eq!(check(&b, &city, "US"), Ok(()));
        let err = check(&b, &city, "USA").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "group key of window \"by2\" would be {} bytes (at most {}, source.format.max_group_key_bytes); \
                 its longest dim is city",
                key.as_str().len() + 1,
                key.as_str().len()
            )
        );
    }

    /// The largest key a configuration admits fits the limit the docs give.
    #[test]
    fn the_longest_key_of_a_config() {
        assert_eq!(longest_key(1, 256), 64 + 1 + 768);
        assert_eq!(longest_key(8, 256), 8 * 833 + 7);
        assert_eq!(longest_key(0, 256), 0);
    }

    proptest::proptest! {
        /// The verdict is the brute-force one (every value within its bound, every window's
        /// key as stored within the key bound), also where the quick test by 3 bytes a byte
        /// does not decide: bounds round the keys' lengths, values with bytes to escape.
        #[test]
        fn the_verdict_is_the_stored_keys(
            city in "[a-zA-Z0-9 é%&_.~-]{0,12}",
            country in "[a-zA-Z0-9 ü/=-]{0,12}",
            dim in 0usize..14,
            key in 0usize..60,
        ) {
            let b = bounds(dim, key);
            let stored = |pairs: &[(&str, &str)]| GroupKey::from_pairs(pairs.iter().copied()).as_str().len();
            let want = city.len() <= dim
                && country.len() <= dim
                && stored(&[("city", &city), ("country", &country)]) <= key
                && stored(&[("country", &country)]) <= key;
            proptest::prop_assert_eq!(check(&b, &city, &country).is_ok(), want);
        }
    }
}

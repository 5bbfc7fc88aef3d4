//! What every store checks in a hot-key window it reads back (the `hot_keys` rows under their
//! `hot_key_windows` header, or the Redis hash): the key count bounded by [`MAX_HOT_KEYS`] before
//! anything is read by it, the rows agreeing with the header, every rate a finite number ≥ 0,
//! every state `hot` or `cooling`, every id a valid one and listed once. The keys are handed out
//! in report order (rate descending, then id ascending, bytewise), whatever order a store read
//! them in.

use hotlist_operators::event::MAX_ITEM_ID_BYTES;
use hotlist_operators::hot_keys::{HotKey, HotState, HotWindow};
use hotlist_operators::record::ItemId;
use hotlist_operators::sketch::MAX_CANDIDATES;
use hotlist_operators::time::Millis;
use std::collections::BTreeSet;

/// The most keys one window reports: its candidates and the keys of the window before it.
pub const MAX_HOT_KEYS: usize = 2 * MAX_CANDIDATES;

/// A hot-key window's header as read.
pub(crate) struct RawHotHeader {
    /// Window start.
    pub start: Millis,
    /// Window end (exclusive).
    pub end: Millis,
    /// The global watermark it closed at.
    pub watermark: Millis,
    /// Report time.
    pub as_of: Millis,
    /// How many keys it reported.
    pub key_count: i64,
}

/// Which window a message is about.
fn at(job: &str, start: Millis) -> String {
    format!("job {job:?} hot-key window {start}")
}

/// Checks a header; returns its key count (at most [`MAX_HOT_KEYS`]): a reader reads at most
/// one row more than that.
pub(crate) fn hot_header(job: &str, h: &RawHotHeader) -> Result<usize, String> {
    let here = at(job, h.start);
    let count = usize::try_from(h.key_count)
        .ok()
        .filter(|c| *c <= MAX_HOT_KEYS)
        .ok_or_else(|| {
            format!(
                "{here}: key_count {} is out of range (0 to {MAX_HOT_KEYS})",
                h.key_count
            )
        })?;
    if h.end <= h.start {
        return Err(format!("{here}: end {} ms is not after its start", h.end.0));
    }
    if h.watermark > Millis::MAX_EVENT && h.watermark != Millis::MAX {
        return Err(format!("{here}: watermark {} ms is past year 9999", h.watermark.0));
    }
    Ok(count)
}

/// Checks a window's keys as read (`(item_id, rate, state)`, any order) against its checked
/// header, and returns the window with its keys in report order.
pub(crate) fn hot_window(
    job: &str,
    h: &RawHotHeader,
    key_count: usize,
    rows: Vec<(String, f64, String)>,
) -> Result<HotWindow, String> {
    let here = at(job, h.start);
    if rows.len() != key_count {
        return Err(format!("{here}: {} key rows, the header says {key_count}", rows.len()));
    }
    let mut seen = BTreeSet::new();
    let mut keys = Vec::with_capacity(rows.len());
    for (id, rate, state) in rows {
        if id.is_empty() || id.len() > MAX_ITEM_ID_BYTES {
            return Err(format!(
                "{here}: an item id of {} bytes (1 to {MAX_ITEM_ID_BYTES})",
                id.len()
            ));
        }
        if !(rate.is_finite() && rate >= 0.0) {
            return Err(format!("{here}: key {id:?} has rate {rate}, not a finite number ≥ 0"));
        }
        let state = HotState::parse(&state).ok_or_else(|| format!("{here}: key {id:?} has state {state:?}"))?;
        if !seen.insert(id.clone()) {
            return Err(format!("{here}: key {id:?} is listed twice"));
        }
        keys.push(HotKey {
            item_id: ItemId::from(id),
            rate,
            state,
        });
    }
    keys.sort_by(|a, b| b.rate.total_cmp(&a.rate).then_with(|| a.item_id.cmp(&b.item_id)));
    Ok(HotWindow {
        start: h.start,
        end: h.end,
        watermark: h.watermark,
        as_of: h.as_of,
        keys,
    })
}

/// Checks a window the job hands a store as every reader will (so what a store accepts reads
/// back): the header and its keys.
pub(crate) fn hot_window_to_write(job: &str, w: &HotWindow) -> Result<(), String> {
    let h = RawHotHeader {
        start: w.start,
        end: w.end,
        watermark: w.watermark,
        as_of: w.as_of,
        key_count: i64::try_from(w.keys.len()).unwrap_or(i64::MAX),
    };
    let count = hot_header(job, &h)?;
    let rows = w
        .keys
        .iter()
        .map(|k| (k.item_id.to_string(), k.rate, k.state.as_str().to_string()))
        .collect();
    hot_window(job, &h, count, rows).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(n: i64) -> RawHotHeader {
        RawHotHeader {
            start: Millis(0),
            end: Millis(10_000),
            watermark: Millis(70_000),
            as_of: Millis(1),
            key_count: n,
        }
    }

    #[test]
    fn damage_is_named() {
        let e = hot_header("j", &header(-1)).unwrap_err();
        assert!(e.contains("key_count -1 is out of range"), "{e}");
        let e = hot_header(
            "j",
            &RawHotHeader {
                end: Millis(0),
                ..header(0)
            },
        )
        .unwrap_err();
        assert!(e.contains("is not after its start"), "{e}");
        let row = |id: &str, rate: f64, state: &str| (id.to_string(), rate, state.to_string());
        let cases = [
            (vec![row("a", 1.0, "hot")], 2, "1 key rows, the header says 2"),
            (vec![row("a", f64::NAN, "hot")], 1, "rate NaN"),
            (vec![row("a", -1.0, "hot")], 1, "rate -1"),
            (vec![row("a", 1.0, "warm")], 1, "state \"warm\""),
            (vec![row("a", 1.0, "hot"), row("a", 2.0, "hot")], 2, "listed twice"),
            (vec![row("", 1.0, "hot")], 1, "an item id of 0 bytes"),
        ];
        for (rows, n, want) in cases {
            let e = hot_window("j", &header(n as i64), n, rows).unwrap_err();
            assert!(
                e.starts_with("job \"j\" hot-key window 1970-01-01T00:00:00.000Z: ") && e.contains(want),
                "{e}"
            );
        }
    }

    #[test]
    fn keys_come_out_in_report_order() {
        let rows = vec![
            ("b".to_string(), 5.0, "cooling".to_string()),
            ("c".to_string(), 9.0, "hot".to_string()),
            ("a".to_string(), 5.0, "cooling".to_string()),
        ];
        let w = hot_window("j", &header(3), 3, rows).expect("valid");
        let ids: Vec<&str> = w.keys.iter().map(|k| k.item_id.as_str()).collect();
        assert_eq!(ids, ["c", "a", "b"]);
    }
}

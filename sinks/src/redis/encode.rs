//! What Redis is handed and hands back beyond plain numbers: the windows document (JSON, with
//! serde), and the limits of sorted sets (scores are doubles, members are unique).

use super::keys::check_key_part;
use super::MAX_EXACT_COUNT;
use crate::error::SinkError;
use crate::types::StoredWindow;
use hotlist_operators::message::PublishedList;
use hotlist_operators::time::Span;
use hotlist_operators::trend::MAX_BASELINE;
use hotlist_operators::window::WindowSpec;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// One window of the `{prefix}:{job}:windows` document, a JSON array of these in configured
/// order: `{"name":"1m","size_ms":60000,"slide_ms":30000,"k":3}`. Unknown fields are ignored
/// when reading (a later version may add some); a field given twice is an error.
#[derive(Serialize, Deserialize)]
struct WindowDoc {
    name: String,
    size_ms: u64,
    slide_ms: u64,
    k: usize,
    /// The `by` dims (left out for a window without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    by: Vec<String>,
}

/// The `windows` document for `windows`.
pub(super) fn windows_json(windows: &[WindowSpec]) -> String {
    let docs: Vec<WindowDoc> = windows
        .iter()
        .map(|w| WindowDoc {
            name: w.name.clone(),
            size_ms: w.size.as_millis(),
            slide_ms: w.slide.as_millis(),
            k: w.k,
            by: w.key.by.clone(),
        })
        .collect();
    // Strings and integers only: serializing them cannot fail.
    serde_json::to_string(&docs).expect("the windows document serializes")
}

/// Parses a `windows` document; `Err` says what is wrong with it.
pub(super) fn parse_windows(text: &str) -> Result<Vec<StoredWindow>, String> {
    let docs: Vec<WindowDoc> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    docs.into_iter()
        .map(|d| {
            let ms = |v: u64, what: &str| match i64::try_from(v) {
                Ok(_) => Ok(Span::from_millis(v)),
                Err(_) => Err(format!("window {:?}: {what} {v} is too large", d.name)),
            };
            Ok(StoredWindow {
                size: ms(d.size_ms, "size_ms")?,
                slide: ms(d.slide_ms, "slide_ms")?,
                k: d.k,
                by: d.by,
                name: d.name,
            })
        })
        .collect()
}

/// Checks what `check_batch` does not: names fit the key layout, counts are exact as scores, a
/// list holds no item twice (a sorted set would merge them), and a list is all of one kind (a
/// trend list's every item with a history of 1 to `MAX_BASELINE` counts, as a reader checks
/// it, or no item with one: the meta hash says which kind the whole list is).
pub(super) fn check_list(job: &str, l: &PublishedList) -> Result<(), SinkError> {
    check_key_part(job, "window name", &l.window)?;
    check_key_part(job, "group", l.group.as_str())?;
    let trend = l.items.first().is_some_and(|i| i.trend.is_some());
    let mut seen = HashSet::with_capacity(l.items.len());
    for item in &l.items {
        if item.trend.is_some() != trend {
            return Err(SinkError::invalid(
                job,
                format!(
                    "list {:?}@{}: item {:?} is not the same kind (trend or count) as the first",
                    l.window, l.start.0, item.item_id
                ),
            ));
        }
        if let Some(t) = &item.trend {
            if !(1..=MAX_BASELINE as usize).contains(&t.history.len()) {
                return Err(SinkError::invalid(
                    job,
                    format!(
                        "list {:?}@{}: item {:?} has a history of {} counts (1 to {MAX_BASELINE})",
                        l.window,
                        l.start.0,
                        item.item_id,
                        t.history.len()
                    ),
                ));
            }
        }
        if item.count > MAX_EXACT_COUNT {
            return Err(SinkError::invalid(
                job,
                format!(
                    "list {:?}@{}: count {} of {:?} exceeds 2^53, which Redis scores cannot hold exactly",
                    l.window, l.start.0, item.count, item.item_id
                ),
            ));
        }
        if !seen.insert(item.item_id.as_str()) {
            return Err(SinkError::invalid(
                job,
                format!(
                    "list {:?}@{}: item {:?} appears twice",
                    l.window, l.start.0, item.item_id
                ),
            ));
        }
    }
    Ok(())
}

//! The detector's state: one count-min sketch with candidates per open window, the keys the
//! last closed window reported (for hysteresis), and how far windows are closed.

use super::{classify, HotKeySpec, HotWindow};
use crate::hash::item_hash;
use crate::record::ItemId;
use crate::sketch::{CmsShape, CountMinTopK, CountMinTopKSnapshot};
use crate::snapshot::{Snapshot, SnapshotError};
use crate::time::{Millis, Span};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What became of an event offered to the detector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Added {
    /// Counted in its window.
    Counted,
    /// Its partition's watermark had passed its window's end + allowed lateness: not counted.
    Late,
    /// Its window was closed already (its partition had been idle): not counted.
    Closed,
}

/// The sampled hot-key detector (see the module doc of `hot_keys`).
pub struct HotKeyDetector {
    spec: HotKeySpec,
    allowed_lateness: Span,
    /// An empty sketch of the spec's shape: every new window starts as a copy.
    blank: CountMinTopK,
    /// Open windows by start.
    open: BTreeMap<Millis, CountMinTopK>,
    /// Every window ending at or before this is closed (reported, or never seen).
    closed_until: Millis,
    /// The end of the last reported window and the keys it reported.
    previous: Option<(Millis, BTreeSet<ItemId>)>,
}

impl HotKeyDetector {
    /// A detector for `spec` (checked here) with the job's allowed lateness.
    pub fn new(spec: HotKeySpec, allowed_lateness: Span) -> Result<HotKeyDetector, String> {
        spec.validate()?;
        let blank = CountMinTopK::new(spec.shape, spec.candidates).map_err(|e| format!("hot_keys: {e}"))?;
        Ok(HotKeyDetector {
            spec,
            allowed_lateness,
            blank,
            open: BTreeMap::new(),
            closed_until: Millis::MIN,
            previous: None,
        })
    }

    /// The spec.
    pub fn spec(&self) -> &HotKeySpec {
        &self.spec
    }

    /// Offers a sampled event (`hash` = `item_hash(item)`; `wm_before` its partition's
    /// watermark before it, as the source stamped it).
    pub fn add(&mut self, item: &str, hash: u64, ts: Millis, wm_before: Millis) -> Added {
        let start = self.spec.window_start(ts);
        let end = start.plus(self.spec.window);
        if end <= wm_before.minus(self.allowed_lateness) {
            return Added::Late;
        }
        if end <= self.closed_until {
            return Added::Closed;
        }
        let sketch = self.open.entry(start).or_insert_with(|| self.blank.clone());
        use crate::sketch::TopKSketch;
        sketch.add(item, hash, 1);
        Added::Counted
    }

    /// Closes, in order, every open window whose end + allowed lateness the global watermark
    /// `wm` has reached, and returns their reports (`as_of`: the wall clock now).
    pub fn advance(&mut self, wm: Millis, as_of: Millis) -> Vec<HotWindow> {
        let horizon = wm.minus(self.allowed_lateness);
        let mut reports = Vec::new();
        while let Some(entry) = self.open.first_entry() {
            let start = *entry.key();
            let end = start.plus(self.spec.window);
            if end > horizon {
                break;
            }
            let sketch = entry.remove();
            reports.push(self.close(start, end, &sketch, wm, as_of));
        }
        // windows that saw no event are closed all the same: a later event there is dropped
        self.closed_until = self.closed_until.max(self.spec.window_start(horizon));
        reports
    }

    /// The report of one window: candidates and previously reported keys, rated from the
    /// sketch's cells (independent of event order), classified with hysteresis.
    fn close(&mut self, start: Millis, end: Millis, sketch: &CountMinTopK, wm: Millis, as_of: Millis) -> HotWindow {
        let previous = match self.previous.take() {
            Some((prev_end, keys)) if prev_end == start => keys,
            _ => BTreeSet::new(), // the window before had no event: nothing was reported there
        };
        let ids: BTreeSet<ItemId> = sketch
            .candidates()
            .iter()
            .map(|(id, _, _)| ItemId::from(id))
            .chain(previous.iter().cloned())
            .collect();
        let rates = ids.into_iter().map(|id| {
            let rate = self.spec.rate(sketch.sketch().estimate(item_hash(&id)));
            (id, rate)
        });
        let keys = classify(rates, &previous, self.spec.threshold, self.spec.hysteresis);
        self.previous = Some((end, keys.iter().map(|k| k.item_id.clone()).collect()));
        HotWindow {
            start,
            end,
            watermark: wm,
            as_of,
            keys,
        }
    }

    /// Open windows.
    pub fn open_windows(&self) -> usize {
        self.open.len()
    }

    /// Heap bytes of the open windows' sketches.
    pub fn heap_bytes(&self) -> usize {
        use crate::sketch::TopKSketch;
        self.open.values().map(TopKSketch::heap_bytes).sum()
    }

    /// The state, as plain data.
    pub fn snapshot(&self) -> HotKeysSnapshot {
        HotKeysSnapshot {
            sample: self.spec.sample,
            window: self.spec.window,
            shape: self.spec.shape,
            candidates: self.spec.candidates as u32, // ≤ MAX_CANDIDATES
            closed_until: self.closed_until,
            previous: self
                .previous
                .as_ref()
                .map(|(end, keys)| (*end, keys.iter().cloned().collect())),
            windows: self.open.iter().map(|(s, k)| (*s, k.snapshot())).collect(),
        }
    }

    /// A detector for `spec` restored from `s`, validated first: taken with another sample,
    /// window or sketch size is `Incompatible` (the settings changed), damage is `Invalid`.
    pub fn restore(
        spec: HotKeySpec,
        allowed_lateness: Span,
        s: &HotKeysSnapshot,
    ) -> Result<HotKeyDetector, SnapshotError> {
        s.validate(&spec)?;
        let mut d = HotKeyDetector::new(spec, allowed_lateness).map_err(SnapshotError::Invalid)?;
        for (start, w) in &s.windows {
            d.open
                .insert(*start, CountMinTopK::restore(w, spec.shape, spec.candidates)?);
        }
        d.closed_until = s.closed_until;
        d.previous = s
            .previous
            .as_ref()
            .map(|(end, keys)| (*end, keys.iter().cloned().collect()));
        Ok(d)
    }
}

/// A [`HotKeyDetector`]'s state (`hotkeys.snap` in a checkpoint).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HotKeysSnapshot {
    /// The spec's sample.
    pub sample: u32,
    /// The spec's window.
    pub window: Span,
    /// The spec's sketch shape.
    pub shape: CmsShape,
    /// The spec's candidates.
    pub candidates: u32,
    /// Every window ending at or before this is closed.
    pub closed_until: Millis,
    /// The end of the last reported window and its keys (ascending).
    pub previous: Option<(Millis, Vec<ItemId>)>,
    /// Open windows by start (ascending), with their sketches.
    pub windows: Vec<(Millis, CountMinTopKSnapshot)>,
}

impl Snapshot for HotKeysSnapshot {}

impl HotKeysSnapshot {
    /// Checks the snapshot against `spec` (see [`HotKeyDetector::restore`]).
    pub fn validate(&self, spec: &HotKeySpec) -> Result<(), SnapshotError> {
        let same = self.sample == spec.sample
            && self.window == spec.window
            && self.shape == spec.shape
            && self.candidates as usize == spec.candidates;
        if !same {
            return Err(SnapshotError::Incompatible);
        }
        let invalid = |p: String| SnapshotError::Invalid(format!("hot keys: {p}"));
        let mut last: Option<Millis> = None;
        for (start, _) in &self.windows {
            if spec.window_start(*start) != *start {
                return Err(invalid(format!(
                    "window start {start} is not aligned to {}",
                    spec.window
                )));
            }
            if last.is_some_and(|l| l >= *start) || start.plus(spec.window) <= self.closed_until {
                return Err(invalid(format!("window {start} is out of order or already closed")));
            }
            last = Some(*start);
        }
        if let Some((end, keys)) = &self.previous {
            if *end > self.closed_until || keys.windows(2).any(|w| w[0] >= w[1]) {
                return Err(invalid(format!("the keys reported at {end} are out of order")));
            }
        }
        Ok(())
    }
}

//! Looking up a run of events' counter keys before counting them.
//!
//! Counting one event at a time waits for each cache miss in turn: the interner's table slot,
//! then the key's record. Looked up together, a run's misses are independent: its keys' table
//! slots are prefetched, then their records (`Interner::find_many`), so a
//! run waits for a few rounds of misses instead of a few per event, and the counting that
//! follows finds everything in cache. (A job without per-group or distinct-user windows looks
//! up its runs' bare ids the same way, without this struct.) An index found stays valid while
//! the run is counted: a record in the table is referenced by a counter, and counting an
//! event drops no reference (only a key it interned and did not count is forgotten).

use super::shapes::Shapes;
use crate::interner::{probe_hash, Interner, ItemIdx};
use crate::record::TimedEvent;
use crate::short_copy::push_str;

/// Events looked up together before they are counted: enough for their misses to overlap,
/// few enough for what they bring into cache to stay there.
pub(super) const RUN: usize = 16;

/// One event's key of one shape, looked up.
#[derive(Clone, Copy, Debug)]
pub(super) enum Looked {
    /// No counted window has the shape.
    Uncounted,
    /// The shape counts distinct users and the event has none.
    NoUser,
    /// The event's bare item id (shape 0): its index if interned.
    Item(Option<ItemIdx>),
    /// A counter key, `text[start..end]` of the run, with its table hash and its index if
    /// interned.
    Key {
        start: u32,
        end: u32,
        probe: u64,
        found: Option<ItemIdx>,
    },
}

/// The keys of a run of events, one per event and shape.
#[derive(Default)]
pub(super) struct Lookahead {
    looked: Vec<Looked>,
    /// The run's keys to find (items and counter keys), end to end.
    text: String,
    /// The keys to find: each one's `looked` entry, its text in `text` and its table hash.
    wanted: Vec<Wanted>,
    found: Vec<Option<ItemIdx>>,
}

/// A key to find: `text[start..end]` of the run, with its table hash, for `looked[at]`.
#[derive(Clone, Copy)]
struct Wanted {
    at: u32,
    start: u32,
    end: u32,
    probe: u64,
}

impl Lookahead {
    /// Looks up the keys of `events` under every shape (`counted[s]`: whether a counted
    /// window has shape `s`), replacing the previous run's.
    pub(super) fn look(&mut self, events: &[TimedEvent], shapes: &Shapes, counted: &[bool], interner: &Interner) {
        self.looked.clear();
        self.text.clear();
        self.wanted.clear();
        let n = shapes.len();
        for ev in events {
            for s in 0..n as u8 {
                // the key is written straight after the run's earlier keys (a bare item id
                // too: the look-up then reads every key the same way, three times a key)
                let start = self.text.len();
                let looked = if !counted[s as usize] {
                    Looked::Uncounted
                } else if s == 0 {
                    push_str(&mut self.text, ev.item());
                    self.wanted.push(Wanted {
                        at: self.looked.len() as u32,
                        start: start as u32,
                        end: self.text.len() as u32,
                        probe: ev.hash,
                    });
                    Looked::Item(None)
                } else if shapes.append_key(s, ev, &mut self.text) {
                    let (end, probe) = (self.text.len() as u32, probe_hash(&self.text[start..]));
                    self.wanted.push(Wanted {
                        at: self.looked.len() as u32,
                        start: start as u32,
                        end,
                        probe,
                    });
                    Looked::Key {
                        start: start as u32,
                        end,
                        probe,
                        found: None,
                    }
                } else {
                    Looked::NoUser
                };
                self.looked.push(looked);
            }
        }
        let mut found = std::mem::take(&mut self.found);
        let (wanted, text) = (&self.wanted, self.text.as_str());
        let key = |w: usize| {
            let k = wanted[w];
            // SAFETY: `start..end` is the span of one `str` pushed whole onto `text`: both
            // ends are char boundaries within it (a checked slice tested both, three times a key).
            (unsafe { text.get_unchecked(k.start as usize..k.end as usize) }, k.probe)
        };
        interner.find_many(wanted.len(), key, &mut found);
        for (w, &idx) in self.wanted.iter().zip(&found) {
            match &mut self.looked[w.at as usize] {
                Looked::Item(f) | Looked::Key { found: f, .. } => *f = idx,
                _ => unreachable!("only keys are wanted"),
            }
        }
        self.found = found;
    }

    /// The keys of the run's event `e`, one per shape.
    #[inline]
    pub(super) fn of(&self, e: usize, shapes: usize) -> &[Looked] {
        &self.looked[e * shapes..(e + 1) * shapes]
    }

    /// The text of a `Looked::Key`.
    #[inline]
    pub(super) fn text(&self, start: u32, end: u32) -> &str {
        &self.text[start as usize..end as usize]
    }
}

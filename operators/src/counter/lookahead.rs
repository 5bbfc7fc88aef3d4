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
use crate::hash::item_hash;
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
    /// The run's key `w` (see [`Lookahead::key`]): the event's bare item id (shape 0) or its
    /// counter key.
    Key(u32),
    /// A numbered shape's: the run's key `w`, the event's bare item id, and its group `g`
    /// (see [`Lookahead::group`]).
    Grouped(u32, u32),
}

/// The keys of a run of events, one per event and shape.
#[derive(Default)]
pub(super) struct Lookahead {
    looked: Vec<Looked>,
    /// The run's keys, end to end.
    text: String,
    /// The run's keys: each one's span of `text` and its table hash.
    wanted: Vec<Wanted>,
    /// Per key, its index if interned when the run was looked up.
    found: Vec<Option<ItemIdx>>,
    /// The groups of the run's numbered shapes' keys, end to end, and each one's span.
    group_text: String,
    groups: Vec<(u32, u32)>,
    /// Per key, its user's number in `users` (a paired shape's key; `NO_USER`: none).
    user_of: Vec<u32>,
    /// The users of the run's keys of paired shapes, end to end, as `text`.
    user_text: String,
    users: Vec<Wanted>,
    /// Per user, its index if interned when the run was looked up.
    users_found: Vec<Option<ItemIdx>>,
}

/// `Lookahead::user_of` of a key without a user.
const NO_USER: u32 = u32::MAX;

/// A key to find: `text[start..end]` of the run, with its table hash.
#[derive(Clone, Copy)]
struct Wanted {
    start: u32,
    end: u32,
    probe: u64,
}

impl Lookahead {
    /// Looks up the keys of `events` under every shape (`counted[s]`: whether a counted
    /// window has shape `s`; `paired[s]`: whether it is paired, its users then looked up in
    /// `users`; `numbered[s]`: whether it counts in item records by group number, its key then
    /// the bare item id and its group kept apart), replacing the previous run's.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn look(
        &mut self,
        events: &[TimedEvent],
        shapes: &Shapes,
        counted: &[bool],
        paired: &[bool],
        numbered: &[bool],
        interner: &Interner,
        users: &Interner,
    ) {
        self.looked.clear();
        self.text.clear();
        self.wanted.clear();
        self.group_text.clear();
        self.groups.clear();
        self.user_of.clear();
        self.user_text.clear();
        self.users.clear();
        let n = shapes.len();
        // (`user_of` only when a shape is paired: a per-group job reads no users)
        let any_paired = paired.contains(&true);
        for ev in events {
            for s in 0..n as u8 {
                // the key is written straight after the run's earlier keys (a bare item id
                // too: the look-up then reads every key the same way, three times a key)
                let start = self.text.len();
                let mut user_of = NO_USER;
                let mut group = None;
                let probe = if !counted[s as usize] {
                    None
                } else if numbered[s as usize] {
                    group = Some(self.push_grouped(shapes, s, ev));
                    Some(ev.hash)
                } else if paired[s as usize] {
                    match shapes.append_paired_key(s, ev, &mut self.text) {
                        Some(user) => {
                            user_of = self.push_user(user);
                            Some(probe_hash(&self.text[start..]))
                        }
                        None => {
                            self.looked.push(Looked::NoUser);
                            continue;
                        }
                    }
                } else if s == 0 {
                    push_str(&mut self.text, ev.item());
                    Some(ev.hash)
                } else if shapes.append_key(s, ev, &mut self.text) {
                    Some(probe_hash(&self.text[start..]))
                } else {
                    self.looked.push(Looked::NoUser);
                    continue;
                };
                self.looked.push(match probe {
                    None => Looked::Uncounted,
                    Some(probe) => {
                        self.wanted.push(Wanted {
                            start: start as u32,
                            end: self.text.len() as u32,
                            probe,
                        });
                        if any_paired {
                            self.user_of.push(user_of);
                        }
                        let w = self.wanted.len() as u32 - 1;
                        match group {
                            Some(g) => Looked::Grouped(w, g),
                            None => Looked::Key(w),
                        }
                    }
                });
            }
        }
        let (wanted, text) = (&self.wanted, self.text.as_str());
        let key = |w: usize| {
            let k = wanted[w];
            // SAFETY: `start..end` is the span of one `str` pushed whole onto `text`: both
            // ends are char boundaries within it (a checked slice tested both, three times a key).
            (unsafe { text.get_unchecked(k.start as usize..k.end as usize) }, k.probe)
        };
        interner.find_many(wanted.len(), key, &mut self.found);
        if !self.users.is_empty() {
            let (wanted, text) = (&self.users, self.user_text.as_str());
            let user = |w: usize| {
                let k = wanted[w];
                (&text[k.start as usize..k.end as usize], k.probe)
            };
            users.find_many(wanted.len(), user, &mut self.users_found);
        }
    }

    /// A numbered shape `s`'s key of `ev`: its bare item id, its group kept apart; the group's
    /// number in the run.
    fn push_grouped(&mut self, shapes: &Shapes, s: u8, ev: &TimedEvent) -> u32 {
        let at = self.group_text.len() as u32;
        shapes.append_group(s, ev, &mut self.group_text);
        self.groups.push((at, self.group_text.len() as u32));
        push_str(&mut self.text, ev.item());
        self.groups.len() as u32 - 1
    }

    /// A paired shape's key's user, to look up: its number in the run.
    fn push_user(&mut self, user: &str) -> u32 {
        let at = self.user_text.len();
        push_str(&mut self.user_text, user);
        self.users.push(Wanted {
            start: at as u32,
            end: self.user_text.len() as u32,
            probe: item_hash(user),
        });
        self.users.len() as u32 - 1
    }

    /// Whether the run has keys of paired shapes (then their users were looked up).
    #[inline]
    pub(super) fn has_users(&self) -> bool {
        !self.users.is_empty()
    }

    /// The user of the run's key `w` (of a paired shape): its id and its index if it was
    /// interned.
    #[inline]
    pub(super) fn user(&self, w: u32) -> Option<(&str, Option<ItemIdx>)> {
        let u = *self.user_of.get(w as usize)?;
        let k = self.users.get(u as usize)?;
        Some((
            &self.user_text[k.start as usize..k.end as usize],
            self.users_found[u as usize],
        ))
    }

    /// The run's key `w`: its text, its table hash and its index if it was interned.
    #[inline]
    pub(super) fn key(&self, w: u32) -> (&str, u64, Option<ItemIdx>) {
        let k = self.wanted[w as usize];
        (
            &self.text[k.start as usize..k.end as usize],
            k.probe,
            self.found[w as usize],
        )
    }

    /// The run's group `g` (of a numbered shape's key).
    #[inline]
    pub(super) fn group(&self, g: u32) -> &str {
        let (start, end) = self.groups[g as usize];
        &self.group_text[start as usize..end as usize]
    }

    /// The keys of the run's event `e`, one per shape.
    #[inline]
    pub(super) fn of(&self, e: usize, shapes: usize) -> &[Looked] {
        &self.looked[e * shapes..(e + 1) * shapes]
    }
}

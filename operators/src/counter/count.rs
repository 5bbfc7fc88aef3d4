//! Counting: the hot path. [`WindowedCounter::apply_all`] looks up a run of events' keys
//! together (see `lookahead`), then counts each event once per pane group
//! (fast path: on time for every covering instance), or decides per covering instance on the
//! slow path (late for some: exclusions; sealed for some: a `sealed` dead letter). Counts live
//! inline in the interner while one pane per item and group is active, else in the pane's map.

use super::dead_letters::{out_of_range, sealed_letter};
use super::lookahead::{Lookahead, Looked, RUN};
use super::numbers::GroupNo;
use super::{horizon, pairs::Pairs, ChangeLog, Counter, FxMap, Pane, WindowedCounter, INLINE_MAX};
use crate::event::check_event_time;
use crate::group::group_of_key;
use crate::interner::{prefetch, probe_hash, Inline, ItemIdx, RecordMut};
use crate::record::{DeadLetter, TimedEvent};
use crate::time::Millis;
use crate::window::InstanceKey;
use hashbrown::hash_map::Entry;
use smallvec::SmallVec;

impl WindowedCounter {
    /// Counts `events` in order, as [`WindowedCounter::apply`] each, pushing their dead
    /// letters to `dead`. The keys of [`RUN`] events at a time are looked up together first,
    /// so that their cache misses overlap (see `lookahead`).
    pub fn apply_all(&mut self, events: &[TimedEvent], dead: &mut Vec<DeadLetter>) {
        if self.shapes.all_plain() {
            let mut found = std::mem::take(&mut self.found);
            for run in events.chunks(RUN) {
                self.interner
                    .find_many(run.len(), |i| (run[i].item(), run[i].hash), &mut found);
                for (ev, &idx) in run.iter().zip(&found) {
                    self.apply_found(ev, idx, dead);
                }
            }
            self.found = found;
        } else {
            let mut looked = std::mem::take(&mut self.lookahead);
            let keyed = self
                .shapes
                .keyed()
                .filter(|&s| !self.shape_counted[0] && !self.paired[s as usize]);
            for (i, run) in events.chunks(RUN).enumerate() {
                prefetch_run(events, i + 1);
                if let Some(s) = keyed.filter(|_| run.iter().all(|e| e.text.counter_key().is_some())) {
                    self.apply_keyed(run, s, dead);
                    continue;
                }
                looked.look(
                    run,
                    &self.shapes,
                    &self.shape_counted,
                    &self.paired,
                    &self.numbered,
                    &self.interner,
                    &self.pair_users,
                );
                self.prefetch_pairs(run, &looked);
                for (e, ev) in run.iter().enumerate() {
                    self.apply_shaped(ev, &looked, e, dead);
                }
            }
            self.lookahead = looked;
        }
    }

    /// Counts one event. An event that reaches only sealed instances is returned as a dead
    /// letter (reason `sealed`); instances it is late for are skipped (its source already
    /// dead-lettered it as `late`). An event time outside years 0000-9999 (which sources
    /// reject) is returned as a `bad` dead letter: every event is counted or dead-lettered.
    pub fn apply(&mut self, ev: &TimedEvent) -> Option<DeadLetter> {
        let mut dead = Vec::new();
        self.apply_all(std::slice::from_ref(ev), &mut dead);
        dead.pop()
    }

    /// `apply` of an event without per-group or distinct-user windows, whose item was looked
    /// up with its run's (`found`: its index; `None`: not interned then; see `lookahead`).
    #[inline]
    fn apply_found(&mut self, ev: &TimedEvent, found: Option<ItemIdx>, dead: &mut Vec<DeadLetter>) {
        if let Err(bad) = check_event_time(ev.ts) {
            dead.push(out_of_range(ev, bad));
            return;
        }
        let late_h = ev.wm_before.minus(self.allowed_lateness);
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        let idx = match found {
            Some(idx) => {
                debug_assert_eq!(self.interner.id(idx), ev.item(), "a stale index");
                idx
            }
            None => self.interner.intern(ev.item(), ev.hash),
        };
        let mut sealed_drop = false;
        let mut counted = false;
        for g in 0..self.groups.len() {
            // Late for every instance of this group: the source dead-lettered it already.
            // (Every covering instance ends after ts, so ts >= late_h means none is late.)
            if ev.ts < late_h && self.group_last_end(g, ev.ts) <= late_h {
                continue;
            }
            let slot = self.pane_slot(g, ev.ts, sealed_h);
            let group = &mut self.groups[g];
            let Some(slot) = slot else {
                // The pane is gone: every instance containing it is sealed, and at least one
                // of them accepted the event by the lateness rule.
                sealed_drop = true;
                continue;
            };
            let pane = group.slots[slot].as_mut().expect("cached slot is live");
            if pane.first_end > late_h && pane.first_end > sealed_h.max(group.sealed_until) {
                // Fast path: on time for every covering instance.
                self.count_record(g, slot, idx);
                counted = true;
                continue;
            }
            let (accepted, sealed) = self.count_slow(g, slot, ev, late_h, sealed_h, &[Some(Counter::of(idx))]);
            counted |= accepted;
            sealed_drop |= sealed;
        }
        if !counted {
            self.interner.release_unreferenced(idx);
        }
        if sealed_drop {
            dead.push(sealed_letter(ev, self.global_wm));
        }
    }

    /// `apply_all` of a run of keyed events (each one's text is its key of shape `s`, the
    /// only one counted: see `EventText::keyed`), looked up as the plain path looks up ids,
    /// without writing their keys anew (`Lookahead`).
    fn apply_keyed(&mut self, run: &[TimedEvent], s: u8, dead: &mut Vec<DeadLetter>) {
        let numbered = self.numbered[s as usize];
        let mut probes = [0u64; RUN];
        let mut keys: [&str; RUN] = [""; RUN];
        // (a numbered shape counts in the item's record, found by the item's own hash: the key's
        // parts split once here, not at each of the look-up's three reads)
        let mut parts: [(&str, &str); RUN] = [("", ""); RUN];
        let mut gids: [Option<GroupNo>; RUN] = [None; RUN];
        for (e, ev) in run.iter().enumerate() {
            keys[e] = ev.text.counter_key().unwrap_or_default();
            probes[e] = match numbered {
                true => {
                    // (a keyed text is `group NUL item`: one NUL to find)
                    let group = group_of_key(keys[e]);
                    parts[e] = (group, keys[e].get(group.len() + 1..).unwrap_or_default());
                    ev.hash
                }
                false => probe_hash(keys[e]),
            };
        }
        let mut found = std::mem::take(&mut self.found);
        match numbered {
            true => {
                self.interner
                    .find_many(run.len(), |e| (parts[e].1, probes[e]), &mut found);
                // (then the group blocks' boxes, where a hot item's counts are; and the groups'
                // numbers, once: one a counter references stays valid through the run)
                for (e, idx) in found.iter().enumerate() {
                    gids[e] = self.numbers.find_referenced(parts[e].0);
                    if let Some(block) = idx.and_then(|i| self.interner.block(i)) {
                        block.prefetch(gids[e].map(|g| g.raw()));
                    }
                }
            }
            false => self.interner.find_many(run.len(), |e| (keys[e], probes[e]), &mut found),
        }
        // (one key an event, of shape `s`: the other shapes' stay `None`)
        let mut shape_keys = std::mem::take(&mut self.shape_keys);
        shape_keys.clear();
        shape_keys.resize(self.shapes.len(), None);
        self.shape_users.clear();
        // (the counter's shape of things, the same for every event of the run)
        let one_group = self.groups.len() == 1 && self.groups[0].shapes.as_slice() == [s];
        for (e, ev) in run.iter().enumerate() {
            if let Err(bad) = check_event_time(ev.ts) {
                dead.push(out_of_range(ev, bad));
                continue;
            }
            let c = match numbered {
                true => {
                    let item = match found[e] {
                        Some(idx) => idx,
                        None => self.interner.intern(parts[e].1, ev.hash),
                    };
                    debug_assert_eq!(self.interner.id(item), ev.item(), "a stale index");
                    let gid = gids[e].unwrap_or_else(|| self.numbers.number(parts[e].0, s));
                    Counter::grouped(item, gid)
                }
                false => Counter::of(match found[e] {
                    Some(idx) => {
                        debug_assert_eq!(self.interner.id(idx), keys[e], "a stale index");
                        idx
                    }
                    None => self.interner.intern_probed(keys[e], probes[e], s),
                }),
            };
            if one_group && self.count_keyed(ev, c, s) {
                continue;
            }
            shape_keys[s as usize] = Some(c);
            self.apply_keys(ev, &shape_keys, dead);
        }
        self.shape_keys = shape_keys;
        self.found = found;
    }

    /// `apply_keys` of a keyed event (its key `idx`, of shape `s`) in a counter of one pane
    /// group, whose only shape is `s`, in its common case: the event on time for every
    /// instance covering its pane. Whether it was that case (and so counted; else
    /// `apply_keys` decides). (The
    /// general loop over shapes and users, for one key without a user, was most of what a
    /// keyed run cost beyond its look-ups.)
    #[inline(always)]
    fn count_keyed(&mut self, ev: &TimedEvent, c: Counter, s: u8) -> bool {
        let late_h = ev.wm_before.minus(self.allowed_lateness);
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        debug_assert!(self.groups.len() == 1 && self.groups[0].shapes.as_slice() == [s]);
        if ev.ts < late_h {
            return false;
        }
        let Some(slot) = self.pane_slot(0, ev.ts, sealed_h) else {
            return false;
        };
        let group = &self.groups[0];
        let pane = group.slots[slot].as_ref().expect("cached slot is live");
        if pane.first_end <= late_h || pane.first_end <= sealed_h.max(group.sealed_until) {
            return false;
        }
        let note_every = pane.excluded;
        let first = self.count(0, slot, c);
        if self.notes_own_groups() && (first || note_every) && self.shapes.has_by(s) {
            self.note_own(0, slot, c, ev.text.counter_key(), s, sealed_h);
        }
        true
    }

    /// `apply` for a counter with per-group or distinct-user windows: the event, the run's
    /// event `e` in `looked`, is counted under one key per shape of each pane group; its dead
    /// letter, if any, pushed to `dead`.
    fn apply_shaped(&mut self, ev: &TimedEvent, looked: &Lookahead, e: usize, dead: &mut Vec<DeadLetter>) {
        if let Err(bad) = check_event_time(ev.ts) {
            dead.push(out_of_range(ev, bad));
            return;
        }
        let mut keys = std::mem::take(&mut self.shape_keys);
        self.keys_of(looked, e, &mut keys);
        self.apply_keys(ev, &keys, dead);
        self.shape_keys = keys;
    }

    /// `apply` of an event in range whose keys, one per shape (`None`: not counted in that
    /// shape), are interned in `keys`, and a paired shape's users in `shape_users`. (Its dead
    /// letter pushed, not returned: an `Option<DeadLetter>` moved out of an inlined call was
    /// read back from the stores that had just written it, +28 % of the distinct-user
    /// counter's samples, `perf`.)
    #[inline(always)]
    fn apply_keys(&mut self, ev: &TimedEvent, keys: &[Option<Counter>], dead: &mut Vec<DeadLetter>) {
        let late_h = ev.wm_before.minus(self.allowed_lateness);
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        let mut sealed_drop = false;
        // whether every key was counted for sure (one pane group, its fast path): then none
        // is left unreferenced, and the look at each key's record below is skipped
        let mut all_counted = self.groups.len() == 1;
        for g in 0..self.groups.len() {
            if ev.ts < late_h && self.group_last_end(g, ev.ts) <= late_h {
                all_counted = false;
                continue;
            }
            let slot = self.pane_slot(g, ev.ts, sealed_h);
            let Some(slot) = slot else {
                sealed_drop = true;
                all_counted = false;
                continue;
            };
            let group = &self.groups[g];
            let pane = group.slots[slot].as_ref().expect("cached slot is live");
            if pane.first_end > late_h && pane.first_end > sealed_h.max(group.sealed_until) {
                // (a counter noting its own groups notes a key's group when the key is first
                // counted in the pane, and at every count where an event was late for one of
                // the pane's instances: see `groups`)
                let note_every = pane.excluded;
                for i in 0..group.shapes.len() {
                    let s = self.groups[g].shapes[i];
                    if let Some(c) = keys[s as usize] {
                        if let Some(u) = self.shape_users.get(s as usize).copied().flatten() {
                            // a paired shape: counted once per user (see `pairs`)
                            let pane = self.groups[g].slots[slot].as_mut().expect("live slot");
                            if !pane.add_pair(&mut self.pair_users, c.item(), u) {
                                continue;
                            }
                            if self.others_kept {
                                self.note_other(g, slot, c.item(), u, s, ev.hash);
                            }
                        } else if self.shapes.distinct_users(s) {
                            self.note_user(g, slot, c.item(), s, late_h, sealed_h);
                        }
                        let first = self.count(g, slot, c);
                        if self.notes_own_groups() && (first || note_every) && self.shapes.has_by(s) {
                            self.note_own(g, slot, c, None, s, sealed_h);
                        }
                    }
                }
                continue;
            }
            let (_, sealed) = self.count_slow(g, slot, ev, late_h, sealed_h, keys);
            sealed_drop |= sealed;
            all_counted = false;
        }
        if !all_counted {
            self.release_uncounted(keys);
        }
        // (every paired shape of the event has its one user: released once)
        if let Some(u) = self.shape_users.iter().copied().flatten().next() {
            self.release_unpaired(u);
        }
        if sealed_drop {
            dead.push(sealed_letter(ev, self.global_wm));
        }
    }

    /// The keys of the run's event `e` in `looked`, one per shape (`None`: not counted in that
    /// shape), into `keys`, interned; a paired shape's users into `shape_users` (left empty
    /// when the run has none: a per-group job pays nothing for them).
    #[inline(always)]
    fn keys_of(&mut self, looked: &Lookahead, e: usize, keys: &mut Vec<Option<Counter>>) {
        keys.clear();
        self.shape_users.clear();
        let mut missing_user = false;
        let users = looked.has_users();
        for (s, &l) in looked.of(e, self.shapes.len()).iter().enumerate() {
            if users {
                self.shape_users.push(match l {
                    Looked::Key(w) => looked.user(w).map(|(user, found)| {
                        found.unwrap_or_else(|| super::pairs::intern_user(&mut self.pair_users, user))
                    }),
                    _ => None,
                });
            }
            keys.push(match l {
                Looked::Uncounted => None, // no counted window has this shape (a window of another counter)
                Looked::NoUser => {
                    missing_user = true;
                    None
                }
                Looked::Key(w) => {
                    let (key, probe, found) = looked.key(w);
                    debug_assert!(found.is_none_or(|idx| self.interner.id(idx) == key), "a stale index");
                    Some(Counter::of(
                        found.unwrap_or_else(|| self.interner.intern_probed(key, probe, s as u8)),
                    ))
                }
                Looked::Grouped(w, group) => {
                    // (the key looked up is the bare item id, under its own hash)
                    let (item, hash, found) = looked.key(w);
                    debug_assert!(found.is_none_or(|idx| self.interner.id(idx) == item), "a stale index");
                    let item = found.unwrap_or_else(|| self.interner.intern(item, hash));
                    Some(Counter::grouped(
                        item,
                        self.numbers.number(looked.group(group), s as u8),
                    ))
                }
            });
        }
        self.without_user += u64::from(missing_user);
    }

    /// The slow path of `apply` in pane group `g`: decides per covering instance (per window
    /// shape, `keys[shape]` is the key counted; `None`: not counted in that shape's windows).
    /// Returns whether the event was counted, and whether some instance was already sealed.
    /// (Out of line: late events are few, and `apply` stays short for the rest.)
    #[inline(never)]
    fn count_slow(
        &mut self,
        g: usize,
        slot: usize,
        ev: &TimedEvent,
        late_h: Millis,
        sealed_h: Millis,
        keys: &[Option<Counter>],
    ) -> (bool, bool) {
        let mut sealed_drop = false;
        let mut accepted: u64 = 0; // bit per shape
                                   // (instance, shape, sealed): not counted there if the pane counts the event
        let mut excluded: Vec<(InstanceKey, u8, bool)> = Vec::new();
        // (a counter noting its own groups: the instances of windows with `by` dims that
        // accepted the event, and its shape there)
        let own = self.notes_own_groups();
        let mut admitted: Vec<(InstanceKey, u8)> = Vec::new();
        let group = &self.groups[g];
        for &wid in &group.windows {
            let shape = self.shapes.of_window(wid.0 as usize);
            if keys.get(shape as usize).copied().flatten().is_none() {
                continue;
            }
            let w = &self.windows[wid.0 as usize];
            let sealed_h = horizon(sealed_h, &self.sealed_until, wid);
            // a sealed trend instance's pane is still read by later baselines: an event
            // counted in it for another window is excluded from it too
            let baseline_read = w.rank.trend().is_some();
            for start in w.starts_covering(ev.ts) {
                let end = w.end_of(start);
                let key = InstanceKey { window: wid, start };
                if end <= late_h {
                    if end > sealed_h || baseline_read {
                        excluded.push((key, shape, end <= sealed_h));
                    }
                } else if end <= sealed_h {
                    sealed_drop = true;
                    if baseline_read {
                        excluded.push((key, shape, true));
                    }
                } else {
                    accepted |= 1 << shape;
                    if own {
                        admitted.push((key, shape));
                    }
                }
            }
        }
        for (shape, key) in keys.iter().enumerate() {
            if let Some(c) = key.filter(|_| accepted & (1 << shape) != 0) {
                if let Some(u) = self.shape_users.get(shape).copied().flatten() {
                    // a paired shape: counted once per user (see `pairs`; never excluded)
                    let pane = self.groups[g].slots[slot].as_mut().expect("live slot");
                    if !pane.add_pair(&mut self.pair_users, c.item(), u) {
                        continue;
                    }
                    if self.others_kept {
                        self.note_other(g, slot, c.item(), u, shape as u8, ev.hash);
                    }
                } else if shape > 0 && self.shapes.distinct_users(shape as u8) {
                    self.note_user(g, slot, c.item(), shape as u8, late_h, sealed_h);
                }
                self.count(g, slot, c);
            }
        }
        for (key, shape) in admitted {
            if let Some(c) = keys[shape as usize] {
                self.note_own_in(key, c, sealed_h);
            }
        }
        for (key, shape, sealed) in excluded {
            if accepted & (1 << shape) == 0 {
                continue;
            }
            let Some(c) = keys[shape as usize] else { continue };
            if sealed {
                *self.trend_exclusions.entry(key).or_default().entry(c).or_insert(0) += 1;
                continue;
            }
            let inst = self.instances.entry(key).or_default();
            *inst.exclusions.entry(c).or_insert(0) += 1;
            inst.touched = self.seq;
            self.groups[g].slots[slot].as_mut().expect("live slot").excluded = true;
        }
        (accepted != 0, sealed_drop)
    }

    /// Counts one event of counter `c` in the pane at `slot` of group `g`; whether it is the
    /// counter's first count there.
    #[inline(always)]
    fn count(&mut self, g: usize, slot: usize, c: Counter) -> bool {
        match c.group() {
            None => self.count_record(g, slot, c.item()),
            Some(gid) => self.count_grouped(g, slot, c.item(), gid),
        }
    }

    /// `count` of the counter of record `idx` alone (a bare item id, or a key record).
    #[inline(always)]
    fn count_record(&mut self, g: usize, slot: usize, idx: ItemIdx) -> bool {
        // The common case inline: the pane is the item's inline one and the count fits.
        let (seq, gen) = (self.seq, self.gen);
        let pane = self.groups[g].slots[slot].as_mut().expect("live slot");
        if let Some(rel) = pane.rel {
            let inl = &mut self.interner.record_mut(idx).inline[g];
            if inl.pane == rel && inl.count() < INLINE_MAX {
                pane.touched = seq;
                inl.increment();
                if inl.logged() != gen {
                    inl.set_logged(gen);
                    pane.log.push(Counter::of(idx));
                }
                return false;
            }
        }
        self.count_other(g, slot, idx)
    }

    /// `count` past its common case: a new pane for the item, an overflow, an older pane or a
    /// pane without inline counters (out of line, so the common case inlines small).
    #[inline(never)]
    fn count_other(&mut self, g: usize, slot: usize, idx: ItemIdx) -> bool {
        let (seq, gen) = (self.seq, self.gen);
        let group = &mut self.groups[g];
        let pane = group.slots[slot].as_mut().expect("live slot");
        pane.touched = seq;
        // the record once (its width resolved once), not at every access
        let mut rec = self.interner.record_mut(idx);
        let c = Counter::of(idx);
        let Some(rel) = pane.rel else {
            let first = map_increment(pane, c, &mut rec);
            pane.log.push(c); // (map counts are logged at every change: they are rare)
            return first;
        };
        let was = rec.inline[g];
        if was.pane == rel {
            // (`count` took the room-left case) An inline count is 32 bits: move it to the map
            // and count there from now on.
            debug_assert!(was.count() >= INLINE_MAX);
            rec.inline[g] = Inline::EMPTY;
            pane.inline_live -= 1;
            pane.map().insert(c, was.count() as u64 + 1);
            pane.log.push(c);
            return false;
        }
        pane.log.push(c);
        if was.pane != Inline::EMPTY.pane && rel < was.pane {
            // An older pane than the inline one (out of order): its count lives in the map.
            return map_increment(pane, c, &mut rec);
        }
        if let Some(n) = pane.map().get_mut(&c) {
            // This pane's count is in its map (an overflow; or a count moved out of this pane
            // whose record emptied since, by an overflow in a newer pane): keep it there.
            *n += 1;
            return false;
        }
        // This pane becomes the item's inline pane; the previous inline count moves out to its
        // pane (see `moved`).
        pane.members.push(idx);
        pane.inline_live += 1;
        rec.inline[g] = Inline::new(rel, 1, gen);
        rec.retain();
        if was.pane != Inline::EMPTY.pane {
            let base = group.base.expect("inline panes imply a base");
            let old_no = base + was.pane as i64;
            let old_slot = *group.index.get(&old_no).expect("an inline pane is live");
            let old = group.slots[old_slot].as_mut().expect("an inline pane is live");
            old.push_moved(c, was.count() as u64);
            old.inline_live -= 1;
            group.unsettled = true;
        }
        true
    }

    /// Forgets what an event's counters `keys` interned or numbered and did not count (their
    /// item records and group numbers without a reference), each record once: several
    /// counters can share one (a numbered shape's counters are their item's record), and a
    /// freed record's reference count is the free list's link.
    fn release_uncounted(&mut self, keys: &[Option<Counter>]) {
        let mut items: SmallVec<[ItemIdx; 4]> = SmallVec::new();
        for c in keys.iter().flatten() {
            if let Some(gid) = c.group() {
                self.numbers.release_unreferenced(gid);
            }
            if !items.contains(&c.item()) {
                items.push(c.item());
            }
        }
        for idx in items {
            self.interner.release_unreferenced(idx);
        }
    }

    /// End of the last-ending instance of group `g` that covers `ts`.
    fn group_last_end(&self, g: usize, ts: Millis) -> Millis {
        let group = &self.groups[g];
        group
            .windows
            .iter()
            .map(|w| self.windows[w.0 as usize].last_end_covering(ts))
            .max()
            .unwrap_or(Millis::MIN)
    }

    /// The slot of the pane of group `g` containing `ts`, creating it (and registering its
    /// instances) if needed; `None` if the pane would only feed sealed instances.
    #[inline]
    pub(super) fn pane_slot(&mut self, g: usize, ts: Millis, sealed_h: Millis) -> Option<usize> {
        // most events hit the pane of the one before: that test inline, the rest out of line
        if let Some((start, end, slot)) = self.groups[g].cached {
            if ts >= start && ts < end {
                return Some(slot);
            }
        }
        self.find_pane_slot(g, ts, sealed_h)
    }

    /// `pane_slot` past its cached pane.
    #[inline(never)]
    fn find_pane_slot(&mut self, g: usize, ts: Millis, sealed_h: Millis) -> Option<usize> {
        let group = &mut self.groups[g];
        let w = group.width.as_i64();
        let pane_no = ts.0.div_euclid(w);
        let start = Millis(pane_no.saturating_mul(w));
        let end = start.plus(group.width);
        if let Some(&slot) = group.index.get(&pane_no) {
            group.cached = Some((start, end, slot));
            return Some(slot);
        }
        // New pane: its covering instances are the same for every time inside it.
        let mut first_end = Millis::MAX;
        let mut last_end = Millis::MIN;
        let mut all_sealed = true;
        let mut keys = Vec::new();
        for &wid in &group.windows {
            let spec = &self.windows[wid.0 as usize];
            let sealed_h = horizon(sealed_h, &self.sealed_until, wid);
            first_end = first_end.min(spec.first_end_covering(start));
            // (a trend window's later instances read the pane for their baselines)
            let kept_until = spec.last_end_covering(start).plus(super::trend::retention(spec));
            last_end = last_end.max(kept_until);
            all_sealed &= kept_until <= sealed_h;
            keys.extend(
                spec.starts_covering(start)
                    .map(|s| (InstanceKey { window: wid, start: s }, spec.end_of(s)))
                    .filter(|(_, end)| *end > sealed_h),
            );
        }
        if all_sealed {
            return None;
        }
        for (key, _) in keys {
            self.instances.entry(key).or_default();
        }
        let rel = if g < self.interner.inline_groups() {
            let base = *group.base.get_or_insert(pane_no);
            i32::try_from(pane_no.saturating_sub(base))
                .ok()
                .filter(|r| *r != Inline::EMPTY.pane)
        } else {
            None
        };
        let pane = Pane {
            start,
            counts: FxMap::default(),
            moved: Vec::new(),
            rel,
            members: Vec::new(),
            inline_live: 0,
            touched: 0,
            last_end,
            first_end,
            log: ChangeLog::default(),
            grouped_members: Vec::new(),
            grouped_live: 0,
            excluded: false,
            pairs: Pairs::with_capacity(group.last_pairs),
        };
        let slot = match group.free_slots.pop() {
            Some(s) => {
                group.slots[s] = Some(pane);
                s
            }
            None => {
                group.slots.push(Some(pane));
                group.slots.len() - 1
            }
        };
        group.index.insert(pane_no, slot);
        group.cached = Some((start, end, slot));
        Some(slot)
    }
}

/// Counts one event of counter `c` (of record `rec`) in `pane`'s map; whether it is its first
/// count there.
#[inline]
pub(super) fn map_increment(pane: &mut Pane, c: Counter, rec: &mut RecordMut<'_>) -> bool {
    match pane.map().entry(c) {
        Entry::Occupied(mut o) => {
            *o.get_mut() += 1;
            false
        }
        Entry::Vacant(v) => {
            v.insert(1);
            rec.retain();
            true
        }
    }
}

/// Prefetches the events of run `r` of `events` (if any) while the run before it is counted:
/// an epoch's events were written by the source well before they are counted, and building a
/// counter key's first read of each missed the cache (59 % of `EventText::user`'s samples in a
/// distinct-user job). (Plain runs, whose look-up reads only an event's id, gained nothing:
/// 1.01x, not kept there.)
#[inline]
fn prefetch_run(events: &[TimedEvent], r: usize) {
    let Some(run) = events.get(r * RUN..((r + 1) * RUN).min(events.len())) else {
        return;
    };
    let start = run.as_ptr() as usize;
    for at in (start..start + std::mem::size_of_val(run)).step_by(64) {
        prefetch(at);
    }
}

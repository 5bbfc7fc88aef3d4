//! Advancing and sealing: [`WindowedCounter::advance`] ends an epoch (adopts the global
//! watermark, emits the dirty instances' lists, frees sealed instances and panes), and the
//! per-window horizons that an earlier end of input sealed (`sealed_until`).

use super::dense::DenseSums;
use super::numbers::GroupNo;
use super::{horizon, WindowedCounter};
use crate::interner::{in_record_order, GroupBlock, Inline};
use crate::message::LocalList;
use crate::record::ListSource;
use crate::time::Millis;
use crate::window::InstanceKey;

impl WindowedCounter {
    /// Seals, per window, the instances ending at or before `until[w]` (never unseals).
    pub(super) fn seal_until(&mut self, until: &[Millis]) {
        if until.iter().all(|u| *u == Millis::MIN) {
            return;
        }
        self.sealed_until.resize(self.windows.len(), Millis::MIN);
        for (mine, u) in self.sealed_until.iter_mut().zip(until) {
            *mine = (*mine).max(*u);
        }
        for group in self.groups.iter_mut() {
            group.sealed_until = group
                .windows
                .iter()
                .map(|w| self.sealed_until[w.0 as usize])
                .max()
                .unwrap_or(Millis::MIN);
        }
    }

    /// Ends the current epoch: adopts the new global watermark, returns the local lists to
    /// publish (dirty instances that are closed, sealed, or open when `tick` is set), and frees
    /// sealed instances and panes.
    pub fn advance(&mut self, global_wm: Millis, tick: bool) -> Vec<LocalList> {
        self.global_wm = self.global_wm.max(global_wm);
        let wm = self.global_wm;
        let sealed_h = wm.minus(self.allowed_lateness);
        let mut out = Vec::new();
        let force = std::mem::take(&mut self.force_emit);
        let mut emitted = false;
        let keys: Vec<InstanceKey> = self.instances.keys().copied().collect();
        for key in keys {
            let end = self.windows[key.window.0 as usize].end_of(key.start);
            let open = end > wm;
            let sealed = self.is_sealed(key);
            if force || ((tick || !open) && self.is_dirty(key)) {
                emitted = true;
                for (group, items) in self.instance_top_k(key, force) {
                    out.push(LocalList {
                        instance: key,
                        group,
                        worker: self.worker,
                        items,
                        source: ListSource::PaneCounter,
                        share: None,
                    });
                }
                if let Some(inst) = self.instances.get_mut(&key) {
                    inst.emitted = self.seq;
                }
            }
            if sealed {
                let inst = self.instances.remove(&key);
                // a trend window's later baselines still read its exclusions (see `trend`)
                if let Some(inst) = inst.filter(|i| !i.exclusions.is_empty()) {
                    if self.windows[key.window.0 as usize].rank.trend().is_some() {
                        self.trend_exclusions.insert(key, inst.exclusions);
                    }
                }
            }
        }
        self.users_kept = self.instances.values().any(|i| i.users.is_some());
        self.others_kept = self.instances.values().any(|i| i.other.is_some());
        self.free_trend_exclusions(sealed_h);
        let (windows, sealed_until) = (&self.windows, &self.sealed_until);
        self.admission.retain(|key, _| {
            windows[key.window.0 as usize].end_of(key.start) > horizon(sealed_h, sealed_until, key.window)
        });
        self.free_sealed_panes(sealed_h);
        self.trim_logs(emitted);
        if emitted {
            self.next_gen();
            // (8 bytes per item index: given back between emissions, a fresh one is cheap)
            self.sums = DenseSums::default();
        }
        self.seq += 1;
        out
    }

    /// Frees the panes that only sealed instances read (`last_end` at or before `sealed_h`)
    /// and releases the items whose counts die with them.
    fn free_sealed_panes(&mut self, sealed_h: Millis) {
        for (groups_index, group) in self.groups.iter_mut().enumerate() {
            let mut freed = false;
            for slot in 0..group.slots.len() {
                let dead = matches!(&group.slots[slot], Some(p) if p.last_end <= sealed_h);
                if dead {
                    let pane = group.slots[slot].take().expect("checked live");
                    // the items whose counts die with it, each run in memory order (see
                    // `release_all`): its members still inline, then its map's
                    let mut released = pane.members;
                    match pane.rel {
                        Some(rel) => {
                            // (in memory order: a pane's members are as many as its window's items)
                            in_record_order(&mut released);
                            let g = groups_index;
                            released.retain(|&idx| {
                                let inline = self.interner.inline_mut(idx, g);
                                let live = inline.pane == rel;
                                if live {
                                    *inline = Inline::EMPTY;
                                }
                                live
                            });
                        }
                        None => released.clear(),
                    }
                    // the numbered counters still in group blocks on this pane: a reference to
                    // their record and to their group's number each
                    if let (Some(rel), 0) = (pane.rel, groups_index) {
                        let mut grouped = pane.grouped_members;
                        in_record_order(&mut grouped);
                        for idx in grouped {
                            let numbers = &mut self.numbers;
                            if let Some(block) = self.interner.block_mut(idx).filter(|b| b.pane() == rel) {
                                block.move_to(GroupBlock::EMPTY.pane(), |gid, _| {
                                    released.push(idx);
                                    numbers.release(GroupNo::from_raw(gid));
                                });
                            }
                        }
                    }
                    let members = released.len();
                    let kept = pane.counts.keys().chain(pane.moved.iter().map(|(c, _)| c));
                    released.extend(kept.clone().map(|c| c.item()));
                    for gid in kept.filter_map(|c| c.group()) {
                        self.numbers.release(gid);
                    }
                    released[members..].sort_unstable();
                    self.interner.release_all(released);
                    if !pane.pairs.is_empty() {
                        group.last_pairs = pane.pairs.len();
                    }
                    super::pairs::release(&mut self.pair_users, pane.pairs);
                    group.index.remove(&pane.start.0.div_euclid(group.width.as_i64()));
                    group.free_slots.push(slot);
                    freed = true;
                }
            }
            if freed {
                group.cached = None;
            }
        }
    }

    /// Whether instance `key` is sealed as of the global watermark (it is dropped at the end of
    /// this `advance`).
    pub(super) fn is_sealed(&self, key: InstanceKey) -> bool {
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        self.windows[key.window.0 as usize].end_of(key.start) <= horizon(sealed_h, &self.sealed_until, key.window)
    }

    fn is_dirty(&self, key: InstanceKey) -> bool {
        let Some(inst) = self.instances.get(&key) else {
            return false;
        };
        if inst.touched > inst.emitted {
            return true;
        }
        let (_, mut panes) = self.panes_of(key);
        panes.any(|p| p.is_some_and(|p| p.touched > inst.emitted)) || self.baseline_changed(key, inst.emitted)
    }
}

//! Groups: the announcements of the groups an epoch's events count in, per instance of a
//! window with `by` dims (see `group::admission`), and how many fold into `(other)`.

use super::{horizon, WindowedCounter};
use crate::group::{Admitted, GroupNote, InstanceGroups};
use std::collections::BTreeMap;

impl WindowedCounter {
    /// Takes the group announcements of an epoch (from every worker; after its events, before
    /// its `advance`). Announcements for sealed instances, or for windows this counter does not
    /// count by groups, are ignored.
    pub fn note_groups(&mut self, notes: &[GroupNote]) {
        let sealed_h = self.global_wm.minus(self.allowed_lateness);
        for note in notes {
            let key = note.instance;
            let Some(spec) = self.windows.get(key.window.0 as usize) else {
                continue;
            };
            if spec.key.by.is_empty()
                || !self.groups.iter().any(|g| g.windows.contains(&key.window))
                || spec.end_of(key.start) <= horizon(sealed_h, &self.sealed_until, key.window)
            {
                continue;
            }
            let max_groups = spec.key.max_groups;
            let groups = self
                .admission
                .entry(key)
                .or_insert_with(|| InstanceGroups::new(max_groups));
            if groups.insert(note.hash) == Admitted::Displaced {
                // a group this worker may have listed now counts in (other)
                if let Some(inst) = self.instances.get_mut(&key) {
                    inst.touched = self.seq;
                }
            }
        }
    }

    /// Per window with `by` dims, the most groups counted in `(other)` in one live instance
    /// (windows without such an instance are absent).
    pub fn overflow_groups(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (key, groups) in &self.admission {
            let n = groups.folded() as u64;
            if n > 0 {
                let e = out.entry(self.windows[key.window.0 as usize].name.clone()).or_default();
                *e = (*e).max(n);
            }
        }
        out
    }
}

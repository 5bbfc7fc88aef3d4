//! How long an incremental checkpoint may keep sharing a pane file.
//!
//! An unchanged pane's file is hard-linked into the next checkpoint instead of written again.
//! A file damaged on disk then damages every checkpoint that links it, so if all retained
//! checkpoints shared it, falling back to an older one could not help. Bounding the sharing
//! keeps the fallback useful: with `retain` checkpoints kept, a file is shared by at most
//! `retain - 1` consecutive checkpoints, so the oldest retained checkpoint never shares a file
//! with the newest. The price: an unchanged pane is still written once every `retain - 1`
//! checkpoints (never reused with `retain = 2`; without limit with `retain = 1`, where there is
//! nothing to fall back to).

use crate::snapshot::{PaneKey, PaneSegment};
use std::collections::HashMap;

/// One worker's record of which pane files its latest checkpoint shares, and how widely.
#[derive(Clone, Debug)]
pub struct PaneSharing {
    /// Most consecutive checkpoints one file may belong to.
    limit: usize,
    /// Pane → how many consecutive checkpoints (up to the latest) hold its current file.
    holders: HashMap<PaneKey, usize>,
}

impl PaneSharing {
    /// The policy for a job that retains `retain` checkpoints.
    pub fn new(retain: usize) -> PaneSharing {
        PaneSharing {
            limit: if retain <= 1 { usize::MAX } else { retain - 1 },
            holders: HashMap::new(),
        }
    }

    /// Whether the next checkpoint may link `pane`'s file from the latest one (when the pane
    /// did not change): only if the latest checkpoint has the file and the limit allows one more.
    pub fn may_reuse(&self, pane: PaneKey) -> bool {
        self.holders.get(&pane).is_some_and(|n| *n < self.limit)
    }

    /// Records the checkpoint just taken: `None` panes linked their previous file, `Some` ones
    /// were written anew. Panes not listed are gone.
    pub fn taken(&mut self, panes: &[(PaneKey, Option<PaneSegment>)]) {
        let previous = std::mem::take(&mut self.holders);
        self.holders = panes
            .iter()
            .map(|(key, seg)| {
                let n = match seg {
                    Some(_) => 1,
                    None => previous.get(key).map_or(1, |n| n + 1),
                };
                (*key, n)
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{Millis, Span};

    fn key(start: i64) -> PaneKey {
        PaneKey {
            width: Span::from_millis(10),
            start: Millis(start),
        }
    }

    /// With 3 retained, an unchanged pane is linked into one more checkpoint, then written.
    #[test]
    fn an_unchanged_pane_is_rewritten_every_retain_minus_one_checkpoints() {
        let mut s = PaneSharing::new(3);
        assert!(!s.may_reuse(key(0)), "nothing to link before the first checkpoint");
        let seg = || {
            Some(PaneSegment {
                key: key(0),
                key_groups: Vec::new(),
            })
        };
        let mut written = Vec::new();
        for _ in 0..7 {
            let reuse = s.may_reuse(key(0));
            written.push(!reuse);
            s.taken(&[(key(0), if reuse { None } else { seg() })]);
        }
        assert_eq!(written, [true, false, true, false, true, false, true]);
        let mut unlimited = PaneSharing::new(1);
        unlimited.taken(&[(key(0), seg())]);
        for _ in 0..100 {
            assert!(unlimited.may_reuse(key(0)));
            unlimited.taken(&[(key(0), None)]);
        }
        let mut never = PaneSharing::new(2);
        never.taken(&[(key(0), seg())]);
        assert!(!never.may_reuse(key(0)));
    }
}

//! One read of a replay pass, in parallel: the instance's input is a list of parts (a
//! partition's range each), read by up to `threads` threads — part `p` by thread
//! `p mod threads`, so the assignment is a function of the part list — each counting into a map
//! of its own with the pass's rule, and the maps summed per key (an event is in one part, but a
//! key can be in many).
//!
//! **The budget is the merged map's.** A pass fits iff its merged map — the distinct keys the
//! rule admits over every part — holds at most `max_keys`: the single-thread rule, so the
//! outcome does not depend on the thread count. A thread's map holds a subset of the merged
//! keys, so a thread that outgrows `max_keys` proves the pass over (and stops the others);
//! otherwise the merge counts the union and stops at `max_keys + 1`. Memory: each thread's map
//! holds at most `max_keys` keys, and the merge grows one of them to at most `max_keys`, so at
//! most `threads × max_keys` keys are held at once.
//!
//! Keys are generic (an item, or later a group and an item) and `admit` decides which new keys
//! a pass counts (the threshold, the hash range), so the counting does not know what they are.

use rustc_hash::FxBuildHasher;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// A replay's map of exact counts.
pub type FxMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;

/// Reads part `p` of the instance's input once, calling the visitor with each event's key and
/// pinned hash until it returns `false`. Once `halt` is set (another part failed or the pass is
/// over budget) it may return early with `Ok`: that read's result is then not used.
pub type ReadPart<'a, K, E> = dyn Fn(usize, &AtomicBool, &mut dyn FnMut(&K, u64) -> bool) -> Result<(), E> + Sync + 'a;

/// The instance's input: `parts` parts, read by up to `threads` threads.
pub struct ReplayInput<'a, K, E> {
    /// How many parts (`read` takes `0..parts`).
    pub parts: usize,
    /// The most threads one read uses (the process's workers); at least 1 is used.
    pub threads: usize,
    /// Reads one part.
    pub read: &'a ReadPart<'a, K, E>,
}

impl<K, E> ReplayInput<'_, K, E> {
    /// The threads one read uses: no more than there are parts.
    pub fn threads_used(&self) -> usize {
        self.threads.min(self.parts).max(1)
    }
}

/// What one read counted.
#[derive(Debug)]
pub enum Counted<K> {
    /// Every admitted key with its count over all parts (at most `max_keys` of them).
    Fits(FxMap<K, u64>),
    /// More than `max_keys` keys were admitted.
    Over,
}

/// What one thread (or one process: `replay_pass::sum_shares`) counted over its parts.
pub(crate) struct Share<K, E> {
    pub(crate) counts: FxMap<K, u64>,
    pub(crate) over: bool,
    /// The first part it failed to read, with why.
    pub(crate) failed: Option<(usize, E)>,
}

/// Reads every part once, counting each event of a key already counted and each new key
/// `admit` accepts (given the key and its hash), within `max_keys` keys of the merged map
/// (module docs). When parts fail, the error is that of the lowest part that failed.
pub fn count_parts<K, E>(
    input: &ReplayInput<'_, K, E>,
    max_keys: usize,
    admit: &(dyn Fn(&K, u64) -> bool + Sync),
) -> Result<Counted<K>, E>
where
    K: Hash + Eq + Clone + Send,
    E: Send,
{
    let threads = input.threads_used();
    let halt = AtomicBool::new(false);
    let share = |t: usize| count_share(input, t, threads, max_keys, admit, &halt);
    let shares: Vec<Share<K, E>> = if threads == 1 {
        vec![share(0)]
    } else {
        std::thread::scope(|s| {
            let spawned: Vec<_> = (1..threads)
                .map(|t| {
                    std::thread::Builder::new()
                        .name(format!("hotlist-replay-{t}"))
                        .spawn_scoped(s, move || share(t))
                        .map_err(|_| t)
                })
                .collect();
            let mut shares = vec![share(0)];
            for h in spawned {
                shares.push(match h {
                    Ok(h) => h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    // no thread to be had: read its parts here, after the first share's
                    Err(t) => share(t),
                });
            }
            shares
        })
    };
    merge(shares, max_keys)
}

/// Thread `t` of `threads`: parts `t`, `t + threads`, … into one map.
fn count_share<K, E>(
    input: &ReplayInput<'_, K, E>,
    t: usize,
    threads: usize,
    max_keys: usize,
    admit: &(dyn Fn(&K, u64) -> bool + Sync),
    halt: &AtomicBool,
) -> Share<K, E>
where
    K: Hash + Eq + Clone,
{
    let mut counts: FxMap<K, u64> = FxMap::default();
    let mut over = false;
    for part in (t..input.parts).step_by(threads) {
        if halt.load(Relaxed) {
            break;
        }
        let read = (input.read)(part, halt, &mut |key, hash| {
            if let Some(c) = counts.get_mut(key) {
                *c += 1;
            } else if admit(key, hash) {
                if counts.len() >= max_keys {
                    over = true;
                    halt.store(true, Relaxed);
                    return false;
                }
                counts.insert(key.clone(), 1);
            }
            !halt.load(Relaxed)
        });
        if let Err(e) = read {
            halt.store(true, Relaxed);
            return Share {
                counts,
                over,
                failed: Some((part, e)),
            };
        }
        if over {
            break;
        }
    }
    Share {
        counts,
        over,
        failed: None,
    }
}

/// The shares' sum per key; the lowest failed part's error first, then over budget.
pub(crate) fn merge<K, E>(shares: Vec<Share<K, E>>, max_keys: usize) -> Result<Counted<K>, E>
where
    K: Hash + Eq,
{
    let mut maps = Vec::with_capacity(shares.len());
    let (mut over, mut failed) = (false, None::<(usize, E)>);
    for s in shares {
        over |= s.over;
        if let Some((part, e)) = s.failed {
            if failed.as_ref().is_none_or(|(p, _)| part < *p) {
                failed = Some((part, e));
            }
        }
        maps.push(s.counts);
    }
    if let Some((_, e)) = failed {
        return Err(e);
    }
    if over {
        return Ok(Counted::Over);
    }
    // the largest map takes in the others: the fewest inserts
    let Some(largest) = (0..maps.len()).max_by_key(|&i| maps[i].len()) else {
        return Ok(Counted::Fits(FxMap::default()));
    };
    let mut merged = maps.swap_remove(largest);
    for map in maps {
        for (key, count) in map {
            if let Some(c) = merged.get_mut(&key) {
                *c += count;
            } else if merged.len() >= max_keys {
                return Ok(Counted::Over);
            } else {
                merged.insert(key, count);
            }
        }
    }
    Ok(Counted::Fits(merged))
}

#[cfg(test)]
mod tests;

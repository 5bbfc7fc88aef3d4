//! Item records, interned once per worker.
//!
//! Counters are keyed by a dense `u32` index instead of the id string: 4 bytes per counter
//! instead of 24, and one string hash per event instead of one per window. Each record keeps
//! the id (up to 14 bytes in the record, longer ones in the table's arena: see `key`), a
//! reference count (live counters using it) and, for the first of the job's pane
//! groups (1, 2 or [`INLINE_GROUPS`]), an **inline counter** for the item's newest pane: the common
//! event (same item, current pane) then touches one record instead of one hash map per window,
//! which is where the time went (cache misses). When the count drops to zero the record is
//! forgotten and its index reused, so memory follows the live state, not history. A table made
//! `with_blocks` also gives each record a group block (`group_block`): the item's counts per
//! group number, for its newest pane of the first pane group.

mod group_block;
mod key;
mod order;
mod prefetch;

pub use group_block::{GroupBlock, GroupCount, DENSE};
pub use order::in_record_order;
use order::IndexBits;
pub use prefetch::prefetch;
pub use prefetch::SlotPrefetch;

use hashbrown::HashTable;
use key::{Key, NARROW, WIDE};

/// An interned item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemIdx(pub u32);

/// Indices stay below this (a counter's change log marks an entry's kind in the top bit).
pub const MAX_ITEMS: u32 = 1 << 31;

/// Pane groups with an inline counter in each record (others use pane maps only).
pub const INLINE_GROUPS: usize = 4;

/// An inline counter: the count of one (item, pane), where `pane` is relative to its group's
/// base pane, and the emit generation in which that count last went into its pane's change log
/// (the counter logs an item once per pane and generation: see `counter::emit`). Both share
/// 32 bits (24 for the count) so that a record keeps its size; `Inline::EMPTY` holds nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inline {
    /// Pane number relative to the group's base (`i32::MIN` = empty).
    pub pane: i32,
    /// Count (low 24 bits) and logged generation (high 8).
    bits: u32,
}

impl Inline {
    /// Nothing inline.
    pub const EMPTY: Inline = Inline {
        pane: i32::MIN,
        bits: 0,
    };

    /// The largest count an inline counter holds.
    pub const MAX_COUNT: u32 = (1 << 24) - 1;

    /// A counter of `count` (at most `MAX_COUNT`) for `pane`, logged in generation `logged`.
    #[inline]
    pub fn new(pane: i32, count: u32, logged: u8) -> Inline {
        debug_assert!(count <= Self::MAX_COUNT);
        Inline {
            pane,
            bits: count | (logged as u32) << 24,
        }
    }

    /// The count.
    #[inline]
    pub fn count(self) -> u32 {
        self.bits & Self::MAX_COUNT
    }

    /// The generation in which the count was last logged (0: none).
    #[inline]
    pub fn logged(self) -> u8 {
        (self.bits >> 24) as u8
    }

    /// Adds one to a count below `MAX_COUNT`.
    #[inline]
    pub fn increment(&mut self) {
        debug_assert!(self.count() < Self::MAX_COUNT);
        self.bits += 1;
    }

    /// Records that the count was logged in generation `g`.
    #[inline]
    pub fn set_logged(&mut self, g: u8) {
        self.bits = (self.bits & Self::MAX_COUNT) | (g as u32) << 24;
    }
}

/// An item record with `N` inline counters, a `W`-byte key and a group block or none (`B`: see
/// [`BlockSlot`]). No hash: the table's probe hash is recomputed from the id when the table
/// grows (8 bytes per record saved, an xxh3 of a short id per move). 28 bytes with one inline
/// counter, a narrow key and no block: the id (up to 14 bytes inline, see [`Key`]) and its
/// shape, the reference count, the counters; 48 with a block (16 bytes, and the alignment of
/// its box).
struct Record<const N: usize, const W: usize, B> {
    key: Key<W>,
    refs: u32,
    inline: [Inline; N],
    block: B,
}

/// What a record holds for its groups' counts: [`NoBlock`] or a [`GroupBlock`]. (A type,
/// not an array of 0 or 1 blocks: an empty array of them still aligns the record to 8 bytes,
/// and a 28-byte record became 32.)
trait BlockSlot: Sized {
    const NONE: Self;
    const HAS_BLOCK: bool;
    fn slot(&self) -> Option<&GroupBlock>;
    fn slot_mut(&mut self) -> Option<&mut GroupBlock>;
}

/// No group block (zero bytes).
struct NoBlock;

impl BlockSlot for NoBlock {
    const NONE: NoBlock = NoBlock;
    const HAS_BLOCK: bool = false;
    #[inline(always)]
    fn slot(&self) -> Option<&GroupBlock> {
        None
    }
    #[inline(always)]
    fn slot_mut(&mut self) -> Option<&mut GroupBlock> {
        None
    }
}

impl BlockSlot for GroupBlock {
    const NONE: GroupBlock = GroupBlock::EMPTY;
    const HAS_BLOCK: bool = true;
    #[inline(always)]
    fn slot(&self) -> Option<&GroupBlock> {
        Some(self)
    }
    #[inline(always)]
    fn slot_mut(&mut self) -> Option<&mut GroupBlock> {
        Some(self)
    }
}

/// The hash the table finds a record by: the hash of its whole id (for a bare id, its pinned
/// item hash; for a counter key, not its item's pinned hash, which every group and user of the
/// item share: finding keys by it alone would probe them all).
#[inline]
pub(crate) fn probe_hash(id: &str) -> u64 {
    crate::hash::item_hash(id)
}

/// The end of the free list.
const NO_SLOT: u32 = u32::MAX;

/// `release_all` sweeps the table when at least one in this many of its items die (else it
/// probes for each).
const SWEEP_AT: usize = 8;

/// An arena's dead bytes are reclaimed (when it would grow) once they are more than half of it and at least this.
/// Small in unit tests, so that the counters' property tests compact too.
const COMPACT_AT: usize = if cfg!(test) { 64 } else { 1 << 16 };

/// The records of one inline width. The width is fixed per job (its pane groups, up to
/// [`INLINE_GROUPS`]): a one-window job's record is 28 bytes, not the 72 of four counters, a
/// stored hash and a `CompactString`, and the hot path still touches one record per event.
struct Records<const N: usize, const W: usize, B> {
    table: HashTable<u32>,
    /// Where the table's slots are, for prefetching (see [`SlotPrefetch`]).
    slots: std::cell::Cell<SlotPrefetch>,
    records: Vec<Record<N, W, B>>,
    /// The first free slot ([`NO_SLOT`]: none). Free slots are linked through their `refs`
    /// field (a free slot has no references to count): a `Vec` of free indices cost 4 bytes per
    /// item at the moment a large window sealed and freed all its items at once.
    free_head: u32,
    /// The free slots.
    free_len: usize,
    /// The bytes of the ids too long for a key (see [`Key`]), live and dead, in the order they came.
    arena: Vec<u8>,
    /// The arena's bytes of forgotten ids (reclaimed by [`Records::make_room`]).
    dead: usize,
}

impl<const N: usize, const W: usize, B> Default for Records<N, W, B> {
    fn default() -> Self {
        Records {
            table: HashTable::new(),
            slots: Default::default(),
            records: Vec::new(),
            free_head: NO_SLOT,
            free_len: 0,
            arena: Vec::new(),
            dead: 0,
        }
    }
}

impl<const N: usize, const W: usize, B: BlockSlot> Records<N, W, B> {
    #[inline]
    fn intern(&mut self, id: &str, probe: u64, shape: u8) -> ItemIdx {
        if let Some(idx) = self.find(id, probe) {
            return idx;
        }
        if id.len() > Key::<W>::SHORT && self.arena.len() + id.len() > self.arena.capacity() {
            self.make_room(id.len());
        }
        let record = Record {
            key: Key::new(id, shape, &mut self.arena),
            refs: 0,
            inline: [Inline::EMPTY; N],
            block: B::NONE,
        };
        let i = match self.free_head {
            NO_SLOT => {
                let i = u32::try_from(self.records.len())
                    .ok()
                    .filter(|&i| i < MAX_ITEMS)
                    .expect("more than 2 billion live items on one worker");
                self.records.push(record);
                i
            }
            i => {
                self.free_head = self.records[i as usize].refs;
                self.free_len -= 1;
                self.records[i as usize] = record;
                i
            }
        };
        if self.table.len() == self.table.capacity() {
            self.grow();
        }
        let (records, arena) = (&self.records, &self.arena);
        self.table
            .insert_unique(probe, i, |&j| probe_hash(records[j as usize].key.as_str(arena)));
        ItemIdx(i)
    }

    /// Replaces a full table by one twice its entries, filled in record order. A record keeps
    /// no hash, so growing rehashes every key from its record: the table's own growth reads
    /// them in slot order, a cache miss per record (the growth was 4 % of a distinct-user job,
    /// 2 % of a per-group one), where record order reads them front to back. (The record about
    /// to be inserted, new or a reused free slot, is not in the table yet: it is not moved.)
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let mut live = IndexBits::new(self.records.len());
        for &i in self.table.iter() {
            live.insert(i);
        }
        let mut table = HashTable::with_capacity(2 * self.table.len().max(8));
        let (records, arena) = (&self.records, &self.arena);
        let hash = |&j: &u32| probe_hash(records[j as usize].key.as_str(arena));
        live.for_each(|i| {
            table.insert_unique(hash(&i), i, hash);
        });
        self.table = table;
        // (a new allocation, perhaps of as many buckets: the prefetch anchor is recomputed)
        self.slots.set(SlotPrefetch::default());
    }

    #[inline]
    fn id(&self, idx: ItemIdx) -> &str {
        self.records[idx.0 as usize].key.as_str(&self.arena)
    }

    /// The index of `id` (found by `probe`), if interned.
    #[inline]
    fn find(&self, id: &str, probe: u64) -> Option<ItemIdx> {
        let (records, arena) = (&self.records, &self.arena);
        match Key::<W>::short(id) {
            Some(k) => self.table.find(probe, |&i| records[i as usize].key.is_short(&k)),
            None => self.table.find(probe, |&i| records[i as usize].key.is(id, arena)),
        }
        .map(|&i| ItemIdx(i))
    }

    /// The indices of `n` keys (`key(i)`: the key and its table hash), those interned, in
    /// `found`. In three passes, so that each waits for one round of cache misses instead of
    /// one per key: the keys' table slots are prefetched, then the records their slots point
    /// to (the first candidate, almost always the key's), then the keys are looked up.
    #[inline]
    fn find_many<'k>(&self, n: usize, key: impl Fn(usize) -> (&'k str, u64) + Copy, found: &mut Vec<Option<ItemIdx>>) {
        let slots = SlotPrefetch::of(&self.table, self.slots.get());
        self.slots.set(slots);
        for i in 0..n {
            slots.fetch(key(i).1);
        }
        for i in 0..n {
            if let Some(&r) = self.table.iter_hash(key(i).1).next() {
                // its first and last byte: a record of up to 64 bytes spans at most two cache
                // lines, and the key compared is as often on the second as on the first
                const { assert!(std::mem::size_of::<Record<N, W, B>>() <= 64) };
                let at = &self.records[r as usize] as *const Record<N, W, B> as usize;
                prefetch::prefetch(at);
                prefetch::prefetch(at + std::mem::size_of::<Record<N, W, B>>() - 1);
            }
        }
        found.clear();
        found.extend((0..n).map(|i| {
            let (id, probe) = key(i);
            self.find(id, probe)
        }));
    }

    fn release(&mut self, idx: ItemIdx) {
        let r = &mut self.records[idx.0 as usize].refs;
        debug_assert!(*r > 0, "release without retain");
        *r = r.saturating_sub(1);
        if *r == 0 {
            self.unlink(idx);
            self.forget(idx);
        }
    }

    /// Drops one reference per entry of `idxs` (an index appears once per reference dropped)
    /// and forgets the items left without any. For a pane that dies with its window: the
    /// records are visited in the given order (correct in any; give runs in index order, see
    /// [`in_record_order`], to read them front to back), and when many die at once the table
    /// is swept for them (one pass over its slots, no hashing) instead of probed once per item
    /// (a record read, a hash and a probe, each a cache miss).
    fn release_all(&mut self, mut idxs: Vec<ItemIdx>) {
        // (in place: a dying pane's items are most of the table, and its peak is the job's)
        let records = &mut self.records;
        idxs.retain(|idx| {
            let r = &mut records[idx.0 as usize].refs;
            debug_assert!(*r > 0, "release without retain");
            *r = r.saturating_sub(1);
            *r == 0
        });
        let dying = idxs;
        if dying.is_empty() {
            return;
        }
        if dying.len() * SWEEP_AT >= self.table.len() {
            let mut doomed = IndexBits::new(self.records.len());
            for idx in &dying {
                doomed.insert(idx.0);
            }
            self.table.retain(|&mut i| !doomed.contains(i));
        } else {
            for &idx in &dying {
                self.unlink(idx);
            }
        }
        for idx in dying {
            self.forget(idx);
        }
    }

    /// Removes a live record's index from the table.
    fn unlink(&mut self, idx: ItemIdx) {
        let probe = probe_hash(self.id(idx));
        if let Ok(entry) = self.table.find_entry(probe, |&i| i == idx.0) {
            entry.remove();
        }
    }

    /// Frees the record of an item no longer in the table.
    fn forget(&mut self, idx: ItemIdx) {
        let rec = &mut self.records[idx.0 as usize];
        self.dead += rec.key.arena_len();
        rec.key = Key::EMPTY;
        rec.inline = [Inline::EMPTY; N];
        rec.block = B::NONE;
        rec.refs = self.free_head;
        self.free_head = idx.0;
        self.free_len += 1;
        if self.free_len == self.records.len() {
            // nothing live (a large window sealed): every arena byte is dead
            self.arena.clear();
            self.dead = 0;
        }
    }

    /// Before the arena grows for an id of `n` bytes: when at least half of it is dead, the
    /// live ids are copied into a new arena instead (free slots hold short keys, so every long
    /// key is a live one): O(live bytes), after at least as many bytes were forgotten. Not
    /// when ids are forgotten: a window that seals frees its ids all at once, and compacting
    /// halfway through would copy what is about to die.
    #[cold]
    fn make_room(&mut self, n: usize) {
        if self.dead < COMPACT_AT || self.dead * 2 <= self.arena.len() {
            return;
        }
        let mut arena = Vec::with_capacity(self.arena.len() - self.dead + n);
        for rec in &mut self.records {
            rec.key = rec.key.moved(&self.arena, &mut arena);
        }
        self.arena = arena;
        self.dead = 0;
    }

    fn heap_bytes(&self) -> usize {
        debug_assert_eq!(
            self.table.len(),
            self.records.len() - self.free_len,
            "one entry per live record"
        );
        debug_assert_eq!(
            self.arena.len() - self.dead,
            self.records.iter().map(|r| r.key.arena_len()).sum::<usize>()
        );
        // (a walk of the records only when they have blocks)
        let blocks: usize = match B::HAS_BLOCK {
            false => 0,
            true => self
                .records
                .iter()
                .filter_map(|r| r.block.slot())
                .map(GroupBlock::heap_bytes)
                .sum(),
        };
        self.table.capacity() * (4 + 1)
            + self.records.capacity() * std::mem::size_of::<Record<N, W, B>>()
            + self.arena.capacity()
            + blocks
    }
}

/// One record's reference count, inline counters and group blocks, to change together: the
/// hot path resolves the record (and the table's width) once per count, not at every access.
pub struct RecordMut<'a> {
    refs: &'a mut u32,
    /// The inline counters, one per pane group that has one (see [`Interner::inline`]).
    pub inline: &'a mut [Inline],
    /// Its group block, for the first pane group, when the table has them (see
    /// [`Interner::has_blocks`]).
    pub block: Option<&'a mut GroupBlock>,
}

impl RecordMut<'_> {
    /// Adds a reference (see [`Interner::retain`]).
    #[inline]
    pub fn retain(&mut self) {
        *self.refs += 1;
    }
}

/// The record table, at one of three inline widths, two key widths, with group blocks or
/// without.
pub struct Interner(Width);

enum Width {
    One(Records<1, NARROW, NoBlock>),
    Two(Records<2, NARROW, NoBlock>),
    Four(Records<INLINE_GROUPS, NARROW, NoBlock>),
    OneWide(Records<1, WIDE, NoBlock>),
    TwoWide(Records<2, WIDE, NoBlock>),
    FourWide(Records<INLINE_GROUPS, WIDE, NoBlock>),
    // (with a block: four inline counters would pass 64 bytes, so two at most)
    OneBlock(Records<1, NARROW, GroupBlock>),
    TwoBlock(Records<2, NARROW, GroupBlock>),
    OneWideBlock(Records<1, WIDE, GroupBlock>),
    TwoWideBlock(Records<2, WIDE, GroupBlock>),
}

/// `$body` with `$r` bound to the records, whatever their width.
macro_rules! each {
    ($self:expr, $r:ident => $body:expr) => {
        match $self {
            Width::One($r) => $body,
            Width::Two($r) => $body,
            Width::Four($r) => $body,
            Width::OneWide($r) => $body,
            Width::TwoWide($r) => $body,
            Width::FourWide($r) => $body,
            Width::OneBlock($r) => $body,
            Width::TwoBlock($r) => $body,
            Width::OneWideBlock($r) => $body,
            Width::TwoWideBlock($r) => $body,
        }
    };
}

impl Default for Interner {
    fn default() -> Self {
        Interner::new()
    }
}

// The hot accessors are `#[inline(always)]`: with six widths the dispatch is too large for the
// compiler to inline on its own, and a call per access cost 6 % of a four-window job.
impl Interner {
    /// An empty table with [`INLINE_GROUPS`] inline counters per record, for bare item ids.
    pub fn new() -> Interner {
        Interner::with_layout(INLINE_GROUPS, false)
    }

    /// An empty table for a counter of `groups` pane groups: inline counters for the first
    /// min(`groups`, [`INLINE_GROUPS`]) of them (1, 2 or 4 per record); 28-byte keys when it
    /// counts `counter_keys` (per-group or distinct-user windows: `country=US NUL item` keys,
    /// longer than most bare ids), else 16-byte ones (see [`Key`]).
    pub fn with_layout(groups: usize, counter_keys: bool) -> Interner {
        Interner(match (groups, counter_keys) {
            (0 | 1, false) => Width::One(Records::default()),
            (2, false) => Width::Two(Records::default()),
            (_, false) => Width::Four(Records::default()),
            (0 | 1, true) => Width::OneWide(Records::default()),
            (2, true) => Width::TwoWide(Records::default()),
            (_, true) => Width::FourWide(Records::default()),
        })
    }

    /// [`Interner::with_layout`] with a group block in each record, for the first pane group
    /// (see [`GroupBlock`]): inline counters for the first one or two pane groups only.
    pub fn with_blocks(groups: usize, counter_keys: bool) -> Interner {
        Interner(match (groups, counter_keys) {
            (0 | 1, false) => Width::OneBlock(Records::default()),
            (_, false) => Width::TwoBlock(Records::default()),
            (0 | 1, true) => Width::OneWideBlock(Records::default()),
            (_, true) => Width::TwoWideBlock(Records::default()),
        })
    }

    /// How many pane groups have an inline counter in each record (1, 2 or 4).
    #[inline(always)]
    pub fn inline_groups(&self) -> usize {
        match &self.0 {
            Width::One(_) | Width::OneWide(_) | Width::OneBlock(_) | Width::OneWideBlock(_) => 1,
            Width::Two(_) | Width::TwoWide(_) | Width::TwoBlock(_) | Width::TwoWideBlock(_) => 2,
            Width::Four(_) | Width::FourWide(_) => INLINE_GROUPS,
        }
    }

    /// Whether each record has a group block (for the first pane group).
    #[inline(always)]
    pub fn has_blocks(&self) -> bool {
        matches!(
            &self.0,
            Width::OneBlock(_) | Width::TwoBlock(_) | Width::OneWideBlock(_) | Width::TwoWideBlock(_)
        )
    }

    /// The group block of `idx` (`None`: the table has none).
    #[inline(always)]
    pub fn block(&self, idx: ItemIdx) -> Option<&GroupBlock> {
        each!(&self.0, r => r.records[idx.0 as usize].block.slot())
    }

    /// The group block of `idx` (`None`: the table has none), to change.
    #[inline(always)]
    pub fn block_mut(&mut self, idx: ItemIdx) -> Option<&mut GroupBlock> {
        each!(&mut self.0, r => r.records[idx.0 as usize].block.slot_mut())
    }

    /// The index of bare item id `id` (with its pinned `hash`, `item_hash(id)`), interning it
    /// if new. Does not add a reference.
    #[inline(always)]
    pub fn intern(&mut self, id: &str, hash: u64) -> ItemIdx {
        debug_assert_eq!(hash, probe_hash(id), "the pinned hash of {id:?}");
        each!(&mut self.0, r => r.intern(id, hash, 0))
    }

    /// The index of key `id` of key shape `shape` (0: a bare item id) whose item's pinned hash
    /// is `hash`, interning it if new. Does not add a reference.
    #[inline(always)]
    pub fn intern_shaped(&mut self, id: &str, hash: u64, shape: u8) -> ItemIdx {
        if shape == 0 {
            return self.intern(id, hash);
        }
        self.intern_probed(id, probe_hash(id), shape)
    }

    /// The indices of `n` keys (`key(i)`: the key, of any shape, and its table hash — a bare
    /// id's pinned item hash, a counter key's [`probe_hash`]), those interned, in `found` (one
    /// per key). Changes nothing. Looked up together, their cache misses overlap: for counting
    /// a run of events (see `counter::lookahead`).
    pub fn find_many<'k>(
        &self,
        n: usize,
        key: impl Fn(usize) -> (&'k str, u64) + Copy,
        found: &mut Vec<Option<ItemIdx>>,
    ) {
        // (`key` by value, not by reference: a call through `&F` was not inlined, and the
        // look-up calls it three times per key)
        each!(&self.0, r => r.find_many(n, key, found))
    }

    /// [`Interner::intern_shaped`] of a key of shape > 0 whose [`probe_hash`] is known.
    #[inline(always)]
    pub fn intern_probed(&mut self, id: &str, probe: u64, shape: u8) -> ItemIdx {
        debug_assert_eq!(probe, probe_hash(id));
        each!(&mut self.0, r => r.intern(id, probe, shape))
    }

    /// The id of an index.
    #[inline(always)]
    pub fn id(&self, idx: ItemIdx) -> &str {
        each!(&self.0, r => r.id(idx))
    }

    /// The pinned hash of an index (its item's: for a counter key, the hash of its item part).
    pub fn hash(&self, idx: ItemIdx) -> u64 {
        let id = self.id(idx);
        if self.shape(idx) == 0 {
            crate::hash::item_hash(id)
        } else {
            crate::hash::item_hash(crate::group::split_key(id).1)
        }
    }

    /// The key shape of an index (0: a bare item id).
    #[inline(always)]
    pub fn shape(&self, idx: ItemIdx) -> u8 {
        each!(&self.0, r => r.records[idx.0 as usize].key.shape())
    }

    /// The inline counter of group `g` (< [`Interner::inline_groups`]).
    #[inline(always)]
    pub fn inline(&self, idx: ItemIdx, g: usize) -> Inline {
        each!(&self.0, r => r.records[idx.0 as usize].inline[g])
    }

    /// The inline counter of group `g` (< [`Interner::inline_groups`]), to change.
    #[inline(always)]
    pub fn inline_mut(&mut self, idx: ItemIdx, g: usize) -> &mut Inline {
        each!(&mut self.0, r => &mut r.records[idx.0 as usize].inline[g])
    }

    /// The record of `idx`, to change its inline counters and add references.
    #[inline(always)]
    pub fn record_mut(&mut self, idx: ItemIdx) -> RecordMut<'_> {
        each!(&mut self.0, r => {
            let rec = &mut r.records[idx.0 as usize];
            RecordMut {
                refs: &mut rec.refs,
                inline: &mut rec.inline,
                block: rec.block.slot_mut(),
            }
        })
    }

    /// Resets every inline counter's and group count's logged generation to 0 (none), when
    /// generations wrap.
    pub fn clear_logged(&mut self) {
        each!(&mut self.0, r => {
            for rec in &mut r.records {
                for inl in &mut rec.inline {
                    inl.set_logged(0);
                }
                if let Some(block) = rec.block.slot_mut() {
                    block.clear_logged();
                }
            }
        })
    }

    /// Adds a reference (a new live counter uses this item).
    #[inline(always)]
    pub fn retain(&mut self, idx: ItemIdx) {
        each!(&mut self.0, r => r.records[idx.0 as usize].refs += 1)
    }

    /// Drops a reference; forgets the item when none are left. (The model of `release_all` in
    /// tests; the counter releases a dying pane's items together.)
    #[cfg(test)]
    pub fn release(&mut self, idx: ItemIdx) {
        each!(&mut self.0, r => r.release(idx))
    }

    /// Drops one reference per entry of `idxs` (an index once per reference dropped) and
    /// forgets the items left without any, in one pass: for the items of a pane that dies. In
    /// any order; fastest in runs of index order (see [`in_record_order`]).
    pub fn release_all(&mut self, idxs: Vec<ItemIdx>) {
        each!(&mut self.0, r => r.release_all(idxs))
    }

    /// Forgets an item that was interned but never counted.
    pub fn release_unreferenced(&mut self, idx: ItemIdx) {
        each!(&mut self.0, r => {
            if r.records[idx.0 as usize].refs == 0 {
                r.records[idx.0 as usize].refs = 1;
                r.release(idx);
            }
        })
    }

    /// Live items.
    pub fn len(&self) -> usize {
        each!(&self.0, r => r.records.len() - r.free_len)
    }

    /// No live items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes held (ids stored once, plus per-item bookkeeping).
    pub fn heap_bytes(&self) -> usize {
        each!(&self.0, r => r.heap_bytes())
    }
}

#[cfg(test)]
mod tests;

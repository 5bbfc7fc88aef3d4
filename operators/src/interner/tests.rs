//! The interner's tests: records, their layouts and group blocks, release and reuse.
use super::*;
use crate::hash::item_hash;

#[test]
fn intern_release_reuse() {
    let mut i = Interner::with_layout(3, false);
    assert_eq!(i.inline_groups(), 4);
    let a = i.intern("a", item_hash("a"));
    let b = i.intern("b", item_hash("b"));
    assert_ne!(a, b);
    assert_eq!(i.intern("a", item_hash("a")), a);
    i.retain(a);
    i.retain(a);
    i.retain(b);
    *i.inline_mut(a, 1) = Inline::new(0, 7, 3);
    assert_eq!((i.inline(a, 1).count(), i.inline(a, 1).logged()), (7, 3));
    i.inline_mut(a, 1).increment();
    i.inline_mut(a, 1).set_logged(9);
    assert_eq!((i.inline(a, 1).count(), i.inline(a, 1).logged()), (8, 9));
    i.clear_logged();
    assert_eq!((i.inline(a, 1).count(), i.inline(a, 1).logged()), (8, 0));
    i.release(a);
    assert_eq!(i.len(), 2);
    i.release(a);
    assert_eq!(i.len(), 1);
    // "a" is forgotten; a new id reuses its slot with clean inline counters
    let c = i.intern("c", item_hash("c"));
    assert_eq!(c, a);
    assert_eq!(i.id(c), "c");
    assert_eq!(i.inline(c, 1), Inline::EMPTY);
    assert_eq!(i.intern("b", item_hash("b")), b);
    let a2 = i.intern("a", item_hash("a"));
    assert_ne!(a2, c);
    assert_eq!(i.id(a2), "a");
}

/// Long ids live in the arena; after many are forgotten it is compacted (the
/// `debug_assert` in `heap_bytes` checks its live bytes), and every live id, long or short,
/// is still found and read back, slots reused included.
#[test]
fn long_ids_survive_compaction() {
    let mut i = Interner::with_layout(1, false);
    let id = |n: usize| {
        if n.is_multiple_of(3) {
            format!("{n}-{}", "x".repeat(30 + n % 7))
        } else {
            format!("{n}")
        }
    };
    let mut live = Vec::new();
    for n in 0..20_000 {
        let key = id(n);
        let idx = i.intern(&key, item_hash(&key));
        i.retain(idx);
        live.push((n, idx));
        if n % 4 != 0 {
            let at = (n * 7919) % live.len();
            i.release(live.swap_remove(at).1);
        }
        if n % 997 == 0 {
            i.heap_bytes();
        }
    }
    for &(n, idx) in &live {
        let key = id(n);
        assert_eq!(i.id(idx), key);
        assert_eq!(i.intern(&key, item_hash(&key)), idx);
    }
    assert_eq!(i.len(), live.len());
    let long_bytes = |n: usize| Some(id(n).len()).filter(|&n| n > Key::<NARROW>::SHORT).unwrap_or(0);
    let long: usize = live.iter().map(|&(n, _)| long_bytes(n)).sum();
    let ever: usize = (0..20_000).map(long_bytes).sum();
    let Width::One(r) = &i.0 else { unreachable!() };
    // ~6,700 long ids were interned (~250 kB), ~5,000 forgotten: the arena holds the live
    // ones and was compacted (it holds less than every long id ever interned)
    assert!(
        long > 0 && r.arena.len() - r.dead == long,
        "{} {} {long}",
        r.arena.len(),
        r.dead
    );
    assert!(r.arena.len() < ever, "{} vs {ever}", r.arena.len());
    // when nothing is live, the arena is empty
    for &(_, idx) in &live {
        i.release(idx);
    }
    let Width::One(r) = &i.0 else { unreachable!() };
    assert_eq!((i.len(), r.arena.len(), r.dead), (0, 0, 0));
}

proptest::proptest! {
    /// Releasing a batch of references at once (`release_all`, swept or probed, whether few
    /// or most items die) leaves the table as releasing them one by one does: the same items
    /// live, each found at its index, the others forgotten and their slots reused.
    #[test]
    fn a_batch_release_is_releases_one_by_one(
        rounds in proptest::collection::vec(
            (proptest::collection::vec((0u32..300, 1u32..3), 0..200), 0usize..16, proptest::bool::ANY), 1..6)
    ) {
        let id = |n: u32| if n.is_multiple_of(5) { format!("a-long-item-id-{n:08}") } else { format!("{n}") };
        let mut batch = Interner::with_layout(1, false);
        let mut single = Interner::with_layout(1, false);
        // per item number: its index in each table and its live references
        let mut live: std::collections::BTreeMap<u32, (ItemIdx, ItemIdx, u32)> = Default::default();
        for (adds, every, keep) in rounds {
            for (n, refs) in adds {
                let key = id(n);
                let (a, b) = (batch.intern(&key, item_hash(&key)), single.intern(&key, item_hash(&key)));
                for _ in 0..refs {
                    batch.retain(a);
                    single.retain(b);
                }
                let entry = live.entry(n).or_insert((a, b, 0));
                proptest::prop_assert_eq!((entry.0, entry.1), (a, b));
                entry.2 += refs;
            }
            // drop every reference of some items, and one of others
            let mut dropped = Vec::new();
            for (k, (n, (a, b, refs))) in live.iter_mut().enumerate() {
                // one in `every + 1` items loses every reference (`keep`: all the others do)
                let all = k.is_multiple_of(every + 1) != keep;
                let drop = if all { *refs } else { u32::from(n.is_multiple_of(13)) };
                for _ in 0..drop {
                    dropped.push(*a);
                    single.release(*b);
                }
                *refs -= drop;
            }
            batch.release_all(dropped);
            live.retain(|_, (_, _, refs)| *refs > 0);
            proptest::prop_assert_eq!(batch.len(), live.len());
            proptest::prop_assert_eq!(single.len(), live.len());
            for (n, (a, b, _)) in &live {
                proptest::prop_assert_eq!(batch.id(*a), id(*n));
                proptest::prop_assert_eq!(batch.intern(&id(*n), item_hash(&id(*n))), *a);
                proptest::prop_assert_eq!(single.intern(&id(*n), item_hash(&id(*n))), *b);
            }
            batch.heap_bytes(); // checks the arena's live bytes
        }
        // a forgotten item is new again
        let fresh = "never-seen-before";
        let before = batch.len();
        let f = batch.intern(fresh, item_hash(fresh));
        batch.retain(f);
        proptest::prop_assert_eq!(batch.len(), before + 1);
    }
}

proptest::proptest! {
    /// `in_record_order` is a sort, sparse or dense, with or without repeats.
    #[test]
    fn record_order_is_index_order(mut idxs in proptest::collection::vec(0u32..5000, 0..3000)) {
        let mut ours: Vec<ItemIdx> = idxs.iter().map(|&i| ItemIdx(i)).collect();
        in_record_order(&mut ours);
        idxs.sort_unstable();
        proptest::prop_assert_eq!(ours.into_iter().map(|i| i.0).collect::<Vec<_>>(), idxs);
    }
}

#[test]
fn records_are_as_wide_as_the_job_needs() {
    // the 16-byte key (id of up to 14 bytes inline, shape), refs, 8 bytes per inline counter
    assert_eq!(std::mem::size_of::<Record<1, NARROW, NoBlock>>(), 28);
    assert_eq!(std::mem::size_of::<Record<2, NARROW, NoBlock>>(), 36);
    assert_eq!(std::mem::size_of::<Record<INLINE_GROUPS, NARROW, NoBlock>>(), 52);
    // with counter keys (26 bytes inline), as large as with a `CompactString` before
    assert_eq!(std::mem::size_of::<Record<1, WIDE, NoBlock>>(), 40);
    assert_eq!(std::mem::size_of::<Record<2, WIDE, NoBlock>>(), 48);
    assert_eq!(std::mem::size_of::<Record<INLINE_GROUPS, WIDE, NoBlock>>(), 64);
    // with a group block
    assert_eq!(std::mem::size_of::<Record<1, NARROW, GroupBlock>>(), 48);
    assert_eq!(std::mem::size_of::<Record<2, NARROW, GroupBlock>>(), 56);
    assert_eq!(std::mem::size_of::<Record<1, WIDE, GroupBlock>>(), 56);
    assert_eq!(std::mem::size_of::<Record<2, WIDE, GroupBlock>>(), 64);
    let layouts = [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (9, 4)];
    for ((groups, width), counter_keys) in layouts.into_iter().flat_map(|l| [(l, false), (l, true)]) {
        let mut i = Interner::with_layout(groups, counter_keys);
        assert_eq!(i.inline_groups(), width);
        let k = i.intern_shaped("country=C1\0item-7", item_hash("item-7"), 1);
        i.retain(k);
        *i.inline_mut(k, width - 1) = Inline::new(0, 5, 1);
        assert_eq!(i.inline(k, width - 1).count(), 5);
        assert_eq!((i.shape(k), i.hash(k)), (1, item_hash("item-7")));
        assert_eq!(i.intern_shaped("country=C1\0item-7", item_hash("item-7"), 1), k);
        i.release(k);
        assert!(i.is_empty());
    }
    for (groups, width) in [(0, 1), (1, 1), (2, 2), (3, 2), (9, 2)] {
        for counter_keys in [false, true] {
            let i = Interner::with_blocks(groups, counter_keys);
            assert_eq!((i.inline_groups(), i.has_blocks()), (width, true));
        }
        assert!(!Interner::with_layout(groups, false).has_blocks());
    }
}

/// A record's group block holds its counts until the record is forgotten; a reused slot
/// starts with an empty one; a generation wrap clears its logged generations; its box is
/// in the heap bytes.
#[test]
fn blocks_live_and_die_with_their_record() {
    let mut i = Interner::with_blocks(1, false);
    let a = i.intern("a", item_hash("a"));
    i.retain(a);
    let empty_heap = i.heap_bytes();
    {
        let block = i.block_mut(a).expect("a table with blocks");
        assert_eq!(block.pane(), GroupBlock::EMPTY.pane());
        block.move_to(3, |_, _| unreachable!("an empty block"));
        for g in 0..5 {
            assert!(block.insert(g, GroupCount::new(1 + g, 7)));
        }
    }
    {
        let mut rec = i.record_mut(a);
        let block = rec.block.as_mut().expect("a table with blocks");
        block.get_mut(2).expect("held").increment();
        assert_eq!(block.get(2), Some(GroupCount::new(4, 7)));
    }
    assert!(i.heap_bytes() > empty_heap, "the block's box is counted");
    i.clear_logged();
    assert_eq!(i.block(a).and_then(|b| b.get(2)), Some(GroupCount::new(4, 0)));
    assert_eq!(i.block(a).map(|b| (b.pane(), b.len())), Some((3, 5)));
    i.release(a);
    let b = i.intern("b", item_hash("b"));
    assert_eq!(b, a, "the slot is reused");
    assert_eq!(
        i.block(b).map(|b| (b.pane(), b.len())),
        Some((GroupBlock::EMPTY.pane(), 0))
    );
}

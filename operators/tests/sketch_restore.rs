//! Sketch snapshots restore to the same sketch: a stream interrupted at a random point,
//! snapshotted through the on-disk envelope (`snapshot::encode` / `decode`) and restored, then
//! fed the rest, ends with exactly the state, estimates and top list of an uninterrupted run —
//! count-min (plain and conservative) and HeavyKeeper alike. And snapshot bytes from outside
//! never panic: mutated payloads, sealed again, fail to decode or validate, or restore into a
//! sketch that then counts on.

use hotlist_operators::hash::item_hash;
use hotlist_operators::sketch::{
    CmsShape, CountMinTopK, CountMinTopKSnapshot, HeavyKeeper, HeavyKeeperSnapshot, HkShape, TopKSketch,
};
use hotlist_operators::snapshot::{decode, encode};
use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

const HEADER: usize = 6 + 2 + 8 + 8;

fn ids() -> Vec<(String, u64)> {
    (0..120)
        .map(|i| format!("item-{i}"))
        .map(|id| (id.clone(), item_hash(&id)))
        .collect()
}

/// A skewed stream of (item index, increment).
fn stream() -> impl Strategy<Value = Vec<(usize, u32)>> {
    proptest::collection::vec((0usize..120, 0usize..120, 1u32..4), 0..500)
        .prop_map(|v| v.into_iter().map(|(a, b, n)| (a * b / 120, n)).collect())
}

fn feed(s: &mut impl TopKSketch, ids: &[(String, u64)], events: &[(usize, u32)]) {
    for &(i, n) in events {
        s.add(&ids[i].0, ids[i].1, n);
    }
}

fn same_answers(a: &impl TopKSketch, b: &impl TopKSketch, ids: &[(String, u64)]) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.top(usize::MAX), b.top(usize::MAX));
    prop_assert_eq!(a.total(), b.total());
    prop_assert_eq!(a.error_bound(), b.error_bound());
    for (id, h) in ids {
        prop_assert_eq!(a.estimate(id, *h), b.estimate(id, *h));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn count_min_restores_and_continues(events in stream(), cut in 0usize..500, width in 2u32..48, cap in 1usize..12, cons: bool) {
        let ids = ids();
        let shape = CmsShape::new(width, 3).expect("valid").conservative(cons);
        let cut = cut.min(events.len());
        let mut whole = CountMinTopK::new(shape, cap).expect("valid");
        feed(&mut whole, &ids, &events);

        let mut first = CountMinTopK::new(shape, cap).expect("valid");
        feed(&mut first, &ids, &events[..cut]);
        let bytes = encode(&first.snapshot());
        let snap: CountMinTopKSnapshot = decode(&bytes).expect("decodes");
        let mut restored = CountMinTopK::restore(&snap, shape, cap).expect("restores");
        same_answers(&restored, &first, &ids)?;
        feed(&mut restored, &ids, &events[cut..]);
        same_answers(&restored, &whole, &ids)?;
        prop_assert_eq!(restored.snapshot(), whole.snapshot());
    }

    #[test]
    fn heavykeeper_restores_and_continues(events in stream(), cut in 0usize..500, width in 1u32..24, cap in 1usize..12) {
        let ids = ids();
        let shape = HkShape::new(width, 2).expect("valid");
        let cut = cut.min(events.len());
        let mut whole = HeavyKeeper::new(shape, cap).expect("valid");
        feed(&mut whole, &ids, &events);

        let mut first = HeavyKeeper::new(shape, cap).expect("valid");
        feed(&mut first, &ids, &events[..cut]);
        let snap: HeavyKeeperSnapshot = decode(&encode(&first.snapshot())).expect("decodes");
        let mut restored = HeavyKeeper::restore(&snap, shape, cap).expect("restores");
        same_answers(&restored, &first, &ids)?;
        feed(&mut restored, &ids, &events[cut..]);
        same_answers(&restored, &whole, &ids)?;
        prop_assert_eq!(restored.snapshot(), whole.snapshot());
    }

    /// Mutated snapshot payloads (bytes flipped or overwritten, cut), sealed again: decoding,
    /// validating, restoring and counting on never panic.
    #[test]
    fn tampered_snapshots_never_panic(events in stream(), edits in proptest::collection::vec((any::<usize>(), any::<u64>(), 0usize..9), 1..4), cut: bool) {
        let ids = ids();
        let cms_shape = CmsShape::new(16, 2).expect("valid");
        let hk_shape = HkShape::new(8, 2).expect("valid");
        let mut cms = CountMinTopK::new(cms_shape, 4).expect("valid");
        let mut hk = HeavyKeeper::new(hk_shape, 4).expect("valid");
        feed(&mut cms, &ids, &events);
        feed(&mut hk, &ids, &events);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let bytes = tampered(&encode(&cms.snapshot()), &edits, cut);
            if let Ok(s) = decode::<CountMinTopKSnapshot>(&bytes) {
                if let Ok(mut r) = CountMinTopK::restore(&s, cms_shape, 4) {
                    feed(&mut r, &ids, &events);
                    let _ = r.top(4);
                }
            }
            let bytes = tampered(&encode(&hk.snapshot()), &edits, cut);
            if let Ok(s) = decode::<HeavyKeeperSnapshot>(&bytes) {
                if let Ok(mut r) = HeavyKeeper::restore(&s, hk_shape, 4) {
                    feed(&mut r, &ids, &events);
                    let _ = r.top(4);
                }
            }
        }));
        prop_assert!(outcome.is_ok());
    }
}

/// `file` with its payload edited (`(at, value, width)`: overwrite `width` bytes at `at` with
/// `value`, little-endian; width 0 flips a byte) and optionally cut in half, sealed again.
fn tampered(file: &[u8], edits: &[(usize, u64, usize)], cut: bool) -> Vec<u8> {
    let mut payload = file[HEADER..].to_vec();
    for &(at, value, width) in edits {
        let i = at % payload.len().max(1);
        let n = width.min(payload.len() - i);
        if width == 0 && i < payload.len() {
            payload[i] ^= value as u8 | 1;
        }
        payload[i..i + n].copy_from_slice(&value.to_le_bytes()[..n]);
    }
    if cut {
        payload.truncate(payload.len() / 2);
    }
    let mut out = file[..8].to_vec();
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

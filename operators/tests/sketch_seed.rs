//! The seed test: a published table, reproduced. 200,000 clicks over 50,000 short-link codes
//! with power-law popularity (Zipf s = 1.0, generated deterministically here), a count-min
//! sketch of 2048 × 4 counters: **zero under-counts, the largest over-count within e/w·N
//! (≈ 265), and the top 10 found 10 of 10** (with a candidate list of 4·K = 40), with plain and
//! with conservative update. HeavyKeeper in the same 32 KiB (1024 × 4 buckets of 8 bytes) on
//! the same stream: never over-counts, and also finds the top 10.

use crate::zipf;
use hotlist_operators::hash::item_hash;
use hotlist_operators::record::RankedItem;
use hotlist_operators::sketch::{CmsShape, CountMinTopK, HeavyKeeper, HkShape, TopKSketch};
use hotlist_operators::snapshot::encode;
use hotlist_operators::topk::top_k;
use std::collections::BTreeSet;

const CODES: usize = 50_000;
const CLICKS: usize = 200_000;
const K: usize = 10;
const CANDIDATES: usize = 4 * K;

struct Clicks {
    ids: Vec<String>,
    hashes: Vec<u64>,
    stream: Vec<u32>,
    truth: Vec<u64>,
}

fn clicks() -> Clicks {
    let ids: Vec<String> = (0..CODES as u32).map(zipf::item_id).collect();
    let hashes = ids.iter().map(|id| item_hash(id)).collect();
    let stream = zipf::Zipf::new(CODES, 1.0).stream(CLICKS, 2024);
    let truth = zipf::counts(&stream, CODES);
    Clicks {
        ids,
        hashes,
        stream,
        truth,
    }
}

fn run(sketch: &mut impl TopKSketch, c: &Clicks) {
    for &r in &c.stream {
        sketch.add(&c.ids[r as usize], c.hashes[r as usize], 1);
    }
}

/// The true top K ids (ranking order: count descending, then id).
fn true_top(c: &Clicks) -> BTreeSet<String> {
    let all = c.ids.iter().zip(&c.truth).map(|(id, n)| RankedItem {
        item_id: id.into(),
        count: *n,
        trend: None,
    });
    top_k(all.collect(), K)
        .into_iter()
        .map(|r| r.item_id.to_string())
        .collect()
}

fn found(list: &[RankedItem], want: &BTreeSet<String>) -> usize {
    list.iter().filter(|r| want.contains(r.item_id.as_str())).count()
}

#[test]
fn count_min_reproduces_the_published_table() {
    let c = clicks();
    assert_eq!(c.truth.iter().sum::<u64>(), CLICKS as u64);
    let want = true_top(&c);
    for conservative in [false, true] {
        let shape = CmsShape::new(2048, 4).expect("valid").conservative(conservative);
        let mut s = CountMinTopK::new(shape, CANDIDATES).expect("valid");
        run(&mut s, &c);
        let bound = E_OVER_W_N;
        assert_eq!(s.sketch().error_bound(), bound.ceil() as u64);
        let (mut under, mut max_over, mut sum_over) = (0, 0, 0);
        for r in 0..CODES {
            let est = s.sketch().estimate(c.hashes[r]);
            if est < c.truth[r] {
                under += 1;
            }
            let over = est.saturating_sub(c.truth[r]);
            max_over = max_over.max(over);
            sum_over += over;
        }
        let list = s.top(K);
        eprintln!(
            "count-min 2048 × 4 ({}): under-counts {under}, largest over-count {max_over} (bound {bound:.1}), \
             mean over-count {:.1}, top-10 {} of 10",
            if conservative { "conservative" } else { "plain" },
            sum_over as f64 / CODES as f64,
            found(&list, &want)
        );
        assert_eq!(under, 0);
        let golden = if conservative {
            GOLDEN_CONSERVATIVE
        } else {
            GOLDEN_PLAIN
        };
        assert_eq!(
            fingerprint(&encode(&s.snapshot())),
            golden,
            "the state after the seed stream changed"
        );
        assert!((max_over as f64) <= bound, "largest over-count {max_over} > {bound}");
        assert_eq!(found(&list, &want), K, "{list:?}");
    }
}

/// XXH3-64 of the encoded snapshots' payloads after the seed stream: pins the whole algorithm (row
/// hashes, update rules, candidate order, HeavyKeeper's decay draws), as checkpoints need.
const GOLDEN_PLAIN: u64 = 4_912_884_314_872_666_664;
const GOLDEN_CONSERVATIVE: u64 = 2_195_221_389_856_452_350;
const GOLDEN_HEAVYKEEPER: u64 = 4_136_069_068_332_975_142;

fn fingerprint(bytes: &[u8]) -> u64 {
    // the payload only: the envelope's format version may change without the state changing
    xxhash_rust::xxh3::xxh3_64(&bytes[hotlist_operators::snapshot::HEADER_LEN..])
}

/// e/w·N for w = 2048, N = 200,000.
const E_OVER_W_N: f64 = std::f64::consts::E / 2048.0 * CLICKS as f64;

#[test]
fn heavykeeper_on_the_same_stream() {
    let c = clicks();
    let want = true_top(&c);
    let mut s = HeavyKeeper::new(HkShape::new(1024, 4).expect("valid"), CANDIDATES).expect("valid");
    run(&mut s, &c);
    let list = s.top(K);
    let mut max_under = 0;
    for r in &list {
        let i: usize = r.item_id[4..].parse().expect("a code");
        assert!(r.count <= c.truth[i], "{r:?} over-counts (true {})", c.truth[i]);
        max_under = max_under.max(c.truth[i] - r.count);
    }
    eprintln!(
        "HeavyKeeper 1024 × 4: top-10 {} of 10, largest under-count in the list {max_under}",
        found(&list, &want)
    );
    assert_eq!(found(&list, &want), K, "{list:?}");
    assert_eq!(
        fingerprint(&encode(&s.snapshot())),
        GOLDEN_HEAVYKEEPER,
        "the state after the seed stream changed"
    );
}

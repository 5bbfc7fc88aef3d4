use super::*;
use proptest::prelude::*;

fn letter(partition: u32, position: u64, reason: DeadReason, detail: &str) -> DeadLetter {
    DeadLetter {
        partition: PartitionId(partition),
        position,
        raw: detail.as_bytes().to_vec(),
        reason,
        detail: detail.to_string(),
    }
}

/// The rule by brute force: all letters sorted, per (source, block) the first `cap` whole.
fn model(cap: usize, letters: &[(u32, DeadLetter)]) -> (Vec<(u32, DeadLetter)>, Summaries<u32>) {
    let mut sorted: Vec<(u32, Ordered)> = letters.iter().map(|(k, l)| (*k, Ordered(l.clone()))).collect();
    sorted.sort_by(|a, b| (a.0, block_of(a.1 .0.position), &a.1).cmp(&(b.0, block_of(b.1 .0.position), &b.1)));
    let (mut whole, mut summaries) = (Vec::new(), Summaries::new());
    let mut seen: BTreeMap<(u32, u64), usize> = BTreeMap::new();
    for (k, Ordered(l)) in sorted {
        let n = seen.entry((k, block_of(l.position))).or_insert(0);
        if *n < cap {
            whole.push((k, l));
        } else {
            add_summary(&mut summaries, (k, block_of(l.position), l.reason), &Summary::of(&l));
        }
        *n += 1;
    }
    (whole, summaries)
}

/// Whole letters as a sorted list (the order of rows in a commit does not matter).
fn normal(mut whole: Vec<(u32, DeadLetter)>) -> Vec<(u32, Ordered)> {
    let mut v: Vec<(u32, Ordered)> = whole.drain(..).map(|(k, l)| (k, Ordered(l))).collect();
    v.sort();
    v
}

fn arb_letters() -> impl Strategy<Value = Vec<(u32, DeadLetter)>> {
    // few sources, positions over three blocks, some positions with several letters
    let one = (0u32..3, 0u64..3, 0u64..40, 0usize..3, 0usize..2).prop_map(|(k, b, off, r, d)| {
        let reason = [DeadReason::Bad, DeadReason::Late, DeadReason::Sealed][r];
        (k, letter(k, b * BLOCK + off, reason, ["x", "y"][d]))
    });
    proptest::collection::vec(one, 0..120)
}

proptest! {
    /// Any split into epochs (consecutive in each source's position order, each shuffled),
    /// and any restart at an epoch boundary (counts read back from what was output), gives the
    /// brute-force rule's letters and summaries.
    #[test]
    fn any_split_gives_the_rule(
        letters in arb_letters(),
        cap in 0usize..6,
        cuts in proptest::collection::vec(0usize..120, 0..8),
        restart_at in 0usize..9,
        seed in any::<u64>(),
    ) {
        let mut sorted = letters.clone();
        sorted.sort_by_key(|a| Ordered(a.1.clone()));
        let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= sorted.len()).collect();
        cuts.push(0);
        cuts.push(sorted.len());
        cuts.sort_unstable();
        cuts.dedup();
        let mut counts = BlockCounts::new(cap, []);
        let mut out = Folded::default();
        let mut rng = seed;
        for (i, w) in cuts.windows(2).enumerate() {
            if i == restart_at {
                // a restart: the counts are what the output holds so far
                let mut prior: BTreeMap<(u32, u64), u64> = BTreeMap::new();
                for (k, l) in &out.whole {
                    *prior.entry((*k, block_of(l.position))).or_insert(0) += 1;
                }
                for ((k, b, _), s) in &out.summaries {
                    *prior.entry((*k, *b)).or_insert(0) += s.count;
                }
                counts = BlockCounts::new(cap, prior);
            }
            let mut epoch_letters = sorted[w[0]..w[1]].to_vec();
            // shuffle: arrival order within an epoch is arbitrary
            for j in (1..epoch_letters.len()).rev() {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                epoch_letters.swap(j, (rng >> 33) as usize % (j + 1));
            }
            let mut epoch = EpochLetters::new(cap);
            for (k, l) in epoch_letters {
                epoch.add(k, l);
            }
            out.extend(counts.fold(epoch));
        }
        // bounded over any run length: one tracked block per source
        let sources: std::collections::BTreeSet<u32> = letters.iter().map(|(k, _)| *k).collect();
        prop_assert!(counts.tracked() <= sources.len());
        let (whole, summaries) = model(cap, &letters);
        prop_assert_eq!(normal(out.whole.clone()), normal(whole));
        prop_assert_eq!(&out.summaries, &summaries);
        let total = out.whole.len() as u64 + out.summarised();
        prop_assert_eq!(total, letters.len() as u64);
        // a block is reported as overflowing once, exactly when it has more than `cap` letters
        let mut over = out.overflowed.clone();
        over.sort_unstable();
        let n = over.len();
        over.dedup();
        prop_assert_eq!(n, over.len());
        let mut per_block: BTreeMap<(u32, u64), usize> = BTreeMap::new();
        for (k, l) in &letters {
            *per_block.entry((*k, block_of(l.position))).or_insert(0) += 1;
        }
        let expect: Vec<(u32, u64)> = per_block.into_iter().filter(|(_, n)| *n > cap).map(|(k, _)| k).collect();
        if restart_at >= cuts.len() {
            prop_assert_eq!(over, expect);
        }
    }
}

/// An open epoch holds at most `cap` whole letters per block, whatever arrives.
#[test]
fn an_open_epoch_is_bounded() {
    let mut e = EpochLetters::new(3);
    for p in (0..10_000u64).rev() {
        e.add(0u32, letter(0, p, DeadReason::Bad, "x"));
    }
    let held = &e.blocks[&(0, 0)];
    assert_eq!(held.held, 3);
    assert_eq!(held.whole.first_key_value().map(|(l, _)| l.0.position), Some(0));
    assert_eq!(held.rest[&DeadReason::Bad].count, 9_997);
    let out = BlockCounts::new(3, []).fold(e);
    assert_eq!(
        out.whole.iter().map(|(_, l)| l.position).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    let s = out.summaries[&(0, 0, DeadReason::Bad)];
    assert_eq!((s.count, s.first, s.last), (9_997, 3, 9_999));
    assert_eq!(out.overflowed, vec![(0, 0)]);
}

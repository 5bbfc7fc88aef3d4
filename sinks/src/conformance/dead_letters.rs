//! Bounded dead letters: summaries of one (source, reason, block) add up in one row across
//! commits, are read back with their counts, and the stored count per block is what a
//! restarted job resumes the cap from (`hotlist_operators::dead_letter_cap`).

use super::subject::Subject;
use crate::error::SinkError;
use crate::test_fixtures::{batch, letter, summary, JOB};
use hotlist_operators::dead_letter_cap::BLOCK;
use hotlist_operators::record::DeadReason;

/// Summaries add up per (source, reason, block); whole letters stay rows of their own; counts
/// per reason and per block count every letter; an impossible summary is refused and changes
/// nothing. A store that keeps no dead letters (Redis) only has to accept them.
pub(crate) fn dead_letter_summaries_add_up_per_block(s: Subject) {
    let mut w = (s.writer)();
    let mut b = batch(1, vec![]);
    b.dead_letters = vec![
        letter(1, DeadReason::Bad, b"a"),
        summary(5, 9, 3, DeadReason::Bad),
        summary(6, 6, 1, DeadReason::Late),
        summary(BLOCK + 2, BLOCK + 4, 2, DeadReason::Bad),
        summary(10, 12, 2, DeadReason::Udf),
    ];
    assert!(w.commit(&b).unwrap());
    let mut b = batch(2, vec![]);
    b.dead_letters = vec![summary(3, 40, 5, DeadReason::Bad), letter(2, DeadReason::Bad, b"b")];
    assert!(w.commit(&b).unwrap());
    for bad in [
        summary(7, 8, 0, DeadReason::Bad),
        summary(9, 8, 2, DeadReason::Bad),
        summary(BLOCK - 1, BLOCK, 2, DeadReason::Bad),
        {
            let mut d = letter(7, DeadReason::Bad, b"c");
            d.count = 2;
            d
        },
    ] {
        let mut b = batch(3, vec![]);
        b.dead_letters = vec![bad.clone()];
        let err = w.commit(&b).unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{bad:?}: {err}");
    }
    let Some(history) = &s.history else {
        return;
    };
    let mut blocks = w.dead_letter_blocks(JOB).unwrap();
    blocks.sort();
    let source = letter(0, DeadReason::Bad, b"").source;
    assert_eq!(blocks, vec![((source.clone(), 0), 1 + 8 + 1 + 1 + 2), ((source, 1), 2)]);
    drop(w);
    let mut h = history();
    let mut got = h.dead_letters(JOB, 100).unwrap();
    got.sort_by_key(|d| (d.letter.position, d.letter.reason));
    assert_eq!(
        got,
        vec![
            letter(1, DeadReason::Bad, b"a"),
            letter(2, DeadReason::Bad, b"b"),
            summary(3, 40, 8, DeadReason::Bad),
            summary(6, 6, 1, DeadReason::Late),
            summary(10, 12, 2, DeadReason::Udf),
            summary(BLOCK + 2, BLOCK + 4, 2, DeadReason::Bad),
        ]
    );
    assert_eq!(
        h.dead_letter_counts(JOB).unwrap(),
        vec![("bad".to_string(), 12), ("late".to_string(), 1), ("udf".to_string(), 2)]
    );
}

/// `dead_letters_containing` finds the whole letters of the reasons asked for whose raw bytes
/// hold the needle (bytes anywhere in the record, not only text), in the order stored, at most
/// `limit`; summaries and other reasons are left out. A store that keeps no dead letters
/// (Redis) says so with `None`.
pub(crate) fn dead_letters_are_found_by_their_bytes(s: Subject) {
    let mut w = (s.writer)();
    let mut b = batch(1, vec![]);
    b.dead_letters = vec![
        letter(1, DeadReason::Late, br#"{"item_id":"video-7","ts":5}"#),
        letter(2, DeadReason::Bad, br#"{"item_id":"video-7","ts":"x"}"#),
        letter(3, DeadReason::Sealed, b"{\"item_id\":\"video-7\xff\",\"ts\":6}"),
        letter(4, DeadReason::Late, br#"{"item_id":"video-8","ts":7}"#),
        summary(5, 9, 3, DeadReason::Late),
    ];
    assert!(w.commit(&b).unwrap());
    let mut b = batch(2, vec![]);
    b.dead_letters = vec![letter(10, DeadReason::Sealed, br#"{"item_id":"video-7","ts":9}"#)];
    assert!(w.commit(&b).unwrap());
    drop(w);
    let mut r = (s.reader)();
    let reasons = [DeadReason::Late, DeadReason::Sealed];
    let found = r.dead_letters_containing(JOB, &reasons, b"video-7", 100).unwrap();
    if s.history.is_none() {
        assert_eq!(found, None, "a store without dead letters says so");
        return;
    }
    let positions: Vec<u64> = found.expect("kept").iter().map(|d| d.letter.position).collect();
    assert_eq!(positions, vec![1, 3, 10]);
    let first = r
        .dead_letters_containing(JOB, &reasons, b"video-7", 2)
        .unwrap()
        .expect("kept");
    assert_eq!(first.len(), 2);
    assert_eq!(
        first[1],
        letter(3, DeadReason::Sealed, b"{\"item_id\":\"video-7\xff\",\"ts\":6}")
    );
    let none = r
        .dead_letters_containing("another-job", &reasons, b"video-7", 100)
        .unwrap();
    assert_eq!(none.map(|v| v.len()), Some(0));
    let bad = r
        .dead_letters_containing(JOB, &[DeadReason::Bad], b"\"x\"", 100)
        .unwrap();
    assert_eq!(bad.map(|v| v.len()), Some(1));
}

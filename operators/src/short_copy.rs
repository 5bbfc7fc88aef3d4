//! Copies of short byte strings (ids, users, dim values: a few to a few tens of bytes) as a
//! few possibly overlapping word moves, without a call. A copy of a length known only at run
//! time is otherwise a call to `memcpy`, whose set-up costs more than moving 10 bytes; per
//! event and per value, those calls were several percent of a per-group job (`perf`,
//! docs/benchmarks.md). Compares of such strings likewise ([`same`]), without `memcmp`.

/// Copies `src` to `to`.
///
/// # Safety
/// `to` is valid for writes of `src.len()` bytes and does not overlap `src`.
#[inline(always)]
pub unsafe fn copy_to(to: *mut u8, src: &[u8]) {
    let (n, from) = (src.len(), src.as_ptr());
    // SAFETY: every read is within `src` and every write within the `n` bytes at `to` (the
    // caller's promise): each pair of moves covers [0, n) from both ends.
    unsafe {
        if n >= 16 {
            let mut i = 0;
            while i + 16 < n {
                to.add(i)
                    .cast::<[u8; 16]>()
                    .write_unaligned(from.add(i).cast::<[u8; 16]>().read_unaligned());
                i += 16;
            }
            let last = n - 16;
            to.add(last)
                .cast::<[u8; 16]>()
                .write_unaligned(from.add(last).cast::<[u8; 16]>().read_unaligned());
        } else if n >= 8 {
            to.cast::<u64>().write_unaligned(from.cast::<u64>().read_unaligned());
            to.add(n - 8)
                .cast::<u64>()
                .write_unaligned(from.add(n - 8).cast::<u64>().read_unaligned());
        } else if n >= 4 {
            to.cast::<u32>().write_unaligned(from.cast::<u32>().read_unaligned());
            to.add(n - 4)
                .cast::<u32>()
                .write_unaligned(from.add(n - 4).cast::<u32>().read_unaligned());
        } else {
            for i in 0..n {
                to.add(i).write(*from.add(i));
            }
        }
    }
}

/// `out.push_str(s)` through [`copy_to`].
#[inline(always)]
pub fn push_str(out: &mut String, s: &str) {
    out.reserve(s.len());
    // SAFETY: `reserve` made room for `s.len()` more bytes past the length, `copy_to` writes
    // exactly those, and appending a `str` to a `String` keeps it UTF-8.
    unsafe {
        let v = out.as_mut_vec();
        let len = v.len();
        copy_to(v.as_mut_ptr().add(len), s.as_bytes());
        v.set_len(len + s.len());
    }
}

/// `s`, at most 16 bytes, as a little-endian number (with its length, a form that tells any
/// two such strings apart), read by two overlapping fixed-size loads (their bytes agree
/// where they overlap) instead of a copy through memory.
#[inline(always)]
pub fn le_word(s: &[u8]) -> u128 {
    debug_assert!(s.len() <= 16);
    let n = s.len();
    if let (Some(a), Some(b)) = (s.first_chunk::<8>(), s.last_chunk::<8>()) {
        u128::from(u64::from_le_bytes(*a)) | u128::from(u64::from_le_bytes(*b)) << (8 * (n - 8))
    } else if let (Some(a), Some(b)) = (s.first_chunk::<4>(), s.last_chunk::<4>()) {
        u128::from(u32::from_le_bytes(*a)) | u128::from(u32::from_le_bytes(*b)) << (8 * (n - 4))
    } else if let (Some(a), Some(b)) = (s.first_chunk::<2>(), s.last_chunk::<2>()) {
        u128::from(u16::from_le_bytes(*a)) | u128::from(u16::from_le_bytes(*b)) << (8 * (n - 2))
    } else {
        s.first().map_or(0, |&b| u128::from(b))
    }
}

/// `a == b` without a call for strings of up to 16 bytes: their lengths, then one compare of
/// their words ([`le_word`]). (A compare of slices calls `memcmp`: matching a line's dim name,
/// seven bytes, was 3.5 % of a per-group job's samples, `perf`.)
#[inline(always)]
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && if a.len() <= 16 {
            le_word(a) == le_word(b)
        } else {
            a == b
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any string appended to any string is what `String::push_str` makes of them.
        #[test]
        fn push_str_appends_as_the_standard_one(head in "\\PC{0,40}", tail in "\\PC{0,80}") {
            let mut got = head.clone();
            push_str(&mut got, &tail);
            prop_assert_eq!(got, head + &tail);
        }

        /// `same` is `==`, on strings of every length round 16 that differ in a byte or in
        /// their length.
        #[test]
        fn same_is_equality(a in proptest::collection::vec(any::<u8>(), 0..24), at in any::<usize>(), flip in 1u8..,
                            cut in any::<bool>()) {
            prop_assert!(same(&a, &a));
            let mut b = a.clone();
            if cut {
                b.pop();
            } else if !b.is_empty() {
                let i = at % b.len();
                b[i] ^= flip;
            }
            prop_assert_eq!(same(&a, &b), a == b);
            prop_assert_eq!(same(&b, &a), a == b);
        }
    }

    /// Every length round each word size.
    #[test]
    fn every_short_length_is_copied_whole() {
        let src: Vec<u8> = (1..=80).collect();
        for n in 0..=80 {
            let mut to = vec![0u8; n + 2];
            // SAFETY: `to` has room for `n` bytes (and two more, which must stay 0)
            unsafe { copy_to(to.as_mut_ptr(), &src[..n]) };
            assert_eq!((&to[..n], &to[n..]), (&src[..n], &[0u8, 0][..]), "length {n}");
        }
    }
}

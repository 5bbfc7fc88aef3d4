//! Byte searches for the hot paths: the plain line's id (`event`), the field mapping's strings
//! (`format::scan`) and the newlines of a block of lines ([`newline_mask`], the line reader). On x86-64 sixteen bytes a step with SSE2 (part of every x86-64
//! CPU, so no feature detection); elsewhere eight bytes at a time in a `u64` (SWAR). Both are
//! property-tested against a byte-by-byte search.

/// `ONES * b` repeats byte `b` eight times.
const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit set in (at least) the first byte of `x` equal to `b`; the lowest set bit is
/// exact (bits above it may be false positives, which callers never look at).
#[inline]
fn bytes_equal(x: u64, b: u8) -> u64 {
    let y = x ^ (ONES * u64::from(b));
    y.wrapping_sub(ONES) & !y & HIGHS
}

/// The same for the first byte below 0x20 (a control character, not allowed raw in a string).
#[inline]
fn bytes_below_space(x: u64) -> u64 {
    x.wrapping_sub(ONES * 0x20) & !x & HIGHS
}

/// The bytes of `x` that end a JSON string's plain run: `"`, `\` or a control character, and
/// with `ASCII` any byte of 0x80 or above.
#[inline]
fn stops<const ASCII: bool>(x: u64) -> u64 {
    let high = if ASCII { x & HIGHS } else { 0 };
    bytes_equal(x, b'"') | bytes_equal(x, b'\\') | bytes_below_space(x) | high
}

/// Whether byte `b` ends a plain run (as [`stops`]).
#[inline]
fn is_stop<const ASCII: bool>(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20 || (ASCII && b >= 0x80)
}

/// The position of the first `"`, `\` or control character in `bytes` at or after `from`.
#[inline]
pub fn string_stop(bytes: &[u8], from: usize) -> Option<usize> {
    stop::<false>(bytes, from)
}

/// The same, stopping at a byte that is not ASCII too: a string whose run ends at its quote
/// is then ASCII, with no second pass over it to tell.
#[inline]
pub fn ascii_string_stop(bytes: &[u8], from: usize) -> Option<usize> {
    stop::<true>(bytes, from)
}

#[inline]
fn stop<const ASCII: bool>(bytes: &[u8], from: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        sse2::string_stop::<ASCII>(bytes, from)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        string_stop_swar::<ASCII>(bytes, from)
    }
}

/// [`string_stop`] eight bytes at a time in a `u64` (also the SSE2 search's last bytes).
#[inline]
fn string_stop_swar<const ASCII: bool>(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    // 16 bytes a round while they last, then 8, then one at a time
    while let Some(chunk) = bytes.get(at..at + 16) {
        let (a, b) = chunk.split_at(8);
        let sx = stops::<ASCII>(u64::from_le_bytes(a.try_into().ok()?));
        let sy = stops::<ASCII>(u64::from_le_bytes(b.try_into().ok()?));
        if sx != 0 {
            return Some(at + (sx.trailing_zeros() / 8) as usize);
        }
        if sy != 0 {
            return Some(at + 8 + (sy.trailing_zeros() / 8) as usize);
        }
        at += 16;
    }
    while let Some(chunk) = bytes.get(at..at + 8) {
        let s = stops::<ASCII>(u64::from_le_bytes(chunk.try_into().ok()?));
        if s != 0 {
            return Some(at + (s.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes
        .get(at..)?
        .iter()
        .position(|&b| is_stop::<ASCII>(b))
        .map(|i| at + i)
}

/// Whether every byte of `bytes` is ASCII (below 0x80): then it is UTF-8, with nothing more
/// to check.
#[inline]
pub fn is_ascii(bytes: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        sse2::is_ascii(bytes)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        is_ascii_swar(bytes)
    }
}

/// [`is_ascii`] eight bytes at a time in a `u64` (also the SSE2 check's short inputs).
#[inline]
fn is_ascii_swar(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    let mut high = 0;
    for word in &mut words {
        high |= u64::from_le_bytes(word.try_into().expect("8 bytes"));
    }
    high & HIGHS == 0 && words.remainder().iter().all(|&b| b < 0x80)
}

/// The newlines of 64 bytes as bits (bit `i`: byte `i` is `\n`). A reader of short lines finds
/// a block's lines from one mask instead of one `memchr` call per line, whose set-up cost more
/// than its search on a 40-byte line.
#[inline]
pub fn newline_mask(block: &[u8; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        sse2::newline_mask(block)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        newline_mask_swar(block)
    }
}

/// [`newline_mask`] eight bytes at a time in a `u64`.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))] // (the tests compare it with SSE2's)
fn newline_mask_swar(block: &[u8; 64]) -> u64 {
    let mut mask = 0;
    for (i, word) in block.chunks_exact(8).enumerate() {
        let y = u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ (ONES * u64::from(b'\n'));
        // exact per byte (no borrow between lanes): the high bit of a byte is set iff it was 0
        let zero = !(((y & !HIGHS) + !HIGHS) | y) & HIGHS;
        // gather the eight high bits into eight consecutive bits
        let bits = (zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= bits << (8 * i);
    }
    mask
}

/// The position of the first byte at or after `from` that is not an ASCII digit (or the end),
/// eight bytes a step.
#[inline]
pub fn digits_end(bytes: &[u8], from: usize) -> usize {
    const HIGH_NIBBLES: u64 = ONES * 0xf0;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        // a digit is 0x30..=0x39: high nibble 3, and still 3 after adding 6. Adding 6 carries
        // into the next byte only from a byte that is no digit, so the first one is exact.
        let not_digit =
            ((x & HIGH_NIBBLES) ^ (ONES * 0x30)) | ((x.wrapping_add(ONES * 6) & HIGH_NIBBLES) ^ (ONES * 0x30));
        if not_digit != 0 {
            return at + (not_digit.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + bytes
        .get(at..)
        .map_or(0, |rest| rest.iter().take_while(|b| b.is_ascii_digit()).count())
}

/// The position of the first NUL in `bytes` (a counter key's separator, `group::split_key`),
/// eight bytes a step, the last ones in the word that ends the slice.
#[inline]
pub fn nul_at(bytes: &[u8]) -> Option<usize> {
    let word = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|w| w.first_chunk::<8>())
            .map(|w| u64::from_le_bytes(*w))
    };
    let n = bytes.len();
    let mut at = 0;
    while let Some(x) = word(at) {
        let m = bytes_equal(x, 0);
        if m != 0 {
            return Some(at + (m.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    // (bytes before `at` hold no NUL: a match in the overlapping word is at or after it)
    match n.checked_sub(8).and_then(|last| Some((last, word(last)?))) {
        Some((last, x)) => {
            let m = bytes_equal(x, 0);
            (m != 0).then(|| last + (m.trailing_zeros() / 8) as usize)
        }
        None => bytes.iter().position(|&b| b == 0),
    }
}

/// The value of eight ASCII digits loaded little-endian (the first digit in the lowest byte):
/// three multiply-and-shift steps instead of eight multiply-adds. The bytes must be digits.
#[inline]
pub fn eight_digits(x: u64) -> u64 {
    // each step joins neighbouring lanes: bytes into 2-digit values, those into 4, into 8
    let v = x.wrapping_sub(ONES * 0x30);
    let v = (v.wrapping_mul(10) + (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_ffff_0000_ffff;
    (v.wrapping_mul(10_000) + (v >> 32)) & 0xffff_ffff
}

/// The value of at most 18 ASCII digits (no overflow): eight at a time, then the rest.
#[inline]
pub fn digits_value(digits: &[u8]) -> u64 {
    debug_assert!(digits.len() <= 18 && digits.iter().all(u8::is_ascii_digit));
    let mut value = 0;
    let mut rest = digits;
    while let Some((eight, after)) = rest.split_first_chunk::<8>() {
        value = value * 100_000_000 + eight_digits(u64::from_le_bytes(*eight));
        rest = after;
    }
    for &d in rest {
        value = value * 10 + u64::from(d - b'0');
    }
    value
}

/// The same search sixteen bytes a step (three compares and a mask), finishing the last
/// bytes with the `u64` search.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };

    /// (Inlined into the scanner: it is called for every key and string of a record, most of
    /// them a few bytes long. The last bytes of a record are searched with one 16-byte load
    /// ending at its end, not byte by byte.)
    #[inline(always)]
    pub(super) fn string_stop<const ASCII: bool>(bytes: &[u8], from: usize) -> Option<usize> {
        // the stops of the 16 bytes from `chunk` as bits
        let stops = |chunk: &[u8]| -> u32 {
            debug_assert_eq!(chunk.len(), 16);
            // SAFETY: SSE2 is part of every x86-64 CPU (the target's baseline), and the load
            // reads the 16 bytes of `chunk` (unaligned loads are allowed).
            unsafe {
                let x = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
                // a byte is a control character when min(byte, 0x1f) is the byte (unsigned)
                let control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);
                let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
                let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
                let stops = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32;
                // (a byte's high bit: not ASCII)
                if ASCII {
                    stops | _mm_movemask_epi8(x) as u32
                } else {
                    stops
                }
            }
        };
        let mut at = from;
        while let Some(chunk) = bytes.get(at..at + 16) {
            let mask = stops(chunk);
            if mask != 0 {
                return Some(at + mask.trailing_zeros() as usize);
            }
            at += 16;
        }
        // fewer than 16 bytes left: the last 16 of the record, less those before `at`
        match bytes.len().checked_sub(16) {
            Some(last) if at < bytes.len() => {
                let mask = stops(&bytes[last..]) >> (at - last);
                (mask != 0).then(|| at + mask.trailing_zeros() as usize)
            }
            _ => super::string_stop_swar::<ASCII>(bytes, at),
        }
    }

    /// (Sixteen bytes a step and the last sixteen in one load ending at the end, where the
    /// standard library's check goes 64 a step and then byte by byte: up to 63 bytes of a
    /// 255-byte Nexmark line.)
    #[inline]
    pub(super) fn is_ascii(bytes: &[u8]) -> bool {
        // the high bits of 16 bytes from `at` (SAFETY for both loads below: SSE2 is part of
        // every x86-64 CPU, and each reads 16 bytes inside `bytes`; unaligned loads are allowed)
        let load = |at: usize| unsafe { _mm_loadu_si128(bytes.as_ptr().add(at).cast::<__m128i>()) };
        if bytes.len() < 16 {
            return super::is_ascii_swar(bytes);
        }
        let mut high = load(bytes.len() - 16);
        let mut at = 0;
        while at + 16 < bytes.len() {
            // SAFETY: SSE2, as above
            high = unsafe { _mm_or_si128(high, load(at)) };
            at += 16;
        }
        // SAFETY: SSE2, as above
        unsafe { _mm_movemask_epi8(high) == 0 }
    }

    #[inline]
    pub(super) fn newline_mask(block: &[u8; 64]) -> u64 {
        // SAFETY: SSE2 is part of every x86-64 CPU, and the four loads read the block's four
        // 16-byte quarters (unaligned loads are allowed).
        unsafe {
            let newline = _mm_set1_epi8(b'\n' as i8);
            let quarter = |i: usize| {
                let x = _mm_loadu_si128(block.as_ptr().add(16 * i).cast::<__m128i>());
                u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(x, newline)) as u16)
            };
            quarter(0) | quarter(1) << 16 | quarter(2) << 32 | quarter(3) << 48
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same answer as a byte-by-byte search, from every start.
        #[test]
        fn string_stop_finds_the_first_stop(
            bytes in prop::collection::vec(prop_oneof![4 => any::<u8>(), 1 => Just(b'"'), 1 => Just(b'\\'), 40 => 0x20u8..0x7f, 4 => 0x80u8..], 0..90),
            from in 0usize..92,
        ) {
            let naive = bytes
                .get(from..)
                .and_then(|rest| rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20))
                .map(|i| from + i);
            prop_assert_eq!(string_stop(&bytes, from), naive);
            prop_assert_eq!(string_stop_swar::<false>(&bytes, from), naive);
            let naive_ascii = bytes
                .get(from..)
                .and_then(|rest| rest.iter().position(|&b| b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b)))
                .map(|i| from + i);
            prop_assert_eq!(ascii_string_stop(&bytes, from), naive_ascii);
            prop_assert_eq!(string_stop_swar::<true>(&bytes, from), naive_ascii);
        }

        /// The first NUL as a byte-by-byte search finds it, at every length round the step.
        #[test]
        fn nul_at_finds_the_first_nul(
            bytes in prop::collection::vec(prop_oneof![12 => 1u8.., 1 => Just(0u8), 1 => Just(0x80u8)], 0..40),
        ) {
            prop_assert_eq!(nul_at(&bytes), bytes.iter().position(|&b| b == 0));
        }

        /// ASCII exactly when no byte is 0x80 or above, by SSE2 and by SWAR alike, at every
        /// length round the 8- and 16-byte steps.
        #[test]
        fn is_ascii_finds_any_high_byte(
            bytes in prop::collection::vec(prop_oneof![60 => 0u8..0x80, 1 => 0x80u8..], 0..90),
        ) {
            let naive = bytes.iter().all(|&b| b < 0x80);
            prop_assert_eq!(is_ascii(&bytes), naive);
            prop_assert_eq!(is_ascii_swar(&bytes), naive);
        }

        /// Bit `i` is set exactly when byte `i` is a newline, by SSE2 and by SWAR alike.
        #[test]
        fn newline_mask_marks_the_newlines(
            bytes in prop::collection::vec(prop_oneof![4 => any::<u8>(), 1 => Just(b'\n'), 1 => Just(0x8a), 1 => Just(0x0b)], 64),
        ) {
            let block: &[u8; 64] = bytes.as_slice().try_into().expect("64 bytes");
            let naive = bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').fold(0u64, |m, (i, _)| m | 1 << i);
            prop_assert_eq!(newline_mask(block), naive);
            prop_assert_eq!(newline_mask_swar(block), naive);
        }

        /// The same end of a run of digits as a byte-by-byte search, from every start.
        #[test]
        fn digits_end_finds_the_first_non_digit(
            bytes in prop::collection::vec(prop_oneof![30 => b'0'..=b'9', 1 => any::<u8>(), 1 => 0xf6u8..], 0..40),
            from in 0usize..42,
        ) {
            let naive = from + bytes.get(from..).map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count());
            prop_assert_eq!(digits_end(&bytes, from), naive);
        }

        /// Up to 18 digits' value, as their decimal number.
        #[test]
        fn digits_value_is_the_decimal_number(n in 0u64..1_000_000_000_000_000_000, width in 1usize..19) {
            let text = format!("{n:0width$}");
            prop_assume!(text.len() <= 18);
            prop_assert_eq!(digits_value(text.as_bytes()), n);
        }

        /// Eight digits' value, as their decimal number.
        #[test]
        fn eight_digits_is_the_decimal_number(n in 0u64..100_000_000) {
            let text = format!("{n:08}");
            let word = u64::from_le_bytes(text.as_bytes().try_into().expect("eight bytes"));
            prop_assert_eq!(eight_digits(word), n);
        }
    }
}

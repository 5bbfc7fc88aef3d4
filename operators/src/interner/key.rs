//! A record's id in `W` bytes (16 or 28): up to `W - 2` bytes inline, longer ones in the
//! table's arena.
//!
//! The record used to hold a `CompactString` (24 bytes inline, a heap allocation beyond): 24
//! bytes per item for ids that are mostly shorter than 15, and an allocation with its
//! allocator slack for longer ones. A job that counts bare item ids has 16-byte keys: the
//! common id costs 16 bytes, a long one 16 plus its bytes in one arena shared by the table. A
//! job with per-group or distinct-user windows counts longer keys (`country=US NUL item`):
//! its keys are 28 bytes, so a record is as large as it was with a `CompactString` and keys of
//! up to 26 bytes stay inline. The key shape rides in the same bytes.

use crate::short_copy::le_word;

/// The key width of a job that counts bare item ids only (14 bytes inline).
pub const NARROW: usize = 16;

/// The key width of a job with counter keys (26 bytes inline).
pub const WIDE: usize = 28;

/// Marks a long key in byte 0 (a short key's length is at most `W - 2`).
const LONG: u8 = 0xFF;

/// An id and its key shape. Byte 0: the length of a short id, or [`LONG`]; byte 1: the key
/// shape; a short id's bytes from byte 2, the rest zero; a long id's length at bytes 4..8 and
/// its arena offset at 8..16 (both little-endian). Plain bytes (alignment 1), so a record packs
/// around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key<const W: usize>([u8; W]);

/// A short id's key with shape 0 as two little-endian words: bytes 0..16, and 16..W
/// zero-extended (see [`Key::short`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortProbe {
    head: u128,
    tail: u128,
}

/// Where a key's bytes are: inline, or a range of the arena.
enum Place<'a> {
    Inline(&'a [u8]),
    Arena(usize, usize),
}

impl<const W: usize> Key<W> {
    /// The longest id stored inline.
    pub const SHORT: usize = {
        assert!(W >= 16 && W - 2 < LONG as usize);
        W - 2
    };

    /// The key of a free slot: the empty id, shape 0, nothing in the arena.
    pub const EMPTY: Key<W> = Key([0; W]);

    /// The key of `id` with `shape`; a long id's bytes are appended to `arena`.
    #[inline]
    pub fn new(id: &str, shape: u8, arena: &mut Vec<u8>) -> Key<W> {
        let mut b = [0u8; W];
        b[1] = shape;
        if id.len() <= Self::SHORT {
            b[0] = id.len() as u8;
            b[2..2 + id.len()].copy_from_slice(id.as_bytes());
        } else {
            let len = u32::try_from(id.len()).expect("an id of 4 GiB or more");
            b[0] = LONG;
            b[4..8].copy_from_slice(&len.to_le_bytes());
            b[8..16].copy_from_slice(&(arena.len() as u64).to_le_bytes());
            arena.extend_from_slice(id.as_bytes());
        }
        Key(b)
    }
    /// The key shape (0: a bare item id).
    #[inline]
    pub fn shape(&self) -> u8 {
        self.0[1]
    }

    /// A long id's length in the arena (0 for a short one).
    #[inline]
    pub fn arena_len(&self) -> usize {
        match self.place() {
            Place::Inline(_) => 0,
            Place::Arena(_, len) => len,
        }
    }

    #[inline]
    fn place(&self) -> Place<'_> {
        if self.0[0] == LONG {
            let mut len = [0u8; 4];
            len.copy_from_slice(&self.0[4..8]);
            let mut off = [0u8; 8];
            off.copy_from_slice(&self.0[8..16]);
            Place::Arena(u64::from_le_bytes(off) as usize, u32::from_le_bytes(len) as usize)
        } else {
            Place::Inline(&self.0[2..2 + self.0[0] as usize])
        }
    }

    /// The id's bytes.
    #[inline]
    pub fn bytes<'a>(&'a self, arena: &'a [u8]) -> &'a [u8] {
        match self.place() {
            Place::Inline(b) => b,
            Place::Arena(off, len) => &arena[off..off + len],
        }
    }

    /// The id.
    #[inline]
    pub fn as_str<'a>(&'a self, arena: &'a [u8]) -> &'a str {
        let b = self.bytes(arena);
        debug_assert!(std::str::from_utf8(b).is_ok());
        // SAFETY: every key is made by `Key::new` from a `&str` (or moved by `Key::moved` with
        // the same bytes), so its bytes, inline or in the arena, are that string's UTF-8.
        unsafe { std::str::from_utf8_unchecked(b) }
    }

    /// The probe of a short id: the key it has with shape 0, to find its record by one
    /// compare of the whole key ([`Key::is_short`]); `None` for an id too long to be inline.
    ///
    /// Built and compared in registers, as two words. (Copied byte by byte into a zeroed key and
    /// then compared as whole words, a look-up stalled on every probe: a load that spans several
    /// smaller stores cannot be forwarded from them, so it waits until they reach the cache.
    /// That cost 3 % of counting. A wide probe as a 28-byte array was returned through the
    /// stack and loaded back: 58 % of the look-up's samples in a `by` job, `perf`.)
    #[inline(always)]
    pub fn short(id: &str) -> Option<ShortProbe> {
        const { assert!(W <= 32, "two words of key") };
        let id = id.as_bytes();
        if id.len() > Self::SHORT {
            return None;
        }
        // bytes 0..16: the length, shape 0, the id's first 14 bytes; bytes 16..W: the rest
        let (head, tail) = id.split_at(id.len().min(14));
        Some(ShortProbe {
            head: id.len() as u128 | le_word(head) << 16,
            tail: if W > 16 { le_word(tail) } else { 0 },
        })
    }

    /// Whether this is the key of the short id whose [`Key::short`] is `probe`, whatever its
    /// shape (a long key's byte 0 is never a short id's length; a short key's unused bytes are
    /// zero).
    #[inline(always)]
    pub fn is_short(&self, probe: &ShortProbe) -> bool {
        const SHAPE: u128 = 0xFF << 8;
        let (head, tail) = self.words();
        head & !SHAPE == probe.head && tail == probe.tail
    }

    /// The key's bytes 0..16 and 16..W (zero-extended), little-endian.
    #[inline(always)]
    fn words(&self) -> (u128, u128) {
        let mut head = [0u8; 16];
        head.copy_from_slice(&self.0[..16]);
        let mut tail = [0u8; 16];
        tail[..W - 16].copy_from_slice(&self.0[16..]);
        (u128::from_le_bytes(head), u128::from_le_bytes(tail))
    }

    /// Whether the id is `id` (lengths first: most probes that reach a record are hits).
    #[inline]
    pub fn is(&self, id: &str, arena: &[u8]) -> bool {
        match self.place() {
            Place::Inline(b) => b == id.as_bytes(),
            Place::Arena(off, len) => len == id.len() && &arena[off..off + len] == id.as_bytes(),
        }
    }

    /// A long key's bytes copied from `old` to the end of `new` (an arena's compaction); a short
    /// key is returned as it is.
    #[inline]
    pub fn moved(&self, old: &[u8], new: &mut Vec<u8>) -> Key<W> {
        match self.place() {
            Place::Inline(_) => *self,
            Place::Arena(off, len) => {
                let mut b = self.0;
                b[8..16].copy_from_slice(&(new.len() as u64).to_le_bytes());
                new.extend_from_slice(&old[off..off + len]);
                Key(b)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Keys give back their id and shape, short or long, after a compaction too, and match
        /// exactly their own id.
        #[test]
        fn keys_round_trip(ids in proptest::collection::vec(("\\PC{0,30}", any::<u8>()), 1..40), other in "\\PC{0,30}") {
            round_trip::<NARROW>(&ids, &other)?;
            round_trip::<WIDE>(&ids, &other)?;
        }

        /// A short id's probe, built in registers, is the key `Key::new` stores for it, at every
        /// length (each branch of `le_word`).
        #[test]
        fn a_short_probe_is_the_stored_key(id in "[a-z0-9\\x00-\\x7f]{0,30}") {
            let mut arena = Vec::new();
            prop_assert_eq!(Key::<NARROW>::short(&id), (id.len() <= 14).then(|| Key::<NARROW>::new(&id, 0, &mut arena).probe()));
            prop_assert_eq!(Key::<WIDE>::short(&id), (id.len() <= 26).then(|| Key::<WIDE>::new(&id, 0, &mut arena).probe()));
        }
    }

    #[test]
    fn a_short_probe_is_the_stored_key_at_every_length() {
        let mut arena = Vec::new();
        for n in 0..=26 {
            let id: String = (0..n).map(|i| char::from(b'a' + i as u8)).collect();
            assert_eq!(
                Key::<WIDE>::short(&id),
                Some(Key::<WIDE>::new(&id, 0, &mut arena).probe()),
                "length {n}"
            );
            if n <= 14 {
                assert_eq!(
                    Key::<NARROW>::short(&id),
                    Some(Key::<NARROW>::new(&id, 0, &mut arena).probe()),
                    "length {n}"
                );
            }
        }
        assert_eq!(Key::<NARROW>::short("abcdefghijklmno"), None);
        assert_eq!(Key::<WIDE>::short("abcdefghijklmnopqrstuvwxyz0"), None);
    }

    #[test]
    fn a_probe_tells_ids_apart_by_every_byte() {
        // ids of one length that differ in one byte, in the first word or the second, and
        // keys of another shape
        let mut arena = Vec::new();
        let id = "country=C12\0item-123456";
        for at in 0..id.len() {
            let mut other = id.as_bytes().to_vec();
            other[at] ^= 1;
            let other = String::from_utf8(other).expect("ASCII");
            let probe = Key::<WIDE>::short(&other).expect("short");
            for shape in [0, 3] {
                assert!(!Key::<WIDE>::new(id, shape, &mut arena).is_short(&probe), "byte {at}");
                assert!(
                    Key::<WIDE>::new(&other, shape, &mut arena).is_short(&probe),
                    "byte {at}"
                );
            }
        }
    }

    impl<const W: usize> Key<W> {
        /// The key's words as a probe (what `Key::short` must build for a short key of shape 0).
        fn probe(&self) -> ShortProbe {
            let (head, tail) = self.words();
            ShortProbe { head, tail }
        }
    }

    fn round_trip<const W: usize>(ids: &[(String, u8)], other: &str) -> Result<(), TestCaseError> {
        let short = Key::<W>::SHORT;
        let mut arena = Vec::new();
        let keys: Vec<Key<W>> = ids.iter().map(|(id, s)| Key::new(id, *s, &mut arena)).collect();
        let long: usize = ids.iter().map(|(id, _)| id.len()).filter(|&n| n > short).sum();
        prop_assert_eq!(arena.len(), long);
        let mut moved_arena = Vec::new();
        // every other key is dropped before the compaction
        let moved: Vec<(usize, Key<W>)> = keys
            .iter()
            .enumerate()
            .step_by(2)
            .map(|(i, k)| (i, k.moved(&arena, &mut moved_arena)))
            .collect();
        for (i, (id, shape)) in ids.iter().enumerate() {
            let k = &keys[i];
            prop_assert_eq!(k.as_str(&arena), id.as_str());
            prop_assert_eq!(k.shape(), *shape);
            prop_assert_eq!(k.arena_len(), if id.len() > short { id.len() } else { 0 });
            prop_assert!(k.is(id, &arena));
            prop_assert_eq!(k.is(other, &arena), id == other);
            if let Some(probe) = Key::<W>::short(other) {
                prop_assert_eq!(k.is_short(&probe), id == other);
            }
            if let Some(probe) = Key::<W>::short(id) {
                prop_assert!(k.is_short(&probe));
            }
        }
        for (i, k) in moved {
            prop_assert_eq!(k.as_str(&moved_arena), ids[i].0.as_str());
            prop_assert_eq!(k.shape(), ids[i].1);
        }
        Ok(())
    }

    #[test]
    fn empty_is_the_empty_short_id() {
        assert_eq!(Key::<NARROW>::EMPTY.as_str(&[]), "");
        assert!(Key::<WIDE>::EMPTY.arena_len() == 0 && Key::<WIDE>::EMPTY.shape() == 0);
        assert_eq!((Key::<NARROW>::SHORT, Key::<WIDE>::SHORT), (14, 26));
        assert_eq!(std::mem::size_of::<Key<NARROW>>(), 16);
        assert_eq!(std::mem::size_of::<Key<WIDE>>(), 28);
        assert_eq!(std::mem::align_of::<Key<WIDE>>(), 1);
    }
}

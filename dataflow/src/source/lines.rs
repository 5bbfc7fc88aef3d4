//! Splitting a byte stream into lines in bounded memory (the file and stdin readers).
//!
//! A line is everything up to `\n`; a trailing `\r` is dropped too, and a last line without a
//! newline still counts. A UTF-8 byte order mark (`EF BB BF`) at the very start of the stream
//! is dropped (editors on Windows write one), so the first line is not a bad record. A line longer than the limit (`source.max_record_bytes`) is never
//! buffered whole: the reader streams past its rest, keeping its first [`RAW_HEAD_BYTES`] and
//! counting its true length. A line whole in the reader's buffer (the usual one) is lent from
//! it, not copied. Memory: the underlying reader's buffer plus at most `limit + 1` bytes,
//! whatever the input.

use hotlist_operators::swar::newline_mask;
use std::io::{self, BufRead, Seek, SeekFrom};

/// How much of a too-large record its dead letter keeps: the first 4 KiB.
pub const RAW_HEAD_BYTES: usize = 4096;

/// The UTF-8 byte order mark, dropped at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One line as read.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A line of at most the limit (without its terminator).
    Whole(&'a [u8]),
    /// A longer one: its first bytes (at most [`RAW_HEAD_BYTES`]) and its true length.
    TooLarge {
        /// The first bytes.
        head: &'a [u8],
        /// Its length in bytes, without the terminator.
        len: u64,
    },
}

/// Reads lines of at most `limit` bytes from a buffered reader.
pub struct LineReader<R> {
    inner: R,
    limit: usize,
    /// The line being read: whole up to `limit + 1` bytes (room for a `\r` to drop), then
    /// only its head.
    buf: Vec<u8>,
    /// Bytes consumed so far.
    offset: u64,
    /// The first line has not been read yet (it may start with a byte order mark).
    first: bool,
    /// Bytes of the underlying buffer handed out as the last line, consumed at the next call
    /// (a line whole in the buffer is lent from it, not copied).
    lent: usize,
    /// What is known of the bytes after the last line (see [`Scanned`]).
    scanned: Scanned,
}

/// The newlines already found in the bytes after the last line, so that a block of short lines
/// is searched once ([`newline_mask`], 64 bytes at a time), not once per line: 150 of a
/// four-window job's ~1,900 instructions an event were a `memchr` call per 42-byte line.
/// Only the reader moves through its buffer, and the bytes after the last line stay in the
/// buffer until they are read: what was found there stays true until a line crosses the
/// buffer's end or the reader seeks (both start over).
#[derive(Clone, Copy, Default)]
struct Scanned {
    /// How many bytes from the start were searched.
    len: usize,
    /// Bit `i`: byte `i` is a newline (only bits below `len`; none at all when `len` > 64).
    newlines: u64,
}

impl Scanned {
    /// The first newline in `chunk` (the bytes after the last line, at least `len` of them),
    /// and what is known of the bytes after it.
    #[inline]
    fn next(self, chunk: &[u8]) -> Option<(usize, Scanned)> {
        // (a reader that returned fewer bytes than were searched: search again)
        let this = if self.len <= chunk.len() {
            self
        } else {
            Scanned::default()
        };
        // `mask`: the newlines of bytes at..end
        let (at, mask, end) = if this.newlines != 0 {
            (0, this.newlines, this.len)
        } else {
            let mut at = this.len;
            loop {
                let Some(block) = chunk.get(at..at + 64) else {
                    // the buffer's last bytes: searched to its end, nothing kept
                    let n = at + memchr::memchr(b'\n', &chunk[at..])?;
                    return Some((n, Scanned::default()));
                };
                let mask = newline_mask(block.try_into().expect("64 bytes"));
                if mask != 0 {
                    break (at, mask, at + 64);
                }
                at += 64;
            }
        };
        // what follows the newline stays known
        let first = mask.trailing_zeros() as usize;
        let n = at + first;
        let rest = Scanned {
            len: end - (n + 1),
            newlines: mask.checked_shr(first as u32 + 1).unwrap_or(0),
        };
        Some((n, rest))
    }
}

impl<R: BufRead> LineReader<R> {
    /// Lines of `inner`, longer than `limit` bytes reported as [`Line::TooLarge`].
    pub fn new(inner: R, limit: usize) -> LineReader<R> {
        LineReader {
            inner,
            limit,
            buf: Vec::with_capacity(256),
            offset: 0,
            first: true,
            lent: 0,
            scanned: Scanned::default(),
        }
    }

    /// Bytes consumed so far: where the next line starts (or where a failed read stopped).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The next line, or `None` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.inner.consume(std::mem::take(&mut self.lent));
        if !self.first {
            // the usual line: whole in the buffer, lent from it (found first, then taken: a
            // second `fill_buf` of a non-empty buffer only returns it)
            let scanned = self.scanned;
            let found = loop {
                match self.inner.fill_buf() {
                    Ok(chunk) => {
                        break scanned
                            .next(chunk)
                            .map(|(n, rest)| (n, chunk[..n].ends_with(b"\r"), rest))
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            if let Some((newline, cr, rest)) = found {
                let len = newline - usize::from(cr);
                if len <= self.limit {
                    let chunk = self.inner.fill_buf()?;
                    self.lent = newline + 1;
                    self.offset += self.lent as u64;
                    self.scanned = rest;
                    return Ok(Some(Line::Whole(&chunk[..len])));
                }
            }
        }
        self.scanned = Scanned::default();
        self.next_line_copied()
    }

    /// The next line gathered into the line buffer: the first line, one crossing the end of the
    /// buffer, a too-large one.
    fn next_line_copied(&mut self) -> io::Result<Option<Line<'_>>> {
        self.buf.clear();
        // the first line keeps room for a byte order mark, so one does not make it too large
        let bom_room = if self.first { BOM.len() } else { 0 };
        let (mut len, mut consumed_any, mut last) = (0u64, false, None);
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if !consumed_any {
                    return Ok(None);
                }
                break;
            }
            let newline = memchr::memchr(b'\n', chunk);
            let part = &chunk[..newline.unwrap_or(chunk.len())];
            keep(&mut self.buf, len, part, self.limit + 1 + bom_room);
            if let Some(&b) = part.last() {
                last = Some(b);
            }
            len += part.len() as u64;
            let used = part.len() + usize::from(newline.is_some());
            self.inner.consume(used);
            self.offset += used as u64;
            consumed_any = true;
            if newline.is_some() {
                break;
            }
        }
        if last == Some(b'\r') {
            if self.buf.len() as u64 == len {
                self.buf.pop();
            }
            len -= 1;
        }
        if std::mem::take(&mut self.first) && self.buf.starts_with(BOM) {
            self.buf.drain(..BOM.len());
            len -= BOM.len() as u64;
        }
        Ok(Some(if len > self.limit as u64 {
            let head = &self.buf[..self.buf.len().min(RAW_HEAD_BYTES)];
            Line::TooLarge { head, len }
        } else {
            Line::Whole(&self.buf)
        }))
    }
}

impl<R: BufRead + Seek> LineReader<R> {
    /// Goes on reading from byte `offset`, which must be where a line starts (a byte order mark
    /// is only dropped at offset 0).
    pub fn seek_to(&mut self, offset: u64) -> io::Result<()> {
        self.lent = 0; // (the seek discards the buffer the line was lent from)
        self.scanned = Scanned::default();
        self.inner.seek(SeekFrom::Start(offset))?;
        self.offset = offset;
        self.first = offset == 0;
        Ok(())
    }
}

/// Adds `part` to the line in `buf`, of which `seen` bytes came before: the whole line while it
/// fits in `whole` bytes; from then on only its first [`RAW_HEAD_BYTES`] (`buf` then holds
/// the first `min(seen, RAW_HEAD_BYTES)` bytes).
fn keep(buf: &mut Vec<u8>, seen: u64, part: &[u8], whole: usize) {
    if seen + part.len() as u64 <= whole as u64 {
        buf.extend_from_slice(part);
    } else {
        buf.truncate(RAW_HEAD_BYTES);
        let room = RAW_HEAD_BYTES.saturating_sub(buf.len());
        buf.extend_from_slice(&part[..part.len().min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Read};

    /// Every line of `input` read through a reader that hands out `chunk` bytes at a time.
    fn lines(input: &[u8], limit: usize, chunk: usize) -> Vec<(Vec<u8>, Option<u64>)> {
        let mut r = LineReader::new(BufReader::with_capacity(chunk, input), limit);
        let out = rest(&mut r);
        assert_eq!(r.offset(), input.len() as u64);
        out
    }

    /// The lines `r` reads from here on, owned: `(line, None)` or `(head, Some(len))`.
    fn rest<R: BufRead>(r: &mut LineReader<R>) -> Vec<(Vec<u8>, Option<u64>)> {
        let mut out = Vec::new();
        while let Some(line) = r.next_line().unwrap() {
            out.push(match line {
                Line::Whole(l) => (l.to_vec(), None),
                Line::TooLarge { head, len } => (head.to_vec(), Some(len)),
            });
        }
        out
    }

    fn whole(l: &[u8]) -> (Vec<u8>, Option<u64>) {
        (l.to_vec(), None)
    }

    /// What `lines` should give: `input` split at each `\n`, a trailing `\r` dropped, a last
    /// line without a newline kept, and lines longer than `limit` reported with their length
    /// (inputs here have no byte order mark and no line past `RAW_HEAD_BYTES`).
    fn model(input: &[u8], limit: usize) -> Vec<(Vec<u8>, Option<u64>)> {
        let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if input.is_empty() || input.ends_with(b"\n") {
            pieces.pop();
        }
        pieces
            .into_iter()
            .map(|p| {
                let l = p.strip_suffix(b"\r").unwrap_or(p);
                (l.to_vec(), (l.len() > limit).then_some(l.len() as u64))
            })
            .collect()
    }

    proptest::proptest! {
        /// Any lines, read through any buffer size (below, at and above the 64-byte blocks
        /// newlines are searched in), and read on after a seek to any line's start: the
        /// model's lines.
        #[test]
        fn any_lines_are_split_as_the_model_splits_them(
            lines in proptest::collection::vec(
                (proptest::collection::vec(proptest::prop_oneof![8 => b'a'..=b'z', 1 => proptest::strategy::Just(b'\r'), 1 => 0x80u8..0xee], 0..150), proptest::bool::ANY),
                0..40,
            ),
            last_newline in proptest::bool::ANY,
            chunk in proptest::sample::select(vec![1usize, 7, 63, 64, 65, 100, 1000, 1 << 16]),
            limit in proptest::sample::select(vec![50usize, 100, 1000]),
            seek in proptest::num::usize::ANY,
        ) {
            let mut input = Vec::new();
            for (i, (line, cr)) in lines.iter().enumerate() {
                input.extend_from_slice(line);
                if *cr {
                    input.push(b'\r');
                }
                if i + 1 < lines.len() || last_newline {
                    input.push(b'\n');
                }
            }
            let want = model(&input, limit);
            proptest::prop_assert_eq!(super::tests::lines(&input, limit, chunk), want.clone());
            // a seek to line `to`'s start after reading `read` lines, then the rest
            if !want.is_empty() {
                let (read, to) = (seek % (want.len() + 1), (seek / 64) % want.len());
                let mut r = LineReader::new(BufReader::with_capacity(chunk, std::io::Cursor::new(&input[..])), limit);
                let mut starts = vec![0];
                for _ in 0..want.len() {
                    r.next_line().unwrap();
                    starts.push(r.offset());
                }
                r.seek_to(0).unwrap();
                for _ in 0..read {
                    r.next_line().unwrap();
                }
                r.seek_to(starts[to]).unwrap();
                proptest::prop_assert_eq!(&rest(&mut r)[..], &want[to..]);
            }
        }
    }

    /// The line rules of files: `\n` and `\r\n` end a line, a last line needs no newline,
    /// empty lines count, whatever the read sizes.
    #[test]
    fn lines_crlf_and_last_line_without_newline() {
        for chunk in [1, 2, 3, 7, 1 << 16] {
            let got = lines(b"one\r\n\ntwo\nthree", 100, chunk);
            assert_eq!(got, vec![whole(b"one"), whole(b""), whole(b"two"), whole(b"three")]);
            assert_eq!(lines(b"", 100, chunk), vec![]);
            assert_eq!(lines(b"\n", 100, chunk), vec![whole(b"")]);
            assert_eq!(lines(b"a\r", 100, chunk), vec![whole(b"a")]);
        }
    }

    /// A line of exactly the limit is whole (also with a `\r\n`); one byte more is too large,
    /// with its true length and its first bytes; the next line is read normally.
    #[test]
    fn the_limit_is_inclusive_and_long_lines_keep_their_head() {
        for chunk in [1, 5, 4096, 1 << 16] {
            let at = |n: usize, end: &[u8]| [vec![b'x'; n], end.to_vec(), b"ok\n".to_vec()].concat();
            assert_eq!(lines(&at(10, b"\n"), 10, chunk), vec![whole(&[b'x'; 10]), whole(b"ok")]);
            assert_eq!(
                lines(&at(10, b"\r\n"), 10, chunk),
                vec![whole(&[b'x'; 10]), whole(b"ok")]
            );
            let got = lines(&at(11, b"\r\n"), 10, chunk);
            assert_eq!(got, vec![(vec![b'x'; 11], Some(11)), whole(b"ok")], "chunk {chunk}");
            // long lines: the head is the first 4 KiB, the length is exact
            let mut long: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
            long[5000] = b'\r';
            let input = [long.clone(), b"\nok".to_vec()].concat();
            for limit in [10, 4096, 9_999] {
                let got = lines(&input, limit, chunk);
                assert_eq!(got[0], (long[..RAW_HEAD_BYTES].to_vec(), Some(10_000)), "limit {limit}");
                assert_eq!(got[1], whole(b"ok"));
            }
            assert_eq!(lines(&input, 10_000, chunk)[0], whole(&long));
        }
    }

    /// A byte order mark at the start of the stream is dropped (whatever the read sizes, also
    /// from a line of exactly the limit); one anywhere else is data.
    #[test]
    fn a_leading_byte_order_mark_is_dropped() {
        for chunk in [1, 2, 3, 7, 1 << 16] {
            let got = lines(b"\xEF\xBB\xBFone\n\xEF\xBB\xBFtwo", 100, chunk);
            assert_eq!(got, vec![whole(b"one"), whole(b"\xEF\xBB\xBFtwo")]);
            assert_eq!(lines(b"\xEF\xBB\xBF", 100, chunk), vec![whole(b"")]);
            assert_eq!(lines(b"\xEF\xBB\xBF\r\nx", 100, chunk), vec![whole(b""), whole(b"x")]);
            assert_eq!(lines(b"\xEF\xBBx", 100, chunk), vec![whole(b"\xEF\xBBx")]);
            let exact = [BOM, &[b'x'; 10][..], b"\n"].concat();
            assert_eq!(lines(&exact, 10, chunk), vec![whole(&[b'x'; 10])]);
            let over = [BOM, &[b'x'; 11][..], b"\n"].concat();
            assert_eq!(lines(&over, 10, chunk), vec![(vec![b'x'; 11], Some(11))]);
        }
    }

    /// Memory stays bounded by the limit: a 64 MiB line through a 4 KiB limit never grows the
    /// line buffer past the head.
    #[test]
    fn a_huge_line_is_streamed_past() {
        let huge = std::io::repeat(b'z').take(64 << 20).chain(&b"\nnext\n"[..]);
        let mut r = LineReader::new(BufReader::with_capacity(1 << 16, huge), 4096);
        match r.next_line().unwrap() {
            Some(Line::TooLarge { head, len }) => {
                assert_eq!((head.len(), len), (RAW_HEAD_BYTES, 64 << 20));
            }
            other => panic!("{other:?}"),
        }
        assert!(r.buf.capacity() <= 2 * (4096 + 1), "{}", r.buf.capacity());
        assert_eq!(r.next_line().unwrap(), Some(Line::Whole(b"next")));
        assert_eq!(r.next_line().unwrap(), None);
    }

    /// Seeking to a line's start reads on from there, with the offsets of an unbroken read; a
    /// byte order mark is dropped only at offset 0.
    #[test]
    fn seeking_to_a_line_start_reads_on_from_it() {
        let input = b"\xEF\xBB\xBFone\r\ntwo\n\xEF\xBB\xBFthree\nfour";
        let mut r = LineReader::new(std::io::Cursor::new(&input[..]), 100);
        let mut starts = vec![0];
        while r.next_line().unwrap().is_some() {
            starts.push(r.offset());
        }
        assert_eq!(starts, vec![0, 8, 12, 21, 25]);
        let mut r = LineReader::new(std::io::Cursor::new(&input[..]), 100);
        r.seek_to(12).unwrap();
        assert_eq!(r.next_line().unwrap(), Some(Line::Whole(b"\xEF\xBB\xBFthree")));
        assert_eq!(r.offset(), 21);
        r.seek_to(0).unwrap();
        assert_eq!(r.next_line().unwrap(), Some(Line::Whole(b"one")));
        assert_eq!(r.offset(), 8);
    }

    /// A read error is returned (never taken for the end of the input), with the offset where
    /// reading stopped.
    #[test]
    fn a_read_error_is_returned_with_its_offset() {
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("disk on fire"));
                }
                let n = buf.len().min(self.0);
                buf[..n].fill(b'\n');
                self.0 -= n;
                Ok(n)
            }
        }
        let mut r = LineReader::new(BufReader::with_capacity(4, Failing(6)), 10);
        for _ in 0..6 {
            assert_eq!(r.next_line().unwrap(), Some(Line::Whole(b"")));
        }
        let err = r.next_line().unwrap_err();
        assert_eq!((err.to_string().as_str(), r.offset()), ("disk on fire", 6));
    }
}

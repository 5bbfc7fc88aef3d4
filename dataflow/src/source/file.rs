//! File and stdin readers: JSON lines, one partition each.
//!
//! Positions are 1-based line numbers. Lines are split by [`LineReader`] (`\n`, a trailing `\r`
//! dropped, a last line without a newline still counts), in bounded memory: a line longer than
//! `source.max_record_bytes` is a [`Record::TooLarge`] with its first 4 KiB. A read error fails
//! the run ([`ReadStatus::Failed`], naming the input, the byte offset and the line): the input is
//! the problem, not a record in it, and ending the partition there would seal lists of a
//! partially read input.
//!
//! A file reader can also say where its next line starts ([`FileReader::byte_mark`]) and seek
//! back there ([`FileReader::seek_to`]), checking the bytes before it: an `exact_at_seal`
//! replay reads its range without reading every line before it (positions stay line numbers).

use super::lines::{Line, LineReader};
use super::read_ahead::FileInput;
use super::{PartitionReader, ReadStatus, Record};
use crate::config::FileRange;
use anyhow::{bail, Context, Result};
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use hotlist_operators::replay::{ByteMark, MARK_CHECK_BYTES};
use std::fs::File;
use std::io::BufRead;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// Reads a JSON-lines file, or one range of it (`source.split`): its stripes, in turn.
pub struct FileReader {
    path: PathBuf,
    lines: LineReader<FileInput>,
    /// The range read (`None`: the whole file).
    range: Option<FileRange>,
    /// The stripe being read (see [`FileRange`]; `range.stripes()` once none is left).
    stripe: u64,
    /// Where the stripe ends: the next stripe's first line starts here (`None`: at the end of
    /// the file, also as it grows).
    end: Option<u64>,
    /// Lines read so far (of the range: positions count from its start).
    line: u64,
    /// Lines read to reach a resume position, and the byte reading of this stripe (re)started
    /// at, and the bytes read in the stripes before it.
    skipped: u64,
    start: u64,
    read_before: u64,
}

/// What a file reader went through: the lines it read only to reach its resume position, and
/// every byte it read from where it started (or sought to).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scanned {
    /// Lines read and dropped to reach the resume position.
    pub skipped_lines: u64,
    /// Bytes read.
    pub bytes: u64,
}

impl Scanned {
    /// Adds another reader's.
    pub fn add(&mut self, other: Scanned) {
        self.skipped_lines += other.skipped_lines;
        self.bytes += other.bytes;
    }
}

impl FileReader {
    /// Opens `path`, whose lines may be up to `max_record_bytes` long.
    pub fn open(path: &Path, max_record_bytes: usize) -> Result<FileReader> {
        let file = File::open(path).with_context(|| format!("cannot open input file {}", path.display()))?;
        let input = FileInput::open(file).with_context(|| format!("cannot open input file {}", path.display()))?;
        Ok(FileReader {
            path: path.to_path_buf(),
            lines: LineReader::new(input, max_record_bytes),
            range: None,
            stripe: 0,
            end: None,
            line: 0,
            skipped: 0,
            start: 0,
            read_before: 0,
        })
    }

    /// Opens `path`, or with `range` only the lines of that range's stripes (see
    /// [`FileRange`]): stripe `j` of `M` holds the lines that start in `[line_start(size·j/M),
    /// line_start(size·(j+1)/M))`, where `line_start(b)` is the first line start at or after
    /// byte `b` (0, or just after a `\n`), the last stripe reading on to the end, and range `i`
    /// reads stripes `i`, `i + count`, … So the ranges hold every line exactly once, whatever
    /// the line lengths, and a file read in ranges reads as many records as read whole.
    pub fn open_range(path: &Path, range: Option<FileRange>, max_record_bytes: usize) -> Result<FileReader> {
        let mut reader = FileReader::open(path, max_record_bytes)?;
        let Some(r) = range else { return Ok(reader) };
        reader.range = Some(r);
        reader
            .enter_stripe(u64::from(r.index))
            .with_context(|| format!("cannot read {} to cut range {}", path.display(), r.index + 1))?;
        Ok(reader)
    }

    /// Moves to the start of stripe `j` of the range, or past its last stripe when no line
    /// starts at or after stripe `j`'s cut (nor, then, at any later one).
    fn enter_stripe(&mut self, j: u64) -> std::io::Result<()> {
        let Some(r) = self.range else { return Ok(()) };
        let file = self.lines.get_ref().file();
        let Some(start) = line_start(file, r.hint(j))? else {
            self.stripe = r.stripes();
            self.end = Some(0);
            return Ok(());
        };
        let end = stripe_end(file, r, j)?;
        self.read_before += self.lines.offset().saturating_sub(self.start);
        self.lines.seek_to(start)?;
        (self.stripe, self.start, self.end) = (j, start, end);
        Ok(())
    }

    /// Whether the range's lines are all read: the next line starts at or after the end of the
    /// stripe, and the range has no later stripe with a line (it moves to the next one that
    /// has).
    #[inline]
    fn at_end(&mut self) -> std::io::Result<bool> {
        match self.end {
            Some(end) if self.lines.offset() >= end => self.next_stripe(),
            _ => Ok(false),
        }
    }

    /// [`at_end`](Self::at_end) past the end of a stripe.
    #[cold]
    fn next_stripe(&mut self) -> std::io::Result<bool> {
        let Some(r) = self.range else { return Ok(true) };
        while self.end.is_some_and(|end| self.lines.offset() >= end) {
            let next = self.stripe + u64::from(r.count);
            if next >= r.stripes() {
                self.stripe = r.stripes();
                return Ok(true);
            }
            self.enter_stripe(next)?;
        }
        Ok(self.stripe >= r.stripes())
    }

    /// Where the next line starts, with a check of the bytes before it (for a replay to
    /// [`seek_to`](Self::seek_to) it).
    pub fn byte_mark(&self) -> Result<ByteMark> {
        let offset = self.lines.offset();
        let before = self.bytes_before(offset)?;
        Ok(ByteMark::of(offset, &before))
    }

    /// Reads on from line `line` + 1, which starts at `mark` — if the file still has the bytes
    /// it had there when the mark was taken; otherwise it changed since (an error saying so).
    pub fn seek_to(&mut self, line: u64, mark: ByteMark) -> Result<()> {
        let len = self.lines.get_ref().file().metadata().map(|m| m.len()).unwrap_or(0);
        if len < mark.offset {
            bail!(
                "{} has {len} bytes, fewer than the {} before line {}: it changed since it was read",
                self.path.display(),
                mark.offset,
                line + 1
            );
        }
        let before = self.bytes_before(mark.offset)?;
        if ByteMark::of(mark.offset, &before) != mark {
            bail!(
                "{} changed since it was read: the bytes before line {} (byte {}) differ",
                self.path.display(),
                line + 1,
                mark.offset
            );
        }
        if let Some(r) = self.range {
            // the range's stripe the mark is in: the last of them starting at or before it
            let file = self.lines.get_ref().file();
            let starts_by = |t: u64| -> Result<bool> {
                let j = t * u64::from(r.count) + u64::from(r.index);
                let start = line_start(file, r.hint(j))
                    .with_context(|| format!("cannot read {} to cut its ranges", self.path.display()))?;
                Ok(start.is_some_and(|s| s <= mark.offset))
            };
            let (mut lo, mut hi) = (0, r.turns.max(1)); // the stripe is in turn lo..hi
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                match starts_by(mid)? {
                    true => lo = mid,
                    false => hi = mid,
                }
            }
            let j = lo * u64::from(r.count) + u64::from(r.index);
            if !starts_by(lo)? {
                // no stripe of the range starts by the mark: an empty range's (at byte 0)
                (self.line, self.stripe, self.end) = (line, r.stripes(), Some(0));
                return Ok(());
            }
            self.end = stripe_end(file, r, j)
                .with_context(|| format!("cannot read {} to cut its ranges", self.path.display()))?;
            self.stripe = j;
        }
        self.lines
            .seek_to(mark.offset)
            .with_context(|| format!("cannot seek {} to byte {}", self.path.display(), mark.offset))?;
        (self.line, self.start, self.read_before) = (line, mark.offset, 0);
        Ok(())
    }

    /// The bytes (up to `MARK_CHECK_BYTES`) that end at `offset`, read beside the buffered
    /// reader (which it does not move).
    fn bytes_before(&self, offset: u64) -> Result<Vec<u8>> {
        let from = offset.saturating_sub(MARK_CHECK_BYTES);
        let mut buf = vec![0u8; (offset - from) as usize];
        self.lines
            .get_ref()
            .file()
            .read_exact_at(&mut buf, from)
            .with_context(|| format!("cannot read {} at byte {from}", self.path.display()))?;
        Ok(buf)
    }

    /// What it went through so far.
    pub fn scanned(&self) -> Scanned {
        Scanned {
            skipped_lines: self.skipped,
            bytes: self.read_before + self.lines.offset().saturating_sub(self.start),
        }
    }

    /// Skips the first `lines` lines (resuming from a checkpoint). A file shorter than that
    /// has shrunk since: it is an error, so the job does not silently miss data.
    pub fn skip_to(&mut self, lines: u64) -> Result<()> {
        while self.line < lines {
            let at_end = self
                .at_end()
                .map_err(|e| anyhow::anyhow!("{}: {e}", self.failure_place()))?;
            let ended = at_end
                || match self.lines.next_line() {
                    Ok(line) => line.is_none(),
                    Err(e) => return Err(anyhow::anyhow!("{}: {e}", self.failure_place())),
                };
            if ended {
                anyhow::bail!(
                    "{} has {} lines, fewer than the checkpoint's {lines}",
                    self.path.display(),
                    self.line
                );
            }
            self.line += 1;
            self.skipped += 1;
        }
        Ok(())
    }

    /// Reads up to `budget` lines.
    pub fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        for n in 0..budget {
            match self.at_end() {
                Ok(false) => {}
                Ok(true) => return if n == 0 { ReadStatus::Ended } else { ReadStatus::Read(n) },
                Err(e) => return ReadStatus::Failed(format!("{}: {e}", self.failure_place())),
            }
            match self.lines.next_line() {
                Ok(None) => return if n == 0 { ReadStatus::Ended } else { ReadStatus::Read(n) },
                Ok(Some(line)) => f(record(line)),
                Err(e) => return ReadStatus::Failed(format!("{}: {e}", self.failure_place())),
            }
            self.line += 1;
        }
        ReadStatus::Read(budget)
    }

    /// Where a read failed: the file, the byte offset, the line.
    fn failure_place(&self) -> String {
        format!(
            "reading {} failed at byte {} (line {})",
            self.path.display(),
            self.lines.offset(),
            self.line + 1
        )
    }
}

/// The offset of the first line that starts at or after byte `at` of `file` (lines start at 0
/// and just after each `\n`); `None` when none does before its end.
fn line_start(file: &File, at: u64) -> std::io::Result<Option<u64>> {
    if at == 0 {
        return Ok(Some(0));
    }
    // the line starting at `at` is the one after the first `\n` from `at - 1` on; most lines
    // are short (a split file is cut at every stripe), so the first read is small
    let mut buf = vec![0u8; 4 << 10];
    let mut pos = at - 1;
    loop {
        let n = file.read_at(&mut buf, pos)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            let start = pos + i as u64 + 1;
            return Ok(Some(start));
        }
        pos += n as u64;
        if buf.len() < 64 << 10 {
            buf.resize(64 << 10, 0);
        }
    }
}

/// Where stripe `j` of range `r` ends: the next stripe's first line start (`u64::MAX` when no
/// line starts after the cut), or `None` for the file's last stripe (it reads on to the end).
fn stripe_end(file: &File, r: FileRange, j: u64) -> std::io::Result<Option<u64>> {
    match j + 1 < r.stripes() {
        true => Ok(Some(line_start(file, r.hint(j + 1))?.unwrap_or(u64::MAX))),
        false => Ok(None),
    }
}

/// A line as the record the source takes.
fn record(line: Line<'_>) -> Record<'_> {
    match line {
        Line::Whole(l) => Record::Line(l),
        Line::TooLarge { head, len } => Record::TooLarge { head, len, at: None },
    }
}

/// What the stdin thread hands over.
enum FromStdin {
    /// A line of at most `source.max_record_bytes`.
    Line(Vec<u8>),
    /// A longer one: its first 4 KiB and its length.
    TooLarge(Vec<u8>, u64),
    /// Reading failed: the run fails with this message.
    Failed(String),
}

impl FromStdin {
    fn bytes(&self) -> usize {
        match self {
            FromStdin::Line(l) | FromStdin::TooLarge(l, _) => l.len(),
            FromStdin::Failed(_) => 0,
        }
    }
}

/// At most this many bytes of stdin lines wait for the job (besides one line of any size).
const STDIN_BUFFER_BYTES: usize = 64 << 20;

/// The bytes of lines waiting in the stdin channel, so a fast producer and a slow job never
/// hold more than [`STDIN_BUFFER_BYTES`] (the channel also bounds the count of lines).
#[derive(Default)]
struct InFlight {
    bytes: Mutex<usize>,
    freed: Condvar,
}

impl InFlight {
    /// Waits until `n` more bytes fit (always when none are waiting), then counts them.
    fn reserve(&self, n: usize) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        while *bytes > 0 && *bytes + n > STDIN_BUFFER_BYTES {
            bytes = self.freed.wait(bytes).unwrap_or_else(|e| e.into_inner());
        }
        *bytes += n;
    }

    /// `n` bytes were taken.
    fn release(&self, n: usize) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        *bytes = bytes.saturating_sub(n);
        self.freed.notify_one();
    }
}

/// Reads standard input on a helper thread, so a slow producer never blocks the worker.
pub struct StdinReader {
    rx: Receiver<FromStdin>,
    in_flight: Arc<InFlight>,
}

impl StdinReader {
    /// Starts the reading thread; lines may be up to `max_record_bytes` long.
    pub fn spawn(max_record_bytes: usize) -> StdinReader {
        let (tx, rx) = crossbeam_channel::bounded(1 << 16);
        let in_flight = Arc::new(InFlight::default());
        let shared = in_flight.clone();
        std::thread::Builder::new()
            .name("hotlist-stdin".into())
            .spawn(move || {
                let stdin = std::io::stdin();
                read_lines(LineReader::new(stdin.lock(), max_record_bytes), &tx, &shared);
            })
            .map(|_| ())
            .unwrap_or_else(|e| tracing::error!("cannot start the stdin reader: {e}"));
        StdinReader { rx, in_flight }
    }

    /// Takes up to `budget` lines that have arrived.
    pub fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        for n in 0..budget {
            let item = match self.rx.try_recv() {
                Ok(item) => item,
                Err(TryRecvError::Empty) => {
                    return if n == 0 {
                        ReadStatus::Waiting
                    } else {
                        ReadStatus::Read(n)
                    }
                }
                Err(TryRecvError::Disconnected) => return if n == 0 { ReadStatus::Ended } else { ReadStatus::Read(n) },
            };
            self.in_flight.release(item.bytes());
            match &item {
                FromStdin::Line(l) => f(Record::Line(l)),
                FromStdin::TooLarge(head, len) => f(Record::TooLarge {
                    head,
                    len: *len,
                    at: None,
                }),
                FromStdin::Failed(e) => return ReadStatus::Failed(e.clone()),
            }
        }
        ReadStatus::Read(budget)
    }
}

/// The stdin thread: every line into `tx` until the end of the input, a read error (sent
/// as the last item) or the job going away.
fn read_lines<R: BufRead>(mut lines: LineReader<R>, tx: &Sender<FromStdin>, in_flight: &InFlight) {
    let mut number = 0u64;
    loop {
        number += 1;
        let item = match lines.next_line() {
            Ok(None) => return,
            Ok(Some(Line::Whole(l))) => FromStdin::Line(l.to_vec()),
            Ok(Some(Line::TooLarge { head, len })) => FromStdin::TooLarge(head.to_vec(), len),
            Err(e) => FromStdin::Failed(format!(
                "reading stdin failed at byte {} (line {number}): {e}",
                lines.offset()
            )),
        };
        let last = matches!(item, FromStdin::Failed(_));
        in_flight.reserve(item.bytes());
        if tx.send(item).is_err() || last {
            return;
        }
    }
}

impl PartitionReader for FileReader {
    #[inline]
    fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        FileReader::read(self, budget, f)
    }

    fn resume_at(&mut self, position: u64) -> Result<u64> {
        self.skip_to(position).map(|()| position)
    }
}

impl PartitionReader for StdinReader {
    #[inline]
    fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        StdinReader::read(self, budget, f)
    }

    fn resume_at(&mut self, _: u64) -> Result<u64> {
        anyhow::bail!("standard input cannot be replayed")
    }

    fn can_idle(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Range `index` of `count` of a `size`-byte file read in stripes of `stripe` bytes
    /// (`None`: one contiguous range each).
    fn range_of(index: u32, count: u32, size: u64, stripe: Option<u64>) -> Option<FileRange> {
        (count > 1).then(|| FileRange {
            index,
            count,
            size,
            turns: stripe.map_or(1, |s| crate::config::split_turns(size, count, s)),
        })
    }

    /// The lines `r` reads on: `(stripe, line)`s.
    fn read_rest(r: &mut FileReader) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        loop {
            let mut got = Vec::new();
            let status = r.read(1, &mut |rec| {
                got.push(match rec {
                    Record::Line(l) => l.to_vec(),
                    Record::TooLarge { head, .. } => [b"TOO:", head].concat(),
                    _ => panic!("not a file record"),
                })
            });
            out.extend(got.into_iter().map(|l| (r.stripe, l)));
            match status {
                ReadStatus::Read(_) => {}
                ReadStatus::Ended => return out,
                other => panic!("{other:?}"),
            }
        }
    }

    /// Every line of `path` as read: `(range, stripe, line)`s, range by range.
    fn read_ranges(path: &Path, count: u32, size: u64, stripe: Option<u64>) -> Vec<(u32, u64, Vec<u8>)> {
        let mut out = Vec::new();
        for index in 0..count {
            let mut r = FileReader::open_range(path, range_of(index, count, size, stripe), 64).expect("opens");
            out.extend(read_rest(&mut r).into_iter().map(|(j, l)| (index, j, l)));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// A file read as `count` ranges, contiguous or in stripes, gives every line exactly
        /// once, in order: the stripes' lines put together in stripe order are the whole
        /// file's, and range `i` reads stripes `i`, `i + count`, … (line lengths around and
        /// beyond the stripe size, empty lines, CRLF, a last line without a newline, long
        /// lines); a range resumed at any position, or sought to a mark taken there, reads on
        /// as it would have.
        #[test]
        fn ranges_hold_every_line_once(
            lines in prop::collection::vec(prop_oneof![
                4 => "[a-z]{0,12}",
                1 => "[a-z]{60,90}",
                1 => Just(String::new()),
                1 => "[a-z]{1,5}\r",
            ], 0..40),
            newline_at_end in any::<bool>(),
            count in 1u32..7,
            stripe in prop::option::of(1u64..64),
            resume in any::<prop::sample::Index>(),
        ) {
            let mut text = lines.join("\n");
            if newline_at_end && !text.is_empty() {
                text.push('\n');
            }
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("in.jsonl");
            std::fs::write(&path, &text).expect("written");
            let size = text.len() as u64;
            let whole: Vec<Vec<u8>> = read_ranges(&path, 1, size, None).into_iter().map(|(_, _, l)| l).collect();
            let mut split = read_ranges(&path, count, size, stripe);
            for (i, j, _) in &split {
                prop_assert_eq!(*j % u64::from(count), u64::from(*i), "range {} read stripe {}", i, j);
            }
            split.sort_by_key(|(_, j, _)| *j); // stable: each stripe's lines stay in order
            let together: Vec<Vec<u8>> = split.iter().map(|(_, _, l)| l.clone()).collect();
            prop_assert_eq!(&together, &whole);
            // resuming range i at position k reads its lines k.. (positions count in the range)
            let index = resume.index(count as usize) as u32;
            let range = range_of(index, count, size, stripe);
            let mut r = FileReader::open_range(&path, range, 64).expect("opens");
            let of_range = read_rest(&mut r);
            let k = resume.index(of_range.len() + 1) as u64;
            let mut r = FileReader::open_range(&path, range, 64).expect("opens");
            r.resume_at(k).expect("resumes");
            prop_assert_eq!(&read_rest(&mut r), &of_range[k as usize..].to_vec());
            // a mark taken there and sought to by another reader: the same
            let mut marked = FileReader::open_range(&path, range, 64).expect("opens");
            marked.resume_at(k).expect("resumes");
            let mark = marked.byte_mark().expect("mark");
            let mut sought = FileReader::open_range(&path, range, 64).expect("opens");
            sought.seek_to(k, mark).expect("seeks");
            prop_assert_eq!(&read_rest(&mut sought), &of_range[k as usize..].to_vec());
            // resuming past the range's lines is an error (the file changed), not an empty read
            let mut again = FileReader::open_range(&path, range, 64).expect("opens");
            prop_assert!(again.resume_at(of_range.len() as u64 + 1).is_err());
        }
    }

    #[test]
    fn lines_crlf_and_last_line_without_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        std::fs::write(&p, b"one\r\n\ntwo\nthree").unwrap();
        let mut r = FileReader::open(&p, 100).unwrap();
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut collect = |rec: Record<'_>| {
            if let Record::Line(l) = rec {
                got.push(l.to_vec())
            }
        };
        assert_eq!(r.read(2, &mut collect), ReadStatus::Read(2));
        assert_eq!(r.read(10, &mut collect), ReadStatus::Read(2));
        assert_eq!(r.read(10, &mut collect), ReadStatus::Ended);
        assert_eq!(
            got,
            vec![b"one".to_vec(), b"".to_vec(), b"two".to_vec(), b"three".to_vec()]
        );
    }

    /// A line over the limit is one too-large record (and one line: positions stay line
    /// numbers, also when resuming past it).
    #[test]
    fn a_long_line_is_one_too_large_record() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        std::fs::write(&p, [&[b'x'; 5000][..], b"\nok\n"].concat()).unwrap();
        let mut r = FileReader::open(&p, 100).unwrap();
        let mut got = Vec::new();
        r.read(10, &mut |rec| match rec {
            Record::TooLarge { head, len, at: None } => got.push((head.len(), len)),
            Record::Line(l) => got.push((l.len(), 0)),
            _ => panic!("unexpected record"),
        });
        assert_eq!(got, vec![(4096, 5000), (2, 0)]);
        let mut r = FileReader::open(&p, 100).unwrap();
        r.skip_to(1).unwrap();
        let mut second = Vec::new();
        r.read(10, &mut |rec| {
            if let Record::Line(l) = rec {
                second.push(l.to_vec())
            }
        });
        assert_eq!(second, vec![b"ok".to_vec()]);
    }

    /// An input that cannot be read fails, naming the file, the offset and the line.
    #[test]
    fn a_read_error_fails_the_partition() {
        // reading a process's own memory at address 0 is an I/O error
        let mut r = FileReader::open(Path::new("/proc/self/mem"), 100).unwrap();
        match r.read(10, &mut |_| panic!("no record")) {
            ReadStatus::Failed(e) => assert!(
                e.starts_with("reading /proc/self/mem failed at byte 0 (line 1): "),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let err = FileReader::open(Path::new("/nonexistent/x.jsonl"), 100)
            .err()
            .expect("error");
        assert!(format!("{err:#}").contains("/nonexistent/x.jsonl"));
    }

    /// The stdin buffer is bounded by bytes: a line that does not fit waits until the job took
    /// enough; a line larger than the whole budget still passes when nothing else waits.
    #[test]
    fn stdin_lines_in_flight_are_bounded_by_bytes() {
        let in_flight = Arc::new(InFlight::default());
        in_flight.reserve(STDIN_BUFFER_BYTES - 10);
        let (done, reserved) = crossbeam_channel::bounded(1);
        let waiting = in_flight.clone();
        let t = std::thread::spawn(move || {
            waiting.reserve(11);
            done.send(()).expect("send");
        });
        let still_waiting = reserved.recv_timeout(std::time::Duration::from_millis(100));
        assert!(still_waiting.is_err(), "11 more bytes do not fit");
        in_flight.release(STDIN_BUFFER_BYTES - 10);
        reserved.recv().expect("reserved once released");
        t.join().expect("thread");
        in_flight.release(11);
        in_flight.reserve(2 * STDIN_BUFFER_BYTES); // alone: passes
    }

    /// The stdin thread's loop: lines, a too-large one, and a read error as the last item.
    #[test]
    fn stdin_lines_and_a_read_error() {
        let (tx, rx) = crossbeam_channel::bounded(16);
        let in_flight = InFlight::default();
        let input = [&b"a\n"[..], &[b'y'; 300], b"\nb"].concat();
        read_lines(LineReader::new(&input[..], 100), &tx, &in_flight);
        let got: Vec<(Vec<u8>, u64)> = rx
            .try_iter()
            .map(|i| match i {
                FromStdin::Line(l) => (l, 0),
                FromStdin::TooLarge(h, len) => (h, len),
                FromStdin::Failed(e) => panic!("{e}"),
            })
            .collect();
        assert_eq!(
            got,
            vec![(b"a".to_vec(), 0), (vec![b'y'; 300], 300), (b"b".to_vec(), 0)]
        );
        let mut mem = std::io::BufReader::new(File::open("/proc/self/mem").unwrap());
        read_lines(LineReader::new(&mut mem, 100), &tx, &in_flight);
        match rx.try_recv() {
            Ok(FromStdin::Failed(e)) => assert!(e.starts_with("reading stdin failed at byte 0 (line 1): "), "{e}"),
            _ => panic!("a failure"),
        }
    }
}

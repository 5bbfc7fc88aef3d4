//! A file's bytes read ahead on a thread of its own, so that the kernel's copy of them does
//! not run on the worker that parses them.
//!
//! `read()` on the worker thread copied every byte from the page cache on that thread: on
//! Nexmark Q5 (255-byte bid lines, 1 worker) the copy was 13 % of the worker's samples
//! (`_copy_to_iter`, `perf`). A [`ReadAhead`] asks a helper thread for the next chunks by offset
//! (`pread`) and lends each answered chunk, as a `BufReader` lends its buffer; while the worker
//! parses one chunk, the helper copies the next. Where the job has a core to spare, the copy
//! is off the worker's path.
//!
//! Bounded: at most [`IN_FLIGHT`] chunks asked for at a time, each of [`CHUNK`] bytes, and
//! their buffers reused: 3 MiB a reader (the chunk lent out and two asked for), against the
//! 1 MiB buffer of a reader without a helper. Helper threads are bounded per process
//! ([`MAX_THREADS`]): a job of many files reads the rest of them as before, through a
//! `BufReader` ([`FileInput::Direct`]), as do all where the workers take every core
//! ([`use_spare_cores`]).
//!
//! The same bytes as a plain read, whatever the timing: a chunk is asked for by its offset, and
//! an answer shorter than a chunk (the file's end, as it was then) drops the asks past it, so
//! a file that grows is read on from where it ended, as `read()` would; an error is the
//! caller's at the offset it happened.

use crossbeam_channel::{bounded, Receiver, Sender};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The bytes of one chunk: each is a hand-over between the threads (a wake-up, a first touch
/// on the worker's core), so fewer are faster. Nexmark Q5, 4 M bids, 1 worker, medians of 5–7
/// runs (2-core Intel Xeon VM): 64 KiB 1.31 s, 256 KiB 1.21 s, 1 MiB 1.15 s, 2 MiB 1.18 s,
/// against 1.28 s read on the worker.
pub const CHUNK: usize = 1 << 20;

/// Chunks asked for and not yet taken: the one the helper reads while the worker parses,
/// and one more to absorb an uneven pace.
const IN_FLIGHT: usize = 2;

/// Helper threads at most per process; readers past them read on the worker.
pub const MAX_THREADS: usize = 16;

/// The buffer of a reader without a helper (the file reader's buffer before read-ahead).
const DIRECT_BUFFER: usize = CHUNK;

/// Helper threads running.
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Whether readers may take helper threads (see [`use_spare_cores`]).
static SPARE_CORES: AtomicBool = AtomicBool::new(true);

/// Lets file readers read ahead on helper threads only where this process's `workers` leave a
/// core spare. On 2 cores, 2 workers with helpers were 1.05× slower (the 4-window job, 16 M
/// events, `-n 11`): every core already parses, so a helper's copy only moves work between
/// them and adds the hand-over; 1 worker with them was 0.94× (Nexmark Q5).
pub fn use_spare_cores(workers: usize) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    SPARE_CORES.store(has_spare_core(workers, cores), Ordering::Release);
}

/// Whether `workers` threads leave one of `cores` spare.
fn has_spare_core(workers: usize, cores: usize) -> bool {
    workers < cores
}

/// A file's bytes, buffered: read ahead on a helper thread when one is free, else read on the
/// caller's thread.
pub enum FileInput {
    /// Read ahead by a helper thread.
    Ahead(ReadAhead),
    /// Read when needed, through a buffer.
    Direct(BufReader<File>),
}

impl FileInput {
    /// `file` read ahead if the process has a core to spare and a helper thread is free (and
    /// starts), else directly.
    pub fn open(file: File) -> io::Result<FileInput> {
        if !SPARE_CORES.load(Ordering::Acquire) {
            return Ok(FileInput::direct(file));
        }
        let Some(slot) = Slot::take() else {
            return Ok(FileInput::direct(file));
        };
        match ReadAhead::spawn(Arc::new(file), slot) {
            Ok(ahead) => Ok(FileInput::Ahead(ahead)),
            Err((e, file)) => {
                tracing::debug!("no read-ahead thread, reading on the worker: {e}");
                // (the thread's closure, and its handle on the file, dropped with the error)
                let file = Arc::try_unwrap(file).or_else(|shared| shared.try_clone())?;
                Ok(FileInput::direct(file))
            }
        }
    }

    /// `file` read directly, without a helper.
    pub fn direct(file: File) -> FileInput {
        FileInput::Direct(BufReader::with_capacity(DIRECT_BUFFER, file))
    }

    /// The file, for reads at an offset beside the buffered ones (which they do not move).
    pub fn file(&self) -> &File {
        match self {
            FileInput::Ahead(a) => &a.file,
            FileInput::Direct(b) => b.get_ref(),
        }
    }

    /// Whether a helper thread reads it ahead.
    #[cfg(test)]
    pub fn is_ahead(&self) -> bool {
        matches!(self, FileInput::Ahead(_))
    }
}

impl Read for FileInput {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        match self {
            FileInput::Ahead(a) => a.read(out),
            FileInput::Direct(b) => b.read(out),
        }
    }
}

impl BufRead for FileInput {
    #[inline]
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        match self {
            FileInput::Ahead(a) => a.fill_buf(),
            FileInput::Direct(b) => b.fill_buf(),
        }
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        match self {
            FileInput::Ahead(a) => a.consume(n),
            FileInput::Direct(b) => b.consume(n),
        }
    }
}

impl Seek for FileInput {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        match self {
            FileInput::Ahead(a) => a.seek(to),
            FileInput::Direct(b) => b.seek(to),
        }
    }
}

/// One of the process's [`MAX_THREADS`] helper threads, given back when dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        THREADS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_THREADS).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        THREADS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Asks the helper for the bytes at `offset`, into `buf` (a spare buffer, resized there).
struct Ask {
    generation: u64,
    offset: u64,
    buf: Vec<u8>,
}

/// The helper's answer: `buf` holds the bytes read (`Ok(n)`: `n` of them, fewer than a chunk
/// only at the file's end as it was then).
struct Answer {
    generation: u64,
    offset: u64,
    buf: Vec<u8>,
    read: io::Result<usize>,
}

/// A file read ahead by a helper thread (see the module docs).
pub struct ReadAhead {
    file: Arc<File>,
    /// The chunk lent out: `chunk[at..len]` is what is left of it; it starts at byte `pos`.
    chunk: Vec<u8>,
    at: usize,
    len: usize,
    pos: u64,
    /// Where the next chunk to ask for starts.
    next: u64,
    /// Answers to asks of an older generation (before a seek or a short read) are dropped.
    generation: u64,
    /// Asks whose answers have not been taken, of any generation (at most [`IN_FLIGHT`]).
    in_flight: usize,
    /// Buffers to ask with (answered chunks no longer lent).
    spare: Vec<Vec<u8>>,
    asks: Option<Sender<Ask>>,
    answers: Receiver<Answer>,
    helper: Option<JoinHandle<()>>,
    _slot: Slot,
}

impl ReadAhead {
    /// Starts the helper; the error and the file back if the thread cannot be started.
    fn spawn(file: Arc<File>, slot: Slot) -> Result<ReadAhead, (io::Error, Arc<File>)> {
        // (both bounded by IN_FLIGHT: neither side ever waits to send)
        let (ask_tx, ask_rx) = bounded::<Ask>(IN_FLIGHT);
        let (answer_tx, answer_rx) = bounded::<Answer>(IN_FLIGHT);
        let read_file = Arc::clone(&file);
        let helper = std::thread::Builder::new()
            .name("hotlist-read-ahead".into())
            .spawn(move || help(&read_file, &ask_rx, &answer_tx));
        match helper {
            Ok(helper) => Ok(ReadAhead {
                file,
                chunk: Vec::new(),
                at: 0,
                len: 0,
                pos: 0,
                next: 0,
                generation: 0,
                in_flight: 0,
                spare: Vec::new(),
                asks: Some(ask_tx),
                answers: answer_rx,
                helper: Some(helper),
                _slot: slot,
            }),
            Err(e) => Err((e, file)),
        }
    }

    /// Takes the next answer of this generation as the chunk lent out (an error is the
    /// caller's; the next call asks again from where it happened).
    #[cold]
    fn refill(&mut self) -> io::Result<()> {
        loop {
            while self.in_flight < IN_FLIGHT {
                let ask = Ask {
                    generation: self.generation,
                    offset: self.next,
                    buf: self.spare.pop().unwrap_or_default(),
                };
                let asks = self.asks.as_ref().expect("asks open until dropped");
                asks.send(ask).map_err(|_| stopped())?;
                self.next += CHUNK as u64;
                self.in_flight += 1;
            }
            let answer = self.answers.recv().map_err(|_| stopped())?;
            self.in_flight -= 1;
            if answer.generation != self.generation {
                self.spare.push(answer.buf);
                continue;
            }
            let old = std::mem::replace(&mut self.chunk, answer.buf);
            if old.capacity() > 0 {
                self.spare.push(old);
            }
            (self.at, self.pos) = (0, answer.offset);
            return match answer.read {
                Ok(n) => {
                    self.len = n;
                    if n < CHUNK {
                        // the file ended there (for now): what was asked past it is dropped,
                        // and the next ask is for the bytes after it
                        self.restart_at(answer.offset + n as u64);
                    }
                    Ok(())
                }
                Err(e) => {
                    self.len = 0;
                    self.restart_at(answer.offset);
                    Err(e)
                }
            };
        }
    }

    /// Drops what was asked for and asks next for the bytes at `offset`.
    fn restart_at(&mut self, offset: u64) {
        self.generation += 1;
        self.next = offset;
    }
}

/// The helper thread: answers asks until the reader is dropped.
fn help(file: &File, asks: &Receiver<Ask>, answers: &Sender<Answer>) {
    for Ask {
        generation,
        offset,
        mut buf,
    } in asks
    {
        buf.resize(CHUNK, 0);
        let read = read_full_at(file, &mut buf, offset);
        let answer = Answer {
            generation,
            offset,
            buf,
            read,
        };
        if answers.send(answer).is_err() {
            return;
        }
    }
}

/// Reads `buf.len()` bytes at `offset`, fewer only at the end of the file.
fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(m) => n += m,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The helper is gone (it cannot stop while its reader lives, unless it panicked).
fn stopped() -> io::Error {
    io::Error::other("the read-ahead thread stopped")
}

impl Read for ReadAhead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for ReadAhead {
    #[inline]
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at >= self.len {
            self.refill()?;
        }
        Ok(&self.chunk[self.at..self.len])
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.len);
    }
}

impl Seek for ReadAhead {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let here = self.pos + self.at as u64;
        let offset = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::Current(d) => here.checked_add_signed(d),
            SeekFrom::End(d) => self.file.metadata()?.len().checked_add_signed(d),
        }
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a seek before the start of the file"))?;
        (self.at, self.len, self.pos) = (0, 0, offset);
        self.restart_at(offset);
        Ok(offset)
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // closing the asks ends the helper's loop (its answers never wait: see `spawn`)
        drop(self.asks.take());
        if let Some(helper) = self.helper.take() {
            let _ = helper.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("input");
        std::fs::write(&path, bytes).expect("writes");
        (dir, path)
    }

    /// A reader with a helper, past the bound if need be (tests run side by side).
    fn ahead(path: &std::path::Path) -> ReadAhead {
        let file = Arc::new(File::open(path).expect("opens"));
        THREADS.fetch_add(1, Ordering::AcqRel); // (given back when the reader drops)
        match ReadAhead::spawn(file, Slot) {
            Ok(a) => a,
            Err((e, _)) => panic!("no thread: {e}"),
        }
    }

    /// Reads to the end through `fill_buf`, taking at most `step` bytes at a time.
    fn read_all(r: &mut impl BufRead, step: usize) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let buf = r.fill_buf().expect("reads");
            if buf.is_empty() {
                return out;
            }
            let n = buf.len().min(step);
            out.extend_from_slice(&buf[..n]);
            r.consume(n);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any mix of reads and seeks reads the bytes a plain file read gives.
        #[test]
        fn reads_and_seeks_read_what_the_file_holds(
            len in 0usize..(3 * CHUNK + 100),
            ops in proptest::collection::vec((any::<bool>(), 0usize..(3 * CHUNK + 200), 1usize..(CHUNK + 10)), 1..12),
        ) {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let (_dir, path) = file_of(&bytes);
            let mut r = ahead(&path);
            let mut here = 0usize;
            for (seek, to, n) in ops {
                if seek {
                    prop_assert_eq!(r.seek(SeekFrom::Start(to as u64)).expect("seeks"), to as u64);
                    here = to;
                }
                let mut out = vec![0u8; n];
                let mut got = 0;
                while got < n {
                    let m = r.read(&mut out[got..]).expect("reads");
                    if m == 0 {
                        break;
                    }
                    got += m;
                }
                let want = bytes.get(here..).unwrap_or(&[]);
                let want = &want[..want.len().min(n)];
                prop_assert_eq!(&out[..got], want);
                here += got;
            }
        }
    }

    #[test]
    fn a_file_read_in_small_steps_is_read_whole() {
        let bytes: Vec<u8> = (0..(5 * CHUNK / 2)).map(|i| (i % 253) as u8).collect();
        let (_dir, path) = file_of(&bytes);
        assert_eq!(read_all(&mut ahead(&path), 4093), bytes);
        assert_eq!(
            read_all(&mut FileInput::direct(File::open(&path).expect("opens")), 4093),
            bytes
        );
    }

    /// A file that grows after its end was read is read on from that end, as by `read()`:
    /// what was asked past the end before it grew is not taken for the file's bytes.
    #[test]
    fn a_growing_file_is_read_on_from_its_end() {
        let (_dir, path) = file_of(b"first\n");
        let mut r = ahead(&path);
        assert_eq!(read_all(&mut r, 100), b"first\n");
        let mut more = std::fs::OpenOptions::new().append(true).open(&path).expect("opens");
        let grown: Vec<u8> = (0..(CHUNK + 17)).map(|i| b'a' + (i % 26) as u8).collect();
        more.write_all(&grown).expect("writes");
        more.flush().expect("flushes");
        assert_eq!(read_all(&mut r, 1000), grown);
        more.write_all(b"last\n").expect("writes");
        assert_eq!(read_all(&mut r, 1000), b"last\n");
    }

    /// A read error is the caller's, and the next read asks again.
    #[test]
    fn a_read_error_reaches_the_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        // (reading a directory fails with EISDIR)
        let mut r = ahead(dir.path());
        let e = r.fill_buf().expect_err("a directory cannot be read");
        assert_eq!(e.raw_os_error(), Some(21), "{e}");
        assert!(r.fill_buf().is_err(), "asked again, failed again");
    }

    #[test]
    fn helpers_only_where_a_core_is_spare() {
        assert!(has_spare_core(1, 2));
        assert!(!has_spare_core(2, 2));
        assert!(!has_spare_core(4, 2));
        assert!(!has_spare_core(1, 1));
    }

    /// Readers past the process's helper threads read directly, and a reader dropped gives
    /// its thread back.
    #[test]
    fn helper_threads_are_bounded() {
        let (_dir, path) = file_of(b"x\n");
        let readers: Vec<FileInput> = (0..MAX_THREADS + 3)
            .map(|_| FileInput::open(File::open(&path).expect("opens")).expect("opens"))
            .collect();
        let ahead = readers.iter().filter(|r| r.is_ahead()).count();
        assert!(ahead <= MAX_THREADS, "{ahead} helper threads");
        assert!(
            readers.iter().any(|r| !r.is_ahead()),
            "the readers past the bound read directly"
        );
        assert!(THREADS.load(Ordering::Acquire) <= MAX_THREADS);
        drop(readers);
        // (other tests may hold slots meanwhile: a reader may get one back)
        let again: Vec<FileInput> = (0..3)
            .map(|_| FileInput::open(File::open(&path).expect("opens")).expect("opens"))
            .collect();
        assert!(THREADS.load(Ordering::Acquire) <= MAX_THREADS);
        drop(again);
    }
}

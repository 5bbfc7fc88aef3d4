//! File and stdin readers: JSON lines, one partition each.
//!
//! Positions are 1-based line numbers. A line is everything up to `\n` (a trailing `\r` is
//! dropped too); a last line without a newline still counts. A read error ends the partition
//! with an error in the log: the file is the problem, not a record in it.

use super::{ReadStatus, Record};
use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, TryRecvError};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Reads a JSON-lines file.
pub struct FileReader {
    path: PathBuf,
    reader: BufReader<File>,
    line: Vec<u8>,
}

impl FileReader {
    /// Opens `path`.
    pub fn open(path: &Path) -> Result<FileReader> {
        let file = File::open(path).with_context(|| format!("cannot open input file {}", path.display()))?;
        Ok(FileReader {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(1 << 20, file),
            line: Vec::with_capacity(256),
        })
    }

    /// Skips the first `lines` lines (resuming from a checkpoint). A file shorter than that
    /// has shrunk since: it is an error, so the job does not silently miss data.
    pub fn skip_to(&mut self, lines: u64) -> Result<()> {
        for n in 0..lines {
            self.line.clear();
            let read = self
                .reader
                .read_until(b'\n', &mut self.line)
                .with_context(|| format!("reading {}", self.path.display()))?;
            if read == 0 {
                anyhow::bail!(
                    "{} has {n} lines, fewer than the checkpoint's {lines}",
                    self.path.display()
                );
            }
        }
        Ok(())
    }

    /// Reads up to `budget` lines.
    pub fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        for n in 0..budget {
            self.line.clear();
            match self.reader.read_until(b'\n', &mut self.line) {
                Ok(0) => return if n == 0 { ReadStatus::Ended } else { ReadStatus::Read(n) },
                Ok(_) => f(Record::Line(trim_newline(&self.line))),
                Err(e) => {
                    tracing::error!("reading {}: {e}; ending this partition", self.path.display());
                    return if n == 0 { ReadStatus::Ended } else { ReadStatus::Read(n) };
                }
            }
        }
        ReadStatus::Read(budget)
    }
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Reads standard input on a helper thread, so a slow producer never blocks the worker.
pub struct StdinReader {
    rx: Receiver<Vec<u8>>,
}

impl StdinReader {
    /// Starts the reading thread.
    pub fn spawn() -> StdinReader {
        let (tx, rx) = crossbeam_channel::bounded(1 << 16);
        std::thread::Builder::new()
            .name("hotlist-stdin".into())
            .spawn(move || {
                let stdin = std::io::stdin();
                let mut lock = stdin.lock();
                loop {
                    let mut line = Vec::new();
                    match lock.read_until(b'\n', &mut line) {
                        Ok(0) => break,
                        Ok(_) => {
                            let len = trim_newline(&line).len();
                            line.truncate(len);
                            if tx.send(line).is_err() {
                                break;
                            }
                        }
                        Err(e) => {
                            tracing::error!("reading stdin: {e}; ending the stdin partition");
                            break;
                        }
                    }
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| tracing::error!("cannot start the stdin reader: {e}"));
        StdinReader { rx }
    }

    /// Takes up to `budget` lines that have arrived.
    pub fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        for n in 0..budget {
            match self.rx.try_recv() {
                Ok(line) => f(Record::Line(&line)),
                Err(TryRecvError::Empty) => {
                    return if n == 0 {
                        ReadStatus::Waiting
                    } else {
                        ReadStatus::Read(n)
                    }
                }
                Err(TryRecvError::Disconnected) => return if n == 0 { ReadStatus::Ended } else { ReadStatus::Read(n) },
            }
        }
        ReadStatus::Read(budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_crlf_and_last_line_without_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        std::fs::write(&p, b"one\r\n\ntwo\nthree").unwrap();
        let mut r = FileReader::open(&p).unwrap();
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

    #[test]
    fn missing_file_is_a_clear_error() {
        let err = FileReader::open(Path::new("/nonexistent/x.jsonl"))
            .err()
            .expect("error");
        assert!(format!("{err:#}").contains("/nonexistent/x.jsonl"));
    }
}

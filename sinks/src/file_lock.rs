//! An exclusive advisory lock on a file (`flock(2)`), held for as long as the value lives: how
//! one live run of a job keeps a second one out (the SQLite store's per-job lock file, the
//! checkpoint directory's `LOCK`).
//!
//! The kernel releases the lock when the process dies, so a crash never leaves a stale lock
//! behind. The file itself stays: removing a lock file would let two processes lock two
//! different files of the same name. The holder writes its process id into the file, so the
//! process refused can say who holds it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// An exclusive lock on a file, released when dropped (or when the process dies).
#[derive(Debug)]
pub struct FileLock {
    /// Holds the lock: closing the file releases it.
    _file: File,
    path: PathBuf,
}

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another open file (another process, or another handle of this one) holds it.
    #[error("{} is locked by another process{}", path.display(), holder.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Held {
        /// The lock file.
        path: PathBuf,
        /// What the holder wrote into the file (`pid N`), if it could be read.
        holder: Option<String>,
    },
    /// The file could not be opened or locked.
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl FileLock {
    /// Takes the lock on `path` (the file is created if missing; its directory must exist),
    /// without waiting.
    pub fn try_lock(path: &Path) -> Result<FileLock, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor this function owns; it touches no memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io(e));
            }
            let mut holder = String::new();
            let holder = file.read_to_string(&mut holder).ok().map(|_| holder.trim().to_string());
            return Err(LockError::Held {
                path: path.to_path_buf(),
                holder: holder.filter(|h| !h.is_empty()),
            });
        }
        // who holds it, for the message of the process refused (best effort)
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| write!(file, "pid {}", std::process::id()));
        Ok(FileLock {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second lock on the same file fails naming the holder, until the first is dropped.
    #[test]
    fn a_lock_is_exclusive_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let first = FileLock::try_lock(&path).unwrap();
        let err = FileLock::try_lock(&path).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, LockError::Held { .. }), "{text}");
        assert!(text.contains(&format!("pid {}", std::process::id())), "{text}");
        drop(first);
        let again = FileLock::try_lock(&path).unwrap();
        assert_eq!(again.path(), path);
        let missing = FileLock::try_lock(&dir.path().join("no/such/dir/LOCK")).unwrap_err();
        assert!(matches!(missing, LockError::Io { .. }), "{missing}");
    }
}

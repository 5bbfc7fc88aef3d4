//! Named crash points, so crash tests can kill the job exactly where it hurts most.
//!
//! With `HOTLIST_CRASH_AT=<point>:<n>` in the environment, the process sends itself SIGKILL
//! the `n`-th time it reaches `<point>` (1-based). Without the variable a crash point costs one
//! relaxed load. Points: `sink.commit` (rows written, transaction not yet committed),
//! `checkpoint.file` (a snapshot file of a checkpoint written, the others not yet),
//! `checkpoint.manifest` (the checkpoint's MANIFEST written, its sink commit not yet begun).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// The crash point that is armed, and on which hit it fires.
fn armed() -> Option<&'static (String, u64)> {
    static ARMED: OnceLock<Option<(String, u64)>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let spec = std::env::var("HOTLIST_CRASH_AT").ok()?;
            let (point, n) = spec.rsplit_once(':')?;
            Some((point.to_string(), n.parse().ok()?))
        })
        .as_ref()
}

/// Marks a crash point: kills this process (SIGKILL, no cleanup) when it is the armed one and
/// this is its `n`-th hit.
pub fn crash_point(name: &str) {
    static HITS: AtomicU64 = AtomicU64::new(0);
    if let Some((point, n)) = armed() {
        if point == name && HITS.fetch_add(1, Relaxed) + 1 == *n {
            eprintln!("crash point {name} reached: SIGKILL");
            // SAFETY: kill(2) on our own pid with a valid signal number has no memory effects.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}

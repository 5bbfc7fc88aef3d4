//! An outage of the fan-out's Redis: the retry backoff and what is logged when.

use crate::error::SinkError;
use std::time::{Duration, Instant};

/// The first retry delay after a failure; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest retry delay.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often a continuing outage is logged again.
const REPEAT_WARNING: Duration = Duration::from_secs(60);

/// The state of an outage: how many attempts failed in a row, when to retry, when it was last
/// logged.
#[derive(Default)]
pub(super) struct Outage {
    pub(super) failures: u64,
    pub(super) retry_at: Option<Instant>,
    logged_at: Option<Instant>,
}

impl Outage {
    /// Notes a failed attempt: schedules the retry; logs the first failure of an outage, then
    /// once every [`REPEAT_WARNING`], and always the last attempt when the job ends.
    pub(super) fn failed(&mut self, e: &SinkError, pending: usize, stopping: bool) {
        self.failures += 1;
        let shift = (self.failures - 1).min(6) as u32;
        let backoff = (FIRST_BACKOFF * 2u32.pow(shift)).min(MAX_BACKOFF);
        self.retry_at = Some(Instant::now() + backoff);
        if stopping {
            tracing::warn!(
                "Redis fan-out: the job ends with {pending} list(s) not written to Redis (it keeps older \
                 lists until the next run writes them): {e}"
            );
        } else if self.logged_at.is_none() {
            tracing::warn!(
                "Redis fan-out failed (the job goes on; the newest list of each window and group is kept and written when \
                 Redis answers, retrying every {MAX_BACKOFF:?} at most): {e}"
            );
            self.logged_at = Some(Instant::now());
        } else if self.logged_at.is_some_and(|t| t.elapsed() >= REPEAT_WARNING) {
            tracing::warn!(
                "Redis fan-out still failing after {} attempts ({pending} list(s) pending): {e}",
                self.failures
            );
            self.logged_at = Some(Instant::now());
        }
    }

    /// Notes a successful write to `url`: ends an outage (and says so).
    pub(super) fn recovered(&mut self, url: &str, epoch: u64) {
        if self.failures > 0 {
            tracing::info!(
                "Redis fan-out to {url} recovered after {} failed attempts: written up to epoch {epoch}",
                self.failures
            );
        }
        *self = Outage::default();
    }
}

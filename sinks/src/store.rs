//! The write protocol every sink store implements.

use crate::error::SinkError;
use crate::ownership::Claim;
use crate::types::{CommitBatch, SourcedDeadLetter, StoredList, StoredWindow};
use hotlist_operators::group::GroupKey;
use hotlist_operators::hot_keys::HotWindow;
use hotlist_operators::record::DeadReason;
use hotlist_operators::replay::SealedRanges;
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;

/// The most groups [`StoreReader::groups`] returns (ten times the default `max_groups`, plus
/// the `(other)` group): a listing is bounded whatever the store holds.
pub const MAX_GROUPS_READ: usize = 100_001;

/// Per (source, block of `hotlist_operators::dead_letter_cap::BLOCK` positions), how many dead
/// letters a job has stored, whole and counted in summaries.
pub type DeadLetterBlocks = Vec<((String, u64), u64)>;

/// A place the job commits its output to, one epoch range at a time.
///
/// # Protocol
///
/// 1. At job start, the run that writes the job calls [`lock`](SinkStore::lock) (a second
///    live run of the job is refused), [`prepare`](SinkStore::prepare) once with the job's
///    windows, and [`claim`](SinkStore::claim) (its commits are fenced from then on; see
///    [`crate::ownership`]); [`reset`](SinkStore::reset) when it starts the job over.
/// 2. To resume, call [`committed_epoch`](SinkStore::committed_epoch): batches up to that
///    epoch are already durable and will be skipped anyway.
/// 3. For every completed epoch range, call [`commit`](SinkStore::commit) with strictly
///    increasing epochs. Each call is atomic: on `Ok` everything in the batch is visible to
///    readers at once; on `Err` nothing of it is, and the store is as before the call.
///
/// On an error whose [`SinkError::retryable`] is true (busy, locked, I/O), the caller may
/// retry the same call with the same batch; otherwise the error is permanent (schema,
/// constraint, invalid input, corruption) and the job should stop. Because a batch at or below
/// the committed epoch is skipped, replaying batches after a restart is safe.
///
/// Revisions are compared within a batch only: across batches, the later epoch wins, so a
/// replay after a restart overwrites what an earlier run wrote for the same instance.
pub trait SinkStore: Send {
    /// Called once at job start: creates tables if missing and records the job's windows
    /// (replacing a previous definition for that job). Fails with [`SinkError::Invalid`] on an
    /// empty job id or invalid windows.
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError>;

    /// Commits the batch atomically (one transaction): for each window instance in `lists` the
    /// rows of its highest revision REPLACE the instance's previous rows (a reader never sees a
    /// mix of revisions); all dead letters are appended; the job's committed epoch becomes
    /// `epoch`. A batch whose epoch is <= the committed epoch for that job is skipped (returns
    /// `Ok(false)`); otherwise `Ok(true)`.
    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError>;

    /// The last committed epoch of the job, if any.
    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError>;

    /// Takes the store's liveness lock on `job`, held as long as this handle lives; fails with
    /// [`SinkError::JobLocked`] while another live handle holds it. Does nothing in a store
    /// without such a lock (Redis, memory).
    fn lock(&mut self, job: &str) -> Result<(), SinkError>;

    /// Claims `job` for this handle in one transaction: the job's generation goes up by one and
    /// `owner` is recorded. This handle's later commits of the job fail with
    /// [`SinkError::TakenOver`] (writing nothing) once another handle has claimed it.
    fn claim(&mut self, job: &str, owner: &str) -> Result<Claim, SinkError>;

    /// Per (source, block of `hotlist_operators::dead_letter_cap::BLOCK` positions), how many
    /// dead letters the job has stored (whole, and counted in summaries): where the cap on
    /// dead letters per block resumes. Empty for a store that keeps no dead letters (Redis).
    fn dead_letter_blocks(&mut self, job: &str) -> Result<DeadLetterBlocks, SinkError> {
        let _ = job;
        Ok(Vec::new())
    }

    /// Forgets the job's results in one transaction: its lists (rows and headers), dead letters
    /// and commit row. Its windows and its owner stay. For a run that starts the job over.
    fn reset(&mut self, job: &str) -> Result<(), SinkError>;
}

/// The read side every store offers (the query command and the HTTP API read through it).
///
/// Each call is one consistent read: a list never mixes two revisions. Nothing read is trusted:
/// a list is read with at most its window's `k` + 1 rows, and data that breaks the store's
/// invariants (a header's item count above `k`, rows disagreeing with it, numbers out of range)
/// is a permanent [`SinkError::Corrupt`] naming the job, window, instance and field
/// (`crate::read_checks`). Methods take `&mut self` so a store may keep one connection; share a
/// reader between threads behind a `Mutex`.
pub trait StoreReader: Send {
    /// The job's windows, in configured order (empty if the job never ran).
    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError>;

    /// The global list (group `""`) of a window's latest instance (greatest start), if any.
    fn latest(&mut self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        self.latest_of(job, window, &GroupKey::global())
    }

    /// The global list of the window's instance starting at `start`, if any.
    fn instance(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, SinkError> {
        self.instance_of(job, window, &GroupKey::global(), start)
    }

    /// The list of `group` in the latest instance (greatest start) that has one, if any.
    fn latest_of(&mut self, job: &str, window: &str, group: &GroupKey) -> Result<Option<StoredList>, SinkError>;

    /// The list of `group` in the window's instance starting at `start`, if any.
    fn instance_of(
        &mut self,
        job: &str,
        window: &str,
        group: &GroupKey,
        start: Millis,
    ) -> Result<Option<StoredList>, SinkError>;

    /// The groups of the window's latest instance (greatest start of any of its lists), in key
    /// order, with that start; `None` when the window has no list. At most
    /// [`MAX_GROUPS_READ`] groups are read.
    fn groups(&mut self, job: &str, window: &str) -> Result<Option<(Millis, Vec<GroupKey>)>, SinkError>;

    /// The job's last commit: `(epoch, watermark)`. Cheap: readers poll it to see that
    /// something new was committed.
    fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError>;

    /// The job's latest closed hot-key window (greatest start) with its hot and cooling keys,
    /// highest rate first; `None` when the job never reported one (or `[hot_keys]` is off).
    fn hot_keys(&mut self, job: &str) -> Result<Option<HotWindow>, SinkError>;

    /// The job's whole dead letters (not summaries) with one of `reasons` whose raw bytes
    /// contain `needle`, in the order they were stored, at most `limit` of them; `None` for a
    /// store that keeps no dead letters (Redis). For `hotlist explain`'s late drops.
    fn dead_letters_containing(
        &mut self,
        job: &str,
        reasons: &[DeadReason],
        needle: &[u8],
        limit: usize,
    ) -> Result<Option<Vec<SourcedDeadLetter>>, SinkError> {
        let _ = (job, reasons, needle, limit);
        Ok(None)
    }

    /// Where the window's instance starting at `start` lies in the input, as recorded when it
    /// sealed (`None`: not sealed yet, sealed before the store recorded ranges, or no such
    /// instance). Read back checked (`SealedRanges::validate`).
    fn sealed_ranges(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<SealedRanges>, SinkError>;

    /// The starts of the window's instances with recorded ranges that start at or after
    /// `since`, ascending (at most `limit` of them: the earliest).
    fn sealed_instances(
        &mut self,
        job: &str,
        window: &str,
        since: Millis,
        limit: usize,
    ) -> Result<Vec<Millis>, SinkError>;
}

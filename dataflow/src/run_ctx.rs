//! [`RunCtx`]: what a run shares with its operators beyond the plan (the epoch base, the
//! restored checkpoint, checkpointing, the first fatal error). Both `source/` and `graph/` use
//! it; it imports neither.

use crate::checkpoint::Restored;
use crate::config::CheckpointPlan;
use std::sync::{Arc, Mutex};

/// What a run shares with its operators beyond the plan.
#[derive(Clone)]
pub struct RunCtx {
    /// Added to timely epochs to get sink epochs (the store's committed epoch + 1).
    pub epoch_base: u64,
    /// State to resume from.
    pub restore: Option<Arc<Restored>>,
    /// Checkpointing, if on.
    pub checkpoint: Option<CheckpointPlan>,
    /// The job id.
    pub job: String,
    /// The first fatal error of any operator (the run fails with it; nothing more commits).
    pub fatal: Arc<Mutex<Option<String>>>,
    /// A live Kafka run: the topic's partition count as last seen, for the sources to open
    /// partitions added while the job runs (`source::kafka::discovery`).
    pub partition_count: Option<Arc<std::sync::atomic::AtomicU32>>,
    /// Whether this process writes the sink (and so the checkpoints' manifests and retention).
    pub writes_sink: bool,
}

impl RunCtx {
    /// Records a fatal error (the first one wins).
    pub fn fail(&self, message: String) {
        if let Ok(mut f) = self.fatal.lock() {
            if f.is_none() {
                tracing::error!("{message}");
                *f = Some(message);
            }
        }
    }

    /// Whether an operator failed.
    pub fn failed(&self) -> bool {
        self.fatal.lock().map(|f| f.is_some()).unwrap_or(true)
    }

    /// The directory of the checkpoint at timely epoch `t`, if checkpointing.
    pub fn checkpoint_dir(&self, t: u64) -> Option<std::path::PathBuf> {
        self.checkpoint
            .as_ref()
            .map(|c| crate::checkpoint::checkpoint_dir(&c.dir, &self.job, self.epoch_base + t))
    }

    /// Whether timely epoch `t` is a checkpoint epoch, given the global watermark after it and
    /// whether a source asked for one (it is stopping): every `every_epochs` epochs, when all
    /// input has ended, and on a graceful stop. Every worker decides alike from the same data.
    pub fn is_checkpoint(&self, t: u64, global: hotlist_operators::time::Millis, requested: bool) -> bool {
        self.checkpoint.as_ref().is_some_and(|c| {
            requested || t.is_multiple_of(c.every_epochs) || global == hotlist_operators::time::Millis::MAX
        })
    }
}

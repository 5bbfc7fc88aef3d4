//! [`RunCtx`]: what a run shares with its operators beyond the plan (the epoch base, the
//! restored checkpoint, checkpointing, the first fatal error). Both `source/` and `graph/` use
//! it; it imports neither.

use crate::checkpoint::Restored;
use crate::config::CheckpointPlan;
use hotlist_operators::time::Millis;
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

    /// Whether an epoch is a checkpoint epoch, given the global watermark after it, whether a
    /// source asked for one (it is stopping) and the sources' clock at its end: when
    /// `checkpoint.interval` has passed on that clock since the last one (`last`, updated; the
    /// first epoch a run reads is one), when all input has ended, and on a graceful stop.
    /// Every worker decides alike from the same control records.
    pub fn is_checkpoint(
        &self,
        global: Millis,
        requested: bool,
        clock: Option<Millis>,
        last: &mut Option<Millis>,
    ) -> bool {
        let Some(c) = self.checkpoint.as_ref() else {
            return false;
        };
        // the first epoch of a run is one (as epoch 0 always was)
        let due = match (*last, clock) {
            (None, _) => true,
            (Some(since), Some(now)) => now >= since.plus(c.every),
            (Some(_), None) => false,
        };
        let checkpoint = requested || due || global == Millis::MAX;
        if checkpoint {
            *last = clock.or(*last);
        }
        checkpoint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::time::Span;

    /// Checkpoints come `checkpoint.interval` apart on the sources' clock, however many epochs
    /// pass between (full epochs close early); the end of the input and a stop are checkpoints
    /// too; without `[checkpoint]` nothing is.
    #[test]
    fn checkpoints_are_due_by_the_sources_clock_not_by_epochs() {
        let mut ctx = RunCtx {
            epoch_base: 1,
            restore: None,
            checkpoint: Some(CheckpointPlan {
                dir: "ckpt".into(),
                every: Span::from_millis(100),
                retain: 1,
                remote: None,
            }),
            job: "t".into(),
            fatal: Arc::new(Mutex::new(None)),
            partition_count: None,
            writes_sink: true,
        };
        let mut last = None;
        let due = |clock: i64, wm: i64, stop: bool, last: &mut Option<Millis>| {
            ctx.is_checkpoint(Millis(wm), stop, Some(Millis(clock)), last)
        };
        // the first epoch is one; many epochs in the next 100 ms: the one at 100 ms is
        let clocks = [1_000, 1_010, 1_020, 1_099, 1_100, 1_150, 1_199, 1_200, 1_201];
        let got: Vec<bool> = clocks.iter().map(|c| due(*c, 0, false, &mut last)).collect();
        assert_eq!(got, [true, false, false, false, true, false, false, true, false]);
        // a stop and the end of the input are checkpoints, and restart the count
        assert!(due(1_250, 0, true, &mut last));
        assert!(!due(1_300, 0, false, &mut last));
        assert!(due(1_310, i64::MAX, false, &mut last));
        assert!(!due(1_400, 0, false, &mut last));
        ctx.checkpoint = None;
        assert!(!ctx.is_checkpoint(Millis::MAX, true, Some(Millis(5_000)), &mut None));
    }
}

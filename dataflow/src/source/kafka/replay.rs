//! Reading a Kafka range again, for `exact_at_seal` (`source/replay.rs`): a range is the offsets
//! `[from, to)` of a partition, read by a consumer of its own.

use crate::source::AfterRead;

/// After a read of a replayed range ending before offset `to`: whether the range is read, or
/// why it cannot be (its messages are gone: retention or a re-created topic).
pub fn range_read(after: AfterRead, to: u64) -> Result<bool, String> {
    if after.lost.gaps > 0 {
        return Err("messages of the range are gone (retention or a re-created topic)".into());
    }
    Ok(after.position >= to)
}

//! The dead letters the counters raise after the raw bytes are gone: an event outside the
//! event time range, an event that reached only sealed instances.

use crate::event::BadRecord;
use crate::record::{DeadLetter, DeadReason, TimedEvent};
use crate::time::Millis;

/// The dead letter of an event outside the event time range (cold: sources reject those).
#[cold]
pub(crate) fn out_of_range(ev: &TimedEvent, bad: BadRecord) -> DeadLetter {
    DeadLetter {
        partition: ev.partition,
        position: ev.position,
        raw: render_event(ev),
        reason: DeadReason::Bad,
        detail: bad.to_string(),
    }
}

/// The dead letter of an event that reached sealed instances (at global watermark `wm`).
#[cold]
pub(crate) fn sealed_letter(ev: &TimedEvent, wm: Millis) -> DeadLetter {
    DeadLetter {
        partition: ev.partition,
        position: ev.position,
        raw: render_event(ev),
        reason: DeadReason::Sealed,
        detail: format!("window already sealed at watermark {wm}"),
    }
}

/// The JSON rendering of an event, for dead letters raised after the raw bytes are gone.
pub fn render_event(ev: &TimedEvent) -> Vec<u8> {
    serde_json::json!({"item_id": ev.item(), "ts": ev.ts.0})
        .to_string()
        .into_bytes()
}

//! One record's way into the job: checked (size, the event contract, the event time range,
//! `time.max_future`), stamped with its partition's watermark *before* it, judged late or not,
//! and routed to the events or the dead letters.
//!
//! A blank line (empty, or only ASCII whitespace) is no record: it is skipped and counted
//! (`blank_lines`), as line readers do, so a file of newlines costs no dead letters.
//!
//! Every other record is counted or dead-lettered, never dropped: a record longer than
//! `source.max_record_bytes` is `too_large`, one that is not an event (or whose `ts` is outside
//! years 0000–9999, generated events included) is `bad`, an event further ahead of its reference
//! time than `max_future` is `future`; none of them moves the watermark. The reference time is
//! the Kafka message's timestamp, else the wall clock read once per batch ([`Rules::wall`]).
//!
//! This is the per-record path: no allocation for an accepted event (its id is inline up to 24
//! bytes), counters bumped in a plain struct and flushed to the shared stats once per
//! activation.

use super::{InMessage, Record};
use crate::udf::{Outcome, UdfRunner};
use hotlist_operators::counter::keyed_prefix;
use hotlist_operators::event::{check_event_time, BadRecord, ParsedEvent};
use hotlist_operators::format::{Parser, PlainFields, Pointer};
use hotlist_operators::hash::{item_hash, Owners};
use hotlist_operators::lateness::LatenessJudge;
use hotlist_operators::record::{DeadLetter, DeadReason, EventText, ItemId, KeyedText, PartitionId, TimedEvent};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::watermark::PartitionClock;
use hotlist_operators::window::WindowSpec;
use std::sync::Arc;

/// What one activation read, waiting to be handed to the outputs.
pub struct Batch {
    /// Accepted events, one list per worker of the job, each event in the list of the worker
    /// that owns its item (`hash::owner`): a list then goes to its worker whole, its events not
    /// moved again by the exchange (`graph::route_events`; that move was 7 % of a 2-worker
    /// job's samples, `perf`). One list for one worker; never none (see [`Batch::new`]).
    events: Vec<Vec<TimedEvent>>,
    /// Which list an event's item belongs in.
    owners: Owners,
    /// Bad records and late events.
    pub dead: Vec<DeadLetter>,
}

impl Batch {
    /// An empty batch of a job of `workers` workers, with room for `room` events in all.
    pub fn new(workers: usize, room: usize) -> Batch {
        let workers = workers.max(1);
        let share = Self::share(workers, room);
        Batch {
            events: (0..workers).map(|_| Vec::with_capacity(share)).collect(),
            owners: Owners::new(workers),
            dead: Vec::new(),
        }
    }

    /// Makes room for `room` events in all again, in lists handed on (left without room).
    pub fn make_room(&mut self, room: usize) {
        let share = Self::share(self.events.len(), room);
        for events in &mut self.events {
            events.reserve(share);
        }
    }

    /// The room of one list: its share and a quarter more (items are spread by their hash).
    fn share(workers: usize, room: usize) -> usize {
        match workers {
            0 | 1 => room,
            n => room / n + room / (4 * n),
        }
    }

    /// The list of the worker that owns the item of hash `hash`.
    #[inline(always)]
    fn events_of(&mut self, hash: u64) -> &mut Vec<TimedEvent> {
        let at = match self.events.len() {
            1 => 0,
            _ => self.owners.of(hash),
        };
        &mut self.events[at]
    }

    /// Every accepted event, list by list.
    pub fn all_events(&self) -> impl Iterator<Item = &TimedEvent> {
        self.events.iter().flatten()
    }

    /// The lists, by worker.
    pub fn lists(&self) -> &[Vec<TimedEvent>] {
        &self.events
    }

    /// The lists, by worker, to hand on or clear.
    pub fn lists_mut(&mut self) -> &mut [Vec<TimedEvent>] {
        &mut self.events
    }

    /// Whether no event was accepted.
    pub fn no_events(&self) -> bool {
        self.events.iter().all(Vec::is_empty)
    }
}

/// A partition's counts of one activation, flushed to the shared stats once per activation.
#[derive(Default)]
pub struct Tally {
    /// Records read.
    pub records: u64,
    /// Valid events.
    pub events: u64,
    /// Bad records (reasons `bad`, `future` and `too_large`).
    pub bad: u64,
    /// Blank lines (empty or whitespace only): skipped, not dead-lettered.
    pub blank: u64,
    /// Events late for some window.
    pub late: u64,
    /// Events late for every window (counted nowhere).
    pub late_dropped: u64,
    /// Records the UDF filter dropped (counted, not dead-lettered).
    pub filtered: u64,
}

/// The rules a record is judged by.
pub struct Rules {
    /// The lateness rule.
    pub judge: LatenessJudge,
    /// `time.max_future`.
    pub max_future: Span,
    /// `source.max_record_bytes` (for the detail of `too_large` letters).
    pub max_record_bytes: usize,
    /// The wall clock when this batch was read: the reference time of records without a
    /// message timestamp (files, stdin, the generator).
    pub wall: Millis,
    /// Where the fields are (`[source.format]`, compiled for the windows' needs).
    pub format: Parser,
    /// Every window needs a user: a record without one is bad (else it goes on without).
    pub user_required: bool,
    /// The UDF uses run on each batch of lines (empty: none; see `source::pending`).
    pub udfs: Arc<UdfRunner>,
    /// `name=` of the one dim every window counts events per, when the job's events are
    /// written as their counter keys (see [`keyed_prefix`]).
    pub keyed: Option<String>,
}

/// [`Rules::keyed`] of a job with these windows, whose records' dims are `dims` (the
/// format's, in the order it reads them).
pub fn keyed_rule(windows: &[WindowSpec], dims: &[(String, Pointer)]) -> Option<String> {
    keyed_prefix(windows).filter(|p| matches!(dims, [(d, _)] if p.strip_suffix('=') == Some(d.as_str())))
}

/// Where one record goes: its partition and position, and the batch and tallies it lands in.
pub struct Place<'a> {
    /// The partition.
    pub partition: PartitionId,
    /// Its position in the partition.
    pub position: u64,
    /// Where accepted events and dead letters go.
    pub out: &'a mut Batch,
    /// The partition's counts.
    pub tally: &'a mut Tally,
}

impl Place<'_> {
    /// Dead-letters the record as a bad one (`bad`, `future`, `too_large` or `udf`).
    fn reject(&mut self, raw: Vec<u8>, reason: DeadReason, detail: String) {
        self.tally.bad += 1;
        self.out.dead.push(DeadLetter {
            partition: self.partition,
            position: self.position,
            raw,
            reason,
            detail,
        });
    }
}

/// Checks (parsing if needed: `resolved` is a line's parse and UDFs when already done),
/// stamps, judges and routes one record. Returns the event time of an event rejected as
/// `future` against the wall clock (a verdict a replay cannot re-derive).
#[inline]
pub fn accept_with(
    rec: &Record<'_>,
    resolved: Option<&Outcome<'_>>,
    mut at: Place<'_>,
    clock: &mut PartitionClock,
    rules: &Rules,
) -> Option<Millis> {
    let message = rec.message();
    // (the item's hash taken from the id it was packed from: read back out of a packed text,
    // the id cost a call and a decode per event)
    let (text, ts, hash, raw): (Text<'_>, Millis, u64, Option<&[u8]>) = match *rec {
        Record::TooLarge { head, len, at: m } => {
            let what = if m.is_some() { "message" } else { "record" };
            let detail = format!(
                "{what} is {len} bytes, more than source.max_record_bytes ({}); raw keeps its first {}",
                rules.max_record_bytes,
                head.len()
            );
            at.reject(head.to_vec(), DeadReason::TooLarge, detail);
            return None;
        }
        Record::Line(line) | Record::LineAt(line, _) => {
            let routed = match resolved {
                Some(outcome) => built(route_line(outcome, line, message, &mut at, rules)),
                // (the parse read where it was written: moved into an `Outcome` or out of its
                // `Result`, its copy stalled on the stores that had just written it, 12 % of
                // this function's samples)
                None => match rules.format.plain_fields(line) {
                    // the usual line: its fields packed straight into the event
                    Some(f) => route_plain(&f, line, message, &mut at, rules),
                    None => built(match &rules.format.parse_unusual(line) {
                        Ok(ev) => route_event(ev, None, line, message, &mut at, rules),
                        Err(bad) => route_bad(bad, line, message, &mut at),
                    }),
                },
            };
            let (text, ts, hash) = routed?;
            (text, ts, hash, Some(line))
        }
        Record::Event(item, ts) => match check_event_time(ts) {
            Ok(ts) => (Text::Built(EventText::item(item)), ts, item_hash(item), None),
            Err(bad) => {
                at.reject(rendered(item, ts), DeadReason::Bad, bad.to_string());
                return None;
            }
        },
    };
    let (reference, of) = reference_time(message, rules.wall);
    if ts > reference.plus(rules.max_future) {
        let raw = raw.map_or_else(|| rendered(text.item_id(), ts), <[u8]>::to_vec);
        let detail = format!(
            "ts {ts} is more than time.max_future ({}) ahead of {of} ({reference})",
            rules.max_future
        );
        at.reject(raw, DeadReason::Future, in_message(detail, message));
        let by_wall = !matches!(message, Some(InMessage { timestamp: Some(_), .. }));
        return by_wall.then_some(ts);
    }
    at.tally.events += 1;
    let wm_before = clock.observe(ts);
    let verdict = rules.judge.judge(ts, wm_before);
    if verdict.late_windows != 0 {
        at.tally.late += 1;
        at.tally.late_dropped += verdict.fully_late as u64;
        let detail = format!(
            "late for window(s) {}: partition watermark was {} (allowed lateness {})",
            rules.judge.names(verdict.late_windows),
            wm_before,
            rules.judge.allowed_lateness()
        );
        at.out.dead.push(DeadLetter {
            partition: at.partition,
            position: at.position,
            raw: raw.map_or_else(|| rendered(text.item_id(), ts), <[u8]>::to_vec),
            reason: DeadReason::Late,
            detail: in_message(detail, message),
        });
        if verdict.fully_late {
            return None;
        }
    }
    debug_assert_eq!(hash, item_hash(text.item_id()));
    let (partition, position) = (at.partition, at.position);
    text.push_to(at.out.events_of(hash), |text| TimedEvent {
        text,
        ts,
        wm_before,
        hash,
        partition,
        position,
    });
    None
}

/// An accepted record's text: built, or a keyed text, written only where its event lies in
/// the batch (see [`KeyedText`]).
enum Text<'a> {
    Built(EventText),
    Keyed(KeyedText<'a>),
}

impl Text<'_> {
    fn item_id(&self) -> &str {
        match self {
            Text::Built(text) => text.item_id(),
            Text::Keyed(keyed) => keyed.item(),
        }
    }

    /// Pushes the event `event` makes of a text to `events`: of this one, or, for a keyed
    /// text, of a placeholder this text is then written over.
    #[inline(always)]
    fn push_to(self, events: &mut Vec<TimedEvent>, event: impl FnOnce(EventText) -> TimedEvent) {
        match self {
            Text::Built(text) => events.push(event(text)),
            Text::Keyed(keyed) => {
                events.push(event(EventText::EMPTY));
                if let Some(ev) = events.last_mut() {
                    keyed.write_over(&mut ev.text);
                }
            }
        }
    }
}

/// A parsed line's item, time and extras; `None` when it was blank (counted as such), bad
/// (dead-lettered), filtered (counted) or a UDF failed on it (dead-lettered, `udf`).
#[inline]
fn route_line(
    outcome: &Outcome<'_>,
    line: &[u8],
    message: Option<InMessage>,
    at: &mut Place<'_>,
    rules: &Rules,
) -> Option<(EventText, Millis, u64)> {
    match outcome {
        Outcome::Event(ev, item) => route_event(ev, item.as_ref(), line, message, at, rules),
        Outcome::Bad(bad) => route_bad(bad, line, message, at),
        Outcome::Filtered => {
            at.tally.filtered += 1;
            None
        }
        Outcome::Failed(detail) => {
            at.reject(line.to_vec(), DeadReason::Udf, in_message(detail.clone(), message));
            None
        }
    }
}

/// `route_line` of a line that is not an event: a blank one is counted, any other
/// dead-lettered.
fn route_bad(
    bad: &BadRecord,
    line: &[u8],
    message: Option<InMessage>,
    at: &mut Place<'_>,
) -> Option<(EventText, Millis, u64)> {
    if *bad == BadRecord::Empty {
        at.tally.blank += 1;
    } else {
        at.reject(line.to_vec(), DeadReason::Bad, in_message(bad.to_string(), message));
    }
    None
}

/// `route_line` of an event (`item`: the id a UDF computed, if one did).
#[inline]
fn route_event(
    ev: &ParsedEvent<'_>,
    item: Option<&ItemId>,
    line: &[u8],
    message: Option<InMessage>,
    at: &mut Place<'_>,
    rules: &Rules,
) -> Option<(EventText, Millis, u64)> {
    let item = item.map_or(&*ev.item_id, |i| i.as_str());
    route_fields(item, ev.ts, ev.user.as_deref(), &ev.dims, line, message, at, rules)
}

/// `route_fields` of the usual line's fields: in a keyed job, the text left to write where
/// the event lies (see [`KeyedText`]).
#[inline(always)]
fn route_plain<'a>(
    f: &PlainFields<'a>,
    line: &[u8],
    message: Option<InMessage>,
    at: &mut Place<'_>,
    rules: &'a Rules,
) -> Option<(Text<'a>, Millis, u64)> {
    if let (Some(prefix), &[value], None, false) = (&rules.keyed, f.dims(), f.user, rules.user_required) {
        if let Some(keyed) = KeyedText::new(prefix, value, f.item_id) {
            return Some((Text::Keyed(keyed), f.ts, item_hash(f.item_id)));
        }
    }
    built(route_fields(
        f.item_id,
        f.ts,
        f.user,
        f.dims(),
        line,
        message,
        at,
        rules,
    ))
}

/// A route's built text as a [`Text`].
#[inline(always)]
fn built<'a>(routed: Option<(EventText, Millis, u64)>) -> Option<(Text<'a>, Millis, u64)> {
    routed.map(|(text, ts, hash)| (Text::Built(text), ts, hash))
}

/// An event's fields packed into its text, with its time and its item's hash; `None` when
/// every window counts distinct users and it has no user (dead-lettered).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the fields of one event and where it goes
fn route_fields<D: AsRef<str>>(
    item: &str,
    ts: Millis,
    user: Option<&str>,
    dims: &[D],
    line: &[u8],
    message: Option<InMessage>,
    at: &mut Place<'_>,
    rules: &Rules,
) -> Option<(EventText, Millis, u64)> {
    if user.is_none() && rules.user_required {
        let pointer = rules.format.format().user.as_ref().map_or("", |p| p.text.as_str());
        let detail = format!("user: {pointer} finds nothing (every window counts distinct users)");
        at.reject(line.to_vec(), DeadReason::Bad, in_message(detail, message));
        return None;
    }
    // (a job counting per one dim: the event written as its key, see `EventText::keyed`)
    if let (Some(prefix), [value], None) = (&rules.keyed, dims, user) {
        if let Some(text) = EventText::keyed(prefix, value.as_ref(), item) {
            return Some((text, ts, item_hash(item)));
        }
    }
    Some((EventText::new(item, user, dims), ts, item_hash(item)))
}

/// The reference time of the `max_future` rule and what it is: the message's timestamp, else
/// the wall clock of the batch.
fn reference_time(message: Option<InMessage>, wall: Millis) -> (Millis, &'static str) {
    match message {
        Some(InMessage { timestamp: Some(t), .. }) => (t, "the message timestamp"),
        Some(_) => (wall, "the wall clock at read time (the message has no timestamp)"),
        None => (wall, "the wall clock at read time"),
    }
}

/// The position of a Kafka record is its message's offset: the detail names its line in it.
fn in_message(detail: String, message: Option<InMessage>) -> String {
    match message {
        Some(m) if m.line > 0 => format!("{detail} (line {} of the message)", m.line),
        _ => detail,
    }
}

/// A generated event as the JSON line it stands for (its dead letter's raw bytes).
fn rendered(item: &str, ts: Millis) -> Vec<u8> {
    let mut v = Vec::new();
    crate::generator::render_json(item, ts, &mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::format::Format;
    use hotlist_operators::hash::owner;
    use hotlist_operators::record::ItemId;
    use hotlist_operators::window::WindowSpec;

    fn rules(wall: i64) -> Rules {
        let w = WindowSpec::tumbling("1m", Span::from_millis(60_000), 5);
        Rules {
            judge: LatenessJudge::new(vec![w], Span::from_millis(1000)),
            max_future: Span::from_millis(3_600_000),
            max_record_bytes: 100,
            wall: Millis(wall),
            format: Parser::new(Format::default()),
            user_required: false,
            udfs: Default::default(),
            keyed: None,
        }
    }

    /// What `records` became: (reason, detail) of the dead letters, the accepted (item, ts),
    /// the partition watermark after them, and the bad records tallied.
    type Outcome = (Vec<(DeadReason, String)>, Vec<(String, i64)>, Millis, u64);

    fn run(records: Vec<Record<'_>>, rules: &Rules) -> Outcome {
        let (out, clock, tally) = accept_all(records, rules);
        let dead = out.dead.into_iter().map(|d| (d.reason, d.detail)).collect();
        let events = out
            .events
            .iter()
            .flatten()
            .map(|e| (e.item().to_string(), e.ts.0))
            .collect();
        (dead, events, clock.watermark(), tally.bad)
    }

    /// The batch of `records` accepted one after another (positions from 1), the partition's
    /// clock after them and its tallies.
    fn accept_all(records: Vec<Record<'_>>, rules: &Rules) -> (Batch, PartitionClock, Tally) {
        accept_all_for(1, records, rules)
    }

    /// `accept_all` into the batch of a job of `workers` workers.
    fn accept_all_for(workers: usize, records: Vec<Record<'_>>, rules: &Rules) -> (Batch, PartitionClock, Tally) {
        let (mut out, mut tally) = (Batch::new(workers, 0), Tally::default());
        let mut clock = PartitionClock::new(Span::ZERO);
        for (i, rec) in records.into_iter().enumerate() {
            let at = Place {
                partition: PartitionId(0),
                position: i as u64 + 1,
                out: &mut out,
                tally: &mut tally,
            };
            accept_with(&rec, None, at, &mut clock, rules);
        }
        (out, clock, tally)
    }

    /// A batch of a job of several workers keeps each accepted event in the list of the worker
    /// that owns its item, in the order read (one list per worker: see `Batch`).
    #[test]
    fn each_event_is_kept_in_its_owners_list() {
        let lines: Vec<String> = (0..200)
            .map(|i| format!(r#"{{"item_id":"item-{i}","ts":{i}}}"#))
            .collect();
        let records = || lines.iter().map(|l| Record::Line(l.as_bytes())).collect();
        let (one, _, _) = accept_all(records(), &rules(0));
        for workers in [2, 3] {
            let (out, _, _) = accept_all_for(workers, records(), &rules(0));
            assert_eq!(out.lists().len(), workers);
            for (w, events) in out.lists().iter().enumerate() {
                assert!(!events.is_empty(), "200 items reach every worker");
                assert!(events.iter().all(|e| owner(e.hash, workers) == w), "worker {w}");
                assert!(events.windows(2).all(|p| p[0].position < p[1].position), "in order");
            }
            let mut all: Vec<u64> = out.all_events().map(|e| e.position).collect();
            all.sort_unstable();
            let read: Vec<u64> = one.all_events().map(|e| e.position).collect();
            assert_eq!(all, read, "every event once");
        }
    }

    /// A line read without a resolved parse: a blank one is skipped (no dead letter, not bad),
    /// one that is not an event is a `bad` dead letter with the parse's reason, and an event
    /// goes on with its id and time.
    #[test]
    fn unresolved_lines_are_skipped_rejected_or_accepted() {
        let recs = vec![
            Record::Line(b"  "),
            Record::Line(b"[1]"),
            Record::Line(br#"{"item_id":"a","ts":5000}"#),
        ];
        let (dead, events, wm, bad) = run(recs, &rules(1000));
        assert_eq!(dead, [(DeadReason::Bad, "not a JSON object".to_string())]);
        assert_eq!(events, [("a".to_string(), 5000)]);
        assert_eq!((wm, bad), (Millis(5000), 1));
    }

    /// Generated events are held to the event time range like parsed ones; an event more than
    /// `max_future` ahead of the wall clock is `future`; neither moves the watermark.
    #[test]
    fn generated_and_future_events_are_bad_records() {
        let item = ItemId::from("a");
        let hour = 3_600_000;
        let recs = vec![
            Record::Event(&item, Millis::MIN),
            Record::Event(&item, Millis(Millis::MAX_EVENT.0 + 1)),
            Record::Event(&item, Millis(1000 + hour + 1)),
            Record::Line(br#"{"item_id":"b","ts":9000000000000000}"#),
            Record::Line(br#"{"item_id":"c","ts":3601001}"#),
            Record::Event(&item, Millis(1000 + hour)),
        ];
        let (dead, events, wm, bad) = run(recs, &rules(1000));
        let reasons: Vec<DeadReason> = dead.iter().map(|d| d.0).collect();
        use DeadReason::{Bad, Future};
        assert_eq!(reasons, [Bad, Bad, Future, Bad, Future]);
        assert_eq!(dead[0].1, "ts -9223372036854775808 is outside years 0000-9999");
        assert_eq!(
            dead[2].1,
            "ts 1970-01-01T01:00:01.001Z is more than time.max_future (1h) ahead of the wall clock at read time \
             (1970-01-01T00:00:01.000Z)"
        );
        assert_eq!(events, [("a".to_string(), 1000 + hour)]);
        assert_eq!((wm, bad), (Millis(1000 + hour), 5));
    }

    /// Kafka records are judged against their message's timestamp, whatever the wall clock;
    /// without one, against the wall clock (and the detail says so).
    #[test]
    fn kafka_records_are_judged_against_their_message_timestamp() {
        let line = br#"{"item_id":"a","ts":7300000}"#;
        let msg = |timestamp| InMessage {
            offset: 7,
            timestamp,
            line: 2,
        };
        let recs = vec![
            Record::LineAt(line, msg(Some(Millis(3_700_000)))), // exactly 1 h ahead: ok
            Record::LineAt(line, msg(Some(Millis(7_300_000)))),
            Record::LineAt(line, msg(Some(Millis(0)))),
            Record::LineAt(line, msg(None)),
        ];
        let (dead, events, _, _) = run(recs, &rules(i64::MAX / 2));
        assert_eq!(events.len(), 3, "{dead:?}");
        assert_eq!(
            dead,
            [(
                DeadReason::Future,
                "ts 1970-01-01T02:01:40.000Z is more than time.max_future (1h) ahead of the message timestamp \
                 (1970-01-01T00:00:00.000Z) (line 2 of the message)"
                    .to_string()
            )]
        );
        let (dead, _, _, _) = run(vec![Record::LineAt(line, msg(None))], &rules(0));
        assert!(
            dead[0]
                .1
                .contains("the wall clock at read time (the message has no timestamp)"),
            "{dead:?}"
        );
    }

    /// A too-large record keeps its head and says its true length.
    #[test]
    fn too_large_records_say_their_length() {
        let head = [b'x'; 4096];
        let recs = vec![
            Record::TooLarge {
                head: &head,
                len: 299_892_736,
                at: None,
            },
            Record::TooLarge {
                head: &head[..200],
                len: 200,
                at: Some(InMessage {
                    offset: 3,
                    timestamp: None,
                    line: 0,
                }),
            },
        ];
        let (dead, _, wm, bad) = run(recs, &rules(0));
        assert_eq!(
            dead,
            [
                (
                    DeadReason::TooLarge,
                    "record is 299892736 bytes, more than source.max_record_bytes (100); raw keeps its first 4096"
                        .to_string()
                ),
                (
                    DeadReason::TooLarge,
                    "message is 200 bytes, more than source.max_record_bytes (100); raw keeps its first 200"
                        .to_string()
                )
            ]
        );
        assert_eq!((wm, bad), (Millis::MIN, 2));
    }

    /// Under a field mapping the user and dims travel in `extra`; a record without a user is a
    /// bad record only when every window needs one.
    #[test]
    fn mapped_records_carry_user_and_dims() {
        use hotlist_operators::format::Pointer;
        let p = |t: &str| Pointer::parse(t).expect("pointer");
        let mut r = rules(1000);
        r.format = Parser::new(Format {
            item_id: p("/Bid/auction"),
            ts: p("/Bid/date_time"),
            ts_unit: hotlist_operators::format::TsUnit::Millis,
            user: Some(p("/Bid/bidder")),
            user_is_extra: false,
            dims: vec![("channel".into(), p("/Bid/channel"))],
            bounds: Default::default(),
            args: Vec::new(),
            computed: Default::default(),
        });
        let with = br#"{"Bid":{"auction":7,"bidder":9,"date_time":5,"channel":"A"}}"#;
        let without = br#"{"Bid":{"auction":7,"date_time":5}}"#;
        let mut out = Batch::new(1, 0);
        let mut tally = Tally::default();
        let mut clock = PartitionClock::new(Span::ZERO);
        for line in [&with[..], &without[..]] {
            let at = Place {
                partition: PartitionId(0),
                position: 1,
                out: &mut out,
                tally: &mut tally,
            };
            accept_with(&Record::Line(line), None, at, &mut clock, &r);
        }
        let extras: Vec<_> = out.all_events().map(|e| (e.text.user(), e.text.dims())).collect();
        assert_eq!(extras, [(Some("9"), vec!["A"]), (None, vec![""])]);
        assert_eq!(out.lists()[0][0].item(), "7");
        r.user_required = true;
        let (dead, events, _, bad) = run(vec![Record::Line(without), Record::Line(with)], &r);
        assert_eq!((events.len(), bad), (1, 1));
        assert_eq!(
            dead[0].1,
            "user: /Bid/bidder finds nothing (every window counts distinct users)"
        );
    }

    /// A job counting per one dim gets its events as their keys, with the id's hash; a value
    /// that needs an escape, or an event with a user, keeps the second form. Read back, both
    /// are the same event.
    #[test]
    fn a_keyed_job_gets_its_events_as_their_keys() {
        let mut rules = rules(0);
        let (windows, dims) = (
            vec![{
                let mut w = WindowSpec::tumbling("1m", Span::from_millis(60_000), 5);
                w.key.by = vec!["country".into()];
                w
            }],
            vec![("country".to_string(), Pointer::parse("/country").unwrap())],
        );
        rules.keyed = keyed_rule(&windows, &dims);
        assert_eq!(rules.keyed.as_deref(), Some("country="));
        assert_eq!(keyed_rule(&windows, &[]), None, "the format reads no dim");
        let (mut out, mut tally) = (Batch::new(1, 0), Tally::default());
        for (value, user, keyed) in [("C12", None, true), ("a b", None, false), ("C12", Some("u1"), false)] {
            let mut at = Place {
                partition: PartitionId(0),
                position: 1,
                out: &mut out,
                tally: &mut tally,
            };
            let (text, _, hash) =
                route_fields("item-7", Millis(5), user, &[value], b"{}", None, &mut at, &rules).expect("an event");
            assert_eq!(text.counter_key().is_some(), keyed, "{value:?} {user:?}");
            assert_eq!((text.item_id(), text.dim(0), text.user()), ("item-7", value, user));
            assert_eq!(hash, item_hash("item-7"), "routed by its item");
        }
    }

    /// The usual line of a job counting per one dim becomes an event whose text is its key,
    /// written where the event lies in the batch, over nothing of the event before it; a
    /// value that needs an escape keeps the second form, and a late line is a dead letter
    /// naming its id.
    #[test]
    fn a_keyed_jobs_usual_lines_are_written_as_their_keys() {
        let w = {
            let mut w = WindowSpec::tumbling("1m", Span::from_millis(60_000), 5);
            w.key.by = vec!["country".into()];
            w
        };
        let format = Format {
            dims: vec![("country".to_string(), Pointer::parse("/dims/country").unwrap())],
            ..Format::default()
        };
        let mut rules = rules(0);
        rules.judge = LatenessJudge::new(vec![w.clone()], Span::ZERO);
        rules.keyed = keyed_rule(&[w], &format.dims);
        rules.format = Parser::new(format);
        let lines: [&[u8]; 4] = [
            br#"{"item_id":"item-123456","ts":120000,"dims":{"country":"C12"}}"#,
            br#"{"item_id":"item-8","ts":120001,"dims":{"country":"a b"}}"#,
            br#"{"item_id":"i","ts":120002,"dims":{"country":"C1"}}"#,
            br#"{"item_id":"item-9","ts":1,"dims":{"country":"C1"}}"#,
        ];
        assert!(rules.format.plain_fields(lines[0]).is_some(), "the usual line");
        let (out, _, _) = accept_all(lines.iter().map(|&l| Record::Line(l)).collect(), &rules);
        let texts: Vec<(Option<&str>, &str, &str)> = out
            .all_events()
            .map(|e| (e.text.counter_key(), e.item(), e.text.dim(0)))
            .collect();
        assert_eq!(
            texts,
            [
                (Some("country=C12\0item-123456"), "item-123456", "C12"),
                (None, "item-8", "a b"),
                (Some("country=C1\0i"), "i", "C1"),
            ]
        );
        for e in out.all_events() {
            assert_eq!(e.hash, item_hash(e.item()), "routed by its item");
        }
        assert_eq!(out.dead.len(), 1, "{:?}", out.dead);
        assert_eq!(out.dead[0].reason, DeadReason::Late);
        assert_eq!(out.dead[0].raw, lines[3], "the late line as read");
    }
}

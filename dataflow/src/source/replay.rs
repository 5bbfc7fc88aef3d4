//! Reading a sealed instance's input again (`exact_at_seal`): each partition's range from its
//! resume point to its position in the sealing epoch, through the same per-record path as the
//! live source (`accept`: parsing, size, event time range, the clock and the lateness rule), so
//! that every record gets the verdict it got live. The passes and the proof: `certify.rs` and
//! `hotlist_operators::replay`.
//!
//! A reader of its own per range: a file opened again, the generator sought, a second Kafka
//! consumer. A range that cannot be read again (a file that shrank, Kafka retention that
//! removed the offsets) is an error naming the reason: the list then stays approximate.

use super::accept::{accept, Batch, Place, Rules, Tally};
use super::{file, generator, kafka, ReadStatus, Reader};
use crate::config::{JobPlan, SourcePlan};
use hotlist_operators::certify::{certify, Certificate};
use hotlist_operators::lateness::LatenessJudge;
use hotlist_operators::record::RankedItem;
use hotlist_operators::replay::{counts_in, PartitionRange, ReplayJob, ReplayPass};
use hotlist_operators::time::Millis;
use hotlist_operators::watermark::PartitionClock;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Records per read call.
const BUDGET: usize = 4096;
/// How long a Kafka range may go without a message before the replay gives up.
const KAFKA_STALL: Duration = Duration::from_secs(60);

/// The exact list of a sealed instance and its certificate, or why it cannot be had. Stops
/// early (an error) when `stop` is set.
pub fn replay(plan: &JobPlan, job: &ReplayJob, stop: &AtomicBool) -> Result<(Vec<RankedItem>, Certificate), String> {
    let window = plan
        .windows
        .iter()
        .find(|w| w.name == job.window)
        .ok_or_else(|| format!("the job has no window {:?}", job.window))?;
    let mut threshold = job.threshold.max(1);
    let mut passes = 0;
    loop {
        passes += 1;
        let mut pass = ReplayPass::new(&job.sketch, threshold);
        for range in &job.ranges {
            read_range(plan, range, stop, &mut |e| {
                if counts_in(window, job.start, plan.time.allowed_lateness, e.ts, e.wm_before) {
                    pass.observe(&e.item, e.hash);
                }
            })
            .map_err(|e| format!("partition {}: {e}", range.partition.0))?;
        }
        let counted = pass.counted() as u64;
        match certify(pass.into_counts(), job.k, threshold) {
            Ok(items) => {
                let certificate = Certificate {
                    threshold,
                    counted,
                    passes,
                };
                return Ok((items, certificate));
            }
            Err(next) => threshold = next,
        }
    }
}

/// Reads one partition's range, handing every accepted event to `f`.
fn read_range(
    plan: &JobPlan,
    r: &PartitionRange,
    stop: &AtomicBool,
    f: &mut impl FnMut(&hotlist_operators::record::TimedEvent),
) -> Result<(), String> {
    let (mut reader, kafka) = open(plan, r.partition.0).map_err(|e| format!("{e:#}"))?;
    let at = reader.resume_at(r.from).map_err(|e| format!("{e:#}"))?;
    if at != r.from {
        return Err(format!(
            "cannot read from position {} again (the partition now starts at {at}: retention removed it)",
            r.from
        ));
    }
    let mut clock = PartitionClock::with_max(plan.time.max_out_of_orderness, r.max_ts);
    let rules = Rules {
        judge: LatenessJudge::new(plan.windows.clone(), plan.time.allowed_lateness),
        max_future: plan.time.max_future,
        max_record_bytes: plan.max_record_bytes,
        // wall-clock `future` verdicts are not re-derived: the source noted them (`skips`)
        wall: Millis::MAX_EVENT,
        format: plan.input.format.clone(),
        user_required: plan.input.user_required,
    };
    let (mut position, mut done) = (r.from, r.from >= r.to);
    let mut batch = Batch {
        events: Vec::with_capacity(BUDGET),
        dead: Vec::new(),
    };
    let mut tally = Tally::default();
    let mut last_data = Instant::now();
    while !done {
        if stop.load(Relaxed) {
            return Err("the job is stopping".into());
        }
        let status = reader.read(BUDGET, &mut |rec| {
            let (at, line) = match rec.message() {
                Some(m) => (m.offset, m.line),
                None => {
                    position += 1;
                    (position, 0)
                }
            };
            // files and the generator: records (from, to]; Kafka: offsets [from, to)
            if done || (kafka && at >= r.to) || (!kafka && at > r.to) {
                done = true;
                return;
            }
            if r.skips.binary_search(&(at, line)).is_ok() {
                return;
            }
            let place = Place {
                partition: r.partition,
                position: at,
                out: &mut batch,
                tally: &mut tally,
            };
            accept(rec, place, &mut clock, &rules);
        });
        batch.events.iter().for_each(&mut *f);
        batch.events.clear();
        batch.dead.clear();
        if let Reader::Kafka(k) = &mut reader {
            if k.take_lost().gaps > 0 {
                return Err("messages of the range are gone (retention or a re-created topic)".into());
            }
            done |= k.position() >= r.to;
        }
        if !kafka && position >= r.to {
            done = true;
        }
        match status {
            ReadStatus::Read(n) if n > 0 => last_data = Instant::now(),
            ReadStatus::Ended if !done => {
                return Err(format!("the input ended at position {position}, before {}", r.to));
            }
            ReadStatus::Failed(e) => return Err(e),
            _ if last_data.elapsed() > KAFKA_STALL => {
                return Err(format!(
                    "no records for {}s before position {}",
                    KAFKA_STALL.as_secs(),
                    r.to
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A reader of partition `p` of its own (the generator unpaced); whether it is Kafka's.
fn open(plan: &JobPlan, p: u32) -> anyhow::Result<(Reader, bool)> {
    let limit = plan.max_record_bytes;
    Ok(match &plan.source {
        SourcePlan::Files(paths) => {
            let path = paths
                .get(p as usize)
                .ok_or_else(|| anyhow::anyhow!("the job has no file for partition {p}"))?;
            (Reader::File(file::FileReader::open(path, limit)?), false)
        }
        SourcePlan::Stdin => anyhow::bail!("standard input cannot be replayed"),
        SourcePlan::Generator { spec, .. } => (
            Reader::Generator(Box::new(generator::GeneratorReader::new(spec, p, false)?)),
            false,
        ),
        SourcePlan::Kafka { spec, .. } => (
            Reader::Kafka(Box::new(kafka::KafkaReader::open(spec, p, None, limit)?)),
            true,
        ),
    })
}

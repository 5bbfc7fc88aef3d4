//! Reading a sealed instance's input again (`exact_at_seal`): each partition's range from its
//! resume point to its position in the sealing epoch, through the same per-record path as the
//! live source (`accept`: parsing, size, event time range, the clock and the lateness rule), so
//! that every record gets the verdict it got live. The passes, within the job's memory budget:
//! `hotlist_operators::replay_budget`; the proof: `certify.rs`.
//!
//! Each pass reads the ranges in parallel, on up to `run.workers` threads (range `i` of the job
//! on thread `i mod threads`), each counting into a map of its own, the maps summed per item
//! (`hotlist_operators::replay_count`: the budget is the merged map's, so the result is the same
//! for any worker count). A range that fails fails the replay with its reason; the others stop.
//!
//! A reader of its own per range: a file opened again and sought to the byte where the range
//! starts (when the notes carry it: `ByteMark`; older checkpoints' ranges count lines to it),
//! the generator sought, a second Kafka consumer. A range that cannot be read again (a file
//! that shrank or whose bytes before the range changed, Kafka retention that removed the
//! offsets) is an error naming the reason: the list then stays approximate.

use super::accept::{accept_with, Batch, Place, Rules, Tally};
use super::file::Scanned;
use super::held::{read_held, Held};
use super::{kafka, PartitionReader, ReadStatus, Reader, Record};
use crate::config::JobPlan;
use crate::graph::replay_peers::PeerLink;
use crate::udf::Outcome;
use hotlist_operators::counter::Shapes;
use hotlist_operators::format::Parser;
use hotlist_operators::group::OTHER_GROUP;
use hotlist_operators::hash::item_hash;
use hotlist_operators::lateness::LatenessJudge;
use hotlist_operators::record::{ItemId, TimedEvent};
use hotlist_operators::replay::{counts_in, PartitionRange, ReplayJob};
use hotlist_operators::replay_budget::Replayed;
use hotlist_operators::replay_count::{Counted, ReplayInput};
use hotlist_operators::replay_lists::{replay_lists, ListKey, ListToReplay};
use hotlist_operators::replay_pass::{count_local, sum_shares, PassRule, ProcessShare};
use hotlist_operators::time::Millis;
use hotlist_operators::watermark::PartitionClock;
use hotlist_operators::window::WindowSpec;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Records per read call.
const BUDGET: usize = 4096;
/// How long a Kafka range may go without a message before the replay gives up.
const KAFKA_STALL: Duration = Duration::from_secs(60);

/// The exact lists of a sealed instance (each list of the job: a global window's one, or a
/// per-group window's groups) and their certificates, or that no pass proving one fits the
/// plan's budget (`[exact_at_seal]`), or why they cannot be had (`Err`). Each pass reads the
/// ranges on up to `plan.workers` threads; in a cluster (`peers`) this process reads the
/// partitions it owns and every other process its own, their shares summed. Stops early (an
/// error) when `stop` is set. What its file readers went through adds up in `scanned`.
pub fn replay(
    plan: &JobPlan,
    job: &ReplayJob,
    stop: &AtomicBool,
    scanned: &mut Scanned,
    peers: Option<&Mutex<PeerLink>>,
) -> Result<Vec<Replayed>, String> {
    replay_on(plan, job, plan.workers, stop, scanned, peers)
}

/// [`replay`] on up to `threads` threads.
fn replay_on(
    plan: &JobPlan,
    job: &ReplayJob,
    threads: usize,
    stop: &AtomicBool,
    scanned: &mut Scanned,
    peers: Option<&Mutex<PeerLink>>,
) -> Result<Vec<Replayed>, String> {
    let reader = JobReader::new(plan, job)?;
    let lists: Vec<ListToReplay> = job
        .lists
        .iter()
        .map(|l| ListToReplay {
            k: job.k,
            first: l.threshold,
            // no estimate reaches past the group's largest cell
            upper: l.sketch.cells().iter().max().unwrap_or(0).saturating_add(1),
        })
        .collect();
    let tally = Mutex::new(Scanned::default());
    fn lock(p: &Mutex<PeerLink>) -> Result<std::sync::MutexGuard<'_, PeerLink>, String> {
        p.lock()
            .map_err(|_| "the replay's link to the other processes failed".to_string())
    }
    // this process's parts, and the other processes' job
    let (own, seq) = match peers {
        None => ((0..job.ranges.len()).collect(), None),
        Some(p) => {
            let mut link = lock(p)?;
            (link.own_parts(job), Some(link.start(job)?))
        }
    };
    let count = |rule: &PassRule, max_keys: usize| -> Result<Counted<ListKey>, String> {
        // the others start counting first, then this process counts its share
        let pass = match (peers, seq) {
            (Some(p), Some(seq)) => Some(lock(p)?.pass(seq, rule, max_keys)?),
            _ => None,
        };
        let mut shares = vec![reader.count(&own, threads, rule, max_keys, stop, &tally)];
        if let (Some(p), Some(seq), Some(pass)) = (peers, seq, pass) {
            for (share, theirs) in lock(p)?.wait(seq, pass, stop)? {
                let mut sum = tally.lock().unwrap_or_else(|p| p.into_inner());
                sum.add(theirs);
                shares.push(share);
            }
        }
        sum_shares(shares, max_keys)
    };
    let result = replay_lists(&lists, plan.exact_at_seal, &count);
    if let (Some(p), Some(seq)) = (peers, seq) {
        lock(p)?.done(seq);
    }
    scanned.add(tally.into_inner().unwrap_or_else(|p| p.into_inner()));
    result
}

/// A sealed instance's input as a replay reads it: the job's partition ranges, each accepted
/// event keyed by the list it counts in, and each list's estimates (its group's table).
pub struct JobReader<'a> {
    plan: &'a JobPlan,
    job: &'a ReplayJob,
    window: WindowSpec,
    router: ListRouter,
}

impl<'a> JobReader<'a> {
    /// The reader of `job`'s input (`Err`: the job has no such window).
    pub fn new(plan: &'a JobPlan, job: &'a ReplayJob) -> Result<JobReader<'a>, String> {
        let specs = plan.window_specs();
        let wid = specs
            .iter()
            .position(|w| w.name == job.window)
            .ok_or_else(|| format!("the job has no window {:?}", job.window))?;
        Ok(JobReader {
            plan,
            job,
            window: specs[wid].clone(),
            router: ListRouter::new(&specs, wid, job),
        })
    }

    /// Counts one pass over the job's parts `parts` (indices into its ranges) on up to
    /// `threads` threads: the keys `rule` admits, within `max_keys` keys of the merged map.
    /// A failed part is named with its partition. What the file readers went through adds up in
    /// `tally`.
    pub fn count(
        &self,
        parts: &[usize],
        threads: usize,
        rule: &PassRule,
        max_keys: usize,
        stop: &AtomicBool,
        tally: &Mutex<Scanned>,
    ) -> ProcessShare<ListKey, String> {
        let (plan, job) = (self.plan, self.job);
        let estimates: Vec<Box<dyn Fn(u64) -> u64 + Sync + '_>> = job
            .lists
            .iter()
            .map(|l| Box::new(move |hash: u64| l.sketch.estimate(hash)) as Box<dyn Fn(u64) -> u64 + Sync + '_>)
            .collect();
        let estimates: Vec<&(dyn Fn(u64) -> u64 + Sync)> = estimates.iter().map(|e| e.as_ref()).collect();
        let read_part = |i: usize, halt: &AtomicBool, visit: &mut dyn FnMut(&ListKey, u64) -> bool| {
            let part = parts[i];
            let range = &job.ranges[part];
            let mut more = true;
            let mut mine = Scanned::default();
            let mut group = String::new();
            let read = read_range(plan, range, stop, halt, &mut mine, &mut |e| {
                if counts_in(&self.window, job.start, plan.time.allowed_lateness, e.ts, e.wm_before) {
                    if let Some(key) = self.router.key(e, &mut group) {
                        more = visit(&key, e.hash);
                    }
                }
                more
            });
            // a poisoned tally (a reader panicked) still holds the others' sums
            tally.lock().unwrap_or_else(|p| p.into_inner()).add(mine);
            read.map_err(|e| (part, format!("partition {}: {e}", range.partition.0)))
        };
        let input = ReplayInput {
            parts: parts.len(),
            threads,
            read: &read_part,
        };
        count_local(&input, &estimates, rule, max_keys)
    }
}

/// Which replayed list an event counts in: its group's (per-group windows: `(other)`'s when its
/// group has no list of its own), if that list is replayed; a distinct-user window counts
/// (item, user) pairs.
struct ListRouter {
    shapes: Shapes,
    shape: u8,
    window: WindowSpec,
    index: BTreeMap<String, u32>,
    admit_up_to: Option<u64>,
}

impl ListRouter {
    fn new(specs: &[WindowSpec], window: usize, job: &ReplayJob) -> ListRouter {
        let shapes = Shapes::new(specs);
        ListRouter {
            shape: shapes.of_window(window),
            shapes,
            window: specs[window].clone(),
            index: job
                .lists
                .iter()
                .enumerate()
                .map(|(i, l)| (l.group.as_str().to_string(), i as u32))
                .collect(),
            admit_up_to: job.admit_up_to,
        }
    }

    /// The key `e` counts under, if it counts in a replayed list (`group`: scratch).
    fn key(&self, e: &TimedEvent, group: &mut String) -> Option<ListKey> {
        let user = e.text.user();
        let distinct = self.window.key.distinct_users;
        if distinct && user.is_none() {
            return None;
        }
        let list = if self.window.key.by.is_empty() {
            self.index.get("").copied()
        } else if !self.shapes.group(self.shape, e, group) {
            None
        } else if self.admit_up_to.is_some_and(|up_to| item_hash(group) > up_to) {
            self.index.get(OTHER_GROUP).copied()
        } else {
            self.index.get(group.as_str()).copied()
        }?;
        Some(ListKey {
            list,
            item: ItemId::from(e.item()),
            user: user.filter(|_| distinct).map(ItemId::from),
        })
    }
}

/// The live source's per-record rules, but for the wall clock.
fn replay_rules(plan: &JobPlan) -> Rules {
    Rules {
        judge: LatenessJudge::new(plan.window_specs(), plan.time.allowed_lateness),
        max_future: plan.time.max_future,
        max_record_bytes: plan.max_record_bytes,
        // wall-clock `future` verdicts are not re-derived: the source noted them (`skips`)
        wall: Millis::MAX_EVENT,
        format: Parser::new(plan.input.format.clone()),
        user_required: plan.input.user_required,
        udfs: plan.udf_runner.clone(),
        keyed: super::accept::keyed_rule(&plan.window_specs(), &plan.input.format.dims),
    }
}

/// Reads `ranges` (a sealed instance's, as the store recorded them) again one after another,
/// handing `f` every event the live per-record path accepts until it returns `false`
/// (`hotlist explain`, `hotlist verify`). `Err` names the partition that could not be read
/// again and why. What the file readers went through adds up in `scanned`.
pub fn read_ranges(
    plan: &JobPlan,
    ranges: &[PartitionRange],
    scanned: &mut Scanned,
    f: &mut impl FnMut(&TimedEvent) -> bool,
) -> Result<(), String> {
    let (stop, halt) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut more = true;
    for r in ranges {
        let mut reader = Reader::open(&plan.source, r.partition.0, plan.max_record_bytes, false)
            .map_err(|e| format!("partition {}: {e:#}", r.partition.0))?;
        let read = read_open_range(plan, r, &stop, &halt, &mut reader, &mut |e| {
            more = f(e);
            more
        });
        if let Reader::File(file) = &reader {
            scanned.add(file.scanned());
        }
        read.map_err(|e| format!("partition {}: {e}", r.partition.0))?;
        if !more {
            break;
        }
    }
    Ok(())
}

/// Reads one partition's range, handing every accepted event to `f` until it returns `false`
/// or `halt` is set (another range failed: `Ok`, the read is not used).
fn read_range(
    plan: &JobPlan,
    r: &PartitionRange,
    stop: &AtomicBool,
    halt: &AtomicBool,
    scanned: &mut Scanned,
    f: &mut impl FnMut(&hotlist_operators::record::TimedEvent) -> bool,
) -> Result<(), String> {
    let mut reader =
        Reader::open(&plan.source, r.partition.0, plan.max_record_bytes, false).map_err(|e| format!("{e:#}"))?;
    let result = read_open_range(plan, r, stop, halt, &mut reader, f);
    if let Reader::File(file) = &reader {
        scanned.add(file.scanned());
    }
    result
}

/// Puts `reader` where range `r` starts (a file seeks to the byte, and checks the bytes before
/// it), or says why it cannot.
fn go_to_start(reader: &mut Reader, r: &PartitionRange) -> Result<(), String> {
    let at = match (&mut *reader, r.byte) {
        (Reader::File(file), Some(mark)) => file.seek_to(r.from, mark).map(|()| r.from),
        _ => reader.resume_at(r.from),
    }
    .map_err(|e| format!("{e:#}"))?;
    if at != r.from {
        return Err(format!(
            "cannot read from position {} again (the partition now starts at {at}: retention removed it)",
            r.from
        ));
    }
    Ok(())
}

/// [`read_range`] with the partition's reader open.
fn read_open_range(
    plan: &JobPlan,
    r: &PartitionRange,
    stop: &AtomicBool,
    halt: &AtomicBool,
    reader: &mut Reader,
    f: &mut impl FnMut(&hotlist_operators::record::TimedEvent) -> bool,
) -> Result<(), String> {
    let kafka = reader.positions_are_offsets();
    go_to_start(reader, r)?;
    let mut clock = PartitionClock::with_max(plan.time.max_out_of_orderness, r.max_ts);
    let rules = replay_rules(plan);
    let mut held = Held::default();
    let (mut position, mut done) = (r.from, r.from >= r.to);
    // (one list: a replay's events are checked here, not sent on)
    let mut batch = Batch::new(1, BUDGET);
    let mut tally = Tally::default();
    let mut last_data = Instant::now();
    while !done {
        if stop.load(Relaxed) {
            return Err("the job is stopping".into());
        }
        if halt.load(Relaxed) {
            return Ok(());
        }
        let mut take = |rec: &Record<'_>, at: u64, resolved: Option<&Outcome<'_>>| {
            let place = Place {
                partition: r.partition,
                position: at,
                out: &mut batch,
                tally: &mut tally,
            };
            accept_with(rec, resolved, place, &mut clock, &rules);
        };
        let mut admit = |rec: &Record<'_>| {
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
                return None;
            }
            (r.skips.binary_search(&(at, line)).is_err()).then_some(at)
        };
        let status = read_held(reader, BUDGET, &rules, &mut held, &mut admit, &mut take);
        if let ReadStatus::Failed(e) = &status {
            return Err(e.clone());
        }
        if !batch.all_events().all(&mut *f) {
            return Ok(());
        }
        batch.lists_mut().iter_mut().for_each(Vec::clear);
        batch.dead.clear();
        if let Some(after) = reader.after_read() {
            done |= kafka::replay::range_read(after, r.to)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse, Overrides};
    use hotlist_operators::certify::Certificate;
    use hotlist_operators::hash::item_hash;
    use hotlist_operators::record::PartitionId;
    use hotlist_operators::record::RankedItem;
    use hotlist_operators::replay::ListReplay;
    use hotlist_operators::replay_budget::ReplayBudget;
    use hotlist_operators::sketch::{CmsShape, CountMinSketch};
    use hotlist_operators::window::{InstanceKey, WindowId};
    use std::collections::BTreeMap;

    /// A one-file job with a tumbling 100 ms window, k = 2, and the file's lines.
    fn job_over(lines: &[&str]) -> (tempfile::TempDir, JobPlan) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p0.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").expect("write");
        let toml = format!(
            "[source]\nkind = \"file\"\npath = {:?}\n[time]\nmax_out_of_orderness = \"0ms\"\nallowed_lateness = \"0ms\"\n\
             [[window]]\nname = \"w\"\nsize = \"100ms\"\nk = 2\nmode = \"sketch\"\nexact_at_seal = true\n\
             [window.sketch]\ncandidates = 10\n[sink]\nkind = \"sqlite\"\npath = \"x.db\"\n",
            path.display().to_string()
        );
        (dir, parse(&toml, &Overrides::default()).expect("config"))
    }

    fn line(item: &str, ts: i64) -> String {
        format!(r#"{{"item_id":"{item}","ts":{ts}}}"#)
    }

    /// A replay job over the whole file (`n` lines) of instance [0, 100), guided by a sketch of
    /// `counts` and starting from `threshold`.
    fn job(n: u64, counts: &[(&str, u32)], threshold: u64, skips: Vec<(u64, u32)>) -> ReplayJob {
        let mut sketch = CountMinSketch::new(CmsShape::from_error(0.01, 0.01).expect("shape"));
        for (item, c) in counts {
            sketch.add(item_hash(item), *c);
        }
        ReplayJob {
            instance: InstanceKey {
                window: WindowId(0),
                start: Millis(0),
            },
            window: "w".into(),
            start: Millis(0),
            end: Millis(100),
            k: 2,
            watermark: Millis::MAX,
            lists: vec![ListReplay {
                group: Default::default(),
                revision: 2,
                threshold,
                sketch,
            }],
            admit_up_to: None,
            ranges: vec![PartitionRange {
                partition: PartitionId(0),
                from: 0,
                max_ts: Millis::MIN,
                byte: None,
                to: n,
                skips,
            }],
        }
    }

    fn run(plan: &JobPlan, j: &ReplayJob) -> Result<Replayed, String> {
        let mut lists = replay(plan, j, &AtomicBool::new(false), &mut Scanned::default(), None)?;
        assert_eq!(lists.len(), 1, "one list");
        Ok(lists.remove(0))
    }

    fn exact(r: Result<Replayed, String>) -> (Vec<RankedItem>, Certificate) {
        match r {
            Ok(Replayed::Exact(items, cert, _)) => (items, cert),
            other => panic!("not exact: {other:?}"),
        }
    }

    fn brute(lines: &[String], skip: &[u64]) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for (i, l) in lines.iter().enumerate() {
            let v: serde_json::Value = serde_json::from_str(l).expect("json");
            let (item, ts) = (v["item_id"].as_str().expect("id"), v["ts"].as_i64().expect("ts"));
            if (0..100).contains(&ts) && !skip.contains(&(i as u64 + 1)) {
                *m.entry(item.to_string()).or_insert(0) += 1;
            }
        }
        m
    }

    fn input() -> Vec<String> {
        let mut v = Vec::new();
        for (i, item) in ["a", "b", "a", "c", "b", "a", "d", "c", "b", "c"].iter().enumerate() {
            v.push(line(item, i as i64 * 5));
        }
        v.push(line("z", 150)); // the next instance: moves the watermark past 100
        v.push(line("c", 10)); // late: the partition's watermark is 150
        v
    }

    #[test]
    fn a_pass_from_a_sound_threshold_is_exact_in_one_pass() {
        let lines = input();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (_dir, plan) = job_over(&refs);
        let counts = [("a", 3), ("b", 3), ("c", 4), ("d", 1)];
        let j = job(lines.len() as u64, &counts, 3, vec![]);
        let (items, cert) = exact(run(&plan, &j));
        let want = brute(&lines[..11], &[]); // the late line does not count
        assert_eq!(want["c"], 3, "the late c is not counted");
        let got: Vec<(String, u64)> = items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
        assert_eq!(
            got,
            vec![("a".into(), 3), ("b".into(), 3)],
            "a, b and c tie at 3: ids break the tie"
        );
        assert_eq!((cert.threshold, cert.passes), (3, 1));
    }

    #[test]
    fn a_threshold_nothing_reaches_takes_a_second_pass_from_one() {
        let lines = input();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (_dir, plan) = job_over(&refs);
        let j = job(
            lines.len() as u64,
            &[("a", 3), ("b", 3), ("c", 4), ("d", 1)],
            1_000,
            vec![],
        );
        let (items, cert) = exact(run(&plan, &j));
        assert_eq!((cert.threshold, cert.passes), (1, 2));
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].count, 3);
    }

    #[test]
    fn skipped_records_do_not_count_and_a_shrunk_file_is_an_error() {
        let lines = input();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (_dir, plan) = job_over(&refs);
        // lines 4, 8 and 10 (all c) were rejected as `future` when read live
        let j = job(
            lines.len() as u64,
            &[("a", 3), ("b", 3), ("c", 4)],
            1,
            vec![(4, 0), (8, 0), (10, 0)],
        );
        let (items, _) = exact(run(&plan, &j));
        let want = brute(&lines[..11], &[4, 8, 10]);
        assert_eq!(want.get("c"), None);
        let got: Vec<(String, u64)> = items.iter().map(|r| (r.item_id.to_string(), r.count)).collect();
        assert_eq!(got, vec![("a".into(), 3), ("b".into(), 3)]);
        let far = job(lines.len() as u64 + 5, &[("a", 3)], 1, vec![]);
        let err = run(&plan, &far).expect_err("the file is shorter");
        assert!(err.contains("ended at position 12, before 17"), "{err}");
    }

    #[test]
    fn a_pass_over_the_budget_is_split_or_left_approximate() {
        let lines = input();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (_dir, mut plan) = job_over(&refs);
        // a, b, c and d are seen: a pass from 1 counts 4 items; one from 3 (the exact K-th
        // count) a, b and c
        let j = job(lines.len() as u64, &[("a", 3), ("b", 3), ("c", 4), ("d", 1)], 1, vec![]);
        let want = vec![("a".to_string(), 3), ("b".to_string(), 3)];
        let ids = |items: &[RankedItem]| -> Vec<(String, u64)> {
            items.iter().map(|r| (r.item_id.to_string(), r.count)).collect()
        };
        plan.exact_at_seal = ReplayBudget::new(2, 1).expect("budget");
        let over = run(&plan, &j);
        assert!(
            matches!(over, Ok(Replayed::OverBudget(s)) if s.peak_keys == 2),
            "{over:?}"
        );
        // 3 keys: the pass from 1 overflows, a higher threshold proves the list
        plan.exact_at_seal = ReplayBudget::new(3, 1).expect("budget");
        let (items, cert) = exact(run(&plan, &j));
        assert_eq!((ids(&items), cert.counted), (want.clone(), 3));
        // 2 keys in up to 8 ranges: split
        plan.exact_at_seal = ReplayBudget::new(2, 8).expect("budget");
        let split = run(&plan, &j);
        let Ok(Replayed::Exact(items, _, stats)) = split else {
            panic!("split: {split:?}")
        };
        assert_eq!(ids(&items), want, "the unsplit pass's list");
        assert!(stats.ranges > 1 && stats.peak_keys <= 2, "{stats:?}");
    }

    /// An instance late in a file: its range starts after 5,000 lines of earlier instances. With
    /// the byte mark the live reader noted there, the replay seeks: it reads only the range's
    /// bytes (once per pass) and no line before it. Without one (an older checkpoint's range)
    /// it reads every line before the range, and gets the same list.
    #[test]
    fn a_range_late_in_a_file_is_read_from_its_byte_offset() {
        let mut lines: Vec<String> = (0..5_000)
            .map(|i| line(&format!("early{}", i % 7), -1_000 + i / 5))
            .collect();
        let range: Vec<String> = ["a", "b", "a", "c", "a"]
            .iter()
            .enumerate()
            .map(|(i, x)| line(x, i as i64))
            .collect();
        lines.extend(range.iter().cloned());
        lines.push(line("z", 150));
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (dir, plan) = job_over(&refs);
        // the live reader after the 5,000 earlier lines
        let path = dir.path().join("p0.jsonl");
        let mut live = super::super::file::FileReader::open(&path, 1 << 20).expect("open");
        assert_eq!(live.read(5_000, &mut |_| {}), ReadStatus::Read(5_000));
        let mark = live.byte_mark().expect("mark");
        let prefix: usize = lines[..5_000].iter().map(|l| l.len() + 1).sum();
        assert_eq!(mark.offset, prefix as u64);
        let mut j = job(lines.len() as u64, &[("a", 3), ("b", 1), ("c", 1)], 1, vec![]); // one pass
        j.ranges[0].from = 5_000;
        j.ranges[0].max_ts = Millis(-1);
        let want = vec![("a".to_string(), 3), ("b".to_string(), 1)];
        let ids = |r: Result<Vec<Replayed>, String>| -> Vec<(String, u64)> {
            exact(r.map(|mut v| v.remove(0)))
                .0
                .iter()
                .map(|r| (r.item_id.to_string(), r.count))
                .collect()
        };
        // counting lines: the whole prefix is read
        let mut counted = Scanned::default();
        assert_eq!(
            ids(replay(&plan, &j, &AtomicBool::new(false), &mut counted, None)),
            want
        );
        assert_eq!(counted.skipped_lines, 5_000);
        assert!(counted.bytes > prefix as u64, "{counted:?}");
        // seeking: only the range (up to its end, where the next line ends the read)
        j.ranges[0].byte = Some(mark);
        let mut sought = Scanned::default();
        assert_eq!(ids(replay(&plan, &j, &AtomicBool::new(false), &mut sought, None)), want);
        let range_bytes: u64 = lines[5_000..].iter().map(|l| l.len() as u64 + 1).sum();
        assert_eq!(
            sought,
            Scanned {
                skipped_lines: 0,
                bytes: range_bytes
            }
        );
        // the file changed before the range: a clear error, not other counts
        let mut changed = lines.clone();
        changed[4_999] = line("early9", -2);
        std::fs::write(&path, changed.join("\n") + "\n").expect("rewrite");
        let err = run(&plan, &j).expect_err("changed");
        assert!(
            err.contains("changed since it was read: the bytes before line 5001"),
            "{err}"
        );
        std::fs::write(&path, lines[..100].join("\n")).expect("shrink");
        let err = run(&plan, &j).expect_err("shrunk");
        assert!(err.contains("fewer than the"), "{err}");
    }

    /// A job over `files` (one partition each, `p0.jsonl`, `p1.jsonl`, …), as [`job_over`].
    fn job_over_files(files: &[Vec<String>]) -> (tempfile::TempDir, JobPlan) {
        let dir = tempfile::tempdir().expect("tempdir");
        for (i, lines) in files.iter().enumerate() {
            std::fs::write(dir.path().join(format!("p{i}.jsonl")), lines.join("\n") + "\n").expect("write");
        }
        let toml = format!(
            "[source]\nkind = \"file\"\npath = {:?}\n[time]\nmax_out_of_orderness = \"0ms\"\nallowed_lateness = \"0ms\"\n\
             [[window]]\nname = \"w\"\nsize = \"100ms\"\nk = 2\nmode = \"sketch\"\nexact_at_seal = true\n\
             [window.sketch]\ncandidates = 10\n[sink]\nkind = \"sqlite\"\npath = \"x.db\"\n",
            dir.path().join("p*.jsonl").display().to_string()
        );
        (dir, parse(&toml, &Overrides::default()).expect("config"))
    }

    /// Three partitions whose items overlap (a, b and c in several): a replay on 2 or 3 threads
    /// sums each item over the partitions and gives the single thread's list, certificate and
    /// stats — in one pass, in two, split by hash ranges, or over budget — and, when no read
    /// stops early, its bytes read.
    #[test]
    fn ranges_read_on_several_threads_give_the_single_threads_result() {
        let files: Vec<Vec<String>> = [
            &["a", "b", "a", "c", "e"][..],
            &["b", "a", "c", "c", "f", "b"][..],
            &["c", "d", "a", "b"][..],
        ]
        .iter()
        .map(|items| items.iter().enumerate().map(|(i, x)| line(x, i as i64 * 10)).collect())
        .collect();
        let (_dir, mut plan) = job_over_files(&files);
        let all: Vec<String> = files.concat();
        let want = brute(&all, &[]);
        assert_eq!((want["a"], want["b"], want["c"]), (4, 4, 4), "each in several files");
        let counts: Vec<(&str, u32)> = want.iter().map(|(k, v)| (k.as_str(), *v as u32)).collect();
        let mut j = job(0, &counts, 4, vec![]);
        j.ranges = files
            .iter()
            .enumerate()
            .map(|(i, lines)| PartitionRange {
                partition: PartitionId(i as u32),
                from: 0,
                max_ts: Millis::MIN,
                byte: None,
                to: lines.len() as u64,
                skips: vec![],
            })
            .collect();
        let on = |plan: &JobPlan, j: &ReplayJob, threads: usize| {
            let mut scanned = Scanned::default();
            let r = replay_on(plan, j, threads, &AtomicBool::new(false), &mut scanned, None).map(|mut lists| {
                assert_eq!(lists.len(), 1, "one list");
                lists.remove(0)
            });
            (r, scanned)
        };
        let ids = |items: &[RankedItem]| -> Vec<(String, u64)> {
            items.iter().map(|r| (r.item_id.to_string(), r.count)).collect()
        };
        // from 4 (one pass), from 100 (nothing counted: a second pass from 1), split, over
        let budgets = [(4, (100, 1)), (100, (100, 1)), (1, (2, 8)), (1, (2, 1))];
        for (threshold, (keys, ranges)) in budgets {
            j.lists[0].threshold = threshold;
            plan.exact_at_seal = ReplayBudget::new(keys, ranges).expect("budget");
            let (one, one_scanned) = on(&plan, &j, 1);
            match (keys, ranges) {
                (100, _) => {
                    let (items, cert) = exact(one.clone());
                    assert_eq!(ids(&items), vec![("a".into(), 4), ("b".into(), 4)]);
                    assert_eq!(cert.passes, if threshold == 4 { 1 } else { 2 });
                }
                (_, 8) => assert!(
                    matches!(&one, Ok(Replayed::Exact(items, _, s)) if s.ranges > 1 && ids(items)[0] == ("a".into(), 4)),
                    "split: {one:?}"
                ),
                _ => assert!(matches!(one, Ok(Replayed::OverBudget(_))), "over: {one:?}"),
            }
            for threads in [2, 3] {
                let (got, got_scanned) = on(&plan, &j, threads);
                assert_eq!(got, one, "from {threshold}, budget {keys}×{ranges}, {threads} threads");
                // a read that overflows stops early: how far the others got varies
                if keys == 100 {
                    assert_eq!(got_scanned, one_scanned, "{threads} threads");
                }
            }
        }
        // a partition that cannot be read fails the replay with its reason on any thread count
        j.ranges[1].to += 5;
        for threads in 1..=3 {
            let err = on(&plan, &j, threads).0.expect_err("partition 1 is shorter");
            assert!(
                err.starts_with("partition 1: the input ended at position 6, before 11"),
                "{err}"
            );
        }
    }
}

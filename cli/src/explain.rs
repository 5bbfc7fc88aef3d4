//! `hotlist explain`: why an item has the count it has in one sealed window instance.
//!
//! Reads the instance's input ranges again — where its events lie in every partition, as the
//! store recorded them when the instance sealed — through the live per-record path (so every
//! event gets the verdict it got live), and takes the item's count apart
//! (`hotlist_operators::explain`): per partition, late but accepted, late and dropped, users.
//! Beside it, what the store holds for the item and whether the two agree.
//!
//! Exit codes: 0 explained (whether or not the store agrees), 1 an error (bad flags, no such
//! window or instance), 2 the instance's input cannot be read again (a file changed or
//! shrank, Kafka retention removed the offsets, or no ranges could be recorded for it).

use crate::instance_input::{not_rereadable, read_instance};
use crate::query::parse_group;
use anyhow::{anyhow, bail, Context, Result};
use hotlist_dataflow::config::{self, JobPlan};
use hotlist_dataflow::udf::Outcome;
use hotlist_operators::counter::Shapes;
use hotlist_operators::explain::{dropped_from, Explainer, Explanation};
use hotlist_operators::format::Parser;
use hotlist_operators::group::GroupKey;
use hotlist_operators::record::{DeadReason, EventText, TimedEvent};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{StoreReader, StoredList, StoredWindow};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Arguments of `hotlist explain`.
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// The job's config: its source (to read the instance again) and its store.
    #[arg(long, short, default_value = "configs/local.toml")]
    pub config: PathBuf,
    /// Window name, e.g. 1h.
    #[arg(long, short)]
    pub window: String,
    /// The item id.
    #[arg(long, short)]
    pub item: String,
    /// The instance for this time: RFC 3339 or milliseconds since the epoch (default: the
    /// latest sealed instance).
    #[arg(long, conflicts_with = "date", allow_hyphen_values = true)]
    pub at: Option<String>,
    /// The instance starting at 00:00 UTC of this date (YYYY-MM-DD).
    #[arg(long)]
    pub date: Option<String>,
    /// The group of a window with `by` dims: `dim=value` pairs joined by `,`, or `(other)`.
    #[arg(long, short)]
    pub group: Option<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The instance's input cannot be read again: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// What `explain --json` prints.
#[derive(Serialize)]
struct Report {
    window: String,
    group: String,
    start: String,
    end: String,
    item: String,
    count: u64,
    stored_count: Option<u64>,
    agrees: Option<bool>,
    by_partition: std::collections::BTreeMap<u32, u64>,
    late_accepted: u64,
    late_dropped: Option<u64>,
    distinct_users: Option<u64>,
    top_users: Vec<UserCount>,
}

#[derive(Serialize)]
struct UserCount {
    user: String,
    events: u64,
}

/// Runs `hotlist explain` and prints the report.
pub fn explain(args: &ExplainArgs) -> Result<()> {
    let plan = users_read(config::load(&args.config, &config::Overrides::default())?);
    if let Some(why) = not_rereadable(&args.config) {
        return Err(Unreadable(why).into());
    }
    let mut store = crate::serve::opener(&plan.sink)?()?;
    let job = plan.job_id.clone();
    let specs = plan.window_specs();
    let Some(wid) = specs.iter().position(|w| w.name == args.window) else {
        let names: Vec<&str> = specs.iter().map(|w| w.name.as_str()).collect();
        bail!(
            "unknown window {:?}; the config's windows: {}",
            args.window,
            names.join(", ")
        );
    };
    let spec = &specs[wid];
    let stored = StoredWindow::from(spec);
    let group = match &args.group {
        Some(text) => parse_group(&stored, text)?,
        None if spec.key.by.is_empty() => GroupKey::global(),
        None => bail!(
            "window {:?} keeps one list per {}: name one with --group",
            spec.name,
            spec.key.by.join(", ")
        ),
    };
    let start = instance(store.as_mut(), &job, spec, args)?;
    let sealed = store.sealed_ranges(&job, &spec.name, start)?.ok_or_else(|| {
        anyhow!(
            "window {:?} instance {start}: not sealed yet, or sealed before this store recorded input ranges",
            spec.name
        )
    })?;
    let ranges = sealed.ranges.map_err(|why| {
        Unreadable(format!(
            "window {:?} instance {start}: its input cannot be read again: {why}",
            spec.name
        ))
    })?;
    let x = read_again(&plan, wid, start, &args.item, &ranges)
        .map_err(|why| Unreadable(format!("window {:?} instance {start}: {why}", spec.name)))?;
    let late_dropped = dropped(store.as_mut(), &plan, wid, start, &args.item, &x, &group)?;
    let x = x.finish(&group, plan.input.format.user.is_some());
    let list = store
        .instance_of(&job, &spec.name, &group, start)
        .with_context(|| format!("reading window {:?} instance {start} from the store", spec.name))?;
    let mut report = report(spec, &group, start, &args.item, x, list.as_ref());
    report.late_dropped = late_dropped;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", table(&report, ranges.len()));
    }
    Ok(())
}

/// The plan explain reads with: the job's, reading the users a mapped user field names even
/// when no window counts them (as an extra that never makes a record bad, so every record
/// gets the job's verdict): bots show up in `top_users` whatever the job counts.
fn users_read(mut plan: JobPlan) -> JobPlan {
    if plan.input.format.user.is_none() {
        if let Some(user) = plan.input.user.clone() {
            plan.input.format.user = Some(user);
            plan.input.format.user_is_extra = true;
        }
    }
    plan
}

/// The instance `--at`/`--date` name, or the latest sealed one with recorded ranges.
fn instance(store: &mut dyn StoreReader, job: &str, spec: &WindowSpec, args: &ExplainArgs) -> Result<Millis> {
    let at = match (&args.at, &args.date) {
        (Some(t), _) => Some(Millis::parse_user(t).ok_or_else(|| anyhow!("--at {t:?}: not RFC 3339 or milliseconds"))?),
        (None, Some(d)) => Some(Millis::parse_date(d).ok_or_else(|| anyhow!("--date {d:?}: expected YYYY-MM-DD"))?),
        (None, None) => None,
    };
    if let Some(t) = at {
        return Ok(spec.start_for_query(t));
    }
    let latest = store
        .latest(job, &spec.name)?
        .map(|l| l.start)
        .or(store.groups(job, &spec.name)?.map(|(start, _)| start))
        .ok_or_else(|| anyhow!("window {:?} has no list yet", spec.name))?;
    // the latest sealed instance is among the few before the latest one
    let since = latest.minus(Span::from_millis(spec.slide.as_millis().saturating_mul(64)));
    let sealed = store.sealed_instances(job, &spec.name, since, 1_000)?;
    sealed.last().copied().ok_or_else(|| {
        anyhow!(
            "window {:?} has no sealed instance with recorded input ranges: name one with --at",
            spec.name
        )
    })
}

/// Reads the ranges again and tallies the item's events.
fn read_again(
    plan: &JobPlan,
    wid: usize,
    start: Millis,
    item: &str,
    ranges: &[hotlist_operators::replay::PartitionRange],
) -> Result<Explainer, String> {
    let spec = plan.window_specs()[wid].clone();
    let mut x = Explainer::new(spec, start, plan.time.allowed_lateness, item);
    read_instance(plan, wid, ranges, &mut |e, group| {
        x.event(e, group);
        true
    })?;
    Ok(x)
}

/// Most dead letters explain reads (those holding the item's id in their bytes).
const MAX_LETTERS: usize = 1_000_000;

/// The item's events dropped from the instance (`group`'s list) as late or sealed: the store's
/// dead letters that say so, each event once (`None`: the store keeps no dead letters).
fn dropped(
    store: &mut dyn StoreReader,
    plan: &JobPlan,
    wid: usize,
    start: Millis,
    item: &str,
    x: &Explainer,
    group: &GroupKey,
) -> Result<Option<u64>> {
    let specs = plan.window_specs();
    let spec = &specs[wid];
    let end = spec.end_of(start);
    let reasons = [DeadReason::Late, DeadReason::Sealed];
    let Some(letters) = store.dead_letters_containing(&plan.job_id, &reasons, item.as_bytes(), MAX_LETTERS)? else {
        return Ok(None);
    };
    if letters.len() >= MAX_LETTERS {
        bail!("more than {MAX_LETTERS} late or sealed dead letters hold {item:?}: too many to read");
    }
    let parser = Parser::new(plan.input.format.clone());
    let shapes = Shapes::new(&specs);
    let shape = shapes.of_window(wid);
    let mut key = String::new();
    let mut events: BTreeSet<(u32, u64)> = BTreeSet::new();
    // the letters' records as the job read them: through its UDFs too (ids, dims, filter)
    let raws: Vec<&[u8]> = letters.iter().map(|d| d.letter.raw.as_slice()).collect();
    let outcomes = plan.udf_runner.run(&parser, &raws)?;
    for (d, outcome) in letters.iter().zip(outcomes) {
        let l = &d.letter;
        let Outcome::Event(ev, computed) = outcome else {
            continue;
        };
        let id = computed.as_deref().unwrap_or(&ev.item_id);
        if id != item || ev.ts < start || ev.ts >= end {
            continue;
        }
        if spec.key.by.is_empty() {
            if spec.key.distinct_users && ev.user.is_none() {
                continue; // counts in no list of a distinct-user window
            }
        } else {
            let e = TimedEvent {
                text: EventText::new(item, ev.user.as_deref(), &ev.dims),
                ts: ev.ts,
                wm_before: Millis::MIN,
                hash: 0,
                partition: l.partition,
                position: l.position,
            };
            if !shapes.group(shape, &e, &mut key) || !x.in_list(&key, group) {
                continue;
            }
        }
        if dropped_from(l.reason, &l.detail, &spec.name, end, plan.time.allowed_lateness) {
            events.insert((l.partition.0, l.position));
        }
    }
    Ok(Some(events.len() as u64))
}

/// The report: the replay's tally beside what the store holds.
fn report(
    spec: &WindowSpec,
    group: &GroupKey,
    start: Millis,
    item: &str,
    x: Explanation,
    list: Option<&StoredList>,
) -> Report {
    let stored_count = list.and_then(|l| l.items.iter().find(|r| r.item_id.as_str() == item).map(|r| r.count));
    Report {
        window: spec.name.clone(),
        group: group.as_str().to_string(),
        start: start.to_string(),
        end: spec.end_of(start).to_string(),
        item: item.to_string(),
        agrees: list.and_then(|l| agrees(spec, l, item, x.count, stored_count)),
        count: x.count,
        stored_count,
        by_partition: x.by_partition,
        late_accepted: x.late_accepted,
        late_dropped: None,
        distinct_users: x.distinct_users,
        top_users: (x.top_users.into_iter())
            .map(|(user, events)| UserCount { user, events })
            .collect(),
    }
}

/// Whether the stored list agrees with the count read again: the item's stored count is it
/// (an approximate list's: at most its error bound above it), or the item is rightly absent
/// (ranked after the list's last item, or with no count at all). `None` when that cannot be
/// told: a trend list without the item (it ranks by score, from counts of other instances).
fn agrees(spec: &WindowSpec, list: &StoredList, item: &str, count: u64, stored: Option<u64>) -> Option<bool> {
    let bound = if list.exact { 0 } else { list.error_bound };
    if let Some(s) = stored {
        return Some(s >= count && s <= count.saturating_add(bound));
    }
    if spec.rank.trend().is_some() {
        return None;
    }
    if count == 0 {
        return Some(true);
    }
    if list.items.len() < spec.k {
        return Some(false);
    }
    let last = list.items.last()?;
    // ranked by count descending, then item id ascending (bytewise)
    let ranks_after = count < last.count || (count == last.count && item.as_bytes() > last.item_id.as_str().as_bytes());
    Some(ranks_after || !list.exact && count <= last.count.saturating_add(bound))
}

/// The report as a table.
fn table(r: &Report, ranges: usize) -> String {
    use std::fmt::Write as _;
    let of = if r.group.is_empty() {
        String::new()
    } else {
        format!(" group {}", r.group)
    };
    let mut out = format!(
        "window {}{of} instance [{} .. {}), item {}\n",
        r.window, r.start, r.end, r.item
    );
    let _ = writeln!(
        out,
        "count          {}   (read again from {ranges} partition range(s))",
        r.count
    );
    let verdict = match r.agrees {
        Some(true) => "agrees",
        Some(false) => "DIFFERS",
        None => "cannot tell (a trend list without the item)",
    };
    let stored = r
        .stored_count
        .map_or("not in the stored list".to_string(), |c| c.to_string());
    let _ = writeln!(out, "stored_count   {stored}   {verdict}");
    let parts: Vec<String> = r.by_partition.iter().map(|(p, n)| format!("{p}: {n}")).collect();
    let _ = writeln!(
        out,
        "by_partition   {}",
        if parts.is_empty() { "-".into() } else { parts.join(", ") }
    );
    let _ = writeln!(out, "late_accepted  {}", r.late_accepted);
    let dropped = r
        .late_dropped
        .map_or("- (the store keeps no dead letters)".to_string(), |n| n.to_string());
    let _ = writeln!(out, "late_dropped   {dropped}");
    let users = r
        .distinct_users
        .map_or("- (no user field mapped: source.format.user)".to_string(), |n| {
            n.to_string()
        });
    let _ = writeln!(out, "distinct_users {users}");
    let top: Vec<String> = r
        .top_users
        .iter()
        .map(|u| format!("{}: {}", u.user, u.events))
        .collect();
    let _ = writeln!(
        out,
        "top_users      {}",
        if top.is_empty() { "-".into() } else { top.join(", ") }
    );
    out
}

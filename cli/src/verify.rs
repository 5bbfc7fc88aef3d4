//! `hotlist verify`: is what the store serves right? For every sealed instance (since `--since`,
//! of every window or `--window`) whose input can still be read, its input ranges — recorded
//! when it sealed — are read again through the live per-record path, its lists counted again
//! (`hotlist_operators::verify`), and each compared with the store's final list: items,
//! counts and order. One line per mismatch, naming the window, instance, group and the first
//! differing rank, then a summary.
//!
//! Read only: safe beside a running job. Exit codes: 0 every checked list matches, 1 some list
//! differs, 2 nothing could be checked (no sealed instance with ranges in the range, or none
//! whose input can still be read).
//!
//! Not checked (and said so in the summary): approximate lists (a sketch window's list that no
//! replay made exact: its counts are estimates), trend lists (their order needs the earlier
//! instances' counts), and instances with more than `--max-keys` distinct keys.

use crate::instance_input::{not_rereadable, read_instance};
use crate::restore_drill::{drill, scratch_dir};
use anyhow::{anyhow, bail, Result};
use hotlist_dataflow::config::{self, JobPlan};
use hotlist_operators::group::GroupKey;
use hotlist_operators::time::Millis;
use hotlist_operators::verify::{first_difference, Difference, Recount};
use hotlist_sinks::StoreReader;
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `hotlist verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// The job's config: its source (to read the instances again) and its store.
    #[arg(long, short, default_value = "configs/local.toml")]
    pub config: PathBuf,
    /// Only instances starting at or after this time: RFC 3339 or milliseconds since the epoch
    /// (default: every sealed instance with recorded ranges).
    #[arg(long, allow_hyphen_values = true)]
    pub since: Option<String>,
    /// Only this window (default: every window).
    #[arg(long, short)]
    pub window: Option<String>,
    /// Most distinct keys one instance's recount may hold (items; per-group windows (group,
    /// item); distinct-user windows (group, item, user)): an instance with more is not checked.
    #[arg(long, default_value_t = 20_000_000)]
    pub max_keys: usize,
    /// Print one JSON object (the summary and every mismatch) instead of lines.
    #[arg(long)]
    pub json: bool,
    /// The restore drill: restore a committed checkpoint into a scratch directory, run the job
    /// from it to the current end of the input into a scratch store, and compare every list it
    /// sealed with the store's (instead of counting instances again).
    #[arg(long)]
    pub restore: bool,
    /// With --restore: the checkpoint to restore (default: the oldest retained committed one).
    #[arg(long, requires = "restore")]
    pub checkpoint: Option<u64>,
    /// With --restore: work in this empty directory and keep it (default: a temporary one,
    /// removed afterwards).
    #[arg(long, requires = "restore")]
    pub scratch: Option<PathBuf>,
}

/// Instances read per store call.
const PAGE: usize = 1_000;

/// What `verify --json` prints.
#[derive(Default, Serialize)]
struct Summary {
    /// Instances whose input was read again and counted.
    checked_instances: u64,
    /// Lists compared with the store's.
    checked_lists: u64,
    /// Lists that differ.
    mismatches: Vec<Mismatch>,
    /// Instances whose input cannot be read again, with why.
    unreadable: Vec<Unchecked>,
    /// Instances or lists not checked, with why.
    skipped: Vec<Unchecked>,
    /// With --restore: the checkpoint restored, and why the drill failed (`None`: it ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    restored_checkpoint: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restore_failed: Option<String>,
}

/// A list that differs from its recount.
#[derive(Serialize)]
struct Mismatch {
    window: String,
    start: String,
    group: String,
    rank: usize,
    stored: Option<(String, u64)>,
    recounted: Option<(String, u64)>,
    /// The restore drill's words for the difference.
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

/// An instance (or list) not checked, and why.
#[derive(Serialize)]
struct Unchecked {
    window: String,
    start: String,
    group: Option<String>,
    why: String,
}

/// The process exit code a summary calls for.
fn exit_code(s: &Summary) -> u8 {
    if !s.mismatches.is_empty() || s.restore_failed.is_some() {
        1
    } else if s.checked_lists == 0 {
        2
    } else {
        0
    }
}

/// Runs `hotlist verify`, prints its lines (or JSON) and returns the exit code.
pub fn verify(args: &VerifyArgs) -> Result<u8> {
    let plan = config::load(&args.config, &config::Overrides::default())?;
    let since = match &args.since {
        Some(t) => Millis::parse_user(t).ok_or_else(|| anyhow!("--since {t:?}: not RFC 3339 or milliseconds"))?,
        None => Millis::MIN,
    };
    let specs = plan.window_specs();
    if let Some(w) = &args.window {
        if !specs.iter().any(|s| &s.name == w) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!("unknown window {w:?}; the config's windows: {}", names.join(", "));
        }
    }
    let mut summary = Summary::default();
    if let Some(why) = not_rereadable(&args.config) {
        // nothing can be read again (or restored and run to the same events)
        eprintln!("error: {why}");
        return Ok(if args.restore { 1 } else { 2 });
    }
    if args.restore {
        restore_drill(&plan, args, &mut summary)?;
    } else {
        let mut store = crate::serve::opener(&plan.sink)?()?;
        for (wid, spec) in specs.iter().enumerate() {
            if args.window.as_ref().is_some_and(|w| w != &spec.name) {
                continue;
            }
            verify_window(store.as_mut(), &plan, wid, since, args, &mut summary)?;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary);
    }
    Ok(exit_code(&summary))
}

/// The restore drill (`restore_drill`), its findings in `summary`: each list that differs a
/// mismatch; a checkpoint that cannot be had or does not restore and run, `restore_failed`.
fn restore_drill(plan: &JobPlan, args: &VerifyArgs, summary: &mut Summary) -> Result<()> {
    let (scratch, _keep_until_done) = scratch_dir(args.scratch.as_ref())?;
    match drill(plan, &args.config, &scratch, args.checkpoint) {
        Ok(d) => {
            summary.restored_checkpoint = Some(d.epoch);
            summary.checked_lists = d.compared;
            for (window, start, group, why) in d.differing {
                summary.mismatches.push(Mismatch {
                    window,
                    start: start.to_string(),
                    group,
                    rank: 0,
                    stored: None,
                    recounted: None,
                    why: Some(why),
                });
            }
        }
        Err(e) => summary.restore_failed = Some(format!("{e:#}")),
    }
    Ok(())
}

/// Checks every sealed instance of window `wid` starting at or after `since`.
fn verify_window(
    store: &mut dyn StoreReader,
    plan: &JobPlan,
    wid: usize,
    since: Millis,
    args: &VerifyArgs,
    summary: &mut Summary,
) -> Result<()> {
    let spec = &plan.window_specs()[wid];
    let mut from = since;
    loop {
        let starts = store.sealed_instances(&plan.job_id, &spec.name, from, PAGE)?;
        for &start in &starts {
            verify_instance(store, plan, wid, start, args, summary)?;
        }
        match starts.last() {
            Some(last) if starts.len() == PAGE => from = Millis(last.0.saturating_add(1)),
            _ => return Ok(()),
        }
    }
}

/// Checks one sealed instance: reads it again, counts its lists, compares each with the store.
fn verify_instance(
    store: &mut dyn StoreReader,
    plan: &JobPlan,
    wid: usize,
    start: Millis,
    args: &VerifyArgs,
    summary: &mut Summary,
) -> Result<()> {
    let spec = plan.window_specs()[wid].clone();
    let job = plan.job_id.as_str();
    let unchecked = |group: Option<&GroupKey>, why: String| Unchecked {
        window: spec.name.clone(),
        start: start.to_string(),
        group: group.map(|g| g.as_str().to_string()),
        why,
    };
    if spec.rank.trend().is_some() {
        summary.skipped.push(unchecked(
            None,
            "a trend list (its order needs the earlier instances)".into(),
        ));
        return Ok(());
    }
    let Some(sealed) = store.sealed_ranges(job, &spec.name, start)? else {
        return Ok(()); // listed a moment ago; a reset since removed it
    };
    let ranges = match sealed.ranges {
        Ok(r) => r,
        Err(why) => {
            summary.unreadable.push(unchecked(None, why));
            return Ok(());
        }
    };
    let mut recount = Recount::new(spec.clone(), start, plan.time.allowed_lateness, args.max_keys);
    let mut over = None;
    let read = read_instance(plan, wid, &ranges, &mut |e, group| match recount.event(e, group) {
        Ok(()) => true,
        Err(o) => {
            over = Some(o);
            false
        }
    });
    if let Err(why) = read {
        summary.unreadable.push(unchecked(None, why));
        return Ok(());
    }
    if let Some(o) = over {
        summary.skipped.push(unchecked(None, o.to_string()));
        return Ok(());
    }
    summary.checked_instances += 1;
    let mut lists = recount.lists();
    if spec.key.by.is_empty() {
        // a global window's stored list is compared even when nothing counted again
        lists.entry(GroupKey::global()).or_default();
    }
    for (group, recounted) in lists {
        let Some(stored) = store.instance_of(job, &spec.name, &group, start)? else {
            push_mismatch(summary, &spec.name, start, &group, first_difference(&[], &recounted));
            continue;
        };
        if !stored.exact {
            summary
                .skipped
                .push(unchecked(Some(&group), "an approximate list".into()));
            continue;
        }
        summary.checked_lists += 1;
        let stored: Vec<(String, u64)> = (stored.items.iter())
            .map(|r| (r.item_id.as_str().to_string(), r.count))
            .collect();
        push_mismatch(
            summary,
            &spec.name,
            start,
            &group,
            first_difference(&stored, &recounted),
        );
    }
    Ok(())
}

/// Records a difference (if any) as a mismatch, printing its line unless `--json`.
fn push_mismatch(summary: &mut Summary, window: &str, start: Millis, group: &GroupKey, d: Option<Difference>) {
    let Some(d) = d else { return };
    summary.mismatches.push(Mismatch {
        window: window.to_string(),
        start: start.to_string(),
        group: group.as_str().to_string(),
        rank: d.rank,
        stored: d.stored,
        recounted: d.recounted,
        why: None,
    });
}

/// The mismatches, one line each, and the summary line.
fn print_summary(s: &Summary) {
    let entry = |e: &Option<(String, u64)>| match e {
        Some((item, count)) => format!("{item} ({count})"),
        None => "nothing".to_string(),
    };
    for m in &s.mismatches {
        let of = if m.group.is_empty() {
            String::new()
        } else {
            format!(" group {}", m.group)
        };
        match &m.why {
            Some(why) => println!("MISMATCH window {} instance {}{of}: {why}", m.window, m.start),
            None => println!(
                "MISMATCH window {} instance {}{of}: rank {} is {} in the store, {} counted again",
                m.window,
                m.start,
                m.rank,
                entry(&m.stored),
                entry(&m.recounted)
            ),
        }
    }
    if let Some(why) = &s.restore_failed {
        println!("RESTORE FAILED: {why}");
    }
    if let Some(e) = s.restored_checkpoint {
        println!(
            "restored checkpoint {e}: compared {} final list(s) the run sealed with the store's",
            s.checked_lists
        );
    }
    for u in &s.unreadable {
        println!("unreadable: window {} instance {}: {}", u.window, u.start, u.why);
    }
    println!(
        "verified {} list(s) of {} instance(s): {} mismatch(es), {} instance(s) could not be read again, {} not checked",
        s.checked_lists,
        s.checked_instances,
        s.mismatches.len(),
        s.unreadable.len(),
        s.skipped.len()
    );
}

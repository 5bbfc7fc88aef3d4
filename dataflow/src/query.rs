//! `hotlist query`: print a window's list from the sink store.
//!
//! Which instance: the latest (greatest start) by default; `--at TIME` picks the instance that
//! ends soonest after TIME (for tumbling windows: the one containing TIME; for hopping windows:
//! the "last `size` up to TIME" view); `--date D` is `--at D` at 00:00 UTC (for a `1d` window:
//! that day's list).

use crate::config;
use anyhow::{anyhow, bail, Result};
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{SqliteStore, StoreReader, StoredList};
use std::path::PathBuf;

/// Arguments of `hotlist query`.
#[derive(clap::Args, Debug)]
pub struct QueryArgs {
    /// The job's config (to find the store — SQLite, PostgreSQL or Redis — and the job id).
    #[arg(long, short, default_value = "configs/local.toml", conflicts_with = "db")]
    pub config: PathBuf,
    /// Read this SQLite file directly instead of the config's sink.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Job id (default: the config's job.id, or "hotlist" with --db).
    #[arg(long)]
    pub job: Option<String>,
    /// Window name, e.g. 5m.
    #[arg(long, short)]
    pub window: String,
    /// Show at most this many rows (default: all K).
    #[arg(long, short)]
    pub k: Option<usize>,
    /// The instance for this time: RFC 3339 or milliseconds since the epoch.
    #[arg(long, conflicts_with = "date")]
    pub at: Option<String>,
    /// The instance starting at 00:00 UTC of this date (YYYY-MM-DD).
    #[arg(long)]
    pub date: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs the query and prints the result.
pub fn query(args: &QueryArgs) -> Result<()> {
    let (mut store, job): (Box<dyn StoreReader>, String) = match &args.db {
        Some(db) => (
            Box::new(SqliteStore::open_read_only(db)?),
            args.job.clone().unwrap_or_else(|| "hotlist".into()),
        ),
        None => {
            let plan = config::load(&args.config, &config::Overrides::default())?;
            let open = crate::serve::opener(&plan.sink)?;
            (open()?, args.job.clone().unwrap_or(plan.job_id))
        }
    };
    let list = find_list(store.as_mut(), &job, args)?;
    let shown = args.k.unwrap_or(usize::MAX);
    if args.json {
        println!("{}", to_json(&list, shown));
    } else {
        print!("{}", to_table(&list, shown));
    }
    Ok(())
}

fn find_list(store: &mut dyn StoreReader, job: &str, args: &QueryArgs) -> Result<StoredList> {
    let windows = store.windows(job)?;
    let Some(w) = windows.iter().find(|w| w.name == args.window) else {
        let names: Vec<&str> = windows.iter().map(|w| w.name.as_str()).collect();
        if names.is_empty() {
            bail!("job {job:?} has no windows in this store (has it run?)");
        }
        bail!(
            "unknown window {:?} for job {job:?}; windows: {}",
            args.window,
            names.join(", ")
        );
    };
    if args.k == Some(0) {
        bail!("--k must be at least 1");
    }
    let at = match (&args.at, &args.date) {
        (Some(t), _) => Some(Millis::parse_user(t).ok_or_else(|| anyhow!("--at {t:?}: not RFC 3339 or milliseconds"))?),
        (None, Some(d)) => Some(Millis::parse_date(d).ok_or_else(|| anyhow!("--date {d:?}: expected YYYY-MM-DD"))?),
        (None, None) => None,
    };
    match at {
        None => store
            .latest(job, &w.name)?
            .ok_or_else(|| anyhow!("window {:?} has no list yet", w.name)),
        Some(t) => {
            let spec = WindowSpec {
                name: w.name.clone(),
                size: w.size,
                slide: w.slide,
                k: w.k,
            };
            let start = spec.start_for_query(t);
            store.instance(job, &w.name, start)?.ok_or_else(|| {
                anyhow!(
                    "window {:?} has no list for the instance [{} .. {})",
                    w.name,
                    start,
                    spec.end_of(start)
                )
            })
        }
    }
}

/// The JSON shape shared with the HTTP API.
pub fn to_json(l: &StoredList, k: usize) -> serde_json::Value {
    serde_json::json!({
        "window": l.window,
        "window_start": l.start.0,
        "window_end": l.end.0,
        "as_of": l.as_of.to_rfc3339(),
        "watermark": l.watermark.0,
        "revision": l.revision,
        "state": l.state.as_str(),
        "final": l.state == hotlist_operators::record::ListState::Final,
        "exact": true,
        "items": l.items.iter().take(k).map(|r| serde_json::json!({"item_id": r.item_id.as_str(), "count": r.count})).collect::<Vec<_>>(),
    })
}

fn to_table(l: &StoredList, k: usize) -> String {
    let mut out = format!(
        "window {} [{} .. {})  revision {}  {}  final={}  as_of {}\n",
        l.window,
        l.start,
        l.end,
        l.revision,
        l.state.as_str(),
        l.state == hotlist_operators::record::ListState::Final,
        l.as_of
    );
    out.push_str(&format!("{:>5}  {:<40} {:>12}\n", "rank", "item_id", "count"));
    for (i, r) in l.items.iter().take(k).enumerate() {
        out.push_str(&format!("{:>5}  {:<40} {:>12}\n", i + 1, r.item_id, r.count));
    }
    out
}

//! `hotlist query`: print a window's list from the sink store.
//!
//! Which instance: the latest (greatest start) by default; `--at TIME` picks the instance that
//! ends soonest after TIME (for tumbling windows: the one containing TIME; for hopping windows:
//! the "last `size` up to TIME" view); `--date D` is `--at D` at 00:00 UTC (for a `1d` window:
//! that day's list).
//!
//! Both outputs say what the list is: an approximate (sketch) list is marked `≈` with the most
//! any count may be high by, and a list a sketch was compared with (`mode = "both"`) shows the
//! sketch's recall and over-counts; a sealed list a replay made exact (`exact_at_seal`) shows
//! its certificate; `--json` has `exact`, `error_bound`, `sketch_check` and `certificate` as
//! the HTTP API does.
//!
//! A window with `by` dims keeps one list per group: `--group country=US` (every dim,
//! `dim=value` pairs joined by `,`; `--group '(other)'` for the overflow group) picks one.
//! Without `--group`, such a window's groups of the latest instance are printed with how to
//! pick one.

use anyhow::{anyhow, bail, Result};
use hotlist_dataflow::config;
use hotlist_operators::group::{GroupKey, OTHER_GROUP};
use hotlist_operators::time::Millis;
use hotlist_operators::window::WindowSpec;
use hotlist_sinks::{SqliteStore, StoreReader, StoredList, StoredWindow};
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
    /// The group of a window with `by` dims: `dim=value` pairs joined by `,` (every dim), or
    /// `(other)`.
    #[arg(long, short)]
    pub group: Option<String>,
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
    let group = match &args.group {
        Some(text) => parse_group(w, text)?,
        None if w.by.is_empty() => GroupKey::global(),
        None => bail!("{}", pick_a_group(store, job, w)?),
    };
    let at = match (&args.at, &args.date) {
        (Some(t), _) => Some(Millis::parse_user(t).ok_or_else(|| anyhow!("--at {t:?}: not RFC 3339 or milliseconds"))?),
        (None, Some(d)) => Some(Millis::parse_date(d).ok_or_else(|| anyhow!("--date {d:?}: expected YYYY-MM-DD"))?),
        (None, None) => None,
    };
    let of_group = || match group.is_global() {
        true => String::new(),
        false => format!(" group {}", group.as_str()),
    };
    match at {
        None => store
            .latest_of(job, &w.name, &group)?
            .ok_or_else(|| anyhow!("window {:?}{} has no list yet", w.name, of_group())),
        Some(t) => {
            let spec = WindowSpec {
                rank: Default::default(),
                key: Default::default(),
                name: w.name.clone(),
                size: w.size,
                slide: w.slide,
                k: w.k,
            };
            let start = spec.start_for_query(t);
            store.instance_of(job, &w.name, &group, start)?.ok_or_else(|| {
                anyhow!(
                    "window {:?}{} has no list for the instance [{} .. {})",
                    w.name,
                    of_group(),
                    start,
                    spec.end_of(start)
                )
            })
        }
    }
}

/// The group `--group TEXT` names for window `w`, checked against its dims.
pub(crate) fn parse_group(w: &StoredWindow, text: &str) -> Result<GroupKey> {
    if w.by.is_empty() {
        bail!("--group {text:?}: window {:?} has no groups (no `by` dims)", w.name);
    }
    if text == OTHER_GROUP {
        return Ok(GroupKey::other());
    }
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for part in text.split(',') {
        let Some((dim, value)) = part.split_once('=') else {
            bail!(
                "--group {text:?}: expected dim=value pairs joined by ',', e.g. {}=…",
                w.by[0]
            );
        };
        if !w.by.iter().any(|d| d == dim) {
            bail!(
                "--group {text:?}: {dim:?} is not a dim of window {:?} (its dims: {})",
                w.name,
                w.by.join(", ")
            );
        }
        if pairs.iter().any(|(d, _)| *d == dim) {
            bail!("--group {text:?}: {dim} given twice");
        }
        pairs.push((dim, value));
    }
    let missing: Vec<&str> =
        w.by.iter()
            .map(String::as_str)
            .filter(|d| !pairs.iter().any(|(p, _)| p == d))
            .collect();
    if !missing.is_empty() {
        bail!(
            "--group {text:?}: window {:?} also needs {}",
            w.name,
            missing.join(", ")
        );
    }
    Ok(GroupKey::from_pairs(pairs))
}

/// For a per-group window queried without `--group`: prints the groups of its latest instance
/// (one per line) and returns the line saying how to pick one.
fn pick_a_group(store: &mut dyn StoreReader, job: &str, w: &StoredWindow) -> Result<String> {
    let example: Vec<String> = w.by.iter().map(|d| format!("{d}=VALUE")).collect();
    let how = format!(
        "window {:?} keeps one list per {}: pick one with --group {}",
        w.name,
        w.by.join(", "),
        example.join(",")
    );
    let Some((start, groups)) = store.groups(job, &w.name)? else {
        return Ok(format!("{how} (it has no list yet)"));
    };
    println!("groups of window {} instance starting {start}:", w.name);
    for g in &groups {
        match GroupKey::parse(g.as_str()) {
            Ok(Some(pairs)) => {
                let shown: Vec<String> = pairs.iter().map(|(d, v)| format!("{d}={v}")).collect();
                println!("  {}", shown.join(","));
            }
            _ => println!("  {}", g.as_str()),
        }
    }
    Ok(how)
}

/// The JSON shape shared with the HTTP API (plus `watermark`).
pub fn to_json(l: &StoredList, k: usize) -> serde_json::Value {
    let mut v = serde_json::json!({
        "window": l.window,
        "window_start": l.start.0,
        "window_end": l.end.0,
        "as_of": l.as_of.to_rfc3339(),
        "watermark": l.watermark.0,
        "revision": l.revision,
        "state": l.state.as_str(),
        "final": l.state == hotlist_operators::record::ListState::Final,
        "exact": l.exact,
        "error_bound": l.error_bound,
        "items": l.items.iter().take(k).map(hotlist_server::api::item_json).collect::<Vec<_>>(),
    });
    if let Some(c) = &l.sketch_check {
        v["sketch_check"] = hotlist_server::api::sketch_check_json(c);
    }
    if let Some(c) = &l.certificate {
        v["certificate"] = serde_json::json!({"threshold": c.threshold, "counted": c.counted, "passes": c.passes});
    }
    if !l.group.is_global() {
        v["group"] = hotlist_server::groups::group_json(&l.group);
    }
    v
}

fn to_table(l: &StoredList, k: usize) -> String {
    let group = match l.group.is_global() {
        true => String::new(),
        false => format!("  group {}", l.group.as_str()),
    };
    let mut out = format!(
        "window {}{group} [{} .. {})  revision {}  {}  final={}  as_of {}\n",
        l.window,
        l.start,
        l.end,
        l.revision,
        l.state.as_str(),
        l.state == hotlist_operators::record::ListState::Final,
        l.as_of
    );
    out.push_str(&accuracy_lines(l));
    if let Some(w) = l.items.first().and_then(|r| r.trend.as_ref()).map(|t| t.history.len()) {
        out.push_str(&trend_table(l, k, w));
        return out;
    }
    out.push_str(&format!("{:>5}  {:<40} {:>12}\n", "rank", "item_id", "count"));
    for (i, r) in l.items.iter().take(k).enumerate() {
        out.push_str(&format!("{:>5}  {:<40} {:>12}\n", i + 1, r.item_id, r.count));
    }
    out
}

/// A trend list's rows: count, the usual count per instance (`baseline / W`), "× usual" and
/// the score, under a line saying what the order is.
fn trend_table(l: &StoredList, k: usize, w: usize) -> String {
    let mut out = format!("trending: ranked by surge over each item's last {w} instances\n");
    out.push_str(&format!(
        "{:>5}  {:<40} {:>12} {:>10} {:>9} {:>9}\n",
        "rank", "item_id", "count", "usual", "× usual", "score"
    ));
    for (i, r) in l.items.iter().take(k).enumerate() {
        let baseline = r.baseline().unwrap_or(0);
        let w32 = u32::try_from(w).unwrap_or(u32::MAX);
        out.push_str(&format!(
            "{:>5}  {:<40} {:>12} {:>10.1} {:>8.1}× {:>9.2}\n",
            i + 1,
            r.item_id,
            r.count,
            baseline as f64 / w.max(1) as f64,
            hotlist_operators::trend::ratio(r.count, baseline, w32),
            hotlist_operators::trend::score(r.count, baseline, w32),
        ));
    }
    out
}

/// What the list is, one line each: `≈ approximate: counts may be high by ≤ N` for a sketch's
/// list, `sketch check: recall …` when a sketch was compared with it, `exact (certified …)` for
/// a sealed list a replay made exact; nothing for a plain exact list.
fn accuracy_lines(l: &StoredList) -> String {
    let mut out = String::new();
    if !l.exact {
        out.push_str(&format!("≈ approximate: counts may be high by ≤ {}\n", l.error_bound));
    }
    if let Some(c) = &l.sketch_check {
        out.push_str(&format!(
            "sketch check: recall {:.3} ({}/{})  over-count max {}  mean {:.1}\n",
            c.recall(),
            c.found,
            c.of,
            c.max_overcount,
            c.mean_overcount()
        ));
    }
    if let Some(c) = &l.certificate {
        out.push_str(&format!(
            "exact (certified by a replay: every item estimated at ≥ {} counted exactly, {} items, {} pass(es))\n",
            c.threshold, c.counted, c.passes
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::record::{ListState, RankedItem, SketchCheck};
    use hotlist_operators::time::Millis;

    fn stored(exact: bool, error_bound: u64, sketch_check: Option<SketchCheck>) -> StoredList {
        StoredList {
            group: Default::default(),
            window: "5m".into(),
            start: Millis(0),
            end: Millis(300_000),
            revision: 2,
            state: ListState::Closed,
            watermark: Millis(300_000),
            as_of: Millis(1_700_000_000_000),
            items: vec![RankedItem {
                item_id: "a".into(),
                count: 40,
                trend: None,
            }],
            exact,
            error_bound,
            sketch_check,
            certificate: None,
        }
    }

    /// A trend list's outputs show each item's baseline: the table its usual count, "× usual"
    /// and score under a line naming the order; the JSON `baseline`, `score`, `ratio` and
    /// `history` (and a count list's items none of them).
    #[test]
    fn trend_lists_show_what_each_item_rises_over() {
        let mut l = stored(true, 0, None);
        l.items = vec![RankedItem {
            item_id: "rising".into(),
            count: 20,
            trend: Some(hotlist_operators::record::TrendFacts { history: vec![2, 3, 1] }),
        }];
        let table = to_table(&l, 10);
        assert!(
            table.contains("trending: ranked by surge over each item's last 3 instances\n"),
            "{table}"
        );
        // usual 6/3 = 2.0 a instance; (20 + 1) / (2 + 1) = 7.0×; z = (60 - 6) / √(3·9) = 10.39
        assert!(table.contains("rising"), "{table}");
        assert!(
            table.contains(" 2.0 ") && table.contains("7.0×") && table.contains("10.39"),
            "{table}"
        );
        let json = to_json(&l, 10);
        let item = &json["items"][0];
        assert_eq!(item["baseline"], 6);
        assert_eq!(item["history"], serde_json::json!([2, 3, 1]));
        assert!((item["ratio"].as_f64().unwrap() - 7.0).abs() < 1e-12);
        assert!((item["score"].as_f64().unwrap() - 54.0 / 27f64.sqrt()).abs() < 1e-12);
        let counted = to_json(&stored(true, 0, None), 10);
        assert_eq!(counted["items"][0], serde_json::json!({"item_id": "a", "count": 40}));
    }

    /// Both outputs say what the list is; a plain exact list has no accuracy line and no
    /// `sketch_check`.
    #[test]
    fn outputs_say_what_the_list_is() {
        let check = SketchCheck {
            found: 97,
            of: 100,
            max_overcount: 5,
            total_overcount: 120,
        };
        let approx = stored(false, 37, Some(check));
        let table = to_table(&approx, 10);
        assert!(
            table.contains("\n≈ approximate: counts may be high by ≤ 37\n"),
            "{table}"
        );
        assert!(
            table.contains("\nsketch check: recall 0.970 (97/100)  over-count max 5  mean 1.2\n"),
            "{table}"
        );
        let json = to_json(&approx, 10);
        assert_eq!(
            (json["exact"].as_bool(), json["error_bound"].as_u64()),
            (Some(false), Some(37))
        );
        assert_eq!(
            json["sketch_check"],
            serde_json::json!({"recall": 0.97, "found": 97, "of": 100, "max_overcount": 5, "mean_overcount": 1.2})
        );
        let exact = stored(true, 0, None);
        let table = to_table(&exact, 10);
        assert!(!table.contains('≈') && !table.contains("sketch"), "{table}");
        let json = to_json(&exact, 10);
        assert_eq!(
            (json["exact"].as_bool(), json["error_bound"].as_u64()),
            (Some(true), Some(0))
        );
        assert!(json.get("sketch_check").is_none(), "{json}");
        assert!(json.get("certificate").is_none(), "{json}");
        let mut certified = stored(true, 0, None);
        certified.certificate = Some(hotlist_operators::certify::Certificate {
            threshold: 12,
            counted: 340,
            passes: 1,
        });
        let table = to_table(&certified, 10);
        assert!(
            table.contains("\nexact (certified by a replay: every item estimated at ≥ 12 counted exactly, 340 items, 1 pass(es))\n"),
            "{table}"
        );
        assert_eq!(
            to_json(&certified, 10)["certificate"],
            serde_json::json!({"threshold": 12, "counted": 340, "passes": 1})
        );
    }

    /// `--group` names every dim of a per-group window (or `(other)`); anything else is one
    /// clear line naming what is wrong.
    #[test]
    fn groups_are_parsed_against_the_windows_dims() {
        let w = |by: &[&str]| StoredWindow {
            name: "5m".into(),
            size: hotlist_operators::time::Span::from_millis(300_000),
            slide: hotlist_operators::time::Span::from_millis(300_000),
            k: 3,
            by: by.iter().map(|d| d.to_string()).collect(),
        };
        let both = w(&["country", "device"]);
        let got = parse_group(&both, "device=mobile,country=US").unwrap();
        assert_eq!(got, GroupKey::from_pairs([("country", "US"), ("device", "mobile")]));
        assert_eq!(parse_group(&both, "(other)").unwrap(), GroupKey::other());
        let err = |w: &StoredWindow, t: &str| parse_group(w, t).unwrap_err().to_string();
        assert!(err(&both, "country=US").ends_with("also needs device"));
        assert!(err(&both, "city=x,country=US").contains("\"city\" is not a dim"));
        assert!(err(&both, "US").contains("expected dim=value"));
        assert!(err(&w(&[]), "country=US").contains("has no groups"));
        assert!(!err(&both, "country=US").contains('\n'));
    }
}

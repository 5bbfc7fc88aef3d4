//! Rust UDFs (`[[udf]]`, Arroyo's plugin format) on the binary, against a model of the example
//! UDFs written here in plain Rust: the item id computed by `normalize_url`, a `country` dim by
//! `country_of` next to a pointer dim, records dropped by the `is_human` filter. Over files on 1
//! and 2 workers the sealed lists (global and per group), the dead letters (reasons, positions,
//! details) and the summary's filtered count equal the model's; a panicking UDF (`shout`)
//! dead-letters only its records; SIGKILLs and restores onto another worker count change
//! nothing; a changed library is refused at restore unless accepted; config mistakes are one
//! line naming the UDF.
//!
//! The model and the input are shared with the Kafka test (`kafka/udf.rs`).

use hotlist_tests::kills::{kill_and_restart, KillPlan, KillReport};
use hotlist_tests::model::{self, ModelWindow};
use hotlist_tests::run_hotlist;
use hotlist_tests::udfs::{udf_lib, udf_source};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Records per partition.
pub(crate) type Parts = Vec<Vec<Vec<u8>>>;

/// The first event time of every partition.
const START: i64 = 1_713_462_150_123;

/// The pages the URLs name (host, path), most popular first.
const PAGES: &[(&str, &str)] = &[
    ("news.example.com", "/a/1"),
    ("news.example.com", "/a/2"),
    ("shop.example.org", "/Cart/Item-7"),
    ("example.net", ""),
    ("news.example.com", "/b/Story"),
    ("shop.example.org", "/c"),
    ("example.net", "/x/y/z"),
    ("wwwx.example.com", "/a"),
    ("blog.www.example.com", "/post"),
    ("news.example.com", "/a/3"),
];

const HUMANS: &[&str] = &[
    "Mozilla/5.0 (X11; Linux x86_64) Firefox/125.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4) Safari/604.1",
    "",
];

const BOTS: &[&str] = &[
    "Mozilla/5.0 (compatible; Googlebot/2.1)",
    "SomeCRAWLER 1.0",
    "Baiduspider",
    "RoBoT/3",
];

/// A first octet `country_of` cannot read, or reads after trimming.
const ODD_IPS: &[&str] = &["256.1.1.1", "abc.1.2.3", "+1.2.3.4", " 10.0.0.1 ", "::1", "0007.0.0.1"];

/// One spelling of a page's URL: scheme, `www.`, the host's case, trailing slashes, a query, a
/// fragment and surrounding blanks vary; the path's case does not.
fn spell(rng: &mut ChaCha8Rng, host: &str, path: &str) -> String {
    const SCHEMES: &[&str] = &["", "http://", "https://", "HTTPS://", "hTTp://"];
    const WWW: &[&str] = &["", "", "www.", "WWW."];
    const TRAILING: &[&str] = &["", "", "/", "//"];
    const QUERIES: &[&str] = &["", "", "?utm_source=x", "?next=http://other.example/a/"];
    const FRAGMENTS: &[&str] = &["", "", "#top", "#a/b"];
    let host: String = host
        .chars()
        .map(|c| {
            if rng.random_bool(0.3) {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    let pad = if rng.random_bool(0.05) { " " } else { "" };
    let pick = |rng: &mut ChaCha8Rng, from: &[&'static str]| from[rng.random_range(0..from.len())];
    format!(
        "{pad}{}{}{host}{path}{}{}{}{pad}",
        pick(rng, SCHEMES),
        pick(rng, WWW),
        pick(rng, TRAILING),
        pick(rng, QUERIES),
        pick(rng, FRAGMENTS)
    )
}

/// `partitions` × `lines` JSON records `{"url", "ts", "ip", "ua", "device"}`, deterministic for a
/// seed: URLs spelled many ways, bots and missing or null user agents, odd and integer IPs,
/// missing devices; a few URLs that are booleans, integers, missing, null, empty once
/// normalised or too long; with probability `boom_p` a path holding "boom" (or "BOOM"). Event
/// times step ~40 ms with up to 1.5 s of disorder: never late under 2 s out-of-orderness.
pub(crate) fn records(seed: u64, partitions: usize, lines: usize, boom_p: f64) -> Parts {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..partitions)
        .map(|_| {
            let mut t = START;
            (0..lines)
                .map(|_| {
                    t += rng.random_range(0..=80);
                    let ts = t - rng.random_range(0..=1_500);
                    let mut obj = serde_json::Map::new();
                    let url = match rng.random_range(0..400) {
                        0..=3 => Some(Value::Bool(rng.random_bool(0.5))),
                        4..=7 => None,
                        8 | 9 => Some(Value::Null),
                        10..=13 => Some(Value::from(rng.random_range(0..20))),
                        14 | 15 => Some(Value::from(
                            ["https://", "HTTP://www./", " ?q=1"][rng.random_range(0..3)],
                        )),
                        16 => Some(Value::from(format!("https://example.net/{}", "p".repeat(300)))),
                        _ => {
                            // two draws, the smaller kept: popular pages first, with ties
                            let i = rng.random_range(0..PAGES.len()).min(rng.random_range(0..PAGES.len()));
                            let (host, path) = PAGES[i];
                            let path = if rng.random_bool(boom_p) {
                                format!("{path}/{}", ["boom", "ka-boom!", "BOOM"][rng.random_range(0..3)])
                            } else {
                                path.to_string()
                            };
                            Some(Value::from(spell(&mut rng, host, &path)))
                        }
                    };
                    if let Some(url) = url {
                        obj.insert("url".into(), url);
                    }
                    obj.insert("ts".into(), ts.into());
                    let ip = match rng.random_range(0..100) {
                        0..=2 => None,
                        3 | 4 => Some(Value::Null),
                        5..=7 => Some(Value::from(rng.random_range(-5..300))),
                        8..=10 => Some(Value::from(ODD_IPS[rng.random_range(0..ODD_IPS.len())])),
                        _ => Some(Value::from(format!(
                            "{}.{}.{}.{}",
                            rng.random_range(0..=255),
                            rng.random_range(0..=255),
                            rng.random_range(0..=255),
                            rng.random_range(1..=254)
                        ))),
                    };
                    let ua = match rng.random_range(0..100) {
                        0..=9 => None,
                        10..=12 => Some(Value::Null),
                        13..=27 => Some(Value::from(BOTS[rng.random_range(0..BOTS.len())])),
                        28 | 29 => Some(Value::from(7)),
                        _ => Some(Value::from(HUMANS[rng.random_range(0..HUMANS.len())])),
                    };
                    for (key, value) in [("ip", ip), ("ua", ua)] {
                        if let Some(value) = value {
                            obj.insert(key.into(), value);
                        }
                    }
                    if rng.random_bool(0.95) {
                        obj.insert("device".into(), if rng.random_bool(0.6) { "web" } else { "app" }.into());
                    }
                    serde_json::to_vec(&Value::Object(obj)).expect("a JSON object")
                })
                .collect()
        })
        .collect()
}

/// The model of `normalize_url`: scheme (http/https, any case), query, fragment, a leading
/// `www.` of the host and trailing slashes go; the host is lower-cased, the path kept.
fn normalize(url: &str) -> String {
    let url = url.trim();
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let mut rest = &url[..cut];
    for scheme in ["http://", "https://"] {
        if rest.len() >= scheme.len() && rest[..scheme.len()].eq_ignore_ascii_case(scheme) {
            rest = &rest[scheme.len()..];
            break;
        }
    }
    let slash = rest.find('/').unwrap_or(rest.len());
    let host = rest[..slash].to_ascii_lowercase();
    let host = host.strip_prefix("www.").unwrap_or(&host).to_string();
    let mut path = &rest[slash..];
    while let Some(p) = path.strip_suffix('/') {
        path = p;
    }
    host + path
}

/// The model of `country_of`: the first dotted part of the trimmed address, all digits and at
/// most 255, picks NL, US, JP or BR by its value mod 4; anything else is ZZ.
fn country(ip: &str) -> String {
    let first = ip.trim().split('.').next().unwrap_or_default();
    let octet = Some(first)
        .filter(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|f| f.parse::<u32>().ok())
        .filter(|o| *o <= 255);
    match octet {
        Some(o) => ["NL", "US", "JP", "BR"][o as usize % 4].to_string(),
        None => "ZZ".to_string(),
    }
}

/// The model of `is_human` on the record's `ua` (missing or null: human).
fn human(ua: Option<&Value>) -> bool {
    match ua {
        None | Some(Value::Null) | Some(Value::Number(_)) => true,
        Some(Value::String(s)) => {
            let s = s.to_ascii_lowercase();
            !["bot", "crawler", "spider"].iter().any(|w| s.contains(w))
        }
        Some(other) => panic!("the test writes no ua {other}"),
    }
}

/// Which UDF computes the item id from `/url`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdUdf {
    /// `normalize_url`.
    Normalize,
    /// `shout`: upper-cased; panics on "boom".
    Shout,
}

impl IdUdf {
    pub(crate) fn name(self) -> &'static str {
        match self {
            IdUdf::Normalize => "normalize_url",
            IdUdf::Shout => "shout",
        }
    }
}

/// What becomes of one record.
#[derive(Clone, Debug)]
enum Fate {
    /// Dropped by the filter.
    Filtered,
    /// A dead letter: reason, and the detail (exact, or its start when `exact` is false).
    Dead {
        reason: &'static str,
        detail: String,
        exact: bool,
    },
    /// An event.
    Event {
        item: String,
        ts: i64,
        dims: BTreeMap<String, String>,
    },
}

/// The model of one record through the job's UDFs: the filter first, then the item id, then
/// the dims.
fn fate(line: &[u8], id: IdUdf) -> Fate {
    let v: Value = serde_json::from_slice(line).expect("the test writes JSON");
    if !human(v.get("ua")) {
        return Fate::Filtered;
    }
    let name = id.name();
    let bad = |detail: String, exact: bool| Fate::Dead {
        reason: "bad",
        detail,
        exact,
    };
    let url = match v.get("url") {
        None | Some(Value::Null) => return bad(format!("item_id: udf {name} gave null"), true),
        Some(Value::Bool(_)) => {
            return bad(
                format!("item_id: udf {name} argument 0: /url is a boolean, not &str"),
                true,
            )
        }
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => panic!("the test writes no url {other}"),
    };
    let item = match id {
        IdUdf::Normalize => normalize(&url),
        IdUdf::Shout if url.contains("boom") => {
            return Fate::Dead {
                reason: "udf",
                detail: "udf shout panicked or failed on this record (in item_id)".into(),
                exact: true,
            }
        }
        IdUdf::Shout => url.to_uppercase(),
    };
    if item.is_empty() {
        return bad(format!("udf {name}: item_id is empty"), true);
    }
    if item.len() > 256 {
        return bad(format!("udf {name}: "), false);
    }
    let mut dims = BTreeMap::new();
    let ip = match v.get("ip") {
        None | Some(Value::Null) => None, // `country_of` takes `&str`: not called, null
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => panic!("the test writes no ip {other}"),
    };
    dims.insert("country".to_string(), ip.map(|ip| country(&ip)).unwrap_or_default());
    if let Some(d) = v.get("device").and_then(Value::as_str) {
        dims.insert("device".to_string(), d.to_string());
    }
    Fate::Event {
        item,
        ts: v["ts"].as_i64().expect("ts"),
        dims,
    }
}

/// The windows of [`job_config`]: a global list, one per country (a UDF's dim), one per device
/// and country (a pointer's dim and a UDF's).
pub(crate) fn model_windows() -> Vec<ModelWindow> {
    vec![
        ModelWindow::new("10s", 10_000, 10_000, 5),
        ModelWindow::new("1m", 60_000, 60_000, 3).by(&["country"]),
        ModelWindow::new("30s-hop", 30_000, 10_000, 2).by(&["device", "country"]),
    ]
}

/// What the model expects of a run.
pub(crate) struct Expect {
    /// Sealed lists per group (global lists in group "").
    pub(crate) lists: model::GroupLists,
    /// Dead letters: (partition, 1-based position, reason), sorted.
    pub(crate) dead: model::Dead,
    /// Each dead letter's detail, and whether it is exact (else its start).
    pub(crate) details: BTreeMap<(u32, u64), (String, bool)>,
    /// Records the filter dropped.
    pub(crate) filtered: u64,
    /// Records.
    pub(crate) records: u64,
}

/// The model of the job over `parts` with item ids by `id`: each record's fate, then the
/// shared model (`hotlist_tests::model`) over the events it leaves (a filtered record stands
/// there as a blank line, a dead one as a bad line, so positions stay).
pub(crate) fn expect(parts: &Parts, id: IdUdf) -> Expect {
    let mut details = BTreeMap::new();
    let mut filtered = 0;
    let mut udf_failed = Vec::new();
    let lines: Parts = parts
        .iter()
        .enumerate()
        .map(|(p, lines)| {
            lines
                .iter()
                .enumerate()
                .map(|(i, line)| match fate(line, id) {
                    Fate::Filtered => {
                        filtered += 1;
                        Vec::new()
                    }
                    Fate::Dead { reason, detail, exact } => {
                        let at = (p as u32, i as u64 + 1);
                        details.insert(at, (detail, exact));
                        if reason == "udf" {
                            udf_failed.push(at);
                        }
                        b"not an event".to_vec()
                    }
                    Fate::Event { item, ts, dims } => {
                        serde_json::to_vec(&serde_json::json!({ "item_id": item, "ts": ts, "dims": dims }))
                            .expect("json")
                    }
                })
                .collect()
        })
        .collect();
    let (lists, mut dead) = model::run_grouped(&lines, &model_windows(), 2_000, 30_000);
    assert!(
        dead.iter().all(|d| d.2 == "bad"),
        "nothing is late in this input: {dead:?}"
    );
    for d in &mut dead {
        if udf_failed.contains(&(d.0, d.1)) {
            d.2 = "udf".to_string();
        }
    }
    assert_eq!(dead.len(), details.len(), "every dead record is one dead letter");
    Expect {
        lists,
        dead,
        details,
        filtered,
        records: parts.iter().map(|p| p.len() as u64).sum(),
    }
}

/// The input exercises every rule: filtered records, each kind of bad one, UDF-computed groups
/// of each country (and ZZ and none), ties.
fn assert_covers(want: &Expect) {
    assert!(want.filtered > 20, "bots are filtered: {}", want.filtered);
    for detail in ["gave null", "is a boolean", "item_id is empty"] {
        assert!(
            want.details.values().any(|d| d.0.contains(detail)),
            "no record gives {detail:?}"
        );
    }
    for group in [
        "country=NL",
        "country=US",
        "country=JP",
        "country=BR",
        "country=ZZ",
        "country=",
    ] {
        assert!(
            want.lists.keys().any(|k| k.0 == "1m" && k.3 == group),
            "no list of {group}"
        );
    }
    assert!(
        want.lists.keys().any(|k| k.3 == "country=US&device=web"),
        "lists per device and country"
    );
    assert!(want.lists.len() > 20, "many lists: {}", want.lists.len());
}

/// `[[udf]]` tables for the example UDFs `names`, built and loaded from where the tests build
/// them.
pub(crate) fn udf_tables(names: &[&str]) -> String {
    names.iter().map(|n| udf_table(&udf_lib(n), &udf_source(n))).collect()
}

/// One `[[udf]]` table.
fn udf_table(lib: &Path, source: &Path) -> String {
    format!(
        "\n[[udf]]\npath = {:?}\nsource = {:?}\n",
        lib.display().to_string(),
        source.display().to_string()
    )
}

/// `[source.format]`: the item id by `id`, the country by `country_of`, the device by a
/// pointer, the filter `is_human`.
pub(crate) fn format_table(id: IdUdf) -> String {
    format!(
        "\n[source.format]\nitem_id = {{ udf = \"{}\", args = [\"/url\"] }}\n\
         dims = {{ country = {{ udf = \"country_of\", args = [\"/ip\"] }}, device = \"/device\" }}\n\
         filter = {{ udf = \"is_human\", args = [\"/ua\"] }}\n",
        id.name()
    )
}

/// The windows of [`model_windows`], as configured.
pub(crate) const WINDOWS: &str = r#"
[time]
max_out_of_orderness = "2s"
allowed_lateness = "30s"
emit_interval = "10ms"
[[window]]
name = "10s"
size = "10s"
k = 5
[[window]]
name = "1m"
size = "1m"
k = 3
by = ["country"]
[[window]]
name = "30s-hop"
size = "30s"
slide = "10s"
k = 2
by = ["device", "country"]
"#;

/// The job `job` over `in/*.jsonl` into `out.db`, item ids by `id`.
fn job_config(job: &str, id: IdUdf) -> String {
    format!(
        "[job]\nid = {job:?}\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n{}{WINDOWS}\
         [sink]\nkind = \"sqlite\"\npath = \"out.db\"\n[run]\nepoch_interval = \"2ms\"\nbatch_size = 64\n\
         max_dead_letters_per_block = 1000000\n{}",
        format_table(id),
        udf_tables(&[id.name(), "country_of", "is_human"])
    )
}

/// The "N filtered" of a run's summary line (0 when it names none).
pub(crate) fn filtered_in_summary(summary: &str) -> u64 {
    let line = summary
        .lines()
        .find(|l| l.starts_with("finished after") || l.starts_with("stopped after"))
        .unwrap_or_else(|| panic!("no summary line: {summary}"));
    let words: Vec<&str> = line.split([' ', ',', ';']).filter(|w| !w.is_empty()).collect();
    words
        .windows(2)
        .find(|w| w[1] == "filtered")
        .map_or(0, |w| w[0].parse().expect("a count"))
}

/// The job's stored dead letters' details by (partition, position).
pub(crate) fn sqlite_details(db: &Path, job: &str) -> BTreeMap<(u32, u64), String> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare("SELECT partition, position, detail FROM dead_letters WHERE job = ?1")
        .expect("prepare");
    stmt.query_map([job], |r| {
        Ok(((r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u64), r.get(2)?))
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

/// Every stored detail is the model's (exactly, or starting as it says); `at` maps a model
/// position to the stored one.
pub(crate) fn assert_details(
    got: &BTreeMap<(u32, u64), String>,
    want: &BTreeMap<(u32, u64), (String, bool)>,
    at: impl Fn(u32, u64) -> (u32, u64),
    what: &str,
) {
    assert_eq!(got.len(), want.len(), "{what}: dead letters");
    for ((p, pos), (detail, exact)) in want {
        let stored = got
            .get(&at(*p, *pos))
            .unwrap_or_else(|| panic!("{what}: no dead letter at {p}:{pos}"));
        if *exact {
            assert_eq!(stored, detail, "{what}: detail at {p}:{pos}");
        } else {
            assert!(
                stored.starts_with(detail.as_str()),
                "{what}: detail at {p}:{pos}: {stored}"
            );
        }
    }
}

/// A temporary directory holding `parts` as `in/part-NNNN.jsonl` and `config` as
/// `hotlist.toml`.
fn setup(parts: &Parts, config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    hotlist_tests::inputs::write_partitions(&dir.path().join("in"), parts).expect("inputs");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    dir
}

/// `hotlist run` of `hotlist.toml` on `workers` workers, which must succeed: its stdout.
fn run(dir: &Path, workers: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "run",
        "--config",
        "hotlist.toml",
        "--progress",
        "never",
        "--workers",
        workers,
    ];
    args.extend_from_slice(extra);
    let out = run_hotlist(dir, &args, true);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the job over `parts` on 1 and 2 workers (a fresh store each time) and checks it all
/// against the model: lists, dead letters with their details, the filtered count.
fn runs_match_the_model(parts: &Parts, id: IdUdf, job: &str) -> Expect {
    let want = expect(parts, id);
    let dir = setup(parts, &job_config(job, id));
    let db = dir.path().join("out.db");
    for workers in ["1", "2"] {
        let _ = std::fs::remove_file(&db);
        let summary = run(dir.path(), workers, &[]);
        let what = format!("{job} on {workers} worker(s)");
        assert!(
            summary.contains(&format!(": {} records,", want.records)),
            "{what}: {summary}"
        );
        assert!(
            summary.contains(&format!(" {} bad,", want.dead.len())),
            "{what}: bad and udf records are counted as bad: {summary}"
        );
        assert_eq!(filtered_in_summary(&summary), want.filtered, "{what}: {summary}");
        assert_eq!(
            hotlist_tests::sqlite_sealed_group_lists(&db, job),
            want.lists,
            "{what}: sealed lists"
        );
        assert_eq!(
            hotlist_tests::sqlite_dead_letters(&db, job).0,
            want.dead,
            "{what}: dead letters"
        );
        assert_details(&sqlite_details(&db, job), &want.details, |p, pos| (p, pos), &what);
    }
    // `verify` reads every sealed instance again through the UDFs and counts it again: the
    // same verdicts, so every stored list matches (exit 0; 1 on a mismatch, 2 if none checked)
    let out = run_hotlist(dir.path(), &["verify", "--config", "hotlist.toml"], false);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{job}: verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    want
}

/// `normalize_url` ids, `country_of` groups, the `is_human` filter over 2 files on 1 and 2
/// workers: lists, dead letters (boolean, missing and null URLs, ids empty or too long once
/// normalised) with their details, and the filtered count equal the model's.
#[test]
fn udfs_over_files_match_the_model() {
    let parts = records(41, 2, 2500, 0.0);
    let want = runs_match_the_model(&parts, IdUdf::Normalize, "udf");
    assert_covers(&want);
    let urls: std::collections::BTreeSet<String> = parts
        .iter()
        .flatten()
        .filter_map(|l| {
            serde_json::from_slice::<Value>(l)
                .ok()?
                .get("url")?
                .as_str()
                .map(str::to_string)
        })
        .collect();
    let pages: std::collections::BTreeSet<String> = urls.iter().map(|u| normalize(u)).collect();
    assert!(
        urls.len() > 20 * pages.len(),
        "each page is spelled many ways: {} spellings of {} pages",
        urls.len(),
        pages.len()
    );
    assert!(
        want.lists
            .values()
            .flatten()
            .all(|(item, _)| !item.contains("://") && !item.contains('?') && !item.starts_with("www.")),
        "normalised ids only"
    );
}

/// `shout` panics on URLs containing "boom": the run ends with exit 0, exactly the boom records
/// the filter keeps are `udf` dead letters naming shout, and everything else is the model's
/// (ids upper-cased, "BOOM" counted).
#[test]
fn a_panicking_udf_dead_letters_only_its_records() {
    let parts = records(43, 2, 1500, 0.06);
    let want = runs_match_the_model(&parts, IdUdf::Shout, "shout");
    let udf = want.dead.iter().filter(|d| d.2 == "udf").count();
    let boom_filtered = parts
        .iter()
        .flatten()
        .filter(|l| String::from_utf8_lossy(l).contains("boom") && matches!(fate(l, IdUdf::Shout), Fate::Filtered))
        .count();
    assert!(
        udf > 20 && boom_filtered > 0,
        "{udf} udf dead letters, {boom_filtered} boom records filtered"
    );
    assert!(
        want.lists.values().flatten().any(|(item, _)| item.contains("BOOM")),
        "an upper-case BOOM is no panic"
    );
}

/// SIGKILLed again and again (with checkpoints every 10 ms), restarted on 1 and 2 workers in
/// turn: the sealed lists and dead letters equal the model's, every dead letter once.
#[test]
fn sigkill_and_restore_with_udfs_count_everything_once() {
    let parts = records(47, 2, 8000, 0.0);
    let want = expect(&parts, IdUdf::Normalize);
    // the crash tests' checkpointed job (checkpoints every 10 ms, small batches and epochs)
    // with this test's format, windows and UDFs
    let base = hotlist_tests::checkpointed_job_config("udf-crash");
    let (head, rest) = base.split_once("[time]").expect("[time]");
    let (_, tail) = rest.split_once("[sink]").expect("[sink]");
    let config = format!(
        "{head}{}{WINDOWS}[sink]{tail}max_dead_letters_per_block = 1000000\n{}",
        format_table(IdUdf::Normalize),
        udf_tables(&["normalize_url", "country_of", "is_human"])
    );
    assert!(
        config.contains("[checkpoint]") && config.contains("by = [\"device\", \"country\"]"),
        "{config}"
    );
    let dir = setup(&parts, &config);
    let db = dir.path().join("out.db");
    let plan = KillPlan {
        attempts: 12,
        kills: 5,
        commits_before_kill: (2, 2),
        jitter_ms: 15,
        seed: 9,
    };
    let workers = |attempt: usize| if attempt == usize::MAX { 2 } else { 1 + attempt % 2 };
    let KillReport { kills, restored, logs } = kill_and_restart(
        &plan,
        |attempt| hotlist_tests::spawn_run(dir.path(), workers(attempt)),
        || hotlist_tests::sqlite_committed_epoch(&db, "udf-crash"),
    );
    assert!(kills >= 4, "killed only {kills} times:\n{logs}");
    assert!(restored >= 1, "no restart restored a checkpoint:\n{logs}");
    assert_eq!(
        hotlist_tests::sqlite_sealed_group_lists(&db, "udf-crash"),
        want.lists,
        "sealed lists after {kills} kills\n{logs}"
    );
    assert_eq!(
        hotlist_tests::sqlite_dead_letters(&db, "udf-crash").0,
        want.dead,
        "dead letters exactly once after {kills} kills\n{logs}"
    );
}

/// A checkpoint written with one library is not restored after the file changed (another
/// library of the same signature in its place): one line naming the UDF and both ways out;
/// `--accept-udf-change` restores it (nothing left to read, the lists stay).
#[test]
fn a_changed_library_is_refused_at_restore() {
    let parts = records(53, 2, 400, 0.0);
    let want = expect(&parts, IdUdf::Normalize);
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = dir.path().join("libmine.so");
    std::fs::copy(udf_lib("normalize_url"), &lib).expect("copy the library");
    let config = job_config("changed", IdUdf::Normalize).replace(
        &udf_table(&udf_lib("normalize_url"), &udf_source("normalize_url")),
        &udf_table(&lib, &udf_source("normalize_url")),
    );
    assert!(config.contains("libmine.so"), "{config}");
    let dir_path = dir.path();
    std::fs::create_dir(dir_path.join("in")).expect("mkdir");
    hotlist_tests::inputs::write_partitions(&dir_path.join("in"), &parts).expect("inputs");
    std::fs::write(
        dir_path.join("hotlist.toml"),
        format!("{config}[checkpoint]\ndir = \"ckpt\"\n"),
    )
    .expect("config");
    let db = dir_path.join("out.db");
    run(dir_path, "2", &[]);
    assert_eq!(hotlist_tests::sqlite_sealed_group_lists(&db, "changed"), want.lists);
    assert!(
        hotlist_tests::sqlite_committed_epoch(&db, "changed").is_some(),
        "a checkpoint committed"
    );

    // `identity` is `&str -> String` too: it loads as normalize_url, but it is another library
    std::fs::copy(udf_lib("identity"), &lib).expect("replace the library");
    let args = ["run", "--config", "hotlist.toml", "--progress", "never"];
    let out = run_hotlist(dir_path, &args, false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "refused: {stderr}");
    let lines: Vec<&str> = stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    for said in [
        "other UDF libraries",
        "normalize_url",
        "--accept-udf-change",
        "--from-scratch",
    ] {
        assert!(lines[0].contains(said), "{said:?} in {}", lines[0]);
    }
    assert_eq!(
        hotlist_tests::sqlite_sealed_group_lists(&db, "changed"),
        want.lists,
        "nothing written by the refused run"
    );

    let summary = run(dir_path, "1", &["--accept-udf-change"]);
    assert!(summary.contains(": 0 records,"), "restored at the end: {summary}");
    assert_eq!(hotlist_tests::sqlite_sealed_group_lists(&db, "changed"), want.lists);
}

/// A UDF configured wrongly is refused at start with exit code 1 and one line naming it (its
/// name, or `udf[i]` and its library); nothing is written.
#[test]
fn udf_config_mistakes_are_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    std::fs::write(
        dir.path().join("in/a.jsonl"),
        "{\"url\":\"https://example.com/a\",\"ts\":1}\n",
    )
    .expect("input");
    let good = job_config("mistakes", IdUdf::Normalize);
    let normalize_lib = udf_lib("normalize_url").display().to_string();
    // a shared library that is no UDF (exports no `__run`)
    let system_lib = ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
        .iter()
        .flat_map(|d| {
            [
                format!("{d}/x86_64-linux-gnu"),
                format!("{d}/aarch64-linux-gnu"),
                d.to_string(),
            ]
        })
        .flat_map(|d| ["libz.so.1", "libm.so.6"].map(|l| format!("{d}/{l}")))
        .find(|p| Path::new(p).is_file())
        .expect("libz or libm on this machine");
    let not_elf = dir.path().join("libtext.so");
    std::fs::write(&not_elf, "not a shared library\n").expect("write");
    let not_elf = not_elf.display().to_string();
    let missing = dir.path().join("libnothere.so").display().to_string();
    let missing_source = dir.path().join("nothere/src/lib.rs").display().to_string();
    let normalize_source = udf_source("normalize_url").display().to_string();
    // a source that declares another result than the library returns (built from elsewhere)
    let lying_source = dir.path().join("lying.rs");
    std::fs::write(
        &lying_source,
        "use arroyo_udf_plugin::udf;\n#[udf]\nfn normalize_url(url: &str) -> i64 { 0 }\n",
    )
    .expect("write");
    let lying_source = lying_source.display().to_string();
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        (
            "an unknown name",
            good.replace("udf = \"normalize_url\"", "udf = \"normalise_url\""),
            vec![
                "source.format.item_id: no [[udf]] is named \"normalise_url\"".into(),
                "normalize_url".into(),
            ],
        ),
        (
            "a signature that does not fit",
            good.replace("udf = \"is_human\"", "udf = \"normalize_url\""),
            vec!["filter needs a UDF returning bool or an integer, but normalize_url returns String".into()],
        ),
        (
            "a library without __run",
            good.replace(&normalize_lib, &system_lib),
            vec![
                "udf[0]: udf normalize_url: ".into(),
                system_lib.clone(),
                "exports no __run".into(),
            ],
        ),
        (
            "a file that does not load",
            good.replace(&normalize_lib, &not_elf),
            // the loader's own reason follows ("file too short", "invalid ELF header")
            vec!["udf[0]: udf normalize_url: ".into(), format!("cannot load {not_elf}: ")],
        ),
        (
            "a missing library",
            good.replace(&normalize_lib, &missing),
            vec!["udf[0]: udf normalize_url: ".into(), missing.clone()],
        ),
        (
            "a missing source",
            good.replace(&normalize_source, &missing_source),
            vec!["udf[0]".into(), missing_source.clone()],
        ),
        (
            "a library that returns another type than its source declares",
            good.replace(&normalize_source, &lying_source),
            vec![
                "udf[0]".into(),
                "normalize_url".into(),
                "returned a column of Utf8, but its source declares Int64".into(),
            ],
        ),
        (
            "a UDF use with the generator",
            good.replace(
                "kind = \"file\"\npath = \"in/*.jsonl\"",
                "kind = \"generator\"\nevents = 100",
            ),
            vec!["format".into(), "generator".into()],
        ),
    ];
    for (what, config, want) in cases {
        assert_ne!(config, good, "{what}: config rewritten");
        std::fs::write(dir.path().join("hotlist.toml"), &config).expect("config");
        let out = run_hotlist(
            dir.path(),
            &["run", "--config", "hotlist.toml", "--progress", "never"],
            false,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        let lines: Vec<&str> = stderr.trim().lines().collect();
        assert_eq!(lines.len(), 1, "{what}: one line, got {stderr}");
        assert!(
            lines[0].starts_with("error: config hotlist.toml: "),
            "{what}: {}",
            lines[0]
        );
        for w in &want {
            assert!(lines[0].contains(w.as_str()), "{what}: {w:?} in {}", lines[0]);
        }
        assert!(!dir.path().join("out.db").exists(), "{what}: a store was written");
    }
}

//! The on-call dashboard (`deploy/grafana/hotlist.json`) and alert rules
//! (`deploy/prometheus/alerts.yml`) say only true things: every PromQL expression in them parses
//! (with `promql-parser`, a port of Prometheus's own grammar), every metric they select is one
//! docs/operations.md documents, every alert is named in docs/operations.md's "Metrics and
//! alerts" section (and every alert named there exists), every alert points the on-call engineer
//! to a section of operations.md that exists, and the dashboard is self-contained (a
//! `${datasource}` variable, no external assets).
//!
//! That the metrics are really exported is checked by running the job and `hotlist serve`:
//! `tests/blackbox/dashboard.rs`, which includes this file for its parsing (so these tests run
//! in that binary too).

use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr, VectorSelector};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

/// The alert rules, relative to the repository's root.
pub const ALERTS: &str = "deploy/prometheus/alerts.yml";
/// The Grafana dashboard, relative to the repository's root.
pub const DASHBOARD: &str = "deploy/grafana/hotlist.json";
/// The runbook the alerts point to.
const OPERATIONS: &str = "docs/operations.md";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// One PromQL expression of the two files: the file, what holds it (`alert X`, `panel "T"
/// target B`, `variable v`) and its text as written.
#[derive(Debug)]
pub struct Query {
    pub file: &'static str,
    pub owner: String,
    pub expr: String,
}

/// Every rule of alerts.yml, with the group it is in.
fn alert_rules() -> Vec<(String, Yaml)> {
    let docs = YamlLoader::load_from_str(&read(ALERTS)).unwrap_or_else(|e| panic!("{ALERTS}: {e}"));
    assert_eq!(docs.len(), 1, "{ALERTS}: one YAML document");
    let groups = docs[0]["groups"]
        .as_vec()
        .unwrap_or_else(|| panic!("{ALERTS}: no groups list"));
    let mut rules = Vec::new();
    for group in groups {
        let name = group["name"]
            .as_str()
            .unwrap_or_else(|| panic!("{ALERTS}: a group without a name"));
        let list = group["rules"]
            .as_vec()
            .unwrap_or_else(|| panic!("{ALERTS}: group {name} has no rules list"));
        rules.extend(list.iter().map(|r| (name.to_string(), r.clone())));
    }
    rules
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

/// The dashboard's panels, those inside collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().map(Vec::as_slice).unwrap_or_default() {
        out.push(p);
        out.extend(p["panels"].as_array().map(Vec::as_slice).unwrap_or_default());
    }
    out
}

/// Every PromQL expression: each alert's `expr`, each panel target's `expr`, and the metric
/// selector of each `label_values(<selector>, <label>)` variable query.
pub fn queries() -> Vec<Query> {
    let mut out = Vec::new();
    for (group, rule) in alert_rules() {
        let name = rule["alert"].as_str().unwrap_or("(no name)");
        let expr = rule["expr"]
            .as_str()
            .unwrap_or_else(|| panic!("{ALERTS}: alert {name} in {group} has no expr string"));
        out.push(Query {
            file: ALERTS,
            owner: format!("alert {name}"),
            expr: expr.to_string(),
        });
    }
    let d = dashboard();
    for p in panels(&d) {
        let title = p["title"].as_str().unwrap_or("(no title)");
        for t in p["targets"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{DASHBOARD}: panel {title:?} has a target without expr"));
            out.push(Query {
                file: DASHBOARD,
                owner: format!("panel {title:?} target {}", t["refId"].as_str().unwrap_or("?")),
                expr: expr.to_string(),
            });
        }
    }
    for v in d["templating"]["list"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let query = v["query"]["query"]
            .as_str()
            .or_else(|| v["query"].as_str())
            .unwrap_or("");
        let Some(args) = query.strip_prefix("label_values(").and_then(|a| a.strip_suffix(')')) else {
            continue;
        };
        // label_values(<label>) names no metric; label_values(<selector>, <label>) does
        if let Some((selector, _label)) = args.rsplit_once(',') {
            out.push(Query {
                file: DASHBOARD,
                owner: format!("variable {}", v["name"].as_str().unwrap_or("?")),
                expr: selector.trim().to_string(),
            });
        }
    }
    out
}

/// The expression as Prometheus receives it from Grafana: its global variables (`$__rate_interval`,
/// `${__interval}`, `$__range`, …) are durations, so each becomes `5m`. Dashboard variables
/// (`$job`) stay: they are used inside label matchers' strings, where they parse as written.
pub fn without_grafana_variables(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut rest = expr;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        // `${name}` or `$name`: the name, and how long the reference is after the `$`
        let braced = after
            .strip_prefix('{')
            .and_then(|b| b.find('}').map(|end| (&b[..end], end + 2)));
        let (name, len) = braced.unwrap_or_else(|| {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        });
        if name.starts_with("__") {
            out.push_str("5m");
        } else {
            out.push('$');
            out.push_str(&after[..len]);
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

/// The query parsed, or an error naming the file, what holds it and the parser's message.
pub fn parse(q: &Query) -> Result<Expr, String> {
    parser::parse(&without_grafana_variables(&q.expr))
        .map_err(|e| format!("{} {}: {e}\n    {}", q.file, q.owner, q.expr.trim()))
}

/// The metric name a selector selects: its name, or its `__name__="…"` matcher.
fn metric_name(vs: &VectorSelector) -> Result<String, String> {
    if let Some(name) = &vs.name {
        return Ok(name.clone());
    }
    vs.matchers
        .matchers
        .iter()
        .find(|m| m.name == "__name__" && matches!(m.op, MatchOp::Equal))
        .map(|m| m.value.clone())
        .ok_or_else(|| format!("the selector {vs} names no single metric, so what it selects cannot be checked"))
}

/// Every metric name the vector and matrix selectors of `expr` select (the walk covers an
/// aggregation's parameter too, which the crate's own visitor skips).
pub fn selected_metrics(expr: &Expr) -> Result<BTreeSet<String>, String> {
    fn walk(expr: &Expr, out: &mut BTreeSet<String>) -> Result<(), String> {
        match expr {
            Expr::Aggregate(a) => {
                walk(&a.expr, out)?;
                if let Some(param) = &a.param {
                    walk(param, out)?;
                }
            }
            Expr::Unary(u) => walk(&u.expr, out)?,
            Expr::Binary(b) => {
                walk(&b.lhs, out)?;
                walk(&b.rhs, out)?;
            }
            Expr::Paren(p) => walk(&p.expr, out)?,
            Expr::Subquery(s) => walk(&s.expr, out)?,
            Expr::Call(c) => {
                for arg in &c.args.args {
                    walk(arg, out)?;
                }
            }
            Expr::VectorSelector(vs) => {
                out.insert(metric_name(vs)?);
            }
            Expr::MatrixSelector(ms) => {
                out.insert(metric_name(&ms.vs)?);
            }
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) => {}
            Expr::Extension(_) => return Err("an extension node, which PromQL text cannot hold".into()),
        }
        Ok(())
    }
    let mut out = BTreeSet::new();
    walk(expr, &mut out)?;
    Ok(out)
}

/// Every metric name the two files select, with the queries that select it; panics listing
/// every query that does not parse or names no metric.
pub fn metrics_and_users() -> BTreeMap<String, Vec<String>> {
    let mut users: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for q in queries() {
        match parse(&q).and_then(|e| {
            selected_metrics(&e).map_err(|m| format!("{} {}: {m}\n    {}", q.file, q.owner, q.expr.trim()))
        }) {
            Ok(names) if names.is_empty() => problems.push(format!(
                "{} {}: selects no metric\n    {}",
                q.file,
                q.owner,
                q.expr.trim()
            )),
            Ok(names) => {
                for n in names {
                    users.entry(n).or_default().push(format!("{} {}", q.file, q.owner));
                }
            }
            Err(e) => problems.push(e),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    users
}

/// The metric name a series name belongs to: a histogram's `_bucket`, `_sum` and `_count`
/// series are its own.
fn family(series: &str) -> &str {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| series.strip_suffix(s))
        .unwrap_or(series)
}

/// The `hotlist_…` names a text mentions.
fn hotlist_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("hotlist_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].trim_end_matches('_').to_string());
        rest = &tail[end..];
    }
    out
}

/// docs/operations.md's "Metrics and alerts" section: from its heading to the next `## `.
fn metrics_section(operations: &str) -> &str {
    let start = operations
        .find("\n## Metrics and alerts")
        .unwrap_or_else(|| panic!("{OPERATIONS} has no \"## Metrics and alerts\" section"));
    let body = &operations[start + 1..];
    match body[3..].find("\n## ") {
        Some(end) => &body[..end + 3],
        None => body,
    }
}

/// The alert names (`Hotlist…` in backticks) a text mentions.
fn alert_names_in(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.starts_with("Hotlist") && t.len() > 7 && t.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(str::to_string)
        .collect()
}

/// Every expression of both files parses, and each selects at least one metric, by name.
#[test]
fn every_promql_expression_parses() {
    let all = queries();
    let alerts = all.iter().filter(|q| q.file == ALERTS).count();
    let targets = all.iter().filter(|q| q.file == DASHBOARD).count();
    // the extraction itself is checked: a format change that hid the expressions would pass
    assert!(alerts >= 40, "only {alerts} alert expressions found in {ALERTS}");
    assert!(
        targets >= 40,
        "only {targets} dashboard expressions found in {DASHBOARD}"
    );
    let metrics = metrics_and_users();
    assert!(metrics.len() >= 60, "only {} metrics selected", metrics.len());
}

/// Every metric the two files select is one docs/operations.md documents (a histogram's
/// `_bucket`/`_sum`/`_count` by the histogram's name): nothing on the dashboard or in an alert
/// is missing from the runbook.
#[test]
fn every_selected_metric_is_documented() {
    let documented = hotlist_names(&read(OPERATIONS));
    let undocumented: Vec<String> = metrics_and_users()
        .into_iter()
        .filter(|(m, _)| !documented.contains(m) && !documented.contains(family(m)))
        .map(|(m, users)| format!("{m} (used by {})", users.join(", ")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "metrics not in {OPERATIONS}:\n{}",
        undocumented.join("\n")
    );
}

/// Every rule is a complete alert (`alert`, `expr`, a valid `for`, `labels.severity`, a summary
/// and a description); every alert's name is unique and named in docs/operations.md's "Metrics
/// and alerts" section, and every alert named there is a rule; every description points to a
/// section of docs/operations.md that exists.
#[test]
fn alert_rules_match_the_runbook() {
    let operations = read(OPERATIONS);
    let section = metrics_section(&operations);
    let documented = alert_names_in(section);
    let anchors = hotlist_tests::markdown::anchors(&operations);
    let mut names = BTreeSet::new();
    let mut problems = Vec::new();
    for (group, rule) in alert_rules() {
        let Some(name) = rule["alert"].as_str() else {
            problems.push(format!("a rule of group {group} is not an alert (no `alert`)"));
            continue;
        };
        if !names.insert(name.to_string()) {
            problems.push(format!("alert {name} is defined twice"));
        }
        if !documented.contains(name) {
            problems.push(format!(
                "alert {name} is not named in {OPERATIONS}, section Metrics and alerts"
            ));
        }
        match rule["for"].as_str() {
            // a zero `for` (fire at once) is valid in Prometheus; the crate's parser refuses zero
            Some("0s" | "0m" | "0h") => {}
            Some(d) => {
                if let Err(e) = promql_parser::util::parse_duration(d) {
                    problems.push(format!("alert {name}: for {d:?}: {e}"));
                }
            }
            None => problems.push(format!("alert {name}: no `for` duration")),
        }
        let severity = rule["labels"]["severity"].as_str().unwrap_or("");
        if !["page", "warning", "ticket", "info"].contains(&severity) {
            problems.push(format!(
                "alert {name}: severity {severity:?} (page, warning, ticket or info)"
            ));
        }
        let summary = rule["annotations"]["summary"].as_str().unwrap_or("");
        let description = rule["annotations"]["description"].as_str().unwrap_or("");
        if summary.trim().is_empty() || description.trim().is_empty() {
            problems.push(format!("alert {name}: no summary or no description"));
        }
        let links: Vec<&str> = description
            .split("docs/operations.md#")
            .skip(1)
            .map(|s| {
                s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                    .next()
                    .unwrap_or("")
            })
            .collect();
        if links.is_empty() {
            problems.push(format!(
                "alert {name}: the description names no section (docs/operations.md#…)"
            ));
        }
        for anchor in links {
            if !anchors.contains(anchor) {
                problems.push(format!(
                    "alert {name}: docs/operations.md#{anchor} is no heading of {OPERATIONS}"
                ));
            }
        }
    }
    for name in documented.difference(&names) {
        problems.push(format!(
            "{OPERATIONS} names alert {name}, which {ALERTS} does not define"
        ));
    }
    assert!(names.len() >= 40, "only {} alerts", names.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The dashboard imports anywhere: schema version 39 or so, one `${datasource}` variable of
/// type Prometheus that every panel and target uses, no external assets (no URL at all),
/// unique panel ids, every panel titled with at least one target with unique refIds, and no
/// two panels on the same place of the grid.
#[test]
fn the_dashboard_is_self_contained() {
    let text = read(DASHBOARD);
    assert!(
        !text.contains("http://") && !text.contains("https://"),
        "{DASHBOARD} refers to something outside itself"
    );
    let d = dashboard();
    let schema = d["schemaVersion"].as_i64().unwrap_or(0);
    assert!((36..=41).contains(&schema), "schemaVersion {schema}");
    let vars = d["templating"]["list"].as_array().expect("templating.list");
    let ds = vars
        .iter()
        .find(|v| v["name"] == "datasource")
        .unwrap_or_else(|| panic!("{DASHBOARD}: no datasource variable"));
    assert_eq!(
        (ds["type"].as_str(), ds["query"].as_str()),
        (Some("datasource"), Some("prometheus"))
    );
    let uses_variable = |v: &Value| v["uid"] == "${datasource}" && v["type"] == "prometheus";
    for v in vars.iter().filter(|v| v["type"] == "query") {
        assert!(
            uses_variable(&v["datasource"]),
            "variable {}: {}",
            v["name"],
            v["datasource"]
        );
    }
    let mut ids = BTreeSet::new();
    let mut cells: BTreeMap<(i64, i64), String> = BTreeMap::new();
    let mut problems = Vec::new();
    for p in panels(&d) {
        let title = p["title"].as_str().unwrap_or("").to_string();
        if !ids.insert(p["id"].as_i64().unwrap_or(-1)) {
            problems.push(format!("panel {title:?}: id {} is not unique", p["id"]));
        }
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_i64().unwrap_or(-1),
            g["y"].as_i64().unwrap_or(-1),
            g["w"].as_i64().unwrap_or(0),
            g["h"].as_i64().unwrap_or(0),
        );
        if x < 0 || y < 0 || w < 1 || h < 1 || x + w > 24 {
            problems.push(format!("panel {title:?}: gridPos {g}"));
        }
        for cx in x..x + w {
            for cy in y..y + h {
                if let Some(other) = cells.insert((cx, cy), title.clone()) {
                    problems.push(format!("panels {other:?} and {title:?} overlap at ({cx}, {cy})"));
                }
            }
        }
        if p["type"] == "row" {
            continue;
        }
        if title.is_empty() {
            problems.push(format!("panel {} has no title", p["id"]));
        }
        if !uses_variable(&p["datasource"]) {
            problems.push(format!("panel {title:?}: datasource {}", p["datasource"]));
        }
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or_default();
        if targets.is_empty() {
            problems.push(format!("panel {title:?} has no target"));
        }
        let mut refs = BTreeSet::new();
        for t in targets {
            if !refs.insert(t["refId"].as_str().unwrap_or("")) {
                problems.push(format!("panel {title:?}: refId {} twice", t["refId"]));
            }
            if !uses_variable(&t["datasource"]) {
                problems.push(format!("panel {title:?}: a target's datasource {}", t["datasource"]));
            }
        }
    }
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The dashboard has what the on-call engineer asked for (issue 25, part 4): for each topic,
/// the metric that shows it is on some panel.
#[test]
fn the_dashboard_shows_what_on_call_asked_for() {
    let on_panels: BTreeSet<String> = metrics_and_users()
        .into_iter()
        .filter(|(_, users)| users.iter().any(|u| u.starts_with(&format!("{DASHBOARD} panel"))))
        .map(|(m, _)| m)
        .collect();
    let wanted = [
        ("events/s per partition", "hotlist_events_total"),
        ("consumer lag per partition", "hotlist_partition_consumer_lag"),
        ("watermark lag per partition", "hotlist_partition_watermark_lag_seconds"),
        ("watermark delay", "hotlist_watermark_seconds"),
        ("checkpoint age and duration", "hotlist_checkpoint_seconds_count"),
        ("checkpoint duration", "hotlist_checkpoint_seconds_bucket"),
        ("commits", "hotlist_commits_total"),
        ("commit latency", "hotlist_sink_commit_seconds_bucket"),
        ("dead letters by reason", "hotlist_bad_records_total"),
        ("dead letters by reason", "hotlist_late_events_total"),
        ("dead letters by reason", "hotlist_sealed_dropped_total"),
        ("dead letters by reason", "hotlist_dead_letters_summarised_total"),
        ("open instances", "hotlist_latest_lists"),
        ("sketch accuracy", "hotlist_list_error_bound"),
        ("sketch accuracy", "hotlist_sketch_recall"),
        ("pending replays", "hotlist_exact_at_seal_pending"),
        ("API latency", "hotlist_api_request_seconds_bucket"),
        ("API connections", "hotlist_api_open_connections"),
        ("API connections", "hotlist_api_connections_closed_total"),
    ];
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(_, m)| !on_panels.contains(*m))
        .map(|(what, m)| format!("{what}: no panel selects {m}"))
        .collect();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// docs/operations.md's "Metrics and alerts" section names both files, and they exist.
#[test]
fn the_runbook_names_the_files() {
    let operations = read(OPERATIONS);
    let section = metrics_section(&operations);
    for file in [DASHBOARD, ALERTS] {
        assert!(
            section.contains(&format!("`{file}`")),
            "{OPERATIONS}, Metrics and alerts, does not name `{file}`"
        );
        assert!(root().join(file).is_file(), "{file} does not exist");
    }
}

#[test]
fn the_helpers_find_what_they_should() {
    assert_eq!(
        without_grafana_variables(r#"rate(x{job=~"$job"}[$__rate_interval]) + y[${__range}] $ z"#),
        r#"rate(x{job=~"$job"}[5m]) + y[5m] $ z"#
    );
    assert_eq!(without_grafana_variables("a{i=~\"${serve}\"}"), "a{i=~\"${serve}\"}");
    let q = |expr: &str| Query {
        file: DASHBOARD,
        owner: "test".into(),
        expr: expr.into(),
    };
    let names = |expr: &str| {
        parse(&q(expr))
            .and_then(|e| selected_metrics(&e))
            .map(|s| s.into_iter().collect::<Vec<_>>())
    };
    assert_eq!(
        names(r#"histogram_quantile(0.99, sum by (le) (rate(a_bucket{job=~"$job"}[$__rate_interval])))"#),
        Ok(vec!["a_bucket".to_string()])
    );
    assert_eq!(
        names(
            "topk(scalar(k), -b) / on () group_left () ({__name__=\"c\"} offset 5m) \
             and deriv((d - e)[5m:30s]) > time()"
        ),
        Ok(["b", "c", "d", "e", "k"].map(String::from).to_vec())
    );
    assert!(names(r#"{__name__=~"hotlist_.*"}"#)
        .unwrap_err()
        .contains("names no single metric"));
    let err = names("sum(rate(x[5m])").unwrap_err();
    assert!(err.starts_with(&format!("{DASHBOARD} test: ")), "{err}");
    assert_eq!(family("a_seconds_bucket"), "a_seconds");
    assert_eq!(family("a_total"), "a_total");
    assert_eq!(
        hotlist_names("`hotlist_a_total{x}`, hotlist_b and hotlist_*_c")
            .into_iter()
            .collect::<Vec<_>>(),
        ["hotlist", "hotlist_a_total", "hotlist_b"]
    );
    assert_eq!(
        alert_names_in("see `HotlistA` and `HotlistB` but not `Hotlist` or `HotlistC x`")
            .into_iter()
            .collect::<Vec<_>>(),
        ["HotlistA", "HotlistB"]
    );
    let doc = "# x\n## Metrics and alerts\na\n### The job\nb\n## Next\nc";
    assert_eq!(metrics_section(doc), "## Metrics and alerts\na\n### The job\nb");
}

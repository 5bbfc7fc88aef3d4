//! The UDF batch path (`hotlist_dataflow::udf::UdfRunner`, with the example libraries built by
//! `scripts/build-udfs`) against a per-record model: whatever the batches a read is cut into,
//! every record's outcome is the model's — the filter first, a panicking UDF failing only the
//! records it panics on (the batch retried one record at a time), a value of the wrong type or
//! a missing one a bad record. So a record's verdict cannot depend on its neighbours, which is
//! what makes a replay (any batching) give the same lists.

use hotlist_dataflow::config::{self, JobPlan, Overrides};
use hotlist_dataflow::udf::Outcome;
use hotlist_operators::format::Parser;
use hotlist_tests::udfs::{udf_lib, udf_source};
use proptest::prelude::*;
use std::sync::OnceLock;

/// The job: `shout(/url)` as the item id (it panics on "boom"), `is_human(/ua)` as the filter.
fn plan() -> &'static JobPlan {
    static PLAN: OnceLock<(tempfile::TempDir, JobPlan)> = OnceLock::new();
    &PLAN
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let input = dir.path().join("in.jsonl");
            std::fs::write(&input, "").expect("input");
            let udf = |name: &str| {
                format!(
                    "[[udf]]\npath = {:?}\nsource = {:?}\n",
                    udf_lib(name).display().to_string(),
                    udf_source(name).display().to_string()
                )
            };
            let text = format!(
                "[source]\nkind = \"file\"\npath = {:?}\n\
                 [source.format]\nitem_id = {{ udf = \"shout\", args = [\"/url\"] }}\n\
                 filter = {{ udf = \"is_human\", args = [\"/ua\"] }}\n\
                 [sink]\nkind = \"sqlite\"\npath = {:?}\n{}{}",
                input.display().to_string(),
                dir.path().join("out.db").display().to_string(),
                udf("shout"),
                udf("is_human"),
            );
            let plan = config::parse(&text, &Overrides::default()).expect("the config loads");
            (dir, plan)
        })
        .1
}

/// One record, from a small alphabet of what matters.
fn record() -> impl Strategy<Value = String> {
    // few panics: each prints its message and backtrace (the plugin's own panic hook)
    let url = prop_oneof![
        6 => Just(Some("\"a\"")),
        6 => Just(Some("\"b/x\"")),
        1 => Just(Some("\"boom\"")),
        1 => Just(Some("\"a-boom-b\"")),
        1 => Just(Some("true")),
        1 => Just(Some("7")),
        1 => Just(Some("null")),
        1 => Just(None),
    ];
    let ua = prop_oneof![
        Just(Some("\"Mozilla/5.0\"")),
        Just(Some("\"Googlebot/2.1\"")),
        Just(Some("\"a SPIDER\"")),
        Just(Some("null")),
        Just(None),
    ];
    (url, ua, prop::bool::weighted(0.05)).prop_map(|(url, ua, garbage)| {
        if garbage {
            return "{\"url\": ".to_string();
        }
        let mut fields = vec!["\"ts\":1".to_string()];
        if let Some(u) = url {
            fields.push(format!("\"url\":{u}"));
        }
        if let Some(a) = ua {
            fields.push(format!("\"ua\":{a}"));
        }
        format!("{{{}}}", fields.join(","))
    })
}

/// What the model says of one record.
fn model(line: &str) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return "bad".into();
    };
    let ua = v.get("ua").and_then(|u| u.as_str()).map(str::to_ascii_lowercase);
    if ua.is_some_and(|u| ["bot", "crawler", "spider"].iter().any(|b| u.contains(b))) {
        return "filtered".into();
    }
    match v.get("url") {
        None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(_)) => "bad".into(),
        Some(serde_json::Value::Number(n)) => format!("event {n}"),
        Some(serde_json::Value::String(s)) if s.contains("boom") => "failed".into(),
        Some(serde_json::Value::String(s)) => format!("event {}", s.to_uppercase()),
        Some(other) => panic!("not generated: {other}"),
    }
}

fn seen(o: &Outcome<'_>) -> String {
    match o {
        Outcome::Event(ev, item) => format!("event {}", item.as_deref().unwrap_or(&ev.item_id)),
        Outcome::Bad(_) => "bad".into(),
        Outcome::Filtered => "filtered".into(),
        Outcome::Failed(detail) => {
            assert!(detail.contains("udf shout"), "{detail}");
            "failed".into()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Any cut of the records into batches gives every record the model's outcome.
    #[test]
    fn every_record_gets_the_models_outcome_whatever_the_batches(
        records in prop::collection::vec(record(), 1..40),
        cuts in prop::collection::vec(0usize..40, 0..4),
    ) {
        let plan = plan();
        let parser = Parser::new(plan.input.format.clone());
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % records.len()).collect();
        cuts.extend([0, records.len()]);
        cuts.sort_unstable();
        cuts.dedup();
        let mut got = Vec::new();
        for w in cuts.windows(2) {
            let lines: Vec<&[u8]> = records[w[0]..w[1]].iter().map(|r| r.as_bytes()).collect();
            let outcomes = plan.udf_runner.run(&parser, &lines).expect("results of the declared type");
            got.extend(outcomes.iter().map(seen));
        }
        let want: Vec<String> = records.iter().map(|r| model(r)).collect();
        prop_assert_eq!(got, want, "{:?} cut at {:?}", records, cuts);
    }
}

//! Parsing whole configs: defaults, overrides, and errors that name the key and the kind.

use super::*;
use hotlist_operators::time::{Millis, Span};

fn plan(text: &str, set: &[&str]) -> Result<JobPlan> {
    let o = Overrides {
        set: set.iter().map(|s| s.to_string()).collect(),
        workers: None,
        ..Default::default()
    };
    parse(text, &o)
}

const GEN: &str = "[source]\nkind = \"generator\"\nevents = 10\nstart = 0\n";

/// Kafka start times parse as RFC 3339 or milliseconds; anything else is a clear error, as
/// is a bounded generator without an event count.
#[test]
fn kafka_start_time_and_bounded_generator() {
    let kafka = "[source]\nkind = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\n";
    let start = |set: &str| -> Result<Option<Millis>> {
        match plan(kafka, &[set])?.source {
            SourcePlan::Kafka { spec, .. } => Ok(spec.start_time),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        start("source.start_time=\"1970-01-01T00:00:01Z\"").unwrap(),
        Some(Millis(1000))
    );
    assert_eq!(start("source.start_time=42").unwrap(), Some(Millis(42)));
    assert_eq!(start("job.id=\"x\"").unwrap(), None);
    let err = format!("{:#}", start("source.start_time=\"yesterday\"").unwrap_err());
    assert!(err.contains("source.start_time") && err.contains("yesterday"), "{err}");
    assert!(
        plan(GEN, &["source.bounded=true"]).is_ok(),
        "a bounded generator with events is fine"
    );
    let endless = "[source]\nkind = \"generator\"\nbounded = true\n";
    let err = plan(endless, &[]).map(|_| ()).unwrap_err().to_string();
    assert!(err.contains("source.events"), "{err}");
}

/// `source.on_data_loss` is "fail" unless it says "continue"; partitions are discovered every
/// 10 s by default, never in bounded runs or with "0s"; hotlist's own `auto.offset.reset` cannot
/// be overridden through `[source.options]`.
#[test]
fn kafka_data_loss_and_partition_discovery() {
    let kafka = "[source]\nkind = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\n";
    let spec = |set: &[&str]| -> Result<KafkaSpec> {
        match plan(kafka, set)?.source {
            SourcePlan::Kafka { spec, .. } => Ok(spec),
            other => panic!("{other:?}"),
        }
    };
    let default = spec(&[]).unwrap();
    assert_eq!(default.on_data_loss, OnDataLoss::Fail);
    assert_eq!(default.partition_discovery, Some(Span::from_millis(10_000)));
    let set = spec(&[
        "source.on_data_loss=\"continue\"",
        "source.partition_discovery=\"250ms\"",
    ])
    .unwrap();
    assert_eq!(set.on_data_loss, OnDataLoss::Continue);
    assert_eq!(set.partition_discovery, Some(Span::from_millis(250)));
    assert_eq!(spec(&["source.bounded=true"]).unwrap().partition_discovery, None);
    assert_eq!(
        spec(&["source.partition_discovery=\"0s\""])
            .unwrap()
            .partition_discovery,
        None
    );
    let err = format!("{:#}", spec(&["source.on_data_loss=\"ignore\""]).unwrap_err());
    assert!(
        err.contains("source.on_data_loss") && err.contains("\"ignore\""),
        "{err}"
    );
    let reset = format!("{kafka}[source.options]\n\"auto.offset.reset\" = \"earliest\"\n");
    let err = format!("{:#}", plan(&reset, &[]).map(|_| ()).unwrap_err());
    assert!(err.contains("source.options.auto.offset.reset"), "{err}");
}

/// The shipped configs (`configs/*.toml`) parse: the examples stay true to the code.
#[test]
fn shipped_configs_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        seen += 1;
        // the Nexmark config reads the bids `scripts/nexmark-bench` writes: here, the test fixture
        let mut o = Overrides::default();
        if path.file_name().is_some_and(|n| n == "nexmark-q5.toml") {
            let bids = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nexmark-bids-3000.jsonl");
            o.set.push(format!("source.path={:?}", bids.display().to_string()));
        }
        load(&path, &o).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
    }
    assert!(seen >= 2, "configs found in {}", dir.display());
}

/// A cluster's connect timeout defaults to 60 s, takes a duration, and must be positive.
#[test]
fn cluster_connect_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.txt");
    std::fs::write(&hosts, "127.0.0.1:7001\n127.0.0.1:7002\n").unwrap();
    let cluster = |set: &[&str]| -> Result<ClusterPlan> {
        let o = Overrides {
            set: set.iter().map(|s| s.to_string()).collect(),
            processes: Some(2),
            process: Some(1),
            hostfile: Some(hosts.clone()),
            ..Default::default()
        };
        Ok(parse(GEN, &o)?.cluster.expect("a cluster"))
    };
    let c = cluster(&[]).unwrap();
    assert_eq!((c.process, c.addresses.len()), (1, 2));
    assert_eq!(c.connect_timeout, Span::from_millis(60_000));
    let c = cluster(&["run.connect_timeout=\"5s\""]).unwrap();
    assert_eq!(c.connect_timeout, Span::from_millis(5_000));
    for bad in ["run.connect_timeout=\"0s\"", "run.connect_timeout=\"soon\""] {
        let err = format!("{:#}", cluster(&[bad]).unwrap_err());
        assert!(err.contains("run.connect_timeout"), "{bad}: {err}");
    }
}

#[test]
fn defaults_and_overrides() {
    let p = plan(GEN, &["time.allowed_lateness=2m", "run.workers=3", "job.id=x"]).unwrap();
    assert_eq!(p.windows.len(), 4);
    assert_eq!(p.time.allowed_lateness.as_millis(), 120_000);
    assert_eq!(p.time.max_out_of_orderness.as_millis(), 5_000);
    assert_eq!(p.workers, 3);
    assert_eq!(p.job_id, "x");
    match p.source {
        SourcePlan::Generator { spec, .. } => assert_eq!((spec.events, spec.start), (Some(10), Millis(0))),
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_name_the_key() {
    let cases: &[(&str, &[&str], &str)] = &[
        (GEN, &["time.allowed_lateness=soon"], "time.allowed_lateness"),
        (GEN, &["source.late_fraction=2"], "source.late_fraction"),
        (GEN, &["sink.kind=\"mysql\""], "sink.kind"),
        (GEN, &["sink.kind=\"postgres\""], "sink.url"),
        (
            GEN,
            &[
                "sink.kind=\"redis\"",
                "sink.url=\"redis://x\"",
                "sink.redis_url=\"redis://y\"",
            ],
            "sink.redis_url",
        ),
        (GEN, &["run.workers=0"], "run.workers"),
        (
            GEN,
            &["run.batch_size=0"],
            "run.batch_size: must be between 1 and 1048576, got 0",
        ),
        (
            GEN,
            &["run.batch_size=1048577"],
            "run.batch_size: must be between 1 and 1048576, got 1048577",
        ),
        (
            GEN,
            &["run.max_dead_letters_per_block=1000001"],
            "run.max_dead_letters_per_block: must be at most 1000000 (the positions of a block), got 1000001",
        ),
        (GEN, &["time.bogus=1"], "bogus"),
        ("[source]\nkind = \"file\"\n", &[], "source.path"),
        (
            "[source]\nkind = \"file\"\npath = \"/nonexistent/*.jsonl\"\n",
            &[],
            "no file matches",
        ),
        (
            "[source]\nkind = \"file\"\npath = \"-\"\nsplit = 2\n",
            &[],
            "source.split: standard input cannot be split",
        ),
        (
            "[source]\nkind = \"file\"\npath = \"-\"\nsplit = 0\n",
            &[],
            "source.split: 0 is not between 1 and 1024",
        ),
        (
            "[source]\nkind = \"file\"\npath = \"-\"\nsplit_stripe_bytes = 1000\n",
            &[],
            "source.split_stripe_bytes: 1000 is not between 1024 (1 KiB) and 1073741824 (1 GiB)",
        ),
        ("", &[], "[source]"),
        (
            &format!("{GEN}[[window]]\nname = \"w\"\nsize = \"1m\"\nslide = \"2m\"\n"),
            &[],
            "slide",
        ),
    ];
    for (text, set, want) in cases {
        let err = format!("{:#}", plan(text, set).unwrap_err());
        assert!(err.contains(want), "{err:?} should mention {want:?}");
    }
}

/// A key of another `[source]` kind is rejected by that kind's own keys, and the message names
/// the key, the section and the kind it was checked against; an unknown kind lists the kinds.
#[test]
fn a_key_of_another_kind_is_rejected() {
    let file = "[source]\nkind = \"file\"\npath = \"-\"\n";
    let kafka = "[source]\nkind = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\n";
    let cases: &[(&str, &str, &str)] = &[
        (file, "source.seed=1", "kind = \"file\""),
        (file, "source.topic=\"t\"", "kind = \"file\""),
        (GEN, "source.path=\"x.jsonl\"", "kind = \"generator\""),
        (GEN, "source.brokers=\"b:9092\"", "kind = \"generator\""),
        (kafka, "source.pace=true", "kind = \"kafka\""),
        (kafka, "source.path=\"x.jsonl\"", "kind = \"kafka\""),
    ];
    for (text, set, kind) in cases {
        let key = &set[set.find('.').expect("a dot") + 1..set.find('=').expect("a value")];
        let err = format!("{:#}", plan(text, &[set]).unwrap_err());
        assert!(
            err.starts_with("source: unknown field") && err.contains(&format!("`{key}`")) && err.contains(kind),
            "{set}: {err}"
        );
    }
    // the keys every kind shares stay accepted
    assert!(plan(file, &["source.bounded=true"]).is_ok());
    assert!(plan(kafka, &["source.bounded=true"]).is_ok());
    let err = format!("{:#}", plan(GEN, &["source.kind=\"s3\""]).unwrap_err());
    assert!(err.contains("source.kind: unknown kind \"s3\""), "{err}");
    let err = format!("{:#}", plan("[source]\npath = \"-\"\n", &[]).unwrap_err());
    assert!(err.contains("kind"), "{err}");
}

/// Start times are RFC 3339 strings, TOML datetimes with an offset (what TOML makes of an
/// unquoted `2026-11-29T10:00:00Z`, in the file or in `--set`) or milliseconds; a datetime
/// without an offset, or a bare date, is refused with a line naming the key.
#[test]
fn start_times_take_toml_datetimes() {
    let kafka = "[source]\nkind = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\n";
    let start_time = |text: &str, set: &[&str]| -> Result<Option<Millis>> {
        match plan(text, set)?.source {
            SourcePlan::Kafka { spec, .. } => Ok(spec.start_time),
            other => panic!("{other:?}"),
        }
    };
    let want = Millis::parse_rfc3339("2026-11-29T10:00:00Z").expect("a time");
    assert_eq!(
        start_time(kafka, &["source.start_time=2026-11-29T10:00:00Z"]).unwrap(),
        Some(want)
    );
    assert_eq!(
        start_time(kafka, &["source.start_time=2026-11-29T11:00:00.5+01:00"]).unwrap(),
        Some(Millis(want.0 + 500))
    );
    let unquoted = format!("{kafka}start_time = 2026-11-29T10:00:00Z\n");
    assert_eq!(start_time(&unquoted, &[]).unwrap(), Some(want));
    match plan(GEN, &["source.start=2026-11-29T10:00:00Z"]).unwrap().source {
        SourcePlan::Generator { spec, .. } => assert_eq!(spec.start, want),
        other => panic!("{other:?}"),
    }
    let datetime = |s: &str| toml::Value::Datetime(s.parse().expect("a TOML datetime"));
    assert_eq!(
        super::validate::instant("k", &datetime("2026-11-29T10:00:00Z")).unwrap(),
        want
    );
    let err = super::validate::instant("k", &datetime("2026-11-29T10:00:00")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("k: 2026-11-29T10:00:00 is not a time with an offset"),
        "{err}"
    );
    for (text, set, key) in [
        (kafka, "source.start_time=2026-11-29T10:00:00", "source.start_time"),
        (kafka, "source.start_time=2026-11-29", "source.start_time"),
        (GEN, "source.start=2026-11-29T10:00:00", "source.start"),
        (GEN, "source.start=true", "source.start"),
    ] {
        let err = format!("{:#}", plan(text, &[set]).unwrap_err());
        assert!(err.starts_with(key), "{set}: {err}");
    }
}

/// `source.max_record_bytes` is 1 MiB unless set, is a key of every kind, and must be between
/// 1 and 64 MiB; `time.max_future` is 1 h unless set and must be positive.
#[test]
fn record_size_and_max_future() {
    let p = plan(GEN, &[]).unwrap();
    assert_eq!(
        (p.max_record_bytes, p.time.max_future),
        (1 << 20, Span::from_millis(3_600_000))
    );
    let file = "[source]\nkind = \"file\"\npath = \"-\"\n";
    let kafka = "[source]\nkind = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\n";
    for text in [GEN, file, kafka] {
        let p = plan(text, &["source.max_record_bytes=4096", "time.max_future=\"10m\""]).unwrap();
        assert_eq!(
            (p.max_record_bytes, p.time.max_future),
            (4096, Span::from_millis(600_000))
        );
        assert_eq!(
            plan(text, &["source.max_record_bytes=67108864"])
                .unwrap()
                .max_record_bytes,
            64 << 20
        );
        for bad in [
            "source.max_record_bytes=0",
            "source.max_record_bytes=67108865",
            "source.max_record_bytes=-1",
        ] {
            let err = format!("{:#}", plan(text, &[bad]).unwrap_err());
            assert!(
                err.starts_with("source.max_record_bytes: must be between 1 and 67108864"),
                "{err}"
            );
        }
    }
    let err = format!("{:#}", plan(GEN, &["time.max_future=\"0s\""]).unwrap_err());
    assert!(err.starts_with("time.max_future: must be positive"), "{err}");
}

/// A generator that starts, or (unpaced and bounded) ends, further ahead of the wall clock than
/// `time.max_future` is refused when a run starts; near-now and far-past starts are fine.
#[test]
fn a_generator_beyond_max_future_is_refused() {
    let now = Millis(1_800_000_000_000);
    let check = |set: &[&str]| check_against_clock(&plan(GEN, set).unwrap(), now).map_err(|e| format!("{e:#}"));
    assert!(check(&[]).is_ok(), "start = 0");
    assert!(
        check(&["source.start=1800003600000"]).is_ok(),
        "exactly max_future ahead"
    );
    let err = check(&["source.start=1800003600001"]).unwrap_err();
    assert!(
        err.starts_with("source.start: ") && err.contains("time.max_future (1h)"),
        "{err}"
    );
    assert!(check(&["source.start=1800003600001", "time.max_future=\"2h\""]).is_ok());
    // 10 events at 1 per second from now: the last is 9 s ahead
    let fast = [
        "source.start=1800000000000",
        "source.partitions=1",
        "source.rate=1",
        "time.max_future=\"8s\"",
    ];
    let err = check(&fast).unwrap_err();
    assert!(
        err.starts_with("source.events: ") && err.contains("source.pace = true"),
        "{err}"
    );
    assert!(
        check(&[&fast[..], &["source.pace=true"]].concat()).is_ok(),
        "paced: never ahead"
    );
    assert!(check(&[&fast[..], &["time.max_future=\"9s\""]].concat()).is_ok());
    let kafka = "[source]\nkind = \"kafka\"\nbrokers = \"b:9092\"\ntopic = \"t\"\n";
    assert!(check_against_clock(&plan(kafka, &[]).unwrap(), now).is_ok());
}

/// `[hot_keys]`: absent is off; defaults fill in; every bad value is one error naming its key.
#[test]
fn hot_keys_section() {
    assert!(plan(GEN, &[]).unwrap().hot_keys.is_none(), "absent: off");
    let on = format!("{GEN}[hot_keys]\nthreshold = 100\n");
    let spec = plan(&on, &[]).unwrap().hot_keys.expect("on");
    assert_eq!(
        (spec.sample, spec.window, spec.threshold),
        (1, Span::from_millis(10_000), 100.0)
    );
    assert_eq!((spec.hysteresis, spec.candidates), (0.2, 64));
    let spec = plan(
        &on,
        &[
            "hot_keys.sample=100",
            "hot_keys.window=\"1m\"",
            "hot_keys.hysteresis=0.5",
        ],
    )
    .unwrap()
    .hot_keys
    .expect("on");
    assert_eq!(
        (spec.sample, spec.window, spec.hysteresis),
        (100, Span::from_millis(60_000), 0.5)
    );
    let cases = [
        (format!("{GEN}[hot_keys]\n"), "hot_keys.threshold: required"),
        (
            format!("{on}sample = 0\n"),
            "hot_keys.sample: must be between 1 and 1000000, got 0",
        ),
        (format!("{on}window = \"0s\"\n"), "hot_keys.window: must be positive"),
        (format!("{on}window = \"soon\"\n"), "hot_keys.window"),
        (
            format!("{on}hysteresis = 1\n"),
            "hot_keys.hysteresis: must be in [0, 1), got 1",
        ),
        (
            format!("{on}epsilon = 2\n"),
            "hot_keys: sketch epsilon 2 is not in (0, 1)",
        ),
        (
            format!("{on}candidates = -3\n"),
            "hot_keys.candidates: must be between 1",
        ),
        (format!("{on}threshold2 = 1\n"), "unknown field `threshold2`"),
        (
            format!("{GEN}[hot_keys]\nthreshold = \"fast\"\n"),
            "hot_keys.threshold: expected a number",
        ),
    ];
    for (text, want) in cases {
        let err = format!("{:#}", plan(&text, &[]).unwrap_err());
        assert!(err.contains(want), "{want}: {err}");
    }
}

/// `by`, `max_groups` and `count`: parsed into the window's key shape (dims sorted), every bad
/// value one line naming the window and the key.
#[test]
fn per_group_and_distinct_user_windows() {
    let file = "[source]\nkind = \"file\"\npath = \"-\"\n[source.format]\nuser = \"/user\"\n";
    let w = |extra: &str| format!("{file}[[window]]\nname = \"w\"\nsize = \"1m\"\n{extra}\n");
    let p = plan(
        &w("by = [\"device\", \"country\"]\nmax_groups = 50\ncount = \"distinct_users\""),
        &[],
    )
    .unwrap();
    let key = &p.windows[0].spec.key;
    assert_eq!(key.by, ["country", "device"]);
    assert_eq!((key.max_groups, key.distinct_users), (50, true));
    let p = plan(&w(""), &[]).unwrap();
    assert!(p.windows[0].spec.key.is_plain());
    assert_eq!(
        p.windows[0].spec.key.max_groups,
        hotlist_operators::group::DEFAULT_MAX_GROUPS
    );
    let cases: &[(&str, &str)] = &[
        ("by = []", "window \"w\": by: empty"),
        ("by = [\"a b\"]", "window \"w\": by: dim name \"a b\""),
        ("by = [\"c\", \"c\"]", "listed twice"),
        (
            "by = [\"k\"]",
            "window \"w\": by: dim name \"k\" is a query parameter of the read API",
        ),
        (
            "by = [\"c\", \"window\"]",
            "by: dim name \"window\" is a query parameter",
        ),
        ("by = [\"date\"]", "by: dim name \"date\" is a query parameter"),
        ("by = [\"at\"]", "by: dim name \"at\" is a query parameter"),
        ("by = [\"group\"]", "by: dim name \"group\" is a query parameter"),
        (
            "max_groups = 5",
            "window \"w\": max_groups: only for a window with `by`",
        ),
        ("by = [\"c\"]\nmax_groups = 0", "window \"w\": max_groups: must be 1"),
        ("count = \"clicks\"", "window \"w\": count: unknown count \"clicks\""),
        (
            "by = [\"c\"]\nmode = \"both\"",
            "are for mode = \"exact\", \"sketch\" or \"auto\" windows",
        ),
        (
            "by = [\"c\"]\nmode = \"sketch\"\n[window.sketch]\nalgorithm = \"heavykeeper\"",
            "a window with `by` or count = \"distinct_users\" needs \"cms\"",
        ),
        (
            "count = \"distinct_users\"\nmode = \"both\"",
            "are for mode = \"exact\", \"sketch\" or \"auto\" windows",
        ),
    ];
    for (extra, want) in cases {
        let err = format!("{:#}", plan(&w(extra), &[]).unwrap_err());
        assert!(err.contains(want), "{extra}: {err:?} should mention {want:?}");
        assert!(!err.contains('\n'), "one line: {err:?}");
    }
}

/// `[source.format]`: the defaults are the contract, the Nexmark mapping compiles, every bad
/// value is one line naming its key.
#[test]
fn source_format() {
    let file = "[source]\nkind = \"file\"\npath = \"-\"\n";
    let p = plan(file, &[]).expect("default");
    assert!(p.input.format.is_contract());
    assert!(!p.input.user_required);
    let nexmark = format!(
        "{file}[source.format]\nitem_id = \"/Bid/auction\"\nts = \"/Bid/date_time\"\nuser = \"/Bid/bidder\"\n\
         dims = {{ channel = \"/Bid/channel\" }}\n"
    );
    let p = plan(&nexmark, &[]).expect("nexmark");
    assert_eq!(p.input.format.item_id.text, "/Bid/auction");
    assert_eq!(p.input.format.user, None, "no window needs a user yet");
    let (f, _) = p.input.compile(&["channel".into()], true).expect("compiles");
    assert_eq!(f.user.map(|u| u.text), Some("/Bid/bidder".into()));
    assert_eq!(f.dims[0].1.text, "/Bid/channel");
    let e = p.input.compile(&["country".into()], false).unwrap_err();
    assert!(
        e.to_string()
            .contains("source.format.dims: no pointer for dim \"country\""),
        "{e}"
    );
    // a dims object: dim `d` is at <object>/d, escaped
    let p = plan(&format!("{file}[source.format]\ndims = \"/meta\"\n"), &[]).expect("dims object");
    let (f, _) = p.input.compile(&["a/b".into()], false).expect("compiles");
    assert_eq!(f.dims[0].1.tokens, vec!["meta", "a/b"]);
    let user = plan(file, &[]).expect("default").input.compile(&[], true).unwrap_err();
    assert!(user.to_string().starts_with("source.format.user:"), "{user}");
    for (set, key) in [
        ("source.format.item_id=\"Bid\"", "source.format.item_id"),
        ("source.format.ts=\"\"", "source.format.ts"),
        ("source.format.ts_unit=\"min\"", "source.format.ts_unit"),
        ("source.format.user=\"x\"", "source.format.user"),
        ("source.format.dims=3", "source.format.dims"),
        ("source.format.dims.c=3", "source.format.dims.c"),
        (
            "source.format.dims.k=\"/k\"",
            "source.format.dims.k: \"k\" is a query parameter",
        ),
        ("source.format.bogus=\"/x\"", "bogus"),
    ] {
        let err = format!("{:#}", plan(file, &[set]).unwrap_err());
        assert!(err.contains(key) && !err.contains('\n'), "{set}: {err:?}");
    }
    let err = format!("{:#}", plan(GEN, &["source.format.item_id=\"/x\""]).unwrap_err());
    assert!(err.contains("format"), "the generator has no format: {err}");
}

/// `checkpoint.dir` is a path, a `file://` URL or `s3://bucket/prefix` (with `[checkpoint.s3]`
/// and `checkpoint.local_dir`); anything else is one clear line.
#[test]
fn checkpoint_dirs_in_object_storage() {
    let with = |cp: &str| plan(&format!("{GEN}[checkpoint]\n{cp}"), &[]);
    let local = with("dir = \"file:///var/ckpt\"\n").expect("file url");
    let cp = local.checkpoint.expect("checkpoint");
    assert_eq!((cp.dir, cp.remote), (std::path::PathBuf::from("/var/ckpt"), None));
    let s3 = with(
        "dir = \"s3://bkt/a/b/\"\nlocal_dir = \"/tmp/c\"\n[checkpoint.s3]\nendpoint = \"http://127.0.0.1:9000\"\nallow_http = true\n",
    )
    .expect("s3");
    let cp = s3.checkpoint.expect("checkpoint");
    let remote = cp.remote.expect("remote");
    assert_eq!(cp.dir, std::path::PathBuf::from("/tmp/c"));
    assert_eq!(
        (remote.bucket.as_str(), remote.prefix.as_str(), remote.allow_http),
        ("bkt", "a/b", true)
    );
    assert_eq!(remote.url(), "s3://bkt/a/b");
    for (cp, want) in [
        ("dir = \"gs://bkt/x\"\n", "checkpoint.dir: gs:// is not supported"),
        ("dir = \"s3:///x\"\n", "names no bucket"),
        ("local_dir = \"x\"\n", "only with checkpoint.dir = \"s3://"),
        (
            "[checkpoint.s3]\nregion = \"x\"\n",
            "only with checkpoint.dir = \"s3://",
        ),
        (
            "dir = \"s3://b\"\n[checkpoint.s3]\nbogus = 1\n",
            "unknown field `bogus`",
        ),
    ] {
        let err = format!("{:#}", with(cp).unwrap_err());
        assert!(err.contains(want) && !err.contains('\n'), "{cp}: {err}");
    }
}

/// `job.id` and window names become checkpoint paths, S3 keys and Redis keys: anything outside
/// the safe alphabet (a path separator, `..`, a leading dot, a key separator) is refused with a
/// line naming the key; ordinary names pass.
#[test]
fn job_ids_and_window_names_are_safe_for_paths_and_keys() {
    for bad in [
        "..",
        "../escape",
        "/etc",
        "a/b",
        "a\\\\b",
        ".hidden",
        "a:b",
        "two words",
    ] {
        let err = format!(
            "{:#}",
            plan(GEN, &[&format!("job.id={bad:?}")]).map(|_| ()).unwrap_err()
        );
        assert!(err.starts_with("job.id: "), "{bad:?}: {err}");
    }
    let long = "x".repeat(MAX_NAME_LEN + 1);
    assert!(plan(GEN, &[&format!("job.id={long:?}")]).is_err());
    assert_eq!(
        plan(GEN, &["job.id=\"trending-v2.eu_1\""]).unwrap().job_id,
        "trending-v2.eu_1"
    );
    let window = |name: &str| format!("{GEN}[[window]]\nname = {name:?}\nsize = \"1m\"\n");
    let err = format!("{:#}", plan(&window("../1m"), &[]).map(|_| ()).unwrap_err());
    assert!(err.starts_with("window \"../1m\": name: "), "{err}");
    assert!(plan(&window("1m:x"), &[]).is_err());
    assert!(plan(&window("1m_eu"), &[]).is_ok());
}

/// `source.split`: every file is read as that many byte ranges, partition `p` being range
/// `p % split` of file `p / split`, named `file:PATH#R/N`; its sizes go into the layout.
#[test]
fn file_sources_split_into_ranges() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, len) in [("a.jsonl", 10), ("b.jsonl", 25)] {
        std::fs::write(dir.path().join(name), "x".repeat(len)).expect("write");
    }
    let text = format!(
        "[source]\nkind = \"file\"\npath = \"{}/*.jsonl\"\nsplit = 3\n",
        dir.path().display()
    );
    let p = plan(&text, &[]).expect("plan");
    assert_eq!(p.source.partitions(), 6);
    let a = dir.path().join("a.jsonl").display().to_string();
    let b = dir.path().join("b.jsonl").display().to_string();
    assert_eq!(p.source.partition_name(0), format!("file:{a}#1/3"));
    assert_eq!(p.source.partition_name(5), format!("file:{b}#3/3"));
    assert_eq!(
        crate::checkpoint::JobLayout::of(&p).split,
        vec![(a.clone(), 10), (b, 25)]
    );
    // small files: one contiguous range each, as before stripes (nothing more in the layout)
    assert!(crate::checkpoint::JobLayout::of(&p).split_turns.is_empty());
    // larger than 3 stripes: the ranges read stripes in turns, and the layout says how many
    std::fs::write(dir.path().join("b.jsonl"), "x".repeat(7000)).expect("write");
    let striped = plan(&format!("{text}split_stripe_bytes = 1024\n"), &[]).expect("plan");
    assert_eq!(crate::checkpoint::JobLayout::of(&striped).split_turns, vec![1, 3]);
    let whole = plan(&text.replace("split = 3", "split = 1"), &[]).expect("plan");
    assert_eq!(whole.source.partitions(), 2);
    assert_eq!(whole.source.partition_name(0), format!("file:{a}"));
    assert!(crate::checkpoint::JobLayout::of(&whole).split.is_empty());
}

/// `rank_by`, `baseline` and `min_count`: a trend window's rule with its defaults, every bad
/// combination one line naming the window and the key.
#[test]
fn trend_windows() {
    use hotlist_operators::trend::{Rank, TrendRule};
    let file = "[source]\nkind = \"file\"\npath = \"-\"\n[source.format]\nuser = \"/user\"\n";
    let w = |extra: &str| format!("{file}[[window]]\nname = \"w\"\nsize = \"1h\"\n{extra}\n");
    let rank = |extra: &str| plan(&w(extra), &[]).expect("valid").windows[0].spec.rank;
    assert_eq!(rank(""), Rank::Count);
    assert_eq!(rank("rank_by = \"count\""), Rank::Count);
    assert_eq!(rank("rank_by = \"trend\""), Rank::Trend(TrendRule::default()));
    assert_eq!(
        rank("rank_by = \"trend\"\nbaseline = 24\nmin_count = 20\nby = [\"country\"]"),
        Rank::Trend(TrendRule {
            baseline: 24,
            min_count: 20
        })
    );
    let cases: &[(&str, &str)] = &[
        ("rank_by = \"hot\"", "window \"w\": rank_by: unknown ranking \"hot\""),
        ("baseline = 3", "window \"w\": baseline: only for rank_by = \"trend\""),
        ("min_count = 3", "window \"w\": min_count: only for rank_by = \"trend\""),
        (
            "rank_by = \"trend\"\nslide = \"10m\"",
            "a hopping window cannot rank by trend",
        ),
        (
            "rank_by = \"trend\"\nmode = \"sketch\"",
            "trend windows count exactly for now",
        ),
        (
            "rank_by = \"trend\"\ncount = \"distinct_users\"",
            "trend windows count events for now",
        ),
        (
            "rank_by = \"trend\"\nbaseline = 0",
            "window \"w\": baseline: must be 1 to 1000",
        ),
        (
            "rank_by = \"trend\"\nbaseline = 1001",
            "window \"w\": baseline: must be 1 to 1000",
        ),
        (
            "rank_by = \"trend\"\nmin_count = 0",
            "window \"w\": min_count: must be at least 1",
        ),
    ];
    for (extra, want) in cases {
        let err = format!("{:#}", plan(&w(extra), &[]).unwrap_err());
        assert!(err.contains(want), "{extra}: {err:?} should mention {want:?}");
        assert!(!err.contains('\n'), "one line: {err:?}");
    }
}

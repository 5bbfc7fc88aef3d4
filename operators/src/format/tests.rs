use super::*;
use proptest::prelude::*;
use serde_json::Value;

fn ptr(text: &str) -> Pointer {
    Pointer::parse(text).expect("valid pointer")
}

/// The Nexmark bid mapping.
fn bids() -> Format {
    Format {
        item_id: ptr("/Bid/auction"),
        ts: ptr("/Bid/date_time"),
        ts_unit: TsUnit::Millis,
        user: Some(ptr("/Bid/bidder")),
        user_is_extra: false,
        dims: vec![("channel".to_string(), ptr("/Bid/channel"))],
        bounds: Default::default(),
        args: Vec::new(),
        computed: Default::default(),
    }
}

fn detail(line: &str, format: &Format) -> String {
    match parse_with(line.as_bytes(), format) {
        Ok(e) => panic!("{line} parsed as {e:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn nexmark_bids() {
    let line = r#"{"Bid":{"auction":1000,"bidder":1001,"price":1,"channel":"Google","url":"u","date_time":1796052641816,"extra":""}}"#;
    let e = parse_with(line.as_bytes(), &bids()).expect("a bid");
    assert_eq!(e.item_id, "1000");
    assert_eq!(e.ts, Millis(1796052641816));
    assert_eq!(e.user.as_deref(), Some("1001"));
    assert_eq!(e.dims[..], ["Google"]);
    // a string and an integer are the same item
    let s = r#"{"Bid":{"auction":"1000","bidder":"1001","date_time":1796052641816}}"#;
    let e = parse_with(s.as_bytes(), &bids()).expect("a bid");
    assert_eq!((e.item_id.as_ref(), e.user.as_deref()), ("1000", Some("1001")));
    assert_eq!(e.dims[..], [""], "a missing dim is empty");
    let no_user = r#"{"Bid":{"auction":7,"date_time":0,"channel":null}}"#;
    let e = parse_with(no_user.as_bytes(), &bids()).expect("a bid without a user");
    assert_eq!((e.user, e.dims.to_vec()), (None, vec![Cow::Borrowed("")]));
}

#[test]
fn details_name_the_pointer() {
    let f = bids();
    let cases = [
        (r#"{"Person":{"id":1}}"#, "item_id: /Bid/auction finds nothing"),
        (r#"{"Bid":{"auction":1}}"#, "ts: /Bid/date_time finds nothing"),
        (
            r#"{"Bid":{"auction":1.5,"date_time":0}}"#,
            "item_id: /Bid/auction is a float, not a string or an integer",
        ),
        (
            r#"{"Bid":{"auction":null,"date_time":0}}"#,
            "item_id: /Bid/auction is null, not a string or an integer",
        ),
        (
            r#"{"Bid":{"auction":1,"date_time":true}}"#,
            "ts: /Bid/date_time is a boolean, not an integer or an RFC 3339 string",
        ),
        (
            r#"{"Bid":{"auction":1,"date_time":"12"}}"#,
            r#"ts: /Bid/date_time is "12", not an RFC 3339 time with an offset"#,
        ),
        (
            r#"{"Bid":{"auction":1,"date_time":0,"bidder":[]}}"#,
            "user: /Bid/bidder is an array, not a string or an integer",
        ),
        (
            r#"{"Bid":{"auction":1,"date_time":0,"bidder":""}}"#,
            "user: /Bid/bidder is empty",
        ),
        (
            r#"{"Bid":{"auction":1,"date_time":0,"channel":{}}}"#,
            "dims.channel: /Bid/channel is an object, not a string or an integer",
        ),
        (r#"{"Bid":{"auction":"","date_time":0}}"#, "item_id is empty"),
        (
            r#"{"Bid":{"auction":1,"date_time":9000000000000000}}"#,
            "ts 9000000000000000 is outside years 0000-9999",
        ),
        (r#"{"Bid":5}"#, "item_id: /Bid/auction finds nothing"),
        ("[1]", "not a JSON object"),
        ("", "empty line"),
    ];
    for (line, want) in cases {
        assert_eq!(detail(line, &f), want, "{line}");
    }
    let long_user = format!(
        r#"{{"Bid":{{"auction":1,"date_time":0,"bidder":"{}"}}}}"#,
        "u".repeat(257)
    );
    assert_eq!(
        detail(&long_user, &f),
        "user: /Bid/bidder is 257 bytes long (at most 256)"
    );
}

#[test]
fn malformed_duplicates_and_garbage_stay_bad() {
    let f = bids();
    for line in [
        r#"{"Bid":{"auction":1,"date_time":0}} x"#,
        r#"{"Bid":{"auction":1,"date_time":0}}{"Bid":{}}"#,
        r#"{"Bid":{"auction":1,"auction":2,"date_time":0}}"#,
        r#"{"Bid":{"auction":1,"date_time":0},"Bid":{"auction":1,"date_time":0}}"#,
        r#"{"Bid":{"auction":1,"date_time":0,"x":nope}}"#,
        r#"{"Bid":{"auction":"\ud800","date_time":0}}"#,
        r#"{"Bid":{"auction":1,"date_time":0}"#,
    ] {
        assert!(parse_with(line.as_bytes(), &f).is_err(), "{line}");
    }
    assert!(detail(r#"{"Bid":{"auction":1,"auction":2,"date_time":0}}"#, &f).starts_with("duplicate key \"auction\""));
    // a duplicate key off every pointer's path is not looked at (like the contract's unknown fields)
    let ok = r#"{"Bid":{"auction":1,"date_time":0,"extra":1,"extra":2}}"#;
    assert!(parse_with(ok.as_bytes(), &f).is_ok());
}

/// A number that overflows a float is an error for serde_json where the walk reads it: on a
/// pointer's way (here a number where `/Bid/bidder/id` expects an object). The scan leaves
/// such a number to the walk instead of skipping it (found by the property test below); one
/// off every pointer's path is skipped by both.
#[test]
fn a_number_out_of_a_floats_range_on_a_pointers_way_is_bad() {
    let f = Format {
        user: Some(ptr("/Bid/bidder/id")),
        ..bids()
    };
    let long = "9".repeat(400);
    for bad in ["1e309", "-100e000000000000307", "1E+999", long.as_str()] {
        let line = format!(r#"{{"Bid":{{"auction":1,"date_time":0,"bidder":{bad}}}}}"#);
        let (fast, slow) = both_readings(&line, &f);
        assert!(fast.is_none(), "{line}: the scan answered");
        assert!(slow.is_err_and(|e| e.contains("number out of range")), "{line}");
        assert!(parse_with(line.as_bytes(), &f).is_err(), "{line}");
        let off = format!(r#"{{"Bid":{{"auction":1,"date_time":0,"x":{bad}}}}}"#);
        let (fast, slow) = both_readings(&off, &f);
        assert!(slow.is_ok(), "{off}: off the path, not read");
        assert_eq!(fast, slow.ok(), "{off}");
    }
    for good in ["12", "-3.25", "123456789012345678"] {
        let line = format!(r#"{{"Bid":{{"auction":1,"date_time":0,"bidder":{good}}}}}"#);
        let (fast, slow) = both_readings(&line, &f);
        assert!(slow.is_ok(), "{line}");
        assert_eq!(fast, slow.ok(), "{line}: the scan reads it");
    }
}

#[test]
fn units_escapes_and_indices() {
    let at = |unit, v: &str| {
        let f = Format {
            ts_unit: unit,
            ..bids()
        };
        parse_with(format!(r#"{{"Bid":{{"auction":1,"date_time":{v}}}}}"#).as_bytes(), &f).map(|e| e.ts.0)
    };
    assert_eq!(at(TsUnit::Seconds, "1700000000"), Ok(1_700_000_000_000));
    assert_eq!(at(TsUnit::Micros, "1999"), Ok(1));
    assert_eq!(at(TsUnit::Micros, "-1"), Ok(-1), "truncated toward -inf");
    assert_eq!(at(TsUnit::Nanos, "-1000001"), Ok(-2));
    assert_eq!(at(TsUnit::Nanos, "9223372036854775807"), Ok(9_223_372_036_854));
    assert_eq!(
        at(TsUnit::Seconds, "9223372036854775807"),
        Err(BadRecord::TsOutOfRange("9223372036854775807".into())),
        "overflow"
    );
    assert_eq!(
        at(TsUnit::Seconds, "253402300800"),
        Err(BadRecord::TsOutOfRange("253402300800".into()))
    );
    assert_eq!(
        at(TsUnit::Seconds, r#""1970-01-01T00:00:01Z""#),
        Ok(1000),
        "strings ignore the unit"
    );
    let f = Format {
        item_id: ptr("/a~1b/~0c"),
        ts: ptr("/t/1"),
        ts_unit: TsUnit::Millis,
        user: Some(ptr("/u/0/id")),
        user_is_extra: false,
        dims: vec![("d".into(), ptr("/t/0")), ("e".into(), ptr("/a~1b/~0c"))],
        bounds: Default::default(),
        args: Vec::new(),
        computed: Default::default(),
    };
    let e = parse_with(br#"{"t":["x",5],"a/b":{"~c":"i"},"u":[{"id":-3}]}"#, &f).expect("parsed");
    assert_eq!((e.item_id.as_ref(), e.ts.0, e.user.as_deref()), ("i", 5, Some("-3")));
    assert_eq!(e.dims[..], ["x", "i"]);
    // a token that looks like an index also names an object's key (RFC 6901)
    let e = parse_with(br#"{"t":{"1":5},"a/b":{"~c":"i"}}"#, &f).expect("parsed");
    assert_eq!(
        (e.ts.0, e.user, e.dims.to_vec()),
        (5, None, vec![Cow::Borrowed(""), Cow::Borrowed("i")])
    );
    let leading_zero = Format {
        ts: ptr("/t/01"),
        ..f.clone()
    };
    assert_eq!(
        detail(r#"{"t":[0,1],"a/b":{"~c":"i"}}"#, &leading_zero),
        "ts: /t/01 finds nothing"
    );
}

#[test]
fn the_default_format_is_the_contract() {
    let f = Format::default();
    assert!(f.is_contract());
    assert!(!bids().is_contract());
    for line in [
        r#"{"item_id":"a","ts":5}"#,
        r#"{"item_id":5,"ts":0}"#,
        r#"{"ts":0}"#,
        r#"{"item_id":"a","ts":0,"dims":{"c":1}}"#,
        r#"{"item_id":"a","item_id":"b","ts":0}"#,
    ] {
        assert_eq!(parse_with(line.as_bytes(), &f), parse_event(line.as_bytes()), "{line}");
    }
}

/// The brute-force model: the whole record as a `serde_json::Value`, each target by
/// `Value::pointer`. Ok: (item, ts, user, dims); Err: the bad record's detail.
fn model(line: &str, f: &Format) -> Result<(String, i64, Option<String>, Vec<String>), String> {
    let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    if !v.is_object() {
        return Err("not a JSON object".into());
    }
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) if !n.is_f64() => Some(n.to_string()),
        _ => None,
    };
    // a computed item id is not read: `""` until its UDF gives it
    let item = match f.computed.item_id {
        true => String::new(),
        false => {
            let item = v.pointer(&f.item_id.text).ok_or("item_id finds nothing")?;
            let item = text(item).ok_or("item_id wrong type")?;
            check_item_id(&item).map_err(|e| e.to_string())?;
            item
        }
    };
    let ts = v.pointer(&f.ts.text).ok_or("ts finds nothing")?;
    let ts = match ts {
        Value::Number(n) => match n.as_i64() {
            Some(t) => model_millis(t, f.ts_unit),
            None if n.is_u64() => None,
            None => return Err("ts wrong type".into()),
        },
        Value::String(s) => Some(Millis::parse_rfc3339(s).ok_or("ts not rfc3339")?.0),
        _ => return Err("ts wrong type".into()),
    };
    let ts = ts.filter(|&t| Millis(t).is_event_time()).ok_or("ts out of range")?;
    let user = match f.user.as_ref().and_then(|p| v.pointer(&p.text)) {
        None => None,
        Some(u) => Some(text(u).ok_or("user wrong type")?),
    };
    if let Some(u) = &user {
        check_item_id(u).map_err(|e| e.to_string())?;
    }
    let mut dims = Vec::new();
    for (i, (_, p)) in f.dims.iter().enumerate() {
        if f.computed.dims & (1 << i) != 0 {
            dims.push(String::new());
            continue;
        }
        dims.push(match v.pointer(&p.text) {
            None | Some(Value::Null) => String::new(),
            Some(d) => text(d).ok_or("dim wrong type")?,
        });
    }
    Ok((item, ts, user, dims))
}

/// Milliseconds of `t` in `unit`, floored, in i128 (independent of [`TsUnit::to_millis`]).
fn model_millis(t: i64, unit: TsUnit) -> Option<i64> {
    let t = i128::from(t);
    let ms = match unit {
        TsUnit::Seconds => t * 1000,
        TsUnit::Millis => t,
        TsUnit::Micros => (t - t.rem_euclid(1000)) / 1000,
        TsUnit::Nanos => (t - t.rem_euclid(1_000_000)) / 1_000_000,
    };
    i64::try_from(ms).ok()
}

/// Keys and tokens from a small alphabet, so that pointers often find something.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("0".to_string()),
        Just("1".to_string()),
        Just("a/b".to_string()),
        Just("~".to_string()),
        Just("é\n".to_string()),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e3f64..1e3).prop_map(Value::from),
        prop_oneof![
            Just("".to_string()),
            Just("x".to_string()),
            Just("1970-01-01T00:00:01Z".to_string()),
            Just("\u{0}".to_string()),
            "[a-z\"\\\\]{0,4}"
        ]
        .prop_map(Value::from),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 40, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(key(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn pointer() -> impl Strategy<Value = Pointer> {
    prop::collection::vec(key(), 1..4).prop_map(|tokens| {
        let text: String = tokens
            .iter()
            .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
            .collect();
        Pointer::parse(&text).expect("valid")
    })
}

fn format() -> impl Strategy<Value = Format> {
    (
        pointer(),
        pointer(),
        prop_oneof![
            Just(TsUnit::Seconds),
            Just(TsUnit::Millis),
            Just(TsUnit::Micros),
            Just(TsUnit::Nanos)
        ],
        prop::option::of(pointer()),
        prop::collection::vec(pointer(), 0..3),
        // UDF arguments, and which targets UDFs compute (then not read)
        prop::collection::vec(pointer(), 0..3),
        (any::<bool>(), 0u64..8),
    )
        .prop_map(|(item_id, ts, ts_unit, user, dims, args, (item, dim_mask))| Format {
            item_id,
            ts,
            ts_unit,
            user,
            user_is_extra: false,
            bounds: Default::default(),
            computed: Computed {
                item_id: item,
                dims: dim_mask & ((1 << dims.len()) - 1),
            },
            dims: dims
                .into_iter()
                .enumerate()
                .map(|(i, p)| (format!("d{i}"), p))
                .collect(),
            args,
        })
}

/// The values planted at a record's targets (most of them present, mostly of a fitting type).
fn planted() -> impl Strategy<Value = Vec<Option<Value>>> {
    prop::collection::vec(
        prop::option::weighted(
            0.85,
            prop_oneof![
                3 => (-5i64..5).prop_map(Value::from),
                3 => "[a-z]{1,3}".prop_map(Value::from),
                1 => leaf(),
            ],
        ),
        9,
    )
}

/// Puts `value` at `tokens` in `v`, making objects on the way (so that most records have most
/// targets; an array keeps its shape where the token is one of its indices).
fn plant(v: &mut Value, tokens: &[String], value: Value) {
    let Some((first, rest)) = tokens.split_first() else {
        *v = value;
        return;
    };
    if let Value::Array(a) = v {
        if let Some(slot) = first
            .parse::<usize>()
            .ok()
            .filter(|_| !first.starts_with('0') || first == "0")
            .and_then(|i| a.get_mut(i))
        {
            return plant(slot, rest, value);
        }
    }
    if !v.is_object() {
        *v = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(m) = v {
        plant(m.entry(first.clone()).or_insert(Value::Null), rest, value);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// On random records and formats, the streaming walk agrees with the brute-force model.
    #[test]
    fn walk_equals_the_model(
        record in json(),
        f in format(),
        planted in planted(),
        garbage in prop::bool::weighted(0.05),
    ) {
        let mut line = record_for(record, &f, planted);
        if garbage {
            line.push_str(" x");
        }
        if f.is_contract() {
            return Ok(());
        }
        let got = parse_with(line.as_bytes(), &f).map(|e| {
            (
                e.item_id.into_owned(),
                e.ts.0,
                e.user.map(Cow::into_owned),
                e.dims.into_iter().map(Cow::into_owned).collect::<Vec<_>>(),
            )
        });
        match (got, model(&line, &f)) {
            (Ok(g), Ok(m)) => prop_assert_eq!(g, m, "{}", line),
            (Err(_), Err(_)) => {}
            (g, m) => prop_assert!(false, "{line}: walk {g:?}, model {m:?}"),
        }
    }
}

fn fresh_caps<'a>(f: &Format) -> walk::Caps<'a> {
    walk::Caps {
        fixed: [Cap::Missing, Cap::Missing, Cap::Missing],
        dims: smallvec::smallvec![Cap::Missing; f.dims.len() + f.args.len()],
        written: [None; 3],
    }
}

/// Both readings of `line`: the fast scan's (`None`: it gave up) and the walk's.
#[allow(clippy::type_complexity)]
fn both_readings<'a>(line: &'a str, f: &Format) -> (Option<Vec<Cap<'a>>>, Result<Vec<Cap<'a>>, String>) {
    let flat = |caps: walk::Caps<'a>| caps.fixed.into_iter().chain(caps.dims).collect::<Vec<_>>();
    let mut fast = fresh_caps(f);
    let fast = scan::scan(line, &scan::Plan::new(f), &mut scan::Keys::default(), &mut fast).map(|()| flat(fast));
    let mut slow = fresh_caps(f);
    let slow = walk::walk(line, f, &mut slow)
        .map(|()| flat(slow))
        .map_err(|e| e.to_string());
    (fast, slow)
}

/// Leaves the fast path is meant to cover: no escapes, short integers, plain decimals.
fn tame_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        (-100_000i64..100_000).prop_map(|c| Value::from(c as f64 / 100.0)),
        "[a-z ]{0,12}".prop_map(Value::from),
    ]
}

/// A tame value where a pointer ends: no float (the scan leaves a captured float to the walk).
fn tame_capture() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        "[a-z ]{0,12}".prop_map(Value::from),
    ]
}

fn tame_json() -> impl Strategy<Value = Value> {
    tame_leaf().prop_recursive(4, 40, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(key(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A record for `f` with most of its targets planted.
fn record_for(mut record: Value, f: &Format, planted: Vec<Option<Value>>) -> String {
    let targets = [Some(&f.item_id), Some(&f.ts), f.user.as_ref()]
        .into_iter()
        .flatten()
        .chain(f.dims.iter().map(|(_, p)| p))
        .chain(&f.args);
    for (p, value) in targets.zip(planted) {
        if let Some(value) = value {
            plant(&mut record, &p.tokens, value);
        }
    }
    if !record.is_object() {
        record = serde_json::json!({ "z": record });
    }
    serde_json::to_string(&record).expect("serializable")
}

/// One edit of a line: whitespace, a byte removed, or a byte that JSON cares about.
#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, char),
    Remove(usize),
    Replace(usize, char),
}

fn edit() -> impl Strategy<Value = Edit> {
    let c = prop::sample::select(vec![
        ' ', '\n', '\t', '{', '}', '[', ']', '"', ':', ',', '\\', '-', '0', '1', 'e', '.', 'u', 'n', 'x', '\u{1}',
    ]);
    prop_oneof![
        (any::<usize>(), c.clone()).prop_map(|(i, c)| Edit::Insert(i, c)),
        any::<usize>().prop_map(Edit::Remove),
        (any::<usize>(), c).prop_map(|(i, c)| Edit::Replace(i, c)),
    ]
}

fn apply(line: &str, edit: &Edit) -> String {
    let mut chars: Vec<char> = line.chars().collect();
    let at = |i: usize, n: usize| if n == 0 { 0 } else { i % n };
    match *edit {
        Edit::Insert(i, c) => chars.insert(at(i, chars.len() + 1), c),
        Edit::Remove(i) if !chars.is_empty() => {
            chars.remove(at(i, chars.len()));
        }
        Edit::Replace(i, c) if !chars.is_empty() => {
            let i = at(i, chars.len());
            chars[i] = c;
        }
        _ => {}
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Where the fast scan answers, on records valid or broken by a few edits, it answers as the
    /// walk does: the same captures, and never for a record the walk rejects.
    #[test]
    fn the_scan_answers_as_the_walk_does(
        record in json(),
        f in format(),
        planted in planted(),
        edits in prop::collection::vec(edit(), 0..3),
    ) {
        let line = edits.iter().fold(record_for(record, &f, planted), |line, e| apply(&line, e));
        match both_readings(&line, &f) {
            (None, _) => {}
            (Some(fast), Ok(slow)) => prop_assert_eq!(fast, slow, "{}", line),
            (Some(fast), Err(e)) => prop_assert!(false, "{line}: scan {fast:?}, walk {e}"),
        }
    }

    /// The fast scan covers the usual records: on valid records without escapes it always
    /// answers (so the property above is not vacuous).
    #[test]
    fn the_scan_covers_records_without_escapes(
        record in tame_json(),
        f in format(),
        planted in prop::collection::vec(prop::option::weighted(0.85, tame_capture()), 9),
        spaced in any::<bool>(),
    ) {
        let mut line = record_for(record, &f, planted);
        if spaced {
            line = line.replace(',', " ,\n").replace(':', "\t: ").replace('{', "{ ");
        }
        if line.contains('\\') {
            return Ok(()); // a key with an escape (é\n): the walk's
        }
        let (fast, slow) = both_readings(&line, &f);
        prop_assert!(slow.is_ok(), "{}", line);
        if slow.as_ref().is_ok_and(|caps| caps.iter().any(|c| matches!(c, Cap::Float(_)))) {
            return Ok(()); // a captured float: the walk's
        }
        prop_assert_eq!(fast.ok_or_else(|| "the scan gave up".to_string()), slow, "{}", line);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// With the keys of earlier records remembered, the scan answers as it does without them
    /// (and so as the walk does): records of one shape with other values, some spaced, some
    /// edited (a key changed, cut or moved), read in turn by one scan.
    #[test]
    fn remembered_keys_change_no_answer(
        record in tame_json(),
        f in format(),
        records in prop::collection::vec(
            (
                prop::collection::vec(prop::option::weighted(0.85, tame_capture()), 9),
                prop::collection::vec(edit(), 0..3),
                any::<bool>(),
            ),
            1..8,
        ),
    ) {
        let plan = scan::Plan::new(&f);
        let mut keys = scan::Keys::default();
        for (planted, edits, spaced) in records {
            let mut line = record_for(record.clone(), &f, planted);
            if spaced {
                line = line.replace(':', "\t: ");
            }
            let line = edits.iter().fold(line, |line, e| apply(&line, e));
            let mut caps = fresh_caps(&f);
            let remembered = scan::scan(&line, &plan, &mut keys, &mut caps)
                .map(|()| caps.fixed.into_iter().chain(caps.dims).collect::<Vec<_>>());
            let (fresh, walked) = both_readings(&line, &f);
            prop_assert_eq!(&remembered, &fresh, "{}", line);
            if let Some(caps) = remembered {
                prop_assert_eq!(Ok(caps), walked, "{}", line);
            }
        }
    }
}

/// The keys a scan remembers are used: a record read again is read through them (so the
/// property above is not vacuous), and a key of another length in their place is not.
#[test]
fn the_scan_reads_a_known_shape_through_its_keys() {
    let f = bids();
    let plan = scan::Plan::new(&f);
    let mut keys = scan::Keys::default();
    let line = r#"{"Bid":{"auction":1000,"bidder":1001,"price":7,"channel":"Apple","url":"u","date_time":1796466348474,"extra":"twenty-bytes-or-more"}}"#;
    let mut caps = fresh_caps(&f);
    assert!(scan::scan(line, &plan, &mut keys, &mut caps).is_some());
    assert!(keys.remembered() >= 8, "{}", keys.remembered());
    let before = keys.hits();
    // (an escape: not the kept shape's record, read by the scan)
    let again = line.replace("twenty-", r"twenty\/");
    let mut caps = fresh_caps(&f);
    assert!(scan::scan(&again, &plan, &mut keys, &mut caps).is_some());
    assert!(keys.hits() >= before + 8, "{} hits", keys.hits() - before);
    assert_eq!(caps.fixed[0], Cap::Int(1000));
    let other = line.replace(r#""auction":"#, r#""auctions":"#);
    let mut caps = fresh_caps(&f);
    assert!(scan::scan(&other, &plan, &mut keys, &mut caps).is_some());
    assert_eq!(caps.fixed[0], Cap::Missing);
}

/// Records a shape is kept of: no arrays, no escapes in keys, tame leaves.
fn shaped_json() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec!["a", "b", "0", "1", "a/b", "~", "é"]).prop_map(str::to_string);
    tame_leaf().prop_recursive(4, 40, 4, move |inner| {
        prop::collection::btree_map(key.clone(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect()))
    })
}

/// Values planted where pointers end in records a shape is kept of (a captured literal
/// keeps none).
fn shaped_capture() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (-1000i64..1000).prop_map(Value::from),
        3 => "[a-z ]{0,12}".prop_map(Value::from),
        1 => tame_capture(),
    ]
}

/// Written as `-0` by [`vary`]'s caller (serde_json writes its `-0` as `-0.0`).
const NEGATIVE_ZERO: &str = "(negative zero)";

/// `v` with the same keys and other values: most leaves changed within their kind (integers
/// of other lengths, strings of other lengths), and the `wild`th leaf as `seed` picks —
/// integers beyond 18 digits, `-0`, a float, a string with an escape, non-ASCII or a control
/// character, a value of another type.
fn vary(v: &Value, seed: u64, wild: u64, n: &mut u64) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), vary(v, seed, wild, n))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(|v| vary(v, seed, wild, n)).collect()),
        leaf => {
            *n += 1;
            let pick = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(*n * 0x2545_f491) >> 7;
            if *n != wild {
                return match leaf {
                    Value::Number(x) if x.is_f64() => Value::from((pick % 10_000) as f64 / 8.0 + 0.5),
                    Value::Number(_) if pick.is_multiple_of(5) => {
                        Value::from(123_456_789_012_345_678i64 - (pick % 7) as i64)
                    }
                    Value::Number(_) => Value::from((pick % 100_000) as i64 - 50_000),
                    Value::String(_) => Value::from("z".repeat((pick % 40) as usize)),
                    other => other.clone(),
                };
            }
            match pick % 12 {
                0 => Value::from((pick % 1000) as i64 - 500),
                1 => Value::from(123_456_789_012_345_678i64 + (pick % 7) as i64),
                2 => Value::from(u64::MAX - pick % 3),
                3 => Value::from(NEGATIVE_ZERO),
                4 => Value::from((pick % 10_000) as f64 / 8.0),
                5 => Value::from("a".repeat((pick % 40) as usize)),
                6 => Value::from(format!("q\"{}", pick % 9)),
                7 => Value::from("é"),
                8 => Value::from("\u{1}"),
                9 => Value::Null,
                10 => Value::from(pick.is_multiple_of(2)),
                _ => leaf.clone(),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// With the shapes of earlier records kept, the scan answers as it does without them (and
    /// so as the walk does): records of one shape with their values changed (of the same kind
    /// or not), some edited, read in turn by one scan.
    #[test]
    fn kept_shapes_change_no_answer(
        record in shaped_json(),
        f in format(),
        planted in prop::collection::vec(prop::option::weighted(0.9, shaped_capture()), 9),
        records in prop::collection::vec((any::<u64>(), prop::collection::vec(edit(), 0..2)), 1..10),
    ) {
        // (no key with an escape: a record with one keeps no shape)
        let plain = |p: &Pointer| ptr(&p.text.replace('\n', ""));
        let mut f = f;
        (f.item_id, f.ts, f.user) = (plain(&f.item_id), plain(&f.ts), f.user.as_ref().map(plain));
        for p in f.dims.iter_mut().map(|(_, p)| p).chain(&mut f.args) {
            *p = plain(p);
        }
        let first = record_for(record, &f, planted);
        let first: Value = serde_json::from_str(&first).expect("a record");
        let plan = scan::Plan::new(&f);
        let mut keys = scan::Keys::default();
        for (seed, edits) in records {
            let varied = if seed.is_multiple_of(4) { first.clone() } else { vary(&first, seed, seed % 8, &mut 0) };
            let line = serde_json::to_string(&varied).expect("serializable");
            let line = line.replace(&format!("\"{NEGATIVE_ZERO}\""), "-0");
            let line = edits.iter().fold(line, |line, e| apply(&line, e));
            let mut caps = fresh_caps(&f);
            let kept = scan::scan(&line, &plan, &mut keys, &mut caps)
                .map(|()| caps.fixed.into_iter().chain(caps.dims).collect::<Vec<_>>());
            let (fresh, walked) = both_readings(&line, &f);
            prop_assert_eq!(&kept, &fresh, "{}", line);
            if let Some(caps) = kept {
                prop_assert_eq!(Ok(caps), walked, "{}", line);
            }
        }
    }
}

/// A kept shape is used (so the property above is not vacuous): a bid's shape reads the bids
/// after it, whatever their values' lengths, captures as the scan does, and leaves what does
/// not fit it to the scan; records of ever-new shapes build one only on credit.
#[test]
fn the_scan_reads_records_through_a_kept_shape() {
    let f = bids();
    let plan = scan::Plan::new(&f);
    let mut keys = scan::Keys::default();
    fn read_one<'a>(f: &Format, plan: &scan::Plan, keys: &mut scan::Keys, line: &'a str) -> Option<Vec<Cap<'a>>> {
        let mut caps = fresh_caps(f);
        let kept = scan::scan(line, plan, keys, &mut caps).map(|()| caps.fixed.into_iter().chain(caps.dims).collect());
        assert_eq!(kept, both_readings(line, f).0, "{line}");
        kept
    }
    let read = |keys: &mut scan::Keys, line: &str| read_one(&f, &plan, keys, line).is_some();
    let bid = |auction: &str, url: &str| {
        format!(
            r#"{{"Bid":{{"auction":{auction},"bidder":1001,"price":7,"channel":"Apple","url":"{url}","date_time":1796466348474,"extra":""}}}}"#
        )
    };
    read(&mut keys, &bid("1000", "u"));
    assert_eq!(keys.shape_hits(), 0);
    let long = bid("123456789012345678", &"é".repeat(70));
    let caps = read_one(&f, &plan, &mut keys, &long).expect("a bid");
    assert_eq!(keys.shape_hits(), 1);
    assert_eq!(caps[0], Cap::Int(123_456_789_012_345_678));
    assert_eq!(caps[1], Cap::Int(1_796_466_348_474));
    assert_eq!((&caps[2], &caps[3]), (&Cap::Int(1001), &Cap::Str("Apple".into())));
    // not the shape: read by the scan (or left to the walk), the same answers
    for other in [
        bid("-0", "u"),
        bid("1.5", "u"),
        bid("1234567890123456789", "u"),
        bid("\"1000\"", "u"),
        bid("1000", "a\\\"b"),
        bid("1000", "u\u{1}"),
        bid("01", "u"),
        bid("1000", "u") + " ",
        bid("1000", "u").replace("\"price\"", "\"prices\""),
    ] {
        read(&mut keys, &other);
    }
    assert_eq!(keys.shape_hits(), 1);
    // ever-new shapes: the first few kept, then one build every 16 records
    for i in 0..64 {
        read(
            &mut keys,
            &format!(r#"{{"k{i}":1,"Bid":{{"auction":{i},"date_time":5}}}}"#),
        );
    }
    let before = keys.shape_hits();
    read(&mut keys, &bid("1000", "u"));
    assert_eq!(keys.shape_hits(), before + 1, "the bid's shape is one of the kept");
    // records no shape can be built of (an array): tried once every 16 records, not each
    let mut keys = scan::Keys::default();
    for i in 0..160 {
        read(
            &mut keys,
            &format!(r#"{{"Bid":{{"auction":{i},"date_time":5,"a":[1]}}}}"#),
        );
    }
    assert_eq!(keys.shape_hits(), 0);
    assert!(
        (4..=4 + 10).contains(&keys.shape_builds()),
        "{} builds",
        keys.shape_builds()
    );
}

/// Which records the fast scan takes, and which it leaves to the walk (whose reading is the
/// same either way, by the properties above).
#[test]
fn the_scan_takes_the_usual_records() {
    let f = bids();
    let takes = |line: &str| both_readings(line, &f).0.is_some();
    let bid = r#"{"Bid":{"auction":1000,"bidder":1001,"price":73134520,"channel":"channel-7568","url":"https://www.nexmark.com/rswp/item.htm?query=1","date_time":1796198774715,"extra":"tjegpeml"}}"#;
    assert!(takes(bid));
    assert!(
        takes(&bid.replace("https://", r"https:\/\/")),
        "simple escapes in skipped strings"
    );
    assert!(takes(&bid.replace(",", " ,\n\t").replace(':', " : ")), "whitespace");
    assert!(
        takes(&bid.replace("\"price\":73134520", "\"price\":-7.5e3")),
        "a skipped exponent"
    );
    assert!(
        !takes(&bid.replace("tjegpeml", r"tjeg\u00e9ml")),
        "\\u escapes: the walk's"
    );
    assert!(
        !takes(&bid.replace("\"auction\"", r#""auc\u0074ion""#)),
        "an escaped key on a path"
    );
    assert!(
        !takes(&bid.replace("1001", "1001,\"auction\":5")),
        "a duplicate key on a path"
    );
    assert!(
        !takes(&bid.replace(":1000,", ":10000000000000000000,")),
        "a long captured integer"
    );
    assert!(!takes(&bid.replace(":1000,", ":-0,")), "-0 is a float to serde_json");
    assert!(!takes(&format!("{bid} x")), "trailing garbage");
    assert!(
        !takes(&bid.replace("\"extra\"", "\"extra\u{1}\"")),
        "a control character"
    );
    let deep = format!("{{\"x\":{}{}}}", "[".repeat(120), "]".repeat(120));
    assert!(
        !takes(&deep),
        "deep nesting: the walk's (and within serde_json's limit)"
    );
    assert!(both_readings(&deep, &f).1.is_ok());
}

/// A user read as an extra (`user_is_extra`, for `hotlist explain`) never makes a record bad:
/// one that would (an object, a float, an empty id) reads as no user, the rest as before.
#[test]
fn an_extra_user_never_makes_a_record_bad() {
    let strict = Format {
        user: Some(ptr("/u")),
        ..Format::default()
    };
    let extra = Format {
        user_is_extra: true,
        ..strict.clone()
    };
    for bad in [r#"{"u":{"x":1}}"#, r#"{"u":1.5}"#, r#"{"u":""}"#, r#"{"u":[1]}"#] {
        let line = format!(r#"{{"item_id":"a","ts":5,{}}}"#, &bad[1..bad.len() - 1]);
        assert!(
            parse_with(line.as_bytes(), &strict).is_err(),
            "{line}: bad when the job counts users"
        );
        let e = parse_with(line.as_bytes(), &extra).unwrap_or_else(|b| panic!("{line}: {b}"));
        assert_eq!((e.item_id.as_ref(), e.ts.0, e.user), ("a", 5, None), "{line}");
    }
    let e = parse_with(br#"{"item_id":"a","ts":5,"u":"bot-1"}"#, &extra).expect("parsed");
    assert_eq!(e.user.as_deref(), Some("bot-1"));
}

/// The UDFs' arguments are captured as they are, whatever their type (a float and a boolean
/// too, by either path); a computed item id and dim are not read, so a record without them is
/// no bad record, and their rules wait for the UDFs.
#[test]
fn udf_arguments_are_captured_and_computed_targets_not_read() {
    let mut f = bids();
    f.computed = Computed { item_id: true, dims: 1 };
    f.args = vec![
        ptr("/Bid/url"),
        ptr("/Bid/price"),
        ptr("/Bid/ok"),
        ptr("/Bid/none"),
        ptr("/Bid/x"),
    ];
    let parser = Parser::new(f);
    let mut args = Vec::new();
    let line = br#"{"Bid":{"url":"u","price":1.5,"ok":true,"x":null,"date_time":5}}"#;
    let e = parser.parse_with_args(line, &mut args).expect("no item id needed");
    assert_eq!(
        (e.item_id.as_ref(), e.ts, &e.dims[..]),
        ("", Millis(5), &[Cow::Borrowed("")][..])
    );
    assert_eq!(
        args,
        [
            Cap::Str("u".into()),
            Cap::Float(1.5),
            Cap::Bool(true),
            Cap::Missing,
            Cap::Null
        ]
    );
    // the fast scan's reading: no float at a target (appended after the first line's)
    let line = br#"{"Bid":{"url":"u","price":7,"ok":false,"date_time":5}}"#;
    args.clear();
    parser.parse_with_args(line, &mut args).expect("parses");
    assert_eq!(
        args,
        [
            Cap::Str("u".into()),
            Cap::Int(7),
            Cap::Bool(false),
            Cap::Missing,
            Cap::Missing
        ]
    );
    // a computed dim is held to the bounds by the caller, not here: an empty one passes
    assert!(parser.parse(br#"{"Bid":{"date_time":5}}"#).is_ok());
}

/// A format reading the usual line's members where they are (`reads_the_usual_line`): some of
/// `country`, `device` and an alias of `country`, a user or none, any unit, tight bounds.
fn usual_format() -> impl Strategy<Value = Format> {
    let dims = prop::sample::subsequence(
        vec![
            ("country", "/dims/country"),
            ("device", "/dims/device"),
            ("c2", "/dims/country"),
        ],
        0..=3,
    );
    (
        dims,
        any::<bool>(),
        any::<bool>(),
        0usize..4,
        prop_oneof![Just(256usize), 1usize..6],
    )
        .prop_map(|(dims, user, extra, unit, max_dim)| {
            let names: Vec<String> = dims.iter().map(|(n, _)| n.to_string()).collect();
            let by = [names.clone()];
            Format {
                item_id: ptr("/item_id"),
                ts: ptr("/ts"),
                ts_unit: [TsUnit::Millis, TsUnit::Seconds, TsUnit::Micros, TsUnit::Nanos][unit],
                user: (user || dims.is_empty()).then(|| ptr("/user")),
                user_is_extra: extra,
                dims: dims.iter().map(|(n, p)| (n.to_string(), ptr(p))).collect(),
                bounds: crate::group::DimBounds::new(max_dim, 12, &names, [("w", &by[0][..])]),
                args: Vec::new(),
                computed: Default::default(),
            }
        })
}

/// Lines near the usual shape: ids, times, dims and users of every kind, members doubled,
/// and such lines spoilt (`event::spoil`).
fn near_usual() -> impl Strategy<Value = String> {
    let id = prop_oneof![4 => "[a-z0-9-]{1,12}", 1 => "[ -~]{0,8}", 1 => "\\PC{0,6}", 1 => Just("x".repeat(257))];
    let ts = prop_oneof![
        4 => (-3_000_000_000_000i64..300_000_000_000_000).prop_map(|t| t.to_string()),
        1 => any::<i64>().prop_map(|t| t.to_string()),
        1 => Just("01".to_string()),
        1 => Just("\"1970-01-01T00:00:00Z\"".to_string()),
    ];
    let value = prop_oneof![4 => "[A-Z0-9]{0,4}", 1 => "[ -~]{0,10}", 1 => "\\PC{0,3}", 1 => Just("1".to_string())];
    let key = prop_oneof![Just("country"), Just("device"), Just("c2"), Just("x")];
    let pair = (key, value.clone(), any::<bool>()).prop_map(|(k, v, quoted)| {
        if quoted {
            format!("\"{k}\":\"{v}\"")
        } else {
            format!("\"{k}\":{v}")
        }
    });
    let dims = prop::collection::vec(pair, 0..4).prop_map(|pairs| format!(",\"dims\":{{{}}}", pairs.join(",")));
    let user = prop_oneof![4 => "u[0-9]{1,6}", 1 => "[ -~]{0,6}", 1 => Just("x".repeat(257))]
        .prop_map(|u| format!(",\"user\":\"{u}\""));
    let members = prop::collection::vec(prop_oneof![dims, user, Just(",\"user\":null".to_string())], 0..3);
    (id, ts, members, 0usize..6, any::<prop::sample::Index>(), any::<u8>()).prop_map(
        |(id, ts, members, how, at, byte)| {
            let line = format!("{{\"item_id\":\"{id}\",\"ts\":{ts}{}}}", members.concat());
            crate::event::spoil(line, how, at, byte)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// The usual line's fast path reads every line as the scan and the walk do: the same event
    /// or the same bad record.
    #[test]
    fn the_usual_line_path_reads_as_the_scan_does(line in near_usual(), f in usual_format()) {
        let with = Parser::new(f.clone());
        prop_assert!(with.plain, "{:?}", f);
        let scanned = Parser::new(f).without_plain().parse(line.as_bytes());
        prop_assert_eq!(&with.parse(line.as_bytes()), &scanned, "{}", line);
        // a source's split of the same path: the borrowed fields where it takes the line (at
        // most two dims), else the rest of the parse gives what the whole parse does
        match with.plain_fields(line.as_bytes()) {
            Some(fields) => {
                let ev = scanned.as_ref().expect("a line the fast path takes is an event");
                prop_assert!(with.format().dims.len() <= PLAIN_DIMS);
                prop_assert_eq!(
                    (fields.item_id, fields.ts, fields.user, fields.dims().to_vec()),
                    (&*ev.item_id, ev.ts, ev.user.as_deref(), ev.dims.iter().map(|d| &**d).collect::<Vec<_>>()),
                    "{}", line
                );
            }
            None => prop_assert_eq!(&with.parse_unusual(line.as_bytes()), &scanned, "{}", line),
        }
    }
}

/// Which formats and lines take the usual line's fast path.
#[test]
fn the_usual_line_path_takes_the_contracts_line_with_dims_and_user() {
    let mut f = Format {
        user: Some(ptr("/user")),
        dims: vec![("country".to_string(), ptr("/dims/country"))],
        ..Format::default()
    };
    let p = Parser::new(f.clone());
    assert!(p.plain);
    let line = br#"{"item_id":"a","ts":7,"dims":{"device":"d","country":"C1"},"user":"u9"}"#;
    let e = p.plain(line).expect("taken");
    assert_eq!(
        (e.item_id.as_ref(), e.ts, e.user.as_deref()),
        ("a", Millis(7), Some("u9"))
    );
    assert_eq!(e.dims.as_slice(), [Cow::Borrowed("C1")]);
    let e = p.plain(br#"{"item_id":"a","ts":7}"#).expect("taken");
    assert_eq!((e.user, e.dims.as_slice()), (None, &[Cow::Borrowed("")][..]));
    for other in [
        &br#"{"item_id":"a","ts":7,"dims":{"country":"C1","country":"C2"}}"#[..],
        br#"{"item_id":"a","ts":7,"user":""}"#,
        br#"{"item_id":"a","ts":7,"dims":{"country":1}}"#,
        br#"{"item_id":"a", "ts":7}"#,
    ] {
        assert!(p.plain(other).is_none(), "{}", String::from_utf8_lossy(other));
    }
    for not_usual in [ptr("/dims"), ptr("/d/country"), ptr("/dims/country/x")] {
        f.dims[0].1 = not_usual;
        assert!(!Parser::new(f.clone()).plain);
    }
    assert!(!Parser::new(bids()).plain);
}

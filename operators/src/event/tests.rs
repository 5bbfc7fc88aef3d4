//! The contract's parse, tested: the plain fast path against the JSON parser, valid and bad
//! records, the time range.

use super::*;
use proptest::prelude::*;

/// `line` as it is (`how` 0 or 1), cut at `at` (2), with a space after it (3) or after its
/// first colon (4), or with the byte at `at` changed to `byte` (5): lines near a valid one, for
/// the property tests of the fast paths.
pub(crate) fn spoil(line: String, how: usize, at: proptest::sample::Index, byte: u8) -> String {
    let i = at.index(line.len().max(1));
    match how {
        0 | 1 => line,
        2 => line[..line.floor_char_boundary(i)].to_string(),
        3 => format!("{line} "),
        4 => line.replacen(':', ": ", 1),
        _ => {
            let mut b = line.into_bytes();
            if let Some(x) = b.get_mut(i) {
                *x = byte;
            }
            String::from_utf8_lossy(&b).into_owned()
        }
    }
}

/// Lines near the plain shape: the plain shape itself with ids and times of every kind,
/// and those lines cut, spaced, doubled or with a byte changed.
fn near_plain() -> impl Strategy<Value = String> {
    let id = prop_oneof![
        "[a-z0-9-]{0,12}",
        "[ -~]{0,8}",
        "\\PC{0,6}",
        Just("x".repeat(257)),
        Just("a\\u0000b".to_string()),
    ];
    let ts = prop_oneof![
        any::<i64>().prop_map(|t| t.to_string()),
        (-300_000_000_000_000i64..300_000_000_000_000).prop_map(|t| t.to_string()),
        "-?0[0-9]{0,3}",
        "[0-9]{17,21}",
        Just("-".to_string()),
        Just("1.5".to_string()),
        Just("\"1970-01-01T00:00:00Z\"".to_string()),
    ];
    // members after `ts`: the fast path's (dims, user) and what it must leave to the parser
    let extra = prop_oneof![
        3 => Just(String::new()),
        2 => Just(",\"dims\":{\"country\":\"C1\"},\"user\":\"u17\"".to_string()),
        1 => Just(",\"user\":\"u\",\"dims\":{}".to_string()),
        1 => Just(",\"dims\":{\"a\":\"b\",\"c\":\"\"}".to_string()),
        1 => "[ -~]{0,8}".prop_map(|v| format!(",\"dims\":{{\"k\":\"{v}\"}}")),
        1 => "\\PC{0,4}".prop_map(|v| format!(",\"user\":\"{v}\"")),
        1 => Just(",\"dims\":{\"a\":1}".to_string()),
        1 => Just(",\"dims\":\"x\"".to_string()),
        1 => Just(",\"dims\":{},\"dims\":{}".to_string()),
        1 => Just(",\"user\":\"a\",\"user\":\"b\"".to_string()),
        1 => Just(",\"user\":null".to_string()),
        1 => Just(",\"other\":1".to_string()),
        1 => Just(",\"dims\":{\"a\":\"b\",}".to_string()),
    ];
    (id, ts, extra, 0usize..6, any::<prop::sample::Index>(), any::<u8>()).prop_map(|(id, ts, extra, how, at, byte)| {
        spoil(format!("{{\"item_id\":\"{id}\",\"ts\":{ts}{extra}}}"), how, at, byte)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]
    /// The plain fast path gives the JSON parser's result on every line it takes.
    #[test]
    fn the_plain_path_agrees_with_the_json_parser(line in near_plain()) {
        if let Some(fast) = parse_plain(line.as_bytes()) {
            prop_assert_eq!(fast, parse_json(&line), "{}", line);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]
    /// On any bytes, also not UTF-8 (the plain path checks only the id as UTF-8),
    /// `parse_event` is the JSON parser's verdict on the line.
    #[test]
    fn parse_event_is_the_json_parsers_verdict_on_any_bytes(
        line in near_plain(),
        at in any::<prop::sample::Index>(),
        byte in 0x80u8..=0xff,
        corrupt in any::<bool>(),
    ) {
        let mut bytes = line.into_bytes();
        if corrupt && !bytes.is_empty() {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let slow = match std::str::from_utf8(&bytes) {
            Ok(text) => parse_json(text),
            Err(e) => Err(BadRecord::NotUtf8(e.valid_up_to())),
        };
        prop_assert_eq!(parse_event(&bytes), slow);
    }
}

#[test]
fn the_plain_path_takes_the_usual_line_only() {
    assert!(parse_plain(br#"{"item_id":"item-7","ts":1767225600001}"#).is_some());
    assert!(parse_plain(br#"{"item_id":"a","ts":-5}"#).is_some());
    // with the contract's dims and a user (which it does not read): still taken
    assert!(parse_plain(br#"{"item_id":"a","ts":1,"dims":{}}"#).is_some());
    assert!(parse_plain(br#"{"item_id":"a","ts":1,"dims":{"country":"C1"},"user":"u9"}"#).is_some());
    for other in [
        r#"{"item_id": "a","ts":1}"#,
        r#"{"ts":1,"item_id":"a"}"#,
        r#"{"item_id":"a\"b","ts":1}"#,
        r#"{"item_id":"a","ts":01}"#,
        r#"{"item_id":"a","ts":1} "#,
        r#"{"item_id":"a","ts":1,"dims":{"a":1}}"#,
        r#"{"item_id":"a","ts":1,"user":null}"#,
        r#"{"item_id":"a","ts":1,"dims":{"a":"\u00e9"}}"#,
        r#"{"item_id":"a","ts":1,"session":"s"}"#,
        r#"{"item_id":"a","ts":1234567890123456789}"#,
        r#"{"item_id":"a","ts":-0}"#,
    ] {
        assert!(parse_plain(other.as_bytes()).is_none(), "{other}");
    }
}

/// An id that is not ASCII is split too (checked as UTF-8), and one that is not UTF-8 is left
/// to the JSON parser.
#[test]
fn an_id_past_ascii_is_split_when_it_is_utf8() {
    let line = r#"{"item_id":"café-😀-and-more-than-sixteen-bytes","ts":5,"dims":{"a":"1"}}"#;
    let split = PlainLine::split(line.as_bytes()).map(|l| (l.item_id, l.ts));
    assert_eq!(split, Some(("café-😀-and-more-than-sixteen-bytes", 5)));
    let mut bad = br#"{"item_id":"caf"#.to_vec();
    bad.extend_from_slice(&[0xc3, b'x']);
    bad.extend_from_slice(br#"","ts":5}"#);
    assert!(PlainLine::split(&bad).is_none());
}

/// A line's split hands over each of its dims' members in line order, and a member refused
/// makes the line not one of the usual shape.
#[test]
fn the_split_hands_over_every_member_in_order() {
    for members in ["", r#""a":"1""#, r#""a":"1","b":"2""#, r#""a":"1","b":"2","c":"3""#] {
        let line = format!(r#"{{"item_id":"i","ts":1,"dims":{{{members}}},"user":"u"}}"#);
        let mut seen = Vec::new();
        let split = PlainLine::split_visiting(line.as_bytes(), |k, v| {
            seen.push(format!("{k}={v}"));
            true
        });
        assert_eq!(
            split.map(|l| (l.item_id, l.ts, l.user)),
            Some(("i", 1, Some("u"))),
            "{line}"
        );
        let want: Vec<String> = members
            .split(',')
            .filter(|m| !m.is_empty())
            .map(|m| m.replace('"', "").replace(':', "="))
            .collect();
        assert_eq!(seen, want, "{line}");
        let refused = PlainLine::split_visiting(line.as_bytes(), |k, _| k != "b");
        assert_eq!(refused.is_none(), members.contains("\"b\""), "{line}");
    }
}

fn ok(line: &str) -> (String, i64) {
    let e = parse_event(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
    (e.item_id.into_owned(), e.ts.0)
}

fn bad(line: &[u8]) -> BadRecord {
    match parse_event(line) {
        Ok(e) => panic!("{:?} parsed as {e:?}", String::from_utf8_lossy(line)),
        Err(e) => e,
    }
}

#[test]
fn valid_events() {
    let table: &[(&str, &str, i64)] = &[
        (
            r#"{"item_id":"video-8841","ts":1713462150123,"dims":{"country":"US"}}"#,
            "video-8841",
            1713462150123,
        ),
        (r#"{"ts":-5,"item_id":"a"}"#, "a", -5),
        (r#"{"item_id":"a","ts":"1970-01-01T00:00:01.0019Z"}"#, "a", 1001),
        (
            r#"{"item_id":"a","ts":"1970-01-01T01:00:00+01:00","dims":null}"#,
            "a",
            0,
        ),
        (
            r#"  {"item_id":"\u00e9t\u00e9","ts":0,"extra":[1,{"x":null}]}  "#,
            "été",
            0,
        ),
        (r#"{"item_id":"\ud83d\ude00","ts":0}"#, "😀", 0),
        (r#"{"item_id":"a","ts":0,"dims":{}}"#, "a", 0),
    ];
    for (line, item, ts) in table {
        assert_eq!(ok(line), (item.to_string(), *ts), "{line}");
    }
    let long = format!(r#"{{"item_id":"{}","ts":0}}"#, "x".repeat(256));
    assert_eq!(ok(&long).0.len(), 256);
}

#[test]
fn bad_records() {
    let long = format!(r#"{{"item_id":"{}","ts":0}}"#, "é".repeat(129));
    let table: &[&[u8]] = &[
        b"",
        b"   ",
        b"\xff{}",
        b"[1,2]",
        b"\"str\"",
        b"{",
        br#"{"item_id":"a","ts":0} x"#,
        br#"{"item_id":"a","ts":0}{"item_id":"a","ts":0}"#,
        br#"{"item_id":"","ts":0}"#,
        br#"{"item_id":5,"ts":0}"#,
        br#"{"item_id":null,"ts":0}"#,
        br#"{"ts":0}"#,
        br#"{"item_id":"a"}"#,
        br#"{"item_id":"a","ts":"1713462150123"}"#,
        br#"{"item_id":"a","ts":1.5}"#,
        br#"{"item_id":"a","ts":1e3}"#,
        br#"{"item_id":"a","ts":true}"#,
        br#"{"item_id":"a","ts":null}"#,
        br#"{"item_id":"a","ts":"2024-04-18T17:42:30"}"#,
        br#"{"item_id":"a","ts":9223372036854775808}"#,
        br#"{"item_id":"a","ts":9000000000000000}"#,
        br#"{"item_id":"\ud800","ts":0}"#,
        br#"{"item_id":"\udc00x","ts":0}"#,
        br#"{"item_id":"a","ts":0,"dims":{"c":1}}"#,
        br#"{"item_id":"a","ts":0,"dims":[]}"#,
        br#"{"item_id":"a","ts":0,"dims":"US"}"#,
        br#"{"item_id":"a","item_id":"b","ts":0}"#,
        br#"{"item_id":"a","ts":0,"x":nope}"#,
        long.as_bytes(),
    ];
    for line in table {
        bad(line);
    }
    assert_eq!(bad(b""), BadRecord::Empty);
    assert_eq!(bad(b"\xff"), BadRecord::NotUtf8(0));
    assert_eq!(bad(b"[]"), BadRecord::NotObject);
    assert_eq!(bad(br#"{"item_id":"","ts":0}"#), BadRecord::EmptyItemId);
    assert_eq!(bad(long.as_bytes()), BadRecord::ItemIdTooLong(258));
    assert_eq!(bad(br#"{"item_id":"a\u0000b","ts":0}"#), BadRecord::NulInItemId);
}

/// The ends of the event time range, exactly and one past, as integers and RFC 3339.
#[test]
fn ts_range_boundaries() {
    let (min, max) = (Millis::MIN_EVENT.0, Millis::MAX_EVENT.0);
    let line = |ts: &str| format!(r#"{{"item_id":"a","ts":{ts}}}"#);
    for (ts, want) in [
        (min.to_string(), min),
        (max.to_string(), max),
        (r#""0000-01-01T00:00:00Z""#.to_string(), min),
        (r#""0000-01-01T00:00:00.000+00:00""#.to_string(), min),
        (r#""0000-01-01T01:00:00+01:00""#.to_string(), min),
        (r#""9999-12-31T23:59:59.999Z""#.to_string(), max),
        (r#""9999-12-31T23:59:59.9999999Z""#.to_string(), max),
        (r#""9999-12-31T22:59:59.999-01:00""#.to_string(), max),
    ] {
        assert_eq!(ok(&line(&ts)).1, want, "{ts}");
    }
    for ts in [
        (min - 1).to_string(),
        (max + 1).to_string(),
        i64::MIN.to_string(),
        i64::MAX.to_string(),
        u64::MAX.to_string(),
        "9000000000000000".to_string(),
        r#""0000-01-01T00:00:00+01:00""#.to_string(),
        r#""0000-01-01T00:59:59.999+01:00""#.to_string(),
        r#""9999-12-31T23:59:59-01:00""#.to_string(),
        r#""9999-12-31T23:00:00.000-01:00""#.to_string(),
    ] {
        assert_eq!(bad(line(&ts).as_bytes()), BadRecord::TsOutOfRange(ts.clone()), "{ts}");
    }
    assert_eq!(
        bad(line("9000000000000000").as_bytes()).to_string(),
        "ts 9000000000000000 is outside years 0000-9999"
    );
    assert_eq!(
        bad(line(r#""9999-12-31T23:59:59-01:00""#).as_bytes()).to_string(),
        r#"ts "9999-12-31T23:59:59-01:00" is outside years 0000-9999"#
    );
    // the other rules still come first: a bad item with an absurd ts is a bad item
    assert_eq!(bad(br#"{"item_id":"","ts":9000000000000000}"#), BadRecord::EmptyItemId);
    assert_eq!(check_event_time(Millis(max)), Ok(Millis(max)));
    assert_eq!(
        check_event_time(Millis::MIN),
        Err(BadRecord::TsOutOfRange(i64::MIN.to_string()))
    );
}

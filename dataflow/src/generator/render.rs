//! Rendering an event as its JSON line, byte for byte as `serde_json` would (without its
//! allocation and formatting machinery: this is on the generator's per-record path).

use hotlist_operators::time::Millis;

/// Appends `{"item_id":"<item, JSON-escaped>","ts":<ts as integer ms>}` to `out`.
pub fn render_json(item: &str, ts: Millis, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"item_id\":");
    write_json_str(item, out);
    out.extend_from_slice(b",\"ts\":");
    write_i64(ts.0, out);
    out.push(b'}');
}

/// Appends `s` as a JSON string literal (escaping as serde_json does).
pub(super) fn write_json_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[from..i]);
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(short);
        }
        from = i + 1;
    }
    out.extend_from_slice(&bytes[from..]);
    out.push(b'"');
}

/// Appends the decimal form of `v`.
pub(super) fn write_i64(v: i64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::super::testing::{spec, stream};
    use super::*;
    use crate::generator::{Generated, GeneratorSpec};
    use hotlist_operators::event::parse_event;
    use hotlist_operators::time::Span;

    #[test]
    fn rendered_events_are_accepted_with_same_item_and_ts() {
        let s = GeneratorSpec {
            jitter: Span::from_millis(100),
            late_fraction: 0.1,
            start: Millis(1_713_462_150_123),
            ..spec(100_000)
        };
        let mut st = stream(&s, 2);
        let mut line = Vec::new();
        for _ in 0..20_000 {
            let Some(Generated::Event { item, ts }) = st.next() else {
                panic!("expected an event")
            };
            line.clear();
            render_json(&item, ts, &mut line);
            let parsed = parse_event(&line).expect("accepted");
            assert_eq!((parsed.item_id.as_ref(), parsed.ts), (item.as_str(), ts));
        }
        for item in [
            "x",
            "quote\"back\\slash",
            "ctl\u{1}\u{8}\u{c}\t\r\n\u{1f}",
            "ünï€😀",
            "\u{7f}",
        ] {
            for ts in [i64::MIN, Millis::MIN_EVENT.0, -1, 0, 42, Millis::MAX_EVENT.0, i64::MAX] {
                line.clear();
                render_json(item, Millis(ts), &mut line);
                let mut want = br#"{"item_id":"#.to_vec();
                serde_json::to_writer(&mut want, item).expect("vec");
                want.extend_from_slice(format!(",\"ts\":{ts}}}").as_bytes());
                assert_eq!(line, want);
                // rendering is exact for any time; the event contract accepts years 0000-9999
                match parse_event(&line) {
                    Ok(parsed) => assert_eq!((parsed.item_id.as_ref(), parsed.ts), (item, Millis(ts))),
                    Err(e) => assert!(!Millis(ts).is_event_time(), "{ts}: {e}"),
                }
            }
        }
        // next_line and next agree.
        let s = GeneratorSpec { bad_fraction: 0.3, ..s };
        let (mut a, mut b) = (stream(&s, 0), stream(&s, 0));
        for _ in 0..2000 {
            let mut from_line = Vec::new();
            assert!(a.next_line(&mut from_line));
            let want = match b.next().expect("endless") {
                Generated::Event { item, ts } => {
                    let mut v = Vec::new();
                    render_json(&item, ts, &mut v);
                    v
                }
                Generated::Bad { raw } => raw,
            };
            assert_eq!(from_line, want);
        }
    }
}

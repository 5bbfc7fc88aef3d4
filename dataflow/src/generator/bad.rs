//! The kinds of bad lines the generator emits (with probability `bad_fraction`), each built
//! around a real item and time, and every one rejected by `hotlist_operators::event::parse_event`.

use super::render::{render_json, write_i64, write_json_str};
use hotlist_operators::time::Millis;

/// The kinds of bad lines, in the order of their 3-bit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BadKind {
    Truncated,
    FloatTs,
    MissingItemId,
    EmptyItemId,
    NotObject,
    InvalidUtf8,
    TrailingGarbage,
    DigitStringTs,
}

impl BadKind {
    pub(super) const ALL: [BadKind; 8] = [
        BadKind::Truncated,
        BadKind::FloatTs,
        BadKind::MissingItemId,
        BadKind::EmptyItemId,
        BadKind::NotObject,
        BadKind::InvalidUtf8,
        BadKind::TrailingGarbage,
        BadKind::DigitStringTs,
    ];
}

/// Appends a bad line of kind `kind` built around a real item and time.
pub(super) fn render_bad(kind: BadKind, item: &str, ts: Millis, cut: u64, out: &mut Vec<u8>) {
    match kind {
        BadKind::Truncated => {
            // Any proper non-empty prefix of an object is malformed JSON.
            let begin = out.len();
            render_json(item, ts, out);
            let len = (out.len() - begin) as u64;
            out.truncate(begin + (1 + cut % (len - 1)) as usize);
        }
        BadKind::FloatTs => {
            out.extend_from_slice(b"{\"item_id\":");
            write_json_str(item, out);
            out.extend_from_slice(b",\"ts\":");
            write_i64(ts.0, out);
            out.extend_from_slice(b".5}");
        }
        BadKind::MissingItemId => {
            out.extend_from_slice(b"{\"item\":");
            write_json_str(item, out);
            out.extend_from_slice(b",\"ts\":");
            write_i64(ts.0, out);
            out.push(b'}');
        }
        BadKind::EmptyItemId => render_json("", ts, out),
        BadKind::NotObject => {
            out.push(b'[');
            write_json_str(item, out);
            out.push(b',');
            write_i64(ts.0, out);
            out.push(b']');
        }
        BadKind::InvalidUtf8 => {
            out.extend_from_slice(b"{\"item_id\":");
            write_json_str(item, out);
            out.pop(); // the closing quote: the bad bytes go inside the string
            out.extend_from_slice(b"\xC3\x28\xFF\",\"ts\":");
            write_i64(ts.0, out);
            out.push(b'}');
        }
        BadKind::TrailingGarbage => {
            render_json(item, ts, out);
            out.extend_from_slice(b" x");
        }
        BadKind::DigitStringTs => {
            out.extend_from_slice(b"{\"item_id\":");
            write_json_str(item, out);
            out.extend_from_slice(b",\"ts\":\"");
            write_i64(ts.0, out);
            out.extend_from_slice(b"\"}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{spec, stream, take};
    use super::*;
    use crate::generator::{Generated, GeneratorSpec, PartitionStream};
    use hotlist_operators::event::parse_event;

    #[test]
    fn bad_lines_are_rejected_and_cover_every_kind() {
        for ts in [0i64, 1_713_462_150_123, -5, i64::MIN, i64::MAX] {
            for item in ["item-0", "item-123456", "a\"b\\c\n"] {
                for kind in BadKind::ALL {
                    for cut in 0..64 {
                        let mut out = Vec::new();
                        render_bad(kind, item, Millis(ts), cut, &mut out);
                        assert!(!out.contains(&b'\n'));
                        assert!(
                            parse_event(&out).is_err(),
                            "{kind:?} accepted: {}",
                            String::from_utf8_lossy(&out)
                        );
                    }
                }
            }
        }
        let s = GeneratorSpec {
            bad_fraction: 1.0,
            ..spec(1000)
        };
        let mut st = stream(&s, 0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let mut out = Vec::new();
            let raw = st.next_raw().expect("endless");
            assert!(raw.bad);
            seen.insert(raw.word & 7);
            PartitionStream::render_raw(&raw, &mut out);
            assert!(parse_event(&out).is_err(), "{}", String::from_utf8_lossy(&out));
        }
        assert_eq!(seen.len(), BadKind::ALL.len());
        let s = GeneratorSpec {
            bad_fraction: 0.1,
            ..spec(1000)
        };
        let bad = take(&mut stream(&s, 0), 100_000)
            .iter()
            .filter(|g| matches!(g, Generated::Bad { .. }))
            .count();
        assert!((9_400..=10_600).contains(&bad), "bad = {bad}");
    }
}

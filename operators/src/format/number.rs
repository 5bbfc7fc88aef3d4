//! The JSON number grammar (RFC 8259), and which integers a capture takes: one copy for the
//! scan and the kept shapes, so that both read a number alike by construction.

/// A JSON number's extent: where it ends, and whether it has a fraction or an exponent.
#[derive(Clone, Copy)]
pub(super) struct Number {
    pub end: usize,
    pub fraction: bool,
    pub exponent: bool,
}

/// Where the integer part of the number at `pos` ends: an optional `-`, then `0` or digits
/// that do not start with `0`. `None`: no number starts at `pos`.
#[inline(always)]
pub(super) fn integer_end(bytes: &[u8], pos: usize) -> Option<usize> {
    let pos = pos + usize::from(bytes.get(pos) == Some(&b'-'));
    match bytes.get(pos)? {
        b'0' => Some(pos + 1),
        b'1'..=b'9' => Some(crate::swar::digits_end(bytes, pos + 1)),
        _ => None,
    }
}

/// The number at `pos`, or `None` where none is (a fraction or exponent with no digits too).
#[inline(always)]
pub(super) fn number_at(bytes: &[u8], pos: usize) -> Option<Number> {
    let mut end = integer_end(bytes, pos)?;
    let fraction = bytes.get(end) == Some(&b'.');
    if fraction {
        end = digits_after(bytes, end + 1)?;
    }
    let exponent = matches!(bytes.get(end), Some(b'e' | b'E'));
    if exponent {
        end += 1;
        end += usize::from(matches!(bytes.get(end), Some(b'+' | b'-')));
        end = digits_after(bytes, end)?;
    }
    Some(Number {
        end,
        fraction,
        exponent,
    })
}

/// The end of the digits at `pos`, at least one.
#[inline(always)]
fn digits_after(bytes: &[u8], pos: usize) -> Option<usize> {
    let end = crate::swar::digits_end(bytes, pos);
    (end > pos).then_some(end)
}

/// The value of a written integer (`integer_end`'s text) when a capture may take it: at most
/// 18 digits (longer ones may overflow an `i64`), and not `-0` (serde_json reads it as a
/// float, so the walk must). `None`: the walk's.
#[inline(always)]
pub(super) fn captured_integer(written: &[u8]) -> Option<i64> {
    let (negative, digits) = match written.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, written),
    };
    if digits.len() > 18 || (negative && digits == b"0") {
        return None;
    }
    let magnitude = crate::swar::digits_value(digits) as i64;
    Some(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// serde_json's verdict on `text` as one number in an array: `None` if it rejects it,
    /// else whether it is a float (a fraction or an exponent) and its `i64` if it is one.
    fn serde_number(text: &str) -> Option<(bool, Option<i64>)> {
        let values: Vec<serde_json::Value> = serde_json::from_str(&format!("[{text}]")).ok()?;
        match values.as_slice() {
            [serde_json::Value::Number(n)] => Some((n.is_f64(), n.as_i64())),
            _ => None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// The grammar takes a text, followed by a value's end, exactly when serde_json reads
        /// it as one number; one with a fraction or exponent is a float to serde_json; and a
        /// capture takes every integer of at most 18 digits with serde_json's value, but `-0`
        /// (a float to serde_json), and no longer one.
        #[test]
        fn the_grammar_reads_numbers_as_serde_json_does(text in "[-+0-9.eE]{0,24}|-?[0-9]{1,22}") {
            let model = serde_number(&text);
            let bytes = format!("{text}]");
            let found = number_at(bytes.as_bytes(), 0).filter(|n| n.end == text.len());
            prop_assert_eq!(found.is_some(), model.is_some(), "{}", text);
            if let (Some(n), Some((float, integer))) = (found, model) {
                if n.fraction || n.exponent {
                    prop_assert!(float, "{}", text);
                } else {
                    prop_assert_eq!(integer_end(bytes.as_bytes(), 0), Some(n.end));
                    // (serde_json reads longer integers as floats past `u64`'s range)
                    let digits = text.trim_start_matches('-').len();
                    let captured = captured_integer(text.as_bytes());
                    if digits <= 18 && text != "-0" {
                        prop_assert!(captured.is_some(), "{}", text);
                        prop_assert_eq!(captured, integer, "{}", text);
                    } else {
                        prop_assert_eq!(captured, None, "{}", text);
                    }
                }
            }
        }
    }
}

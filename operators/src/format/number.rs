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
    /// else whether it is a float (a fraction or an exponent) and its `i64` if it is one. (A
    /// float past `f64`'s range, `1e309`, is a number by the grammar, which is only the
    /// syntax, and serde_json refuses it for its value, before it reads on: such a text is
    /// asked again with its exponent `0`, valid exactly when it is.)
    fn serde_number(text: &str) -> Option<(bool, Option<i64>)> {
        let values: Vec<serde_json::Value> = match serde_json::from_str(&format!("[{text}]")) {
            Ok(values) => values,
            Err(e) if e.to_string().starts_with("number out of range") => {
                return serde_number(&exponent_zero(text)).map(|_| (true, None));
            }
            Err(_) => return None,
        };
        match values.as_slice() {
            [serde_json::Value::Number(n)] => Some((n.is_f64(), n.as_i64())),
            _ => None,
        }
    }

    /// `text` with the digits of its first exponent (after `e` or `E` and a sign) one `0`.
    fn exponent_zero(text: &str) -> String {
        let Some(e) = text.find(['e', 'E']) else {
            return text.to_string();
        };
        let rest = &text[e + 1..];
        let sign = usize::from(rest.starts_with(['+', '-']));
        let digits = rest[sign..].bytes().take_while(u8::is_ascii_digit).count();
        match digits {
            0 => text.to_string(),
            _ => format!("{}0{}", &text[..e + 1 + sign], &rest[sign + digits..]),
        }
    }

    #[test]
    fn a_float_past_f64s_range_is_a_number_by_the_grammar() {
        assert_eq!(exponent_zero("1e310E"), "1e0E");
        assert_eq!(exponent_zero("-2.5E+999"), "-2.5E+0");
        assert_eq!(serde_number("1e309"), Some((true, None)));
        assert_eq!(serde_number("1e310E"), None);
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

//! `article_num`: the last run of ASCII digits in a string (e.g. a URL's article id) as an
//! integer; NULL when there is none or it does not fit an i64.
//!
//! An example UDF built only against `arroyo-udf-plugin` (a cdylib exporting `__run`).

use arroyo_udf_plugin::udf;

#[udf]
fn article_num(url: &str) -> Option<i64> {
    let bytes = url.as_bytes();
    let end = bytes.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = bytes[..end].iter().rposition(|b| !b.is_ascii_digit()).map_or(0, |i| i + 1);
    url[start..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::article_num;

    #[test]
    fn the_last_run_of_digits() {
        assert_eq!(article_num("news.example.com/a/123"), Some(123));
        assert_eq!(article_num("/2024/05/story-98765?x"), Some(98765));
        assert_eq!(article_num("42"), Some(42));
        assert_eq!(article_num("007x"), Some(7));
    }

    #[test]
    fn none_without_digits_or_on_overflow() {
        assert_eq!(article_num("news.example.com/a/b"), None);
        assert_eq!(article_num(""), None);
        assert_eq!(article_num("/a/9223372036854775807"), Some(i64::MAX));
        assert_eq!(article_num("/a/9223372036854775808"), None);
    }
}

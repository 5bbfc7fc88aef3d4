//! `is_human`: 1 for a user agent that looks human, 0 for one that contains "bot", "crawler" or
//! "spider" (ASCII case-insensitive); a missing user agent (NULL) counts as human. An integer,
//! not a `bool`: arroyo-udf-plugin 0.2's macro cannot build a boolean result.
//!
//! An example UDF built only against `arroyo-udf-plugin` (a cdylib exporting `__run`).

use arroyo_udf_plugin::udf;

#[udf]
fn is_human(ua: Option<&str>) -> i64 {
    let Some(ua) = ua else { return 1 };
    let ua = ua.to_ascii_lowercase();
    if ["bot", "crawler", "spider"].iter().any(|w| ua.contains(w)) {
        0
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::is_human;

    #[test]
    fn bots_crawlers_and_spiders_are_not_human() {
        assert_eq!(is_human(Some("Mozilla/5.0 (compatible; Googlebot/2.1)")), 0);
        assert_eq!(is_human(Some("SomeCRAWLER 1.0")), 0);
        assert_eq!(is_human(Some("Baiduspider")), 0);
    }

    #[test]
    fn browsers_and_missing_agents_are_human() {
        assert_eq!(is_human(Some("Mozilla/5.0 (X11; Linux x86_64) Firefox/125.0")), 1);
        assert_eq!(is_human(Some("")), 1);
        assert_eq!(is_human(None), 1);
    }
}

//! `normalize_url`: a URL reduced to host and path, so the same page counts once: no scheme
//! (`http://`, `https://`), the host lower-cased and without a leading `www.`, no query
//! (`?...`) or fragment (`#...`), no trailing slashes (ASCII only).
//!
//! An example UDF built only against `arroyo-udf-plugin` (a cdylib exporting `__run`).

use arroyo_udf_plugin::udf;

#[udf]
fn normalize_url(url: &str) -> String {
    let url = url.trim();
    // the query and fragment go first: a `/` or `://` inside them is not part of the path
    let url = url.split(['?', '#']).next().unwrap_or("");
    let rest = match url.find("://") {
        Some(i) if url[..i].eq_ignore_ascii_case("http") || url[..i].eq_ignore_ascii_case("https") => &url[i + 3..],
        _ => url,
    };
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = host.to_ascii_lowercase();
    let host = host.strip_prefix("www.").unwrap_or(&host);
    let path = path.trim_end_matches('/');
    format!("{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::normalize_url;

    #[test]
    fn the_example_from_the_brief() {
        assert_eq!(normalize_url("HTTPS://www.News.Example.com/a/123/?utm=x#top"), "news.example.com/a/123");
    }

    #[test]
    fn scheme_www_query_fragment_and_slashes_go() {
        assert_eq!(normalize_url("http://example.com/"), "example.com");
        assert_eq!(normalize_url("https://WWW.example.com"), "example.com");
        assert_eq!(normalize_url("example.com/a//"), "example.com/a");
        assert_eq!(normalize_url("example.com/a#x/y"), "example.com/a");
        assert_eq!(normalize_url("example.com?q=http://other/"), "example.com");
    }

    #[test]
    fn the_path_keeps_its_case() {
        assert_eq!(normalize_url("Example.COM/Path/Ab"), "example.com/Path/Ab");
    }

    #[test]
    fn www_only_as_a_leading_label() {
        assert_eq!(normalize_url("https://wwwx.example.com/a"), "wwwx.example.com/a");
        assert_eq!(normalize_url("https://a.www.example.com"), "a.www.example.com");
    }
}

//! `GET /`: the live page (static/index.html, plain HTML and JavaScript, no build step), with a
//! Content-Security-Policy that allows exactly its own inline `<script>` and `<style>`.
//!
//! The policy names each inline block by its SHA-256 hash, computed from the page at first use:
//! editing the page needs no policy edit. Anything else (an injected script, an inline event
//! handler or `style=` attribute, a script from elsewhere) is refused by the browser. The page
//! fetches only its own origin's API (`connect-src 'self'`).

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use base64::Engine;
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// The page.
pub const PAGE: &str = include_str!("../static/index.html");

/// The page's `Content-Security-Policy`.
pub static PAGE_CSP: LazyLock<String> = LazyLock::new(|| csp_for(PAGE));

/// `GET /`.
pub async fn page() -> Response {
    let mut r = Response::new(Body::from(PAGE));
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(csp) = HeaderValue::from_str(&PAGE_CSP) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    r
}

/// The policy for `html`: its inline `<script>` and `<style>` blocks by hash, nothing else
/// but fetches to the same origin.
pub fn csp_for(html: &str) -> String {
    let scripts = inline_blocks(html, "script")
        .map(source_hash)
        .collect::<Vec<_>>()
        .join(" ");
    let styles = inline_blocks(html, "style")
        .map(source_hash)
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "default-src 'none'; script-src {scripts}; style-src {styles}; connect-src 'self'; img-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// The contents of every `<tag>…</tag>` element written without attributes, exactly as the
/// browser hashes them.
fn inline_blocks<'a>(html: &'a str, tag: &str) -> impl Iterator<Item = &'a str> + 'a {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut rest = html;
    std::iter::from_fn(move || {
        let start = rest.find(&open)? + open.len();
        let len = rest[start..].find(&close)?;
        let block = &rest[start..start + len];
        rest = &rest[start + len + close.len()..];
        Some(block)
    })
}

/// A CSP hash source: `'sha256-<base64 of the SHA-256 of the UTF-8 text>'`.
fn source_hash(block: &str) -> String {
    let digest = Sha256::digest(block.as_bytes());
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash is the one browsers compute (the example of the CSP Level 3 specification's
    /// "script-src 'sha256-…'" section: `alert('Hello, world.');`).
    #[test]
    fn hash_matches_the_csp_specification_example() {
        assert_eq!(
            source_hash("alert('Hello, world.');"),
            "'sha256-qznLcsROx4GACP2dm0UCKCzCG+HiZ1guq6ZZDob/Tng='"
        );
    }

    /// The page's policy allows its one script and one style block and nothing inline besides;
    /// the page has no attributes the policy would block.
    #[test]
    fn page_policy_covers_its_inline_blocks() {
        assert_eq!(inline_blocks(PAGE, "script").count(), 1);
        assert_eq!(inline_blocks(PAGE, "style").count(), 1);
        assert_eq!(
            PAGE.matches("<script").count(),
            1,
            "every script is a plain <script> block"
        );
        assert_eq!(
            PAGE.matches("<style").count(),
            1,
            "every style is a plain <style> block"
        );
        assert!(
            !PAGE.contains(" style="),
            "inline style attributes are blocked by the policy"
        );
        assert!(
            !PAGE.to_ascii_lowercase().contains(" onload=") && !PAGE.to_ascii_lowercase().contains(" onclick="),
            "inline event handlers are blocked by the policy"
        );
        let csp = csp_for(PAGE);
        assert_eq!(csp.matches("'sha256-").count(), 2, "{csp}");
        assert!(csp.starts_with("default-src 'none'; script-src 'sha256-"), "{csp}");
    }
}

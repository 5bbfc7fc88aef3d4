//! `identity`: returns its argument unchanged; for measuring the overhead of the UDF call
//! itself (the FFI round trip of a batch).
//!
//! An example UDF built only against `arroyo-udf-plugin` (a cdylib exporting `__run`).

use arroyo_udf_plugin::udf;

#[udf]
fn identity(x: &str) -> String {
    x.to_string()
}

#[cfg(test)]
mod tests {
    use super::identity;

    #[test]
    fn returns_its_argument() {
        assert_eq!(identity(""), "");
        assert_eq!(identity("news.example.com/a/123"), "news.example.com/a/123");
        assert_eq!(identity("ünïcødé"), "ünïcødé");
    }
}

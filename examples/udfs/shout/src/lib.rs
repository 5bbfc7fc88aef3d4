//! `shout`: its argument upper-cased, but it panics when the argument contains "boom"; for
//! testing that a panicking UDF dead-letters its record instead of failing the job.
//!
//! An example UDF built only against `arroyo-udf-plugin` (a cdylib exporting `__run`).

use arroyo_udf_plugin::udf;

#[udf]
fn shout(x: &str) -> String {
    if x.contains("boom") {
        panic!("shout: boom in {x}");
    }
    x.to_uppercase()
}

#[cfg(test)]
mod tests {
    use super::shout;

    #[test]
    fn upper_cases() {
        assert_eq!(shout("hello, world"), "HELLO, WORLD");
        assert_eq!(shout(""), "");
    }

    #[test]
    #[should_panic(expected = "shout: boom in a boom b")]
    fn panics_on_boom() {
        shout("a boom b");
    }
}

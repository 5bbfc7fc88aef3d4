//! `country_of`: a stand-in geo lookup: the first octet of a dotted IPv4 address, mod 4, picks
//! one of "NL", "US", "JP", "BR"; a first octet that is not a number 0..=255 gives "ZZ".
//!
//! An example UDF built only against `arroyo-udf-plugin` (a cdylib exporting `__run`).

use arroyo_udf_plugin::udf;

#[udf]
fn country_of(ip: &str) -> String {
    const COUNTRIES: [&str; 4] = ["NL", "US", "JP", "BR"];
    let first = ip.trim().split('.').next().unwrap_or("");
    match first.parse::<u8>() {
        Ok(octet) if first.bytes().all(|b| b.is_ascii_digit()) => COUNTRIES[usize::from(octet % 4)].to_string(),
        _ => "ZZ".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::country_of;

    #[test]
    fn the_first_octet_mod_4_picks_the_country() {
        assert_eq!(country_of("8.8.8.8"), "NL");
        assert_eq!(country_of("1.2.3.4"), "US");
        assert_eq!(country_of("10.0.0.1"), "JP");
        assert_eq!(country_of("255.255.255.255"), "BR");
    }

    #[test]
    fn an_unparsable_first_octet_is_zz() {
        assert_eq!(country_of(""), "ZZ");
        assert_eq!(country_of("abc.1.2.3"), "ZZ");
        assert_eq!(country_of("256.1.1.1"), "ZZ");
        assert_eq!(country_of("+1.2.3.4"), "ZZ");
        assert_eq!(country_of("::1"), "ZZ");
    }
}

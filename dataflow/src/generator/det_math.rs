//! Deterministic `ln`, `exp` and Zipf weights from basic IEEE-754 operations only, so the
//! generator's alias table is bit-identical on every platform (libm's `pow`, `exp` and `ln` may
//! differ in the last bit between systems).

/// `1 / (rank + 1)^s` with basic IEEE-754 operations only, so it is bit-identical on every
/// platform (libm's `pow` may differ in the last bit between systems). Relative error ~1e-15.
pub(super) fn zipf_weight(rank: u32, s: f64) -> f64 {
    if s == 0.0 || rank == 0 {
        return 1.0;
    }
    exp_det(-s * ln_det(f64::from(rank) + 1.0))
}

/// Natural logarithm of a finite `x >= 1`, deterministically.
fn ln_det(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    // ln m = 2 atanh(t), t = (m-1)/(m+1), |t| <= 0.172: 14 odd terms reach f64 precision.
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let mut series = 0.0;
    for k in (0..14).rev() {
        series = series * t2 + 1.0 / f64::from(2 * k + 1);
    }
    e as f64 * std::f64::consts::LN_2 + 2.0 * t * series
}

/// `e^y` for a finite `y <= 0`, deterministically (0 below the normal range).
fn exp_det(y: f64) -> f64 {
    if y.is_nan() || y < -708.0 {
        return 0.0;
    }
    // Cody–Waite reduction: y = k ln2 + r, |r| <= ln2/2.
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let k = (y / std::f64::consts::LN_2).round();
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let mut series = 1.0;
    for i in (1..=20).rev() {
        series = 1.0 + series * r / f64::from(i);
    }
    let k = k as i64; // in [-1022, 0] given the bound above
    series * f64::from_bits(((k + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::MAX_ITEMS;

    #[test]
    fn deterministic_weights_match_libm() {
        for s in [0.0, 0.5, 1.0, 1.1, 2.0, 3.7] {
            for rank in [0u32, 1, 2, 9, 99, 12_345, 999_999, MAX_ITEMS - 1] {
                let want = (f64::from(rank) + 1.0).powf(-s);
                let got = zipf_weight(rank, s);
                assert!((got - want).abs() <= want * 1e-13, "s {s} rank {rank}: {got} vs {want}");
            }
        }
        assert_eq!(zipf_weight(MAX_ITEMS - 1, 1e6), 0.0);
    }
}

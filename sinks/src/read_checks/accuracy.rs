//! What every store checks in what a list says it is: `exact`, `error_bound`, the sketch check
//! and the certificate, as the stores hold them ([`RawAccuracy`]) and as the job can write them.

use super::list::ListAt;
use hotlist_operators::certify::Certificate;
use hotlist_operators::record::{ListState, SketchCheck};
use hotlist_operators::window::MAX_K;

/// The names of a stored sketch check's four numbers, in [`RawAccuracy::sketch`] order: the
/// columns of `topk_instances` and the fields of the Redis meta hash.
pub(crate) const SKETCH_FIELDS: [&str; 4] = [
    "sketch_found",
    "sketch_of",
    "sketch_max_overcount",
    "sketch_total_overcount",
];

/// The names of a stored certificate's three numbers, in [`RawAccuracy::certificate`] order:
/// the columns of `topk_instances` and the fields of the Redis meta hash.
pub(crate) const CERTIFICATE_FIELDS: [&str; 3] = ["certificate_threshold", "certificate_counted", "certificate_passes"];

/// A list's accuracy as stored, decoded to plain numbers but not yet checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawAccuracy {
    /// `exact`: 1 (exact) or 0 (approximate), as SQLite stores it.
    pub exact: i64,
    /// `error_bound`.
    pub error_bound: i64,
    /// The sketch check's numbers ([`SKETCH_FIELDS`]), each `None` when NULL or absent: all or
    /// none of them are stored.
    pub sketch: [Option<i64>; 4],
    /// The certificate's numbers ([`CERTIFICATE_FIELDS`]), each `None` when NULL or absent: all
    /// or none of them are stored.
    pub certificate: [Option<i64>; 3],
}

impl RawAccuracy {
    /// An exact list without a sketch check or a certificate: what every list of a store
    /// written before lists said what they are is.
    pub const EXACT: RawAccuracy = RawAccuracy {
        exact: 1,
        error_bound: 0,
        sketch: [None; 4],
        certificate: [None; 3],
    };

    /// A list's accuracy as the stores write it; `Err((field, value))` names a number that does
    /// not fit their signed 64-bit columns.
    pub fn of(
        exact: bool,
        error_bound: u64,
        check: Option<SketchCheck>,
        certificate: Option<Certificate>,
    ) -> Result<RawAccuracy, (&'static str, u64)> {
        let fits = |v: u64, what: &'static str| i64::try_from(v).map_err(|_| (what, v));
        let sketch = match check {
            None => [None; 4],
            Some(c) => [
                Some(i64::from(c.found)),
                Some(i64::from(c.of)),
                Some(fits(c.max_overcount, SKETCH_FIELDS[2])?),
                Some(fits(c.total_overcount, SKETCH_FIELDS[3])?),
            ],
        };
        let certificate = match certificate {
            None => [None; 3],
            Some(c) => [
                Some(fits(c.threshold, CERTIFICATE_FIELDS[0])?),
                Some(fits(c.counted, CERTIFICATE_FIELDS[1])?),
                Some(i64::from(c.passes)),
            ],
        };
        Ok(RawAccuracy {
            exact: i64::from(exact),
            error_bound: fits(error_bound, "error_bound")?,
            sketch,
            certificate,
        })
    }
}

/// The checked accuracy of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Accuracy {
    /// Whether every count is exact.
    pub exact: bool,
    /// The largest possible over-count of any count in the list.
    pub error_bound: u64,
    /// How a sketch's list compared with this one, if it was compared.
    pub sketch_check: Option<SketchCheck>,
    /// What proved a sketch window's sealed list exact, if a replay did.
    pub certificate: Option<Certificate>,
}

/// Checks a list's accuracy: `exact` is 0 or 1, `error_bound` is not negative and 0 for an
/// exact list, the sketch check is whole or absent, with `found ≤ of ≤ k` (the window's
/// checked `k`, [`MAX_K`] when it is not recorded) and over-counts that are not negative, and
/// the certificate is whole or absent, on an exact list in state `state` final only, with a
/// threshold and passes of at least 1 and a count that is not negative.
pub(crate) fn accuracy(
    at: &ListAt<'_>,
    raw: &RawAccuracy,
    k: Option<usize>,
    state: ListState,
) -> Result<Accuracy, String> {
    let exact = match raw.exact {
        0 => false,
        1 => true,
        v => return Err(format!("{at}: exact {v} is not 0 or 1")),
    };
    let error_bound =
        u64::try_from(raw.error_bound).map_err(|_| format!("{at}: error_bound {} is negative", raw.error_bound))?;
    if exact && error_bound != 0 {
        return Err(format!("{at}: an exact list has error_bound {error_bound} (must be 0)"));
    }
    let sketch_check = match raw.sketch {
        [None, None, None, None] => None,
        [Some(found), Some(of), Some(max), Some(total)] => Some(sketch_check(at, [found, of, max, total], k)?),
        partial => {
            let missing: Vec<&str> = SKETCH_FIELDS
                .iter()
                .zip(partial)
                .filter(|(_, v)| v.is_none())
                .map(|(name, _)| *name)
                .collect();
            return Err(format!("{at}: the sketch check lacks {}", missing.join(", ")));
        }
    };
    let certificate = match raw.certificate {
        [None, None, None] => None,
        [Some(threshold), Some(counted), Some(passes)] => Some(certificate(at, [threshold, counted, passes])?),
        partial => {
            let missing: Vec<&str> = CERTIFICATE_FIELDS
                .iter()
                .zip(partial)
                .filter(|(_, v)| v.is_none())
                .map(|(name, _)| *name)
                .collect();
            return Err(format!("{at}: the certificate lacks {}", missing.join(", ")));
        }
    };
    if certificate.is_some() {
        if !exact {
            return Err(format!(
                "{at}: an approximate list has a certificate (only an exact list can)"
            ));
        }
        if state != ListState::Final {
            return Err(format!(
                "{at}: a list in state {} has a certificate (only a final list can)",
                state.as_str()
            ));
        }
    }
    Ok(Accuracy {
        exact,
        error_bound,
        sketch_check,
        certificate,
    })
}

/// A whole certificate's numbers (threshold, counted, passes), checked: a threshold and passes
/// of at least 1, a count that is not negative.
fn certificate(at: &ListAt<'_>, [threshold, counted, passes]: [i64; 3]) -> Result<Certificate, String> {
    let [t, c, p] = CERTIFICATE_FIELDS;
    let threshold = u64::try_from(threshold)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| format!("{at}: {t} {threshold} is not positive"))?;
    let counted = u64::try_from(counted).map_err(|_| format!("{at}: {c} {counted} is negative"))?;
    let passes = u32::try_from(passes)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| format!("{at}: {p} {passes} is out of range (1 to {})", u32::MAX))?;
    Ok(Certificate {
        threshold,
        counted,
        passes,
    })
}

/// A whole sketch check's numbers (found, of, max_overcount, total_overcount), checked.
fn sketch_check(at: &ListAt<'_>, [found, of, max, total]: [i64; 4], k: Option<usize>) -> Result<SketchCheck, String> {
    let count = |v: i64, what: &str| u32::try_from(v).map_err(|_| format!("{at}: {what} {v} is out of range"));
    let (found_n, of_n) = (count(found, "sketch_found")?, count(of, "sketch_of")?);
    if found_n > of_n {
        return Err(format!("{at}: sketch_found {found} exceeds sketch_of {of}"));
    }
    match k {
        Some(k) if of_n as usize > k => return Err(format!("{at}: sketch_of {of} exceeds the window's k ({k})")),
        _ if of_n as usize > MAX_K => return Err(format!("{at}: sketch_of {of} exceeds the largest k ({MAX_K})")),
        _ => {}
    }
    let overcount = |v: i64, what: &str| u64::try_from(v).map_err(|_| format!("{at}: {what} {v} is negative"));
    Ok(SketchCheck {
        found: found_n,
        of: of_n,
        max_overcount: overcount(max, "sketch_max_overcount")?,
        total_overcount: overcount(total, "sketch_total_overcount")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_checks::list::tests::AT;

    #[test]
    fn accuracy_is_what_the_job_can_write() {
        let raw = |exact, error_bound, sketch| RawAccuracy {
            exact,
            error_bound,
            sketch,
            certificate: [None; 3],
        };
        let closed = ListState::Closed;
        let whole = [Some(2), Some(3), Some(5), Some(9)];
        let got = accuracy(&AT, &raw(0, 37, whole), Some(3), closed).unwrap();
        let check = SketchCheck {
            found: 2,
            of: 3,
            max_overcount: 5,
            total_overcount: 9,
        };
        assert_eq!(
            got,
            Accuracy {
                exact: false,
                error_bound: 37,
                sketch_check: Some(check),
                certificate: None,
            }
        );
        assert_eq!(RawAccuracy::of(false, 37, Some(check), None), Ok(raw(0, 37, whole)));
        assert_eq!(
            accuracy(&AT, &RawAccuracy::EXACT, None, closed).unwrap(),
            Accuracy {
                exact: true,
                error_bound: 0,
                sketch_check: None,
                certificate: None,
            }
        );
        assert!(
            accuracy(&AT, &raw(1, 0, whole), Some(3), closed).is_ok(),
            "an exact list with a check"
        );
        assert!(
            accuracy(&AT, &raw(0, 0, [None; 4]), Some(3), closed).is_ok(),
            "a sketch of no events"
        );
        let cases: [(RawAccuracy, Option<usize>, &str); 10] = [
            (raw(2, 0, [None; 4]), None, "exact 2 is not 0 or 1"),
            (raw(0, -1, [None; 4]), None, "error_bound -1 is negative"),
            (
                raw(1, 5, [None; 4]),
                None,
                "an exact list has error_bound 5 (must be 0)",
            ),
            (
                raw(0, 1, [Some(4), Some(3), Some(0), Some(0)]),
                None,
                "sketch_found 4 exceeds sketch_of 3",
            ),
            (
                raw(0, 1, [Some(2), Some(4), Some(0), Some(0)]),
                Some(3),
                "sketch_of 4 exceeds the window's k (3)",
            ),
            (
                raw(0, 1, [Some(0), Some(1 << 21), Some(0), Some(0)]),
                None,
                "sketch_of 2097152 exceeds the largest k (1000000)",
            ),
            (
                raw(0, 1, [Some(-1), Some(3), Some(0), Some(0)]),
                None,
                "sketch_found -1 is out of range",
            ),
            (
                raw(0, 1, [Some(1), Some(1 << 40), Some(0), Some(0)]),
                None,
                "sketch_of 1099511627776 is out of range",
            ),
            (
                raw(0, 1, [Some(1), Some(3), Some(0), Some(-9)]),
                None,
                "sketch_total_overcount -9 is negative",
            ),
            (
                raw(0, 1, [Some(1), None, None, Some(9)]),
                None,
                "the sketch check lacks sketch_of, sketch_max_overcount",
            ),
        ];
        for (raw, k, want) in cases {
            let e = accuracy(&AT, &raw, k, closed).err().unwrap();
            assert_eq!(e, format!("{AT}: {want}"), "{raw:?}");
        }
        assert_eq!(
            RawAccuracy::of(false, u64::MAX, None, None),
            Err(("error_bound", u64::MAX))
        );
    }

    #[test]
    fn a_certificate_is_whole_and_on_an_exact_final_list_only() {
        let certified = |exact, certificate| RawAccuracy {
            exact,
            error_bound: 0,
            sketch: [None; 4],
            certificate,
        };
        let cert = Certificate {
            threshold: 40,
            counted: 17,
            passes: 2,
        };
        let whole = [Some(40), Some(17), Some(2)];
        assert_eq!(RawAccuracy::of(true, 0, None, Some(cert)), Ok(certified(1, whole)));
        let got = accuracy(&AT, &certified(1, whole), Some(3), ListState::Final).unwrap();
        assert_eq!(got.certificate, Some(cert));
        assert_eq!((got.exact, got.error_bound, got.sketch_check), (true, 0, None));
        let huge = Certificate {
            threshold: u64::MAX,
            ..cert
        };
        assert_eq!(
            RawAccuracy::of(true, 0, None, Some(huge)),
            Err(("certificate_threshold", u64::MAX))
        );
        let cases: [(RawAccuracy, ListState, &str); 7] = [
            (
                certified(0, whole),
                ListState::Final,
                "an approximate list has a certificate (only an exact list can)",
            ),
            (
                certified(1, whole),
                ListState::Closed,
                "a list in state closed has a certificate (only a final list can)",
            ),
            (
                certified(1, [Some(0), Some(17), Some(2)]),
                ListState::Final,
                "certificate_threshold 0 is not positive",
            ),
            (
                certified(1, [Some(40), Some(-1), Some(2)]),
                ListState::Final,
                "certificate_counted -1 is negative",
            ),
            (
                certified(1, [Some(40), Some(17), Some(0)]),
                ListState::Final,
                "certificate_passes 0 is out of range (1 to 4294967295)",
            ),
            (
                certified(1, [Some(40), Some(17), Some(1 << 40)]),
                ListState::Final,
                "certificate_passes 1099511627776 is out of range (1 to 4294967295)",
            ),
            (
                certified(1, [Some(40), None, None]),
                ListState::Final,
                "the certificate lacks certificate_counted, certificate_passes",
            ),
        ];
        for (raw, state, want) in cases {
            let e = accuracy(&AT, &raw, None, state).err().unwrap();
            assert_eq!(e, format!("{AT}: {want}"), "{raw:?}");
        }
    }
}

//! A window's `mode` and `[window.sketch]`: how it counts, checked against its `k`.

use super::raw::{RawExactAtSeal, RawSketch, RawWindow};
use anyhow::{anyhow, bail, Result};
use hotlist_operators::counting::{Algorithm, Counting, SketchSpec};
use hotlist_operators::replay_budget::{ReplayBudget, DEFAULT_MAX_KEY_RANGES, DEFAULT_MAX_REPLAY_KEYS};
use hotlist_operators::sketch::MAX_CANDIDATES;
use hotlist_operators::window::WindowSpec;

/// Default ε: counts high by at most 0.01 % of the instance's events.
pub const DEFAULT_EPSILON: f64 = 0.0001;
/// Default δ.
pub const DEFAULT_DELTA: f64 = 0.001;
/// Default `max_items` of an `auto` window.
pub const DEFAULT_MAX_ITEMS: u64 = 5_000_000;

/// Each window's counting, in window order (the default windows count exactly).
pub fn validate_counting(raw: &[RawWindow], windows: &[WindowSpec]) -> Result<Vec<Counting>> {
    if raw.is_empty() {
        return Ok(vec![Counting::Exact; windows.len()]);
    }
    raw.iter().zip(windows).map(|(r, w)| window_counting(r, w)).collect()
}

fn window_counting(raw: &RawWindow, w: &WindowSpec) -> Result<Counting> {
    let at = |key: &str| format!("window {:?}: {key}", w.name);
    let mode = raw.mode.as_deref().unwrap_or("exact");
    if raw.max_items.is_some() && mode != "auto" {
        bail!(
            "{}: only for mode = \"auto\" (this window's mode is {mode:?})",
            at("max_items")
        );
    }
    let exact_at_seal = raw.exact_at_seal.unwrap_or(false);
    if exact_at_seal && !matches!(mode, "sketch" | "auto") {
        bail!(
            "{}: only for mode = \"sketch\" or \"auto\" (this window's mode is {mode:?}; an exact list needs no replay)",
            at("exact_at_seal")
        );
    }
    if mode == "exact" {
        if raw.sketch.is_some() {
            bail!(
                "{}: set, but the window's mode is \"exact\" (use mode = \"sketch\", \"auto\" or \"both\")",
                at("sketch")
            );
        }
        return Ok(Counting::Exact);
    }
    let mut spec = sketch_spec(raw.sketch.as_ref().unwrap_or(&RawSketch::default()), w, &at)?;
    if exact_at_seal && spec.algorithm != Algorithm::Cms {
        bail!(
            "{}: needs algorithm = \"cms\" (HeavyKeeper may under-count, so its estimates cannot bound a replay)",
            at("exact_at_seal")
        );
    }
    if exact_at_seal && spec.conservative {
        bail!(
            "{}: needs sketch.conservative = false (a conservative table depends on the order events arrive, and a replay's memory budget must not)",
            at("exact_at_seal")
        );
    }
    spec.exact_at_seal = exact_at_seal;
    Ok(match mode {
        "sketch" => Counting::Sketch(spec),
        "both" => Counting::Both(spec),
        "auto" => {
            let max_items = raw.max_items.unwrap_or(DEFAULT_MAX_ITEMS);
            if max_items == 0 {
                bail!("{}: must be positive", at("max_items"));
            }
            Counting::Auto {
                sketch: spec,
                max_items,
            }
        }
        other => bail!(
            "{}: unknown mode {other:?} (expected \"exact\", \"sketch\", \"auto\" or \"both\")",
            at("mode")
        ),
    })
}

/// `[exact_at_seal]`: the replays' memory budget (docs/exact-at-seal.md, "Memory").
pub fn validate_replay_budget(raw: Option<&RawExactAtSeal>) -> Result<ReplayBudget> {
    let keys = raw
        .and_then(|r| r.max_replay_keys)
        .unwrap_or(DEFAULT_MAX_REPLAY_KEYS as i64);
    let ranges = raw
        .and_then(|r| r.max_key_ranges)
        .unwrap_or(i64::from(DEFAULT_MAX_KEY_RANGES));
    let keys =
        usize::try_from(keys).map_err(|_| anyhow!("exact_at_seal.max_replay_keys: must be positive, got {keys}"))?;
    // out of u32's range: checked (and named) like any other bad value
    let ranges = u32::try_from(ranges).unwrap_or(u32::MAX);
    ReplayBudget::new(keys, ranges).map_err(|e| anyhow!("exact_at_seal.{e}"))
}

fn sketch_spec(raw: &RawSketch, w: &WindowSpec, at: &dyn Fn(&str) -> String) -> Result<SketchSpec> {
    let algorithm = match raw.algorithm.as_deref().unwrap_or("cms") {
        "cms" => Algorithm::Cms,
        "heavykeeper" => Algorithm::HeavyKeeper,
        other => bail!(
            "{}: unknown algorithm {other:?} (expected \"cms\" or \"heavykeeper\")",
            at("sketch.algorithm")
        ),
    };
    let conservative = raw.conservative.unwrap_or(false);
    if conservative && algorithm == Algorithm::HeavyKeeper {
        bail!("{}: only for algorithm = \"cms\"", at("sketch.conservative"));
    }
    let candidates = raw
        .candidates
        .unwrap_or(w.k.saturating_mul(4))
        .min(MAX_CANDIDATES.max(w.k));
    if candidates < w.k || candidates > MAX_CANDIDATES {
        bail!(
            "{}: {candidates} is not in {}..={MAX_CANDIDATES} (at least the window's k)",
            at("sketch.candidates"),
            w.k
        );
    }
    let spec = SketchSpec {
        algorithm,
        epsilon: raw.epsilon.unwrap_or(DEFAULT_EPSILON),
        delta: raw.delta.unwrap_or(DEFAULT_DELTA),
        candidates,
        conservative,
        exact_at_seal: false,
    };
    spec.new_sketch().map_err(|e| anyhow!("{}: {e}", at("sketch")))?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use crate::config::{parse, Overrides};
    use hotlist_operators::counting::{Algorithm, Counting};

    fn windows(window: &str) -> anyhow::Result<Vec<Counting>> {
        let toml =
            format!("[source]\nkind = \"generator\"\n[[window]]\nname = \"1d\"\nsize = \"1d\"\nk = 10\n{window}");
        parse(&toml, &Overrides::default()).map(|p| p.countings())
    }

    fn err(window: &str) -> String {
        format!("{:#}", windows(window).expect_err("refused"))
    }

    #[test]
    fn modes_and_their_defaults() {
        assert_eq!(windows("").unwrap(), [Counting::Exact]);
        let Counting::Sketch(s) = windows("mode = \"sketch\"").unwrap()[0] else {
            panic!("sketch")
        };
        assert_eq!(
            (s.epsilon, s.delta, s.candidates, s.algorithm),
            (0.0001, 0.001, 40, Algorithm::Cms)
        );
        let Counting::Auto { max_items, sketch } = windows("mode = \"auto\"\nmax_items = 7").unwrap()[0] else {
            panic!("auto")
        };
        assert_eq!((max_items, sketch.candidates), (7, 40));
        let both = "mode = \"both\"\n[window.sketch]\nalgorithm = \"heavykeeper\"\ncandidates = 12\nepsilon = 0.01";
        let Counting::Both(s) = windows(both).unwrap()[0] else {
            panic!("both")
        };
        assert_eq!(
            (s.algorithm, s.candidates, s.epsilon),
            (Algorithm::HeavyKeeper, 12, 0.01)
        );
    }

    #[test]
    fn exact_at_seal_is_for_count_min_sketch_windows_of_a_replayable_source() {
        let w = windows("mode = \"auto\"\nexact_at_seal = true").expect("auto");
        assert!(w[0].exact_at_seal());
        assert!(!windows("mode = \"sketch\"").expect("sketch")[0].exact_at_seal());
        let stdin = "[source]\nkind = \"file\"\npath = \"-\"\n[[window]]\nname = \"1d\"\nsize = \"1d\"\nmode = \"sketch\"\nexact_at_seal = true";
        let err = format!("{:#}", parse(stdin, &Overrides::default()).expect_err("stdin"));
        assert!(err.contains("standard input cannot be replayed"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }

    #[test]
    fn bad_settings_are_one_clear_line() {
        let cases = [
            ("mode = \"fast\"", "window \"1d\": mode: unknown mode \"fast\""),
            ("max_items = 5", "max_items: only for mode = \"auto\""),
            (
                "[window.sketch]\nepsilon = 0.1",
                "sketch: set, but the window's mode is \"exact\"",
            ),
            (
                "mode = \"sketch\"\n[window.sketch]\nepsilon = 2.0",
                "epsilon 2 is not in (0, 1)",
            ),
            (
                "mode = \"sketch\"\n[window.sketch]\ncandidates = 3",
                "sketch.candidates: 3 is not in 10..=",
            ),
            (
                "mode = \"sketch\"\n[window.sketch]\nalgorithm = \"x\"",
                "unknown algorithm \"x\"",
            ),
            (
                "mode = \"sketch\"\n[window.sketch]\nalgorithm = \"heavykeeper\"\nconservative = true",
                "sketch.conservative: only for algorithm = \"cms\"",
            ),
            ("mode = \"auto\"\nmax_items = 0", "max_items: must be positive"),
            (
                "exact_at_seal = true",
                "exact_at_seal: only for mode = \"sketch\" or \"auto\"",
            ),
            (
                "mode = \"both\"\nexact_at_seal = true",
                "(this window's mode is \"both\"",
            ),
            (
                "mode = \"sketch\"\nexact_at_seal = true\n[window.sketch]\nalgorithm = \"heavykeeper\"",
                "exact_at_seal: needs algorithm = \"cms\"",
            ),
            (
                "mode = \"sketch\"\nexact_at_seal = true\n[window.sketch]\nconservative = true",
                "exact_at_seal: needs sketch.conservative = false",
            ),
            ("mode = \"sketch\"\n[window.sketch]\nwidth = 5", "unknown field `width`"),
        ];
        for (window, want) in cases {
            let got = err(window);
            assert!(got.contains(want), "{window}: {got}");
        }
    }

    /// `[exact_at_seal]`: the replays' budget, its defaults, and every bad value one line
    /// naming its key.
    #[test]
    fn the_replay_budget_section() {
        use hotlist_operators::replay_budget::ReplayBudget;
        let gen = "[source]\nkind = \"generator\"\n";
        let budget = |extra: &str| parse(&format!("{gen}{extra}"), &Overrides::default()).map(|p| p.exact_at_seal);
        assert_eq!(budget("").unwrap(), ReplayBudget::default());
        assert_eq!(
            budget("[exact_at_seal]\nmax_replay_keys = 50\nmax_key_ranges = 4\n").unwrap(),
            ReplayBudget::new(50, 4).unwrap()
        );
        let set = Overrides {
            set: vec!["exact_at_seal.max_replay_keys=7".into()],
            ..Overrides::default()
        };
        assert_eq!(parse(gen, &set).unwrap().exact_at_seal.max_keys(), 7);
        for (extra, want) in [
            ("max_replay_keys = 0", "exact_at_seal.max_replay_keys: must be positive"),
            (
                "max_replay_keys = -3",
                "exact_at_seal.max_replay_keys: must be positive, got -3",
            ),
            (
                "max_key_ranges = 3",
                "exact_at_seal.max_key_ranges: must be a power of two between 1 and 1024, got 3",
            ),
            (
                "max_key_ranges = 0",
                "exact_at_seal.max_key_ranges: must be a power of two",
            ),
            (
                "max_key_ranges = 4096",
                "exact_at_seal.max_key_ranges: must be a power of two",
            ),
            ("max_keys = 5", "unknown field `max_keys`"),
        ] {
            let got = format!("{:#}", budget(&format!("[exact_at_seal]\n{extra}\n")).expect_err(extra));
            assert!(got.contains(want), "{extra}: {got}");
            assert_eq!(got.lines().count(), 1, "{got}");
        }
    }
}

//! Input data for tests: random partitions with disorder, late events and bad lines.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};

/// Bad lines of every kind the contract names.
pub const BAD_LINES: &[&[u8]] = &[
    b"",
    b"not json",
    b"[1,2,3]",
    b"{\"item_id\":\"a\",\"ts\":1.5}",
    b"{\"item_id\":\"a\",\"ts\":\"12345\"}",
    b"{\"item_id\":\"\",\"ts\":1}",
    b"{\"ts\":1}",
    b"{\"item_id\":\"a\",\"ts\":1} trailing",
    b"{\"item_id\":\"a\",\"ts\":null}",
    b"{\"item_id\":\"a\",\"ts\":\"2024-01-01T00:00:00\"}",
    b"{\"item_id\":\"\\ud800\",\"ts\":1}",
    b"{\"item_id\":\"a\",\"ts\":1,\"dims\":{\"c\":1}}",
    b"\xff\xfe{\"item_id\":\"a\",\"ts\":1}",
    // the plain line's shape with an id that is not UTF-8 (the fast path checks only the id)
    b"{\"item_id\":\"a\xff\",\"ts\":1}",
    b"{\"item_id\":\"a\\u0000\",\"ts\":1}",
    b"{\"item_id\":\"a\",\"ts\":true}",
    // event times outside years 0000-9999 (integers and RFC 3339)
    b"{\"item_id\":\"a\",\"ts\":9000000000000000}",
    b"{\"item_id\":\"a\",\"ts\":-9223372036854775808}",
    b"{\"item_id\":\"a\",\"ts\":\"0000-01-01T00:00:00+01:00\"}",
];

/// Knobs for random partitions.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Partitions.
    pub partitions: usize,
    /// Lines per partition.
    pub lines: usize,
    /// Distinct items (few: many ties).
    pub items: usize,
    /// Mean event-time step per event, ms.
    pub step: i64,
    /// Max backwards disorder, ms.
    pub disorder: i64,
    /// Probability of a far-late event.
    pub late_p: f64,
    /// How far back a late event goes, ms.
    pub late_by: i64,
    /// Probability of a bad line.
    pub bad_p: f64,
    /// First event time.
    pub start: i64,
}

/// Random partitions of JSON lines, deterministic for a seed.
pub fn random_partitions(seed: u64, shape: &Shape) -> Vec<Vec<Vec<u8>>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..shape.partitions)
        .map(|_| {
            let mut t = shape.start;
            (0..shape.lines)
                .map(|_| {
                    if rng.random_bool(shape.bad_p) {
                        return BAD_LINES[rng.random_range(0..BAD_LINES.len())].to_vec();
                    }
                    t += rng.random_range(0..=2 * shape.step);
                    let mut ts = t - rng.random_range(0..=shape.disorder);
                    if rng.random_bool(shape.late_p) {
                        ts -= shape.late_by;
                    }
                    let item = format!("i{}", rng.random_range(0..shape.items));
                    // a few RFC 3339 times and extra fields, to exercise the whole contract
                    match rng.random_range(0..20) {
                        0 => {
                            let s = hotlist_operators::time::Millis(ts).to_rfc3339();
                            format!("{{\"item_id\":\"{item}\",\"ts\":\"{s}\"}}").into_bytes()
                        }
                        1 => {
                            format!("{{\"item_id\":\"{item}\",\"ts\":{ts},\"dims\":{{\"country\":\"US\"}},\"x\":[1]}}")
                                .into_bytes()
                        }
                        _ => format!("{{\"item_id\":\"{item}\",\"ts\":{ts}}}").into_bytes(),
                    }
                })
                .collect()
        })
        .collect()
}

/// [`random_partitions`] with dims and users: each event gets a `country` (one of a few, one
/// of them needing percent-encoding; sometimes none), a `device`, a `page` (one of 5,000) and a
/// `user` (a few users per
/// item, so that distinct users differ from events; sometimes none). Bad lines stay bad.
pub fn random_grouped_partitions(seed: u64, shape: &Shape) -> Vec<Vec<Vec<u8>>> {
    const COUNTRIES: &[&str] = &["US", "DE", "São Paulo & co"];
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6772_6f75_7073);
    let mut parts = random_partitions(seed, shape);
    for line in parts.iter_mut().flatten() {
        // the field mapping reads only the dims the windows name: an integer in another dim is
        // no longer a bad record, so keep only lines bad under both rules
        if line.as_slice() == br#"{"item_id":"a","ts":1,"dims":{"c":1}}"# {
            *line = b"not json".to_vec();
            continue;
        }
        let Ok(serde_json::Value::Object(mut obj)) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if !obj.get("item_id").is_some_and(|i| i.is_string()) || !obj.get("dims").is_none_or(|d| d.is_null()) {
            continue;
        }
        let mut dims = serde_json::Map::new();
        if rng.random_bool(0.9) {
            let c = COUNTRIES[rng.random_range(0..COUNTRIES.len())];
            dims.insert("country".into(), c.into());
        }
        dims.insert("device".into(), if rng.random_bool(0.5) { "web" } else { "app" }.into());
        // many values: groups seen once or twice per instance
        dims.insert("page".into(), format!("p{}", rng.random_range(0..5000)).into());
        obj.insert("dims".into(), serde_json::Value::Object(dims));
        if rng.random_bool(0.95) {
            obj.insert("user".into(), format!("u{}", rng.random_range(0..4)).into());
        }
        *line = serde_json::to_vec(&obj).expect("a JSON object");
    }
    parts
}

/// Writes partitions as `part-NNNN.jsonl` files into `dir`; returns their paths in order.
pub fn write_partitions(dir: &Path, partitions: &[Vec<Vec<u8>>]) -> std::io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for (p, lines) in partitions.iter().enumerate() {
        let path = dir.join(format!("part-{p:04}.jsonl"));
        let mut bytes = Vec::new();
        for l in lines {
            bytes.extend_from_slice(l);
            bytes.push(b'\n');
        }
        std::fs::write(&path, bytes)?;
        paths.push(path);
    }
    Ok(paths)
}

/// The crash and restart tests' inputs: 3 partitions of `lines` lines over 10 items, with
/// disorder, late events (some beyond the allowed lateness) and bad lines.
pub fn checkpointed_job_shape(lines: usize) -> Shape {
    Shape {
        partitions: 3,
        lines,
        items: 10,
        step: 40,
        disorder: 3_000,
        late_p: 0.02,
        late_by: 45_000,
        bad_p: 0.01,
        start: 1_713_462_150_123,
    }
}

//! A brute-force model of the rules in docs/time.md and README's event contract: independent of the job's code on purpose (its own
//! parsing through `serde_json::Value`, its own window enumeration by scanning, a full sort).

use std::collections::BTreeMap;

/// A window as the model sees it.
#[derive(Clone, Debug)]
pub struct ModelWindow {
    /// Name.
    pub name: String,
    /// Size in ms.
    pub size: i64,
    /// Slide in ms.
    pub slide: i64,
    /// K.
    pub k: usize,
}

impl ModelWindow {
    /// A window of `size` ms every `slide` ms (tumbling when they are equal), keeping `k`.
    pub fn new(name: &str, size: i64, slide: i64, k: usize) -> ModelWindow {
        ModelWindow {
            name: name.into(),
            size,
            slide,
            k,
        }
    }
}

/// One sealed list: (window, start, end) -> ranked (item, count).
pub type Lists = BTreeMap<(String, i64, i64), Vec<(String, u64)>>;

/// A dead letter: (partition, 1-based position, reason).
pub type Dead = Vec<(u32, u64, String)>;

/// The contract's parse, written independently: returns (item, ts) or None for a bad record.
pub fn parse(line: &[u8]) -> Option<(String, i64)> {
    let text = std::str::from_utf8(line).ok()?;
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let obj = v.as_object()?;
    let item = obj.get("item_id")?.as_str()?;
    if item.is_empty() || item.len() > 256 || item.contains('\0') {
        return None;
    }
    let ts = match obj.get("ts")? {
        serde_json::Value::Number(n) => n.as_i64()?,
        serde_json::Value::String(s) => {
            let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
            (t.unix_timestamp_nanos().div_euclid(1_000_000)) as i64
        }
        _ => return None,
    };
    match obj.get("dims") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(m)) if m.values().all(|v| v.is_string()) => {}
        _ => return None,
    }
    Some((item.to_string(), ts))
}

/// Runs the model over partitions of lines.
pub fn run(partitions: &[Vec<Vec<u8>>], windows: &[ModelWindow], ooo: i64, lateness: i64) -> (Lists, Dead) {
    let mut counts: BTreeMap<(usize, i64), BTreeMap<String, u64>> = BTreeMap::new();
    let mut dead = Vec::new();
    for (p, lines) in partitions.iter().enumerate() {
        let mut max_ts: Option<i64> = None;
        for (i, line) in lines.iter().enumerate() {
            let pos = i as u64 + 1;
            let Some((item, ts)) = parse(line) else {
                dead.push((p as u32, pos, "bad".to_string()));
                continue;
            };
            let wm_before = max_ts.map(|m| m - ooo);
            let mut late_any = false;
            for (w, spec) in windows.iter().enumerate() {
                // scan every instance start n*slide near ts
                let lo = (ts - spec.size).div_euclid(spec.slide) - 1;
                let hi = ts.div_euclid(spec.slide) + 1;
                for n in lo..=hi {
                    let start = n * spec.slide;
                    let end = start + spec.size;
                    if !(start <= ts && ts < end) {
                        continue;
                    }
                    if wm_before.is_some_and(|wm| wm >= end + lateness) {
                        late_any = true;
                    } else {
                        *counts.entry((w, start)).or_default().entry(item.clone()).or_insert(0) += 1;
                    }
                }
            }
            if late_any {
                dead.push((p as u32, pos, "late".to_string()));
            }
            max_ts = Some(max_ts.map_or(ts, |m| m.max(ts)));
        }
    }
    let mut lists = Lists::new();
    for ((w, start), items) in counts {
        let spec = &windows[w];
        let mut ranked: Vec<(String, u64)> = items.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
        ranked.truncate(spec.k);
        lists.insert((spec.name.clone(), start, start + spec.size), ranked);
    }
    dead.sort();
    (lists, dead)
}

/// The windows of the crash and Kafka tests' configs: `10s` tumbling (K = 5) and `30s-hop`
/// (30 s every 10 s, K = 4).
pub fn crash_windows() -> Vec<ModelWindow> {
    vec![
        ModelWindow::new("10s", 10_000, 10_000, 5),
        ModelWindow::new("30s-hop", 30_000, 10_000, 4),
    ]
}

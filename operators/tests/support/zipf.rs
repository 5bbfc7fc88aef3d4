//! A deterministic Zipf stream, shared by the sketch tests and `examples/sketch_compare.rs`
//! (included with `#[path]`; not a test target itself).
//!
//! Item of rank r (0-based) has weight 1/(r+1)^s; events are drawn by inverse CDF (binary
//! search over the cumulative weights) from a SplitMix64 generator, so a (items, s, events,
//! seed) tuple always gives the same stream.

/// Cumulative weights of `items` ranks under Zipf(`s`).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `items` ranks with exponent `s`.
    pub fn new(items: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let cdf = (1..=items)
            .map(|r| {
                acc += 1.0 / (r as f64).powf(s);
                acc
            })
            .collect();
        Zipf { cdf }
    }

    /// `events` ranks drawn with generator seed `seed`.
    pub fn stream(&self, events: usize, seed: u64) -> Vec<u32> {
        let total = *self.cdf.last().expect("at least one item");
        let mut state = seed;
        (0..events)
            .map(|_| {
                let u = (splitmix64(&mut state) >> 11) as f64 / (1u64 << 53) as f64;
                let r = self.cdf.partition_point(|&c| c <= u * total);
                r.min(self.cdf.len() - 1) as u32
            })
            .collect()
    }
}

/// The id of rank `r`: `code00042`.
pub fn item_id(r: u32) -> String {
    format!("code{r:05}")
}

/// Exact counts per rank.
pub fn counts(stream: &[u32], items: usize) -> Vec<u64> {
    let mut c = vec![0u64; items];
    for &r in stream {
        c[r as usize] += 1;
    }
    c
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

//! The stream of the counter's bench and of the key-layout model
//! (`examples/keyed_layouts.rs`): a fixed xorshift64* and item ranks drawn from a Zipf law by
//! its inverse CDF, with no dependency.

/// xorshift64*: a fixed stream.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Ranks 0..n drawn with weights 1 / (rank + 1)^s.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut total = 0.0;
        let cdf = (0..n)
            .map(|r| {
                total += 1.0 / ((r + 1) as f64).powf(s);
                total
            })
            .collect();
        Zipf { cdf }
    }

    /// The next rank of `rng`'s stream.
    pub fn rank(&self, rng: &mut Rng) -> usize {
        let total = self.cdf.last().copied().unwrap_or(0.0);
        let u = rng.unit() * total;
        self.cdf
            .partition_point(|c| *c < u)
            .min(self.cdf.len().saturating_sub(1))
    }
}

//! The simulator's one pseudo-random generator: xorshift64* (Vigna, "An experimental
//! exploration of Marsaglia's xorshift generators"), seeded, so that the same host
//! commands give the same drive behaviour run after run. Hand-written rather than a
//! crate: eight lines, and the sequences it gives are part of what a seeded run
//! reproduces (a crate's generator may change between versions).

/// xorshift64*.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; 0 is made odd).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability one half.
    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }
}

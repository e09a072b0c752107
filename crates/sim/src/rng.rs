//! A small, seeded, portable pseudo-random number generator.
//!
//! The simulator must be reproducible from one seed on every platform and every version of its
//! dependencies, so it carries its own generator instead of depending on `rand`: SplitMix64
//! (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014), the
//! generator Java's `SplittableRandom` uses. It has 64 bits of state, passes BigCrush, and every
//! seed (including 0) is good. It is not cryptographic, and it does not need to be.

/// SplitMix64: a 64-bit seeded generator. Equal seeds give equal streams, on every platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

/// The golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl SplitMix64 {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `0..n`, without modulo bias (Lemire's multiply-and-reject).
    ///
    /// # Panics
    /// If `n == 0`: an empty range is a bug in the caller.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "SplitMix64::below(0): empty range");
        let mut product = u128::from(self.next_u64()) * u128::from(n);
        if (product as u64) < n {
            // Reject the few low products that would make some results more likely.
            let threshold = n.wrapping_neg() % n;
            while (product as u64) < threshold {
                product = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (product >> 64) as u64
    }

    /// An exponentially distributed float with mean 1 (for Poisson inter-arrival times).
    pub fn next_exp(&mut self) -> f64 {
        // 1 - u lies in (0, 1], so the logarithm is finite.
        -(1.0 - self.next_f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_stream() {
        // First outputs of the reference C implementation for seed 1234567.
        let mut rng = SplitMix64::new(1_234_567);
        assert_eq!(rng.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(rng.next_u64(), 3_203_168_211_198_807_973);
        assert_eq!(rng.next_u64(), 9_817_491_932_198_370_423);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = SplitMix64::new(7);
        let mut seen = [0u32; 7];
        for _ in 0..7_000 {
            let x = rng.below(7);
            seen[x as usize] += 1;
        }
        for &count in &seen {
            assert!((800..1200).contains(&count), "{seen:?}");
        }
    }

    #[test]
    fn floats_and_exponentials_have_the_right_means() {
        let mut rng = SplitMix64::new(99);
        let n = 100_000;
        let mean_u: f64 = (0..n).map(|_| rng.next_f64()).sum::<f64>() / n as f64;
        let mean_e: f64 = (0..n).map(|_| rng.next_exp()).sum::<f64>() / n as f64;
        assert!((mean_u - 0.5).abs() < 0.005, "{mean_u}");
        assert!((mean_e - 1.0).abs() < 0.01, "{mean_e}");
    }
}

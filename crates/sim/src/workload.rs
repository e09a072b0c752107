//! Synthetic workloads: seeded, deterministic streams of [`Request`]s.
//!
//! A [`SyntheticConfig`] describes a workload by its statistics: how many volumes and how large,
//! what fraction reads, how request sizes are distributed, how often a request continues where
//! the previous one on its volume ended, and how requests arrive. [`SyntheticConfig::generator`]
//! turns it into an iterator; the same configuration (seed included) always yields the same
//! requests, on every platform.
//!
//! Arrivals are either a Poisson process at a fixed rate ([`Arrival::Poisson`]) or closed-loop
//! ([`Arrival::ClosedLoop`]): then every request has `time_ns == 0` and the executor issues the
//! next request whenever one of its `queue_depth` outstanding requests completes; the generator
//! only supplies sizes, offsets and operations.
//!
//! # Synthetic stand-ins for the SPC Financial traces
//!
//! The full Financial traces are not available here. [`SyntheticConfig::financial1_synthetic`]
//! and [`SyntheticConfig::financial2_synthetic`] match their published statistics (seed 000,
//! Table 4; the traces' README): ASU count, write fraction, mean request size, request count and
//! a mean arrival rate derived from the traces' published durations. Everything else about them
//! (which ASUs are hot, locality, burstiness, the exact size distribution) is *not* reproduced,
//! and every result obtained with them must be labelled synthetic; their names say so.

use crate::rng::SplitMix64;
use crate::trace::Request;
use crate::Op;

/// Request sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeDist {
    /// Every request has this many bytes.
    Fixed(u64),
    /// `(bytes, weight)` pairs: a request has `bytes` with probability `weight / sum(weights)`.
    Mix(Vec<(u64, u32)>),
}

impl SizeDist {
    /// The mean request size in bytes.
    pub fn mean_bytes(&self) -> f64 {
        match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Mix(mix) => {
                let total: f64 = mix.iter().map(|&(_, w)| f64::from(w)).sum();
                mix.iter()
                    .map(|&(b, w)| b as f64 * f64::from(w))
                    .sum::<f64>()
                    / total
            }
        }
    }

    /// The largest request size in bytes.
    pub fn max_bytes(&self) -> u64 {
        match self {
            SizeDist::Fixed(b) => *b,
            SizeDist::Mix(mix) => mix.iter().map(|&(b, _)| b).max().unwrap_or(0),
        }
    }
}

/// Where random requests land within their volume.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Offsets {
    /// Every aligned slot equally likely.
    #[default]
    Uniform,
    /// Zipf-distributed over the slots with exponent `theta` (> 0, not 1), as fio's
    /// `random_distribution=zipf:theta`: slot ranks drawn by Gray et al.'s method (the one fio
    /// uses), then scattered over the volume by a hash of the rank plus a per-run offset, so
    /// the hot slots are spread out rather than packed at the start.
    Zipf {
        /// The exponent: 1.2 is fio's usual example; larger is more skewed.
        theta: f64,
    },
}

/// How requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    /// Open loop: exponential inter-arrival times with this mean rate (requests per second).
    Poisson {
        /// Mean arrival rate.
        requests_per_sec: f64,
    },
    /// Closed loop: all times are 0; the executor keeps `queue_depth` requests outstanding.
    ClosedLoop {
        /// Requests the executor keeps in flight.
        queue_depth: u32,
    },
    /// Bursts: ON and OFF periods of exponential lengths (means `on_s` and `off_s`, starting
    /// ON); Poisson arrivals during ON periods at `requests_per_sec * (on_s + off_s) / on_s`,
    /// none during OFF periods, so that the mean rate is `requests_per_sec`.
    Bursty {
        /// Mean rate over ON and OFF periods.
        requests_per_sec: f64,
        /// Mean length of an ON period, seconds.
        on_s: f64,
        /// Mean length of an OFF period, seconds.
        off_s: f64,
    },
}

/// A synthetic workload's description.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticConfig {
    /// A name for reports; presets end in `-synthetic`.
    pub name: String,
    /// Seed of the generator.
    pub seed: u64,
    /// Stop after this many requests (`None`: never).
    pub requests: Option<u64>,
    /// Fraction of reads, in `[0, 1]`.
    pub read_fraction: f64,
    /// Probability that a request starts where the previous request to its volume ended
    /// (0: all random, 1: all sequential), in `[0, 1]`.
    pub sequential_fraction: f64,
    /// Request sizes.
    pub sizes: SizeDist,
    /// Number of volumes (ASUs); each request picks one uniformly.
    pub volumes: u32,
    /// Size of each volume; random offsets are uniform over it.
    pub volume_capacity_bytes: u64,
    /// Offsets are multiples of this.
    pub align_bytes: u64,
    /// Distribution of random offsets.
    pub offsets: Offsets,
    /// Arrival process.
    pub arrival: Arrival,
}

/// A synthetic configuration that cannot generate anything.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// A field is out of range; `reason` says how.
    #[error("synthetic workload {name}: {field} {reason}")]
    Invalid {
        /// The workload's name.
        name: String,
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Published request counts and assumed durations of the SPC Financial traces.
///
/// Counts, write fractions and mean sizes: seed 000, Table 4 (76.84 % writes, 3.38 KB,
/// 5,334,987 requests; 17.65 % writes, 2.39 KB, 3,699,195 requests), which the traces' README
/// repeats; ASU counts (24 and 19) from the README. Durations: the UMass repository describes
/// Financial1 as about 12 hours and Financial2 as about 11 hours of activity; we take exactly 12 h
/// and 11 h, giving 123.5 and 93.4 requests per second. "KB" in Table 4 is read as KiB.
pub mod financial {
    /// Financial1 requests.
    pub const FINANCIAL1_REQUESTS: u64 = 5_334_987;
    /// Financial1 write fraction.
    pub const FINANCIAL1_WRITE_FRACTION: f64 = 0.7684;
    /// Financial1 mean request size in bytes (3.38 KiB).
    pub const FINANCIAL1_MEAN_BYTES: f64 = 3.38 * 1024.0;
    /// Financial1 ASUs.
    pub const FINANCIAL1_ASUS: u32 = 24;
    /// Financial1 duration (assumed: 12 hours).
    pub const FINANCIAL1_DURATION_SEC: f64 = 12.0 * 3600.0;
    /// Financial2 requests.
    pub const FINANCIAL2_REQUESTS: u64 = 3_699_195;
    /// Financial2 write fraction.
    pub const FINANCIAL2_WRITE_FRACTION: f64 = 0.1765;
    /// Financial2 mean request size in bytes (2.39 KiB).
    pub const FINANCIAL2_MEAN_BYTES: f64 = 2.39 * 1024.0;
    /// Financial2 ASUs.
    pub const FINANCIAL2_ASUS: u32 = 19;
    /// Financial2 duration (assumed: 11 hours).
    pub const FINANCIAL2_DURATION_SEC: f64 = 11.0 * 3600.0;
}

/// Address space of each synthetic ASU: assumed 2 GiB (the published statistics do not give the
/// ASUs' sizes). Override the field, or fold, to place the workload on a given array.
const FINANCIAL_ASU_BYTES: u64 = 2 << 30;

impl SyntheticConfig {
    /// A synthetic workload with Financial1's published statistics (see [`financial`]).
    ///
    /// Sizes: an assumed mix of 0.5-32 KiB requests (mostly 512 B and 4 KiB, as OLTP traffic
    /// is) whose mean, 3,460 bytes, matches the published 3.38 KiB; offsets uniform and
    /// sector-aligned within 24 ASUs of 2 GiB; Poisson arrivals at 123.5 requests per second.
    pub fn financial1_synthetic(seed: u64) -> SyntheticConfig {
        use financial::*;
        SyntheticConfig {
            name: "financial1-synthetic".to_string(),
            seed,
            requests: Some(FINANCIAL1_REQUESTS),
            read_fraction: 1.0 - FINANCIAL1_WRITE_FRACTION,
            sequential_fraction: 0.0,
            // Mean = 3,460,096 / 1000 = 3,460.1 bytes = 3.379 KiB.
            sizes: SizeDist::Mix(vec![
                (512, 326),
                (1024, 40),
                (2048, 90),
                (4096, 429),
                (8192, 80),
                (16_384, 30),
                (32_768, 5),
            ]),
            volumes: FINANCIAL1_ASUS,
            volume_capacity_bytes: FINANCIAL_ASU_BYTES,
            align_bytes: 512,
            offsets: Offsets::Uniform,
            arrival: Arrival::Poisson {
                requests_per_sec: FINANCIAL1_REQUESTS as f64 / FINANCIAL1_DURATION_SEC,
            },
        }
    }

    /// A synthetic workload with Financial2's published statistics (see [`financial`]).
    ///
    /// Sizes: an assumed mix of 0.5-32 KiB requests whose mean, 2,447 bytes, matches the
    /// published 2.39 KiB; 19 ASUs of 2 GiB; Poisson arrivals at 93.4 requests per second.
    pub fn financial2_synthetic(seed: u64) -> SyntheticConfig {
        use financial::*;
        SyntheticConfig {
            name: "financial2-synthetic".to_string(),
            seed,
            requests: Some(FINANCIAL2_REQUESTS),
            read_fraction: 1.0 - FINANCIAL2_WRITE_FRACTION,
            sequential_fraction: 0.0,
            // Mean = 2,447,360 / 1000 = 2,447.4 bytes = 2.390 KiB.
            sizes: SizeDist::Mix(vec![
                (512, 488),
                (1024, 50),
                (2048, 100),
                (4096, 292),
                (8192, 55),
                (16_384, 12),
                (32_768, 3),
            ]),
            volumes: FINANCIAL2_ASUS,
            volume_capacity_bytes: FINANCIAL_ASU_BYTES,
            align_bytes: 512,
            offsets: Offsets::Uniform,
            arrival: Arrival::Poisson {
                requests_per_sec: FINANCIAL2_REQUESTS as f64 / FINANCIAL2_DURATION_SEC,
            },
        }
    }

    /// The preset with this name (`financial1-synthetic`, `financial2-synthetic`).
    pub fn preset(name: &str, seed: u64) -> Option<SyntheticConfig> {
        match name.to_ascii_lowercase().as_str() {
            "financial1-synthetic" | "financial1" | "fin1" => {
                Some(Self::financial1_synthetic(seed))
            }
            "financial2-synthetic" | "financial2" | "fin2" => {
                Some(Self::financial2_synthetic(seed))
            }
            _ => None,
        }
    }

    /// Check the configuration and start generating.
    pub fn generator(&self) -> Result<Synthetic, WorkloadError> {
        let invalid = |field, reason| {
            Err(WorkloadError::Invalid {
                name: self.name.clone(),
                field,
                reason,
            })
        };
        let fraction = |x: f64| (0.0..=1.0).contains(&x);
        if !fraction(self.read_fraction) {
            return invalid("read_fraction", "must be in [0, 1]");
        }
        if !fraction(self.sequential_fraction) {
            return invalid("sequential_fraction", "must be in [0, 1]");
        }
        if self.volumes == 0 {
            return invalid("volumes", "must be positive");
        }
        if self.align_bytes == 0 {
            return invalid("align_bytes", "must be positive");
        }
        match &self.sizes {
            SizeDist::Fixed(0) => return invalid("sizes", "must be positive"),
            SizeDist::Mix(mix) => {
                if mix.is_empty() || mix.iter().any(|&(b, _)| b == 0) {
                    return invalid("sizes", "need at least one size, all positive");
                }
                if mix.iter().map(|&(_, w)| u64::from(w)).sum::<u64>() == 0 {
                    return invalid("sizes", "weights must not all be zero");
                }
            }
            SizeDist::Fixed(_) => {}
        }
        if self.sizes.max_bytes() > self.volume_capacity_bytes {
            return invalid(
                "volume_capacity_bytes",
                "is smaller than the largest request",
            );
        }
        match self.arrival {
            Arrival::Poisson { requests_per_sec } => {
                if !(requests_per_sec.is_finite() && requests_per_sec > 0.0) {
                    return invalid("arrival", "rate must be positive and finite");
                }
            }
            Arrival::ClosedLoop { queue_depth } => {
                if queue_depth == 0 {
                    return invalid("arrival", "queue depth must be positive");
                }
            }
            Arrival::Bursty {
                requests_per_sec,
                on_s,
                off_s,
            } => {
                let positive = |x: f64| x.is_finite() && x > 0.0;
                if !(positive(requests_per_sec)
                    && positive(on_s)
                    && off_s.is_finite()
                    && off_s >= 0.0)
                {
                    return invalid(
                        "arrival",
                        "bursts need a positive rate and ON period and a non-negative OFF period",
                    );
                }
            }
        }
        let zipf = match self.offsets {
            Offsets::Uniform => None,
            Offsets::Zipf { theta } => {
                if !(theta.is_finite() && theta > 0.0 && (theta - 1.0).abs() > 1e-9) {
                    return invalid("offsets", "zipf theta must be positive and not 1");
                }
                let min_len = match &self.sizes {
                    SizeDist::Fixed(b) => *b,
                    SizeDist::Mix(mix) => mix.iter().map(|&(b, _)| b).min().unwrap_or(0),
                };
                let slots = (self.volume_capacity_bytes - min_len) / self.align_bytes + 1;
                Some(Zipf::new(slots, theta, self.seed))
            }
        };
        let (sizes, cumulative) = match &self.sizes {
            SizeDist::Fixed(b) => (vec![*b], vec![1]),
            SizeDist::Mix(mix) => {
                let mut total = 0u64;
                let cumulative = mix
                    .iter()
                    .map(|&(_, w)| {
                        total += u64::from(w);
                        total
                    })
                    .collect();
                (mix.iter().map(|&(b, _)| b).collect(), cumulative)
            }
        };
        Ok(Synthetic {
            config: self.clone(),
            rng: SplitMix64::new(self.seed),
            sizes,
            cumulative,
            cursors: vec![0; self.volumes as usize],
            emitted: 0,
            clock_sec: 0.0,
            burst_end_sec: None,
            zipf,
        })
    }
}

/// Zipf ranks over `n` slots (Gray, Sundaresan, Englert, Baclawski, Weinberger, "Quickly
/// generating billion-record synthetic databases", SIGMOD 1994; the method fio's `lib/zipf.c`
/// uses), scattered by a hash. Written here: it is twenty lines and no maintained crate gives
/// fio's scattering.
#[derive(Clone, Debug)]
struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
    scatter: u64,
}

/// `sum_{i=1}^{n} i^-theta`: exact up to a million terms, then the Euler-Maclaurin tail (the
/// integral plus the end correction), which is within 1e-9 relative of the sum there.
fn zeta(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 1_000_000;
    let m = n.min(EXACT);
    let mut s: f64 = (1..=m).map(|i| (i as f64).powf(-theta)).sum();
    if n > m {
        let (a, b) = (m as f64, n as f64);
        let integral = (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta);
        s += integral + (b.powf(-theta) - a.powf(-theta)) / 2.0;
    }
    s
}

impl Zipf {
    fn new(n: u64, theta: f64, seed: u64) -> Zipf {
        let zeta_n = zeta(n, theta);
        let zeta_2 = zeta(2.min(n), theta);
        let eta = if n > 1 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
        } else {
            0.0
        };
        Zipf {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta_n,
            eta,
            scatter: SplitMix64::new(seed ^ 0x7a69_7066).next_u64(),
        }
    }

    /// The rank (0 = the most popular) for a uniform draw `u` in [0, 1).
    fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zeta_n;
        let r = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            let x = self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha);
            x as u64
        };
        r.min(self.n - 1)
    }

    /// The slot of rank `r`: a hash of the rank, shifted by the run's offset.
    fn slot(&self, r: u64) -> u64 {
        SplitMix64::new(r).next_u64().wrapping_add(self.scatter) % self.n
    }
}

/// The iterator of a [`SyntheticConfig`].
#[derive(Clone, Debug)]
pub struct Synthetic {
    config: SyntheticConfig,
    rng: SplitMix64,
    sizes: Vec<u64>,
    /// Running sums of the weights, for inverse-CDF sampling.
    cumulative: Vec<u64>,
    /// Where the last request to each volume ended.
    cursors: Vec<u64>,
    emitted: u64,
    clock_sec: f64,
    /// Bursty arrivals: the end of the current ON period (drawn at the first request).
    burst_end_sec: Option<f64>,
    /// Zipf offsets: the sampler.
    zipf: Option<Zipf>,
}

impl Synthetic {
    /// The configuration being generated.
    pub fn config(&self) -> &SyntheticConfig {
        &self.config
    }

    /// The arrival process (for a closed loop, the queue depth the executor should keep).
    pub fn arrival(&self) -> Arrival {
        self.config.arrival
    }
}

impl Iterator for Synthetic {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        let c = &self.config;
        if c.requests.is_some_and(|n| self.emitted >= n) {
            return None;
        }
        // Draw order is part of the determinism contract: op, size, volume, pattern, offset,
        // arrival.
        let op = if self.rng.next_f64() < c.read_fraction {
            Op::Read
        } else {
            Op::Write
        };
        let total = *self.cumulative.last().expect("sizes checked non-empty");
        let pick = self.rng.below(total);
        let len_bytes = self.sizes[self.cumulative.partition_point(|&s| s <= pick)];
        let volume = self.rng.below(u64::from(c.volumes)) as u32;
        let sequential = self.rng.next_f64() < c.sequential_fraction;
        let cursor = self.cursors[volume as usize];
        let offset_bytes = if sequential && cursor + len_bytes <= c.volume_capacity_bytes {
            cursor
        } else if sequential {
            0
        } else {
            let slots = (c.volume_capacity_bytes - len_bytes) / c.align_bytes + 1;
            match &self.zipf {
                // (Slots counted for the smallest size: a larger request's slot past its own
                // last one wraps.)
                Some(z) => (z.slot(z.rank(self.rng.next_f64())) % slots) * c.align_bytes,
                None => self.rng.below(slots) * c.align_bytes,
            }
        };
        self.cursors[volume as usize] = offset_bytes + len_bytes;
        let time_ns = match c.arrival {
            Arrival::Poisson { requests_per_sec } => {
                if self.emitted > 0 {
                    self.clock_sec += self.rng.next_exp() / requests_per_sec;
                }
                (self.clock_sec * 1e9).round() as u64
            }
            Arrival::ClosedLoop { .. } => 0,
            Arrival::Bursty {
                requests_per_sec,
                on_s,
                off_s,
            } => {
                // (Draws of bursty arrivals: the first ON length at the first request, then
                // the gap, then OFF and ON lengths for every period the gap runs past.)
                let on_rate = requests_per_sec * (on_s + off_s) / on_s;
                let mut end = match self.burst_end_sec {
                    Some(e) => e,
                    None => self.rng.next_exp() * on_s,
                };
                if self.emitted > 0 {
                    self.clock_sec += self.rng.next_exp() / on_rate;
                }
                // The exponential gap is memoryless: what runs past the ON period's end
                // continues in the next ON period, after an OFF period.
                while self.clock_sec > end {
                    let off = self.rng.next_exp() * off_s;
                    let on = self.rng.next_exp() * on_s;
                    self.clock_sec += off;
                    end += off + on;
                }
                self.burst_end_sec = Some(end);
                (self.clock_sec * 1e9).round() as u64
            }
        };
        self.emitted += 1;
        Some(Request {
            time_ns,
            offset_bytes,
            len_bytes,
            op,
            volume,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preset_means_match_the_published_figures() {
        let f1 = SyntheticConfig::financial1_synthetic(0);
        let f2 = SyntheticConfig::financial2_synthetic(0);
        assert!((f1.sizes.mean_bytes() / financial::FINANCIAL1_MEAN_BYTES - 1.0).abs() < 0.001);
        assert!((f2.sizes.mean_bytes() / financial::FINANCIAL2_MEAN_BYTES - 1.0).abs() < 0.001);
        for c in [&f1, &f2] {
            if let SizeDist::Mix(mix) = &c.sizes {
                assert_eq!(mix.iter().map(|&(_, w)| w).sum::<u32>(), 1000);
            }
        }
    }

    #[test]
    fn zipf_ranks_follow_the_law_and_scatter() {
        // 1000 slots, theta 1.2: rank r has probability (r+1)^-1.2 / zeta(1000, 1.2). Gray's
        // method is exact for the two first ranks and a continuous approximation beyond (fio
        // draws the same way), so the rest is checked by cumulative mass.
        let z = Zipf::new(1000, 1.2, 7);
        let mut rng = SplitMix64::new(3);
        let draws = 400_000;
        let mut count = vec![0u64; 1000];
        for _ in 0..draws {
            count[z.rank(rng.next_f64()) as usize] += 1;
        }
        let p = |r: usize| ((r + 1) as f64).powf(-1.2) / zeta(1000, 1.2);
        for r in [0usize, 1] {
            let got = count[r] as f64 / draws as f64;
            assert!(
                (got / p(r) - 1.0).abs() < 0.03,
                "rank {r}: {got} vs {}",
                p(r)
            );
        }
        for top in [10usize, 100, 500] {
            let got = count[..top].iter().sum::<u64>() as f64 / draws as f64;
            let want: f64 = (0..top).map(p).sum();
            assert!(
                (got / want - 1.0).abs() < 0.05,
                "top {top}: {got} vs {want}"
            );
        }
        // The hottest slots are not the first ones.
        let hot: Vec<u64> = (0..5).map(|r| z.slot(r)).collect();
        assert!(hot.iter().any(|&s| s > 100), "{hot:?}");
        // The tail formula agrees with the exact sum.
        let exact: f64 = (1..=3_000_000u64).map(|i| (i as f64).powf(-1.2)).sum();
        assert!((zeta(3_000_000, 1.2) / exact - 1.0).abs() < 1e-9);
    }

    #[test]
    fn invalid_configs_are_rejected() {
        let mut c = SyntheticConfig::financial1_synthetic(0);
        c.read_fraction = 1.5;
        assert!(c.generator().is_err());
        let mut c = SyntheticConfig::financial1_synthetic(0);
        c.volume_capacity_bytes = 1024;
        assert!(c.generator().is_err());
        let mut c = SyntheticConfig::financial1_synthetic(0);
        c.sizes = SizeDist::Mix(vec![(512, 0)]);
        assert!(c.generator().is_err());
    }
}

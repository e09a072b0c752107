//! Seed 003 (IDO) workloads: spatial locality for synthetic traces.
//!
//! The synthetic Financial workloads ([`crate::SyntheticConfig::financial1_synthetic`]) match
//! the traces' published statistics, which say nothing about *where* requests go: their offsets
//! are uniform, so they have no spatial locality for a zone-based policy to find. [`Hotspot`]
//! wraps any workload and moves a share of its requests into a few hot regions (an *assumed*
//! locality, labelled as such wherever it is used): `hot_share` of the requests land in
//! `regions` regions of `region_bytes` each, spread over the array at pseudo-random places
//! (seeded), the region picked with weights 1, 1/2, 1/3, ... (a Zipf-like skew). Request sizes,
//! read/write mix and arrival times are the inner workload's.

use crate::exec::Workload;
use crate::rng::SplitMix64;
use crate::trace::{Request, TraceError};

/// A workload whose requests are partly moved into hot regions (see the module docs).
pub struct Hotspot<W> {
    inner: W,
    rng: SplitMix64,
    hot_share: f64,
    region_bytes: u64,
    starts: Vec<u64>,
    /// Cumulative weights of the regions.
    cumulative: Vec<f64>,
}

impl<W: Workload> Hotspot<W> {
    /// Moves `hot_share` (0..=1) of `inner`'s requests into `regions` regions of
    /// `region_bytes` each within `capacity_bytes`; requests go to volume 0 so that the
    /// executor does not fold them elsewhere.
    pub fn new(
        inner: W,
        capacity_bytes: u64,
        regions: usize,
        region_bytes: u64,
        hot_share: f64,
        seed: u64,
    ) -> Hotspot<W> {
        assert!(regions > 0 && region_bytes >= 4096 && region_bytes <= capacity_bytes);
        let mut rng = SplitMix64::new(seed ^ 0x0048_4f54_5350_4f54);
        let slots = capacity_bytes / region_bytes;
        let mut starts: Vec<u64> = Vec::new();
        while starts.len() < regions.min(slots as usize) {
            let s = rng.next_u64() % slots * region_bytes;
            if !starts.contains(&s) {
                starts.push(s);
            }
        }
        let mut acc = 0.0;
        let cumulative = (0..starts.len())
            .map(|i| {
                acc += 1.0 / (i + 1) as f64;
                acc
            })
            .collect();
        Hotspot {
            inner,
            rng,
            hot_share: hot_share.clamp(0.0, 1.0),
            region_bytes,
            starts,
            cumulative,
        }
    }
}

impl<W: Workload> Workload for Hotspot<W> {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        let r = match self.inner.next_request()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if u >= self.hot_share {
            return Some(Ok(r));
        }
        let total = *self.cumulative.last().expect("a region");
        let pick = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let i = self
            .cumulative
            .partition_point(|&c| c <= pick)
            .min(self.starts.len() - 1);
        let len = r.len_bytes.min(self.region_bytes);
        let within = (r.offset_bytes % (self.region_bytes - len + 1)) / 512 * 512;
        Some(Ok(Request {
            offset_bytes: self.starts[i] + within,
            len_bytes: len,
            volume: 0,
            ..r
        }))
    }

    fn closed_loop_depth(&self) -> Option<u32> {
        self.inner.closed_loop_depth()
    }

    fn skipped(&self) -> u64 {
        self.inner.skipped()
    }
}

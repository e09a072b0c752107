//! What a trace holds, in one pass (`raidforge trace stats`): requests and bytes by direction,
//! a size histogram, requests per second over time, the footprint (distinct bytes touched)
//! and how sequential it is.
//!
//! Memory: the rate timeline has at most [`RATE_BUCKETS_MAX`] buckets (neighbours merge
//! pairwise when a long trace needs more, doubling their width); the footprint keeps the
//! touched ranges of each volume, merged as they join, so it grows with how scattered the
//! trace is, not with its length.

use std::collections::{BTreeMap, HashMap};

use super::Request;
use crate::Op;

/// Most buckets of the requests-per-second timeline.
pub const RATE_BUCKETS_MAX: usize = 512;

/// Upper bounds (bytes, inclusive) of the size histogram's buckets: 512 B, 1 KiB, ... 16 MiB;
/// a last bucket takes anything larger.
pub fn size_bucket_bounds() -> Vec<u64> {
    (9..=24).map(|p| 1u64 << p).collect()
}

/// A size bucket's label: "512 B", "8 KiB", "2 MiB", or "larger" for the last.
pub fn size_bucket_label(i: usize) -> String {
    match size_bucket_bounds().get(i) {
        Some(&b) if b >= 1 << 20 => format!("{} MiB", b >> 20),
        Some(&b) if b >= 1 << 10 => format!("{} KiB", b >> 10),
        Some(&b) => format!("{b} B"),
        None => "larger".into(),
    }
}

/// One bucket of the requests-per-second timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RateBucket {
    /// Start, seconds after the first request.
    pub start_s: f64,
    /// Width, seconds.
    pub width_s: f64,
    /// Reads and writes arriving in it.
    pub reads: u64,
    /// See `reads`.
    pub writes: u64,
}

/// Statistics of a request stream ([`TraceStats::add`] each request in arrival order).
#[derive(Clone, Debug, Default)]
pub struct TraceStats {
    /// Requests by direction.
    pub reads: u64,
    /// See `reads`.
    pub writes: u64,
    /// Bytes by direction.
    pub read_bytes: u64,
    /// See `read_bytes`.
    pub write_bytes: u64,
    /// Arrival of the last request (ns after the first).
    pub last_ns: u64,
    /// Requests per size bucket ([`size_bucket_bounds`], then one for larger): (reads, writes).
    pub sizes: Vec<(u64, u64)>,
    /// Requests that start where the previous request of their volume ended.
    pub sequential: u64,
    /// Largest byte any request reaches, per volume (the volume's size as far as the trace
    /// shows).
    pub extent: BTreeMap<u32, u64>,
    rate_width_ns: u64,
    rate: Vec<(u64, u64)>,
    /// Touched ranges per volume: start -> end, disjoint and not adjacent.
    touched: HashMap<u32, BTreeMap<u64, u64>>,
    last_end: HashMap<u32, u64>,
}

impl TraceStats {
    /// No requests yet.
    pub fn new() -> TraceStats {
        TraceStats {
            sizes: vec![(0, 0); size_bucket_bounds().len() + 1],
            rate_width_ns: 1_000_000_000,
            ..Default::default()
        }
    }

    /// Counts one request.
    pub fn add(&mut self, r: &Request) {
        let read = r.op == Op::Read;
        if read {
            self.reads += 1;
            self.read_bytes += r.len_bytes;
        } else {
            self.writes += 1;
            self.write_bytes += r.len_bytes;
        }
        self.last_ns = self.last_ns.max(r.time_ns);
        let bounds = size_bucket_bounds();
        let b = bounds
            .iter()
            .position(|&u| r.len_bytes <= u)
            .unwrap_or(bounds.len());
        if read {
            self.sizes[b].0 += 1;
        } else {
            self.sizes[b].1 += 1;
        }
        // The rate timeline, its buckets doubled in width while it would be too long.
        let mut i = (r.time_ns / self.rate_width_ns) as usize;
        while i >= RATE_BUCKETS_MAX {
            self.rate = self
                .rate
                .chunks(2)
                .map(|c| c.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)))
                .collect();
            self.rate_width_ns *= 2;
            i = (r.time_ns / self.rate_width_ns) as usize;
        }
        if self.rate.len() <= i {
            self.rate.resize(i + 1, (0, 0));
        }
        if read {
            self.rate[i].0 += 1;
        } else {
            self.rate[i].1 += 1;
        }
        let end = r.offset_bytes.saturating_add(r.len_bytes);
        if self.last_end.insert(r.volume, end) == Some(r.offset_bytes) {
            self.sequential += 1;
        }
        let e = self.extent.entry(r.volume).or_default();
        *e = (*e).max(end);
        if r.len_bytes > 0 {
            touch(
                self.touched.entry(r.volume).or_default(),
                r.offset_bytes,
                end,
            );
        }
    }

    /// Requests counted.
    pub fn requests(&self) -> u64 {
        self.reads + self.writes
    }

    /// Distinct bytes touched, over every volume.
    pub fn footprint_bytes(&self) -> u64 {
        (self.touched.values())
            .flat_map(|m| m.iter().map(|(s, e)| e - s))
            .sum()
    }

    /// The requests-per-second timeline.
    pub fn rate(&self) -> Vec<RateBucket> {
        let w = self.rate_width_ns as f64 / 1e9;
        (self.rate.iter().enumerate())
            .map(|(i, &(reads, writes))| RateBucket {
                start_s: i as f64 * w,
                width_s: w,
                reads,
                writes,
            })
            .collect()
    }
}

/// Adds `[start, end)` to a set of disjoint, non-adjacent ranges.
fn touch(set: &mut BTreeMap<u64, u64>, mut start: u64, mut end: u64) {
    // A range starting before `start` that reaches it joins.
    if let Some((&s, &e)) = set.range(..=start).next_back() {
        if e >= start {
            start = s;
            end = end.max(e);
            set.remove(&s);
        }
    }
    // Ranges starting within `[start, end]` join.
    let inside: Vec<(u64, u64)> = set.range(start..=end).map(|(&s, &e)| (s, e)).collect();
    for (s, e) in inside {
        end = end.max(e);
        set.remove(&s);
    }
    set.insert(start, end);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: u64, off: u64, len: u64, op: Op, volume: u32) -> Request {
        Request {
            time_ns: t,
            offset_bytes: off,
            len_bytes: len,
            op,
            volume,
        }
    }

    #[test]
    fn counts_sizes_sequentiality_and_footprint() {
        let mut s = TraceStats::new();
        for r in [
            req(0, 0, 4096, Op::Write, 0),
            req(10, 4096, 4096, Op::Write, 0), // sequential
            req(20, 0, 512, Op::Read, 1),
            req(30, 2048, 8192, Op::Read, 0), // overlaps the first two
            req(2_500_000_000, 512, 1536, Op::Read, 1), // sequential on volume 1
        ] {
            s.add(&r);
        }
        assert_eq!((s.reads, s.writes), (3, 2));
        assert_eq!((s.read_bytes, s.write_bytes), (512 + 8192 + 1536, 8192));
        assert_eq!(s.sequential, 2);
        // Volume 0: [0, 10240); volume 1: [0, 2048).
        assert_eq!(s.footprint_bytes(), 10240 + 2048);
        assert_eq!(s.extent, BTreeMap::from([(0, 10240), (1, 2048)]));
        let b = size_bucket_bounds();
        let at = |n: u64| b.iter().position(|&u| n <= u).unwrap();
        assert_eq!(s.sizes[at(4096)], (0, 2));
        assert_eq!(s.sizes[at(512)], (1, 0));
        assert_eq!(s.sizes[at(8192)], (1, 0));
        assert_eq!(s.sizes[at(1536)], (1, 0));
        let rate = s.rate();
        assert_eq!(rate.len(), 3);
        assert_eq!((rate[0].reads, rate[0].writes), (2, 2));
        assert_eq!((rate[2].reads, rate[2].writes), (1, 0));
    }

    /// The footprint is the size of the union of the ranges, whatever their order.
    #[test]
    fn the_footprint_is_the_union_of_the_ranges() {
        let mut rng = crate::SplitMix64::new(0x2545_f491_4f6c_dd1d);
        let mut next = move || rng.next_u64();
        for _ in 0..100 {
            let mut set = BTreeMap::new();
            let mut bits = vec![false; 256];
            for _ in 0..40 {
                let s = next() % 250;
                let e = s + 1 + next() % 6;
                touch(&mut set, s, e);
                bits[s as usize..e as usize]
                    .iter_mut()
                    .for_each(|b| *b = true);
            }
            let union: u64 = set.iter().map(|(s, e)| e - s).sum();
            assert_eq!(union, bits.iter().filter(|&&b| b).count() as u64);
            // Disjoint and not adjacent.
            let v: Vec<(u64, u64)> = set.into_iter().collect();
            assert!(v.windows(2).all(|w| w[0].1 < w[1].0));
        }
    }

    #[test]
    fn a_long_trace_keeps_a_bounded_timeline() {
        let mut s = TraceStats::new();
        for t in 0..10_000u64 {
            s.add(&req(t * 1_000_000_000, 0, 512, Op::Read, 0));
        }
        let rate = s.rate();
        assert!(rate.len() <= RATE_BUCKETS_MAX);
        assert_eq!(rate.iter().map(|b| b.reads).sum::<u64>(), 10_000);
        assert_eq!(rate[0].width_s, 32.0);
    }
}

//! A mechanical hard disk in the DiskSim tradition: command overhead, a fitted seek curve,
//! rotational latency, zoned transfer rate and a segmented read-ahead cache.
//!
//! # Geometry
//!
//! The model does not need the drive's real cylinder count (data sheets stopped publishing it);
//! it derives one from what they do publish. Each cylinder holds `heads` tracks and a track takes
//! one revolution to read, so at sustained rate `r` a cylinder holds `heads * rev * r` bytes. With
//! the rate falling linearly (or in `zones` equal steps) from `bytes_per_sec_outer` at cylinder 0
//! to `bytes_per_sec_inner` at the last cylinder, the capacity fixes the number of cylinders. A
//! byte offset maps to a continuous cylinder position `x`; `floor(x)` is the cylinder, the
//! fraction of `x` says which track of the cylinder and where on it. Reading from `x0` to `x1`
//! takes exactly `(x1 - x0) * heads * rev`: the sustained rate already includes head and cylinder
//! switches, so the model has no separate switch times.
//!
//! # Seek curve
//!
//! A seek of `d >= 1` cylinders takes `a*sqrt(d-1) + b*(d-1) + c` (Ruemmler and Wilkes' shape,
//! as DiskSim's three-point fit): `c` is the single-track time, the curve passes through the
//! full-stroke time at the largest distance, and `a`, `b` are chosen so that the *mean over all
//! seeks* equals the data sheet's average. Drive vendors define the average seek as "the weighted
//! average of all possible seek combinations": distance `n` weighted by `max + 1 - n`, which is
//! the distribution of `|i - j|` for two uniformly random cylinders (mean `max/3`). We fit to that
//! exact mean, not to `seek(max/3) = average`: the curve is concave, so the latter would make the
//! mean seek several percent shorter than published. A write pays `seek_ms_write_extra` more on
//! any non-zero seek (writes settle more tightly; data sheets give a separate write average).
//!
//! Because outer cylinders hold more bytes, seeks between uniformly random *byte offsets* are
//! slightly shorter on average than seeks between random cylinders (under 1 % for the drives in
//! [`Drive`](super::Drive)); both are tested.
//!
//! # Rotation
//!
//! [`Rotation::Angular`] (the default) follows the platter: its angle is a function of simulated
//! time, the target sector's angle a function of its position on the track, so back-to-back
//! sequential transfers lose nothing and a request that arrives just too late loses a whole
//! revolution. [`Rotation::Random`] draws the latency uniformly from `[0, rev)` with the seeded
//! generator; [`Rotation::Expected`] always charges half a revolution. All three are
//! deterministic.
//!
//! # Streaming and cache
//!
//! A command that starts exactly where the previous media transfer ended, and that was submitted
//! no later than that transfer's end (it was queued, as with NCQ and a write-back cache), continues
//! the transfer with no overhead, seek or rotation. After a read miss the drive keeps reading
//! ahead into a cache segment at media speed (filling the rest of the segment, and at least half
//! of it) until the next command needs the head; a read whose
//! first byte has already been read ahead is a hit and costs the command overhead plus the
//! interface transfer, or the wait for the read-ahead to reach its last byte, whichever is later.
//! A write invalidates cached data it overlaps. Write-back caching of random writes is not
//! modelled: a write completes when it is on the platter.

use std::sync::Arc;

use super::{Disk, DiskIo, DiskParamError, Service};
use crate::rng::SplitMix64;
use crate::Op;

/// How the rotational latency of a positioned access is found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Rotation {
    /// From the platter's angle at the time the seek ends and the target sector's angle.
    #[default]
    Angular,
    /// Uniform in `[0, one revolution)`, drawn from the drive's seeded generator.
    Random,
    /// Always half a revolution (the expected value).
    Expected,
}

/// The figures that describe a hard disk. Units are in the names; `_ms` fields are
/// milliseconds as data sheets give them.
#[derive(Clone, Debug, PartialEq)]
pub struct HddParams {
    /// Model number or label.
    pub name: String,
    /// Usable capacity in bytes.
    pub capacity_bytes: u64,
    /// Spindle speed in revolutions per minute.
    pub rpm: u32,
    /// Recording surfaces (heads); with the rates and capacity it fixes the cylinder count.
    pub heads: u32,
    /// Single-track (track-to-track) read seek.
    pub seek_ms_track_to_track: f64,
    /// Average read seek, as defined by the vendors (mean over all seek distances).
    pub seek_ms_avg: f64,
    /// Full-stroke read seek.
    pub seek_ms_full_stroke: f64,
    /// Added to every non-zero seek of a write (average write seek minus average read seek).
    pub seek_ms_write_extra: f64,
    /// Sustained media rate at the outermost cylinder.
    pub bytes_per_sec_outer: u64,
    /// Sustained media rate at the innermost cylinder.
    pub bytes_per_sec_inner: u64,
    /// 0: the rate falls linearly with the cylinder; `n >= 1`: in `n` steps of equal cylinder
    /// count, the first at the outer rate, the last at the inner rate.
    pub zones: u32,
    /// Command processing time charged to every command, hit or miss.
    pub overhead_ms: f64,
    /// Host interface rate, used for cache hits.
    pub interface_bytes_per_sec: u64,
    /// Cache size; 0 disables the read-ahead cache.
    pub cache_bytes: u64,
    /// Number of cache segments (each holds one sequential stream); 0 disables the cache.
    pub cache_segments: u32,
    /// Keep reading ahead after a read miss (otherwise the cache only holds what was read).
    pub read_ahead: bool,
    /// How rotational latency is found.
    pub rotation: Rotation,
}

impl HddParams {
    /// The same drive with another rotational latency mode.
    pub fn with_rotation(mut self, rotation: Rotation) -> HddParams {
        self.rotation = rotation;
        self
    }

    /// The same drive with its cache disabled.
    pub fn without_cache(mut self) -> HddParams {
        self.cache_bytes = 0;
        self.cache_segments = 0;
        self.read_ahead = false;
        self
    }

    /// One revolution in milliseconds (8.33 ms at 7200 rpm).
    pub fn revolution_ms(&self) -> f64 {
        60_000.0 / f64::from(self.rpm)
    }
}

/// Most zones a stepped zone table may have.
const ZONES_MAX: u32 = 1024;
/// Most cache segments (the cache is searched linearly).
const CACHE_SEGMENTS_MAX: u32 = 256;

/// A simulated hard disk: immutable derived model (shared between clones) plus mutable state.
#[derive(Clone, Debug)]
pub struct Hdd {
    model: Arc<HddModel>,
    state: HddState,
}

#[derive(Debug)]
struct HddModel {
    params: HddParams,
    geometry: Geometry,
    seek: SeekCurve,
    rev_ns: f64,
    /// Time to read one whole cylinder at the sustained rate: `heads * rev_ns`.
    cylinder_ns: f64,
    overhead_ns: u64,
    write_extra_ns: u64,
    interface_ns_per_byte: f64,
    /// 0 when the cache is disabled.
    segment_bytes: u64,
}

#[derive(Debug)]
struct HddState {
    busy_until_ns: u64,
    /// Continuous cylinder position of the head.
    head_x: f64,
    /// Where the last media transfer ended, while the head is still there.
    stream_end: Option<u64>,
    rng: SplitMix64,
    segments: Vec<Segment>,
    /// `(start, reachable end)` of each segment, in the same order: the cache look-up scans
    /// this compact copy (16 bytes a segment instead of 48) because every read scans it.
    bounds: Bounds,
    /// The segments in order of last use (`last_used`), for the replacement on a read miss.
    recency: Recency,
    /// The segment reading ahead, if any (at most one is).
    active: Option<usize>,
    lru_clock: u64,
}

/// The cache segments in order of last use, as a doubly linked list over their indices: the
/// least recently used is at the head, the newest at the tail.
///
/// Why not a scan for the smallest use time: a read miss with a full cache replaced the least
/// recently used segment, found by comparing all sixteen use times, and where the minimum lies
/// is random, so the comparisons mispredicted about one and a half times per miss. Here
/// finding it is reading the head, and renewing a segment relinks two or three nodes. Use
/// times are all different (the clock ticks before each use), so the order is total and the
/// segment chosen is the one the scan chose. A write that invalidates segments renumbers
/// them: the list is then rebuilt from the use times (rare).
#[derive(Debug, Default)]
struct Recency {
    prev: Vec<u16>,
    next: Vec<u16>,
    head: u16,
    tail: u16,
}

impl Clone for Recency {
    fn clone(&self) -> Recency {
        Recency {
            prev: self.prev.clone(),
            next: self.next.clone(),
            head: self.head,
            tail: self.tail,
        }
    }
    /// Reuses the vectors (see `HddState::clone_from`; a derived `clone_from` would allocate).
    fn clone_from(&mut self, o: &Recency) {
        self.prev.clone_from(&o.prev);
        self.next.clone_from(&o.next);
        self.head = o.head;
        self.tail = o.tail;
    }
}

/// No segment (the end of the [`Recency`] list).
const NIL: u16 = u16::MAX;

impl Recency {
    /// Appends segment `prev.len()` (a new one) as the newest.
    fn push(&mut self) {
        let i = self.prev.len() as u16;
        debug_assert!(i < NIL);
        if i == 0 {
            self.head = 0;
        } else {
            self.next[usize::from(self.tail)] = i;
        }
        self.prev.push(if i == 0 { NIL } else { self.tail });
        self.next.push(NIL);
        self.tail = i;
    }

    /// Makes segment `i` the newest.
    #[inline]
    fn touch(&mut self, i: usize) {
        let i16 = i as u16;
        if i16 == self.tail {
            return;
        }
        let (p, n) = (self.prev[i], self.next[i]);
        // Not the tail: it has a successor.
        self.prev[usize::from(n)] = p;
        if p == NIL {
            self.head = n;
        } else {
            self.next[usize::from(p)] = n;
        }
        self.link_last(i16);
    }

    /// The least recently used segment, made the newest (it is about to be replaced).
    #[inline]
    fn renew_oldest(&mut self) -> usize {
        let i = self.head;
        if i != self.tail {
            let n = self.next[usize::from(i)];
            self.prev[usize::from(n)] = NIL;
            self.head = n;
            self.link_last(i);
        }
        usize::from(i)
    }

    /// Puts `i` (unlinked) after the tail.
    #[inline]
    fn link_last(&mut self, i: u16) {
        self.prev[usize::from(i)] = self.tail;
        self.next[usize::from(i)] = NIL;
        self.next[usize::from(self.tail)] = i;
        self.tail = i;
    }

    /// The list for segments whose use times are `last_used`, in their order.
    fn rebuild(&mut self, last_used: impl Iterator<Item = u64>) {
        let mut by_use: Vec<(u64, usize)> = last_used.enumerate().map(|(i, u)| (u, i)).collect();
        by_use.sort_unstable();
        self.prev.clear();
        self.next.clear();
        self.prev.resize(by_use.len(), NIL);
        self.next.resize(by_use.len(), NIL);
        for w in by_use.windows(2) {
            let (a, b) = (w[0].1, w[1].1);
            self.next[a] = b as u16;
            self.prev[b] = a as u16;
        }
        if let (Some(first), Some(last)) = (by_use.first(), by_use.last()) {
            self.head = first.1 as u16;
            self.tail = last.1 as u16;
        }
    }

    /// The segments from the least recently used to the newest (debug checks).
    fn order(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut i = if self.prev.is_empty() { NIL } else { self.head };
        while i != NIL && out.len() <= self.prev.len() {
            let back = out.last().map_or(NIL, |&p| p as u16);
            assert_eq!(self.prev[usize::from(i)], back, "recency links disagree");
            out.push(usize::from(i));
            i = self.next[usize::from(i)];
        }
        if let Some(&last) = out.last() {
            assert_eq!(usize::from(self.tail), last, "the recency list's tail");
        }
        out
    }
}

/// One cache segment: bytes `start..filled_end` were in the cache at `fill_ns`; while `active`,
/// read-ahead keeps adding bytes at media speed up to `limit_end`.
#[derive(Clone, Debug)]
struct Segment {
    start: u64,
    filled_end: u64,
    /// `x_of(filled_end)`, kept because every look-up of an active segment needs it and
    /// it is known whenever `filled_end` changes (a square root saved per I/O).
    filled_x: f64,
    fill_ns: u64,
    limit_end: u64,
    active: bool,
    last_used: u64,
}

impl Segment {
    /// The segment's start and the end its bytes can reach (read-ahead included).
    fn bounds(&self) -> (u64, u64) {
        let reachable = if self.active {
            self.limit_end
        } else {
            self.filled_end
        };
        (self.start, reachable)
    }
}

/// `(start, reachable end)` of each cache segment, in the segments' order: the cache look-up
/// scans this compact copy (16 bytes a segment instead of a whole [`Segment`]) on every read.
///
/// Beside it, when sector numbers fit in 32 bits (drives up to 2 TiB), a coarse copy in sectors
/// (start rounded down, end rounded up), in groups of 16 padded with entries that hold nothing.
/// A segment whose bounds cover a request also covers it in sectors, so the coarse pass finds
/// every candidate (and some more, which the exact bounds then turn down), and the answer is
/// the same. Why: the coarse pass over a group is written so that the compiler turns it into a
/// few vector comparisons (four 32-bit lanes at a time, branch-free), where the exact pass
/// compared two 64-bit numbers per segment one by one; the look-up was a fifth of the disk
/// model's time.
#[derive(Debug)]
struct Bounds {
    exact: Vec<(u64, u64)>,
    /// Whether the coarse copy is kept.
    coarse: bool,
    /// First sector of each segment, then `u32::MAX` up to a multiple of 16.
    sec_start: Vec<u32>,
    /// End sector (rounded up) of each segment, then 0 up to a multiple of 16.
    sec_reach: Vec<u32>,
}

impl Clone for Bounds {
    fn clone(&self) -> Bounds {
        Bounds {
            exact: self.exact.clone(),
            coarse: self.coarse,
            sec_start: self.sec_start.clone(),
            sec_reach: self.sec_reach.clone(),
        }
    }
    /// Reuses the vectors (see `HddState::clone_from`).
    fn clone_from(&mut self, o: &Bounds) {
        self.exact.clone_from(&o.exact);
        self.coarse = o.coarse;
        self.sec_start.clone_from(&o.sec_start);
        self.sec_reach.clone_from(&o.sec_reach);
    }
}

impl Bounds {
    fn new(capacity_bytes: u64) -> Bounds {
        Bounds {
            exact: Vec::new(),
            coarse: capacity_bytes.div_ceil(512) < u64::from(u32::MAX),
            sec_start: Vec::new(),
            sec_reach: Vec::new(),
        }
    }

    fn set(&mut self, i: usize, b: (u64, u64)) {
        self.exact[i] = b;
        if self.coarse {
            self.sec_start[i] = (b.0 / 512) as u32;
            self.sec_reach[i] = b.1.div_ceil(512) as u32;
        }
    }

    fn push(&mut self, b: (u64, u64)) {
        self.exact.push(b);
        if self.coarse && self.sec_start.len() < self.exact.len() {
            self.sec_start.resize(self.sec_start.len() + 16, u32::MAX);
            self.sec_reach.resize(self.sec_reach.len() + 16, 0);
        }
        self.set(self.exact.len() - 1, b);
    }

    fn rebuild(&mut self, bounds: impl Iterator<Item = (u64, u64)>) {
        self.exact.clear();
        self.sec_start.clear();
        self.sec_reach.clear();
        for b in bounds {
            self.push(b);
        }
    }

    /// The first segment whose bounds cover `off..end` and for which `valid` holds.
    fn first_holding(
        &self,
        off: u64,
        end: u64,
        mut valid: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        if !self.coarse {
            // Bit j for segment j of a group of 64, built from the last segment down (a
            // constant shift per segment instead of a variable one), branch-free (an early-exit
            // scan mispredicted on nearly every segment).
            for (c, chunk) in self.exact.chunks(64).enumerate() {
                let mut mask = 0u64;
                for &(start, reachable) in chunk.iter().rev() {
                    mask = (mask << 1) | u64::from((start <= off) & (end <= reachable));
                }
                while mask != 0 {
                    let i = c * 64 + mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    if valid(i) {
                        return Some(i);
                    }
                }
            }
            return None;
        }
        let (off_sec, end_sec) = ((off / 512) as u32, end.div_ceil(512) as u32);
        let groups = self
            .sec_start
            .chunks_exact(16)
            .zip(self.sec_reach.chunks_exact(16));
        for (c, (starts, reaches)) in groups.enumerate() {
            let starts: &[u32; 16] = starts.try_into().expect("groups of 16");
            let reaches: &[u32; 16] = reaches.try_into().expect("groups of 16");
            let mut mask = 0u32;
            for j in 0..16 {
                mask |= u32::from((starts[j] <= off_sec) & (end_sec <= reaches[j])) << j;
            }
            while mask != 0 {
                let i = c * 16 + mask.trailing_zeros() as usize;
                mask &= mask - 1;
                let (start, reachable) = self.exact[i];
                if start <= off && end <= reachable && valid(i) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Debug check: the coarse copy mirrors the exact bounds.
    fn assert_coarse(&self) {
        if !self.coarse {
            return;
        }
        let n = self.exact.len();
        assert_eq!(
            self.sec_start.len(),
            n.div_ceil(16) * 16,
            "coarse bounds' length"
        );
        for (i, &(s, r)) in self.exact.iter().enumerate() {
            assert_eq!(
                self.sec_start[i],
                (s / 512) as u32,
                "coarse start of segment {i}"
            );
            assert_eq!(
                self.sec_reach[i],
                r.div_ceil(512) as u32,
                "coarse end of segment {i}"
            );
        }
        assert!(self.sec_start[n..].iter().all(|&s| s == u32::MAX));
        assert!(self.sec_reach[n..].iter().all(|&r| r == 0));
    }
}

impl Clone for HddState {
    fn clone(&self) -> HddState {
        HddState {
            busy_until_ns: self.busy_until_ns,
            head_x: self.head_x,
            stream_end: self.stream_end,
            rng: self.rng.clone(),
            segments: self.segments.clone(),
            bounds: self.bounds.clone(),
            recency: self.recency.clone(),
            active: self.active,
            lru_clock: self.lru_clock,
        }
    }
    /// Reuses this state's vectors (`estimate` runs on a scratch copy, up to 32 times per
    /// dispatch under SPTF: no allocation each time).
    fn clone_from(&mut self, o: &HddState) {
        self.busy_until_ns = o.busy_until_ns;
        self.head_x = o.head_x;
        self.stream_end = o.stream_end;
        self.rng = o.rng.clone();
        self.segments.clone_from(&o.segments);
        self.bounds.clone_from(&o.bounds);
        self.recency.clone_from(&o.recency);
        self.active = o.active;
        self.lru_clock = o.lru_clock;
    }
}

thread_local! {
    /// Scratch state for [`Hdd::estimate`] (what-if runs of the model that must not change the
    /// drive).
    static SCRATCH: std::cell::RefCell<Option<HddState>> = const { std::cell::RefCell::new(None) };
}

impl HddState {
    /// Debug check: the compact bounds and the active index mirror the segments.
    fn assert_index(&self, geometry: &Geometry) {
        if cfg!(debug_assertions) {
            let b: Vec<(u64, u64)> = self.segments.iter().map(Segment::bounds).collect();
            assert_eq!(b, self.bounds.exact, "cache bounds out of date");
            self.bounds.assert_coarse();
            let order = self.recency.order();
            let mut all = order.clone();
            all.sort_unstable();
            assert!(
                all.iter().copied().eq(0..self.segments.len()),
                "the recency list holds every segment once: {order:?}"
            );
            assert!(
                order
                    .windows(2)
                    .all(|w| self.segments[w[0]].last_used < self.segments[w[1]].last_used),
                "the recency list is in order of last use"
            );
            for s in &self.segments {
                assert_eq!(
                    s.filled_x.to_bits(),
                    geometry.x_of(s.filled_end).to_bits(),
                    "cached position of a segment's end out of date"
                );
            }
            let a: Vec<usize> = (0..self.segments.len())
                .filter(|&i| self.segments[i].active)
                .collect();
            assert_eq!(a, self.active.into_iter().collect::<Vec<_>>());
        }
    }
}

impl Hdd {
    /// Check `params`, fit the seek curve and build an idle drive at time 0 with its head on
    /// cylinder 0 and an empty cache. `seed` drives [`Rotation::Random`].
    pub fn new(params: HddParams, seed: u64) -> Result<Hdd, DiskParamError> {
        let model = HddModel::new(params)?;
        let state = HddState {
            busy_until_ns: 0,
            head_x: 0.0,
            stream_end: None,
            rng: SplitMix64::new(seed),
            segments: Vec::with_capacity(model.params.cache_segments as usize),
            bounds: Bounds::new(model.params.capacity_bytes),
            recency: Recency::default(),
            active: None,
            lru_clock: 0,
        };
        Ok(Hdd {
            model: Arc::new(model),
            state,
        })
    }

    /// The parameters the drive was built from.
    pub fn params(&self) -> &HddParams {
        &self.model.params
    }

    /// Number of cylinders derived from capacity, heads, rpm and rates.
    pub fn cylinders(&self) -> u64 {
        self.model.geometry.cylinders
    }

    /// The cylinder holding byte `offset_bytes`.
    pub fn cylinder_of(&self, offset_bytes: u64) -> u64 {
        self.model.geometry.cylinder_of(offset_bytes)
    }

    /// The first byte of cylinder `cylinder`.
    ///
    /// # Panics
    /// If `cylinder >= self.cylinders()`.
    pub fn offset_of_cylinder(&self, cylinder: u64) -> u64 {
        let g = &self.model.geometry;
        assert!(
            cylinder < g.cylinders,
            "cylinder {cylinder} beyond {}",
            g.cylinders
        );
        g.offset_at_ceil(cylinder as f64)
    }

    /// Read seek time over `distance` cylinders (0 for 0).
    pub fn seek_ns(&self, distance: u64) -> u64 {
        self.model.seek.at(distance).round() as u64
    }

    /// Coefficients `(a, b, c)` of the fitted seek curve `a*sqrt(d-1) + b*(d-1) + c`, in ms.
    pub fn seek_curve_ms(&self) -> (f64, f64, f64) {
        let s = &self.model.seek;
        (s.a_ns / 1e6, s.b_ns / 1e6, s.c_ns / 1e6)
    }

    /// One revolution in nanoseconds (not rounded).
    pub fn revolution_ns(&self) -> f64 {
        self.model.rev_ns
    }

    /// Sustained media rate at byte `offset_bytes`.
    pub fn sustained_bytes_per_sec_at(&self, offset_bytes: u64) -> f64 {
        let g = &self.model.geometry;
        g.bytes_per_cylinder_at(g.x_of(offset_bytes)) / (self.model.cylinder_ns / 1e9)
    }

    /// The cylinder the head is over now (read-ahead in progress not counted).
    pub fn head_cylinder(&self) -> u64 {
        self.state.head_x.floor() as u64
    }
}

impl Disk for Hdd {
    fn capacity_bytes(&self) -> u64 {
        self.model.params.capacity_bytes
    }

    fn busy_until_ns(&self) -> u64 {
        self.state.busy_until_ns
    }

    fn estimate(&self, now_ns: u64, io: DiskIo) -> Service {
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            let state = match scratch.as_mut() {
                Some(st) => {
                    st.clone_from(&self.state);
                    st
                }
                None => scratch.insert(self.state.clone()),
            };
            self.model.serve(state, now_ns, io)
        })
    }

    fn submit(&mut self, now_ns: u64, io: DiskIo) -> Service {
        self.model.serve(&mut self.state, now_ns, io)
    }
}

impl HddModel {
    fn new(params: HddParams) -> Result<HddModel, DiskParamError> {
        let invalid = |param: &'static str, reason: &str| DiskParamError::Invalid {
            drive: params.name.clone(),
            param,
            reason: reason.to_string(),
        };
        let finite_nonneg = |x: f64| x.is_finite() && x >= 0.0;
        if params.capacity_bytes == 0 {
            return Err(invalid("capacity_bytes", "must be positive"));
        }
        if params.rpm == 0 {
            return Err(invalid("rpm", "must be positive"));
        }
        if params.heads == 0 {
            return Err(invalid("heads", "must be positive"));
        }
        let (t1, avg, full) = (
            params.seek_ms_track_to_track,
            params.seek_ms_avg,
            params.seek_ms_full_stroke,
        );
        if !(finite_nonneg(t1) && t1 > 0.0 && t1 < avg && avg < full && full.is_finite()) {
            return Err(invalid(
                "seek_ms_*",
                "must satisfy 0 < track-to-track < average < full stroke",
            ));
        }
        if !finite_nonneg(params.seek_ms_write_extra) {
            return Err(invalid(
                "seek_ms_write_extra",
                "must be finite and not negative",
            ));
        }
        if params.bytes_per_sec_inner == 0
            || params.bytes_per_sec_inner > params.bytes_per_sec_outer
        {
            return Err(invalid(
                "bytes_per_sec_inner",
                "must be positive and at most the outer rate",
            ));
        }
        if params.zones > ZONES_MAX {
            return Err(invalid("zones", "must be at most 1024"));
        }
        if !finite_nonneg(params.overhead_ms) {
            return Err(invalid("overhead_ms", "must be finite and not negative"));
        }
        if params.interface_bytes_per_sec == 0 {
            return Err(invalid("interface_bytes_per_sec", "must be positive"));
        }
        if params.cache_segments > CACHE_SEGMENTS_MAX {
            return Err(invalid("cache_segments", "must be at most 256"));
        }
        let segment_bytes = if params.cache_bytes > 0 && params.cache_segments > 0 {
            params.cache_bytes / u64::from(params.cache_segments)
        } else {
            0
        };

        let rev_ns = 60e9 / f64::from(params.rpm);
        let cylinder_ns = f64::from(params.heads) * rev_ns;
        let geometry = Geometry::new(&params, cylinder_ns / 1e9);
        if geometry.cylinders < 3 {
            return Err(invalid("capacity_bytes", "gives fewer than 3 cylinders"));
        }
        let seek = SeekCurve::fit(t1, avg, full, geometry.cylinders - 1).ok_or_else(|| {
            DiskParamError::SeekCurve {
                drive: params.name.clone(),
                track_to_track_ms: t1,
                avg_ms: avg,
                full_stroke_ms: full,
            }
        })?;
        Ok(HddModel {
            overhead_ns: (params.overhead_ms * 1e6).round() as u64,
            write_extra_ns: (params.seek_ms_write_extra * 1e6).round() as u64,
            interface_ns_per_byte: 1e9 / params.interface_bytes_per_sec as f64,
            segment_bytes,
            params,
            geometry,
            seek,
            rev_ns,
            cylinder_ns,
        })
    }

    fn serve(&self, st: &mut HddState, now_ns: u64, io: DiskIo) -> Service {
        let end = io.end_bytes();
        assert!(
            end <= self.params.capacity_bytes,
            "request {io:?} beyond the capacity {} of {}",
            self.params.capacity_bytes,
            self.params.name
        );
        let start_ns = now_ns.max(st.busy_until_ns);
        // Submitted before the previous command finished: it was waiting in the drive's queue.
        let queued = now_ns <= st.busy_until_ns;

        if io.op == Op::Read && self.segment_bytes > 0 {
            if let Some(service) = self.serve_from_cache(st, now_ns, start_ns, io) {
                service.assert_consistent();
                return service;
            }
        }

        self.stop_read_ahead(st, start_ns);
        if io.op == Op::Write {
            let before = st.segments.len();
            st.segments
                .retain(|s| s.start >= end || s.filled_end.max(s.limit_end) <= io.offset_bytes);
            // (Most writes overlap no segment: then the copies stand as they are.)
            if st.segments.len() != before {
                st.bounds.rebuild(st.segments.iter().map(Segment::bounds));
                st.recency.rebuild(st.segments.iter().map(|s| s.last_used));
            }
            debug_assert!(st.segments.iter().all(|s| !s.active));
        }

        let g = &self.geometry;
        let x_start = g.x_of(io.offset_bytes);
        let x_end = g.x_of(end);
        let streaming = queued && st.stream_end == Some(io.offset_bytes);
        let (overhead_ns, seek_ns, rotation_ns) = if streaming {
            (0, 0, 0)
        } else {
            // `as u64` truncates, which is `floor` here (saturating at 0 below: the same u64);
            // it avoids a libm call per I/O.
            let from = u64_of(st.head_x);
            let to = u64_of(x_start);
            let distance = from.abs_diff(to);
            let mut seek_ns = round_u64(self.seek.at(distance));
            if io.op == Op::Write && distance > 0 {
                seek_ns += self.write_extra_ns;
            }
            let ready_ns = start_ns + self.overhead_ns + seek_ns;
            let rotation_ns = match self.params.rotation {
                Rotation::Angular => {
                    let platter = fract_nonneg(f64_of(ready_ns) / self.rev_ns);
                    let target = fract_nonneg(fract_nonneg(x_start) * f64::from(self.params.heads));
                    round_u64(wrap_unit(target - platter) * self.rev_ns)
                }
                Rotation::Random => round_u64(st.rng.next_f64() * self.rev_ns),
                Rotation::Expected => round_u64(self.rev_ns / 2.0),
            };
            (self.overhead_ns, seek_ns, rotation_ns)
        };
        let transfer_ns = round_u64((x_end - x_start) * self.cylinder_ns);
        let completion_ns = start_ns + overhead_ns + seek_ns + rotation_ns + transfer_ns;

        st.head_x = x_end;
        st.stream_end = Some(end);
        st.busy_until_ns = completion_ns;
        if io.op == Op::Read && self.segment_bytes > 0 {
            self.fill_segment(st, io.offset_bytes, end, x_end, completion_ns);
        }
        st.assert_index(&self.geometry);

        let service = Service {
            arrival_ns: now_ns,
            start_ns,
            completion_ns,
            overhead_ns,
            seek_ns,
            rotation_ns,
            transfer_ns,
            cache_hit: false,
        };
        service.assert_consistent();
        service
    }

    /// Bytes of `seg` in the cache at time `t_ns` (read-ahead runs at media speed).
    fn valid_end(&self, seg: &Segment, t_ns: u64) -> u64 {
        if !seg.active || t_ns <= seg.fill_ns {
            return seg.filled_end;
        }
        let g = &self.geometry;
        let x = seg.filled_x + f64_of(t_ns - seg.fill_ns) / self.cylinder_ns;
        g.offset_at_floor(x).clamp(seg.filled_end, seg.limit_end)
    }

    fn serve_from_cache(
        &self,
        st: &mut HddState,
        now_ns: u64,
        start_ns: u64,
        io: DiskIo,
    ) -> Option<Service> {
        let end = io.end_bytes();
        // The first segment holding the request: its bounds cover it and its first byte is
        // already read (the rest may still be on its way). `valid_end` costs a square root, so
        // it runs only on the segments whose bounds cover the request, in order.
        let index = st.bounds.first_holding(io.offset_bytes, end, |i| {
            io.offset_bytes <= self.valid_end(&st.segments[i], start_ns)
        })?;
        let segment_bytes = self.segment_bytes;
        let capacity = self.params.capacity_bytes;
        let g = &self.geometry;
        let valid = self.valid_end(&st.segments[index], start_ns);
        let seg = &mut st.segments[index];
        let ready_ns = if end <= valid {
            start_ns
        } else {
            let to_read = g.x_of(end) - seg.filled_x;
            seg.fill_ns + ceil_u64(to_read * self.cylinder_ns)
        };
        let host_ns = round_u64(f64_of(io.len_bytes) * self.interface_ns_per_byte);
        let completion_ns = (start_ns + self.overhead_ns + host_ns).max(ready_ns);
        if seg.active {
            // Sequential reading continues: keep reading ahead of it.
            let ahead = self.read_ahead_bytes(io.len_bytes);
            seg.limit_end = seg.limit_end.max(end.saturating_add(ahead).min(capacity));
            seg.start = seg.start.max(seg.limit_end.saturating_sub(segment_bytes));
        }
        st.bounds.set(index, seg.bounds());
        st.lru_clock += 1;
        seg.last_used = st.lru_clock;
        st.recency.touch(index);
        st.busy_until_ns = completion_ns;
        Some(Service {
            arrival_ns: now_ns,
            start_ns,
            completion_ns,
            overhead_ns: self.overhead_ns,
            seek_ns: 0,
            rotation_ns: 0,
            transfer_ns: completion_ns - start_ns - self.overhead_ns,
            cache_hit: true,
        })
    }

    /// A command needs the head: read-ahead stops where it has got to, and the head is there.
    fn stop_read_ahead(&self, st: &mut HddState, t_ns: u64) {
        if let Some(i) = st.active.take() {
            let valid = self.valid_end(&st.segments[i], t_ns);
            let seg = &mut st.segments[i];
            if valid != seg.filled_end {
                st.stream_end = None;
            }
            let x = if valid == seg.filled_end {
                seg.filled_x
            } else {
                self.geometry.x_of(valid)
            };
            seg.filled_end = valid;
            seg.filled_x = x;
            seg.fill_ns = t_ns;
            seg.limit_end = valid;
            seg.active = false;
            st.bounds.set(i, seg.bounds());
            st.head_x = x;
        }
        debug_assert!(st.segments.iter().all(|s| !s.active));
    }

    /// How far to read ahead of a read of `len_bytes`: fill the rest of its segment, keeping the
    /// data just read, but at least half a segment so that large sequential reads stay ahead.
    fn read_ahead_bytes(&self, len_bytes: u64) -> u64 {
        let half = self.segment_bytes / 2;
        if len_bytes <= half {
            self.segment_bytes - len_bytes
        } else {
            half
        }
    }

    /// After a read miss: cache what was read and, with read-ahead, keep reading.
    fn fill_segment(
        &self,
        st: &mut HddState,
        start: u64,
        end: u64,
        end_x: f64,
        completion_ns: u64,
    ) {
        let capacity = self.params.capacity_bytes;
        let limit_end = if self.params.read_ahead {
            end.saturating_add(self.read_ahead_bytes(end - start))
                .min(capacity)
        } else {
            end
        };
        st.lru_clock += 1;
        let seg = Segment {
            start: start.max(limit_end.saturating_sub(self.segment_bytes)),
            filled_end: end,
            filled_x: end_x,
            fill_ns: completion_ns,
            limit_end,
            active: limit_end > end,
            last_used: st.lru_clock,
        };
        debug_assert!(
            st.active.is_none(),
            "read-ahead was stopped before the miss"
        );
        let active = seg.active;
        let bounds = seg.bounds();
        let index = if st.segments.len() < self.params.cache_segments as usize {
            st.segments.push(seg);
            st.bounds.push(bounds);
            st.recency.push();
            st.segments.len() - 1
        } else {
            // The least recently used (use times are all different) becomes the newest.
            let lru = st.recency.renew_oldest();
            st.segments[lru] = seg;
            st.bounds.set(lru, bounds);
            lru
        };
        if active {
            st.active = Some(index);
        }
    }
}

/// `x.fract()` for `x >= +0`, without the libm `trunc` call `f64::fract` is on a baseline x86-64
/// target (no SSE4.1 rounding instruction): the model takes two or three per positioned I/O.
/// Bit for bit: below 2^63 the integer part converts exactly both ways, above 2^52 `x` is an
/// integer already.
fn fract_nonneg(x: f64) -> f64 {
    debug_assert!(x >= 0.0, "fract_nonneg({x})");
    if x < 9.2e18 {
        x - (x as i64) as f64
    } else {
        x.fract()
    }
}

/// `x.rem_euclid(1.0)` for `-1 < x < 1` (the difference of two fractions), without the libm
/// `fmod` call: there `x % 1.0` is `x` itself, so only a negative `x` moves up by one.
fn wrap_unit(x: f64) -> f64 {
    debug_assert!(x > -1.0 && x < 1.0, "wrap_unit({x})");
    if x < 0.0 {
        x + 1.0
    } else {
        x
    }
}

/// `x.ceil() as u64` for `x >= 0`, without the libm `ceil` call (as [`fract_nonneg`]).
fn ceil_u64(x: f64) -> u64 {
    if (0.0..9.2e18).contains(&x) {
        let i = x as i64;
        (i + i64::from((i as f64) < x)) as u64
    } else {
        x.ceil() as u64
    }
}

/// `v as f64` for `v < 2^63` (every offset, time and length the model sees) through the signed
/// conversion, a single instruction: the unsigned one is a sequence of several on x86-64
/// without AVX-512, and the model converts a dozen times per I/O. Exact alike.
#[inline]
fn f64_of(v: u64) -> f64 {
    debug_assert!(v < 1 << 63, "f64_of({v})");
    v as i64 as f64
}

/// `x as u64` for `x < 2^63` through the signed conversion (as [`f64_of`]); negatives and NaN
/// give 0, as `as u64` does.
#[inline]
fn u64_of(x: f64) -> u64 {
    debug_assert!(x < 9.2e18 || x.is_nan(), "u64_of({x})");
    (x as i64).max(0) as u64
}

/// `x.round() as u64`, bit for bit (round half away from zero; negatives and NaN give 0,
/// values past `u64::MAX` saturate), without the libm call `f64::round` is on a baseline
/// x86-64 target (no SSE4.1 rounding instruction): the model rounds several times per I/O.
fn round_u64(x: f64) -> u64 {
    if x < 9.2e18 {
        // In signed arithmetic (one conversion instruction each way, see [`f64_of`]); a
        // negative `x` gives 0 through the `max`. Exact: for |x| < 2^52, `i as f64` and the
        // difference are exact; above, x is an integer. Branch-free: the fraction is as good
        // as random, a branch on it would mispredict.
        let i = x as i64;
        return (i + i64::from(x - i as f64 >= 0.5)).max(0) as u64;
    }
    // Huge, infinite or NaN (never in the model): the unsigned conversion saturates.
    let i = x as u64;
    i.saturating_add(u64::from(x - i as f64 >= 0.5))
}

/// Maps byte offsets to continuous cylinder positions and back.
#[derive(Debug)]
struct Geometry {
    capacity_bytes: u64,
    cylinders: u64,
    /// `cylinders as f64`.
    cylinders_f: f64,
    zoning: Zoning,
}

#[derive(Debug)]
enum Zoning {
    /// Bytes before position `x`: `beta*x - alpha*x^2` (bytes per cylinder fall linearly).
    Linear {
        alpha: f64,
        beta: f64,
        /// `beta * beta` and `4.0 * alpha`, for [`Geometry::x_of`] (the same products it
        /// would form, so the same results).
        beta_sq: f64,
        alpha4: f64,
    },
    /// Equal-width zones of constant bytes per cylinder.
    Stepped {
        cylinders_per_zone: f64,
        zones: Vec<Zone>,
    },
}

#[derive(Debug)]
struct Zone {
    start_x: f64,
    start_bytes: f64,
    bytes_per_cylinder: f64,
}

impl Geometry {
    fn new(params: &HddParams, cylinder_s: f64) -> Geometry {
        let outer = params.bytes_per_sec_outer as f64;
        let inner = params.bytes_per_sec_inner as f64;
        let capacity = params.capacity_bytes as f64;
        let rates: Vec<f64> = match params.zones {
            0 => Vec::new(),
            1 => vec![outer],
            n => (0..n)
                .map(|z| outer - (outer - inner) * f64::from(z) / f64::from(n - 1))
                .collect(),
        };
        let mean_rate = if rates.is_empty() {
            (outer + inner) / 2.0
        } else {
            rates.iter().sum::<f64>() / rates.len() as f64
        };
        let cylinders = (capacity / (cylinder_s * mean_rate)).round().max(1.0) as u64;
        let c = cylinders as f64;
        // Rounding the cylinder count changes bytes per cylinder by a relative 1/(2c) at most;
        // scale so the cylinders hold exactly the capacity.
        let zoning = if rates.is_empty() {
            let k = capacity / (c * mean_rate);
            let (alpha, beta) = (k * (outer - inner) / (2.0 * c), k * outer);
            Zoning::Linear {
                alpha,
                beta,
                beta_sq: beta * beta,
                alpha4: 4.0 * alpha,
            }
        } else {
            let cylinders_per_zone = c / rates.len() as f64;
            let k = capacity / (cylinders_per_zone * rates.iter().sum::<f64>());
            let mut start_bytes = 0.0;
            let zones = rates
                .iter()
                .enumerate()
                .map(|(i, &r)| {
                    let zone = Zone {
                        start_x: i as f64 * cylinders_per_zone,
                        start_bytes,
                        bytes_per_cylinder: k * r,
                    };
                    start_bytes += k * r * cylinders_per_zone;
                    zone
                })
                .collect();
            Zoning::Stepped {
                cylinders_per_zone,
                zones,
            }
        };
        Geometry {
            capacity_bytes: params.capacity_bytes,
            cylinders,
            cylinders_f: cylinders as f64,
            zoning,
        }
    }

    /// Continuous cylinder position of byte `offset`.
    ///
    /// Inline, with the stepped zoning's search out of line: a positioned I/O takes two or
    /// three of these, each a square root and a division long, and inlined the independent
    /// ones overlap instead of waiting behind a call each.
    #[inline(always)]
    fn x_of(&self, offset: u64) -> f64 {
        let b = f64_of(offset.min(self.capacity_bytes));
        let x = match &self.zoning {
            Zoning::Linear {
                beta,
                beta_sq,
                alpha4,
                ..
            } => {
                // Root of alpha x^2 - beta x + b = 0 in [0, c], in the cancellation-free form.
                let disc = (beta_sq - alpha4 * b).max(0.0);
                2.0 * b / (beta + disc.sqrt())
            }
            Zoning::Stepped { zones, .. } => Self::x_in_zones(zones, b),
        };
        x.clamp(0.0, self.cylinders_f)
    }

    /// [`Geometry::x_of`] of byte `b` under stepped zoning (before the clamp).
    #[inline(never)]
    fn x_in_zones(zones: &[Zone], b: f64) -> f64 {
        let i = zones
            .partition_point(|z| z.start_bytes <= b)
            .saturating_sub(1);
        let z = &zones[i];
        z.start_x + (b - z.start_bytes) / z.bytes_per_cylinder
    }

    /// Bytes before position `x`, not rounded.
    fn bytes_before(&self, x: f64) -> f64 {
        let x = x.clamp(0.0, self.cylinders_f);
        match &self.zoning {
            Zoning::Linear { alpha, beta, .. } => beta * x - alpha * x * x,
            Zoning::Stepped {
                cylinders_per_zone,
                zones,
            } => {
                let i = ((x / cylinders_per_zone) as usize).min(zones.len() - 1);
                let z = &zones[i];
                z.start_bytes + (x - z.start_x) * z.bytes_per_cylinder
            }
        }
    }

    fn offset_at_floor(&self, x: f64) -> u64 {
        // Truncation is `floor` for the u64 result (negatives saturate to 0 either way).
        u64_of(self.bytes_before(x)).min(self.capacity_bytes)
    }

    fn offset_at_ceil(&self, x: f64) -> u64 {
        (self.bytes_before(x).ceil() as u64).min(self.capacity_bytes)
    }

    fn cylinder_of(&self, offset: u64) -> u64 {
        (self.x_of(offset).floor() as u64).min(self.cylinders - 1)
    }

    fn bytes_per_cylinder_at(&self, x: f64) -> f64 {
        match &self.zoning {
            Zoning::Linear { alpha, beta, .. } => beta - 2.0 * alpha * x,
            Zoning::Stepped {
                cylinders_per_zone,
                zones,
            } => zones[((x / cylinders_per_zone) as usize).min(zones.len() - 1)].bytes_per_cylinder,
        }
    }
}

/// `seek(d) = a*sqrt(d-1) + b*(d-1) + c` for `d >= 1`, `seek(0) = 0`, in nanoseconds.
#[derive(Debug)]
struct SeekCurve {
    a_ns: f64,
    b_ns: f64,
    c_ns: f64,
}

impl SeekCurve {
    /// Fit through `seek(1) = t1`, `seek(max) = full` and the vendors' weighted mean
    /// `sum_n (max + 1 - n) seek(n) / sum_n (max + 1 - n) = avg`. `None` if the result is not
    /// increasing in `d`.
    fn fit(t1_ms: f64, avg_ms: f64, full_ms: f64, max_distance: u64) -> Option<SeekCurve> {
        assert!(max_distance >= 2);
        let m = max_distance as f64;
        // Weighted means of sqrt(n-1) and (n-1) over n = 1..=max with weights max+1-n.
        let weight_total = m * (m + 1.0) / 2.0;
        let mut sum_sqrt = 0.0;
        for n in 1..=max_distance {
            sum_sqrt += (max_distance + 1 - n) as f64 * ((n - 1) as f64).sqrt();
        }
        // sum over u = 0..m-1 of (m - u) u = m * sum(u) - sum(u^2).
        let sum_lin = m * (m - 1.0) * m / 2.0 - (m - 1.0) * m * (2.0 * m - 1.0) / 6.0;
        let (e_sqrt, e_lin) = (sum_sqrt / weight_total, sum_lin / weight_total);
        let u_max = m - 1.0;
        let (rise_full, rise_avg) = (full_ms - t1_ms, avg_ms - t1_ms);
        let det = u_max.sqrt() * e_lin - u_max * e_sqrt;
        let a = (rise_full * e_lin - u_max * rise_avg) / det;
        let b = (u_max.sqrt() * rise_avg - e_sqrt * rise_full) / det;
        let increasing = a >= 0.0 && (b >= 0.0 || a / (2.0 * u_max.sqrt()) + b >= 0.0);
        if !(a.is_finite() && b.is_finite() && increasing) {
            return None;
        }
        Some(SeekCurve {
            a_ns: a * 1e6,
            b_ns: b * 1e6,
            c_ns: t1_ms * 1e6,
        })
    }

    fn at(&self, distance: u64) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let u = f64_of(distance - 1);
        self.a_ns * u.sqrt() + self.b_ns * u + self.c_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::Drive;

    fn drive(d: Drive) -> Hdd {
        match d.params() {
            crate::disk::DriveParams::Hdd(p) => Hdd::new(p, 1).unwrap(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn geometry_round_trips_and_is_monotonic() {
        for d in Drive::ALL.iter().copied().filter(|d| d.is_hdd()) {
            let hdd = drive(d);
            let g = &hdd.model.geometry;
            let cap = hdd.capacity_bytes();
            assert!((g.x_of(cap) - g.cylinders as f64).abs() < 1e-6, "{d:?}");
            assert_eq!(g.x_of(0), 0.0);
            let mut last = -1.0;
            for i in 0..=1000u64 {
                let off = cap / 1000 * i;
                let x = g.x_of(off);
                assert!(x > last, "{d:?}");
                last = x;
                let back = g.bytes_before(x);
                assert!((back - off as f64).abs() < 2.0, "{d:?} {off} {back}");
            }
            for c in [0, 1, g.cylinders / 2, g.cylinders - 1] {
                assert_eq!(hdd.cylinder_of(hdd.offset_of_cylinder(c)), c, "{d:?}");
            }
        }
    }

    #[test]
    fn stepped_zones_hit_both_rates() {
        let mut p = match Drive::SeagateSt3500320as.params() {
            crate::disk::DriveParams::Hdd(p) => p,
            _ => unreachable!(),
        };
        p.zones = 16;
        let hdd = Hdd::new(p.clone(), 0).unwrap();
        let outer = hdd.sustained_bytes_per_sec_at(0);
        let inner = hdd.sustained_bytes_per_sec_at(p.capacity_bytes - 1);
        assert!(
            (outer / p.bytes_per_sec_outer as f64 - 1.0).abs() < 0.01,
            "{outer}"
        );
        assert!(
            (inner / p.bytes_per_sec_inner as f64 - 1.0).abs() < 0.01,
            "{inner}"
        );
        let g = &hdd.model.geometry;
        for i in 0..=1000u64 {
            let off = p.capacity_bytes / 1000 * i;
            assert!((g.bytes_before(g.x_of(off)) - off as f64).abs() < 2.0);
        }
    }

    #[test]
    fn round_u64_is_round_as_u64() {
        let mut r = crate::rng::SplitMix64::new(7);
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            -0.5,
            -1.7,
            0.49999999999999994,
            4503599627370495.5,
            4503599627370497.0,
            9.3e18,
            1.9e19,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
        ];
        for _ in 0..100_000 {
            let u = r.next_f64();
            xs.push(u);
            xs.push(u * 1e9);
            xs.push(u * 16_666_666.7);
            xs.push((u * 1e6).floor() + 0.5);
        }
        for x in xs {
            assert_eq!(round_u64(x), x.round() as u64, "{x:e}");
        }
    }

    #[test]
    fn the_recency_list_replaces_what_a_scan_of_use_times_would() {
        // Random uses, new segments, replacements and rebuilds, against the plain model: a
        // use time per segment, the replacement taking the smallest.
        let mut r = crate::rng::SplitMix64::new(5);
        let (mut list, mut used, mut clock) = (Recency::default(), Vec::<u64>::new(), 0u64);
        for step in 0..20_000 {
            clock += 1;
            match r.next_u64() % 8 {
                0 if used.len() < 16 => {
                    list.push();
                    used.push(clock);
                }
                1..=3 if !used.is_empty() => {
                    let oldest = (0..used.len()).min_by_key(|&i| used[i]).unwrap();
                    assert_eq!(list.renew_oldest(), oldest, "step {step}");
                    used[oldest] = clock;
                }
                4 if !used.is_empty() => {
                    // A write drops some segments; the rest are renumbered in order.
                    let keep = r.next_u64();
                    let mut i = 0;
                    used.retain(|_| {
                        i += 1;
                        keep >> (i % 64) & 1 == 1
                    });
                    list.rebuild(used.iter().copied());
                }
                _ if !used.is_empty() => {
                    let i = (r.next_u64() % used.len() as u64) as usize;
                    list.touch(i);
                    used[i] = clock;
                }
                _ => {}
            }
            let mut by_use: Vec<usize> = (0..used.len()).collect();
            by_use.sort_by_key(|&i| used[i]);
            assert_eq!(list.order(), by_use, "step {step}");
            let mut copy = Recency::default();
            copy.clone_from(&list);
            assert_eq!(copy.order(), by_use);
        }
    }

    #[test]
    fn libm_free_helpers_match_libm() {
        let mut r = crate::rng::SplitMix64::new(11);
        // (Not -0.0: `fract_nonneg` keeps its sign, libm gives +0.0; the model never has it.)
        let mut xs = vec![
            0.0,
            0.5,
            1.0,
            2.0 - f64::EPSILON,
            4503599627370495.5,
            4503599627370497.0,
            9.19e18,
            9.3e18,
            1e300,
            f64::MIN_POSITIVE,
        ];
        for _ in 0..100_000 {
            let u = r.next_f64();
            xs.extend([u, u * 1e9, u * 16_666_666.7, (u * 1e6).floor(), u * 2e12]);
        }
        for &x in &xs {
            assert_eq!(
                fract_nonneg(x).to_bits(),
                x.fract().to_bits(),
                "fract {x:e}"
            );
            assert_eq!(ceil_u64(x), x.ceil() as u64, "ceil {x:e}");
        }
        for w in xs.windows(2) {
            let d = fract_nonneg(w[0]) - fract_nonneg(w[1]);
            assert_eq!(
                wrap_unit(d).to_bits(),
                d.rem_euclid(1.0).to_bits(),
                "wrap {d:e}"
            );
        }
        assert_eq!(
            wrap_unit(-0.0).to_bits(),
            (-0.0f64).rem_euclid(1.0).to_bits()
        );
        assert_eq!(wrap_unit(-1e-300), (-1e-300f64).rem_euclid(1.0));
        assert_eq!(ceil_u64(f64::INFINITY), u64::MAX);
    }

    #[test]
    fn seek_curve_rejects_impossible_figures() {
        // An average almost at the full-stroke time needs a convex curve.
        assert!(SeekCurve::fit(1.0, 19.5, 20.0, 100_000).is_none());
        assert!(SeekCurve::fit(0.8, 8.5, 17.0, 100_000).is_some());
    }
}

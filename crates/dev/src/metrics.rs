//! What a served pool measures for `raidforge serve --metrics` (issue 25): per member device
//! bytes, I/Os, errors and a latency histogram, counted by a wrapper around each member handle
//! ([`MeteredMember`], installed through the pool's [`MemberWrap`], so replacements and
//! spares are metered too); and the pool's health read in one short look under the pool mutex
//! ([`PoolSnapshot`]). The exposition format itself (Prometheus / OpenMetrics text) and the
//! HTTP endpoint are the command line's (`raidforge/src/metrics`).
//!
//! On the I/O path a member I/O costs two clock reads and three relaxed atomic additions (the
//! latency bucket, the latency sum, the bytes or the error count); nothing is locked. The list
//! of metered devices takes a mutex only when a member is opened or wrapped and when a scrape
//! copies the list.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::pool::{MemberWrap, Pool};
use crate::serve_support::{RebuildInfo, SharedPool};
use crate::Member;

/// Upper bounds of the latency histograms' buckets, in nanoseconds (50 µs to 30 s; a member
/// I/O that takes longer than `--io-timeout`, 30 s by default, fails). The `+Inf` bucket
/// follows.
pub const LATENCY_BOUNDS_NS: [u64; 18] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
];

/// A latency histogram with fixed buckets ([`LATENCY_BOUNDS_NS`]) kept in atomics.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; LATENCY_BOUNDS_NS.len() + 1],
    sum_ns: AtomicU64,
}

/// A copy of a [`Histogram`] at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Upper bound of every bucket in seconds, without `+Inf`.
    pub bounds_s: Vec<f64>,
    /// Observations per bucket, not cumulative: one more than `bounds_s` (the `+Inf` bucket).
    pub counts: Vec<u64>,
    /// Sum of the observations, seconds.
    pub sum_s: f64,
}

impl HistogramSnapshot {
    /// Observations in all (what `_count` says).
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

impl Histogram {
    /// Counts one observation.
    pub fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        // `le` buckets: the first bound at or above the value.
        let i = LATENCY_BOUNDS_NS.partition_point(|&b| b < ns);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The counts now. Taken bucket by bucket while others may observe: the count is the sum
    /// of the buckets read, so `+Inf` and `_count` always agree.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds_s: LATENCY_BOUNDS_NS.iter().map(|&b| b as f64 / 1e9).collect(),
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum_s: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// One kind of I/O on one device: bytes moved, errors, and how long each I/O took (failed
/// ones included: a member that times out is slow, not quick).
#[derive(Debug, Default)]
pub struct IoMeter {
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
    pub latency: Histogram,
}

impl IoMeter {
    /// Records an I/O of `bytes` that started at `t0`.
    pub fn done(&self, t0: Instant, bytes: usize, ok: bool) {
        self.latency.observe(t0.elapsed());
        if ok {
            self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        } else {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What one member device did while served: a slot keeps its meter while the same device is
/// in it; a replacement (a spare taking a failed member's place) gets a meter of its own, so
/// the failed device's counts stay visible beside it.
#[derive(Debug)]
pub struct DeviceMeter {
    /// The member slot (index in the pool).
    pub slot: usize,
    /// The device as the member handle describes it (its path or NBD URI).
    pub device: String,
    pub read: IoMeter,
    pub write: IoMeter,
    pub flush: IoMeter,
}

/// A member handle that counts its I/O into a [`DeviceMeter`]. Everything else is the inner
/// member's.
pub struct MeteredMember {
    inner: Arc<dyn Member>,
    meter: Arc<DeviceMeter>,
}

impl Member for MeteredMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let t0 = Instant::now();
        let r = self.inner.read_at(buf, offset);
        self.meter.read.done(t0, buf.len(), r.is_ok());
        r
    }
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> std::io::Result<()> {
        let t0 = Instant::now();
        let r = self.inner.read_vectored_at(bufs, offset);
        let n = bufs.iter().map(|b| b.len()).sum();
        self.meter.read.done(t0, n, r.is_ok());
        r
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let t0 = Instant::now();
        let r = self.inner.write_at(buf, offset);
        self.meter.write.done(t0, buf.len(), r.is_ok());
        r
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
        let t0 = Instant::now();
        let r = self.inner.write_vectored_at(bufs, offset);
        let n = bufs.iter().map(|b| b.len()).sum();
        self.meter.write.done(t0, n, r.is_ok());
        r
    }
    fn flush(&self) -> std::io::Result<()> {
        let t0 = Instant::now();
        let r = self.inner.flush();
        self.meter.flush.done(t0, 0, r.is_ok());
        r
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn gone(&self) -> Option<String> {
        self.inner.gone()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn completes_in_memory(&self) -> bool {
        self.inner.completes_in_memory()
    }
    fn merges_writes(&self) -> bool {
        self.inner.merges_writes()
    }
    fn emulated_speed(&self) -> Option<crate::Speed> {
        self.inner.emulated_speed()
    }
    fn allocation(&self, offset: u64) -> crate::Allocation {
        self.inner.allocation(offset)
    }
}

/// The metered devices of one pool, in the order they were opened.
#[derive(Debug, Default)]
pub struct PoolMeters {
    devices: Mutex<Vec<Arc<DeviceMeter>>>,
}

impl PoolMeters {
    pub fn new() -> Arc<PoolMeters> {
        Arc::new(PoolMeters::default())
    }

    /// The wrap to open the pool with ([`Pool::open_wrapped`]): every member handle the pool
    /// opens from then on (replacements and spares included) is metered.
    pub fn wrap(self: &Arc<Self>) -> MemberWrap {
        let me = Arc::clone(self);
        Arc::new(move |slot, inner: Arc<dyn Member>| {
            let meter = Arc::new(DeviceMeter {
                slot,
                device: inner.describe(),
                read: IoMeter::default(),
                write: IoMeter::default(),
                flush: IoMeter::default(),
            });
            me.devices
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Arc::clone(&meter));
            Arc::new(MeteredMember { inner, meter }) as Arc<dyn Member>
        })
    }

    /// Every device metered so far, each with whether it is the newest in its slot (the
    /// device the pool holds there now, failed or not; the older ones were replaced).
    pub fn devices(&self) -> Vec<(Arc<DeviceMeter>, bool)> {
        let list = self
            .devices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        list.iter()
            .enumerate()
            .map(|(i, d)| {
                let newest = !list[i + 1..].iter().any(|later| later.slot == d.slot);
                (Arc::clone(d), newest)
            })
            .collect()
    }
}

/// A pool's health at one moment, for metrics: what `status` says about it, without the work
/// `status` does per cycle (this look is O(members + layout generations) under the pool
/// mutex, plus the fault-tolerance check `status` makes too).
#[derive(Clone, Debug)]
pub struct PoolSnapshot {
    /// "clean", "degraded", "rebuilding" or "failed": `status`'s word.
    pub state: &'static str,
    /// Member failures the pool survives now (`status`'s `fault_tolerance`).
    pub fault_tolerance: usize,
    pub capacity_bytes: u64,
    /// Bytes of the pool's capacity whose cycles are in the target layout (the rebuild's
    /// progress; the whole capacity when nothing needs rebuilding).
    pub rebuilt_bytes: u64,
    /// Per member slot: "active", "failed", "rebuilding" or "spare" (`status`'s words).
    pub members: Vec<&'static str>,
    /// Hot spares left.
    pub spares: usize,
    /// Lazy parity: stripes whose background parity is deferred, and the list's bound.
    pub deferred_parity: Option<(usize, usize)>,
    /// The write journal: ring bytes in use, ring bytes, records, commits, checkpoints.
    pub journal: Option<JournalUse>,
    /// Write-intent regions marked now (a pool without a journal).
    pub intent_regions_marked: Option<usize>,
    /// Logical ranges known lost, and their bytes.
    pub lost_ranges: usize,
    pub lost_bytes: u64,
    /// The background rebuild: running, and its (or the last one's) progress.
    pub rebuild: RebuildInfo,
    /// Rebuilds the healer started, and health events by kind (`None`: healer off).
    pub heal: Option<(u64, Vec<(String, u64)>)>,
}

/// A journal's use (see [`crate::journal::JournalStats`]).
#[derive(Clone, Copy, Debug)]
pub struct JournalUse {
    pub live_bytes: u64,
    pub ring_bytes: u64,
    pub records: u64,
    pub commits: u64,
    pub checkpoints: u64,
}

impl Pool {
    fn snapshot_locked(&self) -> PoolSnapshot {
        let oldest = self.oldest_generation_in_use();
        let cycles = self.geo.cycles();
        let capacity = self.capacity_bytes();
        let rebuilt_bytes = if cycles == 0 || self.state.all_clean() {
            capacity
        } else {
            (self.state.clean_cycles() * self.geo.data_per_cycle()).min(capacity)
        };
        let lazy = self.lazy.parity == raidcore::ParityPolicy::Lazy;
        PoolSnapshot {
            state: self.health(),
            fault_tolerance: self.state.fault_tolerance(&self.geo),
            capacity_bytes: capacity,
            rebuilt_bytes,
            members: (0..self.members.handles.len())
                .map(|i| self.member_state(i as layout::Disk, oldest))
                .collect(),
            spares: self.spares().len(),
            deferred_parity: lazy.then(|| (self.state.bpgl().len(), self.state.bpgl().capacity())),
            journal: self.wh.journal.as_ref().map(|j| {
                let s = j.stats();
                JournalUse {
                    live_bytes: s.live_bytes,
                    ring_bytes: j.ring_bytes(),
                    records: s.records,
                    commits: s.commits,
                    checkpoints: s.checkpoints,
                }
            }),
            intent_regions_marked: self.wh.intent.as_ref().map(|w| w.marked().len()),
            lost_ranges: self.file.desc.lost.len(),
            lost_bytes: self.file.desc.lost.iter().map(|l| l.length).sum(),
            rebuild: RebuildInfo::default(),
            heal: None,
        }
    }
}

impl PoolSnapshot {
    /// The served pool's snapshot: one look under the pool mutex, then the rebuild and healer
    /// records (each under its own short lock).
    pub fn of(sp: &SharedPool) -> Result<PoolSnapshot, crate::pool::PoolError> {
        let mut s = sp.with_pool(|p| Ok(p.snapshot_locked()))?;
        s.rebuild = sp.rebuild_info();
        s.heal = sp.heal_status().map(|h| {
            (
                h.rebuilds_started,
                h.events.into_iter().collect::<Vec<(String, u64)>>(),
            )
        });
        Ok(s)
    }

    /// Average member bytes per second the running (or last) rebuild wrote; 0 before any.
    pub fn rebuild_rate_bytes_per_sec(&self) -> f64 {
        match &self.rebuild.progress {
            Some(p) if p.elapsed_s > 0.0 => p.bytes_written as f64 / p.elapsed_s,
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_take_values_at_or_below_their_bound() {
        let h = Histogram::default();
        h.observe(Duration::from_nanos(50_000)); // exactly the first bound
        h.observe(Duration::from_nanos(50_001)); // just above: second bucket
        h.observe(Duration::from_millis(1)); // exactly 1 ms
        h.observe(Duration::from_secs(31)); // past the last bound: +Inf
        let s = h.snapshot();
        assert_eq!(s.counts.len(), LATENCY_BOUNDS_NS.len() + 1);
        assert_eq!(s.counts[0], 1);
        assert_eq!(s.counts[1], 1);
        assert_eq!(s.counts[4], 1, "{:?}", s.counts);
        assert_eq!(s.counts[LATENCY_BOUNDS_NS.len()], 1);
        assert_eq!(s.count(), 4);
        assert!((s.sum_s - (50e-6 + 50.001e-6 + 1e-3 + 31.0)).abs() < 1e-9);
        assert_eq!(s.bounds_s[0], 0.00005);
        assert_eq!(*s.bounds_s.last().unwrap(), 30.0);
    }

    #[test]
    fn a_metered_member_counts_bytes_errors_and_latency_per_device() {
        let meters = PoolMeters::new();
        let wrap = meters.wrap();
        let mem: Arc<dyn Member> = Arc::new(crate::MemMember::new(8192));
        let m = wrap(2, mem);
        m.write_at(&[1u8; 4096], 0).unwrap();
        let mut buf = [0u8; 4096];
        m.read_at(&mut buf, 4096).unwrap();
        let (a, b) = buf.split_at_mut(1000);
        m.read_vectored_at(&mut [a, b], 0).unwrap();
        // Past the end: an error, counted as such, with no bytes.
        assert!(m.read_at(&mut buf, 8000).is_err());
        m.flush().unwrap();
        let d = meters.devices();
        assert_eq!(d.len(), 1);
        let (dm, newest) = &d[0];
        assert!(newest);
        assert_eq!(dm.slot, 2);
        assert_eq!(dm.device, "memory");
        assert_eq!(dm.read.bytes.load(Ordering::Relaxed), 8192);
        assert_eq!(dm.read.errors.load(Ordering::Relaxed), 1);
        assert_eq!(dm.read.latency.snapshot().count(), 3);
        assert_eq!(dm.write.bytes.load(Ordering::Relaxed), 4096);
        assert_eq!(dm.write.latency.snapshot().count(), 1);
        assert_eq!(dm.flush.latency.snapshot().count(), 1);
        // A second device in the same slot is the newest there; the first is not.
        let _again = wrap(2, Arc::new(crate::MemMember::new(4096)));
        let _other = wrap(0, Arc::new(crate::MemMember::new(4096)));
        let newest: Vec<(usize, bool)> =
            meters.devices().iter().map(|(d, n)| (d.slot, *n)).collect();
        assert_eq!(newest, [(2, false), (2, true), (0, true)]);
    }
}

//! What a simulation run measures, in bounded memory.
//!
//! Response times go into a [`Histogram`] with log-linear buckets (the HdrHistogram idea): exact
//! below 128 ns, then 128 sub-buckets per power of two, so every recorded value is known to
//! within 0.8 % and the table has a fixed size (7,424 counters) however many values arrive. The
//! mean, the count, the minimum and the maximum are kept exactly.
//!
//! A run's result is a [`Report`]: one [`PhaseStats`] per phase of the run ([`Phase`]), per-disk
//! busy time and I/O counts ([`DiskStats`]), the coefficient of variation of the busy times, the
//! throughput and the rebuild's duration.

use layout::Disk;

/// Bits of linear sub-bucket resolution per power of two.
const SUB_BITS: u32 = 7;
/// Sub-buckets per power of two.
const SUB: u64 = 1 << SUB_BITS;
/// Buckets needed for every `u64`: `SUB` exact values, then `SUB` per exponent 7..=63.
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * SUB) as usize;

/// A histogram of `u64` values (nanoseconds here) in log-linear buckets: fixed memory, relative
/// error below `1 / 128`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // >= SUB_BITS
        let mantissa = (v >> (e - SUB_BITS)) - SUB; // 0..SUB
        (SUB + u64::from(e - SUB_BITS) * SUB + mantissa) as usize
    }

    /// The smallest value of bucket `i` and the bucket's width.
    fn bucket(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < SUB {
            return (i, 1);
        }
        let e = (i - SUB) / SUB + u64::from(SUB_BITS);
        let mantissa = (i - SUB) % SUB;
        let width = 1u64 << (e - u64::from(SUB_BITS));
        ((SUB + mantissa) * width, width)
    }

    /// Records one value.
    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Exact maximum (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Exact minimum (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// The `q`-quantile (`q` in `[0, 1]`): the midpoint of the bucket holding the value of rank
    /// `ceil(q * count)`, clamped to the exact minimum and maximum (and exactly those for the
    /// first and last ranks). 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        assert!((0.0..=1.0).contains(&q), "quantile {q} outside [0, 1]");
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        if rank == 1 {
            return self.min;
        }
        if rank == self.count {
            return self.max;
        }
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = Self::bucket(i);
                return (lo + width / 2).clamp(self.min, self.max);
            }
        }
        unreachable!("rank {rank} beyond count {}", self.count)
    }
}

/// The phases of a run, by the arrival time of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Before the failure (or the whole run when nothing fails).
    Normal,
    /// After the failure, before the rebuild starts (or for good, when it cannot run).
    Degraded,
    /// While the rebuild runs.
    Rebuilding,
    /// After the rebuild has finished.
    After,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 4] = [
        Phase::Normal,
        Phase::Degraded,
        Phase::Rebuilding,
        Phase::After,
    ];

    /// `normal`, `degraded`, `rebuilding`, `after`: the JSON keys.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Normal => "normal",
            Phase::Degraded => "degraded",
            Phase::Rebuilding => "rebuilding",
            Phase::After => "after",
        }
    }
}

/// Response times of the requests that arrived in one phase, in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseStats {
    /// Requests completed.
    pub count: u64,
    /// Mean response time.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl PhaseStats {
    /// Summarises a histogram of nanoseconds.
    pub fn from_histogram(h: &Histogram) -> PhaseStats {
        let ms = |ns: u64| ns as f64 / 1e6;
        PhaseStats {
            count: h.count(),
            mean_ms: h.mean() / 1e6,
            p50_ms: ms(h.quantile(0.5)),
            p99_ms: ms(h.quantile(0.99)),
            p999_ms: ms(h.quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }
}

/// What one member slot did over the run (a replacement continues its slot's counts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiskStats {
    /// Time the device spent serving requests (completion minus start), seconds.
    pub busy_s: f64,
    /// Member reads served.
    pub reads: u64,
    /// Member writes served.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Of the reads, those issued by the rebuild.
    pub rebuild_reads: u64,
    /// Of the writes, those issued by the rebuild.
    pub rebuild_writes: u64,
    /// Writes of metadata records (the deferred-parity list on the members), not counted in
    /// `writes`.
    pub meta_writes: u64,
}

/// The rebuild of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct RebuildReport {
    /// The member that failed.
    pub failed: Disk,
    /// Simulated time of the failure, seconds.
    pub fail_at_s: f64,
    /// When the rebuild started (None: it never started).
    pub start_s: Option<f64>,
    /// When every cycle had reached the target layout (None: it did not finish).
    pub end_s: Option<f64>,
    /// `end - start`.
    pub time_s: Option<f64>,
    /// The member replaced by a blank device for the rebuild (layouts without spare space).
    pub replaced: Option<Disk>,
    /// Bytes the rebuild wrote.
    pub bytes_written: u64,
    /// Rebuild plans completed.
    pub plans: u64,
    /// Why the rebuild could not run, when it could not (too many failures, data lost).
    pub error: Option<String>,
}

/// Which plan checker ran inside the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckMode {
    /// Every plan ran on raidcore's in-memory executor as well, every read was compared with a
    /// reference copy of the volume, and every cycle a write or rebuild touched was checked for
    /// parity consistency (debug builds, small arrays).
    MemArray,
    /// Every plan was checked with `Plan::validate` and for avoiding failed members (debug
    /// builds, arrays too large to hold in memory).
    Validate,
    /// Release build: plans are checked to avoid failed members only.
    Off,
}

impl CheckMode {
    /// `memarray`, `validate` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            CheckMode::MemArray => "memarray",
            CheckMode::Validate => "validate",
            CheckMode::Off => "off",
        }
    }
}

/// What lazy parity did in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LazyReport {
    /// Stripe deferrals recorded (a stripe deferred again while listed counts again).
    pub deferrals: u64,
    /// Flush plans completed.
    pub flush_plans: u64,
    /// Longest the list got.
    pub max_len: usize,
    /// Entries still listed at the end (0: the run ended idle and everything was flushed).
    pub left: usize,
    /// Flush plans started because the array was idle, and because the list was full or a
    /// member had failed.
    pub idle_flushes: u64,
    /// Flush plans started because the list was full or a member had failed.
    pub forced_flushes: u64,
    /// Records of the list written to the members ([`crate::LazyModel::Engine`]).
    pub records: u64,
}

/// One volume's response times per phase (see [`crate::exec::VolumeLayout`]).
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeStats {
    /// The volume.
    pub volume: u32,
    /// Per phase, in [`Phase::ALL`] order.
    pub phases: Vec<(Phase, PhaseStats)>,
}

impl VolumeStats {
    /// The stats of one phase.
    pub fn phase(&self, p: Phase) -> &PhaseStats {
        &self.phases[Phase::ALL
            .iter()
            .position(|&q| q == p)
            .expect("every phase")]
        .1
    }

    /// Requests of every phase together: count and mean response, ms.
    pub fn overall(&self) -> (u64, f64) {
        let n: u64 = self.phases.iter().map(|(_, s)| s.count).sum();
        let sum: f64 = self
            .phases
            .iter()
            .map(|(_, s)| s.mean_ms * s.count as f64)
            .sum();
        (n, if n == 0 { 0.0 } else { sum / n as f64 })
    }
}

/// Everything a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The scheme's description.
    pub scheme: String,
    /// Members (spares included).
    pub disks: usize,
    /// The drive model's name.
    pub drive: String,
    /// Chunk size, bytes.
    pub chunk_bytes: u64,
    /// Bytes of each member the array uses.
    pub member_bytes: u64,
    /// Usable capacity of the array, bytes.
    pub capacity_bytes: u64,
    /// Simulated time at the end of the run, seconds.
    pub sim_time_s: f64,
    /// Foreground requests completed.
    pub requests: u64,
    /// Requests refused by the planner (data lost after too many failures).
    pub requests_failed: u64,
    /// Trace lines skipped as malformed (`lenient`) or requests that cannot map onto the array
    /// (empty, or longer than the whole array).
    pub requests_skipped: u64,
    /// Trace requests merged into others before the replay (the block layer's merging of a
    /// queue-level trace), and pieces split off requests over the largest size: the trace
    /// held `requests + requests_failed + requests_skipped + requests_merged - requests_split`.
    pub requests_merged: u64,
    /// See `requests_merged`.
    pub requests_split: u64,
    /// Completed requests per second between the first arrival and the last completion.
    pub throughput_iops: f64,
    /// Response times per phase, in [`Phase::ALL`] order.
    pub phases: Vec<(Phase, PhaseStats)>,
    /// Per member slot.
    pub per_disk: Vec<DiskStats>,
    /// Coefficient of variation (standard deviation over mean) of `busy_s` over the members
    /// present at the end of the run.
    pub load_cov: f64,
    /// The rebuild, when a member failed.
    pub rebuild: Option<RebuildReport>,
    /// Member I/Os served (reads plus writes, foreground plus rebuild).
    pub member_ios: u64,
    /// Plans executed (foreground and rebuild, re-plans included).
    pub plans: u64,
    /// Plans re-planned (stale after an event, or hit by a failure mid-flight).
    pub replans: u64,
    /// Foreground plans taken from the executor's memo of raidcore's plans (translated from
    /// another cycle of the same layout generation) instead of a new call to the planner.
    pub plans_memoised: u64,
    /// Events processed by the executor.
    pub events: u64,
    /// The plan checker that ran.
    pub check: CheckMode,
    /// Lazy parity: what the deferred-parity list did (`None` under eager parity).
    pub lazy: Option<LazyReport>,
    /// Response time over simulated time, by arrival (see [`Timeline`]): buckets from 0 to
    /// at least the end of the run, their counts summing to `requests`.
    pub timeline: Vec<TimelinePoint>,
    /// The rebuild policy's bookkeeping (IDO, WorkOut, VDF, PRO; `None` without one).
    pub ido: Option<crate::exec::IdoReport>,
    /// Latent sector errors: what was injected, hit, repaired and lost (`None` without any).
    pub lse: Option<crate::exec::LseReport>,
    /// Response times per volume under a [`crate::exec::VolumeLayout`] (empty without one).
    pub volumes: Vec<VolumeStats>,
}

impl Report {
    /// The stats of one phase.
    pub fn phase(&self, p: Phase) -> &PhaseStats {
        &self
            .phases
            .iter()
            .find(|(q, _)| *q == p)
            .expect("every phase is reported")
            .1
    }

    /// `rebuild.time_s`, if the rebuild finished.
    pub fn rebuild_time_s(&self) -> Option<f64> {
        self.rebuild.as_ref().and_then(|r| r.time_s)
    }

    /// The markers of the timeline chart: the failure, the rebuild start when it differs
    /// from the failure, the rebuild end (seconds, label).
    pub fn markers(&self) -> Vec<(f64, String)> {
        let mut m = Vec::new();
        if let Some(r) = &self.rebuild {
            m.push((r.fail_at_s, format!("member {} fails", r.failed)));
            if let Some(s) = r.start_s.filter(|&s| s > r.fail_at_s) {
                m.push((s, "rebuild starts".to_string()));
            }
            if let Some(e) = r.end_s {
                m.push((e, "rebuild done".to_string()));
            }
        }
        m
    }

    /// Why the response-time curve of the timeline stops short of the rebuild's end, when it
    /// does (by more than one bucket): the last request arrived first, and the rebuild ran on
    /// without foreground load. `None` when the curve reaches the end of the rebuild.
    pub fn curve_end_note(&self) -> Option<String> {
        let end = self.rebuild.as_ref()?.end_s?;
        let last = self.timeline.iter().filter(|p| p.count > 0).last()?;
        let width = last.end_s - last.start_s;
        (last.end_s + width < end).then(|| {
            format!(
                "The response-time curve ends at {} s, the last request's arrival bucket: no \
                 request arrived after it, and the rebuild ran on alone until {} s.",
                fmt_s(last.end_s),
                fmt_s(end)
            )
        })
    }

    /// `raidforge sim --plot`: one SVG with two panels. Top: mean and 99th percentile
    /// response time per timeline bucket (by arrival; buckets without requests are left out)
    /// with the failure and the rebuild's start and end marked. Bottom: member I/Os per disk,
    /// foreground and rebuild.
    pub fn plot_svg(&self, title: &str) -> String {
        let with = |f: fn(&TimelinePoint) -> f64| -> Vec<(f64, f64)> {
            self.timeline
                .iter()
                .filter(|p| p.count > 0)
                .map(|p| ((p.start_s + p.end_s) / 2.0, f(p)))
                .collect()
        };
        let width_s = self.timeline.first().map_or(0.0, |p| p.end_s - p.start_s);
        let times = crate::svg::LineChart {
            title: format!("{title}: response time ({} s buckets)", fmt_s(width_s)),
            x_label: "simulated time by arrival (s)".into(),
            y_label: "response time (ms)".into(),
            series: vec![
                crate::svg::Series::line("mean", with(|p| p.mean_ms)),
                crate::svg::Series::line("p99", with(|p| p.p99_ms)),
            ],
            markers: self.markers(),
            notes: self.curve_end_note().into_iter().collect(),
            ..Default::default()
        };
        let fg = |d: &DiskStats| (d.reads + d.writes - d.rebuild_reads - d.rebuild_writes) as f64;
        let rb = |d: &DiskStats| (d.rebuild_reads + d.rebuild_writes) as f64;
        let mut series = vec![(
            "foreground".to_string(),
            self.per_disk.iter().map(fg).collect::<Vec<_>>(),
        )];
        if self.per_disk.iter().any(|d| rb(d) > 0.0) {
            series.push((
                "rebuild".to_string(),
                self.per_disk.iter().map(rb).collect(),
            ));
        }
        let load = crate::svg::BarChart {
            title: format!(
                "member I/Os per disk (busy-time CoV {:.1} %)",
                self.load_cov * 100.0
            ),
            x_label: "member disk".into(),
            y_label: "member I/Os".into(),
            categories: (0..self.per_disk.len()).map(|d| d.to_string()).collect(),
            series,
            ..Default::default()
        };
        crate::svg::stack(&[times.to_svg(), load.to_svg()])
    }
}

/// Response times over simulated time, in bounded memory: requests are counted in the bucket of
/// their *arrival* time; buckets start [`Timeline::FIRST_WIDTH_NS`] wide and, whenever the run
/// needs more than [`Timeline::MAX_BUCKETS`] of them, neighbours merge pairwise (the width
/// doubles). Each bucket keeps a count, an exact sum and a coarse log-linear histogram (16
/// sub-buckets per power of two: quantiles within 1/16 relative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeline {
    width_ns: u64,
    buckets: Vec<TimeBucket>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TimeBucket {
    count: u64,
    sum_ns: u128,
    /// Coarse histogram, allocated at the first value.
    hist: Option<Box<[u32]>>,
}

/// Sub-bucket bits of a timeline bucket's histogram.
const COARSE_BITS: u32 = 4;
const COARSE_SUB: u64 = 1 << COARSE_BITS;
const COARSE_BUCKETS: usize = (COARSE_SUB + (64 - COARSE_BITS as u64) * COARSE_SUB) as usize;

fn coarse_index(v: u64) -> usize {
    if v < COARSE_SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let mantissa = (v >> (e - COARSE_BITS)) - COARSE_SUB;
    (COARSE_SUB + u64::from(e - COARSE_BITS) * COARSE_SUB + mantissa) as usize
}

/// Smallest value and width of coarse bucket `i`.
fn coarse_bucket(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < COARSE_SUB {
        return (i, 1);
    }
    let e = (i - COARSE_SUB) / COARSE_SUB + u64::from(COARSE_BITS);
    let mantissa = (i - COARSE_SUB) % COARSE_SUB;
    let width = 1u64 << (e - u64::from(COARSE_BITS));
    ((COARSE_SUB + mantissa) * width, width)
}

impl TimeBucket {
    fn record(&mut self, v: u64) {
        self.count += 1;
        self.sum_ns += u128::from(v);
        let h = self
            .hist
            .get_or_insert_with(|| vec![0; COARSE_BUCKETS].into_boxed_slice());
        h[coarse_index(v)] += 1;
    }
    fn merge(&mut self, o: TimeBucket) {
        self.count += o.count;
        self.sum_ns += o.sum_ns;
        if let Some(oh) = o.hist {
            match self.hist.as_mut() {
                None => self.hist = Some(oh),
                Some(h) => h.iter_mut().zip(oh.iter()).for_each(|(a, b)| *a += b),
            }
        }
    }
    /// Midpoint of the bucket holding rank `ceil(q * count)` (0 when empty).
    fn quantile(&self, q: f64) -> u64 {
        let Some(h) = self.hist.as_ref() else {
            return 0;
        };
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in h.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                let (lo, w) = coarse_bucket(i);
                return lo + w / 2;
            }
        }
        unreachable!("rank beyond count")
    }
}

/// One bucket of [`Report::timeline`]: requests that arrived in `[start_s, end_s)`.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelinePoint {
    /// Bucket start, simulated seconds.
    pub start_s: f64,
    /// Bucket end, simulated seconds.
    pub end_s: f64,
    /// Requests completed that arrived in the bucket.
    pub count: u64,
    /// Their mean response time (0 when none).
    pub mean_ms: f64,
    /// Their 99th percentile response time (within 1/16; 0 when none).
    pub p99_ms: f64,
}

impl Default for Timeline {
    fn default() -> Timeline {
        Timeline::new()
    }
}

impl Timeline {
    /// Width of the buckets before any merge: 1 ms.
    pub const FIRST_WIDTH_NS: u64 = 1_000_000;
    /// Most buckets kept.
    pub const MAX_BUCKETS: usize = 256;

    /// An empty timeline.
    pub fn new() -> Timeline {
        Timeline {
            width_ns: Self::FIRST_WIDTH_NS,
            buckets: Vec::new(),
        }
    }

    /// Makes the buckets reach past `t_ns`, merging neighbours while too many are needed.
    pub fn extend_to(&mut self, t_ns: u64) {
        while t_ns / self.width_ns >= Self::MAX_BUCKETS as u64 {
            let old = std::mem::take(&mut self.buckets);
            let mut it = old.into_iter();
            while let Some(mut a) = it.next() {
                if let Some(b) = it.next() {
                    a.merge(b);
                }
                self.buckets.push(a);
            }
            self.width_ns *= 2;
        }
        let need = (t_ns / self.width_ns) as usize + 1;
        if self.buckets.len() < need {
            self.buckets.resize_with(need, TimeBucket::default);
        }
    }

    /// Records a request that arrived at `arrival_ns` and took `response_ns`.
    pub fn record(&mut self, arrival_ns: u64, response_ns: u64) {
        // (One division when the bucket exists already, as nearly always: a 64-bit division
        // is one of the slower instructions a replay runs per request.)
        let i = (arrival_ns / self.width_ns) as usize;
        if i < self.buckets.len() {
            self.buckets[i].record(response_ns);
            return;
        }
        self.extend_to(arrival_ns);
        let i = (arrival_ns / self.width_ns) as usize;
        self.buckets[i].record(response_ns);
    }

    /// Current bucket width, ns.
    pub fn width_ns(&self) -> u64 {
        self.width_ns
    }

    /// The buckets, from time 0.
    pub fn points(&self) -> Vec<TimelinePoint> {
        let w = self.width_ns;
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| TimelinePoint {
                start_s: (i as u64 * w) as f64 / 1e9,
                end_s: ((i as u64 + 1) * w) as f64 / 1e9,
                count: b.count,
                mean_ms: if b.count == 0 {
                    0.0
                } else {
                    b.sum_ns as f64 / b.count as f64 / 1e6
                },
                p99_ms: b.quantile(0.99) as f64 / 1e6,
            })
            .collect()
    }
}

fn fmt_s(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.3}")
    }
}

/// Coefficient of variation of `xs` (0 for fewer than two values or a zero mean).
pub fn cov(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    var.sqrt() / mean
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_u64_and_are_monotonic() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let i = Histogram::index(v);
            assert!(i < BUCKETS);
            assert!(i >= last || v > 100_000);
            last = i;
            let (lo, w) = Histogram::bucket(i);
            assert!(lo <= v && v - lo < w, "v {v} bucket {i} lo {lo} width {w}");
        }
    }

    #[test]
    fn quantiles_are_within_a_bucket() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 10_000);
        assert!((h.mean() - 5_000_500.0).abs() < 1e-6);
        for (q, exact) in [
            (0.5, 5_000_000.0),
            (0.99, 9_900_000.0),
            (0.999, 9_990_000.0),
        ] {
            let got = h.quantile(q) as f64;
            assert!((got / exact - 1.0).abs() < 0.01, "q {q}: {got} vs {exact}");
        }
        assert_eq!(h.quantile(1.0), 10_000_000);
        assert_eq!(h.quantile(0.0), 1000);
        assert_eq!(Histogram::new().quantile(0.5), 0);
    }

    #[test]
    fn timeline_merges_and_keeps_counts() {
        let mut t = Timeline::new();
        let mut n = 0;
        // Ten seconds of arrivals, 1 ms apart, each taking (i mod 10) + 1 ms.
        for i in 0..10_000u64 {
            t.record(i * 1_000_000, (i % 10 + 1) * 1_000_000);
            n += 1;
        }
        t.extend_to(12_000_000_000);
        let pts = t.points();
        assert!(pts.len() <= Timeline::MAX_BUCKETS);
        assert_eq!(pts.iter().map(|p| p.count).sum::<u64>(), n);
        assert_eq!(pts[0].start_s, 0.0);
        assert!(pts.last().unwrap().end_s > 12.0);
        // Width doubled from 1 ms until 256 buckets reach 12 s: 64 ms.
        assert_eq!(t.width_ns(), 64_000_000);
        let full = &pts[10];
        assert_eq!(full.count, 64);
        assert!((full.mean_ms - 5.5).abs() < 0.2, "{full:?}");
        assert!((full.p99_ms / 10.0 - 1.0).abs() < 1.0 / 16.0, "{full:?}");
        assert!(pts.iter().all(|p| p.count > 0 || p.start_s >= 10.0));
        for i in [0u64, 1, 15, 16, 17, 1000, 123_456_789, u64::MAX] {
            let (lo, w) = coarse_bucket(coarse_index(i));
            assert!(lo <= i && i - lo < w);
        }
    }

    #[test]
    fn cov_of_equal_values_is_zero() {
        assert_eq!(cov(&[2.0, 2.0, 2.0]), 0.0);
        assert!((cov(&[1.0, 3.0]) - 0.5).abs() < 1e-12);
    }
}

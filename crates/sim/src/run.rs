//! Workload specifications and one-call runs.
//!
//! A [`WorkloadSpec`] is what a user writes after `--workload`: `none` (an offline rebuild), a
//! synthetic description (`random:read=0.7:size=4K:iops=200`, `seq:size=1M:qd=4`,
//! `financial1`, `financial2`), or the path of a trace file. [`WorkloadSpec::open`] turns it
//! into a [`Source`], the streaming [`Workload`] the executor pulls requests from; traces are
//! read a line at a time, so memory does not depend on their length (a looped trace replays its
//! first pass from memory when that pass has at most 256 Ki requests and no skipped line, and
//! reopens the file otherwise). [`simulate`] builds the geometry and the executor and runs
//! everything.
//!
//! ## Synthetic specs
//!
//! `random` or `seq` (alias `sequential`), then `:key=value` pairs:
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `read` | fraction of reads, 0..1 | 1 |
//! | `size` | bytes (`4K`, `1M`, `512`), or a mix `4K@70,64K@30` (size@weight) | 4K |
//! | `iops` | Poisson arrivals at this mean rate | closed loop, `qd=1` |
//! | `burst` | `ON/OFF`: with `iops`, arrivals in bursts, mean ON and OFF periods in seconds | |
//! | `qd` | closed loop: requests kept outstanding | |
//! | `seq` | fraction of requests continuing the previous one | 0 (`random`), 1 (`seq`) |
//! | `requests` | number of requests | endless (needs a stop time) |
//! | `volumes` | volumes the requests spread over | 1 |
//! | `span` | bytes of each volume | the array's capacity |
//! | `align` | offsets are multiples of this | 4K |
//!
//! `financial1` and `financial2` are [`SyntheticConfig::financial1_synthetic`] and
//! [`SyntheticConfig::financial2_synthetic`] (synthetic stand-ins matching the published
//! statistics of the SPC Financial traces; label results from them as synthetic); they accept
//! the same keys to override a field, e.g. `financial1:requests=100000`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use layout::Scheme;
use raidcore::Geometry;

use crate::exec::{SimConfig, SimError, Simulator, Workload};
use crate::metrics::Report;
use crate::trace::{self, ReadOptions, Request, TraceError, TraceFormat, TraceReader};
use crate::workload::{Arrival, Offsets, SizeDist, Synthetic, SyntheticConfig};

/// What to replay.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSpec {
    /// Nothing (an offline rebuild).
    None,
    /// A synthetic workload. A `volume_capacity_bytes` of 0 means "the array's capacity".
    Synthetic(SyntheticConfig),
    /// A trace file.
    Trace {
        /// The file.
        path: PathBuf,
        /// Its format (`None`: detect from the first lines).
        format: Option<TraceFormat>,
    },
}

/// How a workload is read.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceOptions {
    /// Replay this many times faster (traces: timestamps divided by it; synthetic open-loop
    /// workloads: rate multiplied by it).
    pub speedup: f64,
    /// Skip malformed trace lines (and count them) instead of stopping at the first.
    pub lenient: bool,
    /// Stop after this many requests (over all loops).
    pub limit: Option<u64>,
    /// Replay a trace this many times back to back (1 = once).
    pub loops: u64,
    /// Whether a trace replay merges adjacent requests as the block layer would.
    pub merge: MergeChoice,
    /// Which of a trace's volumes are replayed, and whether they are folded into one.
    pub volumes: trace::Volumes,
}

/// When a trace replay merges adjacent requests as the kernel's block layer would before
/// issuing them ([`trace::Merge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeChoice {
    /// For queue-level traces only (blkparse `Q` events), with these settings (the default).
    Auto(trace::Merge),
    /// For every trace.
    On(trace::Merge),
    /// Never: every trace request is replayed as recorded.
    Off,
}

impl MergeChoice {
    /// The merging a trace of `format` gets.
    pub fn for_format(self, format: TraceFormat) -> Option<trace::Merge> {
        match self {
            MergeChoice::Auto(m) if format == TraceFormat::Blkparse(trace::BlkEvent::Queue) => {
                Some(m)
            }
            MergeChoice::On(m) => Some(m),
            MergeChoice::Auto(_) | MergeChoice::Off => None,
        }
    }
}

impl Default for MergeChoice {
    fn default() -> MergeChoice {
        MergeChoice::Auto(trace::Merge::default())
    }
}

impl Default for SourceOptions {
    fn default() -> SourceOptions {
        SourceOptions {
            speedup: 1.0,
            lenient: false,
            limit: None,
            loops: 1,
            merge: MergeChoice::default(),
            volumes: trace::Volumes::All,
        }
    }
}

/// A workload description that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("workload {spec:?}: {reason}")]
pub struct SpecError {
    /// The spec as given.
    pub spec: String,
    /// What is wrong.
    pub reason: String,
}

/// Parses a byte count as every command does (`raidcore::units::parse_size`): `K`, `M`, `G`,
/// `T`, `KiB`, ... powers of 1024, `KB`, `MB`, ... powers of 1000.
pub fn parse_bytes(s: &str) -> Option<u64> {
    raidcore::units::parse_size(s).ok()
}

impl WorkloadSpec {
    /// Parses a `--workload` value (see the module docs). A value that is not `none` and does
    /// not start with a synthetic name is a trace path; `format` names its format.
    pub fn parse(
        spec: &str,
        seed: u64,
        format: Option<TraceFormat>,
    ) -> Result<WorkloadSpec, SpecError> {
        let bad = |reason: String| SpecError {
            spec: spec.to_string(),
            reason,
        };
        let mut parts = spec.split(':');
        let head = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut cfg = match head.as_str() {
            "none" | "" => return Ok(WorkloadSpec::None),
            "random" | "seq" | "sequential" => SyntheticConfig {
                name: format!("{head}-synthetic"),
                seed,
                requests: None,
                read_fraction: 1.0,
                sequential_fraction: if head == "random" { 0.0 } else { 1.0 },
                sizes: SizeDist::Fixed(4096),
                volumes: 1,
                volume_capacity_bytes: 0,
                align_bytes: 4096,
                offsets: Offsets::Uniform,
                arrival: Arrival::ClosedLoop { queue_depth: 1 },
            },
            name => match SyntheticConfig::preset(name, seed) {
                Some(c) => c,
                None => {
                    return Ok(WorkloadSpec::Trace {
                        path: PathBuf::from(spec),
                        format,
                    })
                }
            },
        };
        let mut burst = None;
        for kv in parts {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(format!("{kv:?} is not key=value")))?;
            let num = |v: &str| -> Result<f64, SpecError> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| bad(format!("{k}={v}: not a non-negative number")))
            };
            let bytes = |v: &str| -> Result<u64, SpecError> {
                parse_bytes(v).ok_or_else(|| bad(format!("{k}={v}: not a byte count")))
            };
            match k {
                "read" => cfg.read_fraction = num(v)?,
                "seq" => cfg.sequential_fraction = num(v)?,
                "size" => {
                    cfg.sizes = if v.contains('@') || v.contains(',') {
                        let mut mix = Vec::new();
                        for item in v.split(',') {
                            let (b, w) = item.split_once('@').unwrap_or((item, "1"));
                            let w: u32 = w
                                .parse()
                                .map_err(|_| bad(format!("size weight {w:?} is not an integer")))?;
                            mix.push((bytes(b)?, w));
                        }
                        SizeDist::Mix(mix)
                    } else {
                        SizeDist::Fixed(bytes(v)?)
                    }
                }
                "iops" => {
                    cfg.arrival = Arrival::Poisson {
                        requests_per_sec: num(v)?,
                    }
                }
                "burst" => {
                    let (on, off) = v.split_once('/').ok_or_else(|| {
                        bad(format!("burst={v}: expected ON/OFF seconds, e.g. 0.5/2"))
                    })?;
                    burst = Some((num(on)?, num(off)?));
                }
                "qd" => {
                    cfg.arrival = Arrival::ClosedLoop {
                        queue_depth: v
                            .parse()
                            .map_err(|_| bad(format!("qd={v}: not an integer")))?,
                    }
                }
                "requests" => {
                    cfg.requests = Some(
                        v.parse()
                            .map_err(|_| bad(format!("requests={v}: not an integer")))?,
                    )
                }
                "volumes" => {
                    cfg.volumes = v
                        .parse()
                        .map_err(|_| bad(format!("volumes={v}: not an integer")))?
                }
                "span" => cfg.volume_capacity_bytes = bytes(v)?,
                "align" => cfg.align_bytes = bytes(v)?,
                "zipf" => cfg.offsets = Offsets::Zipf { theta: num(v)? },
                _ => return Err(bad(format!("unknown key {k:?}"))),
            }
        }
        if let Some((on_s, off_s)) = burst {
            match cfg.arrival {
                Arrival::Poisson { requests_per_sec } => {
                    cfg.arrival = Arrival::Bursty {
                        requests_per_sec,
                        on_s,
                        off_s,
                    }
                }
                _ => return Err(bad("burst= needs an open-loop rate (iops=)".into())),
            }
        }
        Ok(WorkloadSpec::Synthetic(cfg))
    }

    /// Opens the workload for an array of `capacity_bytes`.
    pub fn open(&self, capacity_bytes: u64, opts: &SourceOptions) -> Result<Source, SimError> {
        if !(opts.speedup.is_finite() && opts.speedup > 0.0) {
            return Err(SimError::Config("speedup must be positive".into()));
        }
        let kind = match self {
            WorkloadSpec::None => SourceKind::None,
            WorkloadSpec::Synthetic(c) => {
                let mut c = c.clone();
                if c.volume_capacity_bytes == 0 {
                    c.volume_capacity_bytes = capacity_bytes / c.align_bytes.max(1)
                        * c.align_bytes.max(1)
                        / u64::from(c.volumes.max(1));
                }
                match &mut c.arrival {
                    Arrival::Poisson { requests_per_sec } => *requests_per_sec *= opts.speedup,
                    Arrival::Bursty {
                        requests_per_sec,
                        on_s,
                        off_s,
                    } => {
                        *requests_per_sec *= opts.speedup;
                        *on_s /= opts.speedup;
                        *off_s /= opts.speedup;
                    }
                    Arrival::ClosedLoop { .. } => {}
                }
                let closed = match c.arrival {
                    Arrival::ClosedLoop { queue_depth } => Some(queue_depth),
                    Arrival::Poisson { .. } | Arrival::Bursty { .. } => None,
                };
                SourceKind::Synthetic {
                    gen: Box::new(c.generator()?),
                    closed,
                }
            }
            WorkloadSpec::Trace { path, format } => {
                let mut options = ReadOptions {
                    speedup: opts.speedup,
                    volumes: opts.volumes,
                    ..ReadOptions::default()
                };
                let mut reader = trace::open(path, *format, options)?;
                options.merge = opts.merge.for_format(reader.format());
                if options.merge.is_some() {
                    // (The format is known once the file is open; nothing was read yet.)
                    reader = trace::open(path, Some(reader.format()), options)?;
                }
                let format = Some(reader.format());
                SourceKind::Trace {
                    reader: Box::new(reader),
                    path: path.clone(),
                    format,
                    options,
                    loops_left: opts.loops.max(1) - 1,
                    offset_ns: 0,
                    last_ns: 0,
                    in_pass: 0,
                    first_pass: Vec::new(),
                    caching: opts.loops > 1,
                    replay: None,
                }
            }
        };
        Ok(Source {
            kind,
            lenient: opts.lenient,
            limit: opts.limit,
            emitted: 0,
            skipped: 0,
            merged_before: (0, 0),
            passes_replayed: 0,
        })
    }

    /// True when the workload never ends by itself (a synthetic one without `requests`).
    pub fn is_endless(&self) -> bool {
        matches!(self, WorkloadSpec::Synthetic(c) if c.requests.is_none())
    }
}

enum SourceKind {
    None,
    Synthetic {
        gen: Box<Synthetic>,
        closed: Option<u32>,
    },
    Trace {
        reader: Box<TraceReader<trace::TraceInput>>,
        path: PathBuf,
        format: Option<TraceFormat>,
        options: ReadOptions,
        loops_left: u64,
        /// Added to every time of the current pass (the earlier passes' length).
        offset_ns: u64,
        /// Latest time returned in this pass (without the offset).
        last_ns: u64,
        /// Requests returned in this pass.
        in_pass: u64,
        /// A looped trace's first pass, parsed (times without the offset), so that the later
        /// passes replay it from memory instead of reading and parsing the file again (parsing
        /// was about a sixth of a looped replay's time). Kept only while the pass has at most
        /// [`PASS_CACHE_MAX`] requests and no skipped line (a lenient pass that skipped lines
        /// re-reads the file, so every pass counts its skips); memory stays bounded.
        first_pass: Vec<Request>,
        /// Still filling `first_pass` (the first pass of a looped trace, under the bound).
        caching: bool,
        /// Replaying `first_pass`: the index of the next request.
        replay: Option<usize>,
    },
}

/// Most requests of a looped trace's first pass kept for the later passes (40 bytes each:
/// 10 MiB at most).
const PASS_CACHE_MAX: usize = 1 << 18;

/// A streaming workload: what [`WorkloadSpec::open`] returns.
pub struct Source {
    kind: SourceKind,
    lenient: bool,
    limit: Option<u64>,
    emitted: u64,
    skipped: u64,
    /// Requests merged, and pieces split, by the readers of the passes before the current one.
    merged_before: (u64, u64),
    /// Passes replayed from memory (the first pass's requests, merged as it merged them).
    passes_replayed: u64,
}

impl Source {
    fn reopen(path: &Path, format: Option<TraceFormat>, options: ReadOptions) -> TraceReaderBox {
        trace::open(path, format, options).map(Box::new)
    }
}

type TraceReaderBox = Result<Box<TraceReader<trace::TraceInput>>, TraceError>;

impl Workload for Source {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        if self.limit.is_some_and(|l| self.emitted >= l) {
            return None;
        }
        let r = loop {
            match &mut self.kind {
                SourceKind::None => return None,
                // Replaying the cached first pass (every pass after the first of a looped
                // trace), field by field; the arm below reads the file, and ends every pass.
                // (Through that arm, a cached request was copied into a temporary and read
                // back at other widths, which the processor cannot forward from the stores
                // just made: a stall of a dozen cycles or more on every request.)
                SourceKind::Trace {
                    first_pass,
                    replay: Some(i),
                    last_ns,
                    in_pass,
                    offset_ns,
                    caching,
                    ..
                } if *i < first_pass.len() => {
                    debug_assert!(!*caching, "a replayed pass is not cached again");
                    let q = &first_pass[*i];
                    *i += 1;
                    *last_ns = (*last_ns).max(q.time_ns);
                    *in_pass += 1;
                    break Request {
                        time_ns: q.time_ns.saturating_add(*offset_ns),
                        offset_bytes: q.offset_bytes,
                        len_bytes: q.len_bytes,
                        op: q.op,
                        volume: q.volume,
                    };
                }
                SourceKind::Synthetic { gen, .. } => break gen.next()?,
                SourceKind::Trace {
                    reader,
                    path,
                    format,
                    options,
                    loops_left,
                    offset_ns,
                    last_ns,
                    in_pass,
                    first_pass,
                    caching,
                    replay,
                } => match match replay {
                    // The arm above replayed every cached request: the pass is over.
                    Some(_) => None,
                    None => reader.next(),
                } {
                    Some(Ok(mut r)) => {
                        if *caching {
                            if first_pass.len() < PASS_CACHE_MAX {
                                first_pass.push(r);
                            } else {
                                *caching = false;
                                *first_pass = Vec::new();
                            }
                        }
                        *last_ns = (*last_ns).max(r.time_ns);
                        *in_pass += 1;
                        r.time_ns = r.time_ns.saturating_add(*offset_ns);
                        break r;
                    }
                    Some(Err(e)) if self.lenient && !matches!(e, TraceError::Io { .. }) => {
                        self.skipped += 1;
                        *caching = false;
                        *first_pass = Vec::new();
                    }
                    Some(Err(e)) => return Some(Err(e)),
                    None if *loops_left > 0 && *in_pass > 0 => {
                        *loops_left -= 1;
                        // The next pass starts one mean inter-arrival time after this one.
                        let gap = (*last_ns / *in_pass).max(1);
                        *offset_ns = offset_ns.saturating_add(*last_ns + gap);
                        *last_ns = 0;
                        *in_pass = 0;
                        if *caching || replay.is_some() {
                            // The first pass is complete in memory: replay it.
                            *caching = false;
                            *replay = Some(0);
                            self.passes_replayed += 1;
                        } else {
                            match Source::reopen(path, *format, *options) {
                                Ok(r) => {
                                    self.merged_before.0 += reader.requests_merged();
                                    self.merged_before.1 += reader.requests_split();
                                    *reader = r;
                                }
                                Err(e) => return Some(Err(e)),
                            }
                        }
                    }
                    None => return None,
                },
            }
        };
        self.emitted += 1;
        Some(Ok(r))
    }

    fn closed_loop_depth(&self) -> Option<u32> {
        match &self.kind {
            SourceKind::Synthetic { closed, .. } => *closed,
            _ => None,
        }
    }

    fn skipped(&self) -> u64 {
        self.skipped
    }

    fn merging(&self) -> (u64, u64) {
        match &self.kind {
            // A pass replayed from memory merged as many as the first, which the reader kept.
            SourceKind::Trace { reader, .. } => {
                let passes = 1 + self.passes_replayed;
                (
                    self.merged_before.0 + reader.requests_merged() * passes,
                    self.merged_before.1 + reader.requests_split() * passes,
                )
            }
            _ => (0, 0),
        }
    }
}

/// Any workload replayed closed-loop: `depth` requests kept outstanding, each new request issued
/// when one completes, the recorded times ignored. This is how a benchmark's job (a TPC-C trace
/// standing for its terminals, a fio job with an I/O depth) is replayed "as fast as the array
/// takes it" instead of at its recorded pace; throughput then measures the array.
pub struct ClosedLoop<W> {
    inner: W,
    depth: u32,
}

impl<W: Workload> ClosedLoop<W> {
    /// `inner` with `depth` requests outstanding (at least 1).
    pub fn new(inner: W, depth: u32) -> ClosedLoop<W> {
        ClosedLoop {
            inner,
            depth: depth.max(1),
        }
    }
}

impl<W: Workload> Workload for ClosedLoop<W> {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        self.inner.next_request()
    }
    fn closed_loop_depth(&self) -> Option<u32> {
        Some(self.depth)
    }
    fn skipped(&self) -> u64 {
        self.inner.skipped()
    }
    fn merging(&self) -> (u64, u64) {
        self.inner.merging()
    }
}

/// Several open-loop workloads replayed together, each on its own volume (a multi-workload mix
/// on a pool, with [`crate::exec::VolumeLayout`] saying where each volume lives): requests in
/// arrival order (on equal times the earlier part first), each request's volume replaced by its
/// part's.
pub struct Merged {
    parts: Vec<(Box<dyn Workload>, u32)>,
    heads: Vec<Option<Request>>,
    filled: bool,
}

impl Merged {
    /// `parts`: each workload with the volume its requests go to. Closed-loop parts are refused
    /// (their requests carry no times to merge by).
    pub fn new(parts: Vec<(Box<dyn Workload>, u32)>) -> Result<Merged, SimError> {
        if parts.iter().any(|(w, _)| w.closed_loop_depth().is_some()) {
            return Err(SimError::Config(
                "a merged workload takes open-loop parts only (closed-loop requests have no \
                 arrival times to merge by)"
                    .into(),
            ));
        }
        let heads = vec![None; parts.len()];
        Ok(Merged {
            parts,
            heads,
            filled: false,
        })
    }

    fn refill(&mut self, i: usize) -> Result<(), TraceError> {
        self.heads[i] = match self.parts[i].0.next_request() {
            Some(Ok(r)) => Some(r),
            Some(Err(e)) => return Err(e),
            None => None,
        };
        Ok(())
    }
}

impl Workload for Merged {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        if !self.filled {
            self.filled = true;
            for i in 0..self.parts.len() {
                if let Err(e) = self.refill(i) {
                    return Some(Err(e));
                }
            }
        }
        let i = (0..self.heads.len())
            .filter(|&i| self.heads[i].is_some())
            .min_by_key(|&i| (self.heads[i].expect("some").time_ns, i))?;
        let mut r = self.heads[i].take().expect("some");
        r.volume = self.parts[i].1;
        if let Err(e) = self.refill(i) {
            return Some(Err(e));
        }
        Some(Ok(r))
    }

    fn skipped(&self) -> u64 {
        self.parts.iter().map(|(w, _)| w.skipped()).sum()
    }

    fn merging(&self) -> (u64, u64) {
        (self.parts.iter().map(|(w, _)| w.merging())).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }
}

/// Builds the array (`scheme` with `chunk_bytes` chunks on members of `member_bytes`), opens
/// the workload and runs it.
pub fn simulate(
    scheme: Arc<dyn Scheme>,
    chunk_bytes: u64,
    member_bytes: u64,
    cfg: SimConfig,
    workload: &WorkloadSpec,
    opts: &SourceOptions,
) -> Result<Report, SimError> {
    let geo = Geometry::new(scheme, chunk_bytes, member_bytes)?;
    if workload.is_endless() && cfg.stop_ns.is_none() && opts.limit.is_none() {
        return Err(SimError::Config(
            "an endless synthetic workload needs an end: requests=N in its spec, a request \
             limit (--requests) or a stop time (--duration)"
                .into(),
        ));
    }
    let mut source = workload.open(geo.capacity_bytes(), opts)?;
    Simulator::new(geo, cfg)?.run(&mut source)
}

/// Simulated time of the last request `workload` would replay (0 for none): the span the
/// warm-up of a failure (`raidforge sim --warmup-fraction`) is a fraction of. Reads the whole
/// workload once (honouring `opts` and a stop time).
pub fn workload_span_ns(
    workload: &WorkloadSpec,
    capacity_bytes: u64,
    opts: &SourceOptions,
    stop_ns: Option<u64>,
) -> Result<u64, SimError> {
    if workload.is_endless() && stop_ns.is_none() && opts.limit.is_none() {
        return Err(SimError::Config(
            "an endless synthetic workload has no span: give requests=N, --requests or --duration"
                .into(),
        ));
    }
    let mut source = workload.open(capacity_bytes, opts)?;
    let mut last = 0;
    while let Some(r) = source.next_request() {
        let r = r?;
        if stop_ns.is_some_and(|s| r.time_ns > s) {
            break;
        }
        last = last.max(r.time_ns);
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_parse() {
        assert_eq!(parse_bytes("4K"), Some(4096));
        assert_eq!(parse_bytes("1MiB"), Some(1 << 20));
        assert_eq!(parse_bytes("512"), Some(512));
        assert_eq!(parse_bytes("2g"), Some(2 << 30));
        assert_eq!(parse_bytes("x"), None);
    }

    #[test]
    fn specs_parse() {
        let s = WorkloadSpec::parse("random:read=0.7:size=4K:iops=200", 3, None).unwrap();
        let WorkloadSpec::Synthetic(c) = s else {
            panic!("synthetic expected")
        };
        assert_eq!(c.read_fraction, 0.7);
        assert_eq!(c.sizes, SizeDist::Fixed(4096));
        assert_eq!(
            c.arrival,
            Arrival::Poisson {
                requests_per_sec: 200.0
            }
        );
        assert_eq!(c.seed, 3);
        let WorkloadSpec::Synthetic(c) =
            WorkloadSpec::parse("seq:size=4K@3,64K@1:qd=4:requests=10", 0, None).unwrap()
        else {
            panic!()
        };
        assert_eq!(c.sizes, SizeDist::Mix(vec![(4096, 3), (65536, 1)]));
        assert_eq!(c.arrival, Arrival::ClosedLoop { queue_depth: 4 });
        assert_eq!(c.sequential_fraction, 1.0);
        assert_eq!(c.requests, Some(10));
        let WorkloadSpec::Synthetic(c) =
            WorkloadSpec::parse("financial2:requests=5", 0, None).unwrap()
        else {
            panic!()
        };
        assert_eq!(c.name, "financial2-synthetic");
        assert_eq!(c.requests, Some(5));
        assert_eq!(
            WorkloadSpec::parse("none", 0, None).unwrap(),
            WorkloadSpec::None
        );
        assert!(matches!(
            WorkloadSpec::parse("/x/y.csv", 0, None).unwrap(),
            WorkloadSpec::Trace { .. }
        ));
        assert!(WorkloadSpec::parse("random:bogus=1", 0, None).is_err());
        assert!(WorkloadSpec::parse("random:read", 0, None).is_err());
    }

    #[test]
    fn a_replayed_pass_is_the_file_read_again() {
        // The same looped trace twice: once replaying its cached first pass, once with the
        // cache turned off (each pass reads and parses the file again). Every request, times
        // included, must be the same, and each later pass must be the first one moved later.
        let path =
            std::env::temp_dir().join(format!("raidforge-replay-{}.spc", std::process::id()));
        std::fs::write(
            &path,
            "0,0,4096,r,0.000\n1,64,4096,w,0.010\n0,128,8192,r,0.020\n2,8,512,w,0.021\n",
        )
        .unwrap();
        let spec = WorkloadSpec::Trace {
            path: path.clone(),
            format: None,
        };
        let opts = SourceOptions {
            loops: 3,
            ..SourceOptions::default()
        };
        let drain = |source: &mut Source| {
            let mut v = Vec::new();
            while let Some(r) = source.next_request() {
                v.push(r.unwrap());
            }
            v
        };
        let mut cached = spec.open(1 << 30, &opts).unwrap();
        let mut reread = spec.open(1 << 30, &opts).unwrap();
        let SourceKind::Trace { caching, .. } = &mut reread.kind else {
            panic!("a trace source")
        };
        *caching = false;
        let (a, b) = (drain(&mut cached), drain(&mut reread));
        std::fs::remove_file(&path).unwrap();
        let SourceKind::Trace { replay, .. } = &cached.kind else {
            panic!("a trace source")
        };
        assert!(
            replay.is_some(),
            "the cached source replayed its first pass"
        );
        assert_eq!(a.len(), 12);
        assert_eq!(a, b);
        for pass in a.chunks(4).skip(1) {
            let shift = pass[0].time_ns - a[0].time_ns;
            assert!(
                shift > a[3].time_ns,
                "a later pass starts after the first one ends"
            );
            for (r, first) in pass.iter().zip(&a[..4]) {
                assert_eq!(
                    *r,
                    Request {
                        time_ns: first.time_ns + shift,
                        ..*first
                    }
                );
            }
        }
    }
}

//! Running the simulator for the rebuild reproductions (S2-RAID and RAID+): arrays declared as
//! data, members sized so that every array of an experiment holds the same data per disk, and
//! one-call runs (offline rebuild, online rebuild under a workload, degraded service) whose
//! results are memoised within a reproduction, so a figure that repeats a table's
//! configuration reuses its run instead of simulating it twice.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use layout::{Params, Scheme, SchemeKind};
use raidcore::{Geometry, SpeedLimits};
use sim::{Drive, Failure, Phase, SimConfig, Simulator, SourceOptions, WorkloadSpec};

/// One decimal gigabyte, as the papers write disk sizes.
pub(crate) const GB: u64 = 1_000_000_000;
/// One binary kibibyte, as MD writes its speed limits and chunk sizes.
pub(crate) const KIB: u64 = 1 << 10;
/// One binary mebibyte.
pub(crate) const MIB: u64 = 1 << 20;

/// An array under test.
#[derive(Clone, Debug)]
pub(crate) struct ArraySpec {
    /// What the report calls it, e.g. `MD RAID5 8+1`.
    pub name: String,
    /// The scheme.
    pub kind: SchemeKind,
    /// Its parameters.
    pub params: Params,
    /// How many independently throttled rebuilds the prototype ran for one failed disk: 1 for
    /// one MD array; K for S2-RAID, whose prototype builds every sub-array as its own MD array,
    /// each with MD's speed limits (seed 000, section 3). The simulator's one throttle then
    /// gets `throttled` times the limits.
    pub throttled: u64,
    /// Sub-units per unit (`layout::Substriped`; 1: the scheme as built): RAID+'s prototype
    /// stripes 64 KiB units inside each 2 MB allocation unit.
    pub substripes: usize,
    /// Reads of mirrored units spread over their copies the way MD's `read_balance` does
    /// (`sim::SimConfig::read_balance`); false: every read goes to the first copy.
    pub read_balance: bool,
}

impl ArraySpec {
    /// A scheme with these parameters, one throttle.
    pub fn new(name: impl Into<String>, kind: SchemeKind, params: Params) -> ArraySpec {
        ArraySpec {
            name: name.into(),
            kind,
            params,
            throttled: 1,
            substripes: 1,
            read_balance: false,
        }
    }

    /// The same array with every unit split into `r` sub-units striped across its stripe's
    /// disks (run it with a chunk `r` times smaller).
    pub fn substriped(mut self, r: usize) -> ArraySpec {
        self.substripes = r;
        self
    }

    /// The built scheme.
    pub fn scheme(&self) -> anyhow::Result<Arc<dyn Scheme>> {
        let s = layout::build(self.kind, &self.params)
            .with_context(|| format!("building {}", self.name))?;
        if self.substripes > 1 {
            Ok(Arc::new(layout::Substriped::new(s, self.substripes)?))
        } else {
            Ok(s)
        }
    }

    /// The layout's text form (`scheme=raid5;disks=10;...`), as the report shows it.
    pub fn text(&self) -> String {
        let t = layout::to_text(self.kind, &self.params);
        if self.substripes > 1 {
            format!("{t}; each unit in {} sub-units", self.substripes)
        } else {
            t
        }
    }

    /// The rebuild limits the simulator applies: `base` times [`ArraySpec::throttled`].
    pub fn limits(&self, base: SpeedLimits) -> SpeedLimits {
        SpeedLimits {
            min_bytes_per_sec: base.min_bytes_per_sec * self.throttled,
            max_bytes_per_sec: base.max_bytes_per_sec * self.throttled,
        }
    }
}

/// The geometry of `scheme` with about `data_bytes` of data and parity on every active
/// (non-spare) member: whole cycles, each occupying its stride on the member (so reserved
/// recovery space and free partitions come on top of `data_bytes`, as spare space does on a
/// real disk). Schemes whose cycles put unequal numbers of units on the disks (random
/// placement) get the mean. Building a geometry derives the recovery plan of every failure,
/// which is costly for wide pools, so a first guess (stride = cycle rows, true of most
/// schemes) is kept when it is right.
pub(crate) fn geometry_for(
    scheme: &Arc<dyn Scheme>,
    chunk_bytes: u64,
    data_bytes: u64,
) -> anyhow::Result<Geometry> {
    let cycle = scheme.cycle();
    let units: u64 = cycle.stripes.iter().map(|s| s.units.len() as u64).sum();
    let active = (cycle.disks - scheme.spare_disks().len()) as u64;
    let per_cycle = units * chunk_bytes / active;
    let cycles = data_bytes.div_ceil(per_cycle).max(1);
    let guess = Geometry::new(
        scheme.clone(),
        chunk_bytes,
        cycles * cycle.rows * chunk_bytes,
    )?;
    if guess.cycles() == cycles {
        return Ok(guess);
    }
    let stride = guess.stride_rows();
    Ok(Geometry::new(
        scheme.clone(),
        chunk_bytes,
        cycles * stride * chunk_bytes,
    )?)
}

/// What a run replays.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Load {
    /// Nothing: an offline rebuild.
    None,
    /// A synthetic spec (`financial1`, `random:...`), generated from the run's seed.
    Synthetic(String),
    /// A trace file, looped as long as the run lasts.
    Trace(PathBuf),
    /// A trace file, looped, replayed closed-loop with this many requests outstanding (its
    /// times ignored: a benchmark's job run as fast as the array takes it).
    ClosedTrace(PathBuf, u32),
}

impl Load {
    fn key(&self) -> String {
        match self {
            Load::None => "none".into(),
            Load::Synthetic(s) => s.clone(),
            Load::Trace(p) => p.display().to_string(),
            Load::ClosedTrace(p, d) => format!("{} closed {d}", p.display()),
        }
    }
}

/// Everything about one simulator run.
#[derive(Clone, Debug)]
pub(crate) struct RunSpec {
    pub array: ArraySpec,
    pub drive: Drive,
    pub chunk_bytes: u64,
    /// Data and parity per active member (see [`geometry_for`]).
    pub data_bytes: u64,
    pub load: Load,
    /// Member that fails, and when (simulated seconds).
    pub fail: Option<(u32, f64)>,
    /// Rebuild at once after the failure (false: stay degraded).
    pub rebuild: bool,
    /// MD's limits for one array; the run uses [`ArraySpec::limits`] of them.
    pub limits: SpeedLimits,
    /// Admit no request arriving after this many simulated seconds.
    pub stop_s: Option<f64>,
    pub seed: u64,
}

impl RunSpec {
    fn key(&self) -> String {
        format!(
            "{}|{}|{}|{}|{:?}|{}|{}|{}|{:?}|{}|{:?}|{:?}|{}",
            self.array.text(),
            self.array.throttled,
            self.array.substripes,
            self.array.read_balance,
            self.drive,
            self.chunk_bytes,
            self.data_bytes,
            self.load.key(),
            self.fail,
            self.rebuild,
            self.limits,
            self.stop_s,
            self.seed
        )
    }
}

/// What the reproductions read from a run.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub report: sim::Report,
}

impl Outcome {
    /// The rebuild's duration, seconds (an error when it did not finish).
    pub fn rebuild_s(&self) -> anyhow::Result<f64> {
        let r = self
            .report
            .rebuild
            .as_ref()
            .context("the run had no rebuild")?;
        match r.time_s {
            Some(t) => Ok(t),
            None => bail!(
                "the rebuild of {} did not finish{}",
                self.report.scheme,
                r.error
                    .as_ref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
        }
    }

    /// When the rebuild ended, simulated seconds.
    pub fn rebuild_end_s(&self) -> Option<f64> {
        self.report.rebuild.as_ref().and_then(|r| r.end_s)
    }

    /// Mean response time of the requests that arrived in `phase`, ms.
    pub fn mean_ms(&self, phase: Phase) -> f64 {
        self.report.phase(phase).mean_ms
    }
}

/// Runs simulations, memoising them, and reports each one through `progress`.
pub(crate) struct Runner<'a> {
    memo: HashMap<String, Outcome>,
    progress: &'a mut dyn FnMut(&str),
    /// Simulator runs done (memo hits excluded).
    pub runs: usize,
}

impl<'a> Runner<'a> {
    pub fn new(progress: &'a mut dyn FnMut(&str)) -> Runner<'a> {
        Runner {
            memo: HashMap::new(),
            progress,
            runs: 0,
        }
    }

    /// The progress callback, for code that reports through it directly.
    pub fn progress(&mut self) -> &mut dyn FnMut(&str) {
        &mut *self.progress
    }

    /// Passes a line to the progress callback.
    pub fn say(&mut self, line: &str) {
        (self.progress)(line);
    }

    /// Runs `spec` (or returns the earlier identical run).
    pub fn run(&mut self, spec: &RunSpec) -> anyhow::Result<Outcome> {
        let key = spec.key();
        if let Some(o) = self.memo.get(&key) {
            return Ok(o.clone());
        }
        let t = Instant::now();
        let o = simulate(spec).with_context(|| format!("simulating {}", spec.array.name))?;
        self.runs += 1;
        let what = match &spec.load {
            Load::None => "offline".to_string(),
            Load::Synthetic(s) => s.split(':').next().unwrap_or(s).to_string(),
            Load::Trace(p) | Load::ClosedTrace(p, _) => p
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let rebuild = match o.report.rebuild.as_ref().and_then(|r| r.time_s) {
            Some(t) => format!(", rebuild {t:.1} s"),
            None => String::new(),
        };
        let line = format!(
            "{} [{what}, {} requests{rebuild}] in {:.1} s",
            spec.array.name,
            o.report.requests,
            t.elapsed().as_secs_f64()
        );
        (self.progress)(&line);
        self.memo.insert(key, o.clone());
        Ok(o)
    }

    /// An online rebuild: `spec` with its workload running until the rebuild is over. The
    /// workload is admitted until a horizon estimated from the rebuild's guaranteed rate; when
    /// the rebuild outlasts it, the horizon doubles and the run is repeated, so the rebuild
    /// never finishes in an unloaded tail.
    pub fn online(&mut self, spec: &RunSpec) -> anyhow::Result<Outcome> {
        let (_, fail_s) = spec.fail.context("an online rebuild needs a failure")?;
        let min = spec.array.limits(spec.limits).min_bytes_per_sec.max(1);
        // Start short (throttled rebuilds usually run above their guaranteed minimum) and
        // double: the runs that end too early cost at most as much as the last one.
        let mut horizon = fail_s + 0.3 * spec.data_bytes as f64 / min as f64 + 30.0;
        for _ in 0..8 {
            let mut s = spec.clone();
            s.stop_s = Some(horizon.ceil());
            let o = self.run(&s)?;
            match o.rebuild_end_s() {
                Some(end) if end + 5.0 < horizon.ceil() => return Ok(o),
                _ => horizon *= 2.0,
            }
        }
        bail!(
            "the online rebuild of {} outlasted every horizon tried",
            spec.array.name
        )
    }
}

/// One run of the simulator.
fn simulate(spec: &RunSpec) -> anyhow::Result<Outcome> {
    let scheme = spec.array.scheme()?;
    let mut cfg = SimConfig::new(spec.drive.params());
    cfg.seed = spec.seed;
    cfg.failure = spec.fail.map(|(member, at_s)| Failure {
        member,
        at_ns: (at_s * 1e9) as u64,
    });
    cfg.rebuild_delay_ns = if spec.rebuild { Some(0) } else { None };
    cfg.speed = spec.array.limits(spec.limits);
    cfg.stop_ns = spec.stop_s.map(|s| (s * 1e9) as u64);
    // The in-memory data checker of debug builds is for small arrays; these are not.
    cfg.mem_check_max_bytes = 0;
    cfg.read_balance = spec.array.read_balance;
    let mut opts = SourceOptions::default();
    let workload = match &spec.load {
        Load::None => WorkloadSpec::None,
        Load::Synthetic(s) => WorkloadSpec::parse(s, spec.seed, None)?,
        Load::Trace(p) | Load::ClosedTrace(p, _) => {
            if !p.exists() {
                bail!(
                    "trace {} not found (pass --traces DIR or set RAIDFORGE_TRACES)",
                    p.display()
                );
            }
            // Looped for as long as the run admits requests.
            opts.loops = 1_000_000;
            WorkloadSpec::Trace {
                path: p.clone(),
                format: None,
            }
        }
    };
    if spec.load != Load::None && spec.stop_s.is_none() {
        bail!("a run with a workload needs a stop time");
    }
    // As `sim::simulate`, with the geometry built once.
    let geo = geometry_for(&scheme, spec.chunk_bytes, spec.data_bytes)?;
    let source = workload.open(geo.capacity_bytes(), &opts)?;
    let report = match spec.load {
        Load::ClosedTrace(_, depth) => {
            Simulator::new(geo, cfg)?.run(&mut sim::ClosedLoop::new(source, depth))?
        }
        _ => {
            let mut source = source;
            Simulator::new(geo, cfg)?.run(&mut source)?
        }
    };
    Ok(Outcome { report })
}

/// `a / b`, or 0 when `b` is 0.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

/// Formats bytes as the reports show them (`10 GB`, `512 KiB`).
pub(crate) fn bytes_text(b: u64) -> String {
    if b >= GB && b.is_multiple_of(GB) {
        format!("{} GB", b / GB)
    } else if b >= GB {
        format!("{:.2} GB", b as f64 / GB as f64)
    } else if b >= MIB && b.is_multiple_of(MIB) {
        format!("{} MiB", b / MIB)
    } else if b.is_multiple_of(KIB) {
        format!("{} KiB", b / KIB)
    } else {
        format!("{b} B")
    }
}

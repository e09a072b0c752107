//! # sim: raidforge's disk-array simulator
//!
//! The simulator predicts how a RAID layout behaves on real drives under a real workload by
//! running the engine's own planner (raidcore) against simulated disks and a simulated clock.
//! This crate holds the whole pipeline: workloads in, the discrete-event executor ([`exec`])
//! that runs raidcore's plans on disk models, and the measurements out ([`metrics`]). It
//! contains no RAID logic: no mapping, no parity, no planning; where data lives and what a
//! request or a rebuild reads and writes all come from raidcore's plans.
//!
//! ## Concepts
//!
//! - **Simulated time** is a `u64` count of nanoseconds since the start of a run. Nothing in this
//!   crate reads a real clock.
//! - A **device model** ([`disk`]) turns a request arriving at a simulated time into a completion
//!   time, and keeps the state that makes the next request cheaper or dearer: the head's position
//!   and what the read-ahead cache holds on a hard disk ([`Hdd`]), which flash channels are busy
//!   on an SSD ([`Ssd`]). Models are pure state machines: deterministic for a seed, no I/O.
//!   [`Drive`] names the drives the seed documents used, with data-sheet parameters.
//! - A **trace** ([`trace`]) is a recorded workload: a text file with one I/O a line, in one of
//!   seven formats. Readers stream it as [`Request`]s in constant memory, reporting malformed
//!   lines as [`TraceError`]s with file and line.
//! - A **synthetic workload** ([`workload`]) is a workload described by its statistics and
//!   generated from a seed, for when the real trace is not available (the SPC Financial traces)
//!   or a controlled experiment is wanted.
//! - A [`Request`] is the common currency: arrival time, byte offset, length, read or write, and
//!   the volume (ASU, LUN, device) it addresses. The executor maps it onto the array.
//! - The **executor** ([`Simulator`], [`exec`]) is an event queue ordered by `(time, sequence)`
//!   (one seed, one run): it pulls requests one at a time from a [`Workload`], plans them with
//!   raidcore, queues the plans' member I/Os on per-disk queues ([`Scheduler`]: FIFO or
//!   shortest positioning time first), fails a member when told to ([`Failure`]) and rebuilds
//!   it with raidcore's rebuild scheduler and MD-style throttle.
//! - A run's result is a [`Report`] ([`metrics`]): response times per [`Phase`] (normal,
//!   degraded, rebuilding, after) in fixed-size log-linear [`Histogram`]s, throughput, per-disk
//!   busy time and I/O counts, their coefficient of variation, and the rebuild's duration.
//! - [`WorkloadSpec`] and [`simulate`] ([`run`]) are the one-call entry: a `--workload` string
//!   (`none`, `random:read=0.7:size=4K:iops=200`, `financial1`, a trace path) and an array in,
//!   a report out.
//!
//! ## Using it
//!
//! ```
//! use sim::{Disk, DiskIo, Drive, ReadOptions, TraceFormat, TraceReader};
//!
//! // A Barracuda 7200.11 (S2-RAID's disk), idle at time 0.
//! let mut disk = Drive::SeagateSt3500320as.params().build(42).unwrap();
//! let service = disk.submit(0, DiskIo::read(1 << 30, 4096));
//! assert!(service.completion_ns > 0);
//!
//! // Two lines of an SPC trace, read from memory.
//! let text = "0,2048,4096,w,0.000000\n1,4096,512,r,0.002500\n";
//! let reader = TraceReader::new(text.as_bytes(), TraceFormat::Spc, ReadOptions::default()).unwrap();
//! let requests: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
//! assert_eq!(requests[1].time_ns, 2_500_000);
//! assert_eq!(requests[0].offset_bytes, 2048 * 512);
//!
//! // A RAID5 of five such disks (64 MiB used on each) under a light random workload; member 1
//! // fails after 2 s and is rebuilt onto a blank replacement.
//! use sim::{simulate, Failure, Phase, SimConfig, SourceOptions, WorkloadSpec};
//! let params = layout::Params { disks: Some(5), ..Default::default() };
//! let scheme = layout::build(layout::SchemeKind::Raid5, &params).unwrap();
//! let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
//! cfg.failure = Some(Failure { member: 1, at_ns: 2_000_000_000 });
//! let spec = WorkloadSpec::parse("random:read=0.7:size=4K:iops=100:requests=400", 1, None).unwrap();
//! let report = simulate(scheme, 64 << 10, 64 << 20, cfg, &spec, &SourceOptions::default()).unwrap();
//! assert_eq!(report.requests, 400);
//! assert!(report.phase(Phase::Normal).count > 0 && report.rebuild_time_s().is_some());
//! ```
//!
//! Units are the last word of every name (`seek_ms_avg`, `bytes_per_sec_outer`, `time_ns`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod disk;
pub mod exec;
pub mod ido;
pub mod lpu;
pub mod metrics;
pub mod rng;
pub mod run;
pub mod svg;
pub mod trace;
pub mod workload;

pub use disk::{
    Disk, DiskIo, DiskModel, DiskParamError, Drive, DriveParams, Hdd, HddParams, Rotation, Service,
    Ssd, SsdParams,
};
pub use exec::{
    Failure, IdoReport, IdoSimConfig, LazyModel, LseRandom, LseRange, LseReport, NoWorkload,
    Scheduler, SimConfig, SimError, Simulator, VolumeLayout, Workload, MERGE_MAX_BYTES,
};
pub use metrics::{
    CheckMode, DiskStats, Histogram, LazyReport, Phase, PhaseStats, RebuildReport, Report,
    Timeline, TimelinePoint, VolumeStats,
};
pub use rng::SplitMix64;
pub use run::{
    parse_bytes, simulate, ClosedLoop, MergeChoice, Merged, Source, SourceOptions, SpecError,
    WorkloadSpec,
};
pub use trace::{
    locate_traces_dir, repository_traces_dir, BlkEvent, Compression, CsvColumns, Fold, Location,
    Merge, ReadOptions, Request, TimeOrder, TraceDirError, TraceError, TraceFormat, TraceReader,
    Volumes, TRACES_ENV,
};
pub use workload::{Arrival, Offsets, SizeDist, Synthetic, SyntheticConfig, WorkloadError};

/// Whether a request reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read data from the device.
    Read,
    /// Write data to the device.
    Write,
}

impl Op {
    /// `"read"` or `"write"`, as used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

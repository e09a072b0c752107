//! # sim: the foundation of raidforge's disk-array simulator
//!
//! The simulator predicts how a RAID layout behaves on real drives under a real workload by
//! running the engine's own planner against simulated disks and a simulated clock. This crate
//! provides the two ends of that pipeline; the executor between them (event queue, plan
//! execution, metrics) is built on top of it. It contains no RAID logic: no mapping, no parity,
//! no planning.
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
//! ```
//!
//! Units are the last word of every name (`seek_ms_avg`, `bytes_per_sec_outer`, `time_ns`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod disk;
pub mod rng;
pub mod trace;
pub mod workload;

pub use disk::{
    Disk, DiskIo, DiskModel, DiskParamError, Drive, DriveParams, Hdd, HddParams, Rotation, Service,
    Ssd, SsdParams,
};
pub use rng::SplitMix64;
pub use trace::{
    BlkEvent, Fold, Location, ReadOptions, Request, TimeOrder, TraceError, TraceFormat, TraceReader,
};
pub use workload::{Arrival, SizeDist, Synthetic, SyntheticConfig, WorkloadError};

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

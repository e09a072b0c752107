//! Timing models of member devices: a mechanical hard disk ([`Hdd`]), a flash SSD ([`Ssd`]) and
//! the engine's emulated member ([`EmulatedDisk`]).
//!
//! A model answers one question: *a request arrives at simulated time `now_ns`; when does the
//! device finish it?* It keeps its own state (where the head is, what the read-ahead cache holds,
//! until when each flash channel is busy) and nothing else: no clock, no event queue, no
//! randomness that is not seeded. The executor owns the clock and the queues; it calls
//! [`Disk::submit`] when it hands a request to the device and [`Disk::estimate`] when it only
//! wants to know what that would cost (for shortest-positioning-time-first scheduling, say).
//!
//! A device serves requests in the order they are submitted. A request submitted while the device
//! is still busy starts when it becomes free ([`Service::start_ns`] is then later than
//! [`Service::arrival_ns`]), so an executor that does not schedule gets FIFO queueing for free.
//!
//! [`Drive`] names the drives of the seed documents, each with its data-sheet parameters in
//! `drives.rs`; [`DriveParams::build`] turns parameters into a [`DiskModel`].

mod drives;
mod emulated;
mod hdd;
mod ssd;

pub use drives::Drive;
pub use emulated::{EmulatedDisk, EmulatedParams, EMULATED_CAPACITY_BYTES};
pub use hdd::{Hdd, HddParams, Rotation};
pub use ssd::{Ssd, SsdParams};

use crate::Op;

/// One request to one device: which operation, which bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DiskIo {
    /// Read or write.
    pub op: Op,
    /// First byte on the device.
    pub offset_bytes: u64,
    /// Number of bytes; 0 is allowed and costs only the command overhead.
    pub len_bytes: u64,
}

impl DiskIo {
    /// A read of `len_bytes` at `offset_bytes`.
    pub fn read(offset_bytes: u64, len_bytes: u64) -> DiskIo {
        DiskIo {
            op: Op::Read,
            offset_bytes,
            len_bytes,
        }
    }

    /// A write of `len_bytes` at `offset_bytes`.
    pub fn write(offset_bytes: u64, len_bytes: u64) -> DiskIo {
        DiskIo {
            op: Op::Write,
            offset_bytes,
            len_bytes,
        }
    }

    /// One past the last byte.
    ///
    /// # Panics
    /// If the end overflows 64 bits (a bug in the caller, who must keep requests on the device).
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes
            .checked_add(self.len_bytes)
            .expect("DiskIo end overflows u64")
    }
}

/// How a device spent its time on one request. All times are simulated nanoseconds.
///
/// Invariant: `start_ns + overhead_ns + seek_ns + rotation_ns + transfer_ns == completion_ns`
/// and `arrival_ns <= start_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Service {
    /// When the request was submitted (`now_ns`).
    pub arrival_ns: u64,
    /// When the device began working on it (later than arrival if the device was busy).
    pub start_ns: u64,
    /// When the last byte was transferred.
    pub completion_ns: u64,
    /// Command processing (HDD), or flash access latency (SSD).
    pub overhead_ns: u64,
    /// Head movement (HDD only; includes the write settle penalty).
    pub seek_ns: u64,
    /// Waiting for the sector to come under the head (HDD only).
    pub rotation_ns: u64,
    /// Moving the bytes, including waiting for read-ahead (HDD) or for the shared bus (SSD).
    pub transfer_ns: u64,
    /// The HDD served the read from its read-ahead cache, without moving the head.
    pub cache_hit: bool,
}

impl Service {
    /// Time the device worked on the request: completion minus start.
    pub fn service_ns(&self) -> u64 {
        self.completion_ns - self.start_ns
    }

    /// Time the request waited for the device to become free.
    pub fn queue_ns(&self) -> u64 {
        self.start_ns - self.arrival_ns
    }

    /// Time from submission to completion (what a user of the device sees).
    pub fn response_ns(&self) -> u64 {
        self.completion_ns - self.arrival_ns
    }

    fn assert_consistent(&self) {
        assert!(
            self.arrival_ns <= self.start_ns,
            "service starts before arrival: {self:?}"
        );
        assert_eq!(
            self.start_ns + self.overhead_ns + self.seek_ns + self.rotation_ns + self.transfer_ns,
            self.completion_ns,
            "service components do not add up: {self:?}"
        );
    }
}

/// A simulated device.
///
/// Both methods are deterministic: the same sequence of calls on equal models gives equal
/// results. [`Disk::estimate`] returns exactly what [`Disk::submit`] would return if it were
/// called next with the same arguments.
///
/// # Panics
/// Both methods panic if the request does not lie within `0..capacity_bytes()`: the executor maps
/// requests onto devices, and a request off the end of a device is a bug there.
pub trait Disk {
    /// Usable capacity in bytes.
    fn capacity_bytes(&self) -> u64;

    /// The earliest simulated time at which a newly submitted request could start.
    fn busy_until_ns(&self) -> u64;

    /// What serving `io`, submitted at `now_ns`, would cost, without changing the device.
    fn estimate(&self, now_ns: u64, io: DiskIo) -> Service;

    /// Serve `io`, submitted at `now_ns`, and move the device to its state afterwards.
    fn submit(&mut self, now_ns: u64, io: DiskIo) -> Service;
}

/// Any device model, as one concrete type (an array of mixed HDDs and SSDs is a
/// `Vec<DiskModel>`, no trait objects needed).
#[derive(Clone, Debug)]
pub enum DiskModel {
    /// A mechanical hard disk.
    Hdd(Hdd),
    /// A flash SSD.
    Ssd(Ssd),
    /// The engine's emulated member (latency plus bytes over a rate, one actuator).
    Emulated(EmulatedDisk),
}

impl Disk for DiskModel {
    fn capacity_bytes(&self) -> u64 {
        match self {
            DiskModel::Hdd(d) => d.capacity_bytes(),
            DiskModel::Ssd(d) => d.capacity_bytes(),
            DiskModel::Emulated(d) => d.capacity_bytes(),
        }
    }

    fn busy_until_ns(&self) -> u64 {
        match self {
            DiskModel::Hdd(d) => d.busy_until_ns(),
            DiskModel::Ssd(d) => d.busy_until_ns(),
            DiskModel::Emulated(d) => d.busy_until_ns(),
        }
    }

    fn estimate(&self, now_ns: u64, io: DiskIo) -> Service {
        match self {
            DiskModel::Hdd(d) => d.estimate(now_ns, io),
            DiskModel::Ssd(d) => d.estimate(now_ns, io),
            DiskModel::Emulated(d) => d.estimate(now_ns, io),
        }
    }

    fn submit(&mut self, now_ns: u64, io: DiskIo) -> Service {
        match self {
            DiskModel::Hdd(d) => d.submit(now_ns, io),
            DiskModel::Ssd(d) => d.submit(now_ns, io),
            DiskModel::Emulated(d) => d.submit(now_ns, io),
        }
    }
}

/// Parameters of either kind of device.
#[derive(Clone, Debug, PartialEq)]
pub enum DriveParams {
    /// A mechanical hard disk.
    Hdd(HddParams),
    /// A flash SSD.
    Ssd(SsdParams),
    /// The engine's emulated member.
    Emulated(EmulatedParams),
}

impl DriveParams {
    /// The drive's name (model number or a user's label).
    pub fn name(&self) -> &str {
        match self {
            DriveParams::Hdd(p) => &p.name,
            DriveParams::Ssd(p) => &p.name,
            DriveParams::Emulated(p) => &p.name,
        }
    }

    /// Usable capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        match self {
            DriveParams::Hdd(p) => p.capacity_bytes,
            DriveParams::Ssd(p) => p.capacity_bytes,
            DriveParams::Emulated(p) => p.capacity_bytes,
        }
    }

    /// Check the parameters and build a model in its initial state (idle at time 0, head at
    /// cylinder 0, cache empty). `seed` feeds the HDD's random rotational latency
    /// ([`Rotation::Random`]); other models ignore it.
    pub fn build(&self, seed: u64) -> Result<DiskModel, DiskParamError> {
        Ok(match self {
            DriveParams::Hdd(p) => DiskModel::Hdd(Hdd::new(p.clone(), seed)?),
            DriveParams::Ssd(p) => DiskModel::Ssd(Ssd::new(p.clone())?),
            DriveParams::Emulated(p) => DiskModel::Emulated(EmulatedDisk::new(p.clone())),
        })
    }

    /// A drive by the name `--disk` takes: one of [`Drive::ALL`], or an emulated member as
    /// `raidforge create --emulate` takes it (`hdd:150MB/s:4ms`, `ssd:100MB/s:0.1ms`).
    pub fn by_name(name: &str) -> Result<DriveParams, String> {
        if let Some(d) = Drive::from_name(name) {
            return Ok(d.params());
        }
        if name.contains(':') {
            return EmulatedParams::parse(name)
                .map(DriveParams::Emulated)
                .map_err(|e| e.to_string());
        }
        let names: Vec<&str> = Drive::ALL.iter().map(|d| d.name()).collect();
        Err(format!(
            "unknown drive {name:?}; known: {}, or an emulated member such as hdd:150MB/s:4ms",
            names.join(", ")
        ))
    }

    /// True for a model that has a size of its own (not an emulated member).
    pub fn has_capacity(&self) -> bool {
        !matches!(self, DriveParams::Emulated(_))
    }
}

/// Parameters that do not describe a device we can model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DiskParamError {
    /// A parameter is out of its range (zero capacity, inner rate above outer, ...).
    #[error("drive {drive}: {param} {reason}")]
    Invalid {
        /// The drive's name.
        drive: String,
        /// The parameter's field name.
        param: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The three seek figures admit no increasing curve `a*sqrt(d-1) + b*(d-1) + c`
    /// (the average is too close to the single-track or to the full-stroke time).
    #[error(
        "drive {drive}: seek times (track-to-track {track_to_track_ms} ms, average {avg_ms} ms, \
         full stroke {full_stroke_ms} ms) give a non-monotonic seek curve"
    )]
    SeekCurve {
        /// The drive's name.
        drive: String,
        /// Single-track seek.
        track_to_track_ms: f64,
        /// Average seek.
        avg_ms: f64,
        /// Full-stroke seek.
        full_stroke_ms: f64,
    },
}

//! A flash SSD as a few parallel channels in front of one shared host link.
//!
//! Three data-sheet figures per direction describe an SSD's speed, and the model keeps all three:
//!
//! - **latency** (the time one request takes on an idle drive): a request first spends its
//!   operation's latency on one of `channels` flash channels,
//! - **random 4 KiB IOPS** at high queue depth: each request keeps its channel busy for
//!   `channels / iops` (at least its latency), so a saturated drive completes `iops` requests a
//!   second; when that is longer than the latency the channel finishes in the background
//!   (garbage collection, program time hidden behind the write buffer), which is how an SSD can
//!   answer a 4 KiB write in 85 us yet sustain only 3,300 of them a second,
//! - **sequential bandwidth**: then the bytes cross the host link, one request at a time, at the
//!   operation's bandwidth; large requests are limited by it.
//!
//! Requests go to the channel that frees first (the lowest-numbered on ties). There is no
//! mapping table, no garbage-collection model and no wear: the drive performs the same whatever
//! was written before.

use std::sync::Arc;

use super::{Disk, DiskIo, DiskParamError, Service};
use crate::Op;

/// The figures that describe an SSD.
#[derive(Clone, Debug, PartialEq)]
pub struct SsdParams {
    /// Model number or label.
    pub name: String,
    /// Usable capacity in bytes.
    pub capacity_bytes: u64,
    /// Requests served concurrently (flash channels or ways).
    pub channels: u32,
    /// Read latency of one request on an idle drive.
    pub read_latency_us: f64,
    /// Write latency of one request on an idle drive.
    pub write_latency_us: f64,
    /// Sustained random 4 KiB reads per second at high queue depth.
    pub read_iops_4k: u32,
    /// Sustained random 4 KiB writes per second at high queue depth.
    pub write_iops_4k: u32,
    /// Sequential read bandwidth.
    pub read_bytes_per_sec: u64,
    /// Sequential write bandwidth.
    pub write_bytes_per_sec: u64,
}

/// Most channels a model may have (they are searched linearly).
const CHANNELS_MAX: u32 = 1024;

/// A simulated SSD.
#[derive(Clone, Debug)]
pub struct Ssd {
    params: Arc<SsdParams>,
    channel_busy_until_ns: Vec<u64>,
    link_busy_until_ns: u64,
}

impl Ssd {
    /// Check `params` and build an idle drive at time 0.
    pub fn new(params: SsdParams) -> Result<Ssd, DiskParamError> {
        let invalid = |param: &'static str, reason: &str| DiskParamError::Invalid {
            drive: params.name.clone(),
            param,
            reason: reason.to_string(),
        };
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if params.capacity_bytes == 0 {
            return Err(invalid("capacity_bytes", "must be positive"));
        }
        if params.channels == 0 || params.channels > CHANNELS_MAX {
            return Err(invalid("channels", "must be in 1..=1024"));
        }
        if !positive(params.read_latency_us) || !positive(params.write_latency_us) {
            return Err(invalid("*_latency_us", "must be finite and positive"));
        }
        if params.read_iops_4k == 0 || params.write_iops_4k == 0 {
            return Err(invalid("*_iops_4k", "must be positive"));
        }
        if params.read_bytes_per_sec == 0 || params.write_bytes_per_sec == 0 {
            return Err(invalid("*_bytes_per_sec", "must be positive"));
        }
        let channels = params.channels as usize;
        Ok(Ssd {
            params: Arc::new(params),
            channel_busy_until_ns: vec![0; channels],
            link_busy_until_ns: 0,
        })
    }

    /// The parameters the drive was built from.
    pub fn params(&self) -> &SsdParams {
        &self.params
    }

    fn serve(&self, now_ns: u64, io: DiskIo) -> (Service, usize) {
        let end = io.end_bytes();
        let p = &self.params;
        assert!(
            end <= p.capacity_bytes,
            "request {io:?} beyond the capacity {} of {}",
            p.capacity_bytes,
            p.name
        );
        let (latency_us, bytes_per_sec) = match io.op {
            Op::Read => (p.read_latency_us, p.read_bytes_per_sec),
            Op::Write => (p.write_latency_us, p.write_bytes_per_sec),
        };
        let channel = (0..self.channel_busy_until_ns.len())
            .min_by_key(|&i| self.channel_busy_until_ns[i])
            .expect("at least one channel");
        let start_ns = now_ns.max(self.channel_busy_until_ns[channel]);
        let latency_ns = (latency_us * 1e3).round() as u64;
        let link_start_ns = (start_ns + latency_ns).max(self.link_busy_until_ns);
        let link_ns = (io.len_bytes as f64 * 1e9 / bytes_per_sec as f64).round() as u64;
        let completion_ns = link_start_ns + link_ns;
        let service = Service {
            arrival_ns: now_ns,
            start_ns,
            completion_ns,
            overhead_ns: latency_ns,
            seek_ns: 0,
            rotation_ns: 0,
            transfer_ns: completion_ns - start_ns - latency_ns,
            cache_hit: false,
        };
        service.assert_consistent();
        (service, channel)
    }

    /// How long a request of `op` keeps its channel busy.
    fn occupancy_ns(&self, op: Op) -> u64 {
        let p = &self.params;
        let (latency_us, iops) = match op {
            Op::Read => (p.read_latency_us, p.read_iops_4k),
            Op::Write => (p.write_latency_us, p.write_iops_4k),
        };
        let per_channel_ns = f64::from(p.channels) * 1e9 / f64::from(iops);
        per_channel_ns.max(latency_us * 1e3).round() as u64
    }
}

impl Disk for Ssd {
    fn capacity_bytes(&self) -> u64 {
        self.params.capacity_bytes
    }

    fn busy_until_ns(&self) -> u64 {
        *self
            .channel_busy_until_ns
            .iter()
            .min()
            .expect("at least one channel")
    }

    fn estimate(&self, now_ns: u64, io: DiskIo) -> Service {
        self.serve(now_ns, io).0
    }

    fn submit(&mut self, now_ns: u64, io: DiskIo) -> Service {
        let (service, channel) = self.serve(now_ns, io);
        self.channel_busy_until_ns[channel] = service.start_ns + self.occupancy_ns(io.op);
        self.link_busy_until_ns = service.completion_ns;
        service
    }
}

//! The engine's emulated member as a simulated drive: one actuator, every I/O taking a fixed
//! latency plus its bytes at a fixed rate, nothing else (no seek, no rotation, no cache), so
//! that `raidforge sim --disk hdd:150MB/s:4ms` runs the device `raidforge create --emulate
//! hdd:150MB/s:4ms` serves. Both take their arithmetic from [`raidcore::emulate`].

use raidcore::emulate::{Actuator, Speed};

use super::{Disk, DiskIo, Service};

/// An emulated drive's description.
#[derive(Clone, Debug, PartialEq)]
pub struct EmulatedParams {
    /// The spec it was parsed from (`hdd:150MB/s:4ms`).
    pub name: String,
    /// Usable capacity: an emulated member has no size of its own, so this is large and the
    /// array's member size decides.
    pub capacity_bytes: u64,
    /// Rate and per-I/O latency.
    pub speed: Speed,
}

/// Capacity of an emulated drive: 1 PiB, far beyond any member size a run asks for.
pub const EMULATED_CAPACITY_BYTES: u64 = 1 << 50;

impl EmulatedParams {
    /// Parses the engine's `--emulate` spec (`KIND:BANDWIDTH:LATENCY` or `BANDWIDTH:LATENCY`).
    pub fn parse(spec: &str) -> Result<EmulatedParams, raidcore::emulate::SpecError> {
        Ok(EmulatedParams {
            name: spec.to_string(),
            capacity_bytes: EMULATED_CAPACITY_BYTES,
            speed: Speed::parse(spec)?,
        })
    }
}

/// A simulated emulated drive.
#[derive(Clone, Debug)]
pub struct EmulatedDisk {
    params: EmulatedParams,
    actuator: Actuator,
}

impl EmulatedDisk {
    /// An idle drive at time 0.
    pub fn new(params: EmulatedParams) -> EmulatedDisk {
        EmulatedDisk {
            params,
            actuator: Actuator::default(),
        }
    }

    /// The parameters it was built from.
    pub fn params(&self) -> &EmulatedParams {
        &self.params
    }

    fn serve(&self, now_ns: u64, io: DiskIo) -> Service {
        assert!(
            io.end_bytes() <= self.params.capacity_bytes,
            "request {io:?} beyond the capacity of {}",
            self.params.name
        );
        let speed = self.params.speed;
        let start_ns = self.actuator.start_ns(now_ns);
        let service_ns = speed.service_ns(io.len_bytes as usize);
        let service = Service {
            arrival_ns: now_ns,
            start_ns,
            completion_ns: start_ns + service_ns,
            overhead_ns: speed.latency_ns,
            seek_ns: 0,
            rotation_ns: 0,
            transfer_ns: service_ns - speed.latency_ns,
            cache_hit: false,
        };
        service.assert_consistent();
        service
    }
}

impl Disk for EmulatedDisk {
    fn capacity_bytes(&self) -> u64 {
        self.params.capacity_bytes
    }

    fn busy_until_ns(&self) -> u64 {
        self.actuator.busy_until_ns()
    }

    fn estimate(&self, now_ns: u64, io: DiskIo) -> Service {
        self.serve(now_ns, io)
    }

    fn submit(&mut self, now_ns: u64, io: DiskIo) -> Service {
        let s = self.serve(now_ns, io);
        let done = self.actuator.reserve(now_ns, s.completion_ns - s.start_ns);
        debug_assert_eq!(done, s.completion_ns);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_actuator_at_latency_plus_bytes_over_rate() {
        let p = EmulatedParams::parse("hdd:100MB/s:4ms").unwrap();
        let mut d = EmulatedDisk::new(p);
        // 1 MB at 100 MB/s is 10 ms, plus 4 ms.
        let a = d.submit(0, DiskIo::read(0, 1_000_000));
        assert_eq!((a.start_ns, a.completion_ns), (0, 14_000_000));
        // A second I/O arriving meanwhile waits for the first: FIFO on one actuator.
        let b = d.submit(1_000_000, DiskIo::write(1 << 40, 4096));
        assert_eq!(b.start_ns, 14_000_000);
        assert_eq!(b.completion_ns, 14_000_000 + 4_000_000 + 40_960);
        assert_eq!(b.queue_ns(), 13_000_000);
        // Offsets cost nothing: the same I/O anywhere takes the same time.
        let e1 = d.estimate(100_000_000, DiskIo::read(0, 65536));
        let e2 = d.estimate(100_000_000, DiskIo::read(1 << 45, 65536));
        assert_eq!(e1, e2);
        assert_eq!(
            e1.service_ns(),
            Speed::parse("hdd:100MB/s:4ms").unwrap().service_ns(65536)
        );
        assert!(EmulatedParams::parse("hdd:fast:4ms").is_err());
    }
}

//! An emulated device's timing, as pure arithmetic: one I/O at a time, each taking
//! `latency + len / bandwidth` (`raidforge create/assemble --emulate`). The engine's emulated
//! members (`dev::Emulated`) sleep until these completion times; the simulator's emulated
//! drive (`sim::disk::EmulatedDisk`) serves its requests by them, so that both run the same
//! device.

/// Speed of an emulated member: one I/O at a time, each taking `latency + len / bandwidth`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speed {
    /// Transfer rate, bytes per second.
    pub bytes_per_sec: f64,
    /// Fixed time of every I/O (positioning, command overhead), nanoseconds.
    pub latency_ns: u64,
}

/// Why an emulation or fault spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The text does not have the documented shape.
    #[error("bad speed '{spec}': {reason} (expected KIND:BANDWIDTH:LATENCY, e.g. hdd:150MB/s:8ms or ssd:500MB/s:0.1ms)")]
    Speed {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn parse_number_unit(s: &str, units: &[(&str, f64)]) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let mult = units.iter().find(|(u, _)| u.eq_ignore_ascii_case(unit))?.1;
    Some(v * mult)
}

impl Speed {
    /// Parses `KIND:BANDWIDTH:LATENCY`, e.g. `hdd:150MB/s:8ms`, `ssd:500MB/s:0.1ms`, or
    /// `BANDWIDTH:LATENCY`. Bandwidth as every speed (`raidcore::units::parse_speed`): KB/s,
    /// MB/s, GB/s are powers of 1000, K/s, M/s, KiB/s, MiB/s, GiB/s powers of 1024; latency
    /// units: ns, us, ms, s. KIND is informative (hdd or ssd).
    pub fn parse(spec: &str) -> Result<Speed, SpecError> {
        let bad = |reason: &str| SpecError::Speed {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let parts: Vec<&str> = spec.split(':').collect();
        let (bw, lat) = match parts.as_slice() {
            [kind, bw, lat] => {
                if !matches!(*kind, "hdd" | "ssd") {
                    return Err(bad("kind must be hdd or ssd"));
                }
                (*bw, *lat)
            }
            [bw, lat] => (*bw, *lat),
            _ => return Err(bad("wrong number of fields")),
        };
        // One rule for every size and speed (raidcore::units): 150MB/s is 10^6 bytes per MB,
        // 150MiB/s and 150M/s 2^20.
        let bytes_per_sec = crate::units::parse_speed(bw)
            .map_err(|_| bad("bandwidth must be a number with a unit such as MB/s"))?
            as f64;
        let latency_s =
            parse_number_unit(lat, &[("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0)])
                .ok_or_else(|| bad("latency must be a number with a unit such as ms"))?;
        if bytes_per_sec <= 0.0 || !bytes_per_sec.is_finite() {
            return Err(bad("bandwidth must be positive"));
        }
        if !(0.0..=10.0).contains(&latency_s) {
            return Err(bad("latency must be between 0 and 10 s"));
        }
        Ok(Speed {
            bytes_per_sec,
            latency_ns: (latency_s * 1e9).round() as u64,
        })
    }

    /// How long one I/O of `len` bytes keeps the member busy.
    pub fn service_ns(&self, len: usize) -> u64 {
        self.latency_ns + (len as f64 / self.bytes_per_sec * 1e9).round() as u64
    }
}

/// The single-actuator queue of an emulated member, as pure arithmetic on a clock the caller
/// supplies: an I/O arriving at `now` starts when the member is free and ends `service` later.
#[derive(Clone, Debug, Default)]
pub struct Actuator {
    busy_until_ns: u64,
}

impl Actuator {
    /// When the member is free again.
    pub fn busy_until_ns(&self) -> u64 {
        self.busy_until_ns
    }

    /// When an I/O arriving at `now_ns` would start.
    pub fn start_ns(&self, now_ns: u64) -> u64 {
        self.busy_until_ns.max(now_ns)
    }

    /// Reserves the member for an I/O arriving at `now_ns` that takes `service_ns`; returns its
    /// completion time.
    pub fn reserve(&mut self, now_ns: u64, service_ns: u64) -> u64 {
        let start = self.start_ns(now_ns);
        self.busy_until_ns = start + service_ns;
        self.busy_until_ns
    }
}

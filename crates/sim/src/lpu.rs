//! Seed 002's experiments on simulated disks: lazy parity update (LPU) against eager RM2 and
//! RAID5 ([`figure7`]), and lazy against eager small-write throughput of a two-parity array
//! ([`small_write_speedup`]).
//!
//! **Figure 7** of the seed: IOmeter-style closed-loop random I/O (4 KiB and 128 KiB, reads
//! and writes) at queue depths 1 to 32 against LUNs of equal capacity: RAID5 over 3 disks,
//! RM2 over 4 disks, and RM2 with lazy parity over 4 disks, 64 KiB stripe unit, 3 GB used on
//! every disk. The seed measured a real controller (PosRAID) with FC disks; here every member
//! is one modelled drive from [`crate::Drive`]. The deferred-parity list is sized so that a
//! run never fills it (the seed's controller processes it when idle; a closed loop is never
//! idle), and is flushed once the run is over, outside the measured span; rows say whether a
//! flush had to run during the run ([`Fig7Row::forced_flushes`]).

use std::sync::Arc;

use layout::{Params, Scheme, SchemeKind};
use raidcore::lazy::BPGL_MAX_CAPACITY;
use raidcore::{Geometry, ParityPolicy};

use crate::disk::Drive;
use crate::exec::{LazyModel, Scheduler, SimConfig, SimError, Simulator};
use crate::metrics::Report;
use crate::run::{SourceOptions, WorkloadSpec};

/// One point of Figure 7.
#[derive(Clone, Debug, PartialEq)]
pub struct Fig7Row {
    /// `4K random read`, `4K random write`, `128K random read`, `128K random write`.
    pub workload: String,
    /// Request size, bytes.
    pub size_bytes: u64,
    /// Reads (true) or writes.
    pub read: bool,
    /// Requests kept outstanding.
    pub qd: u32,
    /// `RAID5 (3 disks)`, `RM2 (4 disks)` or `RM2+LPU (4 disks)`.
    pub scheme: String,
    /// Completed requests per second (measured from the first arrival to the last completion).
    pub iops: f64,
    /// Megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Member I/Os per request (flushes after the run included).
    pub member_ios_per_request: f64,
    /// Flush plans that had to run during the run (list full); 0 when the list held every
    /// deferral.
    pub forced_flushes: u64,
}

/// How [`figure7`] runs.
#[derive(Clone, Debug)]
pub struct Fig7Options {
    /// Fewer requests per point and queue depths 1, 4, 16, 32 only (well under 20 s in a
    /// release build).
    pub quick: bool,
    /// The member drive.
    pub drive: Drive,
    /// Seed of the workloads and drives.
    pub seed: u64,
}

impl Default for Fig7Options {
    fn default() -> Fig7Options {
        Fig7Options {
            quick: false,
            drive: Drive::SeagateSt3500320as,
            seed: 2,
        }
    }
}

/// The seed's stripe unit.
pub const FIG7_CHUNK_BYTES: u64 = 64 << 10;
/// The seed's disk capacity used per member (3 GB).
pub const FIG7_MEMBER_BYTES: u64 = 3_000_000_000;

/// The three arrays of Figure 7: (label, scheme, parity policy).
fn fig7_arrays() -> Vec<(&'static str, Arc<dyn Scheme>, ParityPolicy)> {
    let d = |n: usize| Params {
        disks: Some(n),
        ..Params::default()
    };
    let raid5 = layout::build(SchemeKind::Raid5, &d(3)).expect("raid5 over 3 disks");
    let rm2 = layout::build(SchemeKind::Rm2, &d(4)).expect("rm2 over 4 disks");
    vec![
        ("RAID5 (3 disks)", raid5, ParityPolicy::Eager),
        ("RM2 (4 disks)", rm2.clone(), ParityPolicy::Eager),
        ("RM2+LPU (4 disks)", rm2, ParityPolicy::Lazy),
    ]
}

/// Runs one closed-loop random workload and returns its report.
#[allow(clippy::too_many_arguments)]
pub fn run_closed_loop(
    scheme: Arc<dyn Scheme>,
    chunk_bytes: u64,
    member_bytes: u64,
    mut cfg: SimConfig,
    parity: ParityPolicy,
    read: bool,
    size_bytes: u64,
    qd: u32,
    requests: u64,
    seed: u64,
) -> Result<Report, SimError> {
    cfg.parity = parity;
    // The seed's controller keeps the list in its own memory: no member I/O for it (the
    // engine writes it to the members, which `LazyModel::Engine` charges).
    cfg.lazy_model = LazyModel::Controller;
    // Never fill the list during a run when it can hold every deferral (see the module docs).
    cfg.bpgl_capacity = BPGL_MAX_CAPACITY;
    let spec = format!(
        "random:read={}:size={size_bytes}:qd={qd}:requests={requests}",
        if read { 1 } else { 0 }
    );
    let spec = WorkloadSpec::parse(&spec, seed, None)
        .map_err(|e| SimError::Config(format!("workload: {e}")))?;
    let geo = Geometry::new(scheme, chunk_bytes, member_bytes)?;
    let mut source = spec.open(geo.capacity_bytes(), &SourceOptions::default())?;
    Simulator::new(geo, cfg)?.run(&mut source)
}

/// Seed 002 Figure 7 on simulated disks: rows for every workload (4 KiB and 128 KiB random
/// reads and writes), queue depth and array, in that order.
pub fn figure7(opts: &Fig7Options) -> Result<Vec<Fig7Row>, SimError> {
    let qds: &[u32] = if opts.quick {
        &[1, 4, 16, 32]
    } else {
        &[1, 2, 4, 8, 16, 32]
    };
    let mut rows = Vec::new();
    for (size, read) in [
        (4096u64, true),
        (4096, false),
        (128 << 10, true),
        (128 << 10, false),
    ] {
        let workload = format!(
            "{}K random {}",
            size >> 10,
            if read { "read" } else { "write" }
        );
        for &qd in qds {
            // Enough requests for the queue to matter, few enough to stay well under the
            // list's bound.
            let requests = if opts.quick {
                (150 + 15 * qd) as u64
            } else {
                (1000 + 100 * qd) as u64
            };
            for (label, scheme, parity) in fig7_arrays() {
                let mut cfg = SimConfig::new(opts.drive.params());
                cfg.seed = opts.seed;
                // The arrays are large (3 GB per member): validate plans, skip the byte checker.
                cfg.mem_check_max_bytes = 0;
                let r = run_closed_loop(
                    scheme,
                    FIG7_CHUNK_BYTES,
                    FIG7_MEMBER_BYTES,
                    cfg,
                    parity,
                    read,
                    size,
                    qd,
                    requests,
                    opts.seed ^ u64::from(qd),
                )?;
                rows.push(Fig7Row {
                    workload: workload.clone(),
                    size_bytes: size,
                    read,
                    qd,
                    scheme: label.to_string(),
                    iops: r.throughput_iops,
                    mb_per_s: r.throughput_iops * size as f64 / 1e6,
                    member_ios_per_request: r.member_ios as f64 / r.requests.max(1) as f64,
                    forced_flushes: r.lazy.as_ref().map_or(0, |l| l.forced_flushes),
                });
            }
        }
    }
    Ok(rows)
}

/// Lazy against eager throughput of small random writes on one array.
#[derive(Clone, Debug, PartialEq)]
pub struct Speedup {
    /// Eager parity, requests per second.
    pub eager_iops: f64,
    /// Lazy parity, requests per second.
    pub lazy_iops: f64,
    /// Member I/Os per request, eager and lazy (the lazy figure includes the flush after the
    /// run).
    pub eager_ios_per_write: f64,
    /// See `eager_ios_per_write`.
    pub lazy_ios_per_write: f64,
}

impl Speedup {
    /// `lazy_iops / eager_iops`.
    pub fn ratio(&self) -> f64 {
        self.lazy_iops / self.eager_iops
    }
}

/// Closed-loop random writes of `size_bytes` at queue depth `qd` on `scheme`, eager and then
/// lazy parity, same workload and seed, on disks scheduling their queues with `scheduler`.
#[allow(clippy::too_many_arguments)]
pub fn small_write_speedup(
    scheme: Arc<dyn Scheme>,
    drive: Drive,
    scheduler: Scheduler,
    chunk_bytes: u64,
    member_bytes: u64,
    size_bytes: u64,
    qd: u32,
    requests: u64,
) -> Result<Speedup, SimError> {
    let mut out = [(0.0, 0.0); 2];
    for (i, parity) in [ParityPolicy::Eager, ParityPolicy::Lazy]
        .into_iter()
        .enumerate()
    {
        let mut cfg = SimConfig::new(drive.params());
        cfg.mem_check_max_bytes = 0;
        cfg.scheduler = scheduler;
        let r = run_closed_loop(
            scheme.clone(),
            chunk_bytes,
            member_bytes,
            cfg,
            parity,
            false,
            size_bytes,
            qd,
            requests,
            7,
        )?;
        out[i] = (
            r.throughput_iops,
            r.member_ios as f64 / r.requests.max(1) as f64,
        );
    }
    Ok(Speedup {
        eager_iops: out[0].0,
        lazy_iops: out[1].0,
        eager_ios_per_write: out[0].1,
        lazy_ios_per_write: out[1].1,
    })
}

//! The thesis's bench (seed 004, chapters 3-6), shared by the RAID4S, RAIDE and RAIDH
//! reproductions: 5-device arrays of WD Caviar Black disks and Intel X25-E SSDs, 12.25 GB
//! partitions, XDD-like closed-loop jobs, every run memoised so that figures replotting the same
//! sweep (Figures 3.14/3.15, 4.2/4.13/4.15, ...) reuse it.

use std::collections::HashMap;

use layout::{Disk, Params, SchemeKind};
use raidcore::{Geometry, WritePolicy};
use sim::{Failure, SimConfig, Simulator, SourceOptions, WorkloadSpec};

use crate::raid4s::BENCH;

pub(crate) const KIB: u64 = 1024;

/// One simulator run on the thesis's bench.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    /// What the report calls the array.
    pub name: &'static str,
    pub kind: SchemeKind,
    /// RAIDH parity weights.
    pub weights: Option<Vec<u32>>,
    pub disks: usize,
    pub chunk: u64,
    /// Members that are the X25-E (the others are WD6401AALS disks).
    pub ssd: Vec<Disk>,
    pub policy: WritePolicy,
    /// A `sim::WorkloadSpec` text.
    pub workload: String,
    /// A member failed from the start and never rebuilt (degraded mode).
    pub failed: Option<Disk>,
    /// Member I/O alignment (MD's 4 KiB stripe-cache pages; 1: none).
    pub io_align: u64,
}

impl Job {
    /// A 4+1 array of `kind` with 64 KiB chunks, MD's policy, the given SSD members.
    pub fn array(name: &'static str, kind: SchemeKind, ssd: &[Disk]) -> Job {
        Job {
            name,
            kind,
            weights: None,
            disks: BENCH.disks,
            chunk: BENCH.chunk_bytes,
            ssd: ssd.to_vec(),
            policy: WritePolicy::Md,
            workload: String::new(),
            failed: None,
            io_align: 1,
        }
    }

    /// RAIDH with `weights` and the given SSD members.
    pub fn raidh(name: &'static str, weights: &[u32], ssd: &[Disk]) -> Job {
        let mut j = Job::array(name, SchemeKind::RaidH, ssd);
        j.disks = weights.len();
        j.weights = Some(weights.to_vec());
        j
    }

    /// The same array running `workload`.
    pub fn with(&self, workload: String) -> Job {
        let mut j = self.clone();
        j.workload = workload;
        j
    }

    pub fn policy(mut self, p: WritePolicy) -> Job {
        self.policy = p;
        self
    }

    pub fn chunk(mut self, c: u64) -> Job {
        self.chunk = c;
        self
    }
}

/// The arrays of chapter 3 (Figure 3.5) and chapter 4 (Figure 4.9), 4+1 with 64 KiB chunks.
pub(crate) mod arrays {
    use super::*;
    pub fn raid0() -> Job {
        Job::array("RAID0", SchemeKind::Raid0, &[])
    }
    pub fn raid5() -> Job {
        Job::array("RAID5", SchemeKind::Raid5, &[])
    }
    pub fn raid4() -> Job {
        Job::array("RAID4", SchemeKind::Raid4, &[])
    }
    /// RAID4 with the parity member the SSD.
    pub fn raid4s() -> Job {
        Job::array("RAID4S", SchemeKind::Raid4, &[4])
    }
    /// Chapter 3's RAID5S: RAID5 with one member (the last) the SSD.
    pub fn raid5s() -> Job {
        Job::array("RAID5S", SchemeKind::Raid5, &[4])
    }
    /// RAIDF5 (chapter 3), which chapter 4 calls RAID5S: RAID5 of SSDs only.
    pub fn raidf5(name: &'static str) -> Job {
        Job::array(name, SchemeKind::Raid5, &[0, 1, 2, 3, 4])
    }
}

/// Requests for a sweep point of `size` bytes: 256 MiB of writes (the thesis's run length),
/// 1,000 to 65,536 requests; quick: 32 MiB, 1,000 to 4,000.
pub(crate) fn requests_for(size: u64, quick: bool) -> u64 {
    if quick {
        ((32 << 20) / size.max(1)).clamp(1_000, 4_000)
    } else {
        (BENCH.bytes_per_point / size.max(1)).clamp(1_000, 1 << 16)
    }
}

/// XDD's random writes: `size` bytes at offsets aligned to `align`, queue depth 10.
pub(crate) fn random_writes(size: u64, align: u64, quick: bool) -> String {
    format!(
        "random:read=0:size={size}:qd={}:requests={}:align={align}",
        BENCH.queue_depth,
        requests_for(size, quick)
    )
}

/// Runs jobs, memoised.
pub(crate) struct Bench {
    memo: HashMap<String, sim::Report>,
    /// Runs done (memo hits excluded).
    pub runs: usize,
}

impl Bench {
    pub fn new() -> Bench {
        Bench {
            memo: HashMap::new(),
            runs: 0,
        }
    }

    /// Runs `job` (or returns the earlier identical run).
    pub fn run(&mut self, job: &Job) -> anyhow::Result<sim::Report> {
        let key = format!("{job:?}");
        if let Some(r) = self.memo.get(&key) {
            return Ok(r.clone());
        }
        let scheme = layout::build(
            job.kind,
            &Params {
                disks: Some(job.disks),
                weights: job.weights.clone(),
                ..Default::default()
            },
        )?;
        let geo =
            Geometry::new(scheme, job.chunk, BENCH.member_bytes)?.with_io_align(job.io_align)?;
        let mut cfg = SimConfig::new(BENCH.hdd.params());
        cfg.drive_overrides = job.ssd.iter().map(|d| (*d, BENCH.ssd.params())).collect();
        cfg.write_policy = job.policy.clone();
        cfg.mem_check_max_bytes = 0;
        cfg.seed = 1;
        if let Some(m) = job.failed {
            cfg.failure = Some(Failure {
                member: m,
                at_ns: 0,
            });
            cfg.rebuild_delay_ns = None;
        }
        let spec = WorkloadSpec::parse(&job.workload, 1, None)?;
        let mut source = spec.open(geo.capacity_bytes(), &SourceOptions::default())?;
        let report = Simulator::new(geo, cfg)?.run(&mut source)?;
        self.runs += 1;
        self.memo.insert(key, report.clone());
        Ok(report)
    }

    /// MB/s of a run of fixed-size requests.
    pub fn mbps(&mut self, job: &Job, size: u64) -> anyhow::Result<f64> {
        Ok(self.run(job)?.throughput_iops * size as f64 / 1e6)
    }
}

/// The drives and bench settings, as every thesis experiment states them.
pub(crate) fn bench_config(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut c = vec![
        (
            "drives",
            "HDD: sim::Drive::WdWd6401aals (WD Caviar Black 640 GB); SSD: \
             sim::Drive::IntelX25e64gb (Intel X25-E 64 GB); datasheet parameters"
                .to_string(),
        ),
        (
            "member partition",
            "12.25 GB from the outer edge of each drive".into(),
        ),
        ("simulator", "sim::Simulator, FIFO queues, seed 1".into()),
    ];
    for (k, v) in extra {
        match c.iter_mut().find(|(ck, _)| ck == k) {
            Some(e) => e.1 = v.clone(),
            None => c.push((k, v.clone())),
        }
    }
    c
}

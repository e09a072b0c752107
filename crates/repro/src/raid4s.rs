//! Reproduction of seed 004 chapters 3-4 (Wacha's thesis): RAID4S, a RAID4 whose parity device
//! is an SSD, and RAID4S-modthresh, its modified read-modify-write threshold.
//!
//! - `table3.3`: I/Os per disk for small writes, RAID4 vs RAID4S, stripe widths 3..300, counted
//!   in the planner's own plans (RAID4 is `raid4`; RAID4S is RAIDH with all parity weight on the
//!   SSD, weights `{0, ..., 0, 1}`).
//! - `fig3.14`: random-write throughput of 4+1 arrays (64 KiB chunks, 4..256 KiB writes,
//!   queue depth 10): RAID5, RAID4, RAID4S (X25-E parity) and RAID5S (RAID5 with one member
//!   replaced by the X25-E, thesis Figure 3.5), on simulated WD6401AALS disks.
//! - `fig4.1` / `fig4.10`: RAID4S-modthresh vs RAID4S for 64..256 KiB writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use layout::{Disk, Params, Scheme, SchemeKind};
use raidcore::{plan_write, ArrayState, Geometry, IoCounts, WritePolicy};
use sim::svg::{LineChart, Series};
use sim::{Drive, DriveParams, SimConfig, SourceOptions, WorkloadSpec};

use crate::{published_notes, Claim, Experiment, Opts, Plot, Row};

/// The paper.
pub const SOURCE: &str = "A. Wacha, \"Incorporating SSDs into distributed storage systems\", PhD \
     thesis, UC Santa Cruz, 2012 (seed 004), chapters 3-4: RAID4S and RAID4S-modthresh";

/// The experiments [`run`] returns, in order.
#[rustfmt::skip]
pub const EXPERIMENTS: &[&str] = &[
    "table3.3", "fig3.14", "fig4.1", "fig4.10", "fig3.1", "fig3.2", "fig3.7", "fig3.8", "fig3.9",
    "fig3.10", "fig3.12", "fig3.13", "fig3.16", "fig3.17", "fig3.19", "fig3.20", "fig3.21",
    "fig3.22", "fig3.23", "fig3.24", "fig3.25", "fig3.27", "fig3.29", "fig4.2", "fig4.3", "fig4.5",
    "fig4.11", "fig4.12", "fig4.13", "fig4.14", "fig4.15", "fig4.16",
];

const KIB: u64 = 1024;

/// Table 3.3 as published: (stripe width, RAID4 I/Os per disk, RAID4S I/Os per disk,
/// reduction %).
pub const TABLE_3_3: [(usize, f64, f64, f64); 8] = [
    (3, 1.33, 1.0, 25.0),
    (4, 1.0, 0.67, 33.0),
    (5, 0.8, 0.5, 38.0),
    (10, 0.4, 0.22, 44.0),
    (50, 0.08, 0.041, 49.0),
    (100, 0.04, 0.020, 49.5),
    (200, 0.02, 0.010, 49.7),
    (300, 0.013, 0.007, 49.8),
];

/// The hardware and benchmark of sections 3.8 and 4.4, shared by every throughput experiment.
pub struct Bench {
    /// Array members: 4 data + 1 parity.
    pub disks: usize,
    /// Chunk (stripe unit).
    pub chunk_bytes: u64,
    /// Member partition: 12.25 GB at the outer edge of each drive.
    pub member_bytes: u64,
    /// XDD queue depth.
    pub queue_depth: u32,
    /// The hard disk: WD Caviar Black 640 GB.
    pub hdd: Drive,
    /// The SSD: Intel X25-E 64 GB.
    pub ssd: Drive,
    /// Data moved per write size in the thesis (256 MB; chapter 4 uses 3 x 128 MB).
    pub bytes_per_point: u64,
}

/// Sections 3.8 / 4.4.
pub const BENCH: Bench = Bench {
    disks: 5,
    chunk_bytes: 64 * KIB,
    member_bytes: 12_250 * 1024 * 1024,
    queue_depth: 10,
    hdd: Drive::WdWd6401aals,
    ssd: Drive::IntelX25e64gb,
    bytes_per_point: 256 << 20,
};

/// An array of the thesis: scheme and which members are the SSD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Array {
    /// All-HDD RAID5 (MD's left-symmetric).
    Raid5,
    /// All-HDD RAID4 (parity on the last member).
    Raid4,
    /// RAID4 with the parity member an X25-E.
    Raid4s,
    /// RAID5 with the last member an X25-E (Figure 3.5).
    Raid5s,
}

impl Array {
    /// Name used in rows and plots.
    pub fn name(self) -> &'static str {
        match self {
            Array::Raid5 => "RAID5",
            Array::Raid4 => "RAID4",
            Array::Raid4s => "RAID4S",
            Array::Raid5s => "RAID5S",
        }
    }
    fn kind(self) -> SchemeKind {
        match self {
            Array::Raid5 | Array::Raid5s => SchemeKind::Raid5,
            Array::Raid4 | Array::Raid4s => SchemeKind::Raid4,
        }
    }
    fn ssd_members(self, disks: usize) -> Vec<Disk> {
        match self {
            Array::Raid5 | Array::Raid4 => vec![],
            Array::Raid4s | Array::Raid5s => vec![(disks - 1) as Disk],
        }
    }
}

/// Member I/O counts per member summed over the plans of `writes` (offset, length).
pub(crate) fn count_plan_ios(
    geo: &Geometry,
    writes: impl IntoIterator<Item = (u64, u64)>,
    policy: &WritePolicy,
) -> anyhow::Result<BTreeMap<Disk, IoCounts>> {
    let state = ArrayState::new(geo);
    let mut per: BTreeMap<Disk, IoCounts> = BTreeMap::new();
    for (off, len) in writes {
        for plan in plan_write(geo, &state, off, len, policy)? {
            for (m, c) in plan.per_member() {
                *per.entry(m).or_default() += c;
            }
        }
    }
    Ok(per)
}

/// One simulated throughput point.
#[derive(Clone, Debug)]
pub(crate) struct Point {
    pub mb_per_s: f64,
    pub report: sim::Report,
}

/// Runs `requests` random writes of `size` (aligned to their own size, as XDD's seek range
/// does) at queue depth `qd` on `scheme` with the given members replaced by other drives.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sim_writes(
    scheme: Arc<dyn Scheme>,
    chunk_bytes: u64,
    member_bytes: u64,
    drive: DriveParams,
    overrides: Vec<(Disk, DriveParams)>,
    policy: WritePolicy,
    size: u64,
    qd: u32,
    requests: u64,
) -> anyhow::Result<Point> {
    let mut cfg = SimConfig::new(drive);
    cfg.drive_overrides = overrides;
    cfg.write_policy = policy;
    cfg.mem_check_max_bytes = 0;
    cfg.failure = None;
    let spec = WorkloadSpec::parse(
        &format!("random:read=0:size={size}:qd={qd}:requests={requests}:align={size}"),
        1,
        None,
    )?;
    let report = sim::simulate(
        scheme,
        chunk_bytes,
        member_bytes,
        cfg,
        &spec,
        &SourceOptions::default(),
    )?;
    Ok(Point {
        mb_per_s: report.throughput_iops * size as f64 / 1e6,
        report,
    })
}

fn requests_for(size: u64, quick: bool) -> u64 {
    if quick {
        // At least a thousand writes per point: a stable mean at queue depth 10.
        ((32 << 20) / size.max(1)).clamp(1_000, 4_000)
    } else {
        (BENCH.bytes_per_point / size).clamp(1_000, 1 << 16)
    }
}

fn run_array(a: Array, size: u64, policy: WritePolicy, quick: bool) -> anyhow::Result<Point> {
    let b = &BENCH;
    let p = Params {
        disks: Some(b.disks),
        ..Default::default()
    };
    let scheme = layout::build(a.kind(), &p)?;
    let overrides = a
        .ssd_members(b.disks)
        .into_iter()
        .map(|m| (m, b.ssd.params()))
        .collect();
    sim_writes(
        scheme,
        b.chunk_bytes,
        b.member_bytes,
        b.hdd.params(),
        overrides,
        policy,
        size,
        b.queue_depth,
        requests_for(size, quick),
    )
}

/// Runs every experiment of this seed.
pub fn run(opts: &Opts, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>> {
    progress("table3.3: I/Os per disk for small writes from the planner's plans");
    let mut out = vec![table3_3()?];
    progress("fig3.14: random-write throughput, RAID5 / RAID4 / RAID4S / RAID5S");
    out.push(fig3_14(opts, progress)?);
    progress("fig4.1 / fig4.10: RAID4S-modthresh vs RAID4S");
    out.extend(fig4_1(opts, progress)?);
    let mut b = crate::thesis::Bench::new();
    progress("fig3.1: RAID0 vs RAID5");
    out.push(crate::thesis3::fig3_1(&mut b, opts, progress)?);
    progress("fig3.2: I/Os of RMW and RCW from the plans");
    out.push(crate::thesis3::fig3_2()?);
    progress("fig3.7: cost and throughput");
    out.push(crate::thesis3::fig3_7(&mut b, opts)?);
    progress("fig3.8-3.13: power and disk-time models");
    out.push(crate::power::fig3_8_9(true));
    out.push(crate::power::fig3_8_9(false));
    out.push(crate::power::fig3_10());
    out.push(crate::power::fig3_12_13(true));
    out.push(crate::power::fig3_12_13(false));
    progress("fig3.16: RAID0, RAID5, RAID4S, RAIDF5");
    out.push(crate::thesis3::fig3_16(&mut b, opts, progress)?);
    progress("fig3.17: unaligned small writes");
    out.push(crate::thesis3::fig3_17(&mut b, opts, progress)?);
    progress("fig3.19-3.24: reads and writes per device from the plans");
    out.extend(crate::thesis3::fig3_19_24()?);
    progress("fig3.25: read/write mix");
    out.push(crate::thesis3::fig3_25(&mut b, opts, progress)?);
    progress("fig3.27: degraded random writes");
    out.push(crate::thesis3::fig3_27(&mut b, opts, progress)?);
    progress("fig3.29: Financial1-like replay");
    out.push(crate::thesis3::fig3_29(&mut b, opts, progress)?);
    out.extend(crate::thesis4::run(&mut b, opts, progress)?);
    Ok(out)
}

/// Table 3.3 from plan counts: every small (4 KiB) write at the start of each data chunk of a
/// cycle, planned as a read-modify-write; I/Os on the disks divided by the number of disks.
pub fn table3_3() -> anyhow::Result<Experiment> {
    let chunk = 64 * KIB;
    let mut e = Experiment::new(
        "table3.3",
        "Average I/Os per disk for every small write, RAID4 vs RAID4S",
        &[
            (
                "widths",
                "3, 4, 5, 10, 50, 100, 200, 300 devices (data + parity)".into(),
            ),
            (
                "RAID4",
                "layout raid4 (parity on the last device), every device a disk".into(),
            ),
            (
                "RAID4S",
                "layout raidh --weights 0,...,0,1 (all parity on the last device, the SSD); \
                 I/Os on the SSD are not disk I/Os"
                    .into(),
            ),
            (
                "writes",
                "one 4 KiB write at the start of every data chunk of a cycle (64 KiB chunks), \
                 planned by raidcore::plan_write with the always-RMW policy (the thesis's small \
                 write: read old data and parity, write both); member I/Os counted in the plans"
                    .into(),
            ),
        ],
    );
    let mut ok = true;
    let mut series4 = Vec::new();
    let mut series4s = Vec::new();
    for &(w, p4, p4s, pred) in &TABLE_3_3 {
        let raid4 = layout::build(
            SchemeKind::Raid4,
            &Params {
                disks: Some(w),
                ..Default::default()
            },
        )?;
        let mut weights = vec![0u32; w];
        weights[w - 1] = 1;
        let raid4s = layout::build(
            SchemeKind::RaidH,
            &Params {
                weights: Some(weights),
                ..Default::default()
            },
        )?;
        let per_disk = |scheme: Arc<dyn Scheme>, ssd: Option<Disk>| -> anyhow::Result<f64> {
            let geo = Geometry::new(scheme, chunk, chunk * 4)?;
            let writes: Vec<(u64, u64)> = (0..geo.data_per_cycle())
                .map(|i| (i * chunk, 4 * KIB))
                .collect();
            let n = writes.len() as f64;
            let per = count_plan_ios(&geo, writes, &WritePolicy::Rmw)?;
            let disks: Vec<Disk> = (0..geo.disks() as Disk)
                .filter(|d| Some(*d) != ssd)
                .collect();
            let ios: u64 = disks
                .iter()
                .map(|d| per.get(d).map_or(0, |c| c.reads + c.writes))
                .sum();
            Ok(ios as f64 / n / disks.len() as f64)
        };
        let a = per_disk(raid4, None)?;
        let b = per_disk(raid4s, Some((w - 1) as Disk))?;
        let red = (1.0 - b / a) * 100.0;
        let rounding = "The thesis rounds to two or three digits; ours is the exact plan count.";
        let mut ra = Row::new(
            format!("width {w} RAID4 I/Os per disk"),
            Some(p4),
            a,
            "I/Os",
        );
        let mut rb = Row::new(
            format!("width {w} RAID4S I/Os per disk"),
            Some(p4s),
            b,
            "I/Os",
        );
        if ra.differs() {
            ra = ra.with_note(rounding);
        }
        if rb.differs() {
            rb = rb.with_note(rounding);
        }
        e.rows.push(ra);
        e.rows.push(rb);
        e.rows.push(Row::new(
            format!("width {w} reduction %"),
            Some(pred),
            red,
            "%",
        ));
        // Eq. 3.1 / 3.2 of the thesis: 4/W and 2/(W-1).
        ok &= (a - 4.0 / w as f64).abs() < 1e-9 && (b - 2.0 / (w as f64 - 1.0)).abs() < 1e-9;
        series4.push((w as f64, a));
        series4s.push((w as f64, b));
    }
    e.claims.push(Claim::new(
        "Plans give 4/W I/Os per disk for RAID4 and 2/(W-1) for RAID4S (thesis Eq. 3.1, 3.2)",
        ok,
        "exact for every width".to_string(),
    ));
    e.notes.push(
        "Small writes are planned as read-modify-writes, as the thesis counts them. MD's own \
         rule would reconstruct-write a one-chunk write when that reads no more units (RAID4 of \
         3 devices, RAID4S of 4), giving 1 I/O per disk there instead."
            .into(),
    );
    e.plots.push(Plot {
        caption: "I/Os per disk per small write (Figure 3.11 / Table 3.3)".into(),
        svg: LineChart {
            title: "Average I/Os per disk per small write".into(),
            x_label: "stripe width (devices)".into(),
            y_label: "I/Os per disk (log scale)".into(),
            series: [("RAID4", series4), ("RAID4S", series4s)]
                .into_iter()
                .map(|(name, pts)| {
                    let paper = pts
                        .iter()
                        .filter_map(|&(w, _)| {
                            crate::published(&e, &format!("width {w} {name} I/Os per disk"))
                                .map(|v| (w, v))
                        })
                        .collect();
                    Series::line(name, pts).with_published(paper)
                })
                .collect(),
            markers: Vec::new(),
            log_y: true,
            log_x: true,
            ..Default::default()
        }
        .to_svg(),
    });
    Ok(e)
}

/// The benchmark configuration shown with Figures 3.14-3.15 and 4.1/4.10, with `extra`
/// entries added or replacing the base ones.
fn bench_config(
    sizes: &[u64],
    quick: bool,
    extra: &[(&'static str, String)],
) -> Vec<(&'static str, String)> {
    let b = &BENCH;
    let mut c = vec![
        (
            "arrays",
            format!(
                "{} members (4 data + 1 parity), {} KiB chunks",
                b.disks,
                b.chunk_bytes / KIB
            ),
        ),
        (
            "drives",
            "HDD: sim::Drive::WdWd6401aals (WD Caviar Black 640 GB); SSD: \
             sim::Drive::IntelX25e64gb (Intel X25-E 64 GB); datasheet parameters"
                .into(),
        ),
        (
            "member partition",
            "12.25 GB from the outer edge of each drive".into(),
        ),
        (
            "workload",
            format!(
                "random writes only, offsets aligned to the write size (XDD's seek range), \
                 queue depth {}, sizes {} KiB",
                b.queue_depth,
                sizes
                    .iter()
                    .map(|s| (s / KIB).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        (
            "writes per point",
            if quick {
                "32 MiB of writes, 1,000..4,000 requests (quick)".into()
            } else {
                "256 MiB of writes (the thesis's run length), at least 1,000 requests".into()
            },
        ),
        ("simulator", "sim::simulate, FIFO queues, seed 1".into()),
    ];
    // An extra entry replaces the base entry of the same key (the JSON configuration is an
    // object: a repeated key would lose one of the two).
    for (k, v) in extra {
        match c.iter_mut().find(|(ck, _)| ck == k) {
            Some(e) => e.1 = v.clone(),
            None => c.push((k, v.clone())),
        }
    }
    c
}

/// Figures 3.14 and 3.15.
pub fn fig3_14(opts: &Opts, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Experiment> {
    let sizes: Vec<u64> = [4, 8, 16, 32, 64, 128, 256]
        .iter()
        .map(|k| k * KIB)
        .collect();
    let arrays = [Array::Raid5, Array::Raid4, Array::Raid4s, Array::Raid5s];
    let mut e = Experiment::new(
        "fig3.14",
        "Random-write throughput of 4+1 arrays: RAID5, RAID4, RAID4S, RAID5S (Figures 3.14-3.15)",
        &bench_config(
            &sizes,
            opts.quick,
            &[
                (
                    "write policy",
                    "MD (RMW when it reads fewer units, else RCW)".into(),
                ),
                ("RAID4S", "raid4 with member 4 (parity) the X25-E".into()),
                (
                    "RAID5S",
                    "raid5 with member 4 the X25-E (chapter 3's RAID5S: one SSD in a RAID5 \
                     layout)"
                        .into(),
                ),
            ],
        ),
    );
    let mut res: BTreeMap<(&'static str, u64), Point> = BTreeMap::new();
    for a in arrays {
        for &s in &sizes {
            progress(&format!("  {} {} KiB", a.name(), s / KIB));
            res.insert((a.name(), s), run_array(a, s, WritePolicy::Md, opts.quick)?);
        }
    }
    let mbps = |a: Array, s: u64| res[&(a.name(), s)].mb_per_s;
    // Published absolute values: the thesis quotes RAID5 ~8 MB/s and RAID4S(-modthresh, the
    // same plans at 64 KiB) ~14 MB/s at 64 KiB (section 6.5, from Figure 4.14), and RAID4S at
    // 128 KiB about 3 MB/s above its 64 KiB value (section 4.2, Figure 4.3).
    let published: BTreeMap<(&str, u64), f64> = [
        (("RAID5", 64 * KIB), 8.0),
        (("RAID4S", 64 * KIB), 14.0),
        (("RAID4S", 128 * KIB), 17.0),
    ]
    .into_iter()
    .collect();
    for a in arrays {
        for &s in &sizes {
            let mut r = Row::new(
                format!("{} {} KiB MB/s", a.name(), s / KIB),
                published.get(&(a.name(), s)).copied(),
                mbps(a, s),
                "MB/s",
            );
            if r.differs() {
                r = r.with_note(
                    "Our disk model's small random writes are faster than the thesis's MD + \
                     Caviar Black measurements (no MD stripe-cache/bitmap overheads, no drive \
                     write-cache effects); the ratios between arrays are the comparable part.",
                );
            }
            e.rows.push(r);
        }
    }
    for &s in &sizes {
        let mut r = Row::new(
            format!("RAID4S / RAID5 {} KiB", s / KIB),
            (s == 32 * KIB).then_some(1.6),
            mbps(Array::Raid4s, s) / mbps(Array::Raid5, s),
            "x",
        );
        if r.differs() {
            r = r.with_note(
                "Our X25-E model serves the parity RMW traffic of four disks with room to spare, \
                 so RAID4S approaches the 4-data-disk bound; the thesis's MD adds per-stripe \
                 overheads on the parity path that the simulator does not model.",
            );
        }
        e.rows.push(r);
    }
    let small: Vec<u64> = sizes.iter().copied().filter(|&s| s <= 64 * KIB).collect();
    let peak = small
        .iter()
        .map(|&s| mbps(Array::Raid4s, s) / mbps(Array::Raid5, s))
        .fold(0.0, f64::max);
    let mut r = Row::new("RAID4S / RAID5 peak over 4-64 KiB", Some(1.6), peak, "x");
    if r.differs() {
        r = r.with_note(
            "See the per-size ratio rows: the simulator has no MD overheads on the parity path.",
        );
    }
    e.rows.push(r);
    let peak4 = small
        .iter()
        .map(|&s| mbps(Array::Raid4s, s) / mbps(Array::Raid4, s))
        .fold(0.0, f64::max);
    // Section 3.5: "An existing RAID4 system can perform up to 3.3X better by replacing the
    // parity drive with an SSD."
    e.rows.push(Row::new(
        "RAID4S / RAID4 peak over 4-64 KiB",
        Some(3.3),
        peak4,
        "x",
    ));

    let beats = |x: Array, y: Array| -> (bool, String) {
        let ok = small.iter().all(|&s| mbps(x, s) > mbps(y, s));
        let ev = small
            .iter()
            .map(|&s| format!("{}K {:.2}x", s / KIB, mbps(x, s) / mbps(y, s)))
            .collect::<Vec<_>>()
            .join(", ");
        (ok, ev)
    };
    let (ok, ev) = beats(Array::Raid4s, Array::Raid5);
    e.claims.push(Claim::new(
        "RAID4S beats RAID5 on 4-64 KiB random writes",
        ok,
        ev,
    ));
    let (ok, ev) = beats(Array::Raid4s, Array::Raid4);
    e.claims.push(Claim::new(
        "RAID4S beats RAID4 on 4-64 KiB random writes (the parity bottleneck moves to the SSD)",
        ok,
        ev,
    ));
    let (ok, ev) = beats(Array::Raid5, Array::Raid4);
    e.claims.push(Claim::new(
        "RAID4 is slower than RAID5 on small random writes (parity disk bottleneck)",
        ok,
        ev,
    ));
    let (ok, ev) = beats(Array::Raid4s, Array::Raid5s);
    e.claims.push(Claim::new(
        "RAID4S beats RAID5S on 4-64 KiB random writes (the SSD is used for every parity)",
        ok,
        ev,
    ));
    let r32 = mbps(Array::Raid4s, 32 * KIB) / mbps(Array::Raid5, 32 * KIB);
    let r128 = mbps(Array::Raid4s, 128 * KIB) / mbps(Array::Raid5, 128 * KIB);
    e.claims.push(Claim::new(
        "The gain shrinks at 128 KiB, where writes become reconstruct-writes",
        r128 < r32,
        format!("RAID4S/RAID5: 32K {r32:.2}x, 128K {r128:.2}x"),
    ));
    let parity_reads_128 = res[&("RAID4S", 128 * KIB)].report.per_disk[4].reads;
    let parity_reads_64 = res[&("RAID4S", 64 * KIB)].report.per_disk[4].reads;
    let reads_256: u64 = res[&("RAID4S", 256 * KIB)]
        .report
        .per_disk
        .iter()
        .map(|d| d.reads)
        .sum();
    e.claims.push(Claim::new(
        "Member reads follow Figures 3.19-3.21: 64 KiB writes read the parity device, 128 KiB \
         writes never do, 256 KiB (full-stripe) writes read nothing",
        parity_reads_64 > 0 && parity_reads_128 == 0 && reads_256 == 0,
        format!(
            "RAID4S parity reads: 64K {parity_reads_64}, 128K {parity_reads_128}; reads at \
             256K: {reads_256}"
        ),
    ));
    e.notes.push(
        "Published values: the thesis prints Figure 3.14 as a chart; its text gives RAID4S / \
         RAID5 of nearly 1.6x at 32 KiB (Figure 3.15), RAID5 ~8 MB/s and RAID4S ~14 MB/s at \
         64 KiB (section 6.5, Figure 4.14), RAID4S at 128 KiB ~3 MB/s above 64 KiB \
         (section 4.2) and RAID4S up to 3.3x RAID4 (section 3.5)."
            .into(),
    );
    e.notes.push(
        "Chapter 4 (Figure 4.9) calls an all-SSD RAID5 \"RAID5S\"; this experiment uses \
         chapter 3's definition (Figure 3.5: one SSD in a RAID5 layout), the array of \
         Figure 3.14."
            .into(),
    );
    let kib = |s: u64| (s / KIB) as f64;
    e.plots.push(Plot {
        caption: "Figure 3.14: random-write throughput vs write size (queue depth 10)".into(),
        svg: LineChart {
            title: "Random write throughput, 4+1 arrays".into(),
            x_label: "write size (KiB)".into(),
            y_label: "MB/s (log scale)".into(),
            series: arrays
                .iter()
                .map(|&a| {
                    // The MB/s the thesis's text gives (the table's "... KiB MB/s" rows).
                    let paper = sizes
                        .iter()
                        .filter_map(|&s| {
                            let label = format!("{} {} KiB MB/s", a.name(), s / KIB);
                            crate::published(&e, &label).map(|v| (kib(s), v))
                        })
                        .collect();
                    Series::line(
                        a.name(),
                        sizes.iter().map(|&s| (kib(s), mbps(a, s))).collect(),
                    )
                    .with_published(paper)
                })
                .collect(),
            markers: Vec::new(),
            log_y: true,
            log_x: true,
            notes: published_notes(&e, |r| r.label.contains("peak")),
        }
        .to_svg(),
    });
    e.plots.push(Plot {
        caption: "Figure 3.15: throughput normalised to RAID5".into(),
        svg: LineChart {
            title: "Random write throughput / RAID5".into(),
            x_label: "write size (KiB)".into(),
            y_label: "x RAID5".into(),
            series: arrays
                .iter()
                .map(|&a| {
                    let paper = sizes
                        .iter()
                        .filter_map(|&s| {
                            let label = format!("{} / RAID5 {} KiB", a.name(), s / KIB);
                            crate::published(&e, &label).map(|v| (kib(s), v))
                        })
                        .collect();
                    Series::line(
                        a.name(),
                        sizes
                            .iter()
                            .map(|&s| (kib(s), mbps(a, s) / mbps(Array::Raid5, s)))
                            .collect(),
                    )
                    .with_published(paper)
                })
                .collect(),
            markers: Vec::new(),
            log_y: false,
            log_x: true,
            notes: published_notes(&e, |r| r.label.contains("peak")),
        }
        .to_svg(),
    });
    Ok(e)
}

/// Figures 4.1 (throughput) and 4.10 (speedup): RAID4S-modthresh vs RAID4S, 64..256 KiB.
pub fn fig4_1(opts: &Opts, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>> {
    let sizes: Vec<u64> = if opts.quick {
        vec![64, 96, 128, 160, 256]
    } else {
        (4..=16).map(|i| i * 16).collect()
    }
    .into_iter()
    .map(|k| k * KIB)
    .collect();
    let extra = [(
        "arrays",
        "RAID4S (raid4, member 4 the X25-E) with MD's policy vs the same array with \
             RAID4S-modthresh (RMW while rmw reads <= rcw reads + 1)"
            .to_string(),
    )];
    let mut a = Experiment::new(
        "fig4.1",
        "RAID4S-modthresh vs RAID4S random-write throughput, 64-256 KiB",
        &bench_config(&sizes, opts.quick, &extra),
    );
    let mut b = Experiment::new(
        "fig4.10",
        "Speedup of RAID4S-modthresh over RAID4S, 64-256 KiB",
        &bench_config(&sizes, opts.quick, &extra),
    );
    let mut md = Vec::new();
    let mut mt = Vec::new();
    for &s in &sizes {
        progress(&format!("  RAID4S / modthresh {} KiB", s / KIB));
        md.push(run_array(Array::Raid4s, s, WritePolicy::Md, opts.quick)?.mb_per_s);
        mt.push(run_array(Array::Raid4s, s, WritePolicy::Modthresh, opts.quick)?.mb_per_s);
    }
    let mut speed = Vec::new();
    for (i, &s) in sizes.iter().enumerate() {
        let k = s / KIB;
        a.rows.push(Row::new(
            format!("RAID4S {k} KiB MB/s"),
            None,
            md[i],
            "MB/s",
        ));
        a.rows.push(Row::new(
            format!("RAID4S-modthresh {k} KiB MB/s"),
            None,
            mt[i],
            "MB/s",
        ));
        let x = mt[i] / md[i];
        // The thesis: identical at and below 64 KiB and from about 144 KiB on; about +2 MB/s
        // on RAID4S's ~17 MB/s at 128 KiB (section 4.4), i.e. ~1.12x.
        let published = if k <= 64 || k >= 160 {
            Some(1.0)
        } else if k == 128 {
            Some(1.12)
        } else {
            None
        };
        let mut r = Row::new(format!("{k} KiB modthresh / RAID4S"), published, x, "x");
        if k == 128 {
            r = r.with_note(
                "An aligned 128 KiB write costs four disk I/Os either way (RMW reads and \
                 rewrites its two chunks, RCW reads the other two): disk busy time is equal in \
                 our runs, and as RMW uses each disk twice in a row the disks idle slightly more \
                 at queue depth 10; the thesis's MD-specific gain does not appear.",
            );
        } else if r.differs() || (k > 128 && k < 256 && x < 0.95) {
            r = r.with_note(
                "Size-aligned writes of this size often leave a stripe with two touched chunks, \
                 one partly covered (an MD tie); modthresh makes it an RMW that reads and \
                 rewrites the same disks, which idle more in between (see the 128 KiB row); the \
                 thesis saw no loss here.",
            );
        }
        b.rows.push(r);
        speed.push((k as f64, x));
    }
    let max = speed.iter().map(|p| p.1).fold(0.0, f64::max);
    let mut r = Row::new("peak speedup 64-256 KiB", Some(1.4), max, "x");
    if r.differs() {
        r = r.with_note(
            "The simulated X25-E absorbs the extra parity RMW traffic of medium writes easily, \
             so turning 128 KiB writes into RMWs gains more than on the thesis's hardware (its \
             1.4x peak was on unaligned sizes).",
        );
    }
    b.rows.push(r);
    let at = |k: u64| {
        speed
            .iter()
            .find(|p| p.0 == k as f64)
            .map(|p| p.1)
            .unwrap_or(f64::NAN)
    };
    let medium = speed
        .iter()
        .filter(|p| p.0 > 64.0 && p.0 <= 128.0)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    b.claims.push(Claim::new(
        "RAID4S-modthresh speeds up medium writes (some size in 64-128 KiB gains > 5 %)",
        medium > 1.05,
        format!("best {medium:.2}x"),
    ));
    let (x64, x256) = (at(64), at(256));
    b.claims.push(Claim::new(
        "RAID4S-modthresh does not change either end of the range: 64 KiB (small) and \
         256 KiB (full-stripe) writes (within 3 %)",
        (x64 - 1.0).abs() < 0.03 && (x256 - 1.0).abs() < 0.03,
        format!("64K {x64:.3}x, 256K {x256:.3}x"),
    ));
    b.notes.push(
        "Published: the thesis's text gives a maximum speedup of 1.4x for medium writes and \
         identical throughput at and below 64 KiB and from about 144 KiB up (Figure 4.1, 4.10); \
         its block-unaligned sweep used 4 KiB steps from 40 KiB, ours 16 KiB steps from 64 KiB \
         (32 KiB steps in the quick run)."
            .into(),
    );
    b.notes.push(
        "With size-aligned offsets, a 96..192 KiB write covers 2..3 chunks of one stripe; \
         modthresh keeps writes of up to half the data units (2 of 4) as RMWs, so 96 and \
         128 KiB writes change mode and larger ones do not."
            .into(),
    );
    let kx: Vec<f64> = sizes.iter().map(|s| (s / KIB) as f64).collect();
    a.plots.push(Plot {
        caption: "Figure 4.1: RAID4S-modthresh vs RAID4S throughput".into(),
        svg: LineChart {
            title: "Random write throughput, RAID4S vs RAID4S-modthresh".into(),
            x_label: "write size (KiB)".into(),
            y_label: "MB/s".into(),
            series: vec![
                Series::line(
                    "RAID4S",
                    kx.iter().copied().zip(md.iter().copied()).collect(),
                ),
                Series::line(
                    "RAID4S-modthresh",
                    kx.iter().copied().zip(mt.iter().copied()).collect(),
                ),
            ],
            markers: Vec::new(),
            log_y: false,
            ..Default::default()
        }
        .to_svg(),
    });
    b.plots.push(Plot {
        caption: "Figure 4.10: speedup of RAID4S-modthresh over RAID4S".into(),
        svg: LineChart {
            title: "RAID4S-modthresh / RAID4S".into(),
            x_label: "write size (KiB)".into(),
            y_label: "speedup (x)".into(),
            series: vec![
                Series::line("modthresh / RAID4S", speed.clone()).with_published(
                    speed
                        .iter()
                        .filter_map(|&(k, _)| {
                            crate::published(&b, &format!("{k} KiB modthresh / RAID4S"))
                                .map(|v| (k, v))
                        })
                        .collect(),
                ),
            ],
            markers: Vec::new(),
            log_y: false,
            notes: published_notes(&b, |r| r.label.contains("peak")),
            ..Default::default()
        }
        .to_svg(),
    });
    Ok(vec![a, b])
}

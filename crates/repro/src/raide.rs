//! Reproduction of seed 004 chapter 5 (Wacha's thesis): RAIDE, faster devices at the stripe
//! edges, and the uneven read load of small writes that motivates it.
//!
//! - `fig5.1`: reads per device of a 4+1 RAID5 (64 KiB chunks, MD's left-symmetric layout)
//!   under random writes of 64 KiB .. 1 MiB at offsets aligned to their size (XDD's seek
//!   range), counted in the planner's own plans over every offset of one period of the pattern:
//!   the expected share of each device for a uniformly random offset.
//! - `table5.1`: for a 2-chunk write on a 4-data-device array (RAID4 4+1, data position =
//!   device), the read-modify-writes and reconstruct-writes by start position, from the plans'
//!   chosen modes.
//! - `fig5.3`: the thesis's decomposition of a write into partial-stripe ("small") writes
//!   against the planner's plans, for every start position and every size spanning one or two
//!   stripes.
//! - `fig5.4`: random-write throughput of RAIDE (SSDs at positions 0 and 4, disks at 1-3) and
//!   RAID5N (SSDs at 1 and 3), simulated on the chapter-3 drives.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use layout::{Disk, Loc, Params, Role, Scheme, SchemeKind};
use raidcore::{plan_write, ArrayState, Geometry, WriteMode, WritePolicy};
use sim::svg::{LineChart, Series};

use crate::raid4s::{sim_writes, BENCH};
use crate::{Claim, Experiment, Opts, Plot, Row};

/// The paper.
pub const SOURCE: &str = "A. Wacha, \"Incorporating SSDs into distributed storage systems\", PhD \
     thesis, UC Santa Cruz, 2012 (seed 004), chapter 5: RAIDE";

/// The experiments [`run`] returns, in order.
pub const EXPERIMENTS: &[&str] = &["fig5.1", "table5.1", "fig5.3", "fig5.4"];

const KIB: u64 = 1024;
const CHUNK: u64 = 64 * KIB;

/// Table 5.1 as published: start position i, read-modify-writes, reconstruct-writes of a
/// 2-chunk write on a 4-data-device array.
pub const TABLE_5_1: [(u64, f64, f64); 4] =
    [(0, 0.0, 1.0), (1, 0.0, 1.0), (2, 0.0, 1.0), (3, 2.0, 0.0)];

/// Runs every experiment of this seed.
pub fn run(opts: &Opts, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>> {
    progress("fig5.1: reads per device of RAID5 writes, from the planner's plans");
    let a = fig5_1()?;
    progress("table5.1: rmw/rcw of 2-chunk writes by start position");
    let b = table5_1()?;
    progress("fig5.3: the thesis's small-write decomposition vs the planner");
    let c = fig5_3()?;
    progress("fig5.4: RAIDE vs RAID5N random-write throughput");
    let d = fig5_4(opts, progress)?;
    Ok(vec![a, b, c, d])
}

fn build(kind: SchemeKind, disks: usize) -> anyhow::Result<Arc<dyn Scheme>> {
    Ok(layout::build(
        kind,
        &Params {
            disks: Some(disks),
            ..Default::default()
        },
    )?)
}

/// Per stripe of the healthy cycle: which loc holds which (stripe, role).
fn unit_index(geo: &Geometry) -> HashMap<Loc, (usize, Role)> {
    let mut m = HashMap::new();
    for (s, st) in geo.healthy().stripes.iter().enumerate() {
        for u in &st.units {
            m.insert(u.loc(), (s, u.role));
        }
    }
    m
}

/// What the planner does with one write: per stripe it writes, (data units written, mode);
/// plus member reads per device.
struct Planned {
    stripes: Vec<(usize, WriteMode)>,
    reads: BTreeMap<Disk, u64>,
}

fn plan_one(
    geo: &Geometry,
    off: u64,
    len: u64,
    idx: &HashMap<Loc, (usize, Role)>,
) -> anyhow::Result<Planned> {
    let state = ArrayState::new(geo);
    let mut stripes = Vec::new();
    let mut reads = BTreeMap::new();
    let chunk = geo.chunk_bytes();
    for plan in plan_write(geo, &state, off, len, &WritePolicy::Md)? {
        let base = geo.base_row(plan.cycle);
        let mut touched: BTreeMap<usize, usize> = BTreeMap::new();
        for w in &plan.writes {
            let loc = Loc {
                disk: w.member,
                offset: w.offset_bytes / chunk - base,
            };
            if let Some(&(s, Role::Data)) = idx.get(&loc) {
                *touched.entry(s).or_default() += 1;
            }
        }
        for &(s, mode) in &plan.modes {
            stripes.push((touched.get(&s).copied().unwrap_or(0), mode));
        }
        for r in &plan.reads {
            *reads.entry(r.member).or_default() += 1;
        }
    }
    Ok(Planned { stripes, reads })
}

/// Figure 5.1 from plan counts.
pub fn fig5_1() -> anyhow::Result<Experiment> {
    let disks = 5;
    let geo = Geometry::new(build(SchemeKind::Raid5, disks)?, CHUNK, CHUNK * 4096)?;
    let idx = unit_index(&geo);
    // Left-symmetric parity repeats every 5 stripes of 4 data chunks: 1280 KiB of data.
    let period = geo.data_per_cycle() * CHUNK;
    let sizes: Vec<u64> = (1..=16).map(|i| i * 64 * KIB).collect();
    let mut e = Experiment::new(
        "fig5.1",
        "Reads per device of random writes on a 4+1 RAID5, 64 KiB .. 1 MiB (Figure 5.1)",
        &[
            (
                "array",
                "raid5 (MD left-symmetric), 5 devices, 64 KiB chunks".into(),
            ),
            (
                "writes",
                "every offset that is a multiple of the write size within one period of the \
                 layout (1280 KiB of data: 5 stripes of parity rotation), each planned by \
                 raidcore::plan_write with MD's rule; member reads counted in the plans (the \
                 expected iostat read counts of a uniformly random, size-aligned write)"
                    .into(),
            ),
        ],
    );
    let mut cov_by_size = Vec::new();
    let mut series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); disks];
    for &s in &sizes {
        let g = gcd(s, period);
        let offsets = period / g;
        let mut per = vec![0u64; disks];
        for m in 0..offsets {
            let p = plan_one(&geo, m * s, s, &idx)?;
            for (d, n) in p.reads {
                per[d as usize] += n;
            }
        }
        let total: u64 = per.iter().sum();
        let k = s / KIB;
        let shares: Vec<f64> = per
            .iter()
            .map(|&n| {
                if total > 0 {
                    100.0 * n as f64 / total as f64
                } else {
                    0.0
                }
            })
            .collect();
        let per_write: Vec<f64> = per.iter().map(|&n| n as f64 / offsets as f64).collect();
        for (d, v) in per_write.iter().enumerate() {
            e.rows.push(Row::new(
                format!("{k} KiB device {d} reads per write"),
                None,
                *v,
                "reads",
            ));
            series[d].push((k as f64, *v));
        }
        let cov = cov_pct(&per_write);
        e.rows.push(Row::new(
            format!("{k} KiB read CoV over devices"),
            None,
            cov,
            "%",
        ));
        let _ = shares;
        cov_by_size.push((k, cov, total));
    }
    let uneven: Vec<u64> = cov_by_size
        .iter()
        .filter(|c| c.1 > 1.0)
        .map(|c| c.0)
        .collect();
    let ev = cov_by_size
        .iter()
        .map(|c| format!("{} KiB {:.0} %", c.0, c.1))
        .collect::<Vec<_>>()
        .join(", ");
    e.claims.push(Claim::new(
        "Reads are uneven over the devices at 320, 640 and 960 KiB",
        [320u64, 640, 960].iter().all(|k| uneven.contains(k)),
        format!("read CoV: {ev}"),
    ));
    let full_stripe_free = cov_by_size
        .iter()
        .filter(|c| c.0 % 256 == 0)
        .all(|c| c.2 == 0);
    e.claims.push(Claim::new(
        "Writes of whole stripes (multiples of 256 KiB, aligned) read nothing",
        full_stripe_free,
        "256, 512, 768, 1024 KiB".to_string(),
    ));
    let max_cov = cov_by_size.iter().map(|c| c.1).fold(0.0, f64::max);
    let top3: Vec<u64> = {
        let mut v = cov_by_size.clone();
        v.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
        v.iter().take(3).map(|c| c.0).collect()
    };
    e.notes.push(format!(
        "Why the edges: a size-aligned write that is not a whole number of stripes starts at a \
         chunk position tied to its stripe's parity rotation (offset m x 320 KiB starts at \
         chunk m mod 4 of stripe 5m/4), so the partial-stripe writes at its two ends hit the \
         same physical devices again and again. The most uneven sizes here: {top3:?} KiB (read \
         CoV up to {max_cov:.0} %)."
    ));
    e.notes.push(
        "The thesis measured iostat read counts on MD; it gives no values in the text, so the \
         rows carry none."
            .into(),
    );
    e.plots.push(Plot {
        caption: "Figure 5.1: member reads per write, by device".into(),
        svg: LineChart {
            title: "Reads per write on each device, 4+1 RAID5".into(),
            x_label: "write size (KiB)".into(),
            y_label: "reads per write".into(),
            series: series
                .into_iter()
                .enumerate()
                .map(|(d, p)| Series::line(format!("device {d}"), p))
                .collect(),
            markers: Vec::new(),
            log_y: false,
            ..Default::default()
        }
        .to_svg(),
    });
    Ok(e)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Coefficient of variation (%) of `v`.
pub(crate) fn cov_pct(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    100.0 * var.sqrt() / mean
}

/// The 4+1 RAID4 of Table 5.1 and Figure 5.3 (data position = device).
fn raid4_geo() -> anyhow::Result<Geometry> {
    Ok(Geometry::new(
        build(SchemeKind::Raid4, 5)?,
        CHUNK,
        CHUNK * 64,
    )?)
}

/// Table 5.1 from the plans' modes.
pub fn table5_1() -> anyhow::Result<Experiment> {
    let geo = raid4_geo()?;
    let idx = unit_index(&geo);
    let n = 4u64;
    let mut e = Experiment::new(
        "table5.1",
        "Read-modify-writes and reconstruct-writes of a 2-chunk write by start position (Table 5.1)",
        &[
            (
                "array",
                "raid4, 4 data devices + parity, 64 KiB chunks (data position i = device i)"
                    .into(),
            ),
            (
                "writes",
                "2 chunks starting at data position i = 0..3 of a stripe, planned by \
                 raidcore::plan_write with MD's rule; the modes are the plan's per-stripe choices"
                    .into(),
            ),
        ],
    );
    let mut ok = true;
    let mut edge_reads = BTreeMap::new();
    for &(i, prmw, prcw) in &TABLE_5_1 {
        let p = plan_one(&geo, i * CHUNK, 2 * CHUNK, &idx)?;
        let rmw = p.stripes.iter().filter(|s| s.1 == WriteMode::Rmw).count() as f64;
        let rcw = p.stripes.iter().filter(|s| s.1 == WriteMode::Rcw).count() as f64;
        ok &= rmw == prmw && rcw == prcw;
        e.rows.push(Row::new(
            format!("i={i} j={} read-modify-writes", (i + 2) % n),
            Some(prmw),
            rmw,
            "stripes",
        ));
        e.rows.push(Row::new(
            format!("i={i} j={} reconstruct-writes", (i + 2) % n),
            Some(prcw),
            rcw,
            "stripes",
        ));
        if i == 3 {
            edge_reads = p.reads.clone();
        }
    }
    e.claims.push(Claim::new(
        "A 2-chunk write is one reconstruct-write inside a stripe and two read-modify-writes \
         across the edge",
        ok,
        "modes as in Table 5.1".to_string(),
    ));
    let data_reads: Vec<(Disk, u64)> = edge_reads
        .iter()
        .filter(|(d, _)| **d < 4)
        .map(|(d, n)| (*d, *n))
        .collect();
    e.claims.push(Claim::new(
        "The read-modify-writes across the edge read the edge devices 0 and 3 (and parity)",
        data_reads == vec![(0, 1), (3, 1)] && edge_reads.get(&4) == Some(&2),
        format!("reads of the i=3 write by device: {edge_reads:?}"),
    ));
    e.notes.push(
        "The printed j column (end position) reads 2, 3, 4, 0; the row labels give (i + 2) mod 4, \
         the first data position after the write."
            .into(),
    );
    Ok(e)
}

/// The thesis's decomposition (Figure 5.3) of a write of `k` chunks starting at data position
/// `i` of an `n`-data-device stripe into partial-stripe writes: (first, second) sizes, 0 for
/// none, and the full stripes, for writes spanning at most two stripes. The end position in
/// the second stripe is `j = i + k - n` (the printed formula for j does not give the values the
/// listing's cases need; see the report's notes).
pub fn thesis_decomposition(i: u64, k: u64, n: u64) -> (u64, u64, u64) {
    if n - i >= k {
        if n == k {
            (0, 0, 1)
        } else {
            (k, 0, 0)
        }
    } else {
        let j = i + k - n;
        if j == n {
            (n - i, 0, 1)
        } else if i == 0 {
            (0, j, 1)
        } else {
            (n - i, j, 0)
        }
    }
}

/// Figure 5.3 against the planner.
pub fn fig5_3() -> anyhow::Result<Experiment> {
    let geo = raid4_geo()?;
    let idx = unit_index(&geo);
    let n = 4u64;
    let mut e = Experiment::new(
        "fig5.3",
        "Partial-stripe writes of a write by start and size: the thesis's analysis vs the planner (Figure 5.3)",
        &[
            ("array", "raid4, 4 data devices + parity, 64 KiB chunks".into()),
            (
                "writes",
                "every start i = 0..3 and size k = 1..(8 - i) chunks (one or two stripes), \
                 planned by raidcore::plan_write; a stripe the plan writes with fewer than 4 data \
                 units is a partial-stripe (\"small\") write, one with 4 a full-stripe write"
                    .into(),
            ),
        ],
    );
    let (mut cases, mut agree) = (0u64, 0u64);
    let mut mismatches = Vec::new();
    for i in 0..n {
        for k in 1..=(2 * n - i) {
            let p = plan_one(&geo, i * CHUNK, k * CHUNK, &idx)?;
            let partial: Vec<u64> = p
                .stripes
                .iter()
                .map(|s| s.0 as u64)
                .filter(|&t| t < n)
                .collect();
            let full = p.stripes.iter().filter(|s| s.0 as u64 == n).count() as u64;
            let (a, b, mut f) = thesis_decomposition(i, k, n);
            // A "small write" of all n data units is a full stripe (the listing tests j == n
            // before i == 0, so a write of exactly two stripes comes out as n + full).
            f += [a, b].iter().filter(|&&x| x == n).count() as u64;
            let thesis: Vec<u64> = [a, b].into_iter().filter(|&x| x > 0 && x < n).collect();
            cases += 1;
            if thesis == partial && f == full {
                agree += 1;
            } else {
                mismatches.push(format!(
                    "i={i} k={k}: thesis {thesis:?}+{f} full, planner {partial:?}+{full} full"
                ));
            }
        }
    }
    e.rows
        .push(Row::new("cases (start, size)", None, cases as f64, "cases"));
    e.rows.push(Row::new(
        "cases where the planner's partial and full stripes match the analysis",
        None,
        agree as f64,
        "cases",
    ));
    e.claims.push(Claim::new(
        "The planner splits every write into the partial- and full-stripe writes of the thesis's analysis",
        agree == cases,
        if mismatches.is_empty() {
            format!("{agree} of {cases} cases")
        } else {
            mismatches.join("; ")
        },
    ));
    e.notes.push(
        "The listing computes the end position as (k - i) % n for writes crossing a stripe \
         edge, which is negative or wrong for most starts; its cases (\"j == n\": the write ends \
         on the edge) need the number of chunks in the second stripe, i + k - n, which we use. \
         A write of exactly two stripes (i = 0, k = 8) comes out of the listing as a \"small \
         write\" of all 4 units plus a full stripe; we count that small write as the full stripe \
         it is."
            .into(),
    );
    Ok(e)
}

/// Figure 5.4: RAIDE vs RAID5N.
pub fn fig5_4(opts: &Opts, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Experiment> {
    let b = &BENCH;
    let sizes: Vec<u64> = if opts.quick {
        vec![256, 320, 512, 960]
    } else {
        (1..=16).map(|i| i * 64).collect()
    }
    .into_iter()
    .map(|k| k * KIB)
    .collect();
    let mut e = Experiment::new(
        "fig5.4",
        "Random-write throughput: RAIDE (SSDs at the edges) vs RAID5N (SSDs inside) (Figure 5.4)",
        &[
            ("arrays", "raid5 (left-symmetric) of 5 members, 64 KiB chunks; RAIDE: X25-E at positions 0 and 4, WD6401AALS at 1-3; RAID5N: X25-E at 1 and 3, WD6401AALS at 0, 2, 4".into()),
            ("drives", "sim::Drive::WdWd6401aals and sim::Drive::IntelX25e64gb, datasheet parameters".into()),
            ("workload", format!("random writes aligned to their size, queue depth {}, {}", b.queue_depth, if opts.quick { "2,000 writes per point (quick)" } else { "256 MiB per point, 1,000..65,536 writes (the thesis: 8 GiB)" })),
            ("write policy", "MD's rule".into()),
        ],
    );
    let scheme = build(SchemeKind::Raid5, 5)?;
    let ssd = b.ssd.params();
    let run = |at: &[Disk], s: u64| {
        let requests = if opts.quick {
            2_000
        } else {
            (b.bytes_per_point / s).clamp(1_000, 1 << 16)
        };
        sim_writes(
            scheme.clone(),
            CHUNK,
            b.member_bytes,
            b.hdd.params(),
            at.iter().map(|d| (*d, ssd.clone())).collect(),
            WritePolicy::Md,
            s,
            b.queue_depth,
            requests,
        )
    };
    let (mut pe, mut pn) = (Vec::new(), Vec::new());
    let mut ratios = BTreeMap::new();
    for &s in &sizes {
        progress(&format!("  {} KiB", s / KIB));
        let re = run(&[0, 4], s)?.mb_per_s;
        let rn = run(&[1, 3], s)?.mb_per_s;
        let k = s / KIB;
        e.rows
            .push(Row::new(format!("RAIDE {k} KiB MB/s"), None, re, "MB/s"));
        e.rows
            .push(Row::new(format!("RAID5N {k} KiB MB/s"), None, rn, "MB/s"));
        e.rows.push(Row::new(
            format!("RAIDE / RAID5N {k} KiB"),
            None,
            re / rn,
            "x",
        ));
        pe.push((k as f64, re));
        pn.push((k as f64, rn));
        ratios.insert(k, re / rn);
    }
    let at = |k: u64| ratios.get(&k).copied().unwrap_or(f64::NAN);
    e.claims.push(Claim::new(
        "RAIDE beats RAID5N at 320 and 960 KiB (1.25 and 3.75 stripes)",
        at(320) > 1.0 && (opts.quick || at(960) > 1.0),
        format!("320 KiB {:.3}x, 960 KiB {:.3}x", at(320), at(960)),
    ));
    let worst = ratios.values().copied().fold(f64::INFINITY, f64::min);
    e.claims.push(Claim::new(
        "RAIDE nearly always performs equal to or better than RAID5N (never more than 5 % behind)",
        worst >= 0.95,
        format!("lowest RAIDE / RAID5N {worst:.3}"),
    ));
    e.plots.push(Plot {
        caption: "Figure 5.4: RAIDE vs RAID5N".into(),
        svg: LineChart {
            title: "Random-write throughput, 64 KiB chunks".into(),
            x_label: "write size (KiB)".into(),
            y_label: "MB/s".into(),
            series: vec![Series::line("RAIDE", pe), Series::line("RAID5N", pn)],
            markers: Vec::new(),
            log_y: false,
            ..Default::default()
        }
        .to_svg(),
    });
    Ok(e)
}

//! S2-RAID Figures 7 and 8: online rebuilds under the three benchmarks (TPC-C, PostMark,
//! TPC-W) and IOMeter-like write rates against block size.
//!
//! The benchmarks are stand-ins, said so in the report: TPC-C is the repository's real TPC-C
//! block trace (`tpcc-small.mqsim`, recorded on a flash device at ~50,000 requests/s, far
//! beyond nine 2008 disks) replayed closed-loop with 4 requests outstanding; PostMark is a
//! synthetic single-threaded small-file job (one request outstanding, mostly writes of 4 KiB
//! to 128 KiB); TPC-W is a synthetic light, bursty web-store load (open loop, Poisson within
//! ON periods). Their read shares, sizes, depths and rates are assumptions: the paper gives the
//! benchmarks' settings, not the block traffic they caused below the file system cache.

use super::{md_raid5, rate_mb_s, rebuilding_ms, s2raid5, Ctx, DRIVE, FAIL_RAID5, SEED};
use crate::simkit::{bytes_text, ratio, Load, RunSpec, Runner, KIB};
use crate::{Claim, Experiment, Plot, Row};

/// Figure 7, from the text: TPC-W's online rebuild speed-up ("smaller speedup: 4.25").
const FIG7_TPCW_SPEEDUP: f64 = 4.25;
/// Figure 7, from the text: "over a factor of 6 speedups" for TPC-C and PostMark (a bound).
const FIG7_HEAVY_MIN_SPEEDUP: f64 = 6.0;
/// Figure 7, from the text: response time "improved by 40% to 54%" (the range's low end).
const FIG7_MIN_RESPONSE_GAIN_PCT: f64 = 40.0;

/// A benchmark of Figure 7.
struct Bench {
    name: &'static str,
    what: &'static str,
}

const BENCHES: [Bench; 3] = [
    Bench {
        name: "TPC-C",
        what: "the repository's TPC-C block trace (tpcc-small.mqsim, real; 62.6 % reads, 8.3 KiB \
               mean), looped, closed loop with 4 requests outstanding",
    },
    Bench {
        name: "PostMark",
        what: "synthetic (assumed): single-threaded small-file transactions, 1 request \
               outstanding, 35 % reads, 4 KiB@50, 16 KiB@30, 128 KiB@20, random",
    },
    Bench {
        name: "TPC-W",
        what: "synthetic (assumed): a light, bursty web store: 80 % reads of 8 KiB@80, 64 KiB@20, \
               random, 60 requests/s in 2 s ON periods separated by 3 s idle",
    },
];

fn bench_load(ctx: &Ctx, b: &Bench) -> Load {
    match b.name {
        "TPC-C" => Load::ClosedTrace(ctx.tpcc.clone(), 4),
        "PostMark" => {
            Load::Synthetic("random:read=0.35:size=4K@50,16K@30,128K@20:qd=1:align=4K".into())
        }
        _ => Load::Synthetic("random:read=0.8:size=8K@80,64K@20:iops=60:burst=2/3:align=4K".into()),
    }
}

/// Figure 7: online rebuild under the three benchmarks, MD RAID5 against S2-RAID5.
pub(super) fn fig7(ctx: &Ctx, runner: &mut Runner) -> anyhow::Result<Experiment> {
    runner.say("fig7: online rebuild under TPC-C, PostMark, TPC-W");
    let (md, s2) = (md_raid5(1), s2raid5(1));
    let mut cfg = ctx.common_config();
    cfg.extend([
        ("MD array", format!("{} ({})", md.name, md.text())),
        ("S2-RAID array", format!("{} ({})", s2.name, s2.text())),
        (
            "failure",
            format!(
                "disk D{FAIL_RAID5} after {} s of the benchmark",
                ctx.scale.warmup_s
            ),
        ),
        (
            "speed limits",
            "MD defaults per MD array (1000 / 200000 KiB/s); S2-RAID5: 3 sub-array rebuilds".into(),
        ),
        (
            "benchmarks",
            BENCHES
                .iter()
                .map(|b| format!("{}: {}", b.name, b.what))
                .collect::<Vec<_>>()
                .join("; "),
        ),
        (
            "disk size",
            "the paper gave each disk 100 GB for the benchmarks; we keep the tables' size (see \
             data per disk): the speed-ups, not the times, are compared"
                .into(),
        ),
    ]);
    let mut e = Experiment::new(
        "fig7",
        "Online rebuild under TPC-C, PostMark and TPC-W, MD RAID5 vs S2-RAID5 (Figure 7)",
        &cfg,
    );
    let mut speedups = Vec::new();
    let mut gains = Vec::new();
    for b in &BENCHES {
        let load = bench_load(ctx, b);
        let spec = |a| ctx.spec(a, FAIL_RAID5, load.clone(), 1000);
        let mo = runner.online(&spec(md.clone()))?;
        let so = runner.online(&spec(s2.clone()))?;
        let (md_s, s2_s) = (mo.rebuild_s()?, so.rebuild_s()?);
        let (md_ms, s2_ms) = (rebuilding_ms(&mo), rebuilding_ms(&so));
        let sp = ratio(md_s, s2_s);
        speedups.push((b.name, sp, md_s, s2_s));
        for (what, v, unit) in [
            ("MD RAID5 online rebuild", md_s, "s"),
            ("S2-RAID5 online rebuild", s2_s, "s"),
            ("MD RAID5 mean response during rebuild", md_ms, "ms"),
            ("S2-RAID5 mean response during rebuild", s2_ms, "ms"),
        ] {
            e.rows
                .push(Row::new(format!("{}: {what}", b.name), None, v, unit));
        }
        // A rebuild over before any request arrived has no response time to compare.
        let seen = |o: &crate::simkit::Outcome| o.report.phase(sim::Phase::Rebuilding).count > 0;
        if seen(&mo) && seen(&so) {
            let gain = 100.0 * (1.0 - ratio(s2_ms, md_ms));
            gains.push((b.name, Some(gain)));
            e.rows.push(Row::new(
                format!("{}: response improvement of S2-RAID5 (1 - S2/MD)", b.name),
                None,
                gain,
                "%",
            ));
        } else {
            gains.push((b.name, None));
        }
        let published = (b.name == "TPC-W" && !ctx.opts.quick).then_some(FIG7_TPCW_SPEEDUP);
        e.rows.push(ctx.explain(
            Row::new(
                format!("{}: online rebuild speed-up (MD / S2-RAID5)", b.name),
                published,
                sp,
                "x",
            ),
            || {
                format!(
                    "Our MD rebuild averaged {:.1} MB/s and S2-RAID5's {:.1} MB/s: between the \
                     load's bursts the throttle goes to its maximum, where both rebuilds are \
                     bound by the modelled disks (the offline speed-up of Table 5), and during \
                     them to its minimum, where the speed-up is the 3 sub-array throttles \
                     against MD's one; the paper's TPC-W left its disks idler than our \
                     assumed stand-in.",
                    rate_mb_s(ctx.scale.data_bytes, md_s),
                    rate_mb_s(ctx.scale.data_bytes, s2_s)
                )
            },
        ));
    }
    let why_throttle = "Under a load that never leaves the disks idle for the 500 ms MD's \
                        throttle waits for, both rebuilds run at their guaranteed minimum, so \
                        the speed-up is the 3 sub-array throttles against MD's one (about 3x), \
                        as in Table 5's online rows; the paper's prototype found idle time \
                        under its benchmarks, which run above a file system cache.";
    let heavy: Vec<&(&str, f64, f64, f64)> = speedups.iter().filter(|s| s.0 != "TPC-W").collect();
    e.claims.push(
        Claim::new(
            format!(
                "S2-RAID5 rebuilds online over {FIG7_HEAVY_MIN_SPEEDUP:.0}x faster than MD under \
                 TPC-C and PostMark"
            ),
            heavy.iter().all(|s| s.1 > FIG7_HEAVY_MIN_SPEEDUP),
            heavy
                .iter()
                .map(|s| format!("{}: {:.0} s vs {:.0} s, {:.2}x", s.0, s.2, s.3, s.1))
                .collect::<Vec<_>>()
                .join("; "),
        )
        .unless(why_throttle),
    );
    e.claims.push(Claim::new(
        "S2-RAID5 rebuilds online faster than MD under every benchmark",
        speedups.iter().all(|s| s.1 > 1.0),
        speedups
            .iter()
            .map(|s| format!("{}: {:.2}x", s.0, s.1))
            .collect::<Vec<_>>()
            .join("; "),
    ));
    let tpcw = speedups.iter().find(|s| s.0 == "TPC-W").expect("TPC-W");
    let heavy_min = heavy.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
    e.claims.push(
        Claim::new(
            "TPC-W, the lightest load, gets a smaller speed-up than TPC-C and PostMark",
            tpcw.1 < heavy_min,
            format!("TPC-W {:.2}x, the others at least {heavy_min:.2}x", tpcw.1),
        )
        .unless(
            "Under our light, bursty TPC-W stand-in the throttle spends the idle periods at its \
             maximum, where S2-RAID5's three parallel sub-array rebuilds gain more over MD's \
             one than the minimum-rate rebuilds of the saturating loads do.",
        ),
    );
    e.claims.push(
        Claim::new(
            format!(
                "S2-RAID5 improves the mean response time during the rebuild by at least \
                 {FIG7_MIN_RESPONSE_GAIN_PCT:.0} % under every benchmark (paper: 40-54 %)"
            ),
            gains
                .iter()
                .all(|g| g.1.is_none_or(|x| x >= FIG7_MIN_RESPONSE_GAIN_PCT)),
            gains
                .iter()
                .map(|g| match g.1 {
                    Some(x) => format!("{}: {x:.1} %", g.0),
                    None => format!("{}: no request arrived during a rebuild", g.0),
                })
                .collect::<Vec<_>>()
                .join("; "),
        )
        .unless(
            "Our S2-RAID5 serves a request with about as many disk operations as MD (a 2+1 \
             stripe's small write costs 3 against RAID5's 4) on the same modelled disks, and \
             its three sub-array rebuilds take three times MD's share of them while the load \
             runs; the paper's 40-54 % came from its prototype, whose MD suffered more under \
             rebuild than our FIFO-queued model.",
        ),
    );
    e.notes.push(
        "The benchmarks are stand-ins (see the configuration): the paper ran TPC-C, PostMark \
         and TPC-W above a file system over iSCSI and gives, for Figure 7, only the speed-ups \
         in its text (over 6x for TPC-C and PostMark, 4.25x for TPC-W, 40-54 % better response)."
            .into(),
    );
    e.plots.push(Plot {
        caption: "Figure 7: online rebuild time under the benchmarks".into(),
        svg: sim::svg::BarChart {
            title: "Online rebuild time (s)".into(),
            x_label: "benchmark (stand-in)".into(),
            y_label: "s".into(),
            categories: speedups.iter().map(|s| s.0.to_string()).collect(),
            series: vec![
                (
                    "MD RAID5".to_string(),
                    speedups.iter().map(|s| s.2).collect(),
                ),
                (
                    "S2-RAID5".to_string(),
                    speedups.iter().map(|s| s.3).collect(),
                ),
            ],
            notes: crate::published_notes(&e, |_| true),
            ..Default::default()
        }
        .to_svg(),
    });
    Ok(e)
}

/// Figure 8's block sizes.
const FIG8_SIZES: [u64; 4] = [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB];

/// Figure 8: IOMeter-like write rates, sequential and random, against block size.
pub(super) fn fig8(ctx: &Ctx, runner: &mut Runner) -> anyhow::Result<Experiment> {
    runner.say("fig8: sequential and random write rates vs block size");
    let (md, s2) = (md_raid5(1), s2raid5(1));
    let secs = if ctx.opts.quick { 5.0 } else { 60.0 };
    let depth = 16;
    let mut cfg = ctx.common_config();
    cfg.retain(|(k, _)| *k != "rebuild");
    cfg.extend([
        ("MD array", format!("{} ({})", md.name, md.text())),
        ("S2-RAID array", format!("{} ({})", s2.name, s2.text())),
        (
            "workload",
            format!(
                "IOMeter-like: 100 % writes of one block size ({}), sequential or random, \
                 {depth} outstanding, {secs:.0} s, no failure",
                FIG8_SIZES
                    .iter()
                    .map(|&s| bytes_text(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    ]);
    let mut e = Experiment::new(
        "fig8",
        "Write rate against block size, sequential and random, MD RAID5 vs S2-RAID5 (Figure 8)",
        &cfg,
    );
    let mut wins = Vec::new();
    let mut series = Vec::new();
    for pattern in ["seq", "random"] {
        let mut pts_md = Vec::new();
        let mut pts_s2 = Vec::new();
        for size in FIG8_SIZES {
            let spec = |a| RunSpec {
                array: a,
                drive: DRIVE,
                chunk_bytes: super::CHUNK,
                data_bytes: ctx.scale.data_bytes,
                load: Load::Synthetic(format!(
                    "{pattern}:read=0:size={}K:qd={depth}:align={}K",
                    size / KIB,
                    size.min(64 * KIB) / KIB
                )),
                fail: None,
                rebuild: false,
                limits: super::md_limits(1000),
                stop_s: Some(secs),
                seed: SEED,
            };
            let m = runner.run(&spec(md.clone()))?.report.throughput_iops;
            let s = runner.run(&spec(s2.clone()))?.report.throughput_iops;
            let kib = size / KIB;
            e.rows.push(Row::new(
                format!("{pattern} {kib} KiB writes: MD RAID5"),
                None,
                m,
                "IOPS",
            ));
            e.rows.push(Row::new(
                format!("{pattern} {kib} KiB writes: S2-RAID5"),
                None,
                s,
                "IOPS",
            ));
            wins.push((pattern, kib, s / m));
            pts_md.push((kib as f64, m));
            pts_s2.push((kib as f64, s));
        }
        series.push(sim::svg::Series::line(
            format!("MD RAID5 {pattern}"),
            pts_md,
        ));
        series.push(sim::svg::Series::line(
            format!("S2-RAID5 {pattern}"),
            pts_s2,
        ));
    }
    let ev = |p: &str| {
        wins.iter()
            .filter(|w| w.0 == p)
            .map(|w| format!("{} KiB {:.2}x", w.1, w.2))
            .collect::<Vec<_>>()
            .join(", ")
    };
    e.claims.push(Claim::new(
        "S2-RAID5 writes random blocks faster than MD RAID5 at every block size",
        wins.iter().filter(|w| w.0 == "random").all(|w| w.2 > 1.0),
        ev("random"),
    ));
    e.claims.push(
        Claim::new(
            "S2-RAID5 writes sequential blocks faster than MD RAID5 at every block size",
            wins.iter().filter(|w| w.0 == "seq").all(|w| w.2 > 1.0),
            ev("seq"),
        )
        .unless(
            "A sequential stream fills MD's 8+1 stripes, which our planner writes whole (9 \
             writes for 8 chunks of data) where S2-RAID5's 2+1 sub-arrays write 3 for 2; the \
             paper's MD wrote through its stripe cache in 4 KiB pages and evidently did not \
             gain from full stripes the way our model does.",
        ),
    );
    e.notes.push(
        "The paper shows Figure 8 as a chart without values; the claims checked are its \
         text's: S2-RAID5 writes faster than RAID5, sequential and random."
            .into(),
    );
    e.plots.push(Plot {
        caption: "Figure 8: write rate against block size".into(),
        svg: sim::svg::LineChart {
            title: "Write rate (IOPS) vs block size".into(),
            x_label: "block size (KiB)".into(),
            y_label: "IOPS".into(),
            series,
            markers: Vec::new(),
            log_y: true,
            ..Default::default()
        }
        .to_svg(),
    });
    Ok(e)
}

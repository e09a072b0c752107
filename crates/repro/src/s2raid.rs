//! Reproduction of seed 000, S2-RAID (Wan, Wang, Yang, Xie): Tables 5-7 and Figures 5-8.
//!
//! Every experiment runs the simulator on copies of the paper's arrays, built from its section
//! 4.1: nine Seagate ST3500320AS disks (Table 1), 10 GB of each used ("we assume the volume of
//! each disk to be 10GB", section 5), one spare unless a figure varies it.
//!
//! - `table5`: MD RAID5 8+1 against S2-RAID5 over the same 9 disks (G = 3 groups of 3, K = 3
//!   partitions, 9 sub-arrays of 2+1): mean user response time during an online rebuild and the
//!   rebuild's duration under Fin1, Fin2 and Web, and the offline rebuild (1-3 spares).
//! - `table6`: the same for MD RAID10 against S2-RAID10 on 8 disks (Figure 2's layout).
//! - `table7`: mean response time of the RAID5 pair, normal and degraded (no rebuild).
//! - `fig5`: Fin1 online rebuild with speed_limit_min 1, 10 and 50 MB/s.
//! - `fig6`: S2-RAID5 with 1, 2 and 3 spare disks.
//! - `fig7`: online rebuilds under TPC-C (the real block trace, closed loop) and synthetic
//!   PostMark and TPC-W stand-ins ([`bench`]).
//! - `fig8`: IOMeter-like sequential and random write rates against block size, no failure.
//!
//! The SPC Financial traces are not available here: Fin1 and Fin2 are synthetic workloads with
//! the published statistics (`sim::SyntheticConfig::financial1_synthetic`), and Web is the
//! first minute of the WebSearch trace, looped for as long as a run lasts. Every row says so.
//!
//! What is modelled from the paper's prototype (section 3) and what is assumed:
//! - MD rebuilds one array under its speed limits (`speed_limit_min` 1000 KiB/s while user I/O
//!   is seen, `speed_limit_max` 200000 KiB/s otherwise). The S2-RAID prototype builds every
//!   sub-array as its own MD array, so the K sub-arrays hit by a failure rebuild in parallel,
//!   each under those limits: the simulator's single throttle gets K times them.
//! - The paper does not give the chunk size; we use 512 KiB (mdadm's default since 3.1).
//!   Our S2-RAID layout repeats its K partitions every cycle, so a partition is striped over
//!   the disk in chunk-sized pieces rather than being one extent; with much smaller chunks a
//!   rebuilding disk would rotate past the other partitions' rows instead of seeking over them
//!   (the `table5` offline rows include a 64 KiB run to show the effect).
//! - The rebuild is paced by raidcore's MD-like throttle with the simulator's defaults: the
//!   minimum rate while user I/O was seen in the last 500 ms, the maximum otherwise, 4 cycles
//!   in flight. Under the steady synthetic loads the rebuild therefore runs near its minimum,
//!   where the paper's MD evidently found idle time; the online rows say so.
//! - Member disks queue requests first come, first served; the drive model is the datasheet's,
//!   the same as in every other experiment.

mod bench;

use std::path::{Path, PathBuf};

use layout::{Params, SchemeKind};
use raidcore::SpeedLimits;
use sim::{Drive, Phase};

use crate::simkit::{bytes_text, ratio, ArraySpec, Load, Outcome, RunSpec, Runner, GB, KIB, MIB};
use crate::{published_notes, Claim, Experiment, Opts, Plot, Row};

/// The paper.
pub const SOURCE: &str = "Wan, Wang, Yang, Xie: \"S2-RAID: A New RAID Architecture for Fast \
                          Data Recovery\" (seed 000)";

/// The experiments [`run`] returns, in order.
pub const EXPERIMENTS: &[&str] = &["table5", "table6", "table7", "fig5", "fig6", "fig7", "fig8"];

/// The drive of every experiment (Table 1: Seagate ST3500320AS, 500 GB, 7200 rpm).
const DRIVE: Drive = Drive::SeagateSt3500320as;
/// Chunk size (not given by the paper; mdadm's default).
const CHUNK: u64 = 512 * KIB;
/// Seed of the synthetic workloads and of the simulator.
const SEED: u64 = 1;
/// The member that fails: D4 for RAID5 (the paper's Figure 1 example), D2 for RAID10
/// (Figure 2).
const FAIL_RAID5: u32 = 4;
const FAIL_RAID10: u32 = 2;

/// Sizes of a run.
struct Scale {
    /// Data and parity per active disk.
    data_bytes: u64,
    /// Simulated seconds of user I/O before the failure (online rebuilds).
    warmup_s: f64,
    /// Seconds of normal service, then of degraded service (Table 7).
    phase_s: f64,
}

/// The paper's sizes.
const FULL: Scale = Scale {
    data_bytes: 10 * GB,
    warmup_s: 60.0,
    phase_s: 900.0,
};

/// `--quick`: 128 MiB instead of 10 GB per disk, shorter phases.
const QUICK: Scale = Scale {
    data_bytes: 128 * MIB,
    warmup_s: 10.0,
    phase_s: 30.0,
};

/// The workloads of Tables 5-7.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wl {
    Fin1,
    Fin2,
    Web,
}

impl Wl {
    /// Row label prefix: says what the workload really is.
    fn label(self) -> &'static str {
        match self {
            Wl::Fin1 => "Fin1 (synthetic Financial1-like)",
            Wl::Fin2 => "Fin2 (synthetic Financial2-like)",
            Wl::Web => "Web (WebSearch head, looped)",
        }
    }

    fn load(self, web: &Path) -> Load {
        match self {
            Wl::Fin1 => Load::Synthetic("financial1".into()),
            Wl::Fin2 => Load::Synthetic("financial2".into()),
            Wl::Web => Load::Trace(web.to_path_buf()),
        }
    }
}

/// One online row of Tables 5 and 6: mean user response time during the rebuild (ms) and the
/// rebuild's duration (s), MD then S2-RAID, and the paper's speed-ups.
struct OnlineRow {
    wl: Wl,
    md_ms: f64,
    s2_ms: f64,
    ms_speedup: f64,
    md_s: f64,
    s2_s: f64,
    s_speedup: f64,
}

/// The offline row of Tables 5 and 6: rebuild time (s), MD then S2-RAID, and the speed-up.
struct OfflineRow {
    md_s: f64,
    s2_s: f64,
    speedup: f64,
}

/// Table 5: RAID5 reconstruction performance.
const TABLE5_ONLINE: [OnlineRow; 3] = [
    OnlineRow {
        wl: Wl::Fin1,
        md_ms: 14.98,
        s2_ms: 10.81,
        ms_speedup: 1.39,
        md_s: 1799.0,
        s2_s: 293.0,
        s_speedup: 6.14,
    },
    OnlineRow {
        wl: Wl::Fin2,
        md_ms: 8.51,
        s2_ms: 7.87,
        ms_speedup: 1.08,
        md_s: 886.0,
        s2_s: 172.0,
        s_speedup: 5.15,
    },
    OnlineRow {
        wl: Wl::Web,
        md_ms: 13.32,
        s2_ms: 11.19,
        ms_speedup: 1.19,
        md_s: 4820.0,
        s2_s: 849.0,
        s_speedup: 5.68,
    },
];
const TABLE5_OFFLINE: OfflineRow = OfflineRow {
    md_s: 157.0,
    s2_s: 51.0,
    speedup: 3.08,
};

/// Table 6: RAID10 reconstruction performance.
const TABLE6_ONLINE: [OnlineRow; 3] = [
    OnlineRow {
        wl: Wl::Fin1,
        md_ms: 9.05,
        s2_ms: 8.80,
        ms_speedup: 1.03,
        md_s: 6557.0,
        s2_s: 1770.0,
        s_speedup: 3.70,
    },
    OnlineRow {
        wl: Wl::Fin2,
        md_ms: 8.25,
        s2_ms: 8.24,
        ms_speedup: 1.00,
        md_s: 7138.0,
        s2_s: 2075.0,
        s_speedup: 3.44,
    },
    OnlineRow {
        wl: Wl::Web,
        md_ms: 15.91,
        s2_ms: 11.59,
        ms_speedup: 1.37,
        md_s: 9080.0,
        s2_s: 2163.0,
        s_speedup: 4.20,
    },
];
const TABLE6_OFFLINE: OfflineRow = OfflineRow {
    md_s: 152.0,
    s2_s: 44.0,
    speedup: 3.45,
};

/// Table 7: RAID5 mean response time (ms), normal and degraded, MD then S2-RAID.
struct ServiceRow {
    wl: Wl,
    normal_md: f64,
    normal_s2: f64,
    normal_speedup: f64,
    degraded_md: f64,
    degraded_s2: f64,
    degraded_speedup: f64,
}

const TABLE7: [ServiceRow; 3] = [
    ServiceRow {
        wl: Wl::Fin1,
        normal_md: 13.85,
        normal_s2: 10.49,
        normal_speedup: 1.32,
        degraded_md: 15.60,
        degraded_s2: 10.74,
        degraded_speedup: 1.45,
    },
    ServiceRow {
        wl: Wl::Fin2,
        normal_md: 7.66,
        normal_s2: 7.61,
        normal_speedup: 1.01,
        degraded_md: 9.13,
        degraded_s2: 7.86,
        degraded_speedup: 1.16,
    },
    ServiceRow {
        wl: Wl::Web,
        normal_md: 10.45,
        normal_s2: 10.47,
        normal_speedup: 1.00,
        degraded_md: 12.94,
        degraded_s2: 11.40,
        degraded_speedup: 1.14,
    },
];

/// Figure 5: the speed_limit_min settings, KiB/s as MD writes them ("1M/s, 10MB/s, 50MB/s").
const FIG5_SPEED_MIN_KIB: [u64; 3] = [1000, 10_000, 50_000];
/// Figure 5, from the text: the smallest rebuild speed-up over the three settings.
const FIG5_MIN_SPEEDUP: f64 = 4.14;
/// Figure 5, from the text: "S2-RAID5 provides 57% better performance than MD" at 50 MB/s.
const FIG5_RESPONSE_SPEEDUP_AT_50: f64 = 1.57;

/// Figure 6: spare disks.
const FIG6_SPARES: [usize; 3] = [1, 2, 3];
/// Figure 6, from the text: "about 2-3% every time a spare disk is taken away" (midpoint).
const FIG6_DEGRADATION_PER_SPARE_PCT: f64 = 2.5;

/// MD's default limits for one array.
fn md_limits(min_kib: u64) -> SpeedLimits {
    SpeedLimits {
        min_bytes_per_sec: min_kib * KIB,
        max_bytes_per_sec: 200_000 * KIB,
    }
}

/// MD RAID5 over 8 data + 1 parity disks, plus spares.
fn md_raid5(spares: usize) -> ArraySpec {
    ArraySpec::new(
        format!("MD RAID5 8+1, {spares} spare{}", plural(spares)),
        SchemeKind::Raid5,
        Params {
            disks: Some(9 + spares),
            spares,
            ..Params::default()
        },
    )
}

/// S2-RAID5 over the same 9 disks: G = 3, K = 3 (Figure 1), plus spares; its K sub-arrays
/// hit by a failure rebuild under their own MD limits.
fn s2raid5(spares: usize) -> ArraySpec {
    let mut a = ArraySpec::new(
        format!("S2-RAID5 R=9 G=3 K=3, {spares} spare{}", plural(spares)),
        SchemeKind::S2Raid5,
        Params {
            disks: Some(9 + spares),
            spares,
            group: Some(3),
            partitions: Some(3),
            ..Params::default()
        },
    );
    a.throttled = 3;
    a
}

/// MD RAID10 over 8 disks (near-2), one spare; reads balanced over the copies as MD's
/// `read_balance` does.
fn md_raid10() -> ArraySpec {
    let mut a = ArraySpec::new(
        "MD RAID10 8 disks, 1 spare",
        SchemeKind::Raid10,
        Params {
            disks: Some(9),
            spares: 1,
            ..Params::default()
        },
    );
    a.read_balance = true;
    a
}

/// S2-RAID10 over 8 disks as Figure 2 (data group D0-D3, skewed mirrors D4-D7: G = 4, N = 2,
/// K = 4), one spare; K mirrored sub-arrays rebuild under their own MD limits, and reads are
/// balanced over the copies.
fn s2raid10() -> ArraySpec {
    let mut a = ArraySpec::new(
        "S2-RAID10 8 disks G=4 K=4, 1 spare",
        SchemeKind::S2Raid10,
        Params {
            disks: Some(9),
            spares: 1,
            group: Some(4),
            partitions: Some(4),
            ..Params::default()
        },
    );
    a.throttled = 4;
    // The prototype's sub-arrays are MD RAID1 arrays, which balance their reads.
    a.read_balance = true;
    a
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The context every experiment shares.
struct Ctx<'o> {
    opts: &'o Opts,
    scale: &'static Scale,
    /// The WebSearch head (`websearch-head.mqsim` of the trace folder).
    web: PathBuf,
    /// The TPC-C block trace (`tpcc-small.mqsim`), Figure 7's TPC-C.
    tpcc: PathBuf,
}

impl Ctx<'_> {
    fn spec(&self, array: ArraySpec, fail: u32, load: Load, min_kib: u64) -> RunSpec {
        let online = load != Load::None;
        RunSpec {
            array,
            drive: DRIVE,
            chunk_bytes: CHUNK,
            data_bytes: self.scale.data_bytes,
            load,
            fail: Some((fail, if online { self.scale.warmup_s } else { 0.0 })),
            rebuild: true,
            limits: md_limits(min_kib),
            stop_s: None,
            seed: SEED,
        }
    }

    fn offline(&self, array: ArraySpec, fail: u32) -> RunSpec {
        self.spec(array, fail, Load::None, 1000)
    }

    fn online(&self, array: ArraySpec, fail: u32, wl: Wl, min_kib: u64) -> RunSpec {
        self.spec(array, fail, wl.load(&self.web), min_kib)
    }

    /// The configuration lines every experiment shows.
    fn common_config(&self) -> Vec<(&'static str, String)> {
        vec![
            ("drive", "Seagate ST3500320AS (datasheet model, sim::Drive::SeagateSt3500320as)".into()),
            ("chunk", bytes_text(CHUNK)),
            (
                "data per disk",
                format!(
                    "{} of data and parity on every active disk (free partitions and spare space on top){}",
                    bytes_text(self.scale.data_bytes),
                    if self.opts.quick { "; quick run, the paper used 10 GB" } else { "" }
                ),
            ),
            ("disk queues", "FIFO".into()),
            (
                "rebuild",
                "starts at the failure; 4 cycles in flight, in cycle order; throttled like MD: \
                 speed_limit_min while user I/O was seen in the last 500 ms, speed_limit_max \
                 otherwise, the rate measured over the last 3-6 s (raidcore RebuildScheduler, \
                 Throttle; simulator defaults)"
                    .into(),
            ),
            ("seed", SEED.to_string()),
        ]
    }

    /// The quick-run note for a row that differs (absolute values of a scaled-down run).
    fn quick_note(&self) -> Option<String> {
        self.opts.quick.then(|| {
            format!(
                "Quick run: {} per disk instead of the paper's 10 GB and shorter phases, so absolute values are not comparable.",
                bytes_text(self.scale.data_bytes)
            )
        })
    }

    /// Attaches `note` to `row` when it differs by more than the tolerance (the quick-run note
    /// in quick runs).
    fn explain(&self, row: Row, note: impl FnOnce() -> String) -> Row {
        if !row.differs() {
            return row;
        }
        match self.quick_note() {
            Some(q) => row.with_note(q),
            None => row.with_note(note()),
        }
    }
}

/// Runs every experiment of this seed.
pub fn run(opts: &Opts, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>> {
    let ctx = Ctx {
        opts,
        scale: if opts.quick { &QUICK } else { &FULL },
        web: opts.trace("websearch-head.mqsim")?,
        tpcc: opts.trace("tpcc-small.mqsim")?,
    };
    let mut runner = Runner::new(progress);
    let t5 = table5(&ctx, &mut runner)?;
    let t6 = table6(&ctx, &mut runner)?;
    let t7 = table7(&ctx, &mut runner)?;
    let f5 = fig5(&ctx, &mut runner)?;
    let f6 = fig6(&ctx, &mut runner)?;
    let f7 = bench::fig7(&ctx, &mut runner)?;
    let f8 = bench::fig8(&ctx, &mut runner)?;
    Ok(vec![t5, t6, t7, f5, f6, f7, f8])
}

/// Mean response time during the rebuild, ms.
fn rebuilding_ms(o: &Outcome) -> f64 {
    o.mean_ms(Phase::Rebuilding)
}

/// Average rebuild rate, MB/s of lost data and parity (decimal, as the paper's sizes).
fn rate_mb_s(data_bytes: u64, secs: f64) -> f64 {
    data_bytes as f64 / 1e6 / secs
}

/// The online rows of one workload of Table 5 or 6.
#[allow(clippy::too_many_arguments)]
fn online_rows(
    ctx: &Ctx,
    e: &mut Experiment,
    p: &OnlineRow,
    md_name: &str,
    s2_name: &str,
    md: &Outcome,
    s2: &Outcome,
    s2_throttled: u64,
) -> anyhow::Result<()> {
    let w = p.wl.label();
    let (md_ms, s2_ms) = (rebuilding_ms(md), rebuilding_ms(s2));
    let (md_s, s2_s) = (md.rebuild_s()?, s2.rebuild_s()?);
    let data = ctx.scale.data_bytes;
    let mirrored = md_name.contains("RAID10");
    let response_note = || {
        if mirrored && p.wl == Wl::Web {
            "Reads are balanced over both copies (MD's read_balance: the copy with the \
             shorter queue, or nearer the head), so this read-only trace's reads mostly avoid \
             the disks the rebuild keeps busy, and both arrays answer within a few percent of \
             each other (without balancing, S2-RAID10 answered in 26.4 ms: every read went to \
             the 4 data disks, which also take its rebuilt partitions at 4x MD's rate). The \
             absolute values come from the looped stand-in of the trace replayed against \
             modelled disks with FIFO queues, not the trace's real locality and burstiness."
                .to_string()
        } else {
            "Response times come from the synthetic or looped stand-in of the trace replayed \
             against modelled disks with FIFO queues; the trace's real locality and \
             burstiness, which set the paper's absolute values, are not reproduced."
                .to_string()
        }
    };
    e.rows.push(ctx.explain(
        Row::new(
            format!("{w}: {md_name} mean response during rebuild"),
            Some(p.md_ms),
            md_ms,
            "ms",
        ),
        response_note,
    ));
    e.rows.push(ctx.explain(
        Row::new(
            format!("{w}: {s2_name} mean response during rebuild"),
            Some(p.s2_ms),
            s2_ms,
            "ms",
        ),
        response_note,
    ));
    e.rows.push(ctx.explain(
        Row::new(
            format!("{w}: response speed-up (MD / S2-RAID)"),
            Some(p.ms_speedup),
            ratio(md_ms, s2_ms),
            "x",
        ),
        response_note,
    ));
    let rebuild_note = |secs: f64, published: f64, throttled: u64| {
        move || {
            let (ours, theirs) = (rate_mb_s(data, secs), rate_mb_s(10 * GB, published));
            let why = if theirs > ours {
                "so the paper's rebuild ran above its minimum: its MD found the array idle part \
                 of the time under the real trace, which our stand-in, with a request every few \
                 milliseconds, never is"
            } else {
                "slower than ours: the real trace's load (we replay only its first minute, \
                 looped) kept the paper's disks busier than ours"
            };
            format!(
                "Ours averaged {ours:.2} MB/s against a guaranteed {:.2} MB/s ({throttled} x \
                 speed_limit_min): user I/O never pauses for the 500 ms the throttle needs to go \
                 faster, so the rebuild runs near its minimum. The paper's {published:.0} s for 10 GB is \
                 {theirs:.1} MB/s, {why}.",
                throttled as f64 * 1000.0 * 1024.0 / 1e6,
            )
        }
    };
    e.rows.push(ctx.explain(
        Row::new(
            format!("{w}: {md_name} online rebuild"),
            Some(p.md_s),
            md_s,
            "s",
        ),
        rebuild_note(md_s, p.md_s, 1),
    ));
    e.rows.push(ctx.explain(
        Row::new(
            format!("{w}: {s2_name} online rebuild"),
            Some(p.s2_s),
            s2_s,
            "s",
        ),
        rebuild_note(s2_s, p.s2_s, s2_throttled),
    ));
    e.rows.push(ctx.explain(
        Row::new(
            format!("{w}: online rebuild speed-up (MD / S2-RAID)"),
            Some(p.s_speedup),
            ratio(md_s, s2_s),
            "x",
        ),
        || {
            format!(
                "Both rebuilds run near their guaranteed minimum, so the speed-up is set by the \
                 throttle ({s2_throttled} sub-array minimums against MD's one), not by the \
                 disks; the paper's \
                 rebuilds ran above their minimums, where S2-RAID's parallel rebuild gains more."
            )
        },
    ));
    Ok(())
}

fn table5(ctx: &Ctx, runner: &mut Runner) -> anyhow::Result<Experiment> {
    runner.say("table5: RAID5 vs S2-RAID5 rebuild");
    let (md, s2) = (md_raid5(1), s2raid5(1));
    let mut cfg = ctx.common_config();
    cfg.extend([
        ("MD array", format!("{} ({})", md.name, md.text())),
        ("S2-RAID array", format!("{} ({})", s2.name, s2.text())),
        (
            "failure",
            format!(
                "disk D{FAIL_RAID5} (the paper's Figure 1 example); online: after {} s of user I/O",
                ctx.scale.warmup_s
            ),
        ),
        (
            "speed limits",
            "MD defaults per MD array: speed_limit_min 1000 KiB/s, speed_limit_max 200000 KiB/s; \
             S2-RAID5 rebuilds its 3 sub-arrays as 3 MD arrays, so 3x these limits"
                .into(),
        ),
        (
            "workloads",
            "Fin1, Fin2: synthetic (published statistics of SPC Financial1/2, Poisson arrivals at \
             123.5 and 93.4 requests/s); Web: first ~60 s of SPC WebSearch (24,782 reads), looped"
                .into(),
        ),
        (
            "response time",
            "mean over requests arriving while the rebuild runs".into(),
        ),
    ]);
    let mut e = Experiment::new("table5", "RAID5 reconstruction performance (Table 5)", &cfg);
    e.notes.push(
        "Fin1 and Fin2 are synthetic stand-ins with the traces' published statistics (write \
         ratio, request sizes, ASU count, mean rate); Web is the WebSearch trace's first minute \
         replayed in a loop. Neither is the trace the paper replayed."
            .into(),
    );
    for p in &TABLE5_ONLINE {
        let mo = runner.online(&ctx.online(md.clone(), FAIL_RAID5, p.wl, 1000))?;
        let so = runner.online(&ctx.online(s2.clone(), FAIL_RAID5, p.wl, 1000))?;
        online_rows(
            ctx,
            &mut e,
            p,
            "MD RAID5",
            "S2-RAID5",
            &mo,
            &so,
            s2.throttled,
        )?;
        if p.wl == Wl::Fin1 {
            e.claims.push(Claim::new(
                "S2-RAID5 gives better user response than MD RAID5 during an online rebuild (Fin1)",
                rebuilding_ms(&so) < rebuilding_ms(&mo),
                format!(
                    "{:.2} ms vs {:.2} ms",
                    rebuilding_ms(&so),
                    rebuilding_ms(&mo)
                ),
            ));
        }
        let (ms, ss) = (mo.rebuild_s()?, so.rebuild_s()?);
        e.claims.push(Claim::new(
            format!(
                "S2-RAID5 rebuilds online faster than MD RAID5 ({})",
                p.wl.label()
            ),
            ss < ms,
            format!("{ms:.0} s vs {ss:.0} s: {:.2}x", ratio(ms, ss)),
        ));
    }
    // Offline.
    let md_off = runner.run(&ctx.offline(md.clone(), FAIL_RAID5))?;
    let md_s = md_off.rebuild_s()?;
    let paper_rate = |s: f64| rate_mb_s(10 * GB, s);
    e.rows.push(ctx.explain(
        Row::new(
            "offline: MD RAID5 rebuild",
            Some(TABLE5_OFFLINE.md_s),
            md_s,
            "s",
        ),
        || {
            format!(
                "Ours rebuilds at {:.0} MB/s, the modelled drive's sequential rate (105 MB/s \
                 outer zone, datasheet); the paper's 157 s for 10 GB is {:.0} MB/s, so its MD \
                 rebuilt below the disks' streaming rate, for a reason the paper does not give \
                 (MD of the time rebuilt through its stripe cache in 4 KiB pages; the simulator \
                 issues whole-chunk I/Os).",
                rate_mb_s(ctx.scale.data_bytes, md_s),
                paper_rate(TABLE5_OFFLINE.md_s)
            )
        },
    ));
    let mut s2_times = Vec::new();
    for spares in FIG6_SPARES {
        let o = runner.run(&ctx.offline(s2raid5(spares), FAIL_RAID5))?;
        s2_times.push(o.rebuild_s()?);
    }
    let s2_s = s2_times[0];
    // The same with one throttle for the whole array (MD's limits applied once).
    let mut one = ctx.offline(s2.clone(), FAIL_RAID5);
    one.array.throttled = 1;
    one.array.name = "S2-RAID5 (one array-wide throttle)".into();
    let one_s = runner.run(&one)?.rebuild_s()?;
    e.rows.push(ctx.explain(
        Row::new(
            "offline: S2-RAID5 rebuild, 1 spare",
            Some(TABLE5_OFFLINE.s2_s),
            s2_s,
            "s",
        ),
        || {
            format!(
                "Ours rebuilds at {:.0} MB/s, bounded by the modelled disks (each of the 3 \
                 sub-array rebuilds under its own 200000 KiB/s cap). The paper's 51 s is {:.0} \
                 MB/s, about MD's default speed_limit_max for one array: with one cap for the \
                 whole array ours takes {one_s:.1} s (the one-throttle row below), so the prototype's rebuild was \
                 probably capped rather than bound by its disks.",
                rate_mb_s(ctx.scale.data_bytes, s2_s),
                paper_rate(TABLE5_OFFLINE.s2_s)
            )
        },
    ));
    e.rows.push(ctx.explain(
        Row::new(
            "offline: rebuild speed-up (MD / S2-RAID5, 1 spare)",
            Some(TABLE5_OFFLINE.speedup),
            ratio(md_s, s2_s),
            "x",
        ),
        || {
            format!(
                "Our S2-RAID5 rebuild is bounded by its reading disks: each reads one partition \
                 row in three and seeks past the other two in every cycle, delivering {:.0} MB/s \
                 of its 105; MD's by one disk streaming. The paper's MD ran well below its \
                 disks' rate (see the MD row), which raises its ratio.",
                rate_mb_s(ctx.scale.data_bytes / 3, s2_s)
            )
        },
    ));
    for (i, spares) in FIG6_SPARES.iter().enumerate().skip(1) {
        e.rows.push(Row::new(
            format!("offline: S2-RAID5 rebuild, {spares} spares"),
            None,
            s2_times[i],
            "s",
        ));
    }
    // Sensitivity rows: 64 KiB chunks.
    e.rows.push(Row::new(
        "offline: S2-RAID5 rebuild, 1 spare, one throttle for the whole array (speed_limit_max 200000 KiB/s)",
        None,
        one_s,
        "s",
    ));
    let mut md64 = ctx.offline(md.clone(), FAIL_RAID5);
    md64.chunk_bytes = 64 * KIB;
    let mut s264 = ctx.offline(s2.clone(), FAIL_RAID5);
    s264.chunk_bytes = 64 * KIB;
    let md64_s = runner.run(&md64)?.rebuild_s()?;
    let s264_s = runner.run(&s264)?.rebuild_s()?;
    e.rows.push(Row::new(
        "offline: MD RAID5 rebuild, 64 KiB chunks",
        None,
        md64_s,
        "s",
    ));
    e.rows.push(Row::new(
        "offline: S2-RAID5 rebuild, 1 spare, 64 KiB chunks",
        None,
        s264_s,
        "s",
    ));
    e.notes.push(format!(
        "With 64 KiB chunks our S2-RAID5 rebuild takes {s264_s:.0} s against MD's {md64_s:.0} s: \
         each cycle interleaves the 3 partitions in 64 KiB pieces, and a disk reading one \
         partition passes under the other two instead of seeking over them. The paper's \
         partitions are contiguous extents, which our layout approximates with large chunks."
    ));
    e.claims.push(Claim::new(
        "S2-RAID5 rebuilds offline >= 2x faster than MD RAID5 (paper: 3.08x)",
        md_s >= 2.0 * s2_s,
        format!("{md_s:.1} s vs {s2_s:.1} s: {:.2}x", ratio(md_s, s2_s)),
    ));
    Ok(e)
}

fn table6(ctx: &Ctx, runner: &mut Runner) -> anyhow::Result<Experiment> {
    runner.say("table6: RAID10 vs S2-RAID10 rebuild");
    let (md, s2) = (md_raid10(), s2raid10());
    let mut cfg = ctx.common_config();
    cfg.extend([
        ("MD array", format!("{} ({})", md.name, md.text())),
        ("S2-RAID array", format!("{} ({})", s2.name, s2.text())),
        ("failure", format!("disk D{FAIL_RAID10} (the paper's Figure 2 example); online: after {} s of user I/O", ctx.scale.warmup_s)),
        (
            "speed limits",
            "MD defaults per MD array (1000 / 200000 KiB/s); S2-RAID10 rebuilds the failed \
             disk's 4 mirrored sub-arrays as 4 MD arrays, so 4x these limits"
                .into(),
        ),
        ("workloads", "as table5".into()),
        ("response time", "mean over requests arriving while the rebuild runs".into()),
    ]);
    let mut e = Experiment::new(
        "table6",
        "RAID10 reconstruction performance (Table 6)",
        &cfg,
    );
    for p in &TABLE6_ONLINE {
        let mo = runner.online(&ctx.online(md.clone(), FAIL_RAID10, p.wl, 1000))?;
        let so = runner.online(&ctx.online(s2.clone(), FAIL_RAID10, p.wl, 1000))?;
        online_rows(
            ctx,
            &mut e,
            p,
            "MD RAID10",
            "S2-RAID10",
            &mo,
            &so,
            s2.throttled,
        )?;
        let (ms, ss) = (mo.rebuild_s()?, so.rebuild_s()?);
        e.claims.push(Claim::new(
            format!(
                "S2-RAID10 rebuilds online faster than MD RAID10 ({})",
                p.wl.label()
            ),
            ss < ms,
            format!("{ms:.0} s vs {ss:.0} s: {:.2}x", ratio(ms, ss)),
        ));
    }
    let md_s = runner
        .run(&ctx.offline(md.clone(), FAIL_RAID10))?
        .rebuild_s()?;
    let s2_s = runner
        .run(&ctx.offline(s2.clone(), FAIL_RAID10))?
        .rebuild_s()?;
    e.rows.push(ctx.explain(
        Row::new(
            "offline: MD RAID10 rebuild",
            Some(TABLE6_OFFLINE.md_s),
            md_s,
            "s",
        ),
        || {
            format!(
                "Ours copies the mirror at {:.0} MB/s, the modelled drive's sequential rate; the \
                 paper's 152 s for 10 GB is {:.0} MB/s, below the disks' streaming rate.",
                rate_mb_s(ctx.scale.data_bytes, md_s),
                rate_mb_s(10 * GB, TABLE6_OFFLINE.md_s)
            )
        },
    ));
    e.rows.push(ctx.explain(
        Row::new(
            "offline: S2-RAID10 rebuild",
            Some(TABLE6_OFFLINE.s2_s),
            s2_s,
            "s",
        ),
        || {
            format!(
                "Ours rebuilds at {:.0} MB/s from 4 mirror disks into 4 destinations; the \
                 paper's 44 s is {:.0} MB/s. As for MD, our disks stream faster than the \
                 prototype's rebuild did.",
                rate_mb_s(ctx.scale.data_bytes, s2_s),
                rate_mb_s(10 * GB, TABLE6_OFFLINE.s2_s)
            )
        },
    ));
    e.rows.push(ctx.explain(
        Row::new(
            "offline: rebuild speed-up (MD / S2-RAID10)",
            Some(TABLE6_OFFLINE.speedup),
            ratio(md_s, s2_s),
            "x",
        ),
        || {
            format!(
                "Our S2-RAID10 rebuild is bounded by the 4 mirror disks, each reading one row \
                 in four of every cycle and seeking past the rest ({:.0} MB/s of its 105); the \
                 paper's MD ran well below its disks' rate (see the MD row), which raises its \
                 ratio.",
                rate_mb_s(ctx.scale.data_bytes / 4, s2_s)
            )
        },
    ));
    e.claims.push(Claim::new(
        "S2-RAID10 rebuilds offline >= 2x faster than MD RAID10 (paper: 3.45x)",
        md_s >= 2.0 * s2_s,
        format!("{md_s:.1} s vs {s2_s:.1} s: {:.2}x", ratio(md_s, s2_s)),
    ));
    Ok(e)
}

fn table7(ctx: &Ctx, runner: &mut Runner) -> anyhow::Result<Experiment> {
    runner.say("table7: RAID5 normal and degraded response");
    let (md, s2) = (md_raid5(1), s2raid5(1));
    let t = ctx.scale.phase_s;
    let mut cfg = ctx.common_config();
    cfg.retain(|(k, _)| *k != "rebuild");
    cfg.extend([
        ("MD array", format!("{} ({})", md.name, md.text())),
        ("S2-RAID array", format!("{} ({})", s2.name, s2.text())),
        (
            "timeline",
            format!("{t} s normal, then disk D{FAIL_RAID5} fails and the array serves {t} s degraded (no rebuild)"),
        ),
        ("workloads", "as table5".into()),
    ]);
    let mut e = Experiment::new(
        "table7",
        "RAID5 mean response time, normal and degraded (Table 7)",
        &cfg,
    );
    let response_note = || {
        "Response times come from a synthetic or looped stand-in of the trace on modelled disks \
         with FIFO queues; the real trace's locality and burstiness are not reproduced."
            .to_string()
    };
    for p in &TABLE7 {
        let spec = |a: &ArraySpec| {
            let mut s = ctx.online(a.clone(), FAIL_RAID5, p.wl, 1000);
            s.fail = Some((FAIL_RAID5, t));
            s.rebuild = false;
            s.stop_s = Some(2.0 * t);
            s
        };
        let mo = runner.run(&spec(&md))?;
        let so = runner.run(&spec(&s2))?;
        let w = p.wl.label();
        let vals = [
            (
                "normal",
                Phase::Normal,
                p.normal_md,
                p.normal_s2,
                p.normal_speedup,
            ),
            (
                "degraded",
                Phase::Degraded,
                p.degraded_md,
                p.degraded_s2,
                p.degraded_speedup,
            ),
        ];
        for (name, phase, pm, ps, px) in vals {
            let (m, s) = (mo.mean_ms(phase), so.mean_ms(phase));
            e.rows.push(ctx.explain(
                Row::new(
                    format!("{w}: {name} MD RAID5 mean response"),
                    Some(pm),
                    m,
                    "ms",
                ),
                response_note,
            ));
            e.rows.push(ctx.explain(
                Row::new(
                    format!("{w}: {name} S2-RAID5 mean response"),
                    Some(ps),
                    s,
                    "ms",
                ),
                response_note,
            ));
            e.rows.push(ctx.explain(
                Row::new(
                    format!("{w}: {name} response speed-up (MD / S2-RAID5)"),
                    Some(px),
                    ratio(m, s),
                    "x",
                ),
                response_note,
            ));
        }
        let (dm, ds) = (mo.mean_ms(Phase::Degraded), so.mean_ms(Phase::Degraded));
        let (nm, ns) = (mo.mean_ms(Phase::Normal), so.mean_ms(Phase::Normal));
        e.claims.push(Claim::new(
            format!(
                "Degraded mode costs MD RAID5 more than S2-RAID5 ({}): degraded/normal ratio",
                p.wl.label()
            ),
            dm / nm > ds / ns,
            format!("MD {:.3}, S2-RAID5 {:.3}", dm / nm, ds / ns),
        ));
        if p.wl == Wl::Fin1 {
            e.claims.push(Claim::new(
                "S2-RAID5 responds faster than MD RAID5 in normal mode under the write-heavy Fin1",
                ns < nm,
                format!("{ns:.2} ms vs {nm:.2} ms"),
            ));
        }
    }
    Ok(e)
}

/// One speed_limit_min setting of Figure 5.
struct Fig5Point {
    /// speed_limit_min, MB/s (1000 KiB/s = "1 MB/s" as MD's documentation writes it).
    mb_s: f64,
    md_s: f64,
    s2_s: f64,
    md_ms: f64,
    s2_ms: f64,
}

/// A field of a [`Fig5Point`].
type Field5 = fn(&Fig5Point) -> f64;

fn fig5(ctx: &Ctx, runner: &mut Runner) -> anyhow::Result<Experiment> {
    runner.say("fig5: speed_limit_min 1, 10, 50 MB/s");
    let (md, s2) = (md_raid5(1), s2raid5(1));
    let mut cfg = ctx.common_config();
    cfg.extend([
        ("MD array", format!("{} ({})", md.name, md.text())),
        ("S2-RAID array", format!("{} ({})", s2.name, s2.text())),
        ("workload", Wl::Fin1.label().to_string()),
        (
            "speed_limit_min",
            "1000, 10000, 50000 KiB/s per MD array (S2-RAID5: 3 sub-array rebuilds, each with \
             it); speed_limit_max 200000 KiB/s"
                .into(),
        ),
        (
            "failure",
            format!(
                "disk D{FAIL_RAID5} after {} s of user I/O",
                ctx.scale.warmup_s
            ),
        ),
    ]);
    let mut e = Experiment::new(
        "fig5",
        "Effect of the rebuild speed threshold speed_limit_min, Fin1 (Figure 5)",
        &cfg,
    );
    let mut pts: Vec<Fig5Point> = Vec::new();
    for min_kib in FIG5_SPEED_MIN_KIB {
        let mo = runner.online(&ctx.online(md.clone(), FAIL_RAID5, Wl::Fin1, min_kib))?;
        let so = runner.online(&ctx.online(s2.clone(), FAIL_RAID5, Wl::Fin1, min_kib))?;
        let mb = min_kib as f64 / 1000.0;
        let (ms, ss) = (mo.rebuild_s()?, so.rebuild_s()?);
        let (mr, sr) = (rebuilding_ms(&mo), rebuilding_ms(&so));
        pts.push(Fig5Point {
            mb_s: mb,
            md_s: ms,
            s2_s: ss,
            md_ms: mr,
            s2_ms: sr,
        });
        let at = format!("speed_limit_min {min_kib} KiB/s");
        e.rows.push(Row::new(
            format!("{at}: MD RAID5 online rebuild"),
            None,
            ms,
            "s",
        ));
        e.rows.push(Row::new(
            format!("{at}: S2-RAID5 online rebuild"),
            None,
            ss,
            "s",
        ));
        e.rows.push(Row::new(
            format!("{at}: rebuild speed-up (MD / S2-RAID5)"),
            None,
            ratio(ms, ss),
            "x",
        ));
        e.rows.push(Row::new(
            format!("{at}: MD RAID5 mean response during rebuild"),
            None,
            mr,
            "ms",
        ));
        e.rows.push(Row::new(
            format!("{at}: S2-RAID5 mean response during rebuild"),
            None,
            sr,
            "ms",
        ));
        e.rows.push(Row::new(
            format!("{at}: response speed-up (MD / S2-RAID5)"),
            if min_kib == 50_000 {
                Some(FIG5_RESPONSE_SPEEDUP_AT_50)
            } else {
                None
            },
            ratio(mr, sr),
            "x",
        ));
        if min_kib == 50_000 {
            let last = e.rows.pop().expect("row");
            e.rows.push(ctx.explain(last, || {
                "At 50 MB/s MD's rebuild competes with the user I/O on every disk, S2-RAID5's \
                 only on the disks of the 3 rebuilding sub-arrays; how much that costs depends \
                 on the trace's real burstiness, which the synthetic Fin1 does not have."
                    .into()
            }));
        }
    }
    let speedups: Vec<f64> = pts.iter().map(|p| ratio(p.md_s, p.s2_s)).collect();
    let min_speedup = speedups.iter().cloned().fold(f64::INFINITY, f64::min);
    e.rows.push(ctx.explain(
        Row::new(
            "smallest rebuild speed-up over the three thresholds",
            Some(FIG5_MIN_SPEEDUP),
            min_speedup,
            "x",
        ),
        || {
            "Under a steady load both rebuilds run near their guaranteed minimum until the \
             disks saturate, so the speed-up stays below the 3 independently throttled \
             sub-arrays (least at 1000 KiB/s, where MD's whole-cycle bursts lift its rebuild \
             above its minimum); the paper's rebuilds also used idle periods of the real trace."
                .into()
        },
    ));
    e.notes.push(
        "The paper finds S2-RAID5's rebuild speed-up shrinking as speed_limit_min grows (the \
         prototype's bus bandwidth and CPU time for XOR limited its parallelism); ours grows, \
         since the simulator models neither and, at 1000 KiB/s, MD's whole-cycle bursts lift \
         its rebuild above its minimum."
            .into(),
    );
    e.notes.push(
        "At 1000 KiB/s these are table5's Fin1 runs. The paper gives Figure 5 as a chart; only \
         the smallest speed-up (4.14) and the response-time gain at 50 MB/s (57 %) are stated \
         in its text."
            .into(),
    );
    let dec = |f: Field5| pts.windows(2).all(|w| f(&w[1]) < f(&w[0]));
    let inc = |f: Field5| pts.windows(2).all(|w| f(&w[1]) > f(&w[0]));
    let list = |f: Field5, unit: &str| {
        pts.iter()
            .map(|p| format!("{:.1} {unit}", f(p)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    e.claims.push(Claim::new(
        "A higher speed_limit_min shortens the online rebuild (MD RAID5 and S2-RAID5)",
        dec(|p| p.md_s) && dec(|p| p.s2_s),
        format!(
            "MD {}; S2-RAID5 {}",
            list(|p| p.md_s, "s"),
            list(|p| p.s2_s, "s")
        ),
    ));
    e.claims.push(Claim::new(
        "A higher speed_limit_min slows user I/O during the rebuild (MD RAID5 and S2-RAID5)",
        inc(|p| p.md_ms) && inc(|p| p.s2_ms),
        format!(
            "MD {}; S2-RAID5 {}",
            list(|p| p.md_ms, "ms"),
            list(|p| p.s2_ms, "ms")
        ),
    ));
    e.claims.push(Claim::new(
        "S2-RAID5 rebuilds faster than MD RAID5 at every threshold",
        speedups.iter().all(|s| *s > 1.0),
        speedups
            .iter()
            .map(|s| format!("{s:.2}x"))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    e.claims.push(Claim::new(
        "S2-RAID5 responds faster than MD RAID5 during the rebuild at every threshold",
        pts.iter().all(|p| p.s2_ms < p.md_ms),
        format!(
            "S2-RAID5 {}; MD {}",
            list(|p| p.s2_ms, "ms"),
            list(|p| p.md_ms, "ms")
        ),
    ));
    let xs = |f: Field5| pts.iter().map(|p| (p.mb_s, f(p))).collect::<Vec<_>>();
    e.plots.push(Plot {
        caption: "Fin1 online rebuild time against speed_limit_min".into(),
        svg: sim::svg::LineChart {
            title: "Online rebuild time, Fin1 (synthetic)".into(),
            x_label: "speed_limit_min (MB/s per MD array)".into(),
            y_label: "rebuild time (s)".into(),
            series: vec![
                sim::svg::Series::line("MD RAID5", xs(|p| p.md_s)),
                sim::svg::Series::line("S2-RAID5", xs(|p| p.s2_s)),
            ],
            markers: Vec::new(),
            log_y: true,
            notes: published_notes(&e, |r| r.label.contains("rebuild speed-up")),
            ..Default::default()
        }
        .to_svg(),
    });
    e.plots.push(Plot {
        caption: "Fin1 mean response time during the rebuild against speed_limit_min".into(),
        svg: sim::svg::LineChart {
            title: "Mean response during rebuild, Fin1 (synthetic)".into(),
            x_label: "speed_limit_min (MB/s per MD array)".into(),
            y_label: "mean response (ms)".into(),
            series: vec![
                sim::svg::Series::line("MD RAID5", xs(|p| p.md_ms)),
                sim::svg::Series::line("S2-RAID5", xs(|p| p.s2_ms)),
            ],
            markers: Vec::new(),
            log_y: false,
            notes: published_notes(&e, |r| r.label.contains("response speed-up")),
            ..Default::default()
        }
        .to_svg(),
    });
    Ok(e)
}

/// One spare count of Figure 6.
struct Fig6Point {
    spares: f64,
    response_ms: f64,
    online_s: f64,
    offline_s: f64,
}

fn fig6(ctx: &Ctx, runner: &mut Runner) -> anyhow::Result<Experiment> {
    runner.say("fig6: number of spare disks");
    let mut cfg = ctx.common_config();
    cfg.extend([
        (
            "arrays",
            FIG6_SPARES
                .iter()
                .map(|s| {
                    let a = s2raid5(*s);
                    format!("{} ({})", a.name, a.text())
                })
                .collect::<Vec<_>>()
                .join("; "),
        ),
        (
            "rebuild targets",
            "the failed disk's 3 partitions go to the spares first, then to free partitions on \
             the data disks that share no sub-array with it (its group-mates)"
                .into(),
        ),
        ("workload", Wl::Fin1.label().to_string()),
        ("speed limits", "MD defaults, 3 sub-array rebuilds".into()),
        (
            "failure",
            format!(
                "disk D{FAIL_RAID5} after {} s of user I/O",
                ctx.scale.warmup_s
            ),
        ),
    ]);
    let mut e = Experiment::new(
        "fig6",
        "Effect of the number of spare disks on S2-RAID5, Fin1 (Figure 6)",
        &cfg,
    );
    let mut pts: Vec<Fig6Point> = Vec::new();
    for spares in FIG6_SPARES {
        let o = runner.online(&ctx.online(s2raid5(spares), FAIL_RAID5, Wl::Fin1, 1000))?;
        let off = runner.run(&ctx.offline(s2raid5(spares), FAIL_RAID5))?;
        let (r, t, toff) = (rebuilding_ms(&o), o.rebuild_s()?, off.rebuild_s()?);
        pts.push(Fig6Point {
            spares: spares as f64,
            response_ms: r,
            online_s: t,
            offline_s: toff,
        });
        let s = format!("{spares} spare{}", plural(spares));
        e.rows.push(Row::new(
            format!("{s}: S2-RAID5 mean response during online rebuild"),
            None,
            r,
            "ms",
        ));
        e.rows.push(Row::new(
            format!("{s}: S2-RAID5 online rebuild"),
            None,
            t,
            "s",
        ));
        e.rows.push(Row::new(
            format!("{s}: S2-RAID5 offline rebuild"),
            None,
            toff,
            "s",
        ));
    }
    // Response-time cost of taking one spare away, averaged over 3 -> 2 -> 1.
    let first = pts.first().expect("points").response_ms;
    let last = pts.last().expect("points").response_ms;
    let per_spare = 100.0 * ((first / last).powf(1.0 / (pts.len() - 1) as f64) - 1.0);
    e.rows.push(ctx.explain(
        Row::new(
            "mean response-time increase per spare taken away",
            Some(FIG6_DEGRADATION_PER_SPARE_PCT),
            per_spare,
            "%",
        ),
        || {
            "The paper states a range, about 2-3 %, not a value (the published value is its \
             midpoint). Ours is a little lower: our rebuild runs near its guaranteed minimum, \
             so the rebuilt data written onto the data disks' free partitions is only about \
             1.5 MB/s per disk."
                .into()
        },
    ));
    e.notes.push(
        "The paper gives Figure 6 as a chart; its text states only that removing a spare costs \
         about 2-3 % of front-end performance (the published value above is the midpoint)."
            .into(),
    );
    let resp: Vec<String> = pts
        .iter()
        .map(|p| format!("{:.3} ms", p.response_ms))
        .collect();
    e.claims.push(Claim::new(
        "Using data disks' free partitions instead of spares costs little front-end \
         performance: <= 5 % per spare taken away",
        per_spare <= 5.0,
        format!("{per_spare:.2} % per spare ({})", resp.join(", ")),
    ));
    e.claims.push(Claim::new(
        "Each spare taken away slows user I/O during the rebuild a little (rebuilt data goes \
         to data disks instead)",
        pts.windows(2).all(|w| w[0].response_ms > w[1].response_ms),
        resp.join(", "),
    ));
    let offl: Vec<String> = pts
        .iter()
        .map(|p| format!("{:.1} s", p.offline_s))
        .collect();
    let (omin, omax) = pts.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| {
        (a.min(p.offline_s), b.max(p.offline_s))
    });
    e.claims.push(Claim::new(
        "The rebuild stays parallel with fewer spares: offline rebuild times with 1-3 spares \
         within 25 % of each other",
        omax <= 1.25 * omin,
        offl.join(", "),
    ));
    let series =
        |f: fn(&Fig6Point) -> f64| pts.iter().map(|p| (p.spares, f(p))).collect::<Vec<_>>();
    e.plots.push(Plot {
        caption: "S2-RAID5 mean response time during the online rebuild (Fin1) against spares"
            .into(),
        svg: sim::svg::LineChart {
            title: "S2-RAID5 response during rebuild, Fin1 (synthetic)".into(),
            x_label: "spare disks".into(),
            y_label: "mean response (ms)".into(),
            series: vec![sim::svg::Series::line(
                "S2-RAID5",
                series(|p| p.response_ms),
            )],
            markers: Vec::new(),
            log_y: false,
            notes: published_notes(&e, |_| true),
            ..Default::default()
        }
        .to_svg(),
    });
    e.plots.push(Plot {
        caption: "S2-RAID5 rebuild time against spares (online under Fin1, offline)".into(),
        svg: sim::svg::LineChart {
            title: "S2-RAID5 rebuild time".into(),
            x_label: "spare disks".into(),
            y_label: "rebuild time (s)".into(),
            series: vec![
                sim::svg::Series::line("online, Fin1", series(|p| p.online_s)),
                sim::svg::Series::line("offline", series(|p| p.offline_s)),
            ],
            markers: Vec::new(),
            log_y: true,
            ..Default::default()
        }
        .to_svg(),
    });
    Ok(e)
}

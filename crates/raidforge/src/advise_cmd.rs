//! `raidforge advise`: which layout for this workload and these disks? Every candidate layout
//! that survives the failures asked for is simulated on the workload (the same simulator as
//! `raidforge sim`: a normal phase, a member failure, a rebuild under the workload), then
//! compared: usable share of the raw capacity, mean time to data loss (the Markov chains of
//! `raidforge model mttdl` fed with the rebuild time the simulation measured), rebuild time,
//! response times per phase and throughput. The Pareto front over usable share, MTTDL and
//! the 99th percentile during the rebuild is marked, and one candidate is recommended: of
//! those meeting every constraint, the one keeping the most capacity, then the most reliable,
//! then the fastest under rebuild.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Parser};
use serde_json::{json, Value};

/// Arguments of `raidforge advise`.
#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// The workload, as `raidforge sim --workload` takes it: a trace file (any format sim
    /// reads, compressed or not) or a synthetic spec such as iops=400,read=0.7,size=16K.
    #[arg(long)]
    pub workload: String,
    /// The trace's format (detected when absent), as `raidforge trace read --format`.
    #[arg(long)]
    pub format: Option<String>,
    /// Member disks available (spare disks included).
    #[arg(long)]
    pub disks: usize,
    /// Drive model of every disk: st3500320as, st32000645ns (the RAID+ paper's), wd1600aajs,
    /// x25-e, ... as `raidforge sim --disk` names them.
    #[arg(long, default_value = "st32000645ns")]
    pub disk: String,
    /// SSDs among the disks (the last ones), of the model --ssd names: RAID4S (every parity
    /// on the SSDs) and RAIDH (parity weighted towards them) join the candidates, and every
    /// other candidate runs on the same mixed set.
    #[arg(long, default_value_t = 0)]
    pub ssds: usize,
    /// The SSD model of --ssds.
    #[arg(long, default_value = "x25-e")]
    pub ssd: String,
    /// Member failures the layout must survive (1 or 2).
    #[arg(long, default_value_t = 1)]
    pub survive: usize,
    /// Usable capacity wanted, on whole drives (e.g. 20T; T = 2^40): smaller layouts are
    /// marked as not meeting it.
    #[arg(long)]
    pub capacity: Option<String>,
    /// Longest acceptable rebuild of one whole drive, hours.
    #[arg(long)]
    pub max_rebuild_hours: Option<f64>,
    /// Largest acceptable 99th-percentile response time in normal operation, ms.
    #[arg(long)]
    pub p99_normal_ms: Option<f64>,
    /// Largest acceptable 99th-percentile response time while rebuilding, ms.
    #[arg(long)]
    pub p99_rebuild_ms: Option<f64>,
    /// Bytes of each member simulated (rebuild times are scaled from it to the whole drive,
    /// in proportion to size: a rebuild reads and writes every used byte).
    #[arg(long, default_value = "64G")]
    pub member_size: String,
    /// Chunk size of every layout (mdadm's default). Small chunks make a declustered
    /// layout's rebuild seek-bound: at 64K, RAID+ rebuilt 16 disks barely faster than RAID5
    /// under the WebSearch trace; at 512K, 2.2 times as fast.
    #[arg(long, default_value = "512K")]
    pub chunk: String,
    /// Replay a trace this many times back to back, so that the rebuild runs under the
    /// workload (the failure comes after the first fifth of the replay).
    #[arg(long, default_value_t = 12)]
    pub loops: u64,
    /// Rebuild rate guaranteed under foreground load (MD's speed_limit_min), as `raidforge
    /// sim --speed-min` takes it. The default never throttles: each layout rebuilds as fast
    /// as its disks allow beside the workload, which pays for it in the p99 while rebuilding
    /// (with MD's 1000KiB/s, every layout rebuilds at the same crawl while the workload runs).
    #[arg(long, default_value = "100GB/s")]
    pub speed_min: String,
    /// Rebuild cycles in flight (as `raidforge rebuild`, whose default this is).
    #[arg(long, default_value_t = 8)]
    pub rebuild_window: u32,
    /// Rebuild rate cap when idle, 0 = none (MD's speed_limit_max is 200000KiB/s; uncapped
    /// by default here so that layouts whose rebuild spreads over many disks show it).
    #[arg(long, default_value = "0")]
    pub speed_max: String,
    /// Mean time to failure of one drive, hours (for MTTDL).
    #[arg(long, default_value_t = 1e6)]
    pub mttf_hours: f64,
    /// Bound the time taken, in seconds: the members simulated are made smaller (down to
    /// 256 MiB) so that every candidate fits, measured on a first run; the workload stays
    /// whole. The report says what was simulated.
    #[arg(long)]
    pub budget: Option<f64>,
    /// Simulations run at once (default: the cores of this machine).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Write the trade-off plot (SVG): usable share against MTTDL, the front marked.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write a self-contained HTML page: the table, the recommendation and the plot.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// One layout to try.
#[derive(Clone, Debug)]
struct Candidate {
    /// Short name ("raid50 k=8").
    name: String,
    /// Arguments for `raidforge sim` that build it.
    args: Vec<String>,
    /// Member failures it survives.
    tolerance: usize,
    /// The reliability chain its MTTDL comes from.
    chain: Chain,
}

/// Which Markov chain of `repro::mttdl` models a candidate.
#[derive(Clone, Copy, Debug)]
enum Chain {
    /// Single parity: while one disk is rebuilt, a failure of any of `losers` others loses data.
    Single { losers: usize },
    /// Double parity over groups of `group` disks (all `n` for RAID6): a third failure in the
    /// group of two failed ones loses data.
    Double { group: usize },
    /// Double parity with deferred parity updates (the lazy parity update chain).
    Lazy,
}

/// What the simulation of one candidate gave.
#[derive(Clone, Debug)]
struct Outcome {
    c: Candidate,
    usable: f64,
    capacity_bytes: u64,
    rebuild_s: f64,
    rebuild_full_h: f64,
    mttdl_years: f64,
    p50: [f64; 3],
    p99: [f64; 3],
    iops: f64,
    requests: u64,
    wall_s: f64,
    /// Constraints it does not meet.
    misses: Vec<String>,
    front: bool,
}

fn candidates(n: usize, ssds: usize) -> Vec<Candidate> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut out = Vec::new();
    let mut add = |name: String, args: Vec<String>, chain: Chain| {
        let tolerance = match chain {
            Chain::Single { .. } => 1,
            Chain::Double { .. } | Chain::Lazy => 2,
        };
        out.push(Candidate {
            name,
            args,
            tolerance,
            chain,
        })
    };
    let single = |losers| Chain::Single { losers };
    add(
        format!("raid5 {n}"),
        s(&["--scheme", "raid5"]),
        single(n - 1),
    );
    add(
        format!("raid6 {n}"),
        s(&["--scheme", "raid6"]),
        Chain::Double { group: n },
    );
    for k in [4, 5, 6, 8] {
        if k < n && n % k == 0 {
            let w = k.to_string();
            add(
                format!("raid50 k={k}"),
                s(&["--scheme", "raid50", "--width", &w]),
                single(k - 1),
            );
        }
    }
    for k in [4, 6, 8] {
        if k < n && n % k == 0 {
            let w = k.to_string();
            add(
                format!("raid60 k={k}"),
                s(&["--scheme", "raid60", "--width", &w]),
                Chain::Double { group: k },
            );
        }
    }
    for k in [4, 8] {
        if k < n {
            let w = k.to_string();
            add(
                format!("raid+ 5 k={k}"),
                s(&["--scheme", "raidplus", "--level", "5", "--width", &w]),
                single(n - 1),
            );
        }
    }
    if 8 < n {
        add(
            "raid+ 6 k=8".into(),
            s(&["--scheme", "raidplus", "--level", "6", "--width", "8"]),
            Chain::Double { group: n },
        );
    }
    for scheme in ["random", "hash"] {
        if 9 < n {
            add(
                format!("{scheme} 5 k=8"),
                s(&["--scheme", scheme, "--level", "5", "--width", "8"]),
                single(n - 1),
            );
        }
    }
    add("s2raid5".into(), s(&["--scheme", "s2raid5"]), single(n - 1));
    add("s2raid10".into(), s(&["--scheme", "s2raid10"]), single(1));
    if n % 2 == 0 {
        add("raid10".into(), s(&["--scheme", "raid10"]), single(1));
    }
    if ssds > 0 && ssds < n {
        // RAID4S: every parity on the SSDs; RAIDH: the SSDs take as much parity as all the
        // HDDs together.
        let hdds = n - ssds;
        let weights = |hdd: usize, ssd: usize| {
            (0..n)
                .map(|i| if i < hdds { hdd } else { ssd }.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        add(
            "raid4s".into(),
            s(&["--scheme", "raidh", "--weights", &weights(0, 1)]),
            single(n - 1),
        );
        add(
            "raidh".into(),
            s(&[
                "--scheme",
                "raidh",
                "--weights",
                &weights(1, hdds.div_ceil(ssds)),
            ]),
            single(n - 1),
        );
    }
    add(
        "rm2".into(),
        s(&["--scheme", "rm2"]),
        Chain::Double { group: n },
    );
    add(
        "rm2 lazy".into(),
        s(&["--scheme", "rm2", "--parity", "lazy"]),
        Chain::Lazy,
    );
    out
}

/// `raidforge sim` arguments, parsed as the command line would.
#[derive(Parser, Debug)]
struct SimLine {
    #[command(flatten)]
    sim: crate::sim_cmd::SimArgs,
}

fn parse_size(s: &str, what: &str) -> anyhow::Result<u64> {
    sim::parse_bytes(s)
        .with_context(|| format!("{what} {s:?}: expected a size such as 64G or 512K"))
}

/// Mean time to data loss in years: the single- or double-parity chain with the measured
/// whole-drive rebuild time as the repair time.
fn mttdl_years(c: &Candidate, n: usize, mttf_h: f64, mttr_h: f64) -> f64 {
    use repro::mttdl::{self, DiskRates, LpuRates};
    let d = DiskRates {
        mttf_h,
        mttr_h: mttr_h.max(1e-6),
    };
    let h = match c.chain {
        Chain::Single { losers } => mttdl::single_failure(n, losers, d),
        Chain::Double { group } => mttdl::double_failure(n, group - 1, group - 2, d),
        Chain::Lazy => mttdl::raid6_lpu(n, d, LpuRates::SEED_002),
    };
    h / (24.0 * 365.25)
}

/// (p50, p99) of a phase, NaN when no request fell in it.
fn phase(v: &Value, p: &str) -> (f64, f64) {
    let r = &v["response_ms"][p];
    if r["count"].as_u64().unwrap_or(0) == 0 {
        return (f64::NAN, f64::NAN);
    }
    (
        r["p50"].as_f64().unwrap_or(f64::NAN),
        r["p99"].as_f64().unwrap_or(f64::NAN),
    )
}

/// A response time for the table: "-" when the phase had no request.
fn ms(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2}")
    }
}

pub fn run(a: AdviseArgs) -> anyhow::Result<()> {
    let (v, text) = evaluate(&a)?;
    if a.json {
        println!("{v}");
    } else {
        print!("{text}");
    }
    Ok(())
}

/// What `raidforge advise --json` prints (the SVG and HTML files written as asked).
pub fn advise_json(a: &AdviseArgs) -> anyhow::Result<Value> {
    Ok(evaluate(a)?.0)
}

/// The JSON and the text of the advice.
fn evaluate(a: &AdviseArgs) -> anyhow::Result<(Value, String)> {
    use std::fmt::Write;
    let started = Instant::now();
    if !(1..=2).contains(&a.survive) {
        bail!("--survive must be 1 or 2 (member failures the layout must survive)");
    }
    if a.disks < 4 {
        bail!("--disks must be at least 4 to compare layouts");
    }
    let drive = sim::disk::Drive::from_name(&a.disk).with_context(|| {
        let names: Vec<&str> = sim::disk::Drive::ALL.iter().map(|d| d.name()).collect();
        format!("unknown --disk {:?}; known: {}", a.disk, names.join(", "))
    })?;
    let mut drive_bytes = drive.params().capacity_bytes();
    if a.ssds >= a.disks {
        bail!(
            "--ssds {} leaves no hard disk among --disks {}",
            a.ssds,
            a.disks
        );
    }
    if a.ssds > 0 {
        let ssd = sim::disk::Drive::from_name(&a.ssd)
            .with_context(|| format!("unknown --ssd {:?}", a.ssd))?;
        // Every member uses as much of its drive as the smallest holds.
        drive_bytes = drive_bytes.min(ssd.params().capacity_bytes());
    }
    let member_bytes = parse_size(&a.member_size, "--member-size")?.min(drive_bytes);
    let want_bytes = a
        .capacity
        .as_deref()
        .map(|c| parse_size(c, "--capacity"))
        .transpose()?;
    let n = a.disks;
    let all = candidates(n, a.ssds);
    let (fit, unfit): (Vec<Candidate>, Vec<Candidate>) =
        all.into_iter().partition(|c| c.tolerance >= a.survive);
    let is_trace = std::path::Path::new(&a.workload).is_file();
    let base = |c: &Candidate, member_bytes: u64| -> Vec<String> {
        let mut v: Vec<String> = ["sim", "--disks"].iter().map(|s| s.to_string()).collect();
        v.push(n.to_string());
        v.extend(c.args.iter().cloned());
        for (k, val) in [
            ("--disk", a.disk.clone()),
            ("--member-size", member_bytes.to_string()),
            ("--chunk", a.chunk.clone()),
            ("--workload", a.workload.clone()),
            ("--fail", "0".into()),
            ("--warmup-fraction", "0.2".into()),
            ("--speed-min", a.speed_min.clone()),
            ("--speed-max", a.speed_max.clone()),
            ("--rebuild-window", a.rebuild_window.to_string()),
            ("--json", String::new()),
        ] {
            v.push(k.into());
            if !val.is_empty() {
                v.push(val);
            }
        }
        if let Some(f) = &a.format {
            v.extend(["--format".into(), f.clone()]);
        }
        for i in n - a.ssds..n {
            v.extend(["--disk-at".into(), format!("{i}={}", a.ssd)]);
        }
        if is_trace {
            v.extend(["--loops".into(), a.loops.to_string()]);
        }
        v
    };
    let simulate =
        |c: &Candidate, member_bytes: u64| -> anyhow::Result<(sim::Report, Value, f64)> {
            let t = Instant::now();
            let line = SimLine::try_parse_from(base(c, member_bytes))
                .map_err(|e| anyhow::anyhow!("{}: {e}", c.name))?;
            let (r, v) = crate::sim_cmd::execute(&line.sim)?;
            Ok((r, v, t.elapsed().as_secs_f64()))
        };
    // The budget: the simulation's cost grows with the members' size (the rebuild reads and
    // writes every used byte); a first candidate on small members measures it, and the
    // members every candidate gets are what the budget pays for on the cores available.
    // Rebuild times scale from them to the whole drive as always; the workload is the same.
    let mut member_bytes = member_bytes;
    let mut slice_note = None;
    if let Some(budget) = a.budget {
        if !(budget > 0.0) {
            bail!("--budget must be a positive number of seconds");
        }
        let probe = member_bytes.min(4 << 30);
        let (_, _, wall) = simulate(&fit[0], probe)?;
        let jobs = a.jobs.unwrap_or_else(num_cpus) as f64;
        let rounds = (fit.len() as f64 / jobs).ceil();
        // Half the budget per round, against candidates slower than the first.
        let fits = (budget - wall).max(0.0) * 0.5 / rounds / wall.max(1e-3) * probe as f64;
        let chosen = ((fits as u64) >> 26 << 26).clamp(256 << 20, member_bytes);
        slice_note = Some(format!(
            "--budget {budget} s: members of {} simulated instead of {} (a first candidate \
             took {wall:.2} s on {}); rebuild times are scaled from them to the whole drive",
            human_bytes(chosen),
            human_bytes(member_bytes),
            human_bytes(probe)
        ));
        member_bytes = chosen;
    }
    let jobs = a.jobs.unwrap_or_else(num_cpus).max(1);
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, anyhow::Result<(sim::Report, Value, f64)>)>> =
        Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(fit.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(c) = fit.get(i) else { break };
                let r = simulate(c, member_bytes);
                let k = done.fetch_add(1, Ordering::SeqCst) + 1;
                match &r {
                    Ok((_, _, wall)) => {
                        eprintln!(
                            "advise: [{k}/{}] {} simulated in {wall:.1} s",
                            fit.len(),
                            c.name
                        )
                    }
                    Err(e) => {
                        eprintln!("advise: [{k}/{}] {} not possible: {e:#}", fit.len(), c.name)
                    }
                }
                results.lock().unwrap().push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    let mut outcomes = Vec::new();
    let mut refused = Vec::new();
    for (i, r) in results {
        let c = fit[i].clone();
        match r {
            Err(e) => refused.push((c.name.clone(), format!("{e:#}"))),
            Ok((r, v, wall)) => {
                let raw = (r.disks as u64 * r.member_bytes) as f64;
                let usable = r.capacity_bytes as f64 / raw;
                let rebuild_s = r.rebuild_time_s().unwrap_or(f64::NAN);
                let rebuild_full_h =
                    rebuild_s * drive_bytes as f64 / r.member_bytes as f64 / 3600.0;
                let ph = ["normal", "degraded", "rebuilding"].map(|p| phase(&v, p));
                let mut misses = Vec::new();
                let full_capacity = (usable * (n as u64 * drive_bytes) as f64) as u64;
                if let Some(w) = want_bytes {
                    if full_capacity < w {
                        misses.push(format!(
                            "{} usable < --capacity",
                            human_bytes(full_capacity)
                        ));
                    }
                }
                if let Some(m) = a.max_rebuild_hours {
                    if !(rebuild_full_h <= m) {
                        misses.push(format!("rebuild {rebuild_full_h:.1} h > {m} h"));
                    }
                }
                if let Some(m) = a.p99_normal_ms {
                    if !(ph[0].1 <= m) {
                        misses.push(format!("p99 normal {:.1} ms > {m} ms", ph[0].1));
                    }
                }
                if let Some(m) = a.p99_rebuild_ms {
                    if !(ph[2].1 <= m) {
                        misses.push(format!("p99 rebuilding {:.1} ms > {m} ms", ph[2].1));
                    }
                }
                if rebuild_s.is_nan() {
                    misses.push("the rebuild did not finish".into());
                }
                outcomes.push(Outcome {
                    mttdl_years: mttdl_years(&c, n, a.mttf_hours, rebuild_full_h),
                    c,
                    usable,
                    capacity_bytes: full_capacity,
                    rebuild_s,
                    rebuild_full_h,
                    p50: ph.map(|p| p.0),
                    p99: ph.map(|p| p.1),
                    iops: r.throughput_iops,
                    requests: r.requests,
                    wall_s: wall,
                    misses,
                    front: false,
                });
            }
        }
    }
    if outcomes.is_empty() {
        bail!("no candidate layout could be simulated: {refused:?}");
    }
    mark_front(&mut outcomes);
    let pick = recommend(&outcomes);
    let why = pick.map(|i| reason(&outcomes, i, a.survive));
    let elapsed = started.elapsed().as_secs_f64();
    let json_out = json!({
        "workload": a.workload,
        "disks": n,
        "drive": a.disk,
        "drive_bytes": drive_bytes,
        "member_bytes_simulated": member_bytes,
        "survive": a.survive,
        "slice": slice_note,
        "seconds": elapsed,
        "candidates": outcomes.iter().map(|o| json!({
            "name": o.c.name,
            "sim_args": o.c.args,
            "tolerance": o.c.tolerance,
            "usable_share": o.usable,
            "usable_bytes": o.capacity_bytes,
            "rebuild_s_simulated": o.rebuild_s,
            "rebuild_hours_whole_drive": o.rebuild_full_h,
            "mttdl_years": o.mttdl_years,
            "p50_ms": {"normal": o.p50[0], "degraded": o.p50[1], "rebuilding": o.p50[2]},
            "p99_ms": {"normal": o.p99[0], "degraded": o.p99[1], "rebuilding": o.p99[2]},
            "throughput_iops": o.iops,
            "requests": o.requests,
            "pareto_front": o.front,
            "meets_constraints": o.misses.is_empty(),
            "misses": o.misses,
            "wall_s": o.wall_s,
        })).collect::<Vec<_>>(),
        "not_simulated": unfit.iter().map(|c| json!({"name": c.name, "why": format!("survives {} failure(s), --survive {}", c.tolerance, a.survive)}))
            .chain(refused.iter().map(|(n, e)| json!({"name": n, "why": e})))
            .collect::<Vec<_>>(),
        "recommended": pick.map(|i| outcomes[i].c.name.clone()),
        "reason": why,
    });
    let svg = plot(&outcomes, pick, a);
    if let Some(p) = &a.svg {
        std::fs::write(p, &svg).with_context(|| format!("--svg: cannot write {}", p.display()))?;
    }
    if let Some(p) = &a.html {
        std::fs::write(
            p,
            html(
                &outcomes,
                pick,
                why.as_deref(),
                &svg,
                &a,
                slice_note.as_deref(),
                &unfit,
                &refused,
            ),
        )
        .with_context(|| format!("--html: cannot write {}", p.display()))?;
    }
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{} x {}{} ({} used of each), survive {} failure(s); workload {}; {:.0} s",
        n - a.ssds,
        a.disk,
        if a.ssds > 0 {
            format!(" + {} x {}", a.ssds, a.ssd)
        } else {
            String::new()
        },
        human_bytes(drive_bytes),
        a.survive,
        a.workload,
        elapsed
    );
    if let Some(s) = &slice_note {
        let _ = writeln!(text, "{s}");
    }
    let _ = writeln!(
        text,
        "{:<18} {:>3} {:>7} {:>9} {:>11} {:>8} {:>8} {:>8} {:>8} {:>7}  ",
        "layout",
        "tol",
        "usable",
        "rebuild h",
        "MTTDL y",
        "p50 ms",
        "p99 ms",
        "p99 deg",
        "p99 rbd",
        "IOPS"
    );
    for (i, o) in outcomes.iter().enumerate() {
        let _ = writeln!(
            text,
            "{:<18} {:>3} {:>6.1}% {:>9.2} {:>11.3e} {:>8} {:>8} {:>8} {:>8} {:>7.0}  {}{}{}",
            o.c.name,
            o.c.tolerance,
            o.usable * 100.0,
            o.rebuild_full_h,
            o.mttdl_years,
            ms(o.p50[0]),
            ms(o.p99[0]),
            ms(o.p99[1]),
            ms(o.p99[2]),
            o.iops,
            if o.front { "front" } else { "" },
            if pick == Some(i) { " RECOMMENDED" } else { "" },
            if o.misses.is_empty() {
                String::new()
            } else {
                format!(" (misses: {})", o.misses.join("; "))
            }
        );
    }
    for c in &unfit {
        let _ = writeln!(
            text,
            "{:<18} survives {} failure(s): not simulated",
            c.name, c.tolerance
        );
    }
    for (name, e) in &refused {
        let _ = writeln!(text, "{name:<18} not possible here: {e}");
    }
    let _ = match &why {
        Some(w) => writeln!(text, "\nrecommended: {w}"),
        None => writeln!(
            text,
            "\nno candidate meets every constraint: relax one (see misses above)"
        ),
    };
    let _ = writeln!(
        text,
        "(rebuild h: the simulated rebuild of {} members scaled to the whole {} drive; MTTDL \
         from that rebuild time and an MTTF of {} h; front: not beaten on usable share, MTTDL \
         and p99 while rebuilding at once)",
        human_bytes(member_bytes),
        human_bytes(drive_bytes),
        a.mttf_hours
    );
    Ok((json_out, text))
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn human_bytes(b: u64) -> String {
    let t = b as f64;
    if t >= (1u64 << 40) as f64 {
        format!("{:.2} TiB", t / (1u64 << 40) as f64)
    } else {
        format!("{:.1} GiB", t / (1u64 << 30) as f64)
    }
}

/// The Pareto front over usable share (max), MTTDL (max) and p99 while rebuilding (min).
fn mark_front(o: &mut [Outcome]) {
    let key = |x: &Outcome| (x.usable, x.mttdl_years, -x.p99[2]);
    let beats = |a: (f64, f64, f64), b: (f64, f64, f64)| {
        a.0 >= b.0 && a.1 >= b.1 && a.2 >= b.2 && (a.0 > b.0 || a.1 > b.1 || a.2 > b.2)
    };
    let keys: Vec<_> = o.iter().map(key).collect();
    for (i, x) in o.iter_mut().enumerate() {
        x.front = !keys
            .iter()
            .enumerate()
            .any(|(j, &k)| j != i && beats(k, keys[i]));
    }
}

/// Of the candidates meeting every constraint: the most usable share, then MTTDL, then the
/// lowest p99 while rebuilding.
fn recommend(o: &[Outcome]) -> Option<usize> {
    (0..o.len())
        .filter(|&i| o[i].misses.is_empty())
        .max_by(|&a, &b| {
            let (x, y) = (&o[a], &o[b]);
            // Shares within half a percent count as equal (the same parity overhead).
            let share = |s: f64| (s * 200.0).round();
            share(x.usable)
                .total_cmp(&share(y.usable))
                .then(x.mttdl_years.total_cmp(&y.mttdl_years))
                .then(y.p99[2].total_cmp(&x.p99[2]))
        })
}

fn reason(o: &[Outcome], i: usize, survive: usize) -> String {
    let x = &o[i];
    let fastest = o
        .iter()
        .filter(|y| y.misses.is_empty())
        .map(|y| y.rebuild_full_h)
        .fold(f64::INFINITY, f64::min);
    format!(
        "{}: it survives {} failure(s) (asked: {survive}) and meets every constraint, keeps \
         {:.1} % of the raw capacity ({}), the most of those that do{}; a whole-drive rebuild \
         takes {:.1} h (fastest candidate: {:.1} h), MTTDL {:.2e} years, p99 {:.1} ms in \
         normal operation and {:.1} ms while rebuilding",
        x.c.name,
        x.c.tolerance,
        x.usable * 100.0,
        human_bytes(x.capacity_bytes),
        if x.front {
            ", and it is on the Pareto front"
        } else {
            ""
        },
        x.rebuild_full_h,
        fastest,
        x.mttdl_years,
        x.p99[0],
        x.p99[2]
    )
}

fn plot(o: &[Outcome], pick: Option<usize>, a: &AdviseArgs) -> String {
    use sim::svg::{LineChart, Series};
    let pts = |f: &dyn Fn(usize) -> bool| -> Vec<(f64, f64)> {
        (0..o.len())
            .filter(|&i| f(i))
            .map(|i| (o[i].mttdl_years, o[i].usable * 100.0))
            .collect()
    };
    let mut series = vec![
        Series::dots("Pareto front", pts(&|i| o[i].front)),
        Series::dots("others", pts(&|i| !o[i].front)),
    ];
    if let Some(p) = pick {
        series.push(Series::dots(
            format!("recommended: {}", o[p].c.name),
            vec![(o[p].mttdl_years, o[p].usable * 100.0)],
        ));
    }
    LineChart {
        title: format!("{} x {}: usable share against MTTDL", a.disks, a.disk),
        x_label: "MTTDL (years, log)".into(),
        y_label: "usable share of raw capacity (%)".into(),
        series,
        log_x: true,
        ..Default::default()
    }
    .to_svg()
}

#[allow(clippy::too_many_arguments)]
fn html(
    o: &[Outcome],
    pick: Option<usize>,
    why: Option<&str>,
    svg: &str,
    a: &AdviseArgs,
    slice: Option<&str>,
    unfit: &[Candidate],
    refused: &[(String, String)],
) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut rows = String::new();
    for (i, x) in o.iter().enumerate() {
        rows.push_str(&format!(
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{:.1} %</td><td>{:.2}</td><td>{:.2e}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td></tr>\n",
            if pick == Some(i) { "pick" } else if x.front { "front" } else { "" },
            esc(&x.c.name),
            x.c.tolerance,
            x.usable * 100.0,
            x.rebuild_full_h,
            x.mttdl_years,
            ms(x.p50[0]),
            ms(x.p99[0]),
            ms(x.p99[1]),
            ms(x.p99[2]),
            x.iops,
            if x.front { "yes" } else { "" },
            esc(&if x.misses.is_empty() { "meets all".to_string() } else { x.misses.join("; ") }),
        ));
    }
    let skipped: String = unfit
        .iter()
        .map(|c| {
            format!(
                "<li>{}: survives {} failure(s)</li>",
                esc(&c.name),
                c.tolerance
            )
        })
        .chain(
            refused
                .iter()
                .map(|(n, e)| format!("<li>{}: {}</li>", esc(n), esc(e))),
        )
        .collect();
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>raidforge advise: {disks} x {disk}</title>\n\
<style>body{{font-family:sans-serif;margin:2em;max-width:75em}}table{{border-collapse:collapse}}\
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
tr.front td{{background:#eef6ff}}tr.pick td{{background:#d9f2d9;font-weight:bold}}.why{{font-size:1.1em}}</style></head><body>\n\
<h1>Which layout? {disks} x {disk}, survive {survive}</h1>\n<p>Workload: <code>{workload}</code>. {slice}</p>\n\
<p class=\"why\"><b>Recommended</b>: {why}</p>\n\
<table><tr><th>layout</th><th>survives</th><th>usable</th><th>rebuild (h, whole drive)</th><th>MTTDL (years)</th>\
<th>p50 normal (ms)</th><th>p99 normal</th><th>p99 degraded</th><th>p99 rebuilding</th><th>IOPS</th><th>Pareto front</th><th>constraints</th></tr>\n{rows}</table>\n\
<p>Not simulated:</p><ul>{skipped}</ul>\n{svg}\n\
<p>Rebuild times are simulated on members of {member} and scaled to the whole drive; MTTDL comes from the single- or \
double-parity Markov chain (raidforge model mttdl; RAID-50/60: per group) with that rebuild time and an MTTF of {mttf} h. The front holds \
the layouts no other beats on usable share, MTTDL and p99 while rebuilding at once.</p>\n</body></html>\n",
        disks = a.disks,
        disk = esc(&a.disk),
        survive = a.survive,
        workload = esc(&a.workload),
        slice = esc(slice.unwrap_or("")),
        why = esc(why.unwrap_or("no candidate meets every constraint")),
        member = esc(&a.member_size),
        mttf = a.mttf_hours,
    )
}

//! Simulator speed: simulated member I/Os per second of wall time, on one core.
//!
//! ```text
//! cargo run --release -p sim --example sim_speed [TRACE_DIR] [LOOPS] [SCENARIOS]
//! ```
//!
//! `TRACE_DIR` holds `websearch-head.mqsim` (default: `$RAIDFORGE_TRACES`, else the
//! repository's `data/traces`).
//!
//! `SCENARIOS` is a comma-separated subset of `raid5,breakdown,rebuild,rebuild-load` (default:
//! all of them). Every scenario line ends with `-> N member I/Os/s`, which the comparison
//! script (`bench/sim_speed.sh`) collects.
//!
//! 1. RAID5 over 8 HDDs (Seagate ST3500320AS, 64 KiB chunks, 10 GB members) replaying the
//!    WebSearch head looped LOOPS times (default 40, about a million requests);
//! 2. RAID+ n=59 k=7 on the Constellation ES.2 (1 MiB chunks, 100 GB members): offline rebuild
//!    of one member;
//! 3. the same RAID+ array replaying the looped WebSearch head while it rebuilds.
//!
//! For scenario 1 it also times, alone, the two stages the executor cannot avoid: reading and
//! parsing the trace, and raidcore's planning of every request, so the report can say where
//! the time goes.

use std::path::PathBuf;
use std::time::Instant;

use layout::{Params, SchemeKind};
use raidcore::{plan_read, plan_write, ArrayState, Geometry, RebuildOrder, SpeedLimits};
use sim::{simulate, Drive, Failure, Op, Report, SimConfig, SourceOptions, Workload, WorkloadSpec};

fn show(name: &str, r: &Report, wall_s: f64) {
    println!(
        "{name}: {} requests, {} member I/Os, {} events, {:.3} s simulated, rebuild {:?} s; wall {:.3} s -> {:.0} member I/Os/s, {:.0} requests/s",
        r.requests,
        r.member_ios,
        r.events,
        r.sim_time_s,
        r.rebuild_time_s(),
        wall_s,
        r.member_ios as f64 / wall_s,
        r.requests as f64 / wall_s
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: sim_speed [TRACE_DIR ($RAIDFORGE_TRACES, else the repository's data/traces)] [LOOPS (40)] [raid5,breakdown,rebuild,rebuild-load]");
        return;
    }
    let which = args
        .get(3)
        .cloned()
        .unwrap_or_else(|| "raid5,breakdown,rebuild,rebuild-load".to_string());
    let run = |name: &str| which.split(',').any(|w| w == name);
    let given = args.get(1).map(PathBuf::from);
    let dir = match sim::locate_traces_dir(given.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("sim_speed: {e}");
            std::process::exit(2);
        }
    };
    let loops: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(40);
    let trace = WorkloadSpec::Trace {
        path: dir.join("websearch-head.mqsim"),
        format: None,
    };
    let looped = SourceOptions {
        loops,
        ..SourceOptions::default()
    };

    // 1. RAID5, 8 HDDs, WebSearch looped.
    let raid5 = || {
        layout::build(
            SchemeKind::Raid5,
            &Params {
                disks: Some(8),
                ..Params::default()
            },
        )
        .unwrap()
    };
    let (chunk, member) = (64 << 10, 10_000_000_000);
    let cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    let mut total_s = f64::NAN;
    if run("raid5") {
        let t = Instant::now();
        let r = simulate(raid5(), chunk, member, cfg, &trace, &looped).unwrap();
        total_s = t.elapsed().as_secs_f64();
        show("raid5 x8 websearch", &r, total_s);
    }
    if run("breakdown") {
        // Where the time goes: the trace alone, then raidcore's planning alone.
        let geo = Geometry::new(raid5(), chunk, member).unwrap();
        let state = ArrayState::new(&geo);
        let t = Instant::now();
        let mut source = trace.open(geo.capacity_bytes(), &looped).unwrap();
        let mut requests = Vec::new();
        while let Some(q) = source.next_request() {
            requests.push(q.unwrap());
        }
        let parse_s = t.elapsed().as_secs_f64();
        let cap = geo.capacity_bytes();
        let t = Instant::now();
        let mut plans = 0;
        for q in &requests {
            let off = q.offset_bytes % cap / 512 * 512;
            let off = off.min(cap - q.len_bytes);
            let p = match q.op {
                Op::Read => plan_read(&geo, &state, off, q.len_bytes),
                Op::Write => plan_write(&geo, &state, off, q.len_bytes, &raidcore::WritePolicy::Md),
            };
            plans += p.unwrap().len();
        }
        let plan_s = t.elapsed().as_secs_f64();
        println!(
        "  of {total_s:.3} s: trace reading {parse_s:.3} s ({:.0} %), raidcore planning {plan_s:.3} s ({:.0} %, {plans} plans), executor + disk models {:.3} s ({:.0} %)",
        100.0 * parse_s / total_s,
        100.0 * plan_s / total_s,
        total_s - parse_s - plan_s,
        100.0 * (total_s - parse_s - plan_s) / total_s
    );
        drop(requests);
    }

    // 2. RAID+ n=59 k=7: offline rebuild.
    let plus = || {
        layout::build(
            SchemeKind::RaidPlus,
            &Params {
                disks: Some(59),
                width: Some(7),
                ..Params::default()
            },
        )
        .unwrap()
    };
    let mut cfg = SimConfig::new(Drive::SeagateSt32000645ns.params());
    cfg.failure = Some(Failure {
        member: 0,
        at_ns: 0,
    });
    cfg.rebuild_order = RebuildOrder::Parallel { max_in_flight: 2 };
    cfg.speed = SpeedLimits {
        min_bytes_per_sec: 0,
        max_bytes_per_sec: 0,
    };
    let (chunk, member) = (1 << 20, 100_000_000_000);
    if run("rebuild") {
        let geo_s = {
            let t = Instant::now();
            Geometry::new(plus(), chunk, member).unwrap();
            t.elapsed().as_secs_f64()
        };
        let t_run = Instant::now();
        let r = simulate(
            plus(),
            chunk,
            member,
            cfg.clone(),
            &WorkloadSpec::None,
            &SourceOptions::default(),
        )
        .unwrap();
        let run_s = t_run.elapsed().as_secs_f64();
        show("raid+ 59/7 offline rebuild", &r, run_s);
        println!(
        "  of which building the geometry (raidcore, once per run): {geo_s:.3} s; without it {:.0} member I/Os/s",
        r.member_ios as f64 / (run_s - geo_s)
    );
    }

    // 3. RAID+ rebuilding under the looped WebSearch head.
    cfg.speed = SpeedLimits {
        min_bytes_per_sec: 200 << 20,
        max_bytes_per_sec: 0,
    };
    if run("rebuild-load") {
        let t = Instant::now();
        let r = simulate(plus(), chunk, member, cfg, &trace, &looped).unwrap();
        show(
            "raid+ 59/7 rebuild + websearch",
            &r,
            t.elapsed().as_secs_f64(),
        );
    }
}

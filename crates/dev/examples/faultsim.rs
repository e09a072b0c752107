//! The fault-injection campaign over real pools (`scripts/faultsim.sh` runs it in release).
//! See `dev::faultsim` for what a run does.

use std::time::{Duration, Instant};

use dev::faultsim::{parse_seed, RunOpts, RunReport, Summary};
use dev::faultsim_served::ServedOpts;

const HELP: &str = "\
faultsim: seeded fault-injection runs over real raidforge pools

Each seed draws a layout, a workload and a fault mix (fail-stop members, latent sector errors,
bit flips, lost and misdirected writes, slow members, crashes with torn writes), runs it against
a pool on scratch files, and checks every read against a reference model of the volume.

USAGE:
    faultsim [--seed SEED | --seeds N | --seconds S] [OPTIONS]

MODES (one):
    --seed SEED       run one seed (decimal or 0x hex) and print its report
    --seeds N         run N seeds starting at --start (default 1)
    --seconds S       run consecutive seeds from --start for S seconds

OPTIONS:
    --served          serve each pool over NBD (as `raidforge serve` does) to several concurrent
                      clients while the faults, rebuilds, copy-backs, lazy flushes, restarts and
                      crashes (process kills and power losses) happen (dev::faultsim_served);
                      the pool's protection is drawn per seed unless --protection is given
    --auto-heal       every --served run heals itself (hot spares added by the operator, the
                      served pool activates them and rebuilds); default: drawn per seed
    --clients N       concurrent NBD clients of a --served run (default 3)
    --start SEED      first seed of --seeds/--seconds (default 1)
    --steps N         workload steps per run (default 120; --served: controller steps, 60)
    --dir DIR         scratch directory (default /dev/shm, else the temporary directory)
    --protection LIST assume the pools have these protections (journal,checksums): runs that
                      are beyond tolerance without them count as within (default: what the
                      engine has, dev::faultsim::ENGINE_PROTECTION; `none` for none)
    --json            print the summary (or the one run's report) as JSON
    --verbose         log every step of every run to stderr
    -h, --help        this text

Exit status: 0 when no seed failed, 1 when some seed failed (each is printed with the command
that replays it), 2 on bad arguments.";

fn main() {
    let mut args = std::env::args().skip(1);
    let mut one: Option<u64> = None;
    let mut count: Option<u64> = None;
    let mut seconds: Option<f64> = None;
    let mut start = 1u64;
    let mut json = false;
    let mut opts = RunOpts::default();
    let mut served = false;
    let mut sopts = ServedOpts::default();
    let mut steps: Option<usize> = None;
    let mut protection: Option<dev::faultsim::Protection> = None;
    let bad = |m: String| -> ! {
        eprintln!("faultsim: error: {m} (see --help)");
        std::process::exit(2)
    };
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next()
                .unwrap_or_else(|| bad(format!("{name} needs a value")))
        };
        match a.as_str() {
            "-h" | "--help" => {
                println!("{HELP}");
                return;
            }
            "--seed" => {
                let v = val("--seed");
                one = Some(parse_seed(&v).unwrap_or_else(|| bad(format!("bad seed '{v}'"))));
            }
            "--seeds" => {
                let v = val("--seeds");
                count = Some(
                    v.parse()
                        .unwrap_or_else(|_| bad(format!("bad count '{v}'"))),
                );
            }
            "--seconds" => {
                let v = val("--seconds");
                seconds = Some(
                    v.parse()
                        .unwrap_or_else(|_| bad(format!("bad seconds '{v}'"))),
                );
            }
            "--start" => {
                let v = val("--start");
                start = parse_seed(&v).unwrap_or_else(|| bad(format!("bad seed '{v}'")));
            }
            "--steps" => {
                let v = val("--steps");
                steps = Some(
                    v.parse()
                        .unwrap_or_else(|_| bad(format!("bad steps '{v}'"))),
                );
            }
            "--served" => served = true,
            "--auto-heal" => sopts.auto_heal = Some(true),
            "--clients" => {
                let v = val("--clients");
                sopts.clients = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| bad(format!("bad client count '{v}'")));
            }
            "--dir" => {
                opts.dir = val("--dir").into();
                sopts.dir = opts.dir.clone();
            }
            "--protection" => {
                let v = val("--protection");
                let p = protection.insert(Default::default());
                for name in v.split(',').filter(|p| !p.is_empty() && *p != "none") {
                    match name {
                        "journal" => p.journal = true,
                        "checksums" => p.checksums = true,
                        _ => bad(format!(
                            "unknown protection '{name}' (journal, checksums or none)"
                        )),
                    }
                }
            }
            "--json" => json = true,
            "--verbose" => {
                opts.verbose = true;
                sopts.verbose = true;
            }
            other => bad(format!("unknown argument '{other}'")),
        }
    }
    if let Some(n) = steps {
        opts.steps = n;
        sopts.steps = n;
    }
    if let Some(p) = protection {
        opts.protection = p;
        sopts.protection = Some(p);
    }
    let run_seed_caught = |seed: u64| -> Result<RunReport, String> {
        if served {
            dev::faultsim_served::run_seed_caught(seed, &sopts)
        } else {
            dev::faultsim::run_seed_caught(seed, &opts)
        }
    };
    let reproduce_command = |seed: u64| {
        if served {
            dev::faultsim_served::reproduce_command(seed)
        } else {
            dev::faultsim::reproduce_command(seed)
        }
    };
    if let Some(seed) = one {
        match run_seed_caught(seed) {
            Ok(r) => {
                if json {
                    println!("{}", serde_json::to_string_pretty(&r).unwrap());
                } else {
                    println!(
                        "seed {seed:#x}: {} {:?} ({}), {} reads, {} writes, {} bytes verified, {} crashes, detected {}, undetected {}{}{}",
                        r.layout,
                        r.kind,
                        if r.within_tolerance { "within tolerance" } else { "beyond tolerance" },
                        r.reads,
                        r.writes,
                        r.bytes_verified,
                        r.faults.crashes(),
                        r.detected,
                        r.undetected.len(),
                        if r.known_gap && !r.undetected.is_empty() { " (known gap)" } else { "" },
                        if r.merged_writes { ", merged member writes" } else { "" }
                    );
                    for l in r.losses.iter().chain(&r.undetected) {
                        println!("  {l}");
                    }
                }
                if r.failed() {
                    eprintln!(
                        "faultsim: seed {seed:#x} FAILED; reproduce: {}",
                        reproduce_command(seed)
                    );
                    std::process::exit(1);
                }
            }
            Err(p) => {
                eprintln!(
                    "faultsim: seed {seed:#x} PANICKED: {p}; reproduce: {}",
                    reproduce_command(seed)
                );
                std::process::exit(1);
            }
        }
        return;
    }
    if count.is_none() && seconds.is_none() {
        count = Some(20);
    }
    let began = Instant::now();
    let deadline = seconds.map(|s| began + Duration::from_secs_f64(s));
    let mut sum = Summary::default();
    let mut seed = start;
    loop {
        if let Some(n) = count {
            if seed - start >= n {
                break;
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        match run_seed_caught(seed) {
            Ok(r) => {
                if r.failed() {
                    eprintln!(
                        "faultsim: seed {seed:#x} FAILED: {}; reproduce: {}",
                        r.first_problem().unwrap_or(""),
                        reproduce_command(seed)
                    );
                }
                sum.add(&r);
            }
            Err(p) => {
                eprintln!(
                    "faultsim: seed {seed:#x} PANICKED: {p}; reproduce: {}",
                    reproduce_command(seed)
                );
                sum.add_panic(seed, p);
            }
        }
        seed += 1;
    }
    let el = began.elapsed().as_secs_f64();
    if json {
        println!("{}", serde_json::to_string_pretty(&sum).unwrap());
    } else {
        let f = &sum.faults;
        println!(
            "faultsim: {} seeds ({}..={}) in {el:.0} s",
            sum.seeds_run,
            start,
            seed.saturating_sub(1)
        );
        println!(
            "  runs: {} within tolerance, {} beyond",
            sum.runs_within_tolerance, sum.runs_beyond_tolerance
        );
        println!(
            "  faults: {} fail-stop, {} failed by command, {} latent-error ranges, {} bit flips, {} lost writes, {} misdirected writes, {} slow members ({} refused by the atlas)",
            f.fail_stop, f.admin_fail, f.latent_sector_errors, f.bit_flips, f.lost_writes, f.misdirected_writes, f.slow_members, f.refused_by_atlas
        );
        println!(
            "  crashes: {} ({} between operations, {} mid-operation), {} reopens; {} pages dropped, {} sectors torn",
            sum.crashes, f.crashes_between_ops, f.crashes_mid_op, sum.reopens, sum.pages_dropped_by_crashes, sum.sectors_torn_by_crashes
        );
        println!(
            "  I/O: {} reads, {} writes, {} rebuilds, {} bytes verified",
            sum.reads, sum.writes, sum.rebuilds, sum.bytes_verified
        );
        println!(
            "  losses within tolerance: {} (must be 0)",
            sum.losses_within_tolerance
        );
        println!(
            "  beyond tolerance: {} detected, {} undetected (known gap: no checksums / no journal yet), {} undetected unexpected (must be 0)",
            sum.beyond_tolerance_detected, sum.beyond_tolerance_undetected_known_gap, sum.beyond_tolerance_undetected_unexpected
        );
        for (s, why) in &sum.failed_seeds {
            println!("  FAILED seed {s}: {why}");
        }
    }
    if !sum.failed_seeds.is_empty() {
        std::process::exit(1);
    }
}

//! raidforge: the command line. Parsing, printing and JSON live here (the data commands' in
//! this package's library, `lib.rs`, which the Python bindings share); every decision is made
//! by the library crates (layout, codec, raidcore, sim, dev).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use raidforge::{advise_cmd, layout_cmd, model_cmd, reproduce_cmd, sim_cmd, trace_cmd};

mod bench_cmd;
mod control;
mod demo;
mod metrics;
mod pool_cmd;
mod sd_notify;
mod serve_cmd;
mod serve_config;
mod serve_tls;

/// raidforge: a software RAID engine and disk-array simulator sharing one core.
///
/// Start with `raidforge demo` (pools of emulated disks, a failure, rebuilds side by side), or
/// `raidforge layout show --scheme raid5 --disks 5` to see where data and parity live.
#[derive(Parser, Debug)]
#[command(name = "raidforge", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show, check and compare data/parity placement schemes.
    #[command(subcommand)]
    Layout(layout_cmd::LayoutCommand),
    /// Measure speed (parity math).
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
    /// Create a pool over member files or block devices (writes superblocks and POOL, a small
    /// descriptor file every later command takes).
    ///
    /// Example: raidforge create p.json --scheme raid5 --disks 5 --member m0.img --member m1.img
    /// ... --member-size 256M
    Create(pool_cmd::CreateArgs),
    /// Recreate POOL from member paths alone, reading their superblocks (like mdadm --assemble).
    Assemble {
        /// Descriptor file to (re)write.
        pool: std::path::PathBuf,
        /// Member paths, in any order: a raidforge pool's, or a Linux MD array's (v1.0, v1.1 or
        /// v1.2 superblocks, as mdadm makes them), which is then adopted: raidforge runs it
        /// in MD's format, and `mdadm --assemble` can take it back. Stale members (a lower
        /// event count) are left out as mdadm does; MD features raidforge does not implement
        /// (a reshape in progress, a journal device, PPL, clustering, bad block log entries,
        /// an internal bitmap) are refused and nothing is written.
        #[arg(long = "member", required = true, num_args = 1..)]
        members: Vec<std::path::PathBuf>,
        /// Emulated member speed to record for the members, KIND:BANDWIDTH:LATENCY as `create
        /// --emulate` takes it, e.g. hdd:150MB/s:8ms (MB/s: 10^6 bytes/s; M/s or MiB/s: 2^20).
        #[arg(long)]
        emulate: Option<String>,
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
        /// Start a pool that was not shut down cleanly although members its unclean regions
        /// need are missing (refused otherwise, as MD refuses a dirty degraded array): what
        /// can be is resynchronised, the stripes that lack a member are left as they are.
        #[arg(long)]
        force: bool,
    },
    /// Health, layout, rebuild progress and per-member I/O of a pool.
    Status(pool_cmd::PoolArg),
    /// Read or write pool bytes through files.
    #[command(subcommand)]
    Io(pool_cmd::IoCommand),
    /// Mark a member failed, as if it had died (the pool keeps serving, degraded). Refused
    /// when the pool would lose data (it survives no failure of that member now: see
    /// `raidforge status`), unless --force.
    Fail {
        pool: std::path::PathBuf,
        /// Member index, as `raidforge status` shows it: 1 or m1.
        #[arg(long, value_parser = pool_cmd::parse_member)]
        member: usize,
        /// Fail the member even though the pool then loses data.
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// Put a new, empty member in the place of a failed one (then run `raidforge rebuild`).
    Replace {
        pool: std::path::PathBuf,
        /// Index of the failed member, as `raidforge status` shows it: 1 or m1.
        #[arg(long, value_parser = pool_cmd::parse_member)]
        member: usize,
        /// Path of the new member (a file is created at the pool's member size).
        #[arg(long)]
        with: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Let a failed member whose file came back unchanged rejoin without a rebuild (like
    /// `mdadm --re-add`): a member file that was missing when a command opened the pool, put
    /// back as it was. Its superblock must be this pool's from just before it failed, nothing
    /// may have been rebuilt since, and every stripe is read with it back and must agree
    /// (a write the pool took meanwhile shows as a stripe that disagrees); only then is it
    /// recorded present. Otherwise refused, the member's file not written: then `raidforge
    /// replace` and `raidforge rebuild`. Not yet for pools with checksums, a write journal or
    /// Linux MD's format.
    ///
    /// Example: raidforge re-add p.json --member m1
    #[command(name = "re-add")]
    ReAdd {
        pool: std::path::PathBuf,
        /// Index of the failed member, as `raidforge status` shows it: 1 or m1 (its file is the
        /// path status shows).
        #[arg(long, value_parser = pool_cmd::parse_member)]
        member: usize,
        #[arg(long)]
        json: bool,
    },
    /// Add a hot spare: a blank file, device or NBD export that a served pool puts in the
    /// place of a failed member by itself (then rebuilds onto it, no command typed).
    ///
    /// Example: raidforge add p.json --spare /dev/sdf
    Add {
        pool: std::path::PathBuf,
        /// The spare (at least as large as a member; a file is not created, make it first).
        #[arg(long, required = true)]
        spare: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Erase member files or devices no longer wanted, so that `create` and `replace` take
    /// them as blank (like mdadm --zero-superblock): a file is emptied; on a device the
    /// raidforge metadata before the data area and the last MiB are zeroed. Refused for a path
    /// that holds no raidforge superblock and for a member a running raidforge process holds.
    Wipe {
        /// Member files or block devices.
        #[arg(required = true)]
        members: Vec<std::path::PathBuf>,
    },
    /// Rebuild lost data into spares or spare space, or copy it back to a replacement.
    Rebuild(pool_cmd::RebuildArgs),
    /// Read every stripe and check its parity or mirrors; exits 1 if any disagree.
    Verify(pool_cmd::PoolArg),
    /// Read everything, verify block checksums (pools created with --checksums on) and
    /// parity, repair what redundancy allows, and report it. Exits 0 when the pool is clean
    /// or everything was repaired, 1 when data is unrecoverable or a parity mismatch was only
    /// reported, 2 on a usage error.
    Scrub(pool_cmd::ScrubArgs),
    /// Recompute now every parity that lazy writes deferred (`create --parity lazy`), so that
    /// the pool survives two failures again. A served pool does this by itself when idle.
    Flush(pool_cmd::PoolArg),
    /// Serve pools as NBD exports (TCP and/or Unix socket), with a control socket POOL.ctl
    /// through which status, fail, replace, rebuild and verify reach the running server.
    /// With --metrics ADDR, Prometheus scrapes the pools' health and traffic at
    /// http://ADDR/metrics. With --tls require and a certificate (or a PSK file), clients must
    /// use TLS (nbds:// URIs, qemu's tls-creds objects). As a service: `serve --config FILE`
    /// (TOML) under systemd (contrib/systemd/raidforge@.service; READY=1 is sent once every
    /// export listens).
    ///
    /// Example: raidforge serve p.json --socket /tmp/p.sock (then: nbdinfo
    /// 'nbd+unix:///p?socket=/tmp/p.sock'; raidforge fail p.json --member 1)
    ///
    /// Example: raidforge serve p.json --listen 0.0.0.0:10809 --tls require --tls-psk keys.psk
    /// (keys.psk from `psktool -u alice -p keys.psk`; then: nbdinfo
    /// 'nbds://alice@HOST/p?tls-psk-file=keys.psk')
    Serve(serve_cmd::ServeArgs),
    /// Build RAID5, RAID+ and S2-RAID pools of emulated disks, fail a member of each, rebuild,
    /// verify every byte, and print rebuild times side by side. About a minute; no arguments.
    Demo(demo::DemoArgs),
    /// Simulate an array of modelled drives: replay a trace or a synthetic workload, fail a
    /// member, rebuild; prints response times per phase, rebuild time and per-disk load.
    ///
    /// Example: raidforge sim --scheme raid5 --disks 8 --disk st32000645ns --member-size 10G
    /// --chunk 1M --workload none --fail 0 --json
    Sim(Box<sim_cmd::SimArgs>),
    /// Which layout for this workload and these disks? Simulates every candidate layout that
    /// survives the failures asked for (RAID5/6, RAID-50 and RAID-60 at several group widths, RAID+,
    /// random and hash declustering with spare space, S2-RAID, RAID10, RM2 with and without
    /// lazy parity) on the workload with a failure and a rebuild, and compares usable share,
    /// MTTDL, rebuild time, response times per phase and throughput; marks the Pareto front
    /// and recommends one, saying why.
    ///
    /// Example: raidforge advise --workload data/traces/websearch-head.mqsim --disks 16
    /// --html advise.html
    Advise(Box<advise_cmd::AdviseArgs>),
    /// Regenerate the seed papers' published results (S2-RAID, RAID+, lazy parity, IDO, and
    /// the thesis's RAID4S, RAIDE, RAIDH) on simulated copies of their hardware; writes
    /// OUT/NAME.md, OUT/NAME.json and SVG plots, published values beside ours, and (for `all`
    /// and `coverage`) OUT/COVERAGE.md, the status of every table and figure of the seeds.
    /// Exits 1 if a qualitative claim fails without a reason given in the report.
    ///
    /// Example: raidforge reproduce all --quick --out reproduce
    Reproduce(reproduce_cmd::ReproduceArgs),
    /// Analytic models: `model mttdl` gives the mean time to data loss of RAID5, RAID6, RAID6
    /// with lazy parity update, RAID-50 and RAID+ against the number of disks.
    ///
    /// Example: raidforge model mttdl --mttf-hours 30000 --mttr-hours 24 --disks 4..16
    #[command(subcommand)]
    Model(model_cmd::ModelCommand),
    /// Read traces as the simulator replays them: `trace read FILE` prints their requests.
    ///
    /// Example: raidforge trace read websearch-head.mqsim --requests 10 --json
    #[command(subcommand)]
    Trace(trace_cmd::TraceCommand),
}

/// Output piped into `head` and the like should end the program quietly, as it does for other
/// command-line tools, instead of panicking on the broken pipe.
fn restore_default_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A negative number given as a value (`--member -1`, `--offset -5`) reaches the option's
/// parser, which says the value is invalid, instead of clap's tip to write `-- -1`.
fn allow_negative(cmd: clap::Command) -> clap::Command {
    cmd.allow_negative_numbers(true)
        .mut_subcommands(allow_negative)
}

/// The parsed command line, and clap's matches (which tell an option typed from a default).
fn parse_args() -> (Cli, clap::ArgMatches) {
    use clap::{CommandFactory, FromArgMatches};
    let matches = allow_negative(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    (cli, matches)
}

fn main() -> ExitCode {
    restore_default_sigpipe();
    let (cli, matches) = parse_args();
    let result = match cli.command {
        Command::Layout(c) => layout_cmd::run(c),
        Command::Bench(c) => bench_cmd::run(c),
        Command::Create(a) => pool_cmd::create(a),
        Command::Assemble {
            pool,
            members,
            emulate,
            json,
            force,
        } => pool_cmd::assemble(pool, members, emulate, json, force),
        Command::Status(a) => pool_cmd::status(a),
        Command::Io(c) => pool_cmd::io(c),
        Command::Fail {
            pool,
            member,
            force,
            json,
        } => pool_cmd::fail(pool, member, force, json),
        Command::Replace {
            pool,
            member,
            with,
            json,
        } => pool_cmd::replace(pool, member, with, json),
        Command::ReAdd { pool, member, json } => pool_cmd::re_add(pool, member, json),
        Command::Add { pool, spare, json } => pool_cmd::add_spare(pool, spare, json),
        Command::Wipe { members } => pool_cmd::wipe(members),
        Command::Rebuild(a) => pool_cmd::rebuild(a),
        Command::Serve(a) => {
            serve_config::resolve(a, matches.subcommand_matches("serve")).and_then(serve_cmd::run)
        }
        Command::Verify(a) => match pool_cmd::verify(a) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Command::Flush(a) => pool_cmd::flush(a),
        Command::Scrub(a) => match pool_cmd::scrub(a) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Command::Demo(a) => demo::run(a),
        Command::Sim(a) => sim_cmd::run(*a),
        Command::Advise(a) => advise_cmd::run(*a),
        Command::Model(c) => model_cmd::run(c),
        Command::Trace(c) => trace_cmd::run(c),
        Command::Reproduce(a) => match reproduce_cmd::run(a) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raidforge: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

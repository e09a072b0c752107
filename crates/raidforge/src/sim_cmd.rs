//! `raidforge sim`: the engine's planner on simulated disks. Parsing and printing only; the run
//! is `sim::simulate`.

use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use raidcore::ido::RebuildPolicy;
use raidcore::{RebuildOrder, SpeedLimits, WritePolicy};
use serde_json::{json, Value};
use sim::{
    simulate, Failure, IdoSimConfig, Phase, Report, Scheduler, SimConfig, SourceOptions,
    WorkloadSpec,
};

use crate::layout_cmd::LayoutArgs;

/// Arguments of `raidforge sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    layout: LayoutArgs,
    /// Member drive model: st3500320as (S2-RAID), st32000645ns (RAID+), wd1600aajs (IDO),
    /// wd6401aals and x25-e (RAID4S/RAIDH thesis); or the engine's emulated member as
    /// `raidforge create --emulate` takes it, KIND:BANDWIDTH:LATENCY (e.g. hdd:150MB/s:4ms:
    /// every I/O 4 ms plus its bytes at 150 MB/s, one at a time; needs --member-size), so the
    /// simulator runs the device the engine emulates.
    #[arg(long, default_value = "st32000645ns")]
    disk: String,
    /// A member of another drive model, MEMBER=MODEL (repeatable), e.g. --disk-at 4=x25-e puts
    /// an SSD in slot 4 among HDDs (RAID4S: the parity member).
    #[arg(long, value_name = "MEMBER=MODEL")]
    disk_at: Vec<String>,
    /// A latent sector error (an unreadable range) on a member, MEMBER:OFFSET:LEN, bytes of the
    /// member's data area with size suffixes (repeatable), e.g. --lse 2:1M:64K. A read that
    /// meets it spends its time, fails for that range, and the array recomputes the range from
    /// the rest of its stripe and rewrites it in place; without enough redundancy left (RAID5
    /// with a failed member) the logical range is reported lost and reads of it fail.
    #[arg(long, value_name = "MEMBER:OFFSET:LEN")]
    lse: Vec<String>,
    /// Latent sector errors drawn from --seed: COUNT:LEN, COUNT ranges of LEN bytes at random
    /// offsets of every member (e.g. 4:64K).
    #[arg(long, value_name = "COUNT:LEN")]
    lse_random: Option<String>,
    /// Bytes of each member the array uses, from the start of the drive (e.g. 10G; M, MiB:
    /// 2^20 bytes, MB: 10^6; default: the whole drive). `raidforge create` and `demo` take
    /// the same option.
    #[arg(long)]
    member_size: Option<String>,
    /// Chunk (stripe unit) size. Default 512K, mdadm's default: the simulator models whole
    /// drives as mdadm builds arrays on them. (`raidforge create` defaults to 64K for pools of
    /// files of any size, 512K with --metadata md; pass --chunk to compare like with like.)
    #[arg(long, default_value = "512K")]
    chunk: String,
    /// What to replay: none (offline rebuild), a trace file, or a synthetic spec such as
    /// random:read=0.7:size=4K:iops=200, seq:size=1M:qd=4:requests=1000, financial1,
    /// financial2 (keys: read, size, iops, qd, seq, requests, volumes, span, align, zipf: e.g.
    /// zipf=1.2 draws offsets as fio's random_distribution=zipf:1.2).
    #[arg(long)]
    workload: String,
    /// Trace format: spc, msr, mqsim, tencent, systor, blkparse-q, blkparse-d, fio, alibaba,
    /// or csv:SPEC with the columns given (see `raidforge trace read --help`). Detected from
    /// the first lines when absent; gzip, zstd, xz and bzip2 files are read as they are.
    #[arg(long)]
    format: Option<String>,
    /// Skip malformed trace lines and count them instead of stopping at the first.
    #[arg(long)]
    lenient: bool,
    #[command(flatten)]
    merge: crate::trace_cmd::MergeArgs,
    /// Replay the trace this many times faster.
    #[arg(long, default_value_t = 1.0)]
    speedup: f64,
    /// Replay the trace this many times back to back.
    #[arg(long, default_value_t = 1)]
    loops: u64,
    /// Stop after this many requests.
    #[arg(long)]
    requests: Option<u64>,
    /// Admit no request arriving after this many simulated seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Member that fails.
    #[arg(long)]
    fail: Option<u32>,
    /// When it fails, simulated seconds (default 0).
    #[arg(long, default_value_t = 0.0)]
    fail_at: f64,
    /// Seconds from the failure to the start of the rebuild, or "never" (stay degraded).
    #[arg(long, default_value = "0")]
    rebuild_delay: String,
    /// How the rebuild schedules cycles: sequential (one cycle at a time, in order: MD's
    /// progressive rebuild, read phase and write phase of a cycle never overlap) or parallel
    /// (up to --rebuild-window cycles in flight, handed out in order). The same option as
    /// `raidforge rebuild --rebuild-order`.
    #[arg(long, default_value = "parallel")]
    rebuild_order: String,
    /// An on-line rebuild policy of seed 003 (up to --rebuild-window cycles in flight), as
    /// `raidforge rebuild --rebuild-policy` takes: pr (MD's, sequential order, every request
    /// on the degraded array), pro (popular zones first, popularity seen during the rebuild),
    /// workout (writes and reads seen popular during the rebuild go to the surrogate set),
    /// vdf (a read cache on the surrogate that evicts surviving-disk blocks first), ido
    /// (zones hot before the failure rebuilt first and migrated to the surrogate; their reads
    /// and all writes go there; written back after the rebuild). Default: none, the plain
    /// rebuild of --rebuild-order. (`sequential`/`parallel` are still accepted here as the
    /// old spelling of --rebuild-order.)
    #[arg(long)]
    rebuild_policy: Option<String>,
    /// Zone size of pro and ido (a multiple of the stripe's data size; default 12M rounded up
    /// to one).
    #[arg(long)]
    zone_size: Option<String>,
    /// Surrogate set of workout, vdf and ido: raid1:N[:MODEL] (N mirrors of the member drive
    /// model, or of MODEL), e.g. raid1:2 (the default) or raid1:2:x25-e.
    #[arg(long, default_value = "raid1:2")]
    surrogate: String,
    /// Network round trip added to every surrogate operation, milliseconds (0: a local
    /// surrogate; 0.2 is a gigabit LAN).
    #[arg(long, default_value_t = 0.0)]
    surrogate_latency: f64,
    /// Network bandwidth to a remote surrogate, bytes per second (e.g. 117M or 117MiB/s for
    /// gigabit Ethernet, 2^20 bytes per M; 125MB/s, 10^6 per MB; 0: no transfer time).
    #[arg(long, default_value = "0")]
    surrogate_link: String,
    /// Fail --fail at this fraction of the workload's span (0..1) instead of at --fail-at: the
    /// first part runs in normal state (ido learns the hot zones there), then the failure.
    #[arg(long)]
    warmup_fraction: Option<f64>,
    /// Foreground I/O on the array within this many seconds makes the rebuild back off to
    /// --speed-min (MD checks whether members saw user I/O since its last check; a short
    /// window such as 0.02 is closer to that than the default).
    #[arg(long, default_value_t = 0.5)]
    idle_window: f64,
    /// How often, in seconds, a rebuild held back to --speed-min looks at the load again (and
    /// goes to full rate once the clients are quiet): the engine's served rebuild looks every
    /// 0.05 s, the default; MD's resync sleeps 0.5 s.
    #[arg(long, default_value_t = raidcore::rebuild::THROTTLE_RECHECK_NS as f64 / 1e9)]
    recheck: f64,
    /// Cycles in flight under --rebuild-order parallel or a --rebuild-policy; the default is
    /// the window the reproductions of MD-era arrays use (`raidforge rebuild` defaults to 8).
    #[arg(long, default_value_t = 4)]
    rebuild_window: usize,
    /// Windows of --rebuild-window cycles the rebuild keeps in flight, as the engine's
    /// `raidforge rebuild --windows-in-flight` (whose default is 4 to 16 by the member count): all of them while no
    /// client is busy, two while clients are. 1, the default, keeps --rebuild-window cycles
    /// in flight whatever the load.
    #[arg(long, default_value_t = 1)]
    windows_in_flight: usize,
    /// With --windows-in-flight above 1, the bytes of buffers (read and written) of one
    /// window, as the engine's `raidforge rebuild --memory-window` (default 16M): a window
    /// holds --rebuild-window cycles or as much of them as fits.
    #[arg(long, default_value = "16M")]
    memory_window: String,
    /// Rebuild rate guaranteed under foreground load, bytes per second: MD's
    /// speed_limit_min, whose default is 1000 KiB/s (1.024 MB/s). 10M or 10MiB/s: 2^20
    /// bytes/s; 10MB/s: 10^6.
    #[arg(long, default_value = "1000KiB/s")]
    speed_min: String,
    /// Rebuild rate cap when idle, bytes per second, 0 = unlimited: MD's speed_limit_max,
    /// whose default is 200000 KiB/s (204.8 MB/s); raise it for declustered layouts, whose
    /// rebuild can go faster. 500M or 500MiB/s: 2^20 bytes/s; 500MB/s: 10^6. The summary
    /// prints rebuild speeds in MB/s (10^6 bytes/s).
    #[arg(long, default_value = "200000KiB/s")]
    speed_max: String,
    /// Per-disk queue scheduler: fifo, or sptf (shortest positioning time first over the
    /// first 32 queued I/Os, oldest first after 500 ms).
    #[arg(long, default_value = "fifo")]
    scheduler: String,
    /// Spread reads of mirrored chunks (RAID1, RAID10, S2-RAID10) over their copies, as
    /// Linux MD's read_balance does: a sequential reader stays on its copy, others go to the
    /// copy with the shortest queue, then the nearest head. Off by default: every read then
    /// goes to the first copy, as the committed reproductions were run.
    #[arg(long)]
    read_balance: bool,
    /// RMW/RCW policy: md, modthresh or rmw.
    #[arg(long, default_value = "md")]
    write_policy: String,
    /// Most foreground requests in flight (later arrivals wait).
    #[arg(long, default_value_t = 65536)]
    max_in_flight: usize,
    /// Parity policy of two-parity layouts: eager (both parities on every write) or lazy
    /// (one parity deferred to a list processed when the array is idle; see `raidforge
    /// create --help`).
    #[arg(long, default_value = "eager", value_parser = crate::pool_args::parse_parity)]
    parity: raidcore::ParityPolicy,
    /// Bound of the deferred-parity list under --parity lazy.
    #[arg(long, default_value_t = raidcore::lazy::BPGL_DEFAULT_CAPACITY)]
    bpgl_capacity: usize,
    /// Where --parity lazy keeps its list: `engine` (recorded on the members as raidforge
    /// records it: a write that lists stripes waits for a record of the list on tolerance + 1
    /// members, one record for every write listed before it) or `controller` (in non-volatile
    /// memory, as the LPU paper's RAID controller keeps it: no member I/O).
    #[arg(long, default_value = "engine", value_parser = parse_lazy_model)]
    lazy_model: sim::LazyModel,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also draw the run as one SVG file with two panels: top, the mean and 99th percentile
    /// response time over simulated time (by arrival, in at most 256 buckets that widen as
    /// the run grows) with the failure, the rebuild start and the rebuild end marked; bottom,
    /// member I/Os per disk (foreground and rebuild bars).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
}

fn seconds_ns(s: f64, what: &str) -> anyhow::Result<u64> {
    if !(s.is_finite() && s >= 0.0) {
        bail!("{what} must be a non-negative number of seconds, not {s}");
    }
    Ok((s * 1e9).round() as u64)
}

fn speed(s: &str, what: &str) -> anyhow::Result<u64> {
    raidcore::units::parse_speed(s).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// `--rebuild-order` and `--rebuild-policy`, taking `--rebuild-policy sequential|parallel` as
/// the old spelling of the order.
fn rebuild_order_and_policy(a: &SimArgs) -> anyhow::Result<(String, Option<RebuildPolicy>)> {
    match a.rebuild_policy.as_deref() {
        None => Ok((a.rebuild_order.clone(), None)),
        Some(old @ ("sequential" | "parallel")) => Ok((old.to_string(), None)),
        Some(p) => p
            .parse::<RebuildPolicy>()
            .map(|p| (a.rebuild_order.clone(), Some(p)))
            .map_err(|_| {
                anyhow::anyhow!(
                "unknown --rebuild-policy {p:?}; known: pr, pro, workout, vdf, ido (the schedule \
                 is --rebuild-order sequential|parallel)"
            )
            }),
    }
}

fn bytes(s: &str, what: &str) -> anyhow::Result<u64> {
    raidcore::units::parse_size(s).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

pub fn run(a: SimArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let (report, v) = execute(&a)?;
    let wall_s = started.elapsed().as_secs_f64();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_summary(&report, &a.workload, wall_s);
        if report.rebuild.is_some() {
            // The limits as given and as taken, in the units the summary uses.
            for (flag, given) in [("--speed-min", &a.speed_min), ("--speed-max", &a.speed_max)] {
                let v = speed(given, flag)?;
                println!(
                    "rebuild {flag} {}",
                    if v == 0 && flag == "--speed-max" {
                        format!("{given} (unlimited)")
                    } else {
                        raidcore::units::describe_speed(given, v)
                    }
                );
            }
        }
    }
    Ok(())
}

/// Runs the simulation `a` describes, writes its --plot if asked, and returns the report with
/// what `raidforge sim --json` prints (deterministic for a seed: no wall-clock figures).
pub fn execute(a: &SimArgs) -> anyhow::Result<(Report, Value)> {
    let (kind, params) = a.layout.params()?;
    let seed = params.seed;
    let scheme = layout::build(kind, &params)?;
    let params_drive =
        sim::disk::DriveParams::by_name(&a.disk).map_err(|e| anyhow::anyhow!("--disk: {e}"))?;
    let member_bytes = match &a.member_size {
        Some(s) => bytes(s, "--member-size")?,
        None if !params_drive.has_capacity() => bail!(
            "--disk {}: an emulated member has no size of its own; give --member-size (e.g. 1G)",
            a.disk
        ),
        None => params_drive.capacity_bytes(),
    };
    let chunk_bytes = bytes(&a.chunk, "--chunk")?;
    let format = crate::trace_cmd::parse_format(a.format.as_deref())?;
    let workload = WorkloadSpec::parse(&a.workload, seed, format)?;
    if let WorkloadSpec::Trace { path, .. } = &workload {
        if !path.exists() {
            bail!(
                "--workload {:?} is neither a synthetic spec (none, random:..., seq:..., financial1, financial2) nor an existing trace file",
                a.workload
            );
        }
        if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
            bail!(
                "trace {} is an empty file: there are no requests to replay",
                path.display()
            );
        }
    }
    let mut cfg = SimConfig::new(params_drive);
    cfg.seed = seed;
    for spec in &a.disk_at {
        let (m, name) = spec
            .split_once('=')
            .with_context(|| format!("--disk-at {spec:?}: expected MEMBER=MODEL, e.g. 4=x25-e"))?;
        let member: u32 = m
            .trim()
            .parse()
            .with_context(|| format!("--disk-at {spec:?}: {m:?} is not a member number"))?;
        let d = sim::disk::DriveParams::by_name(name.trim())
            .map_err(|e| anyhow::anyhow!("--disk-at {spec:?}: {e}"))?;
        cfg.drive_overrides.push((member, d));
    }
    for spec in &a.lse {
        let parts: Vec<&str> = spec.split(':').collect();
        let [m, off, len] = parts[..] else {
            bail!("--lse {spec:?}: expected MEMBER:OFFSET:LEN, e.g. 2:1M:64K");
        };
        let member: layout::Disk = m
            .trim()
            .parse()
            .with_context(|| format!("--lse {spec:?}: {m:?} is not a member number"))?;
        let offset = sim::parse_bytes(off.trim())
            .with_context(|| format!("--lse {spec:?}: {off:?} is not a byte offset (e.g. 1M)"))?;
        let len = sim::parse_bytes(len.trim())
            .with_context(|| format!("--lse {spec:?}: {len:?} is not a length (e.g. 64K)"))?;
        cfg.lse.push(sim::LseRange {
            member,
            offset,
            len,
        });
    }
    if let Some(spec) = &a.lse_random {
        let Some((n, len)) = spec.split_once(':') else {
            bail!("--lse-random {spec:?}: expected COUNT:LEN, e.g. 4:64K");
        };
        let per_member = n
            .trim()
            .parse()
            .with_context(|| format!("--lse-random {spec:?}: {n:?} is not a count"))?;
        let len = sim::parse_bytes(len.trim()).with_context(|| {
            format!("--lse-random {spec:?}: {len:?} is not a length (e.g. 64K)")
        })?;
        if len == 0 {
            bail!("--lse-random {spec:?}: the length must be > 0");
        }
        cfg.lse_random = Some(sim::LseRandom { per_member, len });
    }
    cfg.failure = match a.fail {
        Some(member) => Some(Failure {
            member,
            at_ns: seconds_ns(a.fail_at, "--fail-at")?,
        }),
        None => None,
    };
    cfg.rebuild_delay_ns = match a.rebuild_delay.as_str() {
        "never" => None,
        s => Some(seconds_ns(
            s.parse()
                .with_context(|| format!("--rebuild-delay {s:?}: seconds or \"never\""))?,
            "--rebuild-delay",
        )?),
    };
    cfg.foreground_idle_ns = seconds_ns(a.idle_window, "--idle-window")?;
    cfg.throttle_recheck_ns = seconds_ns(a.recheck, "--recheck")?;
    if cfg.throttle_recheck_ns < 1_000_000 {
        bail!(
            "--recheck must be at least 0.001 s (the engine's is 0.05), not {}",
            a.recheck
        );
    }
    let (order, policy) = rebuild_order_and_policy(a)?;
    let ido_policy = policy;
    if let Some(p) = ido_policy {
        let mut i = IdoSimConfig::new(p);
        i.zone_bytes = match &a.zone_size {
            Some(z) => Some(bytes(z, "--zone-size")?),
            None => None,
        };
        let parts: Vec<&str> = a.surrogate.split(':').collect();
        match parts.as_slice() {
            ["raid1", n, rest @ ..] => {
                i.mirrors = n.parse().ok().filter(|&m: &usize| m > 0).with_context(|| {
                    format!(
                        "--surrogate {:?}: {n:?} is not a positive number of mirrors",
                        a.surrogate
                    )
                })?;
                if !rest.is_empty() {
                    // The model may hold colons itself (an emulated member: hdd:150MB/s:4ms).
                    let m = rest.join(":");
                    let d = sim::disk::DriveParams::by_name(&m)
                        .map_err(|e| anyhow::anyhow!("--surrogate {:?}: {e}", a.surrogate))?;
                    i.drive = Some(d);
                }
            }
            _ => bail!(
                "--surrogate {:?}: expected raid1:N or raid1:N:MODEL, e.g. raid1:2",
                a.surrogate
            ),
        }
        if !(a.surrogate_latency.is_finite() && a.surrogate_latency >= 0.0) {
            bail!("--surrogate-latency must be a non-negative number of milliseconds");
        }
        i.latency_ns = (a.surrogate_latency * 1e6).round() as u64;
        i.link_bytes_per_sec = speed(&a.surrogate_link, "--surrogate-link")?;
        cfg.ido = Some(i);
    } else if a.zone_size.is_some() || a.surrogate_latency > 0.0 {
        bail!("--zone-size and --surrogate-latency need --rebuild-policy pr, pro, workout, vdf or ido");
    }
    cfg.rebuild_order = match (order.as_str(), ido_policy) {
        ("sequential", Some(_)) => bail!(
            "--rebuild-policy {} runs up to --rebuild-window cycles at once; it cannot be \
             combined with --rebuild-order sequential (use --rebuild-window 1)",
            a.rebuild_policy.as_deref().unwrap_or_default()
        ),
        ("sequential", None) => RebuildOrder::Sequential,
        ("parallel", _) => {
            if a.rebuild_window == 0 {
                bail!("--rebuild-window must be at least 1");
            }
            if a.windows_in_flight == 0 {
                bail!("--windows-in-flight must be at least 1");
            }
            cfg.rebuild_windows = a.windows_in_flight;
            cfg.rebuild_window_bytes = bytes(&a.memory_window, "--memory-window")?;
            RebuildOrder::Parallel {
                max_in_flight: a.rebuild_window,
            }
        }
        (o, _) => bail!("unknown --rebuild-order {o:?}; choose sequential or parallel"),
    };
    cfg.speed = SpeedLimits {
        min_bytes_per_sec: speed(&a.speed_min, "--speed-min")?,
        max_bytes_per_sec: speed(&a.speed_max, "--speed-max")?,
    };
    cfg.read_balance = a.read_balance;
    cfg.scheduler = match a.scheduler.as_str() {
        "fifo" => Scheduler::Fifo,
        "sptf" | "elevator" => Scheduler::ELEVATOR,
        s => bail!("unknown --scheduler {s:?}; known: fifo, sptf"),
    };
    cfg.write_policy = match a.write_policy.as_str() {
        "md" => WritePolicy::Md,
        "modthresh" => WritePolicy::Modthresh,
        "rmw" => WritePolicy::Rmw,
        p => bail!("unknown --write-policy {p:?}; known: md, modthresh, rmw"),
    };
    cfg.max_requests_in_flight = a.max_in_flight;
    cfg.parity = a.parity;
    cfg.bpgl_capacity = a.bpgl_capacity;
    cfg.lazy_model = a.lazy_model;
    cfg.stop_ns = match a.duration {
        Some(d) => Some(seconds_ns(d, "--duration")?),
        None => None,
    };
    let opts = SourceOptions {
        speedup: a.speedup,
        lenient: a.lenient,
        limit: a.requests,
        loops: a.loops,
        merge: a.merge.choice()?,
        volumes: a.merge.volumes(),
    };
    if let Some(f) = a.warmup_fraction {
        if !(0.0..=1.0).contains(&f) {
            bail!("--warmup-fraction must be between 0 and 1, not {f}");
        }
        let Some(fail) = cfg.failure.as_mut() else {
            bail!("--warmup-fraction needs --fail MEMBER");
        };
        let geo = raidcore::Geometry::new(scheme.clone(), chunk_bytes, member_bytes)?;
        let span = sim::run::workload_span_ns(&workload, geo.capacity_bytes(), &opts, cfg.stop_ns)?;
        fail.at_ns = (span as f64 * f).round() as u64;
    }
    let report = simulate(scheme, chunk_bytes, member_bytes, cfg, &workload, &opts)?;
    if let WorkloadSpec::Trace { path, .. } = &workload {
        if report.requests + report.requests_failed == 0 && a.requests != Some(0) {
            bail!(
                "trace {} holds no request{} ({} skipped): check that it is a trace of that \
                 format",
                path.display(),
                a.format
                    .as_deref()
                    .map(|f| format!(" as --format {f} reads it"))
                    .unwrap_or_default(),
                report.requests_skipped
            );
        }
    }
    if let Some(path) = &a.plot {
        let workload = std::path::Path::new(&a.workload)
            .file_name()
            .map_or(a.workload.clone(), |f| f.to_string_lossy().into_owned());
        let title = format!("{} x{}, {workload}", kind.name(), report.disks);
        std::fs::write(path, report.plot_svg(&title))
            .with_context(|| format!("--plot: cannot write {}", path.display()))?;
    }
    let mut v = report_json(&report);
    if let Some(l) = &report.lse {
        v["lse"] = lse_json(l);
    }
    v["workload"] = json!(a.workload);
    v["seed"] = json!(seed);
    Ok((report, v))
}

fn phase_json(r: &Report, p: Phase) -> Value {
    let s = r.phase(p);
    json!({
        "count": s.count, "mean": s.mean_ms, "p50": s.p50_ms, "p99": s.p99_ms,
        "p999": s.p999_ms, "max": s.max_ms,
    })
}

/// The JSON of what a run's latent sector errors did.
pub fn lse_json(l: &sim::LseReport) -> Value {
    json!({
        "injected": l.injected,
        "hit": l.hit,
        "repaired": l.repaired,
        "failed_reads": l.failed_reads,
        "lost": l.lost.iter().map(|&(o, n)| json!({"logical_offset": o, "length": n})).collect::<Vec<_>>(),
    })
}

/// The JSON of a run's rebuild-policy bookkeeping.
pub fn ido_json(i: &sim::IdoReport) -> Value {
    json!({
        "policy": i.policy.name(),
        "zone_bytes": i.zone_bytes,
        "zones": i.zones,
        "hot_zones": i.hot_zones,
        "zones_migrated": i.stats.zones_migrated,
        "reads": i.stats.reads,
        "writes": i.stats.writes,
        "reads_redirected": i.stats.reads_redirected,
        "reads_split": i.stats.reads_split,
        "writes_redirected": i.stats.writes_redirected,
        "writes_fallback": i.stats.writes_fallback,
        "redirected_share": i.redirected_share,
        "copy_bytes": i.stats.copy_bytes,
        "reclaimed_bytes": i.stats.reclaimed_bytes,
        "surrogate_used_bytes": i.surrogate_used_bytes,
        "surrogate_ios": i.surrogate_ios.iter().map(|&(r, w)| json!({"reads": r, "writes": w})).collect::<Vec<_>>(),
        "dmap_max_extents": i.dmap_max_extents,
        "reclaim_end_s": i.reclaim_end_s,
    })
}

/// The JSON of a report (deterministic: no wall-clock figures).
pub fn report_json(r: &Report) -> Value {
    let mut response = serde_json::Map::new();
    for p in Phase::ALL {
        response.insert(p.name().to_string(), phase_json(r, p));
    }
    json!({
        "scheme": r.scheme,
        "disks": r.disks,
        "drive": r.drive,
        "chunk_bytes": r.chunk_bytes,
        "member_bytes": r.member_bytes,
        "capacity_bytes": r.capacity_bytes,
        "sim_time_s": r.sim_time_s,
        "requests": r.requests,
        "requests_failed": r.requests_failed,
        "requests_skipped": r.requests_skipped,
        "requests_merged": r.requests_merged,
        "requests_split": r.requests_split,
        "rebuild_time_s": r.rebuild_time_s(),
        "rebuild": r.rebuild.as_ref().map(|b| json!({
            "failed": b.failed,
            "fail_at_s": b.fail_at_s,
            "start_s": b.start_s,
            "end_s": b.end_s,
            "time_s": b.time_s,
            // Member bytes per second of rebuild: compare layouts with this, not time_s, since
            // each uses only whole cycles of the member (RAID+ with 2 MiB chunks uses 3.46 GB
            // of a 4 GiB member, RAID-50 4.29 GB).
            "member_bytes_per_s": b.time_s.filter(|&t| t > 0.0).map(|t| r.member_bytes as f64 / t),
            "replaced": b.replaced,
            "bytes_written": b.bytes_written,
            "plans": b.plans,
            "error": b.error,
        })),
        "response_ms": response,
        "throughput_iops": r.throughput_iops,
        "per_disk": r.per_disk.iter().map(|d| json!({
            "busy_s": d.busy_s,
            "reads": d.reads,
            "writes": d.writes,
            "read_bytes": d.read_bytes,
            "write_bytes": d.write_bytes,
            "rebuild_reads": d.rebuild_reads,
            "rebuild_writes": d.rebuild_writes,
            "meta_writes": d.meta_writes,
        })).collect::<Vec<_>>(),
        "load_cov": r.load_cov,
        "member_ios": r.member_ios,
        "plans": r.plans,
        "replans": r.replans,
        "plans_memoised": r.plans_memoised,
        "events": r.events,
        "check": r.check.name(),
        "lazy": r.lazy.as_ref().map(|l| json!({
            "deferrals": l.deferrals,
            "flush_plans": l.flush_plans,
            "max_len": l.max_len,
            "left": l.left,
            "idle_flushes": l.idle_flushes,
            "forced_flushes": l.forced_flushes,
            "records": l.records,
        })),
        "ido": r.ido.as_ref().map(ido_json),
        "timeline": r.timeline.iter().map(|p| json!({
            "start_s": p.start_s,
            "end_s": p.end_s,
            "count": p.count,
            "mean_ms": p.mean_ms,
            "p99_ms": p.p99_ms,
        })).collect::<Vec<_>>(),
    })
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

fn print_summary(r: &Report, workload: &str, wall_s: f64) {
    println!("{}", r.scheme);
    println!(
        "{} x {}, chunk {} KiB, {} used per member, capacity {}",
        r.disks,
        r.drive,
        r.chunk_bytes / 1024,
        gib(r.member_bytes),
        gib(r.capacity_bytes)
    );
    println!(
        "workload {workload}: {} requests completed, {} failed, {} skipped; {:.1} IOPS; {:.3} s simulated",
        r.requests, r.requests_failed, r.requests_skipped, r.throughput_iops, r.sim_time_s
    );
    if r.requests_merged + r.requests_split > 0 {
        println!(
            "block-layer merging: {} trace requests merged into others, {} pieces split off larger ones ({} in the trace; --merge off replays them as recorded)",
            r.requests_merged,
            r.requests_split,
            (r.requests + r.requests_failed + r.requests_skipped + r.requests_merged)
                .saturating_sub(r.requests_split)
        );
    }
    if let Some(l) = &r.lazy {
        println!(
            "lazy parity: {} stripe deferrals, list up to {} long; {} flush plans ({} when idle, {} when full or degraded); {} left; {} records of the list written to the members",
            l.deferrals, l.max_len, l.flush_plans, l.idle_flushes, l.forced_flushes, l.left, l.records
        );
    }
    if let Some(l) = &r.lse {
        let lost: u64 = l.lost.iter().map(|&(_, n)| n).sum();
        println!(
            "latent sector errors: {} injected, {} member reads hit one, {} repairs; {} logical ranges lost ({lost} B), {} reads of them failed",
            l.injected,
            l.hit,
            l.repaired,
            l.lost.len(),
            l.failed_reads
        );
    }
    if let Some(i) = &r.ido {
        println!(
            "rebuild policy {}: {} of {} user requests during the rebuild served by the surrogate set ({:.1} %); {} hot zones of {} B, {} migrated; {} writes redirected, {} to the array for lack of room; {} B written back{}",
            i.policy,
            i.stats.reads_redirected + i.stats.writes_redirected,
            i.stats.reads + i.stats.writes,
            i.redirected_share * 100.0,
            i.hot_zones,
            i.zone_bytes,
            i.stats.zones_migrated,
            i.stats.writes_redirected,
            i.stats.writes_fallback,
            i.stats.reclaimed_bytes,
            i.reclaim_end_s
                .map(|t| format!(", reclaim done at {t:.3} s"))
                .unwrap_or_default()
        );
    }
    if let Some(b) = &r.rebuild {
        let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3} s"));
        println!(
            "member {} failed at {:.3} s; rebuild started {}, finished {}: rebuild time {}{}{}",
            b.failed,
            b.fail_at_s,
            opt(b.start_s),
            opt(b.end_s),
            opt(b.time_s),
            b.time_s
                .filter(|&t| t > 0.0)
                .map(|t| format!(
                    " ({:.1} MB of member per second; the array uses {} B of each member)",
                    r.member_bytes as f64 / t / 1e6,
                    r.member_bytes
                ))
                .unwrap_or_default(),
            b.replaced
                .map(|d| format!(" (onto a blank replacement of member {d})"))
                .unwrap_or_default()
        );
        if let Some(e) = &b.error {
            println!("rebuild error: {e}");
        }
    }
    println!(
        "{:<11} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "response ms", "count", "mean", "p50", "p99", "p99.9", "max"
    );
    for p in Phase::ALL {
        let s = r.phase(p);
        if s.count == 0 {
            continue;
        }
        println!(
            "{:<11} {:>9} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            p.name(),
            s.count,
            s.mean_ms,
            s.p50_ms,
            s.p99_ms,
            s.p999_ms,
            s.max_ms
        );
    }
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>14} {:>14}",
        "disk", "busy s", "reads", "writes", "rebuild reads", "rebuild writes"
    );
    for (i, d) in r.per_disk.iter().enumerate() {
        println!(
            "{:>6} {:>10.3} {:>10} {:>10} {:>14} {:>14}",
            format!("d{i}"),
            d.busy_s,
            d.reads,
            d.writes,
            d.rebuild_reads,
            d.rebuild_writes
        );
    }
    println!(
        "load CoV (busy time, members present at the end): {:.2} %",
        r.load_cov * 100.0
    );
    println!(
        "{} member I/Os, {} plans ({} re-planned, {} from the plan memo), {} events; plan checker: {}; wall {:.2} s ({:.0} member I/Os per second)",
        r.member_ios,
        r.plans,
        r.replans,
        r.plans_memoised,
        r.events,
        r.check.name(),
        wall_s,
        r.member_ios as f64 / wall_s.max(1e-9)
    );
}

fn parse_lazy_model(s: &str) -> Result<sim::LazyModel, String> {
    match s {
        "engine" => Ok(sim::LazyModel::Engine),
        "controller" => Ok(sim::LazyModel::Controller),
        _ => Err(format!("unknown {s:?}; known: engine, controller")),
    }
}

//! `raidforge serve`: pools as NBD exports, with a control socket per pool.
//!
//! Each POOL becomes one export (named by `--export`, in order, or by the descriptor's file
//! stem), served on `--listen ADDR` (TCP) and/or `--socket PATH` (Unix). Next to each
//! descriptor, `POOL.ctl` is a Unix socket on which `raidforge status/fail/replace/rebuild/
//! verify POOL` reach the running server. SIGINT or SIGTERM ends serving: connections finish
//! the requests they have, every member is flushed and the pool is marked clean.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use dev::metrics::PoolMeters;
use dev::pool::{Pool, PoolError, RebuildOpts};
use dev::serve_support::{Concurrency, HealOpts, PoolBackend, SharedPool};
use nbd::{Backend, BlockSize, Export, ExportInfo, Server, ServerOptions};
use serde_json::{json, Value};

use crate::control::socket_path;
use crate::metrics::{self, ExportMeter, MeteredBackend, MeteredPool, Metrics};
use crate::pool_cmd::parse_size;

/// `raidforge serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Pool descriptor files; each is served as one export.
    #[arg(required_unless_present = "config")]
    pub pools: Vec<PathBuf>,
    /// Take every setting from this TOML file instead of the command line (for a service:
    /// `contrib/systemd/raidforge@.service`). Its keys are the long options' names (`listen =
    /// "127.0.0.1:10809"`, `rebuild-delay = 3`, `max-request = "32M"`, `no-auto-heal = true`),
    /// and each pool is a `[[pool]]` table (`path`, optionally `export` and `spares`: hot spares
    /// added at start unless the pool lists them already). Relative paths are taken from the
    /// file's directory. Other options given with --config are refused: the file says
    /// everything, so what runs is what it says. An unknown key is an error naming it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Hot spares to add at start, per pool (pool index, path): from `--config` only (on the
    /// command line, `raidforge add POOL --spare PATH` before serving).
    #[arg(skip)]
    pub spares: Vec<(usize, PathBuf)>,
    /// Serve on this TCP address, e.g. 127.0.0.1:10809 (port 0 picks a free port; the
    /// address is printed).
    #[arg(long)]
    pub listen: Option<String>,
    /// Serve on this Unix socket path.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Export names, one per pool in order (default: the descriptor's file stem). The first
    /// pool is also the default export (empty name).
    #[arg(long = "export")]
    pub exports: Vec<String>,
    /// How requests run together: `stripes` (planned under the pool lock, run in parallel
    /// under stripe locks) or `serial` (one request at a time).
    #[arg(long, default_value = "stripes")]
    pub concurrency: String,
    /// Worker threads per client connection (requests of one connection executed at once;
    /// clients commonly keep 8 or more in flight).
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Worker threads over all client connections: with many connections each gets an equal
    /// share (at least one, at most --workers), so that 16 clients on a small machine do not
    /// run 128 threads that only take turns on its cores.
    #[arg(long, default_value_t = 32)]
    pub threads_total: usize,
    /// Largest read or write request accepted (advertised to clients as the maximum payload).
    #[arg(long, value_parser = parse_size, default_value = "32M")]
    pub max_request: u64,
    /// Log connections and protocol errors to stderr.
    #[arg(long)]
    pub verbose: bool,
    /// Start pools that were not shut down cleanly although members their unclean regions
    /// need are missing (refused otherwise, as MD refuses a dirty degraded array): what can be
    /// is resynchronised, the stripes that lack a member are left as they are.
    #[arg(long)]
    pub force: bool,
    /// Do not count requests per zone (the popularity IDO rebuilds use). For measuring the
    /// cost of counting (bench/ido_tracking.sh); an IDO rebuild then has no hot zones.
    #[arg(long)]
    pub no_zone_tracking: bool,
    /// Do not handle failures by itself. By default a served pool whose member fails (an I/O
    /// error, or `raidforge fail`) puts a hot spare in its place (`create --spare`,
    /// `raidforge add --spare`) and starts the rebuild without a command typed; layouts with
    /// spare space (RAID+) rebuild into it at once; an interrupted rebuild resumes.
    #[arg(long)]
    pub no_auto_heal: bool,
    /// Seconds a member stays failed before a spare takes its place and the rebuild starts
    /// (default 0: at once, as MD does with a spare).
    #[arg(long, default_value_t = 0.0)]
    pub rebuild_delay: f64,
    /// Speed of the rebuilds the server starts by itself while clients do I/O, bytes per
    /// second (like MD's sync_speed_min; `raidforge rebuild --speed-min` explains it), e.g.
    /// 10M (2^20 bytes/s) or 10MB/s (10^6).
    #[arg(long, value_parser = raidforge::pool_args::parse_speed, value_name = "SPEED")]
    pub rebuild_speed_min: Option<raidforge::pool_args::Speed>,
    /// Upper bound on the speed of the rebuilds the server starts by itself, bytes written per
    /// second, e.g. 200M (2^20 bytes/s) or 200MB/s (10^6).
    #[arg(long, value_parser = raidforge::pool_args::parse_speed, value_name = "SPEED")]
    pub rebuild_speed_max: Option<raidforge::pool_args::Speed>,
    /// The rebuild policy of the rebuilds the server starts by itself: pr (MD's order,
    /// tracked), pro (popular zones first), workout, vdf or ido (the last three redirect
    /// writes to the surrogate pool recorded at creation). Default: MD's plain rebuild. A
    /// policy rebuild a restart interrupted resumes with its own policy.
    #[arg(long, value_parser = dev::ido::parse_policy, value_name = "POLICY")]
    pub rebuild_policy: Option<dev::ido::RebuildPolicy>,
    /// Append health events as JSON lines to this file (Fail, DeviceDisappeared, StaleMember,
    /// DegradedArray, SpareActive, RebuildStarted, RebuildFinished, RebuildStopped, NoSpare,
    /// SpareRefused), each with the time, pool, member and what happened.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Run this command (with `sh -c`) for every health event, like `mdadm --monitor
    /// --program`; the details are in its environment: RAIDFORGE_EVENT, RAIDFORGE_POOL,
    /// RAIDFORGE_MEMBER, RAIDFORGE_SPARE, RAIDFORGE_DETAIL, RAIDFORGE_TIME_MS.
    #[arg(long, value_name = "CMD")]
    pub on_event: Option<String>,
    /// Seconds an I/O on an NBD member (a member path nbd://... or nbd+unix://...) may take,
    /// reconnections included, before it fails and the pool fails the member.
    #[arg(long, default_value_t = 30.0)]
    pub io_timeout: f64,
    /// Serve metrics for Prometheus on this TCP address (e.g. 127.0.0.1:9109; port 0 picks a
    /// free port, printed as `metrics on http://ADDR/metrics`): `GET /metrics` answers in
    /// Prometheus text format 0.0.4, or OpenMetrics 1.0.0 when the client's Accept header asks
    /// for it. Per pool: its state (`raidforge_pool_state`, a gauge per state: clean,
    /// degraded, rebuilding, failed), failures tolerated now, rebuild progress (bytes done of
    /// total) and rate,
    /// hot spares, health events, deferred parity (lazy parity pools) and journal use
    /// (journaled pools). Per member device: bytes read and written, I/Os, errors and a
    /// latency histogram (a spare that takes a failed member's place is a new device; the
    /// failed one stays listed as removed). Per export: requests, errors, bytes and a latency
    /// histogram. Each family says what it is in its `# HELP` line.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// TLS on NBD connections (NBD's STARTTLS, what `nbds://` URIs and qemu's `tls-creds`
    /// use), on --listen and --socket alike: `off` (plain text only), `on` (each client
    /// chooses), `require` (a client that does not start TLS is refused with NBD's
    /// TLS-required error). `on` and `require` need --tls-cert with --tls-key, or --tls-psk.
    #[arg(long, value_enum, default_value = "off")]
    pub tls: crate::serve_tls::TlsMode,
    /// The server's X.509 certificate (PEM; intermediate certificates may follow it).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM, unencrypted).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM): clients must present a certificate signed by one of them
    /// (without it, clients are not asked for a certificate).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Authenticate clients by pre-shared key instead of certificates: lines `IDENTITY:HEXKEY`
    /// (nbdkit's format, made by GnuTLS's `psktool -u NAME -p FILE`).
    #[arg(long, value_name = "FILE")]
    pub tls_psk: Option<PathBuf>,
}

/// The export name of pool `i` at `path` when none is given: the descriptor's file stem.
pub(crate) fn default_export_name(i: usize, path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("pool{i}"))
}

/// Where health events go: the `--events` file and the `--on-event` program.
fn event_sink(a: &ServeArgs, pool: &Path) -> anyhow::Result<Option<dev::serve_support::EventSink>> {
    if a.events.is_none() && a.on_event.is_none() {
        return Ok(None);
    }
    let file = match &a.events {
        Some(p) => Some(std::sync::Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening the --events file {}", p.display()))?,
        )),
        None => None,
    };
    let program = a.on_event.clone();
    let pool = pool.to_path_buf();
    Ok(Some(Arc::new(
        move |e: &dev::serve_support::HealthEvent| {
            eprintln!(
                "raidforge serve: {}: {}: {}",
                pool.display(),
                e.event,
                e.detail
            );
            crate::sd_notify::status(&format!("{}: {}: {}", pool.display(), e.event, e.detail));
            if let Some(f) = &file {
                let mut line = json!({
                    "time_unix_ms": e.time_unix_ms,
                    "pool": pool,
                    "event": e.event,
                    "member": e.member,
                    "spare": e.spare,
                    "detail": e.detail,
                })
                .to_string();
                line.push('\n');
                let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(err) = f.write_all(line.as_bytes()).and_then(|_| f.flush()) {
                    eprintln!("raidforge serve: writing the --events file: {err}");
                }
            }
            if let Some(cmd) = &program {
                let spawned = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(cmd)
                    .env("RAIDFORGE_EVENT", &e.event)
                    .env("RAIDFORGE_POOL", &pool)
                    .env(
                        "RAIDFORGE_MEMBER",
                        e.member.map(|m| m.to_string()).unwrap_or_default(),
                    )
                    .env(
                        "RAIDFORGE_SPARE",
                        e.spare.as_ref().map(|p| p.as_os_str()).unwrap_or_default(),
                    )
                    .env("RAIDFORGE_DETAIL", &e.detail)
                    .env("RAIDFORGE_TIME_MS", e.time_unix_ms.to_string())
                    // systemd's socket is for the server, not for what it runs.
                    .env_remove("NOTIFY_SOCKET")
                    .stdin(std::process::Stdio::null())
                    .spawn();
                match spawned {
                    // Reaped in the background: a slow program does not hold the healer.
                    Ok(mut child) => {
                        std::thread::spawn(move || child.wait());
                    }
                    Err(err) => eprintln!("raidforge serve: running --on-event: {err}"),
                }
            }
        },
    )))
}

/// Makes a socket file owner-only (read and write for its owner: connecting needs write).
fn owner_only(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} owner-only", path.display()))
}

/// Set by SIGINT and SIGTERM.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() -> anyhow::Result<()> {
    // SAFETY: the handler only stores to an atomic (async-signal-safe); the sigaction struct
    // is fully initialised (zeroed, then the fields we set). Ignoring SIGPIPE makes a write to
    // a socket whose client vanished an error instead of the end of the process.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        for sig in [libc::SIGINT, libc::SIGTERM] {
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                bail!("cannot install the handler of signal {sig}");
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    Ok(())
}

/// One served pool.
struct Served {
    name: String,
    path: PathBuf,
    ctl: PathBuf,
    pool: Arc<SharedPool>,
    /// Its member devices' counters (with `--metrics`).
    meters: Option<Arc<PoolMeters>>,
}

/// Binds a Unix socket at `path`, replacing a stale socket file (nobody listening) but never
/// a live one.
fn bind_unix(path: &Path, what: &str) -> anyhow::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!(
                "{} is in use: another server answers there ({what})",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("removing the stale socket {}", path.display()))?;
    }
    let l =
        UnixListener::bind(path).with_context(|| format!("binding {} ({what})", path.display()))?;
    owner_only(path)?;
    Ok(l)
}

pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    if a.listen.is_none() && a.socket.is_none() {
        bail!("give --listen ADDR (TCP) or --socket PATH (Unix socket), or both");
    }
    if a.exports.len() > a.pools.len() {
        bail!(
            "{} --export names for {} pools: give at most one name per pool",
            a.exports.len(),
            a.pools.len()
        );
    }
    let mode = match a.concurrency.as_str() {
        "stripes" => Concurrency::Stripes,
        "serial" => Concurrency::Serial,
        o => bail!("unknown --concurrency '{o}'; choose stripes or serial"),
    };
    if a.max_request < 4096 || a.max_request > u32::MAX as u64 {
        bail!("--max-request must be between 4K and 4G-1");
    }
    let names: Vec<String> = a
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            a.exports
                .get(i)
                .cloned()
                .unwrap_or_else(|| default_export_name(i, p))
        })
        .collect();
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            bail!("two pools would be served as export '{n}': name them with --export");
        }
    }
    if !(a.rebuild_delay >= 0.0 && a.rebuild_delay.is_finite()) {
        bail!("--rebuild-delay must be a number of seconds, 0 or more");
    }
    if !(a.io_timeout > 0.0 && a.io_timeout.is_finite()) {
        bail!("--io-timeout must be a number of seconds above 0");
    }
    raidforge::pool_args::check_speeds(a.rebuild_speed_min.as_ref(), a.rebuild_speed_max.as_ref())?;
    dev::nbd_member::set_io_timeout(Duration::from_secs_f64(a.io_timeout));
    let tls = crate::serve_tls::server(&a)?;
    let metrics_listener = a.metrics.as_deref().map(bind_metrics).transpose()?;
    install_signal_handlers()?;

    // Open the pools (refusing one that another server has).
    let mut served: Vec<Served> = Vec::new();
    let mut ctl_listeners = Vec::new();
    let mut open_error = None;
    for (path, name) in a.pools.iter().zip(&names) {
        let ctl = socket_path(path);
        let listener = match bind_unix(&ctl, "the pool's control socket") {
            Ok(l) => l,
            Err(e) => {
                open_error = Some(e);
                break;
            }
        };
        // With --metrics every member handle (replacements and spares included) counts its
        // I/O.
        let meters = a.metrics.as_ref().map(|_| PoolMeters::new());
        let wrap = meters.as_ref().map(|m| m.wrap());
        let before = crate::pool_cmd::failed_before_open(path);
        let opened = match (a.force, wrap) {
            (true, wrap) => Pool::open_forced(path, wrap),
            (false, Some(wrap)) => Pool::open_wrapped(path, wrap),
            (false, None) => Pool::open(path),
        }
        .with_context(|| format!("opening {}", path.display()))
        .and_then(|p| {
            crate::pool_cmd::tell_failed_at_open(path, &before, &p.status());
            Ok(SharedPool::new(p, mode)?)
        });
        let index = served.len();
        let setup = |p: &Arc<SharedPool>| -> anyhow::Result<()> {
            add_spares(p, path, a.spares.iter().filter(|(i, _)| *i == index))?;
            if !a.no_auto_heal {
                p.enable_auto_heal(HealOpts {
                    rebuild_delay: Duration::from_secs_f64(a.rebuild_delay),
                    rebuild: RebuildOpts {
                        speed_min_bytes_per_sec: a
                            .rebuild_speed_min
                            .as_ref()
                            .map(|s| s.bytes_per_sec),
                        speed_max_bytes_per_sec: a
                            .rebuild_speed_max
                            .as_ref()
                            .map(|s| s.bytes_per_sec),
                        ..RebuildOpts::default()
                    },
                    policy: a.rebuild_policy,
                    sink: event_sink(&a, path)?,
                });
            }
            Ok(())
        };
        // A pool whose set-up failed is closed again (marked clean), not left active.
        let opened = opened.and_then(|p| match setup(&p) {
            Ok(()) => Ok(p),
            Err(e) => {
                let _ = p.close();
                Err(e)
            }
        });
        if let Ok(p) = &opened {
            p.ido().set_tracking(!a.no_zone_tracking);
            // A policy rebuild or its reclaim was interrupted (a crash or a stop): resume it,
            // as MD resumes a resync; redirected data must go home.
            if p.ido().phase() != dev::ido::Phase::Normal {
                match p.start_rebuild(RebuildOpts::default()) {
                    Ok(_) => eprintln!(
                        "raidforge serve: {}: resuming the interrupted {} rebuild ({})",
                        path.display(),
                        p.ido().policy().name(),
                        p.ido().phase().as_str()
                    ),
                    Err(e) => eprintln!(
                        "raidforge serve: {}: the interrupted {} rebuild cannot resume yet: {e}",
                        path.display(),
                        p.ido().policy().name()
                    ),
                }
            }
        }
        let pool = match opened {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_file(&ctl);
                open_error = Some(e);
                break;
            }
        };
        ctl_listeners.push(listener);
        served.push(Served {
            name: name.clone(),
            path: path.clone(),
            ctl,
            pool,
            meters,
        });
    }
    // Pools opened before a failure are closed (marked clean again) below.
    let result = match open_error {
        Some(e) => Err(e),
        None => serve(&a, &served, ctl_listeners, metrics_listener, tls),
    };
    // Whatever happened: flush and record every pool's state, remove the control sockets.
    let mut closing_error = None;
    for s in &served {
        match s.pool.close() {
            Ok(st) => eprintln!(
                "raidforge serve: {} flushed and closed; pool is {}",
                s.path.display(),
                st.state
            ),
            Err(e) => {
                eprintln!("raidforge serve: closing {}: {e}", s.path.display());
                closing_error = Some(e);
            }
        }
        let _ = std::fs::remove_file(&s.ctl);
    }
    result?;
    if let Some(e) = closing_error {
        return Err(e.into());
    }
    Ok(())
}

/// Adds the hot spares `--config` lists for the pool at `path`, skipping those it lists
/// already and, with a note, one that took a failed member's place since (it is a member now).
fn add_spares<'a>(
    p: &SharedPool,
    path: &Path,
    spares: impl Iterator<Item = &'a (usize, PathBuf)>,
) -> anyhow::Result<()> {
    let id = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    for (_, spare) in spares {
        let st = p.status()?;
        let want = id(spare);
        if st.spares.iter().any(|s| id(s) == want) {
            continue;
        }
        if let Some(m) = st.members.iter().find(|m| id(&m.path) == want) {
            eprintln!(
                "raidforge serve: note: {}: spare {} is member {} now (it took a failed \
                 member's place); remove it from the config's spares",
                path.display(),
                spare.display(),
                m.index
            );
            continue;
        }
        p.add_spare(spare).with_context(|| {
            format!(
                "adding the spare {} to {} (listed in the config)",
                spare.display(),
                path.display()
            )
        })?;
        eprintln!(
            "raidforge serve: {}: spare {} added",
            path.display(),
            spare.display()
        );
    }
    Ok(())
}

/// Binds `--metrics ADDR` (before any pool is opened: a bad or busy address is refused with
/// nothing started), with the same warning as `--listen` for an address other machines reach.
fn bind_metrics(addr: &str) -> anyhow::Result<TcpListener> {
    let sa: SocketAddr = addr
        .parse()
        .with_context(|| format!("--metrics '{addr}' is not an address like 127.0.0.1:9109"))?;
    if !sa.ip().is_loopback() {
        eprintln!(
            "raidforge serve: warning: --metrics {sa} is reachable from other machines and has \
             no authentication: anyone who can connect can read the pools' health, member \
             paths and traffic. Listen on 127.0.0.1 (and let the scraper tunnel), or restrict \
             who reaches the port."
        );
    }
    TcpListener::bind(sa).with_context(|| format!("binding {sa} (--metrics)"))
}

fn serve(
    a: &ServeArgs,
    served: &[Served],
    ctl_listeners: Vec<UnixListener>,
    metrics_listener: Option<TcpListener>,
    tls: Option<nbd::TlsServer>,
) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let log: Option<nbd::Logger> = a
        .verbose
        .then(|| Arc::new(|m: &str| eprintln!("raidforge serve: {m}")) as nbd::Logger);
    let mut metered = Vec::new();
    let exports: Vec<Export> = served
        .iter()
        .map(|s| {
            let st = s.pool.status()?;
            let mut backend = Arc::new(PoolBackend(Arc::clone(&s.pool))) as Arc<dyn Backend>;
            if let Some(members) = &s.meters {
                let export = Arc::new(ExportMeter::default());
                backend = Arc::new(MeteredBackend {
                    inner: backend,
                    meter: Arc::clone(&export),
                });
                metered.push(MeteredPool {
                    name: s.name.clone(),
                    descriptor: s.path.clone(),
                    layout: st.layout.clone(),
                    uuid: st.uuid.clone(),
                    pool: Arc::clone(&s.pool),
                    members: Arc::clone(members),
                    export,
                });
            }
            let mut info = ExportInfo::new(s.name.clone(), s.pool.capacity_bytes());
            info.description = format!("raidforge pool {} ({})", s.path.display(), st.layout);
            info.block = BlockSize {
                minimum: 1,
                preferred: 4096,
                maximum: a.max_request as u32,
            };
            Ok(Export { info, backend })
        })
        .collect::<Result<_, PoolError>>()?;
    let server = Server::with_flag(
        exports,
        ServerOptions {
            workers_per_connection: a.workers.max(1),
            threads_total: a.threads_total.max(1),
            log: log.clone(),
            tls_required: a.tls == crate::serve_tls::TlsMode::Require,
            tls,
            ..ServerOptions::default()
        },
        Arc::clone(&stop),
    );

    let mut threads = Vec::new();
    let mut unix_path = None;
    for s in served {
        println!(
            "export '{}': {} ({} bytes), control socket {}",
            s.name,
            s.path.display(),
            s.pool.capacity_bytes(),
            s.ctl.display()
        );
    }
    if let Some(addr) = &a.listen {
        let sa: SocketAddr = addr
            .parse()
            .with_context(|| format!("--listen '{addr}' is not an address like 127.0.0.1:10809"))?;
        if let Some(w) = crate::serve_tls::listen_warning(sa, a.tls) {
            eprintln!("{w}");
        }
        let l = TcpListener::bind(sa).with_context(|| format!("binding {sa}"))?;
        let bound = l.local_addr()?;
        let scheme = if a.tls == crate::serve_tls::TlsMode::Off {
            "nbd"
        } else {
            "nbds"
        };
        println!("listening on {scheme}://{bound}/");
        let srv = Arc::clone(&server);
        threads.push(std::thread::spawn(move || srv.serve_tcp(l)));
    }
    if let Some(path) = &a.socket {
        let l = bind_unix(path, "--socket")?;
        println!("listening on nbd+unix:///?socket={}", path.display());
        unix_path = Some(path.clone());
        let srv = Arc::clone(&server);
        threads.push(std::thread::spawn(move || srv.serve_unix(l)));
    }
    if let Some(l) = metrics_listener {
        println!("metrics on http://{}/metrics", l.local_addr()?);
        let m = Arc::new(Metrics {
            pools: metered,
            server: Some(Arc::clone(&server)),
        });
        let render: metrics::http::Render = Arc::new(move |f| m.render(f));
        let stop = Arc::clone(&stop);
        threads.push(std::thread::spawn(move || {
            metrics::http::serve(l, stop, render)
        }));
    }
    for (s, l) in served.iter().zip(ctl_listeners) {
        let pool = Arc::clone(&s.pool);
        let stop = Arc::clone(&stop);
        let srv = Arc::clone(&server);
        threads.push(std::thread::spawn(move || {
            control_loop(l, pool, srv, stop);
            Ok(())
        }));
    }
    // Every export listens (its sockets are bound: a client connecting now is queued until
    // the serving thread accepts it): tell systemd (`Type=notify`), then the terminal.
    crate::sd_notify::notify(&format!(
        "READY=1\nSTATUS=serving {}",
        served
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    println!("ready");
    let _ = std::io::stdout().flush();

    while !SIGNALLED.load(Ordering::SeqCst) && !threads.iter().any(|t| t.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("raidforge serve: shutting down");
    crate::sd_notify::notify("STOPPING=1\nSTATUS=shutting down: flushing and closing the pools");
    stop.store(true, Ordering::SeqCst);
    let mut first_err = None;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => first_err = first_err.or(Some(anyhow::Error::from(e))),
            Err(_) => first_err = first_err.or(Some(anyhow::anyhow!("a server thread panicked"))),
        }
    }
    if let Some(p) = unix_path {
        let _ = std::fs::remove_file(p);
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Accepts control connections until `stop`; each is one request and one reply.
fn control_loop(
    l: UnixListener,
    pool: Arc<SharedPool>,
    server: Arc<Server>,
    stop: Arc<AtomicBool>,
) {
    if l.set_nonblocking(true).is_err() {
        return;
    }
    let mut handlers: Vec<std::thread::JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, _)) => {
                let pool = Arc::clone(&pool);
                let server = Arc::clone(&server);
                handlers.retain(|h| !h.is_finished());
                handlers.push(std::thread::spawn(move || {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut line = String::new();
                    let reply = match BufReader::new(&s).read_line(&mut line) {
                        Ok(_) => handle(&line, &pool, &server),
                        Err(e) => {
                            json!({"ok": false, "error": format!("reading the request: {e}")})
                        }
                    };
                    let mut out = reply.to_string();
                    out.push('\n');
                    let _ = (&s).write_all(out.as_bytes());
                }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    for h in handlers {
        let _ = h.join();
    }
}

fn handle(line: &str, pool: &Arc<SharedPool>, server: &Server) -> Value {
    let outcome = (|| -> anyhow::Result<Value> {
        let req: Value = serde_json::from_str(line).context("the request is not JSON")?;
        let member = || -> anyhow::Result<usize> {
            req["member"]
                .as_u64()
                .map(|m| m as usize)
                .context("the request names no member")
        };
        let mut v = match req["op"].as_str().unwrap_or("") {
            "status" => json!({"status": pool.status()?}),
            "fail" => {
                let m = member()?;
                if !req["force"].as_bool().unwrap_or(false) {
                    if let Some(why) =
                        pool.with_pool(|p| Ok(crate::pool_cmd::fail_refusal(p, m)))?
                    {
                        anyhow::bail!(why);
                    }
                }
                json!({"status": pool.fail(m)?})
            }
            "replace" => {
                let with = req["with"]
                    .as_str()
                    .context("the request names no new member")?;
                json!({"status": pool.replace(member()?, Path::new(with))?})
            }
            "add_spare" => {
                let spare = req["spare"]
                    .as_str()
                    .context("the request names no spare")?;
                json!({"status": pool.add_spare(Path::new(spare))?})
            }
            "rebuild" => {
                let opts = rebuild_opts(&req);
                let policy = req["policy"]
                    .as_str()
                    .map(dev::ido::parse_policy)
                    .transpose()
                    .map_err(|e| anyhow::anyhow!(e))?;
                let surrogate = req["surrogate"].as_str().map(std::path::PathBuf::from);
                pool.start_rebuild_with(opts, policy, surrogate.as_deref())?;
                json!({"status": pool.status()?})
            }
            "verify" => json!({"verify": pool.verify()?}),
            "flush" => {
                pool.flush_deferred()?;
                json!({"status": pool.status()?})
            }
            // Zone popularity counting on or off (bench/ido_tracking.sh compares the two on
            // one server).
            "zone_tracking" => {
                let on = req["on"]
                    .as_bool()
                    .context("zone_tracking needs \"on\": true or false")?;
                pool.ido().set_tracking(on);
                json!({"zone_tracking": on})
            }
            o => bail!("unknown control operation '{o}'"),
        };
        v["ok"] = json!(true);
        v["rebuild"] = serde_json::to_value(pool.rebuild_info())?;
        v["server"] = json!({
            "pid": std::process::id(),
            "connections": server.stats().open.load(Ordering::Relaxed),
            "requests": server.stats().requests.load(Ordering::Relaxed),
            "concurrency": pool.mode(),
        });
        Ok(v)
    })();
    outcome.unwrap_or_else(|e| json!({"ok": false, "error": format!("{e:#}")}))
}

/// The rebuild options of a control socket's `rebuild` request (what `raidforge rebuild`
/// sends, [`crate::control::rebuild_request`]).
fn rebuild_opts(req: &serde_json::Value) -> RebuildOpts {
    RebuildOpts {
        parallel_cycles: req["parallel"].as_u64().unwrap_or(8).max(1) as usize,
        speed_max_bytes_per_sec: req["speed_max"].as_u64(),
        speed_min_bytes_per_sec: req["speed_min"].as_u64(),
        // `rebuild --memory-window` (a client older than it sends none: the default). It
        // was not sent at all before, so a served rebuild ignored the option.
        window_bytes: req["window_bytes"]
            .as_u64()
            .map_or(dev::pool::DEFAULT_REBUILD_WINDOW, |w| w.max(1) as usize),
        // 0 (or none, from a client older than the option): by the pool's member count.
        windows_in_flight: req["windows_in_flight"]
            .as_u64()
            .map_or(dev::pool::WINDOWS_IN_FLIGHT_BY_MEMBERS, |w| w as usize),
        ..RebuildOpts::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `raidforge rebuild` asks of a server is what the server's rebuild runs with,
    /// the memory window included; a request without one gets the default.
    #[test]
    fn a_served_rebuild_takes_every_option_the_command_sends() {
        let req = crate::control::rebuild_request(
            12,
            Some(5 << 20),
            Some(1 << 20),
            (3 << 20, 7),
            None,
            None,
        );
        let o = rebuild_opts(&req);
        assert_eq!(o.parallel_cycles, 12);
        assert_eq!(o.speed_max_bytes_per_sec, Some(5 << 20));
        assert_eq!(o.speed_min_bytes_per_sec, Some(1 << 20));
        assert_eq!(o.window_bytes, 3 << 20);
        assert_eq!(o.windows_in_flight, 7);
        let old = serde_json::json!({"op": "rebuild", "parallel": 4});
        assert_eq!(
            rebuild_opts(&old).window_bytes,
            dev::pool::DEFAULT_REBUILD_WINDOW
        );
        assert_eq!(
            rebuild_opts(&old).windows_in_flight,
            dev::pool::WINDOWS_IN_FLIGHT_BY_MEMBERS
        );
    }
}

//! Pool commands: create, assemble, status, io, fail, replace, rebuild, verify.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use dev::ido::RebuildPolicy;
use dev::pool::{Pool, RebuildOpts};
use dev::serve_support::{Concurrency, SharedPool};
use raidcore::ParityPolicy;

pub use raidforge::pool_args::{
    parse_member, parse_parity, parse_size, parse_speed, CreateArgs, Speed,
};

/// Pool commands that take only the pool.
#[derive(Args, Debug)]
pub struct PoolArg {
    /// Path of the pool descriptor file.
    pub pool: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum IoCommand {
    /// Write the bytes of a file into the pool at an offset.
    Write {
        pool: PathBuf,
        /// Byte offset in the pool.
        #[arg(long, value_parser = parse_size)]
        offset: u64,
        /// File whose bytes are written; `-` reads them from standard input.
        #[arg(long)]
        input: PathBuf,
        /// Parity policy for this write only (default: the pool's, set at create time):
        /// `lazy` defers one parity of a two-parity layout, `eager` updates both.
        #[arg(long, value_parser = parse_parity)]
        parity: Option<ParityPolicy>,
    },
    /// Read bytes from the pool into a file.
    Read {
        pool: PathBuf,
        /// Byte offset in the pool where reading starts, e.g. 0, 4096 or 1M.
        #[arg(long, value_parser = parse_size)]
        offset: u64,
        /// Number of bytes to read, e.g. 4096 or 1M (offset + length at most the pool's size,
        /// which `raidforge status` shows).
        #[arg(long, value_parser = parse_size)]
        length: u64,
        /// File to write the bytes to; `-` writes them to standard output.
        #[arg(long)]
        output: PathBuf,
    },
}

fn print_status(pool: &Pool, json: bool) -> anyhow::Result<()> {
    print_status_of(&pool.status(), json)
}

/// Prints a pool's status (from the pool itself or from the server serving it).
pub fn print_status_of(s: &dev::pool::Status, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    let members: Vec<String> = s
        .members
        .iter()
        .map(|m| {
            let flag = match m.state.as_str() {
                "failed" => "(F)",
                "spare" => "(S)",
                "rebuilding" => "(R)",
                _ => "",
            };
            format!("m{}{}", m.index, flag)
        })
        .collect();
    let bar: String = s
        .members
        .iter()
        .map(|m| if m.state == "failed" { '_' } else { 'U' })
        .collect();
    println!(
        "pool {} : {} {} {}",
        s.uuid,
        s.state,
        s.scheme,
        members.join(" ")
    );
    println!(
        "      {} bytes, chunk {}, [{}] layout {}",
        s.size_bytes, s.chunk_bytes, bar, s.layout
    );
    if s.cycles_clean < s.cycles {
        println!(
            "      rebuild: {}/{} cycles ({:.1} %)",
            s.cycles_clean,
            s.cycles,
            100.0 * s.cycles_clean as f64 / s.cycles.max(1) as f64
        );
    }
    if let Some(i) = &s.ido {
        if i.phase != "normal" || i.dmap_entries > 0 {
            println!(
                "      {} rebuild ({}): zones {}/{} rebuilt, {} hot, {} migrated; {} requests \
                 redirected; D-Map {} ranges, {} bytes; {} ranges left to reclaim; surrogate \
                 {} ({} of {} bytes used)",
                i.policy,
                i.phase,
                i.zones_rebuilt,
                i.zones_total,
                i.zones_hot,
                i.zones_migrated,
                i.redirected_requests,
                i.dmap_entries,
                i.dmap_bytes,
                i.reclaim_ranges_left,
                i.surrogate_state,
                i.surrogate_used_bytes,
                i.surrogate_bytes
            );
        } else {
            println!(
                "      zones: {} of {} bytes{}{}",
                i.zones_total,
                i.zone_bytes,
                if i.tracking {
                    ", popularity tracked"
                } else {
                    ""
                },
                i.surrogate
                    .as_ref()
                    .map(|p| format!("; surrogate {}", p.display()))
                    .unwrap_or_default()
            );
        }
    }
    let full = s.fault_tolerance + usize::from(s.bpgl_len > 0);
    if s.parity == "lazy" || s.bpgl_len > 0 {
        println!(
            "      parity {}: {} of {} stripes with deferred parity; survives {} more failure{}{}",
            s.parity,
            s.bpgl_len,
            s.bpgl_capacity,
            s.fault_tolerance,
            if s.fault_tolerance == 1 { "" } else { "s" },
            if s.bpgl_len > 0 {
                format!(" ({full} once flushed: `raidforge flush`)")
            } else {
                String::new()
            }
        );
    } else {
        println!(
            "      parity {}; survives {} more failure{}",
            s.parity,
            s.fault_tolerance,
            if s.fault_tolerance == 1 { "" } else { "s" }
        );
    }
    let r = &s.repairs;
    if s.checksums || r.read_errors > 0 || r.parity_rewrites > 0 {
        println!(
            "      checksums {}; blocks repaired {} ({} checksum mismatches, {} read errors), \
             {} stripes' parity rewritten",
            if s.checksums { "on" } else { "off" },
            r.repaired_blocks,
            r.checksum_mismatches,
            r.read_errors,
            r.parity_rewrites
        );
    }
    for l in &s.lost {
        println!(
            "      LOST: logical bytes {}..{} ({})",
            l.logical_offset,
            l.logical_offset + l.length,
            l.reason
        );
    }
    match &s.journal {
        Some(j) => println!(
            "      write hole: journal ({} KiB per member, {} copies): {} records in {} commits, \
             {} checkpoints, {} live; {} replayed at open",
            j.region_bytes >> 10,
            j.copies,
            j.records,
            j.commits,
            j.checkpoints,
            j.live_records,
            j.replayed_records
        ),
        None if s.write_hole == "journal" => println!("      write hole: journal"),
        None => match s.after_crash.as_str() {
            "resync-whole" => println!(
                "      write hole: no journal and no write-intent bitmap (Linux MD's format): \
                 writes mark the array dirty until the pool is closed, and after a crash the \
                 next assembly (raidforge's or the kernel's) resynchronises the whole array"
            ),
            "none" => println!("      write hole: none (RAID0 has no parity or copies)"),
            _ => println!(
                "      write hole: write-intent bitmap ({} regions marked): a crash is followed \
                 by a resync of the marked regions (create with --write-hole journal to close \
                 the hole)",
                s.intent_regions_marked.unwrap_or(0)
            ),
        },
    }
    if let Some(r) = &s.resync {
        println!(
            "      resync at open (unclean shutdown): {} cycles, {} stripes rewritten, {} left \
             degraded, {} checksums vouched for",
            r.cycles, r.stripes_rewritten, r.stripes_degraded, r.blocks_revouched
        );
    }
    for m in &s.members {
        if let Some(why) = &m.failed_why {
            println!("      m{} failed: {why}", m.index);
        }
    }
    for m in &s.members {
        println!(
            "      m{:<3} {:<10} read {:>14} written {:>14}  ios r {:>8} w {:>8} meta {:>6}  {}",
            m.index,
            m.state,
            m.read_bytes,
            m.write_bytes,
            m.reads,
            m.writes,
            m.meta_writes,
            m.path.display()
        );
    }
    for sp in &s.spares {
        println!("      hot spare  {}", sp.display());
    }
    if let Some(h) = &s.auto_heal {
        println!(
            "      auto-heal on: {} spares activated, {} rebuilds started{}",
            h.spares_activated.len(),
            h.rebuilds_started,
            h.last_rebuild_reason
                .as_ref()
                .map(|r| format!(" (last: {r})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

pub fn create(a: CreateArgs) -> anyhow::Result<()> {
    let pool = raidforge::pool_args::create_pool(&a)?;
    print_status(&pool, a.json)?;
    pool.close()?;
    Ok(())
}

pub fn assemble(
    pool: PathBuf,
    members: Vec<PathBuf>,
    emulate: Option<String>,
    json: bool,
    force: bool,
) -> anyhow::Result<()> {
    crate::control::refuse_if_served(&pool, "assemble")?;
    let p = Pool::assemble_with(&pool, &members, emulate, force)?;
    for note in p.md_notes() {
        eprintln!("raidforge: note: {note}");
    }
    // A member left out because it missed updates: one line each (status lists it too).
    for m in &p.status().members {
        if let Some(why) = (m.failed_why.as_ref()).filter(|w| w.starts_with(dev::pool::STALE_WHY)) {
            eprintln!(
                "raidforge: warning: member {} ({}) is left out: {why}; the pool runs degraded",
                m.index,
                m.path.display()
            );
        }
    }
    print_status(&p, json)?;
    p.close()?;
    Ok(())
}

pub fn status(a: PoolArg) -> anyhow::Result<()> {
    if let Some(live) = crate::control::live(&a.pool) {
        return crate::control::status(&live, a.json);
    }
    // Without taking the pool: works while another command (a rebuild) runs on it.
    print_status_of(&Pool::peek_status(&a.pool)?, a.json)
}

/// Opens a pool for I/O and says on stderr which members it had to fail because they were
/// missing, unusable or stale (status and its --json keep the reason).
fn open_telling(pool: &std::path::Path) -> anyhow::Result<Pool> {
    let before = failed_before_open(pool);
    let p = Pool::open(pool)?;
    tell_failed_at_open(pool, &before, &p.status());
    Ok(p)
}

/// Which members the descriptor at `pool` records failed (with a reason) before an open.
pub(crate) fn failed_before_open(pool: &std::path::Path) -> Vec<bool> {
    std::fs::read_to_string(pool)
        .ok()
        .and_then(|t| serde_json::from_str::<dev::pool::Descriptor>(&t).ok())
        .map(|d| d.members.iter().map(|m| m.failed_why.is_some()).collect())
        .unwrap_or_default()
}

/// Says on stderr which members the open failed (not failed in `before`) and why.
pub(crate) fn tell_failed_at_open(pool: &std::path::Path, before: &[bool], st: &dev::pool::Status) {
    for m in &st.members {
        let known = before.get(m.index).copied().unwrap_or(false);
        let Some(why) = m.failed_why.as_ref().filter(|_| !known) else {
            continue;
        };
        if why.starts_with(dev::pool::STALE_WHY) {
            // It missed updates: it cannot rejoin as it is.
            eprintln!(
                "raidforge: warning: member {} is left out ({why}); the pool runs degraded",
                m.index
            );
        } else {
            eprintln!(
                "raidforge: warning: member {} is failed ({why}); the pool runs degraded (if \
                 its file comes back unchanged, `raidforge re-add {} --member {}` lets it rejoin \
                 without a rebuild)",
                m.index,
                pool.display(),
                m.index
            );
        }
    }
}

pub fn io(c: IoCommand) -> anyhow::Result<()> {
    match c {
        IoCommand::Write {
            pool,
            offset,
            input,
            parity,
        } => {
            let data = if input.as_os_str() == "-" {
                let mut b = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
                    .context("reading standard input")?;
                b
            } else {
                std::fs::read(&input).with_context(|| format!("reading {}", input.display()))?
            };
            crate::control::refuse_if_served(&pool, "io write")?;
            let mut p = open_telling(&pool)?;
            let saved = p.parity();
            if let Some(parity) = parity {
                p.set_parity(parity)?;
            }
            let r = p.write(offset, &data);
            p.set_parity(saved)?;
            r?;
            p.close()?;
            eprintln!("wrote {} bytes at offset {offset}", data.len());
        }
        IoCommand::Read {
            pool,
            offset,
            length,
            output,
        } => {
            crate::control::refuse_if_served(&pool, "io read")?;
            let mut p = open_telling(&pool)?;
            let data = p.read(offset, length)?;
            p.close()?;
            if output.as_os_str() == "-" {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                out.write_all(&data)
                    .and_then(|_| out.flush())
                    .context("writing standard output")?;
            } else {
                std::fs::write(&output, &data)
                    .with_context(|| format!("writing {}", output.display()))?;
            }
            eprintln!("read {} bytes at offset {offset}", data.len());
        }
    }
    Ok(())
}

/// A progress bar on stderr for `len` cycles, as wide as the terminal allows and no wider: the
/// bar takes what the label, counts, message and estimate leave of the line (a fixed-width
/// bar wrapped at 80 columns).
pub fn progress_bar(label: &str, len: u64) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(len);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{wide_bar}] {pos}/{len} cycles {percent:>3}% {msg} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    b.set_prefix(label.to_string());
    b
}

/// `raidforge flush`: recompute every deferred parity now.
pub fn flush(a: PoolArg) -> anyhow::Result<()> {
    if let Some(live) = crate::control::live(&a.pool) {
        return crate::control::flush(&live, a.json);
    }
    let mut p = Pool::open(&a.pool)?;
    let before = p.state().bpgl().len();
    let n = p.flush_bpgl(0)?;
    if !a.json {
        eprintln!("flushed deferred parity of {n} stripes ({before} were listed)");
    }
    print_status(&p, a.json)?;
    p.close()?;
    Ok(())
}

/// Why failing `member` is refused without --force, or `None` when the pool survives it
/// (`pool_args::fail_loss` says what would be lost; Python's `Pool.fail` words the same
/// finding with its own `force=True`).
pub fn fail_refusal(p: &Pool, member: usize) -> Option<String> {
    raidforge::pool_args::fail_loss(p, member).map(|why| {
        format!(
            "{why} (`raidforge status` says how many more failures the pool survives); \
             rebuild first, or pass --force to fail it anyway"
        )
    })
}

pub fn fail(pool: PathBuf, member: usize, force: bool, json: bool) -> anyhow::Result<()> {
    if let Some(live) = crate::control::live(&pool) {
        return crate::control::fail(&live, member, force, json);
    }
    // Asked of the members as recorded, before the pool is opened (which writes); a pool that
    // another process holds is left to the open below, which says it is in use.
    let peeked = Pool::peek(&pool)?;
    let in_use = peeked.status().members.iter().any(|m| {
        dev::FileMember::open(&m.path, dev::OpenOpts::default())
            .is_ok_and(|f| f.lock_exclusive().is_err())
    });
    if let Some(why) = fail_refusal(&peeked, member).filter(|_| !force && !in_use) {
        anyhow::bail!(why);
    }
    drop(peeked);
    let mut p = Pool::open(&pool)?;
    p.fail(member)?;
    print_status(&p, json)?;
    p.close()?;
    Ok(())
}

pub fn replace(pool: PathBuf, member: usize, with: PathBuf, json: bool) -> anyhow::Result<()> {
    if let Some(live) = crate::control::live(&pool) {
        return crate::control::replace(&live, member, &with, json);
    }
    let mut p = Pool::open(&pool)?;
    p.replace(member, &with)?;
    print_status(&p, json)?;
    p.close()?;
    Ok(())
}

/// `raidforge re-add POOL --member N`.
pub fn re_add(pool: PathBuf, member: usize, json: bool) -> anyhow::Result<()> {
    if crate::control::live(&pool).is_some() {
        anyhow::bail!(
            "{} is being served: stop `raidforge serve` first (re-add reads every stripe of a \
             pool it has to itself)",
            pool.display()
        );
    }
    let mut p = Pool::open(&pool)?;
    let checked = p.re_add(member)?;
    eprintln!(
        "member {member} rejoined: {checked} stripes read with it back all agree; nothing was \
         rebuilt"
    );
    print_status(&p, json)?;
    p.close()?;
    Ok(())
}

/// `raidforge add POOL --spare PATH`.
pub fn add_spare(pool: PathBuf, spare: PathBuf, json: bool) -> anyhow::Result<()> {
    if let Some(live) = crate::control::live(&pool) {
        return crate::control::add_spare(&live, &spare, json);
    }
    let mut p = Pool::open(&pool)?;
    p.add_spare(&spare)?;
    print_status(&p, json)?;
    p.close()?;
    Ok(())
}

/// `raidforge wipe`: each path in turn; stops at the first refusal.
pub fn wipe(members: Vec<PathBuf>) -> anyhow::Result<()> {
    for m in members {
        let uuid = dev::pool::wipe_member(&m)?;
        let uuid: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
        eprintln!(
            "wiped {}: it was a member of pool {uuid}, now blank",
            m.display()
        );
    }
    Ok(())
}

/// `raidforge rebuild`. The options have the names `raidforge sim` gives the same things
/// (`--rebuild-order`, `--rebuild-policy`, `--rebuild-window`, `--speed-min`, `--speed-max`);
/// the old spellings `--order`, `--policy` and `--parallel` are still accepted.
#[derive(Args, Debug)]
pub struct RebuildArgs {
    pub pool: PathBuf,
    /// How cycles are scheduled: `parallel` (up to --rebuild-window cycles at once, spreading
    /// work over every member that holds a piece: what makes RAID+ and S2-RAID fast) or
    /// `sequential` (one cycle at a time, like Linux MD).
    #[arg(long, alias = "order", default_value = "parallel")]
    pub rebuild_order: String,
    /// What happens to client I/O during the rebuild (seed 003), for served pools:
    /// `pr` (default; MD's: address order, clients on the degraded pool),
    /// `pro` (zones most requested since the failure rebuilt first),
    /// `workout` (writes and reads of popular zones go to the surrogate pool),
    /// `vdf` (reads cached on the surrogate, evicting copies of already rebuilt zones first;
    /// writes go there too), `ido` (zones found hot before the failure rebuilt first and
    /// moved to the surrogate; their reads and all writes go there). After a rebuild with a
    /// surrogate, redirected data is written back at low priority (status shows the D-Map
    /// shrinking). Without --rebuild-policy an interrupted policy rebuild resumes with its
    /// policy. (`parallel`/`sequential` are still accepted here as the old spelling of
    /// --rebuild-order.)
    #[arg(long, alias = "policy")]
    pub rebuild_policy: Option<String>,
    /// The surrogate pool for workout/vdf/ido (default: the one named at `raidforge create`):
    /// a descriptor, or nbd://HOST[:PORT]/EXPORT / nbd+unix:///EXPORT?socket=PATH for a pool
    /// that another `raidforge serve` process serves.
    #[arg(long)]
    pub surrogate: Option<PathBuf>,
    /// Cycles in flight under --rebuild-order parallel (`raidforge sim` defaults to 4, the
    /// window its reproductions of MD-era arrays use).
    #[arg(long, alias = "parallel", default_value_t = 8)]
    pub rebuild_window: usize,
    /// Memory the rebuild reads, computes and writes in at a time: each batch of cycles is
    /// cut into windows of this many bytes of buffers, and --windows-in-flight of them run at
    /// once, so a rebuild holds about that many times this, however wide the layout's
    /// cycles. E.g. 16M (the default), 64MiB.
    #[arg(long, value_parser = parse_size, default_value = "16M")]
    pub memory_window: u64,
    /// Windows (see --memory-window) read, computed and written at once, each on its own,
    /// so that every member has work queued while one window waits for its slowest member.
    /// 1 runs them one after the other. Default: a quarter of the pool's members, at least 4
    /// and at most 16 (wider enclosures need more windows to keep every member busy; 16
    /// windows of 16M hold 256 MiB).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub windows_in_flight: Option<u64>,
    /// Rebuild speed while clients are doing I/O (a served pool), bytes per second, like
    /// MD's sync_speed_min: the rebuild backs off to it under load and runs up to
    /// --speed-max when clients are idle. A rebuild run by this command has no clients, so it
    /// applies to `raidforge serve`d pools. E.g. 10M or 10MiB/s (2^20 bytes/s), 10MB/s (10^6).
    #[arg(long, value_parser = parse_speed)]
    pub speed_min: Option<Speed>,
    /// Upper bound on rebuild speed, bytes written per second: 200M or 200MiB/s (200 x 2^20
    /// bytes/s), 200MB/s (200 x 10^6). The rebuild echoes it back in both units; its
    /// progress and result are in MB/s (10^6 bytes/s).
    #[arg(long, value_parser = parse_speed)]
    pub speed_max: Option<Speed>,
    /// Print progress as JSON lines, then a final JSON summary line.
    #[arg(long)]
    pub json: bool,
    /// Start a pool that was not shut down cleanly although members its unclean regions need
    /// are missing (refused otherwise, as MD refuses a dirty degraded array): what can be is
    /// resynchronised, the stripes that lack a member are left as they are.
    #[arg(long)]
    pub force: bool,
}

/// The speed limits as given, echoed back in both units (stderr), so that `50M` is never
/// read as 50 MB/s.
fn echo_speeds(what: &str, min: Option<&Speed>, max: Option<&Speed>) {
    for (flag, v) in [("--speed-min", min), ("--speed-max", max)] {
        if let Some(v) = v {
            eprintln!("{what} {flag} {}", v.describe());
        }
    }
}

pub fn rebuild(mut a: RebuildArgs) -> anyhow::Result<()> {
    if let Some(old @ ("parallel" | "sequential")) = a.rebuild_policy.as_deref() {
        // The old spelling: --policy was the schedule before rebuild policies existed.
        eprintln!("raidforge: note: --rebuild-policy {old} is now spelled --rebuild-order {old}");
        a.rebuild_order = old.to_string();
        a.rebuild_policy = None;
    }
    let policy = a
        .rebuild_policy
        .as_deref()
        .map(dev::ido::parse_policy)
        .transpose()
        .map_err(|e| {
            anyhow::anyhow!(
                "--rebuild-policy: {e} (the schedule is --rebuild-order parallel|sequential)"
            )
        })?;
    let parallel = match a.rebuild_order.as_str() {
        "parallel" => a.rebuild_window.max(1),
        "sequential" => 1,
        other => {
            anyhow::bail!("unknown --rebuild-order '{other}'; choose parallel or sequential")
        }
    };
    raidforge::pool_args::check_speeds(a.speed_min.as_ref(), a.speed_max.as_ref())?;
    if !a.json {
        echo_speeds("rebuild", a.speed_min.as_ref(), a.speed_max.as_ref());
    }
    if let Some(live) = crate::control::live(&a.pool) {
        return crate::control::rebuild(&live, &a, parallel);
    }
    let mut p = if a.force {
        Pool::open_forced(&a.pool, None)?
    } else {
        Pool::open(&a.pool)?
    };
    if policy.is_some_and(|p| p != RebuildPolicy::Pr) || p.ido().phase() != dev::ido::Phase::Normal
    {
        return policy_rebuild(p, &a, policy, parallel);
    }
    let tty = std::io::stderr().is_terminal() && !a.json;
    let bar = if tty {
        Some(progress_bar("rebuild", p.geometry().cycles()))
    } else {
        None
    };
    let json = a.json;
    let result = p.rebuild(
        &RebuildOpts {
            parallel_cycles: parallel,
            speed_max_bytes_per_sec: a.speed_max.as_ref().map(|s| s.bytes_per_sec),
            speed_min_bytes_per_sec: a.speed_min.as_ref().map(|s| s.bytes_per_sec),
            window_bytes: usize::try_from(a.memory_window)?.max(1),
            windows_in_flight: a
                .windows_in_flight
                .map_or(dev::pool::WINDOWS_IN_FLIGHT_BY_MEMBERS, |w| w as usize),
            ..RebuildOpts::default()
        },
        |pr| {
            if let Some(b) = &bar {
                b.set_position(pr.cycles_done);
                b.set_message(format!(
                    "{:.1} MB/s",
                    pr.bytes_written as f64 / 1e6 / pr.elapsed_s.max(1e-9)
                ));
            }
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&pr).expect("progress serializes")
                );
            }
        },
    )?;
    if let Some(b) = &bar {
        b.finish();
    }
    let status = p.status();
    if json {
        println!(
            "{}",
            raidforge::pool_args::rebuild_summary_json(&result, &status)
        );
    } else {
        println!(
            "rebuilt {} bytes in {:.2} s ({:.1} MB/s); pool is {}",
            result.bytes_written,
            result.elapsed_s,
            result.bytes_written as f64 / 1e6 / result.elapsed_s.max(1e-9),
            status.state
        );
        for l in &status.lost {
            println!(
                "LOST: logical bytes {}..{} ({})",
                l.logical_offset,
                l.logical_offset + l.length,
                l.reason
            );
        }
    }
    p.close()?;
    Ok(())
}

/// `raidforge scrub`.
#[derive(Args, Debug)]
pub struct ScrubArgs {
    /// Path of the pool descriptor file.
    pub pool: PathBuf,
    /// Upper bound on scrub speed, member bytes read per second: 100M or 100MiB/s (2^20
    /// bytes/s), 100MB/s (10^6); default unlimited.
    #[arg(long, value_parser = parse_speed)]
    pub speed_max: Option<Speed>,
    /// Scrub speed while clients are doing I/O, bytes per second, like MD's sync_speed_min.
    /// A scrub run by this command has the pool to itself (no clients), so only --speed-max
    /// applies; accepted for symmetry with `rebuild`.
    #[arg(long, value_parser = parse_speed)]
    pub speed_min: Option<Speed>,
    /// On a pool without checksums, recompute the parity of stripes that disagree with their
    /// data (Linux MD's `repair`). Without it such stripes are only reported (MD's `check`):
    /// nothing tells whether the data or the parity is wrong. With checksums the data is
    /// verified, so scrub always recomputes the parity.
    #[arg(long)]
    pub rewrite_parity: bool,
    /// Print the report as JSON: checked_bytes, repaired [{member, offset, length, kind}],
    /// unrecoverable [{logical_offset, length, reason}], parity_mismatches, ...
    #[arg(long)]
    pub json: bool,
}

/// Runs a scrub; `Ok(false)` when something is left wrong (unrecoverable data or parity that
/// was only reported).
pub fn scrub(a: ScrubArgs) -> anyhow::Result<bool> {
    raidforge::pool_args::check_speeds(a.speed_min.as_ref(), a.speed_max.as_ref())?;
    if !a.json {
        echo_speeds("scrub", a.speed_min.as_ref(), a.speed_max.as_ref());
    }
    if crate::control::live(&a.pool).is_some() {
        anyhow::bail!(
            "{} is being served: stop `raidforge serve` first (a served pool repairs what its \
             reads find, but scrub runs only on a pool it has to itself)",
            a.pool.display()
        );
    }
    let mut p = Pool::open(&a.pool)?;
    let tty = std::io::stderr().is_terminal() && !a.json;
    let bar = if tty {
        Some(progress_bar("scrub", p.geometry().cycles()))
    } else {
        None
    };
    let r = p.scrub(
        &dev::pool::ScrubOpts {
            speed_max_bytes_per_sec: a.speed_max.as_ref().map(|s| s.bytes_per_sec),
            speed_min_bytes_per_sec: a.speed_min.as_ref().map(|s| s.bytes_per_sec),
            rewrite_parity: a.rewrite_parity,
        },
        |pr| {
            if let Some(b) = &bar {
                b.set_position(pr.cycles_done);
                b.set_message(format!(
                    "{:.1} MB/s",
                    pr.checked_bytes as f64 / 1e6 / pr.elapsed_s.max(1e-9)
                ));
            }
        },
    )?;
    if let Some(b) = &bar {
        b.finish();
    }
    p.close()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "scrubbed {} bytes in {} cycles ({}) in {:.2} s: {} ranges repaired, {} \
             unrecoverable, {} stripes with parity mismatches",
            r.checked_bytes,
            r.cycles_checked,
            if r.checksums {
                "checksums and parity"
            } else {
                "parity only: the pool has no checksums"
            },
            r.elapsed_s,
            r.repaired.len(),
            r.unrecoverable.len(),
            r.parity_mismatches.len()
        );
        for m in r.repaired.iter().take(20) {
            println!(
                "  repaired: member {} bytes {}..{} ({})",
                m.member,
                m.offset,
                m.offset + m.length,
                m.kind
            );
        }
        for l in &r.unrecoverable {
            println!(
                "  UNRECOVERABLE: logical bytes {}..{} ({})",
                l.logical_offset,
                l.logical_offset + l.length,
                l.reason
            );
        }
        for m in r.parity_mismatches.iter().take(20) {
            println!(
                "  parity mismatch: cycle {} stripe {}{}",
                m.cycle,
                m.stripe,
                if m.repaired {
                    " (recomputed)"
                } else {
                    " (reported only: pass --rewrite-parity to recompute it from the data)"
                }
            );
        }
    }
    Ok(r.clean())
}

/// A policy rebuild of a pool no server has: the same machinery as a served pool's (the pool
/// is shared in this process for the duration), without clients.
fn policy_rebuild(
    p: Pool,
    a: &RebuildArgs,
    policy: Option<RebuildPolicy>,
    parallel: usize,
) -> anyhow::Result<()> {
    let sp = SharedPool::new(p, Concurrency::Stripes)?;
    let started = sp.start_rebuild_with(
        RebuildOpts {
            parallel_cycles: parallel,
            speed_max_bytes_per_sec: a.speed_max.as_ref().map(|s| s.bytes_per_sec),
            speed_min_bytes_per_sec: a.speed_min.as_ref().map(|s| s.bytes_per_sec),
            window_bytes: usize::try_from(a.memory_window)?.max(1),
            windows_in_flight: a
                .windows_in_flight
                .map_or(dev::pool::WINDOWS_IN_FLIGHT_BY_MEMBERS, |w| w as usize),
            ..RebuildOpts::default()
        },
        policy,
        a.surrogate.as_deref(),
    );
    if let Err(e) = started {
        sp.close()?;
        return Err(e.into());
    }
    let mut last = None;
    loop {
        let info = sp.rebuild_info();
        if let Some(pr) = info.progress {
            if a.json && last != Some(pr.cycles_done) {
                println!("{}", serde_json::to_string(&pr)?);
                last = Some(pr.cycles_done);
            }
        }
        if !info.running {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let info = sp.rebuild_info();
    let status = sp.close()?;
    if let Some(e) = info.error {
        anyhow::bail!("rebuild stopped: {e}");
    }
    let ido = status.ido.clone().unwrap_or_default();
    if a.json {
        println!(
            "{}",
            serde_json::json!({"done": true, "state": status.state, "policy": ido.policy,
                "ido": ido})
        );
    } else {
        println!(
            "rebuilt with policy {}; {} zones migrated, {} bytes reclaimed; pool is {}",
            ido.policy, ido.migrated_bytes, ido.reclaimed_bytes, status.state
        );
    }
    Ok(())
}

pub fn verify(a: PoolArg) -> anyhow::Result<bool> {
    let r = match crate::control::live(&a.pool) {
        Some(live) => crate::control::verify(&live)?,
        None => {
            let mut p = Pool::open(&a.pool)?;
            let r = p.verify()?;
            p.close()?;
            r
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "checked {} stripes in {} cycles: {} inconsistent, {} not fully checkable (members missing)",
            r.stripes_checked,
            r.cycles_checked,
            r.inconsistent.len(),
            r.stripes_degraded
        );
        for (c, s) in r.inconsistent.iter().take(20) {
            println!("  inconsistent: cycle {c} stripe {s}");
        }
    }
    Ok(r.inconsistent.is_empty())
}

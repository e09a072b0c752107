//! `raidforge create`'s arguments and the size, parity and on/off parsers the pool commands
//! share; `create_pool` is what `raidforge create` and the Python `Pool.create` run.

use clap::Args;
use dev::pool::{CreateOpts, Metadata, Pool, WriteHole};
use raidcore::ParityPolicy;
use std::path::PathBuf;

use crate::layout_cmd::LayoutArgs;

/// Parses sizes like 4096, 64K, 64KiB, 16M, 1G (powers of 1024), 100MB (powers of 1000): the
/// one rule of every command (`raidcore::units`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    raidcore::units::parse_size(s)
}

/// A speed option's value: what was typed, and the bytes per second it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Speed {
    pub given: String,
    pub bytes_per_sec: u64,
}

impl Speed {
    /// `50M (52428800 bytes/s = 50.0 MiB/s = 52.4 MB/s)`.
    pub fn describe(&self) -> String {
        raidcore::units::describe_speed(&self.given, self.bytes_per_sec)
    }
}

/// Parses speeds (bytes per second) like 50M, 50MiB/s (2^20 per M), 50MB/s (10^6 per MB).
pub fn parse_speed(s: &str) -> Result<Speed, String> {
    Ok(Speed {
        given: s.trim().to_string(),
        bytes_per_sec: raidcore::units::parse_speed(s)?,
    })
}

/// Refuses a minimum above a maximum, naming both as given.
pub fn check_speeds(min: Option<&Speed>, max: Option<&Speed>) -> anyhow::Result<()> {
    if let (Some(min), Some(max)) = (min, max) {
        if min.bytes_per_sec > max.bytes_per_sec {
            anyhow::bail!(
                "--speed-min {} is above --speed-max {}",
                min.describe(),
                max.describe()
            );
        }
    }
    Ok(())
}

/// Parses a member index as `raidforge status` labels members: `1` or `m1`.
pub fn parse_member(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.strip_prefix('m').unwrap_or(t);
    digits.parse().map_err(|_| {
        format!("'{s}' is not a member index (members are numbered as `raidforge status` shows them: 0, 1, ... or m0, m1, ...)")
    })
}

/// `raidforge create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Path of the pool descriptor file to write (every later command takes it).
    pub pool: PathBuf,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Member files or block devices, in member order (one per disk).
    #[arg(long = "member", required = true, num_args = 1..)]
    pub members: Vec<PathBuf>,
    /// Size of each member (files are created sparse or grown to it), e.g. 256M (M, MiB: 2^20
    /// bytes; MB: 10^6). Default: the smallest existing member. Member files start sparse and
    /// fill as the pool is written, so create first checks that their file systems have room
    /// for them all (--force skips that). (`--size` is the old spelling.)
    #[arg(long, alias = "size", value_parser = parse_size)]
    pub member_size: Option<u64>,
    /// Chunk (stripe unit) size, a multiple of 4096. Default 64K: pools are made of files and
    /// devices of any size, and a small chunk keeps a cycle of a wide layout small; with
    /// --metadata md, 512K, mdadm's default. (`raidforge sim` defaults to 512K: it models
    /// whole drives, as mdadm makes them.)
    #[arg(long, value_parser = parse_size)]
    pub chunk: Option<u64>,
    /// On-disk format of the superblocks: `raidforge` (default; everything raidforge does) or
    /// `md`: Linux MD's v1.2 superblock with mdadm's defaults (data offset, bad block log,
    /// 512K chunks), so that the kernel's `mdadm --assemble` runs the pool as an ordinary MD
    /// array and raidforge keeps running it too. Only raid0, raid1, raid4, raid5, raid6 and
    /// raid10 (in every MD layout, see --layout); the options that need raidforge's own
    /// format (--checksums, --write-hole journal, --parity lazy, --surrogate, spares) are
    /// refused with it.
    #[arg(long, default_value = "raidforge", value_parser = Metadata::parse)]
    pub metadata: Metadata,
    /// Make every member as slow as a disk: KIND:BANDWIDTH:LATENCY, e.g. hdd:150MB/s:8ms
    /// (MB/s: 10^6 bytes/s; M/s or MiB/s: 2^20).
    #[arg(long)]
    pub emulate: Option<String>,
    /// Overwrite members (and a descriptor) that already exist, and make member files larger
    /// than their file system's free space (they start sparse; writes fail when it runs out).
    #[arg(long)]
    pub force: bool,
    /// Open members with O_DIRECT, bypassing the page cache (every member I/O is then 4 KiB
    /// aligned; the file system must support O_DIRECT).
    #[arg(long)]
    pub direct: bool,
    /// How writes keep the two parities of a two-parity layout (rm2, raid6, raidplus/random/
    /// hash with --level 6) up to date. `eager` (default): every write updates both before it
    /// completes (a small write costs 6 member I/Os). `lazy` (seed 002's lazy parity update):
    /// a write updates the data and one parity (4 I/Os, like RAID5) and lists the stripe in a
    /// small on-disk list of deferred parity; the other parity is recomputed later (when a
    /// served pool is idle, when the list is full, by `raidforge flush`, and first thing when
    /// a member fails). While stripes are listed the pool survives one failure, not two;
    /// `raidforge status` shows the list and the current tolerance.
    #[arg(long, default_value = "eager", value_parser = parse_parity)]
    pub parity: ParityPolicy,
    /// Bound of the deferred-parity list (stripes) under --parity lazy; when it is full,
    /// writes update both parities until a flush makes room.
    #[arg(long)]
    pub bpgl_capacity: Option<usize>,
    /// Per-block checksums: `on` keeps a CRC-32C of every 4 KiB block of every member (in a
    /// region of 1/1024 of the member before the data), so that reads detect silent
    /// corruption (bit rot, misdirected writes, a byte changed behind the engine's back) and
    /// repair it from redundancy, and `raidforge scrub` can tell which member is wrong. Costs a
    /// checksum-page write with every member write and whole-4-KiB member I/O. `off`
    /// (default): like Linux MD, only parity can be checked.
    #[arg(long, default_value = "off", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub checksums: bool,
    /// Protection against the RAID write hole: a crash between a stripe's data and parity
    /// writes leaves parity that disagrees with the data, and a later member failure then
    /// rebuilds wrong bytes for data the crash never touched, silently. `journal`: every
    /// write first lands, data and parity together, in a journal kept on two (RAID6: three)
    /// members, and is replayed after a crash; a write is then durable when it completes, and
    /// small writes cost one extra synced journal write (see bench/write_hole.sh). `none`
    /// (default, like Linux MD): no journal; writes are durable after a flush.
    #[arg(long, default_value = "none", value_parser = WriteHole::parse)]
    pub write_hole: WriteHole,
    /// Size of the journal region on every member under --write-hole journal, e.g. 16M
    /// (default: 1/32 of the member, between 2 MiB and 64 MiB). The data area starts after it.
    #[arg(long, value_parser = parse_size)]
    pub journal_size: Option<u64>,
    /// Surrogate pool for on-line rebuilds (seed 003): another raidforge pool (a RAID1 of two
    /// members is plenty) that takes redirected writes and hot zones while this pool
    /// rebuilds with `raidforge rebuild --rebuild-policy ido|workout|vdf`. Create it first. Either
    /// its descriptor (opened by this process) or the NBD address of a pool that another
    /// process serves: nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH.
    #[arg(long)]
    pub surrogate: Option<PathBuf>,
    /// Zone size for popularity tracking (rounded up to whole layout cycles, and to 1/32768
    /// of the pool: a pool above 384 GiB gets larger zones), e.g. 12M. Every
    /// request adds one to its zone's count (halved every 65536 requests); an IDO rebuild
    /// rebuilds and migrates the hottest zones first.
    #[arg(long, value_parser = parse_size, default_value = "12M")]
    pub zone_size: u64,
    /// A hot spare (repeat for more): a blank file, device or NBD export that takes the place
    /// of a failed member without a human when the pool is served (`raidforge serve`), after
    /// which the rebuild starts by itself. Must be at least as large as a member. Add more
    /// later with `raidforge add POOL --spare PATH`.
    #[arg(long = "spare", value_name = "PATH")]
    pub hot_spares: Vec<PathBuf>,
    /// Print the new pool's status as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Parses `on` / `off`.
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{s}': say on or off")),
    }
}

/// Parses `eager` / `lazy`.
pub fn parse_parity(s: &str) -> Result<ParityPolicy, String> {
    s.parse()
}

/// Creates the pool `a` describes (members, superblocks, descriptor) and records its zone size
/// and surrogate; the pool is returned open.
pub fn create_pool(a: &CreateArgs) -> anyhow::Result<Pool> {
    let (scheme, params) = a.layout.params()?;
    let md = a.metadata == Metadata::Md;
    if md && a.surrogate.is_some() {
        anyhow::bail!(
            "--surrogate needs raidforge's own on-disk format; Linux MD's superblock \
             (--metadata md) cannot record it"
        );
    }
    let chunk = a.chunk.unwrap_or(if md { 512 << 10 } else { 64 << 10 });
    let mut pool = Pool::create(
        &a.pool,
        CreateOpts {
            scheme,
            params,
            members: a.members.clone(),
            size_bytes: a.member_size,
            chunk_bytes: chunk,
            emulate: a.emulate.clone(),
            force: a.force,
            direct: a.direct,
            parity: a.parity,
            bpgl_capacity: a.bpgl_capacity,
            checksums: a.checksums,
            write_hole: a.write_hole,
            journal_bytes: a.journal_size,
            metadata: a.metadata,
        },
    )?;
    if !md {
        let zone = a
            .zone_size
            .max(dev::ido::Ido::min_zone_bytes(pool.capacity_bytes()));
        pool.configure_ido(Some(zone), a.surrogate.as_deref())?;
    }
    for s in &a.hot_spares {
        pool.add_spare(s)?;
    }
    Ok(pool)
}

/// The last line of `raidforge rebuild --json` (a rebuild without a policy): what was done and
/// the pool's state after it.
pub fn rebuild_summary_json(
    result: &dev::pool::RebuildProgress,
    status: &dev::pool::Status,
) -> serde_json::Value {
    serde_json::json!({"done": true, "elapsed_s": result.elapsed_s,
        "bytes_written": result.bytes_written, "cycles": result.cycles_total,
        "state": status.state, "lost": status.lost, "repairs": status.repairs})
}

/// What failing `member` now would lose, as the start of a sentence ("failing member 2 would
/// lose data: with m0 failed, some stripes would have too few members left"), or `None` when
/// the pool survives it (or `member` is out of range or already failed: the pool's own error
/// says so). Asked of the layout and the recorded state (`ArrayState::survives_losing`),
/// never guessed. `raidforge fail` (and a served pool's control socket) refuse on it without
/// `--force`; the Python `Pool.fail` without `force=True`. Each adds its own advice.
pub fn fail_loss(p: &Pool, member: usize) -> Option<String> {
    let state = p.state();
    if member >= p.geometry().disks() || state.failed().contains(&(member as layout::Disk)) {
        return None;
    }
    if state.survives_losing(p.geometry(), &[member as layout::Disk]) {
        return None;
    }
    let geo = p.geometry();
    let oldest = (0..geo.cycles())
        .map(|c| state.cycle_generation(c))
        .min()
        .unwrap_or(0);
    let mut missing: Vec<String> = state
        .failed()
        .iter()
        .map(|d| format!("m{d} failed"))
        .collect();
    missing.extend(
        (0..geo.disks() as layout::Disk)
            .filter(|&d| state.replaced_at(d) > oldest)
            .map(|d| format!("m{d} replaced but not rebuilt yet")),
    );
    Some(format!(
        "failing member {member} would lose data: with {}, some stripes would have too few \
         members left",
        missing.join(" and ")
    ))
}

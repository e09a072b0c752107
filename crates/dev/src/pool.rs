//! Pools: an array of members on files or block devices, its descriptor file and superblocks,
//! and the operations mdadm users expect (create, assemble, read, write, fail, replace,
//! rebuild, verify, status). All RAID decisions are raidcore's; this module keeps the state on
//! disk and runs the plans.
//!
//! On disk:
//! - every member starts with a superblock ([`raidcore::superblock`]) and holds its data area from
//!   `data_offset_bytes` on;
//! - the *descriptor* (the POOL path the commands take) is a small JSON file naming the members
//!   (paths, emulated speed) and their cumulative I/O counters. It is a convenience: `assemble`
//!   rebuilds it from the members' superblocks alone.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use layout::{Disk, Params, SchemeKind};
use raidcore::lazy::{BpglRecord, BPGL_DEFAULT_CAPACITY, BPGL_MAX_CAPACITY, BPGL_SLOT_BYTES};
use raidcore::superblock::{
    superblock_slot, ArrayStateTag, Event, Superblock, BPGL_OFFSET_BYTES,
    DEFAULT_DATA_OFFSET_BYTES, FEATURE_CHECKSUMS, FEATURE_JOURNAL, SUPERBLOCK_BYTES,
    SUPERBLOCK_SLOTS,
};
use raidcore::{
    plan_flush_cycle, plan_read, plan_rebuild_cycle, plan_write, plan_write_lazy, ArrayState,
    Geometry, ParityPolicy, WritePolicy,
};
use serde::{Deserialize, Serialize};

use crate::csum::Checksums;
use crate::exec::{run_plans, Counters, LoggedWriteError, Members};
use crate::ido::{Ido, IdoStatus, Phase, DEFAULT_ZONE_BYTES, IDO_OFFSET_BYTES, IDO_SLOT_BYTES};
use crate::journal::{Journal, JournalGeometry, JournalStats};
pub use crate::scrub::{
    LostRange, MemberRange, RepairCounts, ScrubOpts, ScrubProgress, ScrubReport,
};
use crate::{Emulated, FileMember, Member, OpenOpts, Speed};

/// Everything that can go wrong with a pool, each naming what and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// A bad argument (what is wrong and what to do).
    #[error("{0}")]
    Usage(String),
    /// The descriptor file cannot be read or is not a pool descriptor.
    #[error("pool descriptor {path}: {reason}")]
    Descriptor { path: PathBuf, reason: String },
    /// A member's superblock is missing, damaged, or belongs elsewhere.
    #[error("member {index} ({path}): {reason}")]
    Member {
        index: usize,
        path: PathBuf,
        reason: String,
    },
    /// I/O on a member failed in a way the array could not absorb.
    #[error("I/O error: {0}")]
    Io(String),
    /// The layout refused the parameters.
    #[error(transparent)]
    Layout(#[from] layout::LayoutError),
    /// The planner refused the request or event.
    #[error(transparent)]
    Core(#[from] raidcore::CoreError),
    /// Data in these logical ranges is lost: it read wrong (a checksum mismatch or a read
    /// error) and the remaining redundancy could not recompute it. Nothing wrong was returned.
    #[error("data lost at logical bytes {}: it read wrong and the redundancy could not repair it; \
             restore these ranges from a backup or rewrite them (writing a whole lost range \
             clears it)", crate::scrub::describe_ranges(.ranges))]
    Lost { ranges: Vec<LostRange> },
}

type Result<T> = std::result::Result<T, PoolError>;

/// A request re-planned this many times (members failing, blocks that keep reading wrong
/// after their repair) gives up.
const MAX_REPLANS: usize = 32;

fn gave_up(what: &str, offset: u64) -> PoolError {
    PoolError::Io(format!(
        "{what} at {offset}: gave up after {MAX_REPLANS} attempts (members keep failing, or \
         blocks keep reading wrong after being repaired: check the members)"
    ))
}

/// Member I/O alignment (and buffer alignment) for O_DIRECT members.
pub const DIRECT_ALIGN_BYTES: u64 = 4096;

/// The descriptor file's content.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Descriptor {
    /// Always "raidforge-pool".
    pub format: String,
    pub version: u32,
    /// Hex array UUID, the same as in every member's superblock.
    pub uuid: String,
    pub members: Vec<MemberDesc>,
    /// Members are opened with O_DIRECT (and every member I/O is 4 KiB aligned).
    #[serde(default)]
    pub direct: bool,
    /// Blocks found bad and repaired so far (checksums, read errors), over the pool's life.
    #[serde(default)]
    pub repairs: RepairCounts,
    /// Logical ranges known lost (reads of them fail until they are rewritten whole).
    #[serde(default)]
    pub lost: Vec<LostRange>,
}

/// One member in the descriptor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemberDesc {
    pub path: PathBuf,
    /// Emulated speed (`hdd:150MB/s:8ms`), if any.
    #[serde(default)]
    pub emulate: Option<String>,
    /// Bytes read from this member by all commands so far.
    #[serde(default)]
    pub read_bytes: u64,
    /// Bytes written to this member by all commands so far.
    #[serde(default)]
    pub write_bytes: u64,
    /// Read operations on this member's data area by all commands so far.
    #[serde(default)]
    pub reads: u64,
    /// Write operations on this member's data area by all commands so far.
    #[serde(default)]
    pub writes: u64,
    /// Writes of the deferred-parity list (metadata) to this member so far.
    #[serde(default)]
    pub meta_writes: u64,
}

/// How to create a pool.
#[derive(Clone, Debug)]
pub struct CreateOpts {
    pub scheme: SchemeKind,
    pub params: Params,
    pub members: Vec<PathBuf>,
    /// Member size in bytes (files are created or grown to it); default: the smallest
    /// existing member.
    pub size_bytes: Option<u64>,
    pub chunk_bytes: u64,
    /// Emulated speed for every member.
    pub emulate: Option<String>,
    /// Overwrite members that already hold a raidforge superblock.
    pub force: bool,
    /// Open members with O_DIRECT (bypass the page cache); member I/O is then 4 KiB aligned.
    pub direct: bool,
    /// Eager (both parities on every write) or lazy (defer one parity of two-parity layouts).
    pub parity: ParityPolicy,
    /// Bound of the deferred-parity list (default [`BPGL_DEFAULT_CAPACITY`]).
    pub bpgl_capacity: Option<usize>,
    /// Keep a CRC-32C of every 4 KiB block of every member (superblock feature bit 1): reads
    /// verify them and repair what does not match from redundancy. Every member I/O is then
    /// whole 4 KiB blocks, and each write also writes its blocks' checksum page.
    pub checksums: bool,
    /// Write-hole protection.
    pub write_hole: WriteHole,
    /// Bytes of the journal region on every member under `WriteHole::Journal` (default
    /// [`default_journal_bytes`]); a multiple of 4096, at least 64 KiB.
    pub journal_bytes: Option<u64>,
}

/// Write-hole protection (`raidforge create --write-hole`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteHole {
    /// No protection: a crash between a stripe's data and parity writes can leave parity
    /// that disagrees with the data, and a later member failure then reconstructs wrong bytes
    /// for data the crash never touched.
    #[default]
    None,
    /// A write-ahead journal on the members (`crate::journal`): every write cycle's new
    /// member contents are made durable in the journal before the in-place writes, and
    /// replayed after a crash.
    Journal,
}

impl WriteHole {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteHole::None => "none",
            WriteHole::Journal => "journal",
        }
    }
    /// Parses `none` or `journal`.
    pub fn parse(s: &str) -> std::result::Result<WriteHole, String> {
        match s {
            "none" | "off" => Ok(WriteHole::None),
            "journal" => Ok(WriteHole::Journal),
            _ => Err(format!(
                "unknown write-hole protection '{s}': use 'journal' (crash-safe parity) or 'none'"
            )),
        }
    }
}

/// Journal region for members of `member_bytes` when none is asked for: 1/32 of the member,
/// between 2 MiB and 64 MiB, whole MiB.
pub fn default_journal_bytes(member_bytes: u64) -> u64 {
    (member_bytes / 32).clamp(2 << 20, 64 << 20) >> 20 << 20
}

/// Where the journal region starts on every member (after the IDO metadata slots).
pub const JOURNAL_OFFSET_BYTES: u64 = 1 << 20;

/// How to rebuild.
#[derive(Clone, Debug)]
pub struct RebuildOpts {
    /// Cycles rebuilt together (1 = sequential, like MD).
    pub parallel_cycles: usize,
    /// Upper bound on rebuild bytes written per second (None = unlimited).
    pub speed_max_bytes_per_sec: Option<u64>,
    /// While clients are doing I/O (a served pool), the rebuild backs off to this rate, like
    /// MD's sync_speed_min (None = no back-off).
    pub speed_min_bytes_per_sec: Option<u64>,
    /// Batches run at once (2 overlaps one batch's writes with the next one's reads).
    pub batches_in_flight: usize,
    /// Stop after rebuilding this many cycles (None = rebuild everything). The progress made
    /// is recorded in the superblocks, so a later rebuild resumes where this one stopped.
    pub max_cycles: Option<u64>,
}

impl Default for RebuildOpts {
    /// Eight cycles at a time, two batches in flight, no speed limit, every cycle.
    fn default() -> RebuildOpts {
        RebuildOpts {
            parallel_cycles: 8,
            speed_max_bytes_per_sec: None,
            speed_min_bytes_per_sec: None,
            batches_in_flight: 2,
            max_cycles: None,
        }
    }
}

/// Progress of a rebuild, passed to the caller's callback.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct RebuildProgress {
    pub cycles_done: u64,
    pub cycles_total: u64,
    pub bytes_written: u64,
    pub elapsed_s: f64,
}

/// Per-member status.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemberStatus {
    pub index: usize,
    pub path: PathBuf,
    /// "active", "failed", "rebuilding" (replaced, not yet rebuilt) or "spare".
    pub state: String,
    pub data_offset_bytes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Data-area read and write operations, and deferred-parity list writes.
    #[serde(default)]
    pub reads: u64,
    #[serde(default)]
    pub writes: u64,
    #[serde(default)]
    pub meta_writes: u64,
    pub emulate: Option<String>,
}

/// What `status` reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    /// "clean", "degraded", "rebuilding" (some cycles not in the target layout) or "failed"
    /// (data lost).
    pub state: String,
    pub scheme: String,
    pub layout: String,
    pub uuid: String,
    pub size_bytes: u64,
    pub chunk_bytes: u64,
    pub cycles: u64,
    pub cycles_clean: u64,
    pub failed: Vec<Disk>,
    pub members: Vec<MemberStatus>,
    /// "eager" or "lazy".
    #[serde(default)]
    pub parity: String,
    /// Stripes whose background parity is deferred (the BPGL's length) and its bound.
    #[serde(default)]
    pub bpgl_len: usize,
    #[serde(default)]
    pub bpgl_capacity: usize,
    /// Member failures the pool survives now: the scheme's tolerance, 1 at most while parity
    /// updates are deferred, minus the members already failed.
    #[serde(default)]
    pub fault_tolerance: usize,
    /// Per-block checksums on (reads verify them).
    #[serde(default)]
    pub checksums: bool,
    /// Bad blocks found and repaired over the pool's life.
    #[serde(default)]
    pub repairs: RepairCounts,
    /// Logical ranges known lost: reads of them fail, naming them.
    #[serde(default)]
    pub lost: Vec<LostRange>,
    /// Write-hole protection: "journal" or "none".
    #[serde(default)]
    pub write_hole: String,
    /// Journal use since the pool was opened (`None` without a journal, or for a status peek
    /// of a pool another process has open).
    #[serde(default)]
    pub journal: Option<JournalStats>,
    /// Zone tracking, the rebuild policy, surrogate and D-Map (seed 003, `crate::ido`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ido: Option<IdoStatus>,
}

/// Result of `verify`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VerifyReport {
    pub cycles_checked: u64,
    pub stripes_checked: u64,
    /// Stripes whose parity or mirrors disagree: (cycle, stripe).
    pub inconsistent: Vec<(u64, usize)>,
    /// Stripes that could not be checked fully because a unit is missing.
    pub stripes_degraded: u64,
}

/// Wraps every member a pool opens (member index, opened member -> the member the pool uses):
/// the fault-injection harness ([`crate::faultsim`]) puts its fault layer between the pool and
/// its files this way. Applied after assembly has read the superblocks.
pub type MemberWrap = Arc<dyn Fn(usize, Arc<dyn Member>) -> Arc<dyn Member> + Send + Sync>;

/// An open pool.
pub struct Pool {
    desc_path: PathBuf,
    pub(crate) desc: Descriptor,
    uuid: [u8; 16],
    kind: SchemeKind,
    params: Params,
    pub(crate) geo: Geometry,
    pub(crate) state: ArrayState,
    events: Vec<Event>,
    sb_generation: u64,
    pub(crate) data_offset_bytes: u64,
    data_bytes: u64,
    created_unix_secs: u64,
    pub(crate) members: Vec<Option<Arc<dyn Member>>>,
    pub(crate) counters: Vec<Counters>,
    pub(crate) policy: WritePolicy,
    /// Eager or lazy parity (recorded in the superblocks).
    pub(crate) parity: ParityPolicy,
    /// Sequence number of the newest persisted BPGL record.
    bpgl_seq: u64,
    /// The persisted BPGL may differ from the one in memory.
    bpgl_dirty: bool,
    /// The list as last persisted (a rebuild drops entries without a flush).
    bpgl_on_disk: Vec<raidcore::StripeId>,
    /// Per-block checksums, when the pool has them, and their region (member bytes).
    pub(crate) checksums: Option<Arc<Checksums>>,
    checksum_region: (u64, u64),
    /// Lost blocks found during the current rebuild, poisoned once the rebuild is over.
    pub(crate) lost_pending: Vec<crate::scrub::LostGroup>,
    /// Write-hole protection, and the journal region (absolute offset, bytes) on every
    /// member (0, 0 without a journal).
    pub(crate) write_hole: WriteHole,
    journal_region: (u64, u64),
    /// The open journal (`None` without one, and for a status peek).
    pub(crate) journal: Option<Arc<Journal>>,
    /// Wraps members opened later (replacements); see [`MemberWrap`].
    member_wrap: Option<MemberWrap>,
    /// Zone popularity, rebuild policy state, surrogate and D-Map (`crate::ido`).
    pub(crate) ido: Arc<Ido>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

fn random_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    if let Ok(f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = (&f).read_exact(&mut u);
    }
    // Fall back to the clock and pid if urandom was unreadable (never expected on Linux).
    if u == [0u8; 16] {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        u[..16].copy_from_slice(&(t ^ ((std::process::id() as u128) << 64)).to_le_bytes());
    }
    u
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Opens a member (creating or growing a file to `create` bytes), locked against other
/// raidforge processes when `lock` (every pool that does I/O; only a status peek does not).
fn open_member(
    path: &Path,
    emulate: &Option<String>,
    create: Option<u64>,
    lock: bool,
    direct: bool,
) -> std::io::Result<Arc<dyn Member>> {
    let f = FileMember::open(
        path,
        OpenOpts {
            direct,
            create_bytes: create,
        },
    )?;
    if lock {
        f.lock_exclusive()?;
    }
    Ok(match emulate {
        Some(spec) => {
            let speed = Speed::parse(spec).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
            })?;
            Arc::new(Emulated::new(f, speed))
        }
        None => Arc::new(f),
    })
}

/// What a member path names, for spotting the same file given twice: the canonical path, or
/// for a file not created yet its canonical directory and name.
fn path_identity(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let dir = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match (std::fs::canonicalize(dir), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => p.to_path_buf(),
    }
}

/// The member's superblock: of its two copies ([`SUPERBLOCK_SLOTS`]), the valid one with the
/// newest generation (a copy naming another pool than the first valid one is ignored). Fails
/// with the first copy's error when neither is valid.
fn read_superblock(m: &dyn Member) -> std::result::Result<Superblock, String> {
    let mut best: Option<Superblock> = None;
    let mut first_err: Option<String> = None;
    for (k, &off) in SUPERBLOCK_SLOTS.iter().enumerate() {
        let mut b = vec![0u8; SUPERBLOCK_BYTES];
        if let Err(e) = m.read_at(&mut b, off) {
            if k == 0 {
                return Err(e.to_string());
            }
            continue; // a member too small for the second copy (not a raidforge member)
        }
        match Superblock::decode(&b) {
            Ok(sb) => {
                if best
                    .as_ref()
                    .is_none_or(|x| sb.uuid == x.uuid && sb.generation > x.generation)
                {
                    best = Some(sb);
                }
            }
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    best.ok_or_else(|| first_err.unwrap_or_default())
}

impl Pool {
    /// Creates a new pool: lays out the members, writes their superblocks and the descriptor.
    pub fn create(desc_path: &Path, opts: CreateOpts) -> Result<Pool> {
        Self::create_wrapped(desc_path, opts, None)
    }

    /// [`Pool::create`] with every member wrapped by `wrap` (before the first superblock is
    /// written), and every replacement later.
    pub fn create_wrapped(
        desc_path: &Path,
        opts: CreateOpts,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        let n = opts.members.len();
        let mut params = opts.params.clone();
        match params.disks {
            None => params.disks = Some(n),
            Some(d) if d != n => {
                return Err(PoolError::Usage(format!(
                    "--disks {d} but {n} --member paths given: give one --member per disk"
                )))
            }
            _ => {}
        }
        if n == 0 {
            return Err(PoolError::Usage("no --member given".into()));
        }
        if desc_path.exists() && !opts.force {
            return Err(PoolError::Usage(format!(
                "{} already exists: choose another pool path or pass --force",
                desc_path.display()
            )));
        }
        let scheme = layout::build(opts.scheme, &params)?;
        if opts.chunk_bytes == 0 || opts.chunk_bytes % 4096 != 0 {
            return Err(PoolError::Usage(format!(
                "--chunk {} must be a positive multiple of 4096 bytes",
                opts.chunk_bytes
            )));
        }
        // Sizes: given, or the smallest existing member.
        let size = match opts.size_bytes {
            Some(s) => s,
            None => {
                let mut min = u64::MAX;
                for p in &opts.members {
                    let m = FileMember::open(p, OpenOpts::default()).map_err(|e| {
                        PoolError::Usage(format!("{e}; pass --size to create member files"))
                    })?;
                    min = min.min(m.size_bytes());
                }
                min
            }
        };
        // Metadata regions from 1 MiB up: the write journal first, then the block checksums;
        // the data area after them, aligned to 1 MiB and to the chunk.
        let journal_region = match opts.write_hole {
            WriteHole::None => (0, 0),
            WriteHole::Journal => {
                let j = opts
                    .journal_bytes
                    .unwrap_or_else(|| default_journal_bytes(size));
                if j < 64 << 10 || !j.is_multiple_of(4096) {
                    return Err(PoolError::Usage(format!(
                        "--journal-size {j} must be a multiple of 4096 bytes, at least 64 KiB"
                    )));
                }
                (JOURNAL_OFFSET_BYTES, j)
            }
        };
        let regions_start =
            (JOURNAL_OFFSET_BYTES + journal_region.1).max(DEFAULT_DATA_OFFSET_BYTES);
        let checksum_region = if opts.checksums {
            let copies = crate::csum::copies_for(scheme.cycle().disks, scheme.tolerance());
            let len = crate::csum::region_bytes(size.saturating_sub(regions_start), copies);
            (regions_start, len)
        } else {
            (0, 0)
        };
        let regions_end = regions_start + checksum_region.1;
        let data_offset = if regions_end == DEFAULT_DATA_OFFSET_BYTES {
            DEFAULT_DATA_OFFSET_BYTES
        } else {
            regions_end
                .next_multiple_of(1 << 20)
                .next_multiple_of(opts.chunk_bytes.max(4096))
        };
        if size <= data_offset {
            return Err(PoolError::Usage(format!(
                "member size {size} bytes is too small: the first {data_offset} bytes hold metadata"
            )));
        }
        // Whole chunks only.
        let data_bytes = (size - data_offset) / opts.chunk_bytes * opts.chunk_bytes;
        let geo = match Geometry::new(scheme, opts.chunk_bytes, data_bytes) {
            Err(raidcore::CoreError::MemberTooSmall { needed_bytes, .. }) => {
                return Err(PoolError::Usage(format!(
                    "member size {size} bytes is too small: this layout needs at least {} bytes \
                     per member ({data_offset} of metadata and one cycle of {needed_bytes})",
                    data_offset + needed_bytes
                )))
            }
            r => r?,
        };
        // O_DIRECT needs block-aligned member I/O; the planner then reads and merges partial
        // blocks itself.
        // O_DIRECT and checksums (verified per 4 KiB block) both need whole-block member I/O.
        let geo = if opts.direct || opts.checksums {
            geo.with_io_align(DIRECT_ALIGN_BYTES)?
        } else {
            geo
        };
        if let Some(spec) = &opts.emulate {
            Speed::parse(spec).map_err(|e| PoolError::Usage(format!("--emulate {spec}: {e}")))?;
        }
        if let Some(dir) = desc_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(PoolError::Usage(format!(
                    "cannot write {}: directory {} does not exist",
                    desc_path.display(),
                    dir.display()
                )));
            }
        }
        // Check every member before touching any, so that a refused create changes nothing.
        let mut seen: Vec<PathBuf> = Vec::new();
        for (i, p) in opts.members.iter().enumerate() {
            let member_err = |reason: String| PoolError::Member {
                index: i,
                path: p.clone(),
                reason,
            };
            let id = path_identity(p);
            if seen.contains(&id) {
                return Err(member_err(
                    "is given twice: every member needs its own file or device".into(),
                ));
            }
            seen.push(id);
            match FileMember::open(p, OpenOpts::default()) {
                Ok(existing) => {
                    existing
                        .lock_exclusive()
                        .map_err(|e| member_err(e.to_string()))?;
                    if let Ok(sb) = read_superblock(&existing) {
                        if !opts.force {
                            return Err(member_err(format!(
                                "already a member of pool {} (pass --force to overwrite it)",
                                hex(&sb.uuid)
                            )));
                        }
                    }
                    let is_file = std::fs::metadata(p).is_ok_and(|m| m.is_file());
                    if !is_file && existing.size_bytes() < size {
                        return Err(member_err(format!(
                            "device holds {} bytes, need {size}",
                            existing.size_bytes()
                        )));
                    }
                }
                Err(e) if p.exists() => return Err(member_err(e.to_string())),
                Err(_) => {
                    let dir = p
                        .parent()
                        .filter(|d| !d.as_os_str().is_empty())
                        .unwrap_or(Path::new("."));
                    if !dir.is_dir() {
                        return Err(member_err(format!(
                            "cannot create it: directory {} does not exist",
                            dir.display()
                        )));
                    }
                }
            }
        }
        // Start every member zeroed, which is parity-consistent for every code (all-zero data
        // has all-zero P and Q).
        let mut members: Vec<Option<Arc<dyn Member>>> = Vec::new();
        for (i, p) in opts.members.iter().enumerate() {
            if let Ok(existing) = FileMember::open(p, OpenOpts::default()) {
                if let Ok(sb) = read_superblock(&existing) {
                    if !opts.force {
                        return Err(PoolError::Member {
                            index: i,
                            path: p.clone(),
                            reason: format!(
                                "already a member of pool {} (pass --force to overwrite it)",
                                hex(&sb.uuid)
                            ),
                        });
                    }
                }
                let meta = std::fs::metadata(p).map_err(|e| PoolError::Io(e.to_string()))?;
                if meta.is_file() {
                    // Truncate then grow: a sparse file of zeros.
                    let f = std::fs::OpenOptions::new()
                        .write(true)
                        .open(p)
                        .map_err(|e| PoolError::Io(format!("{}: {e}", p.display())))?;
                    f.set_len(0)
                        .and_then(|_| f.set_len(size))
                        .map_err(|e| PoolError::Io(format!("{}: {e}", p.display())))?;
                } else {
                    if existing.size_bytes() < size {
                        return Err(PoolError::Member {
                            index: i,
                            path: p.clone(),
                            reason: format!(
                                "device holds {} bytes, need {size}",
                                existing.size_bytes()
                            ),
                        });
                    }
                    let zero = vec![0u8; 1 << 20];
                    let mut off = 0;
                    while off < size {
                        let n = zero.len().min((size - off) as usize);
                        existing
                            .write_at(&zero[..n], off)
                            .map_err(|e| PoolError::Io(e.to_string()))?;
                        off += n as u64;
                    }
                }
            }
            let m = open_member(p, &opts.emulate, Some(size), true, opts.direct).map_err(|e| {
                PoolError::Member {
                    index: i,
                    path: p.clone(),
                    reason: e.to_string(),
                }
            })?;
            if m.size_bytes() < size {
                return Err(PoolError::Member {
                    index: i,
                    path: p.clone(),
                    reason: format!("holds {} bytes, need {size}", m.size_bytes()),
                });
            }
            members.push(Some(m));
        }
        let uuid = random_uuid();
        let desc = Descriptor {
            format: "raidforge-pool".into(),
            version: 1,
            uuid: hex(&uuid),
            members: opts
                .members
                .iter()
                .map(|p| MemberDesc {
                    path: std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()),
                    emulate: opts.emulate.clone(),
                    read_bytes: 0,
                    write_bytes: 0,
                    reads: 0,
                    writes: 0,
                    meta_writes: 0,
                })
                .collect(),
            direct: opts.direct,
            repairs: RepairCounts::default(),
            lost: Vec::new(),
        };
        let checksums = if opts.checksums {
            Some(Arc::new(
                Checksums::create_zeroed(
                    &members,
                    checksum_region.0,
                    data_bytes,
                    crate::csum::copies_for(geo.disks(), geo.scheme().tolerance()),
                )
                .map_err(|e| PoolError::Io(format!("writing the checksum regions: {e}")))?,
            ))
        } else {
            None
        };
        let mut state = ArrayState::new(&geo);
        let cap = opts.bpgl_capacity.unwrap_or(BPGL_DEFAULT_CAPACITY);
        if cap > BPGL_MAX_CAPACITY {
            return Err(PoolError::Usage(format!(
                "--bpgl-capacity {cap} is too large (at most {BPGL_MAX_CAPACITY})"
            )));
        }
        state.set_bpgl_capacity(cap);
        if opts.parity == ParityPolicy::Lazy && !state.lazy_groups().supported() {
            return Err(PoolError::Usage(format!(
                "--parity lazy needs a two-parity layout (rm2, raid6, or raidplus/random/hash \
                 with --level 6); {} has no parity to defer",
                opts.scheme.name()
            )));
        }
        let capacity_for_ido = geo.capacity_bytes();
        let data_per_cycle_for_ido = geo.data_per_cycle() * geo.chunk_bytes();
        let mut pool = Pool {
            desc_path: desc_path.to_path_buf(),
            desc,
            uuid,
            kind: opts.scheme,
            params,
            counters: (0..n).map(|_| Counters::default()).collect(),
            geo,
            state,
            events: Vec::new(),
            sb_generation: 0,
            data_offset_bytes: data_offset,
            data_bytes,
            created_unix_secs: now_unix(),
            members,
            policy: WritePolicy::Md,
            parity: opts.parity,
            bpgl_seq: 0,
            bpgl_dirty: true,
            bpgl_on_disk: Vec::new(),
            checksums,
            checksum_region,
            lost_pending: Vec::new(),
            write_hole: opts.write_hole,
            journal_region,
            journal: None,
            member_wrap: None,
            ido: Arc::new(Ido::new(
                capacity_for_ido,
                data_per_cycle_for_ido,
                DEFAULT_ZONE_BYTES,
            )?),
        };
        pool.apply_wrap(wrap);
        pool.persist(ArrayStateTag::Clean)?;
        if opts.write_hole == WriteHole::Journal {
            let j = Journal::create(pool.journal_geometry(), &pool.members)
                .map_err(|e| PoolError::Io(e.to_string()))?;
            pool.journal = Some(Arc::new(j));
        }
        Ok(pool)
    }

    /// Opens a pool from its descriptor, checking every member's superblock. The members stay
    /// locked against other raidforge processes until the pool is dropped.
    pub fn open(desc_path: &Path) -> Result<Pool> {
        let desc = Self::read_descriptor(desc_path)?;
        Self::from_members(desc_path, desc, true)
    }

    /// [`Pool::open`] with every member wrapped by `wrap` once assembly has read the
    /// superblocks (before anything is written), and every replacement later.
    pub fn open_wrapped(desc_path: &Path, wrap: MemberWrap) -> Result<Pool> {
        let desc = Self::read_descriptor(desc_path)?;
        Self::from_members_wrapped(desc_path, desc, true, Some(wrap))
    }

    fn apply_wrap(&mut self, wrap: Option<MemberWrap>) {
        if let Some(w) = &wrap {
            for (i, m) in self.members.iter_mut().enumerate() {
                if let Some(inner) = m.take() {
                    *m = Some(w(i, inner));
                }
            }
        }
        self.member_wrap = wrap;
    }

    /// The status of a pool without opening it for I/O: no lock taken, nothing written, so it
    /// works while another process (a rebuild, say) has the pool open; rebuild progress is then
    /// what that process last recorded (it does at least every second).
    pub fn peek_status(desc_path: &Path) -> Result<Status> {
        let desc = Self::read_descriptor(desc_path)?;
        let mut tries = 0;
        loop {
            match Self::from_members(desc_path, desc.clone(), false) {
                Ok(p) => return Ok(p.status()),
                // A superblock being rewritten by the other process can read torn.
                Err(PoolError::Member { .. }) if tries < 3 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn read_descriptor(desc_path: &Path) -> Result<Descriptor> {
        let text = std::fs::read_to_string(desc_path).map_err(|e| PoolError::Descriptor {
            path: desc_path.to_path_buf(),
            reason: format!("{e} (create the pool with `raidforge create`, or rebuild this file with `raidforge assemble`)"),
        })?;
        let desc: Descriptor = serde_json::from_str(&text).map_err(|e| PoolError::Descriptor {
            path: desc_path.to_path_buf(),
            reason: format!("not a raidforge pool descriptor: {e}"),
        })?;
        if desc.format != "raidforge-pool" || desc.version != 1 {
            return Err(PoolError::Descriptor {
                path: desc_path.to_path_buf(),
                reason: format!("unknown format {} version {}", desc.format, desc.version),
            });
        }
        Ok(desc)
    }

    /// Recreates the descriptor from member paths alone (like `mdadm --assemble`) and opens
    /// the pool. Members may be given in any order; their superblocks say where each goes.
    pub fn assemble(desc_path: &Path, paths: &[PathBuf], emulate: Option<String>) -> Result<Pool> {
        if paths.is_empty() {
            return Err(PoolError::Usage("no --member given".into()));
        }
        let mut found: Vec<(Superblock, PathBuf)> = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            let m = FileMember::open(p, OpenOpts::default()).map_err(|e| PoolError::Member {
                index: i,
                path: p.clone(),
                reason: e.to_string(),
            })?;
            let sb = read_superblock(&m).map_err(|reason| PoolError::Member {
                index: i,
                path: p.clone(),
                reason: format!("{reason} (leave it out to assemble the pool without it)"),
            })?;
            found.push((sb, p.clone()));
        }
        let uuid = found[0].0.uuid;
        let count = found[0].0.member_count as usize;
        if let Some((sb, p)) = found.iter().find(|(sb, _)| sb.uuid != uuid) {
            return Err(PoolError::Member {
                index: sb.member_index as usize,
                path: p.clone(),
                reason: format!(
                    "belongs to pool {} while {} belongs to pool {}: members of two pools are mixed",
                    hex(&sb.uuid),
                    found[0].1.display(),
                    hex(&uuid)
                ),
            });
        }
        let mut slots: Vec<Option<PathBuf>> = vec![None; count];
        for (sb, p) in &found {
            let i = sb.member_index as usize;
            if let Some(prev) = &slots[i] {
                return Err(PoolError::Usage(format!(
                    "{} and {} both claim to be member {i}",
                    prev.display(),
                    p.display()
                )));
            }
            slots[i] = Some(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
        }
        let desc = Descriptor {
            format: "raidforge-pool".into(),
            version: 1,
            uuid: hex(&uuid),
            members: slots
                .into_iter()
                .enumerate()
                .map(|(i, p)| MemberDesc {
                    path: p.unwrap_or_else(|| PathBuf::from(format!("<missing member {i}>"))),
                    emulate: emulate.clone(),
                    read_bytes: 0,
                    write_bytes: 0,
                    reads: 0,
                    writes: 0,
                    meta_writes: 0,
                })
                .collect(),
            direct: false,
            repairs: RepairCounts::default(),
            lost: Vec::new(),
        };
        let pool = Self::from_members(desc_path, desc, true)?;
        pool.save_descriptor()?;
        Ok(pool)
    }

    /// Opens the members a descriptor names and restores the array state from their
    /// superblocks. `lock`: lock the members and record what assembly found (a member missing);
    /// without it nothing is locked or written (a status peek).
    fn from_members(desc_path: &Path, desc: Descriptor, lock: bool) -> Result<Pool> {
        Self::from_members_wrapped(desc_path, desc, lock, None)
    }

    fn from_members_wrapped(
        desc_path: &Path,
        desc: Descriptor,
        lock: bool,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        let uuid = unhex(&desc.uuid).ok_or_else(|| PoolError::Descriptor {
            path: desc_path.to_path_buf(),
            reason: format!("bad uuid '{}'", desc.uuid),
        })?;
        let n = desc.members.len();
        // What each listed member turned out to be. A member that cannot be used is only an
        // error when the pool still counts on it (it has not failed).
        enum Probe {
            Missing,
            Bad(PoolError),
            Good(Arc<dyn Member>, Superblock),
            /// The superblock fails its CRC but its first sector names this pool, this slot
            /// and a generation: torn by a crash while it was being rewritten.
            Torn(u64, PoolError),
        }
        let mut opened: Vec<Probe> = Vec::new();
        for (i, md) in desc.members.iter().enumerate() {
            let bad = |reason: String| {
                Probe::Bad(PoolError::Member {
                    index: i,
                    path: md.path.clone(),
                    reason,
                })
            };
            let m = match open_member(&md.path, &md.emulate, None, lock, desc.direct) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    opened.push(Probe::Missing);
                    continue;
                }
                Err(e) => {
                    opened.push(bad(e.to_string()));
                    continue;
                }
            };
            let sb = match read_superblock(&*m) {
                Ok(sb) => sb,
                Err(reason) if torn_generation(&*m, &uuid, i, n).is_some() => {
                    let g = torn_generation(&*m, &uuid, i, n).expect("checked");
                    let e = PoolError::Member {
                        index: i,
                        path: md.path.clone(),
                        reason: format!(
                            "{reason} (to run without it, assemble the pool from its other \
                             members)"
                        ),
                    };
                    opened.push(Probe::Torn(g, e));
                    continue;
                }
                Err(reason) => {
                    opened.push(bad(format!(
                        "{reason} (to run without it, assemble the pool from its other members)"
                    )));
                    continue;
                }
            };
            if sb.uuid != uuid {
                opened.push(bad(format!(
                    "belongs to pool {}, not {}: a foreign member",
                    hex(&sb.uuid),
                    desc.uuid
                )));
            } else if sb.member_index as usize != i || sb.member_count as usize != n {
                opened.push(bad(format!(
                    "is member {} of {}, but the descriptor lists it as {i} of {n}",
                    sb.member_index, sb.member_count
                )));
            } else {
                opened.push(Probe::Good(m, sb));
            }
        }
        // The newest superblock is authoritative.
        let best = opened
            .iter()
            .filter_map(|p| match p {
                Probe::Good(_, sb) => Some(sb.clone()),
                _ => None,
            })
            .max_by_key(|sb| sb.generation);
        let best = match best {
            Some(b) => b,
            None => {
                // Nothing usable: say why about the first member that is there at all.
                let why = opened.into_iter().find_map(|p| match p {
                    Probe::Bad(e) => Some(e),
                    _ => None,
                });
                return Err(why.unwrap_or_else(|| {
                    PoolError::Usage("no member of the pool could be opened".into())
                }));
            }
        };
        let (kind, params) = layout::from_text(&best.layout)?;
        let scheme = layout::build(kind, &params)?;
        let geo = Geometry::new(scheme, best.chunk_bytes, best.data_bytes)?;
        let has_checksums = best.features & FEATURE_CHECKSUMS != 0;
        let geo = if desc.direct || has_checksums {
            geo.with_io_align(DIRECT_ALIGN_BYTES)?
        } else {
            geo
        };
        let mut state = ArrayState::new(&geo);
        for e in &best.events {
            match *e {
                Event::Fail(d) => {
                    state.fail(&geo, d)?;
                }
                Event::Replace(d) => {
                    state.replace(&geo, d)?;
                }
            }
        }
        for (i, &(start, gen)) in best.runs.iter().enumerate() {
            let end = best.runs.get(i + 1).map_or(geo.cycles(), |r| r.0);
            for c in start..end.min(geo.cycles()) {
                state.mark_rebuilt(c, gen);
            }
        }
        let mut members = Vec::new();
        let mut events = best.events.clone();
        for (i, o) in opened.into_iter().enumerate() {
            let failed = state.failed().contains(&(i as Disk));
            // The newest record says this slot was replaced: a file there that is stale, or
            // holds no valid superblock, is the disk replaced away or a replacement whose
            // first superblock never became durable (a crash during `replace`, before the
            // descriptor named the new file; found by the fault harness). Its contents are not
            // current either way: assemble degraded without it (it is then replaced again),
            // as for a missing member, instead of refusing the pool.
            let replaced_slot = best.events.contains(&Event::Replace(i as u32));
            let stale = match &o {
                Probe::Good(_, sb) => sb.generation + 1 < best.generation,
                Probe::Torn(g, _) => g + 1 < best.generation,
                Probe::Bad(_) => true,
                Probe::Missing => false,
            };
            if !failed && replaced_slot && stale && state.failed().len() < geo.scheme().tolerance()
            {
                state.fail(&geo, i as Disk)?;
                events.push(Event::Fail(i as u32));
                members.push(None);
                continue;
            }
            match o {
                _ if failed => members.push(None),
                Probe::Bad(e) => return Err(e),
                // A superblock that fails its CRC is refused, even when its first sector
                // still names this pool and slot (a crash can tear it while it is rewritten;
                // a flipped byte looks the same): the user assembles without it. Only a
                // replaced slot's file is assembled as failed (above).
                Probe::Torn(_, e) => return Err(e),
                Probe::Good(m, sb) => {
                    // One generation behind and not failed in the newest record: the member
                    // only missed the newest superblock write (a crash while the superblocks
                    // were being rewritten; found by the fault-injection harness). Every
                    // persist flushes the data before writing any superblock, and a member
                    // failed or replaced since would be failed in the newest record or hold
                    // no superblock of this pool, so its data is as current as the others'.
                    let missed_last_write = sb.generation + 1 == best.generation;
                    if sb.generation != best.generation && !missed_last_write {
                        return Err(PoolError::Member {
                            index: i,
                            path: desc.members[i].path.clone(),
                            reason: format!(
                                "is stale (generation {} but the pool is at {}): it missed updates; \
                                 assemble the pool without it, then `raidforge replace` it",
                                sb.generation, best.generation
                            ),
                        });
                    }
                    members.push(Some(m));
                }
                Probe::Missing => {
                    // A member vanished without being failed: assemble degraded, recording it.
                    state.fail(&geo, i as Disk)?;
                    events.push(Event::Fail(i as u32));
                    members.push(None);
                }
            }
        }
        state.set_bpgl_capacity(if best.bpgl_capacity == 0 {
            BPGL_DEFAULT_CAPACITY
        } else {
            best.bpgl_capacity as usize
        });
        // The deferred-parity list: the newest valid record on any present member (a crash
        // with updates deferred leaves them listed there).
        let bpgl = newest_bpgl(&members, &uuid);
        let bpgl_seq = bpgl.as_ref().map_or(0, |r| r.sequence);
        // Zone popularity, policy state and D-Map: the newest valid record on any member.
        let ido = Arc::new(
            Ido::restore(
                geo.capacity_bytes(),
                geo.data_per_cycle() * geo.chunk_bytes(),
                &ido_records(&members),
                &uuid,
            )?
            .map_or_else(
                || {
                    Ido::new(
                        geo.capacity_bytes(),
                        geo.data_per_cycle() * geo.chunk_bytes(),
                        DEFAULT_ZONE_BYTES,
                    )
                },
                Ok,
            )?,
        );
        if let Some(r) = &bpgl {
            state.restore_bpgl(r);
        }
        let checksum_region = (best.checksum_offset_bytes, best.checksum_len_bytes);
        // Region pages with entries every copy of which a crash tore (vouched for below).
        let mut torn_checksum_pages: std::collections::BTreeSet<(u32, u64)> = Default::default();
        let checksums = if has_checksums {
            let copies = crate::csum::copies_for(geo.disks(), geo.scheme().tolerance());
            if checksum_region.1 < crate::csum::region_bytes(best.data_bytes, copies) {
                return Err(PoolError::Usage(format!(
                    "the superblock's checksum region ({} bytes) is too small for {} bytes of \
                     data: damaged superblock",
                    checksum_region.1, best.data_bytes
                )));
            }
            let (c, torn) =
                Checksums::load(&members, checksum_region.0, best.data_bytes, copies)
                    .map_err(|e| PoolError::Io(format!("reading the checksum regions: {e}")))?;
            torn_checksum_pages = torn;
            Some(Arc::new(c))
        } else {
            None
        };
        let mut pool = Pool {
            desc_path: desc_path.to_path_buf(),
            counters: (0..n).map(|_| Counters::default()).collect(),
            desc,
            uuid,
            kind,
            params,
            geo,
            state,
            events,
            sb_generation: best.generation,
            data_offset_bytes: best.data_offset_bytes,
            data_bytes: best.data_bytes,
            created_unix_secs: best.created_unix_secs,
            members,
            policy: WritePolicy::Md,
            parity: best.parity,
            bpgl_seq,
            bpgl_dirty: false,
            bpgl_on_disk: bpgl.map(|r| r.stripes).unwrap_or_default(),
            checksums,
            checksum_region,
            lost_pending: Vec::new(),
            write_hole: if best.features & FEATURE_JOURNAL != 0 {
                WriteHole::Journal
            } else {
                WriteHole::None
            },
            journal_region: (best.journal_offset_bytes, best.journal_len_bytes),
            journal: None,
            member_wrap: None,
            ido,
        };
        pool.apply_wrap(wrap);
        // The write journal before anything else is written: replay what a crash may have
        // left half done (a status peek changes nothing, so it leaves it to the next open).
        if lock && pool.write_hole == WriteHole::Journal {
            let sums = pool.checksums.clone();
            let members = pool.members.clone();
            // Checksum pages the replayed records touched (see `vouch_torn_checksum_pages`).
            let mut touched: std::collections::BTreeSet<(u32, u64)> = Default::default();
            let mut holders_failed: Vec<u32> = Vec::new();
            let per_page = crate::csum::ENTRIES_PER_PAGE;
            let j = Journal::recover(pool.journal_geometry(), &pool.members, |m, off, data| {
                let b = crate::csum::BLOCK_BYTES;
                let end = off + data.len() as u64;
                for page in off / b / per_page..=(end.saturating_sub(1)) / b / per_page {
                    touched.insert((m, page));
                }
                // Replay rewrites whole blocks: their checksums follow.
                match (&sums, members.get(m as usize)) {
                    (Some(c), Some(Some(_))) => {
                        c.record(m as usize, off, data);
                        let b = crate::csum::BLOCK_BYTES;
                        match c.write_pages(
                            m as usize,
                            &members,
                            off / b,
                            (off + data.len() as u64) / b,
                        ) {
                            // A copy on another member failed: that member is failed after
                            // the replay, not the one replayed to.
                            Err(e) if e.member != m as usize => {
                                holders_failed.push(e.member as u32);
                                Ok(())
                            }
                            r => r.map_err(std::io::Error::from),
                        }
                    }
                    _ => Ok(()),
                }
            })
            .map_err(|e| PoolError::Io(e.to_string()))?;
            // Members that failed during the replay (or its checkpoint) are failed now.
            let mut dead = j.take_failed_members();
            dead.extend(holders_failed);
            dead.sort_unstable();
            dead.dedup();
            pool.journal = Some(Arc::new(j));
            if !dead.is_empty() {
                pool.fail_members(&dead)?;
            }
            touched.extend(torn_checksum_pages.iter().copied());
            if !touched.is_empty() {
                pool.vouch_torn_checksum_pages(&touched)?;
            }
        }
        // Without a journal replay (which vouches for them with its own pages, above).
        if lock && pool.write_hole != WriteHole::Journal && !torn_checksum_pages.is_empty() {
            pool.vouch_torn_checksum_pages(&torn_checksum_pages)?;
        }
        if lock && pool.events.len() != best.events.len() {
            pool.persist(ArrayStateTag::Degraded)?;
        }
        // Assembled without a member while updates were deferred: those first.
        if lock && !pool.state.failed().is_empty() && !pool.state.bpgl().is_empty() {
            pool.flush_bpgl(0)?;
        }
        Ok(pool)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    pub fn state(&self) -> &ArrayState {
        &self.state
    }
    pub fn capacity_bytes(&self) -> u64 {
        self.geo.capacity_bytes()
    }
    pub fn set_policy(&mut self, policy: WritePolicy) {
        self.policy = policy;
    }
    /// The parity policy writes use.
    pub fn parity(&self) -> ParityPolicy {
        self.parity
    }
    /// Changes the parity policy (recorded in the superblocks when the pool is closed). Going
    /// eager does not flush: deferred updates stay listed until flushed.
    pub fn set_parity(&mut self, parity: ParityPolicy) -> Result<()> {
        if parity == ParityPolicy::Lazy && !self.state.lazy_groups().supported() {
            return Err(PoolError::Usage(format!(
                "--parity lazy needs a two-parity layout (rm2, raid6, or raidplus/random/hash \
                 with --level 6); this pool is {}",
                self.kind.name()
            )));
        }
        self.parity = parity;
        Ok(())
    }

    /// Writes the deferred-parity list to the first two present members (alternating between
    /// the two slots after the superblock, sequence-numbered, checksummed) and makes it
    /// durable. Called before a lazy write that lists new stripes runs its member writes.
    pub(crate) fn persist_bpgl_if_dirty(&mut self) -> Result<()> {
        if self.bpgl_dirty
            || !self
                .state
                .bpgl()
                .stripes()
                .eq(self.bpgl_on_disk.iter().copied())
        {
            self.persist_bpgl()?;
        }
        Ok(())
    }

    pub(crate) fn persist_bpgl(&mut self) -> Result<()> {
        let seq = self.bpgl_seq + 1;
        let bytes = self.state.bpgl().record(self.uuid, seq).encode();
        debug_assert!(bytes.len() <= BPGL_SLOT_BYTES);
        let at = BPGL_OFFSET_BYTES + (seq % 2) * BPGL_SLOT_BYTES as u64;
        debug_assert!(at + BPGL_SLOT_BYTES as u64 <= self.data_offset_bytes);
        let mut copies = 0;
        for (i, m) in self.members.iter().enumerate() {
            let Some(m) = m else { continue };
            m.write_at(&bytes, at)
                .and_then(|_| m.flush())
                .map_err(|e| PoolError::Io(format!("deferred-parity list on member {i}: {e}")))?;
            self.counters[i].meta_writes.fetch_add(1, Ordering::Relaxed);
            copies += 1;
            if copies == 2 {
                break;
            }
        }
        self.bpgl_seq = seq;
        self.bpgl_dirty = false;
        self.bpgl_on_disk = self.state.bpgl().stripes().collect();
        Ok(())
    }

    /// Plans flushes of up to `max_cycles` cycles of the deferred-parity list.
    pub(crate) fn plan_flush_batch(&self, max_cycles: usize) -> Result<Vec<raidcore::FlushPlan>> {
        let mut fps = Vec::new();
        for c in self.state.bpgl().flushable_cycles(max_cycles) {
            if let Some(f) = plan_flush_cycle(&self.geo, &self.state, c)? {
                fps.push(f);
            }
        }
        Ok(fps)
    }

    /// Records the outcome of running flush plans: on success the recomputed parities are
    /// made durable and their entries dropped (returns how many); on member errors the members
    /// are failed (returns `None`: plan again).
    pub(crate) fn end_flush(
        &mut self,
        fps: &[raidcore::FlushPlan],
        outcome: std::result::Result<(), crate::exec::BatchErrors>,
    ) -> Result<Option<usize>> {
        match outcome {
            Ok(()) => {
                // The recomputed parities are durable before the list forgets them.
                self.flush_members()?;
                let mut n = 0;
                for f in fps {
                    n += self.state.flush_done(&f.entries);
                }
                self.bpgl_dirty = true;
                Ok(Some(n))
            }
            Err(e) => {
                if !e.bad.is_empty() {
                    // Blocks the flush read wrong: repaired (or recorded lost), then planned
                    // again.
                    self.repair_ranges(&e.bad)?;
                }
                let failed = e.failed_members();
                if !failed.is_empty() {
                    self.fail_members(&failed)?;
                }
                Ok(None)
            }
        }
    }

    /// Recomputes deferred background parities until at most `down_to` stripes are listed
    /// (0: all), a batch of cycles at a time; then records the shorter list. Returns the
    /// number of stripes flushed. Only for exclusive use of the pool (the CLI); a served pool
    /// flushes through [`crate::serve_support::SharedPool`], which takes stripe locks.
    pub fn flush_bpgl(&mut self, down_to: usize) -> Result<usize> {
        let mut flushed = 0;
        let mut attempts = 0;
        while self.state.bpgl().len() > down_to {
            let fps = self.plan_flush_batch(16)?;
            if fps.is_empty() {
                break;
            }
            let plans: Vec<raidcore::Plan> = fps.iter().map(|f| f.plan.clone()).collect();
            let mut empty: Vec<Vec<u8>> = plans.iter().map(|_| Vec::new()).collect();
            let mut users: Vec<&mut [u8]> = empty.iter_mut().map(|v| v.as_mut_slice()).collect();
            let outcome = run_plans(&plans, &mut users, &self.members_view());
            match self.end_flush(&fps, outcome)? {
                Some(n) => flushed += n,
                None => {
                    attempts += 1;
                    if attempts > 8 {
                        return Err(PoolError::Io(
                            "flushing deferred parity: members keep failing".into(),
                        ));
                    }
                }
            }
        }
        self.persist_bpgl_if_dirty()?;
        Ok(flushed)
    }

    /// Changes (or removes, with `None`) the emulated speed of every member, now and in the
    /// descriptor.
    pub fn set_emulation(&mut self, spec: Option<String>) -> Result<()> {
        let direct = self.desc.direct;
        if let Some(s) = &spec {
            Speed::parse(s).map_err(|e| PoolError::Usage(e.to_string()))?;
        }
        for (i, md) in self.desc.members.iter_mut().enumerate() {
            md.emulate = spec.clone();
            // The old handle goes first: it holds the member's lock.
            if let Some(old) = self.members[i].take() {
                drop(old);
                match open_member(&md.path, &spec, None, true, direct) {
                    Ok(m) => self.members[i] = Some(m),
                    Err(e) => {
                        let reason = e.to_string();
                        // Put the member back as it was (without emulation) if possible.
                        self.members[i] = open_member(&md.path, &None, None, true, direct).ok();
                        return Err(PoolError::Member {
                            index: i,
                            path: md.path.clone(),
                            reason,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    fn runs(&self) -> Vec<(u64, u32)> {
        self.state.layout_runs()
    }

    pub(crate) fn tag(&self) -> ArrayStateTag {
        if !self.state.failed().is_empty() {
            ArrayStateTag::Degraded
        } else if !self.state.all_clean() {
            ArrayStateTag::Rebuilding
        } else {
            ArrayStateTag::Clean
        }
    }

    /// Writes the superblock to every present member and the descriptor. A member whose flush
    /// or superblock write fails is failed (recorded in the superblocks written next), like a
    /// member failing a data write: a dead member is found here when nothing else touched it
    /// since it died (found by the fault-injection harness: every command that records state,
    /// `fail`, `replace`, `rebuild`, closing the pool, used to fail instead).
    pub(crate) fn persist(&mut self, tag: ArrayStateTag) -> Result<()> {
        self.compact_history()?;
        // The data the new superblocks describe (rebuilt cycles, above all) must be durable
        // before any superblock says so: flush, write every superblock, flush again.
        if self.flush_or_fail()? {
            return self.persist(self.tag_after_failure(tag));
        }
        self.sb_generation += 1;
        let layout_text = layout::to_text(self.kind, &self.params);
        let runs = self.runs();
        let mut dead: Vec<(usize, std::io::Error)> = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            let Some(m) = m else { continue };
            let sb = Superblock {
                uuid: self.uuid,
                member_index: i as u32,
                member_count: self.members.len() as u32,
                generation: self.sb_generation,
                state: tag,
                data_offset_bytes: self.data_offset_bytes,
                data_bytes: self.data_bytes,
                chunk_bytes: self.geo.chunk_bytes(),
                created_unix_secs: self.created_unix_secs,
                layout: layout_text.clone(),
                events: self.events.clone(),
                runs: runs.clone(),
                parity: self.parity,
                bpgl_capacity: self.state.bpgl().capacity() as u32,
                features: if self.write_hole == WriteHole::Journal {
                    FEATURE_JOURNAL
                } else {
                    0
                } | if self.checksums.is_some() {
                    FEATURE_CHECKSUMS
                } else {
                    0
                },
                journal_offset_bytes: self.journal_region.0,
                journal_len_bytes: self.journal_region.1,
                checksum_offset_bytes: self.checksum_region.0,
                checksum_len_bytes: self.checksum_region.1,
            };
            let b = sb.encode().map_err(|e| PoolError::Io(e.to_string()))?;
            if let Err(e) = m.write_at(&b, superblock_slot(sb.generation)) {
                dead.push((i, e));
            }
        }
        if !dead.is_empty() {
            self.fail_dead_members(&dead)?;
            return self.persist(self.tag_after_failure(tag));
        }
        if self.flush_or_fail()? {
            return self.persist(self.tag_after_failure(tag));
        }
        self.persist_bpgl_if_dirty()?;
        // Retire the journal records whose in-place writes are done (the members were just
        // flushed; a membership change also moves the journal to the members present).
        if let Some(j) = self.journal.clone() {
            j.checkpoint(&self.members)
                .map_err(|e| PoolError::Io(e.to_string()))?;
            // A member that failed the checkpoint's flush or write is failed (and recorded).
            let dead = j.take_failed_members();
            if !dead.is_empty() {
                return self.fail_members(&dead);
            }
        }
        // Lock order: a served pool's request may hold the IDO lock while it waits for the
        // pool mutex (held by our caller): never wait for the IDO lock here.
        self.ido.touch();
        let ido = Arc::clone(&self.ido);
        ido.persist_if_dirty(&RecordOnly(self), self.uuid, false)?;
        self.save_descriptor()
    }

    /// The state to record after a member failed while recording `tag`.
    fn tag_after_failure(&self, tag: ArrayStateTag) -> ArrayStateTag {
        match tag {
            ArrayStateTag::Rebuilding => tag,
            _ => self.tag(),
        }
    }

    /// Flushes every present member; members whose flush fails are failed. Returns whether
    /// any was (an error only when that loses data).
    fn flush_or_fail(&mut self) -> Result<bool> {
        let dead = self.flush_each();
        if dead.is_empty() {
            return Ok(false);
        }
        self.fail_dead_members(&dead)?;
        Ok(true)
    }

    /// Marks members that failed an I/O outside a plan as failed (in memory; the caller
    /// persists). Whether the pool then has lost data is for the caller to report.
    fn fail_dead_members(&mut self, dead: &[(usize, std::io::Error)]) -> Result<()> {
        for (i, _) in dead {
            if self.members[*i].take().is_some() {
                self.state.fail(&self.geo, *i as Disk)?;
                self.events.push(Event::Fail(*i as u32));
            }
        }
        Ok(())
    }

    /// When every cycle is in the target layout, the history that led there no longer
    /// matters: only which members are missing, in failure order, does (the target layout is
    /// `recovery_plan(scheme, failed)` and every present member holds valid data for every
    /// cycle). Replaces the events with one failure per missing member and the state with the
    /// equivalent one, so that the superblock's event list (64 entries at most) does not fill
    /// up over a pool's life of failures and replacements.
    fn compact_history(&mut self) -> Result<()> {
        let failed = self.state.failed().to_vec();
        if !self.state.all_clean() || self.events.len() == failed.len() {
            return Ok(());
        }
        let mut state = ArrayState::new(&self.geo);
        for &d in &failed {
            state.fail(&self.geo, d)?;
        }
        let target = state.target_generation();
        if target > 0 {
            for c in 0..self.geo.cycles() {
                state.mark_rebuilt(c, target);
            }
        }
        assert!(
            *state.layout_of(0) == *self.state.layout_of(0) && state.all_clean(),
            "compacting the history changed the layout"
        );
        state.adopt_bpgl(&self.state);
        self.state = state;
        self.events = failed.iter().map(|&d| Event::Fail(d)).collect();
        Ok(())
    }

    /// Flushes every present member, all at once: one thread each, so that the syncs of
    /// members sharing a file system share its journal commits instead of queueing.
    fn flush_members(&self) -> Result<()> {
        match self.flush_each().into_iter().next() {
            Some((i, e)) => Err(PoolError::Io(format!("flushing member {i}: {e}"))),
            None => Ok(()),
        }
    }

    /// Flushes every present member, all at once; returns the members that failed.
    fn flush_each(&self) -> Vec<(usize, std::io::Error)> {
        let results: Vec<(usize, std::io::Result<()>)> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .members
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.as_ref().map(|m| (i, s.spawn(move || m.flush()))))
                .collect();
            handles
                .into_iter()
                .map(|(i, h)| (i, h.join().expect("flush thread")))
                .collect()
        });
        results
            .into_iter()
            .filter_map(|(i, r)| r.err().map(|e| (i, e)))
            .collect()
    }

    pub(crate) fn save_descriptor(&self) -> Result<()> {
        let mut d = self.desc.clone();
        for (md, c) in d.members.iter_mut().zip(&self.counters) {
            md.read_bytes += c.read_bytes.load(Ordering::Relaxed);
            md.write_bytes += c.write_bytes.load(Ordering::Relaxed);
            md.reads += c.reads.load(Ordering::Relaxed);
            md.writes += c.writes.load(Ordering::Relaxed);
            md.meta_writes += c.meta_writes.load(Ordering::Relaxed);
        }
        let text = serde_json::to_string_pretty(&d).expect("descriptor serializes");
        let tmp = self.desc_path.with_extension("tmp");
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, &self.desc_path))
            .map_err(|e| PoolError::Descriptor {
                path: self.desc_path.clone(),
                reason: e.to_string(),
            })
    }

    /// Makes every completed write durable on every present member (the volume's flush:
    /// what an NBD FLUSH waits for).
    /// A member whose flush fails is failed (and the failure recorded), as a member failing
    /// a write is: the flush succeeds when the pool survives it.
    /// A pool that has lost data fails the flush (after flushing what it still has): writes
    /// acknowledged to members failed since cannot be made durable.
    pub fn sync(&mut self) -> Result<()> {
        let dead = self.flush_each();
        if !dead.is_empty() {
            self.fail_dead_members(&dead)?;
            let tag = self.tag();
            self.persist(tag)?;
        }
        if self.state.data_lost(&self.geo) {
            let why = match dead.first() {
                Some((i, e)) => format!("member {i} failed ({e}) and "),
                None => String::new(),
            };
            return Err(PoolError::Io(format!(
                "flush: {why}the pool has lost data (more members failed than the layout \
                 tolerates): writes to failed members cannot be made durable"
            )));
        }
        Ok(())
    }

    /// Saves counters and marks the pool's state; call when a command ends.
    pub fn close(mut self) -> Result<()> {
        let tag = self.tag();
        self.persist(tag)?;
        // Nobody else can reach the pool now: the IDO record is written for sure.
        let ido = Arc::clone(&self.ido);
        ido.persist_if_dirty(&RecordOnly(&self), self.uuid, true)
    }

    /// Replaces member `i`'s handle with `f(handle)`, for fault injection (wrap it in
    /// [`crate::Faulty`]); nothing on disk changes. No-op for a failed member.
    pub fn wrap_member(&mut self, i: usize, f: impl FnOnce(Arc<dyn Member>) -> Arc<dyn Member>) {
        if let Some(m) = self.members[i].take() {
            self.members[i] = Some(f(m));
        }
    }

    /// The checksum region `(member offset, bytes)` on every member (`(0, 0)` without
    /// checksums).
    pub fn checksum_region(&self) -> (u64, u64) {
        self.checksum_region
    }

    /// Member `i`'s data area starts at this member byte (checksums and metadata before it).
    pub fn data_offset_bytes(&self) -> u64 {
        self.data_offset_bytes
    }

    pub(crate) fn members_view(&self) -> Members<'_> {
        Members {
            members: &self.members,
            counters: &self.counters,
            data_offset_bytes: self.data_offset_bytes,
            checksums: self.checksums.as_deref(),
        }
    }

    pub(crate) fn fail_members(&mut self, which: &[u32]) -> Result<()> {
        for &d in which {
            if self.members[d as usize].is_some() {
                self.members[d as usize] = None;
                self.state.fail(&self.geo, d)?;
                self.events.push(Event::Fail(d));
            }
        }
        let tag = self.tag();
        self.persist(tag)
    }

    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        let cap = self.capacity_bytes();
        if offset.checked_add(len).is_none_or(|end| end > cap) {
            return Err(PoolError::Usage(format!(
                "range {offset}+{len} is beyond the end of the pool ({cap} bytes)"
            )));
        }
        Ok(())
    }

    /// Reads `len` bytes at `offset`. A member that fails is failed and the read re-planned.
    pub fn read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>> {
        if self.ido.note(offset, len) {
            return Err(self.ido_busy());
        }
        self.read_plain(offset, len)
    }

    /// [`Pool::read`] without zone tracking or IDO routing (the served pool routes first).
    pub(crate) fn read_plain(&mut self, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.check_range(offset, len)?;
        self.check_lost(offset, len)?;
        let mut out = vec![0u8; len as usize];
        for _attempt in 0..MAX_REPLANS {
            let plans = plan_read(&self.geo, &self.state, offset, len)?;
            let mut users: Vec<&mut [u8]> = Vec::new();
            let mut rest: &mut [u8] = &mut out;
            let mut at = 0u64;
            for p in &plans {
                assert_eq!(p.user_offset, at, "plans cover the request in order");
                let (head, tail) = rest.split_at_mut(p.buffers[0]);
                users.push(head);
                rest = tail;
                at += p.buffers[0] as u64;
            }
            match run_plans(&plans, &mut users, &self.members_view()) {
                Ok(()) => return Ok(out),
                // Bad blocks are repaired (or reported lost) and the read planned again; a
                // failed member is failed, its deferred parity flushed first so that a second
                // failure is survived.
                Err(e) => self.absorb(e)?,
            }
        }
        Err(gave_up("read", offset))
    }

    /// Writes `data` at `offset`. Plans run a batch at a time (one plan per cycle touched).
    /// Under lazy parity, stripes whose background parity the write leaves stale are listed
    /// (and the list made durable) before any member write; when the list is full it is
    /// flushed down to half its bound afterwards.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        if self.ido.note(offset, data.len() as u64) {
            return Err(self.ido_busy());
        }
        self.write_plain(offset, data)
    }

    /// [`Pool::write`] without zone tracking or IDO routing (the served pool routes first).
    pub(crate) fn write_plain(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_range(offset, data.len() as u64)?;
        if let Some(j) = self.journal.clone() {
            let piece = j.piece_bytes();
            let mut at = 0usize;
            while at < data.len() {
                // Pieces end on multiples of the piece size, so that records stay bounded.
                let end = ((offset + at as u64) / piece + 1) * piece - offset;
                let end = (end as usize).min(data.len());
                self.write_journaled(&j, offset + at as u64, &data[at..end])?;
                at = end;
            }
            return Ok(());
        }
        for _attempt in 0..MAX_REPLANS {
            let (plans, deferred) = if self.parity == ParityPolicy::Lazy {
                let lw = plan_write_lazy(
                    &self.geo,
                    &self.state,
                    offset,
                    data.len() as u64,
                    &self.policy,
                )?;
                (lw.plans, lw.deferred)
            } else {
                let plans = plan_write(
                    &self.geo,
                    &self.state,
                    offset,
                    data.len() as u64,
                    &self.policy,
                )?;
                (plans, Vec::new())
            };
            if self.state.defer(&deferred) > 0 {
                if let Err(e) = self.persist_bpgl() {
                    self.state.deferred_write_done(&deferred);
                    return Err(e);
                }
            }
            let result = crate::exec::run_write(&plans, data, &self.members_view());
            self.state.deferred_write_done(&deferred);
            match result {
                Ok(()) => {
                    self.clear_lost(offset, data.len() as u64);
                    let b = self.state.bpgl();
                    if !b.is_empty() && b.len() >= b.capacity() {
                        let half = b.capacity() / 2;
                        self.flush_bpgl(half)?;
                    }
                    return Ok(());
                }
                Err(e) if !e.bad.is_empty() => self.absorb(e)?,
                Err(e) => {
                    let failed = e.failed_members();
                    let only_writes = e.read_errors.is_empty();
                    self.fail_members(&failed)?;
                    self.flush_bpgl(0)?;
                    if only_writes {
                        // Every healthy member was written; the failed one is now reconstructed
                        // from them.
                        return Ok(());
                    }
                }
            }
        }
        Err(gave_up("write", offset))
    }

    /// Plans a write under the pool's parity policy: the plans and the stripes it defers
    /// (listed, and the list made durable, before returning).
    pub(crate) fn plan_write_listed(
        &mut self,
        offset: u64,
        len: u64,
    ) -> Result<(Vec<raidcore::Plan>, Vec<raidcore::StripeId>)> {
        if self.parity != ParityPolicy::Lazy {
            return Ok((
                plan_write(&self.geo, &self.state, offset, len, &self.policy)?,
                Vec::new(),
            ));
        }
        let lw = plan_write_lazy(&self.geo, &self.state, offset, len, &self.policy)?;
        if self.state.defer(&lw.deferred) > 0 {
            if let Err(e) = self.persist_bpgl() {
                self.state.deferred_write_done(&lw.deferred);
                return Err(e);
            }
        }
        Ok((lw.plans, lw.deferred))
    }

    /// One journaled write cycle (a piece of a write): plan, read and compute, append the
    /// record of every member write, write in place, retire. Member failures are handled like
    /// [`Pool::write`] does.
    fn write_journaled(&mut self, j: &Arc<Journal>, offset: u64, data: &[u8]) -> Result<()> {
        for _ in 0..64 {
            let (plans, deferred) = self.plan_write_listed(offset, data.len() as u64)?;
            let result = crate::exec::run_write_logged(
                &plans,
                data,
                &self.members_view(),
                |e| j.append(&self.members, e),
                |seq| j.done(seq),
            );
            self.state.deferred_write_done(&deferred);
            let mut failed = j.take_failed_members();
            let outcome = match result {
                Ok(()) => Ok(true),
                Err(LoggedWriteError::Reads(e)) if !e.bad.is_empty() => {
                    // Blocks that read wrong (checksums, latent errors): repair, plan again.
                    self.absorb(e)?;
                    Ok(false)
                }
                Err(LoggedWriteError::Reads(e)) => {
                    failed.extend(e.failed_members());
                    Ok(false)
                }
                Err(LoggedWriteError::Writes(e)) => {
                    // Every healthy member was written; the failed one is now reconstructed
                    // from them.
                    failed.extend(e.failed_members());
                    Ok(true)
                }
                Err(LoggedWriteError::Log(e)) if !failed.is_empty() => {
                    let _ = e;
                    Ok(false)
                }
                Err(LoggedWriteError::Log(e)) => Err(PoolError::Io(e.to_string())),
            };
            if !failed.is_empty() {
                failed.sort();
                failed.dedup();
                self.fail_members(&failed)?;
                self.flush_bpgl(0)?;
            }
            if outcome? {
                self.clear_lost(offset, data.len() as u64);
                let b = self.state.bpgl();
                if !b.is_empty() && b.len() >= b.capacity() {
                    let half = b.capacity() / 2;
                    self.flush_bpgl(half)?;
                }
                return Ok(());
            }
        }
        Err(PoolError::Io(format!(
            "write at {offset}: members keep failing; gave up"
        )))
    }

    /// Write-hole protection of this pool.
    pub fn write_hole(&self) -> WriteHole {
        self.write_hole
    }

    /// The open journal, if any.
    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.journal.as_ref()
    }

    fn journal_geometry(&self) -> JournalGeometry {
        JournalGeometry {
            uuid: self.uuid,
            offset: self.journal_region.0,
            len: self.journal_region.1,
            // As many copies as the array survives failures, plus one.
            copies: (self.geo.scheme().tolerance() + 1).max(2),
            data_offset: self.data_offset_bytes,
            data_bytes: self.data_bytes,
        }
    }

    /// Test support: replaces every present member handle with `f(index, handle)` (a
    /// [`crate::crash::CrashSim`] wrapper, say). The pool does not notice.
    pub fn wrap_members(&mut self, mut f: impl FnMut(usize, Arc<dyn Member>) -> Arc<dyn Member>) {
        for (i, m) in self.members.iter_mut().enumerate() {
            if let Some(h) = m.take() {
                *m = Some(f(i, h));
            }
        }
    }

    /// Marks member `i` failed (as if it had died), then flushes the deferred parity.
    pub fn fail(&mut self, i: usize) -> Result<()> {
        self.fail_no_flush(i)?;
        // Deferred parity before anything else: then a second failure is survived again.
        self.flush_bpgl(0)?;
        Ok(())
    }

    /// [`Pool::fail`] without the flush (a served pool flushes under stripe locks itself).
    pub(crate) fn fail_no_flush(&mut self, i: usize) -> Result<()> {
        if i >= self.members.len() {
            return Err(PoolError::Usage(format!(
                "member {i} does not exist (the pool has members 0..{})",
                self.members.len() - 1
            )));
        }
        let outcome = self.state.fail(&self.geo, i as Disk)?;
        self.members[i] = None;
        self.events.push(Event::Fail(i as u32));
        let tag = self.tag();
        self.persist(tag)?;
        if self.state.data_lost(&self.geo) {
            return Err(PoolError::Usage(format!(
                "member {i} failed and the pool has lost data ({outcome:?})"
            )));
        }
        Ok(())
    }

    /// Replaces failed member `i` with a new (empty) member at `path`.
    pub fn replace(&mut self, i: usize, path: &Path) -> Result<()> {
        if i >= self.members.len() {
            return Err(PoolError::Usage(format!("member {i} does not exist")));
        }
        if self.members[i].is_some() {
            return Err(PoolError::Usage(format!(
                "member {i} has not failed: fail it first with `raidforge fail`"
            )));
        }
        let size = self.data_offset_bytes + self.data_bytes;
        if let Ok(existing) = FileMember::open(path, OpenOpts::default()) {
            // Any raidforge member (another pool's, or a stale copy of this one) is refused:
            // a replacement starts from empty space.
            if let Ok(sb) = read_superblock(&existing) {
                return Err(PoolError::Member {
                    index: i,
                    path: path.to_path_buf(),
                    reason: format!(
                        "already holds a raidforge superblock (pool {}); wipe it first",
                        hex(&sb.uuid)
                    ),
                });
            }
        }
        let emulate = self.desc.members[i].emulate.clone();
        let m = open_member(path, &emulate, Some(size), true, self.desc.direct).map_err(|e| {
            PoolError::Member {
                index: i,
                path: path.to_path_buf(),
                reason: e.to_string(),
            }
        })?;
        if m.size_bytes() < size {
            return Err(PoolError::Member {
                index: i,
                path: path.to_path_buf(),
                reason: format!("holds {} bytes, need {size}", m.size_bytes()),
            });
        }
        let m = match &self.member_wrap {
            Some(w) => w(i, m),
            None => m,
        };
        if let Some(c) = self.checksums.clone() {
            // A replacement holds nothing valid until rebuilt; its checksums start as those of
            // zeros and the rebuild writes the real ones with the data.
            // The copies of its entries on other members are rewritten too, and its region
            // gets the copies of other members' entries it holds.
            // A copy's holder that fails meanwhile is failed (as a failing write fails its
            // member) and the copies are written again without it.
            loop {
                let mut slots = self.members.clone();
                slots[i] = Some(m.clone());
                match c.reset_zeroed(i, &slots) {
                    Ok(()) => break,
                    Err(e) if e.member != i && self.members[e.member].is_some() => {
                        self.fail_members(&[e.member as u32])?;
                    }
                    Err(e) => {
                        return Err(PoolError::Member {
                            index: i,
                            path: path.to_path_buf(),
                            reason: format!("writing checksum region pages: {}", e.source),
                        })
                    }
                }
            }
        }
        self.state.replace(&self.geo, i as Disk)?;
        if let Some(j) = &self.journal {
            j.member_replaced(i as u32);
        }
        self.members[i] = Some(m);
        self.events.push(Event::Replace(i as u32));
        self.desc.members[i].path =
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.desc.members[i].read_bytes = 0;
        self.desc.members[i].write_bytes = 0;
        self.desc.members[i].reads = 0;
        self.desc.members[i].writes = 0;
        self.desc.members[i].meta_writes = 0;
        let tag = self.tag();
        self.persist(tag)
    }

    /// Moves every cycle to the newest layout generation: rebuilds lost units into their
    /// destinations (spares, spare space, a replacement) and copies units back after a
    /// replacement. Calls `progress` after every batch.
    pub fn rebuild(
        &mut self,
        opts: &RebuildOpts,
        mut progress: impl FnMut(RebuildProgress),
    ) -> Result<RebuildProgress> {
        let total = self.geo.cycles();
        let start = Instant::now();
        let mut written = 0u64;
        let batch = opts.parallel_cycles.max(1) as u64;
        let mut c = 0u64;
        let mut last_persist = Instant::now();
        // Refuse before touching anything when the rebuild cannot start (a member must be
        // replaced first, too many failures), and do nothing when nothing is to be done.
        match (0..total).find(|&c| !self.state.is_clean(c)) {
            Some(first) => {
                plan_rebuild_cycle(&self.geo, &self.state, first)?;
            }
            None => {
                let pr = RebuildProgress {
                    cycles_done: total,
                    cycles_total: total,
                    bytes_written: 0,
                    elapsed_s: start.elapsed().as_secs_f64(),
                };
                progress(pr);
                return Ok(pr);
            }
        }
        self.persist(ArrayStateTag::Rebuilding)?;
        // A two-stage pipeline: while one batch's writes run, the next batch is read and
        // computed (their cycles occupy disjoint member ranges). Without it a rebuild into one
        // spare alternates between reading the survivors and writing the spare.
        let pipelined = opts.batches_in_flight > 1;
        let mut pending: Option<(Vec<raidcore::Plan>, Vec<u64>, Vec<Vec<Vec<u8>>>)> = None;
        // Cycles this call has rebuilt (marked), for `max_cycles`.
        let mut rebuilt_here = 0u64;
        let max_cycles = opts.max_cycles.unwrap_or(u64::MAX);
        // Restarts because survivor blocks read wrong: each repairs or records them, so a
        // block that keeps failing after its rewrite (a disk that cannot remap) ends it.
        let mut bad_restarts = 0usize;
        // A cycle that cannot be planned stops the rebuild; what was done before it is still
        // committed and recorded.
        let mut stop: Option<PoolError> = None;
        loop {
            let mut plans = Vec::new();
            let mut cycles = Vec::new();
            let in_flight = pending.as_ref().map_or(0, |(_, cs, _)| cs.len() as u64);
            while stop.is_none()
                && c < total
                && (cycles.len() as u64) < batch
                && rebuilt_here + in_flight + (cycles.len() as u64) < max_cycles
            {
                match plan_rebuild_cycle(&self.geo, &self.state, c) {
                    Ok(Some(p)) => {
                        plans.push(p);
                        cycles.push(c);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        stop = Some(e.into());
                        break;
                    }
                }
                c += 1;
            }
            if plans.is_empty() && pending.is_none() {
                if c >= total || rebuilt_here >= max_cycles || stop.is_some() {
                    break;
                }
                continue;
            }
            let empty: Vec<Vec<u8>> = plans.iter().map(|_| Vec::new()).collect();
            let mut users: Vec<&mut [u8]> = Vec::new();
            let mut empty = empty;
            users.extend(empty.iter_mut().map(|v| v.as_mut_slice()));
            let view = self.members_view();
            let (prepared, committed) = if pipelined {
                std::thread::scope(|s| {
                    let commit = pending
                        .as_ref()
                        .map(|(ps, _, bufs)| s.spawn(|| crate::exec::commit(ps, bufs, &view)));
                    let prepared = crate::exec::prepare(&plans, &users, &view);
                    (prepared, commit.map(|h| h.join().unwrap()))
                })
            } else {
                let committed = pending
                    .as_ref()
                    .map(|(ps, _, bufs)| crate::exec::commit(ps, bufs, &view));
                (crate::exec::prepare(&plans, &users, &view), committed)
            };
            let mut failed: Vec<u32> = Vec::new();
            let mut bad: Vec<crate::exec::BadRange> = Vec::new();
            if let Some(Err(e)) = &committed {
                failed.extend(e.failed_members());
            }
            if let Err(e) = &prepared {
                failed.extend(e.failed_members());
                bad.extend(e.bad.iter().copied());
            }
            if !failed.is_empty() || !bad.is_empty() {
                failed.sort();
                failed.dedup();
                if !failed.is_empty() {
                    self.fail_members(&failed)?;
                }
                if !bad.is_empty() {
                    // Latent sector errors or checksum mismatches on survivors: repaired from
                    // the remaining redundancy where it suffices, otherwise recorded lost and
                    // zeroed so the rebuild can go on.
                    bad_restarts += 1;
                    if bad_restarts > 4 * MAX_REPLANS {
                        self.persist(ArrayStateTag::Rebuilding)?;
                        return Err(PoolError::Io(format!(
                            "rebuild stopped: survivor blocks keep reading wrong after being \
                             rewritten (last: member {} byte {}); the progress so far is \
                             recorded: replace that member too",
                            bad[0].member,
                            self.data_offset_bytes + bad[0].offset_bytes
                        )));
                    }
                    self.repair_in_rebuild(&bad)?;
                }
                // Start over with the new failure set (clean cycles are skipped quickly).
                pending = None;
                c = 0;
                continue;
            }
            if let Some((ps, cs, _)) = pending.take() {
                for (p, &cy) in ps.iter().zip(&cs) {
                    written += p.writes.iter().map(|w| w.data.len as u64).sum::<u64>();
                    let to = match p.kind {
                        raidcore::PlanKind::Rebuild { to, .. } => to,
                        _ => unreachable!("rebuild plans only"),
                    };
                    self.state.mark_rebuilt(cy, to);
                    rebuilt_here += 1;
                }
            }
            let bufs = prepared.expect("checked above");
            if !plans.is_empty() {
                pending = Some((plans, cycles, bufs));
            }
            let done = self.state.clean_cycles();
            let pr = RebuildProgress {
                cycles_done: done,
                cycles_total: total,
                bytes_written: written,
                elapsed_s: start.elapsed().as_secs_f64(),
            };
            progress(pr);
            if let Some(max) = opts.speed_max_bytes_per_sec {
                let should = Duration::from_secs_f64(written as f64 / max as f64);
                let el = start.elapsed();
                if should > el {
                    std::thread::sleep(should - el);
                }
            }
            // Record progress now and then, so an interrupted rebuild resumes where it was.
            if last_persist.elapsed() > Duration::from_secs(1) {
                self.persist(ArrayStateTag::Rebuilding)?;
                last_persist = Instant::now();
            }
        }
        // Blocks lost during this rebuild: marked so that reads of them fail from now on.
        self.poison_pending()?;
        let tag = self.tag();
        self.persist(tag)?;
        if let Some(e) = stop {
            return Err(e);
        }
        Ok(RebuildProgress {
            cycles_done: self.state.clean_cycles(),
            cycles_total: total,
            bytes_written: written,
            elapsed_s: start.elapsed().as_secs_f64(),
        })
    }

    /// Reads every stripe and checks parity and mirrors.
    /// Deferred parity is flushed first (a listed stripe's background parity is stale by
    /// design, not damaged).
    pub fn verify(&mut self) -> Result<VerifyReport> {
        self.flush_bpgl(0)?;
        let mut r = VerifyReport::default();
        for c in 0..self.geo.cycles() {
            let plan = raidcore::plan_verify_cycle(&self.geo, &self.state, c);
            let bufs = match crate::exec::run_reads(&plan, &self.members_view()) {
                Ok(b) => b,
                Err(e) if e.read_errors.is_empty() => {
                    // Only blocks that read wrong: `verify` checks parity; `scrub` is what
                    // repairs blocks. Say so rather than compare damaged bytes.
                    return Err(PoolError::Io(format!(
                        "verify stopped at cycle {c}: {} member blocks read wrong (checksum \
                         mismatches or read errors); run `raidforge scrub` to repair them",
                        e.bad.len()
                    )));
                }
                Err(e) => {
                    let failed = e.failed_members();
                    self.fail_members(&failed)?;
                    return Err(PoolError::Io(format!(
                        "verify stopped: members {failed:?} failed while reading"
                    )));
                }
            };
            let outcome = raidcore::check_verify(&self.state, &plan, &bufs);
            r.cycles_checked += 1;
            r.stripes_checked += outcome.checked as u64;
            r.stripes_degraded += outcome.degraded as u64;
            r.inconsistent
                .extend(outcome.inconsistent.iter().map(|&s| (c, s)));
        }
        Ok(r)
    }

    /// Status for `raidforge status`.
    pub fn status(&self) -> Status {
        let mut s = self.status_without_ido();
        s.ido = Some(self.ido.status(self.zones_rebuilt()));
        s
    }

    /// [`Pool::status`] without the IDO section, and the zones rebuilt (a served pool adds
    /// the section outside the pool mutex: lock order).
    pub(crate) fn status_parts(&self) -> (Status, u64) {
        (self.status_without_ido(), self.zones_rebuilt())
    }

    fn status_without_ido(&self) -> Status {
        let failed = self.state.failed().to_vec();
        // The oldest layout generation any cycle is still in: a member replaced after it holds
        // nothing yet for that cycle (even when a later failure changed the target).
        let oldest = (0..self.geo.cycles())
            .map(|c| self.state.cycle_generation(c))
            .min()
            .unwrap_or(0);
        let members = (0..self.members.len())
            .map(|i| {
                let d = i as Disk;
                let st = if failed.contains(&d) {
                    "failed"
                } else if self.state.replaced_at(d) > oldest {
                    "rebuilding"
                } else if self.geo.scheme().spare_disks().contains(&d) {
                    "spare"
                } else {
                    "active"
                };
                let md = &self.desc.members[i];
                MemberStatus {
                    index: i,
                    path: md.path.clone(),
                    state: st.into(),
                    data_offset_bytes: self.data_offset_bytes,
                    read_bytes: md.read_bytes + self.counters[i].read_bytes.load(Ordering::Relaxed),
                    write_bytes: md.write_bytes
                        + self.counters[i].write_bytes.load(Ordering::Relaxed),
                    reads: md.reads + self.counters[i].reads.load(Ordering::Relaxed),
                    writes: md.writes + self.counters[i].writes.load(Ordering::Relaxed),
                    meta_writes: md.meta_writes
                        + self.counters[i].meta_writes.load(Ordering::Relaxed),
                    emulate: md.emulate.clone(),
                }
            })
            .collect();
        let state = if self.state.data_lost(&self.geo) {
            "failed"
        } else if !failed.is_empty() && !self.state.all_clean() {
            "degraded"
        } else if !self.state.all_clean() {
            "rebuilding"
        } else {
            "clean"
        };
        Status {
            state: state.into(),
            scheme: self.kind.name().into(),
            layout: layout::to_text(self.kind, &self.params),
            uuid: self.desc.uuid.clone(),
            size_bytes: self.capacity_bytes(),
            chunk_bytes: self.geo.chunk_bytes(),
            cycles: self.geo.cycles(),
            cycles_clean: self.state.clean_cycles(),
            failed,
            members,
            parity: self.parity.as_str().into(),
            bpgl_len: self.state.bpgl().len(),
            bpgl_capacity: self.state.bpgl().capacity(),
            fault_tolerance: self.state.fault_tolerance(&self.geo),
            checksums: self.checksums.is_some(),
            repairs: self.desc.repairs.clone(),
            lost: self.desc.lost.clone(),
            write_hole: self.write_hole.as_str().into(),
            journal: self.journal.as_ref().map(|j| j.stats()),
            ido: None,
        }
    }

    /// Zones whose every cycle is in the target layout.
    fn zones_rebuilt(&self) -> u64 {
        let zc = self.ido.zone_cycles();
        (0..self.ido.zones())
            .filter(|&z| {
                (z * zc..((z + 1) * zc).min(self.geo.cycles())).all(|c| self.state.is_clean(c))
            })
            .count() as u64
    }

    /// Unrebuilt cycles of every zone.
    pub(crate) fn zone_cycles_left(&self) -> Vec<u32> {
        let zc = self.ido.zone_cycles();
        (0..self.ido.zones())
            .map(|z| {
                (z * zc..((z + 1) * zc).min(self.geo.cycles()))
                    .filter(|&c| !self.state.is_clean(c))
                    .count() as u32
            })
            .collect()
    }

    /// The error for direct I/O while redirected data lives on the surrogate.
    fn ido_busy(&self) -> PoolError {
        PoolError::Usage(format!(
            "this pool is in the middle of a policy rebuild or its reclaim (phase {:?}; data              may live on the surrogate pool): serve it with `raidforge serve`, or finish with              `raidforge rebuild POOL`",
            self.ido.phase()
        ))
    }

    /// Zone tracking and the surrogate: sets the zone size (only while nothing is on a
    /// surrogate; popularity starts over) and records the surrogate pool's descriptor.
    pub fn configure_ido(
        &mut self,
        zone_bytes: Option<u64>,
        surrogate: Option<&Path>,
    ) -> Result<()> {
        if let Some(zb) = zone_bytes {
            if self.ido.phase() != Phase::Normal || self.ido.needs_surrogate_now() {
                return Err(PoolError::Usage(
                    "the zone size cannot change during a policy rebuild or reclaim".into(),
                ));
            }
            let keep = self.ido.surrogate_path();
            let fresh = Ido::new(
                self.geo.capacity_bytes(),
                self.geo.data_per_cycle() * self.geo.chunk_bytes(),
                zb,
            )?;
            fresh.set_surrogate_path(keep);
            self.ido = Arc::new(fresh);
        }
        if let Some(s) = surrogate.filter(|s| nbd::client::is_uri(&s.to_string_lossy())) {
            // A pool served by another process: the address must parse; it is connected to
            // when a rebuild needs it (that server need not be up yet).
            nbd::client::Address::parse(&s.to_string_lossy()).map_err(PoolError::Usage)?;
            self.ido.set_surrogate_path(Some(s.to_path_buf()));
        } else if let Some(s) = surrogate {
            let canon = std::fs::canonicalize(s).map_err(|e| {
                PoolError::Usage(format!(
                    "surrogate pool {}: {e} (create it first, e.g. `raidforge create {}                      --scheme raid1 --disks 2 --member a.img --member b.img --size 1G`)",
                    s.display(),
                    s.display()
                ))
            })?;
            if canon == std::fs::canonicalize(&self.desc_path).unwrap_or_default() {
                return Err(PoolError::Usage(
                    "a pool cannot be its own surrogate: name another pool".into(),
                ));
            }
            Self::read_descriptor(&canon)?;
            self.ido.set_surrogate_path(Some(canon));
        }
        let ido = Arc::clone(&self.ido);
        ido.touch();
        ido.persist_if_dirty(&RecordOnly(self), self.uuid, true)
    }

    /// The IDO state (zone popularity, policy, D-Map).
    pub fn ido(&self) -> &Arc<Ido> {
        &self.ido
    }

    /// The array UUID.
    pub(crate) fn uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// Writes an IDO record to the first two present members (slot `seq mod 2` of the area
    /// 512 KiB..1 MiB) and makes it durable.
    pub(crate) fn write_ido_record(
        members: &[Option<Arc<dyn Member>>],
        counters: &[Counters],
        data_offset_bytes: u64,
        seq: u64,
        bytes: &[u8],
        sync: bool,
    ) -> Result<()> {
        assert!(
            bytes.len() <= IDO_SLOT_BYTES,
            "IDO record larger than its slot"
        );
        let at = IDO_OFFSET_BYTES + (seq % 2) * IDO_SLOT_BYTES as u64;
        assert!(at + IDO_SLOT_BYTES as u64 <= data_offset_bytes);
        let mut copies = 0;
        for (i, m) in members.iter().enumerate() {
            let Some(m) = m else { continue };
            m.write_at(bytes, at)
                .and_then(|_| if sync { m.flush() } else { Ok(()) })
                .map_err(|e| PoolError::Io(format!("IDO record on member {i}: {e}")))?;
            counters[i].meta_writes.fetch_add(1, Ordering::Relaxed);
            copies += 1;
            if copies == 2 {
                break;
            }
        }
        Ok(())
    }
}

/// The exclusive pool as IDO sees it: only its record can be written (requests of a pool in
/// a policy rebuild go through a served pool).
struct RecordOnly<'a>(&'a Pool);

impl crate::ido::MainPool for RecordOnly<'_> {
    fn chunk_bytes(&self) -> u64 {
        self.0.geo.chunk_bytes()
    }
    fn needs_reconstruction(&self, chunks: std::ops::Range<u64>) -> Vec<bool> {
        crate::ido::chunks_needing_reconstruction(&self.0.geo, &self.0.state, chunks)
    }
    fn read(&self, _: u64, _: &mut [u8]) -> Result<()> {
        Err(self.0.ido_busy())
    }
    fn write(&self, _: u64, _: &[u8]) -> Result<()> {
        Err(self.0.ido_busy())
    }
    fn sync(&self) -> Result<()> {
        self.0.flush_members()
    }
    fn write_record(&self, seq: u64, bytes: &[u8], sync: bool) -> Result<()> {
        Pool::write_ido_record(
            &self.0.members,
            &self.0.counters,
            self.0.data_offset_bytes,
            seq,
            bytes,
            sync,
        )
    }
}

/// Both IDO record slots of every present member.
fn ido_records(members: &[Option<Arc<dyn Member>>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for m in members.iter().flatten() {
        for slot in 0..2u64 {
            let at = IDO_OFFSET_BYTES + slot * IDO_SLOT_BYTES as u64;
            // The head says how long the record is (reading whole slots of every member of
            // a wide pool at each open would be wasteful).
            let mut head = vec![0u8; 4096];
            if m.read_at(&mut head, at).is_err() || &head[..5] != b"RFIDO" {
                continue;
            }
            let len = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes")) as usize;
            if len <= head.len() {
                out.push(head);
                continue;
            }
            let mut b = vec![0u8; len.min(IDO_SLOT_BYTES).div_ceil(4096) * 4096];
            if m.read_at(&mut b, at).is_ok() {
                out.push(b);
            }
        }
    }
    out
}

/// The newest valid deferred-parity record of array `uuid` on any of `members` (both slots of
/// each are read).
fn newest_bpgl(members: &[Option<Arc<dyn Member>>], uuid: &[u8; 16]) -> Option<BpglRecord> {
    let mut best: Option<BpglRecord> = None;
    for m in members.iter().flatten() {
        for slot in 0..2u64 {
            let at = BPGL_OFFSET_BYTES + slot * BPGL_SLOT_BYTES as u64;
            let mut head = vec![0u8; 4096];
            if m.read_at(&mut head, at).is_err() {
                continue;
            }
            let Some(len) = BpglRecord::encoded_len(&head) else {
                continue;
            };
            let mut buf = vec![0u8; len];
            if m.read_at(&mut buf, at).is_err() {
                continue;
            }
            if let Some(r) = BpglRecord::decode(&buf) {
                if &r.uuid == uuid && best.as_ref().is_none_or(|b| r.sequence > b.sequence) {
                    best = Some(r);
                }
            }
        }
    }
    best
}

/// The generation in the first 48 bytes of a member's superblock when they name pool `uuid`
/// (`desc_uuid`, the descriptor's text form), slot `i` of `n`, whatever the rest holds: a
/// superblock torn by a crash while it was being rewritten (its CRC fails) still says whose
/// it is. `None` when those bytes do not agree.
fn torn_generation(m: &dyn Member, desc_uuid: &[u8; 16], i: usize, n: usize) -> Option<u64> {
    let mut b = [0u8; 48];
    m.read_at(&mut b, 0).ok()?;
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    (b[..8] == *b"RAIDFRG\0"
        && b[16..32] == desc_uuid[..]
        && u32_at(32) as usize == i
        && u32_at(36) as usize == n)
        .then(|| u64::from_le_bytes(b[40..48].try_into().expect("8 bytes")))
}

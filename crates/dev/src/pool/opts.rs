//! How to create and rebuild a pool: the options the commands fill in.

use super::*;

/// Member I/O alignment (and buffer alignment) for O_DIRECT members.
pub const DIRECT_ALIGN_BYTES: u64 = 4096;

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
    /// On-disk format of the superblocks (raidforge's own by default).
    pub metadata: Metadata,
}

/// A pool's on-disk format (`raidforge create --metadata`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Metadata {
    /// raidforge's own superblock (`raidcore::superblock`): everything raidforge can do.
    #[default]
    Raidforge,
    /// Linux MD's v1.2 superblock with mdadm's defaults: the kernel assembles the pool as an
    /// ordinary MD array (raid0/1/4/5/6/10 only; no journal, checksums, lazy parity or IDO).
    Md,
}

impl Metadata {
    /// Parses `raidforge` or `md`.
    pub fn parse(s: &str) -> std::result::Result<Metadata, String> {
        match s {
            "raidforge" | "native" => Ok(Metadata::Raidforge),
            "md" | "1.2" | "md-1.2" => Ok(Metadata::Md),
            _ => Err(format!(
                "unknown metadata '{s}': use 'raidforge' (the default) or 'md' (Linux MD v1.2)"
            )),
        }
    }
}

impl CreateOpts {
    /// Options for a pool of `scheme` over `members` with chunks of `chunk_bytes`, everything
    /// else as `raidforge create` has it by default: members sized like the smallest existing
    /// one, no emulation, no `--force`, no O_DIRECT, eager parity, the default deferred-parity
    /// bound, no checksums, no journal. Change the rest with struct update syntax.
    pub fn new(
        scheme: SchemeKind,
        params: Params,
        members: Vec<PathBuf>,
        chunk_bytes: u64,
    ) -> CreateOpts {
        CreateOpts {
            scheme,
            params,
            members,
            size_bytes: None,
            chunk_bytes,
            emulate: None,
            force: false,
            direct: false,
            parity: ParityPolicy::Eager,
            bpgl_capacity: None,
            checksums: false,
            write_hole: WriteHole::None,
            journal_bytes: None,
            metadata: Metadata::Raidforge,
        }
    }
}

/// The options tests and examples start from: `n` members `m0.img`, `m1.img`, ... in `dir`,
/// each `size_bytes`, 64 KiB chunks, the rest as [`CreateOpts::new`] has it. One place to
/// change when an option is added.
pub fn test_opts(scheme: SchemeKind, dir: &Path, n: usize, size_bytes: u64) -> CreateOpts {
    let params = Params {
        disks: Some(n),
        ..Params::default()
    };
    let members = (0..n).map(|i| dir.join(format!("m{i}.img"))).collect();
    CreateOpts {
        size_bytes: Some(size_bytes),
        ..CreateOpts::new(scheme, params, members, 64 << 10)
    }
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
pub const JOURNAL_OFFSET_BYTES: u64 = raidcore::region::POOL_REGIONS_START;

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
    /// Windows (of one batch or the next) read, computed and written at once, each on its
    /// own ([`crate::pool::WindowFlow`]): 1 runs them one after the other; more keep every
    /// member's queue full while one window waits for its slowest member. The buffers held
    /// are about this many times `window_bytes`. 0 ([`WINDOWS_IN_FLIGHT_BY_MEMBERS`], the
    /// default): [`raidcore::rebuild::default_windows_in_flight`] of the pool's members.
    pub windows_in_flight: usize,
    /// Stop after rebuilding this many cycles (None = rebuild everything). The progress made
    /// is recorded in the superblocks, so a later rebuild resumes where this one stopped.
    pub max_cycles: Option<u64>,
    /// Bytes of buffers a batch's plans are run in at a time ([`raidcore::Plan::windows`]):
    /// a rebuild holds about `windows_in_flight` windows, whatever the size of a cycle (a RAID+ cycle over 31 members is
    /// hundreds of MiB). A group of buffers that work together is never cut, so one window
    /// may be larger.
    pub window_bytes: usize,
}

impl RebuildOpts {
    /// Windows a rebuild over `members` members keeps in flight: `windows_in_flight` (or the
    /// default for that many members) at full speed; while clients are busy (`busy`) or a
    /// speed limit holds, at most two (one read beside one written), so that what a step
    /// starts before its pacing pause stays about one window.
    pub fn windows(&self, busy: bool, members: usize) -> usize {
        let windows = match self.windows_in_flight {
            WINDOWS_IN_FLIGHT_BY_MEMBERS => raidcore::rebuild::default_windows_in_flight(members),
            w => w,
        };
        raidcore::rebuild::windows_in_flight(
            windows,
            busy || self.speed_max_bytes_per_sec.is_some_and(|m| m > 0),
        )
    }
}

/// [`RebuildOpts::window_bytes`] by default.
pub const DEFAULT_REBUILD_WINDOW: usize = 16 << 20;

/// [`RebuildOpts::windows_in_flight`] by default: as many as
/// [`raidcore::rebuild::default_windows_in_flight`] gives for the pool's members (4 up to 16
/// members, one per four members above, 16 from 61 on): with [`DEFAULT_REBUILD_WINDOW`], 64
/// to 256 MiB of buffers. Windows of 8 MiB cut RAID+ n=13 k=4 cycles (12 MiB of buffers) in
/// two and left runs unmerged (bench/calibrate.py: 4.4 s against 4.0 s with 16 MiB).
pub const WINDOWS_IN_FLIGHT_BY_MEMBERS: usize = 0;

impl Default for RebuildOpts {
    /// Eight cycles at a time, windows of 16 MiB in flight by the member count, no speed
    /// limit, every cycle.
    fn default() -> RebuildOpts {
        RebuildOpts {
            parallel_cycles: 8,
            speed_max_bytes_per_sec: None,
            speed_min_bytes_per_sec: None,
            windows_in_flight: WINDOWS_IN_FLIGHT_BY_MEMBERS,
            max_cycles: None,
            window_bytes: DEFAULT_REBUILD_WINDOW,
        }
    }
}

/// Wraps every member a pool opens (member index, opened member -> the member the pool uses):
/// the fault-injection harness ([`crate::faultsim`]) puts its fault layer between the pool and
/// its files this way. Applied after assembly has read the superblocks.
pub type MemberWrap = Arc<dyn Fn(usize, Arc<dyn Member>) -> Arc<dyn Member> + Send + Sync>;

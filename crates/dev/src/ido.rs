//! IDO in the engine (seed 003): zone popularity counted on every request, a surrogate pool
//! that takes redirected writes and migrated hot zones during a rebuild, a D-Map of what lives
//! on the surrogate, a reclaimer that writes redirected data home afterwards, and the record
//! that keeps all of it across restarts (member bytes 512 KiB..1 MiB, two alternating slots).
//!
//! Every decision is the core's: this module holds a [`raidcore::ido::Ido`] (the controller
//! the simulator executes too) and carries out what it answers. [`raidcore::ido::Ido::route_read`]
//! / [`raidcore::ido::Ido::route_write`] say where each piece of a request is served (the main
//! pool or a surrogate offset), [`raidcore::ido::Ido::zone_rebuilt`] which hot zone to migrate
//! and where, [`raidcore::ido::Ido::copy_done`] maps a finished copy,
//! [`raidcore::ido::Ido::next_reclaim`] / [`raidcore::ido::Ido::reclaim_done`] drive the
//! write-back, and [`raidcore::ido::Ido::encode_state`] is the persistent state (zone table with
//! popularity and flags, D-Map, hot zones, phase, policy, surrogate log pointer). So the
//! surrogate is laid out as the core's append-only log, WorkOut copies reads seen twice, VDF is
//! the core's 4 KiB-block cache that evicts blocks of surviving members first, and PRO ranks
//! zones by the reads since the failure, exactly as in `raidforge sim`.
//!
//! What is this executor's own: the I/O, its order and durability, the locks, the surrogate
//! connection, and the bookkeeping the core leaves to executors (rebuilt cycles per zone,
//! status counters).
//!
//! Rules that keep every read returning the newest data (checked by tests/ido.rs):
//! - A request is routed under `Ido::inner`: writes (and migrations, reclaim steps, drains)
//!   exclusively, reads shared. The D-Map changes only under the exclusive lock, except for
//!   clean copies that a read fills (the same data the main pool holds). A write that can
//!   change nothing IDO records (PR, PRO or VDF, D-Map empty) runs under the shared lock
//!   (`Ido::write_shared`); under VDF, once it has landed, admissions of its blocks made
//!   meanwhile are spoiled or dropped (`raidcore::ido::Ido::array_write_done`).
//! - A redirected write is durable on the surrogate with the header that maps it (in front
//!   of it in the log, one request: [`raidcore::ido::LogHeader`]) before it is acknowledged;
//!   a start maps the writes after the newest record again from the log ([`replay_log`]),
//!   and writes no record before it has. A record goes first when anything else took log
//!   space since the chain's end, so no other data sits inside a chain.
//! - A write routed to the main pool that unmapped ranges is durable there before the D-Map
//!   without them is recorded (a crash in between leaves the older, acknowledged data
//!   mapped). A copy (migration, WorkOut fill, VDF admission) is durable on
//!   the surrogate before the core maps it. A reclaimed range is unmapped only after its data
//!   is durable on the main pool.
//! - A VDF cache hit is served from the slots its blocks held when it was routed only if
//!   they still hold them after the read (`raidcore::ido::Ido::vdf_cached`): reads admit
//!   blocks beside it and may hand an evicted block's slot to another block; otherwise the
//!   main pool serves it.
//! - When the record could not take one more D-Map entry, writes go to the main pool
//!   (`route_write_limited`) and copies are dropped.
//! - Surrogate failure: when the surrogate pool loses its redundancy (a member failed) or an
//!   I/O on it fails, the core stops using it (`set_surrogate_available(false)`, which drops
//!   clean ranges; recorded at once, since writes to those ranges no longer touch the
//!   D-Map), its dirty data is copied home under the exclusive lock, the D-Map emptied and
//!   recorded, the surrogate dropped; the rebuild continues as PR. Nothing
//!   acknowledged is lost as long as the surrogate can still be read (it is a redundant pool:
//!   RAID1 of two members by default).
//! - The surrogate is a pool opened here or a pool another process serves (`raidforge serve`),
//!   named by an NBD URI and reached with [`nbd::client`]; its members' state is that server's
//!   business, so only a failing request drains it, and a broken connection is retried once
//!   on a new one (a restarted server is found again).
//!
//! Locking: `Ido::inner` (a read-write lock) is taken before stripe locks and the pool mutex,
//! never while holding them; the core sits in a mutex inside it (held only for a decision,
//! never across I/O or the pool mutex). In normal state no lock is taken at all: a request
//! only adds 1 to its zone's atomic counter, and the counts are folded into the core's zone
//! table (`ZoneTable::add_counts`) at each epoch end and before the table is read or
//! recorded. The epoch's request count is batched per thread ([`REQUEST_BATCH`]).
//!
//! The record (`RECORD_FRAME`, [`raidcore::record`]'s frame; little-endian), in two
//! alternating slots (`IDO_SLOTS`: member bytes 512 KiB..768 KiB and 768 KiB..1 MiB) of the
//! first `tolerance + 1` present members (at least two); the newest valid one of the array's
//! UUID wins:
//!
//! ```text
//! offset  size  field
//!      0     8  magic "RFIDO\0\0\0"     8  4  version (3)     12  4  length incl. CRC
//!     16    16  array UUID                32  8  sequence (slot = sequence mod 2)
//!     40     8  zone bytes                48  4  zone count Z
//!     52     1  surrogate dropped      53..64  zero
//!     64     2  surrogate path (or NBD URI) length P, then P bytes
//!      .     4  core state length C, then C bytes: raidcore::ido::Ido::encode_state ("RFIDOST":
//!               phase, policy, log pointer, hot zones, the ZoneTable record, the DMap record,
//!               its own CRC-32C)
//!      .     4  CRC-32C of everything before it
//!      .        zero padding to a multiple of 4 KiB
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use raidcore::ido::{
    CopyJob, CopyKind, Extent, IdoConfig, LogHeader, Phase as CorePhase, Source, ZoneFlag,
    ZoneTable, LOG_HEADER_BYTES, VDF_BLOCK,
};
use raidcore::record::{Frame, CRC_BYTES};
use serde::{Deserialize, Serialize};

use crate::dual_slot::DualSlot;
use crate::pool::{Pool, PoolError};
use crate::serve_support::{Concurrency, SharedPool};

type Result<T> = std::result::Result<T, PoolError>;
type Core = raidcore::ido::Ido;

/// The record's two slots ([`raidcore::region::IDO`]: 512 KiB..768 KiB and 768 KiB..1 MiB).
pub(crate) const IDO_SLOTS: DualSlot = DualSlot::new("IDO record", raidcore::region::IDO);
/// Member offset of the first of the two IDO record slots.
pub const IDO_OFFSET_BYTES: u64 = IDO_SLOTS.region.offset;
/// Bytes of one slot.
pub const IDO_SLOT_BYTES: usize = IDO_SLOTS.slot_bytes() as usize;
/// Default zone size (the seed's 12 MB).
pub const DEFAULT_ZONE_BYTES: u64 = 12 << 20;
/// Most zones a pool may have (their counters must fit half a record slot).
pub const MAX_ZONES: u64 = 32 * 1024;
const _: () = assert!(MAX_ZONES * 4 <= IDO_SLOT_BYTES as u64 / 2);
const _: () = assert!(
    MAX_ZONES <= raidcore::ido::MAX_ZONES,
    "the core's bound is the larger"
);
/// Requests per popularity epoch: at the end of each, every zone's count is halved.
pub const EPOCH_REQUESTS: u64 = 1 << 16;
/// Requests a thread counts on its own before adding them to the pool's shared count.
pub const REQUEST_BATCH: u64 = 64;
/// Most bytes one reclaim step writes back.
pub const RECLAIM_STEP_BYTES: u64 = 1 << 20;

thread_local! {
    /// (the `Ido` counted for, requests not yet added to its shared count).
    static LOCAL_REQUESTS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((u64::MAX, 0)) };
    /// Copies this thread's reads left for after their replies ([`copies_after_reply`]):
    /// `None` unless the thread defers them.
    static AFTER_REPLY: std::cell::RefCell<Option<Vec<LeftCopy>>> =
        const { std::cell::RefCell::new(None) };
}

/// A copy left for after the reply: the `Ido`'s id, the job, the bytes the read returned.
type LeftCopy = (u64, CopyJob, Vec<u8>);

/// Runs `read` with the copies its routed reads ask for (WorkOut's fill of a popular read,
/// VDF's admission of a miss) left for after the reply: the caller sends the reply, then calls
/// [`Ido::copy_after_reply`] on this thread. The NBD export does so; every other caller of a
/// read waits for its copy, as before. Made before the reply, a copy (a surrogate write and
/// sync) was in the latency of the read that asked for it, where the simulator makes it in the
/// background (`sim::exec::ido::sur_copy`).
pub(crate) fn copies_after_reply<T>(read: impl FnOnce() -> T) -> T {
    AFTER_REPLY.with(|p| {
        p.borrow_mut().get_or_insert_with(Vec::new);
    });
    read()
}
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

const MAGIC: &[u8; 8] = b"RFIDO\0\0\0";
/// Version 3: the core's whole state (`raidcore::ido::Ido::encode_state`). Versions 1 and 2
/// (the engine's own zone-slot layout) are refused with a way out.
const RECORD_VERSION: u32 = 3;
const HEADER: usize = 64;
/// The record's frame ([`raidcore::record`]), written in whole 4 KiB blocks (O_DIRECT
/// members). The smallest record holds an empty surrogate name (2 bytes) and an empty state
/// (4).
pub(crate) const RECORD_FRAME: Frame = Frame {
    magic: MAGIC,
    version: RECORD_VERSION,
    header_bytes: HEADER + 6,
    max_bytes: IDO_SLOT_BYTES,
    align: 4096,
};
const MAX_PATH: usize = 1024;
/// Bytes of one D-Map extent in the core's record.
const EXTENT_BYTES: usize = 25;

/// The rebuild policies of seed 003 are raidcore's (`pr`, `pro`, `workout`, `vdf`, `ido`).
pub use raidcore::ido::RebuildPolicy;

/// Parses a policy name, with an error that lists the choices.
pub fn parse_policy(s: &str) -> std::result::Result<RebuildPolicy, String> {
    s.parse()
        .map_err(|_| format!("unknown rebuild policy '{s}'; choose pr, pro, workout, vdf or ido"))
}

/// What the engine's IDO machinery is doing (the core's phase, mirrored for the lock-free
/// request path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Normal state: only popularity counting.
    Normal = 0,
    /// A rebuild with a policy is under way.
    Rebuilding = 1,
    /// The rebuild is done; redirected data is being written back.
    Reclaiming = 2,
}

impl Phase {
    fn from_code(c: u8) -> Option<Phase> {
        [Phase::Normal, Phase::Rebuilding, Phase::Reclaiming]
            .get(c as usize)
            .copied()
    }
    fn of(p: CorePhase) -> Phase {
        match p {
            CorePhase::Normal => Phase::Normal,
            CorePhase::Rebuilding => Phase::Rebuilding,
            CorePhase::Reclaiming => Phase::Reclaiming,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Normal => "normal",
            Phase::Rebuilding => "rebuilding",
            Phase::Reclaiming => "reclaiming",
        }
    }
}

/// Everything under the lock.
struct Inner {
    /// The decisions (held in a mutex: a shared holder of `inner` may route a read).
    core: Mutex<Core>,
    surrogate_path: Option<PathBuf>,
    seq: u64,
    /// Unrebuilt cycles per zone (during a rebuild).
    left: Vec<u32>,
    /// Zones in the order they became fully rebuilt (the first 256).
    rebuilt_order: Vec<u64>,
    migrated_bytes: u64,
    /// Of `migrated_bytes`, those taken from the rebuild's own reads and writes.
    migrated_from_rebuild_bytes: u64,
    reclaimed_bytes: u64,
    reclaim_steps: u64,
    /// Why the surrogate was dropped, if it was.
    dropped: Option<String>,
    /// The redirected writes since the newest record, in the surrogate's log
    /// ([`raidcore::ido::LogHeader`]).
    chain: Chain,
    /// Restored from a record after which redirected writes may follow in the surrogate's
    /// log (the array's UUID, to check their headers by): they are mapped again when the
    /// surrogate is attached, and until then no record may be written (it would end their
    /// chain unread).
    replay: Option<[u8; 16]>,
}

/// Where the chain of redirected writes after the newest record stands.
#[derive(Clone, Copy, Debug, Default)]
struct Chain {
    /// The newest record's sequence, which the chain's headers carry.
    base: u64,
    /// Writes in the chain so far (the next one's index).
    len: u64,
    /// The log offset where the next header goes (the end of the last write, or the
    /// record's log pointer).
    end: u64,
}

impl Inner {
    fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn core_mut(&mut self) -> &mut Core {
        self.core.get_mut().unwrap_or_else(|e| e.into_inner())
    }
}

/// Status of the IDO machinery (part of `raidforge status --json` as `ido`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IdoStatus {
    /// Zone popularity counting is on.
    pub tracking: bool,
    /// "normal", "rebuilding" or "reclaiming".
    pub phase: String,
    /// The rebuild policy of the current (or last) policy rebuild.
    pub policy: String,
    pub zone_bytes: u64,
    pub zones_total: u64,
    /// Hot zones chosen for the IDO rebuild (hottest first, the first 64).
    pub hot_zones: Vec<u64>,
    pub zones_hot: u64,
    pub zones_rebuilt: u64,
    /// Zones in the order they were completely rebuilt (the first 64).
    pub rebuilt_order: Vec<u64>,
    /// Zones whose whole content is on the surrogate (flag `11`).
    pub zones_migrated: u64,
    pub migrated_bytes: u64,
    /// Of `migrated_bytes`, those taken from what the rebuild had just read and written
    /// (the rest were read from the pool again).
    #[serde(default)]
    pub migrated_from_rebuild_bytes: u64,
    /// User requests served (wholly or partly) by the surrogate.
    pub redirected_reads: u64,
    pub redirected_writes: u64,
    pub redirected_requests: u64,
    /// Writes of this rebuild that went to the main pool because the surrogate was full.
    #[serde(default)]
    pub writes_fallback: u64,
    /// D-Map: ranges whose newest data is on the surrogate, and their bytes (dirty ones are
    /// written back by the reclaimer).
    pub dmap_entries: u64,
    pub dmap_bytes: u64,
    pub dmap_dirty_bytes: u64,
    /// Surrogate bytes allocated in this rebuild (the core's log) and the surrogate's size.
    #[serde(default)]
    pub surrogate_used_bytes: u64,
    #[serde(default)]
    pub surrogate_bytes: u64,
    /// Dirty ranges still to be written back, and the reclaim so far.
    #[serde(default)]
    pub reclaim_ranges_left: u64,
    #[serde(default)]
    pub reclaim_steps: u64,
    pub reclaimed_bytes: u64,
    /// The surrogate pool's descriptor (or NBD address), and "attached", "closed" or
    /// "dropped: why".
    pub surrogate: Option<PathBuf>,
    pub surrogate_state: String,
    /// The hottest zones and their popularity (the first 8).
    pub popular: Vec<(u64, u32)>,
    /// Zones flagged `10` (rebuilt) and `11` (rebuilt and migrated) in the core's zone table.
    #[serde(default)]
    pub zones_flag_rebuilt: u64,
    #[serde(default)]
    pub zones_flag_migrated: u64,
    /// Popularity epochs ended so far (each halved every zone's count).
    #[serde(default)]
    pub epochs: u64,
    /// The sequence of the newest IDO record written (or read at the start).
    #[serde(default)]
    pub record_seq: u64,
    /// Redirected writes since that record, found in the surrogate's log at a start if the
    /// pool stopped before the next record.
    #[serde(default)]
    pub log_writes: u64,
    /// Surrogate requests that carried redirected writes: fewer than `redirected_writes`
    /// when concurrent writes went together (one request and one sync for several).
    #[serde(default)]
    pub redirected_write_requests: u64,
    /// VDF cache hits served again by the pool: a slot they read was given to another block
    /// while they read it (concurrent admissions evict).
    #[serde(default)]
    pub vdf_rereads: u64,
}

/// The engine's IDO state of one pool. See the module documentation.
pub struct Ido {
    zone_bytes: u64,
    zone_cycles: u64,
    zones: u64,
    /// The core's phase, for the request path to read without a lock.
    phase: AtomicU8,
    tracking: AtomicBool,
    /// No record is ever written (a pool in Linux MD's format has nowhere to keep one), and
    /// no request counted.
    no_records: AtomicBool,
    /// Requests counted per zone since the last fold into the core's table.
    pop: Vec<AtomicU32>,
    /// Identifies this state in the per-thread request batches (see [`Ido::note`]).
    id: u64,
    requests: AtomicU64,
    redirected_reads: AtomicU64,
    redirected_writes: AtomicU64,
    /// Surrogate requests that carried redirected writes (fewer than the writes when
    /// concurrent ones were written together).
    redirect_requests: AtomicU64,
    /// VDF reads served again by the pool because a slot they read was handed to another
    /// block meanwhile.
    vdf_rereads: AtomicU64,
    /// Popularity changed since the last record.
    pop_dirty: AtomicBool,
    /// A surrogate I/O failed under a shared lock: drain at the next exclusive section.
    drain_wanted: AtomicBool,
    /// The last record write failed: the members may hold an older state than this one.
    /// A write records it again before anything else, and fails if it cannot (a write
    /// acknowledged on the strength of a state only memory holds would be lost to a restart
    /// that reads the older record).
    record_stale: AtomicBool,
    /// The surrogate's log was replayed at this start: the next redirected write records
    /// the state first, so that it starts a chain of its own. Continuing the replayed chain,
    /// a write of the length of one a crash tore would end right at the header of a write
    /// after it that survived (written in the same group, never acknowledged), and the
    /// next start would map that stale write again
    /// (`a_write_left_beyond_a_torn_one_in_the_log_is_never_mapped_later`).
    rechain: AtomicBool,
    inner: RwLock<Inner>,
    /// Threads waiting to take `inner` shared ([`Ido::read_inner`]): the reclaimer, which
    /// takes it exclusively step after step, lets them in between ([`Ido::let_readers_in`]).
    readers_waiting: AtomicU32,
    surrogate: Mutex<Option<Surrogate>>,
    /// IDO's hot zones of the running rebuild, readable without `inner` (the served
    /// rebuild's pipeline asks while it holds stripes: [`Ido::any_hot`]).
    hot: Mutex<Vec<u64>>,
    /// Writes waiting for the exclusive lock, and the results of those a leader ran
    /// ([`Ido::write`]).
    queue: Mutex<WriteQueue>,
    queue_cv: Condvar,
    next_write: AtomicU64,
}

/// The writes queued for the exclusive lock ([`Ido::write`]'s group commit).
#[derive(Default)]
struct WriteQueue {
    entries: Vec<Queued>,
    /// A writer holds (or is taking) the lock to run the queue.
    leading: bool,
    results: std::collections::HashMap<u64, Result<()>>,
}

struct Queued {
    id: u64,
    offset: u64,
    data: Vec<u8>,
}

/// Redirected writes routed and not yet written: their headers and data, one after the
/// other from log offset `at`, and the state before the first (to put back if the surrogate
/// fails them).
#[derive(Default)]
struct Group {
    at: u64,
    buf: Vec<u8>,
    writes: Vec<Queued>,
    saved: Option<(Core, Chain)>,
}

/// The leader's duty to hand out its batch's results, also if it panics (the writers would
/// wait for ever).
struct Leading<'a> {
    ido: &'a Ido,
    ids: Vec<u64>,
    results: Vec<(u64, Result<()>)>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let mut q = self.ido.queue.lock().unwrap_or_else(|e| e.into_inner());
        let done: std::collections::HashSet<u64> = self.results.iter().map(|r| r.0).collect();
        for &id in &self.ids {
            if !done.contains(&id) {
                q.results.insert(
                    id,
                    Err(PoolError::Io(
                        "internal error: the write's batch was abandoned".into(),
                    )),
                );
            }
        }
        q.results.extend(self.results.drain(..));
        q.leading = false;
        self.ido.queue_cv.notify_all();
    }
}

/// `e` again, for another write that failed with it.
fn same_error(e: &PoolError) -> PoolError {
    match e {
        PoolError::Io(s) => PoolError::Io(s.clone()),
        PoolError::Usage(s) => PoolError::Usage(s.clone()),
        other => PoolError::Io(other.to_string()),
    }
}

/// What IDO needs of the main pool (implemented by the served pool and the exclusive one).
pub(crate) trait MainPool {
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()>;
    fn write(&self, off: u64, data: &[u8]) -> Result<()>;
    /// Makes every completed write durable.
    fn sync(&self) -> Result<()>;
    /// Writes an IDO record to the metadata area of the members (`sync`: durably before
    /// returning).
    fn write_record(&self, seq: u64, bytes: &[u8], sync: bool) -> Result<()>;
    /// The pool's chunk size.
    fn chunk_bytes(&self) -> u64;
    /// For each logical chunk of `chunks`, whether reading it needs reconstruction now (VDF's
    /// eviction order; `raidcore::ido::chunk_needs_reconstruction`).
    fn needs_reconstruction(&self, chunks: std::ops::Range<u64>) -> Vec<bool>;
    /// Writes of data to the pool landed so far in `zone` (a count that only grows; it may
    /// count other zones' too), if the pool keeps one: a [`ZoneImage`] of the zone is current
    /// only while it has not moved.
    fn writes_landed(&self, zone: u64) -> Option<u64> {
        let _ = zone;
        None
    }
    /// Reads `buf.len()` bytes at `off`, taking what `image` holds of them from it. Returns
    /// the bytes taken from the image.
    fn read_with_image(&self, off: u64, buf: &mut [u8], image: &ZoneImage) -> Result<u64> {
        let _ = image;
        self.read(off, buf).map(|()| 0)
    }
}

/// What the rebuild read and wrote of a hot zone's cycles (member, byte offset in its data
/// area, the bytes), and the count of writes landed in the zone when its first batch locked
/// its stripes ([`MainPool::writes_landed`]): the zone's migration copies its data from here
/// instead of reading the zone from the pool again, as the seed (and the simulator) migrate
/// the data the rebuild fetched. Taking the zone again from the pool made IDO's rebuild
/// 19.6 s against PR's 18.2 s in the calibration of issue 32 (18.2 s with the migrations
/// skipped).
pub(crate) struct ZoneImage {
    pub(crate) writes_seen: u64,
    /// The array state's event count the rebuild planned these cycles at: the image's
    /// places are valid only while it has not moved (no failure or replacement since).
    pub(crate) state_generation: Option<u64>,
    pub(crate) ranges: std::collections::BTreeMap<(layout::Disk, u64), Vec<u8>>,
}

impl ZoneImage {
    /// The bytes of `len` at `(member, offset)`, if one range holds them whole.
    pub(crate) fn get(&self, member: layout::Disk, offset: u64, len: u64) -> Option<&[u8]> {
        // The last range at or before `(member, offset)` may be another member's (tuples
        // sort by member first), so the member is checked before the offset is subtracted.
        let ((m, at), b) = self.ranges.range(..=(member, offset)).next_back()?;
        if *m != member {
            return None;
        }
        let from = usize::try_from(offset - at).ok()?;
        let end = from.checked_add(usize::try_from(len).ok()?)?;
        (end <= b.len()).then(|| &b[from..end])
    }
}

/// The surrogate set: a pool opened in this process, or an export of a pool served by
/// another process (`raidforge serve`), reached over NBD (one request at a time).
#[allow(clippy::large_enum_variant)] // one per pool
enum Surrogate {
    Local(Arc<SharedPool>),
    Remote(Remote),
}

/// A surrogate served by another process. A request that fails on a broken connection (the
/// server restarted, say) is retried once on a new connection: reads and writes at fixed
/// offsets can be repeated, and the served pool keeps what it acknowledged.
struct Remote {
    addr: nbd::client::Address,
    uri: String,
    /// The export's size when it was attached.
    size: u64,
    conn: Option<nbd::client::Client>,
}

impl Remote {
    fn connect(&mut self) -> std::io::Result<&mut nbd::client::Client> {
        if self.conn.is_none() {
            self.conn = Some(nbd::client::Client::connect(&self.addr)?);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// Runs `op` on the connection; when the connection broke (not when the server refused
    /// the request), once more on a fresh one.
    fn run<T>(
        &mut self,
        mut op: impl FnMut(&mut nbd::client::Client) -> std::io::Result<T>,
    ) -> Result<T> {
        let first = self.connect().and_then(&mut op);
        let broken = self.conn.as_ref().is_none_or(|c| c.is_broken());
        match first {
            Ok(v) => Ok(v),
            Err(e) if !broken => Err(sur_err(format!("{}: {e}", self.uri))),
            Err(_) => {
                self.conn = None;
                self.connect()
                    .and_then(op)
                    .map_err(|e| sur_err(format!("{}: {e}", self.uri)))
            }
        }
    }
}

impl Surrogate {
    /// Opens the surrogate `desc` names: a pool descriptor path or an NBD URI.
    fn open(desc: &Path) -> Result<Surrogate> {
        let text = desc.to_string_lossy();
        if nbd::client::is_uri(&text) {
            let addr = nbd::client::Address::parse(&text).map_err(PoolError::Usage)?;
            let c = nbd::client::Client::connect(&addr).map_err(|e| {
                PoolError::Usage(format!(
                    "surrogate {text}: {e} (is `raidforge serve` running there with that \
                     export?)"
                ))
            })?;
            if c.read_only() {
                return Err(PoolError::Usage(format!(
                    "surrogate {text} is a read-only export: serve it writable"
                )));
            }
            Ok(Surrogate::Remote(Remote {
                addr,
                uri: text.into_owned(),
                size: c.size(),
                conn: Some(c),
            }))
        } else {
            Pool::open(desc)
                .and_then(|p| SharedPool::new(p, Concurrency::Stripes))
                .map(Surrogate::Local)
                .map_err(|e| PoolError::Usage(format!("surrogate pool {}: {e}", desc.display())))
        }
    }

    fn capacity_bytes(&self) -> u64 {
        match self {
            Surrogate::Local(p) => p.capacity_bytes(),
            // As attached; a reconnect to a smaller export fails requests past its end
            // (the client checks them).
            Surrogate::Remote(r) => r.size,
        }
    }

    /// Whether it still has its redundancy. A remote pool's member state is its server's
    /// business: it counts as healthy while it answers (a failing request drains it).
    fn healthy(&self) -> bool {
        match self {
            Surrogate::Local(p) => p
                .with_pool(|p| {
                    Ok(p.state().failed().is_empty() && !p.state().data_lost(p.geometry()))
                })
                .unwrap_or(false),
            Surrogate::Remote(_) => true,
        }
    }

    fn read(&mut self, off: u64, buf: &mut [u8]) -> Result<()> {
        match self {
            Surrogate::Local(p) => p.read(off, buf).map_err(sur_err),
            Surrogate::Remote(r) => r.run(|c| c.read_at(buf, off)),
        }
    }

    fn write(&mut self, off: u64, data: &[u8]) -> Result<()> {
        match self {
            Surrogate::Local(p) => p.write(off, data).map_err(sur_err),
            Surrogate::Remote(r) => r.run(|c| c.write_at(data, off, false)),
        }
    }

    fn sync(&mut self) -> Result<()> {
        match self {
            Surrogate::Local(p) => p.flush().map_err(sur_err),
            Surrogate::Remote(r) => r.run(|c| c.flush()),
        }
    }

    fn close(self) -> Result<()> {
        match self {
            Surrogate::Local(p) => p.close().map(|_| ()),
            Surrogate::Remote(mut r) => r.run(|c| c.flush()),
        }
    }
}

/// Maps again the redirected writes the surrogate's log holds after the newest record
/// (`chain`: that record's sequence and log pointer; [`LogHeader`]), into `core` (restored
/// from that record, with the surrogate's size set): each header that continues the chain
/// (this array, this record's sequence, the next index, right where the last write ended)
/// and whose data's CRC matches. The first that does not ends it: nothing after it was
/// acknowledged (a write is acknowledged once it is durable, one at a time). Returns the
/// chain as it now stands, for the next redirected write to continue.
fn replay_log(
    sur: &mut Surrogate,
    core: &mut Core,
    uuid: [u8; 16],
    mut chain: Chain,
) -> Result<Chain> {
    let cap = core.config().surrogate_bytes;
    let mut head = vec![0u8; LOG_HEADER_BYTES as usize];
    let unreadable = |e: PoolError| {
        PoolError::Io(format!(
            "{e}: the surrogate's log of redirected writes cannot be read, and the newest \
             data of the ranges written during the rebuild is there; repair the surrogate \
             pool and start again"
        ))
    };
    while chain.end + LOG_HEADER_BYTES < cap {
        sur.read(chain.end, &mut head).map_err(unreadable)?;
        let Some(h) = LogHeader::decode(&head) else {
            break;
        };
        let continues = h.uuid == uuid
            && h.base == chain.base
            && h.index == chain.len
            && h.s_off == chain.end + LOG_HEADER_BYTES
            && h.len > 0
            && h.s_off.checked_add(h.len).is_some_and(|e| e <= cap);
        if !continues {
            break;
        }
        let mut data = vec![0u8; h.len as usize];
        sur.read(h.s_off, &mut data).map_err(unreadable)?;
        if raidcore::superblock::crc32c(&data) != h.data_crc {
            break;
        }
        core.replay_redirected(h.d_off, h.len, h.s_off)
            .map_err(|e| PoolError::Io(format!("surrogate log, write {}: {e}", h.index)))?;
        chain.len += 1;
        chain.end = h.s_off + h.len;
    }
    Ok(chain)
}

/// Whether the core sends a write to the surrogate's log now (a rebuild under IDO or
/// WorkOut with the surrogate in use), given that the record has room for its entry.
fn redirecting(core: &Core) -> bool {
    core.phase() == CorePhase::Rebuilding
        && core.surrogate_available()
        && matches!(
            core.active_policy(),
            RebuildPolicy::Ido | RebuildPolicy::Workout
        )
}

fn sur_err(e: impl std::fmt::Display) -> PoolError {
    PoolError::Io(format!("surrogate pool: {e}"))
}

impl Ido {
    /// A fresh state for a pool of `capacity` bytes whose cycles hold `data_per_cycle` bytes.
    /// The zone size is rounded up to whole cycles (zones are stripe aligned).
    pub fn new(capacity: u64, data_per_cycle: u64, zone_bytes: u64) -> Result<Ido> {
        let table = Self::table_for(capacity, data_per_cycle, zone_bytes)?;
        Ok(Self::with_core(
            Core::new(IdoConfig::new(RebuildPolicy::Pr, 0), table),
            data_per_cycle,
        ))
    }

    /// The smallest zone size a pool of `capacity` bytes can have (the metadata area holds
    /// a bounded number of zones).
    pub fn min_zone_bytes(capacity: u64) -> u64 {
        capacity.div_ceil(MAX_ZONES)
    }

    fn table_for(capacity: u64, data_per_cycle: u64, zone_bytes: u64) -> Result<ZoneTable> {
        if zone_bytes == 0 {
            return Err(PoolError::Usage("--zone-size must be above 0".into()));
        }
        let zone_cycles = zone_bytes.div_ceil(data_per_cycle).max(1);
        let zone_bytes = zone_cycles * data_per_cycle;
        let zones = capacity.div_ceil(zone_bytes).max(1);
        if zones > MAX_ZONES {
            let min = capacity.div_ceil(MAX_ZONES);
            return Err(PoolError::Usage(format!(
                "--zone-size {zone_bytes} makes {zones} zones, more than the {MAX_ZONES} the \
                 metadata area holds; use --zone-size {min} or more"
            )));
        }
        ZoneTable::new(capacity, zone_bytes, zone_bytes)
            .map_err(|e| PoolError::Usage(e.to_string()))
    }

    fn with_core(mut core: Core, data_per_cycle: u64) -> Ido {
        // No NVRAM here: each redirected write carries its own mapping in the log.
        core.set_log_header_bytes(LOG_HEADER_BYTES);
        let t = core.zones();
        let (zone_bytes, zones) = (t.zone_bytes(), t.zones());
        let phase = Phase::of(core.phase());
        Ido {
            zone_bytes,
            zone_cycles: zone_bytes / data_per_cycle,
            zones,
            phase: AtomicU8::new(phase as u8),
            tracking: AtomicBool::new(true),
            no_records: AtomicBool::new(false),
            pop: (0..zones).map(|_| AtomicU32::new(0)).collect(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            requests: AtomicU64::new(0),
            redirected_reads: AtomicU64::new(0),
            redirected_writes: AtomicU64::new(0),
            redirect_requests: AtomicU64::new(0),
            vdf_rereads: AtomicU64::new(0),
            pop_dirty: AtomicBool::new(true),
            drain_wanted: AtomicBool::new(false),
            record_stale: AtomicBool::new(false),
            rechain: AtomicBool::new(false),
            readers_waiting: AtomicU32::new(0),
            inner: RwLock::new(Inner {
                core: Mutex::new(core),
                surrogate_path: None,
                seq: 0,
                left: Vec::new(),
                rebuilt_order: Vec::new(),
                migrated_bytes: 0,
                migrated_from_rebuild_bytes: 0,
                reclaimed_bytes: 0,
                reclaim_steps: 0,
                dropped: None,
                chain: Chain::default(),
                replay: None,
            }),
            surrogate: Mutex::new(None),
            hot: Mutex::new(Vec::new()),
            queue: Mutex::new(WriteQueue::default()),
            queue_cv: Condvar::new(),
            next_write: AtomicU64::new(0),
        }
    }

    pub fn zone_bytes(&self) -> u64 {
        self.zone_bytes
    }
    pub fn zones(&self) -> u64 {
        self.zones
    }
    pub fn zone_cycles(&self) -> u64 {
        self.zone_cycles
    }
    pub fn phase(&self) -> Phase {
        Phase::from_code(self.phase.load(Ordering::Acquire)).expect("valid phase")
    }
    /// Mirrors the core's phase for the request path.
    fn sync_phase(&self, core: &Core) {
        self.phase
            .store(Phase::of(core.phase()) as u8, Ordering::Release);
    }
    /// Turns popularity counting on or off (the overhead benchmark compares the two).
    pub fn set_tracking(&self, on: bool) {
        let on = on && !self.no_records.load(Ordering::Relaxed);
        self.tracking.store(on, Ordering::Relaxed);
    }
    /// The policy of the current (or last) policy rebuild.
    pub fn policy(&self) -> RebuildPolicy {
        self.read_inner().core().active_policy()
    }
    /// Zone `zone`'s popularity (the core's table plus what was counted since the last fold).
    pub fn popularity(&self, zone: u64) -> u32 {
        self.read_inner()
            .core()
            .zones()
            .popularity(zone)
            .saturating_add(self.pop[zone as usize].load(Ordering::Relaxed))
    }

    /// Moves the counts of the hot path into the core's table.
    fn fold(&self, core: &mut Core) {
        for (z, c) in self.pop.iter().enumerate() {
            if c.load(Ordering::Relaxed) > 0 {
                core.zones_mut()
                    .add_counts(z as u64, c.swap(0, Ordering::Relaxed));
            }
        }
    }

    /// The surrogate recorded for this pool.
    pub fn surrogate_path(&self) -> Option<PathBuf> {
        self.read_inner().surrogate_path.clone()
    }
    pub fn set_surrogate_path(&self, p: Option<PathBuf>) {
        self.write_inner().surrogate_path = p;
    }

    /// A state that replaces `old` numbers its records after `old`'s: a record numbered
    /// lower than one on the members would lose to it at the next start.
    pub(crate) fn succeed(&self, old: &Ido) {
        let seq = old.read_inner().seq;
        let mut inner = self.write_inner();
        inner.seq = inner.seq.max(seq);
    }

    fn read_inner(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        if let Some(g) = self.try_read_inner() {
            return g;
        }
        self.readers_waiting.fetch_add(1, Ordering::SeqCst);
        let g = self.inner.read().unwrap_or_else(|e| e.into_inner());
        self.readers_waiting.fetch_sub(1, Ordering::SeqCst);
        g
    }

    /// Between two exclusive steps that follow each other (the reclaimer's): the threads that
    /// wait to take `inner` shared take it first (up to 2 ms). The lock goes back to a thread
    /// that takes it again at once, before a woken reader runs: during IDO's reclaim in the
    /// calibration of issue 32, `raidforge status` waited up to 8.8 s, and client reads with
    /// it.
    fn let_readers_in(&self) {
        let deadline = Instant::now() + Duration::from_millis(2);
        while self.readers_waiting.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }
    fn write_inner(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
    /// [`Ido::read_inner`] if the lock can be had now.
    fn try_read_inner(&self) -> Option<std::sync::RwLockReadGuard<'_, Inner>> {
        match self.inner.try_read() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
    /// [`Ido::write_inner`] if the lock is free now.
    fn try_write_inner(&self) -> Option<std::sync::RwLockWriteGuard<'_, Inner>> {
        match self.inner.try_write() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
    fn sur(&self) -> MutexGuard<'_, Option<Surrogate>> {
        self.surrogate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a request (normal operation: one relaxed atomic add on its zone's counter;
    /// the epoch's request count is kept per thread and added to the shared one every
    /// [`REQUEST_BATCH`] requests, so workers do not all write one cache line; every
    /// [`EPOCH_REQUESTS`] requests the core's table ends an epoch). Returns true when the
    /// request must be routed: a rebuild or reclaim is under way (in normal state the core's
    /// D-Map is empty).
    #[inline]
    pub fn note(&self, offset: u64, len: u64) -> bool {
        let phase = self.phase.load(Ordering::Relaxed);
        if self.tracking.load(Ordering::Relaxed) && len > 0 {
            let z = (offset / self.zone_bytes) as usize;
            if phase == Phase::Normal as u8 {
                if let Some(c) = self.pop.get(z) {
                    c.fetch_add(1, Ordering::Relaxed);
                }
                let batch = LOCAL_REQUESTS.with(|c| {
                    let (id, n) = c.get();
                    if id != self.id {
                        // This thread counted for another pool before: its partial batch
                        // (under REQUEST_BATCH requests of an epoch) is dropped.
                        c.set((self.id, 1));
                        0
                    } else if n + 1 >= REQUEST_BATCH {
                        c.set((id, 0));
                        REQUEST_BATCH
                    } else {
                        c.set((id, n + 1));
                        0
                    }
                });
                if batch > 0 {
                    let before = self.requests.fetch_add(batch, Ordering::Relaxed);
                    if (before + batch) / EPOCH_REQUESTS != before / EPOCH_REQUESTS {
                        self.end_epoch();
                    }
                }
            }
        }
        phase != Phase::Normal as u8
    }

    /// Ends an epoch: the counts are folded into the core's table, which halves every
    /// zone's popularity (the seed's aging).
    pub fn end_epoch(&self) {
        let inner = self.read_inner();
        let mut core = inner.core();
        self.fold(&mut core);
        core.zones_mut().end_epoch();
        self.pop_dirty.store(true, Ordering::Relaxed);
    }

    /// Epochs ended so far (the core's table).
    pub fn epochs(&self) -> u64 {
        self.read_inner().core().zones().epochs()
    }

    /// True when the surrogate is attached and has its redundancy.
    fn surrogate_healthy(&self) -> bool {
        self.sur().as_ref().is_some_and(Surrogate::healthy)
    }

    /// Runs `f` on the surrogate: a local one outside the lock on it (its requests run side
    /// by side, as the simulator's surrogate disks serve theirs), a remote one (one
    /// connection) under it. Under the lock, a VDF cache hit waited for other reads'
    /// admissions (a write and a sync each): 23.4-24.0 ms during the calibration's rebuild
    /// against 19.0-21.7 ms side by side and the simulator's 18.3 ms. (Undone for a while
    /// for a test that saw no cache hit among its racing reads: how many hit depends on how
    /// the threads interleave, 0 to 66 in 24 runs; it now checks a hit it can count on.)
    fn on_sur<T>(&self, missing: &str, f: impl FnOnce(&mut Surrogate) -> Result<T>) -> Result<T> {
        let mut g = self.sur();
        match g.as_mut() {
            None => Err(sur_err(missing)),
            Some(Surrogate::Local(p)) => {
                let mut local = Surrogate::Local(Arc::clone(p));
                drop(g);
                f(&mut local)
            }
            Some(remote) => f(remote),
        }
    }

    fn sur_read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.on_sur(
            "not attached (it holds redirected data: name it again)",
            |s| s.read(off, buf),
        )
    }

    fn sur_write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.on_sur("not attached", |s| s.write(off, data))
    }

    fn sur_sync(&self) -> Result<()> {
        self.on_sur("not attached", |s| s.sync())
    }

    // ----- the record -----

    fn encode(&self, inner: &mut Inner, uuid: [u8; 16], seq: u64) -> Option<Vec<u8>> {
        let mut b = RECORD_FRAME.begin(4096);
        b.resize(HEADER, 0);
        b[16..32].copy_from_slice(&uuid);
        b[32..40].copy_from_slice(&seq.to_le_bytes());
        b[40..48].copy_from_slice(&self.zone_bytes.to_le_bytes());
        b[48..52].copy_from_slice(&(self.zones as u32).to_le_bytes());
        b[52] = inner.dropped.is_some() as u8;
        let path = inner
            .surrogate_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = path.as_bytes();
        if path.len() > MAX_PATH {
            return None;
        }
        b.extend_from_slice(&(path.len() as u16).to_le_bytes());
        b.extend_from_slice(path);
        let core = inner.core_mut();
        self.fold(core);
        let state = core.encode_state();
        b.extend_from_slice(&(state.len() as u32).to_le_bytes());
        b.extend_from_slice(&state);
        if b.len() + CRC_BYTES > IDO_SLOT_BYTES {
            return None;
        }
        Some(RECORD_FRAME.seal(b))
    }

    /// Whether the record still fits its slot with `extra` more D-Map extents.
    fn record_fits(&self, inner: &Inner, core: &Core, extra: usize) -> bool {
        let path = inner
            .surrogate_path
            .as_ref()
            .map_or(0, |p| p.as_os_str().len());
        let state =
            36 + 8 * core.hot().len() + core.zones().encoded_len() + core.dmap().encoded_len() + 4;
        HEADER + 2 + path + 4 + state + extra * EXTENT_BYTES + 4 <= IDO_SLOT_BYTES
    }

    /// Restores the state from the newest valid record (`bytes` of each slot of each
    /// member). Returns `None` when none was found.
    pub(crate) fn restore(
        capacity: u64,
        data_per_cycle: u64,
        records: &[Vec<u8>],
        uuid: &[u8; 16],
    ) -> Result<Option<Ido>> {
        let best = records
            .iter()
            .filter_map(|b| RecordView::parse(b))
            .filter(|r| &r.uuid == uuid)
            .max_by_key(|r| r.seq);
        let Some(r) = best else {
            if let Some(v) = records.iter().find_map(|b| old_record_of(b, uuid)) {
                return Err(PoolError::Io(format!(
                    "the pool's IDO record (member bytes 512 KiB..1 MiB) has version {v}, \
                     written by a development build that placed surrogate data its own way; \
                     this build does not read it. Finish any policy rebuild with the build \
                     that started it, or, if none runs, zero those bytes on every member (dd \
                     if=/dev/zero of=MEMBER bs=512K seek=1 count=1 conv=notrunc) to relearn \
                     popularity"
                )));
            }
            return Ok(None);
        };
        let like = Self::table_for(capacity, data_per_cycle, r.zone_bytes)?;
        if like.zones() != r.zones as u64 || like.zone_bytes() != r.zone_bytes {
            return Err(PoolError::Io(format!(
                "IDO record: zone table of {} zones of {} bytes does not match the pool ({} of {})",
                r.zones,
                r.zone_bytes,
                like.zones(),
                like.zone_bytes()
            )));
        }
        let core = Core::decode_state(IdoConfig::new(RebuildPolicy::Pr, 0), &like, &r.state)
            .map_err(|e| {
                PoolError::Io(format!(
                    "IDO record: {e}; the record belongs to another geometry"
                ))
            })?;
        let ido = Self::with_core(core, data_per_cycle);
        {
            let mut inner = ido.write_inner();
            inner.seq = r.seq;
            inner.surrogate_path = r.surrogate;
            if r.dropped {
                inner.dropped = Some("dropped before the restart".into());
            }
            let core = inner.core_mut();
            let redirecting = core.phase() == CorePhase::Rebuilding
                && matches!(
                    core.active_policy(),
                    RebuildPolicy::Ido | RebuildPolicy::Workout
                );
            let end = core.surrogate_used();
            inner.chain = Chain {
                base: r.seq,
                len: 0,
                end,
            };
            if redirecting && !r.dropped {
                inner.replay = Some(*uuid);
            }
        }
        ido.pop_dirty.store(false, Ordering::Relaxed);
        Ok(Some(ido))
    }

    /// How many members hold the newest valid record of array `uuid` (`records` as
    /// [`Ido::restore`] takes them, each with the member it was read from).
    pub(crate) fn newest_record_holders(records: &[(usize, Vec<u8>)], uuid: &[u8; 16]) -> usize {
        let found: Vec<(usize, u64)> = (records.iter())
            .filter_map(|(i, b)| Some((*i, RecordView::parse(b)?)))
            .filter(|(_, r)| &r.uuid == uuid)
            .map(|(i, r)| (i, r.seq))
            .collect();
        let Some(newest) = found.iter().map(|&(_, s)| s).max() else {
            return 0;
        };
        (found.iter().filter(|&&(_, s)| s == newest))
            .map(|&(i, _)| i)
            .collect::<std::collections::BTreeSet<usize>>()
            .len()
    }

    /// The state is written again at the next [`Ido::persist_if_dirty`] although it did not
    /// change (its newest record is on fewer members than a record goes to).
    pub(crate) fn record_again(&self) {
        self.pop_dirty.store(true, Ordering::Relaxed);
    }

    /// Writes the record (the core's state and the surrogate's name) through `main`.
    fn persist_locked(&self, inner: &mut Inner, main: &dyn MainPool, uuid: [u8; 16]) -> Result<()> {
        self.persist_with(inner, main, uuid, true)
    }

    /// Never writes a record and counts no request from now on: for a pool whose on-disk
    /// format (Linux MD's) has no place for one.
    pub(crate) fn disable_records(&self) {
        self.no_records.store(true, Ordering::Relaxed);
        self.tracking.store(false, Ordering::Relaxed);
        self.pop_dirty.store(false, Ordering::Relaxed);
    }

    /// Whether records are written at all (see [`Ido::disable_records`]).
    pub fn records_enabled(&self) -> bool {
        !self.no_records.load(Ordering::Relaxed)
    }

    fn persist_with(
        &self,
        inner: &mut Inner,
        main: &dyn MainPool,
        uuid: [u8; 16],
        sync: bool,
    ) -> Result<()> {
        if self.no_records.load(Ordering::Relaxed) {
            return Ok(());
        }
        if inner.replay.is_some() {
            return Err(PoolError::Io(
                "the IDO record cannot be written before the surrogate pool is attached: \
                 redirected writes after the last record are listed in its log"
                    .into(),
            ));
        }
        let seq = inner.seq + 1;
        let bytes = self.encode(inner, uuid, seq).ok_or_else(|| {
            PoolError::Io("IDO record does not fit its 256 KiB slot (too many D-Map ranges)".into())
        })?;
        if let Err(e) = main.write_record(seq, &bytes, sync) {
            // The record may have reached a member all the same (a flush that failed after
            // its write): the next one takes a higher number, so that a restart never has
            // to choose between two records of one number.
            inner.seq = seq;
            self.record_stale.store(true, Ordering::Relaxed);
            // The served pool's periodic record tries again.
            self.pop_dirty.store(true, Ordering::Relaxed);
            return Err(e);
        }
        inner.seq = seq;
        let end = inner.core_mut().surrogate_used();
        inner.chain = Chain {
            base: seq,
            len: 0,
            end,
        };
        self.record_stale.store(false, Ordering::Relaxed);
        self.rechain.store(false, Ordering::Relaxed);
        self.pop_dirty.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Writes the record if popularity changed since the last one (periodically and at close).
    /// `wait`: false when the caller holds the pool mutex (a request may hold this lock
    /// while waiting for that mutex): the record is then skipped if the lock is busy, and
    /// written at the next chance (the served pool's periodic record, or close).
    pub(crate) fn persist_if_dirty(
        &self,
        main: &dyn MainPool,
        uuid: [u8; 16],
        wait: bool,
    ) -> Result<()> {
        if !self.pop_dirty.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut inner = if wait {
            self.write_inner()
        } else {
            match self.try_write_inner() {
                Some(g) => g,
                None => return Ok(()),
            }
        };
        if inner.replay.is_some() {
            // Written once the surrogate is attached and its log read (the older record
            // and the log say everything this one would).
            return Ok(());
        }
        self.persist_locked(&mut inner, main, uuid)
    }

    /// The served pool's periodic record of popularity. In normal state with nothing on a
    /// surrogate it is written without a sync: popularity is advisory (a lost record costs a
    /// little learning, the older slot stays valid), and syncing members every 30 s would
    /// make clients wait for the writeback of everything they wrote.
    pub(crate) fn persist_popularity(&self, main: &dyn MainPool, uuid: [u8; 16]) -> Result<()> {
        self.touch();
        if !self.pop_dirty.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut inner = self.write_inner();
        if inner.replay.is_some() {
            return Ok(());
        }
        let sync = self.phase() != Phase::Normal || !inner.core_mut().dmap().is_empty();
        self.persist_with(&mut inner, main, uuid, sync)
    }

    /// Marks the popularity changed (it is, whenever requests were counted).
    pub(crate) fn touch(&self) {
        if self.requests.load(Ordering::Relaxed) > 0
            || self.pop.iter().any(|c| c.load(Ordering::Relaxed) > 0)
        {
            self.pop_dirty.store(true, Ordering::Relaxed);
        }
    }

    // ----- the surrogate -----

    /// Opens the surrogate pool at `path` (or the recorded one) unless it is open already.
    pub(crate) fn attach(&self, path: Option<&Path>) -> Result<()> {
        let mut inner = self.write_inner();
        let want = path
            .map(|p| p.to_path_buf())
            .or_else(|| inner.surrogate_path.clone());
        let Some(want) = want else {
            return Err(PoolError::Usage(
                "this policy needs a surrogate pool: name one with --surrogate POOL (any \
                 raidforge pool, e.g. a RAID1 of two members, or the nbd:// address of one \
                 that another process serves) at `raidforge create` or `raidforge rebuild`"
                    .into(),
            ));
        };
        let mut sur = self.sur();
        if sur.is_some() && inner.surrogate_path.as_deref() == Some(want.as_path()) {
            return Ok(());
        }
        if sur.is_some() && !inner.core_mut().dmap().is_empty() {
            return Err(PoolError::Usage(format!(
                "the surrogate {} still holds redirected data; it cannot be replaced by {} \
                 until it is reclaimed",
                inner
                    .surrogate_path
                    .as_ref()
                    .map_or("?".into(), |p| p.display().to_string()),
                want.display()
            )));
        }
        let mut p = Surrogate::open(&want)?;
        if p.capacity_bytes() < self.zone_bytes {
            return Err(PoolError::Usage(format!(
                "surrogate pool {} holds {} bytes, less than one zone ({} bytes)",
                want.display(),
                p.capacity_bytes(),
                self.zone_bytes
            )));
        }
        let bytes = p.capacity_bytes();
        if let Some(uuid) = inner.replay {
            let mut core = inner.core().clone();
            core.set_surrogate_bytes(bytes);
            let chain = replay_log(&mut p, &mut core, uuid, inner.chain)?;
            *inner.core_mut() = core;
            inner.chain = chain;
            inner.replay = None;
            self.rechain.store(true, Ordering::Relaxed);
            if chain.len > 0 {
                self.pop_dirty.store(true, Ordering::Relaxed);
            }
        }
        *sur = Some(p);
        inner.surrogate_path = Some(canonical_surrogate(&want));
        inner.dropped = None;
        let core = inner.core_mut();
        core.set_surrogate_bytes(bytes);
        core.set_surrogate_available(true);
        Ok(())
    }

    /// Closes the surrogate pool (recording its state).
    pub(crate) fn detach(&self) -> Result<()> {
        if let Some(p) = self.sur().take() {
            p.close()?;
        }
        Ok(())
    }

    /// Test hook and operator action: fails member `i` of the surrogate pool.
    pub fn fail_surrogate_member(&self, i: usize) -> Result<()> {
        let mut sur = self.sur();
        match sur.as_mut() {
            Some(Surrogate::Local(p)) => p.fail(i).map(|_| ()),
            Some(Surrogate::Remote(_)) => Err(PoolError::Usage(
                "the surrogate is served by another process: fail its member there \
                 (`raidforge fail` on that pool)"
                    .into(),
            )),
            None => Err(PoolError::Usage("no surrogate pool is attached".into())),
        }
    }

    // ----- requests -----

    /// A routed read (a rebuild or reclaim under way): the core cuts it into pieces served
    /// by the main pool or the surrogate; a copy it asks for (WorkOut's fill of a popular
    /// read, VDF's admission of a miss) is made after the read, best effort.
    pub(crate) fn read(&self, main: &dyn MainPool, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len() as u64;
        if self.record_stale.load(Ordering::Relaxed) {
            // No member took the last record (every one failed it): which of two copies of
            // a range is current depends on whether it reached one anyway, which only the
            // next start will tell. A read now could return data the start takes back.
            return Err(PoolError::Io(
                "the IDO record could not be written to any member, so where redirected data \
                 is current is not known: replace the failed members and restart the pool"
                    .into(),
            ));
        }
        let inner = self.read_inner();
        // VDF's eviction order needs to know which chunks need reconstruction: asked of
        // the pool before the core's lock is taken (never the pool mutex under it).
        let vdf = inner.core().active_policy() == RebuildPolicy::Vdf;
        let chunk = main.chunk_bytes();
        let need = (vdf && len > 0).then(|| {
            let first = offset / VDF_BLOCK * VDF_BLOCK;
            let end = (offset + len).div_ceil(VDF_BLOCK) * VDF_BLOCK;
            let r = first / chunk..(end - 1) / chunk + 1;
            (r.start, main.needs_reconstruction(r))
        });
        let on_failed = |c: u64| {
            need.as_ref()
                .and_then(|(s, v)| v.get(c.checked_sub(*s)? as usize).copied())
                .unwrap_or(false)
        };
        let (route, cached) = {
            let mut core = inner.core();
            let route = core.route_read(offset, len, chunk, &on_failed);
            let cached = (vdf && route.pieces.iter().any(|p| p.source != Source::Array))
                .then(|| core.vdf_cached(offset, len));
            (route, cached)
        };
        let mut any_sur = false;
        let mut result = Ok(());
        for p in &route.pieces {
            let part = &mut buf[(p.offset - offset) as usize..(p.offset - offset + p.len) as usize];
            let r = match p.source {
                Source::Array => main.read(p.offset, part),
                Source::Surrogate { s_off } => {
                    any_sur = true;
                    self.sur_read(s_off, part).inspect_err(|_| {
                        self.drain_wanted.store(true, Ordering::Relaxed);
                    })
                }
            };
            if let Err(e) = r {
                result = Err(e);
                break;
            }
        }
        if let Some(before) = cached.filter(|_| result.is_ok()) {
            // Reads admit blocks beside this one and may evict a block it was routed to,
            // handing its slot to another block whose copy then overwrites it: the slot may
            // have held another block's bytes when it was read. Unless every block is still
            // where it was, the pool serves the read (it holds the newest bytes: VDF never
            // redirects writes). Found by
            // tests/ido.rs::vdf_concurrent_readers_over_an_evicting_cache_read_their_own_blocks.
            if inner.core().vdf_cached(offset, len) != before {
                self.vdf_rereads.fetch_add(1, Ordering::Relaxed);
                any_sur = false;
                result = main.read(offset, buf);
            }
        }
        if any_sur {
            self.redirected_reads.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(job) = route.copy {
            let covered = job.covered_by(offset, buf.len() as u64);
            let deferred = result.is_ok()
                && covered
                && AFTER_REPLY.with(|p| match p.borrow_mut().as_mut() {
                    Some(v) => {
                        let at = (job.offset - offset) as usize;
                        v.push((
                            self.id,
                            job.clone(),
                            buf[at..at + job.len as usize].to_vec(),
                        ));
                        true
                    }
                    None => false,
                });
            if !deferred {
                let ok = result.is_ok() && self.copy_shared(&inner, main, &job, offset, buf);
                inner.core().copy_done(job.id, ok);
            }
        }
        result
    }

    /// Makes the copies this thread's reads left for after their replies
    /// ([`copies_after_reply`]), under the shared lock like the reads. One that a write spoiled
    /// meanwhile, or that the rebuild's end made pointless, is not written (the surrogate space
    /// it was given may belong to a later rebuild by then).
    pub(crate) fn copy_after_reply(&self) {
        let Some(jobs) = AFTER_REPLY.with(|p| p.borrow_mut().take()) else {
            return;
        };
        for (id, job, data) in jobs {
            debug_assert_eq!(id, self.id, "a copy left by another pool's read");
            if id != self.id {
                continue;
            }
            let inner = self.read_inner();
            let wanted = inner.core().copy_wanted(job.id);
            let ok = wanted && self.write_copy(&inner, &job, &data);
            inner.core().copy_done(job.id, ok);
        }
    }

    /// Makes a read's copy (under the shared lock): its data to the surrogate, durable.
    /// Returns whether it may be mapped.
    fn copy_shared(
        &self,
        inner: &Inner,
        main: &dyn MainPool,
        job: &CopyJob,
        offset: u64,
        buf: &[u8],
    ) -> bool {
        if !self.copy_possible(inner, job) {
            return false;
        }
        // A fill copies what the read returned; a cache admission whole blocks of the main
        // pool (the newest data under VDF, which never redirects writes): the read's own
        // bytes when it covered them whole (a miss is read from the main pool alone, and a
        // write landing since the copy was registered spoils it, as it would a copy read
        // again), else read again. Read again every time, a 4 KiB miss paid a second
        // degraded read before its reply (calibration of issue 32: VDF 256 IOPS at 31 ms
        // during the rebuild, where PR served 323 at 25 ms).
        let covered = job.covered_by(offset, buf.len() as u64);
        let data: std::borrow::Cow<[u8]> = match job.kind {
            CopyKind::Cache if !covered => {
                let mut b = vec![0u8; job.len as usize];
                if main.read(job.offset, &mut b).is_err() {
                    return false;
                }
                b.into()
            }
            _ => {
                debug_assert!(covered);
                buf[(job.offset - offset) as usize..(job.offset - offset + job.len) as usize].into()
            }
        };
        self.write_copy(inner, job, &data)
    }

    /// Whether a copy can be made now: a surrogate attached, and room in the record for the
    /// extents it will map.
    fn copy_possible(&self, inner: &Inner, job: &CopyJob) -> bool {
        inner.dropped.is_none()
            && self.sur().is_some()
            && self.record_fits(inner, &inner.core(), job.targets.len() + 2)
    }

    /// Writes a copy's bytes (`data`: the job's range) to its places on the surrogate and
    /// makes them durable. Returns whether it may be mapped.
    fn write_copy(&self, inner: &Inner, job: &CopyJob, data: &[u8]) -> bool {
        if !self.copy_possible(inner, job) {
            return false;
        }
        let r = (|| -> Result<()> {
            for t in &job.targets {
                let at = (t.d_off - job.offset) as usize;
                self.sur_write(t.s_off, &data[at..at + t.len as usize])?;
            }
            self.sur_sync()
        })();
        if r.is_err() {
            self.drain_wanted.store(true, Ordering::Relaxed);
        }
        r.is_ok()
    }

    /// A routed write: where the core says (the surrogate's log for IDO and WorkOut during
    /// the rebuild, else the main pool). Durable and recorded before it returns.
    ///
    /// Writes that need the exclusive lock queue up, and whoever takes the lock takes every
    /// write queued (group commit): redirected writes that follow one another in the log go
    /// to the surrogate as one request and one sync, and the others run one by one as
    /// before, in queue order, each after the redirected writes before it are durable. The
    /// calibration of issue 32 found redirected writes taking turns on the lock, each
    /// waiting for the surrogate's request and sync of the one before, and reads waiting
    /// behind all of them: 41 ms per write and 26 ms per read during the rebuild, against
    /// 29 and 15 ms before it.
    pub(crate) fn write(
        &self,
        main: &dyn MainPool,
        uuid: [u8; 16],
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        if self.write_shared(main, offset, data)? {
            return Ok(());
        }
        let id = self.next_write.fetch_add(1, Ordering::Relaxed);
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.entries.push(Queued {
            id,
            offset,
            data: data.to_vec(),
        });
        loop {
            if let Some(r) = q.results.remove(&id) {
                return r;
            }
            if !q.leading {
                q.leading = true;
                break;
            }
            q = self.queue_cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        drop(q);
        let mut lead = Leading {
            ido: self,
            ids: Vec::new(),
            results: Vec::new(),
        };
        let mut inner = self.write_inner();
        let batch =
            std::mem::take(&mut self.queue.lock().unwrap_or_else(|e| e.into_inner()).entries);
        lead.ids = batch.iter().map(|q| q.id).collect();
        let detach = self.write_batch(&mut inner, main, uuid, batch, &mut lead.results);
        drop(inner);
        if let Some(who) = detach {
            if let Err(e) = self.detach() {
                if let Some(r) = lead.results.iter_mut().find(|(i, _)| *i == who) {
                    r.1 = Err(e);
                }
            }
        }
        drop(lead);
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.results
            .remove(&id)
            .expect("the leader's own write was in its batch")
    }

    /// Runs a batch of queued writes under the exclusive lock, in order: each redirected
    /// write that continues the log's chain joins a group written as one request at the
    /// next write that does not, or at the end ([`Ido::flush_redirects`]); the others run
    /// alone ([`Ido::write_locked`]). Returns the write whose completion ended the reclaim
    /// (the surrogate is to be closed once the lock is released), if one did.
    fn write_batch(
        &self,
        inner: &mut Inner,
        main: &dyn MainPool,
        uuid: [u8; 16],
        batch: Vec<Queued>,
        out: &mut Vec<(u64, Result<()>)>,
    ) -> Option<u64> {
        let mut group = Group::default();
        let mut detach = None;
        for q in batch {
            if self.redirects_plainly(inner, q.data.len() as u64) {
                self.route_redirect(inner, uuid, q, &mut group);
                continue;
            }
            self.flush_redirects(inner, main, uuid, &mut group, out);
            let r = self.write_locked(inner, main, uuid, q.offset, &q.data);
            if matches!(r, Ok(true)) {
                detach = Some(q.id);
            }
            out.push((q.id, r.map(|_| ())));
        }
        self.flush_redirects(inner, main, uuid, &mut group, out);
        detach
    }

    /// Whether a write of `len` bytes now would be redirected with nothing else to do first
    /// (no record to write, no drain, the surrogate usable and with room, the chain where
    /// the log ends).
    fn redirects_plainly(&self, inner: &mut Inner, len: u64) -> bool {
        if self.record_stale.load(Ordering::Relaxed)
            || self.rechain.load(Ordering::Relaxed)
            || self.drain_wanted.load(Ordering::Relaxed)
            || inner.dropped.is_some()
            || !self.sur().as_ref().is_some_and(|s| s.healthy())
        {
            return false;
        }
        let fits = {
            let core = inner.core();
            self.record_fits(inner, &core, 2)
        };
        let end = inner.chain.end;
        let core = inner.core_mut();
        fits && redirecting(core) && core.surrogate_used() == end && core.redirect_fits(len)
    }

    /// Routes a write [`Ido::redirects_plainly`] said is redirected, and adds it, header
    /// first, to the group to write.
    fn route_redirect(&self, inner: &mut Inner, uuid: [u8; 16], q: Queued, group: &mut Group) {
        if group.writes.is_empty() {
            group.saved = Some((inner.core_mut().clone(), inner.chain));
        }
        let chain = inner.chain;
        let len = q.data.len() as u64;
        let core = inner.core_mut();
        let route = core.route_write_limited(q.offset, len, true);
        let Source::Surrogate { s_off } = route.pieces[0].source else {
            unreachable!("a write that redirects plainly went to the array");
        };
        debug_assert_eq!(route.pieces.len(), 1);
        debug_assert_eq!(
            s_off - LOG_HEADER_BYTES,
            chain.end,
            "a redirected write off its chain"
        );
        let header = LogHeader {
            uuid,
            base: chain.base,
            index: chain.len,
            d_off: q.offset,
            len,
            s_off,
            data_crc: raidcore::superblock::crc32c(&q.data),
        };
        if group.writes.is_empty() {
            group.at = chain.end;
        }
        group.buf.extend_from_slice(&header.encode());
        group.buf.extend_from_slice(&q.data);
        inner.chain = Chain {
            base: chain.base,
            len: chain.len + 1,
            end: s_off + len,
        };
        group.writes.push(q);
    }

    /// Writes the group of redirected writes: one surrogate request (their headers and data
    /// follow one another in the log) and one sync; then they are durable and mapped. If the
    /// surrogate fails it, the state goes back to before the group, every dirty range is
    /// brought home and the surrogate dropped ([`Ido::drain_locked`]), and each write goes
    /// to the main pool: a crash before one lands reads the older, acknowledged data.
    fn flush_redirects(
        &self,
        inner: &mut Inner,
        main: &dyn MainPool,
        uuid: [u8; 16],
        group: &mut Group,
        out: &mut Vec<(u64, Result<()>)>,
    ) {
        if group.writes.is_empty() {
            return;
        }
        let g = std::mem::take(group);
        match self.sur_write(g.at, &g.buf).and_then(|_| self.sur_sync()) {
            Ok(()) => {
                // The periodic record lists them too (a shorter log to read at a start).
                self.pop_dirty.store(true, Ordering::Relaxed);
                (self.redirected_writes).fetch_add(g.writes.len() as u64, Ordering::Relaxed);
                self.redirect_requests.fetch_add(1, Ordering::Relaxed);
                out.extend(g.writes.iter().map(|q| (q.id, Ok(()))));
            }
            Err(e) => {
                let (core, chain) = g.saved.expect("saved with the group's first write");
                *inner.core_mut() = core;
                inner.chain = chain;
                let drained = self.drain_locked(inner, main, uuid, &e.to_string());
                for q in g.writes {
                    let r = match &drained {
                        Err(e) => Err(same_error(e)),
                        Ok(()) => {
                            let core = inner.core_mut();
                            let again = core.route_write(q.offset, q.data.len() as u64);
                            debug_assert!(again.pieces.iter().all(|p| p.source == Source::Array));
                            self.sync_phase(core);
                            main.write(q.offset, &q.data)
                        }
                    };
                    out.push((q.id, r));
                }
            }
        }
    }

    /// One write under the exclusive lock, alone: where the core routes it, durable and
    /// recorded as the rules in the module's documentation say. Returns whether it ended the
    /// reclaim (the surrogate is then to be closed once the lock is released).
    fn write_locked(
        &self,
        inner: &mut Inner,
        main: &dyn MainPool,
        uuid: [u8; 16],
        offset: u64,
        data: &[u8],
    ) -> Result<bool> {
        if self.record_stale.load(Ordering::Relaxed) || self.rechain.load(Ordering::Relaxed) {
            self.persist_locked(inner, main, uuid)?;
        }
        let attached = self.sur().is_some();
        if self.drain_wanted.load(Ordering::Relaxed) || (attached && !self.surrogate_healthy()) {
            self.drain_locked(inner, main, uuid, "the surrogate pool lost a member")?;
        }
        let len = data.len() as u64;
        let usable = attached && inner.dropped.is_none();
        let fits = {
            let core = inner.core();
            self.record_fits(&inner, &core, 2)
        };
        if !usable && inner.core().surrogate_available() {
            self.stop_using_surrogate(inner, main, uuid)?;
        }
        let may_redirect = fits && redirecting(inner.core_mut());
        if may_redirect && inner.chain.end != inner.core_mut().surrogate_used() {
            // Something else took log space since the chain's end (a migration, a WorkOut
            // fill): a restart could not find this write's header behind it. A record first
            // starts the chain again past it.
            self.persist_locked(inner, main, uuid)?;
        }
        let chain = inner.chain;
        let core = inner.core_mut();
        // The state before, to put back if this write fails after the core changed the
        // D-Map over its range: when the surrogate or the main pool fails it (only needed
        // when the range was mapped: otherwise unmapping the range restores it).
        let mapped = core
            .dmap()
            .query(offset, len)
            .iter()
            .any(|p| p.source != Source::Array);
        let saved = mapped.then(|| core.clone());
        let route = core.route_write_limited(offset, len, fits);
        // (A write in the reclaim that unmaps the last dirty range ends it.)
        self.sync_phase(core);
        if let Source::Surrogate { s_off } = route.pieces[0].source {
            debug_assert_eq!(route.pieces.len(), 1);
            // The mapping goes with the data, in one request: durable on the surrogate, the
            // write is durable and a restart finds it ([`LogHeader`], [`replay_log`]); no
            // record on the main pool's members, whose queues the rebuild keeps full.
            let at = s_off - LOG_HEADER_BYTES;
            debug_assert_eq!(at, chain.end, "a redirected write off its chain");
            let header = LogHeader {
                uuid,
                base: chain.base,
                index: chain.len,
                d_off: offset,
                len,
                s_off,
                data_crc: raidcore::superblock::crc32c(data),
            };
            let mut buf = header.encode();
            buf.extend_from_slice(data);
            match self.sur_write(at, &buf).and_then(|_| self.sur_sync()) {
                Ok(()) => {
                    inner.chain = Chain {
                        base: chain.base,
                        len: chain.len + 1,
                        end: s_off + len,
                    };
                    // The periodic record lists it too (a shorter log to read at a start).
                    self.pop_dirty.store(true, Ordering::Relaxed);
                    self.redirected_writes.fetch_add(1, Ordering::Relaxed);
                    self.redirect_requests.fetch_add(1, Ordering::Relaxed);
                    return Ok(false);
                }
                Err(e) => {
                    // The surrogate failed. Undo this write's mapping (what the range held
                    // before, e.g. an older redirected write, stays mapped), bring every
                    // dirty range home (recorded), then write here: a crash before this
                    // write lands reads the older, acknowledged data.
                    let core = inner.core_mut();
                    match saved.filter(|_| mapped) {
                        Some(s) => *core = s,
                        None => {
                            core.set_surrogate_available(false);
                            core.route_write(offset, len);
                        }
                    }
                    self.drain_locked(inner, main, uuid, &e.to_string())?;
                    let core = inner.core_mut();
                    let again = core.route_write(offset, len);
                    debug_assert!(again.pieces.iter().all(|p| p.source == Source::Array));
                    self.sync_phase(core);
                    return main.write(offset, data).map(|_| false);
                }
            }
        }
        if let Err(e) = main.write(offset, data) {
            if let Some(s) = saved {
                let core = inner.core_mut();
                *core = s;
                self.sync_phase(core);
            }
            return Err(e);
        }
        if mapped {
            // Durable here before the record forgets the surrogate's older copy. If it
            // cannot be recorded, the range maps to the surrogate's older copy again, as the
            // record on the members says (the write is not acknowledged).
            let recorded = main
                .sync()
                .and_then(|_| self.persist_locked(inner, main, uuid));
            if let Err(e) = recorded {
                let core = inner.core_mut();
                *core = saved.expect("saved: the range was mapped");
                self.sync_phase(core);
                return Err(e);
            }
            // This write may have ended the reclaim: the surrogate holds nothing any more.
            return Ok(self.phase() == Phase::Normal);
        }
        Ok(false)
    }

    /// A write that can change nothing IDO records: under a policy that never maps a range
    /// to the surrogate in the D-Map (PR, PRO: no redirected writes, no copies; VDF, whose
    /// cache is its own and never recorded) with the D-Map empty, the write goes to the main
    /// pool under the shared lock, as it would on a pool without IDO,
    /// and concurrent writes and reads are not serialised behind one another. The shared lock
    /// is held across the write: whatever could map a range (a policy change, a drain, a
    /// restore) takes the exclusive lock and waits for it. Returns false, having done
    /// nothing, when the write must take the exclusive path (a record to rewrite, a drain
    /// wanted, a surrogate that lost its redundancy to drop, another policy, or ranges
    /// mapped). The bench/calibrate.py case that found it:
    /// PR clients during a rebuild on a pool with a surrogate ran at 199-217 IOPS against 310
    /// on the same pool without one.
    fn write_shared(&self, main: &dyn MainPool, offset: u64, data: &[u8]) -> Result<bool> {
        if self.record_stale.load(Ordering::Relaxed)
            || self.rechain.load(Ordering::Relaxed)
            || self.drain_wanted.load(Ordering::Relaxed)
            || self.sur().as_ref().is_some_and(|s| !s.healthy())
        {
            return Ok(false);
        }
        let inner = self.read_inner();
        let len = data.len() as u64;
        {
            let mut core = inner.core();
            let plain = matches!(
                core.active_policy(),
                RebuildPolicy::Pr | RebuildPolicy::Pro | RebuildPolicy::Vdf
            ) && core.phase() == CorePhase::Rebuilding
                && core.dmap().is_empty();
            if !plain {
                return Ok(false);
            }
            // Counted as the core counts a write (nothing to unmap, nothing redirected; VDF's
            // blocks of the range dropped, its admissions of them under way spoiled).
            let route = core.route_write_limited(offset, len, false);
            debug_assert!(route.pieces.iter().all(|p| p.source == Source::Array));
            debug_assert!(core.dmap().is_empty());
        }
        let written = main.write(offset, data);
        // VDF: an admission of these blocks that started while this write was under way may
        // hold the old bytes, in flight or already cached: it is spoiled or dropped now. (A
        // read routed to a block's slot before the write dropped it, whose slot then went to
        // another block, is read again from the pool: `Ido::read`'s check.)
        inner.core().array_write_done(offset, len);
        written?;
        drop(inner);
        Ok(true)
    }

    /// Fault-harness debugging: where a read of `offset..offset + len` goes now, and the
    /// first bytes the surrogate holds at each redirected piece.
    pub(crate) fn debug_route(&self, offset: u64, len: u64, chunk: u64) -> String {
        let inner = self.read_inner();
        let route = inner.core().route_read(offset, len, chunk, &|_| false);
        let mut out = format!(
            "phase {:?} dropped {:?} stale {} surrogate {}:",
            inner.core().phase(),
            inner.dropped,
            self.record_stale.load(Ordering::Relaxed),
            self.sur().is_some()
        );
        for p in &route.pieces {
            match p.source {
                Source::Array => out += &format!(" [{}+{} array]", p.offset, p.len),
                Source::Surrogate { s_off } => {
                    let mut b = [0u8; 4];
                    let held = self.sur_read(s_off, &mut b).map(|_| b);
                    out += &format!(" [{}+{} surrogate {s_off} holds {held:?}]", p.offset, p.len);
                }
            }
        }
        out
    }

    /// Stops using the surrogate: the core drops its clean copies from the D-Map, and that is
    /// recorded at once. From then on a write to their ranges goes to the main pool without
    /// touching the D-Map (nothing of theirs is mapped in memory), so a record that still
    /// mapped the copies would bring their older data back at a restart (served fault
    /// harness, seed 0x6b097db8: a drain that failed part way left a migrated zone in the
    /// record, and after a restart reads returned its old copy over newer acknowledged
    /// writes). If the record cannot be written, reads fail and the next write writes it
    /// first ([`Ido::persist_with`] marks it stale).
    fn stop_using_surrogate(
        &self,
        inner: &mut Inner,
        main: &dyn MainPool,
        uuid: [u8; 16],
    ) -> Result<()> {
        inner.core_mut().set_surrogate_available(false);
        self.persist_locked(inner, main, uuid)
    }

    /// Copies every dirty range home, forgets the surrogate's content and drops it. Called
    /// with the lock held exclusively.
    fn drain_locked(
        &self,
        inner: &mut Inner,
        main: &dyn MainPool,
        uuid: [u8; 16],
        why: &str,
    ) -> Result<()> {
        self.stop_using_surrogate(inner, main, uuid)?;
        let core = inner.core_mut();
        let dirty: Vec<Extent> = core.dmap().extents().filter(|e| e.dirty).collect();
        for e in &dirty {
            let mut b = vec![0u8; e.len as usize];
            self.sur_read(e.s_off, &mut b).map_err(|err| {
                PoolError::Io(format!(
                    "{err}: redirected data of bytes {}..{} cannot be read back (the \
                     surrogate lost more members than it tolerates); the pool keeps listing it",
                    e.d_off,
                    e.d_off + e.len
                ))
            })?;
            main.write(e.d_off, &b)?;
        }
        main.sync()?;
        let core = inner.core_mut();
        for e in &dirty {
            core.reclaim_done(e);
        }
        self.sync_phase(core);
        inner.reclaimed_bytes += dirty.iter().map(|e| e.len).sum::<u64>();
        self.drain_wanted.store(false, Ordering::Relaxed);
        inner.dropped = Some(why.to_string());
        self.persist_locked(inner, main, uuid)?;
        if let Some(p) = self.sur().take() {
            let _ = p.close();
        }
        Ok(())
    }

    // ----- rebuild and reclaim -----

    /// Starts (or resumes) a policy rebuild: the core records the policy and phase and picks
    /// IDO's hot zones (the most popular zones holding 90 % of the popularity, within half
    /// the surrogate). `left[z]` = unrebuilt cycles of zone `z`; zones with none are flagged
    /// `10` (a restart may have lost flag changes made after the last record; the cycles
    /// have not).
    pub(crate) fn begin_rebuild(
        &self,
        policy: RebuildPolicy,
        left: Vec<u32>,
        main: &dyn MainPool,
        uuid: [u8; 16],
    ) -> Result<()> {
        let mut inner = self.write_inner();
        let usable = self.sur().is_some() && inner.dropped.is_none() && self.surrogate_healthy();
        let resumed = self.phase() == Phase::Rebuilding;
        if !resumed {
            inner.rebuilt_order.clear();
            inner.migrated_bytes = 0;
            inner.migrated_from_rebuild_bytes = 0;
            inner.reclaimed_bytes = 0;
            inner.reclaim_steps = 0;
        }
        let core = inner.core_mut();
        self.fold(core);
        core.set_surrogate_available(usable);
        if !resumed {
            core.set_policy(policy);
            core.start_rebuild(false);
        }
        for (z, &l) in left.iter().enumerate() {
            let z = z as u64;
            if l == 0 && core.zones().flag(z) == ZoneFlag::NotRebuilt {
                core.zones_mut().set_flag(z, ZoneFlag::Rebuilt);
            }
        }
        if resumed {
            core.start_rebuild(true);
        }
        self.sync_phase(core);
        inner.left = left;
        *self.hot.lock().unwrap_or_else(|e| e.into_inner()) = inner.core().hot().to_vec();
        self.persist_locked(&mut inner, main, uuid)
    }

    /// The zones in the order to rebuild them now (only zones with cycles left): the core's
    /// priority zones (IDO's hot zones, PRO's most read since the failure), then the rest in
    /// address order.
    pub(crate) fn zone_order(&self) -> Vec<u64> {
        self.zone_order_in(&self.read_inner())
    }

    fn zone_order_in(&self, inner: &Inner) -> Vec<u64> {
        let left = |z: u64| inner.left.get(z as usize).is_none_or(|&l| l > 0);
        let mut out: Vec<u64> = inner
            .core()
            .priority_zone_list()
            .into_iter()
            .filter(|&z| left(z))
            .collect();
        let mut first = vec![false; self.zones as usize];
        for &z in &out {
            first[z as usize] = true;
        }
        out.extend((0..self.zones).filter(|&z| !first[z as usize] && left(z)));
        out
    }

    /// Records rebuilt cycles (their writes durable); returns the migrations the core starts
    /// for zones that became completely rebuilt (run them with [`Ido::migrate`]).
    pub(crate) fn cycles_rebuilt(&self, cycles: &[u64]) -> Vec<CopyJob> {
        self.cycles_rebuilt_in(&mut self.write_inner(), cycles)
    }

    /// [`Ido::cycles_rebuilt`] if the lock is free now; `None`, having recorded nothing, if
    /// not. For a caller that holds stripe locks: a client request may hold this lock while
    /// it waits for them.
    pub(crate) fn try_cycles_rebuilt(&self, cycles: &[u64]) -> Option<Vec<CopyJob>> {
        let mut inner = self.try_write_inner()?;
        Some(self.cycles_rebuilt_in(&mut inner, cycles))
    }

    /// Whether any of `cycles` lies in one of IDO's hot zones (whose migration waits for
    /// [`Ido::cycles_rebuilt`]). Takes no lock that a request holds.
    pub(crate) fn any_hot(&self, cycles: &[u64]) -> bool {
        let hot = self.hot.lock().unwrap_or_else(|e| e.into_inner());
        !hot.is_empty() && cycles.iter().any(|c| hot.contains(&(c / self.zone_cycles)))
    }

    /// [`Ido::zone_order`] if the lock can be taken now (see [`Ido::try_cycles_rebuilt`]).
    pub(crate) fn try_zone_order(&self) -> Option<Vec<u64>> {
        let inner = self.try_read_inner()?;
        Some(self.zone_order_in(&inner))
    }

    fn cycles_rebuilt_in(&self, inner: &mut Inner, cycles: &[u64]) -> Vec<CopyJob> {
        let mut done = Vec::new();
        for &c in cycles {
            let z = c / self.zone_cycles;
            if let Some(l) = inner.left.get_mut(z as usize) {
                if *l > 0 {
                    *l -= 1;
                    if *l == 0 {
                        done.push(z);
                    }
                }
            }
        }
        for &z in &done {
            if inner.rebuilt_order.len() < 256 {
                inner.rebuilt_order.push(z);
            }
        }
        let core = inner.core_mut();
        done.into_iter()
            .filter_map(|z| core.zone_rebuilt(z))
            .collect()
    }

    /// IDO: copies migrated hot zones to the surrogate where the core placed them (their
    /// data read from the main pool; ranges a newer redirected write holds stay the
    /// write's), durable before the core maps them; then records the state.
    pub(crate) fn migrate(
        &self,
        main: &dyn MainPool,
        uuid: [u8; 16],
        jobs: Vec<CopyJob>,
        images: Vec<Option<ZoneImage>>,
    ) -> Result<()> {
        let mut inner = self.write_inner();
        let mut any = false;
        let mut images = images.into_iter();
        let mut jobs = jobs.into_iter();
        while let Some(job) = jobs.next() {
            // Current only if no write landed in the zone since the rebuild read it (a count
            // per zone: one for the whole pool spoiled every image under a steady load),
            // checked under the exclusive lock, which every write routed during the rebuild
            // holds until it has landed. (Without this check,
            // `ido_in_the_background_with_concurrent_clients` read stale bytes in 4 runs of
            // 6: writes that fell back to the pool once the surrogate's log was full.)
            let image = images.next().flatten().filter(|im| match job.kind {
                CopyKind::Migrate { zone } => main.writes_landed(zone) == Some(im.writes_seen),
                _ => false,
            });
            let room = {
                let core = inner.core();
                let pieces = core.dmap().query(job.offset, job.len).len();
                self.record_fits(&inner, &core, pieces + 2)
            };
            if !room || inner.dropped.is_some() || self.sur().is_none() {
                inner.core_mut().copy_done(job.id, false);
                continue;
            }
            let copy = || -> Result<u64> {
                let mut b = vec![0u8; job.len as usize];
                let reused = match &image {
                    Some(im) => main.read_with_image(job.offset, &mut b, im)?,
                    None => {
                        main.read(job.offset, &mut b)?;
                        0
                    }
                };
                for t in &job.targets {
                    let at = (t.d_off - job.offset) as usize;
                    self.sur_write(t.s_off, &b[at..at + t.len as usize])?;
                }
                self.sur_sync()?;
                Ok(reused)
            };
            match copy() {
                Ok(reused) => {
                    inner.core_mut().copy_done(job.id, true);
                    inner.migrated_bytes += job.bytes();
                    inner.migrated_from_rebuild_bytes += reused;
                    any = true;
                }
                Err(e) => {
                    let core = inner.core_mut();
                    core.copy_done(job.id, false);
                    for j in jobs.by_ref() {
                        core.copy_done(j.id, false);
                    }
                    return self.drain_locked(&mut inner, main, uuid, &e.to_string());
                }
            }
        }
        if any {
            self.persist_locked(&mut inner, main, uuid)?;
        }
        Ok(())
    }

    /// The rebuild is over: the core drops clean copies and reclaims dirty ranges from now
    /// on (or is normal at once when there are none; the surrogate is then closed).
    pub(crate) fn end_rebuild(&self, main: &dyn MainPool, uuid: [u8; 16]) -> Result<()> {
        let mut inner = self.write_inner();
        let core = inner.core_mut();
        core.finish_rebuild();
        self.sync_phase(core);
        inner.left.clear();
        self.hot.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.persist_locked(&mut inner, main, uuid)?;
        if self.phase() == Phase::Normal {
            drop(inner);
            self.detach()?;
        }
        Ok(())
    }

    /// One reclaim step: the core's next dirty range (at most [`RECLAIM_STEP_BYTES`]) read
    /// from the surrogate, written home, made durable, then unmapped and recorded. Returns
    /// false when nothing is left (the phase is then normal again and the surrogate closed).
    pub(crate) fn reclaim_step(&self, main: &dyn MainPool, uuid: [u8; 16]) -> Result<bool> {
        let mut inner = self.write_inner();
        if self.phase() != Phase::Reclaiming {
            return Ok(false);
        }
        let Some(r) = inner.core_mut().next_reclaim(RECLAIM_STEP_BYTES) else {
            // Nothing dirty is left (the core is normal again once its D-Map is empty).
            self.sync_phase(inner.core_mut());
            self.persist_locked(&mut inner, main, uuid)?;
            drop(inner);
            self.detach()?;
            return Ok(false);
        };
        let mut b = vec![0u8; r.len as usize];
        self.sur_read(r.s_off, &mut b)?;
        if inner.core_mut().reclaim_valid(&r) {
            main.write(r.d_off, &b)?;
            main.sync()?;
        }
        let core = inner.core_mut();
        core.reclaim_done(&r);
        self.sync_phase(core);
        inner.reclaimed_bytes += r.len;
        inner.reclaim_steps += 1;
        self.persist_locked(&mut inner, main, uuid)?;
        drop(inner);
        if self.phase() == Phase::Normal {
            self.detach()?;
        } else {
            self.let_readers_in();
        }
        Ok(true)
    }

    /// The surrogate must be attached before requests are served (it holds newer data).
    pub(crate) fn needs_surrogate_now(&self) -> bool {
        !self.read_inner().core().dmap().is_empty()
    }

    pub fn status(&self, zones_rebuilt: u64) -> IdoStatus {
        let inner = self.read_inner();
        let mut core = inner.core();
        self.fold(&mut core);
        let t = core.zones();
        let mut flags = [0u64; 2];
        for z in 0..t.zones() {
            match t.flag(z) {
                ZoneFlag::Rebuilt => flags[0] += 1,
                ZoneFlag::Migrated => flags[1] += 1,
                ZoneFlag::NotRebuilt => {}
            }
        }
        let popular: Vec<(u64, u32)> = t
            .by_popularity()
            .into_iter()
            .take(8)
            .map(|z| (z, t.popularity(z)))
            .collect();
        let epochs = t.epochs();
        let dm = core.dmap();
        let attached = self.sur().as_ref().map(Surrogate::capacity_bytes);
        let rr = self.redirected_reads.load(Ordering::Relaxed);
        let rw = self.redirected_writes.load(Ordering::Relaxed);
        let phase = Phase::of(core.phase());
        IdoStatus {
            tracking: self.tracking.load(Ordering::Relaxed),
            phase: phase.as_str().into(),
            policy: core.active_policy().name().into(),
            zone_bytes: self.zone_bytes,
            zones_total: self.zones,
            hot_zones: core.hot().iter().take(64).copied().collect(),
            zones_hot: core.hot().len() as u64,
            zones_rebuilt,
            rebuilt_order: inner.rebuilt_order.iter().take(64).copied().collect(),
            zones_migrated: flags[1],
            migrated_bytes: inner.migrated_bytes,
            migrated_from_rebuild_bytes: inner.migrated_from_rebuild_bytes,
            redirected_reads: rr,
            redirected_writes: rw,
            redirected_requests: rr + rw,
            writes_fallback: core.stats().writes_fallback,
            dmap_entries: dm.len() as u64,
            dmap_bytes: dm.dirty_bytes() + dm.clean_bytes(),
            dmap_dirty_bytes: dm.dirty_bytes(),
            surrogate_used_bytes: core.surrogate_used(),
            surrogate_bytes: attached.unwrap_or(0),
            reclaim_ranges_left: if phase == Phase::Normal {
                0
            } else {
                dm.extents().filter(|e| e.dirty).count() as u64
            },
            reclaim_steps: inner.reclaim_steps,
            reclaimed_bytes: inner.reclaimed_bytes,
            surrogate: inner.surrogate_path.clone(),
            surrogate_state: match (&inner.dropped, attached) {
                (Some(why), _) => format!("dropped: {why}"),
                (None, Some(_)) => "attached".into(),
                (None, None) => "closed".into(),
            },
            popular,
            epochs,
            zones_flag_rebuilt: flags[0],
            zones_flag_migrated: flags[1],
            record_seq: inner.seq,
            log_writes: inner.chain.len,
            redirected_write_requests: self.redirect_requests.load(Ordering::Relaxed),
            vdf_rereads: self.vdf_rereads.load(Ordering::Relaxed),
        }
    }
}

/// The version of a valid-looking record of the array `uuid` that this build does not read
/// (1 or 2), if `b` is one (refused with a message by [`Ido::restore`]).
fn old_record_of(b: &[u8], uuid: &[u8; 16]) -> Option<u32> {
    let v = RECORD_FRAME.peek(b)?.version;
    (b.len() >= HEADER && (v == 1 || v == 2) && &b[16..32] == uuid).then_some(v)
}

/// A decoded record.
struct RecordView {
    uuid: [u8; 16],
    seq: u64,
    zone_bytes: u64,
    zones: u32,
    dropped: bool,
    surrogate: Option<PathBuf>,
    /// The core's state record.
    state: Vec<u8>,
}

impl RecordView {
    fn parse(b: &[u8]) -> Option<RecordView> {
        let r = RECORD_FRAME.open(b).ok()?;
        let b = r.fields();
        let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[16..32]);
        let seq = r.u64_at(32);
        let zone_bytes = r.u64_at(40);
        let zones = r.u32_at(48);
        let dropped = match b[52] {
            0 => false,
            1 => true,
            _ => return None,
        };
        if b[53..HEADER].iter().any(|&x| x != 0) {
            return None;
        }
        let mut at = HEADER;
        let plen = u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as usize;
        at += 2;
        let path = std::str::from_utf8(b.get(at..at + plen)?).ok()?;
        at += plen;
        let surrogate = (!path.is_empty()).then(|| PathBuf::from(path));
        if zone_bytes == 0 || zones as u64 > MAX_ZONES {
            return None;
        }
        let slen = u32_at(at)? as usize;
        at += 4;
        let state = b.get(at..at + slen)?.to_vec();
        if at + slen != b.len() {
            return None;
        }
        Some(RecordView {
            uuid,
            seq,
            zone_bytes,
            zones,
            dropped,
            surrogate,
            state,
        })
    }
}

/// For each logical chunk of `chunks`, whether reading it needs reconstruction now (the
/// [`MainPool::needs_reconstruction`] of both pool forms).
pub(crate) fn chunks_needing_reconstruction(
    geo: &raidcore::Geometry,
    state: &raidcore::ArrayState,
    chunks: std::ops::Range<u64>,
) -> Vec<bool> {
    chunks
        .map(|c| raidcore::ido::chunk_needs_reconstruction(geo, state, c))
        .collect()
}

/// How a surrogate is recorded: a pool descriptor by its canonical path (so that another
/// working directory names the same pool), an NBD URI as given.
pub(crate) fn canonical_surrogate(desc: &Path) -> PathBuf {
    if nbd::client::is_uri(&desc.to_string_lossy()) {
        desc.to_path_buf()
    } else {
        std::fs::canonicalize(desc).unwrap_or_else(|_| desc.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zone image answers only from a range of the member asked for that holds the bytes
    /// whole; a range of a lower member that sorts before the asked place is not one (its
    /// offset may lie beyond the one asked: the CI's served seed 0x7f3 met it).
    #[test]
    fn a_zone_image_answers_only_from_the_members_own_ranges() {
        let mut ranges = std::collections::BTreeMap::new();
        ranges.insert((0, 1 << 20), vec![1u8; 8192]);
        ranges.insert((2, 4096), vec![2u8; 4096]);
        let image = ZoneImage {
            writes_seen: 0,
            state_generation: None,
            ranges,
        };
        assert_eq!(
            image.get(1, 0, 4096),
            None,
            "member 0's range sorts before (1, 0)"
        );
        assert_eq!(image.get(1, 2 << 20, 4096), None);
        assert_eq!(image.get(0, 0, 4096), None);
        assert_eq!(image.get(0, (1 << 20) + 4096, 4096), Some(&[1u8; 4096][..]));
        assert_eq!(
            image.get(0, (1 << 20) + 4097, 4096),
            None,
            "runs past the range"
        );
        assert_eq!(image.get(2, 4096, 4096), Some(&[2u8; 4096][..]));
        assert_eq!(image.get(2, 0, 4096), None);
        assert_eq!(image.get(3, 0, 4096), None);
    }

    /// Today's bytes of the record (header, surrogate name, the core's state, CRC), pinned:
    /// its non-zero stretches (offset, hex); every other byte of its 4 KiB is zero.
    #[test]
    fn record_bytes_are_pinned() {
        let ido = Ido::new(100 << 20, 768 << 10, DEFAULT_ZONE_BYTES).unwrap();
        let mut inner = ido.write_inner();
        inner.surrogate_path = Some("/s/p".into());
        inner.core_mut().zones_mut().add_counts(1, 5);
        let b = ido.encode(&mut inner, [7; 16], 5).unwrap();
        assert_eq!(b.len(), 4096);
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (i, _) in b.iter().enumerate().filter(|(_, &x)| x != 0) {
            match runs.last_mut() {
                Some((_, end)) if i < *end + 16 => *end = i + 1,
                _ => runs.push((i, i + 1)),
            }
        }
        let got: Vec<(usize, String)> = runs
            .into_iter()
            .map(|(s, e)| (s, b[s..e].iter().map(|x| format!("{x:02x}")).collect()))
            .collect();
        let want: &[(usize, &str)] = &[
            (
                0,
                concat!(
                    "524649444f00000003000000f500000007070707070707070707070707070707",
                    "05000000000000000000c0000000000009000000000000000000000000000000",
                    "04002f732f70a7000000524649444f53540001000000a7",
                ),
            ),
            (
                110,
                concat!(
                    "524649444f5a540001000000630000000000c000000000000000400600000000",
                    "09",
                ),
            ),
            (170, "05"),
            (
                205,
                concat!(
                    "7dbeafc7524649444f444d00010000001c0000000000000000000000db31670a",
                    "d9f356272e8a6b7d",
                ),
            ),
        ];
        assert_eq!(
            got.iter()
                .map(|(o, h)| (*o, h.as_str()))
                .collect::<Vec<_>>(),
            want
        );
    }

    #[test]
    fn record_round_trips_and_rejects_damage() {
        let ido = Ido::new(100 << 20, 768 << 10, DEFAULT_ZONE_BYTES).unwrap();
        assert_eq!(ido.zone_bytes(), 12 << 20);
        assert_eq!(ido.zones(), 9);
        ido.note(13 << 20, 4096);
        ido.note(13 << 20, 4096);
        ido.note(0, 4096);
        let mut inner = ido.write_inner();
        inner.surrogate_path = Some("nbd+unix:///s?socket=/x/s.sock".into());
        let core = inner.core_mut();
        ido.fold(core);
        core.set_surrogate_bytes(64 << 20);
        core.set_policy(RebuildPolicy::Ido);
        core.start_rebuild(false);
        assert_eq!(core.hot()[0], 1);
        let r = core.route_write(5 << 20, 8192);
        assert!(r.redirected());
        let b = ido.encode(&mut inner, [7; 16], 5).unwrap();
        let want = inner.core_mut().encode_state();
        drop(inner);
        let r = Ido::restore(100 << 20, 768 << 10, std::slice::from_ref(&b), &[7; 16])
            .unwrap()
            .unwrap();
        assert_eq!(r.popularity(1), 2);
        assert_eq!(r.popularity(0), 1);
        assert_eq!(r.phase(), Phase::Rebuilding);
        assert_eq!(r.policy(), RebuildPolicy::Ido);
        assert!(r.needs_surrogate_now());
        let mut ri = r.write_inner();
        assert_eq!(ri.seq, 5);
        assert_eq!(
            ri.core_mut().encode_state(),
            want,
            "the core's state comes back whole"
        );
        assert_eq!(
            ri.surrogate_path.as_deref(),
            Some(Path::new("nbd+unix:///s?socket=/x/s.sock"))
        );
        drop(ri);
        // Another array's record, or any flipped byte, is not taken.
        assert!(
            Ido::restore(100 << 20, 768 << 10, std::slice::from_ref(&b), &[8; 16])
                .unwrap()
                .is_none()
        );
        let len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        for i in (0..len).step_by(7) {
            let mut d = b.clone();
            d[i] ^= 0x40;
            assert!(
                RecordView::parse(&d).is_none(),
                "byte {i} flipped was accepted"
            );
        }
    }

    #[test]
    fn epochs_halve_popularity() {
        let ido = Ido::new(64 << 20, 1 << 20, 4 << 20).unwrap();
        for _ in 0..10 {
            ido.note(5 << 20, 1);
        }
        assert_eq!(ido.popularity(1), 10);
        ido.end_epoch();
        assert_eq!(ido.popularity(1), 5);
        ido.set_tracking(false);
        ido.note(5 << 20, 1);
        assert_eq!(ido.popularity(1), 5);
    }

    #[test]
    fn epochs_end_after_epoch_requests_in_the_cores_table() {
        let ido = Ido::new(64 << 20, 1 << 20, 4 << 20).unwrap();
        for _ in 0..EPOCH_REQUESTS - REQUEST_BATCH {
            ido.note(5 << 20, 1);
        }
        assert_eq!(ido.epochs(), 0, "no epoch ends early");
        assert_eq!(ido.popularity(1) as u64, EPOCH_REQUESTS - REQUEST_BATCH);
        for _ in 0..REQUEST_BATCH {
            ido.note(5 << 20, 1);
        }
        assert_eq!(ido.epochs(), 1);
        assert_eq!(ido.popularity(1) as u64, EPOCH_REQUESTS / 2);
        // The epoch count is persisted with the core's zone table.
        let mut inner = ido.write_inner();
        let b = ido.encode(&mut inner, [1; 16], 1).unwrap();
        drop(inner);
        let r = Ido::restore(64 << 20, 1 << 20, &[b], &[1; 16])
            .unwrap()
            .unwrap();
        assert_eq!(r.epochs(), 1);
        assert_eq!(r.popularity(1) as u64, EPOCH_REQUESTS / 2);
    }

    #[test]
    fn version_1_and_2_records_are_refused_with_a_way_out() {
        let ido = Ido::new(64 << 20, 1 << 20, 4 << 20).unwrap();
        let mut inner = ido.write_inner();
        let mut b = ido.encode(&mut inner, [1; 16], 1).unwrap();
        drop(inner);
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        let e = Ido::restore(64 << 20, 1 << 20, &[b.clone()], &[1; 16])
            .err()
            .expect("refused");
        assert!(e.to_string().contains("version 1"), "{e}");
        b[8..12].copy_from_slice(&2u32.to_le_bytes());
        let e = Ido::restore(64 << 20, 1 << 20, &[b.clone()], &[1; 16])
            .err()
            .expect("refused");
        assert!(e.to_string().contains("version 2"), "{e}");
        assert!(e.to_string().contains("zero those bytes"), "{e}");
        // Another array's old record is not this pool's business.
        assert!(Ido::restore(64 << 20, 1 << 20, &[b], &[2; 16])
            .unwrap()
            .is_none());
    }

    #[test]
    fn zone_size_is_whole_cycles_and_bounded() {
        let ido = Ido::new(10 << 20, 3 << 16, 1 << 20).unwrap();
        assert_eq!(ido.zone_bytes() % (3 << 16), 0);
        assert!(ido.zone_bytes() >= 1 << 20);
        assert!(Ido::new(1 << 40, 4096, 4096).is_err());
        assert!(Ido::new(1 << 20, 4096, 0).is_err());
    }

    /// A main pool in memory whose reads and writes fail over given ranges (lost data),
    /// keeping the two record slots the way the members do.
    struct FakeMain {
        data: Mutex<Vec<u8>>,
        slots: Mutex<[Vec<u8>; 2]>,
        fail_reads: Mutex<std::ops::Range<u64>>,
        fail_writes: Mutex<std::ops::Range<u64>>,
    }

    impl FakeMain {
        fn refuses(r: &Mutex<std::ops::Range<u64>>, off: u64, len: u64) -> Result<()> {
            let r = r.lock().unwrap().clone();
            if off < r.end && r.start < off + len {
                return Err(PoolError::Io(format!("data lost at bytes {r:?}")));
            }
            Ok(())
        }
    }

    impl MainPool for FakeMain {
        fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
            Self::refuses(&self.fail_reads, off, buf.len() as u64)?;
            let d = self.data.lock().unwrap();
            buf.copy_from_slice(&d[off as usize..off as usize + buf.len()]);
            Ok(())
        }
        fn write(&self, off: u64, data: &[u8]) -> Result<()> {
            Self::refuses(&self.fail_writes, off, data.len() as u64)?;
            let mut d = self.data.lock().unwrap();
            d[off as usize..off as usize + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn sync(&self) -> Result<()> {
            Ok(())
        }
        fn write_record(&self, seq: u64, bytes: &[u8], _sync: bool) -> Result<()> {
            self.slots.lock().unwrap()[(seq % 2) as usize] = bytes.to_vec();
            Ok(())
        }
        fn chunk_bytes(&self) -> u64 {
            16 << 10
        }
        fn needs_reconstruction(&self, chunks: std::ops::Range<u64>) -> Vec<bool> {
            vec![false; (chunks.end - chunks.start) as usize]
        }
    }

    impl FakeMain {
        fn holding(data: Vec<u8>) -> FakeMain {
            FakeMain {
                data: Mutex::new(data),
                slots: Mutex::new([Vec::new(), Vec::new()]),
                fail_reads: Mutex::new(0..0),
                fail_writes: Mutex::new(0..0),
            }
        }
    }

    /// A [`FakeMain`] that calls `before_write` at the start of every write.
    struct Hooked<F: Fn() + Sync> {
        inner: FakeMain,
        before_write: F,
    }

    impl<F: Fn() + Sync> MainPool for Hooked<F> {
        fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
            self.inner.read(off, buf)
        }
        fn write(&self, off: u64, data: &[u8]) -> Result<()> {
            (self.before_write)();
            self.inner.write(off, data)
        }
        fn sync(&self) -> Result<()> {
            self.inner.sync()
        }
        fn write_record(&self, seq: u64, bytes: &[u8], sync: bool) -> Result<()> {
            self.inner.write_record(seq, bytes, sync)
        }
        fn chunk_bytes(&self) -> u64 {
            self.inner.chunk_bytes()
        }
        fn needs_reconstruction(&self, chunks: std::ops::Range<u64>) -> Vec<bool> {
            self.inner.needs_reconstruction(chunks)
        }
    }

    /// A fresh directory `tag` holding a RAID1 surrogate pool of two 4 MiB members; returns
    /// the directory and the surrogate's descriptor.
    fn with_surrogate(tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("raidforge-ido-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sur = dir.join("sur.json");
        let opts = crate::pool::test_opts(layout::SchemeKind::Raid1, &dir, 2, 4 << 20);
        Pool::create(&sur, opts).unwrap().close().unwrap();
        (dir, sur)
    }

    /// An IDO of 32 zones of 256 KiB over `main` (`cap` bytes), the surrogate at `sur`
    /// attached, its rebuild begun under `policy` with every zone's cycles at 4.
    fn rebuilding(
        policy: RebuildPolicy,
        main: &dyn MainPool,
        sur: &std::path::Path,
        uuid: [u8; 16],
    ) -> Ido {
        const ZONE: u64 = 256 << 10;
        let ido = Ido::new(32 * ZONE, 64 << 10, ZONE).unwrap();
        ido.attach(Some(sur)).unwrap();
        ido.begin_rebuild(policy, vec![4; 32], main, uuid).unwrap();
        ido
    }

    /// A drain that fails part way (a migration's read met lost data, then writing the
    /// redirected data home met lost data too) has dropped the clean copies from the D-Map:
    /// writes to their ranges go to the main pool and touch no record from then on. The
    /// record must not map those copies any more, or a restart reads a migrated zone's old
    /// copy over newer acknowledged writes (served fault harness, seed 0x6b097db8).
    #[test]
    fn a_drain_that_fails_part_way_leaves_no_clean_copy_recorded() {
        const ZONE: u64 = 256 << 10;
        const CYCLE: u64 = 64 << 10;
        let cap = 32 * ZONE;
        let uuid = [9u8; 16];
        let (dir, sur) = with_surrogate("drain");
        let original: Vec<u8> = (0..cap).map(|i| (i * 7 + i / 4096) as u8).collect();
        let main = FakeMain::holding(original.clone());
        let ido = Ido::new(cap, CYCLE, ZONE).unwrap();
        assert_eq!(ido.zone_cycles(), 4);
        ido.set_tracking(true);
        ido.attach(Some(&sur)).unwrap();
        // Zones 0 and 2 are hot.
        for _ in 0..200 {
            ido.note(4096, 4096);
            ido.note(2 * ZONE, 4096);
        }
        ido.begin_rebuild(RebuildPolicy::Ido, vec![4; 32], &main, uuid)
            .unwrap();
        assert_eq!(ido.phase(), Phase::Rebuilding);
        // A write to a cold zone goes to the surrogate's log.
        let dirty_at = 5 * ZONE;
        ido.write(&main, uuid, dirty_at, &[0xAA; 4096]).unwrap();
        // Zone 0 is rebuilt and migrated: a clean copy of it on the surrogate.
        let jobs = ido.cycles_rebuilt(&[0, 1, 2, 3]);
        assert_eq!(jobs.len(), 1, "zone 0 is hot");
        ido.migrate(&main, uuid, jobs, Vec::new()).unwrap();
        assert_eq!(ido.status(0).zones_migrated, 1);
        // Zone 2's migration reads lost data; the drain that follows cannot write the
        // redirected data home either.
        *main.fail_reads.lock().unwrap() = 2 * ZONE..3 * ZONE;
        *main.fail_writes.lock().unwrap() = dirty_at..dirty_at + 4096;
        let jobs = ido.cycles_rebuilt(&[8, 9, 10, 11]);
        assert_eq!(jobs.len(), 1, "zone 2 is hot");
        assert!(ido.migrate(&main, uuid, jobs, Vec::new()).is_err());
        *main.fail_reads.lock().unwrap() = 0..0;
        *main.fail_writes.lock().unwrap() = 0..0;

        // An acknowledged write to the migrated zone, read back.
        let new = [0xBBu8; 4096];
        ido.write(&main, uuid, 4096, &new).unwrap();
        let mut b = vec![0u8; 4096];
        ido.read(&main, 4096, &mut b).unwrap();
        assert_eq!(b, new);
        // The redirected data is still where it was.
        ido.read(&main, dirty_at, &mut b).unwrap();
        assert_eq!(b, [0xAA; 4096]);

        // A restart (the process dies): the newest record decides.
        drop(ido);
        let records = main.slots.lock().unwrap().to_vec();
        let again = Ido::restore(cap, CYCLE, &records, &uuid).unwrap().unwrap();
        again.attach(None).unwrap();
        again.read(&main, 4096, &mut b).unwrap();
        assert!(
            b == new,
            "after the restart the acknowledged write reads {:02x?}, the migrated zone's old copy",
            &b[..4]
        );
        again.read(&main, dirty_at, &mut b).unwrap();
        assert_eq!(b, [0xAA; 4096]);
        again.detach().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
    /// Under PR with a surrogate attached, client writes do not take turns: two writes are
    /// inside the main pool's write at once (the calibration found them serialised behind
    /// IDO's exclusive lock), the core still counts them, and both read back.
    #[test]
    fn pr_writes_run_side_by_side_with_a_surrogate_attached() {
        const ZONE: u64 = 256 << 10;
        let cap = 32 * ZONE;
        let uuid = [7u8; 16];
        let (dir, sur) = with_surrogate("pr");
        let meeting = crate::test_meeting::Meeting::default();
        let main = Hooked {
            inner: FakeMain::holding(vec![0u8; cap as usize]),
            before_write: || meeting.arrive(),
        };
        let ido = rebuilding(RebuildPolicy::Pr, &main, &sur, uuid);
        assert_eq!(ido.phase(), Phase::Rebuilding);
        let before = ido.read_inner().core().stats().writes;
        std::thread::scope(|s| {
            for (at, v) in [(4096u64, 0x11u8), (5 * ZONE, 0x22)] {
                let (ido, main) = (&ido, &main);
                s.spawn(move || ido.write(main, uuid, at, &[v; 4096]).unwrap());
            }
        });
        assert!(meeting.met(), "the two writes took turns");
        assert_eq!(ido.read_inner().core().stats().writes, before + 2);
        let mut b = vec![0u8; 4096];
        ido.read(&main, 4096, &mut b).unwrap();
        assert_eq!(b, [0x11; 4096]);
        ido.read(&main, 5 * ZONE, &mut b).unwrap();
        assert_eq!(b, [0x22; 4096]);
        assert_eq!(ido.status(0).dmap_entries, 0);
        ido.detach().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Under VDF, writes run beside reads (the shared lock). A read that misses a block while
    /// a write of that block is under way admits it, and its copy reads the pool's old bytes
    /// and finishes before the write lands: the block must not stay cached with them.
    #[test]
    fn a_vdf_admission_during_a_write_of_its_block_does_not_stay_cached() {
        const ZONE: u64 = 256 << 10;
        let cap = 32 * ZONE;
        let uuid = [5u8; 16];
        let (dir, sur) = with_surrogate("vdfw");
        // (a write is waiting, the write may go on)
        let gate = Mutex::new((false, false));
        let cv = std::sync::Condvar::new();
        let main = Hooked {
            inner: FakeMain::holding(vec![0x11u8; cap as usize]),
            before_write: || {
                let mut g = gate.lock().unwrap();
                g.0 = true;
                cv.notify_all();
                while !g.1 {
                    g = cv.wait(g).unwrap();
                }
            },
        };
        let ido = rebuilding(RebuildPolicy::Vdf, &main, &sur, uuid);
        let at = 3 * ZONE;
        std::thread::scope(|s| {
            let (ido, main) = (&ido, &main);
            let w = s.spawn(move || ido.write(main, uuid, at, &[0x22; 4096]));
            let mut g = gate.lock().unwrap();
            while !g.0 {
                g = cv.wait(g).unwrap();
            }
            drop(g);
            // The write is routed and waits inside the pool's write: a read misses the block
            // and admits it, its copy reading the old bytes.
            let mut b = vec![0u8; 4096];
            ido.read(main, at, &mut b).unwrap();
            assert_eq!(b, [0x11; 4096], "a read beside the write");
            assert_eq!(ido.read_inner().core().vdf_cached_blocks(), 1, "admitted");
            gate.lock().unwrap().1 = true;
            cv.notify_all();
            w.join().unwrap().unwrap();
        });
        let mut b = vec![0u8; 4096];
        for _ in 0..2 {
            ido.read(&main, at, &mut b).unwrap();
            assert_eq!(
                b, [0x22; 4096],
                "a block cached with the bytes before the last write"
            );
        }
        ido.detach().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

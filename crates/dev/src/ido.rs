//! IDO in the engine (seed 003): zone popularity counted on every request, a surrogate pool
//! that takes redirected writes and migrated hot zones during a rebuild, a D-Map of what lives
//! on the surrogate, a reclaimer that writes redirected data home afterwards, and the record
//! that keeps all of it across restarts (member bytes 512 KiB..1 MiB, two alternating slots).
//!
//! Layout on the surrogate: zone-granular *slots*. A zone that receives a redirected write or
//! is migrated gets slot `s`; byte `r` of the zone lives at surrogate offset `s * zone_bytes +
//! r`. Redirected writes of one zone therefore land next to each other (the seed writes them
//! sequentially; with one slot per zone a zone's writes stay together, and a migrated zone is
//! one sequential copy). The D-Map is, per slot, the ranges of the zone whose newest data is on
//! the surrogate (`dirty`: written there, to be reclaimed; clean: a read-cache copy, WorkOut
//! and VDF) plus the zone's `migrated` flag (the whole zone is on the surrogate, IDO's flag
//! bit 1). A read is split into pieces by the D-Map and each piece read where its newest copy
//! is: the degraded set, the surrogate, or both for partially overwritten ranges.
//!
//! Rules that keep every read returning the newest data (checked by tests/ido.rs):
//! - A write to a zone that has a slot goes to the surrogate (its ranges become dirty) in
//!   every phase; a zone without a slot is written on the main pool unless the policy
//!   redirects (then it gets a slot first). So a range never has a newer copy on the main pool
//!   than on the surrogate while the D-Map lists it.
//! - A redirected write is durable on the surrogate and listed in the persisted D-Map before
//!   it is acknowledged. A migrated flag is persisted only once the zone's copy is durable. A
//!   reclaimed slot is forgotten (persisted) only after its data is durable on the main pool.
//! - When the D-Map record would not fit its slot, the write goes to both places (no entry).
//! - Surrogate failure: when the surrogate pool loses its redundancy (a member failed) or an
//!   I/O on it fails, its dirty data is copied home at once (under the exclusive lock, so no
//!   request sees a half-drained D-Map), the D-Map emptied and persisted, the surrogate
//!   dropped; the rebuild continues as PR. Nothing acknowledged is lost as long as the
//!   surrogate can still be read (it is a redundant pool: RAID1 of two members by default).
//! - The surrogate is a pool opened here or a pool another process serves (`raidforge serve`),
//!   named by an NBD URI and reached with [`nbd::client`]; its members' state is that server's
//!   business, so only a failing request drains it, and a broken connection is retried once
//!   on a new one (a restarted server is found again).
//!
//! Locking: `Ido::inner` (a read-write lock) is taken before stripe locks and the pool mutex,
//! never while holding them. In normal state no lock is taken at all: a request only adds 1
//! to its zone's atomic counter.
//!
//! What comes from `raidcore::ido` (the sans-I/O core the simulator executes too), and what
//! is this executor's own:
//! - Popularity: the core's `ZoneTable` holds it, ends epochs (halving) and ranks zones. The
//!   hot path only adds 1 to a per-zone atomic counter (no lock); the counts are folded into
//!   the table (`ZoneTable::add_counts`) at each epoch end and before the table is read or
//!   persisted. The epoch's request count is batched per thread ([`REQUEST_BATCH`]).
//! - Hot zones: `ZoneTable::hot_zones` (90 % of the popularity, at most the surrogate's slots).
//! - Rebuild order: `raidcore::ido::priority_zones` (IDO's hot zones, PRO's ranking of the
//!   requests since the failure), then the rest in address order.
//! - D-Map ranges: one `raidcore::ido::DMap` per slot (zone-relative offsets; split, trim,
//!   merge and the read split are the core's `insert` / `insert_under` / `query`).
//! - Zone flags: the core table's `ZoneFlag`s (`10` when a zone's cycles are all rebuilt,
//!   `11` when migrated), persisted with it.
//! - Still the executor's own: the zone-slot placement on the surrogate (the core places
//!   data in an append-only log), the routing rules of reads and writes, WorkOut's and VDF's
//!   zone-granular caching, the reclaimer's per-zone steps and the surrogate-failure drain
//!   (the core's `Ido::route_*` / `cycle_rebuilt` / `next_reclaim` are not executed here).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, RwLock};

use raidcore::ido::{priority_zones, DMap, Source, ZoneFlag, ZoneTable};
use raidcore::superblock::crc32c;
use serde::{Deserialize, Serialize};

use crate::pool::{Pool, PoolError};

type Result<T> = std::result::Result<T, PoolError>;

/// Member offset of the first of the two IDO record slots.
pub const IDO_OFFSET_BYTES: u64 = 512 << 10;
/// Bytes of one slot (two slots: 512 KiB..768 KiB and 768 KiB..1 MiB).
pub const IDO_SLOT_BYTES: usize = 256 << 10;
/// Default zone size (the seed's 12 MB).
pub const DEFAULT_ZONE_BYTES: u64 = 12 << 20;
/// Most zones a pool may have (their counters must fit half a record slot).
pub const MAX_ZONES: u64 = 32 * 1024;
/// Requests per popularity epoch: at the end of each, every zone's count is halved.
pub const EPOCH_REQUESTS: u64 = 1 << 16;
/// Share of the counted popularity IDO's hot zones must hold (the seed's 90 %).
pub const HOT_COVERAGE: f64 = 0.9;
/// Requests a thread counts on its own before adding them to the pool's shared count.
pub const REQUEST_BATCH: u64 = 64;

thread_local! {
    /// (the `Ido` counted for, requests not yet added to its shared count).
    static LOCAL_REQUESTS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((u64::MAX, 0)) };
}
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

const MAGIC: &[u8; 8] = b"RFIDO\0\0\0";
/// Version 2: popularity, epochs and flags are the core's `ZoneTable` record; D-Map extents
/// are the core's `DMap` per slot. Version 1 (popularity as raw counters) is refused.
const RECORD_VERSION: u32 = 2;
const HEADER: usize = 64;
const MAX_PATH: usize = 1024;
const ENTRY_BYTES: usize = 17;
const SLOT_HEAD_BYTES: usize = 21;

/// The rebuild policies of seed 003 are raidcore's (`pr`, `pro`, `workout`, `vdf`, `ido`).
pub use raidcore::ido::RebuildPolicy;

/// Parses a policy name, with an error that lists the choices.
pub fn parse_policy(s: &str) -> std::result::Result<RebuildPolicy, String> {
    s.parse()
        .map_err(|_| format!("unknown rebuild policy '{s}'; choose pr, pro, workout, vdf or ido"))
}

fn policy_code(p: RebuildPolicy) -> u8 {
    RebuildPolicy::ALL
        .iter()
        .position(|&q| q == p)
        .expect("every policy is listed") as u8
}

fn policy_from_code(c: u8) -> Option<RebuildPolicy> {
    RebuildPolicy::ALL.get(c as usize).copied()
}

/// What the engine's IDO machinery is doing.
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
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Normal => "normal",
            Phase::Rebuilding => "rebuilding",
            Phase::Reclaiming => "reclaiming",
        }
    }
}

/// A zone's place on the surrogate and what of it is there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Slot {
    index: u64,
    /// The whole zone is on the surrogate (IDO's "11").
    migrated: bool,
    /// The zone's part of the D-Map, in zone-relative offsets: `raidcore::ido::DMap` with
    /// every extent's surrogate offset equal to its zone-relative offset (the slot places the
    /// zone on the surrogate; see [`Ido::sur_off`]). Dirty extents replace what they overlap,
    /// clean ones (read-cache copies) only fill gaps: the core's `insert` / `insert_under`.
    dmap: DMap,
}

impl Slot {
    /// Marks `[off, off+len)` (zone-relative) as held by the surrogate.
    fn insert(&mut self, off: u64, len: u64, dirty: bool) {
        if dirty {
            self.dmap.insert(off, len, off, true);
        } else {
            self.dmap.insert_under(off, len, off, false);
        }
    }

    /// Splits `[off, off+len)` into (offset, len, held by the surrogate), in order: the
    /// core's `DMap::query`.
    fn pieces(&self, off: u64, len: u64) -> Vec<(u64, u64, bool)> {
        self.dmap
            .query(off, len)
            .into_iter()
            .map(|p| {
                if let Source::Surrogate { s_off } = p.source {
                    debug_assert_eq!(s_off, p.offset, "slot extents are identity-placed");
                }
                (p.offset, p.len, p.source != Source::Array)
            })
            .collect()
    }

    fn bytes(&self, dirty_only: bool) -> u64 {
        self.dmap.dirty_bytes()
            + if dirty_only {
                0
            } else {
                self.dmap.clean_bytes()
            }
    }

    fn has_dirty(&self) -> bool {
        self.dmap.dirty_bytes() > 0
    }

    fn is_empty(&self) -> bool {
        self.dmap.is_empty()
    }

    /// The parts of `[off, off+len)` not held dirty on the surrogate (the array's data, or a
    /// clean copy of it, is the newest there).
    fn not_dirty(&self, off: u64, len: u64) -> Vec<(u64, u64)> {
        let end = off + len;
        let mut at = off;
        let mut out = Vec::new();
        for (d, l) in self.dirty_extents() {
            if d + l <= at || d >= end {
                continue;
            }
            if d > at {
                out.push((at, d - at));
            }
            at = (d + l).min(end);
        }
        if at < end {
            out.push((at, end - at));
        }
        out
    }

    fn dirty_extents(&self) -> Vec<(u64, u64)> {
        self.dmap
            .extents()
            .filter(|e| e.dirty)
            .map(|e| (e.d_off, e.len))
            .collect()
    }
}

/// Everything under the lock.
#[derive(Debug)]
struct Inner {
    policy: RebuildPolicy,
    surrogate_path: Option<PathBuf>,
    /// zone -> slot.
    slots: BTreeMap<u64, Slot>,
    seq: u64,
    /// Hot zones chosen at the start of an IDO rebuild, hottest first.
    hot: Vec<u64>,
    /// Unrebuilt cycles per zone (during a rebuild).
    left: Vec<u32>,
    /// Zones in the order they became fully rebuilt (the first 256).
    rebuilt_order: Vec<u64>,
    zones_rebuilt: u64,
    migrated_bytes: u64,
    reclaimed_bytes: u64,
    reclaimed_zones: u64,
    /// Why the surrogate was dropped, if it was.
    dropped: Option<String>,
    /// Drain the surrogate at the next exclusive section (an error seen under a shared lock).
    drain_wanted: bool,
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
    /// Zones whose whole content is on the surrogate.
    pub zones_migrated: u64,
    pub migrated_bytes: u64,
    /// User requests (or pieces of them) served by the surrogate.
    pub redirected_reads: u64,
    pub redirected_writes: u64,
    pub redirected_requests: u64,
    /// D-Map: ranges whose newest data is on the surrogate, and their bytes (dirty ones are
    /// written back by the reclaimer).
    pub dmap_entries: u64,
    pub dmap_bytes: u64,
    pub dmap_dirty_bytes: u64,
    pub surrogate_slots_used: u64,
    pub surrogate_slots_total: u64,
    /// Zones still to be written back, and what was written back so far.
    pub reclaim_zones_left: u64,
    pub reclaimed_zones: u64,
    pub reclaimed_bytes: u64,
    /// The surrogate pool's descriptor, and "attached", "closed" or "dropped: why".
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
}

/// The engine's IDO state of one pool. See the module documentation.
pub struct Ido {
    zone_bytes: u64,
    zone_cycles: u64,
    zones: u64,
    capacity: u64,
    phase: AtomicU8,
    tracking: AtomicBool,
    /// Requests counted per zone since the last fold into `table` (the lock-free hot path).
    pop: Vec<AtomicU32>,
    /// The core's zone table: popularity (folded from `pop` at each epoch end and before it
    /// is read), epoch halving, ranking (`hot_zones`) and the zones' flags.
    table: Mutex<ZoneTable>,
    /// Identifies this state in the per-thread request batches (see [`Ido::note`]).
    id: u64,
    /// Requests seen per zone since the current rebuild began (PRO, WorkOut).
    during: Vec<AtomicU32>,
    requests: AtomicU64,
    redirected_reads: AtomicU64,
    redirected_writes: AtomicU64,
    /// Popularity changed since the last record.
    pop_dirty: AtomicBool,
    inner: RwLock<Inner>,
    surrogate: Mutex<Option<Surrogate>>,
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
}

/// The surrogate set: a pool opened in this process, or an export of a pool served by
/// another process (`raidforge serve`), reached over NBD (one request at a time).
#[allow(clippy::large_enum_variant)] // one per pool
enum Surrogate {
    Local(Pool),
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
            Surrogate::Local(p) => {
                p.state().failed().is_empty() && !p.state().data_lost(p.geometry())
            }
            Surrogate::Remote(_) => true,
        }
    }

    fn read(&mut self, off: u64, buf: &mut [u8]) -> Result<()> {
        match self {
            Surrogate::Local(p) => {
                let v = p.read(off, buf.len() as u64).map_err(sur_err)?;
                buf.copy_from_slice(&v);
                Ok(())
            }
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
            Surrogate::Local(p) => p.sync_members().map_err(sur_err),
            Surrogate::Remote(r) => r.run(|c| c.flush()),
        }
    }

    fn close(self) -> Result<()> {
        match self {
            Surrogate::Local(p) => p.close(),
            Surrogate::Remote(mut r) => r.run(|c| c.flush()),
        }
    }
}

fn sur_err(e: impl std::fmt::Display) -> PoolError {
    PoolError::Io(format!("surrogate pool: {e}"))
}

impl Ido {
    /// A fresh state for a pool of `capacity` bytes whose cycles hold `data_per_cycle` bytes.
    /// The zone size is rounded up to whole cycles (zones are stripe aligned).
    pub fn new(capacity: u64, data_per_cycle: u64, zone_bytes: u64) -> Result<Ido> {
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
        Ok(Ido {
            zone_bytes,
            zone_cycles,
            zones,
            capacity,
            phase: AtomicU8::new(Phase::Normal as u8),
            tracking: AtomicBool::new(true),
            pop: (0..zones).map(|_| AtomicU32::new(0)).collect(),
            table: Mutex::new(
                ZoneTable::new(capacity, zone_bytes, zone_bytes)
                    .map_err(|e| PoolError::Usage(e.to_string()))?,
            ),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            during: (0..zones).map(|_| AtomicU32::new(0)).collect(),
            requests: AtomicU64::new(0),
            redirected_reads: AtomicU64::new(0),
            redirected_writes: AtomicU64::new(0),
            pop_dirty: AtomicBool::new(true),
            inner: RwLock::new(Inner {
                policy: RebuildPolicy::Pr,
                surrogate_path: None,
                slots: BTreeMap::new(),
                seq: 0,
                hot: Vec::new(),
                left: Vec::new(),
                rebuilt_order: Vec::new(),
                zones_rebuilt: 0,
                migrated_bytes: 0,
                reclaimed_bytes: 0,
                reclaimed_zones: 0,
                dropped: None,
                drain_wanted: false,
            }),
            surrogate: Mutex::new(None),
        })
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
    fn set_phase(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::Release);
    }
    /// Turns popularity counting on or off (the overhead benchmark compares the two).
    pub fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Ordering::Relaxed);
    }
    /// The policy of the current (or last) policy rebuild.
    pub fn policy(&self) -> RebuildPolicy {
        self.read_inner().policy
    }
    /// Zone `zone`'s popularity (the core's table plus what was counted since the last fold).
    pub fn popularity(&self, zone: u64) -> u32 {
        self.table()
            .popularity(zone)
            .saturating_add(self.pop[zone as usize].load(Ordering::Relaxed))
    }

    fn table(&self) -> std::sync::MutexGuard<'_, ZoneTable> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the counts of the hot path into the core's table and returns it locked.
    fn folded(&self) -> std::sync::MutexGuard<'_, ZoneTable> {
        let mut t = self.table();
        for (z, c) in self.pop.iter().enumerate() {
            if c.load(Ordering::Relaxed) > 0 {
                t.add_counts(z as u64, c.swap(0, Ordering::Relaxed));
            }
        }
        t
    }
    /// The surrogate recorded for this pool.
    pub fn surrogate_path(&self) -> Option<PathBuf> {
        self.read_inner().surrogate_path.clone()
    }
    pub fn set_surrogate_path(&self, p: Option<PathBuf>) {
        self.write_inner().surrogate_path = p;
    }

    fn read_inner(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write_inner(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
    fn sur(&self) -> std::sync::MutexGuard<'_, Option<Surrogate>> {
        self.surrogate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a request (normal operation: one relaxed atomic add on its zone's counter;
    /// the epoch's request count is kept per thread and added to the shared one every
    /// [`REQUEST_BATCH`] requests, so workers do not all write one cache line; every
    /// [`EPOCH_REQUESTS`] requests the core's table ends an epoch). Returns true when the
    /// request must be routed (a rebuild or reclaim is under way, or data lives on the
    /// surrogate).
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
            } else if let Some(c) = self.during.get(z) {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        phase != Phase::Normal as u8
    }

    /// Ends an epoch: the counts are folded into the core's table, which halves every
    /// zone's popularity (the seed's aging).
    pub fn end_epoch(&self) {
        self.folded().end_epoch();
        self.pop_dirty.store(true, Ordering::Relaxed);
    }

    /// Epochs ended so far (the core's table).
    pub fn epochs(&self) -> u64 {
        self.table().epochs()
    }

    fn zone_of(&self, off: u64) -> u64 {
        off / self.zone_bytes
    }

    /// Splits `[offset, offset+len)` into per-zone pieces (zone, zone-relative offset, len).
    fn zone_pieces(&self, offset: u64, len: u64) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let z = self.zone_of(at);
            let zend = ((z + 1) * self.zone_bytes).min(end);
            out.push((z, at - z * self.zone_bytes, zend - at));
            at = zend;
        }
        out
    }

    fn sur_off(&self, slot: &Slot, rel: u64) -> u64 {
        slot.index * self.zone_bytes + rel
    }

    fn slots_total(&self) -> u64 {
        self.sur()
            .as_ref()
            .map_or(0, |p| p.capacity_bytes() / self.zone_bytes)
    }

    /// True when the surrogate is attached and has its redundancy.
    fn surrogate_healthy(&self) -> bool {
        self.sur().as_ref().is_some_and(Surrogate::healthy)
    }

    // ----- the record -----

    fn encode(&self, inner: &Inner, uuid: [u8; 16], seq: u64) -> Option<Vec<u8>> {
        let mut b = vec![0u8; HEADER];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&RECORD_VERSION.to_le_bytes());
        b[16..32].copy_from_slice(&uuid);
        b[32..40].copy_from_slice(&seq.to_le_bytes());
        b[40..48].copy_from_slice(&self.zone_bytes.to_le_bytes());
        b[48..52].copy_from_slice(&(self.zones as u32).to_le_bytes());
        b[52] = self.phase() as u8;
        b[53] = policy_code(inner.policy);
        b[54] = inner.dropped.is_some() as u8;
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
        let table = self.folded().encode();
        b.extend_from_slice(&(table.len() as u32).to_le_bytes());
        b.extend_from_slice(&table);
        b.extend_from_slice(&(inner.slots.len() as u32).to_le_bytes());
        for (&z, s) in &inner.slots {
            b.extend_from_slice(&z.to_le_bytes());
            b.extend_from_slice(&s.index.to_le_bytes());
            b.push(s.migrated as u8);
            b.extend_from_slice(&(s.dmap.len() as u32).to_le_bytes());
            for e in s.dmap.extents() {
                b.extend_from_slice(&e.d_off.to_le_bytes());
                b.extend_from_slice(&e.len.to_le_bytes());
                b.push(e.dirty as u8);
            }
        }
        let len = b.len() + 4;
        if len > IDO_SLOT_BYTES {
            return None;
        }
        b[12..16].copy_from_slice(&(len as u32).to_le_bytes());
        let crc = crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        // Written in whole 4 KiB blocks (O_DIRECT members).
        b.resize(len.div_ceil(4096) * 4096, 0);
        Some(b)
    }

    /// Size of the record with `extra` more D-Map entries and slots (an upper bound).
    fn record_fits(&self, inner: &Inner, extra_entries: usize, extra_slots: usize) -> bool {
        let path = inner
            .surrogate_path
            .as_ref()
            .map_or(0, |p| p.as_os_str().len());
        let entries: usize = inner.slots.values().map(|s| s.dmap.len()).sum();
        let n = HEADER
            + 2
            + path
            + 4
            + self.table().encoded_len()
            + 4
            + (inner.slots.len() + extra_slots) * SLOT_HEAD_BYTES
            + (entries + extra_entries) * ENTRY_BYTES
            + 4;
        n <= IDO_SLOT_BYTES
    }

    /// Restores the state from the newest valid record (`bytes` of each slot of each
    /// member). Returns false when none was found.
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
            if records.iter().any(|b| old_record_of(b, uuid)) {
                return Err(PoolError::Io(
                    "the pool's IDO record (member bytes 512 KiB..1 MiB) has version 1, written                      by a development build before the record took the core's zone table; this                      build does not read it. Finish any policy rebuild with the build that                      started it, or, if none runs, zero those bytes on every member (dd                      if=/dev/zero of=MEMBER bs=512K seek=1 count=1 conv=notrunc) to relearn                      popularity"
                        .into(),
                ));
            }
            return Ok(None);
        };
        let ido = Ido::new(capacity, data_per_cycle, r.zone_bytes)?;
        if ido.zones != r.zones as u64 || ido.zone_bytes != r.zone_bytes {
            return Err(PoolError::Io(format!(
                "IDO record: zone table of {} zones of {} bytes does not match the pool ({} of {})",
                r.zones, r.zone_bytes, ido.zones, ido.zone_bytes
            )));
        }
        if r.table.zone_bytes() != ido.zone_bytes || r.table.capacity() != capacity {
            return Err(PoolError::Io(format!(
                "IDO record: its zone table covers {} bytes in zones of {}, the pool {} in zones                  of {}; the record belongs to another geometry",
                r.table.capacity(),
                r.table.zone_bytes(),
                capacity,
                ido.zone_bytes
            )));
        }
        *ido.table() = r.table;
        ido.set_phase(r.phase);
        {
            let mut inner = ido.write_inner();
            inner.seq = r.seq;
            inner.policy = r.policy;
            inner.surrogate_path = r.surrogate;
            inner.slots = r.slots;
            if r.dropped {
                inner.dropped = Some("dropped before the restart".into());
            }
        }
        ido.pop_dirty.store(false, Ordering::Relaxed);
        Ok(Some(ido))
    }

    /// Writes the record (the D-Map, flags and popularity) through `main`.
    fn persist_locked(&self, inner: &mut Inner, main: &dyn MainPool, uuid: [u8; 16]) -> Result<()> {
        self.persist_with(inner, main, uuid, true)
    }

    fn persist_with(
        &self,
        inner: &mut Inner,
        main: &dyn MainPool,
        uuid: [u8; 16],
        sync: bool,
    ) -> Result<()> {
        let seq = inner.seq + 1;
        let bytes = self.encode(inner, uuid, seq).ok_or_else(|| {
            PoolError::Io("IDO record does not fit its 256 KiB slot (too many D-Map ranges)".into())
        })?;
        main.write_record(seq, &bytes, sync)?;
        inner.seq = seq;
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
            match self.inner.try_write() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
            }
        };
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
        let sync = self.phase() != Phase::Normal || !inner.slots.is_empty();
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
                 raidforge pool, e.g. a RAID1 of two members) at `raidforge create` or \
                 `raidforge rebuild`"
                    .into(),
            ));
        };
        let mut sur = self.sur();
        if sur.is_some() && inner.surrogate_path.as_deref() == Some(want.as_path()) {
            return Ok(());
        }
        if sur.is_some() && !inner.slots.is_empty() {
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
        let p = Surrogate::open(&want)?;
        if p.capacity_bytes() < self.zone_bytes {
            return Err(PoolError::Usage(format!(
                "surrogate pool {} holds {} bytes, less than one zone ({} bytes)",
                want.display(),
                p.capacity_bytes(),
                self.zone_bytes
            )));
        }
        *sur = Some(p);
        inner.surrogate_path = Some(canonical_surrogate(&want));
        inner.dropped = None;
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
            Some(Surrogate::Local(p)) => p.fail(i),
            Some(Surrogate::Remote(_)) => Err(PoolError::Usage(
                "the surrogate is served by another process: fail its member there \
                 (`raidforge fail` on that pool)"
                    .into(),
            )),
            None => Err(PoolError::Usage("no surrogate pool is attached".into())),
        }
    }

    fn sur_read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        let mut g = self.sur();
        let p = g
            .as_mut()
            .ok_or_else(|| sur_err("not attached (it holds redirected data: name it again)"))?;
        p.read(off, buf)
    }

    fn sur_write(&self, off: u64, data: &[u8]) -> Result<()> {
        let mut g = self.sur();
        let p = g.as_mut().ok_or_else(|| sur_err("not attached"))?;
        p.write(off, data)
    }

    fn sur_sync(&self) -> Result<()> {
        let mut g = self.sur();
        match g.as_mut() {
            Some(p) => p.sync(),
            None => Err(sur_err("not attached")),
        }
    }

    fn alloc_slot(&self, inner: &mut Inner) -> Option<u64> {
        let used: BTreeSet<u64> = inner.slots.values().map(|s| s.index).collect();
        let total = self.slots_total();
        (0..total).find(|i| !used.contains(i))
    }

    /// VDF: frees a slot holding only cached (clean) data, preferring zones already rebuilt
    /// (their data lives on surviving disks only) over zones still needing the failed disk.
    fn evict_one(&self, inner: &mut Inner) -> bool {
        let clean: Vec<u64> = inner
            .slots
            .iter()
            .filter(|(_, s)| !s.migrated && !s.has_dirty())
            .map(|(&z, _)| z)
            .collect();
        let rebuilt = |z: u64| inner.left.get(z as usize).is_none_or(|&l| l == 0);
        let victim = clean
            .iter()
            .copied()
            .find(|&z| rebuilt(z))
            .or_else(|| clean.first().copied());
        match victim {
            Some(z) => {
                inner.slots.remove(&z);
                true
            }
            None => false,
        }
    }

    // ----- requests -----

    /// A routed read (a rebuild or reclaim under way): each piece from where its newest copy
    /// lives.
    pub(crate) fn read(&self, main: &dyn MainPool, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut missed_main = false;
        let mut want_cache = false;
        {
            let inner = self.read_inner();
            let policy = inner.policy;
            let mut at = 0usize;
            for (z, rel, len) in self.zone_pieces(offset, buf.len() as u64) {
                let piece = &mut buf[at..at + len as usize];
                at += len as usize;
                let zstart = z * self.zone_bytes;
                match inner.slots.get(&z) {
                    Some(s) if s.migrated => {
                        self.redirected_reads.fetch_add(1, Ordering::Relaxed);
                        self.sur_read(self.sur_off(s, rel), piece)?;
                    }
                    Some(s) => {
                        let mut p_at = 0usize;
                        let mut any = false;
                        for (o, l, on_sur) in s.pieces(rel, len) {
                            let part = &mut piece[p_at..p_at + l as usize];
                            p_at += l as usize;
                            if on_sur {
                                any = true;
                                self.sur_read(self.sur_off(s, o), part)?;
                            } else {
                                missed_main = true;
                                main.read(zstart + o, part)?;
                            }
                        }
                        if any {
                            self.redirected_reads.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    None => {
                        missed_main = true;
                        main.read(zstart + rel, piece)?;
                    }
                }
                if self.phase() == Phase::Rebuilding && inner.dropped.is_none() {
                    want_cache |= match policy {
                        RebuildPolicy::Vdf => true,
                        RebuildPolicy::Workout => {
                            self.during[z as usize].load(Ordering::Relaxed) >= 2
                        }
                        _ => false,
                    };
                }
            }
        }
        if missed_main && want_cache {
            // Best effort: a cache that cannot be filled is no error.
            let _ = self.cache(main, offset, buf.len() as u64);
        }
        Ok(())
    }

    /// WorkOut/VDF: copies the main pool's data of `[offset, offset+len)` to the surrogate as
    /// clean D-Map ranges (only where nothing newer is there).
    fn cache(&self, main: &dyn MainPool, offset: u64, len: u64) -> Result<()> {
        let mut inner = self.write_inner();
        if inner.dropped.is_some() || self.sur().is_none() || self.phase() != Phase::Rebuilding {
            return Ok(());
        }
        for (z, rel, l) in self.zone_pieces(offset, len) {
            if !inner.slots.contains_key(&z) {
                let idx = match self.alloc_slot(&mut inner) {
                    Some(i) => Some(i),
                    None if inner.policy == RebuildPolicy::Vdf && self.evict_one(&mut inner) => {
                        self.alloc_slot(&mut inner)
                    }
                    None => None,
                };
                let Some(index) = idx else { continue };
                if !self.record_fits(&inner, 1, 1) {
                    continue;
                }
                inner.slots.insert(
                    z,
                    Slot {
                        index,
                        ..Slot::default()
                    },
                );
            }
            let s = inner.slots.get(&z).expect("slot").clone();
            if !self.record_fits(&inner, 4, 0) {
                continue;
            }
            let zstart = z * self.zone_bytes;
            let mut copied = Vec::new();
            for (o, pl, on_sur) in s.pieces(rel, l) {
                if on_sur || s.migrated {
                    continue;
                }
                let mut b = vec![0u8; pl as usize];
                main.read(zstart + o, &mut b)?;
                if let Err(e) = self.sur_write(self.sur_off(&s, o), &b) {
                    inner.drain_wanted = true;
                    return Err(e);
                }
                copied.push((o, pl));
            }
            // Durable before the D-Map (recorded with the next change) says they are there.
            if !copied.is_empty() {
                if let Err(e) = self.sur_sync() {
                    inner.drain_wanted = true;
                    return Err(e);
                }
            }
            let slot = inner.slots.get_mut(&z).expect("slot");
            for (o, pl) in copied {
                slot.insert(o, pl, false);
            }
            if slot.is_empty() && !slot.migrated {
                inner.slots.remove(&z);
            }
        }
        Ok(())
    }

    /// A routed write: to the surrogate for zones with a slot (and for every zone while the
    /// policy redirects), else to the main pool. Durable and listed before it returns.
    pub(crate) fn write(
        &self,
        main: &dyn MainPool,
        uuid: [u8; 16],
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        let mut inner = self.write_inner();
        let attached = self.sur().is_some();
        if inner.drain_wanted || (attached && !self.surrogate_healthy()) {
            self.drain_locked(&mut inner, main, uuid, "the surrogate pool lost a member")?;
        }
        let redirect = self.phase() == Phase::Rebuilding
            && inner.policy.uses_surrogate()
            && inner.dropped.is_none()
            && self.sur().is_some();
        let mut to_sur: Vec<(u64, u64, u64, usize)> = Vec::new(); // zone, rel, len, data at
        let mut to_main: Vec<(u64, usize, usize)> = Vec::new(); // offset, data at, len
        let mut both: Vec<(u64, u64, u64, usize)> = Vec::new();
        let mut at = 0usize;
        let mut new_slots = Vec::new();
        for (z, rel, len) in self.zone_pieces(offset, data.len() as u64) {
            let has = inner.slots.contains_key(&z);
            let slot_ok = has
                || (redirect && self.record_fits(&inner, 1, 1) && {
                    match self.alloc_slot(&mut inner) {
                        Some(index) => {
                            inner.slots.insert(
                                z,
                                Slot {
                                    index,
                                    ..Slot::default()
                                },
                            );
                            new_slots.push(z);
                            true
                        }
                        None => {
                            inner.policy == RebuildPolicy::Vdf
                                && self.evict_one(&mut inner)
                                && match self.alloc_slot(&mut inner) {
                                    Some(index) => {
                                        inner.slots.insert(
                                            z,
                                            Slot {
                                                index,
                                                ..Slot::default()
                                            },
                                        );
                                        new_slots.push(z);
                                        true
                                    }
                                    None => false,
                                }
                        }
                    }
                });
            if slot_ok {
                if self.record_fits(&inner, 2, 0) {
                    to_sur.push((z, rel, len, at));
                } else {
                    both.push((z, rel, len, at));
                }
            } else {
                to_main.push((z * self.zone_bytes + rel, at, len as usize));
            }
            at += len as usize;
        }
        let result = (|| -> Result<()> {
            for &(z, rel, len, at) in to_sur.iter().chain(&both) {
                let s = &inner.slots[&z];
                self.sur_write(self.sur_off(s, rel), &data[at..at + len as usize])?;
            }
            if !to_sur.is_empty() || !both.is_empty() {
                self.sur_sync()?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            for z in new_slots {
                inner.slots.remove(&z);
            }
            // The surrogate failed: bring its data home, then write here.
            self.drain_locked(&mut inner, main, uuid, &e.to_string())?;
            drop(inner);
            return main.write(offset, data);
        }
        for &(z, rel, len, _) in &to_sur {
            inner
                .slots
                .get_mut(&z)
                .expect("slot")
                .insert(rel, len, true);
        }
        if !to_sur.is_empty() {
            self.redirected_writes.fetch_add(1, Ordering::Relaxed);
            self.persist_locked(&mut inner, main, uuid)?;
        }
        for &(z, rel, len, at) in &both {
            main.write(z * self.zone_bytes + rel, &data[at..at + len as usize])?;
        }
        for &(off, at, len) in &to_main {
            main.write(off, &data[at..at + len])?;
        }
        if to_sur.is_empty() {
            // Slots allocated for nothing (everything went both ways).
            for z in new_slots {
                if inner
                    .slots
                    .get(&z)
                    .is_some_and(|s| s.is_empty() && !s.migrated)
                {
                    inner.slots.remove(&z);
                }
            }
        }
        Ok(())
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
        let slots: Vec<(u64, Slot)> = inner.slots.iter().map(|(&z, s)| (z, s.clone())).collect();
        for (z, s) in &slots {
            for (o, len) in s.dirty_extents() {
                let mut b = vec![0u8; len as usize];
                self.sur_read(self.sur_off(s, o), &mut b).map_err(|err| {
                    PoolError::Io(format!(
                        "{err}: redirected data of zone {z} cannot be read back (the surrogate \
                         lost more members than it tolerates); the pool keeps listing it"
                    ))
                })?;
                main.write(z * self.zone_bytes + o, &b)?;
                inner.reclaimed_bytes += len;
            }
        }
        main.sync()?;
        self.unmigrate(inner.slots.keys().copied());
        inner.slots.clear();
        inner.drain_wanted = false;
        inner.dropped = Some(why.to_string());
        self.persist_locked(inner, main, uuid)?;
        if let Some(p) = self.sur().take() {
            let _ = p.close();
        }
        Ok(())
    }

    /// Zones no longer held by the surrogate go from flag `11` back to `10`.
    fn unmigrate(&self, zones: impl IntoIterator<Item = u64>) {
        let mut t = self.table();
        for z in zones {
            if t.flag(z) == ZoneFlag::Migrated {
                t.set_flag(z, ZoneFlag::Rebuilt);
            }
        }
    }

    // ----- rebuild and reclaim -----

    /// Starts a policy rebuild: records the policy and phase, and (IDO) picks the hot zones:
    /// those with popularity, hottest first, that together carry 90 % of all counted
    /// requests, as many as the surrogate has slots for. `left[z]` = unrebuilt cycles of zone
    /// `z`.
    pub(crate) fn begin_rebuild(
        &self,
        policy: RebuildPolicy,
        left: Vec<u32>,
        main: &dyn MainPool,
        uuid: [u8; 16],
    ) -> Result<()> {
        let mut inner = self.write_inner();
        inner.policy = policy;
        let resumed = self.phase() == Phase::Rebuilding;
        if !resumed {
            for c in &self.during {
                c.store(0, Ordering::Relaxed);
            }
            inner.rebuilt_order.clear();
            inner.zones_rebuilt = 0;
            inner.migrated_bytes = 0;
        }
        inner.zones_rebuilt = left.iter().filter(|&&l| l == 0).count() as u64;
        inner.left = left;
        inner.hot.clear();
        let slots = self.slots_total();
        let mut table = self.folded();
        // The seed's zone flags, from what is known for sure: `11` for zones wholly on the
        // surrogate, `10` for zones whose cycles are all rebuilt, else `00` (a restart may
        // have lost flag changes made after the last record; the cycles and slots have not).
        for z in 0..self.zones {
            let f = if inner.slots.get(&z).is_some_and(|s| s.migrated) {
                ZoneFlag::Migrated
            } else if inner.left.get(z as usize).is_some_and(|&l| l == 0) {
                ZoneFlag::Rebuilt
            } else {
                ZoneFlag::NotRebuilt
            };
            table.set_flag(z, f);
        }
        if policy == RebuildPolicy::Ido {
            // The core's choice (the simulator's too): the most popular zones holding 90 % of
            // the popularity, as many as the surrogate has zone slots for.
            inner.hot = table.hot_zones(HOT_COVERAGE, slots.saturating_mul(self.zone_bytes));
        }
        drop(table);
        self.set_phase(Phase::Rebuilding);
        self.persist_locked(&mut inner, main, uuid)
    }

    /// The zones in the order to rebuild them now (only zones with cycles left): IDO: hot
    /// zones hottest first, then the rest in address order; PRO: most requested during the
    /// rebuild first; others: address order.
    pub(crate) fn zone_order(&self) -> Vec<u64> {
        let inner = self.read_inner();
        let left = |z: u64| inner.left.get(z as usize).is_none_or(|&l| l > 0);
        let during: Vec<u32> = match inner.policy {
            RebuildPolicy::Pro => self
                .during
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            _ => Vec::new(),
        };
        // The core's priority rule (the simulator's too), then the rest in address order.
        let mut out = priority_zones(inner.policy, &inner.hot, &during, usize::MAX, left);
        let mut first = vec![false; self.zones as usize];
        for &z in &out {
            first[z as usize] = true;
        }
        out.extend((0..self.zones).filter(|&z| !first[z as usize] && left(z)));
        out
    }

    /// Records rebuilt cycles; returns the zones that became completely rebuilt.
    pub(crate) fn cycles_rebuilt(&self, cycles: &[u64]) -> Vec<u64> {
        let mut inner = self.write_inner();
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
        let mut table = self.table();
        for &z in &done {
            if table.flag(z) == ZoneFlag::NotRebuilt {
                table.set_flag(z, ZoneFlag::Rebuilt);
            }
        }
        drop(table);
        for &z in &done {
            inner.zones_rebuilt += 1;
            if inner.rebuilt_order.len() < 256 {
                inner.rebuilt_order.push(z);
            }
        }
        done
    }

    /// IDO: migrates the rebuilt hot zones among `zones` to the surrogate (their newest
    /// data: the main pool's where the D-Map has nothing). Persists the flags after the copy
    /// is durable.
    pub(crate) fn migrate(&self, main: &dyn MainPool, uuid: [u8; 16], zones: &[u64]) -> Result<()> {
        let mut inner = self.write_inner();
        if inner.policy != RebuildPolicy::Ido || inner.dropped.is_some() || self.sur().is_none() {
            return Ok(());
        }
        let mut any = false;
        for &z in zones {
            if !inner.hot.contains(&z) || inner.slots.get(&z).is_some_and(|s| s.migrated) {
                continue;
            }
            if !inner.slots.contains_key(&z) {
                if !self.record_fits(&inner, 0, 1) {
                    continue;
                }
                let Some(index) = self.alloc_slot(&mut inner) else {
                    continue;
                };
                inner.slots.insert(
                    z,
                    Slot {
                        index,
                        ..Slot::default()
                    },
                );
            }
            let s = inner.slots[&z].clone();
            let zstart = z * self.zone_bytes;
            let zlen = self.zone_bytes.min(self.capacity - zstart);
            let copy = || -> Result<u64> {
                let mut n = 0;
                for (o, l) in s.not_dirty(0, zlen) {
                    let mut b = vec![0u8; l as usize];
                    main.read(zstart + o, &mut b)?;
                    self.sur_write(self.sur_off(&s, o), &b)?;
                    n += l;
                }
                Ok(n)
            };
            match copy() {
                Ok(n) => {
                    inner.migrated_bytes += n;
                    any = true;
                    self.table().set_flag(z, ZoneFlag::Migrated);
                    let slot = inner.slots.get_mut(&z).expect("slot");
                    slot.migrated = true;
                    // Migrated zones are wholly on the surrogate: clean ranges say nothing more.
                    slot.dmap.drop_clean();
                }
                Err(e) => {
                    if !s.has_dirty() && !s.migrated {
                        inner.slots.remove(&z);
                    }
                    self.drain_locked(&mut inner, main, uuid, &e.to_string())?;
                    return Ok(());
                }
            }
        }
        if any {
            self.sur_sync()?;
            self.persist_locked(&mut inner, main, uuid)?;
        }
        Ok(())
    }

    /// The rebuild is over: reclaim from now on.
    pub(crate) fn end_rebuild(&self, main: &dyn MainPool, uuid: [u8; 16]) -> Result<()> {
        let mut inner = self.write_inner();
        self.set_phase(Phase::Reclaiming);
        inner.left.clear();
        self.persist_locked(&mut inner, main, uuid)
    }

    /// One reclaim step: the dirty ranges of one zone written home, made durable, then the
    /// zone's slot forgotten (persisted). Returns false when nothing is left (the phase is
    /// then normal again and the surrogate closed).
    pub(crate) fn reclaim_step(&self, main: &dyn MainPool, uuid: [u8; 16]) -> Result<bool> {
        let mut inner = self.write_inner();
        if self.phase() != Phase::Reclaiming {
            return Ok(false);
        }
        let Some((&z, s)) = inner.slots.iter().next() else {
            self.set_phase(Phase::Normal);
            self.persist_locked(&mut inner, main, uuid)?;
            drop(inner);
            self.detach()?;
            return Ok(false);
        };
        let s = s.clone();
        let mut n = 0;
        for (o, len) in s.dirty_extents() {
            let mut b = vec![0u8; len as usize];
            self.sur_read(self.sur_off(&s, o), &mut b)?;
            main.write(z * self.zone_bytes + o, &b)?;
            n += len;
        }
        main.sync()?;
        inner.slots.remove(&z);
        self.unmigrate([z]);
        inner.reclaimed_bytes += n;
        inner.reclaimed_zones += 1;
        self.persist_locked(&mut inner, main, uuid)?;
        Ok(true)
    }

    /// The surrogate must be attached before requests are served (it holds newer data).
    pub(crate) fn needs_surrogate_now(&self) -> bool {
        !self.read_inner().slots.is_empty()
    }

    pub fn status(&self, zones_rebuilt: u64) -> IdoStatus {
        let inner = self.read_inner();
        let dmap_entries = inner.slots.values().map(|s| s.dmap.len() as u64).sum();
        let dmap_bytes = inner.slots.values().map(|s| s.bytes(false)).sum();
        let dmap_dirty_bytes = inner.slots.values().map(|s| s.bytes(true)).sum();
        let (popular, epochs, flags) = {
            let t = self.folded();
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
            (popular, t.epochs(), flags)
        };
        let attached = self.sur().is_some();
        let rr = self.redirected_reads.load(Ordering::Relaxed);
        let rw = self.redirected_writes.load(Ordering::Relaxed);
        IdoStatus {
            tracking: self.tracking.load(Ordering::Relaxed),
            phase: self.phase().as_str().into(),
            policy: inner.policy.name().into(),
            zone_bytes: self.zone_bytes,
            zones_total: self.zones,
            hot_zones: inner.hot.iter().take(64).copied().collect(),
            zones_hot: inner.hot.len() as u64,
            zones_rebuilt,
            rebuilt_order: inner.rebuilt_order.iter().take(64).copied().collect(),
            zones_migrated: inner.slots.values().filter(|s| s.migrated).count() as u64,
            migrated_bytes: inner.migrated_bytes,
            redirected_reads: rr,
            redirected_writes: rw,
            redirected_requests: rr + rw,
            dmap_entries,
            dmap_bytes,
            dmap_dirty_bytes,
            surrogate_slots_used: inner.slots.len() as u64,
            surrogate_slots_total: self.slots_total(),
            reclaim_zones_left: if self.phase() == Phase::Normal {
                0
            } else {
                inner
                    .slots
                    .values()
                    .filter(|s| s.has_dirty() || s.migrated)
                    .count() as u64
            },
            reclaimed_zones: inner.reclaimed_zones,
            reclaimed_bytes: inner.reclaimed_bytes,
            surrogate: inner.surrogate_path.clone(),
            surrogate_state: match (&inner.dropped, attached) {
                (Some(why), _) => format!("dropped: {why}"),
                (None, true) => "attached".into(),
                (None, false) => "closed".into(),
            },
            popular,
            epochs,
            zones_flag_rebuilt: flags[0],
            zones_flag_migrated: flags[1],
        }
    }
}

/// True when `b` is a valid-looking version 1 record of the array `uuid` (refused with a
/// message by [`Ido::restore`]).
fn old_record_of(b: &[u8], uuid: &[u8; 16]) -> bool {
    b.len() >= HEADER
        && &b[..8] == MAGIC
        && u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) == 1
        && &b[16..32] == uuid
}

/// A decoded record.
struct RecordView {
    uuid: [u8; 16],
    seq: u64,
    zone_bytes: u64,
    zones: u32,
    phase: Phase,
    policy: RebuildPolicy,
    dropped: bool,
    surrogate: Option<PathBuf>,
    table: ZoneTable,
    slots: BTreeMap<u64, Slot>,
}

impl RecordView {
    fn parse(b: &[u8]) -> Option<RecordView> {
        if b.len() < HEADER + 6 || &b[..8] != MAGIC {
            return None;
        }
        let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
        let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
        if u32_at(8)? != RECORD_VERSION {
            return None;
        }
        let len = u32_at(12)? as usize;
        if !(HEADER + 6..=IDO_SLOT_BYTES).contains(&len) || len > b.len() {
            return None;
        }
        if crc32c(&b[..len - 4]) != u32_at(len - 4)? {
            return None;
        }
        let b = &b[..len - 4];
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[16..32]);
        let seq = u64_at(32)?;
        let zone_bytes = u64_at(40)?;
        let zones = u32_at(48)?;
        let phase = Phase::from_code(b[52])?;
        let policy = policy_from_code(b[53])?;
        let dropped = b[54] != 0;
        let mut at = HEADER;
        let plen = u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as usize;
        at += 2;
        let path = std::str::from_utf8(b.get(at..at + plen)?).ok()?;
        at += plen;
        let surrogate = (!path.is_empty()).then(|| PathBuf::from(path));
        if zone_bytes == 0 || zones as u64 > MAX_ZONES {
            return None;
        }
        let tlen = u32_at(at)? as usize;
        at += 4;
        let table = ZoneTable::decode(b.get(at..at + tlen)?).ok()?;
        at += tlen;
        if table.zones() != zones as u64 || table.zone_bytes() != zone_bytes {
            return None;
        }
        let nslots = u32_at(at)? as usize;
        at += 4;
        let mut slots = BTreeMap::new();
        for _ in 0..nslots {
            let z = u64_at(at)?;
            let index = u64_at(at + 8)?;
            let migrated = *b.get(at + 16)? != 0;
            let ne = u32_at(at + 17)? as usize;
            at += SLOT_HEAD_BYTES;
            let mut s = Slot {
                index,
                migrated,
                dmap: DMap::new(),
            };
            let mut prev_end = 0u64;
            for _ in 0..ne {
                let o = u64_at(at)?;
                let l = u64_at(at + 8)?;
                let dirty = *b.get(at + 16)? != 0;
                at += ENTRY_BYTES;
                if l == 0 || o < prev_end || o.checked_add(l)? > zone_bytes {
                    return None;
                }
                prev_end = o + l;
                s.insert(o, l, dirty);
            }
            if z >= zones as u64 || slots.insert(z, s).is_some() {
                return None;
            }
        }
        if at != b.len() {
            return None;
        }
        Some(RecordView {
            uuid,
            seq,
            zone_bytes,
            zones,
            phase,
            policy,
            dropped,
            surrogate,
            table,
            slots,
        })
    }
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

    /// A reference of which bytes of a zone are dirty/clean/absent, against Slot's ranges.
    #[test]
    fn slot_ranges_match_a_byte_model_exhaustively_small() {
        // Every sequence of 3 operations over a 6-byte zone, each (off, len, dirty).
        let mut ops = Vec::new();
        for off in 0..6u64 {
            for len in 1..=(6 - off) {
                for dirty in [false, true] {
                    ops.push((off, len, dirty));
                }
            }
        }
        for &a in &ops {
            for &b in &ops {
                for &c in ops.iter().step_by(3) {
                    let mut s = Slot::default();
                    let mut model = [0u8; 6]; // 0 none, 1 clean, 2 dirty
                    for &(o, l, d) in &[a, b, c] {
                        s.insert(o, l, d);
                        for m in &mut model[o as usize..(o + l) as usize] {
                            if d {
                                *m = 2;
                            } else if *m == 0 {
                                *m = 1;
                            }
                        }
                    }
                    let mut got = [0u8; 6];
                    let mut prev_end = 0;
                    for e in s.dmap.extents() {
                        assert!(e.d_off >= prev_end, "extents overlap: {:?}", s.dmap);
                        assert_eq!(e.s_off, e.d_off, "slot extents are identity-placed");
                        prev_end = e.d_off + e.len;
                        for g in &mut got[e.d_off as usize..(e.d_off + e.len) as usize] {
                            *g = if e.dirty { 2 } else { 1 };
                        }
                    }
                    assert_eq!(got, model, "ops {a:?} {b:?} {c:?}: {:?}", s.dmap);
                    // pieces() covers the whole range in order and agrees with the model.
                    let ps = s.pieces(1, 4);
                    let mut at = 1;
                    for (o, l, on_sur) in ps {
                        assert_eq!(o, at);
                        for i in o..o + l {
                            assert_eq!(model[i as usize] != 0, on_sur);
                        }
                        at = o + l;
                    }
                    assert_eq!(at, 5);
                    // not_dirty() is exactly the bytes not dirty in the model.
                    let mut nd = [false; 6];
                    for (o, l) in s.not_dirty(0, 6) {
                        for x in &mut nd[o as usize..(o + l) as usize] {
                            assert!(!*x, "not_dirty pieces overlap");
                            *x = true;
                        }
                    }
                    for i in 0..6 {
                        assert_eq!(nd[i], model[i] != 2, "ops {a:?} {b:?} {c:?} byte {i}");
                    }
                }
            }
        }
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
        inner.policy = RebuildPolicy::Ido;
        inner.surrogate_path = Some("/x/s.json".into());
        let mut s = Slot {
            index: 3,
            migrated: true,
            ..Slot::default()
        };
        s.insert(4096, 8192, true);
        inner.slots.insert(1, s);
        let b = ido.encode(&inner, [7; 16], 5).unwrap();
        drop(inner);
        let r = Ido::restore(100 << 20, 768 << 10, std::slice::from_ref(&b), &[7; 16])
            .unwrap()
            .unwrap();
        assert_eq!(r.popularity(1), 2);
        assert_eq!(r.popularity(0), 1);
        let ri = r.read_inner();
        assert_eq!(ri.seq, 5);
        assert_eq!(ri.policy, RebuildPolicy::Ido);
        assert_eq!(ri.slots, ido.read_inner().slots);
        assert_eq!(ri.surrogate_path.as_deref(), Some(Path::new("/x/s.json")));
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
        let inner = ido.write_inner();
        let b = ido.encode(&inner, [1; 16], 1).unwrap();
        drop(inner);
        let r = Ido::restore(64 << 20, 1 << 20, &[b], &[1; 16])
            .unwrap()
            .unwrap();
        assert_eq!(r.epochs(), 1);
        assert_eq!(r.popularity(1) as u64, EPOCH_REQUESTS / 2);
    }

    #[test]
    fn a_version_1_record_is_refused_with_a_way_out() {
        let ido = Ido::new(64 << 20, 1 << 20, 4 << 20).unwrap();
        let inner = ido.write_inner();
        let mut b = ido.encode(&inner, [1; 16], 1).unwrap();
        drop(inner);
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        let e = Ido::restore(64 << 20, 1 << 20, &[b.clone()], &[1; 16])
            .err()
            .expect("refused");
        assert!(e.to_string().contains("version 1"), "{e}");
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
}

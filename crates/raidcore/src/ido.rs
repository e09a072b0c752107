//! IDO (seed 003): proactive hot-zone outsourcing during on-line rebuild, and the policies it is
//! measured against (PR, PRO, WorkOut, VDF), as data and pure decisions.
//!
//! Nothing here does I/O or reads a clock: requests, completions and the time are inputs; the
//! answers say where each piece of a user request goes (the array, which is the *degraded set*
//! while a rebuild runs, or the *surrogate set*), which cycles to rebuild first, and what side
//! work to do (copy a hot zone to the surrogate, copy a popular read there, write redirected
//! data back after the rebuild). The real engine (`dev`) and the simulator (`sim`) both execute
//! these decisions; neither re-implements them.
//!
//! ## Pieces
//!
//! - [`ZoneTable`]: the array's logical space cut into equal *zones* (a multiple of the stripe
//!   data size, 12 MiB by default), a popularity count per zone (one per request touching it,
//!   halved at each epoch end) and the 2-bit zone [`ZoneFlag`] of the seed's Figure 6
//!   (`00` not rebuilt, `10` rebuilt, `11` rebuilt and migrated). Dense arrays: `u32` + `u8`
//!   per zone, at most [`MAX_ZONES`] zones; a larger array gets proportionally larger zones
//!   (so the table never exceeds 5 MiB).
//! - [`DMap`]: logical ranges held by the surrogate set (`D offset -> S offset, len`), each
//!   *dirty* (a redirected write: newer than the array, reclaimed after the rebuild) or *clean*
//!   (a copy of array data: a migrated hot zone, a WorkOut popular read). Inserting splits and
//!   trims partially overwritten ranges and merges neighbours contiguous on both sides;
//!   [`DMap::query`] cuts a read into pieces served by the array or the surrogate.
//! - [`Ido`]: the controller. Normal state: [`Ido::record`] counts popularity. Rebuild:
//!   [`Ido::start_rebuild`] picks the hot zones; [`Ido::priority_cycles`] gives the cycles to
//!   rebuild first (feed them to [`crate::RebuildScheduler::prioritize`]);
//!   [`Ido::cycle_rebuilt`] updates zone flags and returns migrations; [`Ido::route_read`] /
//!   [`Ido::route_write`] distribute user requests; [`Ido::copy_done`] completes a copy to the
//!   surrogate. After it: [`Ido::finish_rebuild`], then [`Ido::next_reclaim`] /
//!   [`Ido::reclaim_done`] until the D-Map is empty.
//!
//! ## Consistency contract (the executor's part)
//!
//! A route is decided when the request arrives and the D-Map changes at that moment; the
//! executor must serialise overlapping user requests (stripe locks do) so that a later read of a
//! range sees an earlier write's data where the D-Map says it is. A copy to the surrogate
//! ([`CopyJob`]) reads the array and writes the surrogate; [`Ido::copy_done`] then maps only the
//! parts no newer write has claimed meanwhile, and nothing at all if a write went to the array
//! over the range while the copy ran. A reclaim ([`Reclaim`]) reads the surrogate and writes the
//! array; under the range's locks, just before the array write, the executor checks
//! [`Ido::reclaim_valid`] (a user write after the rebuild goes to the array and unmaps the
//! range, and must not be overwritten by older surrogate data).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::str::FromStr;

use crate::array::{ArrayState, Geometry};
use crate::record::{Frame, FrameError, Record, CRC_BYTES};

/// The seed's default zone size (rounded to a multiple of the stripe data size).
pub const DEFAULT_ZONE_BYTES: u64 = 12 << 20;
/// Most zones a [`ZoneTable`] holds (1 Mi: 4 MiB of counters and 1 MiB of flags); a larger
/// array gets larger zones (see [`ZoneTable::for_geometry`]).
pub const MAX_ZONES: u64 = 1 << 20;
/// Granule of VDF's cache (bytes).
pub const VDF_BLOCK: u64 = 4096;

/// Why an IDO configuration or record was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdoError {
    /// The zone size is zero or not a multiple of the stripe data size.
    #[error("zone size {zone_bytes} must be a positive multiple of the stripe data size {granule} bytes (e.g. {suggest})")]
    BadZoneSize {
        /// The zone size given.
        zone_bytes: u64,
        /// The stripe data size it must be a multiple of.
        granule: u64,
        /// The nearest valid size.
        suggest: u64,
    },
    /// A rebuild policy name that is not one of pr, pro, workout, vdf, ido.
    #[error("unknown rebuild policy {0:?}: use pr, pro, workout, vdf or ido")]
    BadPolicy(String),
    /// A persisted record is damaged, truncated or of another version.
    #[error("IDO record refused: {0}")]
    BadRecord(&'static str),
    /// A record was written for another geometry (zone size or capacity differ).
    #[error("IDO record is for {found_zone} byte zones over {found_capacity} bytes, the array has {zone_bytes} byte zones over {capacity} bytes")]
    Mismatch {
        /// Zone size in the record.
        found_zone: u64,
        /// Capacity in the record.
        found_capacity: u64,
        /// Zone size expected.
        zone_bytes: u64,
        /// Capacity expected.
        capacity: u64,
    },
}

// ---------------------------------------------------------------------------------------------
// Policies

/// A rebuild policy (`--rebuild-policy` of `raidforge rebuild` and `raidforge sim`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RebuildPolicy {
    /// MD's progressive rebuild: sequential, every request served by the degraded set.
    #[default]
    Pr,
    /// Popular-first rebuild order, popularity observed *during* the rebuild (reactive).
    Pro,
    /// All writes and the reads seen popular during the rebuild redirected to the surrogate.
    Workout,
    /// A read cache on the surrogate that evicts blocks of surviving disks first.
    Vdf,
    /// Hot zones (learnt before the failure) rebuilt first and migrated to the surrogate;
    /// reads of migrated zones and all writes go there.
    Ido,
}

impl RebuildPolicy {
    /// Every policy, in the order reports list them.
    pub const ALL: [RebuildPolicy; 5] = [
        RebuildPolicy::Pr,
        RebuildPolicy::Pro,
        RebuildPolicy::Workout,
        RebuildPolicy::Vdf,
        RebuildPolicy::Ido,
    ];
    /// The policy's name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            RebuildPolicy::Pr => "pr",
            RebuildPolicy::Pro => "pro",
            RebuildPolicy::Workout => "workout",
            RebuildPolicy::Vdf => "vdf",
            RebuildPolicy::Ido => "ido",
        }
    }
    /// Whether the policy uses a surrogate set.
    pub fn uses_surrogate(self) -> bool {
        matches!(
            self,
            RebuildPolicy::Workout | RebuildPolicy::Vdf | RebuildPolicy::Ido
        )
    }
}

impl fmt::Display for RebuildPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RebuildPolicy {
    type Err = IdoError;
    fn from_str(s: &str) -> Result<RebuildPolicy, IdoError> {
        RebuildPolicy::ALL
            .into_iter()
            .find(|p| p.name() == s.to_ascii_lowercase())
            .ok_or_else(|| IdoError::BadPolicy(s.to_string()))
    }
}

// ---------------------------------------------------------------------------------------------
// Zone table

/// The 2-bit zone flag of the seed's Figure 6. The low bit says "migrated".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum ZoneFlag {
    /// `00`: not rebuilt yet (or no rebuild running).
    #[default]
    NotRebuilt = 0b00,
    /// `10`: rebuilt, not migrated (a cold zone).
    Rebuilt = 0b10,
    /// `11`: rebuilt and migrated to the surrogate set (a hot zone).
    Migrated = 0b11,
}

impl ZoneFlag {
    fn from_bits(b: u8) -> Option<ZoneFlag> {
        match b {
            0b00 => Some(ZoneFlag::NotRebuilt),
            0b10 => Some(ZoneFlag::Rebuilt),
            0b11 => Some(ZoneFlag::Migrated),
            _ => None,
        }
    }
}

/// When an epoch ends (popularity halves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epoch {
    /// After this many recorded requests.
    Requests(u64),
    /// After this many nanoseconds of the caller's clock.
    Nanos(u64),
}

impl Default for Epoch {
    /// One minute.
    fn default() -> Epoch {
        Epoch::Nanos(60_000_000_000)
    }
}

/// Equal zones over the array's logical space with a popularity and a flag each. Two tables
/// are equal when their persisted content is (the epoch rule and clock are not compared).
#[derive(Clone, Debug)]
pub struct ZoneTable {
    zone_bytes: u64,
    capacity: u64,
    popularity: Vec<u32>,
    flags: Vec<ZoneFlag>,
    epoch: Epoch,
    /// Requests recorded in the current epoch (for `Epoch::Requests`).
    in_epoch: u64,
    /// Start of the current epoch (for `Epoch::Nanos`), set by the first record.
    epoch_start_ns: Option<u64>,
    epochs: u64,
    /// The latest time `record` was given (times are made monotonic with it).
    last_ns: u64,
}

impl PartialEq for ZoneTable {
    fn eq(&self, o: &ZoneTable) -> bool {
        (self.zone_bytes, self.capacity, self.epochs, self.in_epoch)
            == (o.zone_bytes, o.capacity, o.epochs, o.in_epoch)
            && self.popularity == o.popularity
            && self.flags == o.flags
    }
}

impl Eq for ZoneTable {}

/// The stripe data size zones must be a multiple of: data chunks per stripe times the chunk
/// size (for a 4-disk RAID5 with 64 KiB chunks, 192 KiB).
pub fn stripe_data_bytes(geo: &Geometry) -> u64 {
    let stripes = geo.healthy().stripes.len().max(1) as u64;
    let per = geo.data_per_cycle();
    if per.is_multiple_of(stripes) {
        per / stripes * geo.chunk_bytes()
    } else {
        geo.chunk_bytes()
    }
}

impl ZoneTable {
    /// A table of `zone_bytes` zones over `capacity` bytes; `zone_bytes` must be a positive
    /// multiple of `granule`. The last zone may be shorter.
    pub fn new(capacity: u64, zone_bytes: u64, granule: u64) -> Result<ZoneTable, IdoError> {
        assert!(granule > 0, "granule must be positive");
        if zone_bytes == 0 || !zone_bytes.is_multiple_of(granule) {
            return Err(IdoError::BadZoneSize {
                zone_bytes,
                granule,
                suggest: zone_bytes.div_ceil(granule).max(1) * granule,
            });
        }
        let zones = capacity.div_ceil(zone_bytes);
        assert!(
            zones <= MAX_ZONES,
            "{zones} zones exceed the bound {MAX_ZONES}: use ZoneTable::for_geometry"
        );
        Ok(ZoneTable {
            zone_bytes,
            capacity,
            popularity: vec![0; zones as usize],
            flags: vec![ZoneFlag::NotRebuilt; zones as usize],
            epoch: Epoch::default(),
            in_epoch: 0,
            epoch_start_ns: None,
            epochs: 0,
            last_ns: 0,
        })
    }

    /// A table for `geo`: `zone_bytes` (default [`DEFAULT_ZONE_BYTES`]) rounded *up* to a
    /// multiple of the stripe data size when `None` is given, validated when given; then, if
    /// the array would have more than [`MAX_ZONES`] zones, multiplied until it does not (the
    /// memory bound for huge arrays).
    pub fn for_geometry(geo: &Geometry, zone_bytes: Option<u64>) -> Result<ZoneTable, IdoError> {
        let g = stripe_data_bytes(geo);
        let mut z = match zone_bytes {
            Some(z) => z,
            None => DEFAULT_ZONE_BYTES.div_ceil(g) * g,
        };
        if z == 0 || !z.is_multiple_of(g) {
            return Err(IdoError::BadZoneSize {
                zone_bytes: z,
                granule: g,
                suggest: z.div_ceil(g).max(1) * g,
            });
        }
        let cap = geo.capacity_bytes();
        if cap.div_ceil(z) > MAX_ZONES {
            z = cap.div_ceil(MAX_ZONES).div_ceil(g) * g;
        }
        ZoneTable::new(cap, z, g)
    }

    /// The same table with another epoch rule.
    pub fn with_epoch(mut self, epoch: Epoch) -> ZoneTable {
        let (Epoch::Requests(n) | Epoch::Nanos(n)) = epoch;
        assert!(n > 0, "an epoch must be positive");
        self.epoch = epoch;
        self
    }

    /// Zone size in bytes.
    pub fn zone_bytes(&self) -> u64 {
        self.zone_bytes
    }
    /// Bytes covered (the array's capacity).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    /// Number of zones.
    pub fn zones(&self) -> u64 {
        self.popularity.len() as u64
    }
    /// Epochs ended so far.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }
    /// The zone holding byte `offset`.
    pub fn zone_of(&self, offset: u64) -> u64 {
        assert!(offset < self.capacity, "offset {offset} beyond the array");
        offset / self.zone_bytes
    }
    /// Zones a request touches (empty for `len == 0`).
    pub fn zones_of(&self, offset: u64, len: u64) -> std::ops::Range<u64> {
        if len == 0 {
            return 0..0;
        }
        let end = (offset + len).min(self.capacity);
        offset / self.zone_bytes..end.div_ceil(self.zone_bytes)
    }
    /// Byte range `(offset, len)` of zone `z`.
    pub fn zone_range(&self, z: u64) -> (u64, u64) {
        let start = z * self.zone_bytes;
        (start, self.zone_bytes.min(self.capacity - start))
    }
    /// Popularity of zone `z`.
    pub fn popularity(&self, z: u64) -> u32 {
        self.popularity[z as usize]
    }
    /// Flag of zone `z`.
    pub fn flag(&self, z: u64) -> ZoneFlag {
        self.flags[z as usize]
    }
    /// Sets the flag of zone `z`.
    pub fn set_flag(&mut self, z: u64, f: ZoneFlag) {
        self.flags[z as usize] = f;
    }
    /// Resets every flag to `00`.
    pub fn clear_flags(&mut self) {
        self.flags.fill(ZoneFlag::NotRebuilt);
    }

    /// Counts one request over `offset..offset + len` at time `now_ns` (the caller's clock;
    /// ignored for request-counted epochs; a time earlier than one seen before counts as that
    /// one): ends the epochs that are over first, then adds one to every zone the request
    /// touches (saturating).
    pub fn record(&mut self, offset: u64, len: u64, now_ns: u64) {
        let now_ns = now_ns.max(self.last_ns);
        self.last_ns = now_ns;
        match self.epoch {
            Epoch::Requests(n) => {
                if self.in_epoch >= n {
                    self.end_epoch();
                }
                self.in_epoch += 1;
            }
            Epoch::Nanos(n) => {
                let start = *self.epoch_start_ns.get_or_insert(now_ns);
                if now_ns >= start + n {
                    let over = (now_ns - start) / n;
                    // After 32 halvings every u32 counter is zero.
                    for _ in 0..over.min(33) {
                        self.end_epoch();
                    }
                    self.epochs += over.saturating_sub(over.min(33));
                    self.epoch_start_ns = Some(start + over * n);
                }
            }
        }
        for z in self.zones_of(offset, len) {
            let p = &mut self.popularity[z as usize];
            *p = p.saturating_add(1);
        }
    }

    /// Ends an epoch: every popularity is halved.
    pub fn end_epoch(&mut self) {
        for p in &mut self.popularity {
            *p /= 2;
        }
        self.in_epoch = 0;
        self.epochs += 1;
    }

    /// Adds `n` requests to zone `z` (saturating) without ending epochs: for an executor
    /// that counts requests lock-free on its hot path and folds the counts into the table
    /// (then ends the epoch with [`ZoneTable::end_epoch`] itself). Equivalent to `n` calls of
    /// [`ZoneTable::record`] within one epoch.
    pub fn add_counts(&mut self, z: u64, n: u32) {
        let p = &mut self.popularity[z as usize];
        *p = p.saturating_add(n);
    }

    /// Zones ordered by popularity, most popular first (ties: lower zone first), only those
    /// with a popularity of at least 1.
    pub fn by_popularity(&self) -> Vec<u64> {
        rank_zones(&self.popularity)
    }

    /// The hot zones: the most popular zones that together hold `coverage` (0..=1) of the
    /// total popularity, at most `max_bytes` of zones, most popular first.
    pub fn hot_zones(&self, coverage: f64, max_bytes: u64) -> Vec<u64> {
        let total: u64 = self.popularity.iter().map(|&p| p as u64).sum();
        let want = (total as f64 * coverage.clamp(0.0, 1.0)).ceil() as u64;
        let (mut got, mut bytes, mut out) = (0u64, 0u64, Vec::new());
        for z in self.by_popularity() {
            if got >= want {
                break;
            }
            let len = self.zone_range(z).1;
            if bytes + len > max_bytes {
                break;
            }
            bytes += len;
            got += self.popularity[z as usize] as u64;
            out.push(z);
        }
        out
    }

    /// Bytes [`ZoneTable::encode`] produces.
    pub fn encoded_len(&self) -> usize {
        ZT_HEADER + self.popularity.len() * 4 + self.popularity.len().div_ceil(4) + 4
    }

    /// The persistent record (little-endian):
    ///
    /// ```text
    /// offset  size  field
    ///      0     8  magic "RFIDOZT\0"
    ///      8     4  version (1)
    ///     12     4  encoded length (header + counters + flags + CRC)
    ///     16     8  zone bytes           24  8  capacity bytes
    ///     32     8  zone count Z         40  8  epochs ended
    ///     48     8  requests in the current epoch
    ///     56   4*Z  popularity counters (u32)
    ///      .  Z/4↑  flags, 2 bits per zone, zone i at bits 2*(i%4) of byte i/4
    ///      .     4  CRC-32C of everything before it
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let len = self.encoded_len();
        let mut b = ZT_FRAME.begin(len);
        b.resize(len - CRC_BYTES, 0);
        b[16..24].copy_from_slice(&self.zone_bytes.to_le_bytes());
        b[24..32].copy_from_slice(&self.capacity.to_le_bytes());
        b[32..40].copy_from_slice(&self.zones().to_le_bytes());
        b[40..48].copy_from_slice(&self.epochs.to_le_bytes());
        b[48..56].copy_from_slice(&self.in_epoch.to_le_bytes());
        let mut at = ZT_HEADER;
        for p in &self.popularity {
            b[at..at + 4].copy_from_slice(&p.to_le_bytes());
            at += 4;
        }
        for (i, f) in self.flags.iter().enumerate() {
            b[at + i / 4] |= (*f as u8) << (2 * (i % 4));
        }
        ZT_FRAME.seal(b)
    }

    /// Decodes a record made by [`ZoneTable::encode`] (trailing bytes are ignored). The epoch
    /// rule is not persisted: the table gets the default; set it with [`ZoneTable::with_epoch`].
    pub fn decode(b: &[u8]) -> Result<ZoneTable, IdoError> {
        let r = open_framed(&ZT_FRAME, b, ZT_REFUSALS)?;
        let (b, len) = (r.bytes(), r.len());
        let (u32_at, u64_at) = (|o| r.u32_at(o), |o| r.u64_at(o));
        let zones = u64_at(32);
        if zones > MAX_ZONES
            || len != ZT_HEADER + zones as usize * 4 + (zones as usize).div_ceil(4) + 4
        {
            return Err(IdoError::BadRecord("zone table length is inconsistent"));
        }
        let (zone_bytes, capacity) = (u64_at(16), u64_at(24));
        if zone_bytes == 0 || capacity.div_ceil(zone_bytes) != zones {
            return Err(IdoError::BadRecord(
                "zone count does not match the zone size",
            ));
        }
        let popularity = (0..zones as usize)
            .map(|i| u32_at(ZT_HEADER + 4 * i))
            .collect();
        let fb = ZT_HEADER + zones as usize * 4;
        let mut flags = Vec::with_capacity(zones as usize);
        for i in 0..zones as usize {
            let bits = (b[fb + i / 4] >> (2 * (i % 4))) & 3;
            flags.push(ZoneFlag::from_bits(bits).ok_or(IdoError::BadRecord("invalid zone flag"))?);
        }
        // Unused flag bits of the last byte must be zero.
        if zones % 4 != 0 && b[fb + zones as usize / 4] >> (2 * (zones % 4)) != 0 {
            return Err(IdoError::BadRecord("non-zero padding in the zone flags"));
        }
        Ok(ZoneTable {
            zone_bytes,
            capacity,
            popularity,
            flags,
            epoch: Epoch::default(),
            in_epoch: u64_at(48),
            epoch_start_ns: None,
            epochs: u64_at(40),
            last_ns: 0,
        })
    }
}

/// Zones ranked by a count per zone (`counts[z]`): most counted first, ties lower zone first,
/// zones with a count of 0 left out. The one ranking rule of IDO's hot zones
/// ([`ZoneTable::by_popularity`]) and PRO's rebuild order.
pub fn rank_zones(counts: &[u32]) -> Vec<u64> {
    let mut z: Vec<u64> = (0..counts.len() as u64)
        .filter(|&z| counts[z as usize] > 0)
        .collect();
    z.sort_by(|&a, &b| counts[b as usize].cmp(&counts[a as usize]).then(a.cmp(&b)));
    z
}

/// The zones a policy rebuilds before the rest (which follow in address order), the one rule
/// of [`Ido::priority_cycles`] and of an executor that schedules by zones: IDO's `hot` zones
/// (most popular first) still to rebuild; PRO's zones ranked by `pro` (requests seen since the
/// failure, [`rank_zones`]) still to rebuild, at most `pro_batch`; nothing for the others.
/// `to_rebuild(z)` says whether zone `z` still has cycles to rebuild.
pub fn priority_zones(
    policy: RebuildPolicy,
    hot: &[u64],
    pro: &[u32],
    pro_batch: usize,
    to_rebuild: impl Fn(u64) -> bool,
) -> Vec<u64> {
    match policy {
        RebuildPolicy::Ido => hot.iter().copied().filter(|&z| to_rebuild(z)).collect(),
        RebuildPolicy::Pro => rank_zones(pro)
            .into_iter()
            .filter(|&z| to_rebuild(z))
            .take(pro_batch)
            .collect(),
        _ => Vec::new(),
    }
}

const ZT_MAGIC: &[u8; 8] = b"RFIDOZT\0";
const ZT_HEADER: usize = 56;
/// The zone table's frame ([`crate::record`]); not padded (it is nested in the IDO state).
const ZT_FRAME: Frame = Frame {
    magic: ZT_MAGIC,
    version: 1,
    header_bytes: ZT_HEADER,
    max_bytes: ZT_HEADER + MAX_ZONES as usize * 4 + (MAX_ZONES as usize).div_ceil(4) + CRC_BYTES,
    align: 1,
};

/// What a record's decoder says when its frame is refused (no magic, unknown version,
/// inconsistent length, checksum mismatch), for a record called `$name`.
macro_rules! refusals {
    ($name:literal) => {
        [
            concat!("no ", $name, " magic"),
            concat!($name, " of an unknown version"),
            concat!($name, " length is inconsistent"),
            concat!($name, " checksum mismatch"),
        ]
    };
}

/// What the zone table's decoder says when its frame is refused.
const ZT_REFUSALS: [&str; 4] = refusals!("zone table");

/// Opens a record of `frame` at the start of `b`; a refusal is said in the record kind's
/// `words`: no magic, unknown version, inconsistent length, checksum mismatch.
fn open_framed<'a>(
    frame: &Frame,
    b: &'a [u8],
    words: [&'static str; 4],
) -> Result<Record<'a>, IdoError> {
    frame.open(b).map_err(|e| {
        IdoError::BadRecord(match e {
            FrameError::Truncated { .. } | FrameError::NoMagic => words[0],
            FrameError::Version(_) => words[1],
            FrameError::Length(_) | FrameError::Short { .. } => words[2],
            FrameError::Checksum => words[3],
        })
    })
}

/// The frame of a record nested in another (not padded; bounded by the outer one).
const fn nested_frame(magic: &'static [u8; 8], header_bytes: usize) -> Frame {
    Frame {
        magic,
        version: 1,
        header_bytes,
        max_bytes: u32::MAX as usize,
        align: 1,
    }
}

// ---------------------------------------------------------------------------------------------
// D-Map

/// One range of the D-Map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Extent {
    /// Logical (degraded-set) offset.
    pub d_off: u64,
    /// Length in bytes.
    pub len: u64,
    /// Offset on the surrogate set.
    pub s_off: u64,
    /// Newer than the array (a redirected write, reclaimed after the rebuild); clean extents
    /// are copies of array data.
    pub dirty: bool,
}

/// Where a piece of a request is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The array (the degraded set during a rebuild).
    Array,
    /// The surrogate set, at this offset.
    Surrogate {
        /// Offset on the surrogate set.
        s_off: u64,
    },
}

/// A piece of a request: `len` bytes at logical `offset`, served by `source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    /// Logical offset.
    pub offset: u64,
    /// Length.
    pub len: u64,
    /// Where it is served.
    pub source: Source,
}

/// The map of logical ranges held by the surrogate set. Extents never overlap; neighbours
/// contiguous in both spaces with the same dirtiness are merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DMap {
    /// start -> (len, s_off, dirty)
    map: BTreeMap<u64, (u64, u64, bool)>,
    dirty_bytes: u64,
    clean_bytes: u64,
}

impl DMap {
    /// An empty map.
    pub fn new() -> DMap {
        DMap::default()
    }
    /// Number of extents.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// No extents.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Bytes in dirty extents.
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }
    /// Bytes in clean extents.
    pub fn clean_bytes(&self) -> u64 {
        self.clean_bytes
    }
    /// The extents in logical order.
    pub fn extents(&self) -> impl Iterator<Item = Extent> + '_ {
        self.map
            .iter()
            .map(|(&d_off, &(len, s_off, dirty))| Extent {
                d_off,
                len,
                s_off,
                dirty,
            })
    }

    fn account(&mut self, len: u64, dirty: bool, add: bool) {
        let c = if dirty {
            &mut self.dirty_bytes
        } else {
            &mut self.clean_bytes
        };
        if add {
            *c += len
        } else {
            *c -= len
        }
    }

    fn put(&mut self, d: u64, len: u64, s: u64, dirty: bool) {
        debug_assert!(len > 0);
        self.account(len, dirty, true);
        let old = self.map.insert(d, (len, s, dirty));
        debug_assert!(old.is_none());
    }

    fn take(&mut self, d: u64) -> (u64, u64, bool) {
        let e = self.map.remove(&d).expect("extent");
        self.account(e.0, e.2, false);
        e
    }

    /// Unmaps `offset..offset + len` (trimming and splitting extents that overlap it).
    pub fn remove(&mut self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let end = offset + len;
        let first = self
            .map
            .range(..offset)
            .next_back()
            .filter(|(&d, &(l, _, _))| d + l > offset)
            .map(|(&d, _)| d)
            .unwrap_or(offset);
        let hits: Vec<u64> = self.map.range(first..end).map(|(&d, _)| d).collect();
        for d in hits {
            let (l, s, dirty) = self.take(d);
            if d < offset {
                self.put(d, offset - d, s, dirty);
            }
            if d + l > end {
                self.put(end, d + l - end, s + (end - d), dirty);
            }
        }
    }

    /// Maps `offset..offset + len` to the surrogate at `s_off`, replacing whatever mapped any
    /// of it (the newest data wins).
    pub fn insert(&mut self, offset: u64, len: u64, s_off: u64, dirty: bool) {
        if len == 0 {
            return;
        }
        self.remove(offset, len);
        self.put(offset, len, s_off, dirty);
        self.merge_around(offset);
    }

    /// Maps the parts of `offset..offset + len` that nothing maps yet (a copy finishing after
    /// newer writes claimed some of its range). Returns the bytes mapped.
    pub fn insert_under(&mut self, offset: u64, len: u64, s_off: u64, dirty: bool) -> u64 {
        let gaps: Vec<Piece> = self
            .query(offset, len)
            .into_iter()
            .filter(|p| p.source == Source::Array)
            .collect();
        let mut n = 0;
        for g in gaps {
            self.put(g.offset, g.len, s_off + (g.offset - offset), dirty);
            self.merge_around(g.offset);
            n += g.len;
        }
        n
    }

    fn merge_around(&mut self, d: u64) {
        // Merge with the right neighbour, then the left one.
        let Some(&(l, s, dirty)) = self.map.get(&d) else {
            return;
        };
        if let Some(&(l2, s2, dirty2)) = self.map.get(&(d + l)) {
            if s2 == s + l && dirty2 == dirty {
                self.take(d + l);
                self.take(d);
                self.put(d, l + l2, s, dirty);
            }
        }
        let (l, s, dirty) = self.map[&d];
        if let Some((&d0, &(l0, s0, dirty0))) = self.map.range(..d).next_back() {
            if d0 + l0 == d && s0 + l0 == s && dirty0 == dirty {
                self.take(d);
                self.take(d0);
                self.put(d0, l0 + l, s0, dirty);
            }
        }
    }

    /// Cuts `offset..offset + len` into pieces in logical order: mapped parts served by the
    /// surrogate, the rest by the array. Adjacent array pieces are one piece.
    pub fn query(&self, offset: u64, len: u64) -> Vec<Piece> {
        let end = offset + len;
        let mut out = Vec::new();
        let mut at = offset;
        let start = self
            .map
            .range(..offset)
            .next_back()
            .filter(|(&d, &(l, _, _))| d + l > offset)
            .map(|(&d, _)| d)
            .unwrap_or(offset);
        for (&d, &(l, s, _)) in self.map.range(start..end) {
            let from = d.max(offset);
            let to = (d + l).min(end);
            if from > at {
                out.push(Piece {
                    offset: at,
                    len: from - at,
                    source: Source::Array,
                });
            }
            out.push(Piece {
                offset: from,
                len: to - from,
                source: Source::Surrogate {
                    s_off: s + (from - d),
                },
            });
            at = to;
        }
        if at < end {
            out.push(Piece {
                offset: at,
                len: end - at,
                source: Source::Array,
            });
        }
        out
    }

    /// True when `e` is still mapped exactly (its whole range, at its surrogate offset, with its
    /// dirtiness).
    pub fn covers(&self, e: &Extent) -> bool {
        let p = self.query(e.d_off, e.len);
        p.len() == 1
            && p[0].source == Source::Surrogate { s_off: e.s_off }
            && self
                .map
                .range(..=e.d_off)
                .next_back()
                .is_some_and(|(_, &(_, _, dirty))| dirty == e.dirty)
    }

    /// Drops every clean extent (after the rebuild the array holds the same data).
    pub fn drop_clean(&mut self) {
        self.map.retain(|_, e| e.2);
        self.clean_bytes = 0;
    }

    /// The first dirty extent, cut to at most `max_len` bytes.
    pub fn first_dirty(&self, max_len: u64) -> Option<Extent> {
        self.map
            .iter()
            .find(|(_, e)| e.2)
            .map(|(&d_off, &(len, s_off, _))| Extent {
                d_off,
                len: len.min(max_len.max(1)),
                s_off,
                dirty: true,
            })
    }

    /// Bytes [`DMap::encode`] produces.
    pub fn encoded_len(&self) -> usize {
        DM_HEADER + 25 * self.map.len() + 4
    }

    /// The persistent record (little-endian):
    ///
    /// ```text
    /// offset  size  field
    ///      0     8  magic "RFIDODM\0"
    ///      8     4  version (1)
    ///     12     4  encoded length (header + extents + CRC)
    ///     16     8  extent count E
    ///     24  E*25  extents in logical order: d_off u64, len u64, s_off u64, dirty u8 (0/1)
    ///      .     4  CRC-32C of everything before it
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut b = DM_FRAME.begin(self.encoded_len());
        b.extend_from_slice(&(self.map.len() as u64).to_le_bytes());
        for e in self.extents() {
            b.extend_from_slice(&e.d_off.to_le_bytes());
            b.extend_from_slice(&e.len.to_le_bytes());
            b.extend_from_slice(&e.s_off.to_le_bytes());
            b.push(e.dirty as u8);
        }
        DM_FRAME.seal(b)
    }

    /// Decodes a record made by [`DMap::encode`] (trailing bytes are ignored); refuses
    /// damaged records and extents that overlap, are empty or are out of order.
    pub fn decode(b: &[u8]) -> Result<DMap, IdoError> {
        let r = open_framed(&DM_FRAME, b, DM_REFUSALS)?;
        let (b, len) = (r.bytes(), r.len());
        let u64_at = |o| r.u64_at(o);
        let count = u64_at(16);
        if count > (len / 25) as u64 || len != DM_HEADER + 25 * count as usize + 4 {
            return Err(IdoError::BadRecord("D-Map length is inconsistent"));
        }
        let mut m = DMap::new();
        let mut end = 0u64;
        for i in 0..count as usize {
            let at = DM_HEADER + 25 * i;
            let (d, l, s, dirty) = (u64_at(at), u64_at(at + 8), u64_at(at + 16), b[at + 24]);
            if l == 0 || dirty > 1 || (i > 0 && d < end) || d.checked_add(l).is_none() {
                return Err(IdoError::BadRecord("D-Map extents overlap or are invalid"));
            }
            end = d + l;
            m.put(d, l, s, dirty == 1);
        }
        Ok(m)
    }
}

const DM_MAGIC: &[u8; 8] = b"RFIDODM\0";
const DM_HEADER: usize = 24;
/// The D-Map's frame ([`crate::record`]), nested in the IDO state.
const DM_FRAME: Frame = nested_frame(DM_MAGIC, DM_HEADER);
const DM_REFUSALS: [&str; 4] = refusals!("D-Map");

// ---------------------------------------------------------------------------------------------
// The controller

/// Bytes of a [`LogHeader`] in the surrogate's log (one 4 KiB block in front of its write).
pub const LOG_HEADER_BYTES: u64 = 4096;

const LOG_FRAME: Frame = Frame {
    magic: b"RFIDOLOG",
    version: 1,
    header_bytes: 16 + 16 + 8 * 5 + 4,
    max_bytes: LOG_HEADER_BYTES as usize,
    align: LOG_HEADER_BYTES as usize,
};

/// The mapping of one redirected write, written in the [`LOG_HEADER_BYTES`] in front of its
/// data in the surrogate's log, in the same request, by an executor without NVRAM for the
/// D-Map (the engine): so that a redirected write needs one request on the surrogate and
/// none on the array's members, and a restart maps it again by reading the log onward from
/// the pointer of the newest record ([`Ido::replay_redirected`]).
///
/// A chain: the writes after a record carry that record's sequence (`base`) and count up
/// from 0 (`index`), each header at the end of the one before, starting at the record's log
/// pointer. The executor writes a record before a redirected write whenever anything else
/// took log space since the chain's end (a migration, a WorkOut fill), so the chain is
/// never broken by other data; the first header that does not continue it (another base,
/// another index, another position, a data CRC that does not match: a write torn by a
/// crash, never acknowledged) ends it.
///
/// ```text
/// offset  size  field
///      0    16  frame (magic "RFIDOLOG", version 1, length)
///     16    16  array UUID
///     32     8  base: the sequence of the record the chain follows
///     40     8  index in the chain
///     48     8  logical offset        56  8  length
///     64     8  surrogate offset of the data (the header's own + 4096)
///     72     4  CRC-32C of the data
///     76     4  CRC-32C of bytes 0..76; zero padding to 4096
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    /// The array the write belongs to.
    pub uuid: [u8; 16],
    /// The sequence of the record the chain follows.
    pub base: u64,
    /// Position in the chain (0 right after the record).
    pub index: u64,
    /// The write's logical offset.
    pub d_off: u64,
    /// Its length.
    pub len: u64,
    /// Where its data is on the surrogate.
    pub s_off: u64,
    /// CRC-32C of its data.
    pub data_crc: u32,
}

impl LogHeader {
    /// The header's [`LOG_HEADER_BYTES`].
    pub fn encode(&self) -> Vec<u8> {
        let mut b = LOG_FRAME.begin(LOG_HEADER_BYTES as usize);
        b.extend_from_slice(&self.uuid);
        for v in [self.base, self.index, self.d_off, self.len, self.s_off] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.data_crc.to_le_bytes());
        let b = LOG_FRAME.seal(b);
        debug_assert_eq!(b.len() as u64, LOG_HEADER_BYTES);
        b
    }

    /// The header in `b` (at least its first 80 bytes), or `None` if `b` holds none (never
    /// written, torn, or other data).
    pub fn decode(b: &[u8]) -> Option<LogHeader> {
        let r = LOG_FRAME.open(b).ok()?;
        if r.len() != LOG_FRAME.header_bytes + CRC_BYTES {
            return None;
        }
        let b = r.bytes();
        Some(LogHeader {
            uuid: b[16..32].try_into().ok()?,
            base: r.u64_at(32),
            index: r.u64_at(40),
            d_off: r.u64_at(48),
            len: r.u64_at(56),
            s_off: r.u64_at(64),
            data_crc: r.u32_at(72),
        })
    }
}

/// Configuration of an [`Ido`] controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdoConfig {
    /// The policy of the next rebuild.
    pub policy: RebuildPolicy,
    /// Bytes of surrogate space this array may use (redirected writes, migrated zones, copies).
    pub surrogate_bytes: u64,
    /// IDO: share of the normal-state popularity the hot zones must cover.
    pub hot_coverage: f64,
    /// IDO: most bytes of hot zones migrated (the rest of the surrogate space takes writes).
    pub hot_max_bytes: u64,
    /// WorkOut: a read is popular (copied to the surrogate) after this many reads of the same
    /// request during the rebuild.
    pub workout_threshold: u32,
    /// VDF: cache size on the surrogate.
    pub vdf_cache_bytes: u64,
    /// PRO: cycles handed out per [`Ido::priority_cycles`] call.
    pub pro_batch_zones: usize,
    /// Bytes the log keeps in front of each redirected write, for an executor that writes
    /// the write's mapping with its data ([`LogHeader`]: the engine, which has no NVRAM for
    /// the D-Map); 0 for the seed's model, whose D-Map lives in NVRAM. The route's `s_off`
    /// is the data's; the header is the `log_header_bytes` before it.
    pub log_header_bytes: u64,
}

impl IdoConfig {
    /// Defaults for a surrogate of `surrogate_bytes`: hot zones cover 90 % of the popularity
    /// within half the surrogate, WorkOut's threshold 2, VDF's cache half the surrogate.
    pub fn new(policy: RebuildPolicy, surrogate_bytes: u64) -> IdoConfig {
        IdoConfig {
            policy,
            surrogate_bytes,
            hot_coverage: 0.9,
            hot_max_bytes: surrogate_bytes / 2,
            workout_threshold: 2,
            vdf_cache_bytes: surrogate_bytes / 2,
            pro_batch_zones: 1,
            log_header_bytes: 0,
        }
    }
}

/// What the controller is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No rebuild: popularity is counted.
    Normal,
    /// A rebuild runs: requests are distributed.
    Rebuilding,
    /// The rebuild is over; dirty D-Map extents are written back.
    Reclaiming,
}

/// Why a [`CopyJob`] copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyKind {
    /// IDO: migrating a hot zone just rebuilt (the rebuild read its data).
    Migrate {
        /// The zone.
        zone: u64,
    },
    /// WorkOut: a popular read's data (the read returns it).
    Fill,
    /// VDF: blocks of a read miss admitted to the cache (the read returns them).
    Cache,
}

/// A copy to the surrogate the executor must perform: the logical bytes of each target
/// (`d_off..d_off + len`, all inside `offset..offset + len`) are written to the surrogate at
/// the target's `s_off`; the data comes from the array (a migration's rebuild just read it, a
/// fill's or cache admission's user read returns it). Then [`Ido::copy_done`] with `id`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CopyJob {
    /// Identifies the copy in [`Ido::copy_done`].
    pub id: u64,
    /// Logical range copied.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// Where each part goes on the surrogate (`dirty` is false).
    pub targets: Vec<Extent>,
    /// Why.
    pub kind: CopyKind,
}

impl CopyJob {
    /// Bytes written to the surrogate.
    pub fn bytes(&self) -> u64 {
        self.targets.iter().map(|t| t.len).sum()
    }
    /// Whether a read of `len` bytes at `offset` returned the whole range copied (its bytes
    /// can be copied without reading the array again).
    pub fn covered_by(&self, offset: u64, len: u64) -> bool {
        self.offset >= offset && self.offset + self.len <= offset + len
    }
}

/// How one user request is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The pieces, covering the request in logical order.
    pub pieces: Vec<Piece>,
    /// A copy to start once the request's data is at hand (a read fill).
    pub copy: Option<CopyJob>,
}

impl Route {
    /// Every byte served by the surrogate.
    pub fn redirected(&self) -> bool {
        self.pieces
            .iter()
            .all(|p| matches!(p.source, Source::Surrogate { .. }))
    }
    /// Some bytes served by the array.
    pub fn touches_array(&self) -> bool {
        self.pieces.iter().any(|p| p.source == Source::Array)
    }
    fn array(offset: u64, len: u64) -> Route {
        Route {
            pieces: vec![Piece {
                offset,
                len,
                source: Source::Array,
            }],
            copy: None,
        }
    }
}

/// A write-back the executor performs after the rebuild: read `len` bytes at `s_off` of the
/// surrogate, write them to the array at `d_off` (after checking [`Ido::reclaim_valid`] under
/// the range's locks), then call [`Ido::reclaim_done`].
pub type Reclaim = Extent;

/// Counters of the requests distributed during the current (or last) rebuild.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdoStats {
    /// User reads routed.
    pub reads: u64,
    /// User writes routed.
    pub writes: u64,
    /// Reads served entirely by the surrogate.
    pub reads_redirected: u64,
    /// Reads served partly by each.
    pub reads_split: u64,
    /// Writes sent to the surrogate.
    pub writes_redirected: u64,
    /// Writes sent to the array because the surrogate had no room (or failed).
    pub writes_fallback: u64,
    /// Zones migrated.
    pub zones_migrated: u64,
    /// Bytes copied to the surrogate (migrations and fills).
    pub copy_bytes: u64,
    /// Bytes written back by the reclaimer.
    pub reclaimed_bytes: u64,
}

impl IdoStats {
    /// Share (0..=1) of user requests served entirely by the surrogate.
    pub fn redirected_share(&self) -> f64 {
        let n = self.reads + self.writes;
        if n == 0 {
            0.0
        } else {
            (self.reads_redirected + self.writes_redirected) as f64 / n as f64
        }
    }
}

/// VDF's cache: 4 KiB blocks in surrogate slots, two LRU lists, blocks of surviving disks
/// evicted before blocks that would need reconstruction. A block admitted on a miss is
/// *pending* until the copy writing it is done; only ready blocks hit, pending blocks are never
/// evicted, and a slot whose block was invalidated while pending is reused only after its copy.
#[derive(Clone, Debug, Default)]
struct VdfCache {
    slots: u64,
    free: Vec<u64>,
    next_slot: u64,
    /// block -> (stamp, on_failed, slot, pending copy)
    blocks: HashMap<u64, (u64, bool, u64, Option<u64>)>,
    lru_survivor: BTreeMap<u64, u64>,
    lru_failed: BTreeMap<u64, u64>,
    /// Slots freed while their copy was in flight: released by that copy's completion.
    deferred_free: HashMap<u64, Vec<u64>>,
    stamp: u64,
    /// block -> the admission that put it in its slot (a number never reused), so that an
    /// executor reading a slot beside admissions can tell whether the block it read is
    /// still the one there ([`Ido::vdf_cached`]).
    admissions: HashMap<u64, u64>,
    next_admission: u64,
}

impl VdfCache {
    fn new(bytes: u64) -> VdfCache {
        VdfCache {
            slots: bytes / VDF_BLOCK,
            ..VdfCache::default()
        }
    }
    fn ready_slot(&self, block: u64) -> Option<u64> {
        self.blocks
            .get(&block)
            .filter(|e| e.3.is_none())
            .map(|e| e.2)
    }
    fn touch(&mut self, block: u64, on_failed: bool) {
        let Some(&(st, f, slot, pending)) = self.blocks.get(&block) else {
            return;
        };
        self.unlist(st, f);
        self.stamp += 1;
        let st = self.stamp;
        self.list(st, on_failed, block);
        self.blocks.insert(block, (st, on_failed, slot, pending));
    }
    fn list(&mut self, st: u64, f: bool, block: u64) {
        if f {
            self.lru_failed.insert(st, block);
        } else {
            self.lru_survivor.insert(st, block);
        }
    }
    fn unlist(&mut self, st: u64, f: bool) {
        if f {
            self.lru_failed.remove(&st);
        } else {
            self.lru_survivor.remove(&st);
        }
    }
    fn invalidate(&mut self, block: u64) {
        self.admissions.remove(&block);
        if let Some((st, f, slot, pending)) = self.blocks.remove(&block) {
            self.unlist(st, f);
            match pending {
                Some(id) => self.deferred_free.entry(id).or_default().push(slot),
                None => self.free.push(slot),
            }
        }
    }
    fn victim(&self) -> Option<u64> {
        let ready = |(_, b): (&u64, &u64)| {
            self.blocks
                .get(b)
                .is_some_and(|e| e.3.is_none())
                .then_some(*b)
        };
        // Survivors first: their misses are cheap to serve from the degraded set.
        self.lru_survivor
            .iter()
            .find_map(ready)
            .or_else(|| self.lru_failed.iter().find_map(ready))
    }
    /// A slot for `block`, pending on copy `id` (evicting if needed); `None` when there is no
    /// slot to give.
    fn admit(&mut self, block: u64, on_failed: bool, id: u64) -> Option<u64> {
        let slot = if let Some(s) = self.free.pop() {
            s
        } else if self.next_slot < self.slots {
            self.next_slot += 1;
            self.next_slot - 1
        } else {
            let victim = self.victim()?;
            let (st, f, slot, _) = self.blocks.remove(&victim).expect("listed");
            self.admissions.remove(&victim);
            self.unlist(st, f);
            slot
        };
        self.stamp += 1;
        let st = self.stamp;
        self.list(st, on_failed, block);
        self.blocks.insert(block, (st, on_failed, slot, Some(id)));
        self.next_admission += 1;
        self.admissions.insert(block, self.next_admission);
        Some(slot)
    }
    fn copy_done(&mut self, id: u64, blocks: std::ops::Range<u64>, ok: bool) {
        for b in blocks {
            let mine = self.blocks.get(&b).is_some_and(|e| e.3 == Some(id));
            if mine {
                self.blocks.get_mut(&b).expect("cached").3 = None;
                if !ok {
                    // A failed copy leaves nothing cached.
                    self.invalidate(b);
                }
            }
        }
        if let Some(slots) = self.deferred_free.remove(&id) {
            self.free.extend(slots);
        }
    }
    fn cached_blocks(&self) -> usize {
        self.blocks.len()
    }
}

/// Most request keys WorkOut's popularity table holds before it halves and drops zeros.
const WORKOUT_MAX_KEYS: usize = 1 << 20;

/// The IDO controller (and PR, PRO, WorkOut, VDF): see the module docs.
#[derive(Clone, Debug)]
pub struct Ido {
    cfg: IdoConfig,
    zones: ZoneTable,
    phase: Phase,
    /// The policy of the running (or last) rebuild.
    active: RebuildPolicy,
    dmap: DMap,
    /// Append pointer of the surrogate log (redirected writes, migrations, WorkOut copies).
    log_next: u64,
    surrogate_ok: bool,
    /// IDO: hot zones of this rebuild, most popular first.
    hot: Vec<u64>,
    /// PRO: popularity during the rebuild.
    pro: Vec<u32>,
    /// WorkOut: reads per request (offset, len) during the rebuild.
    workout: HashMap<(u64, u64), u32>,
    vdf: VdfCache,
    /// In-flight copies: id -> (copy, spoiled by an array write).
    copies: BTreeMap<u64, (CopyJob, bool)>,
    next_copy: u64,
    /// Cycles of each zone that are clean (to set flags when the last one is rebuilt).
    stats: IdoStats,
}

impl Ido {
    /// A controller over `zones` (a fresh table or one restored from the pool's metadata).
    pub fn new(cfg: IdoConfig, zones: ZoneTable) -> Ido {
        Ido {
            cfg,
            vdf: VdfCache::new(cfg.vdf_cache_bytes),
            zones,
            phase: Phase::Normal,
            active: cfg.policy,
            dmap: DMap::new(),
            log_next: 0,
            surrogate_ok: true,
            hot: Vec::new(),
            pro: Vec::new(),
            workout: HashMap::new(),
            copies: BTreeMap::new(),
            next_copy: 0,
            stats: IdoStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &IdoConfig {
        &self.cfg
    }
    /// Sets the policy of the next rebuild (refused while one runs).
    pub fn set_policy(&mut self, policy: RebuildPolicy) {
        assert_eq!(
            self.phase,
            Phase::Normal,
            "the policy changes between rebuilds"
        );
        self.cfg.policy = policy;
    }
    /// The zone table.
    pub fn zones(&self) -> &ZoneTable {
        &self.zones
    }
    /// The zone table, to fold counts an executor gathered itself ([`ZoneTable::add_counts`],
    /// [`ZoneTable::end_epoch`]) or to set flags it knows from its own records.
    pub fn zones_mut(&mut self) -> &mut ZoneTable {
        &mut self.zones
    }
    /// Whether the surrogate set is in use (see [`Ido::set_surrogate_available`]).
    pub fn surrogate_available(&self) -> bool {
        self.surrogate_ok
    }
    /// Sets the surrogate space (its size as attached) and the shares derived from it
    /// ([`IdoConfig::new`]'s rules), between rebuilds or when a rebuild resumes; space already
    /// allocated stays allocated.
    pub fn set_surrogate_bytes(&mut self, bytes: u64) {
        let keep = self.cfg;
        self.cfg = IdoConfig {
            pro_batch_zones: keep.pro_batch_zones,
            workout_threshold: keep.workout_threshold,
            log_header_bytes: keep.log_header_bytes,
            hot_coverage: keep.hot_coverage,
            ..IdoConfig::new(keep.policy, bytes)
        };
    }
    /// The D-Map.
    pub fn dmap(&self) -> &DMap {
        &self.dmap
    }
    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }
    /// The policy of the running (or last) rebuild.
    pub fn active_policy(&self) -> RebuildPolicy {
        self.active
    }
    /// The hot zones of the running (or last) IDO rebuild, most popular first.
    pub fn hot(&self) -> &[u64] {
        &self.hot
    }
    /// Counters of the running (or last) rebuild.
    pub fn stats(&self) -> IdoStats {
        self.stats
    }
    /// Blocks in VDF's cache (ready or pending).
    pub fn vdf_cached_blocks(&self) -> usize {
        self.vdf.cached_blocks()
    }
    /// For each VDF block of `offset..offset + len`: its slot and the admission that put it
    /// there, if it is cached and ready. An executor that reads cache slots while other
    /// requests admit blocks (and evict others, handing their slots on) takes this with the
    /// route and again after its surrogate reads: if it changed, a slot it read may have
    /// been given to another block meanwhile, and the read is served from the array instead.
    pub fn vdf_cached(&self, offset: u64, len: u64) -> Vec<Option<(u64, u64)>> {
        (offset / VDF_BLOCK..(offset + len).div_ceil(VDF_BLOCK))
            .map(|b| {
                let slot = self.vdf.ready_slot(b)?;
                Some((slot, *self.vdf.admissions.get(&b)?))
            })
            .collect()
    }

    /// Whether the surrogate's log has room for a redirected write of `len` bytes (its
    /// header included), the space the hot zones not yet rebuilt will take left free.
    pub fn redirect_fits(&self, len: u64) -> bool {
        self.log_next + self.cfg.log_header_bytes + len + self.hot_room()
            <= self.cfg.surrogate_bytes
    }

    /// Surrogate bytes allocated so far (the log's append pointer).
    pub fn surrogate_used(&self) -> u64 {
        self.log_next
    }

    /// Never hands out surrogate bytes below `end` again in this rebuild: for an executor
    /// that put back an older state after a record write failed, when the record may have
    /// reached a member all the same (it then maps this space, which must keep its data).
    pub fn reserve_surrogate_to(&mut self, end: u64) {
        assert!(
            end <= self.cfg.surrogate_bytes,
            "reserved past the surrogate's end"
        );
        self.log_next = self.log_next.max(end);
    }

    /// Sets the bytes the log keeps in front of each redirected write
    /// ([`IdoConfig::log_header_bytes`]).
    pub fn set_log_header_bytes(&mut self, bytes: u64) {
        self.cfg.log_header_bytes = bytes;
    }

    /// Maps again a redirected write found in the log at its append pointer (an executor's
    /// recovery of the writes after its newest record, [`LogHeader`]): `len` bytes at logical
    /// `offset`, whose data is at `s_off`, the header's bytes after the pointer. The log's
    /// pointer moves past it, as the write's route did.
    pub fn replay_redirected(&mut self, offset: u64, len: u64, s_off: u64) -> Result<(), IdoError> {
        let header = self.cfg.log_header_bytes;
        if self.phase != Phase::Rebuilding
            || !matches!(self.active, RebuildPolicy::Ido | RebuildPolicy::Workout)
        {
            return Err(IdoError::BadRecord(
                "a redirected write in the log, but no rebuild that redirects writes",
            ));
        }
        if len == 0
            || s_off != self.log_next + header
            || s_off
                .checked_add(len)
                .is_none_or(|e| e > self.cfg.surrogate_bytes)
            || offset
                .checked_add(len)
                .is_none_or(|e| e > self.zones.capacity())
        {
            return Err(IdoError::BadRecord(
                "a redirected write in the log lies outside the log or the array",
            ));
        }
        self.log_next = s_off + len;
        self.dmap.insert(offset, len, s_off, true);
        Ok(())
    }

    /// Normal state: counts a user request (read or write) at the caller's time `now_ns`.
    /// Ignored during a rebuild (the distributor counts what it needs).
    pub fn record(&mut self, offset: u64, len: u64, now_ns: u64) {
        if self.phase == Phase::Normal {
            self.zones.record(offset, len, now_ns);
        }
    }

    /// A failure happened and a rebuild starts with the configured policy: flags are reset, the
    /// hot zones chosen (IDO). Also called again if a rebuild restarts (flags already set are
    /// kept when `resume` is true: a restart in the middle of the rebuild).
    pub fn start_rebuild(&mut self, resume: bool) {
        assert!(
            self.phase != Phase::Reclaiming || resume,
            "a rebuild cannot start while the previous one's writes are reclaimed"
        );
        if !resume || self.phase == Phase::Normal {
            self.zones.clear_flags();
            self.stats = IdoStats::default();
        }
        self.active = self.cfg.policy;
        self.phase = Phase::Rebuilding;
        self.hot = if self.active == RebuildPolicy::Ido && self.surrogate_ok {
            self.zones
                .hot_zones(self.cfg.hot_coverage, self.cfg.hot_max_bytes)
                .into_iter()
                .filter(|&z| self.zones.flag(z) == ZoneFlag::NotRebuilt)
                .collect()
        } else {
            Vec::new()
        };
        self.pro = vec![0; self.zones.zones() as usize];
        self.workout.clear();
        self.vdf = VdfCache::new(self.cfg.vdf_cache_bytes);
    }

    /// Cycles of zone `z` (zones and cycles both cut the logical space in order).
    pub fn zone_cycles(&self, geo: &Geometry, z: u64) -> std::ops::Range<u64> {
        let per = geo.data_per_cycle() * geo.chunk_bytes();
        let (off, len) = self.zones.zone_range(z);
        off / per..(off + len).div_ceil(per).min(geo.cycles())
    }

    /// The cycles to rebuild before the rest (the rest go in cycle order): IDO's hot zones
    /// (most popular first), PRO's most popular not-yet-rebuilt zones by the popularity seen
    /// since the failure; nothing for the other policies. Call before handing out rebuild plans
    /// (e.g. `scheduler.prioritize(ido.priority_cycles(geo, state))`).
    pub fn priority_cycles(&self, geo: &Geometry, state: &ArrayState) -> Vec<u64> {
        if self.phase != Phase::Rebuilding {
            return Vec::new();
        }
        self.priority_zone_list()
            .into_iter()
            .flat_map(|z| self.zone_cycles(geo, z))
            .filter(|&c| !state.is_clean(c))
            .collect()
    }

    /// The zones to rebuild before the rest, as [`Ido::priority_cycles`] picks them (for an
    /// executor that schedules by zone).
    pub fn priority_zone_list(&self) -> Vec<u64> {
        if self.phase != Phase::Rebuilding {
            return Vec::new();
        }
        priority_zones(
            self.active,
            &self.hot,
            &self.pro,
            self.cfg.pro_batch_zones.max(1),
            |z| self.zones.flag(z) == ZoneFlag::NotRebuilt,
        )
    }

    /// Cycle `c` was rebuilt (its writes are durable and `state` says so): sets the flags of
    /// the zones whose cycles are now all clean, and returns the migrations to start (IDO's hot
    /// zones, while the surrogate has room).
    pub fn cycle_rebuilt(&mut self, geo: &Geometry, state: &ArrayState, c: u64) -> Vec<CopyJob> {
        if self.phase != Phase::Rebuilding {
            return Vec::new();
        }
        let per = geo.data_per_cycle() * geo.chunk_bytes();
        let zs = self.zones.zones_of(c * per, per);
        let mut out = Vec::new();
        for z in zs {
            if self.zones.flag(z) == ZoneFlag::NotRebuilt
                && self.zone_cycles(geo, z).all(|c| state.is_clean(c))
            {
                out.extend(self.zone_rebuilt(z));
            }
        }
        out
    }

    /// Zone `z` is completely rebuilt (every cycle's writes durable): flag `10`, and IDO's
    /// migration of it if it is hot and the surrogate has room. For an executor that tracks
    /// rebuilt zones itself; [`Ido::cycle_rebuilt`] calls it.
    pub fn zone_rebuilt(&mut self, z: u64) -> Option<CopyJob> {
        if self.phase != Phase::Rebuilding || self.zones.flag(z) != ZoneFlag::NotRebuilt {
            return None;
        }
        self.zones.set_flag(z, ZoneFlag::Rebuilt);
        if self.active == RebuildPolicy::Ido && self.surrogate_ok && self.hot.contains(&z) {
            let (offset, len) = self.zones.zone_range(z);
            if let Some(s_off) = self.alloc(len) {
                return Some(self.new_copy(offset, len, s_off, CopyKind::Migrate { zone: z }));
            }
        }
        None
    }

    fn alloc(&mut self, len: u64) -> Option<u64> {
        if self.log_next + len > self.cfg.surrogate_bytes {
            return None;
        }
        self.log_next += len;
        Some(self.log_next - len)
    }

    /// The surrogate space IDO's hot zones not yet rebuilt will take when they are migrated.
    /// Redirected writes leave it free: they were free to fill the log before the first hot
    /// zone was rebuilt, and then no hot zone was migrated at all (the rebuild's point under
    /// IDO; 3 runs in 180 of the engine's `ido_in_the_background_with_concurrent_clients`).
    /// The hot zones were chosen within `hot_max_bytes` (half the surrogate by default), so
    /// writes keep the rest.
    fn hot_room(&self) -> u64 {
        self.hot
            .iter()
            .filter(|&&z| self.zones.flag(z) == ZoneFlag::NotRebuilt)
            .map(|&z| self.zones.zone_range(z).1)
            .sum()
    }

    fn new_copy(&mut self, offset: u64, len: u64, s_off: u64, kind: CopyKind) -> CopyJob {
        let targets = vec![Extent {
            d_off: offset,
            len,
            s_off,
            dirty: false,
        }];
        self.register_copy(offset, len, targets, kind)
    }

    fn register_copy(
        &mut self,
        offset: u64,
        len: u64,
        targets: Vec<Extent>,
        kind: CopyKind,
    ) -> CopyJob {
        let c = CopyJob {
            id: self.next_copy,
            offset,
            len,
            targets,
            kind,
        };
        self.next_copy += 1;
        self.copies.insert(c.id, (c.clone(), false));
        c
    }

    /// Copies started and not yet done.
    pub fn copies_in_flight(&self) -> usize {
        self.copies.len()
    }

    /// Whether copy `id` is still worth making: no array write spoiled it, and the rebuild it
    /// was asked for is still under way with a surrogate. An executor that makes a copy some
    /// time after asking for it (the engine, after replying to the read) looks first: after
    /// the rebuild's end its surrogate places may belong to a later rebuild.
    pub fn copy_wanted(&self, id: u64) -> bool {
        self.copies.get(&id).is_some_and(|(_, spoiled)| !spoiled)
            && self.surrogate_ok
            && self.phase == Phase::Rebuilding
    }

    /// A copy finished (`ok`: its surrogate writes are durable). A migration or fill maps the
    /// parts of its range no newer write claimed, unless an array write over the range spoiled
    /// it; a migrated zone gets flag `11`. A cache admission makes its blocks readable.
    pub fn copy_done(&mut self, id: u64, ok: bool) {
        let (c, spoiled) = self
            .copies
            .remove(&id)
            .expect("copy_done of an unknown copy");
        if c.kind == CopyKind::Cache {
            let ok = ok && !spoiled && self.surrogate_ok && self.phase == Phase::Rebuilding;
            self.vdf.copy_done(
                id,
                c.offset / VDF_BLOCK..(c.offset + c.len).div_ceil(VDF_BLOCK),
                ok,
            );
            if ok {
                self.stats.copy_bytes += c.bytes();
            }
            return;
        }
        if !ok || spoiled || !self.surrogate_ok || self.phase != Phase::Rebuilding {
            return;
        }
        self.stats.copy_bytes += c.bytes();
        for t in &c.targets {
            self.dmap.insert_under(t.d_off, t.len, t.s_off, false);
        }
        if let CopyKind::Migrate { zone } = c.kind {
            self.zones.set_flag(zone, ZoneFlag::Migrated);
            self.stats.zones_migrated += 1;
        }
    }

    /// Where a user read goes. `on_failed(chunk)` says whether logical chunk `chunk` needs
    /// reconstruction now (used by VDF; see [`chunk_needs_reconstruction`]). In normal state
    /// the read is counted (as [`Ido::record`] at the latest time it was given) and goes to the
    /// array, so an executor may route every request without calling `record` itself.
    pub fn route_read(
        &mut self,
        offset: u64,
        len: u64,
        chunk_bytes: u64,
        on_failed: &dyn Fn(u64) -> bool,
    ) -> Route {
        if self.phase == Phase::Normal {
            self.zones.record(offset, len, 0);
            return Route::array(offset, len);
        }
        let route = if self.phase == Phase::Reclaiming {
            Route {
                pieces: self.dmap.query(offset, len),
                copy: None,
            }
        } else {
            self.route_read_rebuilding(offset, len, chunk_bytes, on_failed)
        };
        if self.phase == Phase::Rebuilding {
            self.stats.reads += 1;
            if route.redirected() {
                self.stats.reads_redirected += 1;
            } else if !route.touches_array() || route.pieces.len() > 1 {
                self.stats.reads_split += 1;
            }
        }
        route
    }

    fn route_read_rebuilding(
        &mut self,
        offset: u64,
        len: u64,
        chunk_bytes: u64,
        on_failed: &dyn Fn(u64) -> bool,
    ) -> Route {
        let pieces = self.dmap.query(offset, len);
        let mut route = Route { pieces, copy: None };
        match self.active {
            RebuildPolicy::Pr => {}
            RebuildPolicy::Pro => {
                for z in self.zones.zones_of(offset, len) {
                    let p = &mut self.pro[z as usize];
                    *p = p.saturating_add(1);
                }
            }
            RebuildPolicy::Ido => {
                if route.touches_array() {
                    // Not migrated: the seed counts its popularity.
                    for z in self.zones.zones_of(offset, len) {
                        if self.zones.flag(z) != ZoneFlag::Migrated {
                            let p = &mut self.zones.popularity[z as usize];
                            *p = p.saturating_add(1);
                        }
                    }
                }
            }
            RebuildPolicy::Workout => {
                if route.touches_array() && self.surrogate_ok {
                    if self.workout.len() >= WORKOUT_MAX_KEYS {
                        self.workout.retain(|_, n| {
                            *n /= 2;
                            *n > 0
                        });
                    }
                    let n = self.workout.entry((offset, len)).or_insert(0);
                    *n = n.saturating_add(1);
                    if *n >= self.cfg.workout_threshold {
                        if let Some(s_off) = self.alloc(len) {
                            route.copy = Some(self.new_copy(offset, len, s_off, CopyKind::Fill));
                        }
                    }
                }
            }
            RebuildPolicy::Vdf => {
                if self.surrogate_ok {
                    return self.route_read_vdf(offset, len, chunk_bytes, on_failed);
                }
            }
        }
        route
    }

    fn route_read_vdf(
        &mut self,
        offset: u64,
        len: u64,
        chunk_bytes: u64,
        on_failed: &dyn Fn(u64) -> bool,
    ) -> Route {
        let (b0, b1) = (offset / VDF_BLOCK, (offset + len).div_ceil(VDF_BLOCK));
        let hit = (b0..b1).all(|b| self.vdf.ready_slot(b).is_some());
        if hit {
            let mut pieces: Vec<Piece> = Vec::new();
            for b in b0..b1 {
                let f = on_failed(b * VDF_BLOCK / chunk_bytes);
                self.vdf.touch(b, f);
                let s = self.vdf.ready_slot(b).expect("hit") * VDF_BLOCK;
                let from = (b * VDF_BLOCK).max(offset);
                let to = ((b + 1) * VDF_BLOCK).min(offset + len);
                let s_off = s + (from - b * VDF_BLOCK);
                match pieces.last_mut() {
                    Some(Piece {
                        len: l,
                        source: Source::Surrogate { s_off: ps },
                        ..
                    }) if *ps + *l == s_off => *l += to - from,
                    _ => pieces.push(Piece {
                        offset: from,
                        len: to - from,
                        source: Source::Surrogate { s_off },
                    }),
                }
            }
            return Route { pieces, copy: None };
        }
        // A miss: served by the array; the missing blocks are admitted, pending until the
        // copy of their data (whole blocks, read from the array) to their slots is done.
        let id = self.next_copy;
        let cap = self.zones.capacity();
        let mut targets: Vec<Extent> = Vec::new();
        for b in b0..b1 {
            if self.vdf.blocks.contains_key(&b) {
                continue;
            }
            let f = on_failed(b * VDF_BLOCK / chunk_bytes);
            let Some(slot) = self.vdf.admit(b, f, id) else {
                break;
            };
            let from = b * VDF_BLOCK;
            let to = ((b + 1) * VDF_BLOCK).min(cap);
            let s_off = slot * VDF_BLOCK;
            match targets.last_mut() {
                Some(t) if t.d_off + t.len == from && t.s_off + t.len == s_off => {
                    t.len += to - from
                }
                _ => targets.push(Extent {
                    d_off: from,
                    len: to - from,
                    s_off,
                    dirty: false,
                }),
            }
        }
        let mut route = Route::array(offset, len);
        if !targets.is_empty() {
            let (o, e) = (b0 * VDF_BLOCK, (b1 * VDF_BLOCK).min(cap));
            route.copy = Some(self.register_copy(o, e - o, targets, CopyKind::Cache));
        }
        route
    }

    /// Where a user write goes: the surrogate (appended to its log, mapped dirty) for IDO and
    /// WorkOut during a rebuild while it has room; the array otherwise (unmapping the range,
    /// invalidating VDF blocks, spoiling overlapping copies in flight).
    pub fn route_write(&mut self, offset: u64, len: u64) -> Route {
        self.route_write_limited(offset, len, true)
    }

    /// [`Ido::route_write`], with `may_redirect` false when the executor cannot take one
    /// more D-Map entry (its record is full): the write then goes to the array, counted as a
    /// fallback.
    pub fn route_write_limited(&mut self, offset: u64, len: u64, may_redirect: bool) -> Route {
        match self.phase {
            Phase::Normal => {
                self.zones.record(offset, len, 0);
                Route::array(offset, len)
            }
            Phase::Reclaiming => {
                self.write_to_array(offset, len);
                // A write over the last dirty range ends the reclaim.
                self.maybe_normal();
                Route::array(offset, len)
            }
            Phase::Rebuilding => {
                self.stats.writes += 1;
                let redirect = matches!(self.active, RebuildPolicy::Ido | RebuildPolicy::Workout)
                    && self.surrogate_ok
                    && may_redirect;
                if redirect {
                    let header = self.cfg.log_header_bytes;
                    if self.redirect_fits(len) {
                        let at = self.alloc(header + len).expect("the write fits");
                        let s_off = at + header;
                        self.dmap.insert(offset, len, s_off, true);
                        self.stats.writes_redirected += 1;
                        return Route {
                            pieces: vec![Piece {
                                offset,
                                len,
                                source: Source::Surrogate { s_off },
                            }],
                            copy: None,
                        };
                    }
                    self.stats.writes_fallback += 1;
                }
                self.write_to_array(offset, len);
                Route::array(offset, len)
            }
        }
    }

    fn write_to_array(&mut self, offset: u64, len: u64) {
        self.dmap.remove(offset, len);
        self.array_write_done(offset, len);
    }

    /// An array write of `offset..offset + len` that [`Ido::route_write`] sent to the array has
    /// landed, for an executor that runs array writes beside reads (VDF): a copy registered
    /// between the write's routing and its landing may have read the old bytes, so copies
    /// still in flight over the range map nothing, and VDF's blocks of the range are dropped
    /// (an admission may have started and finished in between). The routing itself does the
    /// same. The D-Map's clean extents are not touched: array writes must not run beside
    /// reads while the D-Map holds any (WorkOut's fills, IDO's migrations).
    pub fn array_write_done(&mut self, offset: u64, len: u64) {
        for (c, spoiled) in self.copies.values_mut() {
            if c.offset < offset + len && offset < c.offset + c.len {
                *spoiled = true;
            }
        }
        if self.active == RebuildPolicy::Vdf {
            for b in offset / VDF_BLOCK..(offset + len).div_ceil(VDF_BLOCK) {
                self.vdf.invalidate(b);
            }
        }
    }

    /// The rebuild finished: clean copies are dropped (the array holds the same data), VDF's
    /// cache emptied, and the dirty extents wait for the reclaimer ([`Phase::Reclaiming`], or
    /// [`Phase::Normal`] at once when there are none).
    pub fn finish_rebuild(&mut self) {
        self.dmap.drop_clean();
        self.vdf = VdfCache::new(self.cfg.vdf_cache_bytes);
        for (_, spoiled) in self.copies.values_mut() {
            *spoiled = true;
        }
        self.phase = Phase::Reclaiming;
        self.maybe_normal();
    }

    fn maybe_normal(&mut self) {
        if self.phase == Phase::Reclaiming && self.dmap.is_empty() {
            self.phase = Phase::Normal;
            self.log_next = 0;
            self.zones.clear_flags();
            self.pro.clear();
            self.workout.clear();
        }
    }

    /// The next write-back (at most `max_len` bytes), or `None` when nothing is left (or no
    /// reclaim is due). Returns the same extent until it is done.
    pub fn next_reclaim(&self, max_len: u64) -> Option<Reclaim> {
        (self.phase == Phase::Reclaiming)
            .then(|| self.dmap.first_dirty(max_len))
            .flatten()
    }

    /// Whether `r` still holds the newest data of its range (check under the range's locks just
    /// before writing it to the array).
    pub fn reclaim_valid(&self, r: &Reclaim) -> bool {
        self.dmap.covers(r)
    }

    /// A write-back is durable on the array: unmaps the range if it still maps to `r`
    /// (returns whether it did); the phase returns to [`Phase::Normal`] when the D-Map is empty.
    pub fn reclaim_done(&mut self, r: &Reclaim) -> bool {
        let ok = self.dmap.covers(r);
        if ok {
            self.dmap.remove(r.d_off, r.len);
            self.stats.reclaimed_bytes += r.len;
        }
        self.maybe_normal();
        ok
    }

    /// The surrogate set failed (or returned): new requests and copies stop using it; clean
    /// extents and VDF's cache are dropped (the array has that data). Dirty extents stay mapped:
    /// they are the only copy of their data and the surrogate's own redundancy must serve them
    /// until they are reclaimed.
    pub fn set_surrogate_available(&mut self, ok: bool) {
        self.surrogate_ok = ok;
        if !ok {
            self.dmap.drop_clean();
            self.vdf = VdfCache::new(self.cfg.vdf_cache_bytes);
            for (_, spoiled) in self.copies.values_mut() {
                *spoiled = true;
            }
            for z in 0..self.zones.zones() {
                if self.zones.flag(z) == ZoneFlag::Migrated {
                    self.zones.set_flag(z, ZoneFlag::Rebuilt);
                }
            }
        }
    }

    /// The persistent state (zone table with flags, D-Map, phase, policy, log pointer) as one
    /// record:
    ///
    /// ```text
    /// offset  size  field
    ///      0     8  magic "RFIDOST\0"
    ///      8     4  version (1)       12  4  encoded length (all of it, CRC included)
    ///     16     1  phase (0 normal, 1 rebuilding, 2 reclaiming)
    ///     17     1  active policy (0 pr, 1 pro, 2 workout, 3 vdf, 4 ido)
    ///     18     6  zero
    ///     24     8  surrogate log append pointer
    ///     32     4  hot zone count H, then H x u64 hot zones
    ///      .        zone table record ([`ZoneTable::encode`])
    ///      .        D-Map record ([`DMap::encode`])
    ///      .     4  CRC-32C of everything before it
    /// ```
    pub fn encode_state(&self) -> Vec<u8> {
        let zt = self.zones.encode();
        let dm = self.dmap.encode();
        let len = ST_HEADER + 8 * self.hot.len() + zt.len() + dm.len() + 4;
        let mut b = ST_FRAME.begin(len);
        b.push(match self.phase {
            Phase::Normal => 0,
            Phase::Rebuilding => 1,
            Phase::Reclaiming => 2,
        });
        b.push(
            RebuildPolicy::ALL
                .iter()
                .position(|&p| p == self.active)
                .unwrap() as u8,
        );
        b.extend_from_slice(&[0u8; 6]);
        b.extend_from_slice(&self.log_next.to_le_bytes());
        b.extend_from_slice(&(self.hot.len() as u32).to_le_bytes());
        for z in &self.hot {
            b.extend_from_slice(&z.to_le_bytes());
        }
        b.extend_from_slice(&zt);
        b.extend_from_slice(&dm);
        debug_assert_eq!(b.len() + CRC_BYTES, len);
        ST_FRAME.seal(b)
    }

    /// Restores a controller from [`Ido::encode_state`]'s record; `zones_like` is a table for
    /// the array as it is (zone size and capacity must match the record's). In-flight copies are
    /// forgotten (they never mapped anything); a rebuild in progress continues with
    /// [`Ido::start_rebuild`]`(true)`.
    pub fn decode_state(cfg: IdoConfig, zones_like: &ZoneTable, b: &[u8]) -> Result<Ido, IdoError> {
        let r = open_framed(&ST_FRAME, b, ST_REFUSALS)?;
        let (b, len) = (r.bytes(), r.len());
        let (u32_at, u64_at) = (|o| r.u32_at(o), |o| r.u64_at(o));
        if b[18..24].iter().any(|&x| x != 0) {
            return Err(IdoError::BadRecord(
                "non-zero reserved bytes in the IDO state",
            ));
        }
        let phase = match b[16] {
            0 => Phase::Normal,
            1 => Phase::Rebuilding,
            2 => Phase::Reclaiming,
            _ => return Err(IdoError::BadRecord("unknown IDO phase")),
        };
        let active = *RebuildPolicy::ALL
            .get(b[17] as usize)
            .ok_or(IdoError::BadRecord("unknown rebuild policy"))?;
        let hot_n = u32_at(32) as usize;
        let mut at = ST_HEADER;
        if hot_n > (len - at) / 8 {
            return Err(IdoError::BadRecord("IDO state hot list is too long"));
        }
        let hot: Vec<u64> = (0..hot_n).map(|i| u64_at(at + 8 * i)).collect();
        at += 8 * hot_n;
        let zones = ZoneTable::decode(&b[at..len - 4])?;
        at += zones.encoded_len();
        let dmap = DMap::decode(&b[at..len - 4])?;
        at += dmap.encoded_len();
        if at != len - 4 {
            return Err(IdoError::BadRecord("IDO state length is inconsistent"));
        }
        if zones.zone_bytes != zones_like.zone_bytes || zones.capacity != zones_like.capacity {
            return Err(IdoError::Mismatch {
                found_zone: zones.zone_bytes,
                found_capacity: zones.capacity,
                zone_bytes: zones_like.zone_bytes,
                capacity: zones_like.capacity,
            });
        }
        if hot.iter().any(|&z| z >= zones.zones())
            || dmap
                .extents()
                .last()
                .is_some_and(|e| e.d_off + e.len > zones.capacity)
        {
            return Err(IdoError::BadRecord(
                "IDO state names zones or ranges past the array",
            ));
        }
        let zones = zones.with_epoch(zones_like.epoch);
        let mut ido = Ido::new(cfg, zones);
        ido.phase = phase;
        ido.active = active;
        if phase != Phase::Normal {
            // A rebuild (or its reclaim) under way resumes with its own policy.
            ido.cfg.policy = active;
        }
        ido.log_next = u64_at(24);
        ido.hot = hot;
        ido.dmap = dmap;
        ido.pro = vec![0; ido.zones.zones() as usize];
        Ok(ido)
    }
}

const ST_MAGIC: &[u8; 8] = b"RFIDOST\0";
/// Bytes of the IDO state before its hot zones.
const ST_HEADER: usize = 36;
/// The IDO state's frame ([`crate::record`]), nested in the engine's record.
const ST_FRAME: Frame = nested_frame(ST_MAGIC, ST_HEADER);
const ST_REFUSALS: [&str; 4] = refusals!("IDO state");

/// Whether logical chunk `chunk` of the array must be reconstructed to be read now (its data
/// unit is on a member that is failed or not yet rebuilt for the chunk's cycle).
pub fn chunk_needs_reconstruction(geo: &Geometry, state: &ArrayState, chunk: u64) -> bool {
    let (c, idx) = geo.locate_chunk(chunk);
    if c >= geo.cycles() {
        return false;
    }
    let loc = state.layout_of(c).data[idx];
    !state.member_available(loc.disk, state.cycle_generation(c))
}

/// A queue of cycles for a rebuild order given as data: hands out each cycle once.
#[derive(Clone, Debug, Default)]
pub struct CycleQueue {
    q: VecDeque<u64>,
}

impl CycleQueue {
    /// Replaces the queue.
    pub fn set(&mut self, cycles: impl IntoIterator<Item = u64>) {
        self.q = cycles.into_iter().collect();
    }
    /// The next cycle `usable` accepts (others are dropped).
    pub fn pop(&mut self, mut usable: impl FnMut(u64) -> bool) -> Option<u64> {
        while let Some(c) = self.q.pop_front() {
            if usable(c) {
                return Some(c);
            }
        }
        None
    }
}

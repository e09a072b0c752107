//! # layout: where every chunk of a raidforge array lives
//!
//! A *layout* answers one question for the rest of raidforge: given a logical chunk of the array,
//! which member disk holds it, at which offset, and which other units share its stripe. The engine,
//! the simulator and the reproduction suite all ask the same code, so this crate is pure: no I/O,
//! no clock, no hidden randomness (random placement takes its seed as a parameter).
//!
//! ## Concepts
//!
//! - A **unit** is one chunk on one member disk: `(disk, offset)` plus its [`Role`] (data, P, Q or
//!   mirror copy). Offsets are counted in chunks.
//! - A **stripe** is a redundancy group: units whose contents are tied together by a [`Code`]
//!   (nothing, mirroring, XOR parity, or RAID6 P+Q). Units are listed data first, then parity.
//! - A **cycle** is the smallest piece of the layout that repeats: a list of stripes occupying
//!   `rows` chunks on every disk. One RAID5 parity rotation, one RAID+ template, one RAIDH parity
//!   cycle, the K partitions of S2-RAID. Cycle `c` occupies offsets `c * rows .. (c + 1) * rows` on
//!   every disk (the repetition is interleaved; see ARCHITECTURE.md).
//! - A [`Scheme`] is a placement scheme with its parameters: it builds its healthy [`Cycle`], says
//!   how many failures it tolerates, and where each unit of a failed disk is rebuilt to
//!   ([`Scheme::relocate`]): a spare disk, reserved recovery space (RAID+ interim layout), spare
//!   partitions (S2-RAID) or, when there is nowhere else, the replacement disk itself.
//! - [`recovery_plan`] is generic: from the stripes' codes it derives which surviving units each
//!   lost unit is rebuilt from (one copy for mirrors, all others for XOR, any `k` for P+Q, and
//!   peeling across XOR groups that share data units, which is how RM2 recovers two failures).
//! - [`check`] measures a scheme's properties (distinct disks per stripe, data and parity share
//!   per disk, rebuild reads and writes per disk and their coefficient of variation).
//!
//! [`Layout`] wraps a scheme with a chunk size and maps logical chunk numbers of the whole array
//! with cycles packed back to back (stride = `rows`). It is the layout-level view the layout tests
//! use (MD's formulas, bijectivity). The engine and the simulator address members through
//! `raidcore::Geometry`, whose stride may exceed `rows` to leave room for rebuilt units; within a
//! cycle both use the same [`Cycle`].

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

mod check;
mod classic;
pub mod fxhash;
pub mod gf;
pub mod md;
mod params;
mod raidh;
mod raidplus;
mod random;
mod rm2;
mod s2raid;
mod substripe;

pub use check::{check, cov, CheckReport, WindowStats};
pub use classic::{Classic, ClassicKind, Grouped, GroupedKind};
pub use params::{build, from_text, to_text, Order, Params, SchemeKind};
pub use raidh::RaidH;
pub use raidplus::{RaidPlus, RaidPlusPool, Template, VolumeSpec};
pub use random::{HashPlacement, RandomPlacement, SplitMix64};
pub use rm2::Rm2;
pub use s2raid::{S2Raid, S2Subarray};
pub use substripe::Substriped;

/// Index of a member disk, `0..disks`.
pub type Disk = u32;

/// What a unit holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// User data.
    Data,
    /// First parity (XOR of the stripe's data), or an RM2 group parity.
    P,
    /// Second parity (Reed-Solomon syndrome over GF(2^8), as Linux MD's RAID6).
    Q,
    /// A mirror copy of the stripe's first (data) unit.
    Mirror,
}

impl Role {
    /// Name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Data => "data",
            Role::P => "p",
            Role::Q => "q",
            Role::Mirror => "mirror",
        }
    }

    /// True for units that hold redundancy rather than user data.
    pub fn is_redundancy(self) -> bool {
        !matches!(self, Role::Data)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A place on a member: disk and offset in chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc {
    pub disk: Disk,
    pub offset: u64,
}

/// One unit of a stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Unit {
    pub disk: Disk,
    pub offset: u64,
    pub role: Role,
}

impl Unit {
    pub fn loc(&self) -> Loc {
        Loc {
            disk: self.disk,
            offset: self.offset,
        }
    }
}

/// How the units of a stripe protect each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// No redundancy (RAID0).
    None,
    /// Every unit is a copy of the first (RAID1, RAID10, S2-RAID10).
    Mirror,
    /// The XOR of all units is zero: data units plus one P (RAID4/5, RM2 parity groups).
    Xor,
    /// Data units plus P and Q over GF(2^8) (Linux MD RAID6); any two units may be lost.
    PQ,
}

impl Code {
    /// How many lost units of one stripe this code can recover on its own.
    pub fn tolerance(self, width: usize) -> usize {
        match self {
            Code::None => 0,
            Code::Mirror => width.saturating_sub(1),
            Code::Xor => 1,
            Code::PQ => 2,
        }
    }
}

/// A redundancy group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stripe {
    /// Data units first (in logical order), then P, then Q (or the mirror copies).
    pub units: Vec<Unit>,
    pub code: Code,
}

impl Stripe {
    pub fn data_units(&self) -> impl Iterator<Item = &Unit> + '_ {
        self.units.iter().filter(|u| u.role == Role::Data)
    }
    /// Number of units a reader needs to reconstruct any unit of this stripe.
    pub fn units_needed(&self) -> usize {
        match self.code {
            Code::None | Code::Mirror => 1,
            Code::Xor => self.units.len() - 1,
            Code::PQ => self.units.len() - 2,
        }
    }
}

/// The repeating piece of a layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    /// Number of member disks, spares included.
    pub disks: usize,
    /// Chunks per disk that one cycle occupies (including reserved recovery space).
    pub rows: u64,
    /// Stripes in logical order.
    pub stripes: Vec<Stripe>,
    /// Data units in logical order. For ordinary layouts this is every stripe's data units in
    /// stripe order; RM2 lists each data unit once although it belongs to two groups.
    pub data: Vec<Loc>,
    /// The stripes on each disk, built on first use ([`Cycle::stripes_on`]).
    on_disk: DiskIndex,
}

/// A cycle's stripes per disk, built when first asked for. Not part of the cycle's value:
/// clones start without it and comparisons ignore it.
#[derive(Default)]
struct DiskIndex(std::sync::OnceLock<Vec<Vec<u32>>>);

impl Clone for DiskIndex {
    fn clone(&self) -> DiskIndex {
        DiskIndex::default()
    }
}

impl fmt::Debug for DiskIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DiskIndex")
    }
}

impl PartialEq for DiskIndex {
    fn eq(&self, _: &DiskIndex) -> bool {
        true
    }
}

impl Eq for DiskIndex {}

impl Cycle {
    /// Builds a cycle with its own logical data order (`data`: each data place once).
    pub fn with_data(disks: usize, rows: u64, stripes: Vec<Stripe>, data: Vec<Loc>) -> Cycle {
        Cycle {
            disks,
            rows,
            stripes,
            data,
            on_disk: DiskIndex::default(),
        }
    }

    /// Builds a cycle whose logical data order is the stripes' data units in order.
    pub fn from_stripes(disks: usize, rows: u64, stripes: Vec<Stripe>) -> Cycle {
        let data = stripes
            .iter()
            .flat_map(|s| s.data_units().map(Unit::loc))
            .collect();
        let c = Cycle {
            disks,
            rows,
            stripes,
            data,
            on_disk: DiskIndex::default(),
        };
        c.assert_well_formed();
        c
    }

    /// Asserts the structural invariants every scheme must keep: units inside the cycle's
    /// bounds, no place used by two different units (except a data unit shared by several XOR
    /// groups, as in RM2), and every data place listed once in `data`.
    pub fn assert_well_formed(&self) {
        // Who owns each place: a flat table over disks x rows when it is not much larger than
        // the cycle (every layout here fills most of its rows), a map otherwise. (A map of
        // every unit was 40 % of opening a 251-disk RAID+ array.)
        let cells = self.disks as u64 * self.rows;
        let units: u64 = self.stripes.iter().map(|s| s.units.len() as u64).sum();
        let flat = cells <= (4 * units).max(1 << 20);
        let mut table: Vec<Option<Role>> = vec![None; if flat { cells as usize } else { 0 }];
        let mut map: fxhash::FxHashMap<Loc, Role> = Default::default();
        let mut data_places = 0usize;
        for (si, s) in self.stripes.iter().enumerate() {
            assert!(!s.units.is_empty(), "stripe {si} has no units");
            for u in &s.units {
                assert!(
                    (u.disk as usize) < self.disks,
                    "stripe {si}: disk {} out of range",
                    u.disk
                );
                assert!(
                    u.offset < self.rows,
                    "stripe {si}: offset {} beyond rows {}",
                    u.offset,
                    self.rows
                );
                let prev = if flat {
                    let slot = &mut table[(u.disk as u64 * self.rows + u.offset) as usize];
                    slot.replace(u.role)
                } else {
                    map.insert(u.loc(), u.role)
                };
                match prev {
                    Some(prev) => assert!(
                        prev == Role::Data && u.role == Role::Data && s.code == Code::Xor,
                        "stripe {si}: place {:?} used twice",
                        u.loc()
                    ),
                    None => data_places += usize::from(u.role == Role::Data),
                }
            }
        }
        assert_eq!(
            data_places,
            self.data.len(),
            "data list must name every data place once"
        );
    }

    /// The stripes with a unit on `disk`, ascending (an index built on the first call, one
    /// pass over the units): what a relocation or a recovery after failures looks at, without
    /// a pass over every stripe per failure set (an array over 255 disks asks for hundreds).
    pub fn stripes_on(&self, disk: Disk) -> &[u32] {
        let index = self.on_disk.0.get_or_init(|| {
            let mut index: Vec<Vec<u32>> = vec![Vec::new(); self.disks];
            for (si, s) in self.stripes.iter().enumerate() {
                for u in &s.units {
                    if let Some(list) = index.get_mut(u.disk as usize) {
                        if list.last() != Some(&(si as u32)) {
                            list.push(si as u32);
                        }
                    }
                }
            }
            index
        });
        index.get(disk as usize).map_or(&[], Vec::as_slice)
    }

    /// The stripes with a unit on any of `disks`, ascending, each once.
    pub fn stripes_on_any(&self, disks: &[Disk]) -> Vec<usize> {
        let mut out: Vec<usize> = disks
            .iter()
            .flat_map(|&d| self.stripes_on(d).iter().map(|&s| s as usize))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Number of data chunks per cycle.
    pub fn data_chunks(&self) -> u64 {
        self.data.len() as u64
    }

    /// Every distinct unit of the cycle with its role (shared RM2 data units once).
    pub fn places(&self) -> HashMap<Loc, Role> {
        let mut m = HashMap::new();
        for s in &self.stripes {
            for u in &s.units {
                m.insert(u.loc(), u.role);
            }
        }
        m
    }

    /// Applies a relocation: every unit whose place is moved gets its new place.
    /// Rows of a cycle of `rows` rows after `moves` ([`Cycle::relocated`]): rebuilt units may
    /// land in spare space past the data rows (random and hash placement).
    pub fn relocated_rows(rows: u64, moves: &Relocation) -> u64 {
        moves.values().map(|l| l.offset + 1).fold(rows, u64::max)
    }

    pub fn relocated(&self, moves: &Relocation) -> Cycle {
        // Only units on a disk some move starts from can move: skip the look-up for the others
        // (most of a wide cycle; this runs for every failure set a geometry considers).
        let mut from_disk = vec![false; self.disks];
        for l in moves.keys() {
            if let Some(f) = from_disk.get_mut(l.disk as usize) {
                *f = true;
            }
        }
        let mv = |l: Loc| {
            if from_disk.get(l.disk as usize).is_some_and(|&f| f) {
                *moves.get(&l).unwrap_or(&l)
            } else {
                l
            }
        };
        let stripes = self
            .stripes
            .iter()
            .map(|s| Stripe {
                code: s.code,
                units: s
                    .units
                    .iter()
                    .map(|u| {
                        let l = mv(u.loc());
                        Unit {
                            disk: l.disk,
                            offset: l.offset,
                            role: u.role,
                        }
                    })
                    .collect(),
            })
            .collect();
        let rows = Cycle::relocated_rows(self.rows, moves);
        Cycle {
            disks: self.disks,
            rows,
            stripes,
            data: self.data.iter().map(|l| mv(*l)).collect(),
            on_disk: DiskIndex::default(),
        }
    }
}

/// Errors from building or querying a layout. Each names the constraint that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// A parameter is missing, out of range or violates the construction's constraint.
    #[error("invalid parameter --{param}: {reason}")]
    InvalidParam { param: &'static str, reason: String },
    /// More disks failed than the scheme tolerates.
    #[error("{failed} failed disks but {scheme} tolerates at most {tolerated}")]
    TooManyFailures {
        scheme: String,
        failed: usize,
        tolerated: usize,
    },
    /// A failed disk index is not a member of the array, or was named twice.
    #[error("--failed: {0}")]
    BadFailure(String),
    /// The failure pattern loses data (e.g. both copies of a mirror).
    #[error("data lost: {0}")]
    Unrecoverable(String),
    /// Not enough spare room to rebuild into.
    #[error("no room to rebuild: {0}")]
    NoSpareSpace(String),
}

impl LayoutError {
    pub(crate) fn param(param: &'static str, reason: impl Into<String>) -> LayoutError {
        LayoutError::InvalidParam {
            param,
            reason: reason.into(),
        }
    }
}

/// Where lost units go: map from a lost place to its rebuild destination. Fx-hashed:
/// geometries relocate hundreds of failure sets of wide cycles, and SipHash was a tenth of
/// opening a 255-member level-6 declustered pool.
pub type Relocation = fxhash::FxHashMap<Loc, Loc>;

/// A placement scheme with its parameters.
pub trait Scheme: Send + Sync + fmt::Debug {
    /// Scheme name as used on the command line (`raid5`, `raidplus`, ...).
    fn name(&self) -> &'static str;
    /// The healthy layout's repeating cycle.
    fn cycle(&self) -> &Cycle;
    /// Number of arbitrary whole-disk failures the scheme survives.
    fn tolerance(&self) -> usize;
    /// Disks that hold no data in the healthy layout (dedicated spares).
    fn spare_disks(&self) -> Vec<Disk> {
        Vec::new()
    }
    /// Where each unit on the failed disks (in failure order) is rebuilt to. The default puts
    /// the i-th failed disk's units on the i-th spare disk at the same offset, or in place on a
    /// replacement disk when there are not enough spares.
    fn relocate(&self, failed: &[Disk]) -> Result<Relocation, LayoutError> {
        default_relocate(self.cycle(), &self.spare_disks(), failed)
    }
    /// Whether every relocation keeps each unit's offset (the default [`Scheme::relocate`]:
    /// onto a spare disk or in place), so that a rebuilt cycle has the healthy cycle's rows
    /// whatever fails. A scheme that overrides `relocate` says so only if its moves keep
    /// offsets too.
    fn relocation_keeps_offsets(&self) -> bool {
        false
    }
    /// [`recovery_rows`] for `failed` when the scheme knows it without relocating every unit
    /// (a large enclosure asks it of every member when an array is opened); `None` to have it
    /// computed. When `Some`, it must be exactly what the computation gives, and the failures
    /// must be ones the scheme survives.
    fn recovery_rows_hint(&self, _failed: &[Disk]) -> Option<u64> {
        None
    }
    /// Extra data for JSON output (S2-RAID sub-arrays), as a JSON fragment `"key": value`
    /// without braces, or `None`.
    fn extra_json(&self) -> Option<String> {
        None
    }
    /// Extra measured properties for `layout check` (S2-RAID's sub-array overlap), as a JSON
    /// fragment `"key": value` without braces, or `None`.
    fn check_extra_json(&self) -> Option<String> {
        None
    }
    /// One line describing the parameters, for tables.
    fn describe(&self) -> String {
        format!("{} over {} disks", self.name(), self.cycle().disks)
    }
}

/// Spare-disk relocation shared by the classic schemes.
pub fn default_relocate(
    cycle: &Cycle,
    spares: &[Disk],
    failed: &[Disk],
) -> Result<Relocation, LayoutError> {
    let mut moves = Relocation::default();
    let mut spare_iter = spares.iter().filter(|d| !failed.contains(d));
    for &f in failed {
        if spares.contains(&f) {
            continue; // a failed spare holds nothing
        }
        let target = spare_iter.next().copied().unwrap_or(f);
        for s in &cycle.stripes {
            for u in &s.units {
                if u.disk == f {
                    moves.insert(
                        u.loc(),
                        Loc {
                            disk: target,
                            offset: u.offset,
                        },
                    );
                }
            }
        }
    }
    Ok(moves)
}

/// Validates a failure list against a scheme: indices in range, no repeats, not more than the
/// scheme tolerates.
pub fn validate_failures(scheme: &dyn Scheme, failed: &[Disk]) -> Result<(), LayoutError> {
    let disks = scheme.cycle().disks;
    for (i, &f) in failed.iter().enumerate() {
        if f as usize >= disks {
            return Err(LayoutError::BadFailure(format!(
                "disk {f} does not exist (the array has disks 0..{})",
                disks - 1
            )));
        }
        if failed[..i].contains(&f) {
            return Err(LayoutError::BadFailure(format!("disk {f} named twice")));
        }
    }
    let spares = scheme.spare_disks();
    let data_failures = failed.iter().filter(|f| !spares.contains(f)).count();
    if data_failures > scheme.tolerance() {
        return Err(LayoutError::TooManyFailures {
            scheme: scheme.name().to_string(),
            failed: data_failures,
            tolerated: scheme.tolerance(),
        });
    }
    Ok(())
}

/// Where a rebuild reads one source unit from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A surviving unit, read from its disk.
    Disk(Loc),
    /// A unit rebuilt earlier in the same plan (held in memory, written to this place).
    Rebuilt(Loc),
}

/// How one lost unit is rebuilt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// Stripe (index in the cycle) whose code is used.
    pub stripe: usize,
    /// The lost unit (its healthy place and role).
    pub lost: Unit,
    /// Where it is written.
    pub target: Loc,
    /// What is read to compute it.
    pub sources: Vec<Source>,
}

/// The rebuild of one cycle after a set of failures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryPlan {
    pub failed: Vec<Disk>,
    /// Repairs in an order that can be executed front to back.
    pub repairs: Vec<Repair>,
    /// The layout after the rebuild (interim layout for RAID+).
    pub rebuilt: Cycle,
}

/// Derives the rebuild of one cycle of `scheme` after the disks in `failed` (in failure order)
/// are lost. Sources are chosen per stripe code; XOR groups that share data units (RM2) are
/// solved by peeling. Fails if the failures lose data.
pub fn recovery_plan(scheme: &dyn Scheme, failed: &[Disk]) -> Result<RecoveryPlan, LayoutError> {
    let (moves, repairs) = peel(scheme, failed, true)?;
    let rebuilt = scheme.cycle().relocated(&moves);
    Ok(RecoveryPlan {
        failed: failed.to_vec(),
        repairs,
        rebuilt,
    })
}

/// `recovery_plan(scheme, failed).map(|p| p.rebuilt.rows)` without building the repairs and
/// the rebuilt cycle: the rows a cycle needs after these failures (what an array sizing its
/// cycles asks for every failure set it must absorb).
pub fn recovery_rows(scheme: &dyn Scheme, failed: &[Disk]) -> Result<u64, LayoutError> {
    if let Some(rows) = scheme.recovery_rows_hint(failed) {
        return Ok(rows);
    }
    let (moves, _) = peel(scheme, failed, false)?;
    Ok(Cycle::relocated_rows(scheme.cycle().rows, &moves))
}

/// The peeling behind [`recovery_plan`]: the relocation and, if `want_repairs`, the repairs;
/// an error if the failures lose data (the same with or without repairs).
fn peel(
    scheme: &dyn Scheme,
    failed: &[Disk],
    want_repairs: bool,
) -> Result<(Relocation, Vec<Repair>), LayoutError> {
    validate_failures(scheme, failed)?;
    let cycle = scheme.cycle();
    let moves = scheme.relocate(failed)?;
    let is_lost = |l: &Loc| failed.contains(&l.disk);
    // Every lost place must have a destination that is not itself on a failed disk... unless the
    // destination is the replacement of the same disk (in-place rebuild).
    for (from, to) in &moves {
        assert!(
            !failed.contains(&to.disk) || to.disk == from.disk,
            "relocation of {from:?} to a failed disk {to:?}"
        );
    }
    let target_of = |l: &Loc| *moves.get(l).unwrap_or(l);

    // What is known so far: every unit off the failed disks (read from its disk), and the lost
    // units rebuilt by earlier repairs. Only the latter need a table (a table of every unit
    // showed in profiles: a RAID+ cycle over 59 disks has 24,000, a few hundred of them lost).
    let mut rebuilt: fxhash::FxHashMap<Loc, Source> = fxhash::FxHashMap::default();
    let known = |rebuilt: &fxhash::FxHashMap<Loc, Source>, l: &Loc| {
        if is_lost(l) {
            rebuilt.get(l).copied()
        } else {
            Some(Source::Disk(*l))
        }
    };
    let mut pending: Vec<usize> = cycle.stripes_on_any(failed);
    let mut repairs = Vec::new();
    // Peeling: repeat until no stripe makes progress. Each round repairs every stripe whose
    // lost units are within its code's reach given what is known so far.
    loop {
        let mut progressed = false;
        let mut still = Vec::new();
        for &si in &pending {
            let s = &cycle.stripes[si];
            let unknown: Vec<&Unit> = s
                .units
                .iter()
                .filter(|u| known(&rebuilt, &u.loc()).is_none())
                .collect();
            if unknown.is_empty() {
                continue;
            }
            if unknown.len() > s.code.tolerance(s.units.len()) {
                still.push(si);
                continue;
            }
            let avail: Vec<Source> = s
                .units
                .iter()
                .filter_map(|u| known(&rebuilt, &u.loc()))
                .collect();
            let need = s.units_needed();
            if avail.len() < need {
                still.push(si);
                continue;
            }
            if want_repairs {
                for (j, u) in unknown.iter().enumerate() {
                    let sources = match s.code {
                        // Spread mirror reads over the surviving copies.
                        Code::Mirror => vec![avail[(u.offset as usize + j) % avail.len()]],
                        _ => avail[..need].to_vec(),
                    };
                    let target = target_of(&u.loc());
                    repairs.push(Repair {
                        stripe: si,
                        lost: **u,
                        target,
                        sources,
                    });
                }
            }
            for u in unknown {
                rebuilt.insert(u.loc(), Source::Rebuilt(target_of(&u.loc())));
            }
            progressed = true;
        }
        pending = still;
        if pending.is_empty() || !progressed {
            break;
        }
    }
    if let Some(&si) = pending.first() {
        return Err(LayoutError::Unrecoverable(format!(
            "stripe {si} of the cycle cannot be rebuilt after failing disks {failed:?}"
        )));
    }
    Ok((moves, repairs))
}

/// Where a logical chunk lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkLocation {
    /// Cycle number (0-based).
    pub cycle: u64,
    /// Index of the chunk's (first) stripe within the cycle.
    pub stripe: usize,
    /// Absolute place on the member.
    pub loc: Loc,
}

/// A scheme with a chunk size: maps logical chunks of the whole array to members.
#[derive(Clone, Debug)]
pub struct Layout {
    scheme: Arc<dyn Scheme>,
    chunk_bytes: u64,
    /// For each data place of the cycle, the first stripe containing it.
    stripe_of: HashMap<Loc, usize>,
}

impl Layout {
    pub fn new(scheme: Arc<dyn Scheme>, chunk_bytes: u64) -> Result<Layout, LayoutError> {
        if chunk_bytes == 0 || chunk_bytes % 512 != 0 {
            return Err(LayoutError::param(
                "chunk",
                format!("chunk size {chunk_bytes} must be a positive multiple of 512 bytes"),
            ));
        }
        let mut stripe_of = HashMap::new();
        for (si, s) in scheme.cycle().stripes.iter().enumerate() {
            for u in s.data_units() {
                stripe_of.entry(u.loc()).or_insert(si);
            }
        }
        Ok(Layout {
            scheme,
            chunk_bytes,
            stripe_of,
        })
    }
    pub fn scheme(&self) -> &dyn Scheme {
        &*self.scheme
    }
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }
    pub fn disks(&self) -> usize {
        self.scheme.cycle().disks
    }
    /// Data chunks the array holds when every member has `member_chunks` chunks of space.
    /// Only whole cycles are used.
    pub fn capacity_chunks(&self, member_chunks: u64) -> u64 {
        let c = self.scheme.cycle();
        (member_chunks / c.rows) * c.data_chunks()
    }
    /// Where logical data chunk `chunk` lives.
    pub fn locate(&self, chunk: u64) -> ChunkLocation {
        let c = self.scheme.cycle();
        let per = c.data_chunks();
        let cycle = chunk / per;
        let l = c.data[(chunk % per) as usize];
        ChunkLocation {
            cycle,
            stripe: self.stripe_of[&l],
            loc: Loc {
                disk: l.disk,
                offset: cycle * c.rows + l.offset,
            },
        }
    }
    /// The units of stripe `stripe` of cycle `cycle`, with absolute offsets.
    pub fn stripe_units(&self, cycle: u64, stripe: usize) -> Vec<Unit> {
        let c = self.scheme.cycle();
        c.stripes[stripe]
            .units
            .iter()
            .map(|u| Unit {
                offset: cycle * c.rows + u.offset,
                ..*u
            })
            .collect()
    }
}

/// Population coefficient of variation helper for integer counts over selected disks.
pub(crate) fn counts_cov(counts: &[u64], keep: impl Fn(usize) -> bool) -> f64 {
    let v: Vec<f64> = counts
        .iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, c)| *c as f64)
        .collect();
    cov(&v)
}

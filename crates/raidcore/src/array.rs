//! Array geometry (what never changes) and array state (failures, replacements, generations).
//!
//! ## Geometry
//!
//! A [`Geometry`] is a scheme, a chunk size and a number of cycles. Cycle `c` occupies member
//! rows `c * stride_rows .. c * stride_rows + rows` (member byte offset = row * chunk_bytes).
//! `stride_rows` is at least the healthy cycle's rows and the rows of every rebuilt (interim)
//! cycle the scheme produces for a single failure, and for every ordered pair of failures when
//! the scheme tolerates two (all pairs up to 16 disks, a deterministic sample beyond): random
//! and hash placement put rebuilt units past the healthy rows, and so do RAID+ interim layouts
//! after two failures. A failure set whose rebuilt cycle does not fit is detected when it
//! happens ([`Generation::blocked`]).
//!
//! *Places* are the units of the healthy cycle, numbered in stripe order; a data unit that
//! belongs to two stripes (RM2) is one place. Stripe and unit indices are the same in every
//! layout generation (`Cycle::relocated` keeps them), so a place keeps its number when it moves.
//!
//! ## Generations
//!
//! Every event (a failure, a replacement) appends a [`Generation`]: the layout the array is
//! moving toward, `layout::recovery_plan(scheme, failed).rebuilt` for the members missing after
//! the event (the healthy layout when none is: copy-back to a replacement). Each cycle records
//! the generation it is laid out in (`cycle_gen`); a rebuild moves a cycle to the newest, the
//! *target*. A unit of cycle `c` is **available** iff its member is present and was not replaced
//! after the cycle's generation (`replaced_at[member] <= cycle_gen[c]`): a member replaced later
//! holds nothing valid for that cycle.
//!
//! An event whose new layout relocates members that were failed already may also append a
//! *staging* generation just before it ([`Generation::staging`]): a cycle whose move to the
//! target would write over units its own generation still reads stops there first
//! ([`ArrayState::move_overwrites_live`], `plan_rebuild_cycle`).

use std::collections::BTreeSet;
use std::sync::Arc;

use layout::{recovery_plan, Cycle, Disk, LayoutError, Loc, Role, Scheme};

use crate::plan::Plan;
use crate::CoreError;

/// Index of a place (a unit of the healthy cycle; RM2's shared data units count once).
pub type PlaceId = usize;

/// A stripe of the array: stripe `stripe` of cycle `cycle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StripeId {
    /// The cycle.
    pub cycle: u64,
    /// Stripe index within the cycle.
    pub stripe: usize,
}

/// Pairs of failures beyond which the stride computation samples instead of trying them all.
const STRIDE_ALL_PAIRS_MAX_DISKS: usize = 16;

/// What never changes for an array: scheme, chunk size, cycles and the place tables.
#[derive(Clone, Debug)]
pub struct Geometry {
    scheme: Arc<dyn Scheme>,
    chunk_bytes: u64,
    cycles: u64,
    stride_rows: u64,
    io_align_bytes: u64,
    /// Usable bytes when less than the whole cycles hold ([`Geometry::with_capacity`]).
    capacity_limit: Option<u64>,
    /// `[stripe][unit]` -> place.
    unit_place: Vec<Vec<PlaceId>>,
    /// place -> every (stripe, unit index) holding it.
    place_units: Vec<Vec<(usize, usize)>>,
    /// place -> role in the healthy cycle.
    place_role: Vec<Role>,
    /// Logical data index within a cycle -> place.
    data_place: Vec<PlaceId>,
}

impl Geometry {
    /// Builds the geometry of `scheme` with `chunk_bytes` chunks on members of `member_bytes`
    /// (data area only). Uses as many whole cycles as fit.
    pub fn new(
        scheme: Arc<dyn Scheme>,
        chunk_bytes: u64,
        member_bytes: u64,
    ) -> Result<Geometry, CoreError> {
        Geometry::new_spread(scheme, chunk_bytes, member_bytes, &OneByOne)
    }

    /// [`Geometry::new`], sizing the stride (one relocation per failure set, most of the
    /// time of opening a large declustered enclosure) through `spread`, which may share the
    /// sets among threads: the result is the same.
    pub fn new_spread(
        scheme: Arc<dyn Scheme>,
        chunk_bytes: u64,
        member_bytes: u64,
        spread: &dyn Spread,
    ) -> Result<Geometry, CoreError> {
        if chunk_bytes == 0 || !chunk_bytes.is_multiple_of(512) {
            return Err(CoreError::BadChunk { chunk_bytes });
        }
        let healthy = scheme.cycle();
        healthy.assert_well_formed();
        let stride_rows = stride_rows(&*scheme, spread);
        let cycle_bytes = stride_rows
            .checked_mul(chunk_bytes)
            .expect("cycle size overflows u64");
        let cycles = member_bytes / cycle_bytes;
        if cycles == 0 {
            return Err(CoreError::MemberTooSmall {
                member_bytes,
                needed_bytes: cycle_bytes,
            });
        }
        let mut place_of_loc: crate::fxhash::FxHashMap<Loc, PlaceId> = Default::default();
        let mut unit_place = Vec::with_capacity(healthy.stripes.len());
        let mut place_units: Vec<Vec<(usize, usize)>> = Vec::new();
        let mut place_role = Vec::new();
        for (si, s) in healthy.stripes.iter().enumerate() {
            let mut row = Vec::with_capacity(s.units.len());
            for (ui, u) in s.units.iter().enumerate() {
                let p = *place_of_loc.entry(u.loc()).or_insert_with(|| {
                    place_units.push(Vec::new());
                    place_role.push(u.role);
                    place_units.len() - 1
                });
                assert_eq!(place_role[p], u.role, "a place has two roles");
                place_units[p].push((si, ui));
                row.push(p);
            }
            let mut distinct = row.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), row.len(), "stripe {si} names a place twice");
            unit_place.push(row);
        }
        let data_place: Vec<PlaceId> = healthy.data.iter().map(|l| place_of_loc[l]).collect();
        for &p in &data_place {
            assert_eq!(
                place_role[p],
                Role::Data,
                "the data list names a non-data unit"
            );
        }
        Ok(Geometry {
            scheme,
            chunk_bytes,
            cycles,
            stride_rows,
            io_align_bytes: 1,
            capacity_limit: None,
            unit_place,
            place_units,
            place_role,
            data_place,
        })
    }

    /// The same geometry with member I/O aligned to `align` bytes (a power of two dividing the
    /// chunk size, e.g. 512 or 4096 for `O_DIRECT`): every member read and write then starts
    /// and ends on a multiple of `align`. Partially covered blocks are read and merged (a
    /// degraded or parity read widens to whole blocks; a write of part of a block reads the
    /// old block first, even on RAID0 and mirrors). The default is 1 (byte-granular I/O).
    pub fn with_io_align(mut self, align: u64) -> Result<Geometry, CoreError> {
        if !align.is_power_of_two() || !self.chunk_bytes.is_multiple_of(align) {
            return Err(CoreError::BadAlign {
                align,
                chunk_bytes: self.chunk_bytes,
            });
        }
        self.io_align_bytes = align;
        Ok(self)
    }

    /// The same geometry exposing only the first `bytes` of its cycles (at most all of them):
    /// an array whose last cycle is cut short by the member's end, as a Linux MD RAID5 of
    /// `n` members is whenever the member's rows are not a multiple of `n`. Requests stop at
    /// `bytes`; whole-cycle work (rebuild, verify) still covers the last cycle, so the member
    /// must read the rows past its end as zeros and drop writes to them (the `dev` crate's
    /// MD member view does).
    pub fn with_capacity(mut self, bytes: u64) -> Result<Geometry, CoreError> {
        let whole = self.cycles * self.data_per_cycle() * self.chunk_bytes;
        if bytes > whole {
            return Err(CoreError::OutOfRange {
                offset: 0,
                len: bytes,
                capacity: whole,
            });
        }
        self.capacity_limit = Some(bytes);
        Ok(self)
    }

    /// Member I/O alignment in bytes (1 = none).
    pub fn io_align_bytes(&self) -> u64 {
        self.io_align_bytes
    }

    /// `[a, b)` widened to the I/O alignment.
    pub fn widen(&self, a: u64, b: u64) -> (u64, u64) {
        let al = self.io_align_bytes;
        (a / al * al, b.div_ceil(al) * al)
    }

    /// The placement scheme.
    pub fn scheme(&self) -> &Arc<dyn Scheme> {
        &self.scheme
    }
    /// The healthy cycle.
    pub fn healthy(&self) -> &Cycle {
        self.scheme.cycle()
    }
    /// Chunk (unit) size in bytes.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }
    /// Number of cycles on the members.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }
    /// Member rows between the starts of consecutive cycles.
    pub fn stride_rows(&self) -> u64 {
        self.stride_rows
    }
    /// Number of members (spares included).
    pub fn disks(&self) -> usize {
        self.healthy().disks
    }
    /// Data chunks per cycle.
    pub fn data_per_cycle(&self) -> u64 {
        self.data_place.len() as u64
    }
    /// Usable bytes: cycles * data chunks per cycle * chunk size, or less when limited
    /// ([`Geometry::with_capacity`]).
    pub fn capacity_bytes(&self) -> u64 {
        let whole = self.cycles * self.data_per_cycle() * self.chunk_bytes;
        self.capacity_limit.map_or(whole, |l| l.min(whole))
    }
    /// Bytes of each member the array uses (the rest of the member is never touched).
    pub fn member_bytes_used(&self) -> u64 {
        self.cycles * self.stride_rows * self.chunk_bytes
    }
    /// Number of places per cycle.
    pub fn places(&self) -> usize {
        self.place_units.len()
    }
    /// The place of unit `unit` of stripe `stripe`.
    pub fn place(&self, stripe: usize, unit: usize) -> PlaceId {
        self.unit_place[stripe][unit]
    }
    /// The places of a stripe, in unit order (data first, then parity or copies).
    pub fn stripe_places(&self, stripe: usize) -> &[PlaceId] {
        &self.unit_place[stripe]
    }
    /// Every (stripe, unit index) holding `place`; two for RM2 data units.
    pub fn place_units(&self, place: PlaceId) -> &[(usize, usize)] {
        &self.place_units[place]
    }
    /// The role of a place.
    pub fn role(&self, place: PlaceId) -> Role {
        self.place_role[place]
    }
    /// The place holding logical data index `index` of a cycle.
    pub fn data_place(&self, index: usize) -> PlaceId {
        self.data_place[index]
    }
    /// Logical chunk -> (cycle, data index within the cycle).
    pub fn locate_chunk(&self, chunk: u64) -> (u64, usize) {
        let per = self.data_per_cycle();
        (chunk / per, (chunk % per) as usize)
    }
    /// First member row of cycle `c`.
    pub fn base_row(&self, c: u64) -> u64 {
        assert!(c < self.cycles, "cycle {c} out of range");
        c * self.stride_rows
    }
    /// Member byte offset of position `loc` (offset in rows within the cycle) of cycle `c`.
    pub fn member_offset(&self, c: u64, loc: Loc, in_chunk: u64) -> u64 {
        assert!(loc.offset < self.stride_rows && in_chunk <= self.chunk_bytes);
        (self.base_row(c) + loc.offset) * self.chunk_bytes + in_chunk
    }
}

/// How a caller lets the core share independent work among threads. The core starts none
/// (it touches nothing outside: `tests/tidy_pure_core.rs`); an engine that may passes an
/// implementation that does.
pub trait Spread: Sync {
    /// The largest of `job(i)` for `i` in `0..jobs`, and `floor` if that is larger (or there
    /// are no jobs). The calls are independent and may run in any order, on any threads.
    fn max_of(&self, jobs: usize, floor: u64, job: &(dyn Fn(usize) -> u64 + Sync)) -> u64;
}

/// [`Spread`] on the calling thread, one job after the other.
#[derive(Clone, Copy, Debug, Default)]
pub struct OneByOne;

impl Spread for OneByOne {
    fn max_of(&self, jobs: usize, floor: u64, job: &(dyn Fn(usize) -> u64 + Sync)) -> u64 {
        (0..jobs).map(job).fold(floor, u64::max)
    }
}

/// The largest rows of any rebuilt cycle the scheme produces (see the module docs): the
/// failure sets are relocated through `spread`.
fn stride_rows(scheme: &dyn Scheme, spread: &dyn Spread) -> u64 {
    let n = scheme.cycle().disks as Disk;
    let rows = scheme.cycle().rows;
    if scheme.relocation_keeps_offsets() {
        // Every rebuilt cycle has the healthy rows: nothing to relocate to know it (a pass
        // over every unit per failure set was most of opening a 255-member RAID6).
        return rows;
    }
    // Every single failure, and pairs when the layout survives two (all of them in small
    // enclosures, a sample in large ones); a single failure `a` is written `[a, a]`.
    let mut sets: Vec<[Disk; 2]> = (0..n).map(|a| [a, a]).collect();
    if scheme.tolerance() >= 2 {
        let all = (n as usize) <= STRIDE_ALL_PAIRS_MAX_DISKS;
        for a in 0..n {
            for b in 0..n {
                let sampled = b == (a + 1) % n || b == (a + n / 2) % n || b == n - 1 - a;
                if a != b && (all || sampled) {
                    sets.push([a, b]);
                }
            }
        }
    }
    spread.max_of(sets.len(), rows, &|i| {
        let [a, b] = sets[i];
        let failed: &[Disk] = if a == b { &[a] } else { &[a, b] };
        layout::recovery_rows(scheme, failed).unwrap_or(rows)
    })
}

/// Whether moving places from positions `old` to `new` (indexed by place) writes some place
/// where another one still lies readable (`readable` members) and has yet to move away.
fn overwrites_live(old: &[Loc], new: &[Loc], readable: impl Fn(Disk) -> bool) -> bool {
    let live: BTreeSet<Loc> = old
        .iter()
        .zip(new)
        .filter(|(o, n)| o != n && readable(o.disk))
        .map(|(o, _)| *o)
        .collect();
    !live.is_empty() && old.iter().zip(new).any(|(o, n)| o != n && live.contains(n))
}

/// One layout generation: the layout the array moves toward after an event.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Members missing after the event, in failure order.
    pub failed: Vec<Disk>,
    /// The layout (stripes with member positions, offsets in rows within a cycle).
    pub cycle: Arc<Cycle>,
    /// Why this generation has no rebuild destination (too many failures for the layout to
    /// relocate, or relocated units past the stride); its `cycle` is then the previous
    /// generation's. Rebuilding toward it fails with [`CoreError::RebuildBlocked`].
    pub blocked: Option<LayoutError>,
    /// A stop on the way to the next generation (pushed before it by a replacement while
    /// other members stay failed, or by a failure while others are failed already, when the
    /// next generation relocates): the healthy layout with the failed members' units left
    /// where they were, unreadable. A cycle whose move to the next generation would
    /// overwrite units its current generation still reads (a relocation reusing spare room
    /// an earlier relocation fills) moves here first (copying back onto a replacement, or
    /// dropping relocated copies of failed members, which the code reconstructs), then into
    /// the freed spare room: no write of a move destroys what a crash or a failed write
    /// would fall back on. Blocked when the code cannot carry the failures unrelocated.
    pub staging: bool,
}

/// What [`ArrayState::fail`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailOutcome {
    /// Index of the new (target) generation.
    pub generation: u32,
    /// Some stripe of some cycle can no longer be reconstructed (exact: checked for every
    /// generation a cycle is currently laid out in).
    pub data_lost: bool,
    /// Set when the new generation has no rebuild destination (see [`Generation::blocked`]).
    pub blocked: Option<LayoutError>,
}

/// Members, failures, replacements and per-cycle layout generations. Small: one `u32` per
/// cycle plus one entry per event.
#[derive(Clone, Debug)]
pub struct ArrayState {
    failed: Vec<Disk>,
    replaced_at: Vec<u32>,
    generations: Vec<Generation>,
    cycle_gen: Vec<u32>,
    /// Number of cycles in each generation (indexed like `generations`).
    pub(crate) cycles_in_gen: Vec<u64>,
    generation: u64,
    /// Stripes whose background parity is deferred (lazy parity, [`crate::lazy`]).
    pub(crate) bpgl: crate::lazy::Bpgl,
    /// Which parity of each stripe lazy writes defer.
    pub(crate) lazy: Arc<crate::lazy::LazyGroups>,
    /// `impaired(g)` for every generation `g`, recomputed on every event: planners ask for it
    /// on every plan, and scanning every member each time showed in profiles.
    impaired_by_gen: Vec<Vec<Disk>>,
    /// For every generation, the position of every place (`place_locs[g][p]`): the planners'
    /// most frequent question, answered by one load instead of walking the generation's
    /// cycle through the place's first unit (generations with the healthy layout share one
    /// table).
    place_locs: Vec<Arc<[Loc]>>,
}

/// Position of every place in `cycle`.
fn place_table(geo: &Geometry, cycle: &Cycle) -> Arc<[Loc]> {
    (0..geo.places())
        .map(|p| {
            let (s, u) = geo.place_units(p)[0];
            cycle.stripes[s].units[u].loc()
        })
        .collect()
}

impl ArrayState {
    /// A healthy array: generation 0 is the healthy cycle and every cycle is in it.
    pub fn new(geo: &Geometry) -> ArrayState {
        ArrayState {
            place_locs: vec![place_table(geo, geo.healthy())],
            failed: Vec::new(),
            replaced_at: vec![0; geo.disks()],
            generations: vec![Generation {
                failed: Vec::new(),
                cycle: Arc::new(geo.healthy().clone()),
                blocked: None,
                staging: false,
            }],
            cycle_gen: vec![0; geo.cycles() as usize],
            cycles_in_gen: vec![geo.cycles()],
            generation: 0,
            bpgl: crate::lazy::Bpgl::new(crate::lazy::BPGL_DEFAULT_CAPACITY),
            lazy: Arc::new(crate::lazy::LazyGroups::new(geo)),
            impaired_by_gen: vec![Vec::new()],
        }
    }

    /// Members currently missing, in failure order.
    #[inline]
    pub fn failed(&self) -> &[Disk] {
        &self.failed
    }
    /// Generation index at which member `d` was last replaced (0 if never).
    pub fn replaced_at(&self, d: Disk) -> u32 {
        self.replaced_at[d as usize]
    }
    /// Every generation so far.
    pub fn generations(&self) -> &[Generation] {
        &self.generations
    }
    /// Carries `older`'s event counter on: a state rebuilt from compacted history (its
    /// events replayed from scratch) must not count from zero again, or a plan made against
    /// `older` could look current, and a membership seen before could not be told from one
    /// seen after.
    pub fn continue_count_from(&mut self, older: &ArrayState) {
        self.generation = self.generation.max(older.generation) + 1;
    }
    /// The generation cycles are being rebuilt toward (the newest).
    pub fn target_generation(&self) -> u32 {
        (self.generations.len() - 1) as u32
    }
    /// The event counter (bumped on every failure and replacement), for superblocks and for
    /// detecting stale plans.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// The generation cycle `c` is laid out in.
    #[inline]
    pub fn cycle_generation(&self, c: u64) -> u32 {
        self.cycle_gen[c as usize]
    }
    /// Run-length form of the per-cycle generations: `(first cycle, generation)` for each run
    /// of consecutive cycles in the same generation, in cycle order (what a superblock stores;
    /// restore with [`ArrayState::new`], the events replayed through `fail` and `replace`, and
    /// [`ArrayState::mark_rebuilt`] for the cycles of each run).
    pub fn layout_runs(&self) -> Vec<(u64, u32)> {
        let mut runs: Vec<(u64, u32)> = Vec::new();
        for (c, &g) in self.cycle_gen.iter().enumerate() {
            if runs.last().is_none_or(|&(_, last)| last != g) {
                runs.push((c as u64, g));
            }
        }
        runs
    }
    /// The layout cycle `c` is in now.
    pub fn layout_of(&self, c: u64) -> &Cycle {
        &self.generations[self.cycle_gen[c as usize] as usize].cycle
    }
    /// Cycle `c` is in the target generation.
    pub fn is_clean(&self, c: u64) -> bool {
        self.cycle_gen[c as usize] == self.target_generation()
    }
    /// Number of cycles in the target generation.
    pub fn clean_cycles(&self) -> u64 {
        self.cycles_in_gen[self.target_generation() as usize]
    }
    /// Number of cycles laid out in generation `gen`.
    pub fn cycles_in_generation(&self, gen: u32) -> u64 {
        self.cycles_in_gen[gen as usize]
    }
    /// Every cycle is in the target generation.
    pub fn all_clean(&self) -> bool {
        self.clean_cycles() == self.cycle_gen.len() as u64
    }
    /// Whether a unit on member `d` of a cycle laid out in generation `gen` holds valid data.
    pub fn member_available(&self, d: Disk, gen: u32) -> bool {
        !self.failed.contains(&d) && self.replaced_at[d as usize] <= gen
    }
    /// Members that are present but hold nothing valid for cycles in generation `gen`, plus
    /// the failed ones: the members a cycle in `gen` cannot read.
    pub fn impaired(&self, gen: u32) -> Vec<Disk> {
        self.impaired_slice(gen).to_vec()
    }
    /// [`ArrayState::impaired`] without copying (cached per generation).
    pub(crate) fn impaired_slice(&self, gen: u32) -> &[Disk] {
        let cached = &self.impaired_by_gen[gen as usize];
        debug_assert_eq!(
            *cached,
            (0..self.replaced_at.len() as Disk)
                .filter(|&d| !self.member_available(d, gen))
                .collect::<Vec<_>>()
        );
        cached
    }
    fn refresh_impaired(&mut self) {
        self.impaired_by_gen = (0..self.generations.len() as u32)
            .map(|gen| {
                (0..self.replaced_at.len() as Disk)
                    .filter(|&d| !self.member_available(d, gen))
                    .collect()
            })
            .collect();
    }
    /// True when `plan` was made against the current state of its cycle: no event since, the
    /// cycle still in the same layout generation, and, for a plan that left a background
    /// parity alone because it was stale, no deferred-parity entry dropped since
    /// ([`Plan::bpgl_removals`]). Executors check this (under the plan's locks) before
    /// starting a plan, and re-plan otherwise.
    #[inline]
    pub fn plan_is_current(&self, plan: &Plan) -> bool {
        plan.state_generation == self.generation
            && self.cycle_gen[plan.cycle as usize] == plan.layout_generation
            && plan
                .bpgl_removals
                .is_none_or(|r| r == self.bpgl.removals_of(plan.cycle))
    }

    /// Position of every place in generation `gen` (indexed by place).
    pub(crate) fn place_locs(&self, gen: u32) -> &[Loc] {
        &self.place_locs[gen as usize]
    }

    fn check_member(&self, d: Disk) -> Result<(), CoreError> {
        if (d as usize) < self.replaced_at.len() {
            Ok(())
        } else {
            Err(CoreError::UnknownMember {
                member: d,
                members: self.replaced_at.len(),
            })
        }
    }

    /// Member `d` is gone. Always recorded when `d` exists and is present; reports whether
    /// data is lost and whether the new target has a rebuild destination.
    pub fn fail(&mut self, geo: &Geometry, d: Disk) -> Result<FailOutcome, CoreError> {
        self.check_member(d)?;
        if self.failed.contains(&d) {
            return Err(CoreError::AlreadyFailed { member: d });
        }
        self.failed.push(d);
        // With members failed before, cycles may lie relocated already: see
        // [`Generation::staging`].
        let staging = (self.failed.len() > 1 && self.relocates(geo)).then(|| self.push_staging());
        let generation = self.push_generation(geo);
        self.refresh_impaired();
        self.block_staging_if_unrecoverable(geo, staging);
        let data_lost = self.data_lost(geo);
        Ok(FailOutcome {
            generation,
            data_lost,
            blocked: self.generations[generation as usize].blocked.clone(),
        })
    }

    /// Member `d` (failed) was replaced by a blank device. Returns the new generation index,
    /// toward which cycles are rebuilt (onto the replacement, or back onto it from spares).
    pub fn replace(&mut self, geo: &Geometry, d: Disk) -> Result<u32, CoreError> {
        self.check_member(d)?;
        let Some(i) = self.failed.iter().position(|&f| f == d) else {
            return Err(CoreError::NotFailed { member: d });
        };
        self.failed.remove(i);
        // Members still failed and relocated in the new generation: see
        // [`Generation::staging`]. The replacement holds valid data from the staging stop on.
        let staging = (!self.failed.is_empty() && self.relocates(geo)).then(|| self.push_staging());
        let g = self.push_generation(geo);
        self.replaced_at[d as usize] = staging.unwrap_or(g);
        self.refresh_impaired();
        self.block_staging_if_unrecoverable(geo, staging);
        Ok(g)
    }

    /// Member `d`, failed, is back with the contents it had when it failed (mdadm's
    /// `--re-add`): it rejoins without a rebuild. Possible only while nothing moved since it
    /// failed: `d` is the only member failed, no member is replaced and not yet rebuilt, and
    /// every cycle still lies in the healthy layout of a generation made before `d` failed, so
    /// that `d`'s units are where the layout reads them. The caller vouches that `d`'s units
    /// hold what the array holds (nothing written to them since, or compared): the state
    /// cannot know. Every cycle goes into a new, healthy target generation at once; the
    /// deferred-parity list is kept. Returns that generation.
    pub fn re_add(&mut self, geo: &Geometry, d: Disk) -> Result<u32, CoreError> {
        self.check_member(d)?;
        let refuse = |reason: String| CoreError::CannotRejoin { member: d, reason };
        if !self.failed.contains(&d) {
            return Err(CoreError::NotFailed { member: d });
        }
        if self.failed.len() > 1 {
            return Err(refuse(format!(
                "members {:?} are failed too",
                self.failed.iter().filter(|&&f| f != d).collect::<Vec<_>>()
            )));
        }
        let healthy = &self.generations[0].cycle;
        for (g, gen) in self.generations.iter().enumerate() {
            if self.cycles_in_gen[g] == 0 {
                continue;
            }
            if gen.failed.contains(&d) || *gen.cycle != **healthy {
                return Err(refuse(format!(
                    "{} cycles were rebuilt since it failed",
                    self.cycles_in_gen[g]
                )));
            }
            if let Some(m) = (0..self.replaced_at.len() as Disk)
                .find(|&m| self.replaced_at[m as usize] > g as u32)
            {
                return Err(refuse(format!(
                    "member {m} was replaced and is not rebuilt yet"
                )));
            }
        }
        self.failed.clear();
        let to = self.push_generation(geo);
        for n in self.cycles_in_gen.iter_mut() {
            *n = 0;
        }
        self.cycles_in_gen[to as usize] = self.cycle_gen.len() as u64;
        self.cycle_gen.iter_mut().for_each(|g| *g = to);
        self.refresh_impaired();
        Ok(to)
    }

    /// Whether the layout for the members failed now relocates their units (into spare
    /// room). Decided by the events alone, never by where the cycles are: a pool reassembled
    /// from its superblocks replays the events and must find the same generations.
    fn relocates(&self, geo: &Geometry) -> bool {
        recovery_plan(&**geo.scheme(), &self.failed)
            .is_ok_and(|p| p.rebuilt != *self.generations[0].cycle)
    }

    /// A staging layout that cannot hold the data with the failed members unrelocated (more
    /// than the code tolerates, survivable only relocated) is no stop: blocked.
    fn block_staging_if_unrecoverable(&mut self, geo: &Geometry, staging: Option<u32>) {
        if let Some(s) = staging {
            if crate::recon::unrecoverable_stripe(geo, self, s).is_some() {
                self.generations[s as usize].blocked = Some(LayoutError::Unrecoverable(
                    "the members failed need their relocation".into(),
                ));
            }
        }
    }

    /// The staging generation just before `to`, when `to` has one.
    pub fn staging_before(&self, to: u32) -> Option<u32> {
        let s = to.checked_sub(1)?;
        let g = &self.generations[s as usize];
        (g.staging && g.blocked.is_none()).then_some(s)
    }

    /// Whether moving cycle `c` from its generation to `to` writes a unit where its current
    /// generation keeps another unit it can still read: a crash or a failed write in the
    /// middle of the move would leave neither layout whole.
    pub fn move_overwrites_live(&self, c: u64, to: u32) -> bool {
        let from = self.cycle_gen[c as usize];
        if from == to {
            return false;
        }
        overwrites_live(self.place_locs(from), self.place_locs(to), |m| {
            self.member_available(m, from)
        })
    }

    /// Whether moving cycle `c` from the generation it is in to `to` leaves an old copy
    /// readable: a place whose position changes while its old position is on a member the
    /// cycle's current generation can still read. That is a copy-back (the spare's copy stays
    /// readable, and goes stale once the new place takes a write); a rebuild onto a spare or
    /// a replacement moves only units of members that cannot be read. An executor that lets
    /// a moved cycle take writes before the move is recorded durably must record it first
    /// when this is true: a crash before the record would bring the cycle back in its old
    /// layout, where the stale copy is what reads.
    pub fn move_leaves_old_copy(&self, c: u64, to: u32) -> bool {
        let from = self.cycle_gen[c as usize];
        if from == to {
            return false;
        }
        let (old, new) = (self.place_locs(from), self.place_locs(to));
        old.iter()
            .zip(new)
            .any(|(o, n)| o != n && self.member_available(o.disk, from))
    }

    /// Whether moving the cycles not yet in generation `to` there writes anything: some
    /// place of some cycle changes position or is unreadable where it is, and its place in
    /// `to` lies on a member that is not failed. When not, the only units left to rebuild
    /// are those of failed members (the rebuild needs a replacement first; see
    /// `plan_rebuild_cycle`).
    pub fn rebuild_writes_somewhere(&self, to: u32) -> bool {
        let new = self.place_locs(to);
        (0..self.generations.len() as u32)
            .filter(|&g| g != to && self.cycles_in_gen[g as usize] > 0)
            .any(|g| {
                let old = self.place_locs(g);
                old.iter().zip(new.iter()).any(|(o, n)| {
                    !self.failed.contains(&n.disk) && (o != n || !self.member_available(o.disk, g))
                })
            })
    }

    /// The failed members on which the target generation still places units: a layout that
    /// rebuilds in place (no spare room for them), so their units stay lost until they are
    /// replaced. A rebuild toward the target finishes without them (degraded).
    pub fn awaiting_replacement(&self) -> Vec<Disk> {
        let locs = self.place_locs(self.target_generation());
        self.failed
            .iter()
            .copied()
            .filter(|d| locs.iter().any(|l| l.disk == *d))
            .collect()
    }

    /// Records that cycle `c` now lies in generation `to` (its rebuild plan toward `to` has been
    /// executed and its writes are durable).
    pub fn mark_rebuilt(&mut self, c: u64, to: u32) {
        assert!(
            (to as usize) < self.generations.len(),
            "unknown generation {to}"
        );
        assert!(
            self.generations[to as usize].blocked.is_none(),
            "generation {to} is blocked"
        );
        let from = self.cycle_gen[c as usize];
        assert!(to >= from, "cycle {c} cannot move back from {from} to {to}");
        self.cycles_in_gen[from as usize] -= 1;
        self.cycles_in_gen[to as usize] += 1;
        self.cycle_gen[c as usize] = to;
        // The rebuild plan recomputed every place its view held unavailable, stale background
        // parities included.
        if from != to {
            self.clear_cycle_bpgl(c);
        }
    }

    /// True when some cycle has a stripe that cannot be reconstructed in its current layout.
    pub fn data_lost(&self, geo: &Geometry) -> bool {
        let in_use: BTreeSet<u32> = (0..self.generations.len() as u32)
            .filter(|&g| self.cycles_in_gen[g as usize] > 0)
            .collect();
        in_use
            .into_iter()
            .any(|g| crate::recon::unrecoverable_stripe(geo, self, g).is_some())
    }

    /// Pushes a [`Generation::staging`] generation: the healthy layout, the members failed now.
    fn push_staging(&mut self) -> u32 {
        self.place_locs.push(self.place_locs[0].clone());
        self.generations.push(Generation {
            failed: self.failed.clone(),
            cycle: self.generations[0].cycle.clone(),
            blocked: None,
            staging: true,
        });
        self.cycles_in_gen.push(0);
        self.target_generation()
    }

    fn push_generation(&mut self, geo: &Geometry) -> u32 {
        let prev = self.generations.last().expect("generation 0 exists");
        let (cycle, blocked) = if self.failed.is_empty() {
            (self.generations[0].cycle.clone(), None)
        } else {
            match recovery_plan(&**geo.scheme(), &self.failed) {
                Ok(p) if p.rebuilt.rows <= geo.stride_rows() => (Arc::new(p.rebuilt), None),
                Ok(p) => (
                    prev.cycle.clone(),
                    Some(LayoutError::NoSpareSpace(format!(
                        "the rebuilt layout needs {} rows per cycle but the array reserved {}",
                        p.rebuilt.rows,
                        geo.stride_rows()
                    ))),
                ),
                Err(e) => (prev.cycle.clone(), Some(e)),
            }
        };
        // Share the healthy cycle's allocation when the layout is the healthy one.
        let cycle = if *cycle == *self.generations[0].cycle {
            self.generations[0].cycle.clone()
        } else {
            cycle
        };
        assert!(
            cycle.stripes.len() == geo.healthy().stripes.len()
                && cycle
                    .stripes
                    .iter()
                    .zip(&geo.healthy().stripes)
                    .all(|(a, b)| a.units.len() == b.units.len() && a.code == b.code),
            "a rebuilt layout must keep stripe and unit indices"
        );
        let locs = if Arc::ptr_eq(&cycle, &self.generations[0].cycle) {
            self.place_locs[0].clone()
        } else {
            place_table(geo, &cycle)
        };
        self.place_locs.push(locs);
        self.generations.push(Generation {
            failed: self.failed.clone(),
            cycle,
            blocked,
            staging: false,
        });
        self.cycles_in_gen.push(0);
        self.generation += 1;
        self.target_generation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use layout::{build, Params, SchemeKind};

    fn raid5(disks: usize, spares: usize) -> Geometry {
        let p = Params {
            disks: Some(disks),
            spares,
            ..Params::default()
        };
        Geometry::new(build(SchemeKind::Raid5, &p).unwrap(), 512, 1 << 16).unwrap()
    }

    /// Answers its jobs in reverse order, in two halves: any order must give the same
    /// stride.
    struct Backwards;

    impl Spread for Backwards {
        fn max_of(&self, jobs: usize, floor: u64, job: &(dyn Fn(usize) -> u64 + Sync)) -> u64 {
            let half = jobs / 2;
            let second = (half..jobs).rev().map(job).fold(floor, u64::max);
            (0..half).rev().map(job).fold(second, u64::max)
        }
    }

    /// The stride is the most rows any single failure, or any pair the layout survives,
    /// relocates to (every pair: 13 disks is a small enclosure), whichever [`Spread`] sizes
    /// it, for random and hash declustering with one and two parities (whose relocations
    /// add rows).
    #[test]
    fn stride_is_the_most_rows_any_failure_set_needs_in_any_order() {
        for kind in [SchemeKind::Random, SchemeKind::Hash] {
            for level in [5u8, 6] {
                let p = Params {
                    disks: Some(13),
                    width: Some(5),
                    level: Some(level),
                    seed: 11,
                    ..Params::default()
                };
                let scheme = build(kind, &p).unwrap();
                let n = scheme.cycle().disks as Disk;
                let mut want = scheme.cycle().rows;
                for a in 0..n {
                    let pairs = (0..n).filter(|&b| level == 6 && b != a).map(|b| vec![a, b]);
                    for failed in std::iter::once(vec![a]).chain(pairs) {
                        if let Ok(r) = layout::recovery_rows(&*scheme, &failed) {
                            want = want.max(r);
                        }
                    }
                }
                let one = stride_rows(&*scheme, &OneByOne);
                assert!(
                    one > scheme.cycle().rows,
                    "{kind:?} {level}: relocations add rows"
                );
                assert_eq!(one, want, "{kind:?} {level}");
                assert_eq!(stride_rows(&*scheme, &Backwards), one, "{kind:?} {level}");
            }
        }
    }

    /// A member back unchanged rejoins while nothing moved, and only then.
    #[test]
    fn re_add_only_while_nothing_moved() {
        for spares in [0, 1] {
            let g = raid5(5, spares);
            let mut s = ArrayState::new(&g);
            s.fail(&g, 3).unwrap();
            let before = s.generation();
            let to = s.re_add(&g, 3).unwrap();
            assert_eq!(to, s.target_generation());
            assert!(s.failed().is_empty() && s.all_clean() && !s.data_lost(&g));
            assert!(
                s.generation() > before,
                "plans made while it was failed are stale"
            );
            assert!(s.impaired(to).is_empty());
            assert_eq!(*s.layout_of(0), *g.healthy());
            assert!(s.survives_losing(&g, &[3]), "tolerates a failure again");
            assert_eq!(s.re_add(&g, 3), Err(CoreError::NotFailed { member: 3 }));
        }
        // A cycle rebuilt into the spare meanwhile: no longer where the member holds it.
        let g = raid5(5, 1);
        let mut s = ArrayState::new(&g);
        let t = s.fail(&g, 2).unwrap().generation;
        s.mark_rebuilt(0, t);
        assert!(matches!(
            s.re_add(&g, 2),
            Err(CoreError::CannotRejoin { member: 2, .. })
        ));
        // Another member failed, or replaced and not rebuilt.
        let g = raid5(5, 0);
        let mut s = ArrayState::new(&g);
        s.fail(&g, 1).unwrap();
        s.fail(&g, 2).unwrap();
        assert!(matches!(
            s.re_add(&g, 2),
            Err(CoreError::CannotRejoin { .. })
        ));
        let mut s = ArrayState::new(&g);
        s.fail(&g, 1).unwrap();
        s.replace(&g, 1).unwrap();
        s.fail(&g, 2).unwrap();
        assert!(matches!(
            s.re_add(&g, 2),
            Err(CoreError::CannotRejoin { .. })
        ));
    }

    #[test]
    fn geometry_tables() {
        let g = raid5(5, 0);
        assert_eq!(g.stride_rows(), 5);
        assert_eq!(g.cycles(), (1 << 16) / (5 * 512));
        assert_eq!(g.data_per_cycle(), 20);
        assert_eq!(g.capacity_bytes(), g.cycles() * 20 * 512);
        assert_eq!(g.places(), 25);
        assert_eq!(g.locate_chunk(21), (1, 1));
        assert!(matches!(
            Geometry::new(g.scheme().clone(), 512, 100),
            Err(CoreError::MemberTooSmall { .. })
        ));
        assert!(matches!(
            Geometry::new(g.scheme().clone(), 100, 1 << 20),
            Err(CoreError::BadChunk { .. })
        ));
    }

    #[test]
    fn rm2_shares_places() {
        let p = Params {
            disks: Some(8),
            ..Params::default()
        };
        let g = Geometry::new(build(SchemeKind::Rm2, &p).unwrap(), 512, 1 << 16).unwrap();
        for i in 0..g.data_per_cycle() as usize {
            assert_eq!(g.place_units(g.data_place(i)).len(), 2);
        }
    }

    #[test]
    fn events_and_generations() {
        let g = raid5(6, 1);
        let mut s = ArrayState::new(&g);
        assert!(s.all_clean());
        assert_eq!(
            s.fail(&g, 9),
            Err(CoreError::UnknownMember {
                member: 9,
                members: 6
            })
        );
        let out = s.fail(&g, 2).unwrap();
        assert_eq!(out.generation, 1);
        assert!(!out.data_lost && out.blocked.is_none());
        assert_eq!(s.fail(&g, 2), Err(CoreError::AlreadyFailed { member: 2 }));
        assert_eq!(s.generation(), 1);
        assert!(!s.all_clean() && s.clean_cycles() == 0);
        // Units of disk 2 go to the spare (disk 5) in generation 1.
        let moved = s.generations()[1]
            .cycle
            .stripes
            .iter()
            .flat_map(|st| &st.units)
            .filter(|u| u.disk == 5)
            .count();
        assert_eq!(moved, 5);
        assert_eq!(s.replace(&g, 3), Err(CoreError::NotFailed { member: 3 }));
        // A second data failure: more than raid5 tolerates, data lost.
        let out = s.fail(&g, 3).unwrap();
        assert!(out.data_lost && out.blocked.is_some());
        // Disk 2 stays failed and relocated onto the spare: generation 3 is the staging stop
        // (the healthy layout, disk 2 unreadable), generation 4 the target. The replacement
        // holds valid data from the staging stop on.
        assert_eq!(s.replace(&g, 3).unwrap(), 4);
        assert!(s.generations()[3].staging && s.generations()[3].failed == [2]);
        assert_eq!(s.staging_before(4), Some(3));
        assert_eq!(s.generation(), 3, "one event, one count");
        assert_eq!(s.replaced_at(3), 3);
        assert!(!s.member_available(3, 2) && s.member_available(3, 3));
        s.mark_rebuilt(0, 4);
        assert_eq!(s.clean_cycles(), 1);
        assert!(s.is_clean(0) && !s.is_clean(1));
        s.mark_rebuilt(5, 3);
        assert!(!s.is_clean(5));
        assert_eq!(s.layout_runs(), vec![(0, 4), (1, 0), (5, 3), (6, 0)]);
    }
}

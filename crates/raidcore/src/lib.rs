//! # raidcore: the sans-I/O heart of raidforge
//!
//! raidcore turns logical requests against an array (read these bytes, write those, rebuild
//! that piece) into **plans**: lists of member reads, parity computations and member writes that
//! an *executor* carries out. The real engine (files and block devices) and the simulator (disk
//! models on a simulated clock) run the very same plans, so a simulated result predicts the
//! engine. This crate does no I/O, reads no clock, spawns no thread and uses no randomness: every
//! function is a pure function of its arguments.
//!
//! ## Concepts
//!
//! - **Geometry** ([`Geometry`]): a placement scheme from the `layout` crate, a chunk size and
//!   the number of *cycles* that fit on the members. Cycle `c` occupies member rows
//!   `c * stride_rows .. c * stride_rows + rows`; `stride_rows` leaves room for the units that
//!   rebuilds put past the healthy rows (random/hash spare space, RAID+ interim layouts after
//!   two failures). A *place* is one unit of the healthy cycle (RM2's shared data units are one
//!   place in two stripes); places keep their identity (stripe and unit index) in every layout.
//! - **Array state and generations** ([`ArrayState`]): every failure and every replacement
//!   creates a new *generation*: the layout the array is moving toward
//!   (`layout::recovery_plan(scheme, failed).rebuilt`; with nothing failed, the healthy layout,
//!   which is how copy-back to a replacement works). Each cycle records the generation its units
//!   are laid out in *now*; a rebuild moves a cycle to the newest (target) generation. A unit is
//!   *available* when its member is present and was not replaced after the cycle's generation.
//! - **Plans** ([`Plan`]): numbered byte buffers (buffer 0 is the caller's bytes), member reads,
//!   [`Op`]s that map one-to-one onto `codec` calls, member writes. Execution is three phases:
//!   all reads, then the ops in order, then all writes (see [`plan`] for the exact contract).
//! - **Planner** ([`plan_read`], [`plan_write`], [`plan_rebuild_cycle`], and for lazy parity
//!   [`plan_write_lazy`], [`plan_flush_cycle`]): one plan per cycle a
//!   request touches. Degraded paths reconstruct lost units from the stripe's code, peeling
//!   across stripes where one stripe alone cannot (RM2 after two failures).
//! - **Write policy** ([`WritePolicy`], [`ModePolicy`]): read-modify-write versus
//!   reconstruct-write per stripe: Linux MD's rule, RAID4S-modthresh, always-RMW, or a
//!   per-member cost model.
//! - **Lazy parity** ([`lazy`], [`ParityPolicy`]): two-parity layouts (RM2, P+Q) can defer
//!   one parity of a small write to a bounded background parity group list ([`Bpgl`]),
//!   flushed when the array is idle ([`IdleDetector`]), full, or degraded (seed 002).
//! - **Rebuild scheduling** ([`RebuildScheduler`], [`Throttle`]): which cycles to rebuild next
//!   (sequentially like MD, or many at once) and how fast (MD's `sync_speed_min/max`).
//! - **Stripe locks** ([`StripeLocks`]): the table an executor uses to serialise plans that
//!   touch the same stripe, reads excepted: reads hold their stripes shared ([`LockMode`],
//!   [`Plan::lock_mode`]), plans that write exclusively.
//! - **In-memory executor** ([`MemArray`], [`check_consistency`]): runs plans on byte vectors
//!   and checks parity; used by the tests and by debug builds of other executors.
//!   [`mem::run_ops`] is the one interpreter of [`Op`]s that every executor calls.
//! - **Verification** ([`plan_verify_cycle`], [`check_verify`]): read a cycle, check every
//!   stripe's parity or mirrors (`raidforge verify`).
//! - **Read sources** ([`read_sources`]): the member bytes a logical range's contents come
//!   from, so that an executor can tell a range that reads as zeros (holes of sparse members)
//!   without reading it (NBD block status).
//! - **Superblock** ([`superblock`]): the versioned, checksummed record at the start of every
//!   member that lets a pool be assembled from its members alone. [`md`] is Linux MD's v1.x
//!   superblock, the other on-disk format a pool can have.
//! - **I/O alignment** ([`Geometry::with_io_align`]): for `O_DIRECT` executors, every member
//!   read and write can be made to start and end on a block boundary; partial blocks are read
//!   and merged by the plan itself.
//!
//! ## What an executor must do
//!
//! Take [`Plan::locks`] (all or nothing, in [`Plan::lock_mode`], [`StripeLocks`]), check
//! [`ArrayState::plan_is_current`], then: phase 1 every read (any order, in parallel), phase 2
//! the ops strictly in order, phase 3 every write (any order, in parallel); release the locks;
//! for rebuild plans, report completion only once the writes are durable. Reads and writes
//! never target a failed member. The full contract is in [`plan`].
//!
//! ## Deliberately not here
//!
//! No I/O of any kind, no clock (the rebuild throttle takes the time as an argument), no
//! threads, no randomness. No journal yet: a write interrupted between its member writes
//! leaves a stripe inconsistent (the RAID5 write hole), as with MD without a journal.
//!
//! ## Typical flow
//!
//! ```
//! use std::sync::Arc;
//! use raidcore::{plan_read, plan_write, ArrayState, Geometry, MemArray, WritePolicy};
//!
//! let p = layout::Params { disks: Some(4), ..Default::default() };
//! let scheme = layout::build(layout::SchemeKind::Raid5, &p).unwrap();
//! let geo = Geometry::new(scheme, 512, 64 * 1024).unwrap();
//! let mut state = ArrayState::new(&geo);
//! let mut mem = MemArray::new(geo.disks(), geo.member_bytes_used());
//!
//! let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
//! for plan in plan_write(&geo, &state, 100, data.len() as u64, &WritePolicy::Md).unwrap() {
//!     let at = plan.user_offset as usize;
//!     let mut user = data[at..at + plan.buffers[0]].to_vec();
//!     mem.run(&plan, &mut user).unwrap();
//! }
//! state.fail(&geo, 1).unwrap();
//! mem.remove(1);
//! let mut back = vec![0u8; data.len()];
//! for plan in plan_read(&geo, &state, 100, data.len() as u64).unwrap() {
//!     let at = plan.user_offset as usize;
//!     mem.run(&plan, &mut back[at..at + plan.buffers[0]]).unwrap();
//! }
//! assert_eq!(back, data);
//! ```
//!
//! ## Errors
//!
//! Bad requests and impossible situations are [`CoreError`] values (an offset past the end, data
//! lost, a rebuild that needs a replacement first). Bugs in this crate's own logic are assertion
//! failures; every plan is checked by [`Plan::validate`] in debug builds.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod array;
pub mod emulate;
pub mod fxhash;
pub mod ido;
pub mod intent;
pub mod journal;
pub mod lazy;
pub mod lock;
pub mod md;
pub mod mem;
pub mod plan;
pub mod planner;
pub mod policy;
pub mod rebuild;
pub mod record;
pub mod region;
pub mod repair;
pub mod sources;
pub mod superblock;
pub mod units;
pub mod verify;

mod recon;

pub use array::{
    ArrayState, FailOutcome, Generation, Geometry, OneByOne, PlaceId, Spread, StripeId,
};
pub use ido::{
    DMap, Ido, IdoConfig, IdoError, IdoStats, Phase as IdoPhase, RebuildPolicy, Route, ZoneFlag,
    ZoneTable,
};
pub use lazy::{
    plan_flush_cycle, plan_write_lazy, Bpgl, BpglRecord, FlushAdvice, FlushPlan, IdleDetector,
    LazyGroups, LazyWrite, ParityPolicy,
};
pub use lock::{LockMode, StripeLocks};
pub use mem::{check_consistency, Inconsistency, MemArray, MemError};
pub use plan::{IoCounts, MemberIo, Op, Plan, PlanKind, Slice};
pub use planner::{plan_read, plan_read_balanced, plan_rebuild_cycle, plan_write, MemberLoad};
pub use policy::{ModeCost, ModePolicy, StripeWrite, WriteMode, WritePolicy};
pub use rebuild::{Progress, RebuildOrder, RebuildScheduler, SpeedLimits, Throttle};
pub use repair::{locate_member_byte, logical_offset, lost_with, place_loc, plan_repair};
pub use sources::{data_pieces, read_sources, DataPiece, MemberRange, Sources};
pub use verify::{
    check_verify, check_verify_stripes, plan_verify_cycle, plan_verify_stripes, resync_cycle,
    verify_parts, Resync, VerifyOutcome,
};

use layout::{Disk, LayoutError};

/// Why raidcore refused a request or an event. Nothing has been planned or changed when one of
/// these is returned (events validate before they mutate).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// The chunk size is zero or not a multiple of 512 bytes.
    #[error("chunk size {chunk_bytes} must be a positive multiple of 512 bytes")]
    BadChunk {
        /// The chunk size given.
        chunk_bytes: u64,
    },
    /// The I/O alignment is not a power of two dividing the chunk size.
    #[error("I/O alignment {align} must be a power of two dividing the chunk size {chunk_bytes}")]
    BadAlign {
        /// The alignment given.
        align: u64,
        /// The geometry's chunk size.
        chunk_bytes: u64,
    },
    /// A member is too small to hold even one cycle of the layout (including the room rebuilds
    /// need past the healthy rows).
    #[error("members of {member_bytes} bytes are too small: one cycle needs {needed_bytes} bytes")]
    MemberTooSmall {
        /// The member size given.
        member_bytes: u64,
        /// Bytes one cycle needs (stride rows times chunk size).
        needed_bytes: u64,
    },
    /// A byte range reaches past the end of the array (or overflows).
    #[error("range {offset}+{len} is beyond the end of the array ({capacity} bytes)")]
    OutOfRange {
        /// Start of the range (a cycle number for `plan_rebuild_cycle`).
        offset: u64,
        /// Its length.
        len: u64,
        /// The array's capacity in the same unit.
        capacity: u64,
    },
    /// A member index that the array does not have.
    #[error("member {member} does not exist (the array has members 0..{members})")]
    UnknownMember {
        /// The member index given.
        member: Disk,
        /// How many members the array has.
        members: usize,
    },
    /// `fail` of a member that is already failed.
    #[error("member {member} has already failed")]
    AlreadyFailed {
        /// The member.
        member: Disk,
    },
    /// `replace` of a member that has not failed.
    #[error("member {member} has not failed, so it cannot be replaced")]
    NotFailed {
        /// The member.
        member: Disk,
    },
    /// [`ArrayState::re_add`] of a member whose units the array no longer lays out where the
    /// member holds them (another member failed or replaced, or a cycle rebuilt, since).
    #[error("member {member} cannot rejoin as it is: {reason}")]
    CannotRejoin {
        /// The member.
        member: Disk,
        /// What happened since it failed.
        reason: String,
    },
    /// A read or a write needs a unit that can no longer be reconstructed: stripe `stripe` of
    /// cycle `cycle` has lost more units than its code (and any peeling through other stripes)
    /// can recover.
    #[error("data lost in cycle {cycle}, stripe {stripe}")]
    DataLost {
        /// The cycle.
        cycle: u64,
        /// A stripe (index in the cycle) holding a unit that cannot be rebuilt.
        stripe: usize,
    },
    /// The rebuild would write to a member that is failed: the layout rebuilds in place, so the
    /// member must be replaced first.
    #[error("rebuild needs member {member}, which has failed: replace it first")]
    NeedsReplacement {
        /// The failed member the rebuild writes to.
        member: Disk,
    },
    /// The target generation has no rebuild destination (too many failures for the layout to
    /// relocate, or relocated units would not fit in the cycle's stride).
    #[error("rebuild is blocked: {0}")]
    RebuildBlocked(LayoutError),
    /// A write policy's parameters do not fit the array (e.g. a cost vector of the wrong length).
    #[error("write policy: {0}")]
    BadPolicy(String),
    /// The layout crate refused the scheme or a failure set.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

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
//!
//! One file per concern: `opts` (what the commands ask for), `descriptor` (the JSON file),
//! `create`, `open` (open and assemble: superblocks back into the array state), `persist`
//! (superblocks, flushes, sync, close), `io` (read and write), `lazy` (the deferred-parity
//! list), `membership` (fail, replace, member handles), `rebuild`, `status` (status and
//! verify), `ido` (the pool's side of `crate::ido`), `md` (a folder: Linux MD's v1.x
//! superblock as the other on-disk format, and the member view that puts the data area where
//! MD has it). Repairs and scrub continue `impl Pool` in `crate::scrub`, the served pool's
//! helpers in `crate::serve_support`.

mod assembly;
mod create;
mod descriptor;
mod ido;
mod intent;
mod io;
mod lazy;
mod md;
mod membership;
mod open;
mod opts;
mod persist;
mod rebuild;
mod site;
mod spares;
mod status;

pub use assembly::{DISAPPEARED_WHY, STALE_WHY};
pub use descriptor::{Descriptor, MemberDesc};
pub use intent::ResyncReport;
pub(crate) use intent::{IntentGuard, WriteIntent, INTENT_CLEAR_AFTER};
pub(crate) use lazy::run_flush;
pub use md::mdadm_data_offset;
pub use opts::{
    default_journal_bytes, test_opts, CreateOpts, MemberWrap, Metadata, RebuildOpts, WriteHole,
    DEFAULT_REBUILD_WINDOW, DIRECT_ALIGN_BYTES, JOURNAL_OFFSET_BYTES, WINDOWS_IN_FLIGHT_BY_MEMBERS,
};
pub(crate) use persist::flush_each;
pub(crate) use rebuild::{
    rebuild_windows_in_order, run_rebuild_windows, written_in_order, RebuildBatch,
    Step as WindowStep, WindowFlow,
};
pub use rebuild::{RebuildCursor, RebuildProgress};
pub use status::{MemberStatus, Status, VerifyReport, VERIFY_PART_BYTES};

use assembly::{
    judge_members, newest_superblock, probe_members, read_superblock, recorded_state, Probe,
};
use descriptor::{hex, unhex};
use ido::{ido_records, RecordOnly};
pub(crate) use io::{
    gave_up, pieces, run_attempt, write_loop, Attempt, Listing, Outcome, WriteSite, REPLANS_MAX,
};
use lazy::newest_bpgl;
pub use membership::wipe_member;
use membership::{open_member, MemberOpen};
use open::Access;
pub use site::foreign_content;
use site::{Found, Site};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use layout::{Disk, Params, SchemeKind};
use raidcore::lazy::{BpglRecord, BPGL_DEFAULT_CAPACITY, BPGL_MAX_CAPACITY};
use raidcore::superblock::{
    superblock_slot, ArrayStateTag, Event, Superblock, SuperblockHead, DEFAULT_DATA_OFFSET_BYTES,
    FEATURE_CHECKSUMS, FEATURE_JOURNAL, FEATURE_WRITE_INTENT, SUPERBLOCK_BYTES,
    SUPERBLOCK_HEAD_BYTES, SUPERBLOCK_SLOTS,
};
use raidcore::{
    plan_flush_cycle, plan_read, plan_read_balanced, plan_rebuild_cycle, plan_verify_cycle,
    plan_write, plan_write_lazy, resync_cycle, ArrayState, Geometry, ParityPolicy, WritePolicy,
};
use serde::{Deserialize, Serialize};

use crate::csum::Checksums;
use crate::dual_slot::DualSlot;
use crate::exec::{run_plans, Counters, LoggedWriteError, Members};
use crate::ido::{Ido, IdoStatus, Phase, DEFAULT_ZONE_BYTES, IDO_SLOTS};
use crate::journal::{Journal, JournalGeometry, JournalStats};
pub use crate::scrub::{
    LostRange, MemberRange, RepairCounts, ScrubOpts, ScrubProgress, ScrubReport,
};
use crate::{Emulated, FileMember, Member, OpenOpts, Speed};
use raidcore::region;
pub use raidcore::region::Region;

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

/// An open pool. Its state is grouped by concern; each group's file is named beside it.
pub struct Pool {
    /// The layout and where every cycle is in it: raidcore's planner inputs.
    pub(crate) geo: Geometry,
    pub(crate) state: ArrayState,
    /// The descriptor file (`descriptor.rs`).
    pub(crate) file: DescriptorFile,
    /// What the superblocks record besides the array state (`persist.rs`, `open.rs`).
    pub(crate) sb: SuperblockState,
    /// Where the metadata regions and the data area lie on every member.
    pub(crate) map: MemberMap,
    /// The member handles, their I/O counters, the wrap for members opened later
    /// (`membership.rs`).
    pub(crate) members: MemberSet,
    /// How writes choose between read-modify-write and reconstruct-write.
    pub(crate) policy: WritePolicy,
    /// Eager or lazy parity and the deferred-parity list's on-disk copy (`lazy.rs`).
    pub(crate) lazy: LazyParity,
    /// Per-block checksums and the blocks a rebuild found lost (`crate::scrub`).
    pub(crate) integrity: Integrity,
    /// Write-hole protection and the open journal (`io.rs`).
    pub(crate) wh: WriteHoleState,
    /// Zone popularity, rebuild policy state, surrogate and D-Map (`crate::ido`, `ido.rs`).
    pub(crate) ido: Arc<Ido>,
    /// Linux MD's superblock state when the pool is in MD's format (`md/`); `None` for
    /// raidforge's own.
    pub(crate) md: Option<Box<md::MdFormat>>,
}

/// The descriptor file: where it is and what it holds.
pub(crate) struct DescriptorFile {
    pub(crate) path: PathBuf,
    pub(crate) desc: Descriptor,
}

/// The pool's identity and history as the superblocks record them.
pub(crate) struct SuperblockState {
    pub(crate) uuid: [u8; 16],
    pub(crate) kind: SchemeKind,
    pub(crate) params: Params,
    /// Failures and replacements since the history was last compacted.
    pub(crate) events: Vec<Event>,
    /// Generation of the newest superblock written.
    pub(crate) generation: u64,
    pub(crate) created_unix_secs: u64,
    /// Cycles a rebuild moved to their new layout generation since the superblocks last
    /// recorded the layout: they are recorded before they take writes
    /// ([`Pool::record_layout_before_writes`]).
    pub(crate) rebuilt_unrecorded: std::collections::BTreeSet<u64>,
    /// Some cycle moved since the superblocks last recorded the layout (whether or not it
    /// is in `rebuilt_unrecorded`): a switch to lazy parity records the layout first.
    pub(crate) moved_unrecorded: bool,
}

/// Where this pool's regions lie on every member, after the fixed ones of
/// [`raidcore::region`] (member bytes).
pub(crate) struct MemberMap {
    /// The data area starts here (metadata before it).
    pub(crate) data_offset_bytes: u64,
    /// Bytes of the data area (whole chunks).
    pub(crate) data_bytes: u64,
    /// The block-checksum region; empty without checksums.
    pub(crate) checksums: Region,
    /// The journal region; empty without a journal.
    pub(crate) journal: Region,
}

impl MemberMap {
    /// The data area.
    pub(crate) fn data(&self) -> Region {
        Region::new(self.data_offset_bytes, self.data_bytes)
    }

    /// Checks that the regions are where the map says: the journal and checksum regions
    /// (when on) after the fixed regions, apart, and before the data area.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let pool_regions = [("journal", self.journal), ("checksum", self.checksums)];
        for (name, r) in pool_regions.into_iter().filter(|(_, r)| !r.is_empty()) {
            if r.offset < region::POOL_REGIONS_START || !r.ends_by(self.data()) {
                return Err(format!(
                    "the {name} region {}+{} is not between {} and the data area at {}",
                    r.offset,
                    r.bytes,
                    region::POOL_REGIONS_START,
                    self.data_offset_bytes
                ));
            }
        }
        if self.journal.overlaps(self.checksums) {
            return Err("the journal and checksum regions overlap".into());
        }
        if self.data_offset_bytes < region::DEFAULT_DATA_OFFSET_BYTES {
            return Err(format!(
                "the data area at {} overlaps the fixed metadata regions",
                self.data_offset_bytes
            ));
        }
        Ok(())
    }
}

/// The members as the pool holds them.
pub(crate) struct MemberSet {
    /// One slot per member; `None` while it is failed.
    pub(crate) handles: Vec<Option<Arc<dyn Member>>>,
    /// Shared with the threads a rebuild runs its windows on ([`crate::exec::OwnedMembers`]).
    pub(crate) counters: Arc<[Counters]>,
    /// Wraps members opened later (replacements); see [`MemberWrap`].
    pub(crate) wrap: Option<MemberWrap>,
    /// Members this open left out (failed at assembly: missing, unusable or stale).
    pub(crate) left_out: Vec<usize>,
}

/// The parity policy and the persisted deferred-parity list (BPGL).
pub(crate) struct LazyParity {
    /// Eager or lazy parity (recorded in the superblocks).
    pub(crate) parity: ParityPolicy,
    /// Sequence number of the newest persisted BPGL record.
    pub(crate) seq: u64,
    /// The persisted BPGL may differ from the one in memory.
    pub(crate) dirty: bool,
    /// The list as last persisted (a rebuild drops entries without a flush).
    pub(crate) on_disk: Vec<raidcore::StripeId>,
    /// Served writes' group commit of the list ([`lazy::ListCommit`]).
    pub(crate) commit: lazy::ListCommit,
}

impl MemberSet {
    /// The pool's members (`None`: failed or missing), their counters at zero, no wrap yet.
    pub(crate) fn new(handles: Vec<Option<Arc<dyn Member>>>) -> MemberSet {
        let counters: Arc<[Counters]> = handles.iter().map(|_| Counters::default()).collect();
        MemberSet {
            handles,
            counters,
            wrap: None,
            left_out: Vec::new(),
        }
    }
}

/// Per-block checksums and lost blocks.
pub(crate) struct Integrity {
    /// Per-block checksums, when the pool has them.
    pub(crate) checksums: Option<Arc<Checksums>>,
    /// Lost blocks found during the current rebuild, poisoned once the rebuild is over.
    pub(crate) lost_pending: Vec<crate::scrub::LostGroup>,
    /// Logical ranges of served writes under way that rewrite a lost range whole: from
    /// their planning until the range is no longer listed (or they failed). A served write
    /// clears the list only after releasing its stripes, so a block marked lost meanwhile
    /// (`Pool::poison_pending`, `Pool::mark_again_after_reset`, which run without stripe
    /// locks) would fall on its acknowledged data: marking skips these ranges.
    pub(crate) rewriting_lost: Vec<(u64, u64)>,
    /// What the resync after an unclean shutdown did when this pool was opened.
    pub(crate) resync: Option<ResyncReport>,
}

/// Write-hole protection.
pub(crate) struct WriteHoleState {
    pub(crate) mode: WriteHole,
    /// The open journal (`None` without one, and for a status peek).
    pub(crate) journal: Option<Arc<Journal>>,
    /// The write-intent bitmap of a pool without a journal (`intent.rs`).
    pub(crate) intent: Option<Arc<WriteIntent>>,
}

impl Pool {
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// How many members hold each copy-set record (the deferred-parity list, the IDO
    /// record): one more than the layout tolerates losing, at least two, so that every
    /// failure the layout survives leaves a copy of the newest record. With two copies only,
    /// a RAID6 or a 3-way mirror that lost the two members holding them would bring back an
    /// older record from another member at the next start (an older D-Map points at older
    /// data; an older list misses stripes whose second parity is stale).
    pub(crate) fn record_copies(&self) -> usize {
        crate::csum::copies_for(self.geo.disks(), self.geo.scheme().tolerance())
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
    /// The checksum region `(member offset, bytes)` on every member (`(0, 0)` without
    /// checksums).
    pub fn checksum_region(&self) -> Region {
        self.map.checksums
    }
    /// Member `i`'s data area starts at this member byte (checksums and metadata before it).
    pub fn data_offset_bytes(&self) -> u64 {
        self.map.data_offset_bytes
    }
    /// [`Pool::members_view`] by value, for windows run on threads of their own.
    pub(crate) fn owned_members(&self) -> crate::exec::OwnedMembers {
        crate::exec::OwnedMembers {
            members: self.members.handles.clone(),
            counters: Arc::clone(&self.members.counters),
            data_offset_bytes: self.map.data_offset_bytes,
            checksums: self.integrity.checksums.clone(),
        }
    }

    pub(crate) fn members_view(&self) -> Members<'_> {
        Members {
            members: &self.members.handles,
            counters: &self.members.counters,
            data_offset_bytes: self.map.data_offset_bytes,
            checksums: self.integrity.checksums.as_deref(),
            marked_lost_as_stored: false,
        }
    }
}

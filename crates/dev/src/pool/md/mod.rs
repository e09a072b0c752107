//! Linux MD's v1.x superblock as a pool's on-disk format (issue 23).
//!
//! A pool records its state on its members in one of two formats. raidforge's own
//! (`raidcore::superblock`, `persist.rs`) is the default and carries what MD cannot: the write
//! journal, block checksums, lazy parity, IDO, declustered layouts. MD's v1.x superblock
//! (`raidcore::md`) is the other, behind the same seams: [`Pool::open`] / [`Pool::assemble`]
//! read it ([`Pool::assemble`] recognises MD members by themselves), [`Pool::create`] writes it
//! under `--metadata md`, and `Pool::persist` records the pool's state in it. The rest of the
//! pool (planning, I/O, fail, replace, rebuild, verify, scrub, serve) does not know which
//! format it runs on: its members are [`MdMember`] views that put the pool's data area where
//! MD has it, and the pool's own metadata never reaches an MD member.
//!
//! How the pool's state maps onto MD's (MD's rules, as md.c and mdadm keep them):
//!
//! - **Roles**: slot `s` is held by the member whose dev number has role `s`. A member the pool
//!   failed keeps its role slot marked faulty (0xfffe) in the other members' superblocks, and its
//!   own superblock is not written again (MD cannot write a failed device), so its event count
//!   falls behind. A replacement gets the first free dev number from `raid_disks` up (md.c's
//!   `bind_rdev_to_array`); the replaced member's dev number becomes unused (0xffff), as after
//!   `mdadm --remove`.
//! - **Events**: every superblock update bumps the count, the same on every member written.
//!   mdadm assembles members whose count is at most one behind the newest; older ones are left
//!   out (here too, at adoption).
//! - **Clean / dirty**: `resync_offset` is all ones when clean. Before the first write after
//!   the superblocks said clean, they are rewritten dirty (`resync_offset` 0); closing the pool
//!   records it clean again, after every member was flushed. A pool that stops without closing
//!   stays dirty, and the kernel resyncs it; an adopted dirty array has its parity
//!   resynchronised from its `resync_offset` before anything else (a dirty array that is also
//!   degraded is refused, as the kernel refuses to start one without `--force`).
//! - **Recovery**: a replacement not yet rebuilt carries `FEATURE_RECOVERY_OFFSET` and the
//!   member sectors already rebuilt (the cycles rebuilt from the start on, as member rows), so
//!   that the kernel resumes where raidforge stopped, and raidforge resumes from MD's recovery
//!   offset when it adopts an array the kernel was rebuilding.
//!
//! Refused, writing nothing (each names the feature): reshape in progress, write journal
//! device, PPL, clustered arrays, bad block log entries, an internal write-intent bitmap, a
//! replacement (`mdadm --replace`) in progress, layouts `layout::md` refuses, members of
//! different arrays, and arrays with too few members left.
//!
//! Files: `found` (finding an MD superblock on a member), `adopt` (an array's state from its
//! members, and what is refused), `geometry` (MD's layouts as the pool's schemes and
//! geometry), `assemble` (assemble and open: the pool over an adopted array, and its settling),
//! `persist` (MD's superblock updates), `replace`, `create` (`create --metadata md`) and
//! `member` (the member view that puts MD's data area where the pool expects its own).

mod adopt;
mod assemble;
mod create;
mod found;
mod geometry;
mod member;
mod persist;
mod replace;

pub(crate) use found::{is_md_member, md_trouble, read_md_superblock, MdFound};
pub use geometry::mdadm_data_offset;

use super::*;

use layout::md::MdGeometry;
use raidcore::md::{MdSuperblock, MdVersion};

/// Pool offset of an MD member's data area: where raidforge's own pools start theirs, so that
/// every access below it (raidforge's metadata) reaches the member view and is refused there.
pub(crate) const MD_VIRTUAL_BASE: u64 = DEFAULT_DATA_OFFSET_BYTES;

/// The descriptor's `metadata` for an MD-format pool.
pub(crate) const MD_METADATA: &str = "md";

/// The member in one slot of an MD-format pool.
pub(crate) struct Slot {
    /// The member's superblock as last read or written (its own fields: dev number, device
    /// UUID, data offset and size, superblock offset, bad block log).
    sb: MdSuperblock,
    /// The member's raw handle, for superblock writes (`None` once failed).
    raw: Option<Arc<dyn Member>>,
}

/// A spare: its superblock is kept up to date, its space never used.
pub(crate) struct Spare {
    sb: MdSuperblock,
    raw: Arc<dyn Member>,
}

/// An MD-format pool's superblock state.
pub(crate) struct MdFormat {
    version: MdVersion,
    geo: MdGeometry,
    /// Array-wide fields, as the next superblocks will say them (events, roles, ...).
    array: MdSuperblock,
    /// Per slot, the member holding it (`None`: none since adoption).
    slots: Vec<Option<Slot>>,
    spares: Vec<Spare>,
    /// Writes may have run since the superblocks last said clean.
    dirty: bool,
    /// An adopted array not clean: its resync starts here (array sectors).
    resync_from: Option<u64>,
    /// Rows of one cycle of the pool's layout, and of the near layout within it.
    cycle_rows: u64,
    near_rows: u64,
    /// What adoption did that the user should know (members left out, a resync).
    notes: Vec<String>,
}

impl MdFormat {
    /// "md 1.2 raid5 left-symmetric" and such, for status.
    pub(crate) fn describe(&self) -> String {
        format!(
            "md {} raid{}{}",
            self.version.name(),
            self.array.level,
            self.geo
                .layout
                .name()
                .map(|l| format!(" {l}"))
                .unwrap_or_default()
        )
    }

    /// What follows a crash, for status (see `Status::after_crash`): the array was marked
    /// dirty before the first write (`resync_offset` 0), so whoever assembles it next
    /// resynchronises it from the start; RAID0 has nothing to resynchronise.
    pub(crate) fn after_crash(&self) -> &'static str {
        if self.array.level == 0 {
            "none"
        } else {
            "resync-whole"
        }
    }

    /// The member sector where slot `i`'s data starts.
    pub(crate) fn data_offset_bytes(&self, i: usize) -> Option<u64> {
        self.slots[i].as_ref().map(|s| s.sb.data_offset * 512)
    }
}

impl Pool {
    /// What adoption found worth saying (members left out, a resync), for the command to print.
    pub fn md_notes(&self) -> Vec<String> {
        self.md
            .as_ref()
            .map(|m| m.notes.clone())
            .unwrap_or_default()
    }

    /// The on-disk format, for status: `None` for raidforge's own.
    pub(crate) fn metadata_description(&self) -> Option<String> {
        self.md.as_ref().map(|m| m.describe())
    }
}

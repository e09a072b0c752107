//! The one map of a member's bytes. The fixed regions come first, their order and sizes
//! asserted at compile time (an overlap is a build error); the per-pool regions (write
//! journal, block checksums) and the data area follow at offsets every pool records in its
//! superblock, laid out and checked when the pool is created (`dev::pool`).
//!
//! ```text
//! member bytes          what                                          written by
//!       0 ..    4 KiB   superblock, copy A (even generations)         dev::pool::persist
//!   4 KiB ..  260 KiB   deferred-parity list (BPGL), 2 slots x 128 KiB dev::pool::lazy
//! 260 KiB ..  264 KiB   superblock, copy B (odd generations)          dev::pool::persist
//! 264 KiB ..  280 KiB   write-intent bitmap, 2 slots x 8 KiB          dev::pool::intent
//! 280 KiB ..  512 KiB   unused (room for future metadata)
//! 512 KiB ..    1 MiB   IDO record, 2 slots x 256 KiB                 dev::ido
//!   1 MiB .. J          write journal, when on: 2 checkpoint slots,   dev::journal
//!                       then the record ring (superblock v3 fields)
//!       J .. C          block checksums, when on (superblock v3)      dev::csum
//!       D ..            data area: 1 MiB when neither is on, else C   raidcore's plans
//!                       rounded up to 1 MiB and to the chunk
//! ```
//!
//! Every fixed region is whole 4 KiB blocks (members may be opened with O_DIRECT).

use crate::lazy::BPGL_SLOT_BYTES;
use crate::superblock::SUPERBLOCK_BYTES;

/// A range of member bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Region {
    /// First member byte.
    pub offset: u64,
    /// Length in bytes.
    pub bytes: u64,
}

impl Region {
    /// The region of `bytes` bytes from `offset`.
    pub const fn new(offset: u64, bytes: u64) -> Region {
        Region { offset, bytes }
    }
    /// The byte after the region.
    pub const fn end(&self) -> u64 {
        self.offset + self.bytes
    }
    /// Whether the region is empty (a feature that is off).
    pub const fn is_empty(&self) -> bool {
        self.bytes == 0
    }
    /// Whether the region ends by `later`'s start.
    pub const fn ends_by(&self, later: Region) -> bool {
        self.end() <= later.offset
    }
    /// Whether the two share a byte.
    pub const fn overlaps(&self, other: Region) -> bool {
        !self.is_empty()
            && !other.is_empty()
            && self.offset < other.end()
            && other.offset < self.end()
    }
    /// Whether the region starts and ends on multiples of `align`.
    pub const fn is_aligned(&self, align: u64) -> bool {
        self.offset.is_multiple_of(align) && self.bytes.is_multiple_of(align)
    }
    /// Half `i` (0 or 1) of the region: the slots of a two-copy record.
    pub const fn half(&self, i: u64) -> Region {
        Region::new(self.offset + i * (self.bytes / 2), self.bytes / 2)
    }
}

/// Superblock copy A (generations 0, 2, 4, ...).
pub const SUPERBLOCK_A: Region = Region::new(0, SUPERBLOCK_BYTES as u64);
/// The deferred-parity list's two slots ([`crate::lazy::BpglRecord`]).
pub const BPGL: Region = Region::new(SUPERBLOCK_A.end(), 2 * BPGL_SLOT_BYTES as u64);
/// Superblock copy B (generations 1, 3, 5, ...).
pub const SUPERBLOCK_B: Region = Region::new(BPGL.end(), SUPERBLOCK_BYTES as u64);
/// The write-intent bitmap's two slots ([`crate::intent::IntentRecord`]); unused (zero) on
/// pools made before it, which is no record.
pub const INTENT: Region = Region::new(
    SUPERBLOCK_B.end(),
    2 * crate::intent::INTENT_SLOT_BYTES as u64,
);
/// The engine's IDO record's two slots (`dev::ido`).
pub const IDO: Region = Region::new(512 << 10, 512 << 10);
/// Where the per-pool regions start: the write journal, then the block checksums.
pub const POOL_REGIONS_START: u64 = 1 << 20;
/// The data area's start when a pool has neither journal nor checksums.
pub const DEFAULT_DATA_OFFSET_BYTES: u64 = 1 << 20;

const _: () = assert!(SUPERBLOCK_A.ends_by(BPGL));
const _: () = assert!(BPGL.ends_by(SUPERBLOCK_B));
const _: () = assert!(SUPERBLOCK_B.ends_by(INTENT));
const _: () = assert!(INTENT.ends_by(IDO));
const _: () = assert!(INTENT.half(0).is_aligned(4096) && INTENT.half(1).is_aligned(4096));
const _: () = assert!(IDO.end() <= POOL_REGIONS_START);
const _: () = assert!(POOL_REGIONS_START <= DEFAULT_DATA_OFFSET_BYTES);
const _: () = assert!(SUPERBLOCK_A.is_aligned(4096) && SUPERBLOCK_B.is_aligned(4096));
const _: () = assert!(BPGL.half(0).is_aligned(4096) && BPGL.half(1).is_aligned(4096));
const _: () = assert!(IDO.half(0).is_aligned(4096) && IDO.half(1).is_aligned(4096));
const _: () = assert!(!BPGL.overlaps(IDO) && !SUPERBLOCK_B.overlaps(IDO));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_and_halves() {
        let a = Region::new(4096, 8192);
        assert_eq!(a.half(0), Region::new(4096, 4096));
        assert_eq!(a.half(1), Region::new(8192, 4096));
        assert!(a.overlaps(Region::new(12287, 1)));
        assert!(!a.overlaps(Region::new(12288, 1)));
        assert!(!a.overlaps(Region::new(0, 4096)));
        assert!(
            !a.overlaps(Region::new(5000, 0)),
            "an empty region overlaps nothing"
        );
        assert!(a.ends_by(Region::new(12288, 1)));
    }

    /// The map as every existing pool has it on disk: moving a fixed region is a format
    /// change.
    #[test]
    fn fixed_regions_are_where_pools_have_them() {
        assert_eq!((SUPERBLOCK_A.offset, SUPERBLOCK_A.bytes), (0, 4096));
        assert_eq!((BPGL.offset, BPGL.bytes), (4096, 256 << 10));
        assert_eq!((SUPERBLOCK_B.offset, SUPERBLOCK_B.bytes), (260 << 10, 4096));
        assert_eq!((INTENT.offset, INTENT.bytes), (264 << 10, 16 << 10));
        assert_eq!((IDO.offset, IDO.bytes), (512 << 10, 512 << 10));
        assert_eq!(DEFAULT_DATA_OFFSET_BYTES, 1 << 20);
    }
}

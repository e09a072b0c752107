//! Per-block checksums of a pool's members (superblock feature bit 1).
//!
//! Every member keeps a CRC-32C of each 4 KiB block of its own data area. A block's checksum
//! covers its bytes followed by the member index (u32 LE) and the block number (u64 LE), so a
//! block written to the wrong member or the wrong address does not verify where it landed.
//! Each entry also carries the block's *write generation* (u32, +1 every time the block's
//! checksum changes): entry = CRC (u32 LE) then generation (u32 LE), 8 bytes per block.
//!
//! Where they live: in the *checksum region* of the member itself **and** of the next
//! `copies - 1` members (`copies` = the scheme's tolerance + 1, at least 2, at most the
//! member count). Member `j`'s region has `copies` equal sections: section 0 holds its own
//! entries, section `k` a copy of member `(j - k) mod n`'s. A page of entries is written to
//! every copy, with the data it describes. At open, each block's entry is the copy with the
//! newest generation (serial-number order, so a wrapped u32 still compares right: the copies
//! of one block differ by a few writes); stale copies are rewritten.
//!
//! Why the copies on other members: a member that silently *loses* writes can lose a block's
//! write together with its own checksum page write; its stale block then matches its stale
//! checksum, and nothing on that member can tell. A copy on another member (that member is not
//! the one misbehaving, within the scheme's tolerance) still has the newer entry with the
//! higher generation, so the stale block fails to verify and is repaired from redundancy.
//! ZFS gets the same property from checksums kept in the parent block pointer (the checksum
//! never lives with the data it covers); Linux MD has no block checksums at all. The
//! generation decides which copy is newer without reading any data (two copies that differ
//! cannot both be right, and lost writes or crashes only ever lose the newer one).
//!
//! Why 4 KiB blocks rather than chunks: a small write then updates the checksum of the blocks it
//! writes without reading the rest of the chunk, and a mismatch localises the damage to one
//! block. The region costs `copies` x 8 bytes per 4 KiB block (about 1/250 of the data area
//! for two copies, with the sector seals).
//!
//! What is detected: bit rot and any change to a block's bytes behind the engine's back; a
//! misdirected write (the data at the wrong address does not verify there, and the intended
//! address still holds the old data under the new checksum); a lost data write, with or
//! without its checksum page write on the same member. A crash between a block's write and its
//! checksum pages' writes (without the write journal) leaves a block whose checksum disagrees:
//! a read then reconstructs the block from redundancy and accepts the result only if it
//! matches the stored checksum; otherwise the range is reported unrecoverable rather than
//! guessed at (rewrite it to clear it).
//!
//! In memory the newest entry of every member's blocks is loaded at open (`Vec<AtomicU64>`,
//! 2 MiB per GiB of member): reads verify against memory, so during a run even a lost
//! checksum page write is caught; an update stores the new values and then writes the pages of
//! the regions holding them, page writes of one member's entries serialised by a mutex so
//! that concurrent writers of one page never put an older snapshot over a newer one.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::Member;

/// Checksum granularity.
pub const BLOCK_BYTES: u64 = 4096;
/// Bytes of checksum entry per block (CRC-32C, then the write generation).
pub const SUM_BYTES: u64 = 8;
/// A checksum no block content produces in practice; written for blocks whose content is
/// known to be lost, so that reading them fails instead of returning what is there.
pub const POISON: u32 = 0xDEAD_10CC;

/// Entries per 512-byte sector of the region: each sector ends with a 4-byte mark and a seal,
/// the CRC-32C of its first 508 bytes and of its place ([`PLACE_MARK`]), so that a sector torn
/// by a crash (random bytes) or written to the wrong place is recognised at open and its copy
/// of those entries ignored in favour of another copy.
/// (Sectors, not pages: a crash tears a write at sector granularity, and the untorn sectors of
/// a torn page are still good.)
pub const ENTRIES_PER_SECTOR: u64 = (512 - 8) / SUM_BYTES;
/// Entries per 4 KiB region page.
pub const ENTRIES_PER_PAGE: u64 = ENTRIES_PER_SECTOR * 8;

/// Byte offset of block `block`'s entry within a section (one copy of a member's entries).
pub fn entry_offset(block: u64) -> u64 {
    let in_page = block % ENTRIES_PER_PAGE;
    block / ENTRIES_PER_PAGE * 4096
        + in_page / ENTRIES_PER_SECTOR * 512
        + in_page % ENTRIES_PER_SECTOR * SUM_BYTES
}

/// Bytes of one copy of a member's entries for `data_bytes` of data area (whole 4 KiB pages).
fn section_bytes(data_bytes: u64) -> u64 {
    let blocks = data_bytes.div_ceil(BLOCK_BYTES);
    blocks.div_ceil(ENTRIES_PER_PAGE) * 4096
}

/// Bytes 504..508 of a sector sealed with its place: the seal then also covers whose entries
/// the sector holds (the owner member) and the sector's index in their section, so that a
/// sector written to the wrong place of a region (a misdirected write) fails its seal there
/// instead of passing for the entries of other blocks, whose newer generations would win at
/// open. Sectors written before the mark existed hold zeros there and are checked as they
/// were sealed (CRC of bytes 0..508 alone).
const PLACE_MARK: [u8; 4] = *b"LOC1";

/// The seal of a marked sector: CRC-32C of bytes 0..508, the owner (u32 LE) and the sector's
/// index in the owner's section (u64 LE).
fn place_seal(sector: &[u8], owner: usize, index: u64) -> u32 {
    let mut st = crc_update(!0, &sector[..508]);
    st = crc_update(st, &(owner as u32).to_le_bytes());
    st = crc_update(st, &index.to_le_bytes());
    !st
}

/// Seals every sector of region pages of member `owner`'s entries, the first being sector
/// `first_sector` of its section: [`PLACE_MARK`] in bytes 504..508, the seal in the last 4.
fn seal_sectors(pages: &mut [u8], owner: usize, first_sector: u64) {
    for (k, sector) in pages.chunks_exact_mut(512).enumerate() {
        sector[504..508].copy_from_slice(&PLACE_MARK);
        let crc = place_seal(sector, owner, first_sector + k as u64);
        sector[508..512].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Whether a region sector is whole and in its place: sector `index` of member `owner`'s
/// section.
fn sector_ok(sector: &[u8], owner: usize, index: u64) -> bool {
    let stored = &sector[508..512];
    if sector[504..508] == PLACE_MARK {
        place_seal(sector, owner, index).to_le_bytes() == stored
    } else {
        (!crc_update(!0, &sector[..508])).to_le_bytes() == stored
    }
}

/// Bytes of checksum region for `data_bytes` of data area holding `copies` sections.
pub fn region_bytes(data_bytes: u64, copies: usize) -> u64 {
    section_bytes(data_bytes) * copies as u64
}

/// How many copies of each block's checksum a pool of `members` members tolerating
/// `tolerance` failures keeps: one more than the members that may misbehave, at least two
/// (so that even without redundancy a lost write is detected), at most one per member.
/// (The same rule places every metadata record's copies: [`raidcore::record::copies_for`].)
pub fn copies_for(members: usize, tolerance: usize) -> usize {
    raidcore::record::copies_for(members, tolerance)
}

fn pack(crc: u32, generation: u32) -> u64 {
    (generation as u64) << 32 | crc as u64
}
fn crc_of(e: u64) -> u32 {
    e as u32
}
fn gen_of(e: u64) -> u32 {
    (e >> 32) as u32
}
/// Whether generation `a` is newer than `b` (serial-number arithmetic, RFC 1982).
fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Continues a CRC-32C from raw state `c` (start with `!0`, finish with `!c`): portable form,
/// the superblock's table code.
fn crc_soft(c: u32, data: &[u8]) -> u32 {
    raidcore::superblock::crc32c_update(c, data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc_sse42(mut c: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut chunks = data.chunks_exact(8);
    let mut c64 = c as u64;
    for w in &mut chunks {
        c64 = _mm_crc32_u64(c64, u64::from_le_bytes(w.try_into().unwrap()));
    }
    c = c64 as u32;
    for &b in chunks.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    c
}

/// Continues a CRC-32C from raw state `c` (the CPU's instruction where it has one).
fn crc_update(c: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2 (checked just above).
            return unsafe { crc_sse42(c, data) };
        }
    }
    crc_soft(c, data)
}

/// The checksum of one block of member `member` at data-area block number `block`.
pub fn block_sum(member: u32, block: u64, data: &[u8]) -> u32 {
    debug_assert_eq!(data.len() as u64, BLOCK_BYTES);
    let c = crc_update(!0, data);
    finish(c, member, block)
}

fn finish(c: u32, member: u32, block: u64) -> u32 {
    let mut tail = [0u8; 12];
    tail[..4].copy_from_slice(&member.to_le_bytes());
    tail[4..].copy_from_slice(&block.to_le_bytes());
    let s = !crc_update(c, &tail);
    // Never the poison value (a legitimate block must not look lost).
    if s == POISON {
        s ^ 1
    } else {
        s
    }
}

/// CRC state after a block of zeros (what a freshly created member holds everywhere).
fn zero_state() -> u32 {
    crc_update(!0, &[0u8; BLOCK_BYTES as usize])
}

/// One member's checksums.
struct MemberSums {
    /// The newest entry of each block: generation << 32 | CRC.
    sums: Vec<AtomicU64>,
    /// Serialises page writes (snapshot + write to every copy) of this member's entries.
    pages: Mutex<()>,
    /// The entries as they were when the member was reset (a replacement put in), kept in
    /// memory until the rebuild ends: what a block reconstructed for it must match where no
    /// write changed it since the old member failed ([`Checksums::matches_before_reset`]).
    before_reset: Mutex<Option<Vec<u64>>>,
}

/// The checksums of every member of a pool.
pub struct Checksums {
    /// Member byte offset of the region.
    region_offset: u64,
    /// Blocks per member data area.
    blocks: u64,
    /// Bytes of one section (one copy of one member's entries).
    section: u64,
    /// Copies of each member's entries (sections per region).
    copies: usize,
    members: Vec<MemberSums>,
    /// Blocks `(member, block)` whose entry no present member held sealed at [`Checksums::load`]
    /// (a crash tore every copy): unknown, whatever was loaded for them.
    unsealed: Mutex<BTreeSet<(u32, u64)>>,
    /// `unsealed` may be non-empty (a write need not look otherwise).
    any_unsealed: std::sync::atomic::AtomicBool,
}

/// A block whose content does not match its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub member: u32,
    /// Data-area byte offset of the block.
    pub offset_bytes: u64,
}

/// A checksum page write that failed: the member it went to (fail it) and the error.
#[derive(Debug)]
pub struct PageWriteError {
    pub member: usize,
    pub source: std::io::Error,
}

impl std::fmt::Display for PageWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "member {}: checksum page write: {}",
            self.member, self.source
        )
    }
}

impl From<PageWriteError> for std::io::Error {
    fn from(e: PageWriteError) -> std::io::Error {
        std::io::Error::new(e.source.kind(), e.to_string())
    }
}

type MemberSlots = [Option<Arc<dyn Member>>];

impl Checksums {
    fn empty(n: usize, region_offset: u64, data_bytes: u64, copies: usize) -> Checksums {
        assert!(
            (1..=n.max(1)).contains(&copies),
            "{copies} checksum copies for {n} members"
        );
        let blocks = data_bytes.div_ceil(BLOCK_BYTES);
        Checksums {
            region_offset,
            blocks,
            section: section_bytes(data_bytes),
            copies,
            members: (0..n)
                .map(|_| MemberSums {
                    sums: (0..blocks).map(|_| AtomicU64::new(0)).collect(),
                    pages: Mutex::new(()),
                    before_reset: Mutex::new(None),
                })
                .collect(),
            unsealed: Mutex::new(BTreeSet::new()),
            any_unsealed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether block `block` of member `member` had no sealed copy of its entry when the
    /// checksums were loaded (and has not been written since: a write records it again).
    pub fn unsealed_at_load(&self, member: u32, block: u64) -> bool {
        self.unsealed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(member, block))
    }

    /// The members holding copies of member `i`'s entries (`i` itself first).
    pub fn holders(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.copies).map(move |k| self.holder(i, k))
    }

    /// Member holding copy `k` of member `i`'s entries (copy 0: `i` itself).
    fn holder(&self, i: usize, k: usize) -> usize {
        (i + k) % self.members.len()
    }

    /// Member byte offset of section `k` (copy `k` of member `j - k`'s entries) of a region.
    fn section_offset(&self, k: usize) -> u64 {
        self.region_offset + k as u64 * self.section
    }

    /// Checksums of all-zero members (a new pool), written to every member's region.
    pub fn create_zeroed(
        members: &MemberSlots,
        region_offset: u64,
        data_bytes: u64,
        copies: usize,
    ) -> std::io::Result<Checksums> {
        let c = Checksums::empty(members.len(), region_offset, data_bytes, copies);
        let z = zero_state();
        for (i, m) in c.members.iter().enumerate() {
            for (b, s) in m.sums.iter().enumerate() {
                s.store(pack(finish(z, i as u32, b as u64), 0), Ordering::Relaxed);
            }
        }
        for i in 0..members.len() {
            c.write_pages(i, members, 0, c.blocks)?;
        }
        Ok(c)
    }

    /// Member `i` holds zeros now (a new or replacement member): its checksums say so, in
    /// memory and in every copy (generations continue, so the new entries are the newest),
    /// and the copies of other members' entries its region holds are written from memory.
    pub fn reset_zeroed(&self, i: usize, members: &MemberSlots) -> Result<(), PageWriteError> {
        // The old member's entries, unless a replacement replaced before its rebuild ended
        // took them already (its own are zeros and what it was rebuilt with).
        self.members[i]
            .before_reset
            .lock()
            .unwrap()
            .get_or_insert_with(|| {
                self.members[i]
                    .sums
                    .iter()
                    .map(|s| s.load(Ordering::Relaxed))
                    .collect()
            });
        let z = zero_state();
        for (b, s) in self.members[i].sums.iter().enumerate() {
            let g = gen_of(s.load(Ordering::Relaxed)).wrapping_add(1);
            s.store(pack(finish(z, i as u32, b as u64), g), Ordering::Relaxed);
        }
        self.write_pages(i, members, 0, self.blocks)?;
        let n = self.members.len();
        for k in 1..self.copies {
            let owner = (i + n - k) % n;
            self.write_copies(owner, k..k + 1, members, 0, self.blocks)?;
        }
        Ok(())
    }

    /// Loads every present member's entries: for each block the copy with the newest
    /// generation among the members present whose sector holding it is sealed; between copies
    /// of one generation, the first usable one (the block's own member's, when present) is
    /// taken (a read then repairs or reports the block if it does not match). Copies found
    /// stale or unsealed are rewritten (best effort: a failing write leaves the newest entry
    /// in memory, and the next write of the page retries).
    /// Returns the checksums and the region pages `(member, page)` holding entries whose every
    /// copy was torn (for [`crate::pool::Pool`] to vouch for from their stripes).
    pub fn load(
        members: &MemberSlots,
        region_offset: u64,
        data_bytes: u64,
        copies: usize,
    ) -> std::io::Result<(Checksums, BTreeSet<(u32, u64)>)> {
        let c = Checksums::empty(members.len(), region_offset, data_bytes, copies);
        let n = members.len();
        let len = c.section as usize;
        let mut torn: BTreeSet<(u32, u64)> = BTreeSet::new();
        for i in 0..n {
            // Every copy of member i's entries that a present member holds.
            // (copy number, section bytes)
            let mut found: Vec<(usize, Vec<u8>)> = Vec::new();
            for k in 0..copies {
                let Some(m) = &members[c.holder(i, k)] else {
                    continue;
                };
                let mut buf = vec![0u8; len];
                m.read_at(&mut buf, c.section_offset(k))?;
                found.push((k, buf));
            }
            if found.is_empty() {
                continue;
            }
            // Sealed sectors of each copy (a torn sector's copy of its entries is ignored;
            // when no copy of a sector is sealed, its entries are unknown: all copies are
            // read as they are and the page is reported in `torn`, for the stripes of its
            // blocks to vouch).
            let whole: Vec<Vec<bool>> = found
                .iter()
                .map(|(_, buf)| {
                    buf.chunks_exact(512)
                        .enumerate()
                        .map(|(s, sector)| sector_ok(sector, i, s as u64))
                        .collect()
                })
                .collect();
            let mut stale_blocks: Vec<(u64, u64)> = Vec::new();
            for (b, s) in c.members[i].sums.iter().enumerate() {
                let at = entry_offset(b as u64) as usize;
                let sector = at / 512;
                let entry = |buf: &Vec<u8>| {
                    let crc = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap());
                    let g = u32::from_le_bytes(buf[at + 4..at + 8].try_into().unwrap());
                    pack(crc, g)
                };
                let any_whole = whole.iter().any(|w| w[sector]);
                if !any_whole {
                    torn.insert((i as u32, b as u64 / ENTRIES_PER_PAGE));
                    c.unsealed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert((i as u32, b as u64));
                    c.any_unsealed.store(true, Ordering::Relaxed);
                }
                let mut usable = found
                    .iter()
                    .zip(&whole)
                    .filter(|(_, w)| w[sector] || !any_whole)
                    .map(|((k, buf), _)| (k, buf));
                // The newest copy so far.
                let (_, buf0) = usable.next().expect("at least one usable copy");
                let mut best = entry(buf0);
                // A copy left out (unsealed) is rewritten from a sealed one; entries with no
                // sealed copy are left to their stripes' vouching.
                let mut differ = any_whole && whole.iter().any(|w| !w[sector]);
                for (_, buf) in usable {
                    let e = entry(buf);
                    if e != best {
                        differ = true;
                        if newer(gen_of(e), gen_of(best)) {
                            best = e;
                        }
                    }
                }
                s.store(best, Ordering::Relaxed);
                if differ {
                    stale_blocks.push((b as u64, b as u64 + 1));
                }
            }
            for (first, end) in page_runs(stale_blocks) {
                let _ = c.write_pages(i, members, first, end);
            }
        }
        Ok((c, torn))
    }

    /// The stored checksum of member `i`'s block at data-area `offset_bytes`.
    pub fn stored(&self, i: usize, offset_bytes: u64) -> u32 {
        crc_of(self.members[i].sums[(offset_bytes / BLOCK_BYTES) as usize].load(Ordering::Relaxed))
    }

    /// The blocks of `data` (read from member `i` at data-area byte `offset_bytes`, both block
    /// aligned) that do not match their checksums.
    pub fn verify(&self, i: usize, offset_bytes: u64, data: &[u8]) -> Vec<Mismatch> {
        assert!(
            offset_bytes.is_multiple_of(BLOCK_BYTES)
                && (data.len() as u64).is_multiple_of(BLOCK_BYTES),
            "checksummed member I/O must be whole 4 KiB blocks ({offset_bytes}+{})",
            data.len()
        );
        let first = offset_bytes / BLOCK_BYTES;
        data.chunks_exact(BLOCK_BYTES as usize)
            .enumerate()
            .filter_map(|(k, blk)| {
                let b = first + k as u64;
                let want = crc_of(self.members[i].sums[b as usize].load(Ordering::Relaxed));
                (block_sum(i as u32, b, blk) != want).then_some(Mismatch {
                    member: i as u32,
                    offset_bytes: b * BLOCK_BYTES,
                })
            })
            .collect()
    }

    /// Whether every block of member `i` that data-area bytes `[offset_bytes, offset_bytes +
    /// len)` touch has the checksum of zeros stored, so that zeros read there verify (a hole
    /// whose checksum says otherwise holds damage a read would repair or report, not zeros).
    pub fn zeros_match(&self, i: usize, offset_bytes: u64, len: u64) -> bool {
        static ZERO: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
        let z = *ZERO.get_or_init(zero_state);
        let Some(m) = self.members.get(i) else {
            return false;
        };
        let first = offset_bytes / BLOCK_BYTES;
        let end = offset_bytes.saturating_add(len).div_ceil(BLOCK_BYTES);
        (first..end).all(|b| {
            m.sums
                .get(b as usize)
                .is_some_and(|e| crc_of(e.load(Ordering::Relaxed)) == finish(z, i as u32, b))
        })
    }

    /// Whether `data`, computed for member `i` at data-area byte `offset_bytes` (whole
    /// blocks), matches the entries the member had before its last reset (kept while it is
    /// rebuilt). False when none are kept (the pool was opened since), when a block's old
    /// entry is a loss mark, and for blocks written while the member was missing (their old
    /// entries are older than the data): a caller must then treat the data as unchecked.
    pub fn matches_before_reset(&self, i: usize, offset_bytes: u64, data: &[u8]) -> bool {
        let Some(m) = self.members.get(i) else {
            return false;
        };
        let kept = m.before_reset.lock().unwrap();
        let Some(old) = kept.as_ref() else {
            return false;
        };
        if !offset_bytes.is_multiple_of(BLOCK_BYTES)
            || !(data.len() as u64).is_multiple_of(BLOCK_BYTES)
        {
            return false;
        }
        let first = offset_bytes / BLOCK_BYTES;
        data.chunks_exact(BLOCK_BYTES as usize)
            .enumerate()
            .all(|(k, blk)| {
                let b = first + k as u64;
                old.get(b as usize).is_some_and(|&e| {
                    crc_of(e) != POISON && block_sum(i as u32, b, blk) == crc_of(e)
                })
            })
    }

    /// The blocks of member `i` whose entry was a loss mark when the member was last reset
    /// (kept while it is rebuilt), as data-area byte offsets.
    pub fn marked_before_reset(&self, i: usize) -> Vec<u64> {
        let Some(m) = self.members.get(i) else {
            return Vec::new();
        };
        let kept = m.before_reset.lock().unwrap();
        kept.as_ref().map_or_else(Vec::new, |old| {
            old.iter()
                .enumerate()
                .filter(|(_, &e)| crc_of(e) == POISON)
                .map(|(b, _)| b as u64 * BLOCK_BYTES)
                .collect()
        })
    }

    /// Forgets the entries kept by [`Checksums::reset_zeroed`] (the rebuild is over).
    pub fn forget_before_reset(&self) {
        for m in &self.members {
            *m.before_reset.lock().unwrap() = None;
        }
    }

    /// Whether `data` matches the stored checksums (the same alignment as [`Checksums::verify`]).
    pub fn matches(&self, i: usize, offset_bytes: u64, data: &[u8]) -> bool {
        self.verify(i, offset_bytes, data).is_empty()
    }

    /// Sets block `b`'s entry to `crc`, one generation on.
    fn set(&self, i: usize, b: u64, crc: u32) {
        let s = &self.members[i].sums[b as usize];
        let g = gen_of(s.load(Ordering::Relaxed)).wrapping_add(1);
        s.store(pack(crc, g), Ordering::Relaxed);
    }

    /// Records the checksums of `data`, just written to member `i` at data-area byte
    /// `offset_bytes`, in memory only; [`Checksums::write_pages`] makes them durable.
    pub fn record(&self, i: usize, offset_bytes: u64, data: &[u8]) {
        assert!(
            offset_bytes.is_multiple_of(BLOCK_BYTES)
                && (data.len() as u64).is_multiple_of(BLOCK_BYTES),
            "checksummed member I/O must be whole 4 KiB blocks ({offset_bytes}+{})",
            data.len()
        );
        let first = offset_bytes / BLOCK_BYTES;
        for (k, blk) in data.chunks_exact(BLOCK_BYTES as usize).enumerate() {
            let b = first + k as u64;
            self.set(i, b, block_sum(i as u32, b, blk));
        }
        if self.any_unsealed.load(Ordering::Relaxed) {
            let end = first + data.len() as u64 / BLOCK_BYTES;
            let mut u = self.unsealed.lock().unwrap_or_else(|e| e.into_inner());
            u.retain(|&(m, b)| m != i as u32 || !(first..end).contains(&b));
        }
    }

    /// Vouches for the blocks of `data` (read from member `i` at data-area byte
    /// `offset_bytes`, block aligned) from their data, as they are: the entries of blocks that
    /// do not match are rewritten in memory ([`Checksums::write_pages`] makes them durable),
    /// except blocks marked lost, which stay lost. Returns how many changed. (The resync after
    /// an unclean shutdown: a crash between a block's write and its checksum's leaves a good
    /// block that would otherwise never read again.)
    pub fn revouch(&self, i: usize, offset_bytes: u64, data: &[u8]) -> u64 {
        let first = offset_bytes / BLOCK_BYTES;
        let mut changed = 0;
        for m in self.verify(i, offset_bytes, data) {
            let b = m.offset_bytes / BLOCK_BYTES;
            if crc_of(self.members[i].sums[b as usize].load(Ordering::Relaxed)) == POISON {
                continue;
            }
            let k = (b - first) as usize * BLOCK_BYTES as usize;
            self.set(
                i,
                b,
                block_sum(i as u32, b, &data[k..k + BLOCK_BYTES as usize]),
            );
            changed += 1;
        }
        changed
    }

    /// Member `i`'s entry for its block at data-area `offset_bytes`, as stored in memory (to
    /// be put back with [`Checksums::restore_entry`] when a tentative record is undone).
    pub(crate) fn entry(&self, i: usize, offset_bytes: u64) -> u64 {
        self.members[i].sums[(offset_bytes / BLOCK_BYTES) as usize].load(Ordering::Relaxed)
    }

    /// Puts back an entry [`Checksums::entry`] returned (in memory only).
    pub(crate) fn restore_entry(&self, i: usize, offset_bytes: u64, e: u64) {
        self.members[i].sums[(offset_bytes / BLOCK_BYTES) as usize].store(e, Ordering::Relaxed);
    }

    /// Marks member `i`'s block at `offset_bytes` as lost (reads of it fail from now on) and
    /// writes its pages.
    pub fn poison(
        &self,
        i: usize,
        members: &MemberSlots,
        offset_bytes: u64,
    ) -> Result<(), PageWriteError> {
        let b = offset_bytes / BLOCK_BYTES;
        self.set(i, b, POISON);
        self.write_pages(i, members, b, b + 1)
    }

    /// The bytes of the pages of member `i`'s entries holding blocks `first..end`, and the
    /// first page's number.
    fn page_bytes(&self, i: usize, first: u64, end: u64) -> (u64, Vec<u8>) {
        let per_page = ENTRIES_PER_PAGE;
        let (p0, p1) = (first / per_page, (end - 1) / per_page + 1);
        let sums = &self.members[i].sums;
        let mut buf = vec![0u8; ((p1 - p0) * 4096) as usize];
        for b in p0 * per_page..(p1 * per_page).min(self.blocks) {
            let at = (entry_offset(b) - p0 * 4096) as usize;
            let e = sums[b as usize].load(Ordering::Relaxed);
            buf[at..at + 4].copy_from_slice(&crc_of(e).to_le_bytes());
            buf[at + 4..at + 8].copy_from_slice(&gen_of(e).to_le_bytes());
        }
        seal_sectors(&mut buf, i, p0 * 8);
        (p0, buf)
    }

    /// Writes the pages of member `i`'s entries holding blocks `first..end` to every copy on a
    /// present member (its own region first). The first failing member is reported (after
    /// the other copies were written).
    pub fn write_pages(
        &self,
        i: usize,
        members: &MemberSlots,
        first: u64,
        end: u64,
    ) -> Result<(), PageWriteError> {
        self.write_copies(i, 0..self.copies, members, first, end)
    }

    /// Writes copies `ks` of member `owner`'s entries (blocks `first..end`), copy `k` to
    /// `holder(owner, k)`. Every copy is attempted even after one fails (the others stay
    /// current); the first failure is returned.
    fn write_copies(
        &self,
        owner: usize,
        ks: std::ops::Range<usize>,
        members: &MemberSlots,
        first: u64,
        end: u64,
    ) -> Result<(), PageWriteError> {
        if first >= end {
            return Ok(());
        }
        let _g = self.members[owner]
            .pages
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (p0, buf) = self.page_bytes(owner, first, end);
        let mut first_err = None;
        for k in ks {
            let h = self.holder(owner, k);
            if let Some(m) = &members[h] {
                if let Err(source) = m.write_at(&buf, self.section_offset(k) + p0 * 4096) {
                    first_err.get_or_insert(PageWriteError { member: h, source });
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Blocks per member.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }
}

/// Block ranges `[first, end)` merged into runs of whole checksum-region pages.
pub(crate) fn page_runs(mut blocks: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    blocks.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in blocks {
        let (pa, pb) = (a / ENTRIES_PER_PAGE, (b - 1) / ENTRIES_PER_PAGE + 1);
        match out.last_mut() {
            Some(last) if pa <= last.1 => last.1 = last.1.max(pb),
            _ => out.push((pa, pb)),
        }
    }
    out.into_iter()
        .map(|(pa, pb)| (pa * ENTRIES_PER_PAGE, pb * ENTRIES_PER_PAGE))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_paths_agree_with_the_reference() {
        // The standard CRC-32C check value, through both paths.
        assert_eq!(!crc_soft(!0, b"123456789"), 0xE306_9283);
        assert_eq!(!crc_update(!0, b"123456789"), 0xE306_9283);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 + 7) as u8).collect();
        for len in [0, 1, 7, 8, 9, 4096, 9999] {
            assert_eq!(crc_soft(!0, &data[..len]), crc_update(!0, &data[..len]));
        }
        assert_eq!(raidcore::superblock::crc32c(&data), !crc_update(!0, &data));
    }

    #[test]
    fn checksums_name_member_and_address() {
        let blk = vec![7u8; 4096];
        let s = block_sum(1, 5, &blk);
        assert_ne!(s, block_sum(2, 5, &blk), "another member");
        assert_ne!(s, block_sum(1, 6, &blk), "another block");
        let mut bad = blk.clone();
        bad[100] ^= 1;
        assert_ne!(s, block_sum(1, 5, &bad), "a flipped bit");
        let z = vec![0u8; 4096];
        assert_eq!(finish(zero_state(), 3, 9), block_sum(3, 9, &z));
        assert_eq!(region_bytes(4096 * 504, 1), 4096);
        assert_eq!(region_bytes(4096 * 505, 1), 8192);
        assert_eq!(region_bytes(4096 * 505, 2), 16384);
        assert_eq!(entry_offset(62), 62 * 8);
        assert_eq!(entry_offset(63), 512);
        assert_eq!(entry_offset(504), 4096);
    }

    #[test]
    fn a_sector_is_sealed_to_its_place_and_old_seals_still_verify() {
        let mut page = vec![0u8; 4096];
        for (k, b) in page.iter_mut().enumerate() {
            *b = (k * 13 + 1) as u8;
        }
        seal_sectors(&mut page, 2, 16);
        for (k, sector) in page.chunks_exact(512).enumerate() {
            let at = 16 + k as u64;
            assert!(sector_ok(sector, 2, at), "sector {k} in its place");
            assert!(!sector_ok(sector, 2, at + 1), "sector {k} one sector off");
            assert!(!sector_ok(sector, 2, at + 8), "sector {k} one page off");
            assert!(
                !sector_ok(sector, 3, at),
                "sector {k} in another member's section"
            );
            let mut torn = sector.to_vec();
            torn[100] ^= 4;
            assert!(!sector_ok(&torn, 2, at), "sector {k} with a flipped bit");
        }
        // A sector sealed before the mark existed: zeros in 504..508, CRC of 0..508.
        let mut old = page[..512].to_vec();
        old[504..508].fill(0);
        let crc = !crc_update(!0, &old[..508]);
        old[508..512].copy_from_slice(&crc.to_le_bytes());
        assert!(sector_ok(&old, 2, 16));
        assert!(
            sector_ok(&old, 5, 99),
            "an old seal does not know its place"
        );
        old[7] ^= 1;
        assert!(!sector_ok(&old, 2, 16));
    }
}

//! Per-block checksums of a pool's members (superblock feature bit 1).
//!
//! Every member keeps a CRC-32C of each 4 KiB block of its own data area in a *checksum
//! region* on the same member (between the metadata and the data area): 4 bytes per block,
//! block `b`'s checksum at region byte `4 b`. A block's checksum covers its bytes followed by
//! the member index (u32 LE) and the block number (u64 LE), so a block written to the wrong
//! member or the wrong address does not verify where it landed.
//!
//! Why 4 KiB blocks rather than chunks: a small write then updates the checksum of the blocks it
//! writes without reading the rest of the chunk, and a mismatch localises the damage to one
//! block (the repair reconstructs one block per affected unit, not a chunk). The region costs
//! 1/1024 of the data area.
//!
//! Why on the same member: the checksums fail with the data they cover (a failed member takes
//! both away, a rebuilt member gets both back, the rebuild writes them), and no member's
//! checksums depend on another member being present.
//!
//! What is detected: bit rot and any change to a block's bytes behind the engine's back; a
//! misdirected write (the data at the wrong address does not verify there, and the intended
//! address still holds the old data under the new checksum); a lost data write whose checksum
//! write was not lost. Not detected by checksums alone: a lost write of both the block and its
//! checksum page (old data with its old, valid checksum): scrub's parity check still sees the
//! stripe disagree but cannot tell which unit is stale. A crash between a block's write and
//! its checksum page's write (without the write journal) leaves a block whose checksum
//! disagrees: a read then reconstructs the block from redundancy and accepts the result only
//! if it matches the stored checksum; otherwise the range is reported unrecoverable rather
//! than guessed at (rewrite it to clear it).
//!
//! In memory the checksums of every present member are loaded at open (`Vec<AtomicU32>`, 1 MiB
//! per GiB of member); an update stores the new values and then writes the 4 KiB pages of the
//! region holding them, page writes of one member serialised by a mutex so that concurrent
//! writers of one page never put an older snapshot over a newer one.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::Member;

/// Checksum granularity.
pub const BLOCK_BYTES: u64 = 4096;
/// Bytes of checksum per block.
pub const SUM_BYTES: u64 = 4;
/// A checksum no block content produces in practice; written for blocks whose content is
/// known to be lost, so that reading them fails instead of returning what is there.
pub const POISON: u32 = 0xDEAD_10CC;

/// Bytes of checksum region for `data_bytes` of data area, rounded up to whole 4 KiB pages.
pub fn region_bytes(data_bytes: u64) -> u64 {
    let blocks = data_bytes.div_ceil(BLOCK_BYTES);
    (blocks * SUM_BYTES).div_ceil(4096) * 4096
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
    sums: Vec<AtomicU32>,
    /// Serialises page writes (snapshot + write) of this member.
    pages: Mutex<()>,
}

/// The checksums of every member of a pool.
pub struct Checksums {
    /// Member byte offset of the region.
    region_offset: u64,
    /// Blocks per member data area.
    blocks: u64,
    members: Vec<MemberSums>,
}

/// A block whose content does not match its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub member: u32,
    /// Data-area byte offset of the block.
    pub offset_bytes: u64,
}

impl Checksums {
    fn empty(n: usize, region_offset: u64, data_bytes: u64) -> Checksums {
        let blocks = data_bytes.div_ceil(BLOCK_BYTES);
        Checksums {
            region_offset,
            blocks,
            members: (0..n)
                .map(|_| MemberSums {
                    sums: (0..blocks).map(|_| AtomicU32::new(0)).collect(),
                    pages: Mutex::new(()),
                })
                .collect(),
        }
    }

    /// Checksums of all-zero members (a new pool), written to every member's region.
    pub fn create_zeroed(
        members: &[Option<Arc<dyn Member>>],
        region_offset: u64,
        data_bytes: u64,
    ) -> std::io::Result<Checksums> {
        let c = Checksums::empty(members.len(), region_offset, data_bytes);
        for (i, m) in members.iter().enumerate() {
            if let Some(m) = m {
                c.reset_zeroed(i, &**m)?;
            }
        }
        Ok(c)
    }

    /// Member `i` holds zeros now (a new or replacement member): its checksums say so, in
    /// memory and in its region.
    pub fn reset_zeroed(&self, i: usize, m: &dyn Member) -> std::io::Result<()> {
        let z = zero_state();
        for (b, s) in self.members[i].sums.iter().enumerate() {
            s.store(finish(z, i as u32, b as u64), Ordering::Relaxed);
        }
        self.write_pages(i, m, 0, self.blocks)
    }

    /// Loads every present member's region.
    pub fn load(
        members: &[Option<Arc<dyn Member>>],
        region_offset: u64,
        data_bytes: u64,
    ) -> std::io::Result<Checksums> {
        let c = Checksums::empty(members.len(), region_offset, data_bytes);
        let len = region_bytes(data_bytes) as usize;
        for (i, m) in members.iter().enumerate() {
            let Some(m) = m else { continue };
            let mut buf = vec![0u8; len];
            m.read_at(&mut buf, region_offset)?;
            for (b, s) in c.members[i].sums.iter().enumerate() {
                let at = b * SUM_BYTES as usize;
                s.store(
                    u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()),
                    Ordering::Relaxed,
                );
            }
        }
        Ok(c)
    }

    /// The stored checksum of member `i`'s block at data-area `offset_bytes`.
    pub fn stored(&self, i: usize, offset_bytes: u64) -> u32 {
        self.members[i].sums[(offset_bytes / BLOCK_BYTES) as usize].load(Ordering::Relaxed)
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
                let want = self.members[i].sums[b as usize].load(Ordering::Relaxed);
                (block_sum(i as u32, b, blk) != want).then_some(Mismatch {
                    member: i as u32,
                    offset_bytes: b * BLOCK_BYTES,
                })
            })
            .collect()
    }

    /// Whether `data` matches the stored checksums (the same alignment as [`Checksums::verify`]).
    pub fn matches(&self, i: usize, offset_bytes: u64, data: &[u8]) -> bool {
        self.verify(i, offset_bytes, data).is_empty()
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
            self.members[i].sums[b as usize].store(block_sum(i as u32, b, blk), Ordering::Relaxed);
        }
    }

    /// Marks member `i`'s block at `offset_bytes` as lost (reads of it fail from now on) and
    /// writes its page.
    pub fn poison(&self, i: usize, m: &dyn Member, offset_bytes: u64) -> std::io::Result<()> {
        let b = offset_bytes / BLOCK_BYTES;
        self.members[i].sums[b as usize].store(POISON, Ordering::Relaxed);
        self.write_pages(i, m, b, b + 1)
    }

    /// Writes the region pages of member `i` holding blocks `first..end`.
    pub fn write_pages(
        &self,
        i: usize,
        m: &dyn Member,
        first: u64,
        end: u64,
    ) -> std::io::Result<()> {
        if first >= end {
            return Ok(());
        }
        let per_page = 4096 / SUM_BYTES;
        let (p0, p1) = (first / per_page, (end - 1) / per_page + 1);
        let _g = self.members[i]
            .pages
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let sums = &self.members[i].sums;
        let mut buf = vec![0u8; ((p1 - p0) * 4096) as usize];
        for b in p0 * per_page..(p1 * per_page).min(self.blocks) {
            let at = ((b - p0 * per_page) * SUM_BYTES) as usize;
            buf[at..at + 4]
                .copy_from_slice(&sums[b as usize].load(Ordering::Relaxed).to_le_bytes());
        }
        m.write_at(&buf, self.region_offset + p0 * 4096)
    }

    /// Blocks per member.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }
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
        assert_eq!(region_bytes(4096 * 1024), 4096);
        assert_eq!(region_bytes(4096 * 1025), 8192);
    }
}

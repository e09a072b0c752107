//! The write-intent bitmap: which regions of the array may hold stripes a crash left half
//! written, so that a pool without a write journal resynchronises only those after an unclean
//! shutdown (issue 21, defect 4), as Linux MD's write-intent bitmap lets it.
//!
//! The array's cycles are grouped into *regions* of [`region_cycles_for`] cycles. Before a
//! client write reaches the members, the executor makes sure the bitmap on the members has the
//! write's regions set (written and flushed to every present member, two slots alternating
//! like the other records). A region's bit is cleared once its writes are over, flushed and
//! the region has been idle for a while; the cleared bitmap reaches the members with the next
//! bitmap write, or at a clean shutdown. After a crash, assembly reads the newest valid
//! bitmap and resynchronises the regions it names (`crate::resync_cycle`).
//!
//! ```text
//! offset  size  field
//!      0     8  magic "RFINTENT"
//!      8     4  version (1)
//!     12     4  length L: header + bitmap + CRC
//!     16    16  array UUID
//!     32     8  sequence (bumped on every write; the highest valid slot on any member wins)
//!     40     8  cycles per region
//!     48     4  regions R (<= INTENT_MAX_REGIONS)
//!     52     4  reserved (0)
//!     56  ceil(R/8)  bitmap: bit r (byte r/8, bit r%8) set when region r may be inconsistent
//!    L-4     4  CRC-32C of bytes 0..L-4
//! ```
//! Padded with zeros to a multiple of 4096 bytes. The slots are
//! [`crate::region::INTENT`]'s two halves.

use std::collections::BTreeSet;

use crate::record::Frame;

/// Magic of a write-intent record.
pub const INTENT_MAGIC: &[u8; 8] = b"RFINTENT";
/// Format version.
pub const INTENT_VERSION: u32 = 1;
/// Bytes of one slot.
pub const INTENT_SLOT_BYTES: usize = 8192;
const INTENT_HEADER: usize = 56;
/// The most regions a record holds (its bitmap is at most 4 KiB).
pub const INTENT_MAX_REGIONS: u64 = 32768;
/// The least logical bytes a region covers (MD's default bitmap chunk for large arrays is
/// 64 MiB): the first write into a region costs a bitmap write, so regions are not small.
pub const INTENT_REGION_BYTES_MIN: u64 = 64 << 20;

const INTENT_FRAME: Frame = Frame {
    magic: INTENT_MAGIC,
    version: INTENT_VERSION,
    header_bytes: INTENT_HEADER,
    max_bytes: INTENT_SLOT_BYTES,
    align: 4096,
};

const _: () = assert!(INTENT_HEADER + (INTENT_MAX_REGIONS as usize).div_ceil(8) + 4 <= 8192);

/// Cycles per region for an array of `cycles` cycles of `cycle_bytes` logical bytes each: at
/// least [`INTENT_REGION_BYTES_MIN`] of data, and few enough regions to fit a record.
pub fn region_cycles_for(cycles: u64, cycle_bytes: u64) -> u64 {
    assert!(cycle_bytes > 0, "a cycle holds data");
    INTENT_REGION_BYTES_MIN
        .div_ceil(cycle_bytes)
        .max(cycles.div_ceil(INTENT_MAX_REGIONS))
        .max(1)
}

/// A write-intent record, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntentRecord {
    /// Array UUID (a record of another array is ignored).
    pub uuid: [u8; 16],
    /// Write sequence.
    pub sequence: u64,
    /// Cycles per region.
    pub region_cycles: u64,
    /// Regions of the array.
    pub regions: u64,
    /// The regions that may be inconsistent, ascending.
    pub dirty: BTreeSet<u64>,
}

impl IntentRecord {
    /// The record's bytes (padded to whole 4 KiB blocks). Panics on more regions than a record
    /// holds or a dirty region out of range (the caller's bug).
    pub fn encode(&self) -> Vec<u8> {
        assert!(
            self.regions <= INTENT_MAX_REGIONS,
            "too many intent regions"
        );
        assert!(
            self.dirty.iter().all(|&r| r < self.regions),
            "a dirty region out of range"
        );
        let bitmap = (self.regions as usize).div_ceil(8);
        let mut b = INTENT_FRAME.begin(INTENT_FRAME.padded(INTENT_HEADER + bitmap + 4));
        b.extend_from_slice(&self.uuid);
        b.extend_from_slice(&self.sequence.to_le_bytes());
        b.extend_from_slice(&self.region_cycles.to_le_bytes());
        b.extend_from_slice(&(self.regions as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        let at = b.len();
        b.resize(at + bitmap, 0);
        for &r in &self.dirty {
            b[at + (r / 8) as usize] |= 1 << (r % 8);
        }
        INTENT_FRAME.seal(b)
    }

    /// Decodes a slot: `Err` names what is wrong (never written, torn, damaged, inconsistent
    /// fields); nothing panics on any input.
    pub fn decode(b: &[u8]) -> Result<IntentRecord, String> {
        let r = INTENT_FRAME
            .open(b)
            .map_err(|e| format!("write-intent record: {e}"))?;
        let regions = r.u32_at(48) as u64;
        let region_cycles = r.u64_at(40);
        if regions > INTENT_MAX_REGIONS {
            return Err(format!(
                "write-intent record: {regions} regions, more than {INTENT_MAX_REGIONS}"
            ));
        }
        if region_cycles == 0 {
            return Err("write-intent record: regions of 0 cycles".into());
        }
        if r.u32_at(52) != 0 {
            return Err("write-intent record: reserved bytes 52..56 are not zero".into());
        }
        let bitmap = (regions as usize).div_ceil(8);
        if r.len() != INTENT_HEADER + bitmap + 4 {
            return Err(format!(
                "write-intent record: length {} does not match {regions} regions",
                r.len()
            ));
        }
        let bits = &r.bytes()[INTENT_HEADER..INTENT_HEADER + bitmap];
        let dirty: BTreeSet<u64> = (0..regions)
            .filter(|&i| bits[(i / 8) as usize] & (1 << (i % 8)) != 0)
            .collect();
        if regions % 8 != 0 && bits.last().is_some_and(|&x| x >> (regions % 8) != 0) {
            return Err("write-intent record: bits set past the last region".into());
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&r.bytes()[16..32]);
        Ok(IntentRecord {
            uuid,
            sequence: r.u64_at(32),
            region_cycles,
            regions,
            dirty,
        })
    }

    /// Bytes to read to decode a slot whose first 4096 bytes are `head` (`None`: no record).
    pub fn encoded_len(head: &[u8]) -> Option<usize> {
        let len = INTENT_FRAME.peek(head)?.len;
        (len <= INTENT_SLOT_BYTES).then_some(INTENT_FRAME.padded(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(regions: u64, dirty: &[u64]) -> IntentRecord {
        IntentRecord {
            uuid: [7; 16],
            sequence: 42,
            region_cycles: 3,
            regions,
            dirty: dirty.iter().copied().collect(),
        }
    }

    #[test]
    fn round_trips_at_every_bitmap_edge() {
        for regions in [1, 7, 8, 9, 63, 64, 65, 1000, INTENT_MAX_REGIONS] {
            let mut dirty = vec![0, regions - 1];
            if regions > 9 {
                dirty.push(8);
                dirty.push(regions / 2);
            }
            let r = rec(regions, &dirty);
            let b = r.encode();
            assert_eq!(b.len() % 4096, 0);
            assert!(b.len() <= INTENT_SLOT_BYTES);
            assert_eq!(IntentRecord::encoded_len(&b[..4096]), Some(b.len()));
            assert_eq!(IntentRecord::decode(&b).unwrap(), r, "{regions} regions");
        }
    }

    /// The bytes are pinned: a change is a format change (old pools must still open).
    #[test]
    fn golden_bytes() {
        let b = rec(10, &[1, 9]).encode();
        assert_eq!(&b[..16], b"RFINTENT\x01\x00\x00\x00\x3e\x00\x00\x00");
        assert_eq!(
            &b[32..56],
            &[42, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&b[56..58], &[0b0000_0010, 0b0000_0010]);
        assert_eq!(
            &b[58..62],
            &crate::superblock::crc32c(&b[..58]).to_le_bytes()
        );
        assert!(b[62..].iter().all(|&x| x == 0));
    }

    #[test]
    fn every_damage_is_refused_with_a_reason() {
        let good = rec(20, &[3, 19]).encode();
        let len = 56 + 3 + 4;
        for i in 0..len {
            for bit in [0x01u8, 0x80] {
                let mut b = good.clone();
                b[i] ^= bit;
                let e = IntentRecord::decode(&b).expect_err("a flipped bit is refused");
                assert!(e.starts_with("write-intent record"), "{e}");
            }
        }
        for cut in [0, 10, 56, len - 1] {
            assert!(IntentRecord::decode(&good[..cut]).is_err());
        }
        assert!(IntentRecord::decode(&vec![0u8; 8192]).is_err());
    }

    #[test]
    fn regions_cover_at_least_the_minimum_and_fit_a_record() {
        for (cycles, cycle_bytes) in [(1, 4096), (100, 64 << 10), (1 << 30, 4096), (7, 1 << 30)] {
            let rc = region_cycles_for(cycles, cycle_bytes);
            assert!(rc >= 1);
            assert!(rc * cycle_bytes >= INTENT_REGION_BYTES_MIN || rc == 1);
            assert!(cycles.div_ceil(rc) <= INTENT_MAX_REGIONS);
        }
    }
}

//! The write journal's on-disk records (sans-I/O: encoding, decoding and the ring arithmetic;
//! `dev::journal` does the I/O).
//!
//! The journal closes the RAID write hole: before a write cycle touches its members in place,
//! one *record* holding the new contents of every member range the cycle will write (data and
//! parity alike) is made durable in the journal region. After a crash the records that may
//! not have reached their places are written again (replay), which is idempotent: a record
//! holds final contents, not deltas.
//!
//! The region (`[journal offset, + journal length)` on every member, from the superblock) is
//! two 4 KiB *checkpoint* slots followed by a ring of records:
//!
//! ```text
//! checkpoint (4096 bytes, slot = checkpoint sequence mod 2)
//! offset  size  field
//!      0     8  magic "RFJHEAD\0"
//!      8     4  version (1)
//!     12     4  reserved (0)
//!     16    16  array UUID
//!     32     8  checkpoint sequence (bumped on every checkpoint; the highest valid one wins)
//!     40     8  watermark: every record with a sequence <= this is durable in place
//!     48     8  tail: ring position (bytes from the ring's start) of record watermark + 1
//!     56  4036  zero
//!   4092     4  CRC-32C of bytes 0..4092
//!
//! record (at a 4096-aligned ring position, padded with zeros to a multiple of 4096)
//! offset  size  field
//!      0     8  magic "RFJREC\0\0"
//!      8     4  version (1)
//!     12     4  encoded length N (header + entries + payload + CRC, before padding)
//!     16    16  array UUID
//!     32     8  sequence (consecutive: record s + 1 follows record s in the ring, or starts
//!               the ring again when it does not fit before its end)
//!     40     4  entry count E (1..=MAX_ENTRIES)
//!     44     4  reserved (0)
//!     48  E*16  entries: member u32, length u32, offset in the member's data area u64
//! 48+16E     .  payload: the entries' bytes, in entry order
//!    N-4     4  CRC-32C of bytes 0..N-4
//! ```
//!
//! Recovery reads the newest valid checkpoint, then walks the ring from `tail` expecting
//! sequence `watermark + 1`, `+ 2`, ...; at each step the record is looked for at the position
//! after the previous one and, failing that, at the ring's start; the walk stops at the first
//! sequence found nowhere. Every record found is replayed, in order.

use crate::record::{le_u32, le_u64, Frame, FrameError};
use crate::superblock::crc32c;

/// Bytes of one checkpoint slot.
pub const CHECKPOINT_BYTES: u64 = 4096;
/// Bytes before the ring (two checkpoint slots).
pub const RING_OFFSET: u64 = 2 * CHECKPOINT_BYTES;
/// Records are placed and padded to this alignment.
pub const RECORD_ALIGN: u64 = 4096;
/// Bytes of a record before its entries.
pub const RECORD_HEADER_BYTES: usize = 48;
/// Most entries one record holds.
pub const MAX_ENTRIES: usize = 65536;
/// Largest encoded record (header, entries, payload and CRC) the decoder accepts.
pub const MAX_RECORD_BYTES: usize = 1 << 30;

const RECORD_MAGIC: &[u8; 8] = b"RFJREC\0\0";
const CHECKPOINT_MAGIC: &[u8; 8] = b"RFJHEAD\0";
const VERSION: u32 = 1;
/// A record's frame ([`crate::record`]), padded to [`RECORD_ALIGN`].
const RECORD_FRAME: Frame = Frame {
    magic: RECORD_MAGIC,
    version: VERSION,
    header_bytes: RECORD_HEADER_BYTES,
    max_bytes: MAX_RECORD_BYTES,
    align: RECORD_ALIGN as usize,
};

/// One member range a record holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    /// The member.
    pub member: u32,
    /// Byte offset in the member's data area.
    pub offset: u64,
    /// The new contents.
    pub data: Vec<u8>,
}

/// A decoded journal record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalRecord {
    /// Array UUID.
    pub uuid: [u8; 16],
    /// Sequence number.
    pub sequence: u64,
    /// What the write cycle writes, in its order.
    pub entries: Vec<JournalEntry>,
}

/// Why a record or checkpoint was refused (the journal treats every refusal the same way, as
/// "not here", but tests and the fuzzer tell them apart).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// Fewer bytes than the header says (or than a header).
    #[error("journal block truncated: need {need} bytes, have {have}")]
    Short {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// Not a journal record / checkpoint (never written, or overwritten).
    #[error("no journal magic")]
    NoMagic,
    /// An unknown format version.
    #[error("journal format version {0} is not supported")]
    Version(u32),
    /// The CRC does not match: torn or damaged.
    #[error("journal checksum mismatch: torn or damaged")]
    Checksum,
    /// A field out of range.
    #[error("journal field {field} is invalid: {reason}")]
    Field {
        /// Which field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

fn field(field: &'static str, reason: impl Into<String>) -> JournalError {
    JournalError::Field {
        field,
        reason: reason.into(),
    }
}

/// Encoded length (before padding) of a record with entries of these lengths.
pub fn record_len(entry_lens: impl IntoIterator<Item = usize>) -> usize {
    let (n, bytes) = entry_lens
        .into_iter()
        .fold((0usize, 0usize), |(n, b), l| (n + 1, b + l));
    RECORD_HEADER_BYTES + 16 * n + bytes + 4
}

/// `len` rounded up to [`RECORD_ALIGN`]: the ring bytes a record occupies.
pub fn padded(len: usize) -> u64 {
    (len as u64).div_ceil(RECORD_ALIGN) * RECORD_ALIGN
}

/// Encodes a record from borrowed entries `(member, offset, bytes)`, padded with zeros to a
/// multiple of [`RECORD_ALIGN`]. Panics on no entry or more than [`MAX_ENTRIES`] (the caller
/// splits writes), or a record over [`MAX_RECORD_BYTES`].
pub fn encode_record(uuid: [u8; 16], sequence: u64, entries: &[(u32, u64, &[u8])]) -> Vec<u8> {
    assert!(
        !entries.is_empty() && entries.len() <= MAX_ENTRIES,
        "a record holds 1..={MAX_ENTRIES} entries, not {}",
        entries.len()
    );
    let len = record_len(entries.iter().map(|e| e.2.len()));
    assert!(len <= MAX_RECORD_BYTES, "journal record of {len} bytes");
    let mut b = RECORD_FRAME.begin(padded(len) as usize);
    b.extend_from_slice(&uuid);
    b.extend_from_slice(&sequence.to_le_bytes());
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    for &(member, offset, data) in entries {
        b.extend_from_slice(&member.to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&offset.to_le_bytes());
    }
    for &(_, _, data) in entries {
        b.extend_from_slice(data);
    }
    debug_assert_eq!(b.len() + 4, len);
    RECORD_FRAME.seal(b)
}

impl JournalRecord {
    /// Encodes (see [`encode_record`]).
    pub fn encode(&self) -> Vec<u8> {
        let e: Vec<(u32, u64, &[u8])> = self
            .entries
            .iter()
            .map(|e| (e.member, e.offset, e.data.as_slice()))
            .collect();
        encode_record(self.uuid, self.sequence, &e)
    }

    /// The encoded length a record starting with `head` (at least its first 16 bytes) says
    /// it has, if `head` starts like a record of this version: how much to read.
    pub fn encoded_len(head: &[u8]) -> Option<usize> {
        let p = RECORD_FRAME.peek(head)?;
        (p.version == VERSION && (RECORD_HEADER_BYTES + 4..=MAX_RECORD_BYTES).contains(&p.len))
            .then_some(p.len)
    }

    /// Decodes and checks a record. Bytes after the encoded length (padding) are ignored.
    pub fn decode(b: &[u8]) -> Result<JournalRecord, JournalError> {
        let r = RECORD_FRAME.open(b).map_err(|e| match e {
            FrameError::Truncated { need, have } | FrameError::Short { need, have } => {
                JournalError::Short { need, have }
            }
            FrameError::NoMagic => JournalError::NoMagic,
            FrameError::Version(v) => JournalError::Version(v),
            FrameError::Length(len) => field("length", format!("{len}")),
            FrameError::Checksum => JournalError::Checksum,
        })?;
        let (b, len) = (r.bytes(), r.len());
        let n = r.u32_at(40) as usize;
        if n == 0 || n > MAX_ENTRIES {
            return Err(field("entry count", format!("{n} (1..={MAX_ENTRIES})")));
        }
        if r.u32_at(44) != 0 {
            return Err(field("reserved", "bytes 44..48 must be 0"));
        }
        let table_end = RECORD_HEADER_BYTES + 16 * n;
        if table_end + 4 > len {
            return Err(field(
                "entry count",
                format!("{n} entries do not fit in {len} bytes"),
            ));
        }
        let mut entries = Vec::with_capacity(n);
        let mut at = table_end;
        for i in 0..n {
            let e = RECORD_HEADER_BYTES + 16 * i;
            let member = r.u32_at(e);
            let elen = r.u32_at(e + 4) as usize;
            let offset = r.u64_at(e + 8);
            if elen == 0 {
                return Err(field("entries", format!("entry {i} is empty")));
            }
            if offset.checked_add(elen as u64).is_none() {
                return Err(field("entries", format!("entry {i} runs past 2^64")));
            }
            if at + elen > len - 4 {
                return Err(field(
                    "entries",
                    format!("entry {i}'s {elen} bytes run past the record"),
                ));
            }
            entries.push(JournalEntry {
                member,
                offset,
                data: b[at..at + elen].to_vec(),
            });
            at += elen;
        }
        if at != len - 4 {
            return Err(field(
                "length",
                format!("{} payload bytes left over", len - 4 - at),
            ));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[16..32]);
        Ok(JournalRecord {
            uuid,
            sequence: r.u64_at(32),
            entries,
        })
    }
}

/// A decoded checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Array UUID.
    pub uuid: [u8; 16],
    /// Bumped on every checkpoint; written to slot `sequence % 2`.
    pub sequence: u64,
    /// Every record with a sequence up to this one is durable in place.
    pub watermark: u64,
    /// Ring position of record `watermark + 1` (where the next record goes, if none).
    pub tail: u64,
}

impl Checkpoint {
    /// Encodes into [`CHECKPOINT_BYTES`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; CHECKPOINT_BYTES as usize];
        b[0..8].copy_from_slice(CHECKPOINT_MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[16..32].copy_from_slice(&self.uuid);
        b[32..40].copy_from_slice(&self.sequence.to_le_bytes());
        b[40..48].copy_from_slice(&self.watermark.to_le_bytes());
        b[48..56].copy_from_slice(&self.tail.to_le_bytes());
        let crc = crc32c(&b[..4092]);
        b[4092..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a checkpoint slot (`tail` is checked against the ring later).
    pub fn decode(b: &[u8]) -> Result<Checkpoint, JournalError> {
        let need = CHECKPOINT_BYTES as usize;
        if b.len() < need {
            return Err(JournalError::Short {
                need,
                have: b.len(),
            });
        }
        if &b[0..8] != CHECKPOINT_MAGIC {
            return Err(JournalError::NoMagic);
        }
        let u64_at = |o: usize| le_u64(b, o);
        let version = le_u32(b, 8);
        if version != VERSION {
            return Err(JournalError::Version(version));
        }
        if le_u32(b, 4092) != crc32c(&b[..4092]) {
            return Err(JournalError::Checksum);
        }
        if b[12..16].iter().chain(&b[56..4092]).any(|&x| x != 0) {
            return Err(field("reserved", "must be 0"));
        }
        let tail = u64_at(48);
        if tail % RECORD_ALIGN != 0 {
            return Err(field("tail", format!("{tail} is not 4096-aligned")));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[16..32]);
        Ok(Checkpoint {
            uuid,
            sequence: u64_at(32),
            watermark: u64_at(40),
            tail,
        })
    }
}

/// Where a record of `len` padded bytes goes in a ring of `ring` bytes whose live records
/// occupy `[tail, head)` circularly (`empty`: none live, then `tail` is ignored): at `head`,
/// or at the ring's start when it does not fit before the end; `None` when the live records
/// leave no room (checkpoint first).
pub fn place(ring: u64, head: u64, tail: u64, empty: bool, len: u64) -> Option<u64> {
    if len > ring {
        return None;
    }
    if empty {
        return Some(if head + len <= ring { head } else { 0 });
    }
    if head == tail {
        // Live records fill the whole ring.
        None
    } else if head > tail {
        // Free: [head, ring) and [0, tail).
        if head + len <= ring {
            Some(head)
        } else if len <= tail {
            Some(0)
        } else {
            None
        }
    } else if head + len <= tail {
        Some(head)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip_and_damage() {
        let r = JournalRecord {
            uuid: *b"0123456789abcdef",
            sequence: 42,
            entries: vec![
                JournalEntry {
                    member: 0,
                    offset: 4096,
                    data: vec![7; 4096],
                },
                JournalEntry {
                    member: 3,
                    offset: 0,
                    data: vec![9; 100],
                },
            ],
        };
        let b = r.encode();
        assert_eq!(b.len() % 4096, 0);
        assert_eq!(
            JournalRecord::encoded_len(&b),
            Some(record_len([4096, 100]))
        );
        assert_eq!(JournalRecord::decode(&b).unwrap(), r);
        let len = record_len([4096, 100]);
        // Every single-byte change of the encoded part is refused; the padding is ignored.
        for at in (0..len).step_by(97) {
            let mut d = b.clone();
            d[at] ^= 0x40;
            assert!(JournalRecord::decode(&d).is_err(), "byte {at}");
        }
        let mut d = b.clone();
        d[len] = 1;
        assert_eq!(JournalRecord::decode(&d).unwrap(), r);
        // A torn record (only a prefix of its sectors written) is refused.
        for keep in (512..len).step_by(512) {
            let mut d = vec![0u8; b.len()];
            d[..keep].copy_from_slice(&b[..keep]);
            assert_eq!(
                JournalRecord::decode(&d).unwrap_err(),
                JournalError::Checksum,
                "{keep}"
            );
        }
    }

    #[test]
    fn checkpoint_round_trip() {
        let c = Checkpoint {
            uuid: [5; 16],
            sequence: 9,
            watermark: 100,
            tail: 8192,
        };
        let b = c.encode();
        assert_eq!(Checkpoint::decode(&b).unwrap(), c);
        let mut d = b.clone();
        d[45] ^= 1;
        assert_eq!(Checkpoint::decode(&d).unwrap_err(), JournalError::Checksum);
        assert_eq!(
            Checkpoint::decode(&[0u8; 4096]).unwrap_err(),
            JournalError::NoMagic
        );
    }

    #[test]
    fn ring_placement() {
        // Empty ring: at head, wrapping when it does not fit.
        assert_eq!(place(100, 40, 0, true, 60), Some(40));
        assert_eq!(place(100, 50, 0, true, 60), Some(0));
        // Live [20, 60): after head, or before tail.
        assert_eq!(place(100, 60, 20, false, 40), Some(60));
        assert_eq!(place(100, 60, 20, false, 41), None);
        assert_eq!(place(100, 80, 20, false, 20), Some(80));
        assert_eq!(place(100, 90, 20, false, 20), Some(0));
        assert_eq!(place(100, 90, 20, false, 21), None);
        // Wrapped live [80, 100) + [0, 30): only [30, 80).
        assert_eq!(place(100, 30, 80, false, 50), Some(30));
        assert_eq!(place(100, 30, 80, false, 51), None);
        assert_eq!(place(100, 0, 0, true, 101), None);
        // Full: live records from tail all the way round to head.
        assert_eq!(place(100, 40, 40, false, 1), None);
    }
}

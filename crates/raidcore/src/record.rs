//! The frame the variable-length on-disk records share: the deferred-parity list
//! ([`crate::lazy::BpglRecord`]), the write journal's records ([`crate::journal`]), the zone
//! table, the D-Map and the IDO state ([`crate::ido`]), and the engine's IDO record
//! (`dev::ido`). Each record's own table continues at offset 16.
//!
//! ```text
//! offset  size  field
//!      0     8  magic (one per record kind)
//!      8     4  format version
//!     12     4  length L: every byte of the record up to and including its CRC
//!     16     .  the record's own fields
//!    L-4     4  CRC-32C of bytes 0..L-4
//!      L     .  zero padding up to the record's alignment (none for records nested in others)
//! ```
//!
//! A [`Frame`] describes one record kind: [`Frame::begin`] and [`Frame::seal`] write it,
//! [`Frame::open`] checks it (magic, version, length, CRC, in that order, each with its own
//! [`FrameError`]) and hands out its bytes, [`Frame::peek`] says from a record's first bytes
//! how much of it to read. The record's own checks (its counts against its length, its
//! fields' ranges) follow `open`.

/// How many copies of a metadata record (the deferred-parity list, the checksums of a block,
/// the IDO record) a pool of `members` members tolerating `tolerance` failures keeps, on its
/// first members present: one more than the members that may misbehave, at least two (so
/// that even without redundancy a lost write is detected), at most one per member. The
/// engine places them so and the simulator charges their writes so.
pub fn copies_for(members: usize, tolerance: usize) -> usize {
    (tolerance + 1).max(2).min(members.max(1))
}

use crate::superblock::crc32c;

/// Bytes of the frame's header (magic, version, length).
pub const FRAME_HEADER_BYTES: usize = 16;
/// Bytes of the CRC that ends every record.
pub const CRC_BYTES: usize = 4;

/// One record kind's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The magic at offset 0.
    pub magic: &'static [u8; 8],
    /// The one version this build writes and reads.
    pub version: u32,
    /// Bytes of the record's fixed header, the frame's included: a record is at least this
    /// long plus its CRC.
    pub header_bytes: usize,
    /// The longest record accepted (its CRC included).
    pub max_bytes: usize,
    /// Written records are zero-padded to a multiple of this (1: not padded).
    pub align: usize,
}

/// Why [`Frame::open`] refused bytes. Each record kind reports these in its own terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the smallest record (header and CRC).
    #[error("record truncated: need {need} bytes, have {have}")]
    Truncated {
        /// The smallest record.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// Not this record kind (never written, or overwritten).
    #[error("no record magic")]
    NoMagic,
    /// An unknown version.
    #[error("record format version {0} is not supported")]
    Version(u32),
    /// The length field is shorter than a header and CRC, or longer than the record may be.
    #[error("record length {0} is out of range")]
    Length(usize),
    /// Fewer bytes than the length field says.
    #[error("record truncated: its length is {need} bytes, have {have}")]
    Short {
        /// The record's length.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// The CRC does not match: torn or damaged.
    #[error("record checksum mismatch: torn or damaged")]
    Checksum,
}

/// What a record's first bytes claim, before its CRC is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peek {
    /// The version field.
    pub version: u32,
    /// The length field.
    pub len: usize,
}

/// A record whose frame checked: its bytes up to and including the CRC (padding excluded),
/// read with the offsets of the record's table.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    bytes: &'a [u8],
}

impl Frame {
    /// A buffer for a record with room for `capacity` bytes: the frame's header, its length
    /// still zero. The record's fields are appended (or written in place after a resize),
    /// then [`Frame::seal`] finishes it.
    pub fn begin(&self, capacity: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(capacity.max(FRAME_HEADER_BYTES));
        b.extend_from_slice(self.magic);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b
    }

    /// Finishes a record [`Frame::begin`] started: writes its length, appends the CRC and
    /// pads. Panics when the record is shorter than its header or longer than the bound
    /// (the caller checks what the record may hold).
    pub fn seal(&self, mut b: Vec<u8>) -> Vec<u8> {
        assert_eq!(&b[..8], self.magic, "a record sealed with another frame");
        assert!(
            b.len() >= self.header_bytes,
            "record shorter than its header"
        );
        let len = b.len() + CRC_BYTES;
        assert!(
            len <= self.max_bytes,
            "record of {len} bytes over its bound"
        );
        b[12..16].copy_from_slice(&(len as u32).to_le_bytes());
        let crc = crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b.resize(len.next_multiple_of(self.align), 0);
        b
    }

    /// Checks the frame of the record at the start of `b` (bytes after its length are
    /// ignored) and returns the record.
    pub fn open<'a>(&self, b: &'a [u8]) -> Result<Record<'a>, FrameError> {
        let min = self.header_bytes + CRC_BYTES;
        if b.len() < min {
            return Err(FrameError::Truncated {
                need: min,
                have: b.len(),
            });
        }
        if &b[..8] != self.magic {
            return Err(FrameError::NoMagic);
        }
        let version = le_u32(b, 8);
        if version != self.version {
            return Err(FrameError::Version(version));
        }
        let len = le_u32(b, 12) as usize;
        if !(min..=self.max_bytes).contains(&len) {
            return Err(FrameError::Length(len));
        }
        if b.len() < len {
            return Err(FrameError::Short {
                need: len,
                have: b.len(),
            });
        }
        if crc32c(&b[..len - CRC_BYTES]) != le_u32(b, len - CRC_BYTES) {
            return Err(FrameError::Checksum);
        }
        Ok(Record { bytes: &b[..len] })
    }

    /// The version and length a record of this kind starting with `head` claims (`None`
    /// when `head` is shorter than the frame's header or has another magic). Nothing is
    /// checked beyond the magic: this says how much to read before [`Frame::open`].
    pub fn peek(&self, head: &[u8]) -> Option<Peek> {
        if head.len() < FRAME_HEADER_BYTES || &head[..8] != self.magic {
            return None;
        }
        Some(Peek {
            version: le_u32(head, 8),
            len: le_u32(head, 12) as usize,
        })
    }

    /// Bytes a written record of `len` bytes occupies (its padding included).
    pub fn padded(&self, len: usize) -> usize {
        len.next_multiple_of(self.align)
    }
}

impl<'a> Record<'a> {
    /// The record, CRC included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// Its length (the length field).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
    /// Never: a record holds at least its header and CRC.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// The record's fields: its bytes before the CRC.
    pub fn fields(&self) -> &'a [u8] {
        &self.bytes[..self.bytes.len() - CRC_BYTES]
    }
    /// The little-endian `u32` at `offset`.
    pub fn u32_at(&self, offset: usize) -> u32 {
        le_u32(self.bytes, offset)
    }
    /// The little-endian `u64` at `offset`.
    pub fn u64_at(&self, offset: usize) -> u64 {
        le_u64(self.bytes, offset)
    }
}

/// The little-endian `u32` at `offset` of `b` (panics past its end).
pub fn le_u32(b: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(b[offset..offset + 4].try_into().expect("4 bytes"))
}

/// The little-endian `u64` at `offset` of `b` (panics past its end).
pub fn le_u64(b: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(b[offset..offset + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Frame = Frame {
        magic: b"RFTEST\0\0",
        version: 2,
        header_bytes: 24,
        max_bytes: 4096,
        align: 512,
    };

    fn sample() -> Vec<u8> {
        let mut b = F.begin(64);
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(b"body");
        F.seal(b)
    }

    #[test]
    fn sealed_records_open_and_peek() {
        let b = sample();
        assert_eq!(b.len(), 512);
        let r = F.open(&b).unwrap();
        assert_eq!(r.len(), 16 + 8 + 4 + 4);
        assert_eq!(r.u64_at(16), 7);
        assert_eq!(&r.fields()[24..], b"body");
        assert_eq!(
            F.peek(&b[..16]),
            Some(Peek {
                version: 2,
                len: 32
            })
        );
        assert!(b[32..].iter().all(|&x| x == 0), "padding is zero");
    }

    #[test]
    fn every_refusal_has_its_reason() {
        let b = sample();
        assert_eq!(
            F.open(&b[..20]).unwrap_err(),
            FrameError::Truncated { need: 28, have: 20 }
        );
        let mut m = b.clone();
        m[0] ^= 1;
        assert_eq!(F.open(&m).unwrap_err(), FrameError::NoMagic);
        assert_eq!(F.peek(&m), None);
        let mut v = b.clone();
        v[8] = 3;
        assert_eq!(F.open(&v).unwrap_err(), FrameError::Version(3));
        let mut l = b.clone();
        l[12] = 27;
        assert_eq!(F.open(&l).unwrap_err(), FrameError::Length(27));
        assert_eq!(
            F.open(&b[..30]).unwrap_err(),
            FrameError::Short { need: 32, have: 30 }
        );
        for i in 16..32 {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert_eq!(F.open(&c).unwrap_err(), FrameError::Checksum, "byte {i}");
        }
    }
}

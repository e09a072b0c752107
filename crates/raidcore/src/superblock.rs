//! The on-member superblock: what lets a pool be assembled from its member paths alone.
//!
//! Every member starts with a 4096-byte superblock, and keeps a second copy at 260 KiB
//! ([`SUPERBLOCK_SLOTS`]: generations alternate between the two, so a crash that tears one
//! write leaves the other copy); the member's data area begins at
//! `data_offset_bytes` (1 MiB by default, leaving room for future metadata such as a write-intent
//! log). All integers are little-endian.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "RAIDFRG\0"
//!      8     4  format version (3; versions 1 and 2 are read too, see below)
//!     12     4  superblock length in bytes (4096)
//!     16    16  array UUID (random at create time; the same on every member)
//!     32     4  member index (0-based position in the layout)
//!     36     4  member count
//!     40     8  generation (bumped on every state change; the highest wins at assembly)
//!     48     4  array state (0 clean, 1 active, 2 degraded, 3 rebuilding)
//!     52     4  reserved (0)
//!     56     8  data offset in bytes
//!     64     8  data bytes per member (the usable area after the data offset)
//!     72     8  chunk size in bytes
//!     80     8  creation time, seconds since the Unix epoch
//!     88     2  length L of the layout text (<= 1024)
//!     90     L  layout text: `key=value` pairs separated by `;` (scheme, disks, width, ...)
//!   1120     2  number E of events (<= 64)
//!   1122  E*5   events in order: kind (1 fail, 2 replace) u8, member u32
//!   1442     2  number R of layout runs (<= 128)
//!   1444  R*12  runs in order: first cycle u64, layout generation index u32 (cycles from this
//!               one up to the next run's first cycle are laid out in that generation; the
//!               generation index counts the events above, 0 = healthy)
//!   2980     1  parity policy (0 eager, 1 lazy: see `crate::lazy`)        [version 2]
//!   2981     3  reserved (0)
//!   2984     4  BPGL capacity (the bound of the deferred-parity list)       [version 2]
//!   2988     4  feature flags: bit 0 write journal, bit 1 block checksums, [version 3]
//!               bit 2 write-intent bitmap (`crate::intent`)
//!   2992     8  journal region offset bytes (member offset; 0 when off)    [version 3]
//!   3000     8  journal region length bytes                                [version 3]
//!   3008     8  checksum region offset bytes (member offset; 0 when off)   [version 3]
//!   3016     8  checksum region length bytes                               [version 3]
//!   3024  ...   zero
//!   4092     4  CRC-32C of bytes 0..4092
//! ```
//!
//! Version 2 added the parity policy and BPGL capacity; a version 1 superblock decodes with
//! eager parity and capacity 0. Version 3 added the feature flags and the journal and
//! checksum regions (versions 1 and 2 decode with no features and empty regions), and a
//! version 3 superblock must have every reserved and unused byte zero (the fields' gaps, the
//! space after the layout text, the events and the runs, and 3024..4092): a non-zero one is
//! refused, naming its offset. The deferred-parity list itself is not in the superblock: it
//! is a separate record ([`crate::lazy::BpglRecord`]) in two alternating slots of
//! [`crate::lazy::BPGL_SLOT_BYTES`] each, starting at [`BPGL_OFFSET_BYTES`] (between the
//! superblock and the data area).
//!
//! Decoding checks the magic, version, length, CRC and every field's range, and says which
//! check failed: a wrong or damaged superblock is refused, never guessed at.

use crate::record::{le_u32, le_u64};

/// Size of the superblock on every member.
pub const SUPERBLOCK_BYTES: usize = 4096;
/// Default start of the data area ([`crate::region`]).
pub const DEFAULT_DATA_OFFSET_BYTES: u64 = crate::region::DEFAULT_DATA_OFFSET_BYTES;
const MAGIC: &[u8; 8] = b"RAIDFRG\0";
const VERSION: u32 = 3;
/// Feature flag: a write journal region (see `journal_offset_bytes`).
pub const FEATURE_JOURNAL: u32 = 1 << 0;
/// Feature flag: per-block checksums (see `checksum_offset_bytes`).
pub const FEATURE_CHECKSUMS: u32 = 1 << 1;
/// Feature flag: a write-intent bitmap ([`crate::intent`]) names the regions to resynchronise
/// after an unclean shutdown (pools without a write journal). A build that does not know it
/// refuses the pool rather than open it without resynchronising.
pub const FEATURE_WRITE_INTENT: u32 = 1 << 2;
const FEATURES_KNOWN: u32 = FEATURE_JOURNAL | FEATURE_CHECKSUMS | FEATURE_WRITE_INTENT;
/// Where a member's two BPGL slots start (right after the superblock; [`crate::region`]).
pub const BPGL_OFFSET_BYTES: u64 = crate::region::BPGL.offset;
/// Member offsets of the superblock's two copies: at 0 and right after the BPGL slots
/// (260 KiB; [`crate::region`]). Generation `g` is written to slot `g % 2`
/// ([`superblock_slot`]), and every superblock write is flushed before the next, so a crash
/// can tear at most the copy being written: the other one, a generation older, still opens
/// the member (a member one generation behind the others only missed the newest update).
/// Readers take the valid copy with the newest generation.
pub const SUPERBLOCK_SLOTS: [u64; 2] = [
    crate::region::SUPERBLOCK_A.offset,
    crate::region::SUPERBLOCK_B.offset,
];

/// Bytes of a superblock's head: magic, version, length, UUID, member index and count,
/// generation.
pub const SUPERBLOCK_HEAD_BYTES: usize = 48;

/// What a superblock's first [`SUPERBLOCK_HEAD_BYTES`] say, whatever the rest holds (the
/// CRC is not checked): a superblock torn by a crash while it was being rewritten still says
/// whose member it is and its generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SuperblockHead {
    /// Array UUID.
    pub uuid: [u8; 16],
    /// The member's position.
    pub member_index: u32,
    /// Members of the array.
    pub member_count: u32,
    /// The superblock's generation.
    pub generation: u64,
}

impl SuperblockHead {
    /// The head of the superblock starting `b`; `None` when `b` is shorter or has no magic.
    pub fn peek(b: &[u8]) -> Option<SuperblockHead> {
        if b.len() < SUPERBLOCK_HEAD_BYTES || &b[..8] != MAGIC {
            return None;
        }
        Some(SuperblockHead {
            uuid: b[16..32].try_into().expect("16 bytes"),
            member_index: le_u32(b, 32),
            member_count: le_u32(b, 36),
            generation: le_u64(b, 40),
        })
    }
}

/// The member offset generation `g`'s superblock is written to.
pub fn superblock_slot(generation: u64) -> u64 {
    SUPERBLOCK_SLOTS[(generation % 2) as usize]
}
const LAYOUT_MAX: usize = 1024;
const EVENTS_MAX: usize = 64;
const RUNS_MAX: usize = 128;

/// State of the whole array as last recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayStateTag {
    /// Shut down cleanly: parity consistent everywhere.
    Clean = 0,
    /// In use (a crash in this state means stripes being written may need a parity check).
    Active = 1,
    /// A member is missing and not yet rebuilt.
    Degraded = 2,
    /// A rebuild is running.
    Rebuilding = 3,
}

/// A recorded change of membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The member at this index failed.
    Fail(u32),
    /// A new, empty member was put at this index.
    Replace(u32),
}

/// The decoded superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Array UUID, the same on every member.
    pub uuid: [u8; 16],
    /// This member's position in the layout.
    pub member_index: u32,
    /// Number of members of the array.
    pub member_count: u32,
    /// Bumped on every change; the highest among the members is authoritative.
    pub generation: u64,
    /// The array's state when written.
    pub state: ArrayStateTag,
    /// Where the data area starts on the member.
    pub data_offset_bytes: u64,
    /// Bytes of data area per member.
    pub data_bytes: u64,
    /// Chunk (stripe unit) size.
    pub chunk_bytes: u64,
    /// When the array was created.
    pub created_unix_secs: u64,
    /// Layout parameters as `key=value;...` text.
    pub layout: String,
    /// Every failure and replacement, in order.
    pub events: Vec<Event>,
    /// Which layout generation each range of cycles is in: `(first cycle, generation index)`,
    /// first cycles strictly increasing from 0.
    pub runs: Vec<(u64, u32)>,
    /// Whether writes defer the background parity (version 2; eager in version 1).
    pub parity: crate::lazy::ParityPolicy,
    /// The deferred-parity list's bound (version 2; 0 in version 1).
    pub bpgl_capacity: u32,
    /// Feature flags ([`FEATURE_JOURNAL`], [`FEATURE_CHECKSUMS`]; version 3, 0 before).
    pub features: u32,
    /// Journal region `[offset, offset + length)` in member bytes (0, 0 when off).
    pub journal_offset_bytes: u64,
    /// Journal region length in bytes.
    pub journal_len_bytes: u64,
    /// Checksum region `[offset, offset + length)` in member bytes (0, 0 when off).
    pub checksum_offset_bytes: u64,
    /// Checksum region length in bytes.
    pub checksum_len_bytes: u64,
}

/// Why a superblock was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SuperblockError {
    /// The first bytes are not raidforge's magic: not a raidforge member (or wiped).
    #[error("no raidforge superblock (magic bytes do not match)")]
    NoMagic,
    /// Written by a newer or unknown format version.
    #[error("superblock format version {0} is not supported (this build reads versions 1 to 3)")]
    Version(u32),
    /// The checksum does not match: the superblock is damaged.
    #[error("superblock checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): damaged member")]
    Checksum {
        /// The checksum stored in the superblock.
        stored: u32,
        /// The checksum of the bytes as read.
        computed: u32,
    },
    /// A field holds a value out of its range.
    #[error("superblock field {field} is invalid: {reason}")]
    Field {
        /// Which field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Fewer bytes than a superblock.
    #[error("superblock needs {SUPERBLOCK_BYTES} bytes, got {0}")]
    Short(usize),
}

/// CRC-32C (Castagnoli), bitwise-reflected table form. Written here because it is twenty lines
/// and the superblock is its only user.
pub fn crc32c(data: &[u8]) -> u32 {
    !crc32c_update(!0, data)
}

/// Continues a CRC-32C from raw state `state` (start with `!0`, finish with `!state`), for
/// checksums computed over several pieces (the block checksums in `dev::csum`).
pub fn crc32c_update(state: u32, data: &[u8]) -> u32 {
    const fn table() -> [u32; 256] {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0x82F6_3B78 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    }
    const T: [u32; 256] = table();
    let mut c = state;
    for &b in data {
        c = T[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    c
}

fn field(field: &'static str, reason: impl Into<String>) -> SuperblockError {
    SuperblockError::Field {
        field,
        reason: reason.into(),
    }
}

impl Superblock {
    /// Encodes into exactly [`SUPERBLOCK_BYTES`] bytes.
    pub fn encode(&self) -> Result<Vec<u8>, SuperblockError> {
        if self.layout.len() > LAYOUT_MAX {
            return Err(field(
                "layout",
                format!("{} bytes, at most {LAYOUT_MAX}", self.layout.len()),
            ));
        }
        if self.runs.len() > RUNS_MAX {
            return Err(field(
                "runs",
                format!("{} runs, at most {RUNS_MAX}", self.runs.len()),
            ));
        }
        if self.events.len() > EVENTS_MAX {
            return Err(field(
                "events",
                format!("{} events, at most {EVENTS_MAX}", self.events.len()),
            ));
        }
        self.validate()?;
        let mut b = vec![0u8; SUPERBLOCK_BYTES];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(SUPERBLOCK_BYTES as u32).to_le_bytes());
        b[16..32].copy_from_slice(&self.uuid);
        b[32..36].copy_from_slice(&self.member_index.to_le_bytes());
        b[36..40].copy_from_slice(&self.member_count.to_le_bytes());
        b[40..48].copy_from_slice(&self.generation.to_le_bytes());
        b[48..52].copy_from_slice(&(self.state as u32).to_le_bytes());
        b[56..64].copy_from_slice(&self.data_offset_bytes.to_le_bytes());
        b[64..72].copy_from_slice(&self.data_bytes.to_le_bytes());
        b[72..80].copy_from_slice(&self.chunk_bytes.to_le_bytes());
        b[80..88].copy_from_slice(&self.created_unix_secs.to_le_bytes());
        b[88..90].copy_from_slice(&(self.layout.len() as u16).to_le_bytes());
        b[90..90 + self.layout.len()].copy_from_slice(self.layout.as_bytes());
        b[1120..1122].copy_from_slice(&(self.events.len() as u16).to_le_bytes());
        for (i, e) in self.events.iter().enumerate() {
            let at = 1122 + 5 * i;
            let (kind, m) = match e {
                Event::Fail(m) => (1u8, *m),
                Event::Replace(m) => (2u8, *m),
            };
            b[at] = kind;
            b[at + 1..at + 5].copy_from_slice(&m.to_le_bytes());
        }
        b[1442..1444].copy_from_slice(&(self.runs.len() as u16).to_le_bytes());
        for (i, (start, gen)) in self.runs.iter().enumerate() {
            let at = 1444 + 12 * i;
            b[at..at + 8].copy_from_slice(&start.to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&gen.to_le_bytes());
        }
        b[2980] = match self.parity {
            crate::lazy::ParityPolicy::Eager => 0,
            crate::lazy::ParityPolicy::Lazy => 1,
        };
        b[2984..2988].copy_from_slice(&self.bpgl_capacity.to_le_bytes());
        b[2988..2992].copy_from_slice(&self.features.to_le_bytes());
        b[2992..3000].copy_from_slice(&self.journal_offset_bytes.to_le_bytes());
        b[3000..3008].copy_from_slice(&self.journal_len_bytes.to_le_bytes());
        b[3008..3016].copy_from_slice(&self.checksum_offset_bytes.to_le_bytes());
        b[3016..3024].copy_from_slice(&self.checksum_len_bytes.to_le_bytes());
        let crc = crc32c(&b[..4092]);
        b[4092..4096].copy_from_slice(&crc.to_le_bytes());
        Ok(b)
    }

    fn validate(&self) -> Result<(), SuperblockError> {
        if self.member_count == 0 || self.member_count > 4096 {
            return Err(field(
                "member count",
                format!("{} (1..=4096)", self.member_count),
            ));
        }
        if self.member_index >= self.member_count {
            return Err(field(
                "member index",
                format!(
                    "{} but the array has {} members",
                    self.member_index, self.member_count
                ),
            ));
        }
        if self.chunk_bytes == 0 || self.chunk_bytes % 512 != 0 {
            return Err(field(
                "chunk size",
                format!("{} is not a positive multiple of 512", self.chunk_bytes),
            ));
        }
        if (self.data_offset_bytes as usize) < SUPERBLOCK_BYTES
            || self.data_offset_bytes % 4096 != 0
        {
            return Err(field(
                "data offset",
                format!(
                    "{} (a multiple of 4096, at least 4096)",
                    self.data_offset_bytes
                ),
            ));
        }
        if self.runs.first().is_some_and(|r| r.0 != 0)
            || self.runs.windows(2).any(|w| w[0].0 >= w[1].0)
        {
            return Err(field("runs", "first cycles must start at 0 and increase"));
        }
        // Each event makes one layout generation, or two (with a staging stop before it,
        // `crate::array::Generation::staging`); which, only the layout knows (the assembler
        // checks the exact count when it replays the events).
        if let Some((_, g)) = self
            .runs
            .iter()
            .find(|r| r.1 as usize > 2 * self.events.len())
        {
            return Err(field(
                "runs",
                format!("generation {g} but only {} events", self.events.len()),
            ));
        }
        for e in &self.events {
            let (Event::Fail(m) | Event::Replace(m)) = e;
            if *m >= self.member_count {
                return Err(field("events", format!("member {m} out of range")));
            }
        }
        if self.features & !FEATURES_KNOWN != 0 {
            return Err(field(
                "features",
                format!("unknown flags {:#x}", self.features & !FEATURES_KNOWN),
            ));
        }
        for (flag, name, off, len) in [
            (
                FEATURE_JOURNAL,
                "journal region",
                self.journal_offset_bytes,
                self.journal_len_bytes,
            ),
            (
                FEATURE_CHECKSUMS,
                "checksum region",
                self.checksum_offset_bytes,
                self.checksum_len_bytes,
            ),
        ] {
            let on = self.features & flag != 0;
            if !on && (off != 0 || len != 0) {
                return Err(field(name, "set while its feature flag is off"));
            }
            if on
                && (len == 0
                    || off % 4096 != 0
                    || off < SUPERBLOCK_BYTES as u64
                    || off
                        .checked_add(len)
                        .is_none_or(|e| e > self.data_offset_bytes))
            {
                return Err(field(
                    name,
                    format!(
                        "{off}+{len} must be non-empty, 4 KiB aligned and end by the data \
                         offset {}",
                        self.data_offset_bytes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Decodes and checks a superblock.
    pub fn decode(b: &[u8]) -> Result<Superblock, SuperblockError> {
        if b.len() < SUPERBLOCK_BYTES {
            return Err(SuperblockError::Short(b.len()));
        }
        let u32_at = |o: usize| le_u32(b, o);
        let u64_at = |o: usize| le_u64(b, o);
        let u16_at = |o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap());
        if &b[0..8] != MAGIC {
            return Err(SuperblockError::NoMagic);
        }
        let version = u32_at(8);
        if !(1..=VERSION).contains(&version) {
            return Err(SuperblockError::Version(version));
        }
        let stored = u32_at(4092);
        let computed = crc32c(&b[..4092]);
        if stored != computed {
            return Err(SuperblockError::Checksum { stored, computed });
        }
        if u32_at(12) as usize != SUPERBLOCK_BYTES {
            return Err(field("length", format!("{}", u32_at(12))));
        }
        let state = match u32_at(48) {
            0 => ArrayStateTag::Clean,
            1 => ArrayStateTag::Active,
            2 => ArrayStateTag::Degraded,
            3 => ArrayStateTag::Rebuilding,
            s => return Err(field("state", format!("{s}"))),
        };
        let llen = u16_at(88) as usize;
        if llen > LAYOUT_MAX {
            return Err(field("layout", format!("length {llen}")));
        }
        let layout = std::str::from_utf8(&b[90..90 + llen])
            .map_err(|_| field("layout", "not UTF-8"))?
            .to_string();
        let ne = u16_at(1120) as usize;
        if ne > EVENTS_MAX {
            return Err(field("events", format!("count {ne}")));
        }
        let mut events = Vec::with_capacity(ne);
        for i in 0..ne {
            let at = 1122 + 5 * i;
            let m = u32_at(at + 1);
            events.push(match b[at] {
                1 => Event::Fail(m),
                2 => Event::Replace(m),
                k => return Err(field("events", format!("kind {k}"))),
            });
        }
        let nr = u16_at(1442) as usize;
        if nr > RUNS_MAX {
            return Err(field("runs", format!("count {nr}")));
        }
        let runs = (0..nr)
            .map(|i| (u64_at(1444 + 12 * i), u32_at(1444 + 12 * i + 8)))
            .collect();
        let (parity, bpgl_capacity) = if version >= 2 {
            let p = match b[2980] {
                0 => crate::lazy::ParityPolicy::Eager,
                1 => crate::lazy::ParityPolicy::Lazy,
                k => return Err(field("parity policy", format!("{k}"))),
            };
            (p, u32_at(2984))
        } else {
            (crate::lazy::ParityPolicy::Eager, 0)
        };
        let (features, journal, checksum) = if version >= 3 {
            // Every byte no field owns must be zero: reserved space stays usable.
            let layout_end = 90 + llen;
            let events_end = 1122 + 5 * ne;
            let runs_end = 1444 + 12 * nr;
            for (a, z) in [
                (52, 56),
                (layout_end, 1120),
                (events_end, 1442),
                (runs_end, 2980),
                (2981, 2984),
                (3024, 4092),
            ] {
                if let Some(i) = (a..z).find(|&i| b[i] != 0) {
                    return Err(field(
                        "reserved",
                        format!("byte {i} is {:#04x}, must be 0", b[i]),
                    ));
                }
            }
            (
                u32_at(2988),
                (u64_at(2992), u64_at(3000)),
                (u64_at(3008), u64_at(3016)),
            )
        } else {
            (0, (0, 0), (0, 0))
        };
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[16..32]);
        let sb = Superblock {
            features,
            journal_offset_bytes: journal.0,
            journal_len_bytes: journal.1,
            checksum_offset_bytes: checksum.0,
            checksum_len_bytes: checksum.1,
            parity,
            bpgl_capacity,
            uuid,
            member_index: u32_at(32),
            member_count: u32_at(36),
            generation: u64_at(40),
            state,
            data_offset_bytes: u64_at(56),
            data_bytes: u64_at(64),
            chunk_bytes: u64_at(72),
            created_unix_secs: u64_at(80),
            layout,
            events,
            runs,
        };
        sb.validate()?;
        Ok(sb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Superblock {
        Superblock {
            uuid: *b"0123456789abcdef",
            member_index: 2,
            member_count: 5,
            generation: 7,
            state: ArrayStateTag::Degraded,
            data_offset_bytes: DEFAULT_DATA_OFFSET_BYTES,
            data_bytes: 1 << 30,
            chunk_bytes: 65536,
            created_unix_secs: 1_800_000_000,
            layout: "scheme=raid5;disks=5".into(),
            events: vec![Event::Fail(3), Event::Replace(3)],
            runs: vec![(0, 2), (12, 1)],
            parity: crate::lazy::ParityPolicy::Lazy,
            bpgl_capacity: 512,
            features: FEATURE_CHECKSUMS,
            journal_offset_bytes: 0,
            journal_len_bytes: 0,
            checksum_offset_bytes: 768 << 10,
            checksum_len_bytes: 256 << 10,
        }
    }

    fn resealed(mut b: Vec<u8>) -> Vec<u8> {
        let crc = crc32c(&b[..4092]);
        b[4092..4096].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn version_3_features_round_trip_and_reserved_bytes_are_refused() {
        let mut s = sample();
        s.data_offset_bytes = 3 << 20;
        s.features = FEATURE_JOURNAL | FEATURE_CHECKSUMS;
        s.journal_offset_bytes = 1 << 20;
        s.journal_len_bytes = 1 << 20;
        s.checksum_offset_bytes = 2 << 20;
        s.checksum_len_bytes = 1 << 20;
        let b = s.encode().unwrap();
        assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(b[2988..2992].try_into().unwrap()), 3);
        assert_eq!(Superblock::decode(&b).unwrap(), s);
        // Every reserved or unused byte, set, is refused naming it.
        for at in [
            53usize,
            90 + s.layout.len(),
            1119,
            1140,
            1500,
            2982,
            3024,
            4091,
        ] {
            let mut d = b.clone();
            d[at] = 1;
            let e = Superblock::decode(&resealed(d)).unwrap_err().to_string();
            assert!(e.contains(&format!("byte {at}")), "byte {at}: {e}");
        }
        // Unknown feature flags and regions past the data offset are refused.
        let mut d = b.clone();
        assert_eq!(
            FEATURES_KNOWN & 8,
            0,
            "the test needs a flag no version knows"
        );
        d[2988] |= 8;
        assert!(Superblock::decode(&resealed(d))
            .unwrap_err()
            .to_string()
            .contains("features"));
        let mut t = s.clone();
        t.checksum_len_bytes = 2 << 20;
        assert!(t
            .encode()
            .unwrap_err()
            .to_string()
            .contains("checksum region"));
        let mut t = s.clone();
        t.features = FEATURE_CHECKSUMS;
        assert!(t
            .encode()
            .unwrap_err()
            .to_string()
            .contains("journal region"));
        // Version 2 (what the previous build wrote): no features, regions empty, and the
        // reserved bytes are not checked.
        let mut v2 = sample();
        v2.features = 0;
        v2.checksum_offset_bytes = 0;
        v2.checksum_len_bytes = 0;
        let mut d = v2.encode().unwrap();
        d[8..12].copy_from_slice(&2u32.to_le_bytes());
        d[3500] = 9;
        d[2990] = 9;
        let got = Superblock::decode(&resealed(d)).unwrap();
        assert_eq!(got.features, 0);
        assert_eq!((got.checksum_offset_bytes, got.checksum_len_bytes), (0, 0));
    }

    #[test]
    fn version_1_reads_as_eager_parity() {
        let s = sample();
        let mut b = s.encode().unwrap();
        // What version 1 wrote: version 1, nothing past the runs.
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        b[2980..2988].fill(0);
        let crc = crc32c(&b[..4092]);
        b[4092..4096].copy_from_slice(&crc.to_le_bytes());
        let d = Superblock::decode(&b).unwrap();
        assert_eq!(d.parity, crate::lazy::ParityPolicy::Eager);
        assert_eq!(d.bpgl_capacity, 0);
        assert_eq!(d.layout, s.layout);
        // A version 2 superblock with an unknown policy is refused, naming the field.
        let mut v = s.encode().unwrap();
        v[2980] = 7;
        let crc = crc32c(&v[..4092]);
        v[4092..4096].copy_from_slice(&crc.to_le_bytes());
        assert!(Superblock::decode(&v)
            .unwrap_err()
            .to_string()
            .contains("parity policy"));
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The CRC-32C check value for "123456789" (RFC 3720 appendix B.4 test vectors' kind).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn round_trip_and_every_damage_is_named() {
        let s = sample();
        let b = s.encode().unwrap();
        assert_eq!(b.len(), SUPERBLOCK_BYTES);
        assert_eq!(Superblock::decode(&b).unwrap(), s);
        // A flipped bit anywhere in the checksummed area is caught.
        for at in [0usize, 20, 40, 95, 1125, 1450, 2000, 4091] {
            let mut d = b.clone();
            d[at] ^= 0x10;
            let e = Superblock::decode(&d).unwrap_err();
            assert!(
                matches!(
                    e,
                    SuperblockError::Checksum { .. } | SuperblockError::NoMagic
                ),
                "byte {at}: {e}"
            );
        }
        assert_eq!(
            Superblock::decode(&[0u8; 4096]).unwrap_err(),
            SuperblockError::NoMagic
        );
        assert_eq!(
            Superblock::decode(&b[..100]).unwrap_err(),
            SuperblockError::Short(100)
        );
        let mut v = b.clone();
        v[8] = 9;
        assert_eq!(
            Superblock::decode(&v).unwrap_err(),
            SuperblockError::Version(9)
        );
    }

    #[test]
    fn invalid_fields_are_refused_on_encode() {
        let mut s = sample();
        s.member_index = 5;
        assert!(s.encode().unwrap_err().to_string().contains("member index"));
        let mut s = sample();
        s.chunk_bytes = 1000;
        assert!(s.encode().unwrap_err().to_string().contains("chunk size"));
        let mut s = sample();
        s.events.push(Event::Fail(9));
        assert!(s.encode().unwrap_err().to_string().contains("events"));
        let mut s = sample();
        s.runs = vec![(3, 0)];
        assert!(s.encode().unwrap_err().to_string().contains("runs"));
        // Two events make at most four generations after the first (each can bring a staging
        // stop): generation 4 is possible, 5 is not.
        let mut s = sample();
        s.runs = vec![(0, 4)];
        assert!(s.encode().is_ok());
        let mut s = sample();
        s.runs = vec![(0, 5)];
        assert!(s.encode().unwrap_err().to_string().contains("runs"));
        let mut s = sample();
        s.layout = "x".repeat(2000);
        assert!(s.encode().unwrap_err().to_string().contains("layout"));
    }
}

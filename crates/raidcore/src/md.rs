//! Linux MD's version-1 superblock (`struct mdp_superblock_1`, include/uapi/linux/raid/md_p.h),
//! as a pure codec: [`MdSuperblock::decode`] checks every field the kernel checks and says which
//! one is wrong; [`MdSuperblock::encode`] writes the bytes mdadm and the kernel write.
//!
//! Where it lives on a member ([`MdVersion`]): v1.0 near the end (`(sectors - 16) & !7`), v1.1
//! at sector 0, v1.2 at sector 8 (4 KiB). All integers are little-endian; sizes and offsets are
//! in 512-byte sectors.
//!
//! ```text
//! offset  size  field
//!      0     4  magic 0xa92b4efc
//!      4     4  major version (1)
//!      8     4  feature map (FEATURE_*)
//!     12     4  pad0 (0)
//!     16    16  set (array) UUID
//!     32    32  set name (NUL padded)
//!     64     8  ctime: low 40 bits seconds, high 24 bits microseconds
//!     72     4  level (signed: -4 multipath, -1 linear, 0, 1, 4, 5, 6, 10)
//!     76     4  layout
//!     80     8  size: sectors of each member the array uses
//!     88     4  chunk size in sectors
//!     92     4  raid disks
//!     96     4  bitmap offset (signed sectors from the superblock; with FEATURE_BITMAP), or
//!               PPL offset (signed u16) and size (u16) (with FEATURE_PPL)
//!    100     4  new level          104  8  reshape position (array sectors)
//!    112     4  delta disks        116  4  new layout       120  4  new chunk (sectors)
//!    124     4  new offset (signed sectors added to the data offset; FEATURE_NEW_OFFSET)
//!    128     8  data offset        136  8  data size (sectors usable for data)
//!    144     8  super offset       152  8  recovery offset (FEATURE_RECOVERY_OFFSET)
//!    160     4  dev number (index into dev roles)   164  4  corrected read count
//!    168    16  device UUID
//!    184     1  device flags (bit 0 write-mostly, bit 1 failfast)
//!    185     1  bad block log shift                 186  2  bad block log size (sectors)
//!    188     4  bad block log offset (signed sectors from the superblock)
//!    192     8  utime              200  8  events
//!    208     8  resync offset: array sectors known in sync (all ones = clean)
//!    216     4  checksum           220  4  max dev (entries of dev roles)
//!    224    32  pad3 (0)
//!    256  2*max_dev  dev roles, by dev number: 0..=0xfeff active role (slot), 0xffff spare,
//!               0xfffe faulty, 0xfffd journal
//! ```
//!
//! The checksum is MD's: the 32-bit little-endian words of bytes `0..256 + 2*max_dev` (the
//! checksum field counted as 0, a trailing half word as a 16-bit value) summed into 64 bits,
//! then the high 32 bits added to the low 32. It is not a CRC: it catches every single-bit
//! flip, not every burst.
//!
//! The bad block log ([`decode_bad_blocks`]) is a separate area at `bblog_offset` sectors from
//! the superblock: little-endian u64 entries `sector << 10 | length` (both in units of
//! `1 << bblog_shift` sectors), ended by an all-ones entry.
//!
//! What this module does not decide: whether raidforge can run an array with these values
//! (levels, layouts, features it implements): that is the adopting code's refusal, with its own
//! message. Here a superblock is refused only when the kernel would refuse it too.

use crate::record::{le_u32, le_u64};

/// MD's superblock magic.
pub const MD_MAGIC: u32 = 0xa92b_4efc;
/// Bytes before the dev roles.
pub const MD_SB_HEAD_BYTES: usize = 256;
/// The kernel's bound on `max_dev` (the roles must fit in 4 KiB).
pub const MD_MAX_DEV_LIMIT: u32 = (4096 - 256) / 2;
/// Bytes one superblock block occupies on a member (mdadm writes and reads 4 KiB).
pub const MD_SB_BLOCK_BYTES: usize = 4096;

/// `feature_map` bit: `bitmap_offset` holds an internal write-intent bitmap's offset.
pub const FEATURE_BITMAP_OFFSET: u32 = 1;
/// `feature_map` bit: `recovery_offset` is meaningful (this member is being recovered).
pub const FEATURE_RECOVERY_OFFSET: u32 = 2;
/// `feature_map` bit: a reshape is in progress (`reshape_position`, new geometry).
pub const FEATURE_RESHAPE_ACTIVE: u32 = 4;
/// `feature_map` bit: the bad block log is not empty.
pub const FEATURE_BAD_BLOCKS: u32 = 8;
/// `feature_map` bit: this member is replacing an active one with the same role.
pub const FEATURE_REPLACEMENT: u32 = 16;
/// `feature_map` bit: the reshape goes backwards.
pub const FEATURE_RESHAPE_BACKWARDS: u32 = 32;
/// `feature_map` bit: `new_offset` must be honoured (reshape moving the data).
pub const FEATURE_NEW_OFFSET: u32 = 64;
/// `feature_map` bit: the recovery in progress is guided by the bitmap.
pub const FEATURE_RECOVERY_BITMAP: u32 = 128;
/// `feature_map` bit: a clustered array (md-cluster).
pub const FEATURE_CLUSTERED: u32 = 256;
/// `feature_map` bit: the array has a write journal device (raid5-cache).
pub const FEATURE_JOURNAL: u32 = 512;
/// `feature_map` bit: partial parity log (RAID5 PPL), one log.
pub const FEATURE_PPL: u32 = 1024;
/// `feature_map` bit: partial parity log, several logs.
pub const FEATURE_MULTIPLE_PPLS: u32 = 2048;
/// `feature_map` bit: RAID0 `layout` is meaningful (multi-zone RAID0 layout chosen).
pub const FEATURE_RAID0_LAYOUT: u32 = 4096;
/// Every bit the kernel knows.
pub const FEATURE_ALL: u32 = 0x1fff;

/// The names of the feature bits, lowest first (for messages).
pub const FEATURE_NAMES: [(u32, &str); 13] = [
    (FEATURE_BITMAP_OFFSET, "internal write-intent bitmap"),
    (FEATURE_RECOVERY_OFFSET, "recovery offset"),
    (FEATURE_RESHAPE_ACTIVE, "reshape in progress"),
    (FEATURE_BAD_BLOCKS, "bad block log entries"),
    (FEATURE_REPLACEMENT, "replacement in progress"),
    (FEATURE_RESHAPE_BACKWARDS, "backwards reshape"),
    (FEATURE_NEW_OFFSET, "new data offset (reshape)"),
    (FEATURE_RECOVERY_BITMAP, "bitmap-guided recovery"),
    (FEATURE_CLUSTERED, "clustered array"),
    (FEATURE_JOURNAL, "write journal device"),
    (FEATURE_PPL, "partial parity log (PPL)"),
    (FEATURE_MULTIPLE_PPLS, "partial parity log (PPL)"),
    (FEATURE_RAID0_LAYOUT, "raid0 layout"),
];

/// Role value: a spare (or an unused dev number).
pub const ROLE_SPARE: u16 = 0xffff;
/// Role value: a faulty member.
pub const ROLE_FAULTY: u16 = 0xfffe;
/// Role value: the write journal device.
pub const ROLE_JOURNAL: u16 = 0xfffd;
/// Roles below this are active slots (`MD_DISK_ROLE_MAX`).
pub const ROLE_MAX: u16 = 0xff00;

/// `resync_offset` of a clean array.
pub const RESYNC_CLEAN: u64 = u64::MAX;

/// Which v1.x superblock: where it sits on the member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MdVersion {
    /// At the end: `(sectors - 16) & !7`.
    V1_0,
    /// At sector 0.
    V1_1,
    /// At sector 8 (4 KiB), mdadm's default.
    V1_2,
}

impl MdVersion {
    /// Every version, in the order assembly looks for them (v1.2 first, mdadm's default).
    pub const ALL: [MdVersion; 3] = [MdVersion::V1_2, MdVersion::V1_1, MdVersion::V1_0];

    /// The superblock's sector on a member of `dev_sectors` sectors (None when the member is
    /// too small to hold one).
    pub fn super_offset(self, dev_sectors: u64) -> Option<u64> {
        match self {
            MdVersion::V1_0 => dev_sectors.checked_sub(16).map(|s| s & !7),
            MdVersion::V1_1 => (dev_sectors >= 8).then_some(0),
            MdVersion::V1_2 => (dev_sectors >= 16).then_some(8),
        }
    }

    /// "1.0", "1.1", "1.2".
    pub fn name(self) -> &'static str {
        match self {
            MdVersion::V1_0 => "1.0",
            MdVersion::V1_1 => "1.1",
            MdVersion::V1_2 => "1.2",
        }
    }

    /// From mdadm's `--metadata` name ("1.0", "1.1", "1.2", "1" = 1.2, "default").
    pub fn from_name(s: &str) -> Option<MdVersion> {
        match s {
            "1.0" | "1.00" => Some(MdVersion::V1_0),
            "1.1" | "1.01" => Some(MdVersion::V1_1),
            "1.2" | "1.02" | "1" | "default" => Some(MdVersion::V1_2),
            _ => None,
        }
    }

    /// The version whose superblock sits at `super_offset` on a member of `dev_sectors`.
    pub fn at(super_offset: u64, dev_sectors: u64) -> Option<MdVersion> {
        MdVersion::ALL
            .into_iter()
            .find(|v| v.super_offset(dev_sectors) == Some(super_offset))
    }
}

/// What a member is in the array, from its entry in the dev roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MdRole {
    /// Holds slot `n` (0-based) of the array's layout.
    Active(u16),
    /// A spare (or a dev number with no member).
    Spare,
    /// Failed.
    Faulty,
    /// The write journal device.
    Journal,
    /// A value the kernel does not define (between the slots and the special values).
    Unknown(u16),
}

impl MdRole {
    /// From a raw dev roles entry.
    pub fn from_raw(v: u16) -> MdRole {
        match v {
            ROLE_SPARE => MdRole::Spare,
            ROLE_FAULTY => MdRole::Faulty,
            ROLE_JOURNAL => MdRole::Journal,
            v if v < ROLE_MAX => MdRole::Active(v),
            v => MdRole::Unknown(v),
        }
    }

    /// The raw dev roles entry.
    pub fn raw(self) -> u16 {
        match self {
            MdRole::Active(n) | MdRole::Unknown(n) => n,
            MdRole::Spare => ROLE_SPARE,
            MdRole::Faulty => ROLE_FAULTY,
            MdRole::Journal => ROLE_JOURNAL,
        }
    }
}

/// Why an MD superblock was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MdSuperblockError {
    /// Fewer bytes than the superblock needs (256, then 256 + 2 * max_dev).
    #[error("MD superblock needs {need} bytes, got {got}")]
    Short {
        /// Bytes given.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The magic is not MD's: not an MD v1.x member (or wiped).
    #[error("no MD superblock (magic {found:#010x}, expected {MD_MAGIC:#010x})")]
    NoMagic {
        /// The value found.
        found: u32,
    },
    /// A major version other than 1 (0.90 superblocks are a different format).
    #[error("MD superblock major version {0} is not supported (only 1.x)")]
    Version(u32),
    /// The checksum does not match: damaged.
    #[error("MD superblock checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): damaged member")]
    Checksum {
        /// Stored checksum.
        stored: u32,
        /// Checksum of the bytes as read.
        computed: u32,
    },
    /// A field out of the range the kernel accepts.
    #[error("MD superblock field {field} is invalid: {reason}")]
    Field {
        /// Which field (its name in `mdp_superblock_1`).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

fn field(field: &'static str, reason: impl Into<String>) -> MdSuperblockError {
    MdSuperblockError::Field {
        field,
        reason: reason.into(),
    }
}

/// One decoded v1.x superblock: every field of `mdp_superblock_1` except the padding (always
/// zero) and the checksum (computed by [`MdSuperblock::encode`]). `dev_roles.len()` is `max_dev`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MdSuperblock {
    /// Feature bits (`FEATURE_*`).
    pub feature_map: u32,
    /// The array's UUID.
    pub set_uuid: [u8; 16],
    /// The array's name, NUL padded ("host:name" as mdadm writes it).
    pub set_name: [u8; 32],
    /// Creation time: low 40 bits seconds, high 24 bits microseconds.
    pub ctime: u64,
    /// RAID level (-4 multipath, -1 linear, 0, 1, 4, 5, 6, 10).
    pub level: i32,
    /// Layout (the level's algorithm; RAID10: near | far << 8 | offset << 16 | version << 17).
    pub layout: u32,
    /// Sectors of each member the array uses.
    pub size: u64,
    /// Chunk size in sectors (0 for RAID1).
    pub chunk_sectors: u32,
    /// Active slots of the layout.
    pub raid_disks: u32,
    /// The raw word at 96: bitmap offset (signed) or PPL offset and size.
    pub bitmap_offset: u32,
    /// Reshape: the level being reshaped to.
    pub new_level: i32,
    /// Reshape: next array sector to reshape.
    pub reshape_position: u64,
    /// Reshape: change in raid disks.
    pub delta_disks: i32,
    /// Reshape: the new layout.
    pub new_layout: u32,
    /// Reshape: the new chunk size in sectors.
    pub new_chunk: u32,
    /// Reshape: signed sectors added to the data offset in the new layout.
    pub new_offset: i32,
    /// Sector where this member's data starts.
    pub data_offset: u64,
    /// Sectors of this member usable for data.
    pub data_size: u64,
    /// Sector of this superblock.
    pub super_offset: u64,
    /// Sectors (from the data offset) of this member already recovered.
    pub recovery_offset: u64,
    /// This member's index into the dev roles.
    pub dev_number: u32,
    /// Read errors corrected by rewriting.
    pub cnt_corrected_read: u32,
    /// This member's UUID.
    pub device_uuid: [u8; 16],
    /// Per-member flags (bit 0 write-mostly, bit 1 failfast).
    pub devflags: u8,
    /// Bad block log: shift from sectors to its block size.
    pub bblog_shift: u8,
    /// Bad block log: sectors reserved for it.
    pub bblog_size: u16,
    /// Bad block log: signed sector offset from the superblock.
    pub bblog_offset: i32,
    /// Update time (same encoding as `ctime`).
    pub utime: u64,
    /// Event count: bumped on every superblock update.
    pub events: u64,
    /// Array sectors known in sync; [`RESYNC_CLEAN`] when clean.
    pub resync_offset: u64,
    /// Role of every dev number (`max_dev` entries).
    pub dev_roles: Vec<u16>,
}

/// MD's checksum of a superblock's `256 + 2 * max_dev` bytes (the checksum field taken as 0).
pub fn md_checksum(sb: &[u8]) -> u32 {
    let mut sum: u64 = 0;
    let mut i = 0;
    while i + 4 <= sb.len() {
        if i != 216 {
            sum += u64::from(le_u32(sb, i));
        }
        i += 4;
    }
    if sb.len() - i == 2 {
        sum += u64::from(u16::from_le_bytes([sb[i], sb[i + 1]]));
    }
    ((sum & 0xffff_ffff) + (sum >> 32)) as u32
}

impl MdSuperblock {
    /// Bytes of this superblock: `256 + 2 * max_dev`.
    pub fn len(&self) -> usize {
        MD_SB_HEAD_BYTES + 2 * self.dev_roles.len()
    }

    /// Never empty (256 bytes at least); here for clippy's `len` convention.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Bytes of the superblock starting `b` would need: `256 + 2 * max_dev` (256 when `b` is
    /// shorter than that).
    pub fn needed_len(b: &[u8]) -> usize {
        if b.len() < MD_SB_HEAD_BYTES {
            return MD_SB_HEAD_BYTES;
        }
        let max_dev = le_u32(b, 220).min(MD_MAX_DEV_LIMIT) as usize;
        MD_SB_HEAD_BYTES + 2 * max_dev
    }

    /// Decodes the superblock at the start of `b` (bytes after its `256 + 2 * max_dev` are
    /// not looked at). Checks, in order: length, magic, major version, `max_dev`, checksum,
    /// then every field the kernel's `super_1_load` / `super_1_validate` check (naming it).
    pub fn decode(b: &[u8]) -> Result<MdSuperblock, MdSuperblockError> {
        if b.len() < MD_SB_HEAD_BYTES {
            return Err(MdSuperblockError::Short {
                got: b.len(),
                need: MD_SB_HEAD_BYTES,
            });
        }
        let magic = le_u32(b, 0);
        if magic != MD_MAGIC {
            return Err(MdSuperblockError::NoMagic { found: magic });
        }
        let major = le_u32(b, 4);
        if major != 1 {
            return Err(MdSuperblockError::Version(major));
        }
        let max_dev = le_u32(b, 220);
        if max_dev > MD_MAX_DEV_LIMIT {
            return Err(field(
                "max_dev",
                format!("{max_dev} entries; the kernel accepts at most {MD_MAX_DEV_LIMIT}"),
            ));
        }
        let len = MD_SB_HEAD_BYTES + 2 * max_dev as usize;
        if b.len() < len {
            return Err(MdSuperblockError::Short {
                got: b.len(),
                need: len,
            });
        }
        let b = &b[..len];
        let stored = le_u32(b, 216);
        let computed = md_checksum(b);
        if stored != computed {
            return Err(MdSuperblockError::Checksum { stored, computed });
        }
        let i32_at = |o: usize| le_u32(b, o) as i32;
        let sb = MdSuperblock {
            feature_map: le_u32(b, 8),
            set_uuid: b[16..32].try_into().expect("16 bytes"),
            set_name: b[32..64].try_into().expect("32 bytes"),
            ctime: le_u64(b, 64),
            level: i32_at(72),
            layout: le_u32(b, 76),
            size: le_u64(b, 80),
            chunk_sectors: le_u32(b, 88),
            raid_disks: le_u32(b, 92),
            bitmap_offset: le_u32(b, 96),
            new_level: i32_at(100),
            reshape_position: le_u64(b, 104),
            delta_disks: i32_at(112),
            new_layout: le_u32(b, 116),
            new_chunk: le_u32(b, 120),
            new_offset: i32_at(124),
            data_offset: le_u64(b, 128),
            data_size: le_u64(b, 136),
            super_offset: le_u64(b, 144),
            recovery_offset: le_u64(b, 152),
            dev_number: le_u32(b, 160),
            cnt_corrected_read: le_u32(b, 164),
            device_uuid: b[168..184].try_into().expect("16 bytes"),
            devflags: b[184],
            bblog_shift: b[185],
            bblog_size: u16::from_le_bytes([b[186], b[187]]),
            bblog_offset: i32_at(188),
            utime: le_u64(b, 192),
            events: le_u64(b, 200),
            resync_offset: le_u64(b, 208),
            dev_roles: b[256..len]
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect(),
        };
        if le_u32(b, 12) != 0 {
            return Err(field(
                "pad0",
                "not zero (a feature this build does not know?)",
            ));
        }
        if let Some(i) = b[224..256].iter().position(|&x| x != 0) {
            return Err(field(
                "pad3",
                format!(
                    "byte {} is not zero (a feature this build does not know?)",
                    224 + i
                ),
            ));
        }
        sb.check()?;
        Ok(sb)
    }

    /// The field checks of [`MdSuperblock::decode`] (also run by [`MdSuperblock::encode`]).
    pub fn check(&self) -> Result<(), MdSuperblockError> {
        let unknown = self.feature_map & !FEATURE_ALL;
        if unknown != 0 {
            return Err(field(
                "feature_map",
                format!(
                    "unknown feature bits {unknown:#x} (of {:#x})",
                    self.feature_map
                ),
            ));
        }
        if self.dev_roles.len() > MD_MAX_DEV_LIMIT as usize {
            return Err(field(
                "max_dev",
                format!(
                    "{} entries; the kernel accepts at most {MD_MAX_DEV_LIMIT}",
                    self.dev_roles.len()
                ),
            ));
        }
        if !matches!(self.level, -4 | -1 | 0 | 1 | 4 | 5 | 6 | 10) {
            return Err(field(
                "level",
                format!(
                    "{} is not an MD level (-4, -1, 0, 1, 4, 5, 6, 10)",
                    self.level
                ),
            ));
        }
        if self.raid_disks == 0 || self.raid_disks >= u32::from(ROLE_MAX) {
            return Err(field(
                "raid_disks",
                format!("{} (must be 1..{ROLE_MAX})", self.raid_disks),
            ));
        }
        if self.data_size < 10 {
            return Err(field(
                "data_size",
                format!("{} sectors (the kernel needs at least 10)", self.data_size),
            ));
        }
        if self.data_offset.checked_add(self.data_size).is_none() {
            return Err(field(
                "data_size",
                format!(
                    "data offset {} + size {} overflows",
                    self.data_offset, self.data_size
                ),
            ));
        }
        let f = self.feature_map;
        if f & FEATURE_BAD_BLOCKS != 0 {
            if self.bblog_size == 0 || self.bblog_size > 8 {
                return Err(field(
                    "bblog_size",
                    format!(
                        "{} sectors with bad blocks recorded (the kernel reads 1..=8)",
                        self.bblog_size
                    ),
                ));
            }
            if self.bblog_offset == 0 {
                return Err(field("bblog_offset", "0 with bad blocks recorded"));
            }
        }
        if f & (FEATURE_PPL | FEATURE_MULTIPLE_PPLS) != 0 {
            if f & (FEATURE_BITMAP_OFFSET | FEATURE_JOURNAL) != 0 {
                return Err(field(
                    "feature_map",
                    "a partial parity log together with a bitmap or a journal",
                ));
            }
            if f & FEATURE_PPL != 0 && f & FEATURE_MULTIPLE_PPLS != 0 {
                return Err(field("feature_map", "both PPL feature bits set"));
            }
            let (_, size) = self.ppl();
            if size == 0 {
                return Err(field("ppl", "a partial parity log of size 0"));
            }
        }
        if f & FEATURE_BITMAP_OFFSET != 0 && self.bitmap_offset == 0 {
            return Err(field("bitmap_offset", "0 with an internal bitmap"));
        }
        Ok(())
    }

    /// The superblock's `256 + 2 * max_dev` bytes with its checksum (a member's superblock
    /// block is these bytes followed by zeros up to [`MD_SB_BLOCK_BYTES`]).
    pub fn encode(&self) -> Result<Vec<u8>, MdSuperblockError> {
        self.check()?;
        let mut b = vec![0u8; self.len()];
        let put32 = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        let put64 = |b: &mut [u8], o: usize, v: u64| b[o..o + 8].copy_from_slice(&v.to_le_bytes());
        put32(&mut b, 0, MD_MAGIC);
        put32(&mut b, 4, 1);
        put32(&mut b, 8, self.feature_map);
        b[16..32].copy_from_slice(&self.set_uuid);
        b[32..64].copy_from_slice(&self.set_name);
        put64(&mut b, 64, self.ctime);
        put32(&mut b, 72, self.level as u32);
        put32(&mut b, 76, self.layout);
        put64(&mut b, 80, self.size);
        put32(&mut b, 88, self.chunk_sectors);
        put32(&mut b, 92, self.raid_disks);
        put32(&mut b, 96, self.bitmap_offset);
        put32(&mut b, 100, self.new_level as u32);
        put64(&mut b, 104, self.reshape_position);
        put32(&mut b, 112, self.delta_disks as u32);
        put32(&mut b, 116, self.new_layout);
        put32(&mut b, 120, self.new_chunk);
        put32(&mut b, 124, self.new_offset as u32);
        put64(&mut b, 128, self.data_offset);
        put64(&mut b, 136, self.data_size);
        put64(&mut b, 144, self.super_offset);
        put64(&mut b, 152, self.recovery_offset);
        put32(&mut b, 160, self.dev_number);
        put32(&mut b, 164, self.cnt_corrected_read);
        b[168..184].copy_from_slice(&self.device_uuid);
        b[184] = self.devflags;
        b[185] = self.bblog_shift;
        b[186..188].copy_from_slice(&self.bblog_size.to_le_bytes());
        put32(&mut b, 188, self.bblog_offset as u32);
        put64(&mut b, 192, self.utime);
        put64(&mut b, 200, self.events);
        put64(&mut b, 208, self.resync_offset);
        put32(&mut b, 220, self.dev_roles.len() as u32);
        for (i, r) in self.dev_roles.iter().enumerate() {
            b[256 + 2 * i..258 + 2 * i].copy_from_slice(&r.to_le_bytes());
        }
        let csum = md_checksum(&b);
        put32(&mut b, 216, csum);
        Ok(b)
    }

    /// `max_dev`: entries in the dev roles.
    pub fn max_dev(&self) -> u32 {
        self.dev_roles.len() as u32
    }

    /// This member's role (a dev number past the roles is a spare, as in the kernel).
    pub fn role(&self) -> MdRole {
        self.role_of(self.dev_number)
    }

    /// The role of dev number `n`.
    pub fn role_of(&self, n: u32) -> MdRole {
        self.dev_roles
            .get(n as usize)
            .map_or(MdRole::Spare, |&r| MdRole::from_raw(r))
    }

    /// True when the array was shut down clean (`resync_offset` all ones).
    pub fn is_clean(&self) -> bool {
        self.resync_offset == RESYNC_CLEAN
    }

    /// The array name up to its first NUL (lossy UTF-8).
    pub fn name(&self) -> String {
        let end = self.set_name.iter().position(|&c| c == 0).unwrap_or(32);
        String::from_utf8_lossy(&self.set_name[..end]).into_owned()
    }

    /// Seconds since the epoch of `ctime`.
    pub fn ctime_secs(&self) -> u64 {
        self.ctime & ((1 << 40) - 1)
    }

    /// The PPL's signed offset from the superblock and its size, in sectors (the word at 96
    /// read as PPL fields; meaningful with [`FEATURE_PPL`] / [`FEATURE_MULTIPLE_PPLS`]).
    pub fn ppl(&self) -> (i16, u16) {
        (
            self.bitmap_offset as u16 as i16,
            (self.bitmap_offset >> 16) as u16,
        )
    }

    /// The names of the feature bits set, lowest first (PPL once).
    pub fn feature_names(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = FEATURE_NAMES
            .iter()
            .filter(|(bit, _)| self.feature_map & bit != 0)
            .map(|&(_, n)| n)
            .collect();
        v.dedup();
        v
    }

    /// The sectors the array's data occupies on this member, from the superblock's sector
    /// (`data_offset .. data_offset + size`), checked against a member of `dev_sectors`: the
    /// superblock must be where its version puts it, the data area must fit on the member
    /// and inside `data_size`, and must not overlap the superblock. Returns the version.
    pub fn check_placement(&self, dev_sectors: u64) -> Result<MdVersion, MdSuperblockError> {
        let v = MdVersion::at(self.super_offset, dev_sectors).ok_or_else(|| {
            field(
                "super_offset",
                format!(
                    "sector {} is not where v1.0, v1.1 or v1.2 puts a superblock on a member of {dev_sectors} sectors",
                    self.super_offset
                ),
            )
        })?;
        if self.size > self.data_size {
            return Err(field(
                "size",
                format!(
                    "the array uses {} sectors per member but this member has {} for data",
                    self.size, self.data_size
                ),
            ));
        }
        let end = self.data_offset + self.data_size;
        if end > dev_sectors {
            return Err(field(
                "data_size",
                format!(
                    "data sectors {}..{end} pass the member's end ({dev_sectors} sectors)",
                    self.data_offset
                ),
            ));
        }
        let sb_end = self.super_offset + 8;
        if self.data_offset < sb_end && self.super_offset < end {
            return Err(field(
                "data_offset",
                format!(
                    "data sectors {}..{end} overlap the superblock at sector {}",
                    self.data_offset, self.super_offset
                ),
            ));
        }
        Ok(v)
    }
}

/// One bad block log entry: `len` sectors from `sector` (member sectors, from the data offset
/// as the kernel records them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadBlock {
    /// First sector.
    pub sector: u64,
    /// Sectors.
    pub len: u64,
}

/// Decodes a bad block log area (the `bblog_size` sectors at `bblog_offset`): entries until the
/// first all-ones one. An entry of length 0 is refused.
pub fn decode_bad_blocks(b: &[u8], shift: u8) -> Result<Vec<BadBlock>, MdSuperblockError> {
    if shift > 32 {
        return Err(field("bblog_shift", format!("{shift} (at most 32)")));
    }
    let mut v = Vec::new();
    for (i, e) in b.chunks_exact(8).enumerate() {
        let e = u64::from_le_bytes(e.try_into().expect("8 bytes"));
        if e == u64::MAX {
            break;
        }
        let len = (e & 0x3ff) << shift;
        if len == 0 {
            return Err(field(
                "bad block log",
                format!("entry {i} ({e:#018x}) has length 0"),
            ));
        }
        v.push(BadBlock {
            sector: (e >> 10) << shift,
            len,
        });
    }
    Ok(v)
}

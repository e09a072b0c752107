//! Parameter sets for the drives the seed documents used.
//!
//! Every figure names its source next to it. Figures marked *published* come from the named
//! manufacturer document as we know it (no copy of the documents is kept on the build machines:
//! re-check against the PDF before quoting a result to a reader). Figures marked *assumed* are not
//! published for that model; the comment says what we assumed and why. Assumptions shared by
//! several drives:
//!
//! - **A1, inner rate = outer / 2.** Data sheets give only the maximum (outer-zone) sustained
//!   rate. On 3.5-inch platters the innermost data track has about half the radius of the
//!   outermost, and at constant linear density the rate scales with the radius; measured
//!   transfer-rate curves of drives of this generation end at 50-60 % of their start.
//! - **A2, full stroke = 2 x average read seek**, where the sheet gives no full-stroke figure
//!   (WD, which does publish it, gives 21.0 ms against 8.9 ms, a ratio of 2.4).
//! - **A3, command overhead 0.2 ms.** Not published for these models.
//! - **A4, 16 cache segments with read-ahead.** Segment counts are not published; 16 is typical
//!   of SATA drives of the period and gives 0.5-4 MiB segments.
//! - **A5, heads (recording surfaces).** Only the derived cylinder count depends on it (and
//!   through it the seek distances, not the fitted average). Where not published, the head count
//!   is that of the usual platter capacity of the drive's generation.

use super::{DriveParams, HddParams, Rotation, SsdParams};

/// One byte-per-second figure in decimal megabytes, as data sheets write it.
const MB: u64 = 1_000_000;
/// A binary mebibyte, as cache sizes are written.
const MIB: u64 = 1 << 20;
/// Bytes per logical sector of all these drives.
const SECTOR_BYTES: u64 = 512;

/// A drive of the seed documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Drive {
    /// Seagate Barracuda 7200.11, 500 GB, SATA 3 Gb/s: the disks of S2-RAID (seed 000).
    SeagateSt3500320as,
    /// Seagate Constellation ES.2, 2 TB, 7200 rpm: the disks of RAID+ (seed 001).
    SeagateSt32000645ns,
    /// WD Caviar Blue, 160 GB, SATA 3 Gb/s: the disks of IDO (seed 003).
    WdWd1600aajs,
    /// WD Caviar Black, 640 GB, SATA 3 Gb/s: the disks of the RAID4S / RAIDH thesis (seed 004).
    WdWd6401aals,
    /// Intel X25-E, 64 GB SLC SSD: the SSD of the RAID4S / RAIDH thesis (seed 004).
    IntelX25e64gb,
}

impl Drive {
    /// Every drive, in the order of the seed documents.
    pub const ALL: [Drive; 5] = [
        Drive::SeagateSt3500320as,
        Drive::SeagateSt32000645ns,
        Drive::WdWd1600aajs,
        Drive::WdWd6401aals,
        Drive::IntelX25e64gb,
    ];

    /// The short name used on command lines and in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Drive::SeagateSt3500320as => "st3500320as",
            Drive::SeagateSt32000645ns => "st32000645ns",
            Drive::WdWd1600aajs => "wd1600aajs",
            Drive::WdWd6401aals => "wd6401aals",
            Drive::IntelX25e64gb => "x25-e",
        }
    }

    /// The drive with this short name (case-insensitive), or a few obvious aliases.
    pub fn from_name(name: &str) -> Option<Drive> {
        let lower = name.to_ascii_lowercase();
        let drive = match lower.as_str() {
            "st3500320as" | "barracuda-7200.11" => Drive::SeagateSt3500320as,
            "st32000645ns" | "st32000645ss" | "constellation-es2" | "constellation-es.2" => {
                Drive::SeagateSt32000645ns
            }
            "wd1600aajs" | "caviar-blue" => Drive::WdWd1600aajs,
            "wd6401aals" | "caviar-black" => Drive::WdWd6401aals,
            "x25-e" | "x25e" | "intel-x25-e" => Drive::IntelX25e64gb,
            _ => return None,
        };
        Some(drive)
    }

    /// True for the hard disks, false for the SSD.
    pub fn is_hdd(self) -> bool {
        !matches!(self, Drive::IntelX25e64gb)
    }

    /// The drive's parameters.
    pub fn params(self) -> DriveParams {
        match self {
            Drive::SeagateSt3500320as => DriveParams::Hdd(st3500320as()),
            Drive::SeagateSt32000645ns => DriveParams::Hdd(st32000645ns()),
            Drive::WdWd1600aajs => DriveParams::Hdd(wd1600aajs()),
            Drive::WdWd6401aals => DriveParams::Hdd(wd6401aals()),
            Drive::IntelX25e64gb => DriveParams::Ssd(x25e_64gb()),
        }
    }
}

/// Seagate Barracuda 7200.11 ST3500320AS.
/// Source: "Barracuda 7200.11 Serial ATA Product Manual", Seagate publication 100452348.
fn st3500320as() -> HddParams {
    HddParams {
        name: "Seagate ST3500320AS".to_string(),
        // Published: 976,773,168 guaranteed sectors of 512 bytes (500 GB).
        capacity_bytes: 976_773_168 * SECTOR_BYTES,
        // Published: 7200 rpm (average latency 4.16 ms).
        rpm: 7200,
        // Assumed (A5): 4 heads, two 250 GB disks, the 7200.11 generation's platter.
        heads: 4,
        // Published: track-to-track read < 0.8 ms.
        seek_ms_track_to_track: 0.8,
        // Published: average read seek < 8.5 ms.
        seek_ms_avg: 8.5,
        // Assumed (A2): not published; 2 x 8.5 ms.
        seek_ms_full_stroke: 17.0,
        // Published: average write seek < 9.5 ms, i.e. 1.0 ms above the read average.
        seek_ms_write_extra: 1.0,
        // Published: maximum sustained data rate 105 MB/s.
        bytes_per_sec_outer: 105 * MB,
        // Assumed (A1).
        bytes_per_sec_inner: 105 * MB / 2,
        zones: 0,
        // Assumed (A3).
        overhead_ms: 0.2,
        // Published: SATA 3 Gb/s, 300 MB/s.
        interface_bytes_per_sec: 300 * MB,
        // Published: 32 MB cache (the "32" in the model number).
        cache_bytes: 32 * MIB,
        // Assumed (A4).
        cache_segments: 16,
        read_ahead: true,
        rotation: Rotation::Angular,
    }
}

/// Seagate Constellation ES.2 ST32000645NS (SATA; the SAS model ST32000645SS has the same
/// mechanics, and seed 001 attached its drives through SAS adapters).
/// Source: "Constellation ES.2 Serial ATA Product Manual", Seagate publication 100633157.
fn st32000645ns() -> HddParams {
    HddParams {
        name: "Seagate ST32000645NS".to_string(),
        // Published: 3,907,029,168 guaranteed sectors of 512 bytes (2 TB).
        capacity_bytes: 3_907_029_168 * SECTOR_BYTES,
        // Published: 7200 rpm (average latency 4.16 ms).
        rpm: 7200,
        // Assumed (A5): 8 heads, four 500 GB disks, the platter of Seagate's 2 TB drives of 2010.
        heads: 8,
        // Assumed: not published for this model; the 0.8 ms of Seagate's 7200 rpm desktop line.
        seek_ms_track_to_track: 0.8,
        // Published: average read seek 8.5 ms.
        seek_ms_avg: 8.5,
        // Assumed (A2): not published; 2 x 8.5 ms.
        seek_ms_full_stroke: 17.0,
        // Published: average write seek 9.5 ms, i.e. 1.0 ms above the read average.
        seek_ms_write_extra: 1.0,
        // Published: sustained transfer rate 155 MB/s (outer diameter).
        bytes_per_sec_outer: 155 * MB,
        // Assumed (A1).
        bytes_per_sec_inner: 155 * MB / 2,
        zones: 0,
        // Assumed (A3).
        overhead_ms: 0.2,
        // Published: SATA 6 Gb/s, 600 MB/s (seed 001: 400 MB/s per disk through its SAS
        // expanders, also far above the media rate).
        interface_bytes_per_sec: 600 * MB,
        // Published: 64 MB cache.
        cache_bytes: 64 * MIB,
        // Assumed (A4).
        cache_segments: 16,
        read_ahead: true,
        rotation: Rotation::Angular,
    }
}

/// WD Caviar Blue WD1600AAJS.
/// Sources: "WD Caviar Blue SATA specifications" (WD product specification sheet for the
/// WD1600AAJS) and seed 003, which quotes the sheet's sustained rate.
fn wd1600aajs() -> HddParams {
    HddParams {
        name: "WD WD1600AAJS".to_string(),
        // Published: 312,581,808 user sectors of 512 bytes (160 GB).
        capacity_bytes: 312_581_808 * SECTOR_BYTES,
        // Published: 7200 rpm (average latency 4.2 ms); seed 003: "7200 RPM".
        rpm: 7200,
        // Assumed (A5): 2 heads, one 160 GB disk.
        heads: 2,
        // Published: track-to-track seek 2.0 ms.
        seek_ms_track_to_track: 2.0,
        // Published: average read seek 8.9 ms.
        seek_ms_avg: 8.9,
        // Published: full-stroke seek 21.0 ms.
        seek_ms_full_stroke: 21.0,
        // Published: average write seek 10.9 ms, i.e. 2.0 ms above the read average.
        seek_ms_write_extra: 2.0,
        // Published, as quoted by seed 003: "a sustained transfer rate of 60MB/s that is
        // specified in the manufacture's datasheet". Taken as the outer-zone rate.
        bytes_per_sec_outer: 60 * MB,
        // Assumed (A1).
        bytes_per_sec_inner: 30 * MB,
        zones: 0,
        // Assumed (A3).
        overhead_ms: 0.2,
        // Published: SATA 3 Gb/s, 300 MB/s.
        interface_bytes_per_sec: 300 * MB,
        // Published: 8 MB cache.
        cache_bytes: 8 * MIB,
        // Assumed (A4).
        cache_segments: 16,
        read_ahead: true,
        rotation: Rotation::Angular,
    }
}

/// WD Caviar Black WD6401AALS.
/// Sources: "WD Caviar Black SATA specifications" (WD product specification sheet for the
/// WD6401AALS) and seed 004 ("640GB 7200 RPM Western Digital Caviar Black SATA 3.0Gb/s hard
/// drives with 32MB cache").
fn wd6401aals() -> HddParams {
    HddParams {
        name: "WD WD6401AALS".to_string(),
        // Published: 1,250,263,728 user sectors of 512 bytes (640 GB).
        capacity_bytes: 1_250_263_728 * SECTOR_BYTES,
        // Published: 7200 rpm (average latency 4.2 ms); seed 004 agrees.
        rpm: 7200,
        // Published in reviews, not on the sheet: two 320 GB platters, so 4 heads.
        heads: 4,
        // Assumed: the sheet for this model gives no seek figures; we use those WD publishes for
        // its other 7200 rpm Caviar drives (track-to-track 2.0, average read 8.9, write 10.9,
        // full stroke 21.0 ms).
        seek_ms_track_to_track: 2.0,
        seek_ms_avg: 8.9,
        seek_ms_full_stroke: 21.0,
        seek_ms_write_extra: 2.0,
        // Assumed: the sheet gives only interface and peak media (buffer-to-disk) rates; 112 MB/s
        // is the outer-zone rate measured on this drive in published benchmarks.
        bytes_per_sec_outer: 112 * MB,
        // Assumed (A1).
        bytes_per_sec_inner: 56 * MB,
        zones: 0,
        // Assumed (A3).
        overhead_ms: 0.2,
        // Published: SATA 3 Gb/s, 300 MB/s (seed 004: "SATA 3.0Gb/s").
        interface_bytes_per_sec: 300 * MB,
        // Published: 32 MB cache (seed 004 agrees).
        cache_bytes: 32 * MIB,
        // Assumed (A4).
        cache_segments: 16,
        read_ahead: true,
        rotation: Rotation::Angular,
    }
}

/// Intel X25-E 64 GB (SLC).
/// Sources: "Intel X25-E SATA Solid-State Drive Product Manual", Intel order number 319984;
/// seed 004, Figure 3.6 (3,300 4 KB IOPS, 64 GB).
fn x25e_64gb() -> SsdParams {
    SsdParams {
        name: "Intel X25-E 64GB".to_string(),
        // Published: 125,045,424 user sectors of 512 bytes (64 GB); seed 004: 64 GB.
        capacity_bytes: 125_045_424 * SECTOR_BYTES,
        // Published: 10 parallel NAND channels (Intel's description of the controller).
        channels: 10,
        // Published: read latency 75 us.
        read_latency_us: 75.0,
        // Published: write latency 85 us.
        write_latency_us: 85.0,
        // Published: random 4 KB reads 35,000 IOPS.
        read_iops_4k: 35_000,
        // Published: random 4 KB writes 3,300 IOPS (seed 004, Figure 3.6, quotes the same).
        write_iops_4k: 3_300,
        // Published: sequential read up to 250 MB/s.
        read_bytes_per_sec: 250 * MB,
        // Published: sequential write up to 170 MB/s.
        write_bytes_per_sec: 170 * MB,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_all_build() {
        for d in Drive::ALL {
            assert_eq!(Drive::from_name(d.name()), Some(d));
            assert_eq!(Drive::from_name(&d.name().to_uppercase()), Some(d));
            let params = d.params();
            assert_eq!(matches!(params, DriveParams::Hdd(_)), d.is_hdd());
            params.build(0).unwrap();
        }
        assert_eq!(Drive::from_name("nonesuch"), None);
    }
}

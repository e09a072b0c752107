//! The scheme matrix: for every scheme, a seeded sequence of writes and reads against a
//! reference model; then for every single failure (and every pair for two-failure schemes):
//! degraded reads match, degraded writes land, the rebuild (through the scheduler, sequential
//! or parallel) completes, reads match and every stripe is consistent; then the failed members
//! are replaced and the array is copied back, after which each replaced member is
//! byte-identical to the same member of a shadow array that received the same writes and never
//! failed.

mod common;

use common::{scenario, scenario_aligned};
use layout::{Params, SchemeKind};

fn d(n: usize) -> Params {
    Params {
        disks: Some(n),
        ..Params::default()
    }
}

#[test]
fn raid0() {
    scenario(SchemeKind::Raid0, d(4), 512, 1);
}

#[test]
fn raid1() {
    scenario(SchemeKind::Raid1, d(3), 512, 2);
}

#[test]
fn raid10() {
    scenario(SchemeKind::Raid10, d(5), 512, 3);
}

#[test]
fn raid4() {
    scenario(SchemeKind::Raid4, d(5), 512, 4);
}

#[test]
fn raid5() {
    scenario(SchemeKind::Raid5, d(5), 4096, 5);
}

#[test]
fn raid5_with_spare() {
    scenario(SchemeKind::Raid5, Params { spares: 1, ..d(6) }, 512, 6);
}

#[test]
fn raid6() {
    scenario(SchemeKind::Raid6, d(6), 512, 7);
}

#[test]
fn raid50() {
    let p = Params {
        width: Some(3),
        spares: 1,
        ..d(7)
    };
    scenario(SchemeKind::Raid50, p, 512, 8);
}

#[test]
fn raid60() {
    let p = Params {
        width: Some(4),
        spares: 1,
        ..d(9)
    };
    scenario(SchemeKind::Raid60, p, 512, 2);
}

#[test]
fn random() {
    let p = Params {
        width: Some(4),
        seed: 3,
        stripes: Some(12),
        ..d(7)
    };
    scenario(SchemeKind::Random, p, 512, 9);
}

#[test]
fn random_level6() {
    let p = Params {
        width: Some(4),
        level: Some(6),
        seed: 4,
        stripes: Some(10),
        ..d(6)
    };
    scenario(SchemeKind::Random, p, 512, 10);
}

#[test]
fn hash() {
    let p = Params {
        width: Some(3),
        seed: 5,
        stripes: Some(12),
        ..d(6)
    };
    scenario(SchemeKind::Hash, p, 512, 11);
}

#[test]
fn raidplus_5_3() {
    scenario(
        SchemeKind::RaidPlus,
        Params {
            width: Some(3),
            ..d(5)
        },
        512,
        12,
    );
}

#[test]
fn raidplus_7_4_level6() {
    let p = Params {
        width: Some(4),
        level: Some(6),
        ..d(7)
    };
    scenario(SchemeKind::RaidPlus, p, 512, 13);
}

#[test]
fn s2raid5() {
    let p = Params {
        group: Some(3),
        partitions: Some(3),
        ..d(9)
    };
    scenario(SchemeKind::S2Raid5, p, 512, 14);
}

#[test]
fn rm2() {
    scenario(SchemeKind::Rm2, d(8), 512, 15);
}

#[test]
fn raidh() {
    let p = Params {
        weights: Some(vec![0, 0, 1, 1, 2]),
        ..d(5)
    };
    scenario(SchemeKind::RaidH, p, 512, 16);
}

/// With 512-byte aligned member I/O (`O_DIRECT`) and 4 KiB chunks, unaligned requests become
/// aligned member reads and read-merge-writes, on every kind of code.
#[test]
fn aligned_io() {
    scenario_aligned(SchemeKind::Raid0, d(3), 4096, 512, 21);
    scenario_aligned(SchemeKind::Raid10, d(4), 4096, 512, 22);
    scenario_aligned(SchemeKind::Raid5, d(4), 4096, 512, 23);
    scenario_aligned(SchemeKind::Raid6, d(5), 4096, 512, 24);
    scenario_aligned(SchemeKind::Rm2, d(8), 4096, 512, 25);
    let p = Params {
        width: Some(3),
        ..d(5)
    };
    scenario_aligned(SchemeKind::RaidPlus, p, 4096, 4096, 26);
}

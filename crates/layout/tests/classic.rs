//! Classic levels against Linux MD: the layouts MD documents and computes, written here
//! independently of the crate (as MD's raid5_compute_sector maps a logical chunk), and the
//! well-known pictures for small arrays.

use std::sync::Arc;

use layout::{build, check, recovery_plan, Layout, Loc, Params, Role, Scheme, SchemeKind};

fn scheme(kind: SchemeKind, disks: usize) -> Arc<dyn Scheme> {
    build(
        kind,
        &Params {
            disks: Some(disks),
            ..Params::default()
        },
    )
    .unwrap()
}

/// MD's ALGORITHM_LEFT_SYMMETRIC for RAID5, logical chunk -> (disk, stripe) and parity disk.
fn md_raid5_ls(n: u64, chunk: u64) -> (u64, u64, u64) {
    let data_disks = n - 1;
    let stripe = chunk / data_disks;
    let dd = chunk % data_disks;
    let pd = data_disks - stripe % n;
    ((pd + 1 + dd) % n, stripe, pd)
}

/// MD's ALGORITHM_LEFT_SYMMETRIC for RAID6: (disk, stripe, P disk, Q disk).
fn md_raid6_ls(n: u64, chunk: u64) -> (u64, u64, u64, u64) {
    let data_disks = n - 2;
    let stripe = chunk / data_disks;
    let dd = chunk % data_disks;
    let pd = n - 1 - stripe % n;
    let qd = (pd + 1) % n;
    ((pd + 2 + dd) % n, stripe, pd, qd)
}

#[test]
fn raid5_left_symmetric_matches_md_for_4_to_8_disks() {
    for n in 4..=8u64 {
        let l = Layout::new(scheme(SchemeKind::Raid5, n as usize), 65536).unwrap();
        // Three full cycles, so the repetition is checked too.
        for chunk in 0..3 * n * (n - 1) {
            let (disk, stripe, pd) = md_raid5_ls(n, chunk);
            let got = l.locate(chunk);
            assert_eq!(
                got.loc,
                Loc {
                    disk: disk as u32,
                    offset: stripe
                },
                "n={n} chunk={chunk}"
            );
            let units = l.stripe_units(got.cycle, got.stripe);
            let p: Vec<_> = units.iter().filter(|u| u.role == Role::P).collect();
            assert_eq!(p.len(), 1);
            assert_eq!(
                (p[0].disk as u64, p[0].offset),
                (pd, stripe),
                "n={n} chunk={chunk}"
            );
        }
    }
}

#[test]
fn raid6_left_symmetric_matches_md_for_4_to_8_disks() {
    for n in 4..=8u64 {
        let l = Layout::new(scheme(SchemeKind::Raid6, n as usize), 65536).unwrap();
        for chunk in 0..3 * n * (n - 2) {
            let (disk, stripe, pd, qd) = md_raid6_ls(n, chunk);
            let got = l.locate(chunk);
            assert_eq!(got.loc.disk as u64, disk, "n={n} chunk={chunk}");
            assert_eq!(got.loc.offset, stripe, "n={n} chunk={chunk}");
            let units = l.stripe_units(got.cycle, got.stripe);
            let find = |r: Role| units.iter().find(|u| u.role == r).unwrap().disk as u64;
            assert_eq!(
                (find(Role::P), find(Role::Q)),
                (pd, qd),
                "n={n} chunk={chunk}"
            );
            // Data units are listed in MD's syndrome order: data index i is the i-th unit, so the
            // codec's Q coefficient g^i matches MD's.
            let data: Vec<u64> = units
                .iter()
                .filter(|u| u.role == Role::Data)
                .map(|u| u.disk as u64)
                .collect();
            let expect: Vec<u64> = (0..n - 2).map(|i| (qd + 1 + i) % n).collect();
            assert_eq!(data, expect);
        }
    }
}

/// The picture every RAID5 text shows for MD's default layout on 4 disks (left-symmetric):
/// chunk numbers per disk and row, P for parity.
#[test]
fn raid5_4_disk_picture() {
    let picture = [
        ["0", "1", "2", "P"],
        ["4", "5", "P", "3"],
        ["8", "P", "6", "7"],
        ["P", "9", "10", "11"],
    ];
    let s = scheme(SchemeKind::Raid5, 4);
    let l = Layout::new(s.clone(), 4096).unwrap();
    for (row, cells) in picture.iter().enumerate() {
        for (disk, cell) in cells.iter().enumerate() {
            if *cell == "P" {
                let st = &s.cycle().stripes[row];
                let p = st.units.iter().find(|u| u.role == Role::P).unwrap();
                assert_eq!((p.disk as usize, p.offset as usize), (disk, row));
            } else {
                let chunk: u64 = cell.parse().unwrap();
                let got = l.locate(chunk).loc;
                assert_eq!(
                    (got.disk as usize, got.offset as usize),
                    (disk, row),
                    "chunk {chunk}"
                );
            }
        }
    }
}

/// RAID6 left-symmetric on 5 disks: Q follows P, data follows Q.
#[test]
fn raid6_5_disk_picture() {
    let picture = [
        ["Q", "0", "1", "2", "P"],
        ["3", "4", "5", "P", "Q"],
        ["7", "8", "P", "Q", "6"],
        ["11", "P", "Q", "9", "10"],
        ["P", "Q", "12", "13", "14"],
    ];
    let s = scheme(SchemeKind::Raid6, 5);
    let l = Layout::new(s.clone(), 4096).unwrap();
    for (row, cells) in picture.iter().enumerate() {
        for (disk, cell) in cells.iter().enumerate() {
            match *cell {
                "P" | "Q" => {
                    let role = if *cell == "P" { Role::P } else { Role::Q };
                    let u = s.cycle().stripes[row]
                        .units
                        .iter()
                        .find(|u| u.role == role)
                        .copied()
                        .unwrap();
                    assert_eq!((u.disk as usize, u.offset as usize), (disk, row));
                }
                c => {
                    let got = l.locate(c.parse().unwrap()).loc;
                    assert_eq!(
                        (got.disk as usize, got.offset as usize),
                        (disk, row),
                        "chunk {c}"
                    );
                }
            }
        }
    }
}

/// MD's RAID10 "near 2" on 3 disks: copies of consecutive chunks fill the disks row by row.
#[test]
fn raid10_near2_on_odd_disks() {
    let s = scheme(SchemeKind::Raid10, 3);
    let copies = |stripe: usize| -> Vec<(u32, u64)> {
        s.cycle().stripes[stripe]
            .units
            .iter()
            .map(|u| (u.disk, u.offset))
            .collect()
    };
    assert_eq!(copies(0), vec![(0, 0), (1, 0)]);
    assert_eq!(copies(1), vec![(2, 0), (0, 1)]);
    assert_eq!(copies(2), vec![(1, 1), (2, 1)]);
}

#[test]
fn raid6_recovers_every_pair_and_raid5_every_single() {
    for n in 4..=12 {
        let s = scheme(SchemeKind::Raid6, n);
        for a in 0..n as u32 {
            for b in 0..n as u32 {
                if a != b {
                    let plan = recovery_plan(&*s, &[a, b]).unwrap();
                    // Every unit of the two disks is repaired, each from n-2 sources.
                    assert_eq!(plan.repairs.len(), 2 * n);
                    assert!(plan.repairs.iter().all(|r| r.sources.len() == n - 2));
                }
            }
        }
        let s5 = scheme(SchemeKind::Raid5, n);
        for a in 0..n as u32 {
            let plan = recovery_plan(&*s5, &[a]).unwrap();
            assert_eq!(plan.repairs.len(), n);
            assert!(recovery_plan(&*s5, &[a, (a + 1) % n as u32]).is_err());
        }
    }
}

#[test]
fn raid1_and_raid10_mirrors_rebuild_from_a_copy() {
    let s = scheme(SchemeKind::Raid10, 6);
    let plan = recovery_plan(&*s, &[2]).unwrap();
    assert_eq!(plan.repairs.len(), 1);
    assert_eq!(plan.repairs[0].sources.len(), 1);
    // Disk 2's partner in near-2 on 6 disks is disk 3.
    assert_eq!(
        plan.repairs[0].sources[0],
        layout::Source::Disk(Loc { disk: 3, offset: 0 })
    );
    // Losing both copies of a pair loses data; losing one of each pair does not.
    assert!(recovery_plan(&*s, &[2, 3]).is_err());
    let s1 = scheme(SchemeKind::Raid1, 3);
    assert_eq!(s1.tolerance(), 2);
    assert!(recovery_plan(&*s1, &[0, 2]).is_ok());
}

#[test]
fn spares_receive_the_rebuild() {
    let p = Params {
        disks: Some(6),
        spares: 1,
        ..Params::default()
    };
    let s = build(SchemeKind::Raid5, &p).unwrap();
    assert_eq!(s.spare_disks(), vec![5]);
    let r = check(&*s, &[1], 30).unwrap();
    assert_eq!(r.rebuild_writes_per_disk, vec![0, 0, 0, 0, 0, 5]);
    assert_eq!(r.rebuild_reads_per_disk, vec![5, 0, 5, 5, 5, 0]);
    assert_eq!(r.rebuild_read_cov, 0.0);
    assert!(r.stripes_on_distinct_disks);
}

#[test]
fn raid50_rebuild_is_confined_to_one_group() {
    let p = Params {
        disks: Some(59),
        width: Some(7),
        spares: 3,
        ..Params::default()
    };
    for kind in [SchemeKind::Raid50, SchemeKind::Raid5c] {
        let s = build(kind, &p).unwrap();
        let r = check(&*s, &[], 59 * 58).unwrap();
        // Disk 0 is in group 0 (disks 0..7): only its 6 partners read.
        assert_eq!(r.disks_read, 6);
        for d in 7..59 {
            assert_eq!(r.rebuild_reads_per_disk[d], 0);
        }
        assert_eq!(r.disks_written, 1);
        assert!(r.rebuild_read_cov > 2.0, "cov {}", r.rebuild_read_cov);
    }
}

#[test]
fn raid60_is_raid0_over_md_raid6_groups() {
    // One group of k disks is exactly MD's RAID6 over them (left-symmetric, same stripes, same
    // syndrome order, same logical order).
    for k in 4..=8 {
        let one = build(
            SchemeKind::Raid60,
            &Params {
                disks: Some(k),
                width: Some(k),
                ..Params::default()
            },
        )
        .unwrap();
        let r6 = scheme(SchemeKind::Raid6, k);
        assert_eq!(one.cycle().stripes, r6.cycle().stripes, "k={k}");
        assert_eq!(one.cycle().data, r6.cycle().data, "k={k}");
    }
    // Several groups: stripe i of the cycle is row i / g of group i % g, the groups' disks
    // shifted, and a rebuild of disk 0 reads only its group's k - 1 partners.
    let (k, g) = (6usize, 3usize);
    let s = build(
        SchemeKind::Raid60,
        &Params {
            disks: Some(k * g + 1),
            width: Some(k),
            spares: 1,
            ..Params::default()
        },
    )
    .unwrap();
    assert_eq!(s.tolerance(), 2);
    let r6 = scheme(SchemeKind::Raid6, k);
    for (i, st) in s.cycle().stripes.iter().enumerate() {
        let (row, grp) = (i / g, i % g);
        let want = &r6.cycle().stripes[row];
        assert_eq!(st.code, want.code);
        assert_eq!(st.units.len(), want.units.len());
        for (u, w) in st.units.iter().zip(&want.units) {
            assert_eq!(u.disk as usize, w.disk as usize + grp * k, "stripe {i}");
            assert_eq!((u.offset, u.role), (w.offset, w.role), "stripe {i}");
        }
    }
    let r = check(&*s, &[], 60).unwrap();
    assert_eq!(r.disks_read, k - 1);
    for d in k..k * g {
        assert_eq!(r.rebuild_reads_per_disk[d], 0);
    }
}

#[test]
fn invalid_classic_parameters_are_rejected_with_the_constraint() {
    let bad = [
        (
            SchemeKind::Raid5,
            Params {
                disks: Some(2),
                ..Params::default()
            },
            "at least 3",
        ),
        (
            SchemeKind::Raid6,
            Params {
                disks: Some(3),
                ..Params::default()
            },
            "at least 4",
        ),
        (SchemeKind::Raid5, Params::default(), "number of disks"),
        (
            SchemeKind::Raid0,
            Params {
                disks: Some(3),
                spares: 1,
                ..Params::default()
            },
            "spares",
        ),
        (
            SchemeKind::Raid50,
            Params {
                disks: Some(10),
                width: Some(4),
                ..Params::default()
            },
            "groups of 4",
        ),
        (
            SchemeKind::Raid60,
            Params {
                disks: Some(9),
                width: Some(3),
                ..Params::default()
            },
            "RAID6 group needs at least 4",
        ),
    ];
    for (kind, p, needle) in bad {
        let e = build(kind, &p).unwrap_err().to_string();
        assert!(e.contains(needle), "{kind:?}: '{e}' lacks '{needle}'");
    }
    let s = scheme(SchemeKind::Raid5, 5);
    assert!(recovery_plan(&*s, &[7])
        .unwrap_err()
        .to_string()
        .contains("does not exist"));
    assert!(recovery_plan(&*s, &[1, 1])
        .unwrap_err()
        .to_string()
        .contains("twice"));
    assert!(recovery_plan(&*s, &[1, 2])
        .unwrap_err()
        .to_string()
        .contains("tolerates at most 1"));
}

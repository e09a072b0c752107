//! RM2 (seed 002): construction validity, every two-disk failure recoverable, FPG_min.

use std::collections::{HashMap, HashSet};

use layout::{check, recovery_plan, Disk, LayoutError, Loc, Params, Rm2, Role, Scheme};

fn rm2(disks: usize, width: Option<usize>) -> Rm2 {
    Rm2::new(&Params {
        disks: Some(disks),
        width,
        ..Params::default()
    })
    .unwrap()
}

/// Every (N, M) the construction supports for N in 4..=16.
fn shapes() -> Vec<(usize, usize)> {
    (4..=16)
        .flat_map(|n| Rm2::supported_m(n).into_iter().map(move |m| (n, m)))
        .collect()
}

/// The largest supported M per N (the default), as found by the offline search documented in
/// rm2.rs: (N-1)/2 for odd N >= 7, floor(N/4)+1 for even N.
#[test]
fn default_stripe_group_sizes() {
    let expect = [
        (4, 2),
        (5, 2),
        (6, 2),
        (7, 3),
        (8, 3),
        (9, 4),
        (10, 3),
        (11, 5),
        (12, 4),
        (13, 6),
        (14, 4),
        (15, 7),
        (16, 5),
    ];
    for (n, m) in expect {
        assert_eq!(rm2(n, None).stripe_group(), m, "N = {n}");
        assert_eq!(*Rm2::supported_m(n).last().unwrap(), m);
    }
    // Every M from 2 up to the default is supported for these N.
    for n in 4..=16 {
        let s = Rm2::supported_m(n);
        assert_eq!(s, (2..=*s.last().unwrap()).collect::<Vec<_>>(), "N = {n}");
    }
    // Larger arrays use the nested family, valid at least while 4(M-1) <= N.
    for n in 17..=32 {
        let s = Rm2::supported_m(n);
        assert!(s.contains(&(n / 4 + 1)), "N = {n}: {s:?}");
    }
}

/// The seed's experiment (Figure 7: RM2 on four disks, same LUN size as a three-disk RAID5),
/// Figure 2's N = 8, M = 3 foreground set, and Figure 1's example parity group.
#[test]
fn seed_configurations() {
    let s = rm2(4, Some(2));
    assert_eq!(s.cycle().rows, 2);
    assert_eq!(s.cycle().data_chunks(), 4); // half the space, like 2 of a 3-disk RAID5's 3
    let s = rm2(8, Some(3));
    assert_eq!(s.offsets(), &[(1, 4), (2, 3)]);
    assert_eq!(s.fpg_min(), vec![0, 2, 4, 6], "Figure 2: P0, P2, P4, P6");
    // Figure 1's example: P_5 covers D_{2,5}, D_{4,5}, D_{5,6} and D_{5,0}.
    let mut pairs: Vec<(usize, usize)> = s.cycle().stripes[5]
        .data_units()
        .map(|u| {
            let (a, b) = s.groups_of(u.disk as usize, u.offset as usize);
            (a.min(b), a.max(b))
        })
        .collect();
    pairs.sort();
    assert_eq!(pairs, vec![(0, 5), (2, 5), (4, 5), (5, 6)]);
}

/// Each data unit in exactly two groups, each group on distinct disks with 2(M-1) data units and
/// one parity, one parity and M-1 data units per disk, redundancy matrix as the seed describes.
#[test]
fn construction_is_valid_for_every_supported_shape() {
    for (n, m) in shapes() {
        let s = rm2(n, Some(m));
        let c = s.cycle();
        c.assert_well_formed();
        assert_eq!(c.stripes.len(), n);
        assert_eq!(c.rows, m as u64);
        let mut in_groups: HashMap<Loc, usize> = HashMap::new();
        for (g, st) in c.stripes.iter().enumerate() {
            let disks: HashSet<Disk> = st.units.iter().map(|u| u.disk).collect();
            assert_eq!(disks.len(), st.units.len(), "N={n} M={m} group {g}");
            assert_eq!(st.units.len(), 2 * m - 1);
            let p = st.units.last().unwrap();
            assert_eq!(
                (p.role, p.disk, p.offset),
                (Role::P, g as Disk, m as u64 - 1)
            );
            for u in st.data_units() {
                *in_groups.entry(u.loc()).or_insert(0) += 1;
            }
        }
        assert_eq!(in_groups.len(), n * (m - 1));
        assert!(in_groups.values().all(|&c| c == 2), "N={n} M={m}");
        // Logical data order is row-major over the data rows.
        for (i, l) in c.data.iter().enumerate() {
            assert_eq!((l.offset as usize, l.disk as usize), (i / n, i % n));
        }
        let rep = check(&s, &[], 4).unwrap();
        assert!(rep.parity_units_per_disk.iter().all(|&p| p == 1));
        assert!(rep.data_units_per_disk.iter().all(|&d| d == m as u64 - 1));
        // Redundancy matrix: per column one -1 and each k = 1..M-1 exactly twice.
        let rm = s.redundancy_matrix();
        for j in 0..n {
            let col: Vec<i32> = rm.iter().map(|row| row[j]).collect();
            assert_eq!(col.iter().filter(|&&x| x == -1).count(), 1);
            for k in 1..m as i32 {
                assert_eq!(col.iter().filter(|&&x| x == k).count(), 2);
            }
        }
    }
}

/// Every pair of failed disks is rebuilt by the crate's generic peeling recovery, for every
/// supported (N, M) with N in 4..=16; so is every single failure.
#[test]
fn every_two_disk_failure_is_recoverable() {
    let mut plans = 0;
    for (n, m) in shapes() {
        let s = rm2(n, Some(m));
        for x in 0..n as Disk {
            let p = recovery_plan(&s, &[x]).unwrap();
            assert_eq!(p.repairs.len(), m);
            for y in x + 1..n as Disk {
                let p = recovery_plan(&s, &[x, y])
                    .unwrap_or_else(|e| panic!("N={n} M={m} failed {x},{y}: {e}"));
                assert_eq!(p.repairs.len(), 2 * m, "every lost unit repaired once");
                plans += 1;
            }
        }
        assert!(matches!(
            recovery_plan(&s, &[0, 1, 2]),
            Err(LayoutError::TooManyFailures { .. })
        ));
    }
    assert!(plans > 2000);
}

/// Spares: rebuilt units go to the spare disks.
#[test]
fn spares_receive_the_rebuild() {
    let s = Rm2::new(&Params {
        disks: Some(10),
        spares: 2,
        width: Some(3),
        ..Params::default()
    })
    .unwrap();
    assert_eq!(s.disks(), 8);
    assert_eq!(s.spare_disks(), vec![8, 9]);
    let p = recovery_plan(&s, &[1, 5]).unwrap();
    assert!(p.repairs.iter().all(|r| r.target.disk >= 8));
}

fn covers(s: &Rm2, set: &[usize]) -> bool {
    (0..s.disks()).all(|j| {
        (0..s.stripe_group() - 1).all(|k| {
            let (a, b) = s.groups_of(j, k);
            set.contains(&a) || set.contains(&b)
        })
    })
}

/// The seed's claim: |FPG_min| = N/2 for even N and ceil(N/2) + M - 2 for odd N. Checked for
/// every supported (N, M), N in 4..=16, with minimality verified by brute force for N <= 12.
#[test]
fn fpg_min_matches_the_seed_formula() {
    println!("  N  M  |FPG_min|  formula  FPG_min");
    for (n, m) in shapes() {
        let s = rm2(n, Some(m));
        let f = s.fpg_min();
        let formula = if n % 2 == 0 {
            n / 2
        } else {
            n.div_ceil(2) + m - 2
        };
        println!("{n:>3} {m:>2}  {:>8}  {formula:>7}  {f:?}", f.len());
        assert!(covers(&s, &f));
        assert_eq!(f.len(), formula, "N={n} M={m}");
        if n % 2 == 0 {
            assert_eq!(f, (0..n).step_by(2).collect::<Vec<_>>());
        }
        if n <= 12 {
            let smallest = (0u32..1 << n)
                .filter(|mask| {
                    let set: Vec<usize> = (0..n).filter(|g| mask >> g & 1 == 1).collect();
                    covers(&s, &set)
                })
                .map(|mask| mask.count_ones() as usize)
                .min()
                .unwrap();
            assert_eq!(smallest, f.len(), "N={n} M={m}");
        }
    }
}

#[test]
fn unsupported_shapes_are_rejected() {
    let e = Rm2::new(&Params {
        disks: Some(8),
        width: Some(4),
        ..Params::default()
    })
    .unwrap_err();
    match e {
        LayoutError::InvalidParam { param, reason } => {
            assert_eq!(param, "width");
            assert!(reason.contains("supported M: 2, 3"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    for disks in [3, 33] {
        assert!(matches!(
            Rm2::new(&Params {
                disks: Some(disks),
                ..Params::default()
            }),
            Err(LayoutError::InvalidParam { param: "disks", .. })
        ));
    }
    assert!(Rm2::new(&Params::default()).is_err());
    assert!(Rm2::with_shape(8, 1, 0).is_err());
}

#[test]
fn extra_json_reports_offsets_and_fpg() {
    let s = rm2(8, Some(3));
    assert_eq!(
        s.extra_json().unwrap(),
        "\"stripe_group\": 3, \"offsets\": [[1, 4], [2, 3]], \"fpg_min\": [0, 2, 4, 6]"
    );
    assert_eq!(s.tolerance(), 2);
}

/// Beyond the seed's sizes: N = 17..=32. Every pair recoverable at the default (largest) M, and
/// FPG_min equal to the seed's formula for every supported M.
#[test]
fn larger_arrays() {
    println!("  N  M  |FPG_min|  formula");
    for n in 17..=32usize {
        let s = rm2(n, None);
        for x in 0..n as Disk {
            for y in x + 1..n as Disk {
                recovery_plan(&s, &[x, y]).unwrap();
            }
        }
        for m in Rm2::supported_m(n) {
            let s = rm2(n, Some(m));
            let f = s.fpg_min();
            assert!(covers(&s, &f));
            let formula = if n % 2 == 0 {
                n / 2
            } else {
                n.div_ceil(2) + m - 2
            };
            println!("{n:>3} {m:>2}  {:>8}  {formula:>7}", f.len());
            assert_eq!(f.len(), formula, "N={n} M={m}");
        }
    }
}

//! Every Linux MD layout of `layout::md` against MD's own formulas, written here from
//! drivers/md (Linux 6.1) independently of the layout crate:
//!
//! - RAID4/5/6: `raid5_compute_sector` (which member holds logical chunk `k`, in which row, and
//!   where P and Q are) and RAID6's syndrome order (`raid6_d0`, `raid6_next_disk`,
//!   `raid6_idx_to_slot`: the order of the data members in Q's sum);
//! - RAID10: `__raid10_find_phys` (every copy of chunk `k`: member and row) with `setup_geo`'s
//!   far-set size and `calc_sectors`'s stride, and `raid10_size`;
//! - RAID0 over equal members and RAID1.
//!
//! For each configuration every logical chunk of arrays of several sizes (partial cycles, far
//! sections of every length) is mapped both ways and compared, member row included, and no two
//! units may share a place.

use std::collections::HashSet;

use layout::md::{MdGeometry, MdLayout, Parity, Raid10};
use layout::{Cycle, Role};

/// drivers/md/raid5.c `raid5_compute_sector` at chunk granularity: (row, data member, pd, qd).
fn kernel_raid5(
    level: u8,
    algorithm: u32,
    raid_disks: usize,
    chunk: u64,
) -> (u64, usize, usize, Option<usize>) {
    let max_degraded = if level == 6 { 2 } else { 1 };
    let data_disks = raid_disks - max_degraded;
    let stripe = chunk / data_disks as u64;
    let mut dd = (chunk % data_disks as u64) as usize;
    let s2 = stripe;
    let rd = raid_disks as u64;
    let (pd, qd): (usize, Option<usize>);
    match level {
        4 => {
            pd = data_disks;
            qd = None;
        }
        5 => {
            match algorithm {
                0 => {
                    pd = data_disks - (s2 % rd) as usize;
                    if dd >= pd {
                        dd += 1;
                    }
                }
                1 => {
                    pd = (s2 % rd) as usize;
                    if dd >= pd {
                        dd += 1;
                    }
                }
                2 => {
                    pd = data_disks - (s2 % rd) as usize;
                    dd = (pd + 1 + dd) % raid_disks;
                }
                3 => {
                    pd = (s2 % rd) as usize;
                    dd = (pd + 1 + dd) % raid_disks;
                }
                4 => {
                    pd = 0;
                    dd += 1;
                }
                5 => pd = data_disks,
                _ => unreachable!(),
            }
            qd = None;
        }
        6 => {
            let mut q;
            let p;
            match algorithm {
                0 | 1 => {
                    p = if algorithm == 0 {
                        raid_disks - 1 - (s2 % rd) as usize
                    } else {
                        (s2 % rd) as usize
                    };
                    q = p + 1;
                    if p == raid_disks - 1 {
                        dd += 1;
                        q = 0;
                    } else if dd >= p {
                        dd += 2;
                    }
                }
                2 | 3 => {
                    p = if algorithm == 2 {
                        raid_disks - 1 - (s2 % rd) as usize
                    } else {
                        (s2 % rd) as usize
                    };
                    q = (p + 1) % raid_disks;
                    dd = (p + 2 + dd) % raid_disks;
                }
                4 => {
                    p = 0;
                    q = 1;
                    dd += 2;
                }
                5 => {
                    p = data_disks;
                    q = data_disks + 1;
                }
                16 | 17 => {
                    let m = rd - 1;
                    p = if algorithm == 16 {
                        data_disks - (s2 % m) as usize
                    } else {
                        (s2 % m) as usize
                    };
                    if dd >= p {
                        dd += 1;
                    }
                    q = raid_disks - 1;
                }
                18 | 19 => {
                    let m = rd - 1;
                    p = if algorithm == 18 {
                        data_disks - (s2 % m) as usize
                    } else {
                        (s2 % m) as usize
                    };
                    dd = (p + 1 + dd) % (raid_disks - 1);
                    q = raid_disks - 1;
                }
                20 => {
                    p = 0;
                    dd += 1;
                    q = raid_disks - 1;
                }
                _ => unreachable!(),
            }
            pd = p;
            qd = Some(q);
        }
        _ => unreachable!(),
    }
    (stripe, dd, pd, qd)
}

/// RAID6's syndrome order (non-DDF): from `raid6_d0` (just after Q; 0 when Q is last) through
/// `raid6_next_disk`, P and Q taking no slot.
fn kernel_syndrome(pd: usize, qd: usize, n: usize) -> Vec<usize> {
    let d0 = if qd == n - 1 { 0 } else { qd + 1 };
    let mut v = Vec::new();
    let mut i = d0;
    loop {
        if i != pd && i != qd {
            v.push(i);
        }
        i += 1;
        if i == n {
            i = 0;
        }
        if i == d0 {
            break;
        }
    }
    v
}

/// drivers/md/raid10.c `calc_sectors` in chunks: (used chunks per member, stride in chunks).
fn kernel_calc_sectors(layout: u32, n: u64, dev_chunks: u64) -> (u64, u64) {
    let (nc, fc, fo) = (
        (layout & 255) as u64,
        ((layout >> 8) & 255) as u64,
        layout & (1 << 16) != 0,
    );
    let mut size = dev_chunks;
    size /= fc;
    size *= n;
    size /= nc;
    size *= nc * fc;
    let size = size.div_ceil(n);
    let stride = if fo { 1 } else { size / fc };
    (size, stride)
}

/// drivers/md/raid10.c `__raid10_find_phys` in chunks: every (member, row) of logical chunk `k`.
fn kernel_raid10(layout: u32, n: usize, stride: u64, k: u64) -> Vec<(usize, u64)> {
    let nc = (layout & 255) as usize;
    let fc = ((layout >> 8) & 255) as usize;
    let fo = layout & (1 << 16) != 0;
    let far_set_size = match layout >> 17 {
        0 => n,
        1 => n / fc,
        2 => fc * nc,
        _ => unreachable!(),
    };
    let last_far_set_start = (n / far_set_size - 1) * far_set_size;
    let last_far_set_size = far_set_size + n % far_set_size;
    let chunk = k * nc as u64;
    let mut stripe = chunk / n as u64;
    let mut dev = (chunk % n as u64) as usize;
    if fo {
        stripe *= fc as u64;
    }
    let mut sector = stripe;
    let mut out = Vec::new();
    for _ in 0..nc {
        let mut d = dev;
        let mut s = sector;
        out.push((d, s));
        for _ in 1..fc {
            let set = d / far_set_size;
            d += nc;
            if n % far_set_size != 0 && d > last_far_set_start {
                d -= last_far_set_start;
                d %= last_far_set_size;
                d += last_far_set_start;
            } else {
                d %= far_set_size;
                d += far_set_size * set;
            }
            s += stride;
            out.push((d, s));
        }
        dev += 1;
        if dev >= n {
            dev = 0;
            sector += 1;
        }
    }
    out
}

/// The layout crate's answer for logical chunk `k`: every unit of its stripe as (member,
/// physical row, role), data units in stripe order (syndrome order), then P, Q / copies.
fn ours(geo: &MdGeometry, cycle: &Cycle, k: u64) -> (usize, u64, Vec<(usize, u64, Role)>) {
    let (d, r, units, _) = ours_in(geo, cycle, k);
    (d, r, units)
}

/// [`ours`] and the stripe's identity (cycle, index).
fn ours_in(
    geo: &MdGeometry,
    cycle: &Cycle,
    k: u64,
) -> (usize, u64, Vec<(usize, u64, Role)>, (u64, usize)) {
    let per = cycle.data.len() as u64;
    let (c, idx) = (k / per, (k % per) as usize);
    let loc = cycle.data[idx];
    let si = cycle
        .stripes
        .iter()
        .position(|s| {
            s.units
                .iter()
                .any(|u| u.loc() == loc && u.role == Role::Data)
        })
        .expect("the data unit is in a stripe");
    let stripe = &cycle.stripes[si];
    let phys = |off: u64| {
        geo.physical_row(c * cycle.rows + off, cycle.rows)
            .unwrap_or_else(|| panic!("{geo:?}: chunk {k} maps past the used rows"))
    };
    let units = stripe
        .units
        .iter()
        .map(|u| (u.disk as usize, phys(u.offset), u.role))
        .collect();
    (loc.disk as usize, phys(loc.offset), units, (c, si))
}

/// Every place an array of `dev_chunks` chunks per member uses, each once.
fn check_injective(geo: &MdGeometry, cycle: &Cycle, chunks: u64) {
    let mut seen = HashSet::new();
    let mut stripes = HashSet::new();
    for k in 0..chunks {
        let (_, _, units, id) = ours_in(geo, cycle, k);
        if !stripes.insert(id) {
            continue;
        }
        for (d, r, _) in units {
            assert!(r < geo.used_rows(), "{geo:?}: row {r} past the used rows");
            assert!(
                seen.insert((d, r)),
                "{geo:?}: member {d} row {r} holds two units (chunk {k})"
            );
        }
    }
}

#[test]
fn raid4_5_6_match_raid5_compute_sector() {
    let mut configs = 0;
    for level in [4u8, 5, 6] {
        let algorithms: Vec<u32> = match level {
            4 => vec![0],
            5 => vec![0, 1, 2, 3, 4, 5],
            _ => vec![0, 1, 2, 3, 4, 5, 16, 17, 18, 19, 20],
        };
        for alg in algorithms {
            let min = if level == 6 { 4 } else { 3 };
            for n in min..=10 {
                let layout = MdLayout::from_md(i32::from(level), alg, n).unwrap();
                assert_eq!(layout.md_value(), if level == 4 { 0 } else { alg });
                let cycle = layout.cycle(n, 0);
                for dev_chunks in [1u64, 2, 7, 23, 40] {
                    let geo = MdGeometry {
                        layout,
                        raid_disks: n,
                        chunk_sectors: 8,
                        dev_sectors: dev_chunks * 8 + 3,
                    };
                    let data_disks = n - if level == 6 { 2 } else { 1 };
                    assert_eq!(geo.array_sectors(), dev_chunks * data_disks as u64 * 8);
                    let chunks = geo.array_sectors() / 8;
                    for k in 0..chunks {
                        let (row, dd, pd, qd) = kernel_raid5(level, alg, n, k);
                        let (d, r, units) = ours(&geo, &cycle, k);
                        assert_eq!((d, r), (dd, row), "level {level} alg {alg} n {n} chunk {k}");
                        let p = units.iter().find(|u| u.2 == Role::P).unwrap();
                        assert_eq!(
                            (p.0, p.1),
                            (pd, row),
                            "P: level {level} alg {alg} n {n} chunk {k}"
                        );
                        let q = units.iter().find(|u| u.2 == Role::Q).map(|u| u.0);
                        assert_eq!(q, qd, "Q: level {level} alg {alg} n {n} chunk {k}");
                        if let Some(qd) = qd {
                            let order: Vec<usize> = units
                                .iter()
                                .filter(|u| u.2 == Role::Data)
                                .map(|u| u.0)
                                .collect();
                            assert_eq!(
                                order,
                                kernel_syndrome(pd, qd, n),
                                "syndrome order: alg {alg} n {n} row {row}"
                            );
                        }
                    }
                    check_injective(&geo, &cycle, chunks);
                    configs += 1;
                }
            }
        }
    }
    assert!(configs > 500, "{configs}");
}

#[test]
fn raid10_matches_raid10_find_phys() {
    let mut configs = 0;
    for n in 2..=9usize {
        for near in 1..=4usize {
            for far in 1..=4usize {
                for offset in [false, true] {
                    for version in [0u8] {
                        // What mdadm creates: nN, fN, oN (the rest is refused, below).
                        if near * far < 2 || near * far > n || (offset && far == 1) {
                            continue;
                        }
                        if near > 1 && far > 1 {
                            continue;
                        }
                        let word = Raid10 {
                            near,
                            far,
                            offset,
                            version,
                        }
                        .md_value();
                        let layout = MdLayout::from_md(10, word, n).unwrap();
                        let MdLayout::Raid10(r) = layout else {
                            unreachable!()
                        };
                        assert_eq!(Raid10::parse(&r.name(), n).unwrap(), r, "{}", r.name());
                        let cycle = layout.cycle(n, 0);
                        for dev_chunks in [far as u64, 5, 12, 31, 64] {
                            if dev_chunks < far as u64 {
                                continue;
                            }
                            let geo = MdGeometry {
                                layout,
                                raid_disks: n,
                                chunk_sectors: 16,
                                dev_sectors: dev_chunks * 16,
                            };
                            let (used, stride) = kernel_calc_sectors(word, n as u64, dev_chunks);
                            assert_eq!(
                                geo.used_rows(),
                                used,
                                "n {n} layout {word:#x} chunks {dev_chunks}"
                            );
                            let size = dev_chunks / far as u64 * n as u64 / near as u64;
                            assert_eq!(geo.array_sectors(), size * 16);
                            for k in 0..size {
                                let want = kernel_raid10(word, n, stride, k);
                                let (_, _, units) = ours(&geo, &cycle, k);
                                let got: Vec<(usize, u64)> =
                                    units.iter().map(|u| (u.0, u.1)).collect();
                                assert_eq!(
                                    got,
                                    want,
                                    "n {n} layout {} ({word:#x}) chunks {dev_chunks}: chunk {k}",
                                    r.name()
                                );
                            }
                            check_injective(&geo, &cycle, size);
                            configs += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(configs > 300, "{configs}");
}

#[test]
fn raid0_and_raid1() {
    for n in 1..=6usize {
        let geo = MdGeometry {
            layout: MdLayout::Raid0,
            raid_disks: n,
            chunk_sectors: 128,
            dev_sectors: 10 * 128 + 100,
        };
        let cycle = MdLayout::Raid0.cycle(n, 0);
        assert_eq!(geo.array_sectors(), 10 * 128 * n as u64);
        for k in 0..10 * n as u64 {
            let (d, r, _) = ours(&geo, &cycle, k);
            assert_eq!((d as u64, r), (k % n as u64, k / n as u64));
        }
    }
    for n in 2..=4usize {
        let geo = MdGeometry {
            layout: MdLayout::Raid1,
            raid_disks: n,
            chunk_sectors: 8,
            dev_sectors: 80,
        };
        let cycle = MdLayout::Raid1.cycle(n, 0);
        assert_eq!(geo.array_sectors(), 80);
        for k in 0..10 {
            let (_, _, units) = ours(&geo, &cycle, k);
            let got: Vec<(usize, u64)> = units.iter().map(|u| (u.0, u.1)).collect();
            let want: Vec<(usize, u64)> = (0..n).map(|d| (d, k)).collect();
            assert_eq!(got, want);
        }
    }
}

#[test]
fn names_and_refusals() {
    for (p, v, name) in Parity::ALL {
        assert_eq!(Parity::parse(6, name).unwrap(), p);
        assert_eq!(Parity::from_md(6, v).unwrap(), p);
        assert_eq!(p.name(), name);
    }
    assert_eq!(Parity::parse(5, "la").unwrap(), Parity::LeftAsymmetric);
    assert!(Parity::parse(5, "left-symmetric-6").is_err());
    let e = Parity::from_md(6, 8).unwrap_err().to_string();
    assert!(e.contains("DDF"), "{e}");
    assert!(Parity::from_md(5, 16).is_err());
    assert!(Raid10::from_md(0x102 | 1 << 17, 4)
        .unwrap_err()
        .to_string()
        .contains("version 1"));
    assert!(Raid10::from_md(0x103, 2)
        .unwrap_err()
        .to_string()
        .contains("copies"));
    assert!(Raid10::parse("x2", 4).is_err());
    let e = Raid10::from_md(0x10202, 5).unwrap_err().to_string();
    assert!(e.contains("combines near and far/offset"), "{e}");
    assert!(Raid10::parse("n2f2", 4).is_err());
    assert_eq!(Raid10::parse("o3", 4).unwrap().md_value(), 0x10301);
    assert_eq!(Raid10::parse("f3", 4).unwrap().md_value(), 0x301);
    assert_eq!(Raid10::parse("n3", 4).unwrap().md_value(), 0x103);
    let e = MdLayout::from_md(7, 0, 4).unwrap_err().to_string();
    assert!(e.contains("level 7"), "{e}");
    // The scheme builder takes the same names.
    let p = layout::Params {
        disks: Some(5),
        md_layout: Some("o2".into()),
        ..Default::default()
    };
    let s = layout::build(layout::SchemeKind::Raid10, &p).unwrap();
    assert!(s.describe().contains("o2"), "{}", s.describe());
    let bad = layout::Params {
        disks: Some(5),
        md_layout: Some("f2".into()),
        ..Default::default()
    };
    let e = layout::build(layout::SchemeKind::Raid4, &bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("one layout"), "{e}");
}

/// The default layouts raidforge always had are MD's defaults: left-symmetric RAID5/6, near-2
/// RAID10, parity-last RAID4.
#[test]
fn defaults_are_mds() {
    use layout::{build, Params, SchemeKind};
    for (kind, want) in [
        (SchemeKind::Raid5, MdLayout::Raid5(Parity::LeftSymmetric)),
        (SchemeKind::Raid6, MdLayout::Raid6(Parity::LeftSymmetric)),
        (SchemeKind::Raid4, MdLayout::Raid4),
    ] {
        let p = Params {
            disks: Some(6),
            ..Default::default()
        };
        assert_eq!(*build(kind, &p).unwrap().cycle(), want.cycle(6, 0));
    }
}

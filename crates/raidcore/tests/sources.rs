//! `read_sources`: for every scheme, healthy, degraded (every single failure, and pairs where
//! tolerated), after degraded writes, with a replacement not yet rebuilt and after the
//! rebuild, each piece's sources hold every member byte any read plan of it reads (plain and
//! balanced), and when the sources read as zeros on the members present, the piece is zeros in
//! the reference model: the promise NBD block status relies on. Sparse writes leave some
//! pieces with zero sources, which must then be found (an answer of "never zeros" would pass
//! the first two checks).

mod common;

use common::{failure_sets, geometry, scheme, Harness, Rng};
use layout::{Params, SchemeKind};
use raidcore::{
    plan_read, plan_read_balanced, read_sources, MemberLoad, RebuildOrder, WritePolicy,
};

fn d(n: usize) -> Params {
    Params {
        disks: Some(n),
        ..Params::default()
    }
}

/// Checks every chunk and some unaligned ranges of `h`; returns how many pieces had all
/// their sources reading as zeros.
fn check(h: &Harness, seed: u64) -> usize {
    let geo = &h.geo;
    let cb = geo.chunk_bytes();
    let cap = geo.capacity_bytes();
    let mut rng = Rng(seed);
    let mut ranges: Vec<(u64, u64)> = (0..cap / cb).map(|k| (k * cb, cb)).collect();
    for _ in 0..20 {
        let off = rng.below(cap);
        let len = 1 + rng.below((3 * cb).min(cap - off));
        ranges.push((off, len));
    }
    ranges.push((0, cap));
    let mut zeros = 0;
    for (off, len) in ranges {
        let srcs = read_sources(geo, &h.state, off, len).unwrap();
        assert_eq!(srcs.first().unwrap().offset, off);
        assert_eq!(srcs.iter().map(|s| s.len).sum::<u64>(), len);
        for s in &srcs {
            assert!(s.len > 0 && s.offset / cb == (s.offset + s.len - 1) / cb);
            // Every member byte a read plan of the piece reads is in its sources.
            let loads: Vec<MemberLoad> = (0..geo.disks())
                .map(|_| MemberLoad {
                    queued: rng.below(4) as u32,
                    head: rng.below(geo.member_bytes_used()),
                })
                .collect();
            let plans = [
                plan_read(geo, &h.state, s.offset, s.len).unwrap(),
                plan_read_balanced(geo, &h.state, s.offset, s.len, &loads).unwrap(),
            ];
            for io in plans.iter().flatten().flat_map(|p| &p.reads) {
                let (a, b) = (io.offset_bytes, io.offset_bytes + io.data.len as u64);
                assert!(
                    s.ranges.iter().any(|r| r.member == io.member
                        && r.offset_bytes <= a
                        && b <= r.offset_bytes + r.len),
                    "read {io:?} of piece {}+{} is outside its sources {:?} (failed {:?})",
                    s.offset,
                    s.len,
                    s.ranges,
                    h.state.failed()
                );
            }
            // Sources that read as zeros on the members present mean zeros.
            let all_zero = s
                .ranges
                .iter()
                .all(|r| match &h.mem.members[r.member as usize] {
                    None => true,
                    Some(m) => m[r.offset_bytes as usize..(r.offset_bytes + r.len) as usize]
                        .iter()
                        .all(|&b| b == 0),
                });
            if all_zero {
                zeros += 1;
                let model = &h.model[s.offset as usize..(s.offset + s.len) as usize];
                assert!(
                    model.iter().all(|&b| b == 0),
                    "piece {}+{} holds data, yet its sources {:?} read as zeros (failed {:?})",
                    s.offset,
                    s.len,
                    s.ranges,
                    h.state.failed()
                );
            }
        }
    }
    zeros
}

/// A few writes into the first cycle and a few chunks of the second; the third stays empty.
fn sparse_writes(h: &mut Harness, rng: &mut Rng) {
    let cb = h.geo.chunk_bytes();
    let per_cycle = h.geo.data_per_cycle() * cb;
    for _ in 0..4 {
        let off = rng.below(per_cycle - 100);
        let len = 1 + rng.below(100);
        let data = rng.bytes(len as usize);
        h.write(off, &data);
    }
    let off = per_cycle + rng.below(per_cycle - cb + 1);
    let data = rng.bytes(cb as usize);
    h.write(off, &data);
}

fn scenario(kind: SchemeKind, p: Params, seed: u64) {
    let s = scheme(kind, p);
    let geo = geometry(s.clone(), 512, 3);
    let mut h = Harness::new(geo, WritePolicy::Md);
    let mut rng = Rng(seed);
    // A fresh array reads as zeros everywhere.
    let chunks = (h.geo.capacity_bytes() / h.geo.chunk_bytes()) as usize;
    assert!(check(&h, seed) >= chunks);
    sparse_writes(&mut h, &mut rng);
    assert!(check(&h, seed) > 0, "{kind:?}: no zeros found");
    if s.tolerance() == 0 {
        return;
    }
    for set in failure_sets(&*s, true) {
        let mut f = h.clone();
        for &m in &set {
            f.fail(m);
        }
        assert!(
            check(&f, seed) > 0,
            "{kind:?} failed {set:?}: no zeros found"
        );
        sparse_writes(&mut f, &mut rng);
        check(&f, seed);
        // Replaced (in place) and not yet rebuilt, then rebuilt.
        let mut r = f.clone();
        for &m in &set {
            r.replace(m);
        }
        check(&r, seed);
        f.rebuild(RebuildOrder::Sequential);
        assert!(
            check(&f, seed) > 0,
            "{kind:?} rebuilt {set:?}: no zeros found"
        );
    }
}

#[test]
fn raid1() {
    scenario(SchemeKind::Raid1, d(3), 1);
}

#[test]
fn raid10() {
    scenario(SchemeKind::Raid10, d(5), 2);
}

#[test]
fn raid5() {
    scenario(SchemeKind::Raid5, d(5), 3);
}

#[test]
fn raid5_with_spare() {
    scenario(SchemeKind::Raid5, Params { spares: 1, ..d(6) }, 4);
}

#[test]
fn raid6() {
    scenario(SchemeKind::Raid6, d(6), 5);
}

#[test]
fn raid0() {
    scenario(SchemeKind::Raid0, d(4), 6);
}

#[test]
fn rm2() {
    scenario(SchemeKind::Rm2, d(8), 7);
}

#[test]
fn raidplus() {
    let p = Params {
        width: Some(3),
        ..d(5)
    };
    scenario(SchemeKind::RaidPlus, p, 8);
}

#[test]
fn raidplus_level6() {
    let p = Params {
        width: Some(4),
        level: Some(6),
        ..d(7)
    };
    scenario(SchemeKind::RaidPlus, p, 9);
}

#[test]
fn s2raid5() {
    let p = Params {
        group: Some(3),
        partitions: Some(3),
        ..d(9)
    };
    scenario(SchemeKind::S2Raid5, p, 10);
}
